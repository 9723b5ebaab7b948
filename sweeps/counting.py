"""A step counted as `crossover predict` counts it, in a process of its own: `start` it, `finish` it. `crossover
decide` and `crossover report --epochs` count so every step the analysis names (analysis/decide/ `steps`) and hand it
the counts (sweeps/command.py), so that they and predict say one figure.

    config, counted = finish(start(step, ("default", "bf16")), step, time.monotonic())   # step: a crossover.step.Step
    counted["bf16"].at(64, 50_000)   # {n_params, *_per_step, peak_memory_bytes, ...} at any batch: a Counted
    python -m crossover.sweeps.count_step --workload job.py:workload --batch-size 64   # the process it starts (`command`)

The user's code (make_data, make_model, one step) and torch run in that process (sweeps/count_step.py), never in
this one. A hang stops at a time limit; a crash or a hang is one line naming the workload, what happened and the
fix (PredictError). The analysis holds no process code of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import crossover
from crossover.step import Counted, Step

# The folder holding the crossover package, a checkout or site-packages: a child process imports crossover's code
# from there, whatever folder the command runs in
ROOT = Path(crossover.__file__).resolve().parent.parent


def child_env(*folders: str) -> dict:
    """The environment of a child process that runs a user's code for a command (sweeps/count_step.py,
    sweeps/probe.py, sweeps/plan.py): crossover's own folder (ROOT) first on its path (the code that runs there is
    the code that reads its answer), then `folders` (where the user's modules import from by name), then the
    caller's PYTHONPATH."""
    path = os.pathsep.join(filter(None, [str(ROOT), *folders, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


class PredictError(ValueError):
    """Why no prediction: one line naming the workload, what happened and the fix."""


def command(step: Step, precisions: tuple[str, ...] = ()) -> list[str]:
    """The counting process's command line (sweeps/count_step.py) for `step`, at step.precision and `precisions`:
    one process counts them all, importing torch and the job once."""
    flags = [("--batch-size", step.batch_size), ("--dataset-size", step.dataset_size),
             *((f"--{a}", v) for a, v in step.axes)]
    return [sys.executable, "-m", "crossover.sweeps.count_step", "--workload", step.workload,
            *(x for p in dict.fromkeys((step.precision, *precisions)) for x in ("--precision", p)),
            *(str(x) for flag, v in flags if v is not None for x in (flag, v)),
            *(x for name, v in step.params for x in ("--param", f"{name}={v}"))]


def start(step: Step, precisions: tuple[str, ...] = ()) -> subprocess.Popen:
    """The counting process, started (`command`): it imports the user's code, so it runs apart, with this checkout
    first on its path (the code that counts is the code that predicts: child_env), then step.folders (where a
    package's module imports from)."""
    return subprocess.Popen(command(step, precisions), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(*step.folders), start_new_session=True)


def finish(process: subprocess.Popen, step: Step, started: float) -> tuple[dict, dict[str, Counted]]:
    """The configuration's columns and the step counted at each precision asked (the JSON object on the process's
    last line of output), once the process ends within step.timeout_s of `started`; else PredictError in one line."""
    where = f"--workload {step.workload}"
    alone = " ".join(command(step)[1:])
    try:
        out, err = process.communicate(timeout=max(step.timeout_s - (time.monotonic() - started), 0.1))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise PredictError(f"{where}: counting one step did not finish within {step.timeout_s:g} s and was "
                           "stopped (a make_data, make_model or step that hangs or waits for input, or a model too "
                           f"large to step here); fix the job, or give --timeout more seconds") from None
    said = [line for line in err.splitlines() if line.strip()]
    if process.returncode != 0:
        how = (f"was killed by signal {-process.returncode}" if process.returncode < 0 else
               f"exited with status {process.returncode}")
        why = said[-1].removeprefix("error: ") if said else "it printed no error"
        fix = f"fix the job (python -m {alone[3:]} runs it alone and shows the traceback)"
        if process.returncode in (1, 2):  # count_step's own: its last line says what, and where in the job
            raise PredictError(f"{where}: counting one step failed: {why}; {fix}")
        raise PredictError(f"{where}: the process counting one step {how} before it printed its counts: {why}; {fix}")
    try:
        said = json.loads(out.strip().splitlines()[-1])
        return said["config"], {p: Counted.from_json(c) for p, c in said["counted"].items()}
    except (IndexError, KeyError, TypeError, json.JSONDecodeError):
        raise PredictError(f"{where}: the process counting one step printed no counts (its last line of output: "
                           f"{(out.strip().splitlines() or ['none'])[-1][:200]!r}); a print in the job's code at exit "
                           "hides them: remove it") from None

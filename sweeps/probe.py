"""A first look at a model on this CPU, before the search's first round: what one training step costs.

    found = probe(trial, shipping=space.shipping)   # Probe(step_s=0.15, fixed_s=7.9), or None where it could not run
    found.epoch_s(trial.cfg)                        # the trial's predicted seconds an epoch on this CPU

The search (sweeps/budget.py `predict_s`) predicts a trial's time from this machine's rows of the workload, else from
the shipped reference rows. A user's model has neither before its first trial, so that trial ran
unpredicted, under the per-trial cap, and on a slow or busy 2-core machine every one of them was cut: no
row at all. The probe trains the line's first configuration cut to PROBE_BATCHES batches through the
path a single trial takes (trainables/train.py `run_trial`, so its timing is trainables/timing.py's: warm-up
excluded, median epoch), and writes no row: it is a prediction's input, not a measurement of the grid.
It runs the user's code, so it runs in a process of its own (`python -m crossover.sweeps.probe`), with a time limit
(PROBE_TIMEOUT_S, from when the child has imported crossover and torch to its answer: sweeps/plan.py wait) and its
output thrown away: the driver's process, and its Ray, are never touched by it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from crossover.config import TrialConfig
from crossover.workload import filled_in

from ..trainables.shipping import Shipping
from ..trainables.trial import Trial
from .cli import child_env
from .plan import wait

PROBE_BATCHES = 2  # batches an epoch of the probe: a step's time, not an epoch's, is what it is after
PROBE_TIMEOUT_S = 120  # s the probe's process may run the user's code: past it, the trial runs unpredicted, as unprobed


@dataclass(frozen=True)
class Probe:
    """One probe's figures: a warm step's time, and what a trial costs besides its steps."""

    step_s: float  # s: one warm training step (forward, backward, optimiser) at the trial's batch size
    fixed_s: float  # s: the probe's wall time less its steps: data and model made, the first step's own
    # start-up (thread pools, kernel caches), counting a step's costs; a trial pays each once too

    def epoch_s(self, cfg) -> float:
        """Seconds an epoch of `cfg` on this CPU: its batches at the probe's step time."""
        return self.step_s * math.ceil(cfg.dataset_size / cfg.batch_size)


def probe(trial: Trial, timeout_s: float = PROBE_TIMEOUT_S, shipping: Shipping | None = None) -> Probe | None:
    """The probe of `trial` (a CPU trial): its configuration at PROBE_BATCHES batches (fewer where the trial
    has fewer), one warm-up epoch and the fewest timed ones trainables/timing.py allows, in a child process.
    None where that configuration is refused by the workload (its `check`), fails, or outruns `timeout_s`:
    the trial then runs unpredicted, and its own row says what went wrong."""
    cfg = trial.cfg
    batch_size = filled_in(cfg.batch_size, "batch_size")
    size = min(filled_in(cfg.dataset_size, "dataset_size"), PROBE_BATCHES * batch_size)
    small = dataclasses.replace(cfg, dataset_size=size, epochs=cfg.warmup_epochs + 1, min_timed_s=0)
    # the user's modules (the sweep's `shipping`) import in the child by name, as in a Ray worker: their folders on its path
    env = child_env(*(shipping.import_paths() if shipping else ()))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "probe.json"
        process = subprocess.Popen([sys.executable, "-m", "crossover.sweeps.probe", json.dumps(small.to_dict()),
                                    str(out)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            # `timeout_s` counts the run alone: from when the child is ready (its imports done: main) to its answer
            wait(process, timeout_s, out.with_suffix(".ready").exists, out.exists)
            got = json.loads(out.read_text()) if process.returncode == 0 else None
        except (subprocess.SubprocessError, OSError, ValueError):  # killed at the limit, or wrote nothing
            got = None
        finally:
            process.kill()
            process.wait()
        if got is None:  # failed, stopped, or wrote nothing
            return None
    steps = math.ceil(size / batch_size)
    step_s = got["epoch_s_median"] / steps
    epochs = small.warmup_epochs + got["timed_epochs"]
    return Probe(step_s, max(got["wall_s"] - step_s * steps * epochs, 0.0))


def main(argv: list[str]) -> int:
    """The child: run the probe's configuration (argv[0], a TrialConfig as JSON) and write its figures to argv[1]."""
    from ..trainables.train import run_trial
    from ..trainables.trial import resolve

    Path(argv[1]).with_suffix(".ready").touch()  # crossover and torch imported: the driver's limit starts (wait)
    trial = resolve(TrialConfig.from_dict(json.loads(argv[0])))
    began = time.perf_counter()
    row = run_trial(trial)
    Path(argv[1]).write_text(json.dumps({"epoch_s_median": row["epoch_s_median"], "timed_epochs": row["timed_epochs"],
                                         "wall_s": time.perf_counter() - began}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

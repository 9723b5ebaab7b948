"""A trial's row: its config's columns, what was measured, and the environment (crossover/schema.py).

    config_row(trial)                    # the config's columns, with the seed's defaults filled in
    measured_row(trial, ...)             # a finished trial's whole row: trainables/measure.py builds every one here
    failed_row(cfg_or_trial, error)      # a failed trial's row, from whatever was resolved before it failed

Every TrialConfig field that is a schema column is copied by name; the rest are named in NOT_COLUMNS
with the column that stands for them (tests/test_rows.py checks that nothing is left out).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import sysconfig
import time
import traceback
from pathlib import Path

import crossover
from crossover.config import TrialConfig
from crossover.schema import BUILTIN_MODULE, NAMES

from . import env
from .neighbours import Window
from .registry import fingerprint
from .shipping import Shipping
from .timing import Timer, summarize
from .trial import Trial
from .workloads import WORKLOADS, describe, n_params

# TrialConfig fields that are not columns of their own, and what the row holds instead.
NOT_COLUMNS = {
    "data": "data_requested (or 'generated' for the workloads that make their own data)",
    "data_dir": "data_source, which names the directory the images were read from",
    "threads": "cpus_requested and torch_threads",
    "module": "workload_module",
    "fingerprint": "workload_fingerprint",
    "params": "workload_params",
}


def _fields(cfg: TrialConfig, images: bool, shipping: Shipping | None) -> dict:
    """The config's fields that are columns, as given, and what stands for data and the workload's code: its job's
    path as the sweep's `shipping` has it (a worker: none given, the driver's, from runtime_env's ORIGINS_ENV)."""
    columns = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name in NAMES}
    return {"config_hash": cfg.config_hash(), **columns, "data_requested": cfg.data if images else "generated",
            "workload_module": cfg.module or BUILTIN_MODULE, "workload_fingerprint": cfg.fingerprint,
            "workload_path": (shipping or Shipping()).origin(cfg.module),
            "workload_params": json.dumps(cfg.params, sort_keys=True) if cfg.params else None}


def config_row(trial: Trial, shipping: Shipping | None = None) -> dict:
    """The config's columns of a row, with the seed's defaults filled in and what it asked Ray for; `shipping`: the
    sweep's, where the driver writes it (`_fields`)."""
    asked = trial.resources
    return {**_fields(trial.cfg, trial.wl.images, shipping), "workload_fingerprint": fingerprint(trial.wl),
            "cpus_requested": asked["cpu"], "gpus_requested": asked["gpu"]}


def failed_row(subject: Trial | TrialConfig, error: str, shipping: Shipping | None = None) -> dict:
    """The row of a trial that failed: its config's columns, as far as it was resolved, and the error.

    A config that failed to resolve (a bad field, a module the worker could not import) is written as it
    was given: nothing is resolved again here, so building the row cannot fail the way the trial did. `shipping`:
    the sweep's, where the driver writes it (a trial it did not run: `_fields`)."""
    if isinstance(subject, Trial):
        columns = config_row(subject, shipping)
    else:
        columns = _fields(subject, subject.workload in WORKLOADS and WORKLOADS[subject.workload].images, shipping)
    return {**columns, "status": "error", "error": error}


def quality(wl, train: float | None, test: float | None) -> dict:
    """The quality columns of a row: accuracy where the workload's metric is accuracy, its own metric's
    columns where it has one, none but the loss's (given apart) where it is 'loss'."""
    name = wl.metric if isinstance(wl.metric, str) else getattr(wl.metric, "__name__", "metric")
    accuracy = wl.metric == "accuracy"
    return {"metric": name, "train_accuracy": train if accuracy else None, "test_accuracy": test if accuracy else None,
            "train_metric": None if accuracy else train, "test_metric": None if accuracy else test}


# crossover's packages, in a checkout or site-packages: frames in them are not the workload's own (a job file in
# the checkout is)
OURS = tuple(Path(__file__).resolve().parent.parent / package
             for package in ("trainables", "sweeps", "analysis")) + (Path(crossover.__file__).resolve().parent,)
LIBRARIES = tuple({sys.prefix, sys.base_prefix, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["stdlib"]})
ERROR_FRAMES = 3  # frames of a failed trial's traceback its row keeps: the innermost


def own_code(filename: str) -> bool:
    """Whether a frame in `filename` is the workload's own: not crossover's, Python's or an installed library's."""
    return (not filename.startswith("<") and not any(Path(filename).resolve().is_relative_to(p) for p in OURS)
            and not filename.startswith(LIBRARIES))


def error_text(exc: BaseException) -> str:
    """The exception's type and message on one line, with where in the workload's own code it was raised
    ('in make_data, job.py:9'); then the innermost frames of that code (of any code, where none is the
    workload's): enough to act on, in plain text."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if own_code(f.filename)]
    where = f" (in {own[-1].name}, {Path(own[-1].filename).name}:{own[-1].lineno})" if own else ""
    said = " ".join(str(exc).split())
    shown = traceback.format_list((own or frames)[-ERROR_FRAMES:])
    return f"{type(exc).__name__}{': ' if said else ''}{said}{where}\n" + "".join(shown)


def crash_text(signal_name: str, frames: list[tuple[str, int, str]]) -> str:
    """The error of a trial whose worker its own code killed with a signal (trainables/exits.py: `crash`), as
    error_text says an exception: the signal and where in the workload's code on one line, then the innermost
    frames (`frames`: file, line, function, innermost last)."""
    inner = frames[-1] if frames else None
    where = f" in {inner[2]} ({Path(inner[0]).name}:{inner[1]})" if inner else ""
    shown = traceback.format_list([traceback.FrameSummary(f, n, name, line="") for f, n, name in frames[-ERROR_FRAMES:]])
    return (f"the worker was killed by signal {signal_name}{where}\nits own code crashed its process (not killed from "
            "outside, not a lost node), so the trial was not run again\n" + "".join(shown))


def measured_row(trial: Trial, model, timer: Timer, epoch_s: list[float], samples: int, devices: tuple,
                 started: float, window: Window, **columns) -> dict:
    """A finished trial's row. `samples`: training samples per epoch (all workers together);
    `started`: the trial's perf_counter at its start; `window`: the Window around its timed epochs
    (co_running and the host's load); `columns`: the rest (quality, data, group, and `torch_threads` as the timed
    epochs ended, over the environment's: the count when the row is built is not the timing's)."""
    samples_per_s = samples * len(epoch_s) / sum(epoch_s)
    batch_size = trial.cfg.batch_size
    assert batch_size is not None, "a resolved trial's batch_size is filled in (crossover.trainables.trial resolve)"
    return {
        **config_row(trial),
        "status": "ok",
        "n_params": n_params(model),
        "model": describe(model),
        **timer.columns(),
        **summarize(epoch_s),
        "steps_per_epoch": -(-samples // batch_size),
        "samples_per_s": samples_per_s,
        "world_size": 1,
        "fused_members": 1,
        "per_rank_samples_per_s": [samples_per_s],
        **env.environment(devices),
        **columns,
        **window.columns(),
        "total_s": time.perf_counter() - started,
    }

"""The Tune entry point: one Tune trial (a single trial, or a fused group of them), one report of its rows.

    tune.Tuner(tune.with_resources(trainable, ...), param_space={"trials": ...})   # sweeps/runner.py

The config Tune hands the worker is converted and resolved here, once (trainables/trial.py), and the
resolved trials go down to the one runner that fits them: fused (several members), data-parallel
(ddp:N, ddp-cpu:N) or a single process (everything else). Any failure is a measurement too: it
becomes the trials' rows, not an exception.
"""

from __future__ import annotations

# torch.optim's first optimizer imports torch._dynamo: 1.2 s on 2 cores that a fresh worker's first
# trial counted in its total_s (sweeps/overhead.py, first_s); imported with this module, it is not.
import torch._dynamo  # noqa: F401
from ray import tune

from trainables import env
from trainables.config import TrialConfig
from trainables.ddp import run_ddp
from trainables.fused import run_fused
from trainables.rows import error_text, failed_row
from trainables.train import run_trial
from trainables.trial import Trial, resolve

ROW_KEY = "crossover_row"  # the key under which a trial reports its rows to Tune


def run(trials: list[Trial]) -> list[dict]:
    """The rows of one Tune trial's resolved trials: fused, data-parallel or single-process."""
    if len(trials) > 1:
        return run_fused(trials)
    if trials[0].spec.distributed:
        return [run_ddp(trials[0])]
    return [run_trial(trials[0])]


def trainable(config: dict) -> None:
    """Tune function trainable: resolve the config once, run it, report its rows once."""
    subjects: list[Trial | TrialConfig] = [TrialConfig.from_dict(c) for c in config["group"]["trials"]]
    try:
        subjects = [resolve(cfg) for cfg in subjects]
        rows = run(subjects)
    except Exception as exc:  # any failure is a measurement too: it becomes rows
        text = error_text(exc)
        rows = [{**failed_row(subject, text), **env.environment(())} for subject in subjects]
    tune.report({ROW_KEY: rows})

"""A first look at a model on this CPU, before the search's first round: what one training step costs.

    found = probe(trial)          # Probe(step_s=0.15, fixed_s=7.9), or None where it could not run
    found.epoch_s(trial.cfg)      # the trial's predicted seconds an epoch on this CPU

The search (sweeps/search.py) predicts a trial's time from this machine's rows of the workload, else from
the shipped reference rows. A user's model has neither before its first trial, so that trial ran
unpredicted, under the per-trial cap, and on a slow or busy 2-core machine every one of them was cut: no
row at all (issue 29). The probe trains the line's first configuration cut to PROBE_BATCHES batches, in
this process, through the one path every trial takes (trainables/train.py `run_trial`, so its timing is
trainables/timing.py's: warm-up excluded, median epoch), and writes no row: it is a prediction's input,
not a measurement of the grid.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import torch

from trainables.train import run_trial
from trainables.trial import Trial, resolve

PROBE_BATCHES = 2  # batches an epoch of the probe: a step's time, not an epoch's, is what it is after


@dataclass(frozen=True)
class Probe:
    """One probe's figures: a warm step's time, and what a trial costs besides its steps."""

    step_s: float  # s: one warm training step (forward, backward, optimiser) at the trial's batch size
    fixed_s: float  # s: the probe's wall time less its steps: data and model made, the first step's own
    # start-up (thread pools, kernel caches), counting a step's costs; a trial pays each once too

    def epoch_s(self, cfg) -> float:
        """Seconds an epoch of `cfg` on this CPU: its batches at the probe's step time."""
        return self.step_s * math.ceil(cfg.dataset_size / cfg.batch_size)


def probe(trial: Trial) -> Probe | None:
    """The probe of `trial` (a CPU trial): its configuration at PROBE_BATCHES batches (fewer where the trial
    has fewer), one warm-up epoch and the fewest timed ones trainables/timing.py allows. None where that
    configuration is refused by the workload (its `check`) or fails: the trial then runs unpredicted, and
    its own row says what went wrong."""
    cfg = trial.cfg
    small = dataclasses.replace(cfg, dataset_size=min(cfg.dataset_size, PROBE_BATCHES * cfg.batch_size),
                                epochs=cfg.warmup_epochs + 1, min_timed_s=0)
    threads = torch.get_num_threads()  # run_trial sets the trial's own; this process's are given back
    began = time.perf_counter()
    try:
        row = run_trial(resolve(small))
    except (Exception, SystemExit):  # a refused size, or a user's model that fails: its trial rows it
        return None
    finally:
        torch.set_num_threads(threads)
    wall = time.perf_counter() - began
    steps = math.ceil(small.dataset_size / small.batch_size)
    step_s = row["epoch_s_median"] / steps
    epochs = small.warmup_epochs + row["timed_epochs"]
    return Probe(step_s, max(wall - step_s * steps * epochs, 0.0))

"""A trial's one path, for every engine and device: its phases, timed epochs, energy, rows and step costs.

    measure([trial], where, lambda timer: Loop.build(trial, where, timer))             # trainables/train.py
    measure(members, where, lambda timer: FusedLoop.build(members, where, timer))     # trainables/fused.py

A single trial (engines eager, graph, compile; one device, a data-parallel rank or a pipeline: train.py
`Loop`) and a fused group (engines eager, graph, triton: fused.py `FusedLoop`) differ only in the loop
object (`TrialLoop`) built for them; everything measured around the loop is here, once, so a fused
member's row has the columns of a trial run alone.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Protocol

import torch

from crossover.workload import Workload

from . import precision
from .energy import Meter
from .graph import warm_up
from .neighbours import Window
from .placement import Placement
from .rows import failed_row, measured_row, quality
from .timing import Clock, Timer
from .trial import Trial


class TrialLoop(Protocol):
    """What `measure` needs of a loop: one trial's (a list of one) or a fused group's members'."""

    trials: list[Trial]  # the trials it rows, in order (its members)
    model: torch.nn.Module  # the model a row describes (n_params, model): a member's
    samples: int  # training samples of one member per epoch (all data-parallel ranks together)
    correct: torch.Tensor  # the last epoch's score sums on this rank: a scalar, or one per member
    label: str  # its name among its neighbours (trainables/neighbours.py Window)
    key: str  # its id there: the trial's hash, or the fused group's
    columns: dict  # row columns of the loop: where its data lived and came from, its test split (n_test)
    group: dict  # row columns of the group: fused_members and fused_group for a fused trial, else none

    def epoch(self) -> torch.Tensor:
        """One epoch of every member, each in its own order; its loss sums on this rank, as `correct`."""

    def capture(self) -> None:
        """After the warm-up, record the step in a CUDA graph (engines 'graph', 'triton')."""

    def evaluate(self) -> tuple[list, list]:
        """Each member's mean test loss per sample and test score (None where the metric is 'loss')."""

    def step_costs(self) -> dict:
        """One step's costs (trainables/costs.py), of every member together, without touching the trial's state."""


def measure(trials: list[Trial], where: Placement, build: Callable[[Timer], TrialLoop]) -> list[dict]:
    """Train `build(timer)`'s loop (which times its own phases 'setup' and 'h2d' on `timer`) and return
    one row per member (crossover/schema.py).

    A fused group's timings, energy and step costs are measured for the whole group (its step costs: one
    step of every member). Each member's row holds the group's timings and its share of the energy and
    step costs (`_share`), as its samples_per_s is its samples in the group's time: so a member's row
    reads as a trial's alone would.
    A trial alone whose training loss is not finite raises FloatingPointError (the trainable rows it as
    any failure); in a group, that member's row is a failed one and the others' stand."""
    started = time.perf_counter()
    cfg, wl, k = trials[0].cfg, trials[0].wl, len(trials)  # members differ only in seed and lr
    if not isinstance(wl, Workload):  # a driver's WorkloadSpec: its code was never imported here
        raise TypeError(f"workload {wl.name!r}: a trial is measured with its Workload itself (crossover.trainables.trial "
                        "resolve, in the worker), not the driver's WorkloadSpec")
    assert cfg.epochs is not None, "resolve() fills in a trial's epochs"
    torch.set_num_threads(cfg.threads)
    precision.set_tf32(cfg.precision)
    timer = Timer(Clock(where.devices))
    for device in where.devices:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
    loop = build(timer)
    changed = [_threads_back(cfg.threads, "built its data, model, optimiser and loss")]
    warm_up(timer, cfg, where.input_device, loop.epoch, loop.capture)
    changed.append(_threads_back(cfg.threads, "ran its warm-up epochs"))
    threads_note = "; ".join(filter(None, changed)) or None
    with Window(loop.label, loop.key, cfg.threads) as window, Meter(where.devices) as meter:
        epoch_s, sums = timer.epochs(cfg.epochs - cfg.warmup_epochs, loop.epoch, cfg.min_timed_s, where.largest)
    # read here, not as the row is built: the row's fingerprint (config_row) calls make_model again, which may set
    # another count after the timing
    timed_threads = torch.get_num_threads()

    n = loop.samples
    per_epoch = where.all_reduce(torch.stack(sums)).view(len(sums), k)  # epochs x members
    curves = [[s / n for s in member] for member in per_epoch.T.tolist()]
    failed = {i: _nonfinite(c, cfg.warmup_epochs) for i, c in enumerate(curves) if not math.isfinite(c[-1])}
    if k == 1 and failed:
        del loop  # its data and model freed before the replay builds its own
        raise FloatingPointError(_nonfinite(curves[0], cfg.warmup_epochs, build, where))
    scores = [c / n for c in where.all_reduce(loop.correct).view(k).tolist()] if wl.metric != "loss" else [None] * k
    test_loss = test_score = [None] * k
    if loop.columns["n_test"]:
        with timer.phase("eval"):
            test_loss, test_score = loop.evaluate()

    energy, rows = _share(meter.columns(), k), []
    for i, t in enumerate(trials):
        if i in failed:
            rows.append({**failed_row(t, f"FloatingPointError: {failed[i]}"), **loop.group})
            continue
        rows.append(measured_row(
            t, loop.model, timer, epoch_s, n, where.devices, started, window, world_size=where.world, **loop.group,
            **loop.columns, train_loss=curves[i][-1], loss_curve=curves[i], test_loss=test_loss[i],
            **quality(wl, scores[i], test_score[i]), **energy, torch_threads=timed_threads,
            threads_note=threads_note))
    # after the rows' timings (total_s included): the counting's time is in none of them
    costs = _share(loop.step_costs(), k) if len(failed) < k else {}
    return [{**row, **costs, "per_rank_samples_per_s": [row["samples_per_s"] / where.world]}
            if row["status"] == "ok" else row for row in rows]


def _nonfinite(curve: list[float], warmup: int, build: Callable[[Timer], TrialLoop] | None = None,
               where: Placement | None = None) -> str:
    """Why a trial's training loss failed, in one line: the step and its loss, found by replaying the trial from
    its start a step at a time (`build`'s loop's first_nonfinite: a single trial's, after its timing), else the
    first timed epoch whose mean loss is not finite. It names no cause: a NaN comes from the data, the model, the
    loss or the learning rate, and only the step says where to look."""
    epoch = next(i for i, v in enumerate(curve) if not math.isfinite(v))
    said = (f"training loss became {curve[epoch]} in epoch {warmup + epoch + 1} (its mean over the epoch's steps; "
            f"{warmup} warm-up epoch{'s' if warmup != 1 else ''} first)")
    replay = None
    if build is not None:
        if where is None:
            raise ValueError("where: replaying a trial (build) needs its Placement, got None")
        replay = build(Timer(Clock(where.devices)))
    found = replay.first_nonfinite(warmup + epoch + 1) \
        if replay is not None and hasattr(replay, "first_nonfinite") else None
    if found is None:
        return said + ("; replayed from its start a step at a time, every step's loss was finite"
                       if hasattr(replay, "first_nonfinite") else "")
    at, step, loss, before = found
    return (f"training loss was {loss} at step {step} of epoch {at} (the trial replayed from its start a step at a "
            f"time; " + ("its first step" if before is None else f"the step before: {before:.6g}") + ")")


def _threads_back(threads: int, when: str) -> str | None:
    """The trial's `threads` put back where the workload's own code changed torch's count (a make_model that called
    torch.set_num_threads(64) timed every epoch at 64 threads on the few cores Ray gave the trial, 7-14x slower,
    and its row said only torch_threads=64): what it set, in words for the row's threads_note; None where the count
    was left alone."""
    found = torch.get_num_threads()
    if found == threads:
        return None
    torch.set_num_threads(threads)
    return (f"the workload set torch's threads to {found} as it {when}; put back to the trial's {threads} "
            "before the timed epochs")


def _share(columns: dict, members: int) -> dict:
    """One member's share of a group's figures: each number over `members` (integers rounded to the
    nearest: their columns are integers), notes and nulls as they are; a trial alone's as they are."""
    def share(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        return (value + members // 2) // members if isinstance(value, int) else value / members
    return {name: share(value) for name, value in columns.items()}

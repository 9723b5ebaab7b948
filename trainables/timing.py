"""All of a trial's phase and epoch timing lives here: synchronised phases, per-epoch marks, and their summary.
The one figure taken outside is the row's total_s, the wall time from measure's start
(trainables/measure.py) to its row (trainables/rows.py `measured_row`).

Phases (crossover.schema.PHASES: setup, h2d, warmup, train, eval) synchronise every device of the
trial on both sides and read `time.perf_counter`. Epochs inside the timed training are marked
without a host sync: on GPUs with CUDA events, read once at the end; on the CPU with perf_counter,
since CPU work is synchronous. So the measured loop itself never waits on the host.

How many epochs are timed: at least the trial's own (epochs - warmup_epochs), and then, as
torch.utils.benchmark's blocked autorange does, more until at least MIN_TIMED_EPOCHS epochs and
`min_timed_s` seconds are timed, up to EXTEND_AT_MOST times the trial's own: so no median rests on
2 epochs, and a 1 ms epoch is timed hundreds of times (min_timed_s 0: exactly the trial's own). The decision is taken once, after the trial's
own epochs, from their synchronised wall time (one sync), and is the same on every data-parallel
rank; the row keeps the count (`timed_epochs`).

One clock watches all of a trial's devices: a pipeline's epoch ends when its last stage and its
first stage's backward pass and optimiser step are all done, so each mark is recorded on the last
device's stream after that stream has waited for every other device's.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from typing import Callable

import torch

from crossover.schema import COMPILE_PHASE, PHASES

MIN_TIMED_EPOCHS = 3  # no median of fewer epochs than this (5 made `make run` 7 min on 2 cores, 3 repeats)
EXTEND_AT_MOST = 10  # timed epochs: at most this many times the trial's own (and MIN_TIMED_EPOCHS)


class Clock:
    """Marks points in time on a trial's devices (one, or a pipeline's stages) and measures between them."""

    def __init__(self, devices: tuple[torch.device, ...]):
        self.cuda = devices[0].type == "cuda"
        self.devices = devices

    def sync(self) -> None:
        if self.cuda:
            for device in self.devices:
                torch.cuda.synchronize(device)

    def mark(self) -> float | torch.cuda.Event:
        """A point after all work queued so far on every device: an event on the last device's stream."""
        if not self.cuda:
            return time.perf_counter()
        last = torch.cuda.current_stream(self.devices[-1])
        for device in self.devices[:-1]:
            last.wait_stream(torch.cuda.current_stream(device))
        event = torch.cuda.Event(enable_timing=True)
        event.record(last)
        return event

    def between(self, marks: list) -> list[float]:
        """Seconds between consecutive marks; synchronises once on a GPU."""
        if self.cuda:
            marks[-1].synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:])]
        return [b - a for a, b in zip(marks, marks[1:])]


class Timer:
    """Named, synchronised phases of one trial; `phases` holds seconds per name."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        self.clock.sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.clock.sync()
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def columns(self) -> dict:
        """The row's phase columns: seconds of each phase (0 if it did not run), and of the graph
        capture where there was one (else null)."""
        return {**{f"{name}_s": self.phases.get(name, 0.0) for name in PHASES},
                f"{COMPILE_PHASE}_s": self.phases.get(COMPILE_PHASE)}

    def epochs(self, n: int, epoch: Callable[[], torch.Tensor], min_s: float = 0.0,
               agree: Callable[[int], int] = lambda more: more) -> tuple[list[float], list[torch.Tensor]]:
        """At least `n` epochs in the phase 'train', then as many more as `more_epochs` asks for
        `min_s` seconds (`agree` makes the data-parallel ranks take one decision), each marked on the
        clock: their seconds, and what each `epoch()` returned (its loss sum, a device tensor copied
        without a host sync)."""
        sums: list[torch.Tensor] = []
        seconds: list[float] = []
        with self.phase("train"):
            start = time.perf_counter()
            seconds += self._marked(n, epoch, sums)
            if min_s > 0:  # else exactly the trial's own epochs: no sync, no collective to decide it
                self.clock.sync()
                more = agree(more_epochs(n, time.perf_counter() - start, min_s))
                # marked afresh: the decision's own pause belongs to no epoch
                seconds += self._marked(more, epoch, sums)
        return seconds, sums

    def _marked(self, n: int, epoch: Callable[[], torch.Tensor], sums: list) -> list[float]:
        marks = [self.clock.mark()]
        for _ in range(n):
            sums.append(epoch().detach().clone())
            marks.append(self.clock.mark())
        return self.clock.between(marks)


def more_epochs(done: int, elapsed_s: float, min_s: float) -> int:
    """Epochs to time after `done` epochs took `elapsed_s`: enough for MIN_TIMED_EPOCHS epochs and
    `min_s` seconds in all at the same pace, and no more than EXTEND_AT_MOST times `done` in all;
    none where `min_s` is 0 (exactly the trial's own epochs, as the tests that compare runs need)."""
    if min_s <= 0:
        return 0
    pace = elapsed_s / done if done else 0.0
    wanted = max(done, MIN_TIMED_EPOCHS, math.ceil(min_s / pace) if pace > 0 else 0)
    return min(wanted, max(EXTEND_AT_MOST * done, MIN_TIMED_EPOCHS)) - done


def summarize(epoch_s: list[float]) -> dict:
    """Median and spread of per-epoch times; keeps every epoch too."""
    if not epoch_s:
        raise ValueError("no timed epochs: epochs must exceed warmup_epochs")
    t = torch.tensor(epoch_s, dtype=torch.float64)
    q25, q50, q75 = torch.quantile(t, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).tolist()
    return {
        "epoch_s": list(epoch_s),
        "timed_epochs": len(epoch_s),
        "epoch_s_median": q50,
        "epoch_s_iqr": q75 - q25,
        "epoch_s_min": min(epoch_s),
        "epoch_s_max": max(epoch_s),
    }

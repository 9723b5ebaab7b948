"""All timing lives here: synchronised phases, per-epoch marks, and their summary.

Phases (setup, h2d, warmup, train, eval) synchronise the device on both sides and read
`time.perf_counter`. Epochs inside the timed training are marked without a host sync: on a GPU
with CUDA events recorded on the stream, read once at the end; on the CPU with perf_counter, since
CPU work is synchronous. So the measured loop itself never waits on the host.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch


class Clock:
    """Marks points in time on one device's stream and measures between them."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

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
        return {**{f"{name}_s": self.phases.get(name, 0.0) for name in ("setup", "h2d", "warmup", "train", "eval")},
                "compile_s": self.phases.get("compile")}


def summarize(epoch_s: list[float]) -> dict:
    """Median and spread of per-epoch times; keeps every epoch too."""
    if not epoch_s:
        raise ValueError("no timed epochs: epochs must exceed warmup_epochs")
    t = torch.tensor(epoch_s, dtype=torch.float64)
    q25, q50, q75 = torch.quantile(t, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).tolist()
    return {
        "epoch_s": list(epoch_s),
        "epoch_s_median": q50,
        "epoch_s_iqr": q75 - q25,
        "epoch_s_min": min(epoch_s),
        "epoch_s_max": max(epoch_s),
    }

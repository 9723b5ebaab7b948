"""Engine 'graph': a training step captured once in a CUDA graph and replayed, for single trials
(trainables/train.py `Loop`) and fused trials (trainables/fused.py `FusedLoop`) alike.

    warm_up(timer, trial.cfg, device, epoch, capture)   # the warm-up epochs, then the capture
    graph = StepGraph(step, first_batch_indices)        # inside `capture`
    graph.replay(batch_indices)                         # one launch a step, in every later epoch

The step reads its batch through index tensors; the graph holds static copies of them, and a replay
copies the next batch's indices in first. Everything else the step touches (data, weights, optimiser
state, loss sums) stays at the addresses it had during capture. Random draws (dropout) come from the
device's default generator, registered with every graph at capture, and from the `generators`
named to StepGraph (a fused trial's members' own streams): each replay advances them as the eager
step would, so a captured step draws what the eager one would have.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch

from crossover.config import TrialConfig
from crossover.schema import COMPILE_PHASE

from .timing import Timer

CAPTURED = ("graph", "triton")  # the engines whose step is one CUDA graph after the warm-up


class StepGraph:
    """`step(*indices)` recorded in a CUDA graph, with static index buffers shaped as `indices`."""

    def __init__(self, step: Callable[..., None], *indices: torch.Tensor, generators: tuple = ()):
        self.static = [i.clone(memory_format=torch.contiguous_format) for i in indices]
        # a replay's launches: each index copy, each named generator's seed and offset, and the graph (the
        # default generator's seed and offset, set at every graph's replay, are not counted)
        self.launches = len(self.static) + 2 * len(generators) + 1
        self.graph = torch.cuda.CUDAGraph()
        for generator in generators:
            self.graph.register_generator_state(generator)
        with torch.cuda.graph(self.graph):
            step(*self.static)

    def replay(self, *indices: torch.Tensor) -> None:
        """One step on the batch `indices` (device tensors shaped as at capture): copied in, then replayed."""
        for static, index in zip(self.static, indices):
            static.copy_(index, non_blocking=True)
        self.graph.replay()


def warm_up(timer: Timer, cfg: TrialConfig, device: torch.device, epoch: Callable[[], object],
            capture: Callable[[], None]) -> None:
    """The trial's warm-up epochs (phase 'warmup'), and for the CAPTURED engines ('graph', 'triton') the
    capture after them (phase COMPILE_PHASE). Those warm up on a side stream, as CUDA graph capture
    requires; torch.compile compiles in the first warm-up step: both stay out of the timed epochs."""
    side = torch.cuda.Stream(device) if cfg.engine in CAPTURED else None
    with timer.phase("warmup"), torch.cuda.stream(side) if side else contextlib.nullcontext():
        for _ in range(cfg.warmup_epochs):
            epoch()
    if side:
        torch.cuda.current_stream(device).wait_stream(side)
        with timer.phase(COMPILE_PHASE):
            capture()

"""What one optimiser step costs: FLOPs, bytes moved and kernel launches, counted once per trial.

    count(step, devices)       # {'flops_per_step': ..., 'bytes_per_step': ..., 'launches_per_step': ...}

`trainables/train.py` calls it after the trial's timed epochs and evaluation, on copies of the model
and optimiser (so the trial's own weights and random state are untouched), and after its row's timings
are taken: the counting's own time is in no timing column, total_s included. What is counted:

- FLOPs: torch.utils.flop_counter.FlopCounterMode over one forward, backward and optimiser step. It
  counts matrix products and convolutions (2 FLOPs a multiply-add), not element-wise ops, so an
  optimiser's arithmetic counts 0: those ops are memory-bound and are in the bytes.
- Bytes: an estimate. Every aten op that is not a view reads each of its tensor inputs once and writes
  each of its outputs once, from and to the device's memory: no cache reuse, no fusion. So a
  Linear's forward reads the batch, the weight and the bias and writes its output; an SGD step reads
  the weights and the gradients and writes the weights; Adam reads and writes its two moments too.
  Small models fit in the caches and move less; fused kernels move less.
- Launches: on a GPU, the kernel launches torch.profiler records (its CUDA runtime events named
  cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel...); on the CPU, the aten ops dispatched that
  are not views (each pays the dispatcher's fixed cost). docs/model.md says how the model uses them.

analysis/model.py computes the same three from a row's configuration for rows written before these
columns existed; tests/test_costs.py checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

# CUDA runtime and driver calls that launch a kernel or a captured graph (torch.profiler's names).
LAUNCH_EVENTS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                 "cudaLaunchCooperativeKernel", "cudaGraphLaunch")


class Traffic(TorchDispatchMode):
    """Counts the aten ops dispatched that are not views, and the bytes they read and write
    (each tensor input and output once; see the module's docstring)."""

    def __init__(self):
        super().__init__()
        self.ops = 0
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            self.ops += 1
            tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
            self.bytes += sum(t.numel() * t.element_size() for t in tensors)
        return out


def cuda_launches(step: Callable[[], None]) -> int:
    """Kernel launches of one call of `step`, from torch.profiler's CUDA runtime events."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for event in prof.events() if event.name in LAUNCH_EVENTS)


def count(step: Callable[[], None], on_gpu: bool) -> dict:
    """FLOPs, bytes and launches of one step: `step` is called twice (counted, then profiled on a GPU),
    so it must be safe to repeat (a copy of the model and optimiser)."""
    with FlopCounterMode(display=False) as flops, Traffic() as traffic:
        step()
    return {"flops_per_step": int(flops.get_total_flops()), "bytes_per_step": int(traffic.bytes),
            "launches_per_step": cuda_launches(step) if on_gpu else traffic.ops}

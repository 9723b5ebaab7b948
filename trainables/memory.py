"""The GPU memory one training step holds at its peak, counted from the tensors it makes, not measured.

    step_peak(step, device, model, opt, batch)   # bytes allocated at the step's peak on `device`

sweeps/count_step.py asks it, through trainables/train.py `Loop.step_peak`, for the `peak_memory_bytes` of
`crossover predict`'s count: what torch's allocator holds at the worst moment of one steady step, the CUDA
context excluded (analysis/decide/ adds CONTEXT_BYTES). torch's own MemTracker
(torch.distributed._tools.mem_tracker) follows every tensor storage through the step: the parameters, the
gradients, the optimiser's states, the batch (handed in: made before the step), and each tensor the
step's ops make, from its creation until its storage is freed, so the activations autograd saves and the
transients (a backward's gradients, a foreach optimiser's temporaries) count while they live. Each counts
at its dtype's element size. It runs on the meta device (shapes only, as the rest of the count) as on the
CPU; on the meta device the sizes are not rounded up to the CUDA caching allocator's 512-byte blocks, which
moves a model of a few hundred tensors by well under 1%. docs/cost.md, "Fits in memory", says how close it
comes to torch.cuda.max_memory_allocated (tests/test_memory.py checks it on a GPU).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def step_peak(step: Callable[[], None], device: torch.device, *held) -> int:
    """Bytes allocated on `device` at the peak of one call of `step`, counting `held` (modules, optimisers,
    tensors made before the step: the model, its optimiser with its states, the batch) from the start.

    The optimiser's states are made at its first step (Adam's two moments, SGD's momentum): call it after
    one step, so that the figure is a steady step's, which holds them throughout."""
    from torch.distributed._tools.mem_tracker import MemTracker  # imported here: it imports torch.distributed

    tracker = MemTracker()
    tracker.track_external(*held)
    with tracker:
        step()
    return int(tracker.get_tracker_snapshot("peak").get(device, {}).get("Total", 0))

"""Model parallelism in one process (seed 001's "model parallelism"): a Sequential's layers split
across GPUs, each batch cut into micro-batches that flow stage to stage (GPipe's schedule).

Kernel launches are asynchronous, so while stage i+1 works on micro-batch m, the host has already
queued micro-batch m+1 on stage i: the GPUs overlap. The training loop does not know: it calls the
model, and autograd carries the backward pass back across the devices.

    Placement(devices=(cuda:0, cuda:1), micro_batches=4).prepare(model)   # see trainables/placement.py
"""

from __future__ import annotations

import torch
from torch import nn


def balanced_stages(model: nn.Sequential, n: int) -> list[nn.Sequential]:
    """Cut `model` into `n` contiguous stages of about equal parameter count; each Linear keeps the
    activation after it. Refuses a model with fewer Linear layers than stages."""
    blocks: list[list[nn.Module]] = []
    for layer in model:
        if isinstance(layer, nn.Linear) or not blocks:
            blocks.append([layer])
        else:
            blocks[-1].append(layer)
    if len(blocks) < n:
        raise ValueError(f"pipe:{n} needs at least {n} Linear layers to split, the model has {len(blocks)}: "
                         f"use fewer stages or a deeper model")
    sizes = [sum(p.numel() for m in block for p in m.parameters()) for block in blocks]
    cuts = _min_max_partition(sizes, n)
    stages = [sum(blocks[a:b], []) for a, b in zip([0] + cuts, cuts + [len(blocks)])]
    return [nn.Sequential(*stage) for stage in stages]


def _min_max_partition(sizes: list[int], n: int) -> list[int]:
    """Cut points splitting `sizes` into n contiguous non-empty runs with the smallest largest sum."""
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)
    # best[k][i]: (largest run sum, cuts) for the first i sizes in k runs
    best: dict[tuple[int, int], tuple[int, list[int]]] = {(1, i): (prefix[i], []) for i in range(1, len(sizes) + 1)}
    for k in range(2, n + 1):
        for i in range(k, len(sizes) + 1):
            best[k, i] = min((max(best[k - 1, j][0], prefix[i] - prefix[j]), best[k - 1, j][1] + [j])
                             for j in range(k - 1, i))
    return best[n, len(sizes)][1]


class Pipeline(nn.Module):
    def __init__(self, model: nn.Module, devices: tuple, micro_batches: int):
        super().__init__()
        if not isinstance(model, nn.Sequential):
            raise ValueError(f"pipe needs a Sequential model (the MLP workloads), got {type(model).__name__}")
        self.devices = devices
        self.micro_batches = micro_batches
        self.stages = nn.ModuleList(s.to(d) for s, d in zip(balanced_stages(model, len(devices)), devices))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = []
        for chunk in x.chunk(self.micro_batches):
            for stage, device in zip(self.stages, self.devices):
                chunk = stage(chunk.to(device, non_blocking=True))
            outputs.append(chunk)
        return torch.cat(outputs)

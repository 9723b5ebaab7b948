"""Device strings: parsed once, turned into a torch device and into a Ray resource request.

    cpu    the trial's own CPU cores (config.threads of them); never touches a GPU
    cuda   one whole GPU (and one CPU core to drive it)

This is the one place that knows the variants: the training loop only sees a `torch.device`.
"""

from __future__ import annotations

from dataclasses import dataclass

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class DeviceSpec:
    kind: str  # 'cpu' or 'cuda'
    gpus: float  # GPUs asked of Ray

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"


def parse(device: str) -> DeviceSpec:
    if device == "cpu":
        return DeviceSpec("cpu", 0.0)
    if device == "cuda":
        return DeviceSpec("cuda", 1.0)
    raise ValueError(f"device must be one of {list(DEVICES)}, got {device!r}")


def resources(device: str, threads: int) -> dict:
    """What a trial asks Ray for: a CPU trial its cores, a GPU trial a GPU and one core to drive it."""
    spec = parse(device)
    if spec.is_cuda:
        return {"cpu": 1, "gpu": spec.gpus}
    return {"cpu": threads, "gpu": 0}


def torch_device(device: str):
    """The torch device for a trial; fails with the node's name where CUDA is missing."""
    import socket

    import torch

    spec = parse(device)
    if not spec.is_cuda:
        # Ray 2.60 no longer hides GPUs from zero-GPU trials: choosing the CPU explicitly is what
        # keeps a CPU trial off them.
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"CUDA not available on node {socket.gethostname()}")
    return torch.device("cuda", torch.cuda.current_device())

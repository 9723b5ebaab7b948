"""Where a trial's process puts its model and data: the torch side of a parsed device (trainables/devices.py).

    where = placement(trial.spec, cfg.micro_batches)   # trainables/train.py, for cpu, cuda, cuda/K, pipe:N
    model = where.prepare(model)                        # on the device, in pipeline stages, or in DDP

The training loop sees a `Placement` (devices, rank, world size) and a prepared model, whatever the
device string was. Data-parallel workers get theirs from Ray Train (trainables/ddp.py).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .devices import DeviceSpec
from .pipeline import Pipeline

# Packed trials share 90% of the card: the rest holds each process's CUDA context.
PACKED_MEMORY = 0.9


@dataclass(frozen=True)
class Placement:
    """Where one process of a trial puts its model and data."""

    devices: tuple  # torch devices of the model's stages: one, or N for a pipeline
    rank: int = 0  # this process's rank in a data-parallel group
    world: int = 1  # processes in the group
    micro_batches: int = 1  # pipeline only: micro-batches per batch

    @property
    def input_device(self):
        return self.devices[0]

    @property
    def output_device(self):
        return self.devices[-1]

    @property
    def is_cuda(self) -> bool:
        return self.input_device.type == "cuda"

    def holds(self, nbytes: int) -> bool:
        """Whether data of `nbytes` may live on the device for the whole trial: on a GPU, at most half of
        what is free, leaving the rest to the model, its gradients and activations."""
        if not self.is_cuda:
            return True
        return nbytes <= 0.5 * torch.cuda.mem_get_info(self.input_device)[0]

    def prepare(self, model):
        """The model placed: on the device, split into pipeline stages, or wrapped for DDP."""
        if len(self.devices) > 1:
            return Pipeline(model, self.devices, self.micro_batches)
        model = model.to(self.input_device)
        if self.world > 1:
            return DistributedDataParallel(model, device_ids=[self.input_device] if self.is_cuda else None)
        return model

    def largest(self, count: int) -> int:
        """The largest of every rank's `count` (itself for one process): one decision for the group."""
        if self.world == 1:
            return count
        tensor = torch.tensor(count, device=self.input_device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return int(tensor.item())

    def all_reduce(self, tensor):
        """Sum over the data-parallel group (identity for one process)."""
        if self.world > 1:
            dist.all_reduce(tensor)
        return tensor


def placement(spec: DeviceSpec, micro_batches: int | None = None) -> Placement:
    """The Placement of a single-process trial (cpu, cuda, cuda/K, pipe:N); checks the GPU first.

    Ray sets CUDA_VISIBLE_DEVICES to the GPUs it gave the trial, so they are cuda:0..N-1 here.
    Data-parallel workers get theirs from Ray Train (trainables/ddp.py).
    """
    if not spec.uses_gpu:
        # Ray 2.60 no longer hides GPUs from zero-GPU trials: choosing the CPU explicitly is what
        # keeps a CPU trial off them.
        return Placement((torch.device("cpu"),))
    check_cuda(spec.count if spec.pipelined else 1)
    if spec.pipelined:
        if micro_batches is None:
            raise ValueError(f"micro_batches: device pipe:{spec.count} needs its micro-batches a batch (a resolved "
                             "trial's cfg.micro_batches), got None")
        return Placement(tuple(torch.device("cuda", i) for i in range(spec.count)), micro_batches=micro_batches)
    device = torch.device("cuda", 0)
    share = PACKED_MEMORY / spec.count if spec.count > 1 else 1.0
    if spec.count > 1:
        free, total = torch.cuda.mem_get_info(device)
        if free < share * total:
            raise RuntimeError(
                f"GPU {torch.cuda.get_device_name(device)} on node {socket.gethostname()} has "
                f"{free / 2**30:.1f} GiB free; a 'cuda/{spec.count}' trial needs its share of the card, "
                f"{share * total / 2**30:.1f} GiB: pack fewer trials per GPU (a smaller K in cuda/K)")
    torch.cuda.set_per_process_memory_fraction(share, device)  # 1.0 again for a reused actor
    return Placement((device,))


def check_cuda(gpus: int) -> None:
    """Fails with the node's name where CUDA is missing, too few GPUs are visible, or torch has no
    kernels for the GPU (seed 001: "no kernel image is available for execution on the device")."""
    host = socket.gethostname()
    if not torch.cuda.is_available():
        raise RuntimeError(f"CUDA not available on node {host}")
    if torch.cuda.device_count() < gpus:
        raise RuntimeError(f"{gpus} GPUs needed but {torch.cuda.device_count()} visible on node {host}")
    built = torch.cuda.get_arch_list()
    for i in range(gpus):
        major, minor = torch.cuda.get_device_capability(i)
        if not kernels_for(major * 10 + minor, built):
            raise RuntimeError(
                f"GPU {torch.cuda.get_device_name(i)} (sm_{major}{minor}) on node {host} is not supported by "
                f"torch {torch.__version__}, built for {built}: no kernel image is available for it")


def kernels_for(capability: int, built: list[str]) -> bool:
    """Whether a torch built for `built` (['sm_80', 'compute_90', ...]) runs on a GPU of `capability`
    (e.g. 90): a binary for exactly it, or PTX for it or an older one, which the driver compiles."""
    sms = {int(a[3:]) for a in built if a.startswith("sm_")}
    ptx = {int(a[8:]) for a in built if a.startswith("compute_")}
    return capability in sms or any(p <= capability for p in ptx)

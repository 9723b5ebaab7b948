"""Device strings: the one place that parses them, into a `DeviceSpec` whose fields everyone else reads.

    cpu        the trial's own cores (config.threads of them); never touches a GPU
    cuda       one whole GPU, and one core to drive it
    cuda/K     one of K trials packed on one GPU: Ray accounts 1/K of it, and the trial's allocator is
               capped at its share of the card's memory, so it fails alone rather than pushing its
               neighbours out of memory
    ddp:N      N GPUs data-parallel: Ray Train's TorchTrainer inside the Tune trial, NCCL all-reduce
    ddp-cpu:N  N CPU workers data-parallel over gloo (no GPU needed: laptops and CI)
    pipe:N     model-parallel: the model's layers split across N GPUs, micro-batches pipelined

`parse` is the one reader of a device string: a config's, when it is resolved (trainables/trial.py),
a sweep's, and each row's, when rows are read (analysis/load.py adds the spec's fields as columns).
Everyone else asks the spec (`is_cpu`, `whole_gpu`, `packed`, ...) and never tests the string;
tests/test_devices.py fails where a module does. Torch-free, so that the analysis can import it: the
torch side (a `Placement` for the loop, the GPU checks) is trainables/placement.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from crossover.config import ConfigError

DEVICES = ("cpu", "cuda", "cuda/K", "ddp:N", "ddp-cpu:N", "pipe:N")  # the forms, for help texts
_FORM = re.compile(r"^(cpu|cuda)(?:/(\d+))?$|^(ddp|ddp-cpu|pipe):(\d+)$")


@dataclass(frozen=True)
class DeviceSpec:
    kind: str  # cpu, cuda, ddp, ddp-cpu or pipe
    count: int  # cuda: trials per GPU (K); ddp: workers; pipe: stages (GPUs); cpu: 1

    @property
    def is_cpu(self) -> bool:
        """One process on the trial's own cores ('cpu'; not ddp-cpu:N)."""
        return self.kind == "cpu"

    @property
    def whole_gpu(self) -> bool:
        """One process with one whole GPU ('cuda', or 'cuda/1')."""
        return self.kind == "cuda" and self.count == 1

    @property
    def packed(self) -> bool:
        """One of K > 1 trials sharing a GPU ('cuda/K')."""
        return self.kind == "cuda" and self.count > 1

    @property
    def single_process(self) -> bool:
        """One process on one device, whole or a share of it: cpu, cuda, cuda/K."""
        return self.kind in ("cpu", "cuda")

    @property
    def pipelined(self) -> bool:
        """The model split across `count` GPUs ('pipe:N')."""
        return self.kind == "pipe"

    @property
    def uses_gpu(self) -> bool:
        return self.kind in ("cuda", "ddp", "pipe")

    @property
    def gpus(self) -> int:
        """GPUs the trial runs on: N for ddp:N and pipe:N, 1 for cuda and cuda/K (shared), 0 on CPUs."""
        if self.kind in ("ddp", "pipe"):
            return self.count
        return 1 if self.kind == "cuda" else 0

    @property
    def distributed(self) -> bool:
        """Data-parallel over `count` workers (ddp:N, ddp-cpu:N)."""
        return self.kind in ("ddp", "ddp-cpu")


def parse(device: str) -> DeviceSpec:
    match = _FORM.match(device) if isinstance(device, str) else None
    if not match:
        raise ConfigError("device", f"device must be one of the forms {list(DEVICES)}, got {device!r}")
    single, k, multi, n = match.groups()
    count = int(k or n or 1)
    if single == "cpu" and k:
        raise ConfigError("device", f"device {device!r}: 'cpu' takes no count; give 'cpu' (its threads: --cpu-threads)")
    if count < 1:
        raise ConfigError("device", f"device {device!r}: the count must be >= 1, e.g. {f'{multi}:1' if multi else single!r}")
    return DeviceSpec(single or multi, count)


def resources(spec: DeviceSpec, threads: int) -> dict:
    """What the Tune trial asks Ray for.

    A CPU trial asks for its cores; a GPU trial for its GPU (or its 1/K share, or N GPUs for a
    pipeline) and one core. A data-parallel trial is only the driver of its TorchTrainer, whose
    workers ask for their own resources (`ddp_worker_resources`), so it asks for a fraction of a core.
    """
    if spec.kind == "cpu":
        return {"cpu": threads, "gpu": 0}
    if spec.kind == "cuda":
        return {"cpu": 1, "gpu": 1 / spec.count}
    if spec.kind == "pipe":
        return {"cpu": 1, "gpu": spec.count}
    return {"cpu": 0.25, "gpu": 0}


def threads_for(spec: DeviceSpec, cpu_threads: int) -> int:
    """CPU threads of one process of a trial: a CPU trial has them all, ddp-cpu workers share them,
    a GPU trial's process drives its GPU with one."""
    if spec.kind == "cpu":
        return cpu_threads
    return max(1, cpu_threads // spec.count) if spec.kind == "ddp-cpu" else 1


def ddp_worker_resources(spec: DeviceSpec, threads: int) -> dict:
    """Ray Train's resources_per_worker for a data-parallel trial: a GPU each, or `threads` cores."""
    return {"CPU": 1, "GPU": 1} if spec.kind == "ddp" else {"CPU": threads}

"""The precision a trial trains in (config field `precision`), one training step for every device.

    python sweeps/precision.py          # the precision study: time beside loss, per precision

    default  PyTorch's defaults, what a user's plain loop gets: float32, TF32 off in matmuls and on in
             cuDNN convolutions (torch.backends.cudnn.allow_tf32 is True unless a program turns it off)
    fp32   float32 throughout, strictly: TF32 off in matmuls and in cuDNN convolutions
    tf32   float32 storage, TF32 tensor-core matmuls and convolutions: a GPU
    bf16   autocast to bfloat16 (forward and loss; the weights and the optimiser stay float32): CPU or GPU
    fp16   autocast to float16 with a GradScaler (float16's range needs the loss scaled): a GPU

The step (trainables/train.py `Loop`) always runs under `autocast(...)` and steps through a `scaler`:
for default, fp32 and tf32 the first is a null context and the second a disabled GradScaler, which calls the
optimiser as it is. `check` refuses, by name, what a device or an engine cannot run.
"""

from __future__ import annotations

import contextlib

import torch

from crossover.trainables.config import PRECISIONS, ConfigError, TrialConfig
from crossover.trainables.devices import DeviceSpec

_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
_GPU_ONLY = ("tf32", "fp16")  # TF32 is a tensor-core format; CPU autocast has no GradScaler


def check(cfg: TrialConfig, spec: DeviceSpec) -> None:
    """Raises ConfigError naming `precision` where the device or the engine cannot run it."""
    if cfg.precision not in PRECISIONS:
        raise ConfigError("precision", f"precision must be one of {list(PRECISIONS)}, got {cfg.precision!r}")
    if cfg.precision in _GPU_ONLY and not spec.uses_gpu:
        raise ConfigError("precision", f"precision {cfg.precision!r} needs a GPU, and device {cfg.device!r} has "
                                       "none: on a CPU use 'default', 'fp32' or 'bf16' (autocast)")
    if cfg.precision == "fp16" and cfg.engine == "graph":
        raise ConfigError("precision", "precision 'fp16' steps through a GradScaler, which reads its inf check on "
                                       "the host every step, and a CUDA graph cannot hold that: use engine 'eager' "
                                       "or 'compile' with fp16, or precision 'bf16' with engine 'graph'")


def autocast(precision: str, device_type: str):
    """The context the forward pass and the loss run in: autocast for bf16 and fp16, else none.

    The cast weights are not cached (cache_enabled=False): a CUDA graph cannot capture autocast's
    cache, and each weight of these models is read once a forward, so the cache saved nothing."""
    dtype = _AUTOCAST.get(precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=dtype, cache_enabled=False)


def scaler(precision: str) -> torch.amp.GradScaler:
    """fp16's loss scaling; for every other precision a disabled GradScaler, which steps as is."""
    return torch.amp.GradScaler("cuda", enabled=precision == "fp16")


def set_tf32(precision: str) -> None:
    """TF32 in matmuls and cuDNN convolutions: both on for tf32, both off for fp32, and PyTorch's defaults
    otherwise (matmuls off, convolutions on). Process settings, so every trial sets them from its own config
    and none inherits the last one's, or a user's code's, in a reused worker."""
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision != "fp32"

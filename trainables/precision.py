"""The precision a trial trains in (config field `precision`), one training step for every device.

    python studies/lower_precision.py          # the precision study: time beside loss, per precision

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
from torch.utils._pytree import tree_leaves, tree_map

from crossover.config import PRECISIONS, ConfigError, TrialConfig

from .devices import DeviceSpec

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
    cache, and each weight of these models is read once a forward, so the cache saved nothing. On the meta
    device, which autocast does not cast, CUDA's policy applied by `GpuAutocast`."""
    dtype = _AUTOCAST.get(precision)
    if dtype is None:
        return contextlib.nullcontext()
    if device_type == "meta":  # a step counted, not run (sweeps/count_step.py): as a GPU's autocast casts it
        return GpuAutocast(dtype)
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


# CUDA autocast's cast policy in this torch (ATen/autocast_mode.h: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
# AT_FORALL_PROMOTE; and cudnn/AutocastRNN.cpp, which casts cuDNN's RNN), by the name an op is called with from
# Python.
LOWER = frozenset({
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "__matmul__", "__rmatmul__",
    "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
    "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention", "scaled_dot_product_attention",
    "_cudnn_rnn"})
FP32 = frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt", "sinh",
    "tan", "pow", "__pow__", "softplus", "layer_norm", "native_layer_norm", "rms_norm", "group_norm",
    "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss",
    "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp", "upsample_nearest1d",
    "upsample_nearest2d", "upsample_nearest3d", "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d",
    "upsample_bicubic2d", "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "sum", "norm"})
PROMOTE = frozenset({"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler", "index_put",
                     "tensordot", "scatter_add", "cat", "stack"})


class GpuAutocast(torch.overrides.TorchFunctionMode):
    """CUDA's autocast to `dtype`, applied to tensors of any device (the meta device's, which autocast never
    casts): an op of LOWER runs on its floating-point inputs cast to `dtype`, one of FP32 on them cast to
    float32, one of PROMOTE on them cast to the widest of their types; the rest as called. The casts are ops
    autograd records, above it, as autocast's are, so the backward runs each op at its forward's type and
    casts the gradients back: what a step counted under it (sweeps/count_step.py) counts is what a GPU runs
    under torch.autocast("cuda", dtype), each op's bytes at its type.

    A mode sees an op where Python calls it. torch.nn.functional's functions written in Python (layer_norm,
    multi_head_attention_forward) hand themselves to a mode whole, which would hide the ops they call:
    inside this mode they run their bodies instead (`_bodies`), so that a mode sees the ops inside; and
    cross_entropy_loss, whose ops autocast casts one by one inside it, runs as them (`_cross_entropy`)."""

    def __init__(self, dtype: torch.dtype):
        super().__init__()
        self.dtype = dtype

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "").split(".")[0]
        if name == "cross_entropy_loss" and not kwargs and len(args) == 6 and not args[1].is_floating_point() \
                and args[5] == 0:
            return _cross_entropy(*args[:5])
        to = self.dtype if name in LOWER else torch.float32 if name in FP32 else None
        if name in PROMOTE:
            floats = [t.dtype for t in tree_leaves((args, kwargs)) if _casts(t)]
            to = max(floats, key=lambda d: torch.finfo(d).bits) if floats else None
        if to is not None:
            args, kwargs = tree_map(lambda t: t.to(to) if _casts(t) and t.dtype != to else t, (args, kwargs))
        return func(*args, **kwargs)

    def __enter__(self):
        self._bodies = _bodies()
        self._bodies.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        return self._bodies.__exit__(*exc)


def _cross_entropy(x, target, weight, reduction: int, ignore_index: int):
    """cross_entropy_loss (class targets, no label smoothing) as CUDA's autocast runs it: log_softmax at the
    input's type (cross_entropy asks for that type, which autocast's FP32 rule leaves alone), nll_loss in FP32."""
    logp = torch.log_softmax(x, 1 if x.dim() > 1 else 0, dtype=x.dtype)
    return torch.nn.functional.nll_loss(logp.float(), target, None if weight is None else weight.float(),
                                        ignore_index=ignore_index, reduction=("none", "mean", "sum")[reduction])


def _casts(t) -> bool:
    """A tensor autocast would cast: floating point, not float64."""
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


@contextlib.contextmanager
def _bodies():
    """torch.nn.functional's Python functions run their own bodies while a mode is on, not the mode's handler:
    their check for an override answers no (a tensor subclass with one of its own is not counted here)."""
    import torch.nn.functional as F

    names = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
    saved = {n: getattr(F, n) for n in names}
    for n in names:
        setattr(F, n, lambda *_: False)
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(F, n, f)

"""What one optimiser step costs: FLOPs, bytes moved and kernel launches, counted once per trial.

    count(step, on_gpu)        # {'flops_per_step': ..., 'bytes_per_step': ..., 'launches_per_step': ...,
                               #  'matmul_flops_per_step': ..., ... one of each measure per op class}

A trial's loop calls it (trainables/measure.py, after the timed epochs and evaluation), on copies of the model
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

The same three are split by op class (analysis/schema.py OP_CLASSES), the per-layer model's input
(analysis/model.py): every aten op dispatched while an optimiser's step() runs is `optimizer`, whatever
it is; the others are classed by their aten name (`op_class`). FLOPs come from FlopCounterMode's per-op
counts, bytes and launches (aten ops that are not views) from Traffic, on every device alike: a class's
launches are its ops, about one kernel each on a GPU in eager mode.

analysis/model.py computes the same three from a row's configuration for rows written before these
columns existed; tests/test_costs.py checks that the two agree.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.flop_counter import FlopCounterMode

from analysis.schema import OP_CLASSES, OP_MEASURES

# CUDA runtime and driver calls that launch a kernel or a captured graph (torch.profiler's names).
LAUNCH_EVENTS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                 "cudaLaunchCooperativeKernel", "cudaGraphLaunch")


# aten names (overload packets) of the matrix products; a convolution's name holds "conv" (convolution,
# convolution_backward, cudnn_convolution, conv_depthwise2d), a norm's "_norm" (native_batch_norm,
# native_layer_norm_backward, cudnn_batch_norm, native_group_norm, _fused_rms_norm)
MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv", "dot",
                     "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                     "_scaled_dot_product_cudnn_attention", "_efficient_attention_backward",
                     "_scaled_dot_product_efficient_attention_backward",
                     "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_cudnn_attention_backward",
                     "_flash_attention_forward", "_flash_attention_backward"})


def op_class(name: str) -> str:
    """The class of an aten op that runs outside an optimiser's step, from its name: 'addmm' -> matmul,
    'convolution_backward' -> conv, 'native_batch_norm' -> norm, anything else -> elementwise."""
    if name in MATMULS:
        return "matmul"
    if "conv" in name:
        return "conv"
    return "norm" if "_norm" in name else "elementwise"


class Traffic(TorchDispatchMode):
    """Counts the aten ops dispatched that are not views, and the bytes they read and write (each tensor
    input and output once; see the module's docstring), in all and per op class (`ops`, `bytes` by class)."""

    def __init__(self):
        super().__init__()
        self.by_class = {"ops": Counter(), "bytes": Counter()}
        self.in_optimizer = False  # set by the optimiser step hooks around every optimiser's step()

    @property
    def ops(self) -> int:
        return sum(self.by_class["ops"].values())

    @property
    def bytes(self) -> int:
        return sum(self.by_class["bytes"].values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            cls = "optimizer" if self.in_optimizer else op_class(func.overloadpacket.__name__)
            tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
            self.by_class["ops"][cls] += 1
            self.by_class["bytes"][cls] += sum(t.numel() * t.element_size() for t in tensors)
        return out

    def __enter__(self):
        self._hooks = (register_optimizer_step_pre_hook(lambda *_: setattr(self, "in_optimizer", True)),
                       register_optimizer_step_post_hook(lambda *_: setattr(self, "in_optimizer", False)))
        return super().__enter__()

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()
        return super().__exit__(*exc)


def cuda_launches(step: Callable[[], None]) -> int:
    """Kernel launches of one call of `step`, from torch.profiler's CUDA runtime events.

    The profiler leaves CUPTI attached to the process after it stops unless Kineto is told to tear it
    down (TEARDOWN_CUPTI=1; PyTorch sets it to 0 itself once CUDA graphs were captured), and every
    later kernel launch pays for it: a worker reused for trial after trial timed all but its first
    trial slower (docs/parity.md). Set here, where a user's own choice still wins."""
    os.environ.setdefault("TEARDOWN_CUPTI", "1")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for event in prof.events() if event.name in LAUNCH_EVENTS)


def count(step: Callable[[], None], on_gpu: bool) -> dict:
    """FLOPs, bytes and launches of one step: `step` is called twice (counted, then profiled on a GPU),
    so it must be safe to repeat (a copy of the model and optimiser)."""
    with FlopCounterMode(display=False) as flops, Traffic() as traffic:
        step()
    per_op = flops.get_flop_counts().get("Global", {})  # FlopCounterMode counts no op of the optimiser's
    by_class = {"flops": Counter(), "launches": traffic.by_class["ops"], "bytes": traffic.by_class["bytes"]}
    for op, n in per_op.items():
        by_class["flops"][op_class(op.__name__)] += n
    return {"flops_per_step": int(flops.get_total_flops()), "bytes_per_step": int(traffic.bytes),
            "launches_per_step": cuda_launches(step) if on_gpu else traffic.ops,
            **{f"{c}_{m}_per_step": int(by_class[m][c]) for c in OP_CLASSES for m in OP_MEASURES}}

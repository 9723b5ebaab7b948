"""What one optimiser step costs: FLOPs, bytes moved and kernel launches, counted once per trial.

    count(step, on_gpu)        # {'flops_per_step': ..., 'bytes_per_step': ..., 'launches_per_step': ...,
                               #  'matmul_flops_per_step': ..., ... one of each measure per op class}

A trial's loop calls it (trainables/measure.py, after the timed epochs and evaluation), on copies of the model
and optimiser (so the trial's own weights and random state are untouched), and after its row's timings
are taken: the counting's own time is in no timing column, total_s included. What is counted:

- FLOPs: torch.utils.flop_counter's formulas (FlopCounterMode's registry, `flop_formulas`) over one forward,
  backward and optimiser step, applied op by op as the ops are dispatched (Traffic), so that one pass of the
  step counts every measure. They count matrix products and convolutions (2 FLOPs a multiply-add), not
  element-wise ops, so an optimiser's arithmetic counts 0: those ops are memory-bound and are in the bytes. A
  grouped or depthwise convolution's backward is counted by a formula of ours (`grouped_conv_backward_flops`):
  torch's counts its weight's gradient `groups` times over.
- Bytes: an estimate. Every aten op that is not a view reads each of its tensor inputs once and writes
  each of its outputs once, from and to the device's memory: no cache reuse, no fusion. So a
  Linear's forward reads the batch, the weight and the bias and writes its output; an SGD step reads
  the weights and the gradients and writes the weights; Adam reads and writes its two moments too.
  Small models fit in the caches and move less; fused kernels move less.
- Launches: on a GPU, the kernel launches torch.profiler records (its CUDA runtime events named
  cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel...); on the CPU, the aten ops dispatched that
  are not views (each pays the dispatcher's fixed cost). docs/model.md says how the model uses them.
- cuDNN's recurrent nets: on a GPU, nn.LSTM, nn.GRU and nn.RNN run as one `_cudnn_rnn` op forward and one
  `_cudnn_rnn_backward`, where the CPU spells each time step out in cell ops. Both are matrix products at
  heart: their FLOPs are counted from the weights' shapes (`rnn_flops`, which torch has no formula for), and each counts as the kernels cuDNN launches for it (`rnn_kernels`), not as one op, so
  that a GPU's count and a meta count that takes the same op (sweeps/count_step.py `rnn_as_on_a_gpu`) say
  what the GPU runs.

- Forward ops: of those aten ops, the ones dispatched by the forward pass, which the workload's Python calls
  one by one (an nn.Module's call, the interpreter), where autograd's engine dispatches the backward's from
  C++ and a foreach optimiser its own: the host pays more for each (docs/model.md). A cuDNN RNN op is one.

The same three are split by op class (crossover/schema.py OP_CLASSES), the per-layer model's input
(analysis/model/): every aten op dispatched while an optimiser's step() runs is `optimizer`, whatever
it is; the others are classed by their aten name (`op_class`), and so are FLOPs, wherever dispatched. All three
come from Traffic, on every device alike (launches: aten ops that are not views): a class's
launches are its ops, about one kernel each on a GPU in eager mode. A class the step does not use counts 0, never
null (a U-Net has no matrix product, an MLP no convolution): null is kept for a step that was not counted.

And op by op (`ops_per_step`, `ops_json`): each distinct op's kind (its class, or `conv_grouped` for a grouped
or depthwise convolution: `op_kind`), dtype, FLOPs, bytes and launches, and how many times the step dispatched it;
the per-class columns are its sums.

analysis/model/ computes the same three from a row's configuration for rows written before these
columns existed; tests/test_costs.py checks that the two agree.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.flop_counter import FlopCounterMode, conv_backward_flop

from crossover.schema import FORWARD_OPS, OPS_PER_STEP, OP_CLASSES, OP_MEASURES

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


# cuDNN's whole recurrent net, forward and backward: a matrix product per layer and time step and the gates'
# element-wise arithmetic in between, a class of its own (rnn): a chain of small kernels, each waiting on the one
# before, at cuDNN's precision, where a convolution is a few large ones
RNNS = frozenset({"_cudnn_rnn", "_cudnn_rnn_backward"})
# Kernels cuDNN launches for one RNN call, forward and backward: (a, b, c) in a x time steps x layers x directions
# + b x layers x directions + c, least squares over 72 configurations profiled on an H100 (LSTM and GRU; 8, 32
# and 128 steps; 1, 2 and 4 layers; one or two directions; batch 32 and 128; docs/model.md, "What each row
# records"): about two kernels a step each way, the sequential recurrence.
RNN_KERNELS = {"_cudnn_rnn": (2.03, -0.80, 10.6), "_cudnn_rnn_backward": (2.02, 4.37, 15.3)}


def op_class(name: str) -> str:
    """The class of an aten op that runs outside an optimiser's step, from its name: 'addmm' -> matmul,
    'convolution_backward' -> conv, '_cudnn_rnn' -> rnn, 'native_batch_norm' -> norm, anything else ->
    elementwise. Classes conv and rnn are what cuDNN computes, at cuDNN's precision: TF32 by default
    (torch.backends.cudnn.allow_tf32), where PyTorch's matrix products run at strict FP32."""
    if name in MATMULS:
        return "matmul"
    if name in RNNS:
        return "rnn"
    if "conv" in name:
        return "conv"
    return "norm" if "_norm" in name else "elementwise"


def op_kind(func, args, kwargs, cls: str) -> str:
    """An op's class as the per-op model reads it (`Traffic.per_op`): its class, but 'conv_grouped' for a grouped or
    depthwise convolution, forward or backward, whose kernels reach a fraction of the bandwidth a dense one's
    arithmetic hides (the operator study: 3-6x slower than their bytes at the element-wise ops' pace,
    docs/validation.md). The per-class columns keep it in conv."""
    if cls != "conv":
        return cls
    call = _call(func, args, kwargs)
    return "conv_grouped" if "depthwise" in func.overloadpacket.__name__ or call.get("groups", 1) > 1 else cls


def _call(func, args, kwargs) -> dict:
    """An op's call's arguments by their schema's names (a `_cudnn_rnn`'s, a convolution's)."""
    names = [a.name for a in func._schema.arguments]
    return {**dict(zip(names, args)), **(kwargs or {})}


def _rnn_steps(call: dict) -> tuple[int, int]:
    """(time steps x layers x directions, samples x time steps) of a cuDNN RNN call: the recurrence's
    sequential steps, and the rows every layer's matrix products take (a packed sequence's rows, its
    `batch_sizes` summed, are its input's)."""
    x, packed = call["input"], call["batch_sizes"]
    steps = len(packed) if packed else x.shape[1 if call["batch_first"] else 0]
    return steps * call["num_layers"] * (2 if call["bidirectional"] else 1), x.numel() // x.shape[-1]


def rnn_kernels(func, args, kwargs) -> int:
    """Kernels cuDNN launches for one `_cudnn_rnn` or `_cudnn_rnn_backward` call (RNN_KERNELS)."""
    call = _call(func, args, kwargs)
    steps, _ = _rnn_steps(call)
    per_step, per_layer, fixed = RNN_KERNELS[func.overloadpacket.__name__]
    layers = call["num_layers"] * (2 if call["bidirectional"] else 1)
    return max(1, round(per_step * steps + per_layer * layers + fixed))


def rnn_flops(func, args, kwargs) -> int:
    """FLOPs of one `_cudnn_rnn` (forward) or `_cudnn_rnn_backward` call, from its weights' shapes: every
    weight matrix (input-hidden, hidden-hidden, an LSTM's projection) multiplies each row of its layer's
    input once, 2 FLOPs a multiply-add, so the forward is 2 x rows x the matrices' elements summed (an
    LSTM: 4 gates x 2 x (input + hidden) x hidden a row and layer). The backward is the forward again for
    the gradients of the input and the states, which torch has cuDNN compute whether they are wanted or not
    (the weights' gradients need the gates' gradients it makes on the way), and again for the weights'
    gradients where they are wanted (the last of its `output_mask`)."""
    call = _call(func, args, kwargs)
    _, rows = _rnn_steps(call)
    forward = 2 * rows * sum(w.numel() for w in call["weight"] if w.dim() == 2)
    if func.overloadpacket.__name__ == "_cudnn_rnn":
        return forward
    return forward * (1 + bool(call["output_mask"][3]))


def _raw(op):
    """`rnn_flops` of `op` as FlopCounterMode's custom_mapping calls it: marked raw, so that it is handed the
    op's own arguments (a list of weights, flags) and not only their shapes."""
    def flops(*args, out_val=None, **kwargs):
        return rnn_flops(op, args, kwargs)
    flops._get_raw = True  # type: ignore[attr-defined]  # read by FlopCounterMode; mypy knows no function attributes
    return flops


def grouped_conv_backward_flops(grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed,
                                output_padding, groups, output_mask, out_shape=None, **kwargs) -> int:
    """FLOPs of `convolution_backward`: each gradient asked for (input's, weight's: `output_mask`) is as many
    multiply-adds as the forward, one per element of the output's gradient and of a filter (the weight's shape past
    its first dimension, which is in-channels / groups). torch's own formula (torch.utils.flop_counter
    conv_backward_flop) counts the weight's gradient as a convolution over every channel, `groups` times what a
    grouped or depthwise convolution computes: a MobileNet's 3x3 depthwise backward 16x over (docs/validation.md, "The
    operator study"). A transposed convolution keeps torch's formula."""
    if transposed:  # torch's own function, not the registered wrapper that takes tensors and adds out_shape itself
        # register_flop_formula's wrapper keeps the formula as __wrapped__ (functools.wraps), which torch's annotation
        # of the decorator (it returns the function's own type) does not say: hence the ignore
        return conv_backward_flop.__wrapped__(  # type: ignore[attr-defined]
            grad_out_shape, x_shape, w_shape, bias, stride, padding, dilation, transposed, output_padding, groups,
            output_mask, out_shape)
    per_gradient = 2 * math.prod(grad_out_shape) * math.prod(w_shape[1:])
    return per_gradient * (bool(output_mask[0]) + bool(output_mask[1]))


# FlopCounterMode's formulas where torch has none (cuDNN's recurrent nets) or miscounts (grouped convolutions)
FLOP_FIXES = {**{op: _raw(op.default) for op in (torch.ops.aten._cudnn_rnn, torch.ops.aten._cudnn_rnn_backward)},
              torch.ops.aten.convolution_backward: grouped_conv_backward_flops}


def flop_formulas() -> dict:
    """An aten op's overload packet -> its FLOPs' formula, as FlopCounterMode(custom_mapping=FLOP_FIXES) holds them:
    read when a step is counted, so that a formula a job registers (torch.utils.flop_counter.register_flop_formula)
    is one."""
    return FlopCounterMode(display=False, custom_mapping=FLOP_FIXES).flop_registry


def _dtype(tensors: list[torch.Tensor]) -> str:
    """The dtype an op computes in, by name ('float32', 'bfloat16'): its first floating-point tensor's (an
    autocast op's inputs are cast before it is dispatched), 'none' where it has none."""
    return next((str(t.dtype).removeprefix("torch.") for t in tensors if t.is_floating_point()), "none")


class Traffic(TorchDispatchMode):
    """Counts the aten ops dispatched that are not views, the bytes they read and write (each tensor input and
    output once; see the module's docstring) and their FLOPs (`flop_formulas`), in all and per op class (`ops`,
    `bytes` by class; `flops` by the op's own class, `op_class`, in an optimiser's step too).
    A cuDNN RNN op counts as the kernels it launches (`rnn_kernels`). `forward` counts the ops the forward
    pass dispatches, one each (outside autograd's backward, which `_current_graph_task_id` tells, and the
    optimiser's step). `per_op` counts each distinct op as the per-op model reads it (`ops_json`): (class,
    `op_kind`'s, dtype, FLOPs, bytes, launches) -> how many times a step dispatched it."""

    def __init__(self):
        super().__init__()
        self.formulas = flop_formulas()
        self.by_class: dict[str, Counter[str]] = {"ops": Counter(), "bytes": Counter(), "flops": Counter()}
        self.per_op: Counter[tuple] = Counter()
        self.forward = 0
        self.in_optimizer = False  # set by the optimiser step hooks around every optimiser's step()
        self.sequence: list[tuple] = []  # per_op's keys in the order the step dispatched them (`count`'s sequence)

    @property
    def ops(self) -> int:
        return sum(self.by_class["ops"].values())

    @property
    def bytes(self) -> int:
        return sum(self.by_class["bytes"].values())

    @property
    def flops(self) -> int:
        return sum(self.by_class["flops"].values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            name = func.overloadpacket.__name__
            cls = "optimizer" if self.in_optimizer else op_class(name)
            tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
            launches = rnn_kernels(func, args, kwargs) if name in RNNS else 1
            moved = sum(t.numel() * t.element_size() for t in tensors)
            formula = self.formulas.get(func.overloadpacket)
            flops = int(formula(*args, **(kwargs or {}), out_val=out)) if formula else 0
            self.by_class["ops"][cls] += launches
            self.by_class["bytes"][cls] += moved
            self.by_class["flops"][op_class(name)] += flops
            key = (op_kind(func, args, kwargs, cls), _dtype(tensors), flops, moved, launches)
            self.per_op[key] += 1
            self.sequence.append(key)
            self.forward += not self.in_optimizer and torch._C._current_graph_task_id() == -1
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


def ops_json(per_op: Counter) -> str:
    """`Traffic.per_op` as a row keeps it (column ops_per_step): a JSON list of [class, dtype, FLOPs, bytes,
    launches, times dispatched], the largest FLOPs and bytes first."""
    return json.dumps([[*key, n] for key, n in sorted(per_op.items(), key=lambda kv: (-kv[0][2], -kv[0][3]))])


def count(step: Callable[[], None], on_gpu: bool, sequence: bool = False) -> dict:
    """FLOPs, bytes and launches of one step: `step` is called twice (counted, then profiled on a GPU),
    so it must be safe to repeat (a copy of the model and optimiser). With `sequence`, also `ops_sequence`: every
    op as ops_json lists it ([kind, dtype, FLOPs, bytes, launches]), in the order the step dispatched them, which
    sweeps/count_step.py lines up between two batch sizes (crossover/step.py `Counted`); a row keeps no such column."""
    with Traffic() as traffic:
        step()
    by_class = {"flops": traffic.by_class["flops"], "launches": traffic.by_class["ops"],
                "bytes": traffic.by_class["bytes"]}
    return {"flops_per_step": traffic.flops, "bytes_per_step": int(traffic.bytes),
            "launches_per_step": cuda_launches(step) if on_gpu else traffic.ops,
            FORWARD_OPS: traffic.forward, OPS_PER_STEP: ops_json(traffic.per_op),
            **{f"{c}_{m}_per_step": int(by_class[m][c]) for c in OP_CLASSES for m in OP_MEASURES},
            **({"ops_sequence": [list(key) for key in traffic.sequence]} if sequence else {})}


def replayed(counted: dict, launches: int | None) -> dict:
    """`counted` (an eager count) for a step that a captured graph or a compiled program runs instead: its
    own launches (None where unknown), and no per-class launches or forward ops, which the eager ops were."""
    return {**counted, "launches_per_step": launches, FORWARD_OPS: None,
            **{f"{c}_launches_per_step": None for c in OP_CLASSES}}

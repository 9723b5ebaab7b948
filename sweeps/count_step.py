"""One training step of a workload counted on the CPU, never timed: what `crossover predict` needs of a job.

    python -m crossover.sweeps.count_step --workload job.py:workload [--batch-size 128] [--dataset-size 50000] [--param k=v]
        [--precision default --precision bf16]

sweeps/counting.py runs this in a process of its own, with a time limit, so that the user's code (imported
and run here: make_data, make_model, one step) never runs in the command's own process. It prints one
JSON object on stdout: `config`, the configuration's columns as a trial's row has them (workload, batch_size,
dataset_size, the workload's own axes as workload_params, engine 'eager'), n_params (the parameters that train) and
n_frozen_params (those that do not: requires_grad False, weights with no gradient and no optimiser state),
n_param_tensors (the tensors that train: DDP's reducer works a tensor at a time, analysis/model/collective.py) and model;
and `counted`, per precision asked, the step counted at two batch sizes (`pairs`), a line in the batch
(crossover.step Counted, whose `at` gives a row's columns at any batch: sweeps/count_cache.py keeps it, so that a
later call at another batch size is arithmetic). Each count is the step's costs (trainables/costs.py) op by op,
counted as a CPU trial's row counts them (trainables/train.py, Loop.step_costs: a copy of the model and optimiser,
one batch) but for the optimiser's update, attention and recurrent nets, counted as a GPU runs them (`as_on_a_gpu`,
`attention_as_on_a_gpu`, `rnn_as_on_a_gpu`; for the peak, dropout too: `dropout_as_on_a_gpu`), and where
(`counted_on`). The step runs on the meta device first: shapes alone, no arithmetic, the same counts as the CPU's
(tests/test_predict.py checks) in a fraction of the time, at the run's batch and half of it. Where the workload's code
needs real values (an .item(), a shape that depends on the data: a detector's proposals, a mixture of experts'
routing), it runs on the CPU, for real, at the smallest batches that show how the step grows (SMALLEST), never at
the run's: its ops are lined up between the two (crossover.step `_lined_up`). The data is made one batch large: a
step's costs do not depend on the dataset's size, and 50,000 images need not be made to count one batch of them.

A config it cannot run (a bad reference, axis or value) is one line on stderr and exit status 2; an error raised by
the workload's own code is its traceback's frames in the job's own files, then one line, its type, words and
where (`in make_model, job.py:10`, as a failed trial's row says it), and exit status 1; so is a step whose costs
could not be counted on the meta device nor on the CPU (an op the counters do not know: the line names it). An op
class the step does not use is counted 0 (trainables/costs.py), never left out: a net without a matrix product is
answered.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys

from crossover.config import PRECISIONS
from crossover.step import Counted

from ..trainables.job import named
from .cli import at_least, param


def as_on_a_gpu(opt) -> None:
    """The optimiser's update as torch.optim runs it on a GPU where the job leaves the choice to it
    (foreach=None): its multi-tensor (foreach) ops, a few a step, where the meta device and the CPU take the
    loop of an op or more per parameter tensor. The count is then the one a GPU row has (ResNet-18's SGD
    with momentum: 186 ops a step on the CPU, 3 on the GPU; the reference rows of 2026-11-26), which is
    what analysis/model/'s launch terms were fitted on."""
    for group in opt.param_groups:
        if group.get("foreach", False) is None:
            group["foreach"] = True


@contextlib.contextmanager
def attention_as_on_a_gpu():
    """torch.nn.functional.scaled_dot_product_attention, while a step is counted here, as a GPU runs it: one
    fused kernel forward and one backward (the memory-efficient attention, which has shapes on the meta
    device), where the meta device would decompose it into its math, a dozen ops (a 2-layer transformer: 182
    ops a step counted so, 149 fused; the reference rows' GPU count is the fused one). A call it cannot take
    (grouped-query attention, a mask the kernel refuses) is counted as the meta device has it."""
    import torch
    import torch.nn.functional as F

    math = F.scaled_dot_product_attention

    def fused(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if query.device.type == "meta" and not enable_gqa:
            try:
                return torch.ops.aten._scaled_dot_product_efficient_attention(
                    query, key, value, attn_mask, query.requires_grad, dropout_p, is_causal, scale=scale)[0]
            except RuntimeError:
                pass
        return math(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)

    F.scaled_dot_product_attention = fused  # this process counts one step and ends: nothing else sees it
    try:
        yield
    finally:
        F.scaled_dot_product_attention = math


@contextlib.contextmanager
def dropout_as_on_a_gpu(fuse: bool = True, seen: set[str] | None = None):
    """torch.nn.functional.dropout in training, while a step's peak is counted here, as a GPU runs it: one fused
    kernel (aten::native_dropout) that keeps a mask of one byte an element (bool) for the backward, where the meta
    device and the CPU build the mask in the input's dtype (empty_like, bernoulli_, div_, mul) and keep that: 4 bytes
    an element at fp32, 2 under bf16 autocast. PyTorch's aten/src/ATen/native/Dropout.cpp `dropout` takes
    native_dropout only where `is_fused_kernel_acceptable` (a CUDA, XPU or PrivateUse1 input, 0 < p < 1, not
    empty); native_dropout_cuda (cuda/Dropout.cu) makes its mask kBool. A BERT-base block at batch 128 keeps 6 x
    batch x tokens x width elements of masks (after the attention, in the MLP, after the MLP): 0.23 GB a block more
    on the meta device at fp32. The in-place dropout_ and the feature and alpha dropouts are not fused on a GPU
    either, and are counted as they run; a direct torch.dropout call too (not through F.dropout).

    Only for the step's peak: the costs are counted as the shipped counts and the fit on them were (the
    decomposition's ops, where a GPU runs one). Without `fuse` (a step counted for its costs) each call runs as the
    meta device and the CPU run it; `seen` gets 'dropout' where a call ran that a GPU fuses."""
    import torch
    from torch import _VF

    plain = _VF.dropout

    def fused(input, p, train):
        if train and 0 < p < 1 and input.numel() > 0:
            if seen is not None:
                seen.add("dropout")
            if fuse:
                return torch.native_dropout(input, p, train)[0]
        return plain(input, p, train)

    _VF.dropout = fused  # this process counts one step and ends: nothing else sees it
    try:
        yield
    finally:
        _VF.dropout = plain


# cuDNN's RNN modes (cudnnRNNMode_t), by the name of torch._VF's function that nn.RNN, nn.LSTM and nn.GRU call
CUDNN_MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}


def _cudnn_rnn_backward_shapes(input, weight, weight_stride0, weight_buf, hx, cx, output, grad_output, grad_hy,
                               grad_cy, mode, hidden_size, proj_size, num_layers, batch_first, dropout, train,
                               bidirectional, batch_sizes, dropout_state, reserve, output_mask):
    """aten::_cudnn_rnn_backward on the meta device, which torch gives no kernel: the gradients' shapes,
    each where its output_mask asks for it, as the CUDA kernel returns them."""
    import torch

    def like(t, wanted):
        return torch.empty_like(t) if wanted and t is not None else None

    return (like(input, output_mask[0]), like(hx, output_mask[1]), like(cx, output_mask[2]),
            [torch.empty_like(w) for w in weight] if output_mask[3] else [])


def _rnn_shape(input, batch_first: bool) -> tuple[int, int]:
    """(time steps, samples) of an unpacked recurrent net's input."""
    return (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])


def _workspace(name: str, input, hidden: int, bidirectional: bool, batch_first: bool):
    """A meta tensor of the bytes cuDNN's workspace holds during one call (trainables/memory.py)."""
    import torch

    from ..trainables.memory import cudnn_rnn_workspace_bytes

    size = cudnn_rnn_workspace_bytes(name, *_rnn_shape(input, batch_first), hidden, 1 + bidirectional,
                                     input.element_size())
    return torch.empty(size, dtype=torch.uint8, device=input.device)


def _cudnn_rnn_meta(input, weight, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size, num_layers,
                    batch_first, dropout, train, bidirectional, batch_sizes, dropout_state):
    """aten::_cudnn_rnn on the meta device as torch's own (torch._meta_registrations), but with the reserve space
    a training call returns at the size cuDNN gives it (trainables/memory.py `cudnn_rnn_reserve_bytes`), where
    torch's is empty: autograd keeps it for the backward, so it counts from the forward until then."""
    import torch
    from torch._meta_registrations import _cudnn_rnn

    from ..trainables.memory import cudnn_rnn_reserve_bytes

    output, hy, cy, reserve, weight_buf = _cudnn_rnn(
        input, weight, weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size, num_layers, batch_first,
        dropout, train, bidirectional, batch_sizes, dropout_state)
    if train and not batch_sizes:
        name = next(n for n, m in CUDNN_MODES.items() if m == mode)
        size = cudnn_rnn_reserve_bytes(name, *_rnn_shape(input, batch_first), hidden_size, num_layers,
                                       1 + bidirectional, input.element_size())
        reserve = input.new_empty(size, dtype=torch.uint8)
    return output, hy, cy, reserve, weight_buf


@contextlib.contextmanager
def rnn_as_on_a_gpu(buffers: bool = False, seen: set[str] | None = None):
    """nn.LSTM, nn.GRU and nn.RNN, while a step is counted here on the meta device, as a GPU runs them: one
    cuDNN op forward (`aten::_cudnn_rnn`, which has shapes on the meta device) and one backward (given its
    shapes here for the count's lifetime), which trainables/costs.py counts as cuDNN's kernels and matrix
    products, where the meta device and the CPU spell every time step out in cell ops (a 2-layer LSTM over
    32 steps: about 2,350 ops a step; its reference rows' GPU count has 29 ops and two cuDNN calls). A packed
    sequence is counted as the meta device has it.

    With `buffers`, the memory cuDNN holds besides, which the meta device gives none of, is made as a GPU makes
    it, so that trainables/memory.py's tracker sees it: the reserve space the forward returns and autograd keeps
    for the backward (`_cudnn_rnn_meta`), and a workspace while the forward runs and again while its backward runs
    (trainables/memory.py `cudnn_rnn_reserve_bytes`, `cudnn_rnn_workspace_bytes`). Only for the step's peak: the
    costs are counted without them, as the shipped counts and the fit on them were (the workspace would be an op
    more and its bytes, the reserve bytes the rnn class moves). `seen` gets the net's name (`CUDNN_MODES`) where a
    call was taken as cuDNN's, whose buffers a peak counted without them lacks."""
    import torch
    from torch import _VF
    from torch.utils._python_dispatch import _disable_current_modes

    def cudnn(name):
        unrolled = getattr(_VF, name)

        def run(*args):
            # unpacked: (input, hx, params, has_biases, ...); packed: (data, batch_sizes, hx, params, ...)
            if args[0].device.type != "meta" or not isinstance(args[3], bool):
                return unrolled(*args)
            input, hx, params, _, layers, dropout, train, bidirectional, batch_first = args
            if seen is not None:
                seen.add(name)
            h, c = hx if name == "lstm" else (hx, None)
            hidden = (c if c is not None else h).shape[-1]
            with _disable_current_modes():  # on a GPU the module's weights already live in one flat buffer
                flat = torch.empty(sum(p.numel() for p in params), dtype=input.dtype, device=input.device)
            workspace = _workspace(name, input, hidden, bidirectional, batch_first) if buffers else None
            out = torch.ops.aten._cudnn_rnn(
                input, list(params), len(params) // (layers * (2 if bidirectional else 1)), flat, h, c,
                CUDNN_MODES[name], hidden, h.shape[-1] if h.shape[-1] != hidden else 0, layers, batch_first,
                dropout, train, bidirectional, [], None)
            del workspace
            if buffers and out[0].grad_fn is not None:  # and again while its backward runs, made and freed around it
                held = []
                out[0].grad_fn.register_prehook(
                    lambda grads: held.append(_workspace(name, input, hidden, bidirectional, batch_first)))
                out[0].grad_fn.register_hook(lambda *_: held.clear())
            return out[:3] if name == "lstm" else out[:2]
        return run

    lib = torch.library.Library("aten", "IMPL")
    # over torch's own Python meta kernels where it has them (torch 2.11 registers one for _cudnn_rnn and refuses a
    # second unless told: allow_override is True by default from a later torch on)
    lib.impl("_cudnn_rnn_backward", _cudnn_rnn_backward_shapes, "Meta", allow_override=True)
    if buffers:
        lib.impl("_cudnn_rnn", _cudnn_rnn_meta, "Meta", allow_override=True)
    originals = {name: getattr(_VF, name) for name in CUDNN_MODES}
    for name in CUDNN_MODES:  # this process counts one step and ends: nothing else sees them
        setattr(_VF, name, cudnn(name))
    try:
        yield
    finally:
        for name, f in originals.items():
            setattr(_VF, name, f)
        lib._destroy()


@contextlib.contextmanager
def as_a_gpu_runs(peak: bool):
    """A step counted here as a GPU runs it: its attention (`attention_as_on_a_gpu`) and cuDNN's recurrent nets
    (`rnn_as_on_a_gpu`); for its `peak`, cuDNN's buffers and dropout's fused kernel too (`dropout_as_on_a_gpu`).
    Yields the names of the calls a step ran that a peak counts otherwise than the costs do (a dropout a GPU fuses,
    a cuDNN RNN): where none ran, a step counted for its costs holds the peak a step counted for its peak does."""
    seen: set[str] = set()
    with attention_as_on_a_gpu(), rnn_as_on_a_gpu(buffers=peak, seen=seen), \
            dropout_as_on_a_gpu(fuse=peak, seen=seen):
        yield seen


class Uncounted(Exception):
    """A step that ran but whose costs the counters could not take (an op they do not know): the line says which."""


SMALLEST = ((1, 2), (2, 3))  # samples of the two steps counted for real on the CPU: the second pair where a step of
# one sample cannot run (a norm over the batch of a vector a sample)


def pairs(batch: int, on_meta: bool) -> tuple[tuple[int, int], ...]:
    """The two batch sizes a step is counted at, the smaller first, and a second choice where the first fails: on the
    meta device, which computes nothing, the run's and half of it (the two its peak is found from, trainables/train.py
    step_peak), or one and two samples; on the CPU, where the step runs for real, the smallest that show how it grows
    (SMALLEST), never the run's batch: a detector of 512-px images steps a second or more an image there."""
    if not on_meta:
        return SMALLEST
    return ((batch // 2, batch) if batch > 1 else (1, 2),)


def _count(trial, where, precision: str):
    """The trial's step at `precision` counted on `where` at two batches (`pairs`): FLOPs, bytes and launches op by
    op at each, and the peak from the same two steps (a line through them: trainables/train.py `peak_line`), but
    where a call ran whose peak a GPU holds otherwise (`as_a_gpu_runs`), which a pass of its own at the two batches
    counts; (Counted, the model). Raises where it cannot be counted."""
    import torch

    from ..trainables.timing import Clock, Timer
    from ..trainables.train import Loop

    options = pairs(trial.cfg.batch_size, where.input_device.type == "meta")
    for sizes in options:
        one = dataclasses.replace(trial, cfg=dataclasses.replace(trial.cfg, dataset_size=sizes[1], batch_size=sizes[1],
                                                                 precision=precision))
        torch.manual_seed(one.cfg.seed)
        try:
            loop = Loop.build(one, where, Timer(Clock(where.devices)))
            loop.prime(sizes[0])  # the optimiser's state made once, not in each copy counted
            as_on_a_gpu(loop.opt)
            rows, peaks = [], {}
            with as_a_gpu_runs(peak=False) as apart:
                for size in sizes:  # the last on the loop's own model and optimiser: nothing steps them after it
                    own = size == sizes[-1]
                    costs = loop.step_costs(size, sequence=True, peak=True, own=own)
                    if "costs_note" in costs:  # the memory tracker, not the counters, may be what failed: alone
                        costs = loop.step_costs(size, sequence=True, own=own)
                    if "costs_note" in costs:  # an op the counters do not know
                        raise Uncounted(f"one step ran but its costs were {costs['costs_note']}; nothing can be "
                                        "predicted without them")
                    if "peak_memory_bytes" in costs:
                        peaks[size] = costs.pop("peak_memory_bytes")
                    rows.append({"batch_size": size, **costs})
            if apart or len(peaks) < 2:  # the peak counted as a GPU holds it, in a pass of its own
                with as_a_gpu_runs(peak=True):
                    rows[1] |= loop.step_peak(sizes)
            else:
                rows[1] |= loop.peak_line(peaks)
        except Exception:
            if sizes == options[-1]:
                raise
            continue
        return Counted.of(*rows), loop.model
    raise AssertionError("unreachable: the last pair raises or returns")


def counted(ref: str, batch_size: int | None, dataset_size: int | None, axes: dict, params: dict,
            precision: str = "default") -> dict:
    """The configuration's columns and one step's counted costs at `precision` (module docstring), at the run's
    batch and dataset size: `lines`' count there. None: the workload's default."""
    config, found = lines(ref, batch_size, dataset_size, axes, params, (precision,))
    return config | found[precision].at(config["batch_size"], config["dataset_size"])


def lines(ref: str, batch_size: int | None, dataset_size: int | None, axes: dict, params: dict,
          precisions: tuple[str, ...] = ("default",)) -> tuple[dict, dict[str, Counted]]:
    """The configuration's columns (module docstring) and its step counted at each of `precisions` (crossover.step
    Counted: at two batch sizes, a line in the batch); None: the workload's default; `axes`: depth, width, context
    where given; `params`: the workload's own axes. bf16 and fp16 are counted under CUDA's autocast policy on the
    meta device (trainables/precision.py GpuAutocast; fp16's GradScaler, a few ops a step, is not counted); tf32 and
    fp32 as the default is (the same ops, at other peaks). Raises ConfigError, WorkloadError (a bad config or
    reference) or whatever the workload's code raises."""
    import torch

    from crossover.config import TrialConfig, WorkloadError
    from ..trainables.job import EXAMPLES, is_reference
    from ..trainables.placement import Placement, placement
    from ..trainables.registry import Registry
    from ..trainables.trial import resolve
    from ..trainables.workloads import WORKLOADS, describe, n_frozen_params, n_params

    wl = Registry().register(ref) if is_reference(ref) else WORKLOADS.get(ref)  # imported in this process
    if wl is None:
        raise WorkloadError(f"--workload {ref!r}: no built-in of that name ({', '.join(sorted(WORKLOADS))}) nor "
                            f"example job ({', '.join(EXAMPLES)}); give your own as path/to/job.py:ATTR")
    # one step counted, no epoch timed: no warm-up to leave out of the workload's default epochs (`epochs: 1`)
    cfg = TrialConfig(wl.name, device="cpu", batch_size=batch_size, dataset_size=dataset_size, module=wl.ref,
                      params=params or None, warmup_epochs=0, **axes)
    trial = resolve(cfg)  # checked at the run's dataset size, as its trials would be
    c = trial.cfg
    assert c.batch_size is not None and c.dataset_size is not None, "resolve() fills in a trial's sizes"
    places = [Placement((torch.device("meta"),)), placement(trial.spec)]
    found: dict[str, Counted] = {}
    for precision in precisions:
        for where in list(places):
            try:
                step, model = _count(trial, where, precision)
            except Exception:
                if where is places[-1]:
                    raise
                # the workload's code needs real values (an .item(), a data-dependent shape): the CPU, at every
                # precision
                places = places[-1:]
                continue
            found[precision] = dataclasses.replace(step, row=step.row | {"counted_on": where.input_device.type,
                                                                         "precision": precision})
            break
    return {"workload": c.workload, "workload_module": c.module, "device": "cpu", "batch_size": c.batch_size,
            "dataset_size": c.dataset_size, "depth": c.depth, "width": c.width, "context": c.context, "lr": c.lr,
            "loop": c.loop, "engine": c.engine, "seed": c.seed,
            "workload_params": json.dumps(c.params, sort_keys=True) if c.params else None,
            "n_params": n_params(model), "n_frozen_params": n_frozen_params(model),
            "n_param_tensors": sum(p.requires_grad for p in model.parameters()), "model": describe(model)}, found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m crossover.sweeps.count_step", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", required=True, type=named,
                   help="path/to/job.py:ATTR, package.module:ATTR, or an example job's or a built-in's name")
    p.add_argument("--batch-size", type=at_least(1), default=None, help="samples a step (default: the workload's)")
    p.add_argument("--dataset-size", type=at_least(1), default=None, help="samples an epoch (default: the workload's)")
    for axis in ("depth", "width", "context"):
        p.add_argument(f"--{axis}", type=at_least(1), default=None, help=f"the workload's {axis} (default: its own)")
    p.add_argument("--param", action="append", default=[], type=param, metavar="NAME=VALUE",
                   help="a value of the workload's own axis; repeatable")
    p.add_argument("--precision", action="append", choices=PRECISIONS, default=None,
                   help="a precision the step is counted at, as crossover sweep --precision takes it; repeatable "
                        "(default: default, PyTorch's own)")
    args = p.parse_args(argv)
    from crossover.config import ConfigError, WorkloadError

    from ..trainables.rows import error_text

    axes = {a: getattr(args, a) for a in ("depth", "width", "context") if getattr(args, a) is not None}
    try:
        config, found = lines(args.workload, args.batch_size, args.dataset_size, axes, dict(args.param),
                              tuple(dict.fromkeys(args.precision or ["default"])))
    except (ConfigError, WorkloadError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except Uncounted as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the workload's own code: its traceback, then one line, as a failed trial's row says it
        said, frames = error_text(exc).split("\n", 1)
        print(f"Traceback (the job's own frames, innermost last):\n{frames.rstrip()}", file=sys.stderr)
        print(f"error: {said}", file=sys.stderr)
        return 1
    print(json.dumps({"config": config, "counted": {p: step.to_json() for p, step in found.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

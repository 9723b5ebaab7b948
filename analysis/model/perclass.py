"""The per-class model (the package's docstring gives its equations): each op class's host and GPU time, the
step's time from the two, and its least-squares fit on log step time.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from crossover.schema import FORWARD_OPS, OPS_PER_STEP, OP_CLASSES, OP_MEASURES

from ..load import precisions_of
from .counts import PER_CLASS, THREE_TERM
from .device_table import Device, MATCH_KEY
from .threeterm import Calibration, _terms, calibrate

EFFICIENCY = "_efficiency"  # a prediction's column: the GPU's public efficiency (Predictor.efficiency)


COMPUTE_CLASSES = ("matmul", "conv", "rnn")  # the classes with FLOPs counted (trainables/costs.py); the others are memory-bound


# An op of a step's list (ops_per_step) whose kind the per-class columns count in a class: a grouped or depthwise
# convolution (trainables/costs.py op_kind), priced as a convolution but for its bytes' share (m_grouped)
KINDS = {"conv_grouped": "conv"}


# The per-class model's parameters, fitted as logs, each pulled weakly (PRIOR_WEIGHT per unit of log) towards
# the value here: shared by every GPU (a CPU has its own).
PARAMETERS = {
    "u_matmul": 0.5,  # share of peak FLOP/s a large matmul reaches, in FP32 (CUDA cores)
    # the same on the tensor cores (TF32, BF16, FP16), whose peak is 8-15x FP32's and harder to reach: one share for
    # both put BERT-large's and GPT-2's bf16 steps at twice their time on an H100 (docs/validation.md, "Real-sized jobs")
    "u_tensor": 0.5,
    "half_matmul": 1e8,  # FLOPs per launch at which a matmul reaches half of that
    "u_conv": 0.5,  # the same for convolutions, in FP32 (cuDNN at strict FP32: precision fp32)
    # the same on the tensor cores (TF32 by default, BF16, FP16): the operator study's convolutions ran at 0.45x
    # the one share's prediction in FP32 and 1.0x at TF32 (docs/validation.md, "The operator study")
    "u_conv_tensor": 0.5,
    "half_conv": 1e8,  # FLOPs per launch
    "m_memory": 0.7,  # share of bandwidth a large memory-bound op reaches (every class's bytes)
    "half_memory": 1e6,  # bytes per launch at which an op reaches half of that
    # the same share for a norm's bytes: a batch norm's backward reads its input again for the statistics, which
    # the bytes counted (each tensor once) leave out; the operator study measured norms 1.5-3.8x slower than the
    # other classes' share priced them (docs/validation.md, "The operator study")
    "m_norm": 0.7,
    # the same for a grouped or depthwise convolution's bytes (KINDS): its kernels ran 3-6x slower than its bytes
    # at the element-wise ops' share in the operator study; fitted on the steps that list their ops (ops_per_step)
    "m_grouped": 0.7,
    # what one kernel launch of matmul, conv, norm or elementwise costs the host, in the device's launch
    # overheads: one for the four. A cost per class split conv from norm, which come in pairs, arbitrarily,
    # and priced DenseNet-121's element-wise ops 1.5x too dear (docs/validation.md, "One launch cost for the kernels")
    "k_launch": 1.0,
    # the same for one of the kernels cuDNN launches for a recurrent net (class rnn), and for each cuDNN RNN call
    # (`_cudnn_rnn`, `_cudnn_rnn_backward`) besides: cuDNN's own C++ issues a chain of small dependent kernels where
    # PyTorch dispatches an op for each of the other classes' kernels, and each call costs the host about a
    # millisecond of its own. The priors are the operator study's (results/reference/_ops, studies/opbench.py: each
    # LSTM or GRU case's wall time, two calls and its kernels, least squares per GPU and precision group, FP32/TF32
    # and BF16/FP16): 9.1-15.3 us a kernel and 1.1-1.6 ms a call on the H100's and the H200's hosts, geometric means
    # 11.7 us and 1.35 ms, over the table's 5 us overhead. Priced by k_launch alone, a fit without recurrent rows put
    # the speech LSTM's 3,681 kernels at 88% over its step (docs/validation.md, "cuDNN's kernels cost their own launch")
    "k_rnn": 2.3,
    "k_rnn_call": 270.0,
    "k_optimizer": 1.0,  # the same for the optimiser's launches: foreach kernels over every parameter
    "k_forward": 1.0,  # what an op of the forward pass costs the host besides: the workload's Python, nn.Module's call
    # how the host's and the GPU's times combine (`step_time`): 1 their sum, as the model had it until the real-sized
    # rows, whose compute-bound steps hide the host's dispatch behind the GPU's work (docs/validation.md, "Real-sized jobs")
    "overlap": 1.0,
}


RNN_CALLS = "rnn_calls"  # `_counts`' key of a step's cuDNN RNN calls (`_rnn_calls`)


# each class of `_counts` -> the parameter its launches cost
LAUNCH_COST = {**{c: {"optimizer": "k_optimizer", "rnn": "k_rnn"}.get(c, "k_launch") for c in OP_CLASSES},
               "forward": "k_forward", RNN_CALLS: "k_rnn_call"}


PRIOR_WEIGHT = 0.03


OPS = "_ops"  # `_counts`' key of the per-op entries (`Entries`)


# Until CUPTI_FIXED the harness left CUPTI attached to a worker after counting a trial's kernel launches
# with torch.profiler (trainables/costs.py now has Kineto tear it down), and every later trial of that
# worker paid for it in each launch (measured: docs/parity.md, "The Ray worker's excess"). The shipped
# reference rows were timed so; their launch terms are fitted at this much above a clean process's (`cupti_attached`).
CUPTI_SLOWDOWN = 1.27


CUPTI_FIXED = pd.Timestamp("2026-11-26T07:02:29Z")  # commit f7b256b


# A CPU's nominal figures, which its own fit scales: FLOP/s per thread, bytes/s, seconds per aten op.
CPU_NOMINAL = (1e10, 1e10, 1e-6)


GPU_FIGURES = ("tensor_matmul", "tensor_conv", "peak_matmul", "peak_conv", "bandwidth")  # what `gpu_s` reads


@dataclass(frozen=True)
class Entries:
    """The rows' distinct ops (column ops_per_step, trainables/costs.py ops_json) flattened once per distinct
    (op list, the GPU's figures): rows of one configuration on one GPU share their entries. Per class its
    entries, their groups and those groups' figures; each entry's FLOPs, bytes, launches and times a step
    dispatches it; each group's figures; each row's group (-1: no op list)."""

    by_class: tuple  # (class, its entries' indices, their groups, the groups' figures at them), once a class
    flops: np.ndarray
    bytes: np.ndarray
    launches: np.ndarray
    times: np.ndarray
    figures: dict
    of_row: np.ndarray

    @property
    def has(self) -> np.ndarray:
        return self.of_row >= 0


def _entries(frame: pd.DataFrame, figures: dict) -> Entries:
    listed = frame[OPS_PER_STEP] if OPS_PER_STEP in frame else pd.Series(None, index=frame.index, dtype=object)
    keys = pd.DataFrame({"ops": listed.to_numpy(), **{k: figures[k] for k in GPU_FIGURES}})
    has = listed.map(lambda v: isinstance(v, str)).to_numpy(bool)
    of_row = np.full(len(frame), -1)
    # one group a distinct (op list, figures), numbered as drop_duplicates keeps them: in order, a NaN a value
    of_row[has] = keys[has].groupby(list(keys), sort=False, dropna=False).ngroup().to_numpy()
    first = keys[has].drop_duplicates()
    flat = [(g, *op) for g, v in enumerate(first["ops"]) for op in json.loads(v)]
    group, cls, _, f, b, n, k = (np.array(col) for col in zip(*flat)) if flat else [np.zeros(0)] * 7
    cls, group, own = cls.astype(str), group.astype(int), {k: first[k].to_numpy() for k in GPU_FIGURES}
    by_class = tuple((c, on, group[on], {k: v[group[on]] for k, v in own.items()})
                     for c, on in ((c, np.flatnonzero(cls == c)) for c in np.unique(cls)))
    return Entries(by_class, f.astype(float), b.astype(float), n.astype(float), k.astype(float), own, of_row)


def _counts(frame: pd.DataFrame, devices: dict[str, Device] | None, figures: dict) -> dict:
    """Per op class, its (FLOPs, bytes, launches) per step of each row; under "forward", (0, 0, the
    forward pass's ops); under RNN_CALLS, (0, 0, its cuDNN RNN calls); on a table GPU, under OPS, each row's ops
    one by one (`Entries`: a CPU's fit, from nominal figures, stays per class)."""
    zero = np.zeros(len(frame))
    classes = {c: tuple(frame[f"{c}_{k}_per_step"].to_numpy(float) for k in OP_MEASURES) for c in OP_CLASSES}
    ops = _entries(frame, figures) if devices is not None else None
    return {**classes, "forward": (zero, zero, frame[FORWARD_OPS].to_numpy(float)),
            RNN_CALLS: (zero, zero, zero if ops is None else _rnn_calls(ops)),
            **({OPS: ops} if ops is not None else {})}


def _rnn_calls(ops: Entries) -> np.ndarray:
    """Each row's cuDNN RNN calls a step: its op list's rnn entries, times each is dispatched (0 for a row without
    one: rows written before the op lists, none of them recurrent; a CPU's recurrent net is cell ops, not class rnn,
    so a CPU's fit, without Entries, counts none)."""
    if not ops.has.any():
        return np.zeros(len(ops.of_row))
    groups = len(next(iter(ops.figures.values())))
    calls = sum((np.bincount(at, weights=ops.times[on], minlength=groups) for c, on, at, _ in ops.by_class if c == "rnn"),
                np.zeros(groups))
    return np.where(ops.has, calls[np.maximum(ops.of_row, 0)], 0.0)


def _figures(frame: pd.DataFrame, devices: dict[str, Device] | None) -> dict[str, np.ndarray]:
    """Per row, the device's peak FLOP/s for matmuls and for what cuDNN computes (convolutions, recurrent nets),
    whether each runs on a unit faster than FP32's (tensor cores), bandwidth and launch overhead: a table GPU's
    (matmuls at the row's precision, FP32 for PyTorch's default; cuDNN at TF32, its default, unless the row asks
    BF16, FP16 or strict FP32), or a CPU's nominal figures (CPU_NOMINAL x its thread count), which its own fit
    scales."""
    if devices is None:
        threads = frame["torch_threads"].fillna(1).to_numpy(float)
        flops, bandwidth, overhead = CPU_NOMINAL
        none = np.zeros(len(frame), dtype=bool)  # a CPU's arithmetic has no faster unit
        return {"tensor_matmul": none, "tensor_conv": none, "peak_matmul": flops * threads, "peak_conv": flops * threads,
                "bandwidth": np.full(len(frame), bandwidth), "overhead": np.full(len(frame), overhead)}
    table = [devices[k] for k in frame[MATCH_KEY]]
    precision = precisions_of(frame)
    conv = precision.where(precision.isin(["bf16", "fp16", "fp32"]), "tf32")
    # a GPU's public efficiency (Predictor.efficiency): what its datasheet's figures reach against the
    # others', from its public training figure; 1 where none, and while fitting
    # measured at TF32 (Lambda's "fp32" is TF32: analysis/public.py), so it scales the units that run at TF32
    # alone, and the bandwidth: an A100's TF32 efficiency on its 19.5 TFLOP/s of strict FP32 made its FP32 matrix
    # products faster than the card
    scale = frame[EFFICIENCY].to_numpy(float) if EFFICIENCY in frame else np.ones(len(frame))
    at_tf32 = np.where(precision.eq("tf32"), scale, 1.0), np.where(conv.eq("tf32"), scale, 1.0)
    matmul, cudnn = (np.array([d.peak(p) for d, p in zip(table, on)]) for on in (precision, conv))
    fp32 = np.array([d.fp32_flops for d in table])
    return {"tensor_matmul": matmul > fp32, "tensor_conv": cudnn > fp32,  # a unit faster than FP32's
            "peak_matmul": at_tf32[0] * matmul, "peak_conv": at_tf32[1] * cudnn,
            "bandwidth": scale * np.array([d.memory_bytes_per_s for d in table]),
            "overhead": np.array([d.launch_overhead_s for d in table]) * np.where(cupti_attached(frame), CUPTI_SLOWDOWN, 1)}


def cupti_attached(frame: pd.DataFrame) -> np.ndarray:
    """GPU rows timed while the previous trial's launch count still had CUPTI attached to the worker:
    written before CUPTI_FIXED, not their worker's first trial (cold_start false), by a harness that counted
    launches (the row has them, so the trial before it in the worker did too)."""
    if "finished_at" not in frame or "cold_start" not in frame:
        return np.zeros(len(frame), dtype=bool)
    before = pd.to_datetime(frame["finished_at"], utc=True) < CUPTI_FIXED
    return (before & frame["cold_start"].eq(False) & frame["launches_per_step"].notna()).to_numpy()


def class_times(theta, counts: dict, figures: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Seconds a step spends in each op class of `_counts`, as (the host's, the GPU's): launches x overhead x k
    (LAUNCH_COST), and the larger of F / (peak x u_c(F/launch)) and B / (bandwidth x m(B/launch)), with
    u(s) = u_max s / (s + s_half), written F (1 + s_half / s) / (peak u_max) = (F + launches s_half) / (peak u_max)
    (`_compute_s`; a recurrent net's without the size term); "forward", which has no FLOPs or bytes of its own, its ops x overhead x k_forward on the host alone."""
    p = dict(zip(PARAMETERS, np.exp(theta)))
    return {c: (n * figures["overhead"] * p[LAUNCH_COST[c]], gpu_s(c, f, b, n, p, figures))
            for c, (f, b, n) in ((c, v) for c, v in counts.items() if c != OPS)}


def gpu_s(c: str, f, b, n, p: dict, figures: dict):
    """The GPU's seconds for F FLOPs and B bytes of class `c` in n launches, a class's in a step or one op's: the
    larger of its compute bound (`_compute_s`) and its memory bound, B / (bandwidth x m(B/n)), m's largest share
    m_norm for a norm, m_grouped for a grouped convolution (KINDS) and m_memory for the other classes."""
    share = p[{"norm": "m_norm", "conv_grouped": "m_grouped"}.get(c, "m_memory")]
    memory = np.where(b > 0, (b + n * p["half_memory"]) / (figures["bandwidth"] * share), 0.0)
    base = KINDS.get(c, c)
    compute = np.where(f > 0, _compute_s(base, f, n, p, figures), 0.0) if base in COMPUTE_CLASSES else 0.0
    return np.maximum(compute, memory)


def _compute_s(c: str, f, n, p: dict, figures: dict):
    """The compute bound of class `c`'s F FLOPs in n launches (`class_times`). A cuDNN recurrent net (rnn) runs
    at cuDNN's precision (peak_conv) the matrix products it is made of, at the matmul class's share of the
    peak and without its size term: its n kernels are a time step's small products each, whose cost is the
    launch `class_times` charges every kernel; a convolution's half_conv (tens of GFLOPs a launch, fitted on
    CNNs' few large kernels) charged each of an LSTM's thousands of kernels a tenth of a millisecond, 6-13x its
    measured step (docs/model.md, "The model")."""
    if c == "rnn":
        return f / (figures["peak_conv"] * np.where(figures["tensor_conv"], p["u_tensor"], p["u_matmul"]))
    u = np.where(figures[f"tensor_{c}"], p["u_tensor" if c == "matmul" else "u_conv_tensor"], p[f"u_{c}"])
    return (f + n * p[f"half_{c}"]) / (figures[f"peak_{c}"] * u)


def _ops_gpu_s(theta, ops: Entries) -> np.ndarray:
    """Each row's GPU seconds a step as the sum of its ops' (`gpu_s` op by op, on its group's figures); 0 for a
    row without an op list."""
    p = dict(zip(PARAMETERS, np.exp(theta)))
    total = np.zeros(len(next(iter(ops.figures.values()))))
    for c, on, at, figures in ops.by_class:
        each = gpu_s(c, ops.flops[on], ops.bytes[on], ops.launches[on], p, figures)
        total += np.bincount(at, weights=each * ops.times[on], minlength=len(total))
    return np.where(ops.has, total[np.maximum(ops.of_row, 0)], 0.0)


def host_gpu(theta, counts: dict, figures: dict) -> tuple[np.ndarray, np.ndarray]:
    """A step's host seconds H and GPU seconds G, each the sum over its classes (`class_times`); a row whose ops
    were counted one by one has G the sum of theirs."""
    times = class_times(theta, counts, figures)
    # arrays, never sum()'s start 0: every `_counts` holds the op classes, "forward" and RNN_CALLS
    host, gpu = (cast(np.ndarray, sum(part[i] for part in times.values())) for i in (0, 1))
    ops = counts.get(OPS)
    if ops is not None and ops.has.any():
        gpu = np.where(ops.has, _ops_gpu_s(theta, ops), gpu)
    return host, gpu


# the parameters that charge every launch a size of its own (u(s) and m(s) of `class_times`): what a launch-bound step's
# kernels cost under the fit, which cannot tell a launch's host time from its GPU time; left out of `Parts.bulk`
SIZE_TERMS = ("half_matmul", "half_conv", "half_memory")


@dataclass(frozen=True)
class Parts:
    """What a step is made of under the fit, per row: the host's seconds and the GPU's, the GPU's seconds without
    the per-launch size terms (SIZE_TERMS: its FLOPs and bytes at the fitted shares alone), the kernels it launches
    and the device's launch overhead (s)."""

    host: np.ndarray  # s a step: every launch's dispatch, the forward pass's Python, cuDNN's RNN calls
    gpu: np.ndarray  # s a step: every class's GPU time
    bulk: np.ndarray  # s a step: the GPU time of the step's FLOPs and bytes alone
    kernels: np.ndarray  # kernels a step, every class's launches
    overhead: np.ndarray  # s: the device's launch overhead (devices.yaml)

    @property
    def host_share(self) -> np.ndarray:
        """H / (H + G): the host's share of the step's work; above one half, the step is bound by the host."""
        return self.host / np.maximum(self.host + self.gpu, 1e-30)


def step_time(theta, counts: dict, figures: dict) -> np.ndarray:
    """Seconds a step takes: the host's time H and the GPU's G of every class (`host_gpu`), then
    (H^q + G^q)^(1/q), q the fitted `overlap`: 1, the host's and the GPU's work one after the other (the sum, a
    launch-bound step's); the larger, as q grows, the two overlapping as a GPU runs kernels while the host
    dispatches the next (a compute-bound step's)."""
    host, gpu = host_gpu(theta, counts, figures)
    q = np.exp(theta[list(PARAMETERS).index("overlap")])
    top = np.maximum(host, gpu)
    return top * ((host / top) ** q + (gpu / top) ** q) ** (1 / q)


@dataclass(frozen=True)
class Fit:
    """One fitted model of a device group (every table GPU together, or one CPU at one thread count)."""

    form: str  # PER_CLASS, or THREE_TERM for rows without the per-class columns
    theta: tuple[float, ...]  # per-class: logs of PARAMETERS' values; three-term: the Calibration's
    calibration: Calibration | None  # the three-term model's, else None
    rms: float  # root mean square log residual on the rows fitted

    def step_s(self, frame: pd.DataFrame, devices: dict[str, Device] | None) -> np.ndarray:
        """Predicted step time of each row (the three-term model's workload bias included)."""
        if self.form == PER_CLASS:
            figures = _figures(frame, devices)
            return step_time(np.array(self.theta), _counts(frame, devices, figures), figures)
        assert self.calibration is not None, "a fit of the three-term form carries its calibration"
        bias = np.array([self.calibration.interval(w)[0] for w in frame["workload"]])
        return self.calibration.step_s(_terms(frame, devices)) * bias

    def parts(self, frame: pd.DataFrame, devices: dict[str, Device]) -> Parts:
        """The host's and the GPU's seconds of each row's step on its table GPU (per-class form only), and the rest
        of `Parts`."""
        figures = _figures(frame, devices)
        counts = _counts(frame, devices, figures)
        theta = np.array(self.theta)
        host, gpu = host_gpu(theta, counts, figures)
        bare = theta.copy()
        bare[[list(PARAMETERS).index(n) for n in SIZE_TERMS]] = -np.inf  # exp(-inf): no size term
        kernels = cast(np.ndarray, sum(frame[f"{c}_launches_per_step"].to_numpy(float) for c in OP_CLASSES))  # never 0
        overhead = np.array([devices[k].launch_overhead_s for k in frame[MATCH_KEY]])  # a clean process's: no CUPTI
        return Parts(host, gpu, host_gpu(bare, counts, figures)[1], kernels, overhead)

    def parameters(self) -> dict[str, float]:
        names = PARAMETERS if self.form == PER_CLASS else ("launch_scale", "compute_efficiency", "memory_efficiency")
        return dict(zip(names, np.exp(self.theta)))


def fit(frame: pd.DataFrame, devices: dict[str, Device] | None, form: str = PER_CLASS,
        start: Fit | None = None) -> Fit:
    """Least squares on log step time over `frame`'s rows, each parameter pulled weakly (PRIOR_WEIGHT)
    towards its PARAMETERS value, so that one the rows cannot tell apart stays where it started. From two starts
    (PARAMETERS, and one launch-bound), or from `start`'s parameters alone: a fit of nearly the same rows, as a
    held-out fit is of the whole's (analysis/model/intervals.py held_out), which it moves from in a few steps."""
    if form == THREE_TERM:
        cal = calibrate(frame, devices)
        return Fit(THREE_TERM, cal.theta, cal, cal.rms)
    figures = _figures(frame, devices)
    counts = _counts(frame, devices, figures)
    measured, prior = np.log(frame["step_s"].to_numpy(float)), np.log(list(PARAMETERS.values()))

    def residual(theta):
        return np.concatenate([np.log(step_time(theta, counts, figures)) - measured, PRIOR_WEIGHT * (theta - prior)])

    launches = np.array([2.0 * n.startswith("k_") for n in PARAMETERS])  # a second start, launch-bound
    # on a table GPU, a utilisation of peak FLOP/s is at most 1 (a CPU's nominal peak is no peak); the
    # bandwidth's share is not capped: the bytes counted assume no cache reuse and overstate what small ops move
    capped = devices is not None
    upper = np.array([0.0 if capped and n.startswith("u_") else math.log(16) if n == "overlap" else p + 15
                      for n, p in zip(PARAMETERS, prior)])
    lower = np.array([0.0 if n == "overlap" else p - 15 for n, p in zip(PARAMETERS, prior)])  # q >= 1: no less than the larger
    starts = [np.array(start.theta)] if start is not None and start.form == PER_CLASS else \
        [prior + shift for shift in (0 * launches, launches)]
    from scipy.optimize import least_squares  # here: a prediction from the cached fit (predict.shipped) needs no
    from threadpoolctl import threadpool_limits  # solver, and scipy.optimize takes a second of a command's start
    # one BLAS thread: the solver's products and SVDs of a thousand-odd rows by fifteen columns ran 8x slower on
    # threads that contend for the cores (2026-11-28, the 2-core VM: 33 models held out in turn, 44 s, 5.5 s on one)
    with threadpool_limits(limits=1, user_api="blas"):
        fits = [least_squares(residual, np.clip(x0, lower + 1e-6, upper - 1e-6), bounds=(lower, upper))
                for x0 in starts]
    best = min(fits, key=lambda r: r.cost)  # `fun` starts with the rows' own residuals
    return Fit(PER_CLASS, tuple(best.x), None, float(np.sqrt(np.mean(best.fun[:len(frame)] ** 2))))

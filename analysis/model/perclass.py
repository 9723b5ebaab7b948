"""The per-class model (the package's docstring gives its equations): each op class's host and GPU time, the
step's time from the two, and its least-squares fit on log step time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from crossover.schema import FORWARD_OPS, OP_CLASSES, OP_MEASURES
from crossover.analysis.model.devices import Device, MATCH_KEY
from crossover.analysis.model.counts import PER_CLASS, THREE_TERM
from crossover.analysis.model.threeterm import Calibration, _terms, calibrate

EFFICIENCY = "_efficiency"  # a prediction's column: the GPU's public efficiency (Predictor.efficiency)


COMPUTE_CLASSES = ("matmul", "conv", "rnn")  # the classes with FLOPs counted (trainables/costs.py); the others are memory-bound


# The per-class model's parameters, fitted as logs, each pulled weakly (PRIOR_WEIGHT per unit of log) towards
# the value here: shared by every GPU (a CPU has its own).
PARAMETERS = {
    "u_matmul": 0.5,  # share of peak FLOP/s a large matmul reaches, in FP32 (CUDA cores)
    # the same on the tensor cores (TF32, BF16, FP16), whose peak is 8-15x FP32's and harder to reach: one share for
    # both put BERT-large's and GPT-2's bf16 steps at twice their time on an H100 (docs/model.md, "Real-sized jobs")
    "u_tensor": 0.5,
    "half_matmul": 1e8,  # FLOPs per launch at which a matmul reaches half of that
    "u_conv": 0.5,  # the same for convolutions
    "half_conv": 1e8,  # FLOPs per launch
    "m_memory": 0.7,  # share of bandwidth a large memory-bound op reaches (every class's bytes)
    "half_memory": 1e6,  # bytes per launch at which an op reaches half of that
    # what one kernel launch of matmul, conv, rnn, norm or elementwise costs the host, in the device's launch
    # overheads: one for the four. A cost per class split conv from norm, which come in pairs, arbitrarily,
    # and priced DenseNet-121's element-wise ops 1.5x too dear (docs/model.md, "One launch cost for the kernels")
    "k_launch": 1.0,
    "k_optimizer": 1.0,  # the same for the optimiser's launches: foreach kernels over every parameter
    "k_forward": 1.0,  # what an op of the forward pass costs the host besides: the workload's Python, nn.Module's call
    # how the host's and the GPU's times combine (`step_time`): 1 their sum, as the model had it until the real-sized
    # rows, whose compute-bound steps hide the host's dispatch behind the GPU's work (docs/model.md, "Real-sized jobs")
    "overlap": 1.0,
}


# each class of `_counts` -> the parameter its launches cost
LAUNCH_COST = {**{c: "k_optimizer" if c == "optimizer" else "k_launch" for c in OP_CLASSES}, "forward": "k_forward"}


PRIOR_WEIGHT = 0.03


# Until CUPTI_FIXED the harness left CUPTI attached to a worker after counting a trial's kernel launches
# with torch.profiler (trainables/costs.py now has Kineto tear it down), and every later trial of that
# worker paid for it in each launch (measured: docs/parity.md, "The Ray worker's excess"). The shipped
# reference rows were timed so; their launch terms are fitted at this much above a clean process's (`cupti_attached`).
CUPTI_SLOWDOWN = 1.27


CUPTI_FIXED = pd.Timestamp("2026-11-26T07:02:29Z")  # commit f7b256b


# A CPU's nominal figures, which its own fit scales: FLOP/s per thread, bytes/s, seconds per aten op.
CPU_NOMINAL = (1e10, 1e10, 1e-6)


def _counts(frame: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per op class, its (FLOPs, bytes, launches) per step of each row; under "forward", (0, 0, the
    forward pass's ops)."""
    zero = np.zeros(len(frame))
    return {**{c: tuple(frame[f"{c}_{k}_per_step"].to_numpy(float) for k in OP_MEASURES) for c in OP_CLASSES},
            "forward": (zero, zero, frame[FORWARD_OPS].to_numpy(float))}


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
    precision = frame["precision"].fillna("fp32") if "precision" in frame else pd.Series("fp32", index=frame.index)
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
    times = {}
    for c, (f, b, n) in counts.items():
        memory = np.where(b > 0, (b + n * p["half_memory"]) / (figures["bandwidth"] * p["m_memory"]), 0.0)
        compute = np.where(f > 0, _compute_s(c, f, n, p, figures), 0.0) if c in COMPUTE_CLASSES else 0.0
        times[c] = (n * figures["overhead"] * p[LAUNCH_COST[c]], np.maximum(compute, memory))
    return times


def _compute_s(c: str, f, n, p: dict, figures: dict):
    """The compute bound of class `c`'s F FLOPs in n launches (`class_times`). A cuDNN recurrent net (rnn) runs
    at cuDNN's precision (peak_conv) the matrix products it is made of, at the matmul class's share of the
    peak and without its size term: its n kernels are a time step's small products each, whose cost is the
    launch `class_times` charges every kernel; a convolution's half_conv (tens of GFLOPs a launch, fitted on
    CNNs' few large kernels) charged each of an LSTM's thousands of kernels a tenth of a millisecond, 6-13x
    its measured step (docs/model.md, "cuDNN's recurrent nets")."""
    if c == "rnn":
        return f / (figures["peak_conv"] * np.where(figures["tensor_conv"], p["u_tensor"], p["u_matmul"]))
    u = np.where(figures["tensor_matmul"], p["u_tensor"], p["u_matmul"]) if c == "matmul" else p[f"u_{c}"]
    return (f + n * p[f"half_{c}"]) / (figures[f"peak_{c}"] * u)


def step_time(theta, counts: dict, figures: dict) -> np.ndarray:
    """Seconds a step takes: the host's time H and the GPU's G of every class (`class_times`), summed each, then
    (H^q + G^q)^(1/q), q the fitted `overlap`: 1, the host's and the GPU's work one after the other (the sum, a
    launch-bound step's); the larger, as q grows, the two overlapping as a GPU runs kernels while the host
    dispatches the next (a compute-bound step's)."""
    times = class_times(theta, counts, figures)
    host, gpu = (sum(part[i] for part in times.values()) for i in (0, 1))
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
            return step_time(np.array(self.theta), _counts(frame), _figures(frame, devices))
        bias = np.array([self.calibration.interval(w)[0] for w in frame["workload"]])
        return self.calibration.step_s(_terms(frame, devices)) * bias

    def parameters(self) -> dict[str, float]:
        names = PARAMETERS if self.form == PER_CLASS else ("launch_scale", "compute_efficiency", "memory_efficiency")
        return dict(zip(names, np.exp(self.theta)))


def fit(frame: pd.DataFrame, devices: dict[str, Device] | None, form: str = PER_CLASS) -> Fit:
    """Least squares on log step time over `frame`'s rows, each parameter pulled weakly (PRIOR_WEIGHT)
    towards its PARAMETERS value, so that one the rows cannot tell apart stays where it started."""
    if form == THREE_TERM:
        cal = calibrate(frame, devices)
        return Fit(THREE_TERM, cal.theta, cal, cal.rms)
    counts, figures = _counts(frame), _figures(frame, devices)
    measured, prior = np.log(frame["step_s"].to_numpy(float)), np.log(list(PARAMETERS.values()))

    def residual(theta):
        return np.concatenate([np.log(step_time(theta, counts, figures)) - measured,
                               PRIOR_WEIGHT * (theta - prior)])

    launches = np.array([2.0 * n.startswith("k_") for n in PARAMETERS])  # a second start, launch-bound
    # on a table GPU, a utilisation of peak FLOP/s is at most 1 (a CPU's nominal peak is no peak); the
    # bandwidth's share is not capped: the bytes counted assume no cache reuse and overstate what small ops move
    capped = devices is not None
    upper = np.array([0.0 if capped and n.startswith("u_") else math.log(16) if n == "overlap" else p + 15
                      for n, p in zip(PARAMETERS, prior)])
    lower = np.array([0.0 if n == "overlap" else p - 15 for n, p in zip(PARAMETERS, prior)])  # q >= 1: no less than the larger
    fits = [least_squares(residual, np.clip(prior + shift, lower + 1e-6, upper - 1e-6), bounds=(lower, upper))
            for shift in (0 * launches, launches)]
    best = min(fits, key=lambda r: r.cost)
    return Fit(PER_CLASS, tuple(best.x), None, float(np.sqrt(np.mean(best.fun[:len(frame)] ** 2))))

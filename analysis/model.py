"""A model of time per epoch, fitted on the measured devices, that predicts the GPUs nobody measured.

    python -m crossover.analysis model --validate            # the shipped reference rows: held-out error, coverage, targets
    python -m crossover.analysis model RESULTS... [--validate]

    predict(rows, ["A100", "L4"], fitted=shipped)   # what analysis/decide.py asks: one predicted row per
                                     # configuration and GPU, epoch_s_median with a 90% conformal interval
                                     # (epoch_s_lo, epoch_s_hi), from the fit on the shipped reference rows
    predict_counted(configs, ["A100"])   # the same for a step counted, never timed (crossover predict)

THE model is per op class (matmul, conv, rnn, norm, elementwise, optimizer: crossover/schema.py's OP_CLASSES,
counted by trainables/costs.py into each row as {class}_{flops,bytes,launches}_per_step, and the ops the
forward pass dispatches as forward_ops_per_step). On a GPU of the device table (analysis/devices.yaml:
peak FLOP/s, bandwidth, a per-launch overhead), a class with FLOPs F, bytes B and launches n costs

    host_c = n x overhead x k,   gpu_c = max(F / (peak x u_c(F/n)), B / (bandwidth x m(B/n)))
    u(s) = u_max s / (s + s_half)          (a saturating utilisation in the op's size, NeuSight-style)
    H = sum of host_c + forward ops x overhead x k_forward,   G = sum of gpu_c
    step_s = (H^q + G^q)^(1/q)             (q = overlap: 1 the sum, larger as the GPU's work hides the host's)
    epoch_s = steps_per_epoch x step_s

the forward pass's ops costing the host the workload's Python besides (autograd's engine dispatches the
backward's from C++). u_c for matmul, conv and rnn (a matmul on the tensor cores its own, u_tensor; a cuDNN
recurrent net the matmul's, without the size term), m for every class's bytes, k (k_launch for a kernel of
matmul, conv, rnn, norm or elementwise, k_optimizer for the optimiser's) and k_forward: shared by every GPU,
fitted by least squares on log step time (each pulled weakly towards PARAMETERS). A CPU, which no table
knows, gets its own fit per thread count, from nominal figures (CPU_NOMINAL) its parameters scale, and is
only explained where measured, never predicted. Rows without the per-class columns (written before them)
fall back to the three-term model (`calibrate`: launches, FLOPs and bytes in total, with a bias per
workload); every prediction says which in `model_form`.

Every prediction carries a 90% split-conformal interval from leave-one-device-out residuals (a
workload the fit saw) or leave-one-workload-out residuals (a new one): `conformal_q`. docs/model.md
gives the equations and the validation. Reads rows only: never imports torch or ray.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import least_squares

from crossover.analysis import public, roofline
from crossover.analysis.load import REFERENCE, packaged, read
from crossover.schema import CONFIG_COLUMNS, FORWARD_OPS, OP_CLASSES, OP_COLUMNS, OP_MEASURES

DEVICES = packaged("devices.yaml")
# Every reference configuration's step counted as `crossover predict` counts a job on a laptop
# (sweeps/count_reference.py): the laptop's case of --validate, and the intervals of a workload never measured.
# In a folder of its own under the reference rows, so a wheel carries it with them: '_' first, no sweep's rows; a
# '-' in it, no Python package's name (setuptools takes it as data, not as a package it was not told of).
COUNTED = REFERENCE / "_step-counts" / "counts.parquet"
COUNT_KEYS = ["workload", "workload_params", "depth", "width", "context", "batch_size"]
DEVICE_FIELDS = ("name", "fp32_flops", "tf32_flops", "bf16_flops", "memory_bytes_per_s", "launch_overhead_s",
                 "source", "date")
COST_COLUMNS = ("flops_per_step", "bytes_per_step", "launches_per_step")
# Bytes a step moves, for rows without bytes_per_step: 4-byte words per parameter, per activation element
# (every layer's output per sample, input included), per sample, and fixed; fitted on 2026-11-23 to what
# trainables/costs.py counts on the CPU (within 8% over 36 configurations; tests/test_costs.py checks it).
BYTES_WORDS = {"disc": (6.143, 11.82, -13.07, -510.4), "tabular": (22.08, 11.67, -127.9, 8312.0),
               "peaks": (34.85, 10.88, -12.6, -1343.0), "lenet": (6.0, 5.8, -1862.0, 314200.0),
               "mnist_cnn": (11.0, 6.831, -2667.0, 314300.0)}
# Launches (aten ops that are not views) a step: fixed + per layer, as trainables/costs.py counted them on
# the CPU (loop 'fast', eager) in the loop those rows ran, before 2026-11-26, when the step's loss and
# accuracy sums launched up to 6 kernels a step (now held and summed once an epoch); used for rows without
# launches_per_step.
LAUNCHES = {"disc": (12, 8), "tabular": (14, 24), "peaks": (6, 24), "lenet": (48, 0), "mnist_cnn": (63, 0)}
# The CNNs' convolutions, per width w: (FLOPs of a sample's forward as (per w, per w^2, fixed) with the
# fully-connected layers, FLOPs of the first convolution per w (its input needs no gradient), activation
# elements per sample as (per w, fixed)).
CNNS = {"mnist_cnn": ((320_000, 640_000, 1_000), 288_000, (8_760, 844)),
        "lenet": ((180_672, 480_000, 21_840), 84_672, (7_880, 998))}
PRECISION_PEAK = {"fp32": "fp32_flops", "tf32": "tf32_flops", "bf16": "bf16_flops", "fp16": "bf16_flops"}
MATCH_KEY = "_device_key"
# What validation holds out as one unseen model: a workload, or one model of it where the workload's own
# axes pick the network (examples/zoo.py's arch: eighteen architectures under one workload name) (`with_model`)
MODEL = "_model"
EFFICIENCY = "_efficiency"  # a prediction's column: the GPU's public efficiency (Predictor.efficiency)
COMPUTE_CLASSES = ("matmul", "conv", "rnn")  # the classes with FLOPs counted (trainables/costs.py); the others are memory-bound
CLASS_COLUMNS = (*OP_COLUMNS, FORWARD_OPS)  # {class}_{flops,bytes,launches}_per_step, forward_ops_per_step
PER_CLASS, THREE_TERM = "per-class", "three-term"
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
ALPHA = 0.1  # the intervals are (1 - ALPHA) = 90% conformal intervals
# The targets --validate prints: a workload held out and predicted from its CPU count (median and worst of the
# cells' median errors), a GPU held out (median over the GPU models, and how many GPU models at least), and the
# coverage of the 90% intervals.
TARGETS = {"laptop_median": 0.20, "laptop_worst": 0.50, "gpu_median": 0.25, "gpu_models": 8, "coverage": (0.85, 0.95)}


@dataclass(frozen=True)
class Device:
    key: str  # short name, as prices and home boxes write it
    name: str
    fp32_flops: float  # FLOP/s, dense
    tf32_flops: float | None  # FLOP/s, dense tensor cores; None: no TF32
    bf16_flops: float | None  # FLOP/s, dense, FP32 accumulate; None: no BF16
    memory_bytes_per_s: float
    launch_overhead_s: float  # s per eager op, before the fitted scale
    source: str
    date: str
    memory_gb: float | None = None  # the card's memory, GB (10^9 bytes); None: not known

    def peak(self, precision: str) -> float:
        """FLOP/s at `precision`, falling back to FP32 where the GPU lacks the unit."""
        return getattr(self, PRECISION_PEAK.get(precision, "fp32_flops")) or self.fp32_flops


def load_devices(path: Path = DEVICES) -> dict[str, Device]:
    """The device table; an entry missing a field (its source and date included) is refused by name."""
    table = yaml.safe_load(Path(path).read_text()) or {}
    devices = {}
    for key, entry in table.items():
        missing = [f for f in DEVICE_FIELDS if f not in (entry or {}) or
                   (f in ("name", "source", "date", "fp32_flops", "memory_bytes_per_s", "launch_overhead_s")
                    and not entry[f])]
        if missing:
            raise ValueError(f"{path}: device {key!r} lacks {missing}: give every entry its figures, the source "
                             "they come from and its date (YYYY-MM)")
        figures = {}
        for f in DEVICE_FIELDS[1:6]:
            try:
                figures[f] = None if entry[f] is None else float(entry[f])
            except (TypeError, ValueError):
                raise ValueError(f"{path}: device {key!r}: {f} must be a number (e.g. 66.9e12), "
                                 f"got {entry[f]!r}") from None
        memory = entry.get("memory_gb")
        if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory <= 0):
            raise ValueError(f"{path}: device {key!r}: memory_gb must be a number of GB above 0 (e.g. 80), "
                             f"got {memory!r}; leave it out where not known")
        devices[str(key)] = Device(key=str(key), name=str(entry["name"]), **figures,
                                   source=str(entry["source"]), date=str(entry["date"]),
                                   memory_gb=None if memory is None else float(memory))
    return devices


def device_key(device_name: str, devices: dict[str, Device]) -> str | None:
    """The table's key that `device_name` contains as a whole word, case-insensitive (the longest)."""
    found = [k for k in devices if re.search(rf"(?<![a-z0-9]){re.escape(k.lower())}(?![a-z0-9])", str(device_name).lower())]
    return max(found, key=len) if found else None


def _sizes(model: str) -> list[int]:
    return [int(s) for s in model.split("fc ")[-1].split("-")]


def _analytic(row) -> tuple[float, float, float]:
    """FLOPs, bytes and launches of one step from the configuration (module docstring)."""
    wl, batch = row["workload"], row["batch_size"]
    if wl in CNNS:
        (per_w, per_w2, fixed), first, (act_w, act_0) = CNNS[wl]
        w = row["width"]
        forward = per_w * w + per_w2 * w * w + fixed
        flops, activations, layers = batch * (3 * forward - first * w), act_w * w + act_0, 0
    else:
        sizes = _sizes(row["model"])
        products = [a * b for a, b in itertools.pairwise(sizes)]
        flops = batch * 2 * (3 * sum(products) - products[0])  # the first layer's input needs no gradient
        activations, layers = sum(sizes), len(products)
    per_param, per_act, per_sample, fixed = BYTES_WORDS[wl]
    words = per_param * row["n_params"] + per_act * batch * activations + per_sample * batch + fixed
    base, per_layer = LAUNCHES[wl]
    return flops, 4 * words, base + per_layer * layers


def step_costs(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's flops_per_step, bytes_per_step, launches_per_step: counted where the row has them,
    else computed from its configuration; `costs_counted` says which (rows of unknown workloads: null)."""
    counted = rows.reindex(columns=list(COST_COLUMNS)).astype(float)
    known = rows["workload"].isin(list(BYTES_WORDS)) & rows["model"].notna()
    analytic = pd.DataFrame([_analytic(r) if k else (np.nan,) * 3 for (_, r), k in zip(rows.iterrows(), known)],
                            index=rows.index, columns=list(COST_COLUMNS))
    out = counted.fillna(analytic)
    return out.assign(costs_counted=counted.notna().all(axis=1))


def _precision(rows: pd.DataFrame) -> pd.Series:
    """The precision whose peak a row's step runs at in the three-term model: the row's own, where PyTorch's
    default counts as TF32 for the convolution workloads (cuDNN's default allows it) and FP32 for the rest;
    a row written before the column, fp32."""
    precision = rows["precision"].fillna("fp32") if "precision" in rows else pd.Series("fp32", index=rows.index)
    cnn = rows["workload"].isin(list(CNNS)).map({True: "tf32", False: "fp32"})
    return precision.mask(precision.eq("default"), cnn)


def _combine(compute, memory, form: str):
    return np.maximum(compute, memory) if form == "max" else compute + memory


def _usable(rows: pd.DataFrame) -> pd.DataFrame:
    """ok eager rows of one process on one device (cpu, cuda), with their step costs and measured step_s.

    Engines graph and compile are left out: a replayed graph launches 3 times a step but still runs
    every kernel of it, a cost per kernel on the GPU this model has no term for. Fused trials are left
    out too: their epoch is the whole group's. The per-class columns are added, null, where absent; a row
    written before forward_ops_per_step takes it from the CPU's count of its configuration (`_counted`) where
    one was made: count_step counts the forward pass's ops as a GPU dispatches them."""
    fused = rows["fused_members"].fillna(1).gt(1) if "fused_members" in rows else False
    ok = rows[(rows["status"] == "ok") & (rows["is_cpu"] | rows["whole_gpu"]) & rows["engine"].eq("eager") & ~fused]
    ok = ok.reindex(columns=list(dict.fromkeys([*ok.columns, *CLASS_COLUMNS])))
    lacking = ok[FORWARD_OPS].isna()
    if lacking.any():  # rows written before the column: only they are looked up in the count
        ok[FORWARD_OPS] = ok[FORWARD_OPS].fillna(_counted(ok[lacking])[FORWARD_OPS])
    ok = ok.drop(columns=list(COST_COLUMNS), errors="ignore").join(step_costs(ok))
    ok = ok.dropna(subset=list(COST_COLUMNS) + ["epoch_s_median", "steps_per_epoch"])
    return ok.assign(step_s=ok["epoch_s_median"] / ok["steps_per_epoch"])


@dataclass(frozen=True)
class Calibration:
    """Fitted figures of one device group (every table GPU together, or one CPU): log of (launch scale,
    compute efficiency, memory efficiency) for GPUs, of (s per launch, FLOP/s, bytes/s) for a CPU."""

    form: str  # 'max' or 'sum' of the compute and memory terms
    theta: tuple[float, float, float]
    bias: dict  # workload -> median log(measured / model) over the calibration rows
    spread: dict  # workload -> (10th, 90th percentile) of log residual minus bias
    rms: float  # root mean square log residual, before the bias

    def step_s(self, terms: np.ndarray) -> np.ndarray:
        """Model step time of rows whose (launch, compute, memory) base terms are `terms` (n x 3)."""
        launch, compute, memory = terms.T
        t0, t1, t2 = self.theta
        return launch * np.exp(t0) + _combine(compute / np.exp(t1), memory / np.exp(t2), self.form)

    def interval(self, workload: str) -> tuple[float, float, float]:
        """Multipliers (median, low, high) on the model's time for a workload (all workloads' if unseen)."""
        bias = self.bias.get(workload, float(np.median(list(self.bias.values()))))
        lo, hi = self.spread.get(workload, self.spread["*"])
        return math.exp(bias), math.exp(bias + lo), math.exp(bias + hi)


def _terms(frame: pd.DataFrame, devices: dict[str, Device] | None) -> np.ndarray:
    """Base terms per row: on a table GPU, seconds at the table's figures; on a CPU, the raw counts."""
    f, b, n = (frame[c].to_numpy(float) for c in COST_COLUMNS)
    if devices is None:
        return np.column_stack([n, f, b])
    table = [devices[k] for k in frame[MATCH_KEY]]
    peaks = np.array([d.peak(p) for d, p in zip(table, _precision(frame))])
    return np.column_stack([n * [d.launch_overhead_s for d in table], f / peaks,
                            b / np.array([d.memory_bytes_per_s for d in table])])


def calibrate(frame: pd.DataFrame, devices: dict[str, Device] | None, form: str | None = None) -> Calibration:
    """Fit a group's three figures on its rows (least squares on log step time), in `form`, or in the
    form that fits better when None; then each workload's bias and spread."""
    terms, measured = _terms(frame, devices), frame["step_s"].to_numpy(float)
    starts = [(0.0, math.log(0.3), math.log(0.5))] if devices else [(math.log(5e-6), math.log(1e11), math.log(2e10))]
    starts += [tuple(s + d for s in starts[0]) for d in (-2.0, 2.0)]
    def residual(theta, shape):
        return np.log(Calibration(shape, tuple(theta), {}, {}, 0.0).step_s(terms)) - np.log(measured)

    fits = [(shape, least_squares(residual, np.array(start), args=(shape,),
                                  bounds=(np.array(starts[0]) - 12, np.array(starts[0]) + 12)))
            for shape in ([form] if form else ["max", "sum"]) for start in starts]
    shape, fit = min(fits, key=lambda pair: pair[1].cost)
    residual = pd.Series(-fit.fun, index=frame.index)  # log(measured / model)
    bias = residual.groupby(frame["workload"]).median()
    centred = residual - frame["workload"].map(bias)
    spread = {w: (g.quantile(0.1), g.quantile(0.9)) for w, g in centred.groupby(frame["workload"])}
    spread["*"] = (centred.quantile(0.1), centred.quantile(0.9))
    return Calibration(shape, tuple(fit.x), bias.to_dict(), spread, float(np.sqrt(np.mean(fit.fun ** 2))))


def gpu_rows(rows: pd.DataFrame, devices: dict[str, Device]) -> pd.DataFrame:
    """Usable single-GPU rows whose device the table knows, with its key in MATCH_KEY."""
    usable = _usable(rows)
    usable = usable[usable["whole_gpu"]]
    keyed = usable.assign(**{MATCH_KEY: usable["device_name"].map(lambda n: device_key(n, devices))})
    return keyed[keyed[MATCH_KEY].notna()]


def _config_keys(rows: pd.DataFrame) -> list[str]:
    extra = ["engine"] + (["precision"] if "precision" in rows else [])
    return [c for c in CONFIG_COLUMNS if c != "device"] + extra


def cpu_groups(rows: pd.DataFrame):
    """Usable CPU rows, one group per CPU model and thread count: (label, rows)."""
    cpus = _usable(rows)
    cpus = cpus[cpus["is_cpu"]]
    for (name, threads), own in cpus.groupby(["device_name", cpus["torch_threads"].fillna(0)]):
        yield f"{name} ({threads:.0f} threads)", own


# ---- the per-class model: each op class's roofline bound at a size-dependent utilisation, plus launches ----

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
    def peaks(precisions) -> np.ndarray:
        return np.array([d.peak(p) for d, p in zip(table, precisions)])

    fp32 = np.array([d.fp32_flops for d in table])
    return {"tensor_matmul": peaks(precision) > fp32, "tensor_conv": peaks(conv) > fp32,  # a unit faster than FP32's
            "peak_matmul": at_tf32[0] * peaks(precision), "peak_conv": at_tf32[1] * peaks(conv),
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


def form_of(frame: pd.DataFrame) -> pd.Series:
    """PER_CLASS where a row has every per-class column, else THREE_TERM (rows written before them)."""
    return frame[list(CLASS_COLUMNS)].notna().all(axis=1).map({True: PER_CLASS, False: THREE_TERM})


# ---- conformal intervals ----
# Split conformal prediction (Vovk, Gammerman & Shafer 2005, "Algorithmic Learning in a Random World";
# Lei et al. 2018): with n held-out scores |log(measured / predicted)| exchangeable with a new one, the
# ceil((n+1)(1-alpha))-th smallest bounds the new one with probability >= 1-alpha. The scores here are
# cross-fitted, each row predicted by a fit that never saw its device (or workload), as in the
# jackknife+ (Barber, Candes, Ramdas & Tibshirani 2021, "Predictive inference with the jackknife+",
# Ann. Statist. 49(1)); Wess et al. 2024 apply conformal intervals to DNN latency prediction.

def conformal_q(scores, alpha: float = ALPHA) -> float:
    """The conformal quantile of |scores|: the ceil((n+1)(1-alpha))-th smallest (inf where that is past n,
    too few scores for the level; NaN with none)."""
    s = np.sort(np.abs(np.asarray(scores, float)[~np.isnan(np.asarray(scores, float))]))
    if not len(s):
        return float("nan")
    k = math.ceil((len(s) + 1) * (1 - alpha))
    return float(s[k - 1]) if k <= len(s) else float("inf")


def held_out(frame: pd.DataFrame, devices: dict[str, Device] | None, form: str, by: str,
             costs: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> pd.Series:
    """log(measured / predicted) of each row's step time, predicted by a fit on the rows of the other
    values of `by` (a device key, a workload), from the held rows' own step costs or from `costs(held)`'s
    (`as_counted`: the CPU's count; a row it leaves out stays NaN); NaN where no other value has rows."""
    out = pd.Series(np.nan, index=frame.index)
    for _, held in frame.groupby(by):
        rest = frame.drop(index=held.index)
        held = costs(held) if costs else held
        if len(rest) and len(held):
            out[held.index] = np.log(held["step_s"].to_numpy(float) / fit(rest, devices, form).step_s(held, devices))
    return out


def scores(frame: pd.DataFrame, devices: dict[str, Device] | None, form: str) -> dict[str, pd.Series]:
    """The held-out residuals intervals are drawn from: leave-one-device-out where two or more GPUs have
    rows ('device'), leave-one-model-out (`with_model`) where two or more models do ('workload')."""
    out, frame = {}, with_model(frame)
    if devices is not None and frame[MATCH_KEY].nunique() > 1:
        out["device"] = held_out(frame, devices, form, MATCH_KEY)
    if frame[MODEL].nunique() > 1:
        # a workload no GPU measured is predicted from its CPU count (sweeps/count_step.py): its interval is
        # drawn from held-out models predicted so, where the reference configurations were counted so
        counted = held_out(frame, devices, form, MODEL, as_counted) if form == PER_CLASS else pd.Series()
        out["workload"] = counted.dropna() if counted.notna().any() else held_out(frame, devices, form, MODEL)
    return out


def with_model(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its MODEL column: each row's workload, and where the workload's own axes differ
    between its rows, the ones that differ (`zoo arch=vgg11_bn`), so that each network is held out alone."""
    if MODEL in frame:
        return frame
    params = frame["workload_params"] if "workload_params" in frame else pd.Series(None, index=frame.index)
    parsed = params.map(lambda p: json.loads(p) if isinstance(p, str) and p else {})
    keys = {}
    for workload, group in parsed.groupby(frame["workload"]):
        values = pd.DataFrame(list(group)).astype(str)
        keys[workload] = [k for k in values if values[k].nunique() > 1]
    label = [w if not keys.get(w) else " ".join([w, *(f"{k}={p.get(k)}" for k in keys[w])])
             for w, p in zip(frame["workload"], parsed)]
    return frame.assign(**{MODEL: label})


@dataclass(frozen=True)
class Predictor:
    """A fit on the measured GPUs' rows and the conformal quantiles of its held-out log errors."""

    fit: Fit
    seen: frozenset  # workloads of the rows fitted
    q: dict  # 'device' / 'workload' -> conformal quantile of |log(measured / predicted)| at ALPHA
    # GPU key -> measured / predicted speed of its public rows (analysis/public.py) under the fit: its
    # FLOP/s and bandwidth are scaled by it, so a GPU faster than another on the public benchmarks is not
    # predicted slower for its datasheet (the A10's TF32 peak is 1.8x the RTX 3090's; Lambda has the 3090
    # 1.1-1.5x faster on all of its benchmarks)
    efficiency: dict = dataclasses.field(default_factory=dict)

    def interval(self, workload: str) -> tuple[float, str]:
        """The quantile for a prediction of `workload` on an unmeasured GPU, and whose residuals it is:
        leave-one-device-out's for a workload the fit saw, leave-one-workload-out's for a new one (either
        one where the other could not be computed)."""
        order = ("device", "workload") if workload in self.seen else ("workload", "device")
        source = next((s for s in order if s in self.q), None)
        return (self.q[source], source) if source else (float("nan"), "none: one GPU and one workload only")


def predictor(frame: pd.DataFrame, devices: dict[str, Device], form: str) -> Predictor:
    fitted = fit(frame, devices, form)
    rows = frame[frame["workload"].eq(public.PUBLIC_WORKLOAD)]
    speed = fitted.step_s(rows, devices) / rows["step_s"].to_numpy(float) if len(rows) else []
    return Predictor(fitted, frozenset(frame["workload"]),
                     {k: conformal_q(s) for k, s in scores(frame, devices, form).items()},
                     pd.Series(speed, index=rows[MATCH_KEY].to_numpy()).groupby(level=0).median().to_dict())


def _step_s(configs: pd.DataFrame, model: Predictor, devices: dict[str, Device], key: str) -> np.ndarray:
    on = configs.assign(**{MATCH_KEY: key, EFFICIENCY: model.efficiency.get(key, 1.0)})
    return model.fit.step_s(on, devices) if len(on) else np.zeros(0)


def public_precision(configs: pd.DataFrame) -> pd.Series:
    """The public tables' precision each configuration's arithmetic runs at, None where no table ran it: bf16
    and fp16 Lambda's "fp16" (AMP); tf32, and PyTorch's default where cuDNN's convolutions and recurrent nets
    (TF32 by default) hold most of the FLOPs, Lambda's "fp32", which ran at TF32; strict FP32 matrix products (fp32, and the default's),
    none."""
    precision = configs["precision"].fillna("default") if "precision" in configs else \
        pd.Series("default", index=configs.index)
    flops = configs.reindex(columns=[f"{c}_flops_per_step" for c in COMPUTE_CLASSES]).astype(float).fillna(0)
    convs = flops["conv_flops_per_step"] + flops["rnn_flops_per_step"] >= flops["matmul_flops_per_step"]
    table = precision.map({"bf16": "fp16", "fp16": "fp16", "tf32": "fp32", "fp32": None, "default": "fp32"})
    return table.where(~precision.eq("default") | convs, None)


def ordered_step_s(configs: pd.DataFrame, model: Predictor, devices: dict[str, Device], key: str) -> np.ndarray:
    """The model's step time of `configs` on the GPU `key`, no slower than its prediction for any GPU that
    `key` outran on every public benchmark at the precision the configuration's arithmetic runs at
    (`public_precision`, analysis/public.py `faster_than`): where the datasheet's figures say otherwise (the
    A10's TF32 peak, which its 150 W never reaches; the RTX 6000 Ada's over the A100s'), the public measurement
    orders them; and never shorter than the hardware allows (analysis/roofline.py floor_s)."""
    step = _step_s(configs, model, devices, key)
    table = public_precision(configs)
    for value in table.dropna().unique():
        rows = (table == value).to_numpy()
        for other in public.faster_than(value).get(key, ()):
            if other in devices:
                step[rows] = np.minimum(step[rows], _step_s(configs[rows], model, devices, other))
    return np.maximum(step, roofline.floor_s(configs, devices[key])) if len(configs) else step


def _predicted(configs: pd.DataFrame, model: Predictor, devices: dict[str, Device], key: str) -> pd.DataFrame:
    """The model's epoch times of `configs` (usable rows, one per configuration) on the GPU `key`
    (`ordered_step_s`), with their conformal interval, whose lower end is no shorter than the hardware allows
    either (analysis/roofline.py)."""
    on = configs.assign(**{MATCH_KEY: key})
    steps = on["steps_per_epoch"].to_numpy(float)
    epoch = steps * ordered_step_s(configs, model, devices, key) if len(on) else np.zeros(0)
    floor = steps * roofline.floor_s(configs, devices[key]) if len(on) else np.zeros(0)
    q, source = zip(*[model.interval(w) for w in on["workload"]]) if len(on) else ((), ())
    q = np.array(q, float)
    out = on[_config_keys(on) + ["n_params", "steps_per_epoch"]].assign(
        device="cuda", device_name=key, epoch_s_median=epoch, epoch_s_lo=np.maximum(epoch * np.exp(-q), floor),
        epoch_s_hi=epoch * np.exp(q), predicted=True, model_form=model.fit.form, interval_from=list(source))
    return out.assign(samples_per_s=on["dataset_size"] / out["epoch_s_median"])


def predict(rows: pd.DataFrame, gpus: list[str], path: Path = DEVICES,
            fitted: Callable[[str], Predictor] | None = None) -> pd.DataFrame:
    """For each configuration measured in `rows` and each GPU key in `gpus` that no row measured at that
    configuration: its predicted epoch_s_median with a 90% conformal interval (epoch_s_lo, epoch_s_hi),
    samples_per_s, predicted=True, model_form (PER_CLASS, or THREE_TERM for a configuration whose rows
    lack the per-class columns) and interval_from (whose held-out residuals gave the interval).

    `fitted(form)` gives the model of each form: `shipped` (what analysis/decide.py passes: the shipped
    reference rows' fit, so a prediction never moves with what else `rows` holds); None, a fit on `rows`'
    own GPU rows. The step costs of a configuration come from one of its rows (a GPU row first: its
    launches are the GPU's). Where a row of the GPU measured the configuration, it is not predicted: the
    measurement wins; a GPU measured at some configurations (the H100 reference rows: disc and peaks
    only) is predicted at the others."""
    devices = _known(gpus, path)
    measured = gpu_rows(rows, devices)
    per_class = measured[form_of(measured) == PER_CLASS]
    if fitted is None:
        if measured.empty:
            raise ValueError("no rows of a GPU in the device table to calibrate the model on: read a GPU's results "
                             "alongside, e.g. results/reference/h200-2026-11-26/scaling")
        models = {}

        def fitted(form: str) -> Predictor:
            if form not in models:
                models[form] = predictor(per_class if form == PER_CLASS else measured, devices, form)
            return models[form]
        per_class_known = len(per_class) > 0
    else:
        per_class_known = True  # the shipped reference rows have the per-class columns
    usable = _usable(rows).sort_values("whole_gpu", key=lambda whole: ~whole, kind="stable")
    keys = _config_keys(usable)
    configs = usable.drop_duplicates(keys)
    forms = form_of(configs) if per_class_known else pd.Series(THREE_TERM, index=configs.index)
    frames = []
    for key in gpus:
        done = measured.loc[measured[MATCH_KEY] == key, keys].drop_duplicates()
        todo = configs.assign(_form=forms).merge(done, on=keys, how="left", indicator=True)
        todo = todo[todo["_merge"] == "left_only"].drop(columns="_merge")
        frames += [_predicted(part.drop(columns="_form"), fitted(form), devices, key)
                   for form, part in todo.groupby("_form")]
    if frames:
        return pd.concat(frames, ignore_index=True)
    empty = configs.iloc[:0]
    return _predicted(empty, Predictor(Fit(THREE_TERM, (), None, 0.0), frozenset(), {}), devices, "")


def predict_counted(configs: pd.DataFrame, gpus: list[str], path: Path = DEVICES) -> pd.DataFrame:
    """`predict` for configurations nobody timed (sweeps/predict.py: a step counted on the CPU, not
    trained): one line each with the configuration's columns, workload, precision, steps_per_epoch and
    the step's counted costs (every per-class column), predicted on each GPU of `gpus` by the `shipped`
    per-class model."""
    devices = _known(gpus, path)
    lacking = [c for c in CLASS_COLUMNS if c not in configs or configs[c].isna().any()]
    if lacking:
        raise ValueError(f"the step's counted costs lack {lacking[:3]}{'...' if len(lacking) > 3 else ''}: the "
                         "per-class model predicts from every op class's FLOPs, bytes and launches")
    on = configs.reindex(columns=list(dict.fromkeys([*_config_keys(configs), *configs.columns])))
    return pd.concat([_predicted(on, shipped(PER_CLASS, path), devices, key) for key in gpus], ignore_index=True)


def _known(gpus: list[str], path: Path) -> dict[str, Device]:
    """The device table, where it knows every GPU of `gpus`; else refused naming the unknown ones."""
    devices = load_devices(path)
    unknown = [g for g in gpus if g not in devices]
    if unknown:
        raise ValueError(f"GPUs {unknown} are not in {path}: use its keys {sorted(devices)}, or add an entry")
    return devices


@cache
def _counted_table(path: Path) -> pd.DataFrame | None:
    return pd.read_parquet(path) if path.exists() else None


def _counted(frame: pd.DataFrame, path: Path = COUNTED) -> pd.DataFrame:
    """The CPU's count of each row's configuration (sweeps/count_reference.py, as `crossover predict` counts a
    user's job): its *_per_step columns, on `frame`'s index, null where none was made."""
    table = _counted_table(path)
    if table is None or frame.empty:
        return pd.DataFrame(index=frame.index, columns=[*COST_COLUMNS, *CLASS_COLUMNS], dtype=float)
    keys = [k for k in COUNT_KEYS if k in frame]
    costs = [c for c in table.columns if c.endswith("_per_step")]
    sizes = {k: lambda f, k=k: pd.to_numeric(f[k], errors="coerce") for k in keys if k not in ("workload", "workload_params")}
    joined = (frame[keys].assign(**sizes).reset_index()
              .merge(table[keys + costs].assign(**sizes), on=keys, how="left"))
    return joined.set_index("index")[costs].rename_axis(frame.index.name).reindex(columns=[*COST_COLUMNS, *CLASS_COLUMNS])


# a row whose step was counted as `crossover predict` counts one (sweeps/reference.py real_rows) says so here
COUNTED_NOTE = "counted on the meta device as crossover predict counts a job"


def as_counted(frame: pd.DataFrame, path: Path = COUNTED) -> pd.DataFrame:
    """`frame`'s rows with their step costs replaced by the CPU's count of the same configuration
    (`_counted`), the rows it has no count of left out: what a user without a GPU would have had to
    predict them from. A row counted so already (COUNTED_NOTE) keeps its own."""
    own = frame["costs_note"].fillna("").str.startswith(COUNTED_NOTE) if "costs_note" in frame else \
        pd.Series(False, index=frame.index)
    counted = _counted(frame[~own], path).dropna(subset=["launches_per_step"])
    replaced = frame[~own].drop(columns=counted.columns, errors="ignore").join(counted, how="inner")
    return pd.concat([replaced, frame[own]]).loc[lambda f: frame.index.intersection(f.index)]


def public_rows(devices: dict[str, Device]) -> pd.DataFrame:
    """The public tables' rows the model fits on (analysis/public.py fit_rows), keyed as GPU rows are."""
    return public.fit_rows(list(devices)).rename(columns={"gpu": MATCH_KEY})


@cache
def reference_rows() -> pd.DataFrame:
    """Every row of the shipped results/reference/ (analysis/load.py REFERENCE), read once a process: what
    `shipped` fits on. The folders do not change while a process runs; callers filter, never modify."""
    return read(REFERENCE)


def reference_gpu_rows(devices: dict[str, Device], form: str = PER_CLASS) -> pd.DataFrame:
    """The shipped reference rows' usable GPU rows of `form` (`gpu_rows`), per-class ones alone for PER_CLASS:
    what `shipped` fits on beside the public rows, and what analysis/ordering.py predicts and holds out."""
    measured = gpu_rows(reference_rows(), devices)
    return measured[form_of(measured) == PER_CLASS] if form == PER_CLASS else measured


@cache
def shipped(form: str, path: Path = DEVICES) -> Predictor:
    """The model of `form` fitted on the shipped reference rows' GPU rows (`reference_rows`) and, in the
    per-class form, the public training figures of the GPUs we cannot rent (analysis/public.py `fit_rows`:
    Lambda's ResNet-50, one row a GPU), with its conformal quantiles and the GPUs' public efficiencies: what analysis/decide.py, the verdict and sweeps/predict.py predict with, so that a
    prediction rests on the reference GPUs alone, never on what else the user's folder holds. Fitted once a
    process (a few seconds on a 2-core VM: each model and GPU held out once for the intervals)."""
    devices = load_devices(path)
    measured = reference_gpu_rows(devices, form)
    if form == PER_CLASS:
        measured = pd.concat([measured, public_rows(devices)], ignore_index=True)
    return predictor(measured, devices, form)


# ---- validation: held-out error and the out-of-sample coverage of the intervals ----

def _inner(rest: pd.DataFrame, devices, form: str, by: str, costs=None) -> tuple[pd.Series, str]:
    """Conformal scores from `rest` alone (the held-out rows unseen): its own leave-one-`by`-out
    residuals (from `costs`, as the held rows are predicted), or leave-one-workload-out's where `rest`
    has one value of `by`; and a note where so."""
    if rest[by].nunique() > 1:
        return held_out(rest, devices, form, by, costs).dropna(), ""
    if by != MODEL and rest[MODEL].nunique() > 1:
        return held_out(rest, devices, form, MODEL), "interval from leave-one-model-out (one GPU left)"
    return pd.Series(dtype=float), "no interval: nothing left to hold out"


def _cells(split: str, group: str, frame: pd.DataFrame, by: str, devices, form: str,
           costs: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> list[dict]:
    """Each value of `by` held out in turn: per (held-out value, workload, device) of the rows of `form`,
    their number, median and worst |predicted/measured - 1|, and how many fell inside the 90% interval
    drawn from `rest` alone; the held rows predicted from their own step costs or from `costs(held)`'s
    (`as_counted`, the laptop's case). The three-term model is fitted on every row (it needs only the
    totals), the per-class model on the rows that have its columns."""
    frame = frame[form_of(frame) == PER_CLASS] if form == PER_CLASS else frame
    shown = form_of(frame) == form
    out, device = [], frame[MATCH_KEY] if MATCH_KEY in frame else pd.Series(np.nan, index=frame.index)
    for value, held in frame[shown].groupby(by):
        rest = frame.drop(index=frame.index[frame[by] == value])
        if rest.empty:
            out.append({"split": split, "group": group, "held_out": value, "rows": len(held), "form": form,
                        "note": f"no other {split} to fit on"})
            continue
        held = costs(held) if costs else held
        if held.empty:
            continue
        residual = np.log(held["step_s"].to_numpy(float) / fit(rest, devices, form).step_s(held, devices))
        inner, note = _inner(rest, devices, form, by, costs)
        q = conformal_q(inner)
        cells = pd.DataFrame({"error": np.abs(np.exp(-residual) - 1), "inside": np.abs(residual) <= q,
                              "workload": held[MODEL].to_numpy(), "device": device[held.index].to_numpy()})
        for (workload, dev), cell in cells.groupby(["workload", "device"], dropna=False):
            out.append({"split": split, "group": group, "held_out": value, "device": dev, "workload": workload,
                        "rows": len(cell), "median_error": cell["error"].median(), "worst_error": cell["error"].max(),
                        "inside": int(cell["inside"].sum()) if not math.isnan(q) else np.nan, "form": form,
                        "note": note})
    return out


def validate(rows: pd.DataFrame, path: Path = DEVICES) -> pd.DataFrame:
    """Held-out error and coverage: each GPU held out whole (fitted on the others, predicted from its
    table entry; the public tables' GPUs among them, as `shipped` fits on their rows too), then each
    workload held out on the GPUs together, then each from its step counted on the CPU (the laptop's
    case), and on each CPU (a CPU, which no table knows, is only ever held out by workload). Rows with and without the per-class columns are
    validated apart, in their forms. `inside` counts the rows within the 90% conformal interval drawn
    from the other rows' own held-out residuals (the held-out rows unseen)."""
    devices, out = load_devices(path), []
    gpus = gpu_rows(rows, devices)
    # as `shipped` fits: the public tables' rows beside the measured ones, each of their GPUs held out in turn too
    gpus = pd.concat([gpus, public_rows(devices)], ignore_index=True) if (form_of(gpus) == PER_CLASS).any() else gpus
    gpus = with_model(gpus)
    for form in form_of(gpus).unique():
        out += _cells("device", "GPU", gpus, MATCH_KEY, devices, form)
        out += _cells("workload", "GPU", gpus, MODEL, devices, form)
        if form == PER_CLASS:
            out += _cells("counted", "GPU", gpus, MODEL, devices, form, as_counted)
    for label, own in cpu_groups(rows):
        own = with_model(own)
        out += [cell for form in form_of(own).unique() for cell in _cells("workload", label, own, MODEL, None, form)]
    columns = ["split", "group", "held_out", "device", "workload", "rows", "median_error", "worst_error", "inside",
               "form", "note"]
    table = pd.DataFrame(out).reindex(columns=columns)
    table.attrs["host_launch_us"] = host_launch_us(gpus)  # for the targets' note (`_host_note`)
    table.attrs["count_ratio"] = count_ratio(gpus)  # and for the laptop's case's (`_laptop_why`)
    return table


def _coverage(cells: pd.DataFrame) -> tuple[float, int]:
    """Share of rows inside their interval, and the rows that had one."""
    has = cells.dropna(subset=["inside"])
    return (has["inside"].sum() / has["rows"].sum(), int(has["rows"].sum())) if len(has) else (float("nan"), 0)


def host_launch_us(gpus: pd.DataFrame) -> dict[str, float]:
    """Per GPU key, the median measured step time per op dispatched (us), over the workloads every GPU
    measured: on launch-bound steps, what one op costs that GPU's host."""
    per_class = gpus[form_of(gpus) == PER_CLASS]
    shared = set.intersection(*[set(g["workload"]) for _, g in per_class.groupby(MATCH_KEY)]) if len(per_class) else set()
    rows = per_class[per_class["workload"].isin(shared)]
    ops = rows[[f"{c}_launches_per_step" for c in OP_CLASSES]].sum(axis=1)
    return (1e6 * rows["step_s"] / ops).groupby(rows[MATCH_KEY]).median().to_dict()


def count_ratio(gpus: pd.DataFrame) -> dict[str, float]:
    """Per model (MODEL), the ops in the op classes of its step as the CPU counts it (`as_counted`) over
    those its GPU rows counted, the median over its configurations: near 1 where the two counts agree."""
    classes = [f"{c}_launches_per_step" for c in OP_CLASSES]
    gpus = gpus[form_of(gpus) == PER_CLASS]
    counted = as_counted(gpus)
    if counted.empty:
        return {}
    ratio = counted[classes].sum(axis=1) / gpus.loc[counted.index, classes].sum(axis=1)
    return ratio.groupby(gpus.loc[counted.index, MODEL]).median().to_dict()


def _laptop_why(cell, table: pd.DataFrame) -> str:
    """Why a model held out and predicted from its CPU count missed: the two counts disagree, or the fit."""
    ratio = table.attrs.get("count_ratio", {}).get(cell["workload"], 1.0)
    if not 0.5 <= ratio <= 2:
        return (f"its CPU count has {ratio:.0f}x the ops its GPU rows counted: the two counts disagree (the "
                "shipped recurrent rows were counted on a GPU before trainables/costs.py counted a cuDNN RNN op as "
                "its kernels and matrix products, each as one element-wise op); its rows counted again on a GPU "
                "would fix it")
    return ("the two counts agree: the fit's own error on an op mix unlike the other models' (its rows' "
            "utilisation and launch cost differ from what the others give); more models of its kind would pin it")


def _why(cell, table: pd.DataFrame) -> str:
    """Why a held-out GPU cell missed, and what data would fix it."""
    gpu = table[(table["group"] == "GPU") & (table["split"] == "device")]
    others = sorted(set(gpu["held_out"]) - {cell["held_out"]})
    seen = set(gpu[gpu["held_out"].isin(others)]["workload"])
    if cell["workload"] not in seen:
        return (f"measured on {cell['held_out']} only, so the fit never saw it on another GPU: measure it on "
                f"{' or '.join(others) or 'a second GPU'}")
    return "the host's launch cost (below)"


def _host_note(table: pd.DataFrame) -> list[str]:
    """Why leave-one-device-out misses with the GPUs at hand: their hosts' cost per op, and the fix."""
    us = table.attrs.get("host_launch_us", {})
    if len(us) < 2:
        return []
    slow, fast = max(us, key=us.get), min(us, key=us.get)
    return [f"    why: {len(us)} GPU models only ({', '.join(sorted(us))}), on {len(us)} hosts. Their steps are launch-bound, "
            f"and an op cost the {slow} host {us[slow]:.0f} us against {us[fast]:.0f} us on the {fast} host "
            f"({us[slow] / us[fast]:.1f}x, median over the workloads both measured): the host CPU's time, which "
            "no figure of the GPU's table entry predicts (both have the same 5 us launch overhead and FP32 peak). "
            "Predicting one from the other misses by about that factor. Rows of more GPUs on more hosts (an A100, "
            "an L4, a consumer card) would give the fit and the intervals that spread; a host-speed figure in the "
            "rows would separate host from GPU."]


def targets(table: pd.DataFrame) -> list[str]:
    """The three targets (TARGETS) on the GPUs' held-out cells of the per-class model (the three-term
    fallback's only where no row has the per-class columns), each met or missed, and why where missed:
    a workload held out and predicted from its CPU count (the laptop's case), a GPU held out, and the
    coverage of the 90% intervals over both."""
    gpu = table[(table["group"] == "GPU") & table["median_error"].notna()]
    form = PER_CLASS if (gpu["form"] == PER_CLASS).any() else THREE_TERM
    gpu = gpu[gpu["form"] == form]
    device, laptop = gpu[gpu["split"] == "device"], gpu[gpu["split"] == "counted"]
    lines = [f"== targets ({form} model, GPU rows; printed, not asserted"
             + ("; the three-term fallback's cells above are not held to them" if form == PER_CLASS and
                (table["form"] == THREE_TERM).any() else "") + ") =="]
    if len(laptop):
        median, worst = laptop["median_error"].median(), laptop["median_error"].max()
        ok = median <= TARGETS["laptop_median"] and worst <= TARGETS["laptop_worst"]
        lines.append(f"  leave one workload out, from counts taken on the CPU: median {median:.0%} (target "
                     f"<= {TARGETS['laptop_median']:.0%}), worst {worst:.0%} (target <= {TARGETS['laptop_worst']:.0%}), "
                     f"over the {len(laptop)} (workload, GPU) cells' median errors: " + ("met" if ok else "missed"))
        if not ok:
            bad = laptop.sort_values("median_error", ascending=False)
            bad = bad[bad["median_error"] > TARGETS["laptop_worst"]] if worst > TARGETS["laptop_worst"] else bad.head(3)
            lines += [f"    {c['workload']} on {c['device']} {c['median_error']:.0%}: {_laptop_why(c, table)}"
                      for _, c in bad.iterrows()]
    else:
        lines.append("  leave one workload out, from counts taken on the CPU: no counted configurations "
                     f"({COUNTED} absent: python -m crossover.sweeps.count_reference)")
    per_gpu = device.groupby("held_out")["median_error"].median()
    ok = len(per_gpu) >= TARGETS["gpu_models"] and per_gpu.median() <= TARGETS["gpu_median"]
    lines.append(f"  leave one GPU out, every GPU with rows (the reference rows' and the public tables'): median {per_gpu.median():.0%} (target <= "
                 f"{TARGETS['gpu_median']:.0%}) on {len(per_gpu)} GPU models ({', '.join(f'{g} {e:.0%}' for g, e in per_gpu.items())}; "
                 f"target at least {TARGETS['gpu_models']}): " + ("met" if ok else "missed")
)
    if not ok:
        lines += sorted({f"    {c['held_out']} {c['workload']}: {_why(c, table)}" for _, c in device.iterrows()
                         if c["median_error"] > TARGETS["gpu_median"] and _why(c, table) != "the host's launch cost (below)"})
        lines += _host_note(table)
    share, n = _coverage(pd.concat([device, laptop]))
    low, high = TARGETS["coverage"]
    ok = bool(n) and low <= share <= high
    lines.append(f"  coverage of the {1 - ALPHA:.0%} intervals (GPU held out, and workload held out from its CPU count): "
                 + (f"{share:.0%} over {n} rows" if n else "no interval") + f" (target {low:.0%}-{high:.0%}): "
                 + ("met" if ok else "missed"))
    if n and not ok:
        lines.append("    why: the guarantee holds for exchangeable held-out errors; " + (
            "wider than needed: the held-out residuals the intervals are drawn from mix launch-bound and "
            "compute-bound steps, whose errors differ; a quantile per bound would narrow them" if share > high else
            "the held-out rows err past the residuals of the rows left (too few GPUs and workloads to be exchangeable)"))
    return lines


def render_validation(table: pd.DataFrame) -> str:
    """The held-out table (errors and coverage per cell), then the targets."""
    if table.empty:
        return "nothing to validate: no usable rows of a table GPU or a CPU"
    shown = table.assign(coverage=table["inside"] / table["rows"]).drop(columns="inside")
    for c in ("median_error", "worst_error", "coverage"):
        shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else f"{v:.0%}")
    parts = []
    for split, title in (("device", "leave one GPU out"), ("workload", "leave one workload out"),
                         ("counted", "leave one workload out, predicted from its step counted on the CPU (the laptop's case)")):
        same = "device" if split == "device" else "held_out"  # a copy of another column in this split
        part = shown[shown["split"] == split].drop(columns=["split", same])
        if len(part):
            parts += [f"== {title}: |predicted / measured - 1| of step time; coverage of the {1 - ALPHA:.0%} "
                      "conformal interval (drawn without the held-out rows) ==",
                      part.fillna("").to_string(index=False)]
    return "\n".join(parts + targets(table))


def bounds(rows: pd.DataFrame, path: Path = DEVICES) -> pd.DataFrame:
    """Each usable row's bound, the largest term of its measured step: 'launch' (launches x overhead),
    'memory' (bytes / bandwidth) or 'compute' (FLOPs / peak), with achieved FLOP/s and bytes/s against
    the peaks. A table GPU's figures are the table's (the launch overhead scaled as calibrated on the
    GPUs measured); a CPU's are those fitted on its own rows."""
    devices, parts = load_devices(path), []
    gpus = gpu_rows(rows, devices)
    if not gpus.empty:
        cal = calibrate(gpus, devices)
        terms = _terms(gpus, devices) * [np.exp(cal.theta[0]), 1, 1]
        parts.append((gpus, terms))
    cpus = _usable(rows)
    for _, own in cpus[cpus["is_cpu"]].groupby(["device_name", "torch_threads"]):
        cal = calibrate(own, None)
        parts.append((own, _terms(own, None) * [np.exp(cal.theta[0]), np.exp(-cal.theta[1]), np.exp(-cal.theta[2])]))
    frames = []
    for frame, terms in parts:
        # each term's time over the measured step, which is no share of it: a term is its count at the
        # device's fitted figures, so a row that ran faster than the fit has a term longer than its step
        ratio = terms / frame["step_s"].to_numpy(float)[:, None]
        frames.append(frame.assign(launch_to_step=ratio[:, 0], compute_to_step=ratio[:, 1], memory_to_step=ratio[:, 2],
                                   achieved_flops_per_s=frame["flops_per_step"] / frame["step_s"],
                                   achieved_bytes_per_s=frame["bytes_per_step"] / frame["step_s"],
                                   bound=np.array(["launch", "compute", "memory"])[ratio.argmax(axis=1)]))
    return pd.concat(frames) if frames else pd.DataFrame(columns=["bound"])


def bound_table(rows: pd.DataFrame, path: Path = DEVICES) -> dict[str, pd.DataFrame]:
    """Per workload, per arm, its smallest, middle and largest model: step time, achieved FLOP/s and
    bytes/s, each term's time over the measured step (`*_to_step`; above 1: the term alone predicts more
    than was measured) and the bound."""
    frame = bounds(rows, path)
    if frame.empty:
        return {}
    columns = ["arm", "n_params", "batch_size", "step_s", "achieved_flops_per_s", "compute_to_step",
               "achieved_bytes_per_s", "memory_to_step", "launch_to_step", "bound"]
    tables = {}
    for workload, group in frame.groupby("workload"):
        sizes = sorted(group["n_params"].unique())
        picked = group[group["n_params"].isin({sizes[0], sizes[len(sizes) // 2], sizes[-1]})]
        table = picked.groupby(["arm", "n_params", "batch_size"], as_index=False).agg(
            {c: "median" for c in columns[3:-1]} | {"bound": lambda b: b.mode().iloc[0]})
        tables[workload] = table[columns]
    return tables


def render_bounds(tables: dict[str, pd.DataFrame]) -> str:
    """The bound tables as text: step in ms, achieved GFLOP/s and GB/s, each term's time over the step."""
    out = []
    for workload, table in tables.items():
        shown = table.assign(step_ms=table["step_s"] * 1e3, gflop_per_s=table["achieved_flops_per_s"] / 1e9,
                             gb_per_s=table["achieved_bytes_per_s"] / 1e9)
        shown = shown[["arm", "n_params", "batch_size", "step_ms", "gflop_per_s", "compute_to_step", "gb_per_s",
                       "memory_to_step", "launch_to_step", "bound"]]
        out += [f"== {workload}: what bounds a step ==", shown.to_string(index=False, float_format=lambda v: f"{v:.3g}")]
    return "\n".join(out) or "no rows with step costs: nothing bounds"


def render(rows: pd.DataFrame, path: Path = DEVICES) -> str:
    """The GPUs' calibration in both forms, and the bound tables."""
    devices = load_devices(path)
    gpus = gpu_rows(rows, devices)
    lines = []
    per_class = gpus[form_of(gpus) == PER_CLASS]
    if len(per_class):
        fitted = fit(per_class, devices)
        lines.append(f"per-class model on {len(per_class)} rows of {', '.join(sorted(set(per_class[MATCH_KEY])))} "
                     f"(rms log error {fitted.rms:.3f}): " +
                     ", ".join(f"{k} {v:.3g}" for k, v in fitted.parameters().items()))
    if len(gpus) > len(per_class):
        lines.append(f"three-term model (the fallback) for {len(gpus) - len(per_class)} rows without per-class columns:")
    if not gpus.empty:
        counted = int(gpus["costs_counted"].sum())
        lines.append(f"GPU calibration on {len(gpus)} rows of {', '.join(sorted(set(gpus[MATCH_KEY])))} "
                     f"({counted} with counted step costs, {len(gpus) - counted} computed from the config):")
        for form in ("max", "sum"):
            cal = calibrate(gpus, devices, form)
            scale, e_c, e_m = np.exp(cal.theta)
            lines.append(f"  {form}: launch overhead x {scale:.3g}, compute efficiency {e_c:.3g}, memory efficiency "
                         f"{e_m:.3g}; rms log error {cal.rms:.3f}")
    return "\n".join(lines + [render_bounds(bound_table(rows, path))])

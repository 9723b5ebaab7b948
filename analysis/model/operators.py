"""Each op's GPU time from the operator study: measured ops like it (studies/opbench.py, results/reference/_ops/),
on the GPU they ran on, scaled to a GPU nobody studied by the op's own bound. `model --validate` prices every study
op so (validate.op_study), each from the others; the shipped model does not price a step's ops so, since whole
steps came out worse (docs/validation.md, "The operator-level model": the predictor that did is tagged
per-op-model-2026-11-28).

An op (kind, FLOPs F, bytes B, launches n) is priced per launch, f = F / n and b = B / n, on the arithmetic it runs
on (`unit`: a matrix product's at the row's precision and the op's dtype, strict FP32 for PyTorch's default;
cuDNN's convolutions and recurrent nets at TF32 unless FP32, BF16 or FP16 is asked; none for the memory-bound
kinds). Its roofline on a GPU is r = max(f / peak_unit, b / bandwidth).

- On a studied GPU s its time per launch is t_s = max(r_s / e, the study's fixed time of one kernel), e (the share
  of the roofline reached) interpolated in log over the K_NEAREST study ops of its kind and unit nearest in
  (log f, log b), inverse-distance weighted: a study op's own time where it has the op's shape, the nearest
  shapes' share between them. Past the study's shapes, the share at their edge moves along the kind's trend in
  size (the slope of a linear fit of log e on the first feature: FLOPs, or a memory-bound kind's bytes) up to the
  best share a study op of its kind reached on the unit.
- On another GPU g, t_g = t_s (l + (1 - l) (w P_s / P_g + (1 - w) W_s / W_g)): l, the share of t_s that is its
  kernels' fixed latency (each study op's kernels x the study's LATENCY_QUANTILE of time per kernel, over its
  time; interpolated the same way), stays; the rest scales with the peaks P at the unit and the bandwidths W,
  weighted by the op's compute share w of its roofline on s: Habitat's scaling of an op by its bound (Yu et al.,
  USENIX ATC 2021; `Study.on`).

A kind or unit no study measured gives NaN. Reads Parquet only: never imports torch or ray.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from ..load import REFERENCE
from .device_table import DEVICES, Device, MATCH_KEY, device_key, load_devices

STUDIES = REFERENCE / "_ops"  # one ops*.parquet a GPU studied (studies/opbench.py --out)


COMPUTE_KINDS = ("matmul", "conv", "conv_grouped", "rnn")  # kinds with FLOPs counted; the others move bytes
CUDNN_KINDS = ("conv", "conv_grouped", "rnn")  # run at cuDNN's precision: TF32 unless the row asks FP32, BF16 or FP16


K_NEAREST = 4


# a study's fixed time of one kernel: this quantile of its ops' GPU time per kernel (the smallest ops, a kernel's
# launch-to-finish on the GPU with no work to speak of: about 2 us on the H100)
LATENCY_QUANTILE = 0.02


DTYPE_UNIT = {"bfloat16": "bf16", "float16": "fp16"}


def unit(kind: str, dtype: str, precision: str) -> str | None:
    """The arithmetic an op of `kind` and `dtype` runs on in a row of `precision` (trainables/precision.py's): bf16
    or fp16 for an op in that dtype; for an FP32 op, a matrix product's at the row's tf32 or strict FP32 (PyTorch's
    default, and an op autocast keeps in FP32), cuDNN's at TF32 unless the row asks strict fp32; None for a kind
    that only moves bytes."""
    if kind not in COMPUTE_KINDS:
        return None
    if dtype in DTYPE_UNIT:
        return DTYPE_UNIT[dtype]
    if kind in CUDNN_KINDS:
        return "fp32" if precision == "fp32" else "tf32"
    return "tf32" if precision == "tf32" else "fp32"


def _features(kind: str, f: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where an op sits among the study's: log10 of FLOPs and bytes per launch (bytes alone for a kind that only
    moves bytes), one decade one unit."""
    cols = (f, b) if kind in COMPUTE_KINDS else (b,)
    return np.column_stack([np.log10(np.maximum(c, 1.0)) for c in cols])


def roofline_s(kind: str, f, b, peak, bandwidth) -> np.ndarray:
    """Seconds per launch at the unit's peak or the bandwidth, the larger."""
    compute = np.asarray(f, float) / peak if kind in COMPUTE_KINDS else 0.0
    return np.maximum(compute, np.asarray(b, float) / bandwidth)


@dataclass(frozen=True)
class Study:
    """One GPU's operator study, per (kind, unit): its ops' features, log share of the roofline and latency share."""

    key: str  # the GPU's device-table key
    device: Device
    ops: dict  # (kind, unit) -> (features, log e, l, the slope of log e on the first feature)
    latency_s: float  # one kernel's fixed time on this GPU (LATENCY_QUANTILE): no launch takes less
    best: dict  # (kind, unit) -> the largest log share of the roofline an op of that kind reached on the unit

    def per_launch(self, kind: str, u: str | None, f: np.ndarray, b: np.ndarray,
                   leave_out: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Seconds per launch of ops of (kind, unit) with FLOPs f and bytes b a launch on this GPU, and the share of
        it that is fixed latency (`Study`'s docstring); NaN where the study has no op of that kind and unit. With
        `leave_out`, from the study's ops of other shapes alone (model --validate's check of the interpolation)."""
        if (kind, u) not in self.ops or not len(f):
            return np.full(len(f), np.nan), np.full(len(f), np.nan)
        features, log_e, latency, slope = self.ops[(kind, u)]
        query = _features(kind, f, b)
        # past the study's shapes: the share at the nearest edge, moved along the kind's trend in size (a linear fit
        # of log share on the first feature) up to the best share an op of its kind reached (the module's docstring).
        # Checked on the study itself, its largest fifth of each kind's shapes predicted from the rest: |error| at the
        # 90th percentile 125% (H100) and 142% (H200) held constant, 81% and 85% along the trend; a trend on both
        # features, 83% and 85% (2026-11-28: docs/validation.md, "The operator-level model")
        inside = np.clip(query, features.min(axis=0), features.max(axis=0))
        distance = np.sqrt(((inside[:, None, :] - features[None, :, :]) ** 2).sum(axis=2))
        if leave_out:
            distance[distance < 1e-9] = np.inf
        k = min(K_NEAREST, len(features))
        near = np.argpartition(distance, k - 1, axis=1)[:, :k]
        weight = 1.0 / (np.take_along_axis(distance, near, axis=1) ** 2 + 1e-6)
        weight /= weight.sum(axis=1, keepdims=True)
        trend = (weight * log_e[near]).sum(axis=1) + (query[:, 0] - inside[:, 0]) * slope
        share = np.exp(np.minimum(trend, self.best[(kind, u)]))
        r = roofline_s(kind, f, b, self.device.peak(u) if u else 1.0, self.device.memory_bytes_per_s)
        return np.maximum(r / share, self.latency_s), (weight * latency[near]).sum(axis=1)

    def on(self, kind: str, u: str | None, f: np.ndarray, b: np.ndarray, peak: float, bandwidth: float) -> np.ndarray:
        """Seconds per launch of ops of (kind, unit) with FLOPs f and bytes b a launch on another GPU, of `peak` at the
        unit and `bandwidth`: this study's time, its fixed latency kept and the rest scaled by this GPU's peak over
        that one's and its bandwidth over theirs, weighted by the op's compute share of its roofline here (Habitat's
        scaling). NaN where the study has no op of that kind and unit."""
        t, fixed = self.per_launch(kind, u, f, b)
        own_peak = self.device.peak(u) if u else np.inf
        compute, memory = f / own_peak, b / self.device.memory_bytes_per_s
        share = np.where(compute + memory > 0, compute / np.maximum(compute + memory, 1e-300), 0.0)
        ratio = share * (own_peak / peak if u else 1.0) + (1 - share) * self.device.memory_bytes_per_s / bandwidth
        return t * (fixed + (1 - fixed) * ratio)


def timed(table: pd.DataFrame) -> pd.DataFrame:
    """A study's ops that did work and whose kernels the profiler saw."""
    return table[(table["gpu_s"] > 0) & (table["ops"] > 0) & ((table["flops"] > 0) | (table["bytes"] > 0))]


def study_unit(kind: str, precision: str) -> str | None:
    """The unit a study op ran on: opbench runs each case under `precision`'s autocast, which casts the compute
    kinds to bf16 or fp16."""
    return unit(kind, {"bf16": "bfloat16", "fp16": "float16"}.get(precision, "float32"), precision)


def _study(table: pd.DataFrame, key: str, device: Device) -> Study:
    table = timed(table)
    kernels = table["kernels"].to_numpy(float)
    per_kernel = table["gpu_s"].to_numpy(float) / np.where(kernels > 0, kernels, np.nan)
    latency_s = float(np.nanquantile(per_kernel, LATENCY_QUANTILE, method="lower"))
    ops = {}
    units = [study_unit(k, p) for k, p in zip(table["op_class"], table["precision"])]
    # pandas-stubs take a column as a list only without None, the missing value a list writes
    table = table.assign(_unit=units)  # type: ignore[arg-type]
    for by, part in table.groupby(["op_class", "_unit"], dropna=False):
        kind, unit = cast(tuple[str, object], by)  # an op class, and its unit's name or NaN where it has none
        u = unit if isinstance(unit, str) else None
        n = part["ops"].to_numpy(float)
        f, b, t = part["flops"].to_numpy(float) / n, part["bytes"].to_numpy(float) / n, part["gpu_s"].to_numpy(float) / n
        r = roofline_s(kind, f, b, device.peak(u) if u else 1.0, device.memory_bytes_per_s)
        fixed = np.minimum(1.0, latency_s * np.nan_to_num(part["kernels"].to_numpy(float)) / n / t)
        features, log_e = _features(kind, f, b), np.log(r / t)
        slope = float(np.polyfit(features[:, 0], log_e, 1)[0]) if np.ptp(features[:, 0]) > 0 else 0.0
        ops[(kind, u)] = (features, log_e, fixed, slope)
    return Study(key, device, ops, latency_s, {k: float(v[1].max()) for k, v in ops.items()})


@cache
def study_table(folder: Path = STUDIES, path: Path = DEVICES) -> pd.DataFrame:
    """Every operator study shipped in `folder` (ops*.parquet), each row with its GPU's device-table key (MATCH_KEY);
    empty where none is."""
    devices = load_devices(path)
    tables = [pd.read_parquet(p) for p in sorted(Path(folder).glob("ops*.parquet"))]
    if not tables:
        return pd.DataFrame()
    table = pd.concat(tables, ignore_index=True)
    keys = table["device_name"].map({n: device_key(n, devices) for n in table["device_name"].unique()})
    return table.assign(**{MATCH_KEY: keys}).dropna(subset=[MATCH_KEY]).reset_index(drop=True)


@cache
def studies(folder: Path = STUDIES, path: Path = DEVICES) -> tuple[Study, ...]:
    """One Study a device-table GPU of the operator studies shipped in `folder`."""
    table, devices = study_table(folder, path), load_devices(path)
    return tuple(_study(part, str(key), devices[str(key)])
                 for key, part in table.groupby(MATCH_KEY)) if len(table) else ()


RNN_CALLS_A_CASE = 2  # an LSTM or GRU case of the study is one cuDNN RNN call forward and one backward


def rnn_host_s(folder: Path = STUDIES, path: Path = DEVICES) -> tuple[float, float]:
    """The host's seconds per kernel cuDNN launches for a recurrent net and per cuDNN RNN call, from the study's LSTM
    and GRU cases: each case's wall time against its calls (RNN_CALLS_A_CASE) and kernels, least squares per study and
    precision group (FP32/TF32, BF16/FP16), the geometric mean over them. What perclass.PARAMETERS' k_rnn and
    k_rnn_call start from (over the device table's launch overhead): the whole steps fit them from there."""
    table = study_table(folder, path)
    rnn = table[table["op_class"] == "rnn"]
    fits = []
    for _, part in rnn.groupby([MATCH_KEY, rnn["precision"].isin(["bf16", "fp16"])]):
        design = np.column_stack([np.full(len(part), float(RNN_CALLS_A_CASE)), part["kernels"].to_numpy(float)])
        fits.append(np.linalg.lstsq(design, part["wall_s"].to_numpy(float), rcond=None)[0])
    call, kernel = np.exp(np.log(np.array(fits)).mean(axis=0))
    return float(kernel), float(call)

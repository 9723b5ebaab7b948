"""The three-term model, the fallback for rows written before the per-class columns: a step's launches, FLOPs
and bytes in total at the device's figures, three efficiencies fitted per device group and a bias per workload.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..load import precisions_of
from .counts import COST_COLUMNS
from .device_table import Device, MATCH_KEY


def _precision(rows: pd.DataFrame) -> pd.Series:
    """The precision whose peak a row's step runs at in the three-term model: the row's own, where PyTorch's
    default counts as TF32 for a step whose convolutions and recurrent nets (cuDNN's, TF32 by default) compute
    more FLOPs than its matrix products (strict FP32 by default), and FP32 for the rest, a step whose classes were
    never counted among them; a row written before the column, fp32."""
    precision = precisions_of(rows)
    flops = rows.reindex(columns=[f"{c}_flops_per_step" for c in ("conv", "rnn", "matmul")]).astype(float).to_numpy()
    cudnn = pd.Series(np.where(flops[:, 0] + flops[:, 1] > flops[:, 2], "tf32", "fp32"), index=rows.index)
    return precision.mask(precision.eq("default"), cudnn)


def _combine(compute, memory, form: str):
    return np.maximum(compute, memory) if form == "max" else compute + memory


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
    from scipy.optimize import least_squares  # here, as perclass.fit imports it: only a fit needs the solver

    terms, measured = _terms(frame, devices), frame["step_s"].to_numpy(float)
    starts: list[tuple[float, ...]] = ([(0.0, math.log(0.3), math.log(0.5))] if devices
                                       else [(math.log(5e-6), math.log(1e11), math.log(2e10))])
    starts += [tuple(s + d for s in starts[0]) for d in (-2.0, 2.0)]
    def misfit(theta: np.ndarray, shape: str) -> np.ndarray:
        return np.log(Calibration(shape, tuple(theta), {}, {}, 0.0).step_s(terms)) - np.log(measured)

    fits = [(shape, least_squares(misfit, np.array(start), args=(shape,),
                                  bounds=(np.array(starts[0]) - 12, np.array(starts[0]) + 12)))
            for shape in ([form] if form else ["max", "sum"]) for start in starts]
    shape, fit = min(fits, key=lambda pair: pair[1].cost)
    residual = pd.Series(-fit.fun, index=frame.index)  # log(measured / model)
    bias = residual.groupby(frame["workload"]).median()
    centred = residual - frame["workload"].map(bias)
    spread = {w: (g.quantile(0.1), g.quantile(0.9)) for w, g in centred.groupby(frame["workload"])}
    spread["*"] = (centred.quantile(0.1), centred.quantile(0.9))
    return Calibration(shape, tuple(fit.x), bias.to_dict(), spread, float(np.sqrt(np.mean(fit.fun ** 2))))

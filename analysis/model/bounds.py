"""What bounds each measured step (compute, memory or launches) under the fitted model, and `model`'s text.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .counts import PER_CLASS, _usable, form_of, gpu_rows
from .device_table import DEVICES, MATCH_KEY, load_devices
from .perclass import fit
from .threeterm import _terms, calibrate


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
    tables: dict[str, pd.DataFrame] = {}
    for workload, group in frame.groupby("workload"):
        sizes = sorted(group["n_params"].unique())
        picked = group[group["n_params"].isin({sizes[0], sizes[len(sizes) // 2], sizes[-1]})]
        table = picked.groupby(["arm", "n_params", "batch_size"], as_index=False).agg(
            {c: "median" for c in columns[3:-1]} | {"bound": lambda b: b.mode().iloc[0]})
        tables[str(workload)] = table[columns]
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
                     f"({counted} with their own counted step costs, {len(gpus) - counted} with their configuration's as "
                     "crossover predict counts it):")
        for form in ("max", "sum"):
            cal = calibrate(gpus, devices, form)
            scale, e_c, e_m = np.exp(cal.theta)
            lines.append(f"  {form}: launch overhead x {scale:.3g}, compute efficiency {e_c:.3g}, memory efficiency "
                         f"{e_m:.3g}; rms log error {cal.rms:.3f}")
    return "\n".join(lines + [render_bounds(bound_table(rows, path))])

"""A model of time per epoch, calibrated on the measured devices, that predicts the GPUs nobody measured.

    python -m analysis model results/reference/h200-2026-11-22/scaling results/reference/h100-2026-11-21-engines/engines-gpu-*
    python -m analysis model RESULTS... --validate      # leave each measured device out in turn

    predict(rows, ["A100", "L4"])    # what analysis/decide.py asks: one predicted row per configuration and GPU

A step costs FLOPs F, bytes B and launches N (trainables/costs.py counts them into each row; for rows
written before those columns, `step_costs` computes them from the configuration). On a GPU of the
device table (analysis/devices.yaml: peak FLOP/s, memory bandwidth, a per-launch overhead):

    step_s = N x overhead x s_launch + max(F / (peak x e_compute), B / (bandwidth x e_memory))
    epoch_s = steps_per_epoch x step_s x exp(bias of the workload)

s_launch, e_compute and e_memory are shared by every GPU and fitted (least squares on log time) on
the measured GPUs' rows; the workload's bias is its rows' median log residual, and the interval the
10th to 90th percentile of its residuals. A CPU has no table entry: its three figures (overhead,
FLOP/s, bytes/s) are fitted on its own rows only, so a CPU is never predicted, only explained. `form`
"sum" adds the two terms instead of taking the larger; `fits` says which fits the rows better.
docs/model.md says what the estimates assume and what the validation gave. Reads rows only: never
imports torch or ray.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import least_squares

from analysis.schema import CONFIG_COLUMNS

DEVICES = Path(__file__).with_name("devices.yaml")
DEVICE_FIELDS = ("name", "fp32_flops", "tf32_flops", "bf16_flops", "memory_bytes_per_s", "launch_overhead_s",
                 "source", "date")
COST_COLUMNS = ("flops_per_step", "bytes_per_step", "launches_per_step")
# Bytes a step moves, for rows without bytes_per_step: 4-byte words per parameter, per activation element
# (every layer's output per sample, input included), per sample, and fixed; fitted on 2026-11-23 to what
# trainables/costs.py counts on the CPU (within 8% over 36 configurations; tests/test_costs.py checks it).
BYTES_WORDS = {"disc": (6.143, 11.82, -13.07, -510.4), "tabular": (22.08, 11.67, -127.9, 8312.0),
               "peaks": (34.85, 10.88, -12.6, -1343.0), "lenet": (6.0, 5.8, -1862.0, 314200.0),
               "mnist_cnn": (11.0, 6.831, -2667.0, 314300.0)}
# Launches (aten ops that are not views) a step: fixed + per layer, as trainables/costs.py counts them on
# the CPU (loop 'fast', eager); used for rows without launches_per_step, on every device.
LAUNCHES = {"disc": (12, 8), "tabular": (14, 24), "peaks": (6, 24), "lenet": (48, 0), "mnist_cnn": (63, 0)}
# The CNNs' convolutions, per width w: (FLOPs of a sample's forward as (per w, per w^2, fixed) with the
# fully-connected layers, FLOPs of the first convolution per w (its input needs no gradient), activation
# elements per sample as (per w, fixed)).
CNNS = {"mnist_cnn": ((320_000, 640_000, 1_000), 288_000, (8_760, 844)),
        "lenet": ((180_672, 480_000, 21_840), 84_672, (7_880, 998))}
PRECISION_PEAK = {"fp32": "fp32_flops", "tf32": "tf32_flops", "bf16": "bf16_flops", "fp16": "bf16_flops"}
MATCH_KEY = "_device_key"


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
        devices[str(key)] = Device(key=str(key), name=str(entry["name"]), **figures,
                                   source=str(entry["source"]), date=str(entry["date"]))
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
    """fp32, except that convolutions run TF32 on a GPU by default (cudnn.allow_tf32), and a row's own
    `precision` where it has one."""
    default = rows["workload"].isin(list(CNNS)).map({True: "tf32", False: "fp32"})
    return rows["precision"].fillna(default) if "precision" in rows else default


def _combine(compute, memory, form: str):
    return np.maximum(compute, memory) if form == "max" else compute + memory


def _usable(rows: pd.DataFrame) -> pd.DataFrame:
    """ok eager rows of one process on one device (cpu, cuda), with their step costs and measured step_s.

    Engines graph and compile are left out: a replayed graph launches 3 times a step but still runs
    every kernel of it, a cost per kernel on the GPU this model has no term for."""
    ok = rows[(rows["status"] == "ok") & rows["device"].isin(["cpu", "cuda"]) & rows["engine"].eq("eager")]
    ok = ok.drop(columns=list(COST_COLUMNS), errors="ignore").join(step_costs(ok)).dropna(subset=list(COST_COLUMNS) + ["epoch_s_median", "steps_per_epoch"])
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
    usable = usable[usable["device"] == "cuda"]
    keyed = usable.assign(**{MATCH_KEY: usable["device_name"].map(lambda n: device_key(n, devices))})
    return keyed[keyed[MATCH_KEY].notna()]


def _config_keys(rows: pd.DataFrame) -> list[str]:
    extra = ["engine"] + (["precision"] if "precision" in rows else [])
    return [c for c in CONFIG_COLUMNS if c != "device"] + extra


def _predicted(configs: pd.DataFrame, cal: Calibration, devices: dict[str, Device], key: str) -> pd.DataFrame:
    """The model's epoch times of `configs` (usable rows, one per configuration) on the GPU `key`."""
    on = configs.assign(**{MATCH_KEY: key})
    step = cal.step_s(_terms(on, devices))
    factors = np.array([cal.interval(w) for w in on["workload"]])
    epoch = on["steps_per_epoch"].to_numpy(float) * step
    out = on[_config_keys(on) + ["n_params", "steps_per_epoch"]].assign(
        device="cuda", device_name=key, epoch_s_median=epoch * factors[:, 0], epoch_s_lo=epoch * factors[:, 1],
        epoch_s_hi=epoch * factors[:, 2], predicted=True)
    return out.assign(samples_per_s=on["dataset_size"] / out["epoch_s_median"])


def predict(rows: pd.DataFrame, gpus: list[str], path: Path = DEVICES) -> pd.DataFrame:
    """For each configuration measured in `rows` and each GPU key in `gpus` that no row measured at that
    configuration: its predicted epoch_s_median with an interval (epoch_s_lo, epoch_s_hi),
    samples_per_s, predicted=True.

    The step costs of a configuration come from one of its rows (a GPU row first: its launches are
    the GPU's). Where a row of the GPU measured the configuration, it is not predicted: the
    measurement wins; a GPU measured at some configurations (the H100 reference rows: disc and peaks
    only) is predicted at the others, calibrated on its own rows among the rest."""
    devices = load_devices(path)
    unknown = [g for g in gpus if g not in devices]
    if unknown:
        raise ValueError(f"GPUs {unknown} are not in {path}: use its keys {sorted(devices)}, or add an entry")
    measured_gpus = gpu_rows(rows, devices)
    if measured_gpus.empty:
        raise ValueError("no rows of a GPU in the device table to calibrate the model on: read a GPU's results "
                         "alongside, e.g. results/reference/h200-2026-11-22/scaling")
    cal = calibrate(measured_gpus, devices)
    usable = _usable(rows).sort_values("device", key=lambda d: d != "cuda", kind="stable")
    configs = usable.drop_duplicates(_config_keys(usable))
    keys = _config_keys(usable)
    frames = []
    for key in gpus:
        done = measured_gpus.loc[measured_gpus[MATCH_KEY] == key, keys].drop_duplicates()
        todo = configs.merge(done, on=keys, how="left", indicator=True)
        todo = todo[todo["_merge"] == "left_only"].drop(columns="_merge")
        if len(todo):
            frames.append(_predicted(todo, cal, devices, key))
    return pd.concat(frames, ignore_index=True) if frames else _predicted(configs.iloc[:0], cal, devices, "")


def _errors(frame: pd.DataFrame, cal: Calibration, devices) -> pd.Series:
    """|predicted / measured - 1| of each row's epoch time, the calibration not having seen the row."""
    factors = np.array([cal.interval(w)[0] for w in frame["workload"]])
    predicted = frame["steps_per_epoch"].to_numpy(float) * cal.step_s(_terms(frame, devices)) * factors
    return pd.Series(np.abs(predicted / frame["epoch_s_median"].to_numpy(float) - 1), index=frame.index)


def _summary(held_out: str, errors: pd.Series, workloads: pd.Series, form: str) -> list[dict]:
    return [{"held_out": held_out, "workload": w, "rows": len(e), "median_error": e.median(), "worst_error": e.max(),
             "form": form} for w, e in errors.groupby(workloads)]


def validate(rows: pd.DataFrame, path: Path = DEVICES) -> pd.DataFrame:
    """Leave-one-out error per held-out device and workload: median and worst |predicted/measured - 1|.

    A GPU is held out whole: the model is calibrated on the other GPUs' rows and predicts it from its
    table entry. A CPU, which has no table entry, is held out one workload at a time: calibrated on
    its own other workloads' rows, it predicts that workload's (the bias carried over is the median
    of the other workloads')."""
    devices, out = load_devices(path), []
    gpus = gpu_rows(rows, devices)
    for key, held in gpus.groupby(MATCH_KEY):
        rest = gpus[gpus[MATCH_KEY] != key]
        if rest.empty:
            out.append({"held_out": key, "workload": "(all)", "rows": len(held), "note": "no other GPU to calibrate on"})
            continue
        cal = calibrate(rest, devices)
        out += _summary(key, _errors(held, cal, devices), held["workload"], cal.form)
    cpus = _usable(rows)
    cpus = cpus[cpus["device"] == "cpu"]
    for (name, threads), own in cpus.groupby(["device_name", "torch_threads"]):
        for workload, held in own.groupby("workload"):
            rest = own[own["workload"] != workload]
            label = f"{name} ({threads:.0f} threads)"
            if rest.empty:
                out.append({"held_out": label, "workload": workload, "rows": len(held), "note": "no other workload"})
                continue
            cal = calibrate(rest, None)
            out += _summary(label, _errors(held, cal, None), held["workload"], cal.form)
    return pd.DataFrame(out)


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
    for _, own in cpus[cpus["device"] == "cpu"].groupby(["device_name", "torch_threads"]):
        cal = calibrate(own, None)
        parts.append((own, _terms(own, None) * [np.exp(cal.theta[0]), np.exp(-cal.theta[1]), np.exp(-cal.theta[2])]))
    frames = []
    for frame, terms in parts:
        share = terms / frame["step_s"].to_numpy(float)[:, None]
        frames.append(frame.assign(launch_share=share[:, 0], compute_share=share[:, 1], memory_share=share[:, 2],
                                   achieved_flops_per_s=frame["flops_per_step"] / frame["step_s"],
                                   achieved_bytes_per_s=frame["bytes_per_step"] / frame["step_s"],
                                   bound=np.array(["launch", "compute", "memory"])[share.argmax(axis=1)]))
    return pd.concat(frames) if frames else pd.DataFrame(columns=["bound"])


def bound_table(rows: pd.DataFrame, path: Path = DEVICES) -> dict[str, pd.DataFrame]:
    """Per workload, per arm, its smallest, middle and largest model: step time, achieved FLOP/s and
    bytes/s, each term's share of the step (above 1: the term alone predicts more than was measured)
    and the bound."""
    frame = bounds(rows, path)
    if frame.empty:
        return {}
    columns = ["arm", "n_params", "batch_size", "step_s", "achieved_flops_per_s", "compute_share",
               "achieved_bytes_per_s", "memory_share", "launch_share", "bound"]
    tables = {}
    for workload, group in frame.groupby("workload"):
        sizes = sorted(group["n_params"].unique())
        picked = group[group["n_params"].isin({sizes[0], sizes[len(sizes) // 2], sizes[-1]})]
        table = picked.groupby(["arm", "n_params", "batch_size"], as_index=False).agg(
            {c: "median" for c in columns[3:-1]} | {"bound": lambda b: b.mode().iloc[0]})
        tables[workload] = table[columns]
    return tables


def render_validation(table: pd.DataFrame) -> str:
    if table.empty:
        return "nothing to validate: no usable rows of a table GPU or a CPU"
    shown = table.copy()
    for c in ("median_error", "worst_error"):
        if c in shown:
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else f"{v:.0%}")
    return shown.fillna("").to_string(index=False)


def render_bounds(tables: dict[str, pd.DataFrame]) -> str:
    """The bound tables as text: step in ms, achieved GFLOP/s and GB/s, each term's share of the step."""
    out = []
    for workload, table in tables.items():
        shown = table.assign(step_ms=table["step_s"] * 1e3, gflop_per_s=table["achieved_flops_per_s"] / 1e9,
                             gb_per_s=table["achieved_bytes_per_s"] / 1e9)
        shown = shown[["arm", "n_params", "batch_size", "step_ms", "gflop_per_s", "compute_share", "gb_per_s",
                       "memory_share", "launch_share", "bound"]]
        out += [f"== {workload}: what bounds a step ==", shown.to_string(index=False, float_format=lambda v: f"{v:.3g}")]
    return "\n".join(out) or "no rows with step costs: nothing bounds"


def render(rows: pd.DataFrame, path: Path = DEVICES) -> str:
    """The GPUs' calibration in both forms, and the bound tables."""
    devices = load_devices(path)
    gpus = gpu_rows(rows, devices)
    lines = []
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

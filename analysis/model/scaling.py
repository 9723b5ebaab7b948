"""The data-parallel model (collective.py) against runs on several GPUs it never saw: `parallel --validate`.

    python -m crossover.analysis parallel --validate

Two sets, each run on 2, 4 or 8 GPUs of one host, each predicted from its own one-GPU figure and its link:

- measured: the shipped DDP rows (results/reference/h200x2-2026-11-21, h200x4-2026-11-22, h200x8-2026-11-22:
  `ddp:N` against `ddp:1`, else `cuda`, on H200s joined by NVLink). A row is used where its one-GPU step at the
  per-GPU batch is measured: weak scaling (N x the one-GPU batch), and strong scaling where the one-GPU step is
  bound by kernel launches, so that it does not change with the batch (seed 000's MLP at batch 100; the tabular MLP
  at widths 128-512, whose `cuda` step is the same 23 ms at each; width 1,024 is neither, and left out). HOST_S,
  the one constant fitted, is fitted leaving each model out (`host_s`): each row is predicted with the HOST_S of
  the other models' rows.
- Lambda: lambdal/deeplearning-benchmark's 2-, 4- and 8-GPU rows (analysis/public-tables/lambda_multi_gpu.csv),
  never fitted, each from the same host's one-GPU figure at the per-GPU batch, the link of its GPU model
  (devices.yaml), HOST_S fitted on every measured row, and the trained parameters of the benchmarks whose count
  is published (PARAMS).

Per row: the efficiency (samples a second on N over N x one GPU's) measured and predicted, the error of each and of
the time per epoch (the step's), and whether the measured step lies in the predicted interval. Targets
(TARGETS): median and worst error on efficiency and time per epoch, and coverage. Reads rows and files; never
imports torch or ray.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..load import REFERENCE, packaged, read
from ..public import gpu_key
from .collective import GRAD_BYTES, ddp_step, load_links
from .devices import load_devices

DDP_FOLDERS = ("h200x2-2026-11-21", "h200x4-2026-11-22", "h200x8-2026-11-22")
LAMBDA_MULTI = packaged("public-tables") / "lambda_multi_gpu.csv"
# Trained parameters of Lambda's benchmarks whose count is published: ResNet-50 as torchvision builds it (counted by
# crossover predict: 25,557,032); BERT-base and BERT-large, "Total Parameters=110M" and "=340M" (Devlin et al.,
# 2019, section 3). The others' counts (SSD, GNMT, NCF, Tacotron 2, WaveGlow, Transformer-XL) are not used.
PARAMS = {"resnet50": 25_557_032, "bert_base_squad": 110e6, "bert_large_squad": 340e6}
# s: a one-GPU step shorter than this on a Hopper is its kernel launches', the same at every batch (the x4 README:
# the tabular MLP's widths 128-512 take 2.8 ms a step at every batch, width 1,024 4.4 ms, growing with it)
LAUNCH_BOUND_S = 0.004
TARGETS: dict[str, Any] = {"median": 0.15, "worst": 0.35, "coverage": (0.85, 0.95)}


def _steps(rows: pd.DataFrame) -> pd.DataFrame:
    """Per results folder, model, device and batch: the step's median seconds (epoch over its steps)."""
    ok = rows[rows["status"] == "ok"].copy()
    ok["steps"] = np.ceil(ok["dataset_size"] / ok["batch_size"])
    ok["step_s"] = ok["epoch_s_median"] / ok["steps"]
    ok["host"] = ok["results_dir"].astype(str).str.extract(r"reference/([^/]+)")[0]
    ok["model"] = ok["workload"] + np.where(ok["width"].notna(), " width " + ok["width"].fillna(0).astype(int).astype(str), "")
    return (ok.groupby(["host", "model", "device", "batch_size"], as_index=False)
            .agg(step_s=("step_s", "median"), n_params=("n_params", "first"), dataset_size=("dataset_size", "first")))


def measured_pairs(rows: pd.DataFrame) -> pd.DataFrame:
    """Each ddp:N row (N > 1) with its one-GPU step at the per-GPU batch (module docstring): host, model, gpus,
    per_gpu_batch, n_params, one_s (one GPU's step), step_s (N's, measured)."""
    steps = _steps(rows)
    lines = []
    for (host, name), group in steps.groupby(["host", "model"]):
        one = {b: s for d, b, s in zip(group["device"], group["batch_size"], group["step_s"]) if d == "ddp:1"} or \
              {b: s for d, b, s in zip(group["device"], group["batch_size"], group["step_s"]) if d == "cuda"}
        launch_bound = max(one.values(), default=np.inf) < LAUNCH_BOUND_S
        for line in group[group["device"].str.match(r"ddp:\d+") & ~group["device"].eq("ddp:1")].itertuples():
            gpus = int(line.device.split(":")[1])
            per_gpu = line.batch_size // gpus
            base = one.get(per_gpu) if per_gpu in one else (one.get(line.batch_size) if launch_bound else None)
            if base is not None:
                lines.append({"set": "measured", "host": host, "model": name.split(" width")[0] if "8192" in name else name,
                              "case": name, "gpu": "H200", "precision": "default", "gpus": gpus, "per_gpu_batch": per_gpu,
                              "n_params": float(line.n_params), "one_s": float(base), "step_s": float(line.step_s)})
    return pd.DataFrame(lines)


def lambda_pairs(path: Path = LAMBDA_MULTI) -> pd.DataFrame:
    """Lambda's many-GPU rows of the benchmarks of PARAMS, as `measured_pairs` gives ours: the one-GPU step at the
    per-GPU batch (its batch over its throughput) and the N-GPU one (the per-GPU batch over N's throughput / N)."""
    table = pd.read_csv(path)
    table = table[table["benchmark"].isin(PARAMS)]
    per_gpu = table["batch_size"] // table["num_gpu"]
    table = table[per_gpu == table["one_gpu_batch_size"]]  # the same work a GPU (Lambda's tables: always)
    return pd.DataFrame({"set": "Lambda", "host": table["name_gpu"], "model": table["benchmark"],
                         "case": table["benchmark"] + " " + table["precision"], "gpu": table["one_gpu"].map(gpu_key),
                         "precision": table["precision"], "gpus": table["num_gpu"], "per_gpu_batch": per_gpu,
                         "n_params": table["benchmark"].map(PARAMS).astype(float),
                         "one_s": table["one_gpu_batch_size"] / table["one_gpu_throughput"],
                         "step_s": per_gpu * table["num_gpu"] / table["throughput"]})


def predicted(pairs: pd.DataFrame, host_s: float | pd.Series, spread: float | pd.Series | None = None) -> pd.DataFrame:
    """`pairs` with the model's step (pred_s, pred_lo, pred_hi) on the link of each row's GPU model, HOST_S and SPREAD
    taken as `host_s` and `spread` (a figure, or one a row; spread None: collective.SPREAD), and the efficiencies
    and errors."""
    from . import collective

    links, devices = load_links(), load_devices()
    each = lambda v: v if isinstance(v, pd.Series) else pd.Series(v, index=pairs.index)  # noqa: E731
    hosts, spreads = each(host_s), each(collective.SPREAD if spread is None else spread)
    out = []
    for i, row in pairs.iterrows():
        link = devices[row["gpu"]].link
        if link is None:
            raise ValueError(f"{row['gpu']}: the GPU table gives it no link: give it one (link:) to model "
                             "its boards together")
        kept = collective.HOST_S, collective.SPREAD  # the row's fitted constants, for this row alone
        collective.HOST_S, collective.SPREAD = float(hosts[i]), float(spreads[i])
        try:
            step = ddp_step((row["one_s"],) * 3, GRAD_BYTES * row["n_params"], int(row["gpus"]), 1, links[link])
        finally:
            collective.HOST_S, collective.SPREAD = kept
        out.append({"pred_s": step.step_s, "pred_lo": step.step_lo, "pred_hi": step.step_hi})
    found = pd.concat([pairs.reset_index(drop=True), pd.DataFrame(out)], axis=1)
    return found.assign(
        efficiency=found["one_s"] / found["step_s"], pred_efficiency=found["one_s"] / found["pred_s"],
        efficiency_error=found["one_s"] / found["pred_s"] / (found["one_s"] / found["step_s"]) - 1,
        epoch_error=found["pred_s"] / found["step_s"] - 1,
        covered=(found["pred_lo"] <= found["step_s"]) & (found["step_s"] <= found["pred_hi"]))


def fit_host_s(pairs: pd.DataFrame) -> float:
    """HOST_S that fits `pairs` best: least squares on the log of the step, over a grid of 1 us to 10 ms."""
    grid = np.geomspace(1e-6, 1e-2, 41)
    loss = [float(np.sum(np.log(predicted(pairs, h)["pred_s"] / pairs["step_s"].to_numpy()) ** 2)) for h in grid]
    return float(grid[int(np.argmin(loss))])


def held_out(pairs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each measured row's HOST_S and SPREAD, fitted on the rows of the other models (leave one model out): SPREAD
    the 90th percentile of |log(measured / predicted)| over those rows, each predicted with its own held-out
    HOST_S (the fit's residuals would be too small)."""
    models = list(pairs["model"].unique())
    host = {m: fit_host_s(pairs[pairs["model"] != m].reset_index(drop=True)) for m in models}
    hosts = pairs["model"].map(host)
    misses = np.abs(np.log(predicted(pairs, hosts)["pred_s"] / pairs["step_s"].to_numpy()))
    spread = {m: float(np.quantile(misses[(pairs["model"] != m).to_numpy()], 0.9)) for m in models}
    return hosts, pairs["model"].map(spread)


def validate(reference: Path = REFERENCE) -> tuple[pd.DataFrame, float, float]:
    """Every measured and Lambda row predicted (`predicted`), and HOST_S and SPREAD fitted on every measured row
    (those Lambda's rows are predicted with)."""
    rows = pd.concat([read(reference / d) for d in DDP_FOLDERS], ignore_index=True)
    ours = measured_pairs(rows[rows["device"].astype(str).str.match(r"(ddp:\d+|cuda)$")])
    hosts, spreads = held_out(ours)
    every = fit_host_s(ours)
    spread = float(np.quantile(np.abs(np.log(predicted(ours, hosts)["pred_s"] / ours["step_s"].to_numpy())), 0.9))
    return (pd.concat([predicted(ours, hosts, spreads), predicted(lambda_pairs(), every, spread)], ignore_index=True),
            every, spread)


def summary(found: pd.DataFrame) -> pd.DataFrame:
    """Per set and GPU count, and per set: rows, median and worst |error| of efficiency and time per epoch, coverage."""
    def agg(group: pd.DataFrame) -> pd.Series:
        return pd.Series({"rows": len(group), "eff_median": group["efficiency_error"].abs().median(),
                          "eff_worst": group["efficiency_error"].abs().max(),
                          "epoch_median": group["epoch_error"].abs().median(), "epoch_worst": group["epoch_error"].abs().max(),
                          "coverage": group["covered"].mean()})
    parts = [found.groupby(["set", "gpus"]).apply(agg, include_groups=False).reset_index(),
             found.groupby("set").apply(agg, include_groups=False).reset_index().assign(gpus="all"),
             agg(found).to_frame().T.assign(set="both", gpus="all")]
    return pd.concat(parts, ignore_index=True)[["set", "gpus", "rows", "eff_median", "eff_worst", "epoch_median",
                                                "epoch_worst", "coverage"]]


def render(found: pd.DataFrame, every: float, spread: float) -> str:
    """The validation as text: per row group, the summary, and each target met or missed."""
    said = summary(found)
    table = said.assign(**{c: said[c].map(lambda v: f"{v:.1%}") for c in said.columns[3:]}).to_string(index=False)
    both = said[said["set"] == "both"].iloc[0]
    lo, hi = TARGETS["coverage"]
    verdict = [f"{what} {name}: {both[column]:.1%} (target <= {TARGETS[key]:.0%}): "
               f"{'met' if both[column] <= TARGETS[key] else 'MISSED'}"
               for what, column_base in (("efficiency", "eff"), ("time per epoch", "epoch"))
               for name, key, column in (("median", "median", f"{column_base}_median"),
                                         ("worst", "worst", f"{column_base}_worst"))]
    verdict.append(f"coverage: {both['coverage']:.1%} (target {lo:.0%}-{hi:.0%}): "
                   f"{'met' if lo <= both['coverage'] <= hi else 'MISSED'}")
    possible = found[found["efficiency"] <= 1.05]
    verdict.append(f"{len(found) - len(possible)} rows measured above 1.05 efficiency (more than N times one GPU: not "
                   f"the same work a GPU; no data-parallel model reaches them); without them, time per epoch median "
                   f"{possible['epoch_error'].abs().median():.1%}, worst {possible['epoch_error'].abs().max():.1%}, "
                   f"coverage {possible['covered'].mean():.1%}")
    worst = found.reindex(found["epoch_error"].abs().sort_values(ascending=False).index).head(8)
    cases = worst.assign(err=worst["epoch_error"].map(lambda v: f"{v:+.0%}"),
                         eff=worst["efficiency"].map(lambda v: f"{v:.2f}"),
                         pred=worst["pred_efficiency"].map(lambda v: f"{v:.2f}"))
    by_link = found.assign(link=found["gpu"].map(lambda g: load_devices()[g].link))
    links = by_link.groupby(["set", "link"])["epoch_error"].agg(lambda e: f"{e.abs().median():.1%}").to_string()
    return "\n".join([
        "== data-parallel on several GPUs: crossover's model of them against runs it never saw ==",
        f"fitted on every measured row (what Lambda's rows are predicted with; each measured row is predicted with "
        f"the figures of the other models' rows): HOST_S {every * 1e6:,.0f} us a step, SPREAD {spread:.3f}",
        table, *verdict, "largest errors in time per epoch (measured efficiency, predicted):",
        cases[["set", "host", "case", "gpus", "eff", "pred", "err"]].to_string(index=False),
        "median |error| in time per epoch per link:", links])

"""The data-parallel model (collective.py) against runs on several GPUs it never saw: `parallel --validate`.

    python -m crossover.analysis parallel --validate

Two sets, each run on 2, 4 or 8 GPUs of one host, each predicted from its own one-GPU figure and its link:

- measured: the shipped DDP rows (results/reference/h200x2-2026-11-21, h200x4-2026-11-22, h200x8-2026-11-22:
  `ddp:N` against `ddp:1`, else `cuda`, on H200s joined by NVLink). A row is used where its one-GPU step at the
  per-GPU batch is measured: weak scaling (N x the one-GPU batch), and strong scaling where the one-GPU step is
  bound by kernel launches, so that it does not change with the batch (seed 000's MLP at batch 100; the tabular MLP
  at widths 128-512, whose `cuda` step is the same 23 ms at each; width 1,024 is neither, and left out). With them
  the torchrun DDP loop of studies/parity_ddp.py on 1, 2 and 4 H200s (PLAIN_LOOP: ResNet-50 and BERT-base at the
  default precision, ViT-B/16 and a GPT-2-small decoder in bf16, 32 a GPU), the plain loop being what DDP itself
  costs, without crossover's harness. The reducer's two terms (collective.Host:
  a parameter tensor's and a bucket's seconds) are fitted leaving each model out (`held_out`): each row is
  predicted with the terms of the other models' rows.
- Lambda: lambdal/deeplearning-benchmark's 2-, 4- and 8-GPU rows (analysis/public-tables/lambda_multi_gpu.csv),
  never fitted, each from the same host's one-GPU figure at the per-GPU batch, the link of its GPU model
  (devices.yaml), the terms fitted on every measured row, and the trained parameters and parameter tensors of the
  benchmarks whose count is published (PARAMS, TENSORS). A row measured above N times one GPU (efficiency over 1)
  is not the same work a GPU: no data-parallel model reaches it, and it is named (`beyond`).

Per row: the efficiency (samples a second on N over N x one GPU's) measured and predicted, the error of each and of
the time per epoch (the step's), and whether the measured step lies in the predicted interval. Targets
(TARGETS): on the measured rows, each predicted leaving its model out, median and worst error on efficiency; on
every row, the median error of the time per epoch, and coverage. Reads rows and files; never imports torch or ray.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from ..load import REFERENCE, packaged, read
from ..public import gpu_key
from .collective import GRAD_BYTES, SPREAD, Host, ddp_step, load_links
from .device_table import load_devices

DDP_FOLDERS = ("h200x2-2026-11-21", "h200x4-2026-11-22", "h200x8-2026-11-22")
LAMBDA_MULTI = packaged("public-tables") / "lambda_multi_gpu.csv"
PLAIN_LOOP = REFERENCE / "h200x4-2026-11-28-ddp" / "figures.json"  # the torchrun loop's epochs on 1, 2, 4 H200s
# Trained parameters of Lambda's benchmarks whose count is published: ResNet-50 as torchvision builds it (counted by
# crossover predict: 25,557,032); BERT-base and BERT-large, "Total Parameters=110M" and "=340M" (Devlin et al.,
# 2019, section 3). The others' counts (SSD, GNMT, NCF, Tacotron 2, WaveGlow, Transformer-XL) are not used.
PARAMS = {"resnet50": 25_557_032, "bert_base_squad": 110e6, "bert_large_squad": 340e6}
# Parameter tensors that train (sweeps/count_step.py `n_param_tensors`, counted): examples/realsize.py's archs the
# torchrun loop ran, and Lambda's: ResNet-50 as torchvision builds it, BERT for SQuAD as Hugging Face's
# BertForQuestionAnswering does (embeddings 5, 16 a layer of 12 or 24, the answer's head 2). The measured rows'
# MLPs count theirs from their `model` (`mlp_tensors`)
TENSORS = {"resnet50": 161, "bert_base": 150, "gpt2_small": 150, "vit_b_16": 152,
           "bert_base_squad": 199, "bert_large_squad": 391}
# s: a one-GPU step shorter than this on a Hopper is its kernel launches', the same at every batch (the x4 README:
# the tabular MLP's widths 128-512 take 2.8 ms a step at every batch, width 1,024 4.4 ms, growing with it)
LAUNCH_BOUND_S = 0.004
# measured: efficiency's median and worst error on the measured rows, each model left out; every row: the time per
# epoch's median error, and the share of measured steps inside their interval
TARGETS: dict[str, Any] = {"median": 0.10, "worst": 0.30, "epoch_median": 0.15, "coverage": (0.85, 0.95)}


def mlp_tensors(shape: str) -> int:
    """An MLP's parameter tensors from a row's `model` ('fc 16-512-512-2': its Linear layers' sizes): a weight and a
    bias a layer (sweeps/count_step.py counts 16 and 18 for the DDP rows' seed MLP and tabular MLP at depth 8)."""
    if not shape.startswith("fc ") or "conv" in shape:
        raise ValueError(f"model {shape!r}: not an MLP's sizes ('fc 16-512-2'); give its parameter tensors in TENSORS")
    return 2 * shape.count("-")


def _steps(rows: pd.DataFrame) -> pd.DataFrame:
    """Per results folder, model, device and batch: the step's median seconds (epoch over its steps)."""
    ok = rows[rows["status"] == "ok"].copy()
    ok["shape"] = ok["model"]  # the layers' sizes, before `model` names the case
    ok["steps"] = np.ceil(ok["dataset_size"] / ok["batch_size"])
    ok["step_s"] = ok["epoch_s_median"] / ok["steps"]
    ok["host"] = ok["results_dir"].astype(str).str.extract(r"reference/([^/]+)")[0]
    ok["model"] = ok["workload"] + np.where(ok["width"].notna(), " width " + ok["width"].fillna(0).astype(int).astype(str), "")
    return (ok.groupby(["host", "model", "device", "batch_size"], as_index=False)
            .agg(step_s=("step_s", "median"), n_params=("n_params", "first"), dataset_size=("dataset_size", "first"),
                 shape=("shape", "first")))


def measured_pairs(rows: pd.DataFrame) -> pd.DataFrame:
    """Each ddp:N row (N > 1) with its one-GPU step at the per-GPU batch (module docstring): host, model, gpus,
    per_gpu_batch, n_params, one_s (one GPU's step), step_s (N's, measured)."""
    steps = _steps(rows)
    lines = []
    for by, group in steps.groupby(["host", "model"]):
        host, name = cast(tuple[str, str], by)  # the reference host's folder and the case's name
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
                              "n_params": float(line.n_params), "tensors": float(mlp_tensors(line.shape)),
                              "one_s": float(base), "step_s": float(line.step_s)})
    return pd.DataFrame(lines)


def plain_pairs(path: Path = PLAIN_LOOP) -> pd.DataFrame:
    """The torchrun DDP loop's rows of studies/parity_ddp.py, as `measured_pairs` gives the rows: each point on N
    GPUs (N > 1) against the same loop on one, the same work a GPU; the step is the epoch's median over its
    steps."""
    found = json.loads(Path(path).read_text())
    work, steps = found["work"], found["work"]["steps_per_epoch"]
    lines = []
    for point, by_gpus in found["plain_loop_nvlink"].items():
        arch, precision = point.split()
        one = by_gpus["1"]["epoch_s_median"] / steps
        lines += [{"set": "measured", "host": "h200x4-2026-11-28-ddp", "model": arch, "case": point, "gpu": "H200",
                   "precision": precision, "gpus": int(n), "per_gpu_batch": work["per_gpu_batch"],
                   "n_params": float(work["trainable_params"][arch]), "tensors": float(TENSORS[arch]), "one_s": one,
                   "step_s": figures["epoch_s_median"] / steps} for n, figures in by_gpus.items() if int(n) > 1]
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
                         "tensors": table["benchmark"].map(TENSORS).astype(float),
                         "one_s": table["one_gpu_batch_size"] / table["one_gpu_throughput"],
                         "step_s": per_gpu * table["num_gpu"] / table["throughput"]})


def predicted(pairs: pd.DataFrame, host: Host | pd.Series, spread: float | pd.Series = SPREAD) -> pd.DataFrame:
    """`pairs` with the model's step (pred_s, pred_lo, pred_hi) on the link of each row's GPU model, the reducer's
    terms `host` and the interval's `spread` (a figure, or one a row), and the efficiencies and errors."""
    links, devices = load_links(), load_devices()
    each = lambda v: v if isinstance(v, pd.Series) else pd.Series([v] * len(pairs), index=pairs.index)  # noqa: E731
    hosts, spreads = each(host).to_dict(), each(spread).to_dict()  # by a row's label, as iterrows gives it
    out = []
    for i, row in pairs.iterrows():
        link = devices[row["gpu"]].link
        if link is None:
            raise ValueError(f"{row['gpu']}: the GPU table gives it no link: give it one (link:) to model "
                             "its boards together")
        step = ddp_step((row["one_s"],) * 3, GRAD_BYTES * row["n_params"], int(row["gpus"]), 1, links[link],
                        tensors=row["tensors"], host=hosts[i], spread=float(spreads[i]))
        out.append({"pred_s": step.step_s, "pred_lo": step.step_lo, "pred_hi": step.step_hi, "calls": step.calls})
    found = pd.concat([pairs.reset_index(drop=True), pd.DataFrame(out)], axis=1)
    return found.assign(
        efficiency=found["one_s"] / found["step_s"], pred_efficiency=found["one_s"] / found["pred_s"],
        efficiency_error=found["one_s"] / found["pred_s"] / (found["one_s"] / found["step_s"]) - 1,
        epoch_error=found["pred_s"] / found["step_s"] - 1,
        covered=(found["pred_lo"] <= found["step_s"]) & (found["step_s"] <= found["pred_hi"]))


def fit_host(pairs: pd.DataFrame) -> Host:
    """The reducer's terms that fit `pairs` best: the step less the model's without them is a tensor's seconds x
    the tensors plus a bucket's x the buckets; least squares on each step's relative error, neither term below 0."""
    bare = predicted(pairs, Host(0.0, 0.0))
    measured = bare["step_s"].to_numpy()
    terms = bare[["tensors", "calls"]].to_numpy(float) / measured[:, None]
    (per_tensor, per_bucket), _ = nnls(terms, (measured - bare["pred_s"].to_numpy()) / measured)
    return Host(float(per_tensor), float(per_bucket))


def held_out(pairs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each measured row's reducer terms and SPREAD, fitted on the rows of the other models (leave one model out):
    SPREAD the 90th percentile of |log(measured / predicted)| over those rows, each predicted with its own held-out
    terms (the fit's residuals would be too small)."""
    models = list(pairs["model"].unique())
    host = {m: fit_host(pairs[pairs["model"] != m].reset_index(drop=True)) for m in models}
    hosts = pairs["model"].map(host)
    misses = np.abs(np.log(predicted(pairs, hosts)["pred_s"] / pairs["step_s"].to_numpy()))
    spread = {m: float(np.quantile(misses[(pairs["model"] != m).to_numpy()], 0.9)) for m in models}
    return hosts, pairs["model"].map(spread)


def validate(reference: Path = REFERENCE, plain: Path = PLAIN_LOOP) -> tuple[pd.DataFrame, Host, float]:
    """Every measured and Lambda row predicted (`predicted`), the measured ones each with the terms of the other
    models' rows, and the reducer's terms and SPREAD fitted on every measured row (those Lambda's rows are
    predicted with)."""
    rows = pd.concat([read(reference / d) for d in DDP_FOLDERS], ignore_index=True)
    ours = pd.concat([measured_pairs(rows[rows["device"].astype(str).str.match(r"(ddp:\d+|cuda)$")]),
                      plain_pairs(plain)], ignore_index=True)
    hosts, spreads = held_out(ours)
    every = fit_host(ours)
    spread = float(np.quantile(np.abs(np.log(predicted(ours, hosts)["pred_s"] / ours["step_s"].to_numpy())), 0.9))
    return (pd.concat([predicted(ours, hosts, spreads), predicted(lambda_pairs(), every, spread)], ignore_index=True),
            every, spread)


def beyond(found: pd.DataFrame) -> pd.DataFrame:
    """The rows measured above N times one GPU (efficiency over 1): not the same work a GPU, out of any
    data-parallel model's reach."""
    return found[found["efficiency"] > 1.0]


def summary(found: pd.DataFrame) -> pd.DataFrame:
    """Per set and GPU count, and per set: rows, median and worst |error| of efficiency and time per epoch, coverage."""
    def agg(group: pd.DataFrame) -> pd.Series:
        return pd.Series({"rows": len(group), "eff_median": group["efficiency_error"].abs().median(),
                          "eff_worst": group["efficiency_error"].abs().max(),
                          "epoch_median": group["epoch_error"].abs().median(), "epoch_worst": group["epoch_error"].abs().max(),
                          "coverage": group["covered"].mean()})
    # pandas-stubs' apply lacks pandas' own include_groups keyword (pandas >= 2.2)
    by_gpus = found.groupby(["set", "gpus"]).apply(agg, include_groups=False)  # type: ignore[call-overload]
    by_set = found.groupby("set").apply(agg, include_groups=False)  # type: ignore[call-overload]
    parts = [by_gpus.reset_index(), by_set.reset_index().assign(gpus="all"),
             agg(found).to_frame().T.assign(set="both", gpus="all")]
    return pd.concat(parts, ignore_index=True)[["set", "gpus", "rows", "eff_median", "eff_worst", "epoch_median",
                                                "epoch_worst", "coverage"]]


def render(found: pd.DataFrame, every: Host, spread: float) -> str:
    """The validation as text: per row group, the summary, each target met or missed, the rows no data-parallel
    model reaches, and the measured rows one by one."""
    said = summary(found)
    table = said.assign(**{c: said[c].map(lambda v: f"{v:.1%}") for c in said.columns[3:]}).to_string(index=False)
    ours = said[(said["set"] == "measured") & (said["gpus"] == "all")].iloc[0]
    both = said[said["set"] == "both"].iloc[0]
    met = lambda ok: "met" if ok else "MISSED"  # noqa: E731
    lo, hi = TARGETS["coverage"]
    verdict = [f"measured rows, each model left out: efficiency {name} {ours[f'eff_{name}']:.1%} (target <= "
               f"{TARGETS[name]:.0%}): {met(ours[f'eff_{name}'] <= TARGETS[name])}" for name in ("median", "worst")]
    verdict += [f"every row: time per epoch median {both['epoch_median']:.1%} (target <= {TARGETS['epoch_median']:.0%}): "
                f"{met(both['epoch_median'] <= TARGETS['epoch_median'])}",
                f"every row: coverage {both['coverage']:.1%} (target {lo:.0%}-{hi:.0%}): "
                f"{met(lo <= both['coverage'] <= hi)}"]
    out = beyond(found)
    reach = found.drop(out.index)
    verdict.append(f"{len(out)} rows measured above N times one GPU (efficiency over 1: not the same work a GPU; no "
                   f"data-parallel model reaches them), named below; without them, time per epoch median "
                   f"{reach['epoch_error'].abs().median():.1%}, worst {reach['epoch_error'].abs().max():.1%}, "
                   f"coverage {reach['covered'].mean():.1%}")
    shown = lambda rows: rows.assign(  # noqa: E731
        eff=rows["efficiency"].map(lambda v: f"{v:.2f}"), pred=rows["pred_efficiency"].map(lambda v: f"{v:.2f}"),
        eff_err=rows["efficiency_error"].map(lambda v: f"{v:+.1%}"), err=rows["epoch_error"].map(lambda v: f"{v:+.0%}"))
    worst = reach.reindex(reach["epoch_error"].abs().sort_values(ascending=False).index).head(8)
    ours_rows = found[found["set"] == "measured"]
    by_link = found.assign(link=found["gpu"].map(lambda g: load_devices()[g].link))
    links = by_link.groupby(["set", "link"])["epoch_error"].agg(lambda e: f"{e.abs().median():.1%}").to_string()
    return "\n".join([
        "== data-parallel on several GPUs: crossover's model of them against runs it never saw ==",
        f"DDP's host work, the reducer's, fitted on every measured row (what Lambda's rows are predicted with; each "
        f"measured row is predicted with the figures of the other models' rows): {every.per_tensor_s * 1e6:,.1f} us a "
        f"parameter tensor, {every.per_bucket_s * 1e6:,.1f} us a bucket; SPREAD {spread:.3f}",
        table, *verdict, "measured rows, each predicted leaving its model out (tensors: parameter tensors that train):",
        shown(ours_rows)[["host", "case", "gpus", "tensors", "calls", "eff", "pred", "eff_err"]].to_string(index=False),
        "rows above N times one GPU, not fitted:",
        shown(out)[["set", "host", "case", "gpus", "eff", "pred"]].to_string(index=False) if len(out) else "(none)",
        "largest errors in time per epoch of the rest (measured efficiency, predicted):",
        shown(worst)[["set", "host", "case", "gpus", "eff", "pred", "err"]].to_string(index=False),
        "median |error| in time per epoch per link:", links])

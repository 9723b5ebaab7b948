"""Benchmark figures of the GPU parallelism studies (sweeps/parallel.py), from their rows alone.

    python -m analysis parallel results/parallel-packed-1 results/parallel-packed-2 ... results/parallel-ddp

- packed: throughput per GPU with K trials sharing it (the sum of the K trials' samples/s, counted
  only where they really ran together: `co_running` says so) against one trial per GPU;
- ddp: scaling efficiency, samples/s of N workers over N x samples/s of one, at the same global batch
  (strong scaling) and at N times the batch (weak scaling: the same work per GPU);
- pipe: a pipeline against one GPU, per number of micro-batches.
Rows are found by their columns (device, gpus_requested, world_size, micro_batches), never by a
sweep's name. Reads rows only (pandas); never imports torch or ray.
"""

from __future__ import annotations

import pandas as pd

from analysis.schema import SIZE_AXES

# What makes two rows the same model and data, whatever device they ran on.
_MODEL = ["workload", *SIZE_AXES, "epochs"]


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "ok"]


def _beside(rows: pd.DataFrame, arm: pd.Series, columns: list[str]) -> pd.DataFrame:
    """The rows of `arm`, and the rows of one whole GPU ('cuda') with the same `columns`."""
    one = rows[rows["device"] == "cuda"]
    return pd.concat([rows[arm], one.merge(rows.loc[arm, columns].drop_duplicates(), on=columns)])


def packed(rows: pd.DataFrame) -> pd.DataFrame:
    """Per K trials per GPU: trials, their median samples/s, the GPU's total, and its ratio to K = 1."""
    ok = _ok(rows)
    single = ok["device"].str.fullmatch(r"cuda(?:/\d+)?") & (ok["fused_members"] == 1)
    sel = _beside(ok, single & (ok["gpus_requested"] < 1), _MODEL)
    if sel.empty:
        return pd.DataFrame()
    sel = sel.assign(k=(1 / sel["gpus_requested"]).round().astype(int), beside=sel["co_running"].map(len))
    out = sel.groupby("k").agg(trials=("samples_per_s", "size"), trial_samples_per_s=("samples_per_s", "median"),
                               total_samples_per_s=("samples_per_s", "sum"), beside_median=("beside", "median"))
    out["gpus"] = out["trials"] / out.index
    out["per_gpu_samples_per_s"] = out["total_samples_per_s"] / out["gpus"]
    if 1 in out.index:
        out["vs_one_per_gpu"] = out["per_gpu_samples_per_s"] / out.loc[1, "per_gpu_samples_per_s"]
    return out.drop(columns="total_samples_per_s")


def ddp(rows: pd.DataFrame) -> pd.DataFrame:
    """samples/s per device and batch, and each ddp:N's efficiency against ddp:1."""
    ok = _ok(rows)
    sel = _beside(ok, ok["device"].str.startswith("ddp:"), [c for c in _MODEL if c != "batch_size"])  # weak: batch grows
    if not sel["device"].str.startswith("ddp:").any():
        return pd.DataFrame()
    rate = sel.groupby(["device", "batch_size"])["samples_per_s"].median()
    lines = []
    for (device, batch), sps in rate.items():
        line = {"device": device, "batch_size": batch, "samples_per_s": sps}
        n = int(sel.loc[sel["device"] == device, "world_size"].iloc[0]) if device.startswith("ddp:") else None
        if n and n > 1:
            strong = rate.get(("ddp:1", batch))
            weak = rate.get(("ddp:1", batch // n)) if batch % n == 0 else None
            line["strong_efficiency"] = sps / (n * strong) if strong else None
            line["weak_efficiency"] = sps / (n * weak) if weak else None
        lines.append(line)
    return pd.DataFrame(lines)


def pipe(rows: pd.DataFrame) -> pd.DataFrame:
    """Each pipe:N (per micro-batches) against one GPU on the same model and batch."""
    ok = _ok(rows)
    sel = _beside(ok, ok["micro_batches"].notna(), _MODEL)
    one = sel[sel["device"] == "cuda"].groupby("batch_size")["samples_per_s"].median()
    piped = sel[sel["device"].str.startswith("pipe:")]
    if piped.empty or one.empty:
        return pd.DataFrame()
    out = piped[["device", "batch_size", "micro_batches", "samples_per_s", "peak_gpu_bytes"]].copy()
    out["vs_one_gpu"] = out["samples_per_s"] / out["batch_size"].map(one)
    return out.sort_values(["device", "micro_batches"]).reset_index(drop=True)


def render(rows: pd.DataFrame) -> str:
    parts = []
    for title, table in (("packed trials per GPU", packed(rows)), ("data-parallel scaling", ddp(rows)),
                         ("pipeline against one GPU", pipe(rows))):
        if not table.empty:
            parts += [f"== {title} ==", table.to_string(float_format=lambda v: f"{v:,.3f}")]
    return "\n".join(parts) if parts else "no rows of the parallel studies (sweeps/parallel.py)"

"""Benchmark figures of the GPU parallelism studies (studies/parallel.py), from their rows alone.

    python -m crossover.analysis parallel results/parallel-*

- packed: throughput per GPU with K trials sharing it (the sum of the K trials' samples/s) against one
  trial per GPU, and how evenly Ray placed them (trials per GPU, from each row's `gpu_ids`);
- ddp: scaling efficiency per workload and GPU count N, samples/s of ddp:N over N x samples/s of ddp:1,
  at the same global batch (strong scaling) and at N times the batch (weak scaling: the same work per
  GPU); the median over the runs, and the range over every pairing of an N-run with a 1-run (so it
  holds the run-to-run noise of both); ddp:1 itself is 1, its range the pairings of its own runs;
- pipe: a pipeline against one GPU, per stage count and number of micro-batches, median and range
  over the runs;
- crossover: where ddp:N beats one GPU per epoch as the model grows (analysis/crossings.py on the
  rows of `cuda` and one `ddp:N` at the same batch).
Rows are found by their columns (the device's fields analysis/load.py adds: whole_gpu, packed,
distributed, gpus; gpus_requested, world_size, micro_batches), never by a sweep's name.
Reads rows only (pandas, altair); never imports torch or ray.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from crossover.schema import SIZE_AXES

from .crossings import find
from .selection import select

# What makes two rows the same model and data, whatever device they ran on.
_MODEL = ["workload", *SIZE_AXES]


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "ok"]


def packed(rows: pd.DataFrame) -> pd.DataFrame:
    """Per K trials per GPU: trials, their median samples/s, each GPU's total and its ratio to K = 1,
    and the fewest and most trials Ray put on one GPU."""
    ok = _ok(rows)
    whole = ok[ok["whole_gpu"] & (ok["fused_members"] == 1)]
    shared = ok[ok["packed"] & (ok["fused_members"] == 1)]
    if shared.empty:
        return pd.DataFrame()
    model = [*_MODEL, "epochs"]  # K = 1: the whole-GPU rows of the packed trial's own model and length
    sel = pd.concat([shared, whole.merge(shared[model].drop_duplicates(), on=model)], ignore_index=True)
    sel = sel.assign(k=(1 / sel["gpus_requested"]).round().astype(int))
    out = sel.groupby("k").agg(trials=("samples_per_s", "size"), trial_samples_per_s=("samples_per_s", "median"),
                               total_samples_per_s=("samples_per_s", "sum"))
    placed = sel.dropna(subset=["gpu_ids"]).explode("gpu_ids")
    if not placed.empty:
        per_gpu = placed.groupby(["k", "gpu_ids"]).size().groupby("k")
        out["gpus"] = per_gpu.size()
        out["fewest_on_a_gpu"], out["most_on_a_gpu"] = per_gpu.min(), per_gpu.max()
    else:
        out["gpus"] = out["trials"] / out.index
    out["per_gpu_samples_per_s"] = out["total_samples_per_s"] / out["gpus"]
    if 1 in out.index:
        out["vs_one_per_gpu"] = out["per_gpu_samples_per_s"] / out.loc[1, "per_gpu_samples_per_s"]
    return out.drop(columns="total_samples_per_s")


def _ratio(n_runs: np.ndarray, one_runs: np.ndarray, n: int) -> tuple[float, float, float]:
    """Efficiency median, and its range over every pairing of a run on N with a run on one."""
    pairs = n_runs[:, None] / (n * one_runs[None, :])
    return float(np.median(n_runs) / (n * np.median(one_runs))), float(pairs.min()), float(pairs.max())


def ddp(rows: pd.DataFrame) -> pd.DataFrame:
    """Per workload, model, device and global batch: runs, median samples/s, and each ddp:N's strong and
    weak scaling efficiency against ddp:1 (median, lo, hi over the runs)."""
    ok = _ok(rows)
    ddp_gpu = ok["distributed"] & ok["uses_gpu"]  # ddp:N, not ddp-cpu:N
    sel = ok[ddp_gpu | ok["whole_gpu"]]
    keys = [c for c in _MODEL if c != "batch_size"]
    lines = []
    for model, group in sel.groupby(keys, dropna=False):
        if not group["distributed"].any():
            continue
        one = group[group["distributed"] & (group["gpus"] == 1)]  # ddp:1, the baseline
        base_runs = {batch: g["samples_per_s"].to_numpy() for batch, g in one.groupby("batch_size")}
        arms = sorted(group.groupby(["device", "batch_size"]), key=lambda kv: (kv[1]["gpus"].iloc[0], kv[0]))
        for (device, batch), runs in arms:
            sps, n = runs["samples_per_s"].to_numpy(), int(runs["gpus"].iloc[0])
            line = {**dict(zip(keys, model)), "device": device, "gpus": n, "batch_size": batch,
                    "runs": len(sps), "samples_per_s": float(np.median(sps))}
            if runs["distributed"].iloc[0]:  # ddp:1 against itself: 1, with the spread of its own runs
                for kind, base in (("strong", base_runs.get(batch)), ("weak", base_runs.get(batch // n))):
                    if base is not None and (kind == "strong" or batch % n == 0):
                        line[kind], line[f"{kind}_lo"], line[f"{kind}_hi"] = _ratio(sps, base, n)
            lines.append(line)
    return pd.DataFrame(lines).dropna(axis=1, how="all")  # axes no workload here has (context)


def pipe(rows: pd.DataFrame) -> pd.DataFrame:
    """Each pipe:N per micro-batches against one GPU on the same model and batch (median, lo, hi)."""
    ok = _ok(rows)
    piped = ok[ok["pipelined"]]
    one = ok[ok["whole_gpu"]]  # of the same model: the merge below picks them
    lines = []
    for key, group in piped.groupby([*_MODEL, "device", "micro_batches"], dropna=False):
        base = one.merge(group[_MODEL].drop_duplicates(), on=_MODEL)["samples_per_s"].to_numpy()
        sps = group["samples_per_s"].to_numpy()
        line = {**dict(zip([*_MODEL, "device", "micro_batches"], key)), "runs": len(sps),
                "samples_per_s": float(np.median(sps)), "peak_gpu_bytes": float(group["peak_gpu_bytes"].median())}
        if len(base):
            line["vs_one_gpu"], line["lo"], line["hi"] = _ratio(sps, base, 1)
        lines.append(line)
    out = pd.DataFrame(lines).dropna(axis=1, how="all")  # axes no workload here has (context)
    stages = dict(zip(piped["device"], piped["gpus"]))
    by_stages = lambda c: c.map(stages) if c.name == "device" else c  # noqa: E731
    return out.sort_values(["workload", "device", "micro_batches"], key=by_stages,
                           ignore_index=True) if len(out) else out


def crossover(rows: pd.DataFrame) -> pd.DataFrame:
    """The crossover table of one GPU against each ddp:N along the model's size, where the rows measured
    both at two sizes or more (the same global batch)."""
    ok = _ok(rows)
    ddps = sorted(ok.loc[ok["distributed"] & ok["uses_gpu"] & (ok["world_size"] > 1), "device"].unique())
    tables = []
    for device in ddps:
        sel = ok[ok["whole_gpu"] | ok["device"].eq(device)]
        sel = sel.assign(arm=sel["device"])
        table = find(select(sel))
        tables.append(table[(table["axis"] == "n_params") & (table["metric"] == "epoch_s")])
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def chart(rows: pd.DataFrame) -> alt.Chart | None:
    """Scaling efficiency against GPU count: a line per workload and kind (weak, strong), the range
    over the runs as error bars, and the ideal (1.0) as a rule."""
    table = ddp(rows)
    if table.empty or "strong" not in table:
        return None
    kinds = [k for k in ("strong", "weak") if k in table]
    long = pd.concat([table.dropna(subset=[k]).assign(kind=f"{k} scaling", efficiency=table[k], lo=table[f"{k}_lo"],
                                                      hi=table[f"{k}_hi"]) for k in kinds], ignore_index=True)
    long["line"] = long["workload"] + ", " + long["kind"]
    long = long[long.groupby("line")["gpus"].transform("max") > 1]  # ddp:1 alone (1 against itself) is no curve
    x = alt.X("gpus:Q", title="GPUs (data-parallel workers)", scale=alt.Scale(type="log", base=2),
              axis=alt.Axis(values=sorted(long["gpus"].unique().tolist()), format="d"))
    y = alt.Y("efficiency:Q", title="scaling efficiency (samples/s over N x one GPU's)")
    base = alt.Chart(long)
    lines = base.mark_line(point=True).encode(x=x, y=y, color=alt.Color("line:N", title=None),
                                              tooltip=["line", "gpus", "batch_size", "efficiency", "lo", "hi", "runs"])
    bars = base.mark_errorbar().encode(x=x, y=alt.Y("lo:Q", title=""), y2="hi:Q", color="line:N")
    ideal = alt.Chart(pd.DataFrame({"efficiency": [1.0]})).mark_rule(strokeDash=[4, 4]).encode(y="efficiency:Q")
    return (ideal + bars + lines).properties(title="Data-parallel scaling on one host", width=420, height=280)


def _cell(value) -> str:
    """A table cell: blank where not measured, whole numbers as such (sizes), the rest to 3 decimals."""
    if not isinstance(value, str) and pd.isna(value):
        return ""
    if isinstance(value, (float, np.floating)):
        return f"{value:.0f}" if float(value).is_integer() else f"{value:,.3f}"
    return str(value)


def render(rows: pd.DataFrame) -> str:
    parts = []
    for title, table in (("packed trials per GPU", packed(rows)), ("data-parallel scaling", ddp(rows)),
                         ("pipeline against one GPU", pipe(rows))):
        if not table.empty:
            parts += [f"== {title} ==", table.map(_cell).to_string()]
    cross = crossover(rows)
    if not cross.empty:
        parts += ["== data-parallel against one GPU, as the model grows ==",
                  *(f"{line.workload} ({line.held_fixed}): {line.answer}" for line in cross.itertuples())]
    return "\n".join(parts) if parts else "no rows of the parallel studies"

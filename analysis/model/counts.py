"""A row's step counts as the model reads them: the usable rows (ok, eager, one device) with their step costs,
counted where the row has them, else (the old rows that lack them) and for the laptop's case (`as_counted`) its
configuration's step counted on the meta device as `crossover predict` counts a job (studies/count_reference.py);
each row's model (MODEL) and form. No workload is known here by its name: a step is what its count says.
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pandas as pd

from crossover.schema import CONFIG_COLUMNS, FORWARD_OPS, OPS_PER_STEP, OP_CLASSES, OP_COLUMNS

from ..load import REFERENCE, precisions_of
from .device_table import Device, MATCH_KEY, device_key

# Every reference configuration's step counted as `crossover predict` counts a job on a laptop
# (studies/count_reference.py): the laptop's case of --validate, and the intervals of a workload never measured.
# In a folder of its own under the reference rows, so a wheel carries it with them: '_' first, no sweep's rows; a
# '-' in it, no Python package's name (setuptools takes it as data, not as a package it was not told of).
COUNTED = REFERENCE / "_step-counts" / "counts.parquet"


COUNT_KEYS = ["workload", "workload_params", "depth", "width", "context", "batch_size"]


COST_COLUMNS = ("flops_per_step", "bytes_per_step", "launches_per_step")


# What validation holds out as one unseen model: a workload, or one model of it where the workload's own
# axes pick the network (examples/zoo.py's arch: eighteen architectures under one workload name) (`with_model`)
MODEL = "_model"


CLASS_COLUMNS = (*OP_COLUMNS, FORWARD_OPS)  # {class}_{flops,bytes,launches}_per_step, forward_ops_per_step
CLASS_FLOPS = tuple(f"{c}_flops_per_step" for c in OP_CLASSES)


PER_CLASS, THREE_TERM = "per-class", "three-term"


def step_costs(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's flops_per_step, bytes_per_step, launches_per_step: counted where the row has them, else its
    configuration's count as `crossover predict` counts a job (`_counted`: the rows written before the counts, the
    seeds' first sweeps); `costs_counted` says whether they are the row's own (null: neither)."""
    own = rows.reindex(columns=list(COST_COLUMNS)).astype(float)
    lacking = own.isna().any(axis=1)
    out = own.copy()
    if lacking.any():
        out[lacking] = own[lacking].fillna(_counted(rows[lacking])[list(COST_COLUMNS)].astype(float))
    return out.assign(costs_counted=~lacking)


def _usable(rows: pd.DataFrame) -> pd.DataFrame:
    """ok eager rows of one process on one device (cpu, cuda), with their step costs and measured step_s.

    Engines graph and compile are left out: a replayed graph launches 3 times a step but still runs
    every kernel of it, a cost per kernel on the GPU this model has no term for. Fused trials are left
    out too: their epoch is the whole group's. The per-class columns are added, null, where absent; a row
    written before forward_ops_per_step takes it from the CPU's count of its configuration (`_counted`) where
    one was made: count_step counts the forward pass's ops as a GPU dispatches them. So does a row without
    ops_per_step (the per-op GPU time, analysis/model/perclass.py) at a precision whose ops are the default's (the
    count is the default's: autocast's casts and dtypes differ), and a row without the per-class columns takes its
    classes' FLOPs (whether cuDNN computes most of them: analysis/model/threeterm.py `_precision`), not their bytes
    and launches: it stays a three-term row, as its own count had no classes."""
    fused = rows["fused_members"].fillna(1).gt(1) if "fused_members" in rows else False
    ok = rows[(rows["status"] == "ok") & (rows["is_cpu"] | rows["whole_gpu"]) & rows["engine"].eq("eager") & ~fused]
    ok = ok.reindex(columns=list(dict.fromkeys([*ok.columns, *CLASS_COLUMNS, OPS_PER_STEP])))
    same_ops = precisions_of(ok).isin(["default", "fp32", "tf32"])
    lacking = ok[FORWARD_OPS].isna() | (ok[OPS_PER_STEP].isna() & same_ops)
    if lacking.any():  # rows written before the columns: only they are looked up in the count
        counted = _counted(ok[lacking])
        ok[FORWARD_OPS] = ok[FORWARD_OPS].fillna(counted[FORWARD_OPS])
        ok[OPS_PER_STEP] = ok[OPS_PER_STEP].where(ok[OPS_PER_STEP].notna() | ~same_ops, counted[OPS_PER_STEP])
        ok[list(CLASS_FLOPS)] = ok[list(CLASS_FLOPS)].fillna(counted[list(CLASS_FLOPS)])
    ok = ok.drop(columns=list(COST_COLUMNS), errors="ignore").join(step_costs(ok))
    ok = ok.dropna(subset=list(COST_COLUMNS) + ["epoch_s_median", "steps_per_epoch"])
    return ok.assign(step_s=ok["epoch_s_median"] / ok["steps_per_epoch"])


def gpu_rows(rows: pd.DataFrame, devices: dict[str, Device]) -> pd.DataFrame:
    """Usable single-GPU rows whose device the table knows, with its key in MATCH_KEY."""
    usable = _usable(rows)
    usable = usable[usable["whole_gpu"]]
    keyed = usable.assign(**{MATCH_KEY: usable["device_name"].map(lambda n: device_key(n, devices))})
    return keyed[keyed[MATCH_KEY].notna()]


def config_keys(rows: pd.DataFrame) -> list[str]:
    extra = ["engine"] + (["precision"] if "precision" in rows else [])
    return [c for c in CONFIG_COLUMNS if c != "device"] + extra


def cpu_groups(rows: pd.DataFrame):
    """Usable CPU rows, one group per CPU model and thread count: (label, rows)."""
    cpus = _usable(rows)
    cpus = cpus[cpus["is_cpu"]]
    for (name, threads), own in cpus.groupby(["device_name", cpus["torch_threads"].fillna(0)]):
        yield f"{name} ({threads:.0f} threads)", own


def form_of(frame: pd.DataFrame) -> pd.Series:
    """PER_CLASS where a row has every per-class column, else THREE_TERM (rows written before them)."""
    return frame[list(CLASS_COLUMNS)].notna().all(axis=1).map({True: PER_CLASS, False: THREE_TERM})


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


@cache
def _counted_table(path: Path) -> pd.DataFrame | None:
    return pd.read_parquet(path) if path.exists() else None


def _counted(frame: pd.DataFrame, path: Path = COUNTED) -> pd.DataFrame:
    """The CPU's count of each row's configuration (studies/count_reference.py, as `crossover predict` counts a
    user's job): its *_per_step columns, on `frame`'s index, null where none was made."""
    table = _counted_table(path)
    if table is None or frame.empty:
        return pd.DataFrame(index=frame.index, columns=[*COST_COLUMNS, *CLASS_COLUMNS], dtype=float).assign(
            **{OPS_PER_STEP: None})
    keys = [k for k in COUNT_KEYS if k in frame]
    costs = [c for c in table.columns if c.endswith("_per_step")]  # OPS_PER_STEP among them
    sizes = {k: lambda f, k=k: pd.to_numeric(f[k], errors="coerce") for k in keys if k not in ("workload", "workload_params")}
    joined = (frame[keys].assign(**sizes).reset_index()
              .merge(table[keys + costs].assign(**sizes), on=keys, how="left"))
    return (joined.set_index("index")[costs].rename_axis(frame.index.name)
            .reindex(columns=[*COST_COLUMNS, *CLASS_COLUMNS, OPS_PER_STEP]))


# a row whose step was counted as `crossover predict` counts one (studies/reference.py real_rows) says so here
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

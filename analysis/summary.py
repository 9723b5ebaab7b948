"""The summary: time per epoch per device at each size, and under each workload's table its verdict.

    python -m crossover.analysis summary results/scaling                  # your rows beside the reference GPUs'
    python -m crossover.analysis summary results/scaling --no-reference   # your rows alone

By default your rows are set beside the shipped reference rows (results/reference/) of the same
configurations (`with_reference`): for each GPU model there, the rows of the folder that measured
most of those configurations (the newest among equals; others only for what it lacks), and only its
GPU rows. `reference_note` (analysis/verdict.py) says which, plainly: they come from another host.
Who is faster where is the verdict's (analysis/verdict.py, with the crossover's noise test), not a
comparison of the table's medians. Reads rows only (pandas); never imports torch or ray.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

from crossover.schema import SIZE_AXES

from .load import REFERENCE, arm_labels, eager_ok, read
from .migrate import row_files
from .selection import select
from .verdict import Verdict, reach, reference_note  # noqa: F401  reference_note: its old home


@cache
def _reference_gpu_rows(root: Path) -> pd.DataFrame:
    """Every eager, single-trial GPU row under `root`, each with its config_key: read once a process
    (the end of a sweep asks for them twice, for the summary and the report; about 4 s each on the
    2-core VM). The shipped reference folders do not change while a process runs; callers filter,
    never modify, what this returns."""
    found = []
    for folder in sorted({p.parent for p in row_files(root)}):  # past '_' folders (_counted: counts, not rows)
        ref = eager_ok(read(folder))
        alone = ref["fused_members"].fillna(1).eq(1) if "fused_members" in ref else True
        found.append(ref[ref["whole_gpu"] & alone])
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame()


def with_reference(rows: pd.DataFrame, root: Path = REFERENCE) -> pd.DataFrame:
    """`rows` and the reference GPU rows (single trials, eager) of the configurations `rows` measured: per
    GPU model, those of the folder that measured most of them (then the one with most runs of them, then
    the newest), and of the next folders for the configurations it lacks."""
    read_already = {str(Path(d).resolve()) for d in rows["results_dir"].unique()}
    ref = _reference_gpu_rows(Path(root))
    ref = ref[~ref["results_dir"].map(lambda d: str(Path(d).resolve())).isin(read_already)
              & ref["config_key"].isin(set(eager_ok(rows)["config_key"]))] if len(ref) else ref
    if ref.empty:
        return rows
    # One folder per GPU model where it can: the one that measured most of the configurations wanted
    # (a scaling sweep, not a study of another axis that shares a few), among equals the one with most runs
    # of them (an interval needs repeats: a study's single runs give none), then the newest; other folders
    # only for what it lacks. Mixing folders point by point mixes their runs' conditions.
    per_folder = ref.groupby(["device_name", "results_dir"]).agg(covered=("config_key", "nunique"),
                                                                 runs=("config_key", "size"),
                                                                 newest=("finished_at", "max"))
    rank = (per_folder.sort_values(["covered", "runs", "newest"], ascending=False)
            .groupby(level="device_name").cumcount())
    ref = ref.assign(_rank=pd.MultiIndex.from_frame(ref[["device_name", "results_dir"]]).map(rank.to_dict()))
    best = ref["_rank"].eq(ref.groupby(["device_name", "config_key"])["_rank"].transform("min"))
    both = pd.concat([rows.drop(columns="arm"), ref[best].drop(columns=["config_key", "_rank"])], ignore_index=True)
    return both.assign(arm=arm_labels(both))


def per_workload(rows: pd.DataFrame, said: Verdict | None = None) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """For each workload: a table (sizes x devices, median ms per epoch, the lower median's device and its
    ratio) and its verdict in words (`said`, else reached from `rows`)."""
    said = said or reach(select(rows))
    verdicts = {f.workload: f"verdict: {f.words}" for f in said.findings}
    ok = rows[rows["status"] == "ok"]
    out = {}
    for workload, group in ok.groupby("workload", sort=True):
        axes = [a for a in SIZE_AXES if group[a].nunique(dropna=True) > 1]
        keys = axes + ["n_params"]
        group = group.astype({a: "Int64" for a in keys}).assign(ms=group["epoch_s_median"] * 1e3)
        table = (group
                 .pivot_table(index=keys, columns="device", values="ms", aggfunc="median", dropna=False)
                 .dropna(how="all")
                 .sort_index(level=["n_params"] + [a for a in ["dataset_size", "batch_size"] if a in axes]))
        table.columns.name = None
        devices = list(table.columns)
        if len(devices) < 2:
            notes = [f"one device measured ({', '.join(devices)}): nothing to compare"]
        else:
            # the medians' order, not a verdict: within the noise it may go either way (the verdict below says)
            table["lower median"] = table[devices].idxmin(axis=1)
            table["ratio"] = table[devices].max(axis=1) / table[devices].min(axis=1)
            notes = [verdicts.get(workload, "verdict: not reached (these rows were not given to it)")]
        out[workload] = (table, notes)
    return out


def render(rows: pd.DataFrame, said: Verdict | None = None) -> str:
    """Each workload's table and its verdict (`said`, else reached from `rows`), and the failed trials."""
    parts = []
    for workload, (table, notes) in per_workload(rows, said).items():
        parts.append(f"== {workload}: median time per epoch, ms ==")
        parts.append(table.to_string(float_format=lambda v: f"{v:,.3f}"))
        parts += [f"  {note}" for note in notes]
    failed = rows[rows["status"] != "ok"]
    if len(failed):
        parts.append(f"{len(failed)} trial(s) failed: see the 'error' column")
    return "\n".join(parts) if parts else "no rows"

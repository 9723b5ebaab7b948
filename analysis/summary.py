"""The end-of-sweep summary: time per epoch per device at each size, and where the faster device changes.

    python -m analysis summary results/scaling

Reads rows only (pandas); never imports torch or ray.
"""

from __future__ import annotations

import pandas as pd

from analysis.schema import SIZE_AXES


def per_workload(rows: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """For each workload: a table (sizes x devices, median ms per epoch) and notes on who wins where."""
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
        notes = []
        devices = list(table.columns)
        if len(devices) < 2:
            notes.append(f"one device measured ({', '.join(devices)}): nothing to compare")
        else:
            table["faster"] = table[devices].idxmin(axis=1)
            table["speedup"] = table[devices].max(axis=1) / table[devices].min(axis=1)
            notes += _changes(table, keys)
        out[workload] = (table, notes)
    return out


def _changes(table: pd.DataFrame, keys: list[str]) -> list[str]:
    """Where, in the table's order, the faster device changes."""
    winners = table["faster"].dropna()
    flips = [(a, b) for a, b in zip(winners.index, winners.index[1:]) if winners[a] != winners[b]]
    if not flips:
        return [f"{winners.iloc[0]} is faster at every measured size"] if len(winners) else []
    label = lambda idx: ", ".join(f"{k}={v:,}" for k, v in zip(keys, idx if isinstance(idx, tuple) else (idx,)))  # noqa: E731
    return [f"faster device changes {winners[a]} -> {winners[b]} between ({label(a)}) and ({label(b)})"
            for a, b in flips]


def render(rows: pd.DataFrame) -> str:
    parts = []
    for workload, (table, notes) in per_workload(rows).items():
        parts.append(f"== {workload}: median time per epoch, ms ==")
        parts.append(table.to_string(float_format=lambda v: f"{v:,.3f}"))
        parts += [f"  {note}" for note in notes]
    failed = rows[rows["status"] != "ok"]
    if len(failed):
        parts.append(f"{len(failed)} trial(s) failed: see the 'error' column")
    return "\n".join(parts) if parts else "no rows"

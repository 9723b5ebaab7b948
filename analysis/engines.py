"""Benchmark figures of sweeps/engines.py, from its rows alone:

- the speed-up of each engine over eager on the same GPU, per workload and size;
- fused trials per hour against the same trials one at a time (warm rows: a worker's first trial left out);
- the crossover against the CPU per engine: how far `graph`, `compile` and fusion pull it towards
  small models.

    python -m analysis engines results/engines-*
Rows are found by their columns (gpus_requested, engine, fused_members), never by a sweep's name, so
any sweep's rows that measured the same things give the same figures. Reads rows only (pandas);
never imports torch or ray.
"""

from __future__ import annotations

import pandas as pd

from analysis.crossover import Bootstrap, answer, find
from analysis.load import cold_starts, sizes_label
from analysis.schema import CONFIG_COLUMNS

# Fused members differ only in these (trainables/fused.py): the rest of the config is the group's.
FUSABLE = ("seed", "lr")


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "ok"]


def speedup(rows: pd.DataFrame) -> pd.DataFrame:
    """Median epoch time per engine on the GPU, and each engine's speed-up over eager, for the
    configurations measured with more than one engine (trials alone, not fused)."""
    ok = _ok(rows)
    gpu = ok[(ok["gpus_requested"] > 0) & (ok["fused_members"] == 1)]
    if gpu.empty:
        return pd.DataFrame()
    table = (gpu.assign(sizes=sizes_label(gpu), ms=gpu["epoch_s_median"] * 1e3)
             .pivot_table(index=["workload", "device", "sizes", "epochs"], columns="engine", values="ms",
                          aggfunc="median"))
    table.columns.name = None
    table = table[table.notna().sum(axis=1) > 1]
    for engine in [e for e in table.columns if e != "eager"]:
        if "eager" in table.columns:
            table[f"{engine}_speedup"] = table["eager"] / table[engine]
    return table


def fused(rows: pd.DataFrame) -> pd.DataFrame:
    """Trials per hour: one at a time (the median of each trial's own wall time) and fused (the median
    of the groups' wall time, per group size), for the trials that were measured both ways (the same
    configuration but for seed and lr).

    A cold row (its worker's first trial: its total_s holds the imports and CUDA context the others
    found done, 5 s against 0.4 s in results/reference/h100-2026-11-21-engines) is left out of either
    side where that side has warm ones, and kept where it has none; `note` says which."""
    ok = _ok(rows.assign(cold=cold_starts(rows)))
    shared = [c for c in CONFIG_COLUMNS if c not in FUSABLE]
    groups = ok[ok["fused_members"] > 1].drop_duplicates("fused_group")
    alone = ok[ok["fused_members"] == 1].merge(groups[shared].drop_duplicates(), on=shared)
    if alone.empty or groups.empty:
        return pd.DataFrame()
    lines = [_trials_per_hour("one at a time", 1, alone, "trial")]
    lines += [_trials_per_hour("fused", k, g, "group") for k, g in groups.groupby("fused_members")]
    out = pd.DataFrame(lines)
    return out.assign(vs_one_at_a_time=out["trials_per_hour"] / out["trials_per_hour"].iloc[0])


def _trials_per_hour(how: str, members: int, runs: pd.DataFrame, unit: str) -> dict:
    """One line of `fused`: the median wall time of the warm `runs` (all of them where none is warm)."""
    warm = runs[~runs["cold"]]
    used = warm if len(warm) else runs
    left_out = len(runs) - len(used)
    note = (f"{left_out} cold {unit}{'s' * (left_out > 1)} (a worker's first) left out" if left_out else
            f"cold only: no warm {unit} measured, so total_s holds the worker's start-up" if used["cold"].all() else "")
    trial_s = used["total_s"].median()
    return {"how": how, "members": members, "runs": len(used), "trial_s": trial_s,
            "trials_per_hour": members * 3600 / trial_s, "note": note}


def crossovers(rows: pd.DataFrame, boot: Bootstrap = Bootstrap(draws=200)) -> pd.DataFrame:
    """Per workload and axis: where each GPU engine overtakes the CPU, per epoch (trials alone)."""
    table = find(rows[rows["fused_members"] == 1], boot)
    table = table[(table["metric"] == "epoch_s") & table["device_a"].str.startswith("cpu")
                  & ~table["device_b"].str.startswith("cpu")]
    return table.assign(answer=[answer(line) for line in table.itertuples()])[
        ["workload", "axis", "held_fixed", "device_a", "device_b", "crossover", "answer"]]


def render(rows: pd.DataFrame) -> str:
    parts = []
    for title, table in (("speed-up over eager on the GPU (ms per epoch)", speedup(rows)),
                         ("fused trials per hour against one at a time", fused(rows)),
                         ("crossover against the CPU, per engine", crossovers(rows))):
        if not table.empty:
            parts += [f"== {title} ==", table.to_string(float_format=lambda v: f"{v:,.3f}")]
    return "\n".join(parts) if parts else "no rows of sweeps/engines.py"

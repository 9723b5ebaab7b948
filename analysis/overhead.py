"""Figures of the orchestration-overhead benchmark (studies/overhead.py), from its directories alone.

    python studies/overhead.py            # measures, and prints these figures per measurement
    figures(*measurement("results/overhead-20261121-101500-0.1s-c1-r0"))

The figures, per measurement (slots: trials that can run at once, min(concurrency, CPUs, N); with
`--concurrency auto` Tune starts as many as the CPUs allow, as sweeps/scaling.py does by default):

    own_s        sum of the trials' total_s, each trial's wall time inside the trainable (setup, warm-up,
                 training, evaluation, row): the trial's own time, the honest ideal to compare with
    train_s      sum of warmup_s + train_s: the part of own_s spent training
    over_ideal   wall_s x slots / own_s - 1: the sweep's time beyond the ideal (ours: <= 10% for 10 s
                 trials; Ray's scalability target: < 20%)
    per_trial_s  (wall_s x slots - own_s) / N: start-up cost per trial, in slot-seconds
                 (ours: <= 0.2 s on a 2-core machine)
    start_s      from the sweep's start to its first row, less that trial's total_s: Tune's set-up,
                 the first worker process and its imports
    gap_s        one at a time only: mean time between a row and the next, less the next trial's
                 total_s: the cost per trial once the sweep runs
    rows_per_s   rows written per second of wall time
    fixed_s      median of total_s less its timed phases: the trainable's own cost that is not
                 training (environment, the co-running registry, summaries)
    first_s      one at a time only: the first trial's total_s less the median of the others: what a
                 fresh worker pays inside the trainable

Reads rows only (pandas); never imports torch or ray.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pandas as pd

from crossover.schema import PHASE_COLUMNS

from .load import read

SWEEP_FILE = "_sweep.json"  # beside a measurement's rows; leading '_': Parquet readers of the directory skip it


def measurement(directory: Path | str) -> tuple[pd.DataFrame, dict]:
    """A measurement's rows (crossover.analysis.load.read), each with `written_at` (its file's time: when the
    driver wrote it), and its SWEEP_FILE record."""
    directory = Path(directory)
    sweep = json.loads((directory / SWEEP_FILE).read_text())
    rows = read(directory)
    rows["written_at"] = [os.stat(directory / f"{h}.parquet").st_mtime_ns / 1e9 for h in rows["config_hash"]]
    return rows.sort_values("written_at", ignore_index=True), sweep


def figures(rows: pd.DataFrame, sweep: dict) -> dict:
    """The module docstring's figures from one measurement's rows (with `written_at`) and record."""
    failed = rows[rows["status"] != "ok"]
    if len(failed):
        raise ValueError(f"{len(failed)} of {len(rows)} trials failed, e.g. {failed['error'].iloc[0].splitlines()[0]!r}; "
                         "the overhead of failed trials is not comparable: fix them and measure again")
    n, slots = len(rows), sweep["slots"]
    wall = sweep["end"] - sweep["start"]
    own = rows["total_s"].sum()
    serial = slots == 1 and n > 1
    written = rows["written_at"]
    return {
        "trials": n,
        "slots": slots,
        "trial_s": rows["total_s"].median(),
        "wall_s": wall,
        "own_s": own,
        "train_s": (rows["warmup_s"] + rows["train_s"]).sum(),
        "over_ideal": wall * slots / own - 1,
        "per_trial_s": (wall * slots - own) / n,
        "start_s": written.iloc[0] - sweep["start"] - rows["total_s"].iloc[0],
        "gap_s": (written.iloc[-1] - written.iloc[0] - rows["total_s"].iloc[1:].sum()) / (n - 1) if serial else None,
        "rows_per_s": n / wall,
        "fixed_s": (rows["total_s"] - rows[list(PHASE_COLUMNS)].sum(axis=1)).median(),
        "first_s": rows["total_s"].iloc[0] - rows["total_s"].iloc[1:].median() if serial else None,
        "load_before": sweep["load_before"][0],
        "load_after": sweep["load_after"][0],
    }


# column, header, format: the table printed per measurement and the summary over repeats
COLUMNS = [("trials", "N", "{:d}"), ("slots", "slots", "{:d}"), ("trial_s", "trial_s", "{:.3f}"),
           ("wall_s", "wall_s", "{:.2f}"), ("own_s", "own_s", "{:.2f}"), ("train_s", "train_s", "{:.2f}"),
           ("over_ideal", "over_ideal", "{:.1%}"), ("per_trial_s", "per_trial_s", "{:.3f}"),
           ("start_s", "start_s", "{:.2f}"), ("gap_s", "gap_s", "{:.3f}"), ("rows_per_s", "rows/s", "{:.2f}"),
           ("fixed_s", "fixed_s", "{:.4f}"), ("first_s", "first_s", "{:.3f}"),
           ("load_before", "load<", "{:.2f}"), ("load_after", "load>", "{:.2f}")]
SUMMARY = ("over_ideal", "per_trial_s", "start_s", "gap_s", "rows_per_s", "fixed_s")


def _cell(fmt: str, value) -> str:
    return "-" if value is None or pd.isna(value) else fmt.format(value)


def header() -> str:
    return "  ".join(["target_s"] + [h for _, h, _ in COLUMNS])


def line(result: dict) -> str:
    """One measurement's figures under `header()`."""
    return "  ".join([f"{result['target_s']:g}"] + [_cell(f, result[k]) for k, _, f in COLUMNS])


def summary(results: list[dict]) -> str:
    """Per (trial length, slots): the median and range over repeats of each SUMMARY figure."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["target_s"], r["slots"]), []).append(r)
    lines = ["median [min, max] over repeats"]
    for (target, slots), rs in groups.items():
        cells = []
        for key in SUMMARY:
            fmt = next(f for k, _, f in COLUMNS if k == key)
            values = [r[key] for r in rs if r[key] is not None]
            if values:
                cells.append(f"{key} {fmt.format(statistics.median(values))} "
                             f"[{fmt.format(min(values))}, {fmt.format(max(values))}]")
        lines.append(f"{target:g} s trials, {slots} at a time, {len(rs)} repeats: " + "; ".join(cells))
    return "\n".join(lines)

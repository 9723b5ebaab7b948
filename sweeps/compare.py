"""The search's benchmark: the search beside the full grid, per workload, as `--compare` prints it.

    python sweeps/scaling.py --compare               # both, each in its own folder, side by side
    python sweeps/scaling.py --compare results/scaling   # the search beside a full grid measured before

Per workload (`side_by_side`), the full grid's answer (analysis/crossings.py `find`) and the search's
(sweeps/stopping.py `verdict`) on the search's line, how many size steps apart their crossovers are, and
the trials and trial seconds each spent; then the totals and the search's targets, printed and never asserted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from crossover import schema

from ..analysis.crossings import (A_EVERYWHERE, B_EVERYWHERE, CROSSOVER, NOT_COMPUTABLE, SEVERAL, WITHIN_NOISE,
                                          find)
from ..analysis.load import read
from ..analysis.selection import select
from .budget import in_s, trial_count
from .search import Plan, plan, state
from .space import Space
from .stopping import CPU, GPU, Line, verdict


def run_seconds(directory: Path) -> float:
    """Seconds the runs of the sweep in `directory` took, from its runs file (crossover/schema.py runs_file)."""
    path = schema.runs_file(Path(directory))
    if not path.exists():
        return math.nan
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return float(sum(r["end"] - r["start"] for r in records))


def _steps(sizes: tuple, x: float) -> float:
    """Where `x` lies among `sizes`, in grid steps (0 at the first size), interpolated on log size."""
    logs = np.log(np.asarray(sizes, float))
    return float(np.interp(math.log(x), logs, np.arange(len(sizes))))


def _said(kind: str, faster_above: str | None, axis: str, x: float = math.nan) -> str:
    side = {CPU: "CPU", GPU: "GPU"}.get(faster_above or "", "?")
    if kind == CROSSOVER:
        return f"{side} faster past {axis} ~ {x:.3g}"
    return {B_EVERYWHERE: "GPU faster at every size", A_EVERYWHERE: "CPU faster at every size",
            WITHIN_NOISE: "within noise at every size", SEVERAL: "several crossings",
            NOT_COMPUTABLE: "too few runs for an interval"}.get(kind, kind)


def _full(p: Plan, line: Line, rows: pd.DataFrame) -> tuple[str, str | None, float]:
    """The full grid's answer on the line: analysis/crossings.py `find` on its rows (those flagged
    outside_load read by its one rule, as the search reads them) beside the same GPU rows as the search's.
    (kind, faster above, x)."""
    mine = rows[rows["config_hash"].isin(p.hashes(line)) & (rows["status"] == "ok")]
    both = pd.concat([mine, p.ref_gpu.get(line, mine.iloc[:0])], ignore_index=True)
    if both.empty or line.axis not in schema.CROSSOVER_AXES:
        return "not compared", None, math.nan
    table = find(select(both.assign(arm=both["device"])))
    table = table[(table["axis"] == line.axis) & (table["metric"] == "epoch_s") & table["is_cpu_a"]]
    if table.empty:
        return "not compared", None, math.nan
    t = table.iloc[0]
    return t["verdict"], {"A": CPU, "B": GPU}.get(t["faster_above"]), t["crossover"]


def side_by_side(space: Space, out: Path | str, adaptive_dir: Path, full_dir: Path, seconds: dict) -> str:
    """The benchmark's table: per workload, the full grid's answer and the search's on the search's line, how
    many size steps apart their crossovers are, and the trials and trial seconds each spent; then the totals
    and the search's targets, printed and never asserted. `seconds`: each one's wall time ('search', 'full')."""
    p = plan(space, out)
    rows = {"search": read(adaptive_dir), "full": read(full_dir)}
    found = state(p, rows["search"])
    parts, close = [f"the search: {adaptive_dir}", f"the full grid: {full_dir}"], []
    for line in p.lines:
        v = verdict(line, found.measured[line])
        kind, above, x = _full(p, line, rows["full"])
        ours = v.changes[0][2] if v.kind == CROSSOVER else math.nan
        if kind == CROSSOVER and v.kind == CROSSOVER and above == v.faster_above:
            apart = abs(_steps(line.sizes, ours) - _steps(line.sizes, x))
            agree, how = apart <= 1, f"{apart:.1f} size steps apart"
        else:
            agree = kind == v.kind and above == v.faster_above
            how = "the same answer" if agree else "different answers"
        close.append(agree)
        parts += [f"{line.workload}, {line.axis} {line.sizes[0]:,}..{line.sizes[-1]:,}, the CPU against "
                  f"{p.gpu_name[line]}: {how}"]
        for who, said in (("full grid", _said(kind, above, line.axis, x)),
                          ("search", _said(v.kind, v.faster_above, line.axis, ours))):
            r = rows["full" if who == "full grid" else "search"]
            r = r[r["workload"] == line.workload]
            ok, skipped = r["status"] == "ok", r["error"].fillna("").str.startswith("skipped:")
            parts.append(f"  {who:9}  {said:44} {ok.sum():3} trials {r.loc[ok, 'total_s'].sum():7,.1f} s"
                         + (f", {skipped.sum()} skipped" if skipped.any() else ""))
    n = {k: int((r["status"] == "ok").sum()) for k, r in rows.items()}
    parts.append(f"total: full grid {trial_count(n['full'])} in {in_s(seconds['full'])}; "
                 f"search {trial_count(n['search'])} in {in_s(seconds['search'])}")
    parts.append("targets (printed, never asserted):")
    parts.append(f"  the search's crossover within one size step of the full grid's: {sum(close)} of {len(close)} "
                 "workloads")
    parts.append(f"  the search within 3 minutes: {'yes' if seconds['search'] <= 180 else 'no'} "
                 f"({in_s(seconds['search'])})")
    return "\n".join(parts)

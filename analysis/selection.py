"""Which rows the crossovers time: a row timed while its host was busy is set aside where a quiet row of its point exists.

    python -m crossover.analysis report results/scaling --include-loaded   # every row timed, busy or not
    from .selection import select; s = select(rows); print(s.left_out)

Rows flagged `outside_load` (another job used the host's CPUs while they were timed): one rule
(`timed`), which the crossovers (analysis/crossings.py) and the search (sweeps/search.py) both read
rows through. A flagged row is left out where the same configuration (seed and run length aside) on
the same arm has an unflagged row; where it has flagged rows only, they are used (the verdict says so
in words). Rows where the flag is null (written before the column existed, or on a host without
/proc/stat) count as unflagged. The choice is made once, where rows are read: `select`
(--include-loaded keeps every row) gives a `Selected`, which `find`, `render`, the verdict and the
report read: the rows timed, those kept though busy, and in words what was left out, what was kept
though busy, and why.

Reads rows only (pandas); never imports torch or ray.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from crossover.schema import CONFIG_COLUMNS

# How long a trial ran: not part of a measured point (`_point`), nor held fixed in a crossover's slice
# (analysis/crossings.py `held_fixed`). It changes neither the work of an epoch nor its time, so a
# laptop's short sweep compares per epoch with reference rows of the same sizes run for longer (the
# time-to-loss metrics still compare only losses the two arms both reached).
RUN_LENGTH = {"epochs", "warmup_epochs"}


def loaded(rows: pd.DataFrame) -> pd.Series:
    """Rows flagged `outside_load`; null (not measured) is not a flag."""
    if "outside_load" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["outside_load"].eq(True)


def _point(rows: pd.DataFrame) -> list[str]:
    """The columns of one measured point: its configuration (seed and run length aside) and its arm."""
    extra = [c for c in ("workload_params", "arm") if c in rows]
    return [c for c in CONFIG_COLUMNS if c not in RUN_LENGTH | {"seed"}] + extra


def set_aside(rows: pd.DataFrame) -> pd.Series:
    """The rows `timed` leaves out: flagged outside_load, where an unflagged ok row of the same point
    (configuration and arm, any seed) exists."""
    flagged = loaded(rows)
    if not flagged.any():
        return flagged
    points = rows[_point(rows)].assign(_quiet=(rows["status"] == "ok") & ~flagged)
    return flagged & points.groupby(_point(rows), sort=False, dropna=False)["_quiet"].transform("max").astype(bool)


def timed(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the crossovers and the search read: all but those flagged outside_load whose point
    (configuration and arm) has an unflagged row (`set_aside`)."""
    return rows[~set_aside(rows)]


BUSY = "timed while your machine was busy"  # the verdict's words for a line resting on Selected.busy rows


@dataclass(frozen=True, eq=False)
class Selected:
    """Rows as read, and which of them the crossovers time, chosen once (`select`)."""

    rows: pd.DataFrame  # every row read: the cold starts, the devices and the failed trials count them all
    kept: pd.Series  # bool, over `rows`: those the crossovers and the charts time (`timed`, or all of them)
    busy: pd.Series  # bool, over `rows`: the ok rows kept though flagged outside_load; their times may be slow
    left_out: str  # what was left out, and kept though busy, and why, in words ('' where no ok row is flagged)
    busy_count: str = ""  # its first words alone: 'N of M ok rows were timed while the host was busy' ('' likewise)

    @property
    def timed(self) -> pd.DataFrame:
        return self.rows[self.kept]


def select(rows: pd.DataFrame, include_loaded: bool = False) -> Selected:
    """`rows` read through `timed`, or every one of them with `include_loaded` (--include-loaded)."""
    ok = rows["status"] == "ok"
    flagged = loaded(rows) & ok
    kept = pd.Series(True, index=rows.index) if include_loaded else ~set_aside(rows)
    busy = flagged & kept
    if not flagged.any():
        return Selected(rows, kept, busy, "")
    count = f"{flagged.sum()} of {ok.sum()} ok rows were timed while the host was busy"
    what = f"{count} beyond the trial, the crossover trials beside it and Ray (outside_load)"
    if include_loaded:
        return Selected(rows, kept, busy, f"{what}: kept, as asked (--include-loaded)", count)
    dropped = (~kept).sum()
    said = ([f"{dropped} left out of the crossovers (the same configuration has quiet rows)"] if dropped else []) + \
        ([f"{busy.sum()} kept where the configuration has no quiet row (the answer says so)"] if busy.any() else [])
    told = f"{what}: {'; '.join(said)}" + ("; --include-loaded keeps them all" if dropped else "")
    return Selected(rows, kept, busy, told, count)

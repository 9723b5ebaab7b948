"""The decision put together (`decide`): the grid, the speeds, the options, the picks and the break-even, and the
notes, as one `Decision`; and the steps a planned run's decision looks up in the counts it is handed (`steps`), which
the command layer counts first (sweeps/command.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

from crossover.step import Step

from ..cost import stale, stale_boxes
from ..prices import POWER, Billing, Electricity, HomeBox, Option
from ..selection import timed
from .choosing import break_even, pick
from .grid import Plan, plan_grid, sweep
from .pricing import own_gpus, table
from .speeds import missing, plan_speeds, planned_step, predictions, speeds, wanted
from .text import STALE


@dataclass(frozen=True, eq=False)
class Decision:
    """`decide`'s answer for the measured grid as the sweep, or for the planned run `plan`."""

    grid: pd.DataFrame  # what is priced: a configuration a line, its trials (`sweep`, `plan_grid`)
    options: pd.DataFrame  # every option's time and cost (`table`)
    picks: dict  # `pick`'s: name -> the option's line, or None
    even: pd.DataFrame  # the home boxes' break-even (`break_even`)
    notes: list  # models left out, predictions not made, stale prices
    plan: Plan | None = None

    @property
    def priced(self) -> str:
        """What was priced, as a chart's title names it: 'the sweep', or 'the planned run (30 epochs of ...)'."""
        if self.plan is None:
            return "the sweep"
        return f"the planned run ({self.plan.epochs:,} epochs of {self.plan.samples:,} samples of {self.grid['workload'].iloc[0]})"


def decide(rows: pd.DataFrame, predicted: pd.DataFrame | None, options: list[Option], billing: dict[str, Billing],
           boxes: list[HomeBox], asked: dict[str, int] | None = None, deadline_h: float | None = None,
           plan: Plan | None = None, power: Electricity = POWER, counts: Mapping[Step, dict | str] | None = None,
           today: dt.date | None = None) -> Decision:
    """The sweep (or the planned run, where `plan` is given: `asked` is then unused), every option's time
    and cost, your own CPU and GPUs among them (`own_gpus`; their electricity, `power`), the picks and the
    break-even; and the notes (models left out, prices over 12 months old on `today`, None: the date it runs). `counts`:
    the planned run's steps counted as `crossover predict` counts them, keyed by the Step, each a dict (counted) or a
    str (why not): every step `steps` names (`planned_step`; None: a row's count). `predicted` None: analysis/model/'s
    predictions (`predictions`). Rows flagged outside_load are left out where their point has quiet rows,
    as the crossovers leave them (selection.timed); those kept mark the figures resting on them (`busy`)."""
    rows = timed(rows)
    grid = sweep(rows, None if plan else asked)
    if grid.empty:
        return Decision(grid.assign(trials=[]), pd.DataFrame(), {}, pd.DataFrame(),
                        ["no ok row to decide on: every trial failed"], plan)
    grid = plan_grid(rows, plan) if plan else grid
    notes, own = [], own_gpus(rows)
    gpus = sorted({o.gpu for o in options if o.gpu} | {b.gpu for b in boxes} | set(own))
    if predicted is None:
        predicted, note = predictions(rows, gpus)
        notes += [note] if note else []
    if plan:
        counted, note = planned_step(rows, plan, counts)
        notes += [note] if note else []
        # a GPU without the planned precision's unit is never predicted faster than at PyTorch's default: its count
        default = planned_step(rows, replace(plan, precision="default"), counts)[0] \
            if counted is not None and plan.precision != "default" else None
        speed = plan_speeds(rows, predicted, grid, gpus, plan, counted, default)
    else:
        speed = speeds(rows, predicted, grid, gpus)
    found = table(grid, speed, options, billing, boxes, own, power, today)
    picks = pick(found, deadline_h) if len(found) else {}
    even = break_even(found) if len(found) else pd.DataFrame()
    old = stale(options, today) + stale_boxes(boxes, today)
    priced = sum(len(o.prices()) for o in options) + sum(not b.record for b in boxes)
    dated = f"  {STALE} {len(old)} of {priced} are over 12 months old: re-read them " \
            "(python -m crossover.analysis cost lists them)"
    return Decision(grid, found, picks, even, notes + missing(grid, speed, gpus) + ([dated] if old else []), plan)


def steps(rows: pd.DataFrame, plan: Plan) -> tuple[Step, ...]:
    """Every step `decide(rows, ..., plan=plan)` looks up in its counts (`wanted`): the planned run's, and where it
    trains at another precision, its step at PyTorch's default too. What `crossover decide` and `crossover report`
    count before they hand the counts over; none where the rows hold no ok row (decide prices nothing)."""
    rows = timed(rows)  # as `decide` reads them: the row a step is counted from is the same
    if sweep(rows, None).empty:
        return ()
    plans = [plan] + ([replace(plan, precision="default")] if plan.precision != "default" else [])
    return tuple(step for step in (wanted(rows, p) for p in plans) if step is not None)

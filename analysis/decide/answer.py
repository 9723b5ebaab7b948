"""The one answer for a counted run on a set of options (`answer`: `Run`, `Offer`), which `crossover predict`,
`crossover decide`, `crossover report` and the end of a sweep all give: the decision put together from rows (`decide`:
the grid, the speeds, the options, the picks and the break-even, and the notes) or from a step counted with nothing
measured (`counted`), as one frozen `Decision` of typed lines (line.py); and the steps a planned run's decision looks
up in the counts it is handed (`steps`), which the command layer counts first (sweeps/command.py).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import pandas as pd

from crossover.step import Step

from ..cost import stale, stale_boxes
from ..model import load_devices
from ..prices import POWER, PRICES, Billing, Electricity, HomeBox, Option, home_boxes, load_home_box, load_prices
from ..selection import timed
from .choosing import break_even, picks
from .grid import NO_PRICE, Plan, counted_grid, plan_grid, planned_rows, sweep
from .line import Config, Even, Line, configs, lines
from .many import Scale, instances
from .pricing import card_fits, own_gpus, table
from .speeds import HOST, at_plan, missing, plan_speeds, planned_step, predictions, speeds, wanted
from .text import STALE


@dataclass(frozen=True, eq=False)
class Decision:
    """`decide`'s answer for the measured grid as the sweep, or for the planned run `plan`."""

    grid: tuple[Config, ...]  # what is priced: each configuration and its trials (`sweep`, `plan_grid`)
    lines: tuple[Line, ...]  # every option's time and cost (`table`), cheapest first
    picks: Mapping[str, Line | None]  # choosing.picks': name -> the option's line, or None (read-only)
    evens: tuple[Even, ...]  # the home boxes' break-even (`break_even`)
    notes: tuple[str, ...]  # models left out, predictions not made, stale prices
    plan: Plan | None = None

    @property
    def priced(self) -> str:
        """What was priced, as a chart's title names it: 'the sweep', or 'the planned run (30 epochs of ...)'."""
        if self.plan is None:
            return "the sweep"
        return f"the planned run ({self.plan.epochs:,} epochs of {self.plan.samples:,} samples of {self.grid[0].workload})"


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
        return Decision((), (), MappingProxyType({}), (),
                        ("no ok row to decide on: every trial failed",), plan)
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
    found = lines(table(grid, speed, options, billing, boxes, own, power, today))
    old = stale(options, today) + stale_boxes(boxes, today)
    priced = sum(len(o.prices()) for o in options) + sum(not b.record for b in boxes)
    dated = f"  {STALE} {len(old)} of {priced} are over 12 months old: re-read them " \
            "(python -m crossover.analysis cost lists them)"
    return Decision(configs(grid), found, MappingProxyType(picks(found, deadline_h) if found else {}),
                    tuple(break_even(found)),
                    tuple(notes + missing(grid, speed, gpus) + ([dated] if old else [])), plan)


def steps(rows: pd.DataFrame, plan: Plan) -> tuple[Step, ...]:
    """Every step `decide(rows, ..., plan=plan)` looks up in its counts (`wanted`): the planned run's, and where it
    trains at another precision, its step at PyTorch's default too. What `crossover decide` and `crossover report`
    count before they hand the counts over; none where the rows hold no ok row (decide prices nothing)."""
    rows = timed(rows)  # as `decide` reads them: the row a step is counted from is the same
    if sweep(rows, None).empty:
        return ()
    plans = [plan] + ([replace(plan, precision="default")] if plan.precision != "default" else [])
    return tuple(step for step in (wanted(rows, p) for p in plans) if step is not None)


@dataclass(frozen=True)
class Offer:
    """These options: what a run is priced on. The price table's instances (`options`, billed as each provider
    bills: `billing`), the home boxes, your own machine's electricity (`power`), the counts of GPUs of one instance a
    planned run is also priced on (`scale`, data-parallel: many.instances; None: each instance on one of its GPUs, as
    `table` prices it), the deadline a pick must meet, and the day the prices' age is counted to (None: today)."""

    options: tuple[Option, ...]
    billing: Mapping[str, Billing]
    boxes: tuple[HomeBox, ...] = ()
    power: Electricity = POWER
    scale: Scale | None = None
    deadline_h: float | None = None
    today: dt.date | None = None

    @classmethod
    def shipped(cls, prices: Path = PRICES, boxes: tuple[Path, ...] = (), **given) -> Offer:
        """The price table at `prices` (the one shipped with crossover by default) and the home boxes at `boxes`
        (default: those shipped), with `given`'s other fields."""
        options, billing = load_prices(prices)
        return cls(tuple(options), billing, tuple(load_home_box(p) for p in (boxes or home_boxes())), **given)


@dataclass(frozen=True, eq=False)
class Run:
    """This counted run: the rows it is measured by (none: `crossover predict`, which times nothing), what is priced
    (`plan`; None: the measured grid as the sweep, `asked` trials of each workload where given), and the steps the
    command layer counted for it (`counts`: each `Step` the plan needs, `steps`, and its counts, or why it could not
    be counted; None where nothing was counted)."""

    rows: pd.DataFrame
    plan: Plan | None = None
    counts: Mapping[Step, dict | str] | None = None
    asked: Mapping[str, int] | None = None


def answer(run: Run, offer: Offer) -> Decision:
    """The one answer for `run` on `offer`'s options, whoever asks (`crossover predict`, `crossover decide`,
    `crossover report`, the end of a sweep): every option's time and cost, the picks, the break-even and the notes.
    From rows, `decide`'s; where none were measured, the counted step's prediction on every GPU the model knows
    (`counted`). A planned run of one configuration, run once, on an offer with a `scale`: each rented instance of
    several GPUs priced as the run on all of them (many.instances), the picks made again among those."""
    plan = run.plan
    if plan is not None and run.rows.empty:
        return counted(plan, run.counts or {}, offer)
    found = decide(run.rows, None, list(offer.options), dict(offer.billing), list(offer.boxes),
                   None if run.asked is None else dict(run.asked), offer.deadline_h, plan, offer.power, run.counts,
                   offer.today)
    if plan is None or offer.scale is None or not found.lines or len(found.grid) != 1 or (plan.trials or 1) != 1:
        return found
    mine, batch = planned_rows(run.rows, plan), found.grid[0].batch_size
    if batch is None:  # plan_grid gives every planned run its batch (the dataset's size where it is the whole)
        raise ValueError(f"the planned run of {found.grid[0].workload} has no batch size")
    priced = instances(found.lines, batch, plan.samples,
                       float(mine["n_params"].median()), plan.epochs, offer.scale, list(offer.options),
                       dict(offer.billing))
    return replace(found, lines=priced, picks=MappingProxyType(picks(priced, offer.deadline_h)))


def counted(plan: Plan, counts: Mapping[Step, dict | str], offer: Offer) -> Decision:
    """The planned run with nothing measured (`crossover predict`): its step, counted at plan.precision (and at
    PyTorch's default, which a GPU without that precision's unit is never predicted faster than), predicted on every
    GPU of the model's device table (`at_plan`, the prediction `decide` makes of a configuration no row measured),
    priced on every option that has one of them (`table`), and after those a line of kind 'no price' for each GPU
    model no one-GPU on-demand option has: the run on that GPU alone."""
    steps = {step.precision: count for step, count in counts.items()}
    step = steps.get(plan.precision)
    if not isinstance(step, dict):
        raise ValueError(f"the planned run's step at precision {plan.precision} was not counted"
                         + (f": {step}" if isinstance(step, str) else ""))
    default = steps.get("default") if plan.precision != "default" else None
    grid = counted_grid(step, plan)
    devices = load_devices()
    speed = at_plan("run", pd.DataFrame([step]), plan, list(devices),
                    pd.DataFrame([default]) if isinstance(default, dict) else None)
    found = lines(table(grid, speed, list(offer.options), dict(offer.billing), list(offer.boxes), None, offer.power,
                        offer.today))
    rented = {o.model for o in found if o.gpus == 1 and o.kind == "on-demand"}
    alone = [Line.of(_alone(run, devices[run["source"]].memory_gb)) for run in speed.to_dict("records")
             if run["source"] not in rented]
    notes = slower(plan, step, default, speed) if isinstance(default, dict) else ()
    return Decision(configs(grid), found + tuple(alone),
                    MappingProxyType(picks(found, offer.deadline_h) if found else {}),
                    tuple(break_even(found)), notes, plan)


SLOWER_NAMED = 4  # GPUs named in a reason of `slower`, then how many more


def slower(plan: Plan, step: dict, default: dict, speed: pd.DataFrame) -> tuple[str, ...]:
    """Where the planned run's precision (bf16, fp16) is predicted slower than PyTorch's default on some GPUs, one
    note that says on which and why, each GPU by the first reason that holds: it has no unit of that precision (run at
    FP32's rate, with autocast's casts on top); the host bounds its step (the casts are launches more a step); its TF32
    is no faster than its FP32 (a GeForce card's: its default runs on FP32 units at the share fitted for them, its
    tensor cores at the share H100s and H200s reached, which no row of its own checked); else the casts' bytes cost
    more than the narrower arithmetic saves. () where it is not slower anywhere."""
    devices = load_devices()
    ours = at_plan("run", pd.DataFrame([default]), replace(plan, precision="default"), list(devices))
    theirs = dict(zip(ours["source"], ours["epoch_s"]))
    casts = int(step.get("launches_per_step", 0) or 0) - int(default.get("launches_per_step", 0) or 0)
    extra = (float(step.get("bytes_per_step", 0) or 0) - float(default.get("bytes_per_step", 0) or 0)) / 1e6
    reasons: dict[str, list[str]] = {}
    for run in speed.to_dict("records"):
        gpu = run["source"]
        if not run["epoch_s"] > theirs.get(gpu, math.inf):
            continue
        device = devices[gpu]
        why = (f"no {plan.precision} unit: it runs at FP32's rate, with autocast's casts on top"
               if device.lacks(plan.precision) else
               f"the host bounds the step, and autocast adds {casts:,} launches a step" if run.get("host_bound") is True
               else "their TF32 is no faster than their FP32: the default runs on FP32 units, and their tensor cores "
                    f"at {plan.precision} are priced at the share H100s and H200s reached (no row of theirs checked it)"
               if (device.tf32_flops or 0) <= device.fp32_flops else
               f"autocast's casts move {extra:,.0f} MB more a step than the narrower arithmetic saves")
        reasons.setdefault(why, []).append(gpu)
    if not reasons:
        return ()
    said = "; ".join(f"{', '.join(g[:SLOWER_NAMED])}{f' and {len(g) - SLOWER_NAMED} more' if len(g) > SLOWER_NAMED else ''}"
                     f": {why}" for why, g in reasons.items())
    return (f"{plan.precision} is predicted slower than PyTorch's default on {sum(map(len, reasons.values()))} of "
            f"{len(speed)} GPUs: {said}",)


def _alone(run: dict, memory_gb: float | None) -> dict:
    """A GPU's predicted run (`at_plan`'s line) with no price: its time alone, as an option's line."""
    wall = {f"wall{end}_s": run[column] for end, column in (("", "trial_s"), ("_lo", "trial_lo"), ("_hi", "trial_hi"))}
    wall |= {k.replace("_s", "_h"): v / 3600 for k, v in wall.items()}
    return ({"option": f"{run['source']} (no price)", "kind": NO_PRICE, "model": run["source"], "gpus": 1,
             **{c: run[c] for c in ("epoch_s", "epoch_lo", "epoch_hi", "predicted", "reach", "needs_how", *HOST)}, **wall,
             "predicted_share": 1.0, "usd": math.nan, "usd_lo": math.nan, "usd_hi": math.nan,
             "basis": "no option of the price table has it: the GPU's time alone"} | card_fits(run, memory_gb))

"""The one answer for a requested run on a set of options (`answer`: a `Request`, its counted steps, an `Offer`), which
`crossover predict`, `crossover decide`, `crossover report` and the end of a sweep all give: the decision put together
from rows (`decide`: the grid, the speeds, the options, the picks and the break-even, and the notes) or from a step
counted with nothing measured (`counted`: every GPU model and home box on one GPU, and every count of GPUs of the
request), as one frozen `Decision` of typed lines (line.py); and the steps a planned run's decision looks up in the
counts it is handed (`steps`), which the command layer counts first (sweeps/command.py, sweeps/predict.py).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import pandas as pd

from crossover.schema import Precision
from crossover.step import Step

from ..cost import stale, stale_boxes
from ..model import load_devices
from ..prices import POWER, PRICES, Billing, Electricity, HomeBox, Option, home_boxes, load_home_box, load_prices
from ..selection import timed
from .choosing import RENT_FASTEST, break_even, picks
from .grid import HOME_BOX, NO_PRICE, counted_grid, plan_grid, planned_rows, sweep
from .line import Config, Even, Line, configs, lines
from .many import instances, on_gpus
from .memory import largest_batch
from .pricing import card_fits, own_gpus, table
from .request import Request
from .speeds import HOST, at_plan, missing, plan_speeds, planned_step, predictions, speeds, wanted
from .text import STALE


@dataclass(frozen=True, eq=False)
class Decision:
    """The answer for the measured grid as the sweep, or for the requested run `request`."""

    grid: tuple[Config, ...]  # what is priced: each configuration and its trials (`sweep`, `plan_grid`)
    lines: tuple[Line, ...]  # every option's time and cost (`table`), cheapest first
    picks: Mapping[str, Line | None]  # choosing.picks': name -> the option's line, or None (read-only)
    evens: tuple[Even, ...]  # the home boxes' break-even (`break_even`)
    notes: tuple[str, ...]  # models left out, predictions not made, stale prices
    request: Request | None = None
    # the step the figures rest on where nothing was measured (`counted`: count_step's columns), which the screens
    # name; None where rows priced the run
    step: Mapping | None = None
    absent: Mapping[str, str] = field(default_factory=dict)  # why a pick is none, in words (a count of GPUs not offered)

    @property
    def priced(self) -> str:
        """What was priced, as a chart's title names it: 'the sweep', or 'the planned run (30 epochs of ...)'."""
        if self.request is None:
            return "the sweep"
        return (f"the planned run ({self.request.epochs:,} epochs of {self.request.samples:,} samples of "
                f"{self.grid[0].workload})")


def decide(rows: pd.DataFrame, predicted: pd.DataFrame | None, options: list[Option], billing: dict[str, Billing],
           boxes: list[HomeBox], asked: dict[str, int] | None = None, deadline_h: float | None = None,
           plan: Request | None = None, power: Electricity = POWER, counts: Mapping[Step, dict | str] | None = None,
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
        default = planned_step(rows, replace(plan, precision=Precision.DEFAULT), counts)[0] \
            if counted is not None and plan.precision != Precision.DEFAULT else None
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


def steps(rows: pd.DataFrame, plan: Request) -> tuple[Step, ...]:
    """Every step `decide(rows, ..., plan=plan)` looks up in its counts (`wanted`): the planned run's, and where it
    trains at another precision, its step at PyTorch's default too. What `crossover decide` and `crossover report`
    count before they hand the counts over; none where the rows hold no ok row (decide prices nothing)."""
    rows = timed(rows)  # as `decide` reads them: the row a step is counted from is the same
    if sweep(rows, None).empty:
        return ()
    plans = [plan] + ([replace(plan, precision=Precision.DEFAULT)] if plan.precision != Precision.DEFAULT else [])
    return tuple(step for step in (wanted(rows, p) for p in plans) if step is not None)


@dataclass(frozen=True)
class Offer:
    """These options: what a run is priced on. The price table's instances (`options`, billed as each provider
    bills: `billing`), the home boxes, your own machine's electricity (`power`), the deadline a pick must meet, and the
    day the prices' age is counted to (None: today)."""

    options: tuple[Option, ...]
    billing: Mapping[str, Billing]
    boxes: tuple[HomeBox, ...] = ()
    power: Electricity = POWER
    deadline_h: float | None = None
    today: dt.date | None = None

    @classmethod
    def shipped(cls, prices: Path = PRICES, boxes: tuple[Path, ...] = (), **given) -> Offer:
        """The price table at `prices` (the one shipped with crossover by default) and the home boxes at `boxes`
        (default: those shipped), with `given`'s other fields."""
        options, billing = load_prices(prices)
        return cls(tuple(options), billing, tuple(load_home_box(p) for p in (boxes or home_boxes())), **given)


def answer(request: Request | None, counts: Mapping[Step, dict | str] | None, offer: Offer,
           rows: pd.DataFrame | None = None, asked: Mapping[str, int] | None = None) -> Decision:
    """The one answer for `request` on `offer`'s options, whoever asks (`crossover predict`, `crossover decide`,
    `crossover report`, the end of a sweep): every option's time and cost, the picks, the break-even and the notes.
    `counts`: the steps the command layer counted for it (each `Step` the request needs, `steps`, and its count, or
    why it could not be counted; None where nothing was counted). From `rows`, `decide`'s (request None: the measured
    grid as the sweep, `asked` trials of each workload where given); where none were measured, the counted step's
    prediction (`counted`). A requested run of one configuration, run once, is priced on one GPU and on each count of
    GPUs of the request (many.instances, many.on_gpus), the picks made among them all."""
    if request is not None and (rows is None or rows.empty):
        return counted(request, counts or {}, offer)
    rows = pd.DataFrame() if rows is None else rows
    found = decide(rows, None, list(offer.options), dict(offer.billing), list(offer.boxes),
                   None if asked is None else dict(asked), offer.deadline_h, request, offer.power, counts, offer.today)
    if request is None or not found.lines or len(found.grid) != 1 or (request.trials or 1) != 1:
        return found
    mine, batch = planned_rows(rows, request), found.grid[0].batch_size
    if batch is None:  # plan_grid gives every planned run its batch (the dataset's size where it is the whole)
        raise ValueError(f"the planned run of {found.grid[0].workload} has no batch size")
    priced = instances(found.lines, batch, float(mine["n_params"].median()), request, list(offer.options),
                       dict(offer.billing))
    return replace(found, lines=priced, picks=MappingProxyType(picks(priced, offer.deadline_h)))


def counted(request: Request, counts: Mapping[Step, dict | str], offer: Offer) -> Decision:
    """The requested run with nothing measured (`crossover predict`): its step, counted at request.precision at the
    batch request.axes names (and at PyTorch's default, which a GPU without that precision's unit is never predicted
    faster than), predicted on every GPU of the model's device table (`at_plan`, the prediction `decide` makes of a
    configuration no row measured) and priced on every option that has one of them (`table`): each GPU model once on
    one GPU, at its cheapest one-GPU on-demand option (`one_each`), a line of kind 'no price' where none has it; each
    home box; and every count of GPUs of the request (many.on_gpus, from its step counted at each per-GPU batch,
    Request.batches). On each, the batch that fits where the run does not (`smaller`)."""
    batch = int(request.named["batch_size"])
    by = {(s.precision, int(c["batch_size"])): c for s, c in counts.items() if isinstance(c, dict)}
    step = by.get((request.precision, batch))
    if step is None:
        why = next((c for s, c in counts.items() if isinstance(c, str) and s.precision == request.precision), None)
        raise ValueError(f"the planned run's step at precision {request.precision} was not counted"
                         + (f": {why}" if why else ""))
    bounded = request.precision != Precision.DEFAULT  # never faster than at the default: its count at each batch
    default = by.get((Precision.DEFAULT, batch)) if bounded else None
    grid = counted_grid(step, request)
    devices = load_devices()
    speed = at_plan("run", pd.DataFrame([step]), request, list(devices),
                    pd.DataFrame([default]) if default is not None else None)
    found = lines(table(grid, speed, list(offer.options), dict(offer.billing), list(offer.boxes), None, offer.power,
                        offer.today))
    rented = {o.model for o in found if o.gpus == 1 and o.kind == "on-demand"}
    alone = [Line.of(_alone(run, devices[run["source"]].memory_gb)) for run in speed.to_dict("records")
             if run["source"] not in rented]
    ones = smaller(one_each([*found, *alone]), step)
    steps = {b: (by[(request.precision, b)], by.get((Precision.DEFAULT, b)) if bounded else None)
             for b in [batch, *request.batches(batch, list(offer.options))]}
    gpus = on_gpus([o for o in ones if o.kind != HOME_BOX], steps, batch, request, list(offer.options),
                   dict(offer.billing), offer.today)
    priced = (*gpus, *(o for o in ones if o.kind == HOME_BOX))
    notes = slower(request, step, default, speed) if default is not None else ()
    lacking = request.unoffered(list(offer.options))
    return Decision(configs(grid), priced, MappingProxyType(picks(list(priced), offer.deadline_h)),
                    tuple(break_even(found)), notes, request, MappingProxyType(step),
                    MappingProxyType({RENT_FASTEST: f"none: {lacking}"} if lacking else {}))


def one_each(found: Sequence[Line]) -> tuple[Line, ...]:
    """Each GPU model's line of `found` once, fastest first: at its cheapest one-GPU on-demand option (the provider's
    start-up included, as in its bill), else its line of no price (the GPU's run alone); then each home box's (as
    `table` prices it: its write-off and electricity)."""
    by_gpu: dict[str, Line] = {}
    for line in sorted(found, key=lambda o: (math.isnan(o.usd), o.usd, o.wall_s)):
        if line.kind in ("on-demand", NO_PRICE) and line.gpus == 1:
            by_gpu.setdefault(line.model, line)
    fastest = sorted(by_gpu.values(), key=lambda o: (o.epoch_s, math.isnan(o.usd), o.usd))
    return (*fastest, *(o for o in found if o.kind == HOME_BOX))


def smaller(found: Sequence[Line], step: Mapping) -> tuple[Line, ...]:
    """`found` with, on each GPU the run does not fit, the largest batch that would (largest_batch, 0: not one
    sample; memory.largest_batch) and how many steps of it accumulate the run's batch (accumulate_steps); None
    elsewhere, and where the count has no peak a sample (batch 1, or no counted peak)."""
    per_sample, batch = step.get("peak_memory_per_sample_bytes"), int(step["batch_size"])
    out = []
    for line in found:
        n = (largest_batch(line.needs_gb * 1e9, per_sample, batch, line.memory_gb)
             if per_sample is not None and line.fits is False else None)
        out.append(replace(line, largest_batch=n, accumulate_steps=-(-batch // n) if n else None))
    return tuple(out)


SLOWER_NAMED = 4  # GPUs named in a reason of `slower`, then how many more


def slower(plan: Request, step: dict, default: dict, speed: pd.DataFrame) -> tuple[str, ...]:
    """Where the planned run's precision (bf16, fp16) is predicted slower than PyTorch's default on some GPUs, one
    note that says on which and why, each GPU by the first reason that holds: it has no unit of that precision (run at
    FP32's rate, with autocast's casts on top); the host bounds its step (the casts are launches more a step); its TF32
    is no faster than its FP32 (a GeForce card's: its default runs on FP32 units at the share fitted for them, its
    tensor cores at the share H100s and H200s reached, which no row of its own checked); else the casts' bytes cost
    more than the narrower arithmetic saves. () where it is not slower anywhere."""
    devices = load_devices()
    ours = at_plan("run", pd.DataFrame([default]), replace(plan, precision=Precision.DEFAULT), list(devices))
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

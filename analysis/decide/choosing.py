"""The picks among the options, by one rule (`picks`: rent, buy, your CPU, the fastest, the cheapest), the
cost-versus-time front (`pareto`) and the home boxes' break-even (`break_even`, `monthly`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..prices import HOURS_PER_MONTH
from .grid import HOME_BOX, OWN_CPU, OWN_GPU
from .line import Even, Line


def fitting(options: Sequence[Line]) -> list[Line]:
    """The options that may run it: every CPU, and every GPU but those whose card it does not fit."""
    return [o for o in options if o.fits is not False]


def by_time(option: Line) -> tuple[float, float]:
    """An option's place in an ordering by wall time, the cheaper of equals first."""
    return option.wall_s, option.usd


def by_cost(option: Line) -> tuple[float, float]:
    """An option's place in an ordering by cost, the faster of equals first."""
    return option.usd, option.wall_s


def fastest(options: Iterable[Line]) -> Line | None:
    """The fastest (the cheaper of equals), None where there is none."""
    return min(options, key=by_time, default=None)


def cheapest(options: Iterable[Line]) -> Line | None:
    """The cheapest (the faster of equals), None where there is none."""
    return min(options, key=by_cost, default=None)


RENT_FASTEST, RENT_CHEAPEST, BUY, YOUR_CPU, YOUR_GPU = "rent, fastest", "rent, cheapest", "buy", "your CPU", "your GPU"
FASTEST, CHEAPEST, AS_FAST = "fastest", "cheapest", "rent, cheapest as fast as one GPU"
FIRST = (RENT_FASTEST, RENT_CHEAPEST, BUY, YOUR_CPU, YOUR_GPU)  # the first screen's picks, in its order
BEATS = "beats every rental"  # the pick the first line names where renting does not pay (`beats`)
WITHIN = "cheapest within"  # the pick that meets a deadline: 'cheapest within 2 h'
RENTALS = ("on-demand", "spot")  # the kinds of option rented by the hour


def picks(options: Sequence[Line], deadline_h: float | None = None) -> dict[str, Line | None]:
    """Every pick, by one rule, among the options the run fits (`fitting`): the fastest is the least wall time
    (`by_time`: start-up included, the cheaper of equals first), the cheapest the least cost (`by_cost`: the faster of
    equals first), whatever the kind, of those with a price (a GPU no option offers is said, never picked). Every
    screen and JSON record names these, and only these:
    - the first screen's (FIRST): the GPU to rent, fastest and cheapest where it is another (on demand); the box to
      buy, the cheapest run of the home boxes for sale (its write-off at its utilisation, and electricity; not a record
      of what a box cost once, prices.HomeBox.record), with its break-even against the cheapest on-demand GPU
      (`break_even`: even_n runs a month, even_against, even_against_usd, even_predicted); your CPU (the cheapest);
      your GPU (the fastest) where the rows measured one; None where the options hold none of that kind;
    - BEATS, where one of the picks of yours or the box to buy is faster than every rental and no dearer than the
      cheapest, start-up included (`beats`): the first line then says that renting does not pay;
    - the fastest and the cheapest of all, and the cheapest within `deadline_h` where one is asked (WITHIN);
    - where some rent several GPUs: the cheapest rental as fast as the fastest on one GPU (AS_FAST), and per GPU
      model rented on several counts, its cheapest ('rent, cheapest H100')."""
    ok = [o for o in fitting(options) if not math.isnan(o.usd)]
    rented = [o for o in ok if o.kind == "on-demand" and o.gpus > 0]
    quick, cheap = fastest(rented), cheapest(rented)
    out: dict[str, Line | None] = {RENT_FASTEST: quick}
    if cheap is not None and quick is not None and cheap.option != quick.option:  # both or neither
        out[RENT_CHEAPEST] = cheap
    box = cheapest([o for o in ok if o.for_sale is True])  # home boxes' alone
    even = [e for e in break_even(options) if box is not None and e.box == box.option
            and e.versus == "cheapest on-demand GPU"]
    out[BUY] = box if box is None or not even else dataclasses.replace(
        box, even_n=even[0].sweeps_per_month, even_against=even[0].against, even_against_usd=even[0].against_usd,
        even_predicted=even[0].predicted)
    out[YOUR_CPU] = cheapest([o for o in ok if o.kind == OWN_CPU])
    gpus = [o for o in ok if o.kind == OWN_GPU]
    out |= {YOUR_GPU: fastest(gpus)} if gpus else {}
    won = beats(ok, [line for name in (YOUR_CPU, YOUR_GPU, BUY) if (line := out.get(name)) is not None])
    out |= {BEATS: won} if won is not None else {}
    out |= {FASTEST: fastest(ok), CHEAPEST: cheapest(ok)}
    if deadline_h is not None:
        out[f"{WITHIN} {deadline_h:g} h"] = cheapest([o for o in ok if o.wall_h <= deadline_h])
    one = [o for o in rented if not o.several]
    if one and any(o.several for o in rented):
        quickest = min(o.wall_s for o in one)
        out[AS_FAST] = cheapest(o for o in rented if o.wall_s <= quickest)
    for gpu in dict.fromkeys(o.model for o in rented):
        group = [o for o in rented if o.model == gpu]
        if len({o.gpus for o in group}) > 1:
            out[f"rent, cheapest {gpu}"] = cheapest(group)
    return out


def beats(options: Sequence[Line], mine: Sequence[Line]) -> Line | None:
    """Of `mine` (the picks of yours and the box to buy), the one faster than every rental of `options` and no dearer
    than the cheapest, start-up included: yours before a box, the faster first; None where none is, or nothing is
    rented."""
    rented = [o for o in options if o.kind in RENTALS]
    if not rented:
        return None
    quick, cheap = min(o.wall_s for o in rented), min(o.usd for o in rented)
    return min((o for o in mine if o.wall_s < quick and o.usd <= cheap),
               key=lambda o: (o.kind == HOME_BOX, o.wall_s, o.usd), default=None)


def first(chosen: Mapping[str, Line | None]) -> dict[str, Line | None]:
    """The picks of `chosen` (`picks`') the first screen names, a line each: FIRST's, and the cheapest within a
    deadline."""
    return {name: line for name, line in chosen.items() if name in FIRST or name.startswith(WITHIN)}


def pareto(options: Sequence[Line]) -> list[Line]:
    """The options on the cost-versus-time front, fastest first: no other is both as fast and cheaper, or faster
    and as cheap; one whose card the run does not fit never is (`fitting`)."""
    best, front = math.inf, []
    for o in sorted(fitting(options), key=by_time):
        if o.usd < best:
            front.append(o)
            best = o.usd
    return front


def break_even(options: Sequence[Line]) -> list[Even]:
    """Per home box and class (cheapest on-demand GPU, cheapest spot GPU, own CPU): the sweeps a month
    beyond which the box costs less, and the box's hours of use that takes (options the run fits only)."""
    ok = fitting(options)
    classes = {"cheapest on-demand GPU": lambda o: o.kind == "on-demand" and o.gpus > 0,
               "cheapest spot GPU": lambda o: o.kind == "spot" and o.gpus > 0,
               "own CPU": lambda o: o.kind == OWN_CPU}
    best = {name: cheapest([o for o in ok if is_of(o)]) for name, is_of in classes.items()}
    out = []
    for box in (o for o in ok if o.kind == HOME_BOX):
        for name, other in best.items():
            if other is None:
                continue
            margin = other.usd - box.energy_usd
            n = box.fixed_usd_per_month / margin if margin > 0 else math.inf
            out.append(Even(box.option, other.option, name, other.usd, other.wall_h, box.energy_usd, box.wall_h,
                            box.fixed_usd_per_month, n, n * box.wall_h, box.predicted or other.predicted))
    return out


def monthly(even: Sequence[Even], points: int = 40) -> pd.DataFrame:
    """Monthly cost against sweeps a month for each box and the options it is set against (the
    break-even chart's lines); a line stops where its sweeps no longer fit in a month."""
    lines = []
    for box in dict.fromkeys(e.box for e in even):
        group = [e for e in even if e.box == box]
        first = group[0]
        top = HOURS_PER_MONTH / min(min(e.box_h, e.against_h) for e in group)
        n = np.geomspace(top / 1e4, top, points)
        own = n[n <= HOURS_PER_MONTH / first.box_h]
        lines.append(pd.DataFrame({"box": box, "option": box, "sweeps": own,
                                   "usd_per_month": first.fixed_usd_per_month + own * first.box_usd_energy}))
        for other in group:
            fits = n[n <= HOURS_PER_MONTH / other.against_h]
            lines.append(pd.DataFrame({"box": box, "option": f"{other.against} ({other.versus})", "sweeps": fits,
                                       "usd_per_month": fits * other.against_usd}))
    return pd.concat(lines, ignore_index=True)

"""The picks among the options (`pick`, `three`: rent, buy, your CPU), the cost-versus-time front (`pareto`) and the
home boxes' break-even (`break_even`, `monthly`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

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


def pick(options: Sequence[Line], deadline_h: float | None = None) -> dict[str, Line | None]:
    """The fastest, the cheapest (the faster of equals) and the cheapest within the deadline, among the
    options the run fits (`fitting`)."""
    ok = fitting(options)
    out = {"fastest": fastest(ok), "cheapest": cheapest(ok)}
    if deadline_h is not None:
        out[f"cheapest within {deadline_h:g} h"] = cheapest([o for o in ok if o.wall_h <= deadline_h])
    return out


RENT_FASTEST, RENT_CHEAPEST, BUY, YOUR_CPU, YOUR_GPU = "rent, fastest", "rent, cheapest", "buy", "your CPU", "your GPU"


def three(options: Sequence[Line]) -> dict[str, Line | None]:
    """The first screen's picks, among the options the run fits (`fitting`): the GPU to rent (the fastest
    on-demand instance, and the cheapest where it is another), the box to buy (of the home boxes for sale, not a
    record of what a box cost once (prices.HomeBox.record), the one that pays for itself at the fewest runs a month
    against the cheapest on-demand GPU, `break_even`; its line carries that
    break-even: even_n runs a month, even_against, even_against_usd, even_predicted), your own CPU, and your own
    GPU (the fastest) where the rows measured one; None where the options hold none of that kind."""
    ok = fitting(options)
    rented = [o for o in ok if o.kind == "on-demand" and o.gpus > 0]
    quick, cheap = fastest(rented), cheapest(rented)
    out: dict[str, Line | None] = {RENT_FASTEST: quick}
    if cheap is not None and quick is not None and cheap.option != quick.option:  # both or neither
        out[RENT_CHEAPEST] = cheap
    sale = [o for o in ok if o.for_sale is True]  # home boxes' alone
    named = {o.option: o for o in sale}
    even = [e for e in break_even(options) if e.versus == "cheapest on-demand GPU" and e.box in named]
    if even:
        best = min(even, key=lambda e: e.sweeps_per_month)
        out[BUY] = dataclasses.replace(named[best.box], even_n=best.sweeps_per_month, even_against=best.against,
                                       even_against_usd=best.against_usd, even_predicted=best.predicted)
    else:
        out[BUY] = cheapest(sale)
    out[YOUR_CPU] = cheapest([o for o in ok if o.kind == OWN_CPU])
    gpus = [o for o in ok if o.kind == OWN_GPU]
    return out | ({YOUR_GPU: fastest(gpus)} if gpus else {})


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

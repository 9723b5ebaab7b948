"""The picks among the options (`pick`, `three`: rent, buy, your CPU), the cost-versus-time front (`pareto`) and the
home boxes' break-even (`break_even`, `monthly`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..prices import HOURS_PER_MONTH
from .grid import HOME_BOX, OWN_CPU, OWN_GPU


def fitting(options: pd.DataFrame) -> pd.Series:
    """Whether each option may run it: every CPU, and every GPU but those whose card it does not fit."""
    return ~options["fits"].eq(False) if "fits" in options else pd.Series(True, index=options.index)


def pick(options: pd.DataFrame, deadline_h: float | None = None) -> dict[str, pd.Series | None]:
    """The fastest, the cheapest (the faster of equals) and the cheapest within the deadline, among the
    options the run fits (`fitting`)."""
    options = options[fitting(options)]
    by_time = options.sort_values(["wall_s", "usd"])
    by_cost = options.sort_values(["usd", "wall_s"])
    out = {"fastest": by_time.iloc[0] if len(options) else None, "cheapest": by_cost.iloc[0] if len(options) else None}
    if deadline_h is not None:
        within = by_cost[by_cost["wall_h"] <= deadline_h]
        out[f"cheapest within {deadline_h:g} h"] = within.iloc[0] if len(within) else None
    return out


RENT_FASTEST, RENT_CHEAPEST, BUY, YOUR_CPU, YOUR_GPU = "rent, fastest", "rent, cheapest", "buy", "your CPU", "your GPU"


def three(options: pd.DataFrame) -> dict[str, pd.Series | None]:
    """The first screen's picks, among the options the run fits (`fitting`): the GPU to rent (the fastest
    on-demand instance, and the cheapest where it is another), the box to buy (of the home boxes for sale, not a
    record of what a box cost once (prices.HomeBox.record), the one that pays for itself at the fewest runs a month
    against the cheapest on-demand GPU, `break_even`; its line carries that
    break-even: even_n runs a month, even_against, even_against_usd, even_predicted), your own CPU, and your own
    GPU (the fastest) where the rows measured one; None where the options hold none of that kind."""
    ok = options[fitting(options)]
    rented = ok[(ok["kind"] == "on-demand") & (ok["gpus"] > 0)]
    fastest = rented.sort_values(["wall_s", "usd"]).iloc[0] if len(rented) else None
    cheapest = rented.sort_values(["usd", "wall_s"]).iloc[0] if len(rented) else None
    out = {RENT_FASTEST: fastest}
    if cheapest is not None and fastest is not None and cheapest["option"] != fastest["option"]:  # both or neither
        out[RENT_CHEAPEST] = cheapest
    sale = ok.loc[ok["for_sale"].eq(True), "option"] if "for_sale" in ok else ok["option"].iloc[:0]  # home boxes' alone
    even = break_even(options)
    even = even[(even["versus"] == "cheapest on-demand GPU") & even["box"].isin(sale)] if len(even) else even
    if len(even):
        best = even.sort_values("sweeps_per_month").iloc[0]
        even = {"even_n": best["sweeps_per_month"], "even_against": best["against"],
                "even_against_usd": best["against_usd"], "even_predicted": best["predicted"]}
        out[BUY] = pd.concat([ok[ok["option"] == best["box"]].iloc[0], pd.Series(even)])
    else:
        boxes = ok[ok["option"].isin(sale)]
        out[BUY] = boxes.sort_values(["usd", "wall_s"]).iloc[0] if len(boxes) else None
    cpus, gpus = ok[ok["kind"] == OWN_CPU], ok[ok["kind"] == OWN_GPU]
    out[YOUR_CPU] = cpus.sort_values(["usd", "wall_s"]).iloc[0] if len(cpus) else None
    return out | ({YOUR_GPU: gpus.sort_values(["wall_s", "usd"]).iloc[0]} if len(gpus) else {})


def pareto(options: pd.DataFrame) -> pd.Series:
    """Whether each option is on the cost-versus-time front: no other is both as fast and cheaper, or faster
    and as cheap; one whose card the run does not fit never is (`fitting`)."""
    ordered = options[fitting(options)].sort_values(["wall_s", "usd"])
    best, front = math.inf, pd.Series(False, index=options.index)
    for i, usd in ordered["usd"].items():
        if usd < best:
            front[i], best = True, usd
    return front


def break_even(options: pd.DataFrame) -> pd.DataFrame:
    """Per home box and class (cheapest on-demand GPU, cheapest spot GPU, own CPU): the sweeps a month
    beyond which the box costs less, and the box's hours of use that takes (options the run fits only)."""
    options = options[fitting(options)]
    classes = {"cheapest on-demand GPU": (options["kind"] == "on-demand") & (options["gpus"] > 0),
               "cheapest spot GPU": (options["kind"] == "spot") & (options["gpus"] > 0),
               "own CPU": options["kind"] == OWN_CPU}
    best = {name: options[mask].sort_values(["usd", "wall_s"]).iloc[0] for name, mask in classes.items() if mask.any()}
    lines = []
    for box in options[options["kind"] == HOME_BOX].itertuples():
        for name, other in best.items():
            margin = other["usd"] - box.energy_usd
            n = box.fixed_usd_per_month / margin if margin > 0 else math.inf
            lines.append({"box": box.option, "against": other["option"], "versus": name, "against_usd": other["usd"],
                          "against_h": other["wall_h"], "box_usd_energy": box.energy_usd, "box_h": box.wall_h,
                          "fixed_usd_per_month": box.fixed_usd_per_month, "sweeps_per_month": n,
                          "box_hours_per_month": n * box.wall_h, "predicted": box.predicted or other["predicted"]})
    return pd.DataFrame(lines)


def monthly(even: pd.DataFrame, points: int = 40) -> pd.DataFrame:
    """Monthly cost against sweeps a month for each box and the options it is set against (the
    break-even chart's lines); a line stops where its sweeps no longer fit in a month."""
    lines = []
    for box, group in even.groupby("box", sort=False):
        first = group.iloc[0]
        top = HOURS_PER_MONTH / group[["box_h", "against_h"]].min().min()
        n = np.geomspace(top / 1e4, top, points)
        own = n[n <= HOURS_PER_MONTH / first["box_h"]]
        lines.append(pd.DataFrame({"box": box, "option": box, "sweeps": own,
                                   "usd_per_month": first["fixed_usd_per_month"] + own * first["box_usd_energy"]}))
        for other in group.itertuples():
            fits = n[n <= HOURS_PER_MONTH / other.against_h]
            lines.append(pd.DataFrame({"box": box, "option": f"{other.against} ({other.versus})", "sweeps": fits,
                                       "usd_per_month": fits * other.against_usd}))
    return pd.concat(lines, ignore_index=True)

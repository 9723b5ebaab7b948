"""What a row costs: every price that applies to a measured row, and the prices' age and sources in words.

    python -m crossover.analysis cost results/scaling            # cost per epoch, trial and million samples per row
    python -m crossover.analysis decide results/scaling --home-box analysis/home_boxes/rtx4090.yaml   # the sweep

The prices and home boxes are read and checked by analysis/prices.py (docs/cost.md explains them). A
row measured a price's GPU model where its device_name holds the model as a word, case-insensitive
(`measures`).

For every measured row and every price that applies to it (`table`):

    usd_per_epoch            = usd_per_h x median epoch time / 3600
    usd_per_trial            = usd_per_h x total_s / 3600           (the whole trial, set-up included)
    usd_per_million_samples  = usd_per_h / (samples_per_s x 3600) x 1e6

Which price applies to which row is an assumption, and each line says which it made:
    GPU rows   every instance of the row's GPU model; a trial using k of an instance's n GPUs pays k/n
               of its price, as if the other GPUs ran other trials (analysis/decide/ prices a whole
               sweep on a whole instance instead);
    CPU rows   per provider, the smallest CPU instance with at least the trial's thread count,
               assuming its cores are as fast as the measured CPU (they may not be).

A price older than STALE_DAYS is flagged with the source to re-read (`stale`, `stale_boxes`, `dated`).

Reads rows only (pandas); never imports torch or ray.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .load import sizes_label
from .prices import STALE_DAYS, HomeBox, Option, day


def measures(device_name, gpu: str | None, pattern: str | None = None) -> bool:
    """Whether a row's device_name is this GPU model: `pattern` (a regex) or the model as a word."""
    if not gpu or not isinstance(device_name, str):
        return False
    return re.search(pattern or rf"\b{re.escape(gpu)}\b", device_name, re.IGNORECASE) is not None


def stale(options: list[Option], today: dt.date | None = None) -> list[str]:
    """A line for every price older than STALE_DAYS: the figure and where to re-read it."""
    today = today or dt.date.today()
    return [f"{o.name} {kind}: ${p.usd_per_h:g}/h is of {p.date}, over 12 months before {today}: re-read {p.source}"
            for o in options for kind, p in o.prices() if p.is_stale(today)]


def stale_boxes(boxes: Sequence[HomeBox], today: dt.date | None = None) -> list[str]:
    """A line for every home box whose purchase price is older than STALE_DAYS (a record is not)."""
    today = today or dt.date.today()
    return [f"{b.name} purchase: ${b.purchase_usd:g} is of {b.purchase_date}, over 12 months before {today}: "
            f"re-read {b.purchase_source}" for b in boxes if b.is_stale(today)]


def dated(options: list[Option], boxes: Sequence[HomeBox] = (), today: dt.date | None = None) -> list[str]:
    """The prices' age in lines: how many are over 12 months old, of how many, then each one with its source
    (`stale`, `stale_boxes`), then each home box whose price is a record of a past purchase (never counted)."""
    today = today or dt.date.today()
    old = stale(options, today) + stale_boxes(boxes, today)
    rented = sum(len(o.prices()) for o in options)
    market = [b for b in boxes if not b.record]
    lines = [f"prices over 12 months old: {len(old)} of {rented + len(market)} ({rented} rental, {len(market)} home-box "
             f"purchase{'' if len(market) == 1 else 's'}) on {today}"]
    lines += [f"stale price: {line}" for line in old]
    lines += [f"a record, not a price: {b.name}'s ${b.purchase_usd:g} is what was paid in {b.purchase_date}, never re-read"
              for b in boxes if b.record]
    return lines


def secondary(options: list[Option]) -> list[str]:
    """A line for every price read only on a third-party page (`via`), not on the provider's own."""
    return [f"{o.name} {kind}: ${p.usd_per_h:g}/h of {p.date} was read on {p.via}, not on {p.source}: a secondary source only"
            for o in options for kind, p in o.prices() if p.via]


def rates(row, options: list[Option]) -> list[dict]:
    """Every (option, pricing, USD per hour of this trial, assumption) that applies to one row."""
    gpus_used = row["gpus_requested"] or 0
    if gpus_used > 0:
        out = []
        for o in options:
            if o.gpus >= gpus_used and measures(row["device_name"], o.gpu):
                share = gpus_used / o.gpus
                out += _priced(o, share, f"the measured {o.gpu}" + (
                    f"; {gpus_used:g} of {o.gpus} GPUs: {share:.3g} of the instance price, if the others run "
                    "other trials" if share < 1 else ""))
        return out
    smallest: dict[str, Option] = {}  # provider -> its smallest CPU instance
    for o in sorted((o for o in options if o.gpus == 0 and o.vcpus >= row["torch_threads"]), key=lambda o: o.vcpus):
        smallest.setdefault(o.provider, o)
    return [line for o in smallest.values() for line in _priced(
        o, 1.0, f"{o.vcpus} vCPUs for a {row['torch_threads']:.0f}-thread trial, assumed as fast as the measured "
                f"{row['device_name']}")]


def _priced(o: Option, share: float, why: str) -> list[dict]:
    return [{"option": o.name, "pricing": kind, "usd_per_h": p.usd_per_h * share, "price_date": p.date, "assumption": why}
            for kind, p in o.prices()]


def table(rows: pd.DataFrame, options: list[Option]) -> pd.DataFrame:
    """Cost per epoch, per trial and per million samples: one line per ok row and price that applies."""
    ok = rows[rows["status"] == "ok"]
    measured = ["config_hash", "workload", "config", "arm", "device_name", "epoch_s_median", "total_s", "samples_per_s"]
    lines = [{**{k: r[k] for k in measured}, **rate}
             for _, r in ok.assign(config=sizes_label(ok)).iterrows() for rate in rates(r, options)]
    out = pd.DataFrame(lines, columns=measured + ["option", "pricing", "usd_per_h", "price_date", "assumption"])
    return out.assign(
        option=out["option"] + np.where(out["pricing"] == "spot", " (spot)", ""),
        usd_per_epoch=out["usd_per_h"] * out["epoch_s_median"] / 3600,
        usd_per_trial=out["usd_per_h"] * out["total_s"] / 3600,
        usd_per_million_samples=out["usd_per_h"] / (out["samples_per_s"] * 3600) * 1e6,
    )


def render(costs: pd.DataFrame, shown: pd.DataFrame, options: list[Option], today: dt.date | None = None,
           boxes: Sequence[HomeBox] = ()) -> str:
    """The cost table for one configuration per workload (`shown`), its assumptions and the prices' age:
    how many prices (the options' and the home boxes' purchases) are over STALE_DAYS old before `today`,
    and each one named; an option so priced says so where it is listed ('AWS g4dn.xlarge (stale
    price of 2025-06)'), and its line under the table names the source to re-read."""
    today = today or dt.date.today()
    keep = costs[costs["config_hash"].isin(shown["config_hash"])]
    old = keep["price_date"].map(lambda d: (today - day(d)).days > STALE_DAYS)
    keep = keep.assign(option=keep["option"] + np.where(old, " (stale price of " + keep["price_date"].astype(str) + ")", ""))
    parts = []
    for (workload, config), group in keep.groupby(["workload", "config"], sort=True):
        parts.append(f"== {workload} ({config}) ==")
        cols = group[["arm", "option", "usd_per_h", "usd_per_epoch", "usd_per_trial", "usd_per_million_samples"]]
        parts.append(cols.sort_values("usd_per_million_samples").to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    if costs.empty:
        models = sorted({o.gpu for o in options if o.gpu})
        parts.append(f"no price applies to any measured row: the price file's GPU models are {models}, and CPU "
                     "rows need a CPU instance with at least their thread count")
    parts += [f"  assumption: {text}" for text in sorted(set(costs["assumption"]))]
    parts += [f"  {line}" for line in dated(options, boxes, today)]
    parts += [f"  secondary source: {line}" for line in secondary(options)]
    parts.append("  the whole sweep's time and cost on each option, and the home boxes: crossover decide")
    return "\n".join(parts)

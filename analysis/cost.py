"""What training costs: measured throughput priced on rented instances and on a home box.

    python -m analysis cost results/scaling --home-box analysis/home_boxes/seed002_gtx960.yaml

Prices come from analysis/prices.yaml (every price with its date and source), the home box from a
small YAML file (analysis/home_boxes/seed002_gtx960.yaml is the worked example; docs/cost.md explains
it). For every measured row and every price that applies to it:

    usd_per_epoch            = usd_per_h x median epoch time / 3600
    usd_per_trial            = usd_per_h x total_s / 3600           (the whole trial, set-up included)
    usd_per_million_samples  = usd_per_h / (samples_per_s x 3600) x 1e6

Which price applies to which row is an assumption, and each line says which it made:
    GPU rows   every instance whose `matches` finds the row's device_name (an H100 row: p5, a3,
               Lambda, RunPod); a trial using k of an instance's n GPUs pays k/n of its price, as if
               the other GPUs were kept busy by other trials;
    CPU rows   per provider, the smallest CPU instance with at least the trial's thread count,
               assuming its cores are as fast as the measured CPU (they may not be);
    home box   rows whose device_name the box's `matches` finds, at its hourly cost at its utilisation.

Break-even: the home box costs purchase / lifetime every month plus electricity per hour of use; a
rented option costs its price per hour of the same work. The hours of use per month beyond which the
box is cheaper are  fixed_per_month / (rented_usd_per_h x speed - energy_usd_per_h), where speed is
the box's throughput over the rented device's, measured where both were swept (median over the
configurations both measured), else 1 and said so.

Reads rows only (pandas, pyyaml); never imports torch or ray.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis.load import sizes_label

PRICES = Path(__file__).with_name("prices.yaml")
HOURS_PER_MONTH = 730  # 365 x 24 / 12


@dataclass(frozen=True)
class Price:
    usd_per_h: float  # USD per instance-hour
    date: str  # when the price applied: YYYY-MM or YYYY-MM-DD
    source: str  # the provider's page
    via: str = ""  # the third-party page it was read on, if not the provider's
    note: str = ""


@dataclass(frozen=True)
class Option:
    name: str
    provider: str
    region: str
    gpus: int  # 0 for a CPU instance
    vcpus: int
    matches: str | None  # regex on a row's device_name; None for CPU instances
    on_demand: Price
    spot: Price | None  # None where the provider sells no spot/interruptible capacity

    def prices(self) -> list[tuple[str, Price]]:
        return [("on-demand", self.on_demand)] + ([("spot", self.spot)] if self.spot else [])


@dataclass(frozen=True)
class HomeBox:
    name: str
    purchase_usd: float  # what was paid for the parts
    lifetime_years: float  # written off over this many years
    power_w: float  # drawn at the wall while training, W
    utilisation: float  # fraction of the month the box trains, in (0, 1]
    electricity_usd_per_kwh: float
    matches: str | None = None  # regex on device_name: rows measured on this box
    source: str = ""

    @property
    def fixed_usd_per_month(self) -> float:
        return self.purchase_usd / (self.lifetime_years * 12)

    @property
    def energy_usd_per_h(self) -> float:
        return self.power_w / 1000 * self.electricity_usd_per_kwh

    @property
    def usd_per_h(self) -> float:
        """Cost per hour of use at the box's utilisation: write-off spread over the hours it trains, plus power."""
        return self.fixed_usd_per_month / (self.utilisation * HOURS_PER_MONTH) + self.energy_usd_per_h


def _required(cls) -> list[str]:
    return [f.name for f in fields(cls) if f.default is MISSING]


def _check(entry, cls, where: str, fix: str) -> dict:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a mapping with {_required(cls)}, got {entry!r}")
    missing = [f for f in _required(cls) if f not in entry]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}: {fix}")
    unknown = sorted(set(entry) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {unknown}; allowed: {[f.name for f in fields(cls)]}")
    return entry


def load_prices(path: str | Path = PRICES) -> list[Option]:
    """The price table; every option and price checked for its fields."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"price file {path} does not exist; the project's is {PRICES}")
    options = (yaml.safe_load(path.read_text()) or {}).get("options")
    if not options:
        raise ValueError(f"{path} has no 'options:' list; see {PRICES} for the format")
    out = []
    for i, entry in enumerate(options):
        name = entry.get("name", f"#{i + 1}") if isinstance(entry, dict) else f"#{i + 1}"
        where = f"{path}: option {name!r}"
        entry = _check(entry, Option, where, "every option needs them (see the comment at the top of the file)")
        priced = {kind: None if entry[kind] is None else Price(**_check(
            entry[kind], Price, f"{where}, {kind}", "every price needs usd_per_h, date and source"))
            for kind in ("on_demand", "spot")}
        if priced["on_demand"] is None:
            raise ValueError(f"{where}: on_demand is null; every option needs an on-demand price")
        out.append(Option(**{**entry, **priced}))
    return out


def load_home_box(path: str | Path) -> HomeBox:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"home box file {path} does not exist; copy analysis/home_boxes/seed002_gtx960.yaml and edit it")
    box = HomeBox(**_check(yaml.safe_load(path.read_text()), HomeBox, f"home box {path}",
                           "describe the box as analysis/home_boxes/seed002_gtx960.yaml does"))
    if not 0 < box.utilisation <= 1:
        raise ValueError(f"home box {path}: utilisation is the fraction of the month it trains, in (0, 1], got {box.utilisation}")
    return box


def _match(pattern: str | None, name) -> bool:
    return bool(pattern) and isinstance(name, str) and re.search(pattern, name, re.IGNORECASE) is not None


def rates(row, options: list[Option], box: HomeBox | None) -> list[dict]:
    """Every (option, pricing, USD per hour of this trial, assumption) that applies to one row."""
    out = []
    if box and _match(box.matches, row["device_name"]):
        out.append({"option": box.name, "pricing": "owned", "usd_per_h": box.usd_per_h,
                    "assumption": f"measured on this box; {box.utilisation:.0%} utilisation"})
    gpus_used = row["gpus_requested"] or 0
    if gpus_used > 0:
        for o in options:
            if o.gpus >= gpus_used and _match(o.matches, row["device_name"]):
                share = gpus_used / o.gpus
                out += _priced(o, share, "the measured GPU model" + (
                    f"; {gpus_used:g} of {o.gpus} GPUs: {share:.3g} of the instance price" if share < 1 else ""))
        return out
    smallest = {}
    for o in sorted((o for o in options if o.gpus == 0 and o.vcpus >= row["torch_threads"]), key=lambda o: o.vcpus):
        smallest.setdefault(o.provider, o)
    for o in smallest.values():
        out += _priced(o, 1.0, f"{o.vcpus} vCPUs for a {row['torch_threads']:.0f}-thread trial, "
                               f"assumed as fast as the measured {row['device_name']}")
    return out


def _priced(o: Option, share: float, why: str) -> list[dict]:
    return [{"option": o.name, "pricing": kind, "usd_per_h": p.usd_per_h * share, "assumption": why} for kind, p in o.prices()]


def table(rows: pd.DataFrame, options: list[Option], box: HomeBox | None = None) -> pd.DataFrame:
    """Cost per epoch, per trial and per million samples: one line per ok row and price that applies."""
    ok = rows[rows["status"] == "ok"]
    measured = ["config_hash", "workload", "config", "arm", "device_name", "epoch_s_median", "total_s", "samples_per_s"]
    lines = [{**{k: r[k] for k in measured}, **rate}
             for _, r in ok.assign(config=sizes_label(ok)).iterrows() for rate in rates(r, options, box)]
    out = pd.DataFrame(lines, columns=measured + ["option", "pricing", "usd_per_h", "assumption"])
    return out.assign(
        option=out["option"] + np.where(out["pricing"] == "spot", " (spot)", ""),
        usd_per_epoch=out["usd_per_h"] * out["epoch_s_median"] / 3600,
        usd_per_trial=out["usd_per_h"] * out["total_s"] / 3600,
        usd_per_million_samples=out["usd_per_h"] / (out["samples_per_s"] * 3600) * 1e6,
    )


def break_even(box: HomeBox, options: list[Option], costs: pd.DataFrame) -> pd.DataFrame:
    """Per rented option and pricing: hours of use per month beyond which the home box is cheaper."""
    per_sample = costs.pivot_table(index=["workload", "config"], columns="option", values="samples_per_s", aggfunc="median")
    lines = []
    for o in options:
        for kind, p in o.prices():
            label = o.name + (" (spot)" if kind == "spot" else "")
            per_gpu = p.usd_per_h / max(o.gpus, 1)
            both = per_sample[[box.name, label]].dropna() if {box.name, label} <= set(per_sample.columns) else pd.DataFrame()
            speed = float((both[box.name] / both[label]).median()) if len(both) else 1.0
            basis = (f"box/rented speed {speed:.3g}, median of {len(both)} configurations measured on both" if len(both)
                     else "equal speed assumed: no configuration measured on both (sweep on the box to measure it)")
            margin = per_gpu * speed - box.energy_usd_per_h
            lines.append({"option": label, "usd_per_h": per_gpu, "speed": speed, "basis": basis,
                          "break_even_h_per_month": box.fixed_usd_per_month / margin if margin > 0 else np.inf})
    return pd.DataFrame(lines)


def monthly(box: HomeBox, even: pd.DataFrame, hours=np.geomspace(1, HOURS_PER_MONTH, 60)) -> pd.DataFrame:
    """Monthly cost at each hours-of-use for the box and every rented option: the break-even chart's lines."""
    home = pd.DataFrame({"option": box.name, "kind": "home box", "hours": hours,
                         "usd_per_month": box.fixed_usd_per_month + box.energy_usd_per_h * hours})
    rented = [pd.DataFrame({"option": r.option, "kind": "rented", "hours": hours, "usd_per_month": r.usd_per_h * r.speed * hours})
              for r in even.itertuples()]
    return pd.concat([home, *rented], ignore_index=True)


def render(costs: pd.DataFrame, box: HomeBox | None, even: pd.DataFrame | None, shown: pd.DataFrame) -> str:
    """The cost table for one configuration per workload (`shown`), then the box and its break-even."""
    keep = costs[costs["config_hash"].isin(shown["config_hash"])]
    parts = []
    for (workload, config), group in keep.groupby(["workload", "config"], sort=True):
        parts.append(f"== {workload} ({config}) ==")
        cols = group[["arm", "option", "usd_per_h", "usd_per_epoch", "usd_per_trial", "usd_per_million_samples"]]
        parts.append(cols.sort_values("usd_per_million_samples").to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    if costs.empty:
        parts.append("no price applies to any measured row: see the matches fields of the price file")
    for text in sorted(set(costs["assumption"])):
        parts.append(f"  assumption: {text}")
    if box:
        parts.append(f"== home box: {box.name} ==")
        parts.append(f"  ${box.purchase_usd:,.0f} over {box.lifetime_years:g} years = ${box.fixed_usd_per_month:.2f}/month; "
                     f"{box.power_w:.0f} W at ${box.electricity_usd_per_kwh}/kWh = ${box.energy_usd_per_h:.3f}/h of use; "
                     f"at {box.utilisation:.0%} utilisation ${box.usd_per_h:.3f}/h")
        parts.append("  break-even: hours of use per month beyond which the box is cheaper than renting "
                     "(usd_per_h: per GPU on multi-GPU instances)")
        shown_even = even.assign(break_even_h_per_month=even["break_even_h_per_month"].map(
            lambda h: "never" if np.isinf(h) else f"{h:,.1f}"))
        parts.append(shown_even[["option", "usd_per_h", "speed", "break_even_h_per_month"]].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        parts += [f"  speed: {basis}" for basis in sorted(set(even["basis"]))]
    return "\n".join(parts)

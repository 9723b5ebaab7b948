"""Every option's wall time and cost for the sweep or the run (`table`): rented instances billed as they bill, your
own machine at its electricity, home boxes at their write-off; `makespan` over G GPUs.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math

import numpy as np
import pandas as pd

from .. import model
from ..load import eager_ok, is_reference
from ..prices import HOURS_PER_MONTH, POWER, Billing, Electricity, HomeBox, Option
from .grid import BUSY_MARKS, HERE, HOME_BOX, OWN_CPU, OWN_GPU
from .speeds import HOST


def makespan(trial_s: np.ndarray, share: np.ndarray, gpus: int) -> float:
    """Trials (each holding `share` of a GPU for trial_s) on `gpus` GPUs, longest first, each to the GPU
    that frees first; never less than the longest trial. gpus 0: a CPU, one trial after another."""
    if gpus == 0:
        return float(trial_s.sum())
    free = [0.0] * gpus
    for held in np.sort(trial_s * share)[::-1]:
        heapq.heappush(free, heapq.heappop(free) + held)
    return max(max(free), float(trial_s.max()))


ENDS = (("", "run_s"), ("_lo", "run_lo"), ("_hi", "run_hi"))  # a figure, and either end of its interval


def _run(grid: pd.DataFrame, speed: pd.DataFrame, gpus: int) -> dict | None:
    """The sweep on one speed source: makespan and its interval (the makespan of the trials' low and
    high times), packing, whether and what share of its GPU-time is predicted, where and when it was
    measured; None where a configuration lacks a speed."""
    at = grid[["config_key", "trials"]].merge(speed, on="config_key", how="left")
    if at["trial_s"].isna().any():
        return None
    share = np.repeat(1 / at["k"].to_numpy(), at["trials"])
    spans = {column: makespan(np.repeat(at[trial].to_numpy(float), at["trials"]), share, gpus)
             for (_, column), trial in zip(ENDS, ("trial_s", "trial_lo", "trial_hi"))}
    held = at["trial_s"] * at["trials"] / at["k"]  # GPU-seconds
    guessed = at["modelled"] if "modelled" in at else at["predicted"]  # a planned run's extrapolation is said apart
    hosts = sorted({h for named in at["hosts"].dropna() for h in named.split(", ") if h})
    run = spans | {"packed": int(at["k"].max()), "predicted": bool(at["predicted"].any()),
                   "predicted_share": float(held[guessed.astype(bool)].sum() / held.sum()) if held.sum() > 0 else
                   float(guessed.any()), "hosts": ", ".join(hosts), "measured_at": pd.to_datetime(at["date"], utc=True).max(),
                   "power_w": float(at["power_w"].mean()) if at["power_w"].notna().all() else math.nan,
                   "gpu_s": float(held.sum()), "busy": "".join(f" {m}" for m in BUSY_MARKS if m in "".join(at["busy"].fillna("")))}
    if "reach" in at:  # a planned run: one configuration, whose figures are the run's
        worst = at.sort_values(["factor", "spread"], na_position="first").iloc[-1]
        run |= {"reach": worst["reach"], "factor": float(worst["factor"]), "modelled": bool(at["modelled"].any()),
                "unreliable": bool(worst["unreliable"]),
                "extrapolated": bool(at["extrapolated"].any()), "epoch_s": float(worst["epoch_s"]),
                "epoch_lo": float(worst["epoch_lo"]), "epoch_hi": float(worst["epoch_hi"]),
                **{c: worst[c] for c in HOST if c in at}}
    if "needs_bytes" in at and at["needs_bytes"].notna().any():  # the sweep's largest configuration decides
        largest = at.loc[at["needs_bytes"].idxmax()]
        run |= {"needs_bytes": float(largest["needs_bytes"]), "needs_how": largest["needs_how"]}
    elif "needs_how" in at and at["needs_how"].notna().any():
        run |= {"needs_bytes": math.nan, "needs_how": at["needs_how"].dropna().iloc[0]}
    return run


def _figures(run: dict, priced) -> dict:
    """wall_s and usd of a run, and either end of their interval: priced(run seconds) -> (wall_s, usd)."""
    out: dict[str, float] = {}
    for end, column in ENDS:
        wall, usd = priced(run[column])
        out |= {f"wall{end}_s": wall, f"wall{end}_h": wall / 3600, f"usd{end}": usd}
    return out


def own_gpus(rows: pd.DataFrame) -> dict[str, int]:
    """The GPUs of your machine: per GPU model of your ok GPU rows (not under results/reference/), its
    key of analysis/devices.yaml (else its device_name), and how many of them the rows ran on (gpu_ids)."""
    ok = eager_ok(rows)
    if ok.empty or "results_dir" not in ok:
        return {}
    mine = ok[(ok["whole_gpu"] | ok["packed"]) & ~ok["results_dir"].map(is_reference)]
    devices = model.load_devices()
    out: dict[str, int] = {}
    for name, group in mine.groupby("device_name"):
        key = model.device_key(name, devices) or name
        used = {(h, i) for h, ids in zip(group["hostname"], group["gpu_ids"]) if ids is not None for i in ids} \
            if "gpu_ids" in group else set()
        out[key] = max(out.get(key, 1), len(used))
    return out


def _yours(what: str, kind: str, model_name: str, gpus: int, run: dict, basis: str, watts: float,
           power: Electricity) -> dict:
    """Your own machine: already owned, so its electricity alone: the power its rows measured (RAPL for a
    CPU, NVML for a GPU: run['power_w'], per GPU), else the nominal watts, x the wall time, x every GPU used."""
    measured = not math.isnan(run["power_w"])
    per_device = run["power_w"] if measured else watts
    said = (f"{'NVML' if gpus else 'RAPL'} {per_device:.0f} W" if measured else
            f"nominal {per_device:.0f} W ({'--gpu-watts' if gpus else '--cpu-watts'})")
    usd_per_s = per_device * max(gpus, 1) / 1000 * power.usd_per_kwh / 3600
    return {"option": f"your {what} ({HERE})", "kind": kind, "model": model_name, "gpus": gpus,
            **run, **_figures(run, lambda s: (s, usd_per_s * s)), "electricity": said,
            "basis": f"already owned: {basis}; electricity at {said}{f' a GPU x {gpus}' if gpus > 1 else ''}, "
                     f"${power.usd_per_kwh:g}/kWh"}


def card_fits(line: dict, memory_gb: float | None) -> dict:
    """Whether the run fits a GPU option's card: what it needs (`memory_needed`) against the card's memory."""
    needs = line.get("needs_bytes", math.nan)
    if memory_gb is None or pd.isna(needs):
        return {"memory_gb": memory_gb, "needs_gb": needs / 1e9, "fits": None}
    return {"memory_gb": memory_gb, "needs_gb": needs / 1e9, "fits": bool(needs <= memory_gb * 1e9)}


def table(grid: pd.DataFrame, speed: pd.DataFrame, options: list[Option], billing: dict[str, Billing],
          boxes: list[HomeBox], own: dict[str, int] | None = None, power: Electricity = POWER,
          today: dt.date | None = None) -> pd.DataFrame:
    """Every option's wall time and cost for the sweep, each with its interval (the same figure where
    measured): your CPU and your GPUs (`own`: own_gpus; their electricity, `power`), the rented instances,
    the home boxes; options without a speed for every configuration left out. A GPU option says whether
    the run fits its card (fits; null where its memory or the run's need is not known), and whether its price is
    over 12 months old on `today` (price_stale; None: the date it runs)."""
    today = today or dt.date.today()
    lines = []
    cards = {k: d.memory_gb for k, d in model.load_devices().items()}
    cpus = speed[speed["threads"].notna()].drop_duplicates("source")
    for cpu in cpus.itertuples():
        run = _run(grid, speed[speed["source"] == cpu.source], 0)
        if run and cpu.own:
            lines.append(_yours(f"CPU, {cpu.threads:.0f} threads", OWN_CPU, cpu.cpu, 0, run, cpu.source, power.cpu_w, power))
        for o in _smallest_cpus(options, int(cpu.threads)):
            lines += _rented(o, billing[o.provider], run, f"{o.vcpus} vCPUs as fast as the measured {cpu.source}", today) if run else []
    for gpu, count in (own or {}).items():
        run = _run(grid, speed[speed["source"] == gpu], count)
        if run:
            lines.append(_yours(gpu if count == 1 else f"{count} x {gpu}", OWN_GPU, gpu, count, run,
                                f"{count} x {gpu} on {run['hosts'] or 'your machine'}", power.gpu_w, power)
                         | card_fits(run, cards.get(gpu)))
    for o in options:
        if not o.gpu:
            continue
        run = _run(grid, speed[speed["source"] == o.gpu], o.gpus)
        if run:
            lines += [line | card_fits(run, cards.get(o.gpu))
                      for line in _rented(o, billing[o.provider], run, f"{o.gpus} x {o.gpu}, rented whole", today)]
    for box in boxes:
        run = _run(grid, speed[speed["source"] == box.gpu], 1)
        if run:
            lines.append(_home(box, run, today) | card_fits(run, box.memory_gb or cards.get(box.gpu)))
    out = pd.DataFrame(lines)
    if out.empty:
        return out
    if "fits" not in out:
        out = out.assign(fits=None)
    return out.sort_values(["usd", "wall_s"], ignore_index=True)


def _smallest_cpus(options: list[Option], threads: int) -> list[Option]:
    """Per provider, the smallest CPU instance with at least `threads` vCPUs."""
    smallest: dict[str, Option] = {}  # provider -> its smallest CPU instance
    for o in sorted((o for o in options if o.gpus == 0 and o.vcpus >= threads), key=lambda o: o.vcpus):
        smallest.setdefault(o.provider, o)
    return list(smallest.values())


def _rented(o: Option, bill: Billing, run: dict, basis: str, today: dt.date) -> list[dict]:
    return [{"option": o.name + (" (spot)" if kind == "spot" else ""), "kind": kind, "model": o.gpu or "CPU",
             "gpus": o.gpus, **run, **_figures(run, lambda s, p=p: (bill.startup_s + s, p.usd_per_h * bill.charged_s(bill.startup_s + s) / 3600)),
             "startup_s": bill.startup_s,  # in wall_s, and billed: said apart where the run is shown
             "basis": f"{basis}; {bill.startup_s:.0f} s start-up; billed per {bill.step_s:g} s, at least {bill.minimum_s:g} s"
                      + (f"; stale price of {p.date}" if p.is_stale(today) else ""),
             "price_date": p.date, "price_source": p.source, "price_stale": p.is_stale(today)}
            for kind, p in o.prices()]


def _home(box: HomeBox, run: dict, today: dt.date) -> dict:
    measured = not math.isnan(run["power_w"])
    power = run["power_w"] if measured else box.power_w
    per_h = box.fixed_usd_per_month / (box.utilisation * HOURS_PER_MONTH) + power / 1000 * box.electricity_usd_per_kwh
    energy = power / 1000 * run["run_s"] / 3600 * box.electricity_usd_per_kwh
    what = (f"measured GPU power {power:.0f} W (gpu_energy_j)" if measured else f"nominal power {power:.0f} W (power_w)")
    return {"option": box.name, "kind": HOME_BOX, "model": box.gpu, "gpus": 1, **run,
            **_figures(run, lambda s: (s, per_h * s / 3600)), "energy_usd": energy,
            "fixed_usd_per_month": box.fixed_usd_per_month, "for_sale": not box.record, "price_date": box.purchase_date,
            "price_source": box.purchase_source, "price_stale": box.is_stale(today),
            "purchase_usd": box.purchase_usd, "lifetime_years": box.lifetime_years, "utilisation": box.utilisation,
            "basis": f"write-off at {box.utilisation:.0%} utilisation + electricity at {what}"}

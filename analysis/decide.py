"""The decision: what a whole sweep costs and how long it takes on each option, measured or predicted.

    python -m analysis decide results/scaling                      # the measured grid as the sweep
    python -m analysis decide results/scaling --trials 1000 --workload peaks --deadline 2
    python -m analysis decide results/scaling --home-box analysis/home_boxes/rtx4090.yaml

The sweep is the unit: a list of configurations, each run some number of trials (`sweep`): by default
the measured grid (every configuration of the rows, as many trials as it has seeds), or N trials of a
workload spread evenly over its measured sizes. The options (`table`): every instance of
analysis/prices.yaml on demand and on spot, the user's own CPU (the CPU rows not under
results/reference/), every home box. For each, the sweep's wall time and cost:

    trial_s     setup_s + h2d_s + warmup_s + eval_s + (epochs - warmup_epochs) x epoch_s_median: the
                median over a configuration's measured rows of that GPU model (or CPU), at the sweep's
                epochs. Where rows measured K trials packed on one GPU (device cuda/K), the K that gives
                the most trials per GPU-second is used: a trial then holds 1/K of a GPU for its trial_s.
                A GPU no row measured takes analysis/model.py's prediction of epoch_s_median, its fixed
                costs from the measured GPUs' rows of the configuration, and every figure that rests on
                a prediction is marked predicted ('~'); a measured row always wins.
    makespan    on G GPUs: the trials, longest first, each to the GPU that frees first (by their GPU
                share), and never less than the longest trial; on a CPU: one trial after another, each
                with all the threads it was measured with.
    cloud       wall = provider's startup_s + makespan; cost = price x the billed time: wall rounded up
                to the provider's billing step, at least its minimum. One instance, rented whole.
    own CPU     wall = makespan; cost $0: the machine is already owned (its electricity not counted).
    home box    wall = makespan; cost = write-off (purchase over lifetime, spread over the hours the
                box trains at its utilisation) + electricity: measured GPU energy where the rows of its
                GPU have gpu_energy_j (their mean power over the timed epochs, train_s), else its nominal power_w.

Break-even (`break_even`): a home box costs its write-off every month, whether it trains or not, plus
the electricity of each sweep; the best option of each class (cheapest on-demand GPU, cheapest spot
GPU, the own CPU) costs its price per sweep. The box is cheaper beyond
fixed_usd_per_month / (option's $ per sweep - box's electricity per sweep) sweeps a month, each at the
box's own speed (measured, or predicted and marked): never an assumed equal speed.

Rows of the eager engine at fp32 only (analysis/engines.py compares engines). Reads rows only (pandas);
never imports torch or ray.
"""

from __future__ import annotations

import heapq
import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import model
from analysis.cost import HOURS_PER_MONTH, Billing, HomeBox, Option, measures, stale
from analysis.load import sizes_label
from analysis.schema import CONFIG_COLUMNS, SIZE_AXES

# A sweep's configuration, for matching rows of any run length and seed to it.
KEY = [c for c in CONFIG_COLUMNS if c not in ("device", "seed", "epochs", "warmup_epochs")]
FIXED = ["setup_s", "h2d_s", "warmup_s", "eval_s"]  # a trial's time besides its timed epochs
REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"
OWN_CPU, HOME_BOX = "own CPU", "home box"


def _fmt(value) -> str:
    return "-" if pd.isna(value) else f"{value:g}" if isinstance(value, (int, float, np.number)) else str(value)


def keys(frame: pd.DataFrame) -> pd.Series:
    """Each line's configuration as one string (nulls and numbers of any dtype written alike)."""
    return frame[KEY].apply(lambda r: "|".join(_fmt(v) for v in r), axis=1) if len(frame) else pd.Series(dtype=str)


def is_reference(results_dir) -> bool:
    return Path(str(results_dir)).resolve().is_relative_to(REFERENCE)


def eager_ok(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows of the eager engine at fp32 (null: written before the column), each with its config_key."""
    precision = rows["precision"].fillna("fp32") if "precision" in rows else pd.Series("fp32", index=rows.index)
    ok = rows[(rows["status"] == "ok") & rows["engine"].fillna("eager").eq("eager") & precision.eq("fp32")]
    return ok.assign(config_key=keys(ok))


def sweep(rows: pd.DataFrame, asked: dict[str, int] | None = None) -> pd.DataFrame:
    """The sweep: one line per configuration and its number of trials.

    Without `asked`, the measured grid: every configuration of the rows, as many trials as seeds were
    measured of it. With {workload: N}: N trials of each, spread evenly over its measured configurations."""
    ok = eager_ok(rows)
    grid = (ok.groupby("config_key", sort=True)
            .agg(workload=("workload", "first"), epochs=("epochs", "max"), warmup_epochs=("warmup_epochs", "max"),
                 trials=("seed", "nunique"), **{a: (a, "first") for a in SIZE_AXES})
            .reset_index())
    grid = grid.assign(config=sizes_label(grid))
    if not asked:
        return grid
    parts = []
    for workload, n in asked.items():
        sizes = grid[grid["workload"] == workload]
        if sizes.empty:
            raise ValueError(f"--workload {workload}: no ok row of it in the results read (workloads there: "
                             f"{sorted(grid['workload'].unique())}); sweep it first or pick one of those")
        if n < 1:
            raise ValueError(f"--trials for {workload} must be >= 1, got {n}")
        share = np.full(len(sizes), n // len(sizes)) + (np.arange(len(sizes)) < n % len(sizes))
        parts.append(sizes.assign(trials=share))
    out = pd.concat(parts, ignore_index=True)
    return out[out["trials"] > 0].reset_index(drop=True)


def _trial_s(group: pd.DataFrame, line) -> float:
    """Median trial time of a configuration's rows, at the sweep's epochs."""
    timed = max(line.epochs - line.warmup_epochs, 1)
    return float((group[FIXED].sum(axis=1, min_count=1) + timed * group["epoch_s_median"]).median())


def _power_w(group: pd.DataFrame) -> float:
    """The GPU's mean power over the timed epochs (gpu_energy_j is measured over them), null where not measured."""
    if "gpu_energy_j" not in group or group["gpu_energy_j"].isna().all():
        return math.nan
    return float((group["gpu_energy_j"] / group["train_s"]).median())


def speeds(rows: pd.DataFrame, predicted: pd.DataFrame, grid: pd.DataFrame, gpus: list[str]) -> pd.DataFrame:
    """Per configuration of the sweep and GPU model or CPU arm: the trial's time, its packing K, whether
    predicted, and the measured GPU power (null where not measured)."""
    ok = eager_ok(rows)
    ok = ok[ok["config_key"].isin(grid["config_key"])]
    pred = predicted.assign(config_key=keys(predicted)) if len(predicted) else predicted.assign(config_key=[])
    lines = []
    for line in grid.itertuples():
        at = ok[ok["config_key"] == line.config_key]
        gpu_rows = at[at["device"].str.match(r"cuda(/\d+)?$")]
        for gpu in gpus:
            mine = gpu_rows[[measures(n, gpu) for n in gpu_rows["device_name"]]]
            if len(mine):
                packs = {int(d.split("/")[1]) if "/" in d else 1: g for d, g in mine.groupby("device")}
                k, group = min(packs.items(), key=lambda kg: _trial_s(kg[1], line) / kg[0])
                lines.append({"config_key": line.config_key, "source": gpu, "trial_s": _trial_s(group, line), "k": k,
                              "predicted": False, "power_w": _power_w(group)})
                continue
            guess = pred[(pred["config_key"] == line.config_key) & (pred["device_name"] == gpu)]
            if len(guess):
                fixed = (gpu_rows if len(gpu_rows) else at)[["setup_s", "h2d_s", "eval_s"]].sum(axis=1).median()
                epoch = float(guess["epoch_s_median"].median())
                trial = (0 if pd.isna(fixed) else fixed) + (max(line.epochs - line.warmup_epochs, 1) + line.warmup_epochs) * epoch
                lines.append({"config_key": line.config_key, "source": gpu, "trial_s": trial, "k": 1, "predicted": True,
                              "power_w": math.nan})
        for (cpu, threads), group in at[at["device"] == "cpu"].groupby(["device_name", "torch_threads"]):
            name = f"{cpu}, {threads:.0f} threads"
            lines.append({"config_key": line.config_key, "source": name, "trial_s": _trial_s(group, line), "k": 1,
                          "predicted": False, "power_w": math.nan, "threads": int(group["torch_threads"].max()),
                          "own": not all(map(is_reference, group["results_dir"])), "cpu": "CPU"})
    return pd.DataFrame(lines, columns=["config_key", "source", "trial_s", "k", "predicted", "power_w", "threads", "own", "cpu"])


def makespan(trial_s: np.ndarray, share: np.ndarray, gpus: int) -> float:
    """Trials (each holding `share` of a GPU for trial_s) on `gpus` GPUs, longest first, each to the GPU
    that frees first; never less than the longest trial. gpus 0: a CPU, one trial after another."""
    if gpus == 0:
        return float(trial_s.sum())
    free = [0.0] * gpus
    for busy in np.sort(trial_s * share)[::-1]:
        heapq.heappush(free, heapq.heappop(free) + busy)
    return max(max(free), float(trial_s.max()))


def _run(grid: pd.DataFrame, speed: pd.DataFrame, gpus: int) -> dict | None:
    """The sweep on one speed source: makespan, trials, packing, predicted; None where a configuration lacks a speed."""
    at = grid[["config_key", "trials"]].merge(speed, on="config_key", how="left")
    if at["trial_s"].isna().any():
        return None
    trial_s = np.repeat(at["trial_s"].to_numpy(), at["trials"])
    share = np.repeat(1 / at["k"].to_numpy(), at["trials"])
    return {"run_s": makespan(trial_s, share, gpus), "packed": int(at["k"].max()), "predicted": bool(at["predicted"].any()),
            "power_w": float(at["power_w"].mean()) if at["power_w"].notna().all() else math.nan,
            "gpu_s": float((trial_s * share).sum())}


def table(grid: pd.DataFrame, speed: pd.DataFrame, options: list[Option], billing: dict[str, Billing],
          boxes: list[HomeBox]) -> pd.DataFrame:
    """Every option's wall time and cost for the sweep; options without a speed for every configuration left out."""
    lines = []
    cpus = speed[speed["threads"].notna()].drop_duplicates("source")
    for cpu in cpus.itertuples():
        run = _run(grid, speed[speed["source"] == cpu.source], 0)
        if run and cpu.own:
            lines.append({"option": f"{OWN_CPU}: {cpu.source}", "kind": OWN_CPU, "model": cpu.cpu, "gpus": 0,
                          "wall_s": run["run_s"], "usd": 0.0, **run, "basis": "already owned; electricity not counted"})
        for o in _smallest_cpus(options, int(cpu.threads)):
            lines += _rented(o, billing[o.provider], run, f"{o.vcpus} vCPUs as fast as the measured {cpu.source}") if run else []
    for o in (o for o in options if o.gpu):
        run = _run(grid, speed[speed["source"] == o.gpu], o.gpus)
        lines += _rented(o, billing[o.provider], run, f"{o.gpus} x {o.gpu}, rented whole") if run else []
    for box in boxes:
        run = _run(grid, speed[speed["source"] == box.gpu], 1)
        if run:
            lines.append(_home(box, run))
    out = pd.DataFrame(lines)
    if out.empty:
        return out
    return out.assign(wall_h=out["wall_s"] / 3600).sort_values(["usd", "wall_s"], ignore_index=True)


def _smallest_cpus(options: list[Option], threads: int) -> list[Option]:
    """Per provider, the smallest CPU instance with at least `threads` vCPUs."""
    smallest = {}
    for o in sorted((o for o in options if o.gpus == 0 and o.vcpus >= threads), key=lambda o: o.vcpus):
        smallest.setdefault(o.provider, o)
    return list(smallest.values())


def _rented(o: Option, bill: Billing, run: dict, basis: str) -> list[dict]:
    wall = bill.startup_s + run["run_s"]
    return [{"option": o.name + (" (spot)" if kind == "spot" else ""), "kind": kind, "model": o.gpu or "CPU",
             "gpus": o.gpus, "wall_s": wall, "usd": p.usd_per_h * bill.charged_s(wall) / 3600, **run,
             "basis": f"{basis}; {bill.startup_s:.0f} s start-up; billed per {bill.step_s:g} s, at least {bill.minimum_s:g} s",
             "price_date": p.date} for kind, p in o.prices()]


def _home(box: HomeBox, run: dict) -> dict:
    hours = run["run_s"] / 3600
    measured = not math.isnan(run["power_w"])
    power = run["power_w"] if measured else box.power_w
    energy = power / 1000 * hours * box.electricity_usd_per_kwh
    write_off = box.fixed_usd_per_month / (box.utilisation * HOURS_PER_MONTH) * hours
    what = (f"measured GPU power {power:.0f} W (gpu_energy_j)" if measured else f"nominal power {power:.0f} W (power_w)")
    return {"option": box.name, "kind": HOME_BOX, "model": box.gpu, "gpus": 1, "wall_s": run["run_s"],
            "usd": write_off + energy, "energy_usd": energy, "fixed_usd_per_month": box.fixed_usd_per_month, **run, "price_date": box.purchase_date,
            "basis": f"write-off at {box.utilisation:.0%} utilisation + electricity at {what}"}


def pick(options: pd.DataFrame, deadline_h: float | None = None) -> dict[str, pd.Series | None]:
    """The fastest, the cheapest (the faster of equals) and the cheapest within the deadline."""
    by_time = options.sort_values(["wall_s", "usd"])
    by_cost = options.sort_values(["usd", "wall_s"])
    out = {"fastest": by_time.iloc[0], "cheapest": by_cost.iloc[0]}
    if deadline_h is not None:
        within = by_cost[by_cost["wall_h"] <= deadline_h]
        out[f"cheapest within {deadline_h:g} h"] = within.iloc[0] if len(within) else None
    return out


def pareto(options: pd.DataFrame) -> pd.Series:
    """Whether each option is on the cost-versus-time front: no other is both as fast and cheaper, or faster and as cheap."""
    ordered = options.sort_values(["wall_s", "usd"])
    best, front = math.inf, pd.Series(False, index=options.index)
    for i, usd in ordered["usd"].items():
        if usd < best:
            front[i], best = True, usd
    return front


def break_even(options: pd.DataFrame) -> pd.DataFrame:
    """Per home box and class (cheapest on-demand GPU, cheapest spot GPU, own CPU): the sweeps a month
    beyond which the box costs less, and the box's hours of use that takes."""
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


def _money(line, column: str = "usd") -> str:
    return ("~" if line["predicted"] else "") + f"${line[column]:,.2f}"


def _hours(line, column: str = "wall_h") -> str:
    hours = line[column]
    return ("~" if line["predicted"] else "") + (f"{hours * 60:.3g} min" if hours < 1 else f"{hours:,.3g} h")


def render(options: pd.DataFrame, grid: pd.DataFrame, picks: dict, even: pd.DataFrame, notes: list[str]) -> str:
    """The decision as text: the sweep, every option (predicted figures marked '~'), the picks, the break-even."""
    trials = int(grid["trials"].sum())
    parts = [f"== the sweep: {trials:,} trials over {len(grid)} configurations "
             f"({', '.join(f'{w} {n:,}' for w, n in grid.groupby('workload')['trials'].sum().items())}) =="]
    if options.empty:
        return "\n".join(parts + ["no option has a measured or predicted time for every configuration of the sweep"] + notes)
    shown = options.assign(wall=options.apply(_hours, axis=1), cost=options.apply(_money, axis=1),
                           predicted=options["predicted"].map({True: "predicted", False: ""}),
                           front=pareto(options).map({True: "*", False: ""}))
    parts.append(shown[["option", "kind", "model", "gpus", "packed", "wall", "cost", "predicted", "front"]]
                 .to_string(index=False))
    parts.append("  ~: rests on analysis/model.py's prediction for a GPU no row measured; *: on the cost-versus-time front")
    for name, line in picks.items():
        parts.append(f"{name}: " + ("none" if line is None else f"{line['option']}, {_hours(line)}, {_money(line)}"))
    for e in even.itertuples():
        when = ("never: its electricity per sweep costs more" if math.isinf(e.sweeps_per_month) else
                f"beyond {'~' if e.predicted else ''}{e.sweeps_per_month:,.2f} sweeps a month "
                f"({e.box_hours_per_month:,.1f} h of use)")
        parts.append(f"{e.box} against the {e.versus} ({e.against}, ${e.against_usd:,.2f} a sweep): cheaper {when}")
    parts.append("how each option is costed:")
    parts += [f"  {basis}: {', '.join(group['option'])}" for basis, group in options.groupby("basis")]
    return "\n".join(parts + notes)


def missing(grid: pd.DataFrame, speed: pd.DataFrame, models: list[str]) -> list[str]:
    """A note for every GPU model left out: neither measured nor predicted at some configuration of the sweep."""
    notes = []
    for gpu in models:
        lacking = set(grid["config_key"]) - set(speed.loc[speed["source"] == gpu, "config_key"])
        if lacking:
            names = grid.loc[grid["config_key"].isin(lacking), "workload"].value_counts()
            notes.append(f"  left out: {gpu}, with no measured or predicted time at {len(lacking)} of {len(grid)} "
                         f"configurations ({', '.join(f'{w} {n}' for w, n in names.items())}); analysis/model.py predicts "
                         "only configurations some row measured")
    return notes


def decide(rows: pd.DataFrame, predicted: pd.DataFrame | None, options: list[Option], billing: dict[str, Billing],
           boxes: list[HomeBox], asked: dict[str, int] | None = None, deadline_h: float | None = None):
    """The sweep, every option's time and cost, the picks and the break-even; and the notes (models left
    out, stale prices). `predicted` None: analysis/model.py's predictions (`predictions`)."""
    grid = sweep(rows, asked)
    if grid.empty:
        return grid.assign(trials=[]), pd.DataFrame(), {}, pd.DataFrame(), ["no ok row to decide on: every trial failed"]
    notes = []
    if predicted is None:
        predicted, note = predictions(rows, options, boxes)
        notes += [note] if note else []
    gpus = sorted({o.gpu for o in options if o.gpu} | {b.gpu for b in boxes})
    speed = speeds(rows, predicted, grid, gpus)
    found = table(grid, speed, options, billing, boxes)
    picks = pick(found, deadline_h) if len(found) else {}
    even = break_even(found) if len(found) else pd.DataFrame()
    old = stale(options)
    dated = f"  stale prices: {len(old)} of {sum(len(o.prices()) for o in options)} are dated over 12 months ago " \
            "(python -m analysis cost lists them with their sources): re-read them before deciding"
    return grid, found, picks, even, notes + missing(grid, speed, gpus) + ([dated] if old else [])


def predictions(rows: pd.DataFrame, options: list[Option], boxes: list[HomeBox]) -> tuple[pd.DataFrame, str]:
    """analysis/model.py's predictions for the GPU models of the options and boxes, at every configuration
    no row of theirs measured, and a note where it could make none (no GPU row of its device table to
    calibrate on: CPU rows read with --no-reference)."""
    gpus = sorted({o.gpu for o in options if o.gpu} | {b.gpu for b in boxes})
    none = pd.DataFrame(columns=KEY + ["device_name", "epoch_s_median"])
    if not gpus:
        return none, ""
    try:
        return model.predict(rows, gpus), ""
    except ValueError as exc:  # the model's own words: what to read alongside
        return none, f"  not predicted ({', '.join(gpus)}): {exc}"

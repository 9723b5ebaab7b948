"""The decision: what a whole sweep costs and how long it takes on each option, measured or predicted.

    python -m analysis decide results/scaling                      # the measured grid as the sweep
    python -m analysis decide results/scaling --trials 1000 --workload peaks --deadline 2
    python -m analysis decide results/scaling --home-box analysis/home_boxes/rtx4090.yaml
    python -m analysis decide results/scaling --workload tabular --epochs 20 --dataset-size 1000000   # your run

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

Your planned run (`Plan`, `plan_grid`, `plan_speeds`; --epochs E --dataset-size N [--workload W]): E
epochs of N samples of one workload, priced instead of the measured grid; one run at each of the
workload's measured shapes (its configurations less the dataset size: tabular's three widths), or
--trials runs spread evenly over them. Each option's time per epoch and fixed costs at N come from the
dataset sizes its rows measured (`along`): at a measured size, the measurement; between two, the
straight line through them; outside, a least-squares line a + b x N over the NEAREST sizes at that
end, its spread the RMS of its relative residuals (one size measured: its time per sample x N). The
run's time is fixed(N) + E x epoch(N) on a whole GPU (packed rows, cuda/K, left aside), and each option
says where N lies: measured, inside the range, or how many times past the largest (below the smallest)
measured size; a time extrapolated outside the range is predicted, marked '~' as the model's are.

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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import model
from analysis.cost import HOURS_PER_MONTH, Billing, HomeBox, Option, measures, stale
from analysis.load import REFERENCE, sizes_label
from analysis.schema import CONFIG_COLUMNS, SIZE_AXES

# A sweep's configuration, for matching rows of any run length and seed to it.
KEY = [c for c in CONFIG_COLUMNS if c not in ("device", "seed", "epochs", "warmup_epochs")]
FIXED = ["setup_s", "h2d_s", "warmup_s", "eval_s"]  # a trial's time besides its timed epochs
OWN_CPU, HOME_BOX = "own CPU", "home box"
# A configuration less its dataset size: what a fit along the dataset size holds fixed.
SHAPE = [c for c in KEY if c != "dataset_size"]
FULL_BATCH = "dataset_size"  # a shape's batch_size where its batch is the whole dataset (peaks): it grows with N
NEAREST = 3  # measured sizes a line is fitted to past either end of the measured range


def _fmt(value) -> str:
    return "-" if pd.isna(value) else f"{value:g}" if isinstance(value, (int, float, np.number)) else str(value)


def keys(frame: pd.DataFrame, columns: list[str] = KEY) -> pd.Series:
    """Each line's configuration as one string (nulls and numbers of any dtype written alike)."""
    return frame[columns].apply(lambda r: "|".join(_fmt(v) for v in r), axis=1) if len(frame) else pd.Series(dtype=str)


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
        parts.append(sizes.assign(trials=_spread(n, len(sizes))))
    out = pd.concat(parts, ignore_index=True)
    return out[out["trials"] > 0].reset_index(drop=True)


def _spread(n: int, lines: int) -> np.ndarray:
    """n trials spread evenly over `lines` configurations, the first ones taking the remainder."""
    return np.full(lines, n // lines) + (np.arange(lines) < n % lines)


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


@dataclass(frozen=True)
class Plan:
    """The run the user plans (--epochs, --dataset-size), priced instead of the measured grid."""
    epochs: int  # epochs of the run, its warm-up epochs among them
    samples: int  # samples an epoch: the dataset's size
    workload: str | None = None  # whose rows price it; None: the rows' only workload
    trials: int | None = None  # runs of it, spread evenly over the workload's shapes; None: one at each

    def __post_init__(self):
        for flag, value in (("--epochs", self.epochs), ("--dataset-size", self.samples), ("--trials", self.trials)):
            if value is not None and value < 1:
                raise ValueError(f"{flag} must be >= 1, got {value} (the planned run)")


@dataclass(frozen=True)
class Along:
    """A figure at the planned dataset size, found from the sizes measured (`along`)."""
    value: float
    used: tuple[int, ...]  # which of the measured sizes (ascending) it rests on
    side: str  # 'measured', 'inside', 'past' (the largest size) or 'below' (the smallest)
    low: float  # the smallest measured size
    high: float  # the largest measured size
    factor: float = 1.0  # how far outside: N / largest past the range, smallest / N below it
    how: str = ""  # outside the range: 'line', or 'per sample' where one size was measured
    spread: float = math.nan  # the line's RMS relative residual over its sizes (nan: two sizes or fewer)

    @property
    def reach(self) -> str:
        """Where N lies against the measured sizes, in a few words: 'inside 1,000-100,000', '10x past 100,000 ±2.0%'."""
        if self.side == "measured":
            return "measured"
        if self.side == "inside":
            return f"inside {self.low:,.0f}-{self.high:,.0f}"
        how = (" per sample" if self.how == "per sample" else
               f" ±{self.spread:.1%}" if math.isfinite(self.spread) else "")
        return f"{self.factor:,.3g}x {self.side} {self.high if self.side == 'past' else self.low:,.0f}{how}"


def along(sizes: np.ndarray, values: np.ndarray, n: float) -> Along:
    """`values` measured at `sizes` (ascending, distinct), at size n: the measurement where n is one of
    them; between two, the straight line through them; outside, a least-squares line a + b x size over
    the NEAREST sizes at that end; one size measured, its value per sample x n."""
    low, high = float(sizes[0]), float(sizes[-1])
    hit = np.flatnonzero(sizes == n)
    if hit.size:
        return Along(float(values[hit[0]]), (int(hit[0]),), "measured", low, high)
    if low < n < high:
        i = int(np.searchsorted(sizes, n))
        return Along(float(np.interp(n, sizes, values)), (i - 1, i), "inside", low, high)
    side, factor = ("past", n / high) if n > high else ("below", low / n)
    if len(sizes) == 1:
        return Along(float(values[0] * n / low), (0,), side, low, high, factor, "per sample")
    at = np.arange(len(sizes))[-NEAREST:] if side == "past" else np.arange(len(sizes))[:NEAREST]
    x, y = sizes[at].astype(float), values[at].astype(float)
    b, a = np.polyfit(x, y, 1)
    if b < 0:  # a flat curve with noise on it: held flat rather than let the time fall as N grows
        b, a = 0.0, float(y.mean())
    value = a + b * n
    if side == "below":  # a line may cross zero there; a smaller epoch's time per sample only grows (fixed costs stay)
        value = max(value, float(values[0]) * n / low)
    spread = float(np.sqrt(np.mean(((a + b * x) / y - 1) ** 2))) if len(x) > 2 and (y > 0).all() else math.nan
    return Along(float(value), tuple(int(i) for i in at), side, low, high, factor, "line", spread)


def _shaped(ok: pd.DataFrame) -> pd.DataFrame:
    """The rows with their `shape` (SHAPE as one string) and `full_batch`: every row of the shape trains
    on its whole dataset in one batch, at more than one size (peaks), so its batch grows with N."""
    if ok.empty:
        return ok.assign(shape=pd.Series(dtype=str), full_batch=pd.Series(dtype=bool))
    rest = keys(ok, [c for c in SHAPE if c != "batch_size"])
    whole = ok["batch_size"].eq(ok["dataset_size"])
    full = whole.groupby(rest).transform("all") & ok["dataset_size"].groupby(rest).transform("nunique").gt(1)
    batch = ok["batch_size"].astype(object).where(~full, FULL_BATCH)
    return ok.assign(shape=keys(ok.assign(batch_size=batch), SHAPE), full_batch=full)


def plan_grid(rows: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """The planned run as a sweep: one line per shape of its workload (config_key: the shape), at the
    plan's epochs and dataset size, one run at each or plan.trials spread evenly over them."""
    ok = eager_ok(rows)
    present = sorted(ok["workload"].unique())
    workload = plan.workload or present[0]
    if plan.workload is None and len(present) > 1:
        raise ValueError(f"--workload is needed with --epochs/--dataset-size: the rows hold {len(present)} "
                         f"workloads ({', '.join(present)}); name the one your run trains, e.g. --workload {present[0]}")
    if workload not in present:
        raise ValueError(f"--workload {workload}: no ok row of it in the results read (workloads there: "
                         f"{', '.join(present)}); sweep it first or pick one of those")
    mine = _shaped(ok[ok["workload"] == workload])
    grid = (mine.groupby("shape", sort=True)
            .agg(workload=("workload", "first"), warmup_epochs=("warmup_epochs", "max"), full_batch=("full_batch", "first"),
                 **{a: (a, "first") for a in SIZE_AXES})
            .reset_index().rename(columns={"shape": "config_key"}))
    grid = grid.assign(epochs=plan.epochs, dataset_size=plan.samples,
                       batch_size=grid["batch_size"].where(~grid["full_batch"], plan.samples),
                       trials=1 if plan.trials is None else _spread(plan.trials, len(grid)))
    return grid.assign(config=sizes_label(grid))[lambda g: g["trials"] > 0].reset_index(drop=True)


def _points(group: pd.DataFrame) -> pd.DataFrame:
    """Measured rows as one point per dataset size: median epoch time, and median fixed seconds of a run
    besides its epochs (set-up, transfer, evaluation, and what the warm-up epochs took beyond steady ones)."""
    parts = group[["setup_s", "h2d_s", "eval_s"]].sum(axis=1)
    beyond = (group["warmup_s"] - group["warmup_epochs"] * group["epoch_s_median"]).fillna(0)
    return (group.assign(epoch_s=group["epoch_s_median"], fixed_s=parts + beyond)
            .groupby("dataset_size", as_index=False)[["epoch_s", "fixed_s"]].median().assign(modelled=False))


def _guessed(guess: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """analysis/model.py's predictions as points: its epoch time, and the fixed seconds the measured rows
    of the same configuration took (the warm-up counted as a steady epoch, as `speeds` does)."""
    fixed = measured.assign(f=measured[["setup_s", "h2d_s", "eval_s"]].sum(axis=1)).groupby("config_key")["f"].median()
    return (guess.assign(epoch_s=guess["epoch_s_median"], fixed_s=guess["config_key"].map(fixed).fillna(0))
            .groupby("dataset_size", as_index=False)[["epoch_s", "fixed_s"]].median().assign(modelled=True))


def _planned(points: pd.DataFrame, plan: Plan) -> dict:
    """The planned run's time from one source's points, and where plan.samples lies against them."""
    points = points.sort_values("dataset_size", ignore_index=True)
    sizes = points["dataset_size"].to_numpy(float)
    epoch = along(sizes, points["epoch_s"].to_numpy(float), plan.samples)
    fixed = along(sizes, points["fixed_s"].to_numpy(float), plan.samples)
    modelled = bool(points["modelled"].to_numpy()[list(epoch.used)].any())
    outside = epoch.side in ("past", "below")
    return {"trial_s": max(fixed.value, 0.0) + plan.epochs * epoch.value, "predicted": modelled or outside,
            "modelled": modelled, "extrapolated": outside, "factor": epoch.factor, "spread": epoch.spread,
            "reach": epoch.reach}


def plan_speeds(rows: pd.DataFrame, predicted: pd.DataFrame, grid: pd.DataFrame, gpus: list[str],
                plan: Plan) -> pd.DataFrame:
    """`speeds` for the planned run: per shape and GPU model or CPU arm, the run's time at plan.samples
    from the dataset sizes measured (a GPU's own rows, the model's predictions at the sizes they lack)."""
    ok = _shaped(eager_ok(rows))
    pred = predicted.assign(config_key=keys(predicted)) if len(predicted) else predicted.assign(config_key=[])
    pred = pred.assign(shape=pred["config_key"].map(dict(zip(ok["config_key"], ok["shape"]))))
    lines = []
    for line in grid.itertuples():
        at = ok[ok["shape"] == line.config_key]
        gpu_rows = at[at["device"] == "cuda"]  # one run holds a whole GPU: packed rows (cuda/K) left aside
        for gpu in gpus:
            mine = gpu_rows[[measures(n, gpu) for n in gpu_rows["device_name"]]]
            points = _points(mine) if len(mine) else pd.DataFrame()
            guess = pred[(pred["shape"] == line.config_key) & (pred["device_name"] == gpu)]
            guess = guess[~guess["dataset_size"].isin(points.get("dataset_size", []))]  # a measured size wins
            if len(guess):
                points = pd.concat([points, _guessed(guess, gpu_rows if len(gpu_rows) else at)], ignore_index=True)
            if len(points):
                lines.append({"config_key": line.config_key, "source": gpu, "k": 1, **_planned(points, plan),
                              "power_w": _power_w(mine) if len(mine) else math.nan})
        for (cpu, threads), group in at[at["device"] == "cpu"].groupby(["device_name", "torch_threads"]):
            lines.append({"config_key": line.config_key, "source": f"{cpu}, {threads:.0f} threads", "k": 1,
                          **_planned(_points(group), plan), "power_w": math.nan, "threads": int(threads),
                          "own": not all(map(is_reference, group["results_dir"])), "cpu": "CPU"})
    return pd.DataFrame(lines, columns=["config_key", "source", "trial_s", "k", "predicted", "modelled", "extrapolated",
                                        "factor", "spread", "reach", "power_w", "threads", "own", "cpu"])


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
    run = {"run_s": makespan(trial_s, share, gpus), "packed": int(at["k"].max()), "predicted": bool(at["predicted"].any()),
           "power_w": float(at["power_w"].mean()) if at["power_w"].notna().all() else math.nan,
           "gpu_s": float((trial_s * share).sum())}
    if "reach" in at:  # a planned run: the shape furthest outside what was measured (the worst fit) speaks for all
        worst = at.sort_values(["factor", "spread"], na_position="first").iloc[-1]
        run |= {"reach": worst["reach"], "factor": float(worst["factor"]), "modelled": bool(at["modelled"].any()),
                "extrapolated": bool(at["extrapolated"].any())}
    return run


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
    exact = line[column] == 0  # already owned: $0 however long it runs
    return ("~" if line["predicted"] and not exact else "") + f"${line[column]:,.2f}"


def _hours(line, column: str = "wall_h") -> str:
    hours = line[column]
    return ("~" if line["predicted"] else "") + (f"{hours * 60:.3g} min" if hours < 1 else f"{hours:,.3g} h")


def said(line) -> str:
    """An option in a few words: 'RTX 5090 box, ~0.147 min, ~$0.00' ('~': predicted)."""
    return f"{line['option']}, {_hours(line)}, {_money(line)}"


def _planned_header(grid: pd.DataFrame, plan: Plan) -> str:
    """'20 epochs of 1,000,000 samples of tabular, one run at each of its 3 measured shapes (width 64, 256, 1,024)'."""
    varied = [a for a in SIZE_AXES if a != "dataset_size" and grid[a].nunique() > 1]
    shapes = "; ".join(f"{a} {', '.join(f'{v:,.0f}' for v in sorted(grid[a].dropna().unique()))}" for a in varied)
    spread = (f", {plan.trials:,} runs spread over {len(grid)} measured shapes" if plan.trials and plan.trials > 1 else
              f", one run at each of its {len(grid)} measured shapes" if plan.trials is None and len(grid) > 1 else "")
    full = " (one batch: the whole dataset)" if grid["full_batch"].any() else ""
    return (f"== the planned run: {plan.epochs:,} epochs of {plan.samples:,} samples of {grid['workload'].iloc[0]}{full}"
            f"{spread}{f' ({shapes})' if shapes else ''} ==")


def render(options: pd.DataFrame, grid: pd.DataFrame, picks: dict, even: pd.DataFrame, notes: list[str],
           plan: Plan | None = None) -> str:
    """The decision as text: the sweep (or the planned run), every option (predicted figures marked '~'),
    the picks, the break-even."""
    trials, unit = int(grid["trials"].sum()), "run" if plan else "sweep"
    parts = [_planned_header(grid, plan) if plan else f"== the sweep: {trials:,} trials over {len(grid)} configurations "
             f"({', '.join(f'{w} {n:,}' for w, n in grid.groupby('workload')['trials'].sum().items())}) =="]
    if options.empty:
        return "\n".join(parts + [f"no option has a measured or predicted time for every configuration of the {unit}"] + notes)
    shown = options.assign(wall=options.apply(_hours, axis=1), cost=options.apply(_money, axis=1),
                           front=pareto(options).map({True: "*", False: ""}))
    if plan:
        why = shown["modelled"].map({True: ["model"], False: []}) + shown["extrapolated"].map({True: ["extrapolated"], False: []})
        shown = shown.assign(predicted=why.map(", ".join), **{"dataset size": shown["reach"]})
        columns = ["option", "kind", "model", "gpus", "wall", "cost", "predicted", "dataset size", "front"]
    else:
        shown = shown.assign(predicted=options["predicted"].map({True: "predicted", False: ""}))
        columns = ["option", "kind", "model", "gpus", "packed", "wall", "cost", "predicted", "front"]
    parts.append(shown[columns].to_string(index=False))
    parts.append("  ~: rests on analysis/model.py's prediction for a GPU no row measured" +
                 (" (model) or on a time extrapolated outside the dataset sizes measured" if plan else "") +
                 "; *: on the cost-versus-time front")
    if plan:
        parts.append(f"  dataset size: where {plan.samples:,} lies against the sizes the option's rows measured: inside "
                     f"(a line between the two around it), or Kx past the largest / below the smallest (a least-squares "
                     f"line over the {NEAREST} sizes nearest that end, ± its RMS residual; one size: its time per sample)")
    for name, line in picks.items():
        parts.append(f"{name}: " + ("none" if line is None else said(line)))
    for e in even.itertuples():
        when = (f"never: its electricity per {unit} costs more" if math.isinf(e.sweeps_per_month) else
                f"beyond {'~' if e.predicted else ''}{e.sweeps_per_month:,.2f} {unit}s a month "
                f"({e.box_hours_per_month:,.1f} h of use)")
        parts.append(f"{e.box} against the {e.versus} ({e.against}, ${e.against_usd:,.2f} a {unit}): cheaper {when}")
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
           boxes: list[HomeBox], asked: dict[str, int] | None = None, deadline_h: float | None = None,
           plan: Plan | None = None):
    """The sweep (or the planned run, where `plan` is given: `asked` is then unused), every option's time
    and cost, the picks and the break-even; and the notes (models left out, stale prices). `predicted`
    None: analysis/model.py's predictions (`predictions`)."""
    grid = sweep(rows, None if plan else asked)
    if grid.empty:
        return grid.assign(trials=[]), pd.DataFrame(), {}, pd.DataFrame(), ["no ok row to decide on: every trial failed"]
    grid = plan_grid(rows, plan) if plan else grid
    notes = []
    if predicted is None:
        predicted, note = predictions(rows, options, boxes)
        notes += [note] if note else []
    gpus = sorted({o.gpu for o in options if o.gpu} | {b.gpu for b in boxes})
    speed = plan_speeds(rows, predicted, grid, gpus, plan) if plan else speeds(rows, predicted, grid, gpus)
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
    gpus = sorted(({o.gpu for o in options if o.gpu} | {b.gpu for b in boxes}) & set(model.load_devices()))
    none = pd.DataFrame(columns=KEY + ["device_name", "epoch_s_median"])
    if not gpus:
        return none, ""
    try:
        return model.predict(rows, gpus), ""
    except ValueError as exc:  # the model's own words: what to read alongside
        return none, f"  not predicted ({', '.join(gpus)}): {exc}"

"""The decision: what a whole sweep costs and how long it takes on each option, measured or predicted.

    python -m crossover.analysis decide results/scaling                      # the measured grid as the sweep
    python -m crossover.analysis decide results/scaling --trials 1000 --workload peaks --deadline 2
    python -m crossover.analysis decide results/scaling --home-box analysis/home_boxes/rtx4090.yaml
    python -m crossover.analysis decide results/scaling --workload tabular --epochs 20 --dataset-size 1000000 --width 256   # your run
    python -m crossover.analysis decide results/resnet --epochs 30 --dataset-size 50000 --batch-size 128 --json run.json

The sweep is the unit: a list of configurations, each run some number of trials (`sweep`): by default
the measured grid (every configuration your rows measured, as many trials as the seeds they ran of
it; the reference rows beside them add none), or N trials of a
workload spread evenly over its measured sizes. The options (`table`): every instance of
analysis/prices.yaml on demand and on spot, your machine ("your CPU, 16 threads (measured here)",
"your H100 (measured here)": the CPU and GPU rows not under results/reference/, `own_gpus`), every
home box. For each, the sweep's wall time and cost, each with its 90% interval where it rests on a
prediction, and its source (`source`): "measured on <host>, <date>" (the rows' hostname and newest
finished_at), "predicted", or "62% predicted; measured on ..." (the predicted share of its GPU-time):

    trial_s     setup_s + h2d_s + warmup_s + eval_s + (epochs - warmup_epochs) x epoch_s_median: the
                median over a configuration's measured rows of that GPU model (or CPU), at the sweep's
                epochs. Where rows measured K trials packed on one GPU (device cuda/K), the K that gives
                the most trials per GPU-second is used: a trial then holds 1/K of a GPU for its trial_s.
                A GPU's rows at a configuration always win, your machine's over the reference rows
                (`_yours_first`); at a configuration no row of it measured, analysis/model/'s
                epoch_s_median and its interval (epoch_s_lo, epoch_s_hi) over the sweep's epochs (fitted
                on the shipped reference rows alone, applied to the configuration's counted step costs:
                `predictions`), plus the fixed seconds of the measured GPUs' rows, else of the CPU's
                (measured: no interval). Every figure
                that rests on a prediction is marked '~' and printed with its interval: ~4.8 min (3.9-6.1).
    makespan    on G GPUs: the trials, longest first, each to the GPU that frees first (by their GPU
                share), and never less than the longest trial; on a CPU: one trial after another, each
                with all the threads it was measured with.
    cloud       wall = provider's startup_s + makespan; cost = price x the billed time: wall rounded up
                to the provider's billing step, at least its minimum. One instance, rented whole.
    your CPU, GPU  wall = makespan; cost = its electricity (already owned): the power its rows measured
                (RAPL cpu_energy_j, NVML gpu_energy_j, over train_s), else cost.Electricity's nominal
                watts (--cpu-watts, --gpu-watts), x wall (x GPUs) x --usd-per-kwh; its source says which.
    home box    wall = makespan; cost = write-off (purchase over lifetime, spread over the hours the
                box trains at its utilisation) + electricity: measured GPU energy where the rows of its
                GPU have gpu_energy_j (their mean power over the timed epochs, train_s), else its nominal power_w.

Your planned run (`Plan`, `planned_rows`, `plan_grid`, `plan_speeds`; --epochs E --dataset-size N
[--workload W] [--batch-size B, --width, --depth, --context, --param k=v, --precision P]): E epochs of N samples of
exactly one configuration, priced instead of the measured grid, once (or --trials runs of it). Where
the workload's rows hold several shapes (its configurations less the dataset size) and the flags name
none, it is refused in one line listing them: shapes are never summed. A GPU whose rows did not measure
N (nor sizes around it) at PyTorch's default precision is priced at the model's prediction of the run's own
configuration (`at_plan`: its step counted as `crossover predict` counts it, `planned_step`; the same function
predict prices with, so both say one figure), scaled by that GPU's rows at other sizes where it has some
(`corrected`), never at a line far past the sizes measured. A CPU's time per epoch
(`per_epoch`), and the measured GPUs', and their fixed costs at N come from the
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

Fits in memory (`memory_needed`, `memory`): each GPU option says whether the run fits its card (devices.yaml's
memory_gb, a home box's own): the GPU rows' measured peak_gpu_bytes, else the peak of a step counted by
`crossover predict` (trainables/memory.py), else an estimate from n_params and bytes_per_step, + CONTEXT_BYTES
(docs/cost.md); where it does not fit, `largest_batch` says the batch that would. One that does not fit is never picked nor on the front.

Output (`brief`, the default): at most BRIEF_LINES lines of at most WIDTH columns: the GPU memory the run
needs and the cards it does not fit, the three picks (`three`: the GPU to rent, fastest and cheapest; the box
to buy, its break-even and what its write-off assumes, `bought`; your CPU), the cheapest within --deadline, the
cost-versus-time front where lines are left, the stale prices in one line. `render` (--verbose, and the report) adds
every option, the break-even, how each is costed, the notes. `records` (--json): every option's figures.

Rows of the eager engine at PyTorch's default precision only (analysis/load.py `eager_ok`;
analysis/engines.py compares engines). Reads rows only (pandas); never imports torch or ray.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import math
import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crossover.analysis import model
from crossover.analysis.crossover import BUSY, loaded, timed
from crossover.analysis.cost import HOURS_PER_MONTH, Billing, Electricity, HomeBox, Option, measures, stale, stale_boxes
from crossover.analysis.load import KEY, eager_ok, is_reference, keys, sizes_label
from crossover.schema import BUILTIN_MODULE, SIZE_AXES

FIXED = ["setup_s", "h2d_s", "warmup_s", "eval_s"]  # a trial's time besides its timed epochs
OWN_CPU, OWN_GPU, HOME_BOX = "own CPU", "own GPU", "home box"
HERE = "measured here"  # your machine's options: your CPU, your GPUs (the rows not under results/reference/)
# A configuration less its dataset size: what a fit along the dataset size holds fixed.
SHAPE = [c for c in KEY if c != "dataset_size"]
FULL_BATCH = "dataset_size"  # a shape's batch_size where its batch is the whole dataset (peaks): it grows with N
NEAREST = 3  # measured sizes a line is fitted to past either end of the measured range
# lines of the default output at most, so the answer is read before the detail: the front, the picks, the stale prices
BRIEF_LINES = 20  # the three picks, each wrapped rather than cut, and what is known of them
WIDTH = 100  # columns of a line of the default output
STALE = "stale prices:"  # the note on prices older than 12 months, the one note the default output keeps


# A figure resting on rows timed on a busy host ends with its mark; an answer explains each mark it uses, once.
BUSY_MARKS = {"[busy]": f"{BUSY} (other processes on its CPUs): those times may be slow",
              "[busy ref]": "the reference rows beside yours were timed while their host was busy"}


def busy(rows: pd.DataFrame) -> str:
    """' [busy]' where `rows` hold your rows flagged outside_load, ' [busy ref]' where they hold the shipped
    reference rows' (another host's), both where both: the marks of the verdict and of the decision alike."""
    flagged = rows[loaded(rows)]
    shipped = flagged["results_dir"].map(is_reference).astype(bool) if "results_dir" in flagged else \
        pd.Series(False, index=flagged.index)
    return "".join(f" {mark}" for mark, some in zip(BUSY_MARKS, ((~shipped).any(), shipped.any())) if some)


def busy_notes(options: pd.DataFrame) -> list[str]:
    """What each busy mark among `options` means, a line each ('[busy]: timed while ...')."""
    used = "".join(options["busy"].fillna("")) if "busy" in options else ""  # '[busy]' is not in '[busy ref]'
    return [f"{mark}: {why}" for mark, why in BUSY_MARKS.items() if mark in used]


def sweep(rows: pd.DataFrame, asked: dict[str, int] | None = None) -> pd.DataFrame:
    """The sweep: one line per configuration and its number of trials.

    Without `asked`, the measured grid: every configuration your rows measured, as many trials as seeds
    they ran of it (what ran: the reference rows set beside yours add neither configurations nor
    repeats; rows read from results/reference/ alone are the grid themselves). With {workload: N}: N
    trials of each, spread evenly over its measured configurations."""
    ok = eager_ok(rows)
    yours = ~ok["results_dir"].map(is_reference) if "results_dir" in ok else pd.Series(True, index=ok.index)
    ok = ok[yours] if yours.any() else ok
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


def _power_w(group: pd.DataFrame, column: str = "gpu_energy_j") -> float:
    """Mean power over the timed epochs (energy is measured over them: gpu_energy_j by NVML, cpu_energy_j
    by RAPL), null where not measured."""
    if column not in group or group[column].isna().all():
        return math.nan
    return float((group[column] / group["train_s"]).median())


# What a run needs of a GPU's memory beyond the peak torch allocated (peak_gpu_bytes counts only its
# allocations): the CUDA context and the cuDNN and cuBLAS handles, about 0.3-0.6 GB (docs/cost.md).
CONTEXT_BYTES = 0.5e9
# The estimate where no GPU row measured the peak (docs/cost.md, "Fits in memory"): per parameter, 4-byte
# weights, gradients and Adam's two moments; a step moves each saved activation about ACTIVATION_MOVES times
# (written and read in the forward, read and its gradient written in the backward); and what every measured
# peak holds besides them (index tensors, cuBLAS workspace: the smallest reference peak), which a counted
# peak (trainables/memory.py) does not see either: the reference zoo's measured peaks sit 85-125 MB above it.
BYTES_PER_PARAM = 16
ACTIVATION_MOVES = 4
FLOOR_BYTES = 70e6


def memory_needed(at: pd.DataFrame, samples: int, full_batch: bool) -> dict:
    """GPU memory a run of one configuration needs at `samples` (needs_bytes, CONTEXT_BYTES included) and
    how it was found (needs_how). Measured: the GPU rows' peak_gpu_bytes (the same on every card); with the
    data kept on the GPU and two sizes or more, the line through the peaks at one batch's size, for a run
    whose data does not fit moves it to the host (trainables/devices.py, `holds`); a whole-dataset batch
    along the sizes to `samples`. Else, where `crossover predict` counted the step's peak
    (peak_memory_bytes: trainables/memory.py), that + FLOOR_BYTES; else estimated from n_params and the
    step's bytes (BYTES_PER_PARAM, ACTIVATION_MOVES, FLOOR_BYTES); null where the rows lack bytes_per_step."""
    gpu = at[at["whole_gpu"] & at["peak_gpu_bytes"].notna()] if "peak_gpu_bytes" in at else at.iloc[:0]
    if len(gpu):
        per_size = gpu.groupby("dataset_size")["peak_gpu_bytes"].median()
        sizes, peaks = per_size.index.to_numpy(float), per_size.to_numpy(float)
        on_gpu = gpu["data_on_device"].fillna(False).astype(bool).any() if "data_on_device" in gpu else False
        if full_batch:
            peak = along(sizes, peaks, samples).value
        elif on_gpu and len(sizes) > 1:
            peak = max(along(sizes, peaks, float(gpu["batch_size"].iloc[0])).value, FLOOR_BYTES)
        else:
            peak = float(np.median(peaks))
        names = sorted({model.device_key(n, model.load_devices()) or n for n in gpu["device_name"]})
        return {"needs_bytes": peak + CONTEXT_BYTES, "needs_how": f"peak measured on {', '.join(names)}"}
    if "peak_memory_bytes" in at and at["peak_memory_bytes"].notna().any():
        steps = at[at["peak_memory_bytes"].notna()]
        each = steps["peak_memory_bytes"] + FLOOR_BYTES
        how = f"a step's peak, counted, + {FLOOR_BYTES / 1e6:g} MB workspaces"
    elif "bytes_per_step" in at and at["bytes_per_step"].notna().any():
        steps = at[at["bytes_per_step"].notna()]
        moved = steps["bytes_per_step"] - steps.get("optimizer_bytes_per_step", pd.Series(0, index=steps.index)).fillna(0)
        each = BYTES_PER_PARAM * steps["n_params"] + moved.clip(lower=0) / ACTIVATION_MOVES + FLOOR_BYTES
        how = "estimated from n_params and bytes_per_step"
    else:
        return {"needs_bytes": math.nan, "needs_how": "not known: no GPU peak and no bytes_per_step in the rows"}
    per_size = each.groupby(steps["dataset_size"]).median()
    peak = (along(per_size.index.to_numpy(float), per_size.to_numpy(float), samples).value if full_batch
            else float(per_size.median()))
    return {"needs_bytes": peak + CONTEXT_BYTES, "needs_how": how}


def largest_batch(needs_bytes: float, per_sample_bytes: float, batch_size: int, memory_gb: float) -> int:
    """The largest batch whose step fits a card of `memory_gb`, from what the run needs at `batch_size`
    (`memory_needed`) and what a sample adds to it (sweeps/count_step.py's peak_memory_per_sample_bytes):
    the need is a line in the batch size, a fixed part (weights, gradients, optimiser states, CONTEXT_BYTES)
    and a part per sample (activations, the batch). 0 where not even one sample fits, or where a sample adds
    nothing (the batch is not what does not fit)."""
    if not per_sample_bytes > 0:
        return 0
    fixed = needs_bytes - per_sample_bytes * batch_size
    return max(int((memory_gb * 1e9 - fixed) // per_sample_bytes), 0)


SPEED = ["config_key", "source", "trial_s", "trial_lo", "trial_hi", "k", "predicted", "hosts", "date", "busy", "power_w",
         "threads", "own", "cpu", "needs_bytes", "needs_how"]


def _yours_first(group: pd.DataFrame) -> pd.DataFrame:
    """A GPU model's rows at one configuration: those of your machine (not under results/reference/)
    where there are any, else all of them."""
    own = group[~group["results_dir"].map(is_reference)] if "results_dir" in group else group
    return own if len(own) else group


def _measured(config_key: str, source: str, trial_s: float, group: pd.DataFrame) -> dict:
    """A measured speed: no interval, where and when its rows were measured (hosts, newest finished_at), and
    whether they were timed on a busy host (`busy`)."""
    hosts = sorted(set(group["hostname"].dropna().astype(str))) if "hostname" in group else []
    when = pd.to_datetime(group["finished_at"], utc=True).max() if "finished_at" in group else pd.NaT
    return {"config_key": config_key, "source": source, "trial_s": trial_s, "trial_lo": trial_s, "trial_hi": trial_s,
            "predicted": False, "hosts": ", ".join(hosts), "date": when, "busy": busy(group)}


def _epochs(guess: pd.DataFrame) -> tuple[float, float, float]:
    """analysis/model/'s epoch time and its interval (epoch_s_lo, epoch_s_hi; the median where absent)."""
    mid = float(guess["epoch_s_median"].median())
    ends = [float(guess[c].median()) if c in guess and guess[c].notna().any() else mid for c in ("epoch_s_lo", "epoch_s_hi")]
    return mid, ends[0], ends[1]


def _keyed(predicted: pd.DataFrame) -> pd.DataFrame:
    return predicted.assign(config_key=keys(predicted)) if len(predicted) else predicted.assign(config_key=[])


def speeds(rows: pd.DataFrame, predicted: pd.DataFrame, grid: pd.DataFrame, gpus: list[str]) -> pd.DataFrame:
    """Per configuration of the sweep and GPU model or CPU arm: the trial's time with its interval (a
    prediction's; none where measured), its packing K, whether predicted, where and when it was measured,
    and the measured GPU power (null where not measured). A GPU's own rows at a configuration always win
    over a prediction, and your machine's rows over the reference rows (`_yours_first`)."""
    ok = eager_ok(rows)
    ok = ok[ok["config_key"].isin(grid["config_key"])]
    pred = _keyed(predicted)
    lines = []
    for line in grid.itertuples():
        at = ok[ok["config_key"] == line.config_key]
        needs = memory_needed(at, line.dataset_size, False)
        gpu_rows = at[at["whole_gpu"] | at["packed"]]
        for gpu in gpus:
            mine = _yours_first(gpu_rows[[measures(n, gpu) for n in gpu_rows["device_name"]]])
            if len(mine):
                packs = {int(d.split("/")[1]) if "/" in d else 1: g for d, g in mine.groupby("device")}
                k, group = min(packs.items(), key=lambda kg: _trial_s(kg[1], line) / kg[0])
                lines.append(_measured(line.config_key, gpu, _trial_s(group, line), group)
                             | {"k": k, "power_w": _power_w(group), **needs})
                continue
            guess = pred[(pred["config_key"] == line.config_key) & (pred["device_name"] == gpu)]
            if len(guess):  # the fixed seconds are measured (another GPU's, else the CPU's); the epochs predicted
                fixed = (gpu_rows if len(gpu_rows) else at)[["setup_s", "h2d_s", "eval_s"]].sum(axis=1).median()
                epochs = max(line.epochs - line.warmup_epochs, 1) + line.warmup_epochs
                mid, lo, hi = ((0 if pd.isna(fixed) else fixed) + epochs * e for e in _epochs(guess))
                lines.append({"config_key": line.config_key, "source": gpu, "trial_s": mid, "trial_lo": lo, "trial_hi": hi,
                              "k": 1, "predicted": True, "hosts": "", "date": pd.NaT, "busy": "", "power_w": math.nan,
                              **needs})
        for (cpu, threads), group in at[at["is_cpu"]].groupby(["device_name", "torch_threads"]):
            group = _yours_first(group)
            lines.append(_measured(line.config_key, f"{cpu}, {threads:.0f} threads", _trial_s(group, line), group)
                         | {"k": 1, "power_w": _power_w(group, "cpu_energy_j"), "threads": int(threads), "cpu": "CPU",
                            "own": not all(map(is_reference, group["results_dir"]))})
    return pd.DataFrame(lines, columns=SPEED)


@dataclass(frozen=True)
class Plan:
    """The run the user plans (--epochs, --dataset-size), priced instead of the measured grid: one
    configuration of one workload, the axes that pick it among the rows' named in `axes`."""
    epochs: int  # epochs of the run, its warm-up epochs among them
    samples: int  # samples an epoch: the dataset's size
    workload: str | None = None  # whose rows price it; None: the rows' only workload
    trials: int | None = None  # runs of it (seeds), side by side where an option has the GPUs; None: one
    # (axis, value as given): a column of the configuration (batch_size, width, depth, context: their own
    # flags; lr, loop, ...: --param) or one of the workload's own axes (workload_params, --param k=v)
    axes: tuple[tuple[str, str], ...] = ()
    precision: str = "default"  # the precision it trains at (trainables/precision.py): `crossover predict --precision`

    def __post_init__(self):
        for flag, value in (("--epochs", self.epochs), ("--dataset-size", self.samples), ("--trials", self.trials)):
            if value is not None and value < 1:
                raise ValueError(f"{flag} must be >= 1, got {value} (the planned run)")
        for axis, value in self.axes:
            if not axis:
                raise ValueError(f"--param ={value}: the axis's name is empty; write --param NAME=VALUE, e.g. "
                                 "--param image_size=32")
            if axis in AXIS_FLAGS and not (str(value).isdigit() and int(value) >= 1):
                raise ValueError(f"{AXIS_FLAGS[axis]} must be a whole number >= 1, got {value!r} (the planned run)")

    @property
    def named(self) -> dict[str, str]:
        return dict(self.axes)


# The axes a planned run names with a flag of their own; any other (lr, loop, a workload's own) with --param.
AXIS_FLAGS = {"batch_size": "--batch-size", "width": "--width", "depth": "--depth", "context": "--context"}
AXIS_NAMES = {"batch_size": "batch sizes", "width": "widths", "depth": "depths", "context": "context lengths"}


def _text(value) -> str:
    """A value as the rows and the flags both write it: 128, 0.1, fast, true ('128.0' and '128' alike)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float, np.number)):
        return "-" if pd.isna(value) else f"{float(value):g}"
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def _params(text) -> dict:
    """A row's workload_params (JSON) as a dict; {} where null."""
    return json.loads(text) if isinstance(text, str) and text else {}


def _axis_values(rows: pd.DataFrame, axis: str, samples: int) -> pd.Series:
    """Each row's value of `axis` as text: a column of the configuration, or a workload's own axis (null
    where the row lacks it); a whole-dataset batch (`_shaped`'s full_batch) is the planned size's."""
    if axis == "batch_size":
        return rows["batch_size"].map(_text).where(~rows["full_batch"], _text(samples))
    if axis in SHAPE:
        return rows[axis].map(_text)
    params = rows["workload_params"].map(_params) if "workload_params" in rows else pd.Series([{}] * len(rows), index=rows.index)
    return params.map(lambda p: _text(p[axis]) if axis in p else "-")


def _flag(axis: str, value: str) -> str:
    return f"{AXIS_FLAGS[axis]} {value}" if axis in AXIS_FLAGS else f"--param {axis}={value}"


def _listed(values: list[str], word: str) -> str:
    """'32 and 128', '16, 32 and 128' (word 'and'), or with 'or'."""
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} {word} {values[-1]}"


def _sorted(values) -> list[str]:
    numbers = all(v.replace(".", "", 1).replace("e", "", 1).replace("-", "").isdigit() for v in values)
    return sorted(values, key=float) if numbers else sorted(values)


def planned_rows(rows: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """The ok rows (`_shaped`) of the planned run's one configuration: its workload's rows at every value
    it names. Where they still hold several configurations, refused in one line that lists them and the
    flags that pick one; a shape is never priced as the sum of several."""
    ok = _shaped(eager_ok(rows))
    present = sorted(ok["workload"].unique())
    workload = plan.workload or present[0]
    if plan.workload is None and len(present) > 1:
        raise ValueError(f"--workload is needed with --epochs/--dataset-size: the rows hold {len(present)} "
                         f"workloads ({', '.join(present)}); name the one your run trains, e.g. --workload {present[0]}")
    if workload not in present:
        raise ValueError(f"--workload {workload}: no ok row of it in the results read (workloads there: "
                         f"{', '.join(present)}); sweep it first or pick one of those")
    mine = ok[ok["workload"] == workload]
    params = sorted({k for p in mine.get("workload_params", pd.Series(dtype=object)).map(_params) for k in p})
    for axis, value in plan.axes:
        if axis not in SHAPE and axis not in params:
            raise ValueError(f"{_flag(axis, value)}: {workload}'s rows have no axis {axis!r}; its axes are "
                             f"{', '.join(a for a in SHAPE if a != 'workload')}{', ' if params else ''}{', '.join(params)}")
        held = _axis_values(mine, axis, plan.samples)
        if not held.eq(_text(value)).any():
            raise ValueError(f"{_flag(axis, value)}: the rows of {workload} hold {AXIS_NAMES.get(axis, axis)} "
                             f"{_listed(_sorted(held.unique()), 'and')} only; give one of those, or sweep that one first")
        mine = mine[held.eq(_text(value))]
    varied = {a: _sorted(v.unique()) for a in [c for c in SHAPE if c != "workload"] + params
              if (v := _axis_values(mine, a, plan.samples)).nunique() > 1}
    if varied:
        held = ", and ".join(f"{AXIS_NAMES.get(a, a + ' values')} {_listed(v, 'and')}" for a, v in varied.items())
        give = ", and ".join(_listed([_flag(a, x) for x in v], "or") for a, v in varied.items())
        raise ValueError(f"the rows hold {held}: give {give} (the planned run is one configuration of {workload})")
    return mine


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
    def unreliable(self) -> bool:
        """Extrapolated along a line whose error (its RMS relative residual) exceeds the figure itself."""
        return self.side in ("past", "below") and math.isfinite(self.spread) and self.spread > 1

    @property
    def reach(self) -> str:
        """Where N lies against the measured sizes, in a few words: 'inside 1,000-100,000', '10x past 100,000 ±2.0%';
        where the line's error exceeds its figure, 'unreliable: measure nearer 50,000 (6.1x past 8,192 ±410%)'."""
        if self.side == "measured":
            return "measured"
        if self.side == "inside":
            return f"inside {self.low:,.0f}-{self.high:,.0f}"
        how = (" per sample" if self.how == "per sample" else
               f" ±{self.spread:.1%}" if math.isfinite(self.spread) else "")
        said = f"{self.factor:,.3g}x {self.side} {self.high if self.side == 'past' else self.low:,.0f}{how}"
        if self.unreliable:
            n = self.high * self.factor if self.side == "past" else self.low / self.factor
            return f"unreliable: measure nearer {n:,.0f} ({said})"
        return said


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
    """The planned run as a sweep of one line (config_key: its shape, `planned_rows`), at the plan's
    epochs and dataset size, run once or plan.trials times."""
    mine = planned_rows(rows, plan)
    grid = (mine.groupby("shape", sort=True)
            .agg(workload=("workload", "first"), warmup_epochs=("warmup_epochs", "max"), full_batch=("full_batch", "first"),
                 **{a: (a, "first") for a in SIZE_AXES})
            .reset_index().rename(columns={"shape": "config_key"}))
    grid = grid.assign(epochs=plan.epochs, dataset_size=plan.samples,
                       batch_size=grid["batch_size"].where(~grid["full_batch"], plan.samples),
                       trials=plan.trials or 1)
    return grid.assign(config=sizes_label(grid))


def counted_grid(counted: dict, plan: Plan) -> pd.DataFrame:
    """The planned run as a sweep of one line (config_key 'run'), from a step counted without rows
    (sweeps/predict.py): what `table` and `records` price beside `at_plan`'s speeds."""
    return pd.DataFrame([{"config_key": "run", "workload": counted["workload"], "epochs": plan.epochs,
                          "warmup_epochs": 0, "trials": 1, "full_batch": False,
                          **{a: counted.get(a) for a in SIZE_AXES}, "dataset_size": plan.samples}])


def _points(group: pd.DataFrame) -> pd.DataFrame:
    """Measured rows as one point per dataset size: median epoch time (no interval: epoch_lo and epoch_hi
    the same), and median fixed seconds of a run besides its epochs (set-up, transfer, evaluation, and
    what the warm-up epochs took beyond steady ones)."""
    parts = group[["setup_s", "h2d_s", "eval_s"]].sum(axis=1)
    beyond = (group["warmup_s"] - group["warmup_epochs"] * group["epoch_s_median"]).fillna(0)
    points = (group.assign(epoch_s=group["epoch_s_median"], fixed_s=parts + beyond)
              .groupby("dataset_size", as_index=False)[["epoch_s", "fixed_s"]].median())
    return points.assign(epoch_lo=points["epoch_s"], epoch_hi=points["epoch_s"], modelled=False)


def _guessed(guess: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """analysis/model/'s predictions as points: its epoch time and interval, and the fixed seconds the
    measured rows of the same configuration took (the warm-up counted as a steady epoch, as `speeds` does)."""
    fixed = measured.assign(f=measured[["setup_s", "h2d_s", "eval_s"]].sum(axis=1)).groupby("config_key")["f"].median()
    ends = {e: guess[c] if c in guess else guess["epoch_s_median"] for e, c in (("epoch_lo", "epoch_s_lo"), ("epoch_hi", "epoch_s_hi"))}
    points = guess.assign(epoch_s=guess["epoch_s_median"], fixed_s=guess["config_key"].map(fixed).fillna(0), **ends)
    points = points.assign(epoch_lo=points["epoch_lo"].fillna(points["epoch_s"]), epoch_hi=points["epoch_hi"].fillna(points["epoch_s"]))
    return (points.groupby("dataset_size", as_index=False)[["epoch_s", "fixed_s", "epoch_lo", "epoch_hi"]].median()
            .assign(modelled=True))


def _planned(points: pd.DataFrame, plan: Plan) -> dict:
    """The planned run's time from one source's points, its interval (the model's, carried along the
    same lines; the fixed seconds are measured), and where plan.samples lies against the points."""
    points = points.sort_values("dataset_size", ignore_index=True)
    sizes = points["dataset_size"].to_numpy(float)
    epoch, lo, hi = (along(sizes, points[c].to_numpy(float), plan.samples) for c in ("epoch_s", "epoch_lo", "epoch_hi"))
    fixed = max(along(sizes, points["fixed_s"].to_numpy(float), plan.samples).value, 0.0)
    modelled = bool(points["modelled"].to_numpy()[list(epoch.used)].any())
    outside = epoch.side in ("past", "below")
    return {"trial_s": fixed + plan.epochs * epoch.value, "trial_lo": fixed + plan.epochs * min(lo.value, epoch.value),
            "trial_hi": fixed + plan.epochs * max(hi.value, epoch.value), "epoch_s": epoch.value,
            "epoch_lo": min(lo.value, epoch.value), "epoch_hi": max(hi.value, epoch.value), "predicted": modelled or outside,
            "modelled": modelled, "extrapolated": outside, "unreliable": epoch.unreliable, "factor": epoch.factor,
            "spread": epoch.spread,
            "reach": epoch.reach}


def planned_step(rows: pd.DataFrame, plan: Plan, count=None) -> tuple[pd.DataFrame | None, str]:
    """The planned configuration's one step and its counted costs (one line: the configuration's columns and
    model.CLASS_COLUMNS), what `at_plan` predicts the GPUs from, and a note where it is not `count`'s. `count(ref,
    plan, line)`: the step counted as `crossover predict` counts it (sweeps/predict.py count_planned, in a process of
    its own; `crossover decide` passes it), for the job the rows name (workload_module; a built-in's by its name);
    where it fails or is not given, the count a row of the configuration made (the CPU's first). None: the rows
    hold no count of every op class, or the batch is the whole dataset (it grows with the run's size)."""
    mine = planned_rows(rows, plan)
    if mine["full_batch"].any():
        return None, ""
    line = mine.sort_values("is_cpu", ascending=False, kind="stable").iloc[0]
    note = ""
    module = line.get("workload_module")
    if count is not None and isinstance(module, str) and module:  # rows that name no job have only their own count
        ref = line["workload"] if module == BUILTIN_MODULE else module
        try:
            return pd.DataFrame([count(ref, plan, line.to_dict())]), ""
        except ValueError as exc:
            note = (f"  the planned step was not counted as crossover predict counts it ({exc}); the GPUs are "
                    "predicted from the step a row counted")
    counted = mine[mine[list(model.CLASS_COLUMNS)].notna().all(axis=1)] if set(model.CLASS_COLUMNS) <= set(mine) \
        else mine.iloc[:0]
    if counted.empty:
        return None, note
    return counted.sort_values("is_cpu", ascending=False, kind="stable").head(1), note


def at_plan(config_key: str, counted: pd.DataFrame, plan: Plan, gpus: list[str]) -> pd.DataFrame:
    """analysis/model/'s prediction of the planned configuration itself on each GPU of `gpus` its device table
    knows, as `speeds` lines (SPEED, and a planned run's columns): the step of `counted` (`planned_step`, counted at
    the run's batch size), plan.samples' steps an epoch, at plan.precision; the run's time plan.epochs x the time
    per epoch, on the GPU alone (nothing of it was timed: no set-up, transfer or evaluation). What `crossover
    predict` and `decide` both price a GPU no row measured at that configuration by, so that both say one figure."""
    batch = int(counted["batch_size"].iloc[0])
    configs = counted.assign(dataset_size=plan.samples, steps_per_epoch=-(-plan.samples // batch),
                             precision=plan.precision)
    known = [g for g in gpus if g in model.load_devices()]
    guess = model.predict_counted(configs, known) if known else pd.DataFrame(columns=["device_name"])
    needs = memory_needed(configs, plan.samples, False)
    return pd.DataFrame([{
        "config_key": config_key, "source": g.device_name, "k": 1, "predicted": True, "hosts": "", "date": pd.NaT,
        "busy": "", "power_w": math.nan, "threads": math.nan, **needs, "modelled": True, "extrapolated": False,
        "unreliable": False, "factor": 1.0, "spread": math.nan, "reach": OWN_SIZE,
        **{f"trial{end}": plan.epochs * v for end, v in (("_s", g.epoch_s_median), ("_lo", g.epoch_s_lo),
                                                           ("_hi", g.epoch_s_hi))},
        "epoch_s": g.epoch_s_median, "epoch_lo": g.epoch_s_lo, "epoch_hi": g.epoch_s_hi} for g in guess.itertuples()],
        columns=SPEED + PLANNED)


OWN_SIZE = "predicted at its own size"  # a planned run's `reach` where the model predicted that configuration itself
PLANNED = ["modelled", "extrapolated", "unreliable", "factor", "spread", "reach", "epoch_s", "epoch_lo", "epoch_hi"]


def corrected(line: dict, points: pd.DataFrame, plan: Plan, batch: int) -> dict:
    """`at_plan`'s line for a GPU whose rows measured the configuration at other dataset sizes, scaled by what
    they measured against what the model says at the nearest of them (the same step, that size's steps an
    epoch); its interval scaled alike, and its reach naming the size the correction rests on."""
    near = points.iloc[(points["dataset_size"] - plan.samples).abs().argsort()[:1]].iloc[0]
    said = line["epoch_s"] * -(-int(near["dataset_size"]) // batch) / -(-plan.samples // batch)
    scale = float(near["epoch_s"]) / said if said > 0 else 1.0
    scaled = {c: line[c] * scale for c in ("trial_s", "trial_lo", "trial_hi", "epoch_s", "epoch_lo", "epoch_hi")}
    return line | scaled | {"reach": f"{OWN_SIZE}, x{scale:.2g} as measured at {near['dataset_size']:,.0f}"}


def plan_speeds(rows: pd.DataFrame, predicted: pd.DataFrame, grid: pd.DataFrame, gpus: list[str],
                plan: Plan, counted: pd.DataFrame | None = None) -> pd.DataFrame:
    """`speeds` for the planned run: per shape and GPU model or CPU arm, the run's time at plan.samples.
    A GPU's own rows (your machine's first) at plan.samples, or around it (the line between the two sizes
    around it), give the measurement, at PyTorch's default precision (the rows'); elsewhere the model's
    prediction of the configuration itself (`at_plan`, from `counted`: `planned_step`), scaled by the GPU's
    rows at other sizes where it has some (`corrected`); without a count of every op class, the model's
    predictions at the sizes measured, along them (`along`). A CPU's rows along the sizes they measured."""
    ok = planned_rows(rows, plan)
    pred = _keyed(predicted)
    pred = pred.assign(shape=pred["config_key"].map(dict(zip(ok["config_key"], ok["shape"]))))
    lines = []
    for line in grid.itertuples():
        at = ok[ok["shape"] == line.config_key]
        needs = memory_needed(at, plan.samples, line.full_batch)
        gpu_rows = at[at["whole_gpu"]]  # one run holds a whole GPU: packed rows (cuda/K) left aside
        own = at_plan(line.config_key, counted, plan, gpus) if counted is not None else pd.DataFrame(columns=SPEED)
        for gpu in gpus:
            mine = gpu_rows[[measures(n, gpu) for n in gpu_rows["device_name"]]]
            mine = pd.concat([_yours_first(g) for _, g in mine.groupby("config_key")]) if len(mine) else mine
            points = _points(mine) if len(mine) and plan.precision == "default" else pd.DataFrame()
            sizes = points.get("dataset_size", pd.Series(dtype=float))
            covered = len(points) and (sizes.eq(plan.samples).any() or sizes.min() < plan.samples < sizes.max())
            guessed = own[own["source"] == gpu]
            if not covered and len(guessed):
                said = guessed.iloc[0].to_dict()
                said = corrected(said, points, plan, int(line.batch_size)) if len(points) else said
                measured_peak = str(needs["needs_how"]).startswith("peak measured")  # a GPU's peak beats a count
                lines.append(said | (needs if measured_peak else {}))
                continue
            guess = pred[(pred["shape"] == line.config_key) & (pred["device_name"] == gpu)]
            guess = guess[~guess["dataset_size"].isin(sizes)]  # a measured size wins
            if len(guess) and not covered:
                points = pd.concat([points, _guessed(guess, gpu_rows if len(gpu_rows) else at)], ignore_index=True)
            if len(points):
                where = (_measured(line.config_key, gpu, 0.0, mine) if len(mine) else
                         {"hosts": "", "date": pd.NaT, "busy": ""})
                lines.append(where | {"config_key": line.config_key, "source": gpu, "k": 1, **_planned(points, plan),
                                      "power_w": _power_w(mine) if len(mine) else math.nan, **needs})
        for (cpu, threads), group in at[at["is_cpu"]].groupby(["device_name", "torch_threads"]):
            group = pd.concat([_yours_first(g) for _, g in group.groupby("config_key")])
            lines.append(_measured(line.config_key, f"{cpu}, {threads:.0f} threads", 0.0, group)
                         | {"k": 1, **_planned(_points(group), plan), "power_w": _power_w(group, "cpu_energy_j"),
                            "threads": int(threads), "own": not all(map(is_reference, group["results_dir"])), "cpu": "CPU"})
    return pd.DataFrame(lines, columns=SPEED + PLANNED)


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
                "epoch_lo": float(worst["epoch_lo"]), "epoch_hi": float(worst["epoch_hi"])}
    if "needs_bytes" in at and at["needs_bytes"].notna().any():  # the sweep's largest configuration decides
        largest = at.loc[at["needs_bytes"].idxmax()]
        run |= {"needs_bytes": float(largest["needs_bytes"]), "needs_how": largest["needs_how"]}
    elif "needs_how" in at and at["needs_how"].notna().any():
        run |= {"needs_bytes": math.nan, "needs_how": at["needs_how"].dropna().iloc[0]}
    return run


def _figures(run: dict, priced) -> dict:
    """wall_s and usd of a run, and either end of their interval: priced(run seconds) -> (wall_s, usd)."""
    out = {}
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
    out = {}
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
          boxes: list[HomeBox], own: dict[str, int] | None = None, power: Electricity = Electricity()) -> pd.DataFrame:
    """Every option's wall time and cost for the sweep, each with its interval (the same figure where
    measured): your CPU and your GPUs (`own`: own_gpus; their electricity, `power`), the rented instances,
    the home boxes; options without a speed for every configuration left out. A GPU option says whether
    the run fits its card (fits; null where its memory or the run's need is not known)."""
    lines = []
    cards = {k: d.memory_gb for k, d in model.load_devices().items()}
    cpus = speed[speed["threads"].notna()].drop_duplicates("source")
    for cpu in cpus.itertuples():
        run = _run(grid, speed[speed["source"] == cpu.source], 0)
        if run and cpu.own:
            lines.append(_yours(f"CPU, {cpu.threads:.0f} threads", OWN_CPU, cpu.cpu, 0, run, cpu.source, power.cpu_w, power))
        for o in _smallest_cpus(options, int(cpu.threads)):
            lines += _rented(o, billing[o.provider], run, f"{o.vcpus} vCPUs as fast as the measured {cpu.source}") if run else []
    for gpu, count in (own or {}).items():
        run = _run(grid, speed[speed["source"] == gpu], count)
        if run:
            lines.append(_yours(gpu if count == 1 else f"{count} x {gpu}", OWN_GPU, gpu, count, run,
                                f"{count} x {gpu} on {run['hosts'] or 'your machine'}", power.gpu_w, power)
                         | card_fits(run, cards.get(gpu)))
    for o in (o for o in options if o.gpu):
        run = _run(grid, speed[speed["source"] == o.gpu], o.gpus)
        lines += [line | card_fits(run, cards.get(o.gpu)) for line in
                  (_rented(o, billing[o.provider], run, f"{o.gpus} x {o.gpu}, rented whole") if run else [])]
    for box in boxes:
        run = _run(grid, speed[speed["source"] == box.gpu], 1)
        if run:
            lines.append(_home(box, run) | card_fits(run, box.memory_gb or cards.get(box.gpu)))
    out = pd.DataFrame(lines)
    if out.empty:
        return out
    if "fits" not in out:
        out = out.assign(fits=None)
    return out.sort_values(["usd", "wall_s"], ignore_index=True)


def fitting(options: pd.DataFrame) -> pd.Series:
    """Whether each option may run it: every CPU, and every GPU but those whose card it does not fit."""
    return ~options["fits"].eq(False) if "fits" in options else pd.Series(True, index=options.index)


def _smallest_cpus(options: list[Option], threads: int) -> list[Option]:
    """Per provider, the smallest CPU instance with at least `threads` vCPUs."""
    smallest = {}
    for o in sorted((o for o in options if o.gpus == 0 and o.vcpus >= threads), key=lambda o: o.vcpus):
        smallest.setdefault(o.provider, o)
    return list(smallest.values())


def _rented(o: Option, bill: Billing, run: dict, basis: str) -> list[dict]:
    return [{"option": o.name + (" (spot)" if kind == "spot" else ""), "kind": kind, "model": o.gpu or "CPU",
             "gpus": o.gpus, **run, **_figures(run, lambda s, p=p: (bill.startup_s + s, p.usd_per_h * bill.charged_s(bill.startup_s + s) / 3600)),
             "basis": f"{basis}; {bill.startup_s:.0f} s start-up; billed per {bill.step_s:g} s, at least {bill.minimum_s:g} s"
                      + (f"; stale price of {p.date}" if p.is_stale(dt.date.today()) else ""),
             "price_date": p.date, "price_source": p.source, "price_stale": p.is_stale(dt.date.today())}
            for kind, p in o.prices()]


def _home(box: HomeBox, run: dict) -> dict:
    measured = not math.isnan(run["power_w"])
    power = run["power_w"] if measured else box.power_w
    per_h = box.fixed_usd_per_month / (box.utilisation * HOURS_PER_MONTH) + power / 1000 * box.electricity_usd_per_kwh
    energy = power / 1000 * run["run_s"] / 3600 * box.electricity_usd_per_kwh
    what = (f"measured GPU power {power:.0f} W (gpu_energy_j)" if measured else f"nominal power {power:.0f} W (power_w)")
    return {"option": box.name, "kind": HOME_BOX, "model": box.gpu, "gpus": 1, **run,
            **_figures(run, lambda s: (s, per_h * s / 3600)), "energy_usd": energy,
            "fixed_usd_per_month": box.fixed_usd_per_month, "for_sale": not box.record, "price_date": box.purchase_date,
            "price_source": box.purchase_source, "price_stale": box.is_stale(dt.date.today()),
            "purchase_usd": box.purchase_usd, "lifetime_years": box.lifetime_years, "utilisation": box.utilisation,
            "basis": f"write-off at {box.utilisation:.0%} utilisation + electricity at {what}"}


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
    record of what a box cost once (cost.HomeBox.record), the one that pays for itself at the fewest runs a month
    against the cheapest on-demand GPU, `break_even`; its line carries that
    break-even: even_n runs a month, even_against, even_against_usd, even_predicted), your own CPU, and your own
    GPU (the fastest) where the rows measured one; None where the options hold none of that kind."""
    ok = options[fitting(options)]
    rented = ok[(ok["kind"] == "on-demand") & (ok["gpus"] > 0)]
    fastest = rented.sort_values(["wall_s", "usd"]).iloc[0] if len(rented) else None
    cheapest = rented.sort_values(["usd", "wall_s"]).iloc[0] if len(rented) else None
    out = {RENT_FASTEST: fastest}
    if cheapest is not None and cheapest["option"] != fastest["option"]:
        out[RENT_CHEAPEST] = cheapest
    sale = ok.loc[(ok["kind"] == HOME_BOX) & ok["for_sale"].eq(True), "option"]
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


def bought(line, unit: str) -> str:
    """What buying the box means: its break-even in runs a month against renting, and what its write-off
    assumes ('pays for itself past ~680 runs a month against RunPod RTX 4090 community ($0.02 a run); write-off:
    $3,900 over 4 years, training 25% of each month, + electricity')."""
    assumes = (f"write-off: ${line['purchase_usd']:,.0f} over {line['lifetime_years']:g} years, training "
               f"{line['utilisation']:.0%} of each month, + electricity")
    if "even_n" not in line:
        return assumes
    n, guessed = line["even_n"], bool(line["even_predicted"])
    when = (f"never pays for itself: its electricity a {unit} costs more than renting" if math.isinf(n) else
            f"pays for itself past {'~' if guessed else ''}{significant(n, 2 if guessed else 3)} "
            f"{unit}s a month against renting {line['even_against']} (${cents(line['even_against_usd'])} a {unit})")
    return f"{when}; {assumes}"


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


def _range(line, columns: tuple[str, str, str], figure, end) -> str:
    """A predicted figure and its interval: '4.82 (3.9-6.1)'; the figure alone where both ends round alike."""
    mid = figure(line[columns[0]])
    lo, hi = (end(line[c]) if c in line and pd.notna(line[c]) else end(line[columns[0]]) for c in columns[1:])
    return mid if lo == hi else f"{mid} ({lo}-{hi})"


def money(line) -> str:
    """'$0.31', or where it rests on a prediction '~$0.31 (0.25-0.40)'; $0 is exact."""
    if line["usd"] == 0 or not line["predicted"]:
        return f"${cents(line['usd'])}"
    return "~$" + _range(line, ("usd", "usd_lo", "usd_hi"), cents, cents)


def cents(v: float) -> str:
    """Dollars to the cent, or to two figures below a cent (a CPU's electricity: 0.0024)."""
    return f"{v:,.2f}" if v == 0 or abs(v) >= 0.01 else np.format_float_positional(v, precision=2, fractional=False)


def _two(v: float) -> str:
    """An interval's end to two figures, without an exponent: 0.91, 13, 430."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.2g}"


def run_time(line) -> str:
    """'4.82 min', '1.5 h', or where it rests on a prediction '~4.82 min (3.9-6.1)'."""
    scale, unit = (60, "min") if line["wall_h"] < 1 else (1, "h")
    figure = lambda h: f"{h * scale:,.3g}"  # noqa: E731
    if not line["predicted"]:
        return f"{figure(line['wall_h'])} {unit}"
    mid, _, interval = _range(line, ("wall_h", "wall_lo_h", "wall_hi_h"), figure, lambda h: _two(h * scale)).partition(" ")
    return f"~{mid} {unit}" + (f" {interval}" if interval else "")


def source(line, short: bool = False) -> str:
    """Where an option's figures come from: 'measured on vm, 2026-11-21'; 'predicted' where wholly the
    model's; '62% predicted; measured on vm, 2026-11-21' where some configurations were measured (the
    share of its GPU-time that is predicted). `short`: '62% predicted; vm, 2026-11-21'. Your own machine's
    adds what its electricity is costed at: '...; electricity: RAPL 41 W' (measured), or 'nominal 65 W';
    rows timed on a busy host add their mark (`busy`): '... [busy]'."""
    power = line.get("electricity")
    power = (f"; electricity: {power}" if isinstance(power, str) and power else "") + _busy_mark(line)
    share = line.get("predicted_share", float(line["predicted"]))
    if share >= 1 - 1e-9:
        return "predicted" + power
    when = line.get("measured_at", pd.NaT)
    where = ", ".join(filter(None, [line.get("hosts") or "", f"{when:%Y-%m-%d}" if pd.notna(when) else ""]))
    said_where = ("" if short and share > 0 else "measured") + (" on " if where and not (short and share > 0) else "") + where
    return (f"{share:.0%} predicted; {said_where}".rstrip("; ") if share > 0 else said_where) + power


def _busy_mark(line) -> str:
    said = line.get("busy", "")
    return said if isinstance(said, str) else ""


def per_epoch(line) -> str:
    """A planned run's time per epoch: '9.41 s/epoch', or where it rests on a prediction '~9.41 s/epoch (4.7-19)'."""
    figure = lambda v: f"{v:,.3g}"  # noqa: E731
    if not line["predicted"]:
        return f"{figure(line['epoch_s'])} s/epoch"
    mid, _, interval = _range(line, ("epoch_s", "epoch_lo", "epoch_hi"), figure, _two).partition(" ")
    return f"~{mid} s/epoch" + (f" {interval}" if interval else "")


def memory(line) -> str:
    """Whether the run fits a GPU option's card: 'fits: ~0.87 GB of 80', 'does not fit: needs ~31 GB of 16',
    'not known'; '' for a CPU."""
    if not line.get("gpus", 0) or "fits" not in line:
        return ""
    if line["fits"] is None or pd.isna(line["fits"]):
        return "not known" + ("" if pd.isna(line.get("memory_gb")) else f": ? of {line['memory_gb']:g} GB")
    said = f"~{line['needs_gb']:,.2g} GB of {line['memory_gb']:g}"
    return f"fits: {said}" if line["fits"] else f"does not fit: needs {said}"


def said(line) -> str:
    """An option in a few words: 'RTX 5090 box, ~0.147 min (0.12-0.19), ~$0.01' ('~': predicted, 90% interval);
    a planned run's with its time per epoch first: 'RTX 5090 box, ~9.5 s/epoch (4.8-19), ~4.78 min ...'."""
    epoch = f"{per_epoch(line)}, " if pd.notna(line.get("epoch_s", math.nan)) else ""
    return f"{line['option']}, {epoch}{run_time(line)}, {money(line)}"


def _fit(text: str) -> str:
    """One line of at most WIDTH columns, cut with '…' where longer."""
    return text if len(text) <= WIDTH else text[:WIDTH - 1] + "…"


def header(grid: pd.DataFrame, plan: Plan | None) -> str:
    if plan:
        return _planned_header(grid, plan)
    trials = int(grid["trials"].sum())
    return (f"== the sweep: {trials:,} trials, {len(grid)} configurations: "
            f"{', '.join(f'{w} {n:,}' for w, n in grid.groupby('workload')['trials'].sum().items())}")


def _planned_header(grid: pd.DataFrame, plan: Plan) -> str:
    """'30 epochs of 50,000 samples of resnet18_cifar, batch 128', and its other sizes and named axes."""
    line = grid.iloc[0]
    sizes = [f"{'batch' if a == 'batch_size' else a} {line[a]:,.0f}" for a in SIZE_AXES
             if a != "dataset_size" and pd.notna(line[a])]
    sizes += [f"{a} {v}" for a, v in plan.axes if a not in SIZE_AXES]
    full = " (one batch: the whole dataset)" if line["full_batch"] else ""
    runs = f", {plan.trials:,} runs of it" if plan.trials and plan.trials > 1 else ""
    precision = (f", precision {plan.precision} on the GPUs (the CPU's as measured, PyTorch's default)"
                 if plan.precision != "default" else "")
    return (f"== the planned run: {plan.epochs:,} epochs of {plan.samples:,} samples of {line['workload']}{full}, "
            f"{', '.join(sizes)}{runs}{precision} ==")


def cards(options: pd.DataFrame) -> str:
    """One line: what the run needs of a GPU's memory, how that was found, and the cards it does not fit."""
    gpu = options[(options["gpus"] > 0) & options["needs_gb"].notna()] if "needs_gb" in options else options.iloc[:0]
    if gpu.empty:
        return ""
    need = gpu.loc[gpu["needs_gb"].idxmax()]
    small = gpu[gpu["fits"].eq(False)].drop_duplicates(["model", "memory_gb"])
    said = ", ".join(f"{o.model} ({o.memory_gb:g} GB)" for o in small.itertuples())
    return (f"GPU memory: needs ~{need['needs_gb']:,.2g} GB ({need['needs_how']}, + {CONTEXT_BYTES / 1e9:g} GB CUDA "
            f"context): " + (f"does not fit {said}, left out of the picks" if said else "fits every card offered"))


def brief(options: pd.DataFrame, grid: pd.DataFrame, picks: dict, notes: list[str], plan: Plan | None = None,
          head: tuple[str, ...] = (), lines: int = BRIEF_LINES) -> str:
    """The decision in at most `lines` lines of at most WIDTH columns (`python -m crossover.analysis decide`):
    `head` (wrapped), the sweep, what it needs of a GPU's memory and the cards it does not fit, the three picks
    (`three`: the GPU to rent, fastest and cheapest; the box to buy, with its break-even and what its write-off
    assumes; your CPU), each with its time per epoch (a planned run), run time and cost, the cheapest within the
    deadline where one was asked, the cost-versus-time front where lines are left, the stale prices in one line,
    what each busy mark means, what --verbose adds. Every figure is marked: '~' and its 90% interval where it
    rests on a prediction, and its source."""
    top = [w for h in head if h for w in textwrap.wrap(h, WIDTH, subsequent_indent="    ")] + [_fit(header(grid, plan))]
    dated = [n.strip() for n in notes if n.strip().startswith(STALE)]
    rest = len(notes) - len(dated)
    if options.empty:
        unit = "run" if plan else "sweep"
        return "\n".join(top + [f"no option has a measured or predicted time for every configuration of the {unit}"]
                         + [_fit(n.strip()) for n in notes][:max(lines - len(top) - 1, 0)])
    top += [w for w in textwrap.wrap(cards(options), WIDTH, subsequent_indent="    ")]
    more = (f"--verbose (and the report): all {len(options)} options, the break-even, how each is costed"
            + (f", {rest} notes" if rest else ""))
    chosen = three(options) | {k: v for k, v in picks.items() if k.startswith("cheapest within")}
    said_picks, named = [], {}
    for name, line in chosen.items():  # each wraps rather than lose its end; an option named again is not said again
        again = None if line is None else named.setdefault(line["option"], name)
        text = ("none" if line is None else f"{line['option']}, as {again} above" if again != name else
                f"{said(line)}; {how_known(line, plan, picked=True)}"
                + (f"; {bought(line, 'run' if plan else 'sweep')}" if name == BUY else ""))
        said_picks += textwrap.wrap(f"{name}: {text}", WIDTH, subsequent_indent="    ")
    tail = [_fit(d) for d in dated + busy_notes(options)] + [_fit(more)]
    front = options[pareto(options)].sort_values(["wall_s", "usd"])
    room = lines - len(top) - len(said_picks) - len(tail) - 1
    shown = front.head(max(room, 0))
    if not len(shown):
        return "\n".join(top + said_picks + tail)
    said_front = ("the cost-versus-time front, fastest first" +
                  (f" ({len(shown)} of {len(front)}; --verbose shows all):" if len(front) > room else ":"))
    cells = [(o["option"],) + ((per_epoch(o),) if plan else ()) + (run_time(o), money(o), how_known(o, plan))
             for _, o in shown.iterrows()]
    n = len(cells[0]) - 1
    widths = [min(max(len(c[i]) for c in cells), 34) for i in range(n)]
    body = [_fit("  " + "  ".join(c[i][:widths[i]].ljust(widths[i]) for i in range(n)) + "  " + c[n]) for c in cells]
    return "\n".join(top + said_picks + [said_front] + body + tail)


def how_known(line, plan: Plan | None, short: bool = True, picked: bool = False) -> str:
    """`source` (`short`; a pick's: 'measured', 'predicted', '62% predicted'), and for a planned run
    where its size lies outside the sizes measured; an extrapolation whose error exceeds its figure is
    'unreliable: measure nearer N (...)' alone, never 'measured'. A busy host's mark stays."""
    reach = line.get("reach", "measured") if plan else "measured"
    unreliable = line.get("unreliable", False)
    if plan and pd.notna(unreliable) and bool(unreliable):
        return reach + _busy_mark(line)
    said_source = source(line, short)
    if picked:
        said_source = (said_source.split(";")[0].split(" [busy")[0] if "predicted" in said_source else "measured") \
            + _busy_mark(line)
    if isinstance(reach, str) and reach.startswith(OWN_SIZE):  # 'predicted' says it; a correction is named
        return said_source + reach[len(OWN_SIZE):]
    return said_source + ("" if reach == "measured" or pd.isna(reach) else f"; {reach}")


def render(options: pd.DataFrame, grid: pd.DataFrame, picks: dict, even: pd.DataFrame, notes: list[str],
           plan: Plan | None = None) -> str:
    """The whole decision as text (--verbose, the report): the sweep (or the planned run), every option
    (predicted figures marked '~' with their interval, every option's source), the picks, the break-even,
    how each option is costed, the notes."""
    unit = "run" if plan else "sweep"
    parts = [header(grid, plan)]
    if options.empty:
        return "\n".join(parts + [f"no option has a measured or predicted time for every configuration of the {unit}"] + notes)
    shown = options.assign(wall=options.apply(run_time, axis=1), cost=options.apply(money, axis=1),
                           memory=options.apply(memory, axis=1), source=options.apply(source, axis=1),
                           front=pareto(options).map({True: "*", False: ""}),
                           precision=options.apply(precision_of, axis=1, plan=plan),
                           price=options.apply(priced_on, axis=1))
    if plan:
        why = shown["modelled"].map({True: ["model"], False: []}) + shown["extrapolated"].map({True: ["extrapolated"], False: []})
        shown = shown.assign(predicted=why.map(", ".join), **{"dataset size": shown["reach"]},
                             epoch=options.apply(per_epoch, axis=1))
        columns = ["option", "kind", "model", "gpus", "precision", "epoch", "wall", "cost", "memory", "predicted",
                   "dataset size", "source", "price", "front"]
    else:
        columns = ["option", "kind", "model", "gpus", "packed", "wall", "cost", "memory", "source", "price", "front"]
    parts.append(shown[columns].to_string(index=False))
    parts.append("  ~: rests on analysis/model/'s prediction for a GPU no row measured, its 90% interval in brackets" +
                 (" (model), or on a time extrapolated outside the dataset sizes measured" if plan else "") +
                 "; *: on the cost-versus-time front; source: where the rows were measured, and the share predicted"
                 "; memory: what the run needs of the card (peak measured or estimated, docs/cost.md) of its GB")
    parts += [f"  {line}" for line in [cards(options)] if line]
    if plan:
        parts.append(f"  dataset size: where {plan.samples:,} lies against the sizes the option's rows measured: inside "
                     f"(a line between the two around it), or Kx past the largest / below the smallest (a least-squares "
                     f"line over the {NEAREST} sizes nearest that end, ± its RMS residual; one size: its time per sample)")
    for name, line in picks.items():
        parts.append(f"{name}: " + ("none" if line is None else said(line)))
    parts += evens(even, unit) + [f"  {note}" for note in busy_notes(options)]
    parts.append("how each option is costed:")
    parts += [f"  {line}" for line in costed(options)]
    return "\n".join(parts + notes)


def significant(v: float, digits: int) -> str:
    """`v` to `digits` significant figures, without an exponent: 683.06 to two is '680', 0.04567 '0.046'. A
    figure resting on a prediction (a 90% interval of ±30% or more) carries two; a measured one three."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    places = digits - 1 - math.floor(math.log10(abs(v)))
    return f"{round(v, places):,.{max(places, 0)}f}"


def evens(even: pd.DataFrame, unit: str) -> list[str]:
    """Each home box's break-even against each class's best, a line each (`unit`: 'sweep' or 'run')."""
    lines = []
    for e in even.itertuples():
        digits = 2 if e.predicted else 3
        when = (f"never: its electricity per {unit} costs more" if math.isinf(e.sweeps_per_month) else
                f"beyond {'~' if e.predicted else ''}{significant(e.sweeps_per_month, digits)} {unit}s a month "
                f"({significant(e.box_hours_per_month, digits)} h of use)")
        lines.append(f"{e.box} against the {e.versus} ({e.against}, ${cents(e.against_usd)} a {unit}): cheaper {when}")
    return lines


def priced_on(line) -> str:
    """Where an option's price came from and when: 'of 2025-06 (runpod.io/pricing)', 'of 2024-05, STALE: re-read
    (aws.amazon.com/...)' past 12 months; '-' for your own machine (its electricity alone)."""
    date = line.get("price_date")
    if not isinstance(date, str) or not date:
        return "-"
    stale_mark = ", STALE: re-read" if bool(line.get("price_stale", False)) else ""
    return f"of {date}{stale_mark} ({line.get('price_source') or 'no source given'})"


def precision_of(line, plan: Plan | None) -> str:
    """The precision an option's figure is for: the planned run's on a GPU (predicted at it, or measured where the
    rows ran it); PyTorch's default on a CPU, the one its rows ran at."""
    return plan.precision if plan and line["gpus"] > 0 else "default"


def costed(options: pd.DataFrame) -> list[str]:
    """How each option is costed, a line per basis naming its options."""
    return [f"{basis}: {', '.join(group['option'])}" for basis, group in options.groupby("basis")]


def _plain(value):
    """A figure as JSON holds it: None where null, a Python number or bool."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return None
    return value.item() if isinstance(value, np.generic) else value


def records(options: pd.DataFrame, grid: pd.DataFrame, plan: Plan | None = None) -> list[dict]:
    """Every option's figures as plain values, one object each, in the table's order (`decide --json`, and
    any command that prices a run): option; kind; gpu (the GPU model, e.g. "H100"; None for a CPU) and gpus;
    the run's workload, epochs, precision, batch_size and dataset_size (None where the sweep holds several); epoch_s
    and its 90% interval epoch_s_low, epoch_s_high (a planned run only; the same figure where measured);
    run_s (wall time, a cloud's start-up included), usd, each with _low and _high; fits (None for a CPU
    or where not known), needs_gb, memory_gb; largest_batch and accumulate_steps (`crossover predict`, where the
    run does not fit: the largest batch that would, and the steps of it that make the run's batch); basis ("measured" or "predicted"), source, costed (how);
    price_date, price_source and price_stale (over 12 months old) of the price it is costed at, None for your own
    machine; precision (`precision_of`)."""
    one = grid.iloc[0] if len(grid) == 1 else None
    size = lambda axis: None if one is None or pd.isna(one[axis]) else int(one[axis])  # noqa: E731
    out = []
    for _, o in options.iterrows():
        gpu = o["gpus"] > 0
        out.append({
            "option": o["option"], "kind": o["kind"], "gpu": o["model"] if gpu else None, "gpus": int(o["gpus"]),
            "workload": one["workload"] if one is not None else None, "epochs": plan.epochs if plan else None,
            "precision": precision_of(o, plan),
            "batch_size": size("batch_size"), "dataset_size": size("dataset_size"),
            **{name: _plain(o.get(column, math.nan)) for name, column in
               (("epoch_s", "epoch_s"), ("epoch_s_low", "epoch_lo"), ("epoch_s_high", "epoch_hi"),
                ("run_s", "wall_s"), ("run_s_low", "wall_lo_s"), ("run_s_high", "wall_hi_s"),
                ("usd", "usd"), ("usd_low", "usd_lo"), ("usd_high", "usd_hi"))},
            "fits": _plain(o.get("fits")) if gpu else None,
            "needs_gb": _plain(o.get("needs_gb", math.nan)) if gpu else None,
            "memory_gb": _plain(o.get("memory_gb")) if gpu else None,
            **{name: None if not gpu or pd.isna(o.get(name)) else int(o.get(name))
               for name in ("largest_batch", "accumulate_steps")},
            "basis": "predicted" if o["predicted"] else "measured", "source": source(o), "costed": o["basis"],
            "price_date": o.get("price_date") if isinstance(o.get("price_date"), str) else None,
            "price_stale": bool(o.get("price_stale")) if isinstance(o.get("price_date"), str) else None,
            "price_source": o.get("price_source") if isinstance(o.get("price_source"), str) else None})
    return out


def missing(grid: pd.DataFrame, speed: pd.DataFrame, models: list[str]) -> list[str]:
    """A note for every GPU model left out: neither measured nor predicted at some configuration of the sweep."""
    notes = []
    for gpu in models:
        lacking = set(grid["config_key"]) - set(speed.loc[speed["source"] == gpu, "config_key"])
        if lacking:
            names = grid.loc[grid["config_key"].isin(lacking), "workload"].value_counts()
            notes.append(f"  left out: {gpu}, with no measured or predicted time at {len(lacking)} of {len(grid)} "
                         f"configurations ({', '.join(f'{w} {n}' for w, n in names.items())}); analysis/model/ predicts "
                         "a configuration from its rows' counted step costs (trainables/costs.py), which these lack: "
                         "sweep it again with this version, which counts them")
    return notes


def decide(rows: pd.DataFrame, predicted: pd.DataFrame | None, options: list[Option], billing: dict[str, Billing],
           boxes: list[HomeBox], asked: dict[str, int] | None = None, deadline_h: float | None = None,
           plan: Plan | None = None, power: Electricity = Electricity(), count=None):
    """The sweep (or the planned run, where `plan` is given: `asked` is then unused), every option's time
    and cost, your own CPU and GPUs among them (`own_gpus`; their electricity, `power`), the picks and the
    break-even; and the notes (models left out, stale prices). `count`: how a planned run's step is counted
    (`planned_step`; None: a row's count). `predicted` None: analysis/model/'s
    predictions (`predictions`). Rows flagged outside_load are left out where their point has quiet rows,
    as the crossovers leave them (crossover.timed); those kept mark the figures resting on them (`busy`)."""
    rows = timed(rows)
    grid = sweep(rows, None if plan else asked)
    if grid.empty:
        return grid.assign(trials=[]), pd.DataFrame(), {}, pd.DataFrame(), ["no ok row to decide on: every trial failed"]
    grid = plan_grid(rows, plan) if plan else grid
    notes, own = [], own_gpus(rows)
    gpus = sorted({o.gpu for o in options if o.gpu} | {b.gpu for b in boxes} | set(own))
    if predicted is None:
        predicted, note = predictions(rows, gpus)
        notes += [note] if note else []
    if plan:
        counted, note = planned_step(rows, plan, count)
        notes += [note] if note else []
        speed = plan_speeds(rows, predicted, grid, gpus, plan, counted)
    else:
        speed = speeds(rows, predicted, grid, gpus)
    found = table(grid, speed, options, billing, boxes, own, power)
    picks = pick(found, deadline_h) if len(found) else {}
    even = break_even(found) if len(found) else pd.DataFrame()
    old = stale(options) + stale_boxes(boxes)
    priced = sum(len(o.prices()) for o in options) + sum(not b.record for b in boxes)
    dated = f"  {STALE} {len(old)} of {priced} are over 12 months old: re-read them " \
            "(python -m crossover.analysis cost lists them)"
    return grid, found, picks, even, notes + missing(grid, speed, gpus) + ([dated] if old else [])


def predictions(rows: pd.DataFrame, gpus: list[str]) -> tuple[pd.DataFrame, str]:
    """analysis/model/'s predictions, with their interval, for the GPU models among `gpus` that its
    device table knows, at every configuration no row of theirs measured, and a note where it could make
    none. The model is fitted on the shipped reference rows alone (model.shipped), and each configuration
    is predicted from its own rows' counted step costs: a user's model measured on the CPU alone is
    predicted on every GPU, and no figure moves with what else the folder holds (the built-ins' rows, the
    reference rows set beside them, --no-reference)."""
    known = [g for g in gpus if g in model.load_devices()]
    none = pd.DataFrame(columns=KEY + ["device_name", "epoch_s_median", "epoch_s_lo", "epoch_s_hi"])
    if not known:
        return none, ""
    try:
        return model.predict(rows, known, fitted=model.shipped), ""
    except ValueError as exc:  # the model's own words: what to read alongside
        return none, f"  not predicted ({', '.join(known)}): {exc}"

"""What is priced: the sweep's configurations and trials (`sweep`), or the user's planned run (`Request`, `planned_rows`,
`plan_grid`), a figure along the dataset sizes measured (`along`), and the rows' busy marks.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crossover.schema import SIZE_AXES

from ..load import KEY, eager_ok, is_reference, keys, sizes_label
from ..selection import BUSY, loaded
from .request import AXIS_FLAGS, Request


FIXED = ["setup_s", "h2d_s", "warmup_s", "eval_s"]  # a trial's time besides its timed epochs
OWN_CPU, OWN_GPU, HOME_BOX = "own CPU", "own GPU", "home box"
NO_PRICE = "no price"  # the kind of a GPU's line that no option of the price table prices: its time alone
HERE = "measured here"  # your machine's options: your CPU, your GPUs (the rows not under results/reference/)
# A configuration less its dataset size: what a fit along the dataset size holds fixed.
SHAPE = [c for c in KEY if c != "dataset_size"]
FULL_BATCH = "dataset_size"  # a shape's batch_size where its batch is the whole dataset (peaks): it grows with N
NEAREST = 3  # measured sizes a line is fitted to past either end of the measured range
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


AXIS_NAMES = {"batch_size": "batch sizes", "width": "widths", "depth": "depths", "context": "context lengths"}


def _text(value) -> str:
    """A value as the rows and the flags both write it: 128, 0.1, fast, true ('128.0' and '128' alike)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float, np.number)):
        # pandas-stubs take numpy's integer, floating and complex types but not their base, np.number
        return "-" if pd.isna(value) else f"{float(value):g}"  # type: ignore[arg-type]
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


def planned_rows(rows: pd.DataFrame, plan: Request) -> pd.DataFrame:
    """The ok rows (`_shaped`) of the planned run's one configuration: its workload's rows at every value
    it names. Where they still hold several configurations, refused in one line that lists them and the
    flags that pick one; a shape is never priced as the sum of several."""
    ok = _shaped(eager_ok(rows))
    present = sorted(ok["workload"].unique())
    workload = plan.workload or present[0]
    if plan.job:  # a job's reference: its workload is that of the rows that name its module
        named = sorted(set(ok.loc[ok["workload_module"] == plan.job_module, "workload"])) if "workload_module" in ok else []
        if not named:
            raise ValueError(f"--workload {plan.job}: no ok row names its module {plan.job_module!r} (workload_module) "
                             f"in the results read (workloads there: {', '.join(present)}); sweep it first, or name "
                             "one of those")
        workload = named[0]
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
        holds = ", and ".join(f"{AXIS_NAMES.get(a, a + ' values')} {_listed(v, 'and')}" for a, v in varied.items())
        give = ", and ".join(_listed([_flag(a, x) for x in v], "or") for a, v in varied.items())
        raise ValueError(f"the rows hold {holds}: give {give} (the planned run is one configuration of {workload})")
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


def plan_grid(rows: pd.DataFrame, plan: Request) -> pd.DataFrame:
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


def counted_grid(counted: dict, plan: Request) -> pd.DataFrame:
    """The planned run as a sweep of one line (config_key 'run'), from a step counted without rows
    (answer.counted): what `table` and `records` price beside `at_plan`'s speeds."""
    return pd.DataFrame([{"config_key": "run", "workload": counted["workload"], "epochs": plan.epochs,
                          "warmup_epochs": 0, "trials": 1, "full_batch": False,
                          **{a: counted.get(a) for a in SIZE_AXES}, "dataset_size": plan.samples}])

"""The adaptive crossover search: what `python sweeps/scaling.py` (and `make run`) runs by default.

    python sweeps/scaling.py                         # the search, within --budget seconds
    python sweeps/scaling.py --grid full             # every size of every workload's default grid instead
    python sweeps/scaling.py --compare               # both, each in its own folder, side by side
    python sweeps/scaling.py --compare results/scaling   # the search beside a full grid measured before

The question is where along a workload's size axis the faster device changes, and by how much. Per
workload, one line: the axis its default grid varies (the model's own axes first, in SIZE_AXES's order),
the grid's other axes at their first value, and as candidates exactly that grid's sizes. So every size
the search can choose is a configuration of the full grid (`--grid full`), with the same config hash,
and has the shipped reference GPU rows (results/reference/) to compare with on a machine without a GPU.

Each round runs sweeps/runner.run on a part of the full grid's Space, in the same results folder: the
runner skips what is measured (by config hash), so a search resumes, and a full grid after it measures
only the rest. The decisions are a pure function of the run times measured so far (`next_runs`,
`evaluate`, `verdict`; tests/test_search.py runs them on planted data without Ray):

    bracket  one run of the first candidate (so that the cost model has this machine's time for the
             workload), then the first and the middle at BRACKET_RUNS runs each (the line's first variance)
             and the last, usually the dearest, once;
    repeats  a point whose CPU/GPU time ratio has an interval that holds 1 and is wider than TIE gets
             more runs, at the looks LOOKS, up to CAP; it stops once the interval excludes 1 or is that
             narrow (torch.utils.benchmark's adaptive_autorange stops at IQR/median < 0.1; nvbench at a
             relative standard deviation below its target, or on a noise plateau);
    bisect   between two measured sizes whose faster device differs (a size within noise counts as a
             side of its own: the change may lie on either side of it), SPLIT more candidates a round,
             until the two are neighbours in the grid.

Before a round, each trial's time is predicted (`predict_s`): this machine's rows of the workload at the
nearest measured size, scaled by the reference rows' ratio between the two sizes. A line with neither
(a user's workload, before its first trial) is probed first (sweeps/probe.py: a few of its steps timed in
a process of its own, with a time limit), and the probe stands in for the first size's row. A trial predicted past the budget left,
or past MAX_SHARE of the whole budget, is skipped: the reason is printed and written as an error row
('skipped: ...'), which the analysis reads as not measured and a later run measures. Where no trial of
the first round fits, one line says the budget the cheapest needs (`needs`), before any trial starts.
A prediction can be wrong, so each trial also has a hard limit (`trial_limit`): MAX_SHARE of the budget,
never more than --trial-timeout. A trial past it is stopped (trainables/trainable.py Deadline) and
becomes an error row whose error says it was cut for the budget; its size gets no more runs in this
search (`cut`), which goes on with the others (a later run with a larger budget measures it). A line's
first CPU point is the exception to the share, in `afford` and in `trial_limit`: it may take what is
left of the budget, since its row is what predicts the rest, and a model slower than the share would
otherwise land no row at all.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from analysis import schema, summary
from analysis.crossover import (A_EVERYWHERE, B_EVERYWHERE, CROSSOVER, NOT_COMPUTABLE, SEVERAL, WITHIN_NOISE, find,
                                timed)
from analysis.load import eager_ok, is_reference, keys, read
from analysis.schema import GRID_AXES, SIZE_AXES
from sweeps import plan as planning, runner
from sweeps.probe import PROBE_TIMEOUT_S, probe
from sweeps.space import Space
from sweeps.store import Store
from trainables.devices import parse
from trainables.rows import config_row, failed_row
from trainables.timing import EXTEND_AT_MOST, MIN_TIMED_EPOCHS

# -- the rule ------------------------------------------------------------------------------------------

BRACKET_RUNS = 2  # runs at each bracketing size: with fewer, the line has no variance to build an interval on
LOOKS = (1, 2, 3, 5)  # runs at which a point's interval is looked at; it never gets more than CAP
CAP = LOOKS[-1]
SEEDS = 2 * CAP  # seeds a point may use: CAP runs, and as many again to replace runs timed on a busy host
SPLIT = 2  # candidates measured between two sizes with different winners, per round (a gap shrinks ~3x a round)
ALPHA = 0.05  # the intervals are at 1 - ALPHA, whichever look stops the point (below)
TIE = 1.10  # a point stops as a tie once its interval lies within this factor of its ratio either way
CPU, GPU, SAME = "cpu", "gpu", "="  # a point's label: which side is faster beyond the noise, or neither

# -- the budget -----------------------------------------------------------------------------------------

# The default --budget: seconds of the search, its Tune runs and trials, from its first round. `make run`'s
# target is 3 minutes of sweep on a 2-core VM; Ray's start (about 10 s idle) and the summary and report
# at the end (about 15 s) come on top.
BUDGET_S = 150.0
PROBE_FLOOR_S = 30.0  # s a probe may take whatever the budget: its process's imports alone can take seconds
MAX_SHARE = 0.15  # no trial predicted to take more than this share of the budget runs (issue 23: 15%)
TUNER_S = 3.0  # a Tune run's own cost until measured: a fresh worker imports ray.tune and torch (2.5-4.3 s
# on 2 idle cores, sweeps/runner.py); the search then uses what its runs took beyond their trials
TRIAL_S = 0.1  # Tune's own time between two trials of one run, beside the trial's total_s (0.02-0.03 s, +margin)


@dataclass(frozen=True, eq=False)  # hashed by identity: a dict key (its `held` is a dict), as Workload is
class Line:
    """One workload's search: along `axis`, over the candidate `sizes`, the other axes `held`."""

    workload: str  # the rows' workload name
    axis: str  # the varied axis: a column of analysis/schema.py, or the workload's own (Workload.params)
    sizes: tuple  # candidates, ascending: the default grid's values of `axis`
    held: dict = field(default_factory=dict)  # the grid's other axes: axis -> [its first value]
    key: object = None  # the grid's key in the Space: a built-in's name, 'module:attr' or a Workload


@dataclass(frozen=True)
class Runs:
    """One size's runs: each a run's median time per epoch, s (epoch_s_median)."""

    cpu: tuple = ()
    gpu: tuple = ()


@dataclass(frozen=True)
class Point:
    """One measured size: the CPU/GPU time ratio (> 1: the GPU is faster), its interval, and the label."""

    size: object
    n: int  # CPU runs
    ratio: float  # CPU time / GPU time, geometric means over the runs; nan without GPU runs
    low: float  # interval at 1 - ALPHA; nan where the line has no variance yet
    high: float
    label: str | None  # CPU, GPU, SAME, or None: undecided, more runs wanted
    why: str = ""  # how it stopped, for SAME

    def words(self) -> str:
        """'gpu 2.1x (1.8-2.4)': the faster side, by how much, and the interval, in the same direction."""
        if not math.isfinite(self.ratio):
            return "no GPU time"
        flip = self.ratio < 1
        r, lo, hi = (1 / self.ratio, 1 / self.high, 1 / self.low) if flip else (self.ratio, self.low, self.high)
        side = CPU if flip else GPU
        ci = f" ({lo:.2g}-{hi:.2g})" if math.isfinite(self.low) else " (no interval)"
        return f"{'tie' if self.label == SAME else side} {r:.2g}x{ci}"


# Intervals honest under sequential looks. A point's runs count takes only the values in LOOKS (the
# bracket's and the bisection's 1 and 2 among them), at most len(LOOKS) of them whatever the data, and
# each look's interval is built at 1 - ALPHA / len(LOOKS): a Bonferroni split of ALPHA over the looks. By
# the union bound the chance that any of them misses is at most ALPHA, so the interval at the look that
# stops the point, whichever it is, covers the true ratio with probability at least 1 - ALPHA (the
# Bonferroni boundary of group sequential designs: Jennison & Turnbull, "Group Sequential Methods with
# Applications to Clinical Trials", 2000, ch. 2 and 9; conservative beside O'Brien-Fleming or
# alpha-spending boundaries, and valid for any stopping rule). Each look is a Welch
# interval on log times: the difference of the mean logs, its variance s_cpu^2 / n_cpu + s_gpu^2 / n_gpu
# with each side's variance pooled over the line's sizes (one-way ANOVA's within-size mean square: the
# noise of a run, in log terms, taken as the same along one workload's line), and Welch-Satterthwaite's
# degrees of freedom. The pooled variances change as other sizes gain runs, so a point is read again each
# round at the same count with another variance: more looks than the union bound above counts. So
# tests/test_search.py checks the coverage of the whole procedure, as run, on planted log-normal times.
def _pooled(samples: list[np.ndarray]) -> tuple[float, int]:
    """Pooled variance of log run times over the sizes with two runs or more, and its degrees of freedom."""
    groups = [s for s in samples if len(s) >= 2]
    df = sum(len(s) - 1 for s in groups)
    return (sum(float(((s - s.mean()) ** 2).sum()) for s in groups) / df if df else math.nan), df


def _interval(c: np.ndarray, g: np.ndarray, cpu_var: tuple, gpu_var: tuple) -> tuple[float, float, float]:
    """(ratio, low, high) of CPU time / GPU time from log run times; low and high nan without a variance."""
    d = c.mean() - g.mean()
    (sc, dfc), (sg, dfg) = cpu_var, gpu_var
    if not (dfc and dfg):
        return math.exp(d), math.nan, math.nan
    vc, vg = sc / len(c), sg / len(g)
    se = math.sqrt(vc + vg)
    if se == 0:
        return (math.exp(d),) * 3
    df = (vc + vg) ** 2 / (vc ** 2 / dfc + vg ** 2 / dfg)
    q = stats.t.ppf(1 - ALPHA / (2 * len(LOOKS)), df) * se
    return math.exp(d), math.exp(d - q), math.exp(d + q)


def runs(rows: pd.DataFrame, axis: str, gpu: str | None = None) -> dict:
    """One line's ok rows as the rule reads them: size -> Runs, the 'cpu' rows' (`is_cpu`) and the `gpu`
    device's (any other device where None) median epoch times, in seed order. Rows flagged outside_load
    are read as the verdict reads them (analysis/crossover.py `timed`)."""
    rows = timed(rows)
    ok = rows[rows["status"] == "ok"].sort_values("seed")
    is_gpu = ~ok["is_cpu"] if gpu is None else ok["device"].eq(gpu)
    cpu, other = ok[ok["is_cpu"]], ok[is_gpu]
    return {size: Runs(tuple(group["epoch_s_median"]), tuple(other.loc[other[axis] == size, "epoch_s_median"]))
            for size, group in cpu.groupby(axis)}


def evaluate(measured: dict, frozen: frozenset = frozenset()) -> dict:
    """Every measured size's Point, from `measured` (size -> Runs). `frozen`: sizes that get no more runs
    (the budget refused them): undecided ones stop there as SAME."""
    logs = {s: (np.log(np.asarray(r.cpu, float)), np.log(np.asarray(r.gpu, float)))
            for s, r in measured.items() if r.cpu}
    cpu_var = _pooled([c for c, _ in logs.values()])
    gpu_var = _pooled([g for _, g in logs.values()])
    points = {}
    for size in sorted(logs):
        c, g = logs[size]
        ratio, low, high = _interval(c, g, cpu_var, gpu_var) if len(g) else (math.nan,) * 3
        label, why = _label(ratio, low, high, len(c), size in frozen) if len(g) else (SAME, "no GPU time")
        if label is None and len(g) and not gpu_var[1] and len(c) >= BRACKET_RUNS:  # more CPU runs cannot help
            label, why = SAME, "no interval: the GPU side has one run at each size"
        points[size] = Point(size, len(c), ratio, low, high, label, why)
    return points


def _label(ratio: float, low: float, high: float, n: int, frozen: bool) -> tuple[str | None, str]:
    if not math.isfinite(ratio):
        return None, ""
    if low > 1:
        return GPU, ""
    if high < 1:
        return CPU, ""
    if math.isfinite(low) and high / ratio <= TIE and ratio / low <= TIE:
        return SAME, f"equal within {TIE - 1:.0%}"
    if n >= CAP:
        return SAME, f"within noise after {n} runs"
    if frozen:
        return SAME, (f"within noise after {n} runs" if math.isfinite(low) else "no interval yet") + \
            " (more runs cut by --budget)"
    return None, ""


def _side(point: Point) -> str | None:
    """A point's side for bracketing: its label (SAME a side of its own), else where its ratio lies so far
    (the bisection goes on while its repeats come in, and follows them if they move it)."""
    if point.label or not math.isfinite(point.ratio):
        return point.label
    return GPU if point.ratio > 1 else CPU


def next_runs(line: Line, measured: dict, frozen: frozenset = frozenset()) -> dict:
    """What to measure next: size -> the CPU runs it should have after the round (more than it has).
    Empty when the line is done. `frozen`: sizes the budget refused more runs of (never asked again)."""
    has = {s: len(measured[s].cpu) if s in measured else 0 for s in line.sizes}
    open_ = [s for s in line.sizes if not (s in frozen and has[s] == 0)]
    if not open_:
        return {}
    if has[open_[0]] == 0:  # one run of the first size alone first: it gives the cost model (predict_s) this
        return {open_[0]: 1}  # machine's time for the workload before it predicts the larger sizes
    # the last (largest, usually dearest) once: the first and middle give the line its variance, and where the
    # last is as far from a tie as it tends to be, one run decides it
    bracket = {open_[0]: BRACKET_RUNS, open_[len(open_) // 2]: BRACKET_RUNS}
    bracket.setdefault(open_[-1], 1)
    want = {s: n for s, n in bracket.items() if has[s] < n and s not in frozen}
    if want:
        return want
    points = evaluate({s: measured[s] for s in open_ if has[s]}, frozen)
    for size, point in points.items():
        if point.label is None and size not in frozen and point.n < CAP:
            want[size] = next(n for n in LOOKS if n > point.n)
    done = [s for s in open_ if s in points]
    for a, b in zip(done, done[1:]):
        sa, sb = _side(points[a]), _side(points[b])
        between = [s for s in open_ if has[s] == 0 and open_.index(a) < open_.index(s) < open_.index(b)]
        if sa and sb and sa != sb and between:
            picks = {round((len(between) + 1) * k / (SPLIT + 1)) - 1 for k in range(1, SPLIT + 1)}
            want.update({between[min(max(i, 0), len(between) - 1)]: 1 for i in picks})
    return want


@dataclass(frozen=True)
class Verdict:
    """A line's answer: its kind (analysis/crossover.py's words), where the winner changes, and the points."""

    line: Line
    kind: str  # CROSSOVER, SEVERAL, B_EVERYWHERE (the GPU), A_EVERYWHERE (the CPU), WITHIN_NOISE, NOT_COMPUTABLE
    # (no interval: too few runs), 'no GPU time' or 'not measured'
    changes: tuple  # (a, b, crossover): the winner differs at neighbours a < b; crossover interpolated, log-log
    points: tuple  # every measured Point, ascending
    faster_above: str | None  # the side faster past the last change (or everywhere)

    def text(self, gpu: str = "gpu") -> str:
        """One line a student reads: 'disc depth: NVIDIA H200 faster past depth ~ 8.4 (at 8: cpu 1.2x ...)'."""
        name = {CPU: "the CPU", GPU: gpu}
        head = f"{self.line.workload} {self.line.axis}"
        if self.kind == CROSSOVER:
            a, b, x = self.changes[0]
            at = {p.size: p for p in self.points}
            return (f"{head}: {name[self.faster_above]} faster past {self.line.axis} ~ {x:.3g} "
                    f"(at {a:,}: {at[a].words()}; at {b:,}: {at[b].words()})")
        if self.kind == SEVERAL:
            return f"{head}: the faster device changes {len(self.changes)} times, near " + ", ".join(
                f"{x:.3g}" for _, _, x in self.changes)
        if self.kind in (A_EVERYWHERE, B_EVERYWHERE):
            ties = [p.size for p in self.points if p.label == SAME]
            also = f", within noise at {', '.join(f'{s:,}' for s in ties)}" if ties else ""
            ends = f"{self.points[0].words()} at {self.points[0].size:,} to {self.points[-1].words()} at " \
                   f"{self.points[-1].size:,}"
            return f"{head}: {name[self.faster_above]} faster wherever the noise lets a size tell{also} ({ends})"
        if self.kind == WITHIN_NOISE:
            return f"{head}: within noise at every measured size ({', '.join(p.words() for p in self.points)})"
        if self.kind == NOT_COMPUTABLE:
            return f"{head}: too few runs for an interval ({', '.join(p.words() for p in self.points)})"
        return f"{head}: {self.kind}"


def verdict(line: Line, measured: dict, frozen: frozenset = frozenset()) -> Verdict:
    """The line's answer from its measured runs: the winners beyond the noise, read from the smallest size
    up, SAME sizes skipped; a change of winner placed where the ratio turns through 1 between the two."""
    points = evaluate(measured, frozen)
    known = [p for p in points.values() if p.label]
    if not any(math.isfinite(p.ratio) for p in points.values()):
        return Verdict(line, "not measured" if not points else "no GPU time", (), tuple(points.values()), None)
    winners = [p for p in known if p.label in (CPU, GPU)]
    if not winners:  # within noise, where some size has an interval that says so; else too few runs to say
        kind = WITHIN_NOISE if any(math.isfinite(p.low) for p in points.values()) else NOT_COMPUTABLE
        return Verdict(line, kind, (), tuple(points.values()), None)
    changes = tuple((a.size, b.size, _crossing(points, a.size, b.size))
                    for a, b in zip(winners, winners[1:]) if a.label != b.label)
    kind = (CROSSOVER if len(changes) == 1 else SEVERAL if changes
            else B_EVERYWHERE if winners[0].label == GPU else A_EVERYWHERE)
    return Verdict(line, kind, changes, tuple(points.values()), winners[-1].label)


def _crossing(points: dict, a, b) -> float:
    """Where the ratio turns through 1 between sizes a and b: the first turn there, interpolated on log size
    and log ratio between the two measured sizes around it."""
    sizes = [s for s in points if a <= s <= b and math.isfinite(points[s].ratio)]
    logr = [math.log(points[s].ratio) for s in sizes]
    to = 1 if points[b].label == GPU else -1
    for (x0, r0), (x1, r1) in zip(zip(sizes, logr), zip(sizes[1:], logr[1:])):
        if r0 * to <= 0 < r1 * to:
            lx0, lx1 = math.log(x0), math.log(x1)
            return math.exp(lx0 - r0 * (lx1 - lx0) / (r1 - r0))
    return math.sqrt(a * b)


# -- the cost model --------------------------------------------------------------------------------------

def timed_epochs(epoch_s: float, epochs: int, warmup: int, min_timed_s: float) -> int:
    """Epochs a trial times at `epoch_s` an epoch, as trainables/timing.py decides it."""
    own = max(epochs - warmup, MIN_TIMED_EPOCHS)
    return min(max(own, math.ceil(min_timed_s / max(epoch_s, 1e-9))), EXTEND_AT_MOST * own)


def predict_s(size, cfg, own: dict, ref: dict, factor: float) -> float | None:
    """A trial's predicted seconds at `size` (config `cfg`: epochs, warm-up, min_timed_s). `own`: this
    machine's measured sizes of the line on the trial's device, size -> (seconds besides the epochs, epoch
    seconds); `ref`: the reference rows' epoch seconds by size (same device kind); `factor`: this machine's
    epoch time over the reference's, where it has no row of this line yet. None where nothing predicts it.

    From the nearest measured size y: epoch(x) = epoch(y) x ref(x) / ref(y) (by x / y where the reference
    lacks either, never faster for a larger x), and the time besides the epochs (data, model,
    evaluation, counting a step's costs) grown as much where x costs more. Else the reference's own epoch
    time at x times `factor`, plus a second besides."""
    if own:
        y = min(own, key=lambda s: (abs(math.log(s / size)), -s))
        rest, epoch = own[y]
        if size in ref and y in ref:
            grow = ref[size] / ref[y]
        else:  # no reference shape: as the size, and never faster for a larger one
            grow = max(size / y, 1.0) if size > y else min(size / y, 1.0)
        epoch, rest = epoch * grow, rest * max(grow, 1.0)
    elif size in ref:
        epoch, rest = ref[size] * factor, 1.0
    else:
        return None
    runs = cfg.warmup_epochs + timed_epochs(epoch, cfg.epochs, cfg.warmup_epochs, cfg.min_timed_s)
    return rest + epoch * runs + TRIAL_S


# -- the driver: rounds of sweeps/runner.run on parts of the full grid's Space ------------------------------

def lines(space: Space) -> list[Line]:
    """One Line per workload of `space` (the full grid's): the axis its grid varies (SIZE_AXES's order first,
    then its own axes), the grid's other axes at their first value. Raises ValueError for a workload whose
    grid varies no numeric axis: the search has nothing to bisect there."""
    found = []
    for (key, grid), wl in zip(space.grids.items(), space.workloads()):
        numeric = [a for a, v in grid.items() if len(v) > 1 and all(isinstance(x, (int, float)) and x > 0 for x in v)]
        axis = next((a for a in SIZE_AXES if a in numeric), numeric[0] if numeric else None)
        if axis is None:
            raise ValueError(f"workload {wl.name!r}: its grid {grid} varies no numeric size (two values or more, "
                             "each > 0), so the search has nothing to bisect: give it one, or run --grid full")
        held = {a: list(v[:1]) for a, v in grid.items() if a != axis}
        found.append(Line(wl.name, axis, tuple(sorted(grid[axis])), held, key))
    return found


def _value(cfg, axis: str):
    return getattr(cfg, axis) if axis in GRID_AXES else (cfg.params or {})[axis]


@dataclass
class Plan:
    """What a search knows before its first round: its lines, each trial it may run, and the GPU side."""

    space: Space
    store: Store
    lines: list
    trials: dict  # line -> {(size, seed, device): Trial}, seeds up to SEEDS (and the space's repeats)
    cpu: str  # the space's CPU device (its rows are the CPU side)
    gpu: str | None  # the space's GPU device (its rows are the GPU side), or None: the reference rows are
    gpu_runs: dict  # line -> {size: reference GPU epoch times}, where gpu is None
    gpu_name: dict  # line -> what the GPU side is, in words
    ref_epoch: dict  # line -> {'cpu' / 'gpu': {size: the reference's median epoch time}}, for predict_s
    factor_cpu: float  # this machine's CPU epoch over the reference's, until a row says better
    missing: dict  # workload -> its grid's sizes without reference GPU rows (not searched), where gpu is None
    ref_gpu: dict  # line -> the reference GPU rows of its sizes (the GPU it is compared with, where gpu is None)
    probed: dict = field(default_factory=dict)  # line -> its Probe (sweeps/probe.py), where nothing else predicted it

    def hashes(self, line: Line) -> dict:
        return {t.hash: k for k, t in self.trials[line].items()}


def plan(space: Space, out: Path | str) -> Plan:
    """The search's plan for `space` (the full grid's Space) in `out`/<space.name>. Raises ValueError where
    the space has no 'cpu' device: the search compares the CPU with a GPU."""
    cpu = next((d for d in space.devices if parse(d).is_cpu), None)
    if cpu is None:
        raise ValueError(f"the search compares the CPU with a GPU, and --devices {','.join(space.devices)} has no "
                         "cpu: add it, or run --grid full")
    gpu = next((d for d in space.devices if parse(d).uses_gpu), None)
    store = Store(Path(out) / space.name)
    found = lines(space)
    trials = {line.workload: _trials(space, line) for line in found}
    ref, ref_rows = _reference(found, trials, store)
    kept, gpu_runs, gpu_name, ref_epoch, missing, ref_gpu = [], {}, {}, {}, {}, {}
    models = _gpu_models(ref_rows, ref)
    for line in found:
        model = models[line.workload]
        mine = ref_rows[ref_rows["device_name"].eq(model)] if model else ref_rows.iloc[:0]
        runs = {s: tuple(mine.loc[mine["config_key"] == k, "epoch_s_median"]) for s, k in ref[line.workload].items()}
        epochs = _reference_epochs(mine)
        if gpu is None:  # a size without reference GPU rows has nothing to compare with: not a candidate (where
            # no size has any, as for a user's workload, the bracket is measured on the CPU alone, and said so)
            missing[line.workload] = tuple(s for s in line.sizes if not runs.get(s))
            line = dataclasses.replace(line, sizes=tuple(s for s in line.sizes if runs.get(s)) or line.sizes)
        kept.append(line)
        gpu_runs[line], ref_gpu[line] = runs, mine[mine["config_key"].isin(set(ref[line.workload].values()))]
        gpu_name[line] = gpu or (f"the {model} (reference)" if model else "no GPU (no reference rows)")
        ref_epoch[line] = {side: {s: medians[k] for s, k in ref[line.workload].items() if k in medians}
                           for side, medians in epochs.items()}
    threads = _reference_threads(ref_rows)
    return Plan(space, store, kept, {line: trials[line.workload] for line in kept}, cpu, gpu,
                gpu_runs if gpu is None else {}, gpu_name, ref_epoch,
                max(1.0, threads / space.cpu_threads) if threads else 1.0, missing, ref_gpu)


def _trials(space: Space, line: Line) -> dict:
    """Every trial of the line the search may run: (size, seed, device) -> Trial, as the full grid's."""
    sub = dataclasses.replace(space, grids={line.key: {line.axis: list(line.sizes), **line.held}},
                              repeats=max(SEEDS, space.repeats))
    return {(_value(t.cfg, line.axis), t.cfg.seed, t.cfg.device): t for t in sub.expand()}


def _reference(found: list, trials: dict, store: Store) -> tuple[dict, pd.DataFrame]:
    """Per workload, size -> config_key of its configuration; and the reference GPU rows of those configurations
    (analysis/summary.py's `with_reference`, the summary's own choice of folder per GPU model)."""
    planned = [(line, size, t) for line in found for (size, seed, _), t in trials[line.workload].items()
               if seed == 0 and t.spec.is_cpu]
    probe = pd.DataFrame([{**config_row(t), "status": "ok"} for _, _, t in planned])
    probe = probe.assign(results_dir=str(store.dir), arm="cpu", device_name=None, torch_threads=None)
    probe["config_key"] = keys(probe)
    ref = {line.workload: {} for line in found}
    for (line, size, _), key in zip(planned, probe["config_key"]):
        ref[line.workload][size] = key
    both = summary.with_reference(probe.drop(columns="config_key"))
    rows = both[both["results_dir"].map(is_reference)]
    if rows.empty:  # no reference row of any size (a user's workload, an lr of one's own): the rows' columns still
        rows = pd.DataFrame(columns=[*schema.NAMES, "results_dir", "arm"])
    return ref, rows.assign(config_key=keys(rows))


def _gpu_models(rows: pd.DataFrame, ref: dict) -> dict:
    """Per workload, the reference GPU its line is compared with: one for every line where one covers them
    all, as the verdict (analysis/verdict.py) compares one GPU in most workloads. The GPU that has rows for
    most lines, then most sizes with two runs or more (an interval needs them), then most sizes, then rows;
    a line it lacks takes its own best by the same order. None where no reference row has the line's sizes."""
    def best(wanted: dict) -> list:
        mine = rows[rows["config_key"].isin(set(wanted.values()))]
        runs = mine.groupby(["device_name", "config_key"]).size().rename("runs").reset_index()
        score = runs.groupby("device_name").agg(repeated=("runs", lambda n: int((n >= 2).sum())),
                                                sizes=("runs", "size"), rows=("runs", "sum"))
        return list(score.sort_values(["repeated", "sizes", "rows"], ascending=False).index)

    per = {workload: best(wanted) for workload, wanted in ref.items()}
    lines_of = {m: sum(m in models for models in per.values()) for models in per.values() for m in models}
    everywhere = max(lines_of, key=lambda m: (lines_of[m], -min(ms.index(m) for ms in per.values() if m in ms)),
                     default=None)
    return {w: everywhere if everywhere in models else (models[0] if models else None) for w, models in per.items()}


@cache
def _folder(directory: str) -> pd.DataFrame:
    return eager_ok(read(directory))


def _cpu_folders(gpu_rows: pd.DataFrame) -> list[str]:
    """The folders whose CPU rows stand beside the reference GPU rows: each GPU row's own folder, or where it
    holds GPU rows alone (a second host's, results/reference/h100-2026-11-26-host2), the reference folders
    of the same sweep name beside it (`../*/scaling`) that hold CPU rows."""
    out = []
    for d in sorted(gpu_rows["results_dir"].unique()):
        siblings = [d] if _folder(d)["is_cpu"].any() else sorted(str(s) for s in Path(d).parent.parent.glob(
            f"*/{Path(d).name}") if s.is_dir() and _folder(str(s))["is_cpu"].any())
        out += [s for s in siblings if s not in out]
    return out


def _reference_epochs(gpu_rows: pd.DataFrame) -> dict:
    """config_key -> median epoch time of the reference, for the CPU and the GPU: the GPU rows given, and
    the CPU rows beside them (`_cpu_folders`, read once a process)."""
    dirs = _cpu_folders(gpu_rows)
    none = pd.DataFrame(columns=["is_cpu", "config_key", "epoch_s_median"])  # no reference row of the line's sizes
    cpu = pd.concat([_folder(d) for d in dirs]) if dirs else none
    cpu = cpu[cpu["is_cpu"].astype(bool)]  # astype: `none`'s column is object
    return {side: rows.groupby("config_key")["epoch_s_median"].median().to_dict()
            for side, rows in ((CPU, cpu), (GPU, gpu_rows))}


def _reference_threads(gpu_rows: pd.DataFrame) -> int | None:
    threads = [t for d in _cpu_folders(gpu_rows) for t in _folder(d).loc[lambda r: r["is_cpu"], "torch_threads"].dropna()]
    return int(np.median(threads)) if threads else None


@dataclass
class State:
    """The rows measured so far, per line: the runs for the rule, and what predicts the next trials."""

    measured: dict  # line -> {size: Runs}
    own: dict  # line -> {(size, seed, device)} with an ok row
    costs: dict  # line -> {'cpu' / 'gpu': {size: (seconds besides the epochs, epoch seconds)}}
    factor: dict  # 'cpu' / 'gpu' -> this machine's epoch time over the reference's (median over sizes)


def state(p: Plan, rows: pd.DataFrame | None = None) -> State:
    """`rows` (default: the results folder's) read into the search's State."""
    if rows is None:
        rows = read(p.store.dir) if p.store.files() else pd.DataFrame(columns=schema.NAMES + ["arm"])
    ok = rows[rows["status"] == "ok"]
    used = timed(ok)  # rows flagged outside_load: as the verdict reads them (analysis/crossover.py)
    measured, own, costs, ratios = {}, {}, {}, {CPU: [], GPU: []}
    for line in p.lines:
        index = p.hashes(line)
        own[line] = {index[h] for h in ok.loc[ok["config_hash"].isin(index), "config_hash"]}  # measured: not again
        mine = used[used["config_hash"].isin(index)]
        found = [(index[h], r) for h, r in zip(mine["config_hash"], mine.itertuples())]
        side = {p.cpu: CPU, p.gpu: GPU}
        per = {CPU: {}, GPU: {}}
        for (size, seed, device), r in sorted(found, key=lambda f: f[0][1]):
            if device in side:
                per[side[device]].setdefault(size, []).append(r)
        measured[line] = {s: Runs(tuple(r.epoch_s_median for r in runs),
                                  tuple(r.epoch_s_median for r in per[GPU].get(s, []))
                                  if p.gpu else p.gpu_runs[line].get(s, ()))
                          for s, runs in per[CPU].items()}
        costs[line] = {k: {s: (float(np.median([r.total_s - r.train_s - r.warmup_s for r in runs])),
                               float(np.median([r.epoch_s_median for r in runs]))) for s, runs in v.items()}
                       for k, v in per.items()}
        if not costs[line][CPU] and line in p.probed:  # no row of the line yet: its probe predicts the first size
            first = line.sizes[0]
            probed, cfg = p.probed[line], p.trials[line][first, 0, p.cpu].cfg
            costs[line][CPU] = {first: (probed.fixed_s, probed.epoch_s(cfg))}
        for k in (CPU, GPU):
            ratios[k] += [e / p.ref_epoch[line][k][s] for s, (_, e) in costs[line][k].items()
                          if s in p.ref_epoch[line][k]]
    factor = {CPU: float(np.median(ratios[CPU])) if ratios[CPU] else p.factor_cpu,
              GPU: float(np.median(ratios[GPU])) if ratios[GPU] else 1.0}
    return State(measured, own, costs, factor)


@dataclass(frozen=True)
class Ask:
    """One point's runs for the next round: its trials (target - have new seeds, every device) and their
    predicted seconds (None: nothing predicts one)."""

    line: Line
    size: object
    have: int
    target: int
    predicted: tuple  # per trial, as `trials`
    trials: tuple

    @property
    def cost(self) -> float:
        return sum(p or 0.0 for p in self.predicted)

    @property
    def upto(self) -> int:
        """The seeds runner.run must cover (0..upto-1) to run the trials: the lower ones are measured."""
        return max((t.cfg.seed for t in self.trials), default=-1) + 1


def asks(p: Plan, s: State, frozen: dict) -> list[Ask]:
    """Every point the rule wants measured next, with its trials and their predicted seconds: the next
    seeds without an ok CPU row (a row left out for load, analysis/crossover.py `timed`, is replaced by a
    new seed, not run again); a point whose seeds are all spent is not asked."""
    found = []
    for line in p.lines:
        for size, target in next_runs(line, s.measured[line], frozenset(frozen[line])).items():
            have = len(s.measured[line][size].cpu) if size in s.measured[line] else 0
            seeds = sorted({k[1] for k in p.trials[line] if k[0] == size and (size, k[1], p.cpu) not in s.own[line]})
            keys_ = [(size, seed, d) for seed in seeds[:target - have] for d in p.space.devices
                     if (size, seed, d) not in s.own[line]]
            if keys_:
                predicted = tuple(_predict(p, s, line, k) for k in keys_)
                found.append(Ask(line, size, have, target, predicted, tuple(p.trials[line][k] for k in keys_)))
    return found


def _predict(p: Plan, s: State, line: Line, key: tuple) -> float | None:
    size, _, device = key
    side = GPU if device == p.gpu else CPU
    return predict_s(size, p.trials[line][key].cfg, s.costs[line][side], p.ref_epoch[line][side], s.factor[side])


def _worst(ask: Ask) -> float:
    """An ask's dearest trial, predicted seconds (0 where none is predicted)."""
    return max((x or 0.0 for x in ask.predicted), default=0.0)


def afford(found: list[Ask], left_s: float, budget_s: float, fresh: frozenset = frozenset()
           ) -> tuple[list[Ask], list[tuple[Ask, str]]]:
    """The asks that fit, cheapest first: each trial within MAX_SHARE of the budget, all of them within
    `left_s`; and the others, each with why it is skipped. An ask of a `fresh` line (none of its sizes
    measured on this CPU yet) needs only to fit `left_s`: its row is what predicts the line's other trials,
    and a model slower than the share would otherwise land no row at all (issue 29)."""
    run, skip = [], []
    for ask in sorted(found, key=lambda a: a.cost):
        worst = _worst(ask)
        if worst > MAX_SHARE * budget_s and ask.line not in fresh:
            skip.append((ask, f"predicted {_s(worst)}, more than {MAX_SHARE:.0%} of --budget {_s(budget_s)}"))
        elif ask.cost > left_s:
            skip.append((ask, f"predicted {_s(ask.cost)}, past the {_s(max(left_s, 0))} left of --budget "
                              f"{_s(budget_s)}"))
        else:
            run.append(ask)
            left_s -= ask.cost
    return run, skip


CUT = "cut for the budget"  # in the error of a trial stopped at trial_limit's share of the budget


def trial_limit(budget_s: float, timeout_s: float, left_s: float | None = None) -> tuple[float, str]:
    """Each trial's hard limit in the search, s, and what set it (the row's error names it): MAX_SHARE of
    the budget, never longer than `timeout_s` (--trial-timeout). A fresh line's first trial (`left_s` given:
    the budget left) may take all that is left instead, where that is more: the share is there to catch a
    wrong prediction, and cutting the one row that predicts the rest would leave the line with none."""
    share = MAX_SHARE * budget_s
    if left_s is not None and left_s > share:
        if left_s < timeout_s:
            return left_s, f"{CUT}: the {_s(left_s)} left of --budget {_s(budget_s)}"
        return timeout_s, "--trial-timeout"
    if share < timeout_s:
        return share, f"{CUT}: {MAX_SHARE:.0%} of --budget {_s(budget_s)}"
    return timeout_s, "--trial-timeout"


def needs(skipped: list[tuple[Ask, str]], budget_s: float) -> str:
    """One line where no trial of the first round fits --budget: the cheapest skipped size, its predicted
    time, and the budget under which it is an ordinary trial (within MAX_SHARE of it), rounded up to 10 s."""
    ask = min((a for a, _ in skipped), key=lambda a: a.cost)
    need = math.ceil(ask.cost / MAX_SHARE / 10) * 10
    return (f"{ask.line.workload}: a trial at {ask.line.axis}={ask.size:,} is predicted to take {_s(ask.cost)} here, "
            f"past what --budget {_s(budget_s)} leaves: give --budget {need:,} or more")


def cut(rows: pd.DataFrame, group: list[Ask]) -> list[Ask]:
    """The asks of `group` with a trial cut for the budget (its row's error says so): their sizes are frozen."""
    failed = rows[(rows["status"] != "ok") & rows["error"].fillna("").str.contains(CUT, regex=False)]
    hit = set(failed["config_hash"])
    return [a for a in group if any(t.hash in hit for t in a.trials)]


def _s(seconds: float) -> str:
    """'283 s', '1,200 s', '0.42 s'."""
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.2g} s"


def _count(n: int) -> str:
    return f"{n} trial{'s' if n != 1 else ''}"


def write_skipped(p: Plan, skipped: list[tuple[Ask, str]], log, say) -> None:
    """An error row for each trial skipped ('skipped: ...'): the analysis reads it as not measured (status
    not 'ok'), and a later run, with a larger --budget, measures it (sweeps/store.py `measured`). Each
    skipped size is said through `say` (the search's --verbose detail; `skipped_lines` sums them up)."""
    if not skipped:
        return
    with p.store.locked(log):
        for ask, why in skipped:
            for trial in ask.trials:
                p.store.write({**failed_row(trial, f"skipped: {why} (--budget)"), "sweep": p.space.name,
                               "schema_version": schema.SCHEMA_VERSION, "trial_id": None,  # no Tune trial ran
                               "finished_at": pd.Timestamp.now(tz="UTC").to_pydatetime()})
    for ask, why in skipped:
        say(f"skipped {ask.line.workload} {ask.line.axis}={ask.size:,} ({_count(len(ask.trials))}): {why}")


def skipped_lines(skipped: list[tuple[Ask, str]], budget_s: float, width: int = 100) -> list[str]:
    """What the search skipped, in at most two lines of `width` columns: the sizes predicted past MAX_SHARE of
    the budget, dearest first, as many as fit; and how many trials found too little of the budget left."""
    dear = sorted((a for a, _ in skipped if _worst(a) > MAX_SHARE * budget_s), key=_worst, reverse=True)
    rest = [a for a, _ in skipped if _worst(a) <= MAX_SHARE * budget_s]
    said = []
    if dear:
        head, names = f"  predicted past {MAX_SHARE:.0%} of it: ", []
        for i, a in enumerate(dear):
            more = f" and {len(dear) - i - 1} more" if i < len(dear) - 1 else ""
            name = f"{a.line.workload} {a.line.axis}={a.size:,} ({_s(_worst(a))})"
            if names and len(head + ", ".join(names + [name]) + more) > width:
                names[-1] += f" and {len(dear) - i} more"
                break
            names.append(name)
        said.append(head + ", ".join(names))
    if rest:
        said.append(f"  past what was left of it: {_count(sum(len(a.trials) for a in rest))} at {len(rest)} sizes "
                    "(a larger --budget measures them)")
    return said


@dataclass
class Result:
    """What a search did: its verdicts, and what it spent."""

    store: Store
    verdicts: list  # per line, Verdict
    gpu_name: dict  # line -> the GPU side, in words
    rounds: int
    trials: int  # trials it ran (Tune trials' rows written)
    skipped: int  # trials it skipped for the budget (rows 'skipped: ...')
    seconds: float  # its wall time, from its plan to its verdicts
    cut: tuple = ()  # (line, size) of each size with a trial stopped at trial_limit (error rows, CUT)

    def lines(self) -> list[str]:
        return [v.text(self.gpu_name[v.line]) for v in self.verdicts]


def search(space: Space, out: Path | str, budget_s: float = BUDGET_S, max_concurrent: int | None = None,
           log=print, detail=None, **run_kwargs) -> Result:
    """The search over `space` (the full grid's Space) into `out`/<space.name>, in rounds of sweeps/runner.run
    until the rule wants nothing more, or the budget is spent. `log` says which sizes lack reference GPU rows
    and, at the end, what the search spent and skipped, in at most 3 lines of 100 columns; `detail` (default: `log`) each round, its runner.run's first line, each
    size skipped and why, and each line's verdict. `log` and `run_kwargs` go to runner.run. A line nothing
    predicts is probed first (sweeps/probe.py; said through `detail`); where no trial of the first round
    fits, `log` says the budget the cheapest needs (`needs`) before any trial runs."""
    detail = log if detail is None else detail
    start = time.monotonic()
    p = plan(space, out)
    # every size the rounds may ask, estimated in one planning process now, not one a round (about 5 s each
    # on 2 cores, out of the budget): runner.run finds them done
    planning.member_sizes(space.expand(), space.plan_timeout_s)
    _say_missing(p, log)
    p = dataclasses.replace(p, probed=_probe(p, detail, budget_s))
    frozen = {line: set() for line in p.lines}
    stopped, limits = [], set()  # (line, size) of each size with a trial cut at its limit; those limits, s
    rounds = ran = 0
    skips = []  # (ask, why) of every size skipped for the budget
    tuner_s = [TUNER_S]  # what each Tune run took beyond its trials
    while found := asks(p, s := state(p), frozen):
        rounds += 1
        left = budget_s - (time.monotonic() - start) - float(np.mean(tuner_s)) * len({a.upto for a in found})
        fresh = frozenset(line for line in p.lines if not any(d == p.cpu for _, _, d in s.own[line]))
        run, skip = afford(found, left, budget_s, fresh)
        if skip and not run and not ran:  # nothing can land: said before any trial starts, in one line
            log(needs(skip, budget_s))
        write_skipped(p, skip, log, detail)
        skips += skip
        for ask, _ in skip:
            frozen[ask.line].add(ask.size)
        for upto, first in sorted({(a.upto, a.line in fresh) for a in run}):
            group = [a for a in run if a.upto == upto and (a.line in fresh) == first]
            began = time.monotonic()
            limit_s, why = trial_limit(budget_s, space.timeout_s, budget_s - (began - start) if first else None)
            part = dataclasses.replace(space, grids=_grids(group), repeats=upto, timeout_s=limit_s, timeout_why=why)
            store = runner.run(part, out, max_concurrent, log, head=detail, **run_kwargs)
            ran += sum(len(a.trials) for a in group)
            rows = read(store.dir)
            tuner_s.append(max(0.0, time.monotonic() - began - _trial_seconds(rows, group)))
            for a in cut(rows, group):  # no more runs of a size that ran past its share of the budget
                frozen[a.line].add(a.size)
                stopped.append((a.line, a.size))
                limits.add(limit_s)
                detail(f"cut {a.line.workload} {a.line.axis}={a.size:,}: a trial ran past {_s(limit_s)} ({why})")
        detail(f"search round {rounds}: {_count(sum(len(a.trials) for a in run))} at {len(run)} sizes, "
               f"{len(skip)} sizes skipped; {_s(time.monotonic() - start)} of --budget {_s(budget_s)}")
        if left <= 0:  # the budget is spent: what the rule wants next is not measured (rowed, and said at the end)
            break
    s = state(p)
    verdicts = [verdict(line, s.measured[line], frozenset(frozen[line])) for line in p.lines]
    skipped = sum(len(a.trials) for a, _ in skips)
    result = Result(p.store, verdicts, p.gpu_name, rounds, ran, skipped, time.monotonic() - start, tuple(stopped))
    for text in result.lines():
        detail(text)
    log(f"search: {_count(ran)} in {rounds} round{'s' if rounds != 1 else ''}, {_s(result.seconds)}"
        + (f"; {len(stopped)} size{'s' if len(stopped) != 1 else ''} cut at {' or '.join(map(_s, sorted(limits)))} "
           "a trial" if stopped else "")
        + (f"; {_count(skipped)} skipped for --budget {_s(budget_s)}:" if skipped else ""))
    for text in skipped_lines(skips, budget_s):
        log(text)
    return result


def _probe(p: Plan, say, budget_s: float) -> dict:
    """line -> its Probe (sweeps/probe.py), for each line nothing predicts yet: no ok row of it on this CPU
    and no reference CPU time at its first size (a user's workload, before its first trial). Each said; each
    probe may take the budget, or PROBE_FLOOR_S where that is less (its process imports torch and the
    model first), and never past sweeps/probe.py's own limit."""
    s, found = state(p), {}
    for line in p.lines:
        first = line.sizes[0]
        if s.costs[line][CPU] or first in p.ref_epoch[line][CPU]:
            continue
        began = time.monotonic()
        if (got := probe(p.trials[line][first, 0, p.cpu], min(PROBE_TIMEOUT_S, max(budget_s, PROBE_FLOOR_S)))) is not None:
            found[line] = got
            say(f"probe {line.workload}: a step takes {_s(got.step_s)} on this CPU, a trial {_s(got.fixed_s)} "
                f"besides its steps ({_s(time.monotonic() - began)} to find out)")
    return found


def _say_missing(p: Plan, log) -> None:
    """Says which lines, or which of their sizes, have no reference GPU rows to compare with."""
    for line in p.lines:
        lacking = p.missing.get(line.workload, ())
        if lacking == line.sizes:
            log(f"{line.workload}: no GPU to compare with (no reference GPU rows of its sizes): the search times its "
                f"{line.axis} bracket on the CPU alone")
        elif lacking:
            log(f"{line.workload}: no reference GPU rows at {line.axis} {', '.join(f'{s:,}' for s in lacking)}, so "
                "the search leaves those sizes out (--grid full measures them)")


def _grids(group: list[Ask]) -> dict:
    """The Space's grids of a group of asks with one target: per line, its sizes and its held axes."""
    grids = {}
    for a in group:
        grids.setdefault(a.line.key, {a.line.axis: [], **a.line.held})[a.line.axis].append(a.size)
    return grids


def _trial_seconds(rows: pd.DataFrame, group: list[Ask]) -> float:
    """The trials' own seconds (total_s) of `group`, from their rows: what a Tune run took beyond is its own."""
    wanted = {t.hash for a in group for t in a.trials}
    return float(rows.loc[rows["config_hash"].isin(wanted), "total_s"].fillna(0).sum())


# -- the benchmark: the search beside the full grid ----------------------------------------------------------

def run_seconds(directory: Path) -> float:
    """Seconds the runs of the sweep in `directory` took, from its runs file (analysis/schema.py runs_file)."""
    path = schema.runs_file(Path(directory))
    if not path.exists():
        return math.nan
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return float(sum(r["end"] - r["start"] for r in records))


def _steps(sizes: tuple, x: float) -> float:
    """Where `x` lies among `sizes`, in grid steps (0 at the first size), interpolated on log size."""
    logs = np.log(np.asarray(sizes, float))
    return float(np.interp(math.log(x), logs, np.arange(len(sizes))))


def _said(kind: str, faster_above: str | None, axis: str, x: float = math.nan) -> str:
    side = {CPU: "CPU", GPU: "GPU"}.get(faster_above, "?")
    if kind == CROSSOVER:
        return f"{side} faster past {axis} ~ {x:.3g}"
    return {B_EVERYWHERE: "GPU faster at every size", A_EVERYWHERE: "CPU faster at every size",
            WITHIN_NOISE: "within noise at every size", SEVERAL: "several crossings",
            NOT_COMPUTABLE: "too few runs for an interval"}.get(kind, kind)


def _full(p: Plan, line: Line, rows: pd.DataFrame) -> tuple[str, str | None, float]:
    """The full grid's answer on the line: analysis/crossover.py `find` on its rows (those flagged
    outside_load read by its one rule, as the search reads them) beside the same GPU rows as the search's.
    (kind, faster above, x)."""
    mine = rows[rows["config_hash"].isin(p.hashes(line)) & (rows["status"] == "ok")]
    both = pd.concat([mine, p.ref_gpu.get(line, mine.iloc[:0])], ignore_index=True)
    if both.empty or line.axis not in schema.CROSSOVER_AXES:
        return "not compared", None, math.nan
    table = find(both.assign(arm=both["device"]))
    table = table[(table["axis"] == line.axis) & (table["metric"] == "epoch_s") & table["is_cpu_a"]]
    if table.empty:
        return "not compared", None, math.nan
    t = table.iloc[0]
    return t["verdict"], {"A": CPU, "B": GPU}.get(t["faster_above"]), t["crossover"]


def compare(space: Space, out: Path | str, adaptive_dir: Path, full_dir: Path, seconds: dict) -> str:
    """The benchmark's table: per workload, the full grid's answer and the search's on the search's line, how
    many size steps apart their crossovers are, and the trials and trial seconds each spent; then the totals
    and issue 23's targets, printed and never asserted. `seconds`: each one's wall time ('search', 'full')."""
    p = plan(space, out)
    rows = {"search": read(adaptive_dir), "full": read(full_dir)}
    found = state(p, rows["search"])
    parts, close = [f"the search: {adaptive_dir}", f"the full grid: {full_dir}"], []
    for line in p.lines:
        v = verdict(line, found.measured[line])
        kind, above, x = _full(p, line, rows["full"])
        ours = v.changes[0][2] if v.kind == CROSSOVER else math.nan
        if kind == CROSSOVER and v.kind == CROSSOVER and above == v.faster_above:
            apart = abs(_steps(line.sizes, ours) - _steps(line.sizes, x))
            agree, how = apart <= 1, f"{apart:.1f} size steps apart"
        else:
            agree = kind == v.kind and above == v.faster_above
            how = "the same answer" if agree else "different answers"
        close.append(agree)
        parts += [f"{line.workload}, {line.axis} {line.sizes[0]:,}..{line.sizes[-1]:,}, the CPU against "
                  f"{p.gpu_name[line]}: {how}"]
        for who, said in (("full grid", _said(kind, above, line.axis, x)),
                          ("search", _said(v.kind, v.faster_above, line.axis, ours))):
            r = rows["full" if who == "full grid" else "search"]
            r = r[r["workload"] == line.workload]
            ok, skipped = r["status"] == "ok", r["error"].fillna("").str.startswith("skipped:")
            parts.append(f"  {who:9}  {said:44} {ok.sum():3} trials {r.loc[ok, 'total_s'].sum():7,.1f} s"
                         + (f", {skipped.sum()} skipped" if skipped.any() else ""))
    n = {k: int((r["status"] == "ok").sum()) for k, r in rows.items()}
    parts.append(f"total: full grid {_count(n['full'])} in {_s(seconds['full'])}; search {_count(n['search'])} in "
                 f"{_s(seconds['search'])}")
    parts.append("targets (issue 23; printed, never asserted):")
    parts.append(f"  the search's crossover within one size step of the full grid's: {sum(close)} of {len(close)} "
                 "workloads")
    parts.append(f"  the search within 3 minutes: {'yes' if seconds['search'] <= 180 else 'no'} "
                 f"({_s(seconds['search'])})")
    return "\n".join(parts)

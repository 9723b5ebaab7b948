"""The search's stopping rule: which sizes to run next, how often, and when a line's answer stands.

    from .stopping import Line, next_runs, runs, verdict
    wanted = next_runs(line, runs(rows, line.axis))   # size -> the CPU runs it should have after the round
    print(verdict(line, runs(rows, line.axis)).text())

A pure function of the run times measured so far (tests/test_search.py runs it on planted data without
Ray); sweeps/search.py runs its rounds, sweeps/budget.py says which of the wanted trials the budget
affords. Per Line (one workload, along one axis, over the default grid's sizes):

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

Reads rows only (numpy, pandas, scipy); never imports torch or ray.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from ..analysis.crossings import A_EVERYWHERE, B_EVERYWHERE, CROSSOVER, NOT_COMPUTABLE, SEVERAL, WITHIN_NOISE
from ..analysis.selection import timed

BRACKET_RUNS = 2  # runs at each bracketing size: with fewer, the line has no variance to build an interval on
LOOKS = (1, 2, 3, 5)  # runs at which a point's interval is looked at; it never gets more than CAP
CAP = LOOKS[-1]
SEEDS = 2 * CAP  # seeds a point may use: CAP runs, and as many again to replace runs timed on a busy host
SPLIT = 2  # candidates measured between two sizes with different winners, per round (a gap shrinks ~3x a round)
ALPHA = 0.05  # the intervals are at 1 - ALPHA, whichever look stops the point (below)
TIE = 1.10  # a point stops as a tie once its interval lies within this factor of its ratio either way
CPU, GPU, SAME = "cpu", "gpu", "="  # a point's label: which side is faster beyond the noise, or neither


@dataclass(frozen=True, eq=False)  # hashed by identity: a dict key (its `held` is a dict), as Workload is
class Line:
    """One workload's search: along `axis`, over the candidate `sizes`, the other axes `held`."""

    workload: str  # the rows' workload name
    axis: str  # the varied axis: a column of crossover/schema.py, or the workload's own (Workload.params)
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
    are read as the verdict reads them (analysis/selection.py `timed`)."""
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
    """A line's answer: its kind (analysis/crossings.py's words), where the winner changes, and the points."""

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
            assert self.faster_above is not None, "verdict() names the last winner of every kind with one"
            a, b, x = self.changes[0]
            at = {p.size: p for p in self.points}
            return (f"{head}: {name[self.faster_above]} faster past {self.line.axis} ~ {x:.3g} "
                    f"(at {a:,}: {at[a].words()}; at {b:,}: {at[b].words()})")
        if self.kind == SEVERAL:
            return f"{head}: the faster device changes {len(self.changes)} times, near " + ", ".join(
                f"{x:.3g}" for _, _, x in self.changes)
        if self.kind in (A_EVERYWHERE, B_EVERYWHERE):
            assert self.faster_above is not None, "verdict() names the last winner of every kind with one"
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

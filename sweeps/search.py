"""The adaptive crossover search: what `python sweeps/scaling.py` (and `make run`) runs by default.

    python sweeps/scaling.py                         # the search, within --budget seconds
    python sweeps/scaling.py --grid full             # every size of every workload's default grid instead
    python sweeps/scaling.py --compare               # both, each in its own folder, side by side (sweeps/compare.py)

The question is where along a workload's size axis the faster device changes, and by how much. Per
workload, one line: the axis its default grid varies (the model's own axes first, in SIZE_AXES's order),
the grid's other axes at their first value, and as candidates exactly that grid's sizes. So every size
the search can choose is a configuration of the full grid (`--grid full`), with the same config hash,
and has the shipped reference GPU rows (results/reference/) to compare with on a machine without a GPU.

This module is the loop: its plan (`plan`: the lines, their trials, the reference rows), the rows read
into the rule's runs (`state`), and the rounds (`search`). Each round asks the stopping rule what to
measure next (sweeps/stopping.py: bracket, repeats, bisect, and each line's verdict), keeps what the
budget affords (sweeps/budget.py: each trial's predicted seconds, the share of --budget it may take, its
hard limit), writes a row for each trial skipped, and runs sweeps/runner.run on that part of the full
grid's Space, in the same results folder: the runner skips what is measured (by config hash), so a
search resumes, and a full grid after it measures only the rest.
"""

from __future__ import annotations

import dataclasses
import textwrap
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from crossover import schema
from crossover.schema import GRID_AXES, SIZE_AXES

from ..analysis import summary
from ..analysis.load import eager_ok, is_reference, keys, read
from ..analysis.selection import timed
from ..analysis.verdict import WIDTH
from ..trainables.devices import parse
from ..trainables.rows import config_row, failed_row
from . import runner
from .budget import (BUDGET_S, PROBE_FLOOR_S, TUNER_S, Ask, afford, cut, needs, predict_s, in_s,
                           skipped_lines, trial_limit, trial_count)
from .probe import PROBE_TIMEOUT_S, probe
from .space import Space
from .stopping import CPU, GPU, SEEDS, Line, Runs, next_runs, verdict
from .store import Store


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
    ref, ref_rows = _reference(found, trials, store, space)
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


def _reference(found: list, trials: dict, store: Store, space: Space) -> tuple[dict, pd.DataFrame]:
    """Per workload, size -> config_key of its configuration; and the reference GPU rows of those configurations
    (analysis/summary.py's `with_reference`, the summary's own choice of folder per GPU model)."""
    planned = [(line, size, t) for line in found for (size, seed, _), t in trials[line.workload].items()
               if seed == 0 and t.spec.is_cpu]
    probe = pd.DataFrame([{**config_row(t, space.shipping), "status": "ok"} for _, _, t in planned])
    probe = probe.assign(results_dir=str(store.dir), arm="cpu", device_name=None, torch_threads=None)
    probe["config_key"] = keys(probe)
    ref: dict[str, dict[object, str]] = {line.workload: {} for line in found}  # workload -> size -> its config key
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
    used = timed(ok)  # rows flagged outside_load: as the verdict reads them (analysis/selection.py)
    measured, own, costs = {}, {}, {}
    ratios: dict[str, list[float]] = {CPU: [], GPU: []}  # per side, each size's epoch over the reference's
    for line in p.lines:
        index = p.hashes(line)
        own[line] = {index[h] for h in ok.loc[ok["config_hash"].isin(index), "config_hash"]}  # measured: not again
        mine = used[used["config_hash"].isin(index)]
        found = [(index[h], r) for h, r in zip(mine["config_hash"], mine.itertuples())]
        side = {p.cpu: CPU, p.gpu: GPU}
        per: dict[str, dict[object, list]] = {CPU: {}, GPU: {}}  # side -> size -> its rows
        for (size, _, device), r in sorted(found, key=lambda f: f[0][1]):
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


def asks(p: Plan, s: State, frozen: dict) -> list[Ask]:
    """Every point the rule wants measured next, with its trials and their predicted seconds: the next
    seeds without an ok CPU row (a row left out for load, analysis/selection.py `timed`, is replaced by a
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


def write_skipped(p: Plan, skipped: list[tuple[Ask, str]], log, say) -> None:
    """An error row for each trial skipped ('skipped: ...'): the analysis reads it as not measured (status
    not 'ok'), and a later run, with a larger --budget, measures it (sweeps/store.py `measured`). Each
    skipped size is said through `say` (the search's --verbose detail; `skipped_lines` sums them up)."""
    if not skipped:
        return
    with p.store.locked(log):
        for ask, why in skipped:
            for trial in ask.trials:
                p.store.write({**failed_row(trial, f"skipped: {why} (--budget)", p.space.shipping), "sweep": p.space.name,
                               "schema_version": schema.SCHEMA_VERSION, "trial_id": None,  # no Tune trial ran
                               "finished_at": pd.Timestamp.now(tz="UTC").to_pydatetime()})
    for ask, why in skipped:
        say(f"skipped {ask.line.workload} {ask.line.axis}={ask.size:,} ({trial_count(len(ask.trials))}): {why}")


@dataclass
class Result:
    """What a search did: its verdicts, and what it spent."""

    store: Store
    verdicts: list  # per line, Verdict
    gpu_name: dict  # line -> the GPU side, in words
    rounds: int
    trials: int  # trials it ran (Tune trials' rows written)
    skipped: int  # trials it skipped for the budget (rows 'skipped: ...')
    seconds: float  # its time by the search's clock (the wall clock), from its plan to its verdicts
    cut: tuple = ()  # (line, size) of each size with a trial stopped at trial_limit (error rows, CUT)

    def lines(self) -> list[str]:
        return [v.text(self.gpu_name[v.line]) for v in self.verdicts]


def search(space: Space, out: Path | str, budget_s: float = BUDGET_S, max_concurrent: int | None = None,
           log=print, detail=None, clock=time.monotonic, **run_kwargs) -> Result:
    """The search over `space` (the full grid's Space) into `out`/<space.name>, in rounds of sweeps/runner.run
    until the rule wants nothing more, or the budget is spent. `log` says which sizes lack reference GPU rows
    and, at the end, what the search spent and skipped, in at most 2 lines of 100 columns; `detail` (default:
    `log`) each round, its runner.run's first line, each size skipped and why, and each line's verdict. `log`
    and `run_kwargs` go to runner.run. A line nothing predicts is probed first (sweeps/probe.py; said through
    `detail`); where no trial of the first round fits, `log` says the budget the cheapest needs
    (sweeps/budget.py `needs`) before any trial runs. `clock` (seconds) is what the budget is spent by: the
    wall clock, from before the plan; a test of the budget's rules gives one that the host's speed does not move
    (each trial's limit is still real seconds: trainables/trainable.py Deadline)."""
    detail = log if detail is None else detail
    start = clock()
    p = plan(space, out)
    # every size the rounds may ask, estimated in one planning process now, not one a round (about 5 s each
    # on 2 cores, out of the budget): runner.run finds them done. A space of built-ins alone has no planner
    if space.planner:
        space.planner.member_sizes(space.expand(), space.plan_timeout_s)
    _say_missing(p, log)
    p = dataclasses.replace(p, probed=_probe(p, detail, budget_s))
    frozen: dict[Line, set[object]] = {line: set() for line in p.lines}
    stopped, limits = [], set()  # (line, size) of each size with a trial cut at its limit; those limits, s
    rounds = ran = 0
    skips = []  # (ask, why) of every size skipped for the budget
    tuner_s = [TUNER_S]  # what each Tune run took beyond its trials
    while found := asks(p, s := state(p), frozen):
        rounds += 1
        left = budget_s - (clock() - start) - float(np.mean(tuner_s)) * len({a.upto for a in found})
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
            began = clock()
            limit_s, why = trial_limit(budget_s, space.timeout_s, budget_s - (began - start) if first else None)
            part = dataclasses.replace(space, grids=_grids(group), repeats=upto, timeout_s=limit_s, timeout_why=why)
            store = runner.run(part, out, max_concurrent, log, head=detail, **run_kwargs)
            ran += sum(len(a.trials) for a in group)
            rows = read(store.dir)
            tuner_s.append(max(0.0, clock() - began - _trial_seconds(rows, group)))
            for a in cut(rows, group):  # no more runs of a size that ran past its share of the budget
                frozen[a.line].add(a.size)
                stopped.append((a.line, a.size))
                limits.add(limit_s)
                detail(f"cut {a.line.workload} {a.line.axis}={a.size:,}: a trial ran past {in_s(limit_s)} ({why})")
        detail(f"search round {rounds}: {trial_count(sum(len(a.trials) for a in run))} at {len(run)} sizes, "
               f"{len(skip)} sizes skipped; {in_s(clock() - start)} of --budget {in_s(budget_s)}")
        if left <= 0:  # the budget is spent: what the rule wants next is not measured (rowed, and said at the end)
            break
    s = state(p)
    verdicts = [verdict(line, s.measured[line], frozenset(frozen[line])) for line in p.lines]
    skipped = sum(len(a.trials) for a, _ in skips)
    seconds = clock() - start
    spent = (f"search: {trial_count(ran)} in {rounds} round{'s' if rounds != 1 else ''}, {in_s(seconds)}"
             + (f"; {len(stopped)} size{'s' if len(stopped) != 1 else ''} cut at {' or '.join(map(in_s, sorted(limits)))} "
                "a trial" if stopped else "")
             + (f"; {trial_count(skipped)} skipped for --budget {in_s(budget_s)}" if skipped else ""))
    apart = detail is not log  # which sizes were skipped goes to `detail`: where that is not `log`, pointed to
    said = textwrap.wrap(spent + (" (--verbose says which)" if skipped and apart else ":" if skipped else ""),
                         WIDTH, subsequent_indent="    ")
    result = Result(p.store, verdicts, p.gpu_name, rounds, ran, skipped, seconds, tuple(stopped))
    for text in result.lines():
        detail(text)
    for text in said:
        log(text)
    for text in skipped_lines(skips, budget_s) if skipped else ():
        detail(text)
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
        limit_s = min(PROBE_TIMEOUT_S, max(budget_s, PROBE_FLOOR_S))
        if (got := probe(p.trials[line][first, 0, p.cpu], limit_s, p.space.shipping)) is not None:
            found[line] = got
            say(f"probe {line.workload}: a step takes {in_s(got.step_s)} on this CPU, a trial {in_s(got.fixed_s)} "
                f"besides its steps ({in_s(time.monotonic() - began)} to find out)")
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
    grids: dict[object, dict[str, list]] = {}
    for a in group:
        grids.setdefault(a.line.key, {a.line.axis: [], **a.line.held})[a.line.axis].append(a.size)
    return grids


def _trial_seconds(rows: pd.DataFrame, group: list[Ask]) -> float:
    """The trials' own seconds (total_s) of `group`, from their rows: what a Tune run took beyond is its own."""
    wanted = {t.hash for a in group for t in a.trials}
    return float(rows.loc[rows["config_hash"].isin(wanted), "total_s"].fillna(0).sum())

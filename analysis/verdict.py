"""The verdict, made once: per workload, where the GPU trains faster than the CPU and by how much, with
the crossover's interval, or "within noise" where that is the truth (analysis/crossings.py); and what the
sweep's trials cost, or where the sweep knows it, the user's planned run (its workload's defaults), in the picks
`crossover decide` names on the same rows (analysis/decide/ brief: the GPU to rent, the box to buy, your CPU, each
said for what was priced). The end of a sweep
(sweeps/scaling.py), the report (analysis/report.py) and the summary (analysis/summary.py) render this
one structure; none derives a verdict of its own.

    python sweeps/scaling.py --smoke              # ends with render(v): the answer first, in at most 25 lines
    python sweeps/scaling.py --smoke --verbose    # and every table behind it: render(v, verbose=True)
    from .verdict import reach, render; print(render(reach(select(rows))))   # select: selection.py's

Each workload's answer (`Finding`) rests on one line of the crossover table: time per epoch, the CPU
(A) against a GPU (B), along the first axis of HEADLINE_AXES that has a line; among GPUs, the one
compared in most workloads (then the one with most sizes); among slices of that axis (the other sizes
held fixed), the one with most sizes. The other lines are in the crossover table (--verbose, the report).

Reads rows only (numpy, pandas); never imports torch or ray.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from crossover.schema import BUILTIN_MODULE
from crossover.step import Step

from . import decide, model
from .crossings import (
    A_EVERYWHERE,
    B_EVERYWHERE,
    CROSSOVER,
    NOT_COMPUTABLE,
    SEVERAL,
    WITHIN_NOISE,
    BOOT,
    Bootstrap,
    find,
    interpolate,
    render as render_crossovers,
)
from .load import REFERENCE, eager_ok, is_reference, keys
from .selection import Selected

# A size a student reads first: the model's parameters, then the data's, then the rest.
HEADLINE_AXES = ("n_params", "dataset_size", "batch_size", "depth", "width", "context")
UNITS = {"n_params": "parameters", "dataset_size": "samples"}  # "past 555k parameters"; else "past batch size 64"
NOT_COMPARED = "not compared"  # a workload without a line of the CPU against a GPU, and none predicted
PREDICTED = "predicted"  # a workload measured on the CPU alone: each GPU of analysis/devices.yaml predicted
WIDTH = 100  # columns of the default output, so the answer fits a terminal: longer lines wrap, indented
# lines of the default output at most: the end of a sweep is 25 lines with its first and its last two (what it ran,
# where the rows and the report are)
SHORT = 22


@dataclass(frozen=True)
class Finding:
    """One workload's answer: the crossover line it rests on (None: nothing compared) and it in words."""
    workload: str
    kind: str  # the line's verdict (analysis/crossings.py), or NOT_COMPARED
    words: str  # "GPU faster past 555k parameters (95% CI 323k-770k); 14x faster at 1.2M"
    line: pd.Series | None = None
    others: int = 0  # further slices along the same axis (other sizes held fixed): in the crossover table
    gpus: tuple[str, ...] = ()  # PREDICTED: one line per GPU model, fastest first (`predicted`)


@dataclass(frozen=True, eq=False)
class Verdict:
    findings: tuple[Finding, ...]  # per workload: yours first (`yours_first`), then the built-ins
    crossovers: pd.DataFrame  # analysis/crossings.py's whole table
    selected: Selected  # what it was reached from: every row, and those the crossovers timed
    boot: Bootstrap
    decision: decide.Decision | None  # None: not asked for (no reference rows set beside yours)

    @property
    def rows(self) -> pd.DataFrame:
        """Every row it was reached from."""
        return self.selected.rows


def reach(selected: Selected, boot: Bootstrap = BOOT, decision: bool = False, today: dt.date | None = None,
          plan: decide.Request | None = None, counts: Mapping[Step, dict | str] | None = None) -> Verdict:
    """The verdict of `selected` (selection.select): the crossover table, each workload's answer and, with
    `decision`, what the user's planned run `plan` costs (its steps' counts in `counts`, as `priced` takes them)
    where the rows price it, else what the measured grid (this sweep's trials) costs, on every option of
    analysis/prices.yaml and every home box, and for a workload measured on the CPU alone its predicted answer on
    every GPU model (`predicted`); its prices' age on `today` (None: the date it runs)."""
    rows = selected.rows
    table = find(selected, boot)
    ok = rows[rows["status"] == "ok"]
    findings = tuple(_finding(w, _candidates(table), selected, decision) for w in yours_first(ok))
    return Verdict(findings, table, selected, boot, _decision(rows, plan, counts, today) if decision else None)


def _decision(rows: pd.DataFrame, plan: decide.Request | None, counts: Mapping[Step, dict | str] | None,
              today: dt.date | None) -> decide.Decision:
    """`priced`'s for the planned run, where one is given and the rows price it (one configuration they hold),
    else for the sweep."""
    if plan is not None:
        try:
            return priced(rows, plan, counts, today)
        except ValueError:  # a configuration the rows do not hold: the sweep's own trials are what is known
            pass
    return priced(rows, today=today)


def yours_first(rows: pd.DataFrame) -> list[str]:
    """The workloads of `rows`: yours (a workload_module other than the built-ins') first, then the
    built-ins, each in name order."""
    module = rows["workload_module"] if "workload_module" in rows else pd.Series(None, index=rows.index, dtype=object)
    own = set(rows.loc[module.notna() & module.ne(BUILTIN_MODULE), "workload"])
    return sorted(set(rows["workload"]), key=lambda w: (w not in own, w))


def priced(rows: pd.DataFrame, plan: decide.Request | None = None, counts: Mapping[Step, dict | str] | None = None,
           today: dt.date | None = None) -> decide.Decision:
    """The decision for `rows` on every option of analysis/prices.yaml and every home box: the measured grid
    as the sweep, or the planned run `plan` (its steps' counts in `counts`, keyed by decide.steps' Steps:
    decide.planned_step): decide.answer's, the one answer predict and decide give too."""
    return decide.answer(plan, counts, decide.Offer.shipped(today=today), rows)


def _candidates(table: pd.DataFrame) -> pd.DataFrame:
    """The lines a workload's answer may rest on: time per epoch, a CPU against a GPU, ranked."""
    cpu = table["is_cpu_a"] & ~table["is_cpu_b"]
    lines = table[cpu & (table["metric"] == "epoch_s") & (table["verdict"] != NOT_COMPUTABLE)]
    workloads = lines.groupby("device_b")["workload"].transform("nunique")  # the GPU most workloads compare with
    return lines.assign(_axis=lines["axis"].map(HEADLINE_AXES.index), _gpus=-workloads, _points=-lines["n_points"])


def _finding(workload: str, candidates: pd.DataFrame, selected: Selected, predict: bool = False) -> Finding:
    mine = candidates[candidates["workload"] == workload]
    if mine.empty:
        own = selected.rows[selected.rows["workload"] == workload]
        cpu_only = own.loc[own["status"] == "ok", "is_cpu"].all()
        return predicted(workload, own) if predict and cpu_only else Finding(workload, NOT_COMPARED, _why_not(own))
    line = mine.sort_values(["_axis", "_gpus", "device_b", "_points"], kind="stable").iloc[0]
    others = ((mine["axis"] == line["axis"]) & (mine["device_b"] == line["device_b"])).sum() - 1
    return Finding(workload, line["verdict"], words(line) + _busy(line, selected), line, int(others))


def _busy(line: pd.Series, selected: Selected) -> str:
    """' [busy]' where the line rests on your rows flagged outside_load (Selected.busy: no quiet row of
    their configuration, or --include-loaded), ' [busy ref]' on the shipped reference rows' (another
    host's): a mark each (decide.busy, the decision's marks too), explained once under the answer
    (decide.BUSY_MARKS), so that a loaded machine's six answers still fit the screen."""
    rows = selected.rows
    arms = rows["arm"].isin([line["device_a"], line["device_b"]]) & (rows["workload"] == line["workload"])
    return decide.busy(rows[arms & selected.busy])


def _why_not(rows: pd.DataFrame) -> str:
    ok = rows[rows["status"] == "ok"]
    cpu = ok["is_cpu"]
    if cpu.all():
        return f"{NOT_COMPARED}: no GPU rows at its sizes (run on a GPU, or leave out --no-reference)"
    if not cpu.any():
        return f"{NOT_COMPARED}: no CPU rows at its sizes"
    return f"{NOT_COMPARED}: the CPU and the GPU share fewer than two sizes"


def predicted(workload: str, rows: pd.DataFrame) -> Finding:
    """A workload measured on the CPU alone, answered per GPU model of analysis/devices.yaml from
    analysis/model/'s prediction (fitted on the shipped reference rows, applied to its rows' counted
    step costs: decide.predictions): along the first axis of HEADLINE_AXES its CPU rows vary (the slice
    with most sizes), each GPU's time per epoch at the largest size with its 90% interval, and where it
    overtakes the CPU (`_against`). NOT_COMPARED, saying why, where nothing can be predicted."""
    cpu = eager_ok(rows[rows["is_cpu"]])
    guess, note = decide.predictions(rows, list(model.load_devices()))
    guess = guess.assign(config_key=keys(guess)) if len(guess) else guess.assign(config_key=[])
    guess = guess[guess["config_key"].isin(set(cpu["config_key"]))]
    if cpu.empty or guess.empty:
        return Finding(workload, NOT_COMPARED, _unpredicted(rows, note))
    # the CPU arm with most rows, (device_name, torch_threads)
    arm = cast(tuple[str, int], cpu.groupby(["device_name", "torch_threads"]).size().idxmax())
    cpu = cpu[(cpu["device_name"] == arm[0]) & (cpu["torch_threads"] == arm[1])]
    points = cpu.groupby("config_key").agg(cpu_s=("epoch_s_median", "median"),
                                           **{a: (a, "first") for a in HEADLINE_AXES})
    axis = next((a for a in HEADLINE_AXES if points[a].nunique() > 1), "dataset_size")
    rest = [a for a in HEADLINE_AXES if a != axis]
    slices = points.groupby([points[a].fillna(-1) for a in rest], sort=False)
    points = max((g for _, g in slices), key=len).sort_values(axis)
    lines = []
    for gpu, mine in guess.groupby("device_name"):
        at = points.join(mine.set_index("config_key")[["epoch_s_median", "epoch_s_lo", "epoch_s_hi"]], how="inner")
        if len(at):
            last = at.iloc[-1]
            lines.append((last["epoch_s_median"], f"{gpu}: predicted ~{_seconds(last['epoch_s_median'])} s/epoch "
                          f"({_seconds(last['epoch_s_lo'])}-{_seconds(last['epoch_s_hi'])}); {_against(at, axis)}"))
    words = (f"no GPU row: predicted per GPU from its step's counted costs (crossover's model, fitted on the "
             f"reference GPUs; 90% intervals), time per epoch at {_at(axis, points[axis].iloc[-1])}:")
    return Finding(workload, PREDICTED, words, gpus=tuple(text for _, text in sorted(lines)))


def _seconds(x: float) -> str:
    """Seconds to two or three figures, without an exponent: 0.0042, 0.66, 12, 340."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.2g}" if x < 1 else f"{x:.3g}"


def _against(at: pd.DataFrame, axis: str) -> str:
    """A predicted GPU against the measured CPU along `axis`: 'GPU faster at every size measured, ~6.6x (3.6-12)'
    (at the largest size, the interval from the prediction's; one size: 'at the one size measured (256 samples)'), 'CPU faster at every size: the GPU takes
    ~2.1x as long (1.2-3.9)', or 'GPU faster past ~2,050 samples (CI 512->8,190)' where the median
    prediction crosses the CPU, the interval where its ends do (log-log between the sizes around)."""
    x = at[axis].to_numpy(float)
    mid, low, high = (at["cpu_s"].to_numpy(float) / at[c].to_numpy(float)
                      for c in ("epoch_s_median", "epoch_s_hi", "epoch_s_lo"))
    where = everywhere(len(np.unique(x)), axis, x[-1])  # a configuration's seeds are points at one size
    if (mid > 1).all():
        return f"GPU faster {where}, ~{times(mid[-1])} ({times(low[-1])}-{times(high[-1])})"
    if (mid < 1).all():
        return (f"CPU faster {where}: the GPU takes ~{times(1 / mid[-1])} as long "
                f"({times(1 / high[-1])}-{times(1 / low[-1])})")
    side = "past" if mid[-1] > 1 else "below"
    at_mid = _crossing(x, mid)
    ends = []
    for ratio in (high, low):  # either end of the interval: where its optimistic and its pessimistic end cross
        found = _crossing(x, ratio)
        if found is None:  # that end never crosses: before the smallest size or after the largest
            early = (ratio > 1).all() == (side == "past")
            found = -math.inf if early else math.inf
        ends.append(found)
    said = [f"<{amount(x[0])}" if e == -math.inf else f">{amount(x[-1])}" if e == math.inf else amount(e)
            for e in sorted(ends)]
    where = _at(axis, at_mid) if at_mid is not None else f"{axis.replace('_', ' ')} within the sizes measured"
    return f"GPU faster {side} ~{where} (between {said[0]} and {said[1]})"


def _crossing(x: np.ndarray, ratio: np.ndarray) -> float | None:
    """Where `ratio` (CPU time over GPU time) first crosses 1 along x, log-log between the two sizes around
    (the crossover finder's interpolation, analysis/crossings.py)."""
    logr = np.log(ratio)
    turns = np.flatnonzero((logr[:-1] < 0) != (logr[1:] < 0))
    if not len(turns):
        return None
    return float(np.exp(interpolate(np.log(x), logr[None, :], turns[:1])[0]))


def _unpredicted(rows: pd.DataFrame, note: str) -> str:
    """Why a workload measured on the CPU alone has no prediction either, in its user's words."""
    ok = rows[rows["status"] == "ok"]
    said = ok["costs_note"].dropna() if "costs_note" in ok else pd.Series(dtype=str)
    if note:
        why = note.strip().split(": ", 1)[-1]
    elif len(said):
        why = f"its step's costs could not be counted ({said.iloc[0]})"
    else:
        why = ("its rows lack the step's counted costs (FLOPs, bytes and launches a step), which the prediction "
               "needs: they were written before crossover counted them; sweep it again")
    return f"{NOT_COMPARED}: no GPU rows at its sizes, and no GPU predicted: {why}"


def amount(x: float) -> str:
    """A size as a student reads it: 9.82, 640, 5,610, 18.9k, 1.2M."""
    if x >= 1e6:
        return f"{x / 1e6:.3g}M"
    if x >= 1e4:
        return f"{x / 1e3:.3g}k"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def times(x: float) -> str:
    """A ratio of times: 14x, 2.7x, 0.45x."""
    return f"{x:,.0f}x" if x >= 10 else f"{x:.2g}x"


def _at(axis: str, x: float) -> str:
    return f"{amount(x)} {UNITS[axis]}" if axis in UNITS else f"{axis.replace('_', ' ')} {amount(x)}"


def everywhere(sizes: int, axis: str, x: float) -> str:
    """'at every size measured' where several were; one alone is named, a claim no wider than the data:
    'at the one size measured (256 samples)'."""
    return "at every size measured" if sizes > 1 else f"at the one size measured ({_at(axis, x)})"


def _bound(value: float, edge: float, sign: str) -> str:
    return f"{sign}{amount(edge)}" if np.isinf(value) else amount(value)


def words(line) -> str:
    """One crossover line in a student's words, the GPU as B: where it wins and by how much, each figure
    with its interval (at the Bootstrap's confidence, which the heading states)."""
    axis, kind = line["axis"], line["verdict"]
    speedup = f"{times(line['speedup'])} at {{}} ({times(line['speedup_low'])}-{times(line['speedup_high'])})"
    noisy = f"; {line['n_within_noise']:.0f} of {line['n_points']} sizes within noise" if line["n_within_noise"] else ""
    agree = f"; {line['draws_agree']:.0%} of draws agree" if line["draws_agree"] < 0.95 else ""
    if kind == CROSSOVER:
        ci = f"{_bound(line['ci_low'], line['x_min'], '<')}-{_bound(line['ci_high'], line['x_max'], '>')}"
        if line["faster_above"] == "B":
            largest = amount(line["x_max"]) if axis in UNITS else _at(axis, line["x_max"])
            return (f"GPU faster past {_at(axis, line['crossover'])} (CI {ci}), "
                    f"{speedup.format(largest)}{agree}")
        return f"GPU faster below {_at(axis, line['crossover'])} (CI {ci}), CPU above{agree}"
    tied = line["speedup_low"] <= 1 <= line["speedup_high"]  # at the largest size, within noise
    if kind in (B_EVERYWHERE, A_EVERYWHERE) and tied:
        side = "GPU" if kind == B_EVERYWHERE else "the CPU"
        return (f"{side} faster where the noise lets a size tell; at {_at(axis, line['x_max'])} within noise "
                f"(the GPU takes {times(1 / line['speedup_high'])}-{times(1 / line['speedup_low'])} as long)"
                f"{noisy}{agree}")
    if kind == B_EVERYWHERE:
        where = everywhere(line["n_points"], axis, line["x_max"])
        return f"GPU faster {where}: {speedup.format(_at(axis, line['x_max']))}{noisy}{agree}"
    if kind == A_EVERYWHERE:
        slower = (f"{times(1 / line['speedup'])} as long at {_at(axis, line['x_max'])} "
                  f"({times(1 / line['speedup_high'])}-{times(1 / line['speedup_low'])})")
        return f"the CPU is faster {everywhere(line['n_points'], axis, line['x_max'])}: the GPU takes {slower}{noisy}{agree}"
    if kind == SEVERAL:
        return (f"the faster device changes more than once, at {axis} ~ "
                f"{', '.join(amount(c) for c in line['crossings'])}{agree}")
    assert kind == WITHIN_NOISE, kind
    return f"within noise: neither is faster beyond the noise at any of its {line['n_points']} sizes{agree}"


def reference_note(rows: pd.DataFrame) -> str:
    """'your cpu (...) against the NVIDIA H200 measured on 2026-11-22 (results/reference/...): another host'."""
    ref, own = _reference(rows)
    if ref.empty or own.empty:  # nothing set beside: reference rows read on their own are just rows
        return ""
    yours = ", ".join(f"{d} ({n})" for d, n in own.groupby("device")["device_name"].first().items()) or "rows"
    theirs = "; ".join(f"the {name} measured on {group['finished_at'].max():%Y-%m-%d} "
                       f"({', '.join(sorted({_shown(d) for d in group['results_dir']}))})"
                       for name, group in ref.groupby("device_name"))
    return (f"your {yours} against {theirs}: the reference rows come from another host, with its own CPU, "
            "load and software; --no-reference leaves them out")


def reference_line(rows: pd.DataFrame) -> str:
    """reference_note in one line: 'GPU times: NVIDIA H200 (2026-11-22), reference rows from another host ...'."""
    ref, own = _reference(rows)
    if ref.empty or own.empty:
        return ""
    gpus = ", ".join(f"{name} ({group['finished_at'].max():%Y-%m-%d})" for name, group in ref.groupby("device_name"))
    return f"GPU times: {gpus}, reference rows measured on another host; --no-reference leaves them out"


def _reference(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The reference rows among `rows`, and your own ok rows."""
    shipped = rows["results_dir"].map(is_reference)
    return rows[shipped], rows[~shipped & (rows["status"] == "ok")]


def _shown(directory) -> str:
    return str(Path(directory).resolve().relative_to(REFERENCE.parent.parent))


def folded(f) -> tuple[list[str], str | None]:
    """A finding's predicted GPU lines as a short answer shows them: the fastest GPU's, and what the rest are in
    words ('and 20 more GPU models, the slowest GTX 960'); all of them, and None, where there are fewer than three."""
    if len(f.gpus) < 3:
        return list(f.gpus), None
    return list(f.gpus[:1]), f"and {len(f.gpus) - 1} more GPU models, the slowest {f.gpus[-1].split(':')[0]}"


def answer(v: Verdict, every: bool = True) -> list[str]:
    """Per workload, its answer: the first lines of every rendering. A workload predicted on every GPU model lists
    each (`every`), or its fastest and how many more (the end of a sweep, whose picks name the GPU to rent)."""
    if not v.findings:
        return ["no ok row: every trial failed (see the 'error' column)"]
    pad = max(len(f.workload) for f in v.findings)
    out = [f"Where the GPU trains faster than the CPU (time per epoch; {v.boot.confidence:.0%} intervals):"]
    for f in v.findings:
        more = f" (1 of {f.others + 1} settings)" if f.others else ""
        out.append(f"  {f.workload:<{pad}}  {f.words}{more}")
        first, rest = (f.gpus, None) if every else folded(f)
        out += [f"  {'':<{pad}}    {line}" for line in [*first, *([f"{rest} (--verbose lists each)"] if rest else [])]]
    return out + [f"  {mark}: {why}" for mark, why in decide.BUSY_MARKS.items() if any(mark in f.words for f in v.findings)]


def picks(v: Verdict, lines: int) -> list[str]:
    """What the sweep (the configurations your rows measured, each as many times as they ran it: decide.sweep)
    costs, or the planned run the verdict priced in its place (`reach`), as `crossover decide` on the same folder
    says it, in at most about `lines` lines: its first screen
    (decide.brief: the GPU to rent, the box to buy, your CPU, then the front where lines are left)."""
    d = v.decision
    if d is None or not d.grid:  # no ok row: `answer` says so, and there is nothing to price
        return []
    said = decide.brief(d.lines, d.grid, d.picks, d.notes, d.request, (reference_line(v.rows),), lines)
    return said.splitlines()


def render(v: Verdict, verbose: bool = False, lines: int = SHORT) -> str:
    """The verdict as text: the answer first, then what the sweep costs on the picks (`picks`: the GPU to rent,
    the box to buy, your CPU, as `crossover decide` says them), where the GPU rows come from and what was left
    out, in at most `lines` lines of at most WIDTH columns (the picks are never cut: where they and the answer
    alone pass it, so does the text); a busy mark is explained once, and what was left out is said in one line
    where its whole sentence has no room, and not at all (the marks say it) where that one has none. `verbose` adds every GPU predicted, the reference note in full, the
    crossover table and the whole decision (every option, the break-even, how each is costed)."""
    dropped = v.selected.left_out
    if not verbose:
        own = sorted(set(_reference(v.rows)[1]["results_dir"]))  # the flag is the report command's: say whose
        dropped = dropped.replace("--include-loaded keeps them",
                                  f"crossover report {' '.join(own)} --include-loaded keeps them")
        said = [wrapped for line in answer(v, every=False) for wrapped in _wrap(line)]
        if v.decision is None:
            said += _wrap(reference_line(v.rows)) if reference_line(v.rows) else []
        busy = v.selected.busy_count
        for left in ([_wrap(dropped)] if dropped else [[]]) + ([[f"{busy}: --verbose says which the answer keeps"], []]
                                                               if busy else []):
            text = _once(said + left + picks(v, lines - len(said) - len(left)))
            if len(text) <= lines:
                break
        return "\n".join(text)
    d = v.decision
    parts = answer(v) + list(filter(None, [reference_note(v.rows),
                                            render_crossovers(v.crossovers, v.selected)]))
    if d is not None and d.grid:
        parts.append(decide.render(d.lines, d.grid, d.picks, d.evens, d.notes))
    return "\n".join(parts)


def _once(lines: list[str]) -> list[str]:
    """`lines` without a line whose words were said by an earlier one (a busy mark the answer and the picks
    both explain)."""
    seen, out = set(), []
    for line in lines:
        words = " ".join(line.split())
        if words.startswith("[") and words in seen:
            continue
        seen.add(words)
        out.append(line)
    return out


def _wrap(line: str) -> list[str]:
    """`line` in lines of at most WIDTH columns; an indented line's next lines under its second word."""
    head = re.match(r"\s+\S+\s+", line)
    indent = " " * (min(head.end(), 24) if head else 4)
    return textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False) or [""]

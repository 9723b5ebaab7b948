"""A run predicted with nothing measured, in words (`crossover predict`): its first screen (`first_screen`: the picks,
the heading, the memory it needs, the notes and marks) and every GPU model's line (`render`, --verbose), each from the
`Decision` that answer.counted gives. The marks and their notes are text.py's, as every screen says them.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pandas as pd

from crossover.schema import Precision
from crossover.step import AXES

from ..model.device_table import load_devices
from . import many
from .answer import Decision
from .choosing import AS_FAST, RENT_CHEAPEST, RENT_FASTEST, YOUR_CPU, first
from .grid import HOME_BOX, NO_PRICE
from .line import Line
from .memory import CONTEXT_BYTES
from .request import Request
from .text import (
    BOUND_MARK, HOST_MARK, STALE, WIDTH, bound_note, cards, graph_said, host_note, money, not_renting, per_epoch,
    pick_lines, run_time, said, startup, tables)

SCREEN = 25  # lines of the first screen at most, each of at most WIDTH columns


def wrap(text: str) -> list[str]:
    """`text` in lines of at most WIDTH columns, the next ones indented."""
    return textwrap.wrap(text, WIDTH, subsequent_indent="    ", break_on_hyphens=False)


def heading(step: Mapping, request: Request) -> str:
    """The run and how its step was counted, in one line (wrapped where it is shown); its batch a GPU's ('batch 128 a
    GPU'), or with --global-batch the run's ('batch 128 in all, split over the GPUs')."""
    params = json.loads(step["workload_params"]) if step.get("workload_params") else {}
    shape = ", ".join([f"{a} {step[a]}" for a in AXES if step.get(a) is not None]
                      + [f"{k} {v}" for k, v in params.items()])
    where = ("the meta device (shapes only)" if step.get("counted_on") == "meta" else
             f"the CPU, for real, at {step['counted_batches']} (its shapes depend on its data), a line to its batch"
             if step.get("counted_batches") else "the CPU")
    own = " (PyTorch's own)" if request.precision == Precision.DEFAULT else ""
    frozen = f" trained, {step['n_frozen_params']:,} frozen" if step.get("n_frozen_params") else ""
    return (f"== {step['workload']}{f' ({shape})' if shape else ''}: {request.epochs:,} epochs of "
            f"{request.samples:,} samples, batch {int(step['batch_size']):,} {request.batch_words}, precision "
            f"{request.precision}{own}; one step counted on {where}: {step['n_params']:,} parameters{frozen}, "
            f"{step['steps_per_epoch']:,} steps an epoch ==")


def _gpus(found: Decision) -> list[Line]:
    """The answer's GPU lines: every GPU model on one GPU and on each count of GPUs, the home boxes left out."""
    return [o for o in found.lines if o.kind != HOME_BOX]


def _stale(found: Decision) -> str:
    """The one line on the prices used that are over 12 months old; '' where none is."""
    old = {o.option for o in found.lines if o.price_stale}
    return (f"{STALE} {len(old)} of the prices used are over 12 months old (python -m crossover.analysis cost lists "
            "them)") if old else ""


def first_screen(found: Decision) -> list[str]:
    """What the run costs in the picks `crossover decide` names (the answer's, `first`, said by pick_lines): the GPU
    to rent, fastest and cheapest (on one GPU or on several of one instance), the box to buy with its break-even, and
    your CPU, which nothing here timed (`crossover sweep` does), or where no instance has as many GPUs as --gpus asks,
    which counts it has (the answer's `absent`); first, where a pick beats every rental, that renting does not pay
    (not_renting); then the heading, the GPU memory the run needs, the answer's notes (where the run's precision is
    slower than the default, and why), what the marks mean, the stale prices and what --verbose adds. Within SCREEN
    lines of WIDTH columns."""
    request, step = found.request, found.step
    if request is None or step is None:
        raise ValueError("the first screen of a predicted run needs the answer of a counted step (answer.counted)")
    shown_picks = first(found.picks)
    cpu = (f"not timed (predict times nothing): crossover sweep --workload {request.workload} --devices cpu --smoke "
           "times it here; crossover decide then names it")
    said_picks = pick_lines(shown_picks, request, {YOUR_CPU: cpu, **found.absent})
    shown = [line for line in shown_picks.values() if line is not None]
    more = (f"--verbose: every GPU model's line ({len(_gpus(found))}): time per epoch, run, start-up, cost and where, "
            "whether it fits; how each figure is found. Every figure is predicted; none was timed.")
    notes = [*found.notes, host_note(shown), bound_note(shown), _stale(found)]
    return [*wrap(not_renting(found.lines, found.picks)), *wrap(heading(step, request)), *said_picks,
            *wrap(cards(found.lines)), *(w for n in notes if n for w in wrap(n)), *wrap(more)]


def alone(line: Line) -> Line:
    """`line` with its run time on the GPU alone: a rented option's start-up (startup_s) taken out, so that every
    line's run is said alike and the start-up apart."""
    held = line.startup_s
    if math.isnan(held):
        return line
    return replace(line, wall_h=line.wall_h - held / 3600, wall_lo_h=line.wall_lo_h - held / 3600,
                   wall_hi_h=line.wall_hi_h - held / 3600)


def render(found: Decision) -> str:
    """Every GPU model's line as text (--verbose): one line per GPU model and count (time per epoch, the run's time on
    the GPU alone, the start-up of the option it is priced at, its cost and that option's name, whether it fits),
    then how each figure is found; where some lines are of several GPUs, first the picks among the rentals (the
    fastest, the cheapest as fast as one GPU, each GPU model's cheapest count). The table is split into tables of at
    most WIDTH columns, each led by the GPU (`tables`); option names are never cut."""
    request, step, lines = found.request, found.step, _gpus(found)
    if request is None or step is None:
        raise ValueError("every GPU's line of a predicted run needs the answer of a counted step (answer.counted)")
    cells = [("GPUs", "s/epoch", "graphs", f"run, {request.epochs:,} epochs", "start-up", "cost", "eff", "priced at",
              "fits")]
    for line in lines:
        priced = line.kind != NO_PRICE
        fits = "?" if line.fits is None else "yes" if line.fits else "no"
        marks = " ".join(m for m, on in ((BOUND_MARK, bool(line.bound_by)), (HOST_MARK, line.host_bound is True)) if on)
        # the run's and the cost's intervals are the epoch's times the epochs: said once, below
        cells.append((line.model + (f" x{many.said_gpus(line)}" if line.several else ""),
                      per_epoch(line).replace(" s/epoch", "") + (f" {marks}" if marks else ""),
                      graph_said(line).split(" s/epoch")[0] or "-", run_time(alone(line)).split(" (")[0],
                      startup(line) or "-", money(line).split(" (")[0] if priced else "-",
                      f"{line.efficiency:.2f}" if line.several else "", line.option if priced else "no price", fits))
    body = tables(pd.DataFrame(cells[1:], columns=list(cells[0])))  # split to fit WIDTH columns
    gpu = next((o for o in lines if not math.isnan(o.needs_gb) and o.needs_how), None)
    memory = (f"whether the card's memory (the GPU table shipped with crossover) holds the ~{gpu.needs_gb:,.2g} "
              f"GB the run needs ({gpu.needs_how}, + {CONTEXT_BYTES / 1e9:g} GB CUDA context)"
              if gpu else "not known: the step's bytes were not counted")
    notes = [
        "predicted by crossover's model from the step's counted costs, fitted on the reference GPUs' rows shipped "
        "with crossover; '~': predicted, its 90% interval in brackets. Nothing here was timed.",
        host_note(lines), bound_note(lines),
        "graphs: s/epoch with the step in one CUDA graph, where the host bounds it (compile_epoch_s in --json)"
        if any(o.host_bound is True for o in lines) else "",
        f"run: {request.epochs:,} epochs at the time per epoch, on the GPU alone (no set-up, evaluation or transfer), "
        "on every line alike (its interval, and the cost's, the epoch's x the epochs); start-up: the rented "
        "instance's, before the run, billed (in its cost, and in the picks' run time); cost: the cheapest on-demand "
        "option of the price table shipped with crossover with that many of the GPU, billed as it bills; fits: "
        f"{memory}",
        smaller_note(lines, int(step["batch_size"])), unit_note(request, [o.model for o in lines]),
    ]
    several = {name: line for name, line in found.picks.items() if line is not None and (
        name in (RENT_FASTEST, AS_FAST) or name.startswith(f"{RENT_CHEAPEST} "))}
    several = several if any(o.several for o in lines) else {}
    picked = [w for p in many.said_picks(several, said) for w in wrap(p)]
    notes += [many.NOTE] if several else []
    return "\n".join([*picked, *body, *(w for n in notes if n for w in wrap(n))])


def unit_note(request: Request, gpus: list[str]) -> str:
    """The GPUs of `gpus` without the unit request.precision runs on (analysis/model/ Device.lacks), in one note:
    priced at their FP32 peak, as PyTorch runs them; '' where every one has it."""
    devices = load_devices()
    lacking: dict[str, list[str]] = {}
    for gpu in dict.fromkeys(gpus):
        if gpu in devices and (unit := devices[gpu].lacks(request.precision)):
            lacking.setdefault(unit, []).append(gpu)
    return "; ".join(f"no {unit} unit on {', '.join(names)}: PyTorch runs {request.precision} there without it "
                     "(emulated or on the FP32 cores), so they are priced at their FP32 peak, never faster than at "
                     "the default" for unit, names in lacking.items())


def smaller_note(lines: Sequence[Line], batch: int) -> str:
    """One note for the GPUs the run (of `batch` samples a step) does not fit, grouped by the largest batch that
    would fit each; '' where it fits every one."""
    said_fits = []
    groups: dict[tuple[int, int | None], list[str]] = {}
    for o in lines:
        if o.largest_batch is not None:
            groups.setdefault((o.largest_batch, o.accumulate_steps), []).append(o.model)
    for (n, k), models in groups.items():
        gpus = ", ".join(models)
        said_fits.append(f"{gpus}: not even batch 1 fits" if n == 0 else
                         f"{gpus}: largest batch that fits: {n:,} (accumulate {k:,} steps for batch {batch:,})")
    return "does not fit: " + "; ".join(said_fits) if said_fits else ""

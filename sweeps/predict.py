"""`crossover predict`: a workload's time per epoch, run time and cost on every GPU model, without a sweep.

    crossover predict --workload examples/zoo.py:workload --param arch=mobilenet_v2 --batch-size 128 \\
        --dataset-size 50000 --epochs 30
    crossover predict --workload job.py:workload --epochs 10 --json -      # the figures as JSON on stdout
    crossover predict --workload job.py:workload --epochs 10 --precision bf16   # trained in bf16 autocast

One step of the workload is counted (sweeps/count_step.py: FLOPs, bytes and launches per op class, as
a CPU trial's row counts them) in a process of its own (sweeps/counting.py, which `decide` counts a planned
run's step through too), with a time limit (--timeout): the user's code is
imported and run there, never here, and a hang or a crash ends this command with one line naming the
workload, what happened and the fix (exit status 2). Meanwhile this process fits analysis/model/ on the
shipped reference rows (model.shipped), the same fit `decide` and the end of a sweep predict with, kept in the
user's cache folder once fitted (analysis/cache.py). A step counted before, at any dataset size and epochs, is read
from that folder instead (sweeps/count_cache.py: keyed by the job file's fingerprint, its configuration and
precision, crossover's and torch's code): no process starts, and the answer comes in a second or two.

Per GPU model, fastest first: the time per epoch with its 90% interval; the run's time, --epochs epochs
of it (no set-up, evaluation or transfer: nothing was timed), plus the start-up of the option it is
priced at; its cost at the cheapest one-GPU on-demand option of analysis/prices.yaml, billed as that
provider bills (analysis/decide/ `table`), where one exists; and whether the run fits the card's
memory (decide.memory_needed: the peak of the step, counted by trainables/memory.py) and, on a card it
does not fit, the largest batch that would and the steps of it that accumulate the run's batch. Every figure
is predicted, never measured. Reads no rows of the user's; imports neither torch nor ray.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from crossover.config import PRECISIONS
from crossover.step import AXES, TIMEOUT_S, Step

from ..analysis import cost, decide, model
from ..analysis.cli import HelpFormatter, gpu_counts
from ..analysis.decide import many
from ..trainables.job import EXAMPLES, named
from . import count_cache
from .cli import at_least, param
from .counting import PredictError


def predicted(found: decide.Decision, counted: Mapping) -> tuple[decide.Line, ...]:
    """One line per GPU model of the GPU table shipped with crossover, fastest first, from `found` (decide.answer's
    answer for the counted run, `counted` its step): priced at its cheapest one-GPU on-demand option (the provider's
    start-up included, as in its bill), else its line of no price (the GPU's run alone, decide.counted); then a line
    per home box (as decide prices it: its write-off and electricity); each with the batch that fits (`smaller`)."""
    by_gpu: dict[str, decide.Line] = {}
    for line in sorted(found.lines, key=lambda o: (math.isnan(o.usd), o.usd, o.wall_s)):
        if line.kind in ("on-demand", decide.NO_PRICE) and line.gpus == 1:
            by_gpu.setdefault(line.model, line)
    fastest = sorted(by_gpu.values(), key=lambda o: (o.epoch_s, math.isnan(o.usd), o.usd))
    return smaller([*fastest, *(o for o in found.lines if o.kind == decide.HOME_BOX)], counted)


def answer(counts: Mapping[Step, dict], plan: decide.Plan, offer: decide.Offer, scale: many.Scale,
           steps: Mapping[int, dict]) -> tuple[tuple[decide.Line, ...], tuple[decide.Line, ...], decide.Decision]:
    """The counted run (`counts`: its step at plan.precision, and at PyTorch's default where that differs) on every
    GPU model (decide.answer, the answer decide and the end of a sweep give; `predicted`), on every count of GPUs of
    `scale` (many.on_gpus, from `steps`: the step counted at each per-GPU batch, many.batches, the run's own among
    them) and on every home box of `offer`: (the GPUs' lines, the boxes' lines, decide's answer: its grid, its notes)."""
    found = decide.answer(decide.Run(pd.DataFrame(), plan, counts), offer)
    counted = next(c for s, c in counts.items() if s.precision == plan.precision)
    lines = predicted(found, counted)
    owned = tuple(o for o in lines if o.kind == decide.HOME_BOX)
    gpus = many.on_gpus([o for o in lines if o.kind != decide.HOME_BOX], steps, int(counted["batch_size"]),
                        plan.epochs, scale, list(offer.options), dict(offer.billing), offer.today)
    return gpus, owned, found


def smaller(lines: Sequence[decide.Line], counted: Mapping) -> tuple[decide.Line, ...]:
    """`lines` with, on each GPU the run does not fit, the largest batch that would (largest_batch, 0: not one
    sample; decide.largest_batch) and how many steps of it accumulate the run's batch (accumulate_steps);
    None elsewhere, and where the count has no peak a sample (batch 1, or no counted peak)."""
    per_sample, batch = counted.get("peak_memory_per_sample_bytes"), int(counted["batch_size"])
    out = []
    for line in lines:
        n = (decide.largest_batch(line.needs_gb * 1e9, per_sample, batch, line.memory_gb)
             if per_sample is not None and line.fits is False else None)
        out.append(replace(line, largest_batch=n, accumulate_steps=-(-batch // n) if n else None))
    return tuple(out)


def heading(counted: Mapping, epochs: int, scale: many.Scale) -> str:
    """The run and how its step was counted, in one line (wrapped where it is shown); its batch a GPU's ('batch 128 a
    GPU'), or with --global-batch the run's ('batch 128 in all, split over the GPUs'), as `scale` prices it."""
    params = json.loads(counted["workload_params"]) if counted.get("workload_params") else {}
    shape = ", ".join([f"{a} {counted[a]}" for a in AXES if counted.get(a) is not None]
                      + [f"{k} {v}" for k, v in params.items()])
    where = ("the meta device (shapes only)" if counted.get("counted_on") == "meta" else
             f"the CPU, for real, at {counted['counted_batches']} (its shapes depend on its data), a line to its batch"
             if counted.get("counted_batches") else "the CPU")
    precision = counted.get("precision", "default")
    own = " (PyTorch's own)" if precision == "default" else ""
    frozen = f" trained, {counted['n_frozen_params']:,} frozen" if counted.get("n_frozen_params") else ""
    batch = counted["batch_size"]
    return (f"== {counted['workload']}{f' ({shape})' if shape else ''}: {epochs:,} epochs of "
            f"{counted['dataset_size']:,} samples, batch {batch:,} {many.batch_words(scale)}, precision "
            f"{precision}{own}; one step counted on {where}: {counted['n_params']:,} parameters{frozen}, "
            f"{counted['steps_per_epoch']:,} steps an epoch ==")


def wrap(text: str) -> list[str]:
    """`text` in lines of at most decide.WIDTH columns, the next ones indented."""
    return textwrap.wrap(text, decide.WIDTH, subsequent_indent="    ", break_on_hyphens=False)


def first_screen(lines: Sequence[decide.Line], boxes: Sequence[decide.Line], chosen: Mapping[str, decide.Line | None],
                 counted: Mapping, epochs: int, old: list[str], workload: str, scale: many.Scale,
                 offer: decide.Offer, notes: Sequence[str] = ()) -> list[str]:
    """What the run costs in the picks `crossover decide` names (`chosen`: decide.picks' of `lines` and `boxes`, the
    first screen's, decide.first, said by decide.pick_lines): the GPU to rent, fastest and cheapest (on one GPU or on
    several of one instance), the box to buy with its break-even, and your CPU, which nothing here timed (`crossover
    sweep` does), or where no instance of `offer` has as many GPUs as --gpus asks, which counts it has; first, where
    a pick beats every rental, that renting does not pay (decide.not_renting); then the heading (its batch as `scale`
    takes it), the GPU memory the run needs, `notes` (the answer's: where the run's precision is slower than the
    default, and why), what the marks mean, the stale prices and what --verbose adds. Within SCREEN lines of
    decide.WIDTH columns."""
    plan = decide.Plan(epochs, int(counted["dataset_size"]), precision=counted.get("precision", "default"))
    options = [*lines, *boxes]
    shown_picks = decide.first(chosen)
    cpu = (f"not timed (predict times nothing): crossover sweep --workload {workload} --devices cpu --smoke "
           "times it here; crossover decide then names it")
    lacking = scale.unoffered(list(offer.options))
    said = decide.pick_lines(shown_picks, plan, {decide.YOUR_CPU: cpu, decide.RENT_FASTEST: f"none: {lacking}"}
                             if lacking else {decide.YOUR_CPU: cpu})
    shown = [line for line in shown_picks.values() if line is not None]
    marks = [decide.host_note(shown)]
    marks += ["(bound: ...): a bound, not a figure of its own: never slower than a GPU it outran in public "
              "benchmarks"] if any(line.bound_by for line in shown) else []
    dated = [f"{decide.STALE} {len(old)} of the prices used are over 12 months old (python -m crossover.analysis "
             "cost lists them)"] if old else []
    more = (f"--verbose: every GPU model's line ({len(lines)}): time per epoch, run, start-up, cost and where, "
            "whether it fits; how each figure is found. Every figure is predicted; none was timed.")
    return [*wrap(decide.not_renting(options, chosen)), *wrap(heading(counted, epochs, scale)), *said,
            *wrap(decide.cards(options)), *(w for n in [*notes, *marks, *dated] if n for w in wrap(n)), *wrap(more)]


SCREEN = 25  # lines of the first screen at most, each of at most decide.WIDTH columns


def alone(line: decide.Line) -> decide.Line:
    """`line` with its run time on the GPU alone: a rented option's start-up (startup_s) taken out, so that every
    line's run is said alike and the start-up apart."""
    held = line.startup_s
    if math.isnan(held):
        return line
    return replace(line, wall_h=line.wall_h - held / 3600, wall_lo_h=line.wall_lo_h - held / 3600,
                   wall_hi_h=line.wall_hi_h - held / 3600)


def render(lines: Sequence[decide.Line], chosen: Mapping[str, decide.Line | None], counted: Mapping, epochs: int,
           old: list[str]) -> str:
    """Every GPU model's line as text (--verbose): one line per GPU model and count (time per epoch, the run's time on
    the GPU alone, the start-up of the option it is priced at, its cost and that option's name, whether it fits),
    then how each figure is found; where some lines are of several GPUs, first the picks among the rentals (`chosen`:
    decide.picks', the fastest, the cheapest as fast as one GPU, each GPU model's cheapest count). The table is split
    into tables of at most decide.WIDTH columns, each led by the GPU (decide.tables); option names are never cut."""
    cells = [("GPUs", "s/epoch", "graphs", f"run, {epochs:,} epochs", "start-up", "cost", "eff", "priced at", "fits")]
    for line in lines:
        priced = line.kind != decide.NO_PRICE
        fits = "?" if line.fits is None else "yes" if line.fits else "no"
        marks = "".join(m for m, on in ((BOUND, bool(line.bound_by)), (HOST, line.host_bound is True)) if on)
        # the run's and the cost's intervals are the epoch's times the epochs: said once, below
        cells.append((line.model + (f" x{many.said_gpus(line)}" if line.several else ""),
                      decide.per_epoch(line).replace(" s/epoch", "") + (f" {marks}" if marks else ""),
                      decide.graph_said(line).split(" s/epoch")[0] or "-", decide.run_time(alone(line)).split(" (")[0],
                      decide.startup(line) or "-", decide.money(line).split(" (")[0] if priced else "-",
                      f"{line.efficiency:.2f}" if line.several else "", line.option if priced else "no price", fits))
    body = decide.tables(pd.DataFrame(cells[1:], columns=list(cells[0])))  # split to fit decide.WIDTH columns
    gpu = next((o for o in lines if not math.isnan(o.needs_gb) and o.needs_how), None)
    memory = (f"whether the card's memory (the GPU table shipped with crossover) holds the ~{gpu.needs_gb:,.2g} "
              f"GB the run needs ({gpu.needs_how}, + {decide.CONTEXT_BYTES / 1e9:g} GB CUDA context)"
              if gpu else "not known: the step's bytes were not counted")
    precision = counted.get("precision", "default")
    notes = [
        "predicted by crossover's model from the step's counted costs, fitted on the reference GPUs' rows shipped "
        "with crossover; '~': predicted, its 90% interval in brackets. Nothing here was timed.",
        *([host_note(lines)] if any(o.host_bound is True for o in lines) else []),
        *([bound_note(lines)] if any(o.bound_by for o in lines) else []),
        f"run: {epochs:,} epochs at the time per epoch, on the GPU alone (no set-up, evaluation or transfer), on "
        "every line alike (its interval, and the cost's, the epoch's x the epochs); start-up: the rented instance's, "
        "before the run, billed (in its cost, and in the picks' run time); cost: the cheapest on-demand option of the "
        f"price table shipped with crossover with that many of the GPU, billed as it bills; fits: {memory}",
    ]
    notes += [smaller_note(lines, counted)] if any(o.largest_batch is not None for o in lines) else []
    lacking = unit_note(precision, [o.model for o in lines])
    notes += [lacking] if lacking else []
    several = {name: line for name, line in chosen.items() if line is not None and (
        name in (decide.RENT_FASTEST, decide.AS_FAST) or name.startswith(f"{decide.RENT_CHEAPEST} "))}
    several = several if any(o.several for o in lines) else {}
    first = [w for p in many.said_picks(several, decide.said) for w in wrap(p)]
    notes += [many.NOTE] if several else []
    return "\n".join([*first, *body, *(w for n in notes for w in wrap(n))])


BOUND, HOST = "<", "H"  # the marks of a figure set by a faster GPU's (`bound_note`) and of a host-bound step (`host_note`)


def host_note(lines: Sequence[decide.Line]) -> str:
    """What the host-bound mark says, once: the host's share of the step, and the cure (the graphs column)."""
    share = [o.host_share for o in lines if o.host_bound is True]
    return (f"{HOST}: {decide.HOST_WORDS} (its CPU holds {min(share):.0%}-{max(share):.0%} of the step; the interval "
            "spans the hosts measured); graphs: s/epoch with the step in one CUDA graph (compile_epoch_s in --json)")


def bound_note(lines: Sequence[decide.Line]) -> str:
    """What the bound mark says, once, naming each GPU whose figure set others' (decide.bound_mark)."""
    bound: dict[str, list[str]] = {}
    for o in lines:
        if o.bound_by:
            bound.setdefault(o.bound_by, []).append(o.model)
    said = "; ".join(f"{', '.join(models)} as {other}" for other, models in bound.items())
    return f"{BOUND}: a bound, not a figure of its own: never slower than a GPU it outran in public benchmarks: {said}"


def unit_note(precision: str, gpus: list[str]) -> str | None:
    """The GPUs of `gpus` without the unit `precision` runs on (analysis/model/ Device.lacks), in one note: priced
    at their FP32 peak, as PyTorch runs them; None where every one has it."""
    devices = model.load_devices()
    lacking: dict[str, list[str]] = {}
    for gpu in dict.fromkeys(gpus):
        if gpu in devices and (unit := devices[gpu].lacks(precision)):
            lacking.setdefault(unit, []).append(gpu)
    return "; ".join(f"no {unit} unit on {', '.join(names)}: PyTorch runs {precision} there without it (emulated or "
                     "on the FP32 cores), so they are priced at their FP32 peak, never faster than at the default"
                     for unit, names in lacking.items()) or None


def smaller_note(lines: Sequence[decide.Line], counted: Mapping) -> str:
    """One note for the GPUs the run does not fit, grouped by the largest batch that would fit each."""
    batch, said = int(counted["batch_size"]), []
    groups: dict[tuple[int, int | None], list[str]] = {}
    for o in lines:
        if o.largest_batch is not None:
            groups.setdefault((o.largest_batch, o.accumulate_steps), []).append(o.model)
    for (n, k), models in groups.items():
        gpus = ", ".join(models)
        said.append(f"{gpus}: not even batch 1 fits" if n == 0 else
                    f"{gpus}: largest batch that fits: {n:,} (accumulate {k:,} steps for batch {batch:,})")
    return "does not fit: " + "; ".join(said)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crossover predict", description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--workload", required=True, type=named, metavar="REF",
                   help="your workload, path/to/job.py:ATTR or package.module:ATTR, or an example job's name "
                        f"({', '.join(EXAMPLES)}) or a built-in's")
    p.add_argument("--epochs", type=at_least(1), required=True, help="epochs of your planned run")
    p.add_argument("--batch-size", type=at_least(1), default=None, metavar="N",
                   help="samples a step (default: the workload's)")
    p.add_argument("--dataset-size", type=at_least(1), default=None, metavar="N",
                   help="samples an epoch (default: the workload's)")
    for axis in AXES:
        p.add_argument(f"--{axis}", type=at_least(1), default=None, metavar="N",
                       help=f"the workload's {axis}, where it declares that axis (default: its own)")
    p.add_argument("--param", action="append", default=[], type=param, metavar="NAME=VALUE",
                   help="a value of your workload's own axis (Workload.params), e.g. --param arch=mobilenet_v2; "
                        "repeatable")
    p.add_argument("--precision", default="default", choices=PRECISIONS,
                   help="the precision you will train at: default (PyTorch's own: FP32, TF32 in cuDNN's convolutions), "
                        "fp32 (strict), tf32, bf16 (autocast) or fp16 (autocast with a GradScaler)")
    p.add_argument("--gpus", type=gpu_counts, default=(), metavar="N[,N...]",
                   help="GPUs of one instance to price the run on, data-parallel, each count on the instance of the "
                        "fewest GPUs that has as many (billed whole) (default: 1 and every count an instance of the "
                        f"price table has, up to {many.MOST}), e.g. --gpus 1,2,4,8 or --gpus 3")
    p.add_argument("--nodes", type=at_least(1), default=1, metavar="M",
                   help="instances joined by their network, each of --gpus GPUs (priced where the price table names the network)")
    p.add_argument("--global-batch", action="store_true",
                   help="--batch-size is the run's batch, split over the GPUs (each takes batch / GPUs); without it, "
                        "--batch-size is what one GPU takes (torchrun's, Lightning's, per_device_train_batch_size)")
    p.add_argument("--timeout", type=at_least(1), default=TIMEOUT_S, metavar="S",
                   help="seconds the process that imports your job and counts one step may run before it is stopped")
    p.add_argument("--verbose", action="store_true",
                   help="after the picks, every GPU model's line (on each count of GPUs priced) and how each figure "
                        "is found")
    p.add_argument("--json", type=Path, default=None, metavar="PATH",
                   help="also write every GPU's figures as a JSON list to PATH ('-': stdout alone, the table then to "
                        "stderr): option, gpu, batch_size, dataset_size, epoch_s and its interval, run_s, usd, fits, "
                        "basis and more")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    request = Step(args.workload, args.epochs, args.batch_size, args.dataset_size,
                   tuple((a, getattr(args, a)) for a in AXES if getattr(args, a) is not None),
                   tuple(args.param), args.timeout, args.precision)
    started = time.monotonic()
    # at a precision other than the default, the step at the default too: a GPU without the precision's unit (bf16 on
    # a T4) is never predicted faster than there
    requests = [request] + ([replace(request, precision="default")] if request.precision != "default" else [])
    kept, counting = count_cache.begin(requests)  # a step counted before, at any batch: no process, no torch
    try:
        model.shipped(model.PER_CLASS)  # read from the cache, or fitted while the step is counted: two cores, two jobs
        counts = kept | count_cache.end(counting, started)
        counted = counts[request]
        plan = decide.Plan(request.epochs, int(counted["dataset_size"]), precision=request.precision)
        offer = decide.Offer.shipped()
        scale, batch = many.Scale(args.gpus, args.nodes, args.global_batch), int(counted["batch_size"])
        # with --global-batch, each count of GPUs takes its share of the batch: a line through the count
        shares = {replace(request, batch_size=b): b for b in many.batches(scale, batch, list(offer.options))}
        steps = {shares[s]: c for s, c in count_cache.recount(*shares).items()} | {batch: counted}
        lines, owned, found = answer(counts, plan, offer, scale, steps)
    except (PredictError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    used = {o.option for o in lines}
    old = [line for line in cost.stale([o for o in offer.options if o.name in used])]
    text = sys.stderr if str(args.json) == "-" else sys.stdout  # stdout holds the JSON alone
    chosen = decide.picks([*lines, *owned])  # every screen and JSON record names these
    if args.json is not None:
        listed = json.dumps(decide.records([*lines, *owned], found.grid, plan, chosen), indent=1)
        print(listed) if str(args.json) == "-" else args.json.write_text(listed + "\n")
    print("\n".join(first_screen(lines, owned, chosen, counted, request.epochs, old, request.workload, scale,
                                 offer, found.notes)),
          file=text)
    if args.verbose:
        print(render(lines, chosen, counted, request.epochs, old), file=text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

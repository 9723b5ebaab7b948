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
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pandas as pd

from crossover.config import PRECISIONS
from crossover.step import AXES, TIMEOUT_S, Step

from ..analysis import cost, decide, model
from ..analysis.cli import HelpFormatter
from ..analysis.decide import many
from . import count_cache
from .cli import at_least, param
from .counting import PredictError, finish, start


def predicted(found: decide.Decision, counted: Mapping) -> pd.DataFrame:
    """One line per GPU model of the GPU table shipped with crossover, fastest first, from `found` (decide.answer's
    answer for the counted run, `counted` its step): with decide's columns (`table`'s: epoch_s and its interval,
    wall_s, usd, fits, ...; decide.HOST's), priced at its cheapest one-GPU on-demand option, else with no price (the
    GPU's run alone, found.speeds); then a line per home box (kind decide.HOME_BOX, as decide prices it: its
    write-off and electricity)."""
    rented, speed = found.options, found.speeds
    owned = rented[rented["kind"] == decide.HOME_BOX] if len(rented) else rented
    cards = {k: d.memory_gb for k, d in model.load_devices().items()}
    lines = []
    for run in speed.itertuples():
        gpu = run.source
        one = rented[(rented["model"] == gpu) & (rented["gpus"] == 1) & (rented["kind"] == "on-demand")] \
            if len(rented) else rented
        if len(one):  # its run as decide prices it: the provider's start-up included, as in its bill
            lines.append(one.sort_values(["usd", "wall_s"]).iloc[0].to_dict())
            continue
        # no price: the run's time on the GPU alone
        alone = speed[speed["source"] == gpu].iloc[0]
        wall = {f"wall{end}_s": alone[column] for end, column in (("", "trial_s"), ("_lo", "trial_lo"),
                                                                  ("_hi", "trial_hi"))}
        wall |= {k.replace("_s", "_h"): v / 3600 for k, v in wall.items()}
        lines.append({"option": f"{gpu} (no price)", "kind": "no price", "model": gpu, "gpus": 1,
                      **alone[["epoch_s", "epoch_lo", "epoch_hi", "predicted", "reach", *decide.HOST]].to_dict(),
                      **wall, "predicted_share": 1.0, "usd": math.nan, "usd_lo": math.nan, "usd_hi": math.nan,
                      "basis": "no option of the price table has it: the GPU's time alone"}
                     | decide.card_fits(alone.to_dict(), cards.get(gpu)))
    by_gpu = pd.DataFrame(lines).sort_values(["epoch_s", "usd"], ignore_index=True)
    return smaller(pd.concat([by_gpu, owned], ignore_index=True), counted)


def on_many(lines: pd.DataFrame, counted: Mapping, epochs: int, scale: many.Scale, offer: decide.Offer,
            count) -> pd.DataFrame:
    """`lines` (one GPU each, `predicted`) and the run on every count of GPUs of `scale` (many.lines), one GPU's
    lines left out where 1 is not among them, each GPU model's lines together, its fastest one-GPU first. `count(b)`:
    the step counted at per-GPU batch b, where --global-batch asks one other than the counted one's."""
    batch, samples = int(counted["batch_size"]), int(counted["dataset_size"])
    gpus = list(model.load_devices())
    options = list(offer.options)
    speed = lambda c: decide.at_plan("run", pd.DataFrame([c]), decide.Plan(  # noqa: E731
        epochs, samples, precision=c.get("precision", "default")), gpus)
    reference = speed(counted)
    per_gpu = {scale.per_gpu(batch, n) for n in scale.counts(options)} - {batch}
    steps = {b: speed(count(b)) for b in sorted(per_gpu)} | {batch: reference}
    found = many.lines(steps, float(counted.get("trainable_params") or counted["n_params"]), batch, samples, epochs,
                       scale, options, dict(offer.billing), reference)
    ones = many.one_gpu(lines, batch) if 1 in scale.counts(options) and scale.nodes == 1 else lines.iloc[:0]
    out = pd.concat([ones, found], ignore_index=True)
    order = out.groupby("model")["epoch_s"].transform("min")
    return out.assign(_order=order).sort_values(["_order", "model", "nodes", "gpus"], ignore_index=True).drop(columns="_order")


def answer(counts: Mapping[Step, dict], plan: decide.Plan, offer: decide.Offer, scale: many.Scale, count
           ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The counted run (`counts`: its step at plan.precision, and at PyTorch's default where that differs) on every
    GPU model (decide.answer, the answer decide and the end of a sweep give; `predicted`), on every count of GPUs of
    `scale` (`on_many`) and on every home box of `offer`: (the GPUs' lines, the boxes' lines, the run as decide's grid).
    `count(b)`: the step counted at per-GPU batch b (on_many)."""
    found = decide.answer(decide.Run(pd.DataFrame(), plan, counts), offer)
    counted = next(c for s, c in counts.items() if s.precision == plan.precision)
    lines = predicted(found, counted)
    owned = lines[lines["kind"] == decide.HOME_BOX]
    return on_many(lines[lines["kind"] != decide.HOME_BOX], counted, plan.epochs, scale, offer, count), owned, found.grid


def smaller(lines: pd.DataFrame, counted: dict) -> pd.DataFrame:
    """`lines` with, on each GPU the run does not fit, the largest batch that would (largest_batch, 0: not one
    sample; decide.largest_batch) and how many steps of it accumulate the run's batch (accumulate_steps);
    null elsewhere, and where the count has no peak a sample (batch 1, or no counted peak)."""
    per_sample, batch = counted.get("peak_memory_per_sample_bytes"), int(counted["batch_size"])
    largest, steps = [], []
    for line in lines.itertuples():
        short = per_sample is not None and pd.notna(line.fits) and not line.fits
        n = decide.largest_batch(line.needs_gb * 1e9, per_sample, batch, line.memory_gb) if short else None
        largest.append(n)
        steps.append(-(-batch // n) if n else None)
    return lines.assign(largest_batch=pd.array(largest, dtype="Int64"), accumulate_steps=pd.array(steps, dtype="Int64"))


def heading(lines: pd.DataFrame, counted: dict, epochs: int) -> str:
    """The run and how its step was counted, in one line (wrapped where it is shown)."""
    params = json.loads(counted["workload_params"]) if counted.get("workload_params") else {}
    shape = ", ".join([f"{a} {counted[a]}" for a in AXES if counted.get(a) is not None]
                      + [f"{k} {v}" for k, v in params.items()])
    where = "the meta device (shapes only)" if counted.get("counted_on") == "meta" else "the CPU"
    precision = counted.get("precision", "default")
    own = " (PyTorch's own)" if precision == "default" else ""
    frozen = f" trained, {counted['n_frozen_params']:,} frozen" if counted.get("n_frozen_params") else ""
    batch = counted["batch_size"]
    return (f"== {counted['workload']}{f' ({shape})' if shape else ''}: {epochs:,} epochs of "
            f"{counted['dataset_size']:,} samples, batch {batch:,}{batch_said(lines, batch)}, precision "
            f"{precision}{own}; one step counted on {where}: {counted['n_params']:,} parameters{frozen}, "
            f"{counted['steps_per_epoch']:,} steps an epoch ==")


def wrap(text: str) -> list[str]:
    """`text` in lines of at most decide.WIDTH columns, the next ones indented."""
    return textwrap.wrap(text, decide.WIDTH, subsequent_indent="    ", break_on_hyphens=False)


def first_screen(lines: pd.DataFrame, boxes: pd.DataFrame, counted: dict, epochs: int, old: list[str],
                 workload: str) -> list[str]:
    """What the run costs in the picks `crossover decide` names (decide.three, said by decide.pick_lines): the GPU
    to rent, fastest and cheapest (on one GPU or on several of one instance), the box to buy with its break-even, and
    your CPU, which nothing here timed (`crossover sweep` does); first, where a box is faster and cheaper than every
    rental, that renting does not pay (decide.not_renting); then the heading, the GPU memory the run needs, what the
    marks mean, the stale prices and what --verbose adds. Within SCREEN lines of decide.WIDTH columns."""
    plan = decide.Plan(epochs, int(counted["dataset_size"]), precision=counted.get("precision", "default"))
    options = pd.concat([lines, boxes], ignore_index=True)
    chosen = decide.three(options)
    cpu = (f"not timed (predict times nothing): crossover sweep --workload {workload} --devices cpu --smoke "
           "times it here; crossover decide then names it")
    said = decide.pick_lines(chosen, plan, {decide.YOUR_CPU: cpu})
    shown = pd.DataFrame([line for line in chosen.values() if line is not None])
    marks = [decide.host_note(shown)] if len(shown) and "host_bound" in shown else []
    marks += ["(bound: ...): a bound, not a figure of its own: never slower than a GPU it outran in public "
              "benchmarks"] if len(shown) and shown.get("bound_by", pd.Series(dtype=object)).notna().any() else []
    dated = [f"{decide.STALE} {len(old)} of the prices used are over 12 months old (python -m crossover.analysis "
             "cost lists them)"] if old else []
    more = (f"--verbose: every GPU model's line ({len(lines)}): time per epoch, run, start-up, cost and where, "
            "whether it fits; how each figure is found. Every figure is predicted; none was timed.")
    return [*wrap(decide.not_renting(options)), *wrap(heading(lines, counted, epochs)), *said,
            *wrap(decide.cards(options)), *(w for n in marks + dated if n for w in wrap(n)), *wrap(more)]


SCREEN = 25  # lines of the first screen at most, each of at most decide.WIDTH columns


def alone(line: pd.Series) -> pd.Series:
    """`line` with its run time on the GPU alone: a rented option's start-up (startup_s) taken out, so that every
    line's run is said alike and the start-up apart."""
    held = line.get("startup_s", math.nan)
    if pd.isna(held):
        return line
    out = line.copy()
    for column in ("wall_h", "wall_lo_h", "wall_hi_h"):
        out[column] = line[column] - held / 3600
    return out


def render(lines: pd.DataFrame, counted: dict, epochs: int, old: list[str]) -> str:
    """Every GPU model's line as text (--verbose): one line per GPU model and count (time per epoch, the run's time on
    the GPU alone, the start-up of the option it is priced at, its cost and that option's name, whether it fits),
    then how each figure is found. Option names are never cut: a line is as wide as its longest name needs."""
    cells = [("GPUs", "s/epoch", "graphs", f"run, {epochs:,} epochs", "start-up", "cost", "eff", "priced at", "fits")]
    for _, line in lines.iterrows():
        priced = line["kind"] != "no price"
        fits = "?" if line["fits"] is None or pd.isna(line["fits"]) else "yes" if line["fits"] else "no"
        several = line["gpus"] * line["nodes"] > 1
        marks = "".join(m for m, on in ((BOUND, bool(decide.bound_mark(line))),
                                        (HOST, decide.flagged(line, "host_bound"))) if on)
        # the run's and the cost's intervals are the epoch's times the epochs: said once, below
        cells.append((line["model"] + (f" x{many.said_gpus(line)}" if several else ""),
                      decide.per_epoch(line).replace(" s/epoch", "") + (f" {marks}" if marks else ""),
                      decide.graph_said(line).split(" s/epoch")[0] or "-", decide.run_time(alone(line)).split(" (")[0],
                      decide.startup(line) or "-", decide.money(line).split(" (")[0] if priced else "-",
                      f"{line['efficiency']:.2f}" if several else "", line["option"] if priced else "no price", fits))
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    body = ["  " + "  ".join(c[i].ljust(widths[i]) for i in range(len(c))).rstrip() for c in cells]
    gpu = lines[lines["needs_gb"].notna() & lines["needs_how"].notna()] if "needs_gb" in lines else lines.iloc[:0]
    memory = (f"whether the card's memory (the GPU table shipped with crossover) holds the ~{gpu['needs_gb'].iloc[0]:,.2g} "
              f"GB the run needs ({gpu['needs_how'].iloc[0]}, + {decide.CONTEXT_BYTES / 1e9:g} GB CUDA context)"
              if len(gpu) else "not known: the step's bytes were not counted")
    precision = counted.get("precision", "default")
    notes = [
        "predicted by crossover's model from the step's counted costs, fitted on the reference GPUs' rows shipped "
        "with crossover; '~': predicted, its 90% interval in brackets. Nothing here was timed.",
        *([host_note(lines)] if lines.get("host_bound", pd.Series(dtype=object)).eq(True).any() else []),
        *([bound_note(lines)] if lines.get("bound_by", pd.Series(dtype=object)).notna().any() else []),
        f"run: {epochs:,} epochs at the time per epoch, on the GPU alone (no set-up, evaluation or transfer), on "
        "every line alike (its interval, and the cost's, the epoch's x the epochs); start-up: the rented instance's, "
        "before the run, billed (in its cost, and in the picks' run time); cost: the cheapest on-demand option of the "
        f"price table shipped with crossover with that many of the GPU, billed as it bills; fits: {memory}",
    ]
    notes += [smaller_note(lines, counted)] if lines["largest_batch"].notna().any() else []
    notes += [unit_note(precision, list(lines["model"]))] if unit_note(precision, list(lines["model"])) else []
    chosen = many.picks(lines) if (lines["gpus"] * lines["nodes"]).max() > 1 else {}
    first = [w for p in many.said_picks(chosen, decide.said) for w in wrap(p)]
    notes += [many.NOTE] if chosen else []
    return "\n".join([*first, *body, *(w for n in notes for w in wrap(n))])


def batch_said(lines: pd.DataFrame, batch: int) -> str:
    """' a GPU (the run's: 128 x its GPUs)' where lines of several GPUs keep a GPU's batch, ' in all (split over the
    GPUs)' where they keep the run's (--global-batch); '' for one GPU alone."""
    if (lines["gpus"] * lines["nodes"]).max() <= 1:
        return ""
    return (" in all (split over the GPUs)" if lines["global_batch"].nunique() == 1
            else f" a GPU (the run's: {batch:,} x its GPUs)")


BOUND, HOST = "<", "H"  # the marks of a figure set by a faster GPU's (`bound_note`) and of a host-bound step (`host_note`)


def host_note(lines: pd.DataFrame) -> str:
    """What the host-bound mark says, once: the host's share of the step, and the cure (the graphs column)."""
    share = lines.loc[lines["host_bound"].eq(True), "host_share"]
    return (f"{HOST}: {decide.HOST_WORDS} (its CPU holds {share.min():.0%}-{share.max():.0%} of the step; the interval "
            "spans the hosts measured); graphs: s/epoch with the step in one CUDA graph (compile_epoch_s in --json)")


def bound_note(lines: pd.DataFrame) -> str:
    """What the bound mark says, once, naming each GPU whose figure set others' (decide.bound_mark)."""
    bound = lines[lines["bound_by"].notna()]
    said = "; ".join(f"{', '.join(g['model'])} as {other}" for other, g in bound.groupby("bound_by", sort=False))
    return f"{BOUND}: a bound, not a figure of its own: never slower than a GPU it outran in public benchmarks: {said}"


def unit_note(precision: str, gpus: list[str]) -> str | None:
    """The GPUs of `gpus` without the unit `precision` runs on (analysis/model/ Device.lacks), in one note: priced
    at their FP32 peak, as PyTorch runs them; None where every one has it."""
    devices = model.load_devices()
    lacking = {}
    for gpu in dict.fromkeys(gpus):
        if gpu in devices and (unit := devices[gpu].lacks(precision)):
            lacking.setdefault(unit, []).append(gpu)
    return "; ".join(f"no {unit} unit on {', '.join(names)}: PyTorch runs {precision} there without it (emulated or "
                     "on the FP32 cores), so they are priced at their FP32 peak, never faster than at the default"
                     for unit, names in lacking.items()) or None


def smaller_note(lines: pd.DataFrame, counted: dict) -> str:
    """One note for the GPUs the run does not fit, grouped by the largest batch that would fit each."""
    batch, said = int(counted["batch_size"]), []
    for (n, k), group in lines[lines["largest_batch"].notna()].groupby(["largest_batch", "accumulate_steps"],
                                                                         dropna=False, sort=False):
        gpus = ", ".join(group["model"])
        said.append(f"{gpus}: not even batch 1 fits" if n == 0 else
                    f"{gpus}: largest batch that fits: {n:,} (accumulate {k:,} steps for batch {batch:,})")
    return "does not fit: " + "; ".join(said)


def counts(text: str) -> tuple[int, ...]:
    """--gpus 1,2,4,8 as (1, 2, 4, 8); anything else refused in one line."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be GPU counts >= 1 separated by commas, e.g. 1,2,4,8; got {text!r}")
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crossover predict", description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--workload", required=True, metavar="REF",
                   help="your workload, path/to/job.py:ATTR or package.module:ATTR (or a built-in's name)")
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
    p.add_argument("--gpus", type=counts, default=(), metavar="N[,N...]",
                   help="GPUs of one instance to price the run on, data-parallel (default: 1 and every count an instance "
                        f"of the price table has, up to {many.MOST}), e.g. --gpus 1,2,4,8")
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
    kept = [count_cache.read(r) for r in requests]  # a step counted before: no process, no torch
    processes = [start(r) if k is None else None for r, k in zip(requests, kept)]
    try:
        model.shipped(model.PER_CLASS)  # read from the cache, or fitted while the step is counted: two cores, two jobs
        counts = {r: k or count_cache.keep(r, finish(p, r, started)) for r, k, p in zip(requests, kept, processes)}
        counted = counts[request]
        plan = decide.Plan(request.epochs, int(counted["dataset_size"]), precision=request.precision)
        offer = decide.Offer.shipped()
        lines, owned, grid = answer(counts, plan, offer, many.Scale(args.gpus, args.nodes, args.global_batch),
                                    lambda b: count_cache.recount(replace(request, batch_size=b)))
    except (PredictError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for process in processes:
            if process is not None and process.poll() is None:  # this process failed first: the counting ones are
                process.kill()                                  # not left behind
                process.wait()
    used = {o for o in lines["option"]}
    old = [line for line in cost.stale([o for o in offer.options if o.name in used])]
    text = sys.stderr if str(args.json) == "-" else sys.stdout  # stdout holds the JSON alone
    if args.json is not None:
        listed = json.dumps(decide.records(pd.concat([lines, owned], ignore_index=True), grid, plan), indent=1)
        print(listed) if str(args.json) == "-" else args.json.write_text(listed + "\n")
    print("\n".join(first_screen(lines, owned, counted, request.epochs, old, request.workload)), file=text)
    if args.verbose:
        print(render(lines, counted, request.epochs, old), file=text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

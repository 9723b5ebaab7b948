"""A planned run on N GPUs of one instance, and on M instances: its time (analysis/model/collective.py's data-parallel
step), priced as rented (an N-GPU instance's whole price for the run's time on its N GPUs), and the picks in words.

    crossover predict --workload job.py:workload --epochs 30 --gpus 1,2,4,8 [--nodes 2] [--global-batch]
    crossover decide results/job --epochs 30 --dataset-size 50000 --gpus 1,8

The batch is the batch a GPU takes (torchrun's, Lightning's, Hugging Face's per_device_train_batch_size): W = N x M
GPUs train W times it a step, and an epoch takes 1/W of the steps. With --global-batch the batch is the run's, and
each GPU takes 1/W of it. Efficiency: samples a second on W GPUs over W times one GPU's, one GPU at the batch that
answers the question (the per-GPU batch: weak scaling; with --global-batch the run's: strong scaling).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ..model import load_devices
from ..model.collective import (
    GRAD_BYTES, Link, ddp_bytes, ddp_step, efficiency, fsdp_bytes, fsdp_step, load_links)
from ..model.hosts import HOST_BOUND
from ..prices import Billing, Option
from .choosing import by_cost
from .grid import NO_PRICE
from .line import Line
from .request import Request
from .speeds import OWN_SIZE, at_plan

PER_GPU = ("gpus", "nodes", "per_gpu_batch", "global_batch", "efficiency", "parallel", "link")  # a line's columns


def links_of(option: Option | None, gpu: str) -> tuple[Link, Link | None]:
    """The link between an instance's GPUs (its own, else its GPU model's, else PCIe 4) and its network."""
    links, devices = load_links(), load_devices()
    key = (option.link if option else None) or (devices[gpu].link if gpu in devices else None) or "pcie4"
    network = option.network if option else None
    for name in (key, network):
        if name and name not in links:
            raise ValueError(f"link {name!r} ({option.name if option else gpu}) is not among the links of the GPU "
                             f"table: {sorted(links)}; add it there or name one of those")
    return links[key], links[network] if network else None


def scaled(one: dict, n_params: float, batch: int, samples: int, gpus: int, nodes: int, link: Link,
           network: Link | None, memory_gb: float | None, reference_epoch_s: float, tensors: float | None = None) -> dict:
    """One GPU's line at the per-GPU batch `batch` (epoch_s, epoch_lo, epoch_hi over `samples`; needs_bytes) as a run
    on `gpus` x `nodes` GPUs of a model of `tensors` parameter tensors that train (None: not counted): data-parallel (DDP) where a rank fits the card, else sharded (FSDP) where that fits,
    else DDP marked as not fitting; its time per epoch and interval, efficiency against `reference_epoch_s`, what
    a rank needs of memory and whether it fits, and the host's share of its step (one GPU's `host_share` and the reducer's work over the
    longer step) with the GPU whose figure bounds one GPU's (`bound_by`)."""
    ranks = gpus * nodes
    steps_one, steps = -(-samples // batch), -(-samples // (batch * ranks))
    compute = (float(one["epoch_lo"]) / steps_one, float(one["epoch_s"]) / steps_one,
               float(one["epoch_hi"]) / steps_one)
    grads = GRAD_BYTES * n_params
    needs = one.get("needs_bytes", math.nan)
    mode, rank_bytes = "DDP" if ranks > 1 else "one GPU", needs
    if ranks > 1 and pd.notna(needs):
        rank_bytes = ddp_bytes(needs, grads)
        if memory_gb is not None and rank_bytes > memory_gb * 1e9 and fsdp_bytes(needs, n_params, ranks) <= memory_gb * 1e9:
            mode, rank_bytes = "FSDP", fsdp_bytes(needs, n_params, ranks)
    step = (fsdp_step if mode == "FSDP" else ddp_step)(compute, grads, gpus, nodes, link, network, tensors)
    epoch = {c: steps * v for c, v in zip(("epoch_s", "epoch_lo", "epoch_hi"), (step.step_s, step.step_lo, step.step_hi))}
    fits = None if memory_gb is None or pd.isna(rank_bytes) else bool(rank_bytes <= memory_gb * 1e9)
    # each rank's host dispatches the step as one GPU's does, and the reducer's work besides; the collective runs on
    # the GPUs: past HOST_BOUND of the longer step, faster GPUs (or more of them) do not help
    one_share = one.get("host_share", math.nan)  # NaN or None: not known
    share = ((float(one_share) if pd.notna(one_share) else math.nan) * compute[1] + step.host_s) / step.step_s
    return {**epoch, "host_share": share, "host_bound": bool(share > HOST_BOUND) if pd.notna(share) else None,
            "bound_by": one.get("bound_by"), "gpus": gpus, "nodes": nodes, "per_gpu_batch": batch,
            "global_batch": batch * ranks,
            "efficiency": efficiency(reference_epoch_s, ranks, epoch["epoch_s"]), "parallel": mode,
            "link": link.name + (f", {network.name} between nodes" if nodes > 1 and network else ""),
            "comm_s": step.comm_s, "needs_bytes": rank_bytes, "needs_gb": rank_bytes / 1e9, "memory_gb": memory_gb,
            "fits": fits, "predicted": True}


def rented(line: dict, option: Option, bill: Billing, epochs: int, nodes: int, today: dt.date | None = None) -> dict:
    """`line`'s run on `nodes` of `option`, each rented whole for the run's time on its GPUs (all of them, or the
    line's `gpus` of more, instance_gpus): the provider's
    start-up, then epochs x the time per epoch, billed as it bills, x nodes; its price's age counted to `today`
    (None: today)."""
    price, used = option.on_demand, line.get("gpus", option.gpus)  # the GPUs the run uses: all, where not said
    out = {"option": (f"{nodes} x " if nodes > 1 else "") + option.name, "kind": "on-demand", "startup_s": bill.startup_s,
           "price_date": price.date, "price_source": price.source, "price_stale": price.is_stale(today or dt.date.today()),
           "instance_gpus": option.gpus if option.gpus > used else None,
           "basis": f"{nodes * used}{f' of {nodes * option.gpus}' if option.gpus > used else ''} x {option.gpu}, "
                    f"{nodes} instance{'s' if nodes > 1 else ''} rented whole; "
                    f"{bill.startup_s:.0f} s start-up; billed per {bill.step_s:g} s"}
    for end, column in (("", "epoch_s"), ("_lo", "epoch_lo"), ("_hi", "epoch_hi")):
        wall = bill.startup_s + epochs * line[column]
        out |= {f"wall{end}_s": wall, f"wall{end}_h": wall / 3600,
                f"usd{end}": nodes * price.usd_per_h * bill.charged_s(wall) / 3600}
    return out


def unpriced(line: dict, epochs: int, why: str) -> dict:
    """`line`'s run with no price: its GPUs' time alone."""
    out = {"option": f"{line['model']} x {line['gpus'] * line['nodes']} (no price)", "kind": NO_PRICE, "basis": why,
           "usd": math.nan, "usd_lo": math.nan, "usd_hi": math.nan}
    for end, column in (("", "epoch_s"), ("_lo", "epoch_lo"), ("_hi", "epoch_hi")):
        out |= {f"wall{end}_s": epochs * line[column], f"wall{end}_h": epochs * line[column] / 3600}
    return out


def lines(speeds: dict[int, pd.DataFrame], n_params: float, batch: int, request: Request, options: list[Option], billing: dict[str, Billing], reference: pd.DataFrame,
          today: dt.date | None = None, tensors: float | None = None) -> tuple[Line, ...]:
    """Every GPU model an instance offers and every count of `request` above one: the run on that many (`scaled`), priced
    on the cheapest on-demand instance of that model of that many, or for a count asked, of the fewest GPUs that has
    as many (Request.instance, `rented`: billed whole, its GPUs beyond the run's idle), else unpriced. `speeds`: per per-GPU batch, one
    GPU's predicted line per GPU model (decide.at_plan's); `reference`: one GPU's line per model at the batch
    efficiency is measured against; `today`: the day the prices' age is counted to (None: today); `tensors`: the
    model's parameter tensors that train (None: not counted)."""
    devices, out = load_devices(), []
    rentable = {o.gpu for o in options if o.gpu}  # a GPU no instance offers is said on one GPU alone
    for gpus in (n for n in request.counts(options) if n * request.nodes > 1):
        per_gpu = request.per_gpu(batch, gpus)
        for one in speeds[per_gpu].to_dict("records"):
            gpu = one["source"]
            if gpu not in rentable:
                continue
            offered = request.instance(options, gpu, gpus)
            link, network = links_of(offered, gpu)
            base = reference.loc[reference["source"] == gpu, "epoch_s"]
            line = {"model": gpu, "reach": OWN_SIZE, "predicted_share": 1.0, "largest_batch": None,
                    "accumulate_steps": None, "needs_how": one.get("needs_how")} | scaled(
                one, n_params, per_gpu, request.samples, gpus, request.nodes, link, network,
                devices[gpu].memory_gb if gpu in devices else None, float(base.iloc[0]) if len(base) else math.nan,
                tensors)
            out.append(Line.of(line | (
                rented(line, offered, billing[offered.provider], request.epochs, request.nodes, today) if offered
                else unpriced(line, request.epochs, f"no instance of {gpus} or more x {gpu} in the price table"
                              + (" with a network between nodes" if request.nodes > 1 else "")))))
    return tuple(out)


def on_gpus(ones: Sequence[Line], steps: Mapping[int, tuple[dict, dict | None]], batch: int, request: Request,
            options: list[Option], billing: dict[str, Billing], today: dt.date | None = None) -> tuple[Line, ...]:
    """`ones` (the run on one GPU of each model) and the run on every count of GPUs of `request` (`lines`), one GPU's
    lines left out where 1 is not among them, each GPU model's lines together, its fastest one-GPU first. `steps`: per
    per-GPU batch (the run's own `batch` and every one of Request.batches), the run's step counted there and, at a
    precision other than the default, its step at the default (None: not counted); each is predicted on every GPU of
    the device table as a configuration no row measured (at_plan), never faster than at the default on a GPU without
    the precision's unit: the rule one GPU's figure keeps, kept on many."""
    gpus = list(load_devices())
    speeds = {b: at_plan("run", pd.DataFrame([step]), request, gpus,
                         pd.DataFrame([default]) if default is not None else None)
              for b, (step, default) in steps.items()}
    counted = steps[batch][0]
    found = lines(speeds, float(counted.get("trainable_params") or counted["n_params"]), batch, request, options,
                  billing, speeds[batch], today, counted.get("n_param_tensors"))
    out = [*(one_gpu(ones, batch) if 1 in request.counts(options) and request.nodes == 1 else ()), *found]
    first: dict[str, float] = {}  # each GPU model's fastest time per epoch: the models in that order, its lines together
    for line in out:
        first[line.model] = min(first.get(line.model, math.inf), line.epoch_s)
    return tuple(sorted(out, key=lambda o: (first[o.model], o.model, o.nodes, o.gpus)))


def one_gpu(found: Sequence[Line], batch: int) -> tuple[Line, ...]:
    """One-GPU lines as a line of many GPUs says itself (PER_GPU): 1 node, the batch its own, efficiency 1."""
    return tuple(dataclasses.replace(o, nodes=1, per_gpu_batch=batch, global_batch=batch, efficiency=1.0,
                                     parallel="one GPU", link="") for o in found)


def said_gpus(line: Line) -> str:
    """'8', or across nodes '2x8' (nodes x GPUs each), '3 of 4' where the instance has more GPUs than the run uses,
    with ' FSDP' where the run is sharded."""
    count = (f"{line.nodes}x{line.gpus}" if line.nodes > 1 else f"{line.gpus}") \
        + (f" of {line.instance_gpus}" if line.instance_gpus else "")
    return count + (" FSDP" if line.parallel == "FSDP" else "")


def said_picks(chosen: Mapping[str, Line], said) -> list[str]:
    """The picks in words, a line each: 'fastest: Lambda 8x H100 SXM, ~137 s/epoch ..., 8 GPUs, efficiency 0.99'."""
    return [f"{name}: {said(line)}, {said_gpus(line)} GPU{'s' if line.several else ''}"
            f"{' (sharded)' if line.parallel == 'FSDP' else ''}"
            + (f", efficiency {line.efficiency:.2f}" if line.several else "")
            for name, line in chosen.items()]


NOTE = ("GPUs: data-parallel on one instance (DDP: each GPU a copy of the model and the batch above, the gradients "
        "all-reduced over its link while the backward runs; FSDP where a copy does not fit: the model sharded); an "
        "instance is charged whole for the run's time on its GPUs; eff: samples a second over that many times one "
        "GPU's; several GPUs are shown for the GPU models an instance offers. Every figure of several GPUs is "
        "predicted; none was timed.")


def instances(found: Sequence[Line], batch: int, n_params: float, request: Request, options: list[Option],
              billing: dict[str, Billing]) -> tuple[Line, ...]:
    """`decide`'s options for a planned run of request.samples samples an epoch at `batch` a GPU (`table`'s lines: each
    instance's on one of its GPUs) as the run on each count of request.counts its instances are the ones of its GPU
    model for (Request.instance: all of its GPUs, or for a count asked, fewer, billed whole), and on request.nodes of
    them (`_on`); a GPU option of no count left out; cheapest first. Your own GPUs and the home boxes stay as they
    are."""
    named, devices, out = {o.name: o for o in options}, load_devices(), []
    for line in found:
        option = named.get(line.option.removesuffix(" (spot)"))
        if option is None or option.gpu is None or math.isnan(line.epoch_s) or option.gpu not in devices:
            out.append(line)
            continue
        # the counts asked its GPU model's instances of this many GPUs are the smallest for: 3 GPUs on one of 4
        for gpus in request.counts(options):
            least = request.instance(options, option.gpu, gpus)
            if least is None or least.gpus != option.gpus:
                continue
            out.append(line if option.gpus * request.nodes <= 1 or (request.nodes > 1 and not option.network) else
                       _on(line, option, gpus, batch, request.samples, n_params, request.epochs, request.nodes, billing, devices))
    return tuple(sorted(out, key=by_cost))


def _on(line: Line, option: Option, gpus: int, batch: int, samples: int, n_params: float, epochs: int, nodes: int,
        billing: dict[str, Billing], devices: dict) -> Line:
    """`line` (`option`'s on one of its GPUs) as the run on `gpus` of its GPUs and on `nodes` of it (`scaled`): its
    time per epoch, the run's time (its fixed seconds kept), and the whole instances' price for it."""
    link, network = links_of(option, option.gpu or "")
    ran = scaled(dataclasses.asdict(line) | {"needs_bytes": line.needs_gb * 1e9}, n_params, batch, samples,
                 gpus, nodes, link, network, devices[option.gpu].memory_gb, line.epoch_s)
    bill, price = billing[option.provider], option.spot if line.kind == "spot" else option.on_demand
    if price is None:  # Option.prices() makes a spot line only where there is a spot price
        raise ValueError(f"option {option.name!r}: a spot line without a spot price (the price table's spot:)")
    fixed = line.wall_s - bill.startup_s - epochs * line.epoch_s  # set-up, transfer, evaluation: kept
    for end, column in (("", "epoch_s"), ("_lo", "epoch_lo"), ("_hi", "epoch_hi")):
        wall = bill.startup_s + max(fixed, 0.0) + epochs * ran[column]
        ran |= {f"wall{end}_s": wall, f"wall{end}_h": wall / 3600,
                f"usd{end}": nodes * price.usd_per_h * bill.charged_s(wall) / 3600}
    whole = f" of {option.gpus * nodes}" if option.gpus > gpus else ""
    return Line.of(dataclasses.asdict(line) | ran | {
        "option": (f"{nodes} x " if nodes > 1 else "") + line.option, "predicted_share": 1.0, "modelled": True,
        "instance_gpus": option.gpus if option.gpus > gpus else None,
        "basis": f"{ran['parallel']} on {gpus * nodes}{whole} x {option.gpu}, rented whole; "
                 + line.basis.split("; ", 1)[-1]})

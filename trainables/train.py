"""One trial, measured: the single training loop for every device, and the Tune trainable around it.

    run_trial(TrialConfig(workload="disc", depth=6))   # pure: returns the row's measured fields
    trainable({"trial": {...}})                       # what Tune runs: reports that row once

The loop keeps data and model on the trial's device and, in `loop="fast"` mode, never syncs with
the host inside an epoch: the loss and correct counts accumulate as device tensors. `loop="seed"`
reproduces the seeds' own loop (a `.item()` every step, the loss summed into a tensor that keeps
its graph, as seed 000 did) so the seeds' figures can be compared like for like.
"""

from __future__ import annotations

import time
import traceback

import torch

from trainables import env
from trainables.config import TrialConfig
from trainables.data import Data
from trainables.devices import Placement, parse, placement, resources
from trainables.neighbours import Window
from trainables.timing import Clock, Timer, summarize
from trainables.workloads import WORKLOADS, Workload, describe, n_params, resolve

ROW_KEY = "crossover_row"  # the key under which a trial reports its row to Tune
_LABEL = ("workload", "device", "depth", "width", "batch_size", "dataset_size", "seed")  # names a trial


def _batches(n: int, batch_size: int, order, rank: int, world: int):
    """Index pairs (inputs, targets) of one epoch: each global batch in order, this rank's share of it.

    The last batch may be short, as with a DataLoader. `order` is a permutation on the inputs' and on
    the targets' devices (they differ in a pipeline), or None for the data's own order.
    """
    for start in range(0, n, batch_size):
        if order is None:
            share = slice(start + rank, min(start + batch_size, n), world)
            yield share, share
        else:
            yield tuple(o[start:start + batch_size][rank::world] for o in order)


def _per_sample_sum(loss: torch.Tensor, crit: torch.nn.Module, batch: int) -> torch.Tensor:
    return loss if crit.reduction == "sum" else loss * batch


def train_epoch(wl: Workload, model, opt, crit, data: Data, batch_size: int, order, seed_loop: bool,
                where: Placement):
    """One epoch of this process's share; returns (loss summed over samples, correct) as device tensors."""
    model.train()
    loss_sum = torch.zeros((), device=where.output_device)
    correct = torch.zeros((), device=where.output_device, dtype=torch.long)
    seed_acc = 0.0
    for ix, iy in _batches(len(data.x), batch_size, order, where.rank, where.world):
        xb, yb = data.x[ix], data.y[iy]
        out = model(xb)
        loss = crit(out, yb)
        opt.zero_grad(set_to_none=True)
        # DDP averages gradients over ranks: a loss summed over the batch (lenet) must count every rank's
        # share in full to step as one process would on the whole batch.
        (loss * where.world if crit.reduction == "sum" else loss).backward()
        opt.step()
        if seed_loop:
            loss_sum = loss_sum + _per_sample_sum(loss, crit, len(yb))  # keeps the graph, as seed 000
            seed_acc += loss.item()  # a host sync every step, as seeds 001 and 002
        else:
            loss_sum += _per_sample_sum(loss.detach(), crit, len(yb))
        if wl.task == "classification":
            correct += (out.detach().argmax(1) == yb).sum()
    return loss_sum.detach(), correct


@torch.no_grad()
def evaluate(wl: Workload, model, crit, data: Data, batch_size: int, where: Placement):
    """Mean loss per sample and accuracy on the test split, whole, in every process."""
    model.eval()
    loss_sum = torch.zeros((), device=where.output_device)
    correct = torch.zeros((), device=where.output_device, dtype=torch.long)
    for ix, iy in _batches(data.n_test, batch_size, None, 0, 1):
        out = model(data.test_x[ix])
        yb = data.test_y[iy]
        loss_sum += _per_sample_sum(crit(out, yb), crit, len(yb))
        if wl.task == "classification":
            correct += (out.argmax(1) == yb).sum()
    accuracy = correct.item() / data.n_test if wl.task == "classification" else None
    return loss_sum.item() / data.n_test, accuracy


def run_trial(cfg: TrialConfig, where: Placement | None = None) -> dict:
    """Train one configuration and return the row's measured fields (see sweeps/schema.py).

    `where` is given by a data-parallel worker (trainables/ddp.py); otherwise the device string
    decides it here.
    """
    wall_start = time.perf_counter()
    cfg = resolve(cfg)
    wl = WORKLOADS[cfg.workload]
    where = where or placement(cfg.device, cfg.micro_batches)
    torch.set_num_threads(cfg.threads)
    clock = Clock(where.output_device)
    timer = Timer(clock)
    for device in where.devices:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    with timer.phase("setup"):
        torch.manual_seed(cfg.seed)  # same initial weights on every device: built on the CPU
        data = wl.make_data(cfg)
        model = wl.make_model(cfg)
    with timer.phase("h2d"):
        data = data.to(where.input_device, where.output_device)
        model = where.prepare(model)
    opt = wl.make_optimizer(model.parameters(), cfg.lr)
    crit = wl.make_loss()
    shuffler = torch.Generator().manual_seed(cfg.seed)  # on the CPU, so every device sees one order

    def epoch():
        order = None
        if wl.shuffle:
            perm = torch.randperm(len(data.x), generator=shuffler)
            order = (perm.to(where.input_device), perm.to(where.output_device))
        return train_epoch(wl, model, opt, crit, data, cfg.batch_size, order, cfg.loop == "seed", where)

    with timer.phase("warmup"):
        for _ in range(cfg.warmup_epochs):
            epoch()
    label = " ".join(f"{k}={v}" for k, v in config_row(cfg).items() if k in _LABEL and v is not None)
    with Window(label, cfg.config_hash()) as window, timer.phase("train"):
        marks = [clock.mark()]
        for _ in range(cfg.epochs - cfg.warmup_epochs):
            loss_sum, correct = epoch()
            marks.append(clock.mark())
    epoch_s = clock.between(marks)

    train_loss = where.all_reduce(loss_sum).item() / len(data.x)
    if not torch.isfinite(torch.tensor(train_loss)):
        raise FloatingPointError(f"training loss became {train_loss} (lr {cfg.lr} may be too high)")
    train_accuracy = where.all_reduce(correct).item() / len(data.x) if wl.task == "classification" else None
    test_loss = test_accuracy = None
    if data.n_test:
        with timer.phase("eval"):
            test_loss, test_accuracy = evaluate(wl, model, crit, data, wl.test_batch_size or cfg.batch_size, where)

    timed = summarize(epoch_s)
    samples_per_s = len(data.x) * len(epoch_s) / sum(epoch_s)
    return {
        **config_row(cfg),
        "status": "ok",
        "n_params": n_params(model),
        "model": describe(model),
        **{f"{name}_s": timer.phases.get(name, 0.0) for name in ("setup", "h2d", "warmup", "train", "eval")},
        **timed,
        "steps_per_epoch": -(-len(data.x) // cfg.batch_size),
        "samples_per_s": samples_per_s,
        "world_size": where.world,
        "per_rank_samples_per_s": [samples_per_s / where.world],
        "train_loss": train_loss,
        "train_accuracy": train_accuracy,
        "test_loss": test_loss,
        "test_accuracy": test_accuracy,
        "data_source": data.source,
        "n_test": data.n_test,
        "co_running": window.overlapping,
        **env.environment(where.devices),
        "total_s": time.perf_counter() - wall_start,
    }


def config_row(cfg: TrialConfig) -> dict:
    """The config's columns of a row, with the seed's defaults filled in (cfg must be valid)."""
    cfg = resolve(cfg)
    asked = resources(cfg.device, cfg.threads)
    return {
        "config_hash": cfg.config_hash(),
        "workload": cfg.workload, "device": cfg.device, "depth": cfg.depth, "width": cfg.width,
        "batch_size": cfg.batch_size, "dataset_size": cfg.dataset_size, "epochs": cfg.epochs,
        "warmup_epochs": cfg.warmup_epochs, "lr": cfg.lr, "loop": cfg.loop, "seed": cfg.seed,
        "data_requested": cfg.data if WORKLOADS[cfg.workload].images else "generated",
        "cpus_requested": asked["cpu"], "gpus_requested": asked["gpu"],
        "micro_batches": cfg.micro_batches,
        "exclusive": cfg.exclusive,
    }


def failed_row(cfg: TrialConfig, error: str) -> dict:
    return {**config_row(cfg), "status": "error", "error": error}


def error_text(exc: BaseException) -> str:
    """The exception's type and message, then the innermost frames: enough to act on."""
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return f"{type(exc).__name__}: {exc}\n" + "".join(frames[-3:])


def trainable(config: dict) -> None:
    """Tune function trainable: one trial, one report. A failure is reported as a row, not raised."""
    from ray import tune

    cfg = TrialConfig.from_dict(config["trial"])
    try:
        if parse(cfg.device).distributed:
            from trainables.ddp import run_ddp

            row = run_ddp(cfg)
        else:
            row = run_trial(cfg)
    except Exception as exc:  # any failure is a measurement too: it becomes a row
        row = failed_row(cfg, error_text(exc))
        row.update(env.environment(()))
    tune.report({ROW_KEY: row})

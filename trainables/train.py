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
from trainables.devices import resources, torch_device
from trainables.timing import Clock, Timer, summarize
from trainables.workloads import WORKLOADS, Workload, describe, n_params, resolve

ROW_KEY = "crossover_row"  # the key under which a trial reports its row to Tune


def _batches(n: int, batch_size: int, order: torch.Tensor | None):
    """Index slices of one epoch; the last batch may be short, as with a DataLoader."""
    for start in range(0, n, batch_size):
        yield slice(start, start + batch_size) if order is None else order[start:start + batch_size]


def _per_sample_sum(loss: torch.Tensor, crit: torch.nn.Module, batch: int) -> torch.Tensor:
    return loss if crit.reduction == "sum" else loss * batch


def train_epoch(wl: Workload, model, opt, crit, data: Data, batch_size: int, order, seed_loop: bool):
    """One epoch; returns (loss summed over samples, correct predictions) as device tensors."""
    model.train()
    loss_sum = torch.zeros((), device=data.x.device)
    correct = torch.zeros((), device=data.x.device, dtype=torch.long)
    seed_acc = 0.0
    for idx in _batches(len(data.x), batch_size, order):
        xb, yb = data.x[idx], data.y[idx]
        out = model(xb)
        loss = crit(out, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
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
def evaluate(wl: Workload, model, crit, data: Data, batch_size: int) -> tuple[float, float | None]:
    """Mean loss per sample and accuracy on the test split."""
    model.eval()
    loss_sum = torch.zeros((), device=data.test_x.device)
    correct = torch.zeros((), device=data.test_x.device, dtype=torch.long)
    for idx in _batches(data.n_test, batch_size, None):
        out = model(data.test_x[idx])
        yb = data.test_y[idx]
        loss_sum += _per_sample_sum(crit(out, yb), crit, len(yb))
        if wl.task == "classification":
            correct += (out.argmax(1) == yb).sum()
    accuracy = correct.item() / data.n_test if wl.task == "classification" else None
    return loss_sum.item() / data.n_test, accuracy


def run_trial(cfg: TrialConfig) -> dict:
    """Train one configuration and return the row's measured fields (see sweeps/schema.py)."""
    wall_start = time.perf_counter()
    cfg = resolve(cfg)
    wl = WORKLOADS[cfg.workload]
    device = torch_device(cfg.device)
    torch.set_num_threads(cfg.threads)
    clock = Clock(device)
    timer = Timer(clock)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    with timer.phase("setup"):
        torch.manual_seed(cfg.seed)  # same initial weights on every device: built on the CPU
        data = wl.make_data(cfg)
        model = wl.make_model(cfg)
    with timer.phase("h2d"):
        data = data.to(device)
        model = model.to(device)
    opt = wl.make_optimizer(model.parameters(), cfg.lr)
    crit = wl.make_loss()
    shuffler = torch.Generator().manual_seed(cfg.seed)  # on the CPU, so every device sees one order

    def epoch():
        order = torch.randperm(len(data.x), generator=shuffler).to(device) if wl.shuffle else None
        return train_epoch(wl, model, opt, crit, data, cfg.batch_size, order, cfg.loop == "seed")

    with timer.phase("warmup"):
        for _ in range(cfg.warmup_epochs):
            epoch()
    with timer.phase("train"):
        marks = [clock.mark()]
        for _ in range(cfg.epochs - cfg.warmup_epochs):
            loss_sum, correct = epoch()
            marks.append(clock.mark())
    epoch_s = clock.between(marks)

    train_loss = loss_sum.item() / len(data.x)
    if not torch.isfinite(torch.tensor(train_loss)):
        raise FloatingPointError(f"training loss became {train_loss} (lr {cfg.lr} may be too high)")
    test_loss = test_accuracy = None
    if data.n_test:
        with timer.phase("eval"):
            test_loss, test_accuracy = evaluate(wl, model, crit, data, wl.test_batch_size or cfg.batch_size)

    timed = summarize(epoch_s)
    steps = -(-len(data.x) // cfg.batch_size)
    return {
        **config_row(cfg),
        "status": "ok",
        "n_params": n_params(model),
        "model": describe(model),
        **{f"{name}_s": timer.phases.get(name, 0.0) for name in ("setup", "h2d", "warmup", "train", "eval")},
        **timed,
        "steps_per_epoch": steps,
        "samples_per_s": len(data.x) * len(epoch_s) / sum(epoch_s),
        "train_loss": train_loss,
        "train_accuracy": correct.item() / len(data.x) if wl.task == "classification" else None,
        "test_loss": test_loss,
        "test_accuracy": test_accuracy,
        "data_source": data.source,
        "n_test": data.n_test,
        **env.environment(device),
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
        row = run_trial(cfg)
    except Exception as exc:  # any failure is a measurement too: it becomes a row
        row = failed_row(cfg, error_text(exc))
        row.update(env.environment(None))
    tune.report({ROW_KEY: row})

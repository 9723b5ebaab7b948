"""One trial, measured: the single training loop for every device, and the Tune trainable around it.

    run_trial(TrialConfig(workload="disc", depth=6))   # pure: returns the row's measured fields
    trainable({"trials": [{...}]})                    # what Tune runs: reports its rows once

The loop keeps data (where it fits) and model on the trial's device and, in `loop="fast"` mode, never
syncs with the host inside an epoch: the loss and correct counts accumulate as device tensors; the
engine (`Loop`) runs each step eagerly, compiled, or replayed from one CUDA graph. `loop="seed"`
reproduces the seeds' own loop (a `.item()` every step, the loss summed into a tensor that keeps
its graph, as seed 000 did) so the seeds' figures can be compared like for like.
"""

from __future__ import annotations

import contextlib
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


class Loop:
    """The training step, and epochs of it over this process's share, by engine (config.engine):

    eager    the step as written, kernel by kernel;
    compile  the model through torch.compile ("reduce-overhead", CUDA graphs of its own, on a GPU);
    graph    the whole step (batch gather, forward, backward, optimiser, loss and accuracy sums)
             captured once in a CUDA graph after the warm-up, then replayed with only the batch's
             indices copied in: one launch a step instead of hundreds.
    Loss and correct counts accumulate in device tensors; nothing here waits on the host, except
    `loop="seed"`, which reproduces the seeds' `.item()` every step.
    """

    def __init__(self, cfg: TrialConfig, wl: Workload, model, opt, crit, data: Data, where: Placement):
        self.cfg, self.wl, self.model, self.opt, self.crit, self.data, self.where = cfg, wl, model, opt, crit, data, where
        self.loss_sum = torch.zeros((), device=where.output_device)
        self.correct = torch.zeros((), device=where.output_device, dtype=torch.long)
        self.graph = None

    def _step(self, ix, iy) -> None:
        data, where, crit = self.data, self.where, self.crit
        xb = data.x[ix].to(where.input_device, non_blocking=True)  # no-op where the data is on the device
        yb = data.y[iy].to(where.output_device, non_blocking=True)
        out = self.model(xb)
        loss = crit(out, yb)
        self.opt.zero_grad(set_to_none=True)
        # DDP averages gradients over ranks: a loss summed over the batch (lenet) must count every rank's
        # share in full to step as one process would on the whole batch.
        (loss * where.world if crit.reduction == "sum" else loss).backward()
        self.opt.step()
        if self.cfg.loop == "seed":
            self.loss_sum = self.loss_sum + _per_sample_sum(loss, crit, len(yb))  # keeps the graph, as seed 000
            loss.item()  # a host sync every step, as seeds 001 and 002
        else:
            self.loss_sum += _per_sample_sum(loss.detach(), crit, len(yb))
        if self.wl.task == "classification":
            self.correct += (out.detach().argmax(1) == yb).sum()

    def epoch(self, order) -> None:
        """One epoch; `order` is a permutation on the inputs' and the targets' devices, or None."""
        self.model.train()
        self.loss_sum = self.loss_sum.detach().zero_()
        self.correct.zero_()
        if self.graph is not None and order is None:
            order = self.positions
        for ix, iy in _batches(len(self.data.x), self.cfg.batch_size, order, self.where.rank, self.where.world):
            if self.graph is None:
                self._step(ix, iy)
            else:
                self.static_ix.copy_(ix, non_blocking=True)
                self.static_iy.copy_(iy, non_blocking=True)
                self.graph.replay()

    def capture(self) -> None:
        """Record the step in a CUDA graph (engine 'graph'); the warm-up has run on a side stream."""
        n = len(self.data.x)
        self.positions = (torch.arange(n, device=self.data.x.device), torch.arange(n, device=self.data.y.device))
        self.static_ix = self.positions[0][: self.cfg.batch_size].clone()
        self.static_iy = self.positions[1][: self.cfg.batch_size].clone()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step(self.static_ix, self.static_iy)


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
        # the data stays on the device for the whole trial where it fits (seed 003: per-batch copies
        # erased the GPU's lead); otherwise it waits in pinned host memory and each batch is copied
        data = data.to(where.input_device, where.output_device) if where.holds(data.nbytes) else data.pin()
        model = where.prepare(model)
    if cfg.engine == "graph" and data.x.device != where.input_device:
        raise RuntimeError(f"engine 'graph' needs the data on the GPU, and these {data.nbytes / 2**30:.1f} GiB "
                           "do not fit beside the model: use engine 'eager' or 'compile', or a smaller dataset_size")
    if cfg.engine == "compile":
        model = torch.compile(model, mode="reduce-overhead" if where.is_cuda else "default")
    opt = wl.make_optimizer(model.parameters(), cfg.lr)
    if cfg.engine == "graph":
        for group in opt.param_groups:
            if "capturable" in group:  # Adam: its step count lives on the device from the first step on
                group["capturable"] = True
    loop = Loop(cfg, wl, model, opt, wl.make_loss(), data, where)
    shuffler = torch.Generator().manual_seed(cfg.seed)  # on the CPU, so every device sees one order

    def order():
        if not wl.shuffle:
            return None
        perm = torch.randperm(len(data.x), generator=shuffler)
        return perm.to(data.x.device), perm.to(data.y.device)

    # The graph engine warms up on a side stream, as CUDA graph capture requires; compilation happens
    # in the first warm-up step: both stay out of the timed epochs.
    side = torch.cuda.Stream(where.input_device) if cfg.engine == "graph" else None
    with timer.phase("warmup"), torch.cuda.stream(side) if side else contextlib.nullcontext():
        for _ in range(cfg.warmup_epochs):
            loop.epoch(order())
    if side:
        torch.cuda.current_stream(where.input_device).wait_stream(side)
        with timer.phase("compile"):
            loop.capture()
    label = " ".join(f"{k}={v}" for k, v in config_row(cfg).items() if k in _LABEL and v is not None)
    curve = []
    with Window(label, cfg.config_hash()) as window, timer.phase("train"):
        marks = [clock.mark()]
        for _ in range(cfg.epochs - cfg.warmup_epochs):
            loop.epoch(order())
            curve.append(loop.loss_sum.detach().clone())
            marks.append(clock.mark())
    epoch_s = clock.between(marks)
    loss_sum, correct = loop.loss_sum, loop.correct

    train_loss = where.all_reduce(loss_sum).item() / len(data.x)
    if not torch.isfinite(torch.tensor(train_loss)):
        raise FloatingPointError(f"training loss became {train_loss} (lr {cfg.lr} may be too high)")
    train_accuracy = where.all_reduce(correct).item() / len(data.x) if wl.task == "classification" else None
    test_loss = test_accuracy = None
    if data.n_test:
        with timer.phase("eval"):
            test_loss, test_accuracy = evaluate(wl, model, loop.crit, data, wl.test_batch_size or cfg.batch_size, where)

    timed = summarize(epoch_s)
    samples_per_s = len(data.x) * len(epoch_s) / sum(epoch_s)
    return {
        **config_row(cfg),
        "status": "ok",
        "n_params": n_params(model),
        "model": describe(model),
        **timer.columns(),
        "data_on_device": data.x.device == where.input_device,
        **timed,
        "steps_per_epoch": -(-len(data.x) // cfg.batch_size),
        "samples_per_s": samples_per_s,
        "world_size": where.world,
        "fused_members": 1,
        "per_rank_samples_per_s": [samples_per_s / where.world],
        "train_loss": train_loss,
        "loss_curve": [c / len(data.x) for c in where.all_reduce(torch.stack(curve)).tolist()],
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
        "warmup_epochs": cfg.warmup_epochs, "lr": cfg.lr, "loop": cfg.loop, "engine": cfg.engine, "seed": cfg.seed,
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
    """Tune function trainable: one trial (or one fused group of them), one report of its rows.
    A failure is reported as rows, not raised."""
    # torch.optim's first optimizer imports torch._dynamo: 1.2 s on 2 cores that a fresh worker's
    # first trial counted in its total_s (sweeps/overhead.py, first_s); here it is outside total_s.
    import torch._dynamo  # noqa: F401
    from ray import tune

    cfgs = [TrialConfig.from_dict(c) for c in config["trials"]]
    try:
        if len(cfgs) > 1:
            from trainables.fused import run_fused

            rows = run_fused(cfgs)
        elif parse(cfgs[0].device).distributed:
            from trainables.ddp import run_ddp

            rows = [run_ddp(cfgs[0])]
        else:
            rows = [run_trial(cfgs[0])]
    except Exception as exc:  # any failure is a measurement too: it becomes rows
        text = error_text(exc)
        rows = [{**failed_row(cfg, text), **env.environment(())} for cfg in cfgs]
    tune.report({ROW_KEY: rows})

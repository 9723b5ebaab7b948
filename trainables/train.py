"""One trial's training loop (`Loop`), for every device, and `run_trial`, which measures it.

    run_trial(resolve(TrialConfig(workload="disc", depth=6)))   # returns the trial's row; reports nothing

`Loop` is the loop of a single trial in engines eager, compile and graph: on one device, as a
data-parallel rank (trainables/ddp.py) or over a pipeline. It is not the only loop: a fused group of
trials, and engine 'triton' (a trial alone there is a fused group of one), train in trainables/fused.py's
`FusedLoop`; what is measured around either loop (phases, timed epochs, energy, rows, step costs) is
trainables/measure.py's. `run_trial` returns the row and writes no result files, but it is not pure: it sets
process-wide torch state (thread count, TF32 flags, the random seed) and records its timed window in the
node's /tmp registry (trainables/neighbours.py).

The loop keeps data (where it fits) and model on the trial's device and, in `loop="fast"` mode, never
syncs with the host inside an epoch: the steps' losses and outputs stay on the device and are summed once an
epoch (engines graph and compile sum them each step); the engine runs each step eagerly, compiled, or replayed from one CUDA graph. `loop="seed"`
reproduces the seeds' own loop (a `.item()` every step, its value summed on the host as seed 002's
running loss) so the seeds' figures can be compared like for like. The Tune entry
point around it is trainables/trainable.py.
"""

from __future__ import annotations

import copy
import math

import torch
from torch.utils._pytree import tree_leaves

from crossover.data import Data, move, take
from crossover.workload import filled_in, sums

from . import costs, memory, precision
from .fused import run_fused
from .graph import StepGraph
from .measure import measure
from .placement import Placement, placement
from .timing import Timer
from .trial import Trial


def _batches(n: int, batch_size: int, order, rank: int, world: int):
    """Index pairs (inputs, targets) of one epoch: each global batch in order, this rank's share of it.

    The last batch may be short, as with a DataLoader. `order` is a permutation on the inputs' and on
    the targets' devices (they differ in a pipeline), or None for the data's own order.
    """
    for start in range(0, n, batch_size):
        if order is None:
            share = slice(start + rank, min(start + batch_size, n), world)
            yield share, share
        elif order[0] is order[1] and world == 1:  # one device, one process: one slice a step
            share = order[0][start:start + batch_size]
            yield share, share
        else:
            yield tuple(o[start:start + batch_size][rank::world] for o in order)


def _per_sample(crit: torch.nn.Module, batch: int) -> int:
    """What a batch's loss is multiplied by to give its sum over the samples: 1 where the loss sums them."""
    return 1 if sums(crit) else batch


class Loop:
    """The training step, and epochs of it over this process's share, by engine (config.engine):

    eager    the step as written, kernel by kernel;
    compile  the model through torch.compile ("reduce-overhead", CUDA graphs of its own, on a GPU);
    graph    the whole step (batch gather, forward, backward, optimiser, loss and accuracy sums)
             captured once in a CUDA graph after the warm-up, then replayed with only the batch's
             indices copied in: one launch a step instead of hundreds.
    Loss and correct counts accumulate in device tensors; nothing here waits on the host, except
    `loop="seed"`, which reproduces the seeds' `.item()` every step. A single trial's loop for
    trainables/measure.py (`TrialLoop`): `build` makes one.
    """

    def __init__(self, trial: Trial, model, opt, crit, data: Data, where: Placement):
        self.cfg, self.wl, self.model, self.opt, self.crit, self.data, self.where = \
            trial.cfg, trial.workload, model, opt, crit, data, where
        self.trials, self.samples, self.label, self.key = [trial], data.n, trial.label(), trial.hash
        self.group: dict[str, object] = {}  # a single trial's: no group columns (a fused loop's has them)
        self.on_device = data.device == where.input_device  # else pinned on the host, each batch copied over
        self.columns = {"data_on_device": self.on_device, "data_source": data.source,
                        "n_test": data.n_test}
        self.loss_sum = torch.zeros((), device=where.output_device)
        self.correct = torch.zeros((), device=where.output_device, dtype=_score_type(trial.wl))
        self.host_sum = 0.0  # loop 'seed': the epoch's loss, summed on the host
        # loop 'fast': the steps' (loss, output or None for metric 'loss', target, per-sample factor), until `_tally`
        self.held: list[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, int]] = []
        self.held_bytes = 0
        self.graph: StepGraph | None = None
        self.primed = False  # the optimiser's state made (`prime`), even where it keeps none (SGD without momentum)
        self.shuffler = torch.Generator().manual_seed(trial.cfg.seed)  # on the CPU, so every device sees one order
        # the precision (trainables/precision.py): for default, fp32 and tf32 a null context and a GradScaler that steps as is
        self.autocast = precision.autocast(trial.cfg.precision, where.input_device.type)
        self.scaler = precision.scaler(trial.cfg.precision)

    @classmethod
    def build(cls, trial: Trial, where: Placement, timer: Timer) -> Loop:
        """The trial's data and model made (phase 'setup') and placed (phase 'h2d'), the model compiled
        (engine 'compile') and its optimiser made: the loop that trains them."""
        cfg, wl = trial.cfg, trial.workload
        with timer.phase("setup"):
            torch.manual_seed(cfg.seed)  # same initial weights on every device: built on the CPU
            data = wl.data(cfg)
            model = _made(wl, cfg, where)
        with timer.phase("h2d"):
            # the data stays on the device for the whole trial where it fits (seed 003: per-batch copies
            # erased the GPU's lead); otherwise it waits in pinned host memory and each batch is copied
            data = data.to(where.input_device, where.output_device) if where.holds(data.nbytes) else data.pin()
            model = where.prepare(model)
        if cfg.engine == "graph" and data.device != where.input_device:
            raise RuntimeError(f"engine 'graph' needs the data on the GPU, and these {data.nbytes / 2**30:.1f} GiB "
                               "do not fit beside the model: use engine 'eager' or 'compile', or a smaller dataset_size")
        if cfg.engine == "compile":
            model = torch.compile(model, mode="reduce-overhead" if where.is_cuda else "default")
        opt = wl.make_optimizer(model.parameters(), filled_in(cfg.lr, "lr"))
        if cfg.engine == "graph":
            for group in opt.param_groups:
                if "capturable" in group:  # Adam: its step count lives on the device from the first step on
                    group["capturable"] = True
        return cls(trial, model, opt, wl.make_loss(), data, where)

    def _step(self, ix, iy) -> None:
        data, where, crit = self.data, self.where, self.crit
        self.opt.zero_grad(set_to_none=True)
        xb, yb = take(data.x, ix), data.y[iy]
        if not self.on_device:  # tested, not called as a no-op: the calls cost 1-2% of the CSV example's step
            xb, yb = move(xb, where.input_device, non_blocking=True), yb.to(where.output_device, non_blocking=True)
        with self.autocast:
            loss, out = self.wl.run_step(self.model, xb, yb, crit)
        # DDP averages gradients over ranks: a loss summed over the batch (lenet) must count every rank's
        # share in full to step as one process would on the whole batch.
        self.scaler.scale(loss * where.world if sums(crit) else loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        factor = _per_sample(crit, len(yb))
        if self.cfg.loop != "seed" and self.cfg.engine not in ("graph", "compile"):
            # no kernel a step: the loss and the output are held and summed a few kernels an epoch (`_tally`).
            # The sums a step cost a launch-bound step (the CSV example's MLP, 44 kernels) 7-8% of a plain
            # loop's epoch on a CPU thread (docs/parity.md); a plain loop has none
            kept = out.detach() if self.wl.metric != "loss" else None
            self.held.append((loss.detach(), kept, yb, factor))
            self.held_bytes += 0 if kept is None else kept.nbytes
            if self.held_bytes > HELD_BYTES:
                self._tally()
            return
        if self.cfg.loop == "seed":
            # a host sync every step, as seeds 001 and 002, and its value summed on the host. A sum kept on
            # the device as well (seed 000's, which also kept every step's graph) cost two more kernels and
            # an autograd node a step: 3-6% an epoch on one CPU thread (disc depth 8, peaks, tabular), against
            # the plain loop of studies/parity.py
            self.host_sum += loss.item() * factor
        else:
            # summed a step: a graph's replay writes one static output, and torch.compile's CUDA graphs
            # ("reduce-overhead") overwrite the model's output at the next step, so neither can be held
            self.loss_sum.add_(loss.detach(), alpha=factor)
        if self.wl.metric != "loss":
            self.correct += _score(self.wl, out.detach(), yb)

    def _order(self):
        """The epoch's permutation on the inputs' and on the targets' devices, or None (no shuffling)."""
        if not self.wl.shuffle:
            return None
        data = self.data
        perm = torch.randperm(data.n, generator=self.shuffler).to(data.device)
        return perm, perm if data.y.device == data.device else perm.to(data.y.device)

    def epoch(self) -> torch.Tensor:
        """One epoch, in the trial's next order. Returns the epoch's loss sum (a device tensor: no host sync)."""
        self.model.train()
        self.loss_sum.zero_()
        self.host_sum = 0.0
        self.correct.zero_()
        order = self._order()
        if self.graph is not None and order is None:
            order = self.positions
        batch_size = filled_in(self.cfg.batch_size, "batch_size")
        for ix, iy in _batches(self.data.n, batch_size, order, self.where.rank, self.where.world):
            if self.graph is None:
                self._step(ix, iy)
            else:
                self.graph.replay(ix, iy)
        self._tally()
        if self.cfg.loop == "seed":
            self.loss_sum.fill_(self.host_sum)
        return self.loss_sum

    def first_nonfinite(self, epochs: int) -> tuple[int, int, float, float | None] | None:
        """Where the training loss first stops being finite in `epochs` epochs of this loop, run a step at a time
        with a host sync each (for a trial that failed so, on a loop built afresh after its timing):
        (epoch, step, that step's loss, the step before's or None), both counted from 1, the warm-up's epochs
        first; None where every step's loss was finite this time (a GPU's kernels may not repeat a NaN)."""
        before = None
        for epoch in range(1, epochs + 1):
            self.model.train()
            batch_size = filled_in(self.cfg.batch_size, "batch_size")
            batches = _batches(self.data.n, batch_size, self._order(), self.where.rank, self.where.world)
            for step, (ix, iy) in enumerate(batches, 1):
                self.loss_sum.zero_()
                self.host_sum = 0.0
                self._step(ix, iy)
                self._tally()
                total = self.host_sum if self.cfg.loop == "seed" else self.loss_sum.item()
                loss = total / _per_sample(self.crit, len(self.data.y[iy]))
                if not math.isfinite(loss):
                    return epoch, step, loss, before
                before = loss
        return None

    def _tally(self) -> None:
        """The held steps' loss and score added to the epoch's sums, on the device (no host sync): a few
        kernels for all of them, one loss sum per per-sample factor (a short last batch has its own)."""
        if not self.held:
            return
        losses, outs, targets, factors = zip(*self.held)
        for factor in dict.fromkeys(factors):
            self.loss_sum.add_(torch.stack([loss for loss, f in zip(losses, factors) if f == factor]).sum(), alpha=factor)
        if self.wl.metric != "loss":
            self.correct += _score(self.wl, torch.cat(outs), torch.cat(targets))
        self.held.clear()
        self.held_bytes = 0

    def capture(self) -> None:
        """Record the step in a CUDA graph (engine 'graph'); the warm-up has run on a side stream."""
        n = self.data.n
        self.positions = (torch.arange(n, device=self.data.device), torch.arange(n, device=self.data.y.device))
        self.graph = StepGraph(self._step, *(p[: filled_in(self.cfg.batch_size, "batch_size")] for p in self.positions))

    @torch.no_grad()
    def evaluate(self) -> tuple[list, list]:
        """Mean loss per sample and score on the test split, whole, in every process, in the trial's
        precision (as the training step); each in a list of one (a member's, as a fused loop's)."""
        wl, data, where = self.wl, self.data, self.where
        self.model.eval()
        loss_sum = torch.zeros((), device=where.output_device)
        correct = torch.zeros((), device=where.output_device, dtype=_score_type(wl))
        if data.test_y is None:  # measure evaluates only where there is a test split (n_test)
            raise ValueError(f"trial {self.label}: evaluate needs a test split, and its data has none (test_y None)")
        batch_size = wl.test_batch_size or filled_in(self.cfg.batch_size, "batch_size")
        for ix, iy in _batches(data.n_test, batch_size, None, 0, 1):
            yb = data.test_y[iy]
            with self.autocast:
                loss, out = wl.run_step(self.model, take(data.test_x, ix), yb, self.crit)
                loss_sum += loss * _per_sample(self.crit, len(yb))
            if wl.metric != "loss":
                correct += _score(wl, out, yb)
        score = correct.item() / data.n_test if wl.metric != "loss" else None
        return [loss_sum.item() / data.n_test], [score]

    def step_costs(self, batch_size: int | None = None, sequence: bool = False, peak: bool = False,
                   own: bool = False) -> dict:
        """FLOPs, bytes and launches of one step (trainables/costs.py), taken on copies of the model and
        the optimiser under a forked random state: the trial's own are left as they were. `batch_size`: a step of so
        many samples (default: the trial's); `sequence`: with the ops in the order dispatched (costs.count); `peak`:
        with `peak_memory_bytes`, the memory the same step allocated at its peak, its batch included
        (trainables/memory.py, as `step_peak` takes it), so that a step counted for both runs once; `own`: on the
        loop's own model and optimiser, which the step leaves stepped, not on copies (the last count a loop is built
        for: a copy of a 130M-parameter model and its Adam states is seconds on the CPU).

        Counted for single-process trials on one device; a data-parallel or pipeline trial's step is
        left null. Engine 'graph' launches what its graph's replay does (StepGraph.launches); engine
        'compile' counts its FLOPs and bytes on the model it compiled, and its launches are left null
        (counting them would compile again); outside engine 'eager' the per-class launches are null too."""
        where, trial = self.where, self.trials[0]
        if where.world > 1 or len(where.devices) > 1:
            return {}
        model = getattr(self.model, "_orig_mod", self.model)  # torch.compile's wrapper holds the model
        twin = self if own else Loop(trial, *copy.deepcopy((model, self.opt)), self.crit, self.data, where)
        batch = self._first_batch(batch_size or filled_in(self.cfg.batch_size, "batch_size"))
        peaks: list[int] = []

        def step():
            if not peak:
                return twin._step(*batch)
            peaks.append(memory.step_peak(lambda: twin._step(*batch), where.input_device, twin.model, twin.opt,
                                          self.data.x, self.data.y))

        with torch.random.fork_rng(devices=[d for d in where.devices if d.type == "cuda"]):
            try:
                # a fresh optimiser's first step makes its state (a clone a parameter for momentum): count a step
                # after it, as a trial's count after its epochs is
                if not (self.primed or twin.opt.state):
                    twin._step(*batch)
                counted = costs.count(step, where.is_cuda, sequence)
            except Exception as exc:  # an op torch's counters do not know: the row stands, its costs null, and why
                return {"costs_note": f"not counted: {type(exc).__name__}: {exc}"[:300]}
        if self.cfg.engine != "eager":  # the ops are counted eagerly: a graph or compiled step launches otherwise
            counted = costs.replayed(counted, self.graph.launches if self.graph is not None else None)
        # on a GPU costs.count calls the step twice (counted, then profiled): the peak is the counted call's
        return counted | ({"peak_memory_bytes": peaks[0]} if peaks else {})

    def prime(self, batch_size: int) -> None:
        """The optimiser's state made on the loop's own model and optimiser, as its first step makes it (Adam's two
        moments, SGD's momentum): the copies `step_costs` and `step_peak` take then start with it and need no first
        step of their own (sweeps/count_step.py counts a step at two batches so, each a step fewer). The optimiser
        steps on gradients of zeros, and the weights are put back as they were: no batch is run, which on the CPU is
        a whole forward and backward (a Faster R-CNN's is seconds an image), and the weights the steps counted start
        from are the model's own (a step whose shapes follow its values, a detector's proposals, a mixture's routing,
        runs at its initial weights). A parameter that trains but that the step leaves without a gradient gets
        states too, which a real first step would not make. An optimiser that cannot step so (SparseAdam takes
        sparse gradients alone) takes one real step of `batch_size` samples instead."""
        params = [p for group in self.opt.param_groups for p in group["params"] if p.requires_grad]
        with torch.no_grad():
            kept = [p.detach().clone() for p in params]
            try:
                for p in params:
                    p.grad = torch.zeros_like(p)
                self.opt.step()
                self.primed = True
            except Exception:
                self.opt.state.clear()
            finally:
                for p, was in zip(params, kept):
                    p.copy_(was)
                self.opt.zero_grad(set_to_none=True)
        if not self.primed:
            self._step(*self._first_batch(batch_size))
            self.primed = True

    def _first_batch(self, size: int) -> tuple:
        """The indices of an epoch's first batch of `size` samples, gathered where the workload shuffles (as its
        shuffled epochs take a batch)."""
        order = (torch.arange(self.data.n, device=self.data.device),) * 2 if self.wl.shuffle else None
        return next(_batches(self.data.n, size, order, 0, 1))

    def step_peak(self, sizes: tuple[int, int]) -> dict:
        """The memory one steady step allocates at its peak (trainables/memory.py), at each of `sizes` (two batch
        sizes, the smaller first) on one copy of the model and the optimiser as `step_costs` takes them, the larger
        first, after a first step has made the optimiser's states: `peak_line`'s columns. What crossover predict
        judges whether a run fits a card by. Empty for a data-parallel or pipeline trial; `peak_memory_note` says
        why where it could not be counted."""
        where, trial = self.where, self.trials[0]
        if where.world > 1 or len(where.devices) > 1:
            return {}
        model = getattr(self.model, "_orig_mod", self.model)
        twin = Loop(trial, *copy.deepcopy((model, self.opt)), self.crit, self.data, where)
        peaks = {}
        with torch.random.fork_rng(devices=[d for d in where.devices if d.type == "cuda"]):
            try:
                for size in reversed(sizes):
                    batch = self._first_batch(size)
                    if not (self.primed or twin.opt.state):
                        twin._step(*batch)
                    peaks[size] = memory.step_peak(lambda: twin._step(*batch), where.input_device, twin.model,
                                                   twin.opt, self.data.x, self.data.y)
            except Exception as exc:  # an op the tracker cannot follow: the count stands without it, and why
                return {"peak_memory_note": f"not counted: {type(exc).__name__}: {exc}"[:300]}
        return self.peak_line(peaks)

    def peak_line(self, peaks: dict[int, int]) -> dict:
        """From a step's peaks at two batch sizes (`step_peak`, or `step_costs` with `peak`): `peak_memory_bytes` at
        the larger, its batch included, and `peak_memory_per_sample_bytes`, what a sample more adds (the line
        through the two, plus a sample's inputs and targets)."""
        small, large = sorted(peaks)
        # the data held is one batch (count_step makes it so) in both: its share a sample is added back
        data = sum(t.nbytes for t in tree_leaves((self.data.x, self.data.y))) / self.data.n
        per_sample = (peaks[large] - peaks[small]) / (large - small) + data
        return {"peak_memory_bytes": peaks[large], "peak_memory_per_sample_bytes": per_sample}


def _made(wl, cfg, where: Placement):
    """The workload's model, made on the CPU; on the meta device (a step counted, not trained: sweeps/count_step.py)
    made there, shapes alone: a GPT-2-large's 774M parameters need not be initialised to be counted (10 s of its
    count on a 2-core VM). A model that cannot be made there (its constructor reads a value) is made on the CPU."""
    if where.input_device.type == "meta":
        try:
            with torch.device("meta"):
                return wl.make_model(cfg)
        except Exception:
            torch.manual_seed(cfg.seed)
    return wl.make_model(cfg)


HELD_BYTES = 64 * 2**20  # outputs held before `_tally` sums them early: a bound on the memory, not a measured optimum


def _score_type(wl) -> torch.dtype:
    return torch.long if wl.metric in ("accuracy", "loss") else torch.float32


def _score(wl, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The batch's sum of the workload's per-sample score: correct argmaxes, or its own metric's."""
    return (out.argmax(1) == y).sum() if wl.metric == "accuracy" else wl.metric(out, y)


def run_trial(trial: Trial, where: Placement | None = None) -> dict:
    """Train one configuration and return its row (crossover/schema.py), through trainables/measure.py.

    `where` is given by a data-parallel worker (trainables/ddp.py); otherwise the trial's device decides it.
    Engine 'triton' runs its step in the fused loop's kernel: a trial alone there is a fused trial of one.
    """
    if trial.cfg.engine == "triton":
        return run_fused([trial])[0]
    where = where or placement(trial.spec, trial.cfg.micro_batches)
    return measure([trial], where, lambda timer: Loop.build(trial, where, timer))[0]

"""Horizontally fused trials (HFTA, MLSys 2021): K trials of one MLP that differ only in seed or learning
rate train as one batched model, in one process, on one device.

The members' weights are stacked (`torch.func.stack_module_state`) and the forward pass is
`vmap`ped over them, so each layer is one batched matrix product for all K trials instead of K
small ones: on a GPU, K times fewer kernel launches. Each member keeps its own data (drawn from its
seed), its own initial weights, its own shuffling order and its own learning rate, applied exactly
by a batched SGD or Adam written to torch.optim's formulas; so a member's loss curve is the one it
would have had alone (tests/test_fused.py). The fused trial reports one row per member, its timings
those of the whole group (`fused_members` says how many shared them).

    run_fused([resolve(TrialConfig("peaks", dataset_size=2500, seed=s)) for s in range(8)])
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import time

import torch
from torch.func import functional_call, stack_module_state, vmap

from trainables import precision
from trainables.devices import placement
from trainables.neighbours import Window
from trainables.rows import failed_row, measured_row
from trainables.timing import Clock, Timer
from trainables.trial import Trial
from trainables.workloads import n_params

FUSABLE = ("seed", "lr")  # what members may differ in


def fusion_key(trial: Trial) -> str | None:
    """Trials with equal keys can fuse; None where this one cannot (a CNN, a multi-GPU or packed
    device, an engine other than eager, the seeds' loop, a precision other than fp32)."""
    cfg, spec = trial.cfg, trial.spec
    if not trial.wl.sequential or spec.kind not in ("cpu", "cuda") or spec.count != 1:
        return None
    if cfg.engine != "eager" or cfg.loop != "fast" or cfg.precision != "fp32":
        return None
    shared = dataclasses.replace(cfg, **{axis: None for axis in FUSABLE})
    return shared.config_hash()


def member_bytes(trial: Trial) -> int:
    """What one member holds on its device: weights, gradients and two Adam moments (4 x fp32 each),
    its data, and a batch's activations through every layer (twice: forward and backward)."""
    cfg = trial.cfg
    with torch.device("meta"):
        model = trial.wl.make_model(cfg)
    widths = [m.out_features for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = next(m.in_features for m in model.modules() if isinstance(m, torch.nn.Linear))
    return 4 * (4 * n_params(model) + cfg.dataset_size * (inputs + 1) * 5 // 4 + 2 * cfg.batch_size * sum(widths))


class FusedOptimizer:
    """torch.optim's SGD (no momentum) or Adam on stacked weights, with one learning rate per member."""

    def __init__(self, reference: torch.optim.Optimizer, params: dict, lrs: list[float]):
        self.params = params
        defaults = reference.defaults
        if isinstance(reference, torch.optim.Adam) and not defaults["amsgrad"] and not defaults["weight_decay"]:
            self.kind, (self.beta1, self.beta2), self.eps = "adam", defaults["betas"], defaults["eps"]
            self.state = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in params.items()}
            self.steps = 0
        elif isinstance(reference, torch.optim.SGD) and not defaults["momentum"] and not defaults["weight_decay"]:
            self.kind = "sgd"
        else:
            raise ValueError(f"fused trials run plain SGD or Adam, not {type(reference).__name__} with {defaults}")
        device = next(iter(params.values())).device
        self.lrs = torch.tensor(lrs, dtype=torch.float64, device=device)

    def _per_member(self, values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return values.to(like.dtype).view(-1, *([1] * (like.dim() - 1)))

    @torch.no_grad()
    def step(self, grads: dict) -> None:
        if self.kind == "adam":
            self.steps += 1
            # as torch.optim.Adam: bias corrections in float64 on the host, then one step size per member
            bias1, bias2_sqrt = 1 - self.beta1 ** self.steps, math.sqrt(1 - self.beta2 ** self.steps)
            step_size = self.lrs / bias1
        for name, p in self.params.items():
            g = grads[name]
            if self.kind == "sgd":
                p.sub_(self._per_member(self.lrs, p) * g)
                continue
            m, v = self.state[name]
            m.lerp_(g, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
            p.sub_(self._per_member(step_size, p) * m / denom)


def run_fused(trials: list[Trial]) -> list[dict]:
    """Train the members together; one row per member (analysis/schema.py)."""
    started = time.perf_counter()
    keys = {fusion_key(t) for t in trials}
    if len(keys) != 1 or None in keys:
        raise ValueError(f"members of a fused trial must differ only in {FUSABLE} and be fusable (MLP workload, "
                         "cpu or cuda, eager, loop fast): use trainables.fused.fusion_key to group them")
    first, k = trials[0].cfg, len(trials)
    wl = trials[0].wl
    where = placement(trials[0].spec)
    device = where.input_device
    torch.set_num_threads(first.threads)
    precision.set_tf32(first.precision)  # fp32: fusion_key admits no other
    group = hashlib.sha256("".join(t.hash for t in trials).encode()).hexdigest()[:16]
    timer = Timer(Clock(where.devices))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    with timer.phase("setup"):
        members, models = [], []
        for t in trials:  # as run_trial does, member by member: the same data and initial weights
            torch.manual_seed(t.cfg.seed)
            members.append(wl.make_data(t.cfg))
            models.append(wl.make_model(t.cfg))
        reference = wl.make_optimizer(models[0].parameters(), first.lr)
        crit = wl.make_loss()
        base = copy.deepcopy(models[0]).to("meta")
    with timer.phase("h2d"):
        stack = lambda ts: None if ts[0] is None else torch.stack(ts).to(device)  # noqa: E731
        x, y = stack([d.x for d in members]), stack([d.y for d in members])
        test_x, test_y = stack([d.test_x for d in members]), stack([d.test_y for d in members])
        params, buffers = stack_module_state(models)
        params = {n: p.to(device).detach().requires_grad_() for n, p in params.items()}
        buffers = {n: b.to(device) for n, b in buffers.items()}
    opt = FusedOptimizer(reference, params, [t.cfg.lr for t in trials])
    forward = vmap(lambda p, b, xb: functional_call(base, (p, b), (xb,)))
    losses_of = vmap(crit)
    n, batch = x.shape[1], first.batch_size
    members_index = torch.arange(k, device=device).unsqueeze(1)
    shufflers = [torch.Generator().manual_seed(t.cfg.seed) for t in trials]
    loss_sum = torch.zeros(k, device=device)
    correct = torch.zeros(k, device=device, dtype=torch.long)

    def epoch() -> torch.Tensor:
        loss_sum.zero_()
        correct.zero_()
        order = (torch.stack([torch.randperm(n, generator=g) for g in shufflers]).to(device) if wl.shuffle
                 else torch.arange(n, device=device).expand(k, n))
        for start in range(0, n, batch):
            idx = order[:, start:start + batch]
            xb, yb = x[members_index, idx], y[members_index, idx]
            out = forward(params, buffers, xb)
            losses = losses_of(out, yb)
            grads = dict(zip(params, torch.autograd.grad(losses.sum(), list(params.values()))))
            opt.step(grads)
            loss_sum.add_(losses.detach() if crit.reduction == "sum" else losses.detach() * idx.shape[1])
            if wl.task == "classification":
                correct.add_((out.detach().argmax(-1) == yb).sum(-1))
        return loss_sum

    with timer.phase("warmup"):
        for _ in range(first.warmup_epochs):
            epoch()
    with Window(f"fused x{k} " + trials[0].label("workload", "device", "depth", "width"), group, first.threads) as window:
        epoch_s, curve = timer.epochs(first.epochs - first.warmup_epochs, epoch, first.min_timed_s)
    curves = (torch.stack(curve) / n).T.tolist()  # members x epochs
    accuracy = (correct / n).tolist() if wl.task == "classification" else [None] * k
    test_loss = test_accuracy = [None] * k
    if test_x is not None:
        with timer.phase("eval"), torch.no_grad():
            out = forward(params, buffers, test_x)
            per_sample = losses_of(out, test_y) * (1 if crit.reduction == "sum" else test_x.shape[1])
            test_loss = (per_sample / test_x.shape[1]).tolist()
            if wl.task == "classification":
                test_accuracy = ((out.argmax(-1) == test_y).float().mean(-1)).tolist()

    fused = {"fused_members": k, "fused_group": group}
    rows = []
    for i, t in enumerate(trials):
        final = curves[i][-1]
        if not math.isfinite(final):
            error = f"FloatingPointError: training loss became {final} (lr {t.cfg.lr} may be too high)"
            rows.append({**failed_row(t, error), **fused})
            continue
        # each member's samples_per_s is its share of the group's throughput: its samples in the group's time
        rows.append(measured_row(
            t, models[0], timer, epoch_s, n, where.devices, started, window, **fused, data_on_device=True,
            train_loss=final, loss_curve=curves[i], train_accuracy=accuracy[i], test_loss=test_loss[i],
            test_accuracy=test_accuracy[i], data_source=members[0].source,
            n_test=0 if test_x is None else test_x.shape[1]))
    return rows

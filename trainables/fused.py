"""Horizontally fused trials (HFTA, MLSys 2021): K trials of one model that differ only in seed or learning
rate train as one batched model, in one process, on one device, in engine 'eager', 'graph' or 'triton'.

The members' weights are stacked (`torch.func.stack_module_state`) and the forward pass is
`vmap`ped over them, so each layer is one batched kernel for all K trials instead of K small ones:
a Linear layer one batched matrix product, a convolution one grouped convolution (torch.func's
batching rule for conv2d does what HFTA does by hand). On a GPU, K times fewer kernel launches; in
engine 'graph' the whole fused step (gather, forward, backward, optimiser, loss sums) is one CUDA
graph (trainables/graph.py, as a single trial's); in engine 'triton' (peaks) the forward, loss and
backward of every member are one Triton kernel (trainables/mlp_kernel.py) inside that graph. Each member
keeps its own data (drawn from its seed), its own initial weights, its own shuffling order, its own
dropout masks (`MemberNoise`) and its own learning rate, applied exactly by a batched SGD (with
momentum) or Adam written to torch.optim's formulas; so a member's loss curve is the one it would have
had alone (tests/test_fused.py, tests/test_gpu.py). The fused trial reports one row per member
(trainables/measure.py, as a single trial's), its timings those of the whole group (`fused_members`
says how many shared them), its energy and step costs the member's share of the group's.

    run_fused([resolve(TrialConfig("peaks", dataset_size=2500, seed=s)) for s in range(8)])
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import inspect
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves, tree_map

from crossover.workload import Workload, filled_in, sums

from . import costs
from .graph import StepGraph
from .measure import measure
from .placement import Placement, placement
from .timing import Timer
from .trial import Trial
from .workloads import n_frozen_params, n_params

FUSABLE = ("seed", "lr")  # what members may differ in
FUSED_ENGINES = ("eager", "graph", "triton")  # 'compile' would compile the vmapped step: not tried
FUSED_PRECISIONS = ("default", "fp32")  # float32 weights: the batched optimiser is written for them
# The random functions a fused forward may call, each an input times a mask of its own draws; any other
# random op inside the vmapped forward would draw once for all members, and is refused (vmap randomness 'error').
DROPOUTS = (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d)


class Stepper(Protocol):
    """What a fused loop steps with the step's gradients: a FusedOptimizer, or _Counted around one (step_costs)."""

    def step(self, grads: dict) -> None: ...


def fusion_key(trial: Trial) -> str | None:
    """Trials with equal keys can fuse; None where this one cannot (a workload not `fusable`, a multi-GPU or
    packed device, engine 'compile', the seeds' loop, a precision other than default or fp32)."""
    cfg, spec = trial.cfg, trial.spec
    if not trial.wl.fusable or not (spec.is_cpu or spec.whole_gpu):
        return None
    if cfg.engine not in FUSED_ENGINES or cfg.loop != "fast" or cfg.precision not in FUSED_PRECISIONS:
        return None
    # None for any seed and lr, in a key, not a config that runs; typed Any, as replace checks a ** dict's values
    # against every field's type (seed is an int)
    unset: dict[str, Any] = {axis: None for axis in FUSABLE}
    shared = dataclasses.replace(cfg, **unset)
    return shared.config_hash()


class _Traced(TorchFunctionMode):
    """Records the functions run under it, and counts the elements of every new tensor (not a view) they return."""

    def __init__(self):
        super().__init__()
        self.funcs, self.numel = set(), 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.funcs.add(func)
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t._base is None:
                self.numel += t.numel()
        return out


def member_bytes(trial: Trial) -> int:
    """What one member holds on its device: weights, gradients and two optimiser moments (4 x fp32 each; a
    frozen parameter its weight alone), its data (a test split of up to a quarter more), and every new tensor a
    batch's forward pass makes (activations, feature maps: counted on the meta device), twice (forward and
    backward). The sample is the workload's `sample`, else the first of a tiny make_data; a workload with a
    `step` runs it on a batch of that sample and its target. Raises what building or running the model on the meta device raises."""
    cfg, wl = trial.cfg, trial.workload
    x, y = (wl.sample(cfg), None) if wl.sample and wl.step is None else first_sample(trial)
    batch_size = filled_in(cfg.batch_size, "batch_size")
    batch = lambda t: t.to("meta").expand(batch_size, *t.shape)  # noqa: E731
    with torch.device("meta"):
        model = wl.make_model(cfg)
        with _Traced() as made:
            if wl.step is None:
                model(tree_map(batch, x))
            else:
                wl.step(model, tree_map(batch, x), batch(y), wl.make_loss())
    per_sample = sum(t.numel() * t.element_size() for t in tree_leaves(x))
    data = filled_in(cfg.dataset_size, "dataset_size") * (per_sample + 8) * 5 // 4  # 8: its label
    return 16 * n_params(model) + 4 * n_frozen_params(model) + data + 2 * 4 * made.numel


def first_sample(trial: Trial) -> tuple:
    """The first training input (a tensor or a dict of them) and target of the trial's data, made at one batch's size."""
    cfg = trial.cfg
    small = dataclasses.replace(cfg, dataset_size=min(filled_in(cfg.dataset_size, "dataset_size"),
                                                      filled_in(cfg.batch_size, "batch_size")))
    data = trial.workload.data(small)
    return tree_map(lambda t: t[0], data.x), data.y[0]


class MemberStreams:
    """Each member's own random stream: the one its run alone draws its dropout masks from. On a GPU, a
    generator seeded as the member's torch.manual_seed(seed) seeds the device's (nothing draws from that
    before the first step); on the CPU, the CPU generator's state after the member's data and weights."""

    def __init__(self, device: torch.device, seeds: list[int], cpu_states: list[torch.Tensor]):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.default = torch.cuda.default_generators[device.index if device.index is not None
                                                         else torch.cuda.current_device()]
            self.generators = tuple(torch.Generator(device).manual_seed(seed) for seed in seeds)
        else:
            self.default, self.generators, self.states = torch.default_generator, (), list(cpu_states)
        self.k = len(seeds)

    @contextlib.contextmanager
    def member(self, i: int):
        """The default generator draws from member i's stream. On a GPU its state is swapped, not copied
        (graph-safe: a CUDA graph that registered the member's generator replays its draws)."""
        if self.cuda:
            saved = self.default.graphsafe_get_state()
            self.default.graphsafe_set_state(self.generators[i])
            try:
                yield
            finally:
                self.default.graphsafe_set_state(saved)
            return
        saved_state = self.default.get_state()  # the CPU generator's state, where a GPU's swaps generators
        self.default.set_state(self.states[i])
        try:
            yield
        finally:
            self.states[i] = self.default.get_state()
            self.default.set_state(saved_state)


_SIGNATURES = {func: inspect.signature(func) for func in DROPOUTS}


class MemberNoise(TorchFunctionMode):
    """Inside the vmapped forward: each dropout's mask drawn member by member from the member's own
    stream, by the very function its run alone calls, on ones of the member's shape (the same kernel,
    shape and generator state: the same mask), then the batched input times the member's mask."""

    def __init__(self, streams: MemberStreams, member: torch.Tensor):
        super().__init__()
        self.streams, self.member = streams, member  # member: the vmapped member index

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func not in _SIGNATURES:
            return func(*args, **(kwargs or {}))
        call = _SIGNATURES[func].bind(*args, **(kwargs or {}))
        call.apply_defaults()
        x, p = call.arguments["input"], call.arguments["p"]
        if not call.arguments["training"]:
            return x
        ones = torch.ones(x.shape, dtype=x.dtype, device=x.device)
        masks = []
        # outside vmap's transform: under it, a GPU's dropout draws by another kernel than the run alone's
        # (its masks differed on an H200; the CPU's are one kernel either way)
        with torch._C._DisableFuncTorch():
            for i in range(self.streams.k):
                with self.streams.member(i):
                    masks.append(func(ones, p, True))
        return x * torch.stack(masks)[self.member]


class FusedOptimizer:
    """torch.optim's SGD (momentum without dampening or Nesterov) or Adam on stacked weights, with one
    learning rate per member. Its state, Adam's step count included, lives on the device, so a CUDA
    graph captures its step whole (as torch.optim.Adam's capturable=True)."""

    def __init__(self, reference: torch.optim.Optimizer, params: dict, lrs: list[float]):
        self.params = params
        d = reference.defaults
        device = next(iter(params.values())).device
        self.state: dict[str, Any]  # name -> Adam's moments (m, v), or SGD's momentum buffer: `kind` says which
        if isinstance(reference, torch.optim.Adam) and not d["amsgrad"] and not d["weight_decay"]:
            self.kind, (self.beta1, self.beta2), self.eps = "adam", d["betas"], d["eps"]
            self.state = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in params.items()}
            self.steps = torch.zeros((), dtype=torch.float64, device=device)
        elif (isinstance(reference, torch.optim.SGD) and not d["weight_decay"] and not d["dampening"]
              and not d["nesterov"]):
            self.kind, self.momentum = "sgd", d["momentum"]
            # torch's first step sets buf = grad; a buffer of zeros gives the same (0 * m + grad)
            self.state = {name: torch.zeros_like(p) for name, p in params.items()} if self.momentum else {}
        else:
            raise ValueError(f"fused trials run SGD (momentum at most) or Adam, not {type(reference).__name__} "
                             f"with {d}")
        self.lrs = torch.tensor(lrs, dtype=torch.float64, device=device)

    def _per_member(self, values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return values.to(like.dtype).view(-1, *([1] * (like.dim() - 1)))

    @torch.no_grad()
    def step(self, grads: dict) -> None:
        if self.kind == "adam":
            self.steps += 1
            # as torch.optim.Adam: bias corrections in float64, then one step size per member
            step_size = self.lrs / (1 - self.beta1 ** self.steps)
            bias2_sqrt = (1 - self.beta2 ** self.steps).sqrt()
        for name, p in self.params.items():
            g = grads[name]
            if self.kind == "sgd":
                if self.momentum:
                    g = self.state[name].mul_(self.momentum).add_(g)
                p.sub_(self._per_member(self.lrs, p) * g)
                continue
            m, v = self.state[name]
            m.lerp_(g, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
            p.sub_(self._per_member(step_size, p) * m / denom)


@dataclasses.dataclass(frozen=True)
class Members:
    """The members' data and initial weights, stacked (a leading dimension of K, in member order)."""

    trials: list  # the resolved trials
    x: torch.Tensor  # K x samples x features (or x channels x height x width)
    y: torch.Tensor
    test_x: torch.Tensor | None
    test_y: torch.Tensor | None
    params: dict  # name -> K x the weight's shape
    buffers: dict
    base: torch.nn.Module  # the model's structure, on the meta device
    rng_states: list  # each member's CPU generator state after its data and weights were drawn
    source: str  # the data's, as the row's data_source says

    def to(self, device: torch.device) -> "Members":
        """On `device`, the weights requiring grad."""
        maybe = lambda t: None if t is None else t.to(device)  # noqa: E731
        return dataclasses.replace(
            self, x=self.x.to(device), y=self.y.to(device), test_x=maybe(self.test_x), test_y=maybe(self.test_y),
            params={n: p.to(device).detach().requires_grad_() for n, p in self.params.items()},
            buffers={n: b.to(device) for n, b in self.buffers.items()})


def stack_members(trials: list[Trial]) -> tuple[Members, torch.nn.Module]:
    """Each member's data and initial weights as run_trial makes them, member by member, stacked on the
    host; and the first member's model (the rows' shape of it)."""
    wl, data, models, states = trials[0].workload, [], [], []
    for t in trials:
        torch.manual_seed(t.cfg.seed)
        data.append(wl.data(t.cfg))
        models.append(wl.make_model(t.cfg))
        states.append(torch.get_rng_state())
    stack = lambda ts: torch.stack([_tensor(t, wl) for t in ts])  # noqa: E731
    params, buffers = stack_module_state(models)
    return Members(trials, stack([d.x for d in data]), stack([d.y for d in data]),
                   None if data[0].test_x is None else stack([d.test_x for d in data]),
                   None if data[0].test_y is None else stack([d.test_y for d in data]), params, buffers,
                   copy.deepcopy(models[0]).to("meta"), states, data[0].source), models[0]


def _tensor(t: torch.Tensor | dict | None, wl: Workload) -> torch.Tensor:
    """One member's inputs or targets, which a fused trial stacks: one tensor each. ValueError where its data holds
    a dict of inputs, or a test split one member has and another lacks."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"workload {wl.name!r}: a fused trial stacks its members' inputs and targets, one tensor "
                         f"each, and its make_data gave a {type(t).__name__}; set fusable=False")
    return t


class FusedLoop:
    """The fused step, and epochs of it, by engine: 'eager' kernel by kernel, 'graph', the whole
    step captured once after the warm-up (trainables/graph.py) and replayed, or 'triton', as 'graph'
    with the forward, loss and backward in one kernel (trainables/mlp_kernel.py). Loss sums and correct
    counts accumulate per member in device tensors; nothing here waits on the host. A fused group's
    loop for trainables/measure.py (`TrialLoop`): `build` makes one."""

    def __init__(self, members: Members, opt: Stepper, crit: torch.nn.Module, model: torch.nn.Module):
        self.m, self.opt, self.crit, self.wl, self.cfg = \
            members, opt, crit, members.trials[0].workload, members.trials[0].cfg
        k, device = len(members.trials), members.x.device
        self.trials, self.model, self.samples = members.trials, model, members.x.shape[1]
        self.key = hashlib.sha256("".join(t.hash for t in members.trials).encode()).hexdigest()[:16]
        self.label = f"fused x{k} " + members.trials[0].label("workload", "device", "depth", "width")
        self.group = {"fused_members": k, "fused_group": self.key}
        self.columns = {"data_on_device": True, "data_source": members.source,
                        "n_test": 0 if members.test_x is None else members.test_x.shape[1]}
        self.losses_of = vmap(crit)
        self.streams = MemberStreams(device, [t.cfg.seed for t in members.trials], members.rng_states)
        self.members_index = torch.arange(k, device=device)
        self.shufflers = [torch.Generator().manual_seed(t.cfg.seed) for t in members.trials]
        self.loss_sum = torch.zeros(k, device=device)
        self.correct = torch.zeros(k, device=device, dtype=torch.long)
        self.graph: StepGraph | None = None
        with _Traced() as traced:  # does the model drop out? (on the meta device: one sample, no weights)
            members.base(torch.empty(1, *members.x.shape[2:], dtype=members.x.dtype, device="meta"))
        self.noisy = any(func in traced.funcs for func in DROPOUTS)
        self.kernel = None
        if self.cfg.engine == "triton":
            from . import mlp_kernel  # Triton ships with torch's CUDA builds only: imported where used
            if mlp_kernel.shape_of(members.base) is None or not isinstance(crit, torch.nn.MSELoss) or \
                    crit.reduction != "mean" or self.noisy:
                raise ValueError(f"engine 'triton' runs an MLP 2 -> H1 -> H2 -> 1 with ReLU and a mean squared "
                                 f"error (peaks at depth 2), not {members.base} with {crit}")
            self.kernel = mlp_kernel.FusedMLP(members.params, self.cfg.batch_size)

    @classmethod
    def build(cls, trials: list[Trial], where: Placement, timer: Timer) -> FusedLoop:
        """The members' data and weights made and stacked (phase 'setup') and moved to the device (phase
        'h2d'): the loop that trains them, each with its own learning rate."""
        wl, first = trials[0].workload, trials[0].cfg
        with timer.phase("setup"):
            members, model = stack_members(trials)
            reference = wl.make_optimizer(model.parameters(), filled_in(first.lr, "lr"))
        with timer.phase("h2d"):
            members = members.to(where.input_device)
        lrs = [filled_in(t.cfg.lr, "lr") for t in trials]
        return cls(members, FusedOptimizer(reference, members.params, lrs), wl.make_loss(), model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Every member's output on its own inputs (K x batch x ...), its dropout its own (MemberNoise)."""
        m = self.m

        def one(params, buffers, xb, member):
            with MemberNoise(self.streams, member) if self.noisy else contextlib.nullcontext():
                return functional_call(m.base, (params, buffers), (xb,))
        # randomness 'error': dropout's masks are drawn outside the transform, member by member (MemberNoise);
        # any other random op would draw once for all members, and must not pass unseen
        return vmap(one, randomness="error")(m.params, m.buffers, x, self.members_index)

    def step(self, idx: torch.Tensor) -> None:
        """One step of every member on its batch: idx is K x batch sample indices."""
        xb, yb = self.m.x[self.members_index[:, None], idx], self.m.y[self.members_index[:, None], idx]
        if self.kernel is not None:
            losses, grads = self.kernel(xb, yb)
            self.opt.step(grads)
            self.loss_sum.add_(losses * idx.shape[1])
            return
        out = self.forward(xb)
        losses = self.losses_of(out, yb)
        params = self.m.params
        self.opt.step(dict(zip(params, torch.autograd.grad(losses.sum(), list(params.values())))))
        self.loss_sum.add_(losses.detach() if sums(self.crit) else losses.detach() * idx.shape[1])
        if self.wl.classifies:
            self.correct.add_((out.detach().argmax(-1) == yb).sum(-1))

    def epoch(self) -> torch.Tensor:
        """One epoch of every member, each in its own order; returns the K loss sums (device tensor)."""
        self.loss_sum.zero_()
        self.correct.zero_()
        n, k, device = self.m.x.shape[1], len(self.m.trials), self.m.x.device
        order = (torch.stack([torch.randperm(n, generator=g) for g in self.shufflers]).to(device) if self.wl.shuffle
                 else torch.arange(n, device=device).expand(k, n))
        batch_size = filled_in(self.cfg.batch_size, "batch_size")
        for start in range(0, n, batch_size):
            idx = order[:, start:start + batch_size]
            if self.graph is None:
                self.step(idx)
            else:
                self.graph.replay(idx)
        return self.loss_sum

    def _first_batch(self) -> torch.Tensor:
        """Every member's first batch in the data's own order (K x batch sample indices)."""
        batch = min(filled_in(self.cfg.batch_size, "batch_size"), self.samples)
        return torch.arange(batch, device=self.m.x.device).expand(len(self.m.trials), -1)

    def capture(self) -> None:
        """Record the fused step in a CUDA graph (engines 'graph' and 'triton'); with dropout, the members'
        streams are registered with it (each replay then sets every member's seed and offset: 2 x K small
        copies)."""
        self.graph = StepGraph(self.step, self._first_batch(), generators=self.streams.generators if self.noisy else ())

    @torch.no_grad()
    def evaluate(self) -> tuple[list, list]:
        """Each member's mean test loss per sample and test accuracy (None where not a classifier)."""
        m, k = self.m, len(self.m.trials)
        test_x, test_y = m.test_x, m.test_y
        if test_x is None or test_y is None:  # measure evaluates only where there is a test split (n_test)
            raise ValueError(f"{self.label}: evaluate needs a test split, and its members' data has none")
        m.base.eval()
        out = self.forward(test_x)
        m.base.train()
        losses = self.losses_of(out, test_y)
        per_sample = losses / test_x.shape[1] if sums(self.crit) else losses
        accuracy = ((out.argmax(-1) == test_y).float().mean(-1)).tolist() if self.wl.classifies \
            else [None] * k
        return per_sample.tolist(), accuracy

    def step_costs(self) -> dict:
        """FLOPs, bytes and launches of one fused step of the whole group (trainables/costs.py; measure.py
        gives each member's row its share), taken on copies of the weights and the optimiser under a forked
        random state, on the first batch: the group's own are left as they were.

        The step is counted eagerly: in engine 'triton' too, whose kernel's work no counter sees inside it
        (the eager step does the same arithmetic). Engines 'graph' and 'triton' launch what their graph's
        replay does (StepGraph.launches), their per-class launches null."""
        params, buffers, opt = copy.deepcopy((self.m.params, self.m.buffers, self.opt))
        twin = FusedLoop(dataclasses.replace(self.m, params=params, buffers=buffers), _Counted(opt), self.crit,
                         self.model)
        twin.kernel = None
        with torch.random.fork_rng(devices=[self.m.x.device] if self.streams.cuda else []):
            try:
                counted = costs.count(lambda: twin.step(self._first_batch()), self.streams.cuda)
            except Exception as exc:  # an op torch's counters do not know: the rows stand, their costs null, and why
                return {"costs_note": f"not counted: {type(exc).__name__}: {exc}"[:300]}
        if self.graph is not None:  # the ops are counted eagerly: a graph's step launches otherwise
            counted = costs.replayed(counted, self.graph.launches)
        return counted


class _Counted(torch.optim.Optimizer):
    """A FusedOptimizer's step as a torch.optim step, for counting: torch.optim's step hooks then run around
    it, and costs.Traffic classes its ops as 'optimizer', as it does a single trial's optimiser's."""

    def __init__(self, fused: Stepper):
        super().__init__([torch.zeros(())], {})  # torch.optim refuses no parameters; this one is never stepped
        self.fused = fused

    # its step takes the fused step's gradients, as FusedOptimizer.step, never a closure: torch.optim's hooks wrap a
    # subclass's step whatever its arguments (Optimizer.profile_hook_step), which its annotation does not allow for
    def step(self, grads: dict) -> None:  # type: ignore[override]
        self.fused.step(grads)


def run_fused(trials: list[Trial]) -> list[dict]:
    """Train the members together (trainables/measure.py); one row per member (crossover/schema.py)."""
    keys = {fusion_key(t) for t in trials}
    if len(keys) != 1 or None in keys:
        raise ValueError(f"members of a fused trial must differ only in {FUSABLE} and be fusable (a workload with "
                         f"Workload.fusable, cpu or cuda, engine one of {FUSED_ENGINES}, loop fast, precision default or fp32): use "
                         "crossover.trainables.fused.fusion_key to group them")
    where = placement(trials[0].spec)
    return measure(trials, where, lambda timer: FusedLoop.build(trials, where, timer))

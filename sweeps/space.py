"""A sweep's search space: per-workload grids crossed with devices and seeds, checked before anything runs.

    space = Space("scaling", grids={"disc": {"depth": [2, 4, 6]}}, devices=("cpu", "cuda"))
    space = Space("mine", grids={"job.py:workload": {"dataset_size": [1000, 10000]}}, planner=planner)   # a user's
    space = Space("mine", grids={workload: {"image_size": [32, 64]}}, planner=planner)   # a Workload, its own axis
    trials = space.expand()              # list[Trial], every one resolved and checked
    space.param_space(groups(trials, space.fuse))   # Tune's param_space: a grid point per trial or fused group
    resources_for(config)                # Tune's per-trial resource request, as the grid point carries it

A grid's key is a built-in's name, a user's workload as 'path/to/job.py:attr' or 'package.module:attr',
or a Workload object (crossover/workload.py). A user's workload is known here by its WorkloadSpec alone, from
a process of its own that imports it (sweeps/plan.py: the `planner` the sweep script's main() made): its trials'
`wl`, and its own check run there. Axes a grid may set: crossover.schema.GRID_AXES (depth, width, batch_size,
dataset_size, epochs, lr, and micro_batches for pipe:N), and the workload's own (Workload.params).
A bad value is refused with the sweep, the workload and the axis named, e.g.
`width must be an integer >= 1, got 0 (sweep 'scaling', workload 'disc', axis width)`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import torch

from crossover.config import ConfigError, TrialConfig
from crossover.schema import GRID_AXES
from crossover.workload import Workload, WorkloadSpec

from ..trainables import fused
from ..trainables.devices import parse, threads_for
from ..trainables.fused import fusion_key
from ..trainables.job import is_reference
from ..trainables.registry import fingerprint
from ..trainables.shipping import Shipping
from ..trainables.trial import Trial, resolve
from ..trainables.workloads import WORKLOADS
from .cli import PLAN_TIMEOUT_S
from .plan import Planner
from .store import check_name
# Custom resources that mark node types (cluster.yaml, tests/test_cluster.py): 1 on each such node.
CPU_NODE = "cpu_node"
GPU_NODE = "gpu_node"


@dataclass(frozen=True)
class Space:
    name: str  # results go to results/<name>/
    grids: dict  # workload (name, 'module:attr' or Workload) -> {axis: [values]}; an axis left out takes its default
    devices: tuple = ("cpu",)  # device strings, crossed with every grid point
    cpu_threads: int = 1  # threads (and Ray CPUs) of each CPU trial, shared by ddp-cpu workers
    repeats: int = 1  # independent seeds 0..repeats-1 of every point
    fixed: dict = field(default_factory=dict)  # other TrialConfig fields for every trial: loop, warmup_epochs
    image_data: dict = field(default_factory=dict)  # data and data_dir, for the image workloads only
    fuse: str = "off"  # 'off', 'auto' (groups up to fuse_budget()) or a number: members per fused trial
    cpu_nodes_only: bool = False  # CPU trials ask for CPU_NODE too: kept off GPU nodes (resources_for)
    params: dict = field(default_factory=dict)  # workloads' own axes held fixed (--param, over a grid's values)
    timeout_s: float = 3600  # s a Tune trial may run before it is stopped and rowed as timed out (--trial-timeout)
    timeout_why: str = "--trial-timeout"  # what set timeout_s, in the timed-out row's error (the search: its budget)
    plan_timeout_s: float = PLAN_TIMEOUT_S  # s the process that plans a user's workload may run (--plan-timeout)
    # what the sweep's driver has planned of its users' workloads (sweeps/plan.py), made by the sweep script's main()
    # and handed to every Space it builds; None: the space holds built-ins alone
    planner: Planner | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_name(self.name)  # a folder under --out: never a path out of it

    @property
    def shipping(self) -> Shipping | None:
        """What the sweep ships of its users' workloads to Ray's workers (its planner's), or None: built-ins alone."""
        return self.planner.registry.shipping if self.planner else None

    def _where(self, workload: str | None = None, axis: str | None = None) -> str:
        parts = [f"sweep {self.name!r}"] + ([f"workload {workload!r}"] if workload else [])
        return "(" + ", ".join(parts + ([f"axis {axis}"] if axis else [])) + ")"

    def expand(self) -> list[Trial]:
        """Every trial of the space, resolved; raises ValueError naming the first bad axis and value."""
        if not self.grids:
            raise ValueError(f"the space has no workloads {self._where()}; known: {sorted(WORKLOADS)}")
        if not self.devices:
            raise ValueError(f"the space has no devices {self._where()}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats} {self._where()}")
        try:
            threads = {device: threads_for(parse(device), self.cpu_threads) for device in self.devices}
        except ConfigError as exc:
            raise ValueError(f"{exc} {self._where(axis='device')}") from None
        trials = []
        workloads = self.workloads()
        for wl, grid in zip(workloads, self.grids.values()):
            for axis, values in grid.items():
                if axis not in GRID_AXES and axis not in wl.params:
                    raise ValueError(f"axis must be one of {list(GRID_AXES)} or the workload's own "
                                     f"{sorted(wl.params) or '(it declares none)'}, got {axis!r} {self._where(wl.name)}")
                if not isinstance(values, (list, tuple)) or not values:
                    raise ValueError(f"{axis} needs a non-empty list of values, got {values!r} "
                                     f"{self._where(wl.name, axis)}")
            axes = list(grid)
            fixed = {**self.fixed, **(self.image_data if wl.images else {})}
            if wl.ref:  # a user's: imported by module in the worker, its code part of the hash
                fixed.update(module=wl.ref, fingerprint=fingerprint(wl))
            held = {k: v for k, v in self.params.items() if k in wl.params}
            for point in itertools.product(*(grid[a] for a in axes), self.devices, range(self.repeats)):
                *values, device, seed = point
                shared = {a: v for a, v in zip(axes, values) if a in GRID_AXES}
                shared.update(_warmup(shared.get("epochs", wl.defaults.get("epochs")), fixed))
                # a value held by --param wins over the grid's values of that axis: what the user asked for
                own = {**{a: v for a, v in zip(axes, values) if a not in GRID_AXES}, **held}
                try:
                    trials.append(resolve(TrialConfig(wl.name, device=device, seed=seed, threads=threads[device],
                                                      params=own or None, **shared, **fixed), wl))
                except ConfigError as exc:
                    raise ValueError(f"{exc} {self._where(wl.name, exc.field)}") from None
        trials = _unique(trials)
        # a user's own checks, in a process of their own (a space of built-ins alone has none)
        refused = self.planner.refusals(trials, self.plan_timeout_s) if self.planner else {}
        for trial in trials:
            if trial.hash in refused:
                field, why = refused[trial.hash]
                raise ValueError(f"{why} {self._where(trial.wl.name, field)}")
        return trials

    def workloads(self) -> list[Workload | WorkloadSpec]:
        """The grids' workloads, in order: built-ins by name, a user's as the WorkloadSpec a process of its own
        found (sweeps/plan.py: never imported here). Raises ValueError naming a workload that is none of them, a
        name given twice, or a --param no workload has."""
        found: list[Workload | WorkloadSpec] = []
        for key in self.grids:
            if isinstance(key, Workload) or (isinstance(key, str) and is_reference(key)):
                if self.planner is None:
                    raise ValueError(f"workload {key!r} is a user's, planned in a process of its own: give the Space "
                                     "the sweep's planner (Space(..., planner=Planner()), crossover.sweeps.plan's) "
                                     f"{self._where()}")
                found.append(self.planner.spec(key, self.plan_timeout_s))
            elif key in WORKLOADS:
                found.append(WORKLOADS[key])
            else:
                raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, a file's or module's "
                                 f"(path/to/job.py:ATTR, package.module:ATTR) or a Workload, got {key!r} {self._where()}")
        names = [wl.name for wl in found]
        for wl in found:
            if names.count(wl.name) > 1 or (wl.ref and wl.name in WORKLOADS):
                raise ValueError(f"two workloads are named {wl.name!r} {self._where()}: rows are told apart by name, "
                                 "so give the user's Workload another name")
        unknown = sorted(set(self.params) - {p for wl in found for p in wl.params})
        if unknown:
            axes = "; ".join(f"{wl.name}: {', '.join(sorted(wl.params)) or 'none'}" for wl in found)
            raise ValueError(f"--param {unknown[0]} is an axis of none of the workloads {names} {self._where()}; "
                             f"their own axes are {axes}")
        return found

    def param_space(self, groups: list[list[Trial]]) -> dict:
        """One Tune trial per group (a single trial, or the members of a fused trial): its members'
        configs, and the resources it asks Ray for (`resources_for` hands them to Tune)."""
        from ray import tune

        # a fused group's members share their device, so the first one's request is the group's
        return {"group": tune.grid_search([{"trials": [t.cfg.to_dict() for t in group], "timeout_s": self.timeout_s,
                                            "timeout_why": self.timeout_why,
                                            "resources": self.request(group[0])} for group in groups])}

    def request(self, trial: Trial) -> dict:
        """Tune's resource request for a trial: a CPU trial asks for its cores, a GPU trial for its GPU.

        With `cpu_nodes_only` (a cluster whose CPU node types carry CPU_NODE, as cluster.yaml's do), a
        CPU trial (cpu, ddp-cpu) also asks for a sliver of CPU_NODE, so it never lands on a GPU node's
        spare cores, where it would time another CPU model and steal the GPU trial's driving core.
        """
        asked = dict(trial.resources)
        if self.cpu_nodes_only and not trial.spec.uses_gpu:
            asked[CPU_NODE] = 0.001  # a node advertises 1: its CPUs, not the marker, bound the trials on it
        return asked


def _warmup(epochs, fixed: dict) -> dict:
    """The warm-up a trial of `epochs` epochs gets where the sweep sets none (`fixed`): TrialConfig's one epoch
    left out of the timing, or none for a one-epoch trial, which would otherwise have no epoch to time (a
    Workload whose defaults say epochs: 1). Its one epoch is then timed with the first epoch's one-time costs
    (the allocator's first requests, a GPU's kernel choice, caches filling); the timer goes on to at least
    MIN_TIMED_EPOCHS epochs where min_timed_s > 0 (trainables/timing.py), whose median leaves that one out, and
    the row says warmup_epochs 0."""
    return {"warmup_epochs": 0} if epochs == 1 and "warmup_epochs" not in fixed else {}


def _unique(trials: list[Trial]) -> list[Trial]:
    """Drop repeats that resolve to the same experiment (an axis given its default value, say)."""
    seen: dict[str, Trial] = {}
    for trial in trials:
        seen.setdefault(trial.hash, trial)
    return list(seen.values())


def resources_for(config: dict) -> dict:
    """Tune's per-trial resource request: the one its grid point carries (Space.request)."""
    return config["group"]["resources"]



FUSE_BUDGET_BYTES = 8 * 2**30  # what one fused group may hold on its device where the driver sees no GPU
# Of the GPU's free memory, what one fused group may plan to hold: member_bytes is an estimate that leaves
# out the allocator's rounding and cuBLAS/cuDNN workspaces, the trial worker's own CUDA context (about
# 0.5 GiB) comes out of the same free memory, and the graph engine's capture allocates the step's
# tensors again in a private pool beside the warm-up's cached ones (up to twice a step's memory): half.
FUSE_FREE_SHARE = 0.5
FUSE_MAX = 64  # members per group, at most


@dataclass(frozen=True)
class FuseBudget:
    bytes: int  # what one fused group ('--fuse auto') may hold on its device
    source: str  # where that figure comes from, for the sweep's log

    def __str__(self) -> str:
        return f"{self.bytes / 2**30:,.1f} GiB a group ({self.source})"


FIXED_BUDGET = FuseBudget(FUSE_BUDGET_BYTES, "the fixed budget: the driver sees no GPU")


def fuse_budget() -> FuseBudget:
    """FUSE_FREE_SHARE of the free memory of the GPU the driver sees (its first), else FIXED_BUDGET.
    A driver that sees a GPU holds a CUDA context on it from here on (about 0.5 GiB)."""
    if torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info()
        return FuseBudget(int(free * FUSE_FREE_SHARE), f"{FUSE_FREE_SHARE:.0%} of the {free / 2**30:,.1f} GiB free on "
                                                       f"{torch.cuda.get_device_name()}, as the driver sees it")
    return FIXED_BUDGET


def groups(trials: list[Trial], fuse: str, budget: FuseBudget = FIXED_BUDGET,
           planner: Planner | None = None) -> list[list[Trial]]:
    """The Tune trials: one per trial, or with `fuse`, trials that differ only in seed and learning
    rate (trainables/fused.py) in groups of up to `fuse` members ('auto': as many as `budget` holds
    by member_bytes, at most FUSE_MAX, alone where it has none; sweeps/runner.py gives it fuse_budget()).
    A user's trial's member_bytes is its `planner`'s (the Space's), from a process of its own."""
    if fuse == "off":
        return [[t] for t in trials]
    if fuse != "auto" and not (fuse.isdigit() and int(fuse) >= 1):
        raise ValueError(f"fuse must be 'off', 'auto' or a number of members >= 1, got {fuse!r}")
    buckets: dict[str, list[Trial]] = {}
    out = []
    for trial in trials:
        key = fusion_key(trial)
        if key is None:
            out.append([trial])
        else:
            buckets.setdefault(key, []).append(trial)
    for members in buckets.values():
        one = member_bytes(members[0], planner) if fuse == "auto" else None
        size = int(fuse) if fuse != "auto" else 1 if one is None else max(1, min(FUSE_MAX, budget.bytes // one))
        out += [members[i:i + size] for i in range(0, len(members), size)]
    return out


def member_bytes(trial: Trial, planner: Planner | None, timeout_s: float = PLAN_TIMEOUT_S) -> int | None:
    """trainables/fused.py member_bytes of `trial`: a user's from `planner`'s process (Planner.member_bytes; None
    where not estimated), a built-in's here (it may raise: a shape past int64)."""
    if trial.wl.ref is None:
        return fused.member_bytes(trial)
    if planner is None:
        raise ValueError(f"trial {trial.label()} is of a user's workload, sized in a process of its own: give the "
                         "Space the sweep's planner (crossover.sweeps.plan's Planner)")
    return planner.member_bytes(trial, timeout_s)

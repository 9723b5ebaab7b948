"""A sweep's search space: per-workload grids crossed with devices and seeds, checked before anything runs.

    space = Space("scaling", grids={"disc": {"depth": [2, 4, 6]}}, devices=("cpu", "cuda"))
    configs = space.expand()             # list[TrialConfig], every one resolved and checked
    space.param_space(groups(configs, space.fuse))   # Tune's param_space: a grid point per trial or fused group
    resources_for(config_dict, space.cpu_nodes_only)   # Tune's per-trial resource request

Axes a grid may set: depth, width, batch_size, dataset_size, epochs, lr, micro_batches (pipe:N).
A bad value is refused with the sweep, the workload and the axis named, e.g.
`width must be an integer >= 1, got 0 (sweep 'scaling', workload 'disc', axis width)`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from trainables.config import ConfigError, TrialConfig
from trainables.devices import parse, resources, threads_for
from trainables.workloads import WORKLOADS, resolve

AXES = ("depth", "width", "batch_size", "dataset_size", "epochs", "lr", "micro_batches")
# Custom resources that mark node types (cluster.yaml, tests/test_cluster.py): 1 on each such node.
CPU_NODE = "cpu_node"
GPU_NODE = "gpu_node"


@dataclass(frozen=True)
class Space:
    name: str  # results go to results/<name>/
    grids: dict  # workload -> {axis: [values]}; an axis left out takes the seed's value
    devices: tuple = ("cpu",)  # device strings, crossed with every grid point
    cpu_threads: int = 1  # threads (and Ray CPUs) of each CPU trial, shared by ddp-cpu workers
    repeats: int = 1  # independent seeds 0..repeats-1 of every point
    fixed: dict = field(default_factory=dict)  # other TrialConfig fields for every trial: loop, warmup_epochs
    image_data: dict = field(default_factory=dict)  # data and data_dir, for the image workloads only
    fuse: str = "off"  # 'off', 'auto' (groups up to FUSE_BUDGET_BYTES) or a number: members per fused trial
    cpu_nodes_only: bool = False  # CPU trials ask for CPU_NODE too: kept off GPU nodes (resources_for)

    def _where(self, workload: str | None = None, axis: str | None = None) -> str:
        parts = [f"sweep {self.name!r}"] + ([f"workload {workload!r}"] if workload else [])
        return "(" + ", ".join(parts + ([f"axis {axis}"] if axis else [])) + ")"

    def expand(self) -> list[TrialConfig]:
        """Every trial of the space, resolved; raises ValueError naming the first bad axis and value."""
        if not self.grids:
            raise ValueError(f"the space has no workloads {self._where()}; known: {sorted(WORKLOADS)}")
        if not self.devices:
            raise ValueError(f"the space has no devices {self._where()}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats} {self._where()}")
        configs = []
        for workload, grid in self.grids.items():
            if workload not in WORKLOADS:
                raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, got {workload!r} {self._where()}")
            for axis, values in grid.items():
                if axis not in AXES:
                    raise ValueError(f"axis must be one of {list(AXES)}, got {axis!r} {self._where(workload)}")
                if not isinstance(values, (list, tuple)) or not values:
                    raise ValueError(f"{axis} needs a non-empty list of values, got {values!r} "
                                     f"{self._where(workload, axis)}")
            axes = list(grid)
            for point in itertools.product(*(grid[a] for a in axes), self.devices, range(self.repeats)):
                *values, device, seed = point
                extra = self.image_data if WORKLOADS[workload].images else {}
                try:
                    configs.append(resolve(TrialConfig(
                        workload, device=device, seed=seed, threads=threads_for(device, self.cpu_threads),
                        **dict(zip(axes, values)), **self.fixed, **extra)))
                except ConfigError as exc:
                    raise ValueError(f"{exc} {self._where(workload, exc.field)}") from None
        return _unique(configs)

    @staticmethod
    def param_space(groups: list[list[TrialConfig]]) -> dict:
        """One Tune trial per group: a single config, or the members of a fused trial."""
        from ray import tune

        return {"trials": tune.grid_search([[cfg.to_dict() for cfg in group] for group in groups])}


def _unique(configs: list[TrialConfig]) -> list[TrialConfig]:
    """Drop repeats that resolve to the same experiment (an axis given its default value, say)."""
    seen: dict[str, TrialConfig] = {}
    for cfg in configs:
        seen.setdefault(cfg.config_hash(), cfg)
    return list(seen.values())


def resources_for(config: dict, cpu_nodes_only: bool = False) -> dict:
    """Tune's per-trial resource request: a CPU trial asks for its cores, a GPU trial for its GPU.

    With `cpu_nodes_only` (a cluster whose CPU node types carry CPU_NODE, as cluster.yaml's do), a
    CPU trial (cpu, ddp-cpu) also asks for a sliver of CPU_NODE, so it never lands on a GPU node's
    spare cores, where it would time another CPU model and steal the GPU trial's driving core.
    """
    cfg = TrialConfig.from_dict(config["trials"][0])  # a fused group's members share their device
    asked = resources(cfg.device, cfg.threads)
    if cpu_nodes_only and not parse(cfg.device).uses_gpu:
        asked[CPU_NODE] = 0.001  # a node advertises 1: its CPUs, not the marker, bound the trials on it
    return asked



FUSE_BUDGET_BYTES = 8 * 2**30  # what one fused group may hold on its device: weights, optimiser state, data
FUSE_MAX = 64  # members per group, at most


def groups(configs: list[TrialConfig], fuse: str) -> list[list[TrialConfig]]:
    """The Tune trials: one per config, or with `fuse`, configs that differ only in seed and learning
    rate (trainables/fused.py) in groups of up to `fuse` members ('auto': as many as FUSE_BUDGET_BYTES
    holds, at most FUSE_MAX)."""
    if fuse == "off":
        return [[c] for c in configs]
    from trainables.fused import fusion_key, member_bytes

    if fuse != "auto" and not (fuse.isdigit() and int(fuse) >= 1):
        raise ValueError(f"fuse must be 'off', 'auto' or a number of members >= 1, got {fuse!r}")
    buckets: dict[str, list[TrialConfig]] = {}
    out = []
    for cfg in configs:
        key = fusion_key(cfg)
        if key is None:
            out.append([cfg])
        else:
            buckets.setdefault(key, []).append(cfg)
    for members in buckets.values():
        size = int(fuse) if fuse != "auto" else max(1, min(FUSE_MAX, FUSE_BUDGET_BYTES // member_bytes(members[0])))
        out += [members[i:i + size] for i in range(0, len(members), size)]
    return out

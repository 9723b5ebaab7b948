"""Tune trials no node of the cluster can ever hold, refused before anything runs: the Ray bundles a trial asks for,
and an estimate of its memory, against every node the cluster has or may add (sweeps/cluster.py node_types).

    # sweeps/runner.py run, before any trial starts:
    check_placeable(space, groups(trials, space.fuse, budget, space.planner), node_types(cluster_config))
"""

from __future__ import annotations

import math

from ..trainables.devices import ddp_worker_resources
from .space import Space, member_bytes


# Ray Train 2.60 (trainables/ddp.py) runs a data-parallel trial as: the Tune trial itself (its own
# request, a quarter core: trainables/devices.py), Ray Train's TrainController actor (num_cpus=0, on
# the driver's node: ray/train/v2/api/data_parallel_trainer.py) and a placement group of N bundles of
# ddp_worker_resources, packed where they fit. `ddp-cpu:2` on 2 cores needs 2 x 1 + 0.25 CPUs: it
# never starts, and Ray Train retries its WorkerGroupStartupTimeoutError every 60 s, for ever.
_RAY_NAMES = {"cpu": "CPU", "gpu": "GPU"}  # Tune's resource names -> Ray's
_FIXES = {
    "cpu": "give --cpu-threads at most the CPUs of the largest node",
    "ddp-cpu": "give --cpu-threads fewer than the CPUs there are (the N workers share --cpu-threads, at least "
               "1 core each, beside the trial's own quarter core: the default, every core, leaves none for it), "
               "or ask for fewer workers (ddp-cpu:N with N + 0.25 <= the CPUs)",
    "ddp": "ask for fewer GPUs (ddp:N)", "pipe": "ask for fewer stages (pipe:N)", "cuda": "",
}
_MORE = ("drop it from --devices, connect to a cluster that has them (--address), or name the autoscaling config "
         "whose node types do (--cluster-config)")


def bundles(space: Space, group: list) -> list[dict]:
    """The Ray resource bundles one Tune trial holds at once: its own request, then its Ray Train workers'."""
    trial = group[0]
    own = {_RAY_NAMES.get(k, k): v for k, v in space.request(trial).items() if v}
    return [own] + ([ddp_worker_resources(trial.spec, trial.cfg.threads)] * trial.spec.count
                    if trial.spec.distributed else [])


def placement_problem(space: Space, group: list, nodes: list[dict]) -> tuple[str, str] | None:
    """Why the Tune trial of `group` can never be placed on `nodes` (every node the cluster has or may
    add), and the fix; None where it can: a bundle no node holds, more in all than the nodes have
    together, or an estimate of its memory past the memory of every node it fits on. The estimate is
    trainables/fused.py's member_bytes (a user's found in a process of its own: sweeps/plan.py): weights,
    gradients and two optimiser moments (4 x 4 bytes a parameter), the data, and every new tensor a batch's forward
    makes (activations, feature maps), forward and backward; no allocator rounding or workspaces in it, so what it
    refuses cannot fit."""
    def fits(bundle: dict[str, float], node: dict[str, float]) -> bool:
        return all(node.get(k, 0) >= v for k, v in bundle.items())

    held, kind = bundles(space, group), group[0].spec.kind
    resource_fix = f"{_FIXES[kind] + ', or ' if _FIXES[kind] else ''}{_MORE}"
    for bundle in (held[0], held[-1]):
        if not any(fits(bundle, n) for n in nodes):
            return f"asks Ray for {bundle} in one place, and no node has that much", resource_fix
    need = {k: sum(b.get(k, 0) for b in held) for k in held[0].keys() | held[-1].keys()}
    total = {k: sum(n.get(k, 0) for n in nodes) for k in need}
    if not fits(need, total):
        return (f"needs {need} at once ({len(held) - 1} Ray Train workers of {held[-1]} beside the trial's own "
                f"{held[0]}; Ray Train's controller asks for none), and the cluster has {total} in all"), resource_fix
    try:
        # a user's, from the process that planned it (sweeps/plan.py); None where its model failed on the meta
        # device: not estimated, it runs, and its row says what failed (an OOM, its own error)
        one = member_bytes(group[0], space.planner, space.plan_timeout_s)
        estimate: float | None = None if one is None else len(group) * one
    except (RuntimeError, OverflowError, ValueError):  # a built-in's shape past int64: no machine holds it
        estimate = math.inf
    memory = [n.get("memory", 0) + n.get("object_store_memory", 0) for n in nodes if fits(held[0], n)]
    if estimate is not None and memory and all(memory) and estimate > max(memory):  # 0: a node type whose memory is not known
        size = "more than 2^63 bytes" if estimate == math.inf else f"at least {estimate / 2**30:,.1f} GiB"
        return (f"({group[0].label()}) needs {size} (weights, gradients, optimiser "
                f"state, data, a batch's activations), more than the {max(memory) / 2**30:,.1f} GiB of the largest "
                "node it fits on"), "give it smaller sizes (depth, width, batch_size, dataset_size)"
    return None


def check_placeable(space: Space, batches: list[list], nodes: list[dict]) -> None:
    """Refuses, before anything runs, Tune trials that no node of the cluster (alive, or that its
    autoscaler may add) can ever hold: one message per device and reason, naming the flag and the fix."""
    problems: dict[tuple[str, str], str] = {}  # (device, fix) -> its message, said once
    for group in batches:
        found = placement_problem(space, group, nodes)
        if found:
            why, fix = found
            device = group[0].cfg.device
            problems.setdefault((device, fix), f"device {device!r} (--devices) in sweep {space.name!r} {why}: {fix}")
    if problems:
        raise ValueError("\n".join(problems.values()))


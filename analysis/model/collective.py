"""A data-parallel step on N GPUs of M nodes: the one-GPU step at the per-GPU batch, plus the gradients' all-reduce.

    python -m crossover.analysis parallel --validate      # this model against the measured DDP rows and Lambda's
    crossover predict --workload job.py:workload --epochs 30 --gpus 1,2,4,8   # it, priced on every instance

What it adds to one GPU's step (analysis/model/'s, at the batch one GPU takes), each term a figure with a source:

    bytes      the gradients that train, at their dtype (4 bytes a parameter: autocast keeps FP32 weights)
    ring       NCCL's ring all-reduce moves 2(W-1)/W of them through each GPU's slowest link (nccl-tests' bus
               bandwidth rule), W = N x M ranks, at EFFICIENCY of the link's one-way bandwidth; plus NCCL's
               latency, NCCL_BASE_S a call and the link's latency_s for each of its 2(W-1) steps
    link       inside a node the GPUs' link (devices.yaml `links:`: NVLink or PCIe, per GPU); between nodes the
               network (per node), whichever is slower; a ring step's latency is the slower link's
    buckets    DDP all-reduces BUCKET_BYTES at a time while the backward (BACKWARD_SHARE of the step) still runs:
               all but the last bucket may hide under it, the last never can (`overlapped`)
    contention what hides is not free: NCCL's kernels take SMs and memory bandwidth from the backward's; a share
               CONTENTION of the hidden seconds is paid
    host       DDP's own work each step on each rank's CPU, counted (`Host`, HOST): the reducer's, seconds for
               each parameter tensor that trains (its autograd hook and its copies into and out of a bucket: about
               two launches a tensor) and for each bucket (flattening it, launching its all-reduce); the two
               fitted on the measured DDP rows (`parallel --validate` fits them leaving each model out, and prints
               them). The tensors are the counted step's (sweeps/count_step.py `n_param_tensors`);
               TENSORS_UNKNOWN where no count gives them

A step is never faster than the slower of its compute and its communication, nor slower than their sum. The
interval: the low end the one-GPU step's low end, the link at its best share, nothing paid for what hides and
half the host's share; the high end the one-GPU step's high end, the link's worst share, the hidden part paid in
full (the sum) and twice the host's share, for N processes sharing one host's CPUs; both then widened by SPREAD,
what the measured DDP rows' held-out errors say the terms above leave out.

Sharded data parallelism (FSDP, `fsdp_gpus`, `fsdp_step`): parameters, gradients and optimiser state split N
ways, activations per GPU; each step all-gathers the parameters for the forward and again for the backward, and
reduce-scatters the gradients: 3 (W-1)/W of the parameters' bytes through each GPU, in the same buckets.

Pure functions of numbers; reads analysis/devices.yaml's links. Never imports torch or ray.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .device_table import DEVICES, read_table

BUCKET_BYTES = 25 * 2**20  # DDP's bucket_cap_mb default, 25 MiB of gradients an all-reduce
NCCL_BASE_S = 8.4e-6  # s a collective call: NCCL's tuning model, baseLat of Ring/Simple (src/graph/tuning.cc)
# Share of a link's one-way bandwidth NCCL's ring reaches (low, mid, high): an estimate, not fitted; nccl-tests'
# bus bandwidth on NVLink and PCIe systems commonly sits at 70-90% of the vendors' figures
EFFICIENCY = (0.6, 0.8, 0.9)
BACKWARD_SHARE = 2 / 3  # of a step, the backward: two products per layer for the forward's one
CONTENTION = (0.0, 0.5, 1.0)  # share of the hidden all-reduce's seconds the backward still pays (low, mid, high)
HOST_RANGE = (0.5, 2.0)  # the interval's ends, as multiples of the host's term: N processes on one host's CPUs
# Parameter tensors that train, where no counted step says (a decision from rows, which do not carry it): the
# real-sized models the term was fitted on hold 150-161 (ResNet-50, ViT-B/16, BERT-base, a GPT-2-small decoder)
TENSORS_UNKNOWN = 150
# The interval's ends widened by exp(-SPREAD) and exp(SPREAD): the 90th percentile of |log(measured / predicted)|
# over the measured DDP rows, each predicted leaving its model out (`parallel --validate` fits and prints it), as
# the one-GPU model's split-conformal intervals are made
SPREAD = 0.158
GRAD_BYTES = 4  # bytes a trained parameter's gradient: FP32 weights under autocast (bf16, fp16) and at default
STATE_BYTES = 16  # bytes a parameter FSDP shards: FP32 weights, gradients and Adam's two moments (decide.memory)


@dataclass(frozen=True)
class Link:
    """How data moves between GPUs: one entry of analysis/devices.yaml's `links:`."""

    key: str  # its name in the table: nvlink4, pcie4, efa-3200, ...
    name: str  # in words
    scope: str  # "gpu": the bandwidth each GPU has (a link inside a node); "node": what a node has (a network)
    bandwidth_bytes_per_s: float  # one way
    latency_s: float  # a ring step over it (NCCL's hwLat)
    source: str
    date: str


def load_links(path: Path = DEVICES) -> dict[str, Link]:
    """The links of the device table; one missing a figure, its source or its date is refused by name."""
    table = read_table(path).get("links") or {}
    links = {}
    for key, entry in table.items():
        missing = [f for f in ("name", "scope", "bandwidth_bytes_per_s", "latency_s", "source", "date")
                   if not (entry or {}).get(f)]
        if missing or entry["scope"] not in ("gpu", "node"):
            raise ValueError(f"{path}: link {key!r} lacks {missing or ['scope: gpu or node']}: give every link its "
                             "one-way bandwidth, its latency, its scope (gpu or node), the source and the date")
        links[str(key)] = Link(str(key), str(entry["name"]), str(entry["scope"]), float(entry["bandwidth_bytes_per_s"]),
                               float(entry["latency_s"]), str(entry["source"]), str(entry["date"]))
    return links


def ring_bytes(nbytes: float, ranks: int) -> float:
    """Bytes each rank sends (and receives) in a ring all-reduce of `nbytes`: 2(W-1)/W of them (nccl-tests' bus
    bandwidth rule: a reduce-scatter then an all-gather, each (W-1)/W)."""
    return 2 * (ranks - 1) / ranks * nbytes if ranks > 1 else 0.0


def buckets(nbytes: float, size: float = BUCKET_BYTES) -> int:
    """How many all-reduces DDP makes of `nbytes` of gradients: one a bucket, at least one."""
    return max(1, math.ceil(nbytes / size))


def ring_s(moved: float, calls: int, ranks: int, bandwidth: float, latency_s: float) -> float:
    """Seconds of `calls` ring collectives that move `moved` bytes through each rank in all: the bytes at
    `bandwidth`, and NCCL's latency, NCCL_BASE_S a call and `latency_s` for each of its 2(W-1) steps."""
    if ranks <= 1:
        return 0.0
    return moved / bandwidth + calls * (NCCL_BASE_S + 2 * (ranks - 1) * latency_s)


def overlapped(compute_s: float, comm_s: float, calls: int, contention: float) -> float:
    """A step whose `calls` collectives (comm_s in all) run while its backward (BACKWARD_SHARE of compute_s) does:
    the first calls - 1 may hide under the part of the backward before the last bucket is ready; the last never
    can; `contention` of what hid is paid still. Never below max(compute_s, comm_s), never above their sum."""
    early = comm_s * (calls - 1) / calls
    window = BACKWARD_SHARE * compute_s * (calls - 1) / calls
    exposed = max(0.0, early - window) + comm_s / calls
    return compute_s + exposed + contention * (comm_s - exposed)


def bandwidth(link: Link, network: Link | None, nodes: int, share: float) -> tuple[float, float]:
    """The ring's bandwidth a rank and its latency a step: the GPUs' link inside a node, the network between
    nodes (its bandwidth a node's), whichever is slower, each at `share` of its one-way figure."""
    if nodes > 1 and network is None:
        raise ValueError(f"--nodes {nodes}: no network between nodes is known for this instance; give it a `network:` "
                         "(a key of the GPU table's links:) in the price table, or ask for --nodes 1")
    inside = link.bandwidth_bytes_per_s * share
    if nodes <= 1 or network is None:  # one node (more than one without a network was refused above)
        return inside, link.latency_s
    return min(inside, network.bandwidth_bytes_per_s * share), max(link.latency_s, network.latency_s)


@dataclass(frozen=True)
class Host:
    """DDP's host work a step on each rank, the reducer's: seconds for each parameter tensor and for each bucket."""

    per_tensor_s: float  # s a trained parameter tensor: its autograd hook, its copies into and out of its bucket
    per_bucket_s: float  # s a bucket: its flattening and its all-reduce's launch

    def seconds(self, tensors: float, calls: int) -> float:
        """The reducer's seconds a step for `tensors` parameter tensors in `calls` buckets."""
        return self.per_tensor_s * tensors + self.per_bucket_s * calls


# Fitted on every measured DDP row (`parallel --validate`, 2026-12-07): the per-bucket term fits to nothing there
HOST = Host(per_tensor_s=3.73e-5, per_bucket_s=0.0)


@dataclass(frozen=True)
class Step:
    """A step on each of N x M GPUs, seconds, and its 90%-style interval (see the module's docstring)."""

    step_s: float  # the step, its point figure
    step_lo: float
    step_hi: float
    comm_s: float  # the collectives' seconds a step, alone (point figure)
    exposed_s: float  # of the step, what is not the one-GPU step's (point figure): step_s - compute_s
    calls: int  # collectives a step (buckets)
    moved_bytes: float  # bytes through each GPU a step
    host_s: float  # of the step, the reducer's host work (point figure; 0 on one GPU)


def _step(compute: tuple[float, float, float], nbytes: float, factor: float, gpus: int, nodes: int, link: Link,
          network: Link | None, tensors: float | None, host: Host, spread: float) -> Step:
    """The step of a data-parallel run whose collectives move factor x (W-1)/W x nbytes through each rank, with
    the reducer's work for `tensors` parameter tensors (None: TENSORS_UNKNOWN)."""
    ranks = gpus * nodes
    calls = buckets(nbytes)
    moved = factor * (ranks - 1) / ranks * nbytes if ranks > 1 else 0.0
    reducer = host.seconds(TENSORS_UNKNOWN if tensors is None else tensors, calls)
    ends = []
    for one, share, paid, times in zip(compute, EFFICIENCY[::-1], CONTENTION, HOST_RANGE[:1] + (1.0,) + HOST_RANGE[1:]):
        if ranks <= 1:
            ends.append((one, 0.0))
            continue
        rate, latency = bandwidth(link, network, nodes, share)
        comm = ring_s(moved, calls, ranks, rate, latency)
        ends.append((overlapped(one, comm, calls, paid) + times * reducer, comm))
    (lo, _), (mid, comm), (hi, _) = ends
    wide = math.exp(spread) if ranks > 1 else 1.0
    return Step(mid, min(lo, mid) / wide, max(hi, mid) * wide, comm, mid - compute[1], calls, moved,
                reducer if ranks > 1 else 0.0)


def ddp_step(compute: tuple[float, float, float], grad_bytes: float, gpus: int, nodes: int, link: Link,
             network: Link | None = None, tensors: float | None = None, host: Host = HOST,
             spread: float = SPREAD) -> Step:
    """DDP: the one-GPU step at the per-GPU batch (its low, point and high figures), plus the all-reduce of
    `grad_bytes` of gradients in buckets, over `link` inside a node and `network` between `nodes` nodes, and the
    reducer's host work for `tensors` parameter tensors (`host`); the interval widened by `spread`."""
    return _step(compute, grad_bytes, 2.0, gpus, nodes, link, network, tensors, host, spread)


def fsdp_step(compute: tuple[float, float, float], param_bytes: float, gpus: int, nodes: int, link: Link,
              network: Link | None = None, tensors: float | None = None, host: Host = HOST,
              spread: float = SPREAD) -> Step:
    """FSDP (full sharding): the one-GPU step at the per-GPU batch, plus two all-gathers of the parameters (forward
    and backward) and a reduce-scatter of the gradients, 3 (W-1)/W of `param_bytes` through each GPU, in buckets;
    its host work a tensor and a bucket taken as DDP's."""
    return _step(compute, param_bytes, 3.0, gpus, nodes, link, network, tensors, host, spread)


def efficiency(one_epoch_s: float, gpus: int, epoch_s: float) -> float:
    """Samples a second on `gpus` GPUs over `gpus` x one GPU's: one GPU's time per epoch over gpus x this one's."""
    return one_epoch_s / (gpus * epoch_s)


def ddp_bytes(needs_bytes: float, grad_bytes: float) -> float:
    """A DDP rank's memory: one GPU's at the per-GPU batch, plus its buckets, a copy of the gradients."""
    return needs_bytes + grad_bytes


def fsdp_bytes(needs_bytes: float, n_params: float, ranks: int) -> float:
    """An FSDP rank's memory: one GPU's at the per-GPU batch less the STATE_BYTES a parameter that are split
    `ranks` ways (weights, gradients, Adam's moments), plus its share of them."""
    state = STATE_BYTES * n_params
    return max(needs_bytes - state, 0.0) + state / ranks


def fsdp_gpus(needs_bytes: float, n_params: float, memory_bytes: float, most: int = 64) -> int | None:
    """The fewest GPUs (a power of two, up to `most`) whose memory holds an FSDP rank (`fsdp_bytes`); None where no
    such count does: the activations of the per-GPU batch alone do not fit."""
    ranks = 1
    while ranks <= most:
        if fsdp_bytes(needs_bytes, n_params, ranks) <= memory_bytes:
            return ranks
        ranks *= 2
    return None

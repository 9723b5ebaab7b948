"""The host's cost of each kind of op a training step dispatches: what the per-class model's host term is made of
(docs/model.md, "The host's side"), measured op by op where the model fits it on whole steps.

    python studies/hostbench.py --out hostbench.json                  # on a CUDA machine: about a minute
    python studies/hostbench.py --device cpu --smoke --out /tmp/h.json   # the same cases, tiny, on the CPU

Every case runs on tiny tensors (8 x 8), so that a kernel is done before the host has dispatched the next and the
time is the host's. A case is timed in blocks: the block's own preparation (a graph to run backward over, a
gradient for the optimiser) untimed, then the device synchronised, the calls, the device synchronised again; the
figure is the median over `--repeats` warm blocks (41) of the block's time over its calls, as many as fill
BLOCK_S. A case of two sizes (a chain of n
backward nodes, an optimiser over n parameter tensors, a loop of n iterations) is timed at both and split into a
cost per unit (the slope) and a fixed cost (what is left at zero units). Each case also says the aten ops one unit
dispatches as trainables/costs.py counts a step's (views aside), and on a GPU the kernels torch.profiler sees it
launch, counted after every timing so that the profiler's callbacks are in no figure. It needs torch alone.

Cases (`CASES`): an op recording autograd and the same op without; nn.Linear called as a module, trainable and
frozen, against F.linear; autocast's bf16 Linear over trainable weights (their casts cached for the autocast region)
and over frozen ones (cast at every call); a backward node run by autograd's engine; an optimiser's step per
parameter tensor (Adam, AdamW, SGD with momentum; foreach as torch chooses, and foreach=False); zero_grad; a Python
loop of tiny ops (a scan written as a loop); and a whole step of a small MLP per layer, which the others should add
up to.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

SIZE = 8  # every tensor's side: 8 x 8 floats, a kernel of a few microseconds at most
BLOCK_S = 0.005  # s: a timed block's calls fill about this, so that the clock's and the syncs' cost is a small part


@dataclass(frozen=True)
class Case:
    """One thing to time: `make(device, n)` returns a preparation, run untimed before each block, which returns the
    call the block times `calls` times (1 where each call needs a fresh preparation: a backward)."""

    name: str
    unit: str  # what one unit is: an op, a call, a backward node, a parameter tensor, an iteration, a layer
    sizes: tuple[int, ...]  # units per call: one size, or two for a slope and a fixed cost
    make: Callable[[torch.device, int], Callable[[], Callable[[], object]]]
    once: bool = False  # one call per block


def _t(device, grad=False, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(SIZE, SIZE, device=device, dtype=dtype, requires_grad=grad)


def _same(call: Callable[[], object]) -> Callable[[], Callable[[], object]]:
    return lambda: call


def forward_op(grad: bool):
    def make(device, n):
        a, b = _t(device, grad), _t(device)
        return _same(lambda: torch.mul(a, b))
    return make


def linear(module: bool, trainable: bool):
    def make(device, n):
        layer = nn.Linear(SIZE, SIZE, device=device).requires_grad_(trainable)
        x = _t(device)
        if module:
            return _same(lambda: layer(x))
        return _same(lambda: F.linear(x, layer.weight, layer.bias))
    return make


def autocast_linear(trainable: bool):
    """n calls of a Linear in one bf16 autocast region: autocast caches its casts of leaf tensors that require grad
    for the region, and casts a frozen weight and bias again at every call."""
    def make(device, n):
        layer, x = nn.Linear(SIZE, SIZE, device=device).requires_grad_(trainable), _t(device)

        def call():
            with torch.autocast(device.type, dtype=torch.bfloat16):
                for _ in range(n):
                    layer(x)
        return _same(call)
    return make


def backward_chain(device, n):
    """A chain of n element-wise ops recorded by autograd; the block times its backward alone."""
    x, w = _t(device, True), _t(device)

    def prepare():
        y = x
        for _ in range(n):
            y = y * w
        loss = y.sum()
        return lambda: loss.backward()
    return prepare


def optimiser(kind: str, foreach: bool | None):
    def make(device, n):
        params = [_t(device, True) for _ in range(n)]
        for p in params:
            p.grad = torch.randn_like(p)
        opt = {"Adam": lambda: torch.optim.Adam(params, lr=1e-3, foreach=foreach),
               "AdamW": lambda: torch.optim.AdamW(params, lr=1e-3, foreach=foreach),
               "SGD": lambda: torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)}[kind]()
        return _same(opt.step)
    return make


def zero_grad(device, n):
    params = [_t(device, True) for _ in range(n)]
    opt = torch.optim.SGD(params, lr=1e-3)
    grads = [torch.randn_like(p) for p in params]

    def prepare():
        for p, g in zip(params, grads):
            p.grad = g
        return lambda: opt.zero_grad(set_to_none=True)
    return prepare


def python_loop(device, n):
    """A scan written as a Python loop, as a user writes one: h = h * a[t] + b[t], every tensor recording autograd."""
    a, b = torch.randn(n, SIZE, SIZE, device=device, requires_grad=True), torch.randn(n, SIZE, SIZE, device=device)
    h0 = _t(device)

    def call():
        h = h0
        for t in range(n):
            h = h * a[t] + b[t]
        return h
    return _same(call)


def mlp_step(device, n):
    """One training step of an MLP of n Linear + ReLU layers: zero_grad, forward, MSE loss, backward, Adam's step."""
    model = nn.Sequential(*[m for _ in range(n) for m in (nn.Linear(SIZE, SIZE), nn.ReLU())]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = _t(device), _t(device)

    def step():
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        opt.step()
    return _same(step)


CASES = (
    Case("forward op, autograd recording", "op", (1,), forward_op(True)),
    Case("forward op, no autograd (frozen, no_grad)", "op", (1,), forward_op(False)),
    Case("F.linear, trainable weight", "call", (1,), linear(False, True)),
    Case("nn.Linear call, trainable", "call", (1,), linear(True, True)),
    Case("nn.Linear call, frozen", "call", (1,), linear(True, False)),
    Case("bf16 autocast nn.Linear, trainable", "call", (4, 32), autocast_linear(True)),
    Case("bf16 autocast nn.Linear, frozen", "call", (4, 32), autocast_linear(False)),
    Case("backward node (autograd engine)", "node", (16, 128), backward_chain, once=True),
    *(Case(f"{k} step, foreach {'default' if f is None else f}", "param tensor", (4, 64), optimiser(k, f))
      for k in ("Adam", "AdamW", "SGD") for f in (None, False)),
    Case("zero_grad(set_to_none)", "param tensor", (4, 64), zero_grad, once=True),
    Case("Python loop: h = h * a[t] + b[t]", "iteration", (16, 128), python_loop),
    Case("MLP training step (Adam)", "layer", (2, 16), mlp_step),
)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def block_s(prepare: Callable[[], Callable[[], object]], calls: int, device: torch.device) -> float:
    """Seconds a call of one block: its preparation untimed, the device synchronised on both sides."""
    call = prepare()
    _sync(device)
    start = time.perf_counter()
    for _ in range(calls):
        call()
    _sync(device)
    return (time.perf_counter() - start) / calls


def call_s(prepare, most: int, repeats: int, warmup: int, device: torch.device) -> tuple[float, float, float, int]:
    """Median, 10th and 90th percentile seconds of a call over `repeats` blocks after `warmup`, and the calls a block
    made: as many as fill BLOCK_S, at most `most` (1: a call that needs a fresh preparation)."""
    for _ in range(warmup):
        block_s(prepare, 1, device)
    one = statistics.median(block_s(prepare, 1, device) for _ in range(3))
    calls = max(1, min(most, math.ceil(BLOCK_S / max(one, 1e-9))))
    gc.collect()
    times = sorted(block_s(prepare, calls, device) for _ in range(repeats))
    return statistics.median(times), times[len(times) // 10], times[(len(times) * 9) // 10], calls


class Ops(TorchDispatchMode):
    """Counts the aten ops dispatched that are not views: what trainables/costs.py's Traffic counts of a step
    (tests/test_hostbench.py checks the two agree), kept here so that the study needs torch alone."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += not func.is_view
        return func(*args, **(kwargs or {}))


def ops_of(prepare) -> int:
    """Aten ops one call dispatches, views aside (`Ops`)."""
    call = prepare()
    with Ops() as counted:
        call()
    return counted.ops


# CUDA runtime and driver calls that launch a kernel (torch.profiler's names; trainables/costs.py LAUNCH_EVENTS)
LAUNCH_EVENTS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                 "cudaLaunchCooperativeKernel")


def launches(call: Callable[[], object]) -> int:
    """Kernels one call launches, from torch.profiler's CUDA runtime events; CUPTI torn down after (docs/parity.md)."""
    os.environ.setdefault("TEARDOWN_CUPTI", "1")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return sum(1 for event in prof.events() if event.name in LAUNCH_EVENTS)


def _per_unit(sizes: tuple[int, ...], values: Sequence[float]) -> tuple[float, float]:
    """(per unit, fixed): the slope between two sizes and what is left at zero, or value over units and 0."""
    if len(sizes) == 1:
        return values[0] / sizes[0], 0.0
    (n1, n2), (v1, v2) = sizes, values
    slope = (v2 - v1) / (n2 - n1)
    return slope, v1 - slope * n1


def measure(case: Case, device: torch.device, calls: int, repeats: int, warmup: int) -> dict:
    """One case's figures: seconds per unit and fixed, with the spread of the blocks, and ops per unit."""
    prepares = [case.make(device, n) for n in case.sizes]
    timed = [call_s(p, 1 if case.once else calls, repeats, warmup, device) for p in prepares]
    per, fixed = _per_unit(case.sizes, [t[0] for t in timed])
    low, _ = _per_unit(case.sizes, [t[1] for t in timed])
    high, _ = _per_unit(case.sizes, [t[2] for t in timed])
    ops, ops_fixed = _per_unit(case.sizes, [ops_of(p) for p in prepares])
    return {"case": case.name, "unit": case.unit, "sizes": list(case.sizes), "us_per_unit": 1e6 * per,
            "us_per_unit_p10": 1e6 * low, "us_per_unit_p90": 1e6 * high, "us_fixed": 1e6 * fixed,
            "ops_per_unit": ops, "ops_fixed": ops_fixed, "us_per_op": 1e6 * per / ops if ops > 0 else None,
            "us_per_call": [1e6 * t[0] for t in timed], "calls_per_block": [t[3] for t in timed]}


def kernels(case: Case, device: torch.device) -> tuple[float, float]:
    """Kernels per unit and fixed a call launches on a GPU (`launches`)."""
    return _per_unit(case.sizes, [launches(case.make(device, n)()) for n in case.sizes])


def environment(device: torch.device) -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() \
        else platform.processor()
    return {"device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu,
            "cpu_model": cpu, "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda, "python": platform.python_version(),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def render(found: list[dict]) -> str:
    lines = [f"{'case':46s} {'unit':>12s} {'us/unit':>8s} {'p10-p90':>13s} {'fixed us':>9s} {'ops/unit':>8s} "
             f"{'us/op':>6s} {'kernels':>7s}"]
    for r in found:
        per_op = f"{r['us_per_op']:6.1f}" if r["us_per_op"] is not None else f"{'':>6s}"
        k = f"{r['kernels_per_unit']:7.2f}" if r.get("kernels_per_unit") is not None else f"{'':>7s}"
        fixed = f"{r['us_fixed']:9.1f}" if len(r["sizes"]) > 1 else f"{'':>9s}"
        lines.append(f"{r['case']:46s} {r['unit']:>12s} {r['us_per_unit']:8.2f} "
                     f"{r['us_per_unit_p10']:6.1f}-{r['us_per_unit_p90']:<6.1f} {fixed} {r['ops_per_unit']:8.2f} {per_op} {k}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python studies/hostbench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file for the figures and the environment")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--calls", type=int, default=200,
                        help=f"calls per timed block at most; fewer where they fill {BLOCK_S * 1e3:.0f} ms (default 200)")
    parser.add_argument("--repeats", type=int, default=41, help="timed blocks per case and size (default 41)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed blocks before them (default 5)")
    parser.add_argument("--smoke", action="store_true", help="3 calls, 3 blocks, 1 warm-up: a check that it runs")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("hostbench: no CUDA device here; pass --device cpu to time the CPU's dispatch", file=sys.stderr)
        return 2
    calls, repeats, warmup = (3, 3, 1) if args.smoke else (args.calls, args.repeats, args.warmup)
    start = time.perf_counter()
    found = [measure(case, device, calls, repeats, warmup) for case in CASES]
    if device.type == "cuda":  # after every timing: the profiler's callbacks in no figure
        for case, r in zip(CASES, found):
            r["kernels_per_unit"], r["kernels_fixed"] = kernels(case, device)
    print(render(found))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"environment": environment(device), "cases": found}, indent=1))
    print(f"{len(found)} cases in {time.perf_counter() - start:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

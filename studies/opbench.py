"""The operator study: the GPU time of each op class over thousands of shapes, the per-op model's own data.

    python studies/opbench.py --out results/ops-h100     # on a GPU; writes OUT/ops.parquet, case by case

Each case is one layer's work as a model runs it (a matrix product, a convolution forward and backward, a cuDNN
LSTM forward and backward, a norm, an element-wise op, an optimiser's step over a list of parameters), at one
shape and one precision (trainables/precision.py: `default`, `fp32`, `tf32`, `bf16`, `fp16`, autocast as a
user writes it). Per case and op class it records:

- what `trainables/costs.py count` counts of it (FLOPs, bytes, ops), summed over its ops of each kind (`op_kind`:
  the class, a grouped convolution told apart): what a laptop's count of a user's step gives the per-op model
  (analysis/model/perclass.py) for each op;
- the GPU's time: the kernels torch.profiler records under the class's aten ops, summed, per call of the case
  (the median of REPEATS profiled sessions of CALLS calls each, after a warm-up; their spread kept);
- the host's: the wall time of one call in a loop of CALLS calls with the device synchronised around it, which is
  the GPU's time for a large op and the host's dispatch for a small one.

Rows go to Parquet after every case group, so a run cut short keeps what it measured; `--budget` stops it in time.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

from crossover.schema import OPS_PER_STEP
from crossover.trainables.costs import count, op_class
from crossover.trainables.precision import autocast, set_tf32

REPEATS, CALLS, WARMUP = 3, 5, 3
PRECISIONS = ("default", "fp32", "tf32", "bf16", "fp16")


def _param(*shape, grad=True) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", requires_grad=grad)


# Each case: its op's name, its shape's parameters, and a call that runs it once (its result, if any, is dropped).
# Called with no arguments; typed `...`, as each lambda binds its loop's tensors as defaults (a=a), which mypy cannot
# infer against a callable of none.
def matmuls() -> Iterator[tuple[str, dict, Callable[..., object]]]:
    """Forward products (a backward's are products of the same kind): mm over M x K x N, and attention's bmm."""
    sizes = (32, 128, 512, 2048, 8192)
    for m, k, n in itertools.product(sizes, (64, 256, 1024, 4096), (64, 256, 1024, 4096, 30522)):
        a, b = _param(m, k, grad=False), _param(k, n, grad=False)
        yield "mm", {"m": m, "k": k, "n": n}, lambda a=a, b=b: torch.mm(a, b)
    for batch, seq, dim in itertools.product((96, 384), (128, 512, 1024), (64,)):
        q, kt = _param(batch, seq, dim, grad=False), _param(batch, dim, seq, grad=False)
        yield "bmm", {"batch": batch, "seq": seq, "dim": dim}, lambda q=q, kt=kt: torch.bmm(q, kt)


def _backward(forward: Callable[..., torch.Tensor]) -> Callable[[], None]:
    def step():
        out = forward()
        out.backward(torch.ones_like(out))
    return step


def attention() -> Iterator[tuple[str, dict, Callable[..., object]]]:
    for batch, heads, seq in itertools.product((8, 32), (12, 16), (128, 512, 1024)):
        q, k, v = (_param(batch, heads, seq, 64) for _ in range(3))
        yield "sdpa", {"batch": batch, "heads": heads, "seq": seq, "dim": 64}, _backward(
            lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True))


# (in channels, size, out channels, kernel, stride, groups): ResNet's, a stem, CIFAR's, depthwise nets'
CONVS = ((3, 224, 64, 7, 2, 1), (64, 56, 64, 3, 1, 1), (64, 56, 256, 1, 1, 1), (256, 56, 128, 1, 1, 1),
         (128, 28, 128, 3, 1, 1), (256, 14, 256, 3, 1, 1), (512, 7, 512, 3, 1, 1), (1024, 14, 256, 1, 1, 1),
         (16, 32, 16, 3, 1, 1), (64, 32, 64, 3, 1, 1), (128, 16, 128, 3, 1, 1),
         (32, 112, 32, 3, 1, 32), (96, 56, 96, 3, 2, 96), (384, 14, 384, 3, 1, 384), (64, 32, 64, 3, 1, 64))


def convolutions() -> Iterator[tuple[str, dict, Callable[..., object]]]:
    for (c, size, k, kernel, stride, groups), batch in itertools.product(CONVS, (8, 32, 128)):
        x, w = _param(batch, c, size, size), _param(k, c // groups, kernel, kernel)
        yield "conv2d", {"batch": batch, "in": c, "size": size, "out": k, "kernel": kernel, "stride": stride,
                         "groups": groups}, _backward(
            lambda x=x, w=w, s=stride, g=groups, p=kernel // 2: F.conv2d(x, w, stride=s, padding=p, groups=g))


def recurrent() -> Iterator[tuple[str, dict, Callable[..., object]]]:
    for kind, (inputs, hidden, layers, seq, batch) in itertools.product(
            ("LSTM", "GRU"), ((128, 256, 1, 64, 32), (128, 256, 2, 64, 128), (512, 1024, 1, 32, 64),
                              (80, 512, 3, 200, 32), (256, 512, 2, 128, 128), (64, 128, 1, 16, 256))):
        net = getattr(torch.nn, kind)(inputs, hidden, layers, batch_first=True).cuda()
        x = _param(batch, seq, inputs)
        yield kind.lower(), {"input": inputs, "hidden": hidden, "layers": layers, "seq": seq, "batch": batch}, \
            _backward(lambda net=net, x=x: net(x)[0])


def norms() -> Iterator[tuple[str, dict, Callable[..., object]]]:
    for rows, dim in itertools.product((256, 4096, 32768), (256, 768, 1024, 4096)):
        x, w, b = _param(rows, dim), _param(dim), _param(dim)
        yield "layer_norm", {"rows": rows, "dim": dim}, _backward(
            lambda x=x, w=w, b=b: F.layer_norm(x, x.shape[-1:], w, b))
    for batch, c, size in ((32, 64, 56), (32, 256, 14), (128, 64, 32), (8, 512, 7), (128, 16, 32), (32, 64, 112)):
        bn = torch.nn.BatchNorm2d(c).cuda()
        x = _param(batch, c, size, size)
        yield "batch_norm", {"batch": batch, "channels": c, "size": size}, _backward(lambda bn=bn, x=x: bn(x))


def elementwise() -> Iterator[tuple[str, dict, Callable[..., object]]]:
    for n in (2 ** 10, 2 ** 14, 2 ** 17, 2 ** 20, 2 ** 23, 2 ** 26):
        x, y = _param(n, grad=False), _param(n, grad=False)
        yield "add", {"n": n}, lambda x=x, y=y: torch.add(x, y)
        g = _param(n)  # gelu's own input, with a gradient
        yield "gelu", {"n": n}, _backward(lambda g=g: F.gelu(g))
        yield "relu", {"n": n}, lambda x=x: torch.relu(x)
        yield "dropout", {"n": n}, lambda x=x: F.dropout(x, 0.1)
    for rows, vocab in ((256, 1000), (4096, 30522), (8192, 50257), (32, 10)):
        logits, target = _param(rows, vocab), torch.randint(vocab, (rows,), device="cuda")
        yield "cross_entropy", {"rows": rows, "classes": vocab}, _backward(
            lambda logits=logits, target=target: F.cross_entropy(logits, target))
    for rows, vocab, dim in ((4096, 30522, 768), (16384, 50257, 1024), (2048, 1000, 128)):
        table, index = _param(vocab, dim), torch.randint(vocab, (rows,), device="cuda")
        yield "embedding", {"rows": rows, "vocab": vocab, "dim": dim}, _backward(
            lambda table=table, index=index: F.embedding(index, table))


def optimisers() -> Iterator[tuple[str, dict, Callable[..., object]]]:
    for total, tensors, kind in itertools.product((10 ** 5, 10 ** 6, 10 ** 7, 10 ** 8), (8, 64, 256), ("Adam", "SGD")):
        params = [torch.nn.Parameter(torch.randn(total // tensors, device="cuda")) for _ in range(tensors)]
        for p in params:
            p.grad = torch.randn_like(p)
        opt = getattr(torch.optim, kind)(params, lr=1e-4, **({"momentum": 0.9} if kind == "SGD" else {}))
        yield kind.lower(), {"params": total, "tensors": tensors}, opt.step


GROUPS = {"matmul": matmuls, "attention": attention, "conv": convolutions, "rnn": recurrent, "norm": norms,
          "elementwise": elementwise, "optimizer": optimisers}


def _kernel_s(call: Callable[[], object], in_optimizer: bool, as_kind: dict) -> tuple[Counter, Counter]:
    """Seconds of GPU kernels per call, and kernels per call, by op class of the aten op that launched them (every
    kernel of an optimiser's step is class optimizer, as `count` has it), renamed by `as_kind`."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            call()
        torch.cuda.synchronize()
    seconds: Counter[str] = Counter()
    kernels: Counter[str] = Counter()
    for e in prof.events():
        if e.name.startswith("aten::") and e.self_device_time_total > 0:
            c = "optimizer" if in_optimizer else op_class(e.name.removeprefix("aten::"))
            c = as_kind.get(c, c)
            seconds[c] += e.self_device_time_total * 1e-6 / CALLS
            # typeshed's Counter holds ints; Python's holds any number (its docs), as this fraction of a call's
            kernels[c] += len(e.kernels) / CALLS  # type: ignore[assignment]
    return seconds, kernels


def _wall_s(call: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / CALLS


def measure(name: str, params: dict, call: Callable[[], object], precision: str, group: str) -> list[dict]:
    """One case's rows, one per op kind it dispatched or launched kernels under."""
    set_tf32(precision)

    def run():
        with autocast(precision, "cuda"):
            call()
    for _ in range(WARMUP):
        run()
    kinds: dict[str, list[int]] = {}  # the per-op model's class (trainables/costs.py op_kind) -> FLOPs, bytes, ops of the case
    for kind, _, flops, moved, launches, times in json.loads(count(run, on_gpu=False)[OPS_PER_STEP]):
        kinds[kind] = [a + b * times for a, b in zip(kinds.get(kind, (0, 0, 0)), (flops, moved, launches))]
    # the profiler names a kernel's aten op, not its kind: a case's convolutions are all grouped or none
    as_kind = {"conv": "conv_grouped"} if "conv_grouped" in kinds else {}
    profiled = [_kernel_s(run, group == "optimizer", as_kind) for _ in range(REPEATS)]
    wall = sorted(_wall_s(run) for _ in range(REPEATS))[REPEATS // 2]
    rows = []
    for kind in sorted(set(kinds) | {k for p in profiled for k in p[0]}):
        times = sorted(p[0][kind] for p in profiled)
        flops, moved, launches = kinds.get(kind, (0, 0, 0))
        rows.append({"case": name, "params": json.dumps(params), "precision": precision, "op_class": kind,
                     "flops": flops, "bytes": moved, "ops": launches, "kernels": profiled[0][1][kind],
                     "gpu_s": times[REPEATS // 2], "gpu_s_min": times[0], "gpu_s_max": times[-1], "wall_s": wall})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python studies/opbench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for ops.parquet")
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"case groups, of {','.join(GROUPS)}")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="precisions to run each case at")
    parser.add_argument("--budget", type=float, default=540,
                        help="seconds in all, shared evenly by the groups: a group's cases stop at its share")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("opbench: no CUDA device here; it measures a GPU's kernels", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    env = {"device_name": torch.cuda.get_device_name(), "torch_version": torch.__version__,
           "cuda_version": torch.version.cuda, "measured_at": pd.Timestamp.now(tz="UTC").isoformat()}
    groups, rows = args.groups.split(","), []
    start = time.monotonic()
    for i, group in enumerate(groups):
        stop = start + args.budget * (i + 1) / len(groups)
        for name, params, call in GROUPS[group]():
            for precision in args.precisions.split(","):
                if time.monotonic() > stop:
                    break
                try:
                    rows += [{**env, "group": group, **r} for r in measure(name, params, call, precision, group)]
                except (RuntimeError, torch.OutOfMemoryError) as e:  # a shape a precision cannot run
                    print(f"{name} {params} {precision}: {str(e).splitlines()[0]}", file=sys.stderr)
            torch.cuda.empty_cache()
        pd.DataFrame(rows).to_parquet(args.out / "ops.parquet", index=False)
        print(f"{group}: {len(rows)} rows so far, {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

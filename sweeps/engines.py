"""How far the engines and fusion move the crossover: engine x workload x size on a GPU, and fused trials.

    python sweeps/engines.py                              # on a machine with a GPU
    python sweeps/engines.py --workloads disc,peaks --engines eager,graph
    python sweeps/engines.py --smoke

Sweeps, one after another, rows in OUT/<name>-<part>/ like any sweep:
    cpu     the CPU baseline (eager), every size: the arm the GPU engines cross
    gpu     every size on one GPU with each engine (eager, graph, compile)
    alone   one small trial, repeated with as many seeds as fused has;  fused: the same trials as one batched model
On a Ray cluster without a GPU only the CPU baseline runs (it says so), so the study's path can be
checked on a laptop. At the end it prints (analysis/engines.py) the speed-up over eager per engine,
fused trials per hour against one at a time, and the crossover against the CPU per engine.
"""

from __future__ import annotations

import sys

from analysis.engines import render
from sweeps import cli, runner
from sweeps.space import Space
from trainables.config import ENGINES

# Sizes where every batch is full, as the graph engine requires (dataset_size a multiple of batch_size).
GRIDS = {
    "default": {
        "disc": {"depth": list(range(2, 13)), "epochs": [20]},
        "peaks": {"dataset_size": [400, 2500, 10000, 40000, 160000], "epochs": [200]},
        "tabular": {"dataset_size": [10240], "width": [64, 256, 1024], "epochs": [4]},
        "lenet": {"dataset_size": [1400], "batch_size": [25, 50, 100], "epochs": [4]},
        "mnist_cnn": {"dataset_size": [1400], "width": [1, 2, 4, 8], "epochs": [4]},
    },
    "smoke": {
        "disc": {"depth": [2, 4], "epochs": [3]},
        "peaks": {"dataset_size": [400], "epochs": [5]},
    },
}
FUSED = {"default": ({"peaks": {"dataset_size": [2500], "epochs": [200]}}, 64),  # seed 003's trial, 64 seeds
         "smoke": ({"peaks": {"dataset_size": [400], "epochs": [5]}}, 4)}


def spaces(args, grid: str, gpu: bool = True) -> list[Space]:
    """The study's sweeps in order; without a `gpu`, the CPU baseline alone."""
    grids = {w: g for w, g in GRIDS[grid].items() if w in args.workloads.split(",")}
    engines = args.engines.split(",")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown or not grids:
        raise ValueError(f"--engines must be among {list(ENGINES)} and --workloads among {sorted(GRIDS[grid])}; "
                         f"got {args.engines!r}, {args.workloads!r}")
    out = [Space(f"{args.name}-cpu", grids, ("cpu",), cpu_threads=args.cpu_threads)]
    if not gpu:
        return out
    out += [Space(f"{args.name}-gpu-{engine}", grids, ("cuda",), fixed={"engine": engine}) for engine in engines]
    fused, k = FUSED[grid]
    out += [Space(f"{args.name}-alone", fused, ("cuda",), repeats=k),  # like with like: the same trials
            Space(f"{args.name}-fused", fused, ("cuda",), repeats=k, fuse="auto")]
    return out


def main(argv=None) -> int:
    p = cli.parser(__doc__, "engines", "prefix of the sweeps' names")
    p.add_argument("--workloads", default=",".join(GRIDS["default"]), help="comma-separated workloads")
    p.add_argument("--engines", default=",".join(ENGINES), help="comma-separated GPU engines")
    p.add_argument("--cpu-threads", type=cli.at_least(1), default=None, help="threads of the CPU baseline (default: all)")
    args = p.parse_args(argv)

    runner.connect(args.address)
    types = runner.node_types()
    args.cpu_threads = args.cpu_threads or runner.node_cpus(types)
    gpu = "cuda" in runner.cluster_devices(types)
    if not gpu:
        print("no GPU in the Ray cluster: the CPU baseline only (the GPU engines and fused trials need one)")
    return runner.run_studies(lambda: spaces(args, "smoke" if args.smoke else "default", gpu), args.out, render)


if __name__ == "__main__":
    sys.exit(main())

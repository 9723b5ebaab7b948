"""What a lower precision buys and what it costs: time per epoch beside the loss and accuracy reached.

    python sweeps/precision.py                  # every precision each device of the cluster takes
    python sweeps/precision.py --smoke          # tiny sizes, to check the path end to end
    python sweeps/precision.py --workloads disc --repeats 1
    python sweeps/precision.py --workload path/to/job.py:workload    # your workload, its 'default' grid

One sweep per device and precision, one after another, rows in OUT/<name>-<device>-<precision>/:
the CPU at PyTorch's default and bf16 (autocast), a GPU (where the cluster has one) at the default,
fp32 (strict), tf32, bf16 and fp16 (trainables/precision.py). Your workload (--workload, beside or instead of --workloads) joins every
one of them with its own grid (Workload.grid: 'default', or 'smoke' with --smoke). Every trial runs
exactly its epochs (min_timed_s 0: a faster one is not timed for longer), so the loss it ends at
compares. At the end it prints (analysis/engines.py `precisions`), per workload, size and device,
each precision's median time per epoch, final loss and test accuracy, its speed-up over the default
and its loss against the default's: a faster epoch that learns worse shows as a speed-up above 1 beside a loss
ratio above 1.
"""

from __future__ import annotations

import sys

from crossover.analysis.engines import render
from crossover.sweeps import cli, plan, runner
from crossover.sweeps.space import Space

# Per device kind, the precisions it takes (trainables/precision.py refuses the rest by name).
PRECISIONS = {"cpu": ("default", "bf16"), "cuda": ("default", "fp32", "tf32", "bf16", "fp16")}
GRIDS = {
    "default": {
        "disc": {"depth": [6, 10], "epochs": [20]},
        "mnist_cnn": {"width": [1, 4], "dataset_size": [1437], "epochs": [6]},
        "transformer": {"width": [64, 256], "dataset_size": [1024], "epochs": [4]},
    },
    "smoke": {
        "disc": {"depth": [4], "epochs": [3]},
        "mnist_cnn": {"width": [1], "dataset_size": [1437], "epochs": [2]},
        "transformer": {"width": [32], "context": [32], "dataset_size": [256], "epochs": [2]},
    },
}


def spaces(args, grid: str, devices: tuple) -> list[Space]:
    """A sweep per device and precision that device takes, of the built-ins asked for and your --workload."""
    names = cli.builtins(args, GRIDS[grid])
    grids = {**{w: GRIDS[grid][w] for w in names}, **plan.user_grids(args, grid)}
    return [Space(f"{args.name}-{device}-{precision}", grids, (device,), cpu_threads=args.cpu_threads,
                  repeats=args.repeats, fixed={"precision": precision, "min_timed_s": 0}, params=dict(args.param),
                  timeout_s=args.trial_timeout)
            for device in devices for precision in PRECISIONS[device]]


def main(argv=None) -> int:
    p = cli.parser(__doc__, "precision", "prefix of the sweeps' names")
    p.add_argument("--workloads", default=None,
                   help=f"comma-separated built-in workloads of {list(GRIDS['default'])}; default: all of them, or "
                        "none where --workload names your own")
    p.add_argument("--cpu-threads", type=cli.at_least(1), default=None, help="threads of the CPU trials (default: all)")
    p.add_argument("--repeats", type=cli.at_least(1), default=3, help="independent runs (seeds) per point")
    args = p.parse_args(argv)
    return runner.exit_status(lambda: study(args))


def study(args) -> int:
    grid = "smoke" if args.smoke else "default"
    plan.user_grids(args, grid)  # your workload's module declared before Ray starts, so Ray ships it to its workers
    runner.connect(args.address)
    types = runner.node_types()
    args.cpu_threads = args.cpu_threads or runner.node_cpus(types)
    devices = runner.cluster_devices(types)
    return runner.run_studies(lambda: spaces(args, grid, devices), args.out, render)


if __name__ == "__main__":
    sys.exit(main())

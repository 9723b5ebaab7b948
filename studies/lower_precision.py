"""What a lower precision buys and what it costs: time per epoch beside the loss and accuracy reached.

    python studies/lower_precision.py                  # every precision each device of the cluster takes
    python studies/lower_precision.py --smoke          # tiny sizes, to check the path end to end
    python studies/lower_precision.py --workloads disc --repeats 1
    python studies/lower_precision.py --workload path/to/job.py:workload    # your workload, its 'default' grid

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
from dataclasses import dataclass
from pathlib import Path

from crossover.analysis.engines import render
from crossover.sweeps import cli, runner
from crossover.sweeps.cluster import cluster_devices, connected, threads
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.sweeps.status import exit_status
from crossover.trainables.workloads import with_grid

# Per device kind, the precisions it takes (trainables/precision.py refuses the rest by name).
PRECISIONS = {"cpu": ("default", "bf16"), "cuda": ("default", "fp32", "tf32", "bf16", "fp16")}
# The built-ins and their sizes, by grid: those that declare the study's grids (trainables/workloads.py).
GRIDS = {grid: with_grid(f"precision-{grid}") for grid in ("default", "smoke")}


def spaces(flags: "Flags", planner: Planner, grid: str, devices: tuple) -> list[Space]:
    """A sweep per device and precision that device takes, of the built-ins asked for and your --workload (planned
    by `planner`, which every Space gets)."""
    names = cli.builtins(flags, GRIDS[grid])
    grids = {**{w: GRIDS[grid][w] for w in names}, **planner.user_grids(flags, grid)}
    return [Space(f"{flags.name}-{device}-{precision}", grids, (device,), cpu_threads=threads(flags),
                  repeats=flags.repeats, fixed={"precision": precision, "min_timed_s": 0}, params=dict(flags.param),
                  timeout_s=flags.trial_timeout, planner=planner)
            for device in devices for precision in PRECISIONS[device]]


@dataclass(frozen=True)
class Flags:
    """The command line, parsed once (`parse_args`); named as the shared flags are (sweeps/cli.py)."""

    out: Path  # results root: the sweeps' rows go to OUT/NAME-<device>-<precision>/
    name: str  # prefix of the sweeps' names
    workloads: str | None  # --workloads as given (comma-separated built-ins; cli.builtins reads it), or None
    workload: list  # your workloads' references (path/to/job.py:ATTR)
    param: list  # (axis, value) of your workloads' own axes
    cpu_threads: int | None  # threads of the CPU trials; None: node_cpus, once Ray is up
    repeats: int  # independent runs (seeds) per point
    smoke: bool
    address: str | None  # a running Ray cluster's, or None: a local one
    trial_timeout: float  # s: a trial's limit
    plan_timeout: float  # s: the limit of the process that plans your workload (sweeps/plan.py)


def parse_args(argv=None) -> Flags:
    p = cli.parser(__doc__, "precision", "prefix of the sweeps' names")
    p.add_argument("--workloads", default=None,
                   help=f"comma-separated built-in workloads of {list(GRIDS['default'])}; default: all of them, or "
                        "none where --workload names your own")
    p.add_argument("--cpu-threads", type=cli.at_least(1), default=None,
                   help="threads of the CPU trials (default: a sweep's)")
    p.add_argument("--repeats", type=cli.at_least(1), default=3, help="independent runs (seeds) per point")
    args = p.parse_args(argv)
    return Flags(args.out, args.name, args.workloads, args.workload, args.param, args.cpu_threads, args.repeats,
                 args.smoke, args.address, args.trial_timeout, args.plan_timeout)


def main(argv=None) -> int:
    flags = parse_args(argv)
    planner = Planner()  # this sweep's planning of your workload, handed to every Space it builds
    return exit_status(lambda: study(flags, planner), planner)


def study(flags: Flags, planner: Planner) -> int:
    grid = "smoke" if flags.smoke else "default"
    planner.user_grids(flags, grid)  # your workload's module declared before Ray starts, so Ray ships it to its workers
    flags, types = connected(flags, planner.registry.shipping)
    devices = cluster_devices(types)
    return runner.run_studies(lambda: spaces(flags, planner, grid, devices), flags.out, render, planner)


if __name__ == "__main__":
    sys.exit(main())

"""How far the engines and fusion move the crossover: engine x workload x size on a GPU, and fused trials.
This runs the study; analysis/engines.py, of the same name a layer down, draws its figures from the rows.

    python studies/engines.py                              # on a machine with a GPU
    python studies/engines.py --workloads disc,peaks --engines eager,graph
    python studies/engines.py --smoke
    python studies/engines.py --workload path/to/job.py:workload    # your workload, its 'default' grid

Sweeps, one after another, rows in OUT/<name>-<part>/ like any sweep:
    cpu                    the CPU baseline (eager), every size: the arm the GPU engines cross
    gpu-ENGINE             every size on one GPU with each engine (eager, graph, compile)
    fused-ENGINE-kK        seed 003's trial at 40,000 points, K = 1 (alone), 8 and 64 members a fused trial,
                           3 fused trials of each, in engines eager, graph and triton (its step one kernel,
                           trainables/mlp_kernel.py)
Your workload (--workload, beside or instead of --workloads) joins the CPU baseline and every GPU
engine with its own grid (Workload.grid: 'default', or 'smoke' with --smoke); an engine that cannot
run that grid (graph replays one static shape: every batch full, dataset_size a multiple of
batch_size) leaves it out of its sweep, saying why. The fused part measures seed 003's trial alone.
On a Ray cluster without a GPU only the CPU baseline runs (it says so), so the study's path can be
checked on a laptop. At the end it prints (analysis/engines.py) the speed-up over eager per engine,
fused trials per hour against one at a time, time per member-epoch per engine and K against the
step's FLOPs at the GPU's peak, and the crossover against the CPU per engine.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from crossover.analysis.engines import render
from crossover.config import ENGINES
from crossover.sweeps import cli, runner
from crossover.sweeps.cluster import cluster_devices, connected, threads
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.sweeps.status import exit_status
from crossover.trainables.devices import parse
from crossover.trainables.fused import FUSED_ENGINES
from crossover.trainables.workloads import with_grid

# The built-ins and their sizes, by grid: those that declare the study's grids (trainables/workloads.py: sizes where
# every batch is full, as the graph engine requires), and the fused part's, with its members per fused trial
# (K = 1 alone).
GRIDS = {grid: with_grid(f"engines-{grid}") for grid in ("default", "smoke")}
FUSED = {grid: (with_grid(f"engines-fused-{grid}"), ks)
         for grid, ks in (("default", (1, 8, 64)), ("smoke", (1, 4)))}
FUSED_RUNS = 3  # fused trials (or trials alone) of each K and engine
GPU_ENGINES = ("eager", "graph", "compile")  # of single trials at every size; 'triton' runs in the fused part


def spaces(flags: "Flags", planner: Planner, grid: str, gpu: bool = True, log=print) -> list[Space]:
    """The study's sweeps in order; without a `gpu`, the CPU baseline alone. Your --workload joins every
    part but the fused one, where its engine can run its grid (`runnable`); `planner` plans it (sweeps/plan.py)."""
    grids = {w: GRIDS[grid][w] for w in cli.builtins(flags, GRIDS[grid])}
    users = planner.user_grids(flags, grid)
    engines = flags.engines.split(",")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown or not (grids or users):
        raise ValueError(f"--engines must be among {list(ENGINES)} and --workloads among {sorted(GRIDS[grid])} (or "
                         f"--workload path/to/job.py:ATTR); got {flags.engines!r}, {flags.workloads!r}")
    params = dict(flags.param)
    out = [Space(f"{flags.name}-cpu", {**grids, **users}, ("cpu",), cpu_threads=threads(flags), params=params,
                 timeout_s=flags.trial_timeout, planner=planner)]
    if not gpu:
        return out
    for engine in (e for e in engines if e in GPU_ENGINES):
        kept = runnable(users, engine, params, log, planner)
        if grids or kept:
            out.append(Space(f"{flags.name}-gpu-{engine}", {**grids, **kept}, ("cuda",), fixed={"engine": engine},
                             params=_declared(params, kept, planner), timeout_s=flags.trial_timeout, planner=planner))
    fused, ks = FUSED[grid]
    if fused.keys() <= grids.keys():  # the fused part's workload among those asked for
        out += [Space(f"{flags.name}-fused-{engine}-k{k}", fused, ("cuda",), repeats=FUSED_RUNS * k,
                      fixed={"engine": engine}, fuse=str(k), timeout_s=flags.trial_timeout)
                for engine in engines if engine in FUSED_ENGINES for k in ks]
    return out


def runnable(users: dict, engine: str, params: dict, log, planner: Planner) -> dict:
    """Of your workloads' grids ({reference: grid}), those `engine` can run on one GPU; each other is left
    out of that engine's sweep, and `log` says why (the config the engine refused, and the axis)."""
    kept = {}
    for ref, grid in users.items():
        try:
            Space(f"gpu-{engine}", {ref: grid}, ("cuda",), fixed={"engine": engine},
                  params=_declared(params, [ref], planner), planner=planner).expand()
        except ValueError as exc:
            log(f"--workload {ref} is left out of engine {engine!r}: {exc}")
        else:
            kept[ref] = grid
    return kept


def _declared(params: dict, refs, planner: Planner) -> dict:
    """The --param values of the axes one of these workloads declares (Space refuses any other)."""
    return {k: v for k, v in params.items() if any(k in planner.spec(ref).params for ref in refs)}


@dataclass(frozen=True)
class Flags:
    """The command line, parsed once (`parse_args`); named as the shared flags are (sweeps/cli.py)."""

    out: Path  # results root: the sweeps' rows go to OUT/NAME-<part>/
    name: str  # prefix of the sweeps' names
    workloads: str | None  # --workloads as given (comma-separated built-ins; cli.builtins reads it), or None
    workload: list  # your workloads' references (path/to/job.py:ATTR)
    param: list  # (axis, value) of your workloads' own axes
    engines: str  # comma-separated GPU engines
    cpu_threads: int | None  # threads of the CPU baseline; None: node_cpus, once Ray is up
    smoke: bool
    address: str | None  # a running Ray cluster's, or None: a local one
    trial_timeout: float  # s: a trial's limit
    plan_timeout: float  # s: the limit of the process that plans your workload (sweeps/plan.py)


def parse_args(argv=None) -> Flags:
    p = cli.parser(__doc__, "engines", "prefix of the sweeps' names")
    p.add_argument("--workloads", default=None,
                   help=f"comma-separated built-in workloads of {list(GRIDS['default'])}; default: all of them, or "
                        "none where --workload names your own")
    p.add_argument("--engines", default=",".join(ENGINES), help="comma-separated GPU engines ('triton': fused peaks only)")
    p.add_argument("--cpu-threads", type=cli.at_least(1), default=None,
                   help="threads of the CPU baseline (default: a sweep's CPU trial's)")
    args = p.parse_args(argv)
    return Flags(args.out, args.name, args.workloads, args.workload, args.param, args.engines, args.cpu_threads,
                 args.smoke, args.address, args.trial_timeout, args.plan_timeout)


def main(argv=None) -> int:
    flags = parse_args(argv)
    planner = Planner()  # this sweep's planning of your workload, handed to every Space it builds
    return exit_status(lambda: study(flags, planner), planner)


def study(flags: Flags, planner: Planner) -> int:
    grid = "smoke" if flags.smoke else "default"
    planner.user_grids(flags, grid)  # your workload's module declared before Ray starts, so Ray ships it to its workers
    flags, types = connected(flags, planner.registry.shipping)
    gpu = any(parse(d).uses_gpu for d in cluster_devices(types))
    if not gpu:
        print("no GPU in the Ray cluster: the CPU baseline only (the GPU engines and fused trials need one)")
    return runner.run_studies(lambda: spaces(flags, planner, grid, gpu), flags.out, render, planner)


if __name__ == "__main__":
    sys.exit(main())

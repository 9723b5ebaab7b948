"""GPU parallelism studies on one host: packed trials per GPU, data-parallel scaling, pipelines.
This runs the studies; analysis/parallel.py, of the same name a layer down, draws their figures from the rows.

    python studies/parallel.py                          # every study, on every GPU of the machine
    python studies/parallel.py --studies ddp,pipe       # those need 2 GPUs or more
    python studies/parallel.py --smoke                  # tiny sizes, to check the path end to end
    python studies/parallel.py --studies ddp --workload path/to/job.py:workload   # yours beside the MLPs

The GPU counts are the powers of two up to the machine's GPUs (1, 2, 4 on four; 1, 2, 4, 8 on eight).
Each study is one or more sweeps (rows in OUT/<name>-<study>...), run one after another so that their
trials never share a GPU with another study's; data-parallel and pipeline trials run one at a time.

    packed   the same small trial, K = 1, 2, 4, 8 per GPU, K x GPUs of them: every GPU filled once
    ddp      a 537M-parameter MLP on ddp:N at the global batch B (strong scaling) and N x B (weak
             scaling: the same work per GPU), one plain GPU beside it; the seed 000 MLP at its own size
             on ddp:N at its own batch, where the all-reduce of every small step dominates; and the
             MLP's width swept on one GPU and on ddp:4 (or the most GPUs below 4): the data-parallel
             crossover
    pipe     the big MLP split over pipe:N (N >= 2) at 1, 4, 8 and 16 micro-batches, against one GPU

Your workload (--workload) joins with its own grid (Workload.grid: 'default', or 'smoke' with
--smoke), one at a time as the others: in ddp on one GPU and on ddp:N (any workload), in pipe on one
GPU and on pipe:N at those micro-batches where it is an nn.Sequential a pipeline can cut
(Workload.pipeline; the rest are left out of pipe, saying so). Not in packed: that study compares
one fixed small trial K to a GPU, and its figures take every packed row as that trial's.

At the end it prints (analysis/parallel.py) the packed throughput per GPU and how evenly Ray placed
the trials, the scaling efficiency per N with intervals over the repeats, the pipeline against one
GPU, and the width past which ddp beats one GPU.
"""

from __future__ import annotations

import sys

from crossover.analysis.parallel import render
from crossover.sweeps import cli, runner
from crossover.sweeps.cluster import connect
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.sweeps.status import exit_status
from crossover.trainables.workloads import with_grid

PACKING = (1, 2, 4, 8)  # trials per GPU
MICRO_BATCHES = (1, 4, 8, 16)
# The data-parallel crossover's widths, with 8,192 from the scaling rows. At 8,192, ddp:4 runs a step
# 3.1 times as fast as one GPU (h200x8 reference); a step of width w costs about 48 w^2 B FLOPs and
# all-reduces 32 w^2 bytes, so by 512 (51 GFLOP, 1 ms on one H200 in fp32) ddp should still win, and
# at 128 both are bound by kernel launches, where ddp only adds its all-reduce: the crossover lies
# in between, at the resolution of a factor of 2.
CROSS_WIDTHS = (128, 256, 512, 1024)
SMOKE_CROSS_WIDTHS = (32,)


def gpu_counts(gpus: int) -> list[int]:
    """1, 2, 4, ... up to `gpus`."""
    return [2**i for i in range(gpus.bit_length()) if 2**i <= gpus]


def over(grids: dict, **axes) -> dict:
    """Each of `grids` ({workload: grid}) with `axes` ({axis: [values]}) laid over its own."""
    return {w: {**grid, **axes} for w, grid in grids.items()}


def spaces(study: str, name: str, gpus: int, smoke: bool, repeats: int, users: dict | None = None,
           params: dict | None = None, timeout_s: float = cli.TRIAL_TIMEOUT_S, log=print,
           planner: Planner | None = None) -> list[Space]:
    """A study's sweeps; `users` ({reference: grid}, Planner.user_grids of `planner`, which their Spaces get) join
    ddp, and pipe where they can be piped, with `params` (--param) and every trial's `timeout_s` (--trial-timeout)."""
    # the built-ins that declare each part's grid (trainables/workloads.py): the large MLP of ddp and pipe, the
    # small trial packed, seed 000's MLP on ddp:N
    big, packed, seeds = (with_grid(f"{part}-{'smoke' if smoke else 'default'}")
                          for part in ("parallel", "packed", "ddp-seed"))
    batch = 256 if smoke else 4096
    counts = gpu_counts(gpus)
    one_at_a_time = {"exclusive": True}
    users = users or {}
    if study == "packed":
        # the same small trial, K per GPU, enough of them to fill every GPU once
        return [Space(f"{name}-packed-{k}", packed, ("cuda" if k == 1 else f"cuda/{k}",), repeats=k * gpus,
                      timeout_s=timeout_s)
                for k in PACKING]
    if study == "ddp":
        if gpus < 1:
            raise ValueError("--studies ddp needs a GPU; this cluster has none")
        cross = max(n for n in counts if n <= 4)
        scaling = [Space(f"{name}-ddp-{n}", over(big, batch_size=sorted({batch, n * batch})),
                         (f"ddp:{n}",) + (("cuda",) if n == 1 else ()), repeats=repeats, fixed=one_at_a_time,
                         timeout_s=timeout_s)
                   for n in counts]
        seed = Space(f"{name}-ddp-seed", seeds,
                     ("cuda",) + tuple(f"ddp:{n}" for n in counts), repeats=repeats, fixed=one_at_a_time,
                     timeout_s=timeout_s)
        widths = SMOKE_CROSS_WIDTHS if smoke else CROSS_WIDTHS
        crossover = Space(f"{name}-ddp-width", over(big, width=list(widths), batch_size=[batch]),
                          ("cuda", f"ddp:{cross}"), repeats=repeats, fixed=one_at_a_time, timeout_s=timeout_s)
        # yours at its own sizes, as the seed 000 MLP at its own
        yours = [Space(f"{name}-ddp-user", users, ("cuda",) + tuple(f"ddp:{n}" for n in counts), repeats=repeats,
                       fixed=one_at_a_time, params=params or {}, timeout_s=timeout_s, planner=planner)] if users else []
        return [*scaling, seed, crossover, *yours]
    if study == "pipe":
        stages = [n for n in counts if n >= 2]
        if not stages:
            raise ValueError(f"--studies pipe needs 2 GPUs or more; this cluster has {gpus}")
        piped: dict = {}
        own: dict = {}
        if users:
            if planner is None:
                raise ValueError("planner: give the Planner whose user_grids made `users` (Space needs it), got None")
            for ref, grid in users.items():
                if planner.spec(ref).pipeline:
                    piped[ref] = {"micro_batches": list(MICRO_BATCHES), **grid}
                else:
                    log(f"--workload {ref} is left out of --studies pipe: its model is no nn.Sequential a pipeline "
                        "can cut (Workload.pipeline)")
            own = {k: v for k, v in (params or {}).items() if any(k in planner.spec(ref).params for ref in piped)}
        devices = ("cuda",) + tuple(f"pipe:{n}" for n in stages)
        return [Space(f"{name}-pipe", over(big, batch_size=[batch], micro_batches=list(MICRO_BATCHES)),
                      devices, repeats=repeats, fixed=one_at_a_time, timeout_s=timeout_s)] + \
            ([Space(f"{name}-pipe-user", piped, devices, repeats=repeats, fixed=one_at_a_time, params=own,
                    timeout_s=timeout_s, planner=planner)] if piped else [])
    raise ValueError(f"--studies: unknown study {study!r}; choose from packed, ddp, pipe")


def main(argv=None) -> int:
    p = cli.parser(__doc__, "parallel", "prefix of the sweeps' names")
    p.add_argument("--studies", default="packed,ddp,pipe", help="comma-separated: packed, ddp, pipe")
    p.add_argument("--repeats", type=cli.at_least(1), default=3,
                   help="independent runs (seeds) of every ddp and pipe point: the intervals are over them")
    args = p.parse_args(argv)
    planner = Planner()  # this sweep's planning of your workloads, handed to every Space it builds
    return exit_status(lambda: study(args, planner), planner)


def study(args, planner: Planner) -> int:
    # your workload's module declared before Ray starts (its planning process imports it), so Ray ships it
    users = planner.user_grids(args, "smoke" if args.smoke else "default")
    unknown = sorted(set(dict(args.param)) - {name for ref in users for name in planner.spec(ref).params})
    if unknown:  # refused here, not left unused: packed takes no workload of yours, pipe only some
        raise ValueError(f"--param {unknown[0]} is an axis of none of your workloads (--workload {args.workload}): "
                         "give a NAME its Workload.params declares")
    connect(args.address, planner.registry.shipping)
    import ray

    gpus = int(ray.cluster_resources().get("GPU", 0))
    return runner.run_studies(
        lambda: [s for study in args.studies.split(",")
                 for s in spaces(study.strip(), args.name, gpus, args.smoke, args.repeats, users, dict(args.param),
                                 args.trial_timeout, planner=planner)],
        args.out, render, planner)


if __name__ == "__main__":
    sys.exit(main())

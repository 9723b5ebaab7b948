"""The main job: how time per epoch scales with model and data size, on every device, per workload.

    python sweeps/scaling.py                      # the crossover search, every device this machine has
    python sweeps/scaling.py --grid full          # every size of the default grid, --repeats runs each
    python sweeps/scaling.py --compare            # the search and the full grid, side by side (a benchmark)
    python sweeps/scaling.py --smoke              # each workload's smoke grid, every point (SMOKE_HELP)
    python sweeps/scaling.py --devices cpu --workloads disc,peaks --name mine
    python sweeps/scaling.py --grid seeds --devices cpu,cuda  # each seed's own configuration
    python sweeps/scaling.py --smoke --batch-size 8,16 --epochs 2  # those axes of every workload's grid replaced
    python sweeps/scaling.py --devices cuda,cuda/4 --fuse auto --exclusive
    python sweeps/scaling.py --address auto --storage-path s3://BUCKET/crossover   # on `ray up cluster.yaml`

By default it runs the adaptive crossover search (sweeps/search.py): per workload, along the axis its
default grid varies, it brackets where the faster device changes, bisects to the grid's resolution and
spends repeats only where they decide, within --budget seconds; a trial predicted past the budget is
skipped, said, and written as a row. `--grid full` measures every size of that grid instead. Both are the
same configurations in the same folder (results/scaling; your own workload's results/<its name>, e.g.
results/zoo, where --workload gives it alone), so each resumes the other.

Rows go to results/<name>/ as Parquet, one file per trial, as each trial ends; running the same
command again resumes. While it runs, one line shows the trials done of all and an ETA (--verbose: a
line per trial). It ends with the answer in at most 25 lines (analysis/verdict.py): per workload, where the
GPU trains faster than the CPU and by how much, with intervals; what the sweep costs, in the picks
`crossover decide` names on the same folder (the GPU to rent, the box to buy, your CPU: analysis/decide/);
where the HTML report is (analysis/report.py).
--verbose adds every table behind it: the median time per epoch on each device at each size, the
crossover table and every option. By default it sets your rows beside the shipped reference GPU rows
of the same configurations (results/reference/: "your cpu against the NVIDIA H200 measured on
2026-11-22"); --no-reference turns that and the costs off.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
import time
from pathlib import Path

from crossover.analysis import charts, decide, report, summary, verdict
from crossover.analysis.load import read
from crossover.analysis.selection import select
from crossover.config import DATA_SOURCES, LOOPS, PRECISIONS
from crossover.sweeps import budget, cli, runner, search, stopping
from crossover.sweeps.cluster import cluster_devices, connect, cpu_nodes_only, node_cpus, node_types
from crossover.sweeps.command import counted
from crossover.sweeps.compare import run_seconds, side_by_side
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.sweeps.status import WRITE_FAILED, exit_status, measured_status
from crossover.sweeps.store import Store
from crossover.trainables.devices import DEVICES
from crossover.trainables.workloads import WORKLOADS

# --smoke's help: what a smoke sweep runs (build_space, crossover/workload.py grid_of), not how long it takes, which
# is the machine's and the job's (the built-ins' 36 trials on a 2-core CPU: 1.5-4 min; a user's ResNet-like CNN's 3
# trials, 234 s)
SMOKE_HELP = ("each workload's 'smoke' grid, every point run (no search): its own where it gives one (the built-ins' "
              "smallest sizes), else one point, a sixteenth of its default dataset_size for 2 epochs; --repeats "
              "trials a point on each device (a job of yours without a smoke grid: 3 trials a device)")
# --grid: 'search' explores each workload's 'default' grid (sweeps/search.py), 'full' measures all of it;
# 'smoke' and 'seeds' are the workloads' own grids of those names (Workload.grids, Workload.grid)
GRIDS = ("search", "full", "smoke", "seeds")
WORKLOAD_GRID = {"search": "default", "full": "default"}  # --grid -> the Workload's grid of that name


def parse_args(argv=None) -> argparse.Namespace:
    p = cli.parser(__doc__, None, "sweep name (default: your workload's own name where --workload gives it alone, "
                                  "e.g. results/zoo; else 'scaling' for the search and the full grid, which share "
                                  "it, or the grid's name for another grid)", SMOKE_HELP)
    p.add_argument("--workloads", default=None,
                   help=f"comma-separated built-in workloads of {list(WORKLOADS)} (default: all of them, "
                        "or none where --workload names your own)"),
    p.add_argument("--devices", default=None,
                   help=f"comma-separated devices of {list(DEVICES)}; default: every device the Ray cluster has")
    p.add_argument("--grid", default="search", choices=GRIDS,
                   help="search: find each workload's crossover among its default grid's sizes, within --budget; "
                        "full: every size of that grid (sizes for a laptop's CPU and any GPU); seeds: each seed's "
                        "own configuration")
    p.add_argument("--budget", type=_seconds, default=budget.BUDGET_S, metavar="SECONDS",
                   help="the search's seconds, from its first round: a trial predicted past what is left, or "
                        f"past {budget.MAX_SHARE * 100:.0f}%% of it, is skipped and said (a row 'skipped: ...'; a "
                        "larger budget measures it later), and one that runs past that share is stopped (a row "
                        "'cut for the budget'); the default fits the built-ins' search in 3 minutes on a 2-core VM")
    p.add_argument("--compare", nargs="?", const=True, default=None, metavar="FULL_DIR",
                   help="a benchmark: the search into OUT/NAME-search and the full grid into OUT/NAME-full (or read "
                        "from FULL_DIR, a full grid's folder), then per workload the crossover each finds, and the "
                        "trials and seconds each spent")
    p.add_argument("--batch-size", type=cli.integers(1), default=None, metavar="B[,B...]",
                   help="these batch sizes in every workload's grid, in place of the grid's own (or of its default)")
    p.add_argument("--dataset-size", type=cli.integers(1), default=None, metavar="N[,N...]",
                   help="these training-set sizes (samples) in every workload's grid, in place of the grid's own")
    p.add_argument("--epochs", type=cli.at_least(1), default=None, metavar="N",
                   help="epochs of every trial, in place of each workload's grid's")
    p.add_argument("--max-concurrent", type=cli.at_least(1), default=None, help="trials at once (default: as resources allow)")
    p.add_argument("--cluster-config", default=None, type=Path,
                   help="autoscaling config of the cluster, whose node types count as nodes it can add "
                        "(default: ~/ray_bootstrap_config.yaml where it exists, as on a `ray up` head)")
    p.add_argument("--storage-path", default=None,
                   help="where Tune keeps its state, e.g. s3://bucket/crossover (default: OUT/_tune/NAME); "
                        "the rows are written by this process under OUT either way")
    p.add_argument("--max-failures", type=cli.at_least(0), default=2,
                   help="times a trial whose worker was lost (killed from outside, or its node died) is run again, "
                        "and once more, before it becomes an error row; a worker its own code crashed is not")
    p.add_argument("--cpu-threads", type=cli.at_least(1), default=None,
                   help="threads (and Ray CPUs) per CPU trial; default: the largest node's cores less Ray's room, "
                        "one from 4 cores up and two from 16")
    p.add_argument("--fuse", default="off",
                   help="fuse trials that differ only in seed and lr into one batched model (HFTA): 'off', "
                        "'auto' (as many as fit the fused budget), or members per group")
    p.add_argument("--no-report", action="store_true",
                   help="skip the HTML report (crossover report OUT/NAME writes it later)")
    p.add_argument("--no-reference", action="store_true",
                   help="summarise your rows alone: without it, the reference GPU rows of the same configurations "
                        "(shipped with crossover) are set beside them and the report ends with the decision")
    p.add_argument("--keep-ray-session", action="store_true",
                   help="keep the session folder of the Ray this run starts (its logs, 0.2-3.4 MB) in OUT/_ray/ "
                        "(without it, it is removed from /tmp/ray as the run ends; a cluster joined with --address "
                        "keeps its own)")
    p.add_argument("--verbose", action="store_true",
                   help="a line per trial as it ends instead of one progress line, and at the end every table "
                        "behind the answer: time per epoch per device and size, the crossovers, every option's cost")
    p.add_argument("--exclusive", action="store_true",
                   help="timing grade: one trial at a time, nothing else on its node while timed "
                        "(without it, trials pack for throughput; every row lists what ran beside it)")
    p.add_argument("--repeats", type=cli.at_least(1), default=3,
                   help="independent runs (seeds) per grid point: the crossover's interval is over them (the "
                        f"search gives each point 1 to {stopping.CAP} by its rule instead)")
    p.add_argument("--loop", default="fast", choices=LOOPS, help="'seed' reproduces the seeds' own loop")
    p.add_argument("--precision", default="default", choices=PRECISIONS,
                   help="every trial's precision: default is PyTorch's own, as a plain "
                        "loop gets it (TF32 in cuDNN convolutions, not in matmuls); fp32 turns TF32 off; the CPU "
                        "takes default, fp32 and bf16")
    p.add_argument("--data", default="auto", choices=DATA_SOURCES, help="the built-in image workloads' data: mnist (MNIST's files in --data-dir), digits "
                        "(scikit-learn's 1,797 handwritten digits, upscaled), synthetic (random images: timing "
                        "only); auto: mnist where --data-dir is given, else digits where the size fits, else "
                        "synthetic")
    p.add_argument("--data-dir", default=None, type=_absolute,
                   help="directory with MNIST/raw/*-ubyte (torchvision layout)")
    return p.parse_args(argv)


def _seconds(text: str) -> float:
    """--budget: a number of seconds > 0, else refused by name (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def _absolute(text: str) -> str:
    """--data-dir as one absolute path: 'mnist', './mnist' and 'mnist/' are the same data, one config hash."""
    return str(Path(text).expanduser().resolve())


def searching(args: argparse.Namespace) -> bool:
    """Whether the sweep is the adaptive search (--grid search, not --smoke): else runner.run of the whole space."""
    return args.grid == "search" and not args.smoke


def build_space(args: argparse.Namespace, planner: Planner, devices: tuple, cpu_threads: int,
                cpu_nodes_only: bool) -> Space:
    """The full grid's Space: the one --grid full runs, and the one the search explores; `planner` plans the
    --workload ones (sweeps/plan.py), and the Space keeps it."""
    grid = "smoke" if args.smoke else args.grid
    own = WORKLOAD_GRID.get(grid, grid)
    builtin = {w: WORKLOADS[w].grid(own) for w in cli.builtins(args, WORKLOADS)}
    users = planner.user_grids(args, own)
    grids = {key: {**axes, **given_axes(args)} for key, axes in {**builtin, **users}.items()}
    return Space(args.name or sweep_name(builtin, users, grid, planner), grids,
                 devices, cpu_threads, args.repeats,
                 fixed={"loop": args.loop, "exclusive": args.exclusive, "precision": args.precision},
                 image_data={"data": args.data, "data_dir": args.data_dir}, fuse=args.fuse,
                 cpu_nodes_only=cpu_nodes_only, params=dict(args.param), timeout_s=args.trial_timeout,
                 plan_timeout_s=args.plan_timeout, planner=planner)


def given_axes(args: argparse.Namespace) -> dict:
    """The axes --batch-size, --dataset-size and --epochs give, as a grid's {axis: [values]}: each replaces that
    axis in every workload's grid, so a grid's sizes change without editing the workload."""
    given = {"batch_size": args.batch_size, "dataset_size": args.dataset_size,
             "epochs": None if args.epochs is None else [args.epochs]}
    return {axis: values for axis, values in given.items() if values is not None}


def sweep_name(builtin: dict, users: dict, grid: str, planner: Planner) -> str:
    """The sweep's folder under --out, where --name gives none: users' workloads alone sweep into their own
    names' ('zoo', 'zoo+lstm'; '-smoke' or another grid's name after them), so that the end of the sweep,
    which reads the whole folder, speaks of them alone; the built-ins into 'scaling' (the search and the full
    grid share it) or the grid's name."""
    own = WORKLOAD_GRID.get(grid, grid)
    if users and not builtin:
        names = "+".join(planner.spec(ref).name for ref in users)  # planned already: Planner.user_grids
        return names if own == "default" else f"{names}-{grid}"
    return "scaling" if own == "default" else grid


def main(argv=None) -> int:
    args = parse_args(argv)
    planner = Planner()  # this sweep's planning of your workloads, handed to its Space
    return exit_status(lambda: compare(args, planner) if args.compare else sweep(args, planner), planner)


def connected_space(args, planner: Planner, names: tuple = ("",)) -> Space:
    """The space checked before Ray starts (its devices and threads may come from the cluster), Ray
    connected, then the space on the cluster's devices and cores. `names`: suffixes of the folders it
    will write (--compare's two), each checked too."""
    given = tuple(d.strip() for d in args.devices.split(",")) if args.devices else ("cpu",)
    checked = build_space(args, planner, given, args.cpu_threads or 1, False)
    checked.expand()
    if searching(args) or args.compare:
        search.lines(checked)  # a workload the search cannot explore, refused now
    for suffix in names:
        Store(Path(args.out) / f"{checked.name}{suffix}").check()  # --out and --name too
    connect(args.address, planner.registry.shipping, Path(args.out) / "_ray" if args.keep_ray_session else None)
    types = node_types(args.cluster_config)
    devices = given if args.devices else cluster_devices(types)
    return build_space(args, planner, devices, args.cpu_threads or node_cpus(types), cpu_nodes_only(types))


def measure(args, space: Space) -> tuple[Store, int]:
    """The sweep's trials: the search over `space` (--grid search), or all of it (runner.run); and how many lines
    the search printed besides its progress (a trial cut at its share of the budget as it fails, what it spent
    and skipped at its end), which the answer's screen counts."""
    tune = dict(storage_path=args.storage_path, max_failures=args.max_failures, cluster_config=args.cluster_config,
                progress=not args.verbose)
    if searching(args) or args.compare:
        said = []

        def log(line: str) -> None:
            said.append(screen(line))
            print(said[-1])

        found = search.search(space, args.out, args.budget, args.max_concurrent, log=log,
                              detail=log if args.verbose else lambda line: None, **tune)
        return found.store, sum(len(line.splitlines()) for line in said)
    return runner.run(space, args.out, args.max_concurrent, **tune), 0


def screen(line: str) -> str:
    """`line` in lines of at most verdict.WIDTH columns (the end screen's), the next ones indented; a path is never
    broken, so only a path longer than a line passes it."""
    return "\n".join(textwrap.wrap(line, verdict.WIDTH, subsequent_indent="    ", break_long_words=False,
                                    break_on_hyphens=False) or [""])


def sweep(args, planner: Planner) -> int:
    start = time.perf_counter()
    store, above = measure(args, connected_space(args, planner))
    return finish(args, store.dir, start, planner, above=above)


def compare(args, planner: Planner) -> int:
    """--compare: the search and the full grid, each into a folder of its own (NAME-search, NAME-full: neither
    resumes on the other's rows), or the full grid's rows read from --compare FULL_DIR; then side by side."""
    space = connected_space(args, planner, ("-search",) if args.compare is not True else ("-search", "-full"))
    mine = dataclasses.replace(space, name=f"{space.name}-search")
    began = time.monotonic()
    measure(args, mine)  # what it says at its end is printed; side_by_side below is the answer
    seconds = {"search": time.monotonic() - began}
    if args.compare is True:
        began = time.monotonic()
        full = runner.run(dataclasses.replace(space, name=f"{space.name}-full"), args.out, args.max_concurrent,
                          storage_path=args.storage_path, max_failures=args.max_failures,
                          cluster_config=args.cluster_config, progress=not args.verbose).dir
        seconds["full"] = time.monotonic() - began
    else:
        full = Path(args.compare)
        seconds["full"] = run_seconds(full)  # its runs' wall time, as its runs file has them
    print(side_by_side(mine, args.out, Path(args.out) / mine.name, full, seconds))
    return 0


def planned_run(planner: Planner) -> decide.Request | None:
    """The user's planned run, where the sweep measured one workload of the user's (`planner`'s): its defaults'
    epochs, samples and batch, and its other axes' and own params' defaults, the run its job says it trains; None
    for the built-ins alone, or several of the user's."""
    specs = {spec.name: spec for spec, _ in planner.planned.values()}
    if len(specs) != 1:
        return None
    spec = next(iter(specs.values()))
    axes = [(a, str(spec.defaults[a])) for a in decide.AXIS_FLAGS if spec.defaults.get(a) is not None]
    axes += [(name, str(p.default)) for name, p in spec.params.items()]
    return decide.Request(int(spec.defaults["epochs"]), int(spec.defaults["dataset_size"]), spec.name, None, tuple(axes))


def finish(args, directory: Path, start: float, planner: Planner, above: int = 0) -> int:
    """The end of the sweep: the verdict of the rows in `directory` (beside the reference rows), the
    answer first (for the user's planned run where the sweep measured one workload of theirs, `planned_run`; else
    for the sweep's own trials), in what is left of verdict.SHORT lines below the `above` lines the search printed; with
    --verbose every table behind it; the report written and where it is. Its exit status:
    sweeps/status.py measured_status's (NOTHING_MEASURED where every trial failed, PLAN_FAILED where `planner`
    failed to plan a workload), or WRITE_FAILED where the report could not be written."""
    rows = read(directory)
    shown = rows if args.no_reference else summary.with_reference(rows)
    plan = planned_run(planner) if not args.no_reference else None
    try:  # its step counted as predict counts it: the answer says predict's figure
        counts = counted(decide.steps(shown, plan)) if plan else None
    except ValueError:  # a configuration the rows do not hold: the sweep's own trials are what is priced
        plan, counts = None, None
    # once, for what is printed and the report
    said = verdict.reach(select(shown), decision=not args.no_reference, plan=plan, counts=counts)
    if args.verbose:
        print(summary.render(shown.assign(device=shown["arm"]), said))
    print(verdict.render(said, verbose=args.verbose, lines=verdict.SHORT - above))
    print(screen(f"{len(rows)} rows in {directory} ({time.perf_counter() - start:.0f} s)"))
    if args.no_report:
        print(screen(f"report: not written (--no-report); crossover report {directory} writes it"))
        return measured_status(rows, str(directory), planner)
    try:
        print(screen(f"report: {report.write_page(said, [directory])}"))
    except OSError as exc:  # the rows are all written: only the report is missing
        print(f"error: {report.cannot_write(exc)} (crossover report {directory})", file=sys.stderr)
        return WRITE_FAILED
    except ImportError:  # altair draws through vl-convert: an install without it (the answer above stands)
        print(screen(f"report: not written ({charts.NO_VL_CONVERT}); crossover report {directory} writes it then"))
    return measured_status(rows, str(directory), planner)


if __name__ == "__main__":
    sys.exit(main())

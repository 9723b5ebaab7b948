"""Orchestration overhead: what a sweep costs beyond its trials' own time (a benchmark, not a test).
This runs the benchmark; analysis/overhead.py, of the same name a layer down, draws its figures from the rows.

    python studies/overhead.py                              # 0.1, 1 and 10 s trials, 1 and all at a time, 3 repeats
    python studies/overhead.py --smoke                      # 4 trials of ~0.05 s, once each way: checks the path
    python studies/overhead.py --trial-seconds 1 --trials 40 --concurrency 1 --repeats 5
    python studies/overhead.py --workload path/to/job.py:workload --trial-seconds 10   # your trial instead of disc's

Each measurement is a sweep of N short `disc` trials (its grid 'overhead', one CPU thread, seeds 0..N-1)
through the whole path: Ray Tune, the trainable of trainables/trainable.py, the Parquet rows written
by sweeps/runner.py. With --workload (one), your workload's trial replaces disc's: the first
configuration of its 'smoke' grid (Workload.grid), on one CPU thread, its module shipped to the
workers as any sweep ships it; what a sweep costs beside your trials is the figure. The trial length
is calibrated first: one trial runs in this process and the epochs are chosen so that its time comes
close to --trial-seconds (a trial whose own setup takes longer runs 2 epochs, and longer). Every
trial runs exactly its epochs (min_timed_s 0), so its length is the one calibrated. Rows go to
OUT/overhead-<stamp>-<length>s-c<concurrency>-r<repeat>/ like any sweep's, with `_sweep.json`
beside them: the sweep's wall-clock start and end, its slots and the load average around it. The
figures (own_s, over_ideal, per_trial_s, start_s, gap_s, ...) are computed from that directory alone
by analysis/overhead.py, which says what each one means.

Ray's own start (`ray.init`) is timed once, apart. Other jobs on the machine skew the figures: the
load average is printed before and after each measurement; repeat where it was high.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from crossover.analysis.overhead import SWEEP_FILE, figures, header, line, measurement, summary
from crossover.schema import SIZE_AXES
from crossover.sweeps import cli, runner
from crossover.sweeps.cluster import connect
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.sweeps.status import exit_status
from crossover.trainables.train import run_trial
from crossover.trainables.trial import here
from crossover.trainables.workloads import with_grid

CALIBRATION_EPOCHS = 20  # epochs of the calibration trial, one warm-up included


def measured(flags: "Flags", planner: Planner) -> Space:
    """The trial every measurement repeats, as a space of one configuration, its epochs unset: disc's grid
    'overhead', or your --workload's first 'smoke' configuration (planned by `planner`); one CPU thread, exactly its
    epochs timed."""
    if len(flags.workload) > 1:
        raise ValueError(f"--workload: overhead repeats one trial, so give one workload, got {len(flags.workload)}")
    if flags.workload:
        ref, grid = next(iter(planner.user_grids(flags, "smoke").items()))
        grids = {ref: {axis: values[:1] for axis, values in grid.items() if axis != "epochs"}}
    else:
        grids = with_grid("overhead")  # the built-in that declares it (trainables/workloads.py)
    return Space(flags.name, grids, ("cpu",), cpu_threads=1, fixed={"min_timed_s": 0}, params=dict(flags.param),
                 timeout_s=flags.trial_timeout, planner=planner)


def space(trial: Space, name: str, epochs: int, trials: int) -> Space:
    """`trials` distinct configs of the `measured` trial (seeds 0..trials-1) of one length: nothing is
    skipped as measured."""
    (workload, grid), = trial.grids.items()
    return dataclasses.replace(trial, name=name, grids={workload: {**grid, "epochs": [epochs]}}, repeats=trials)


def calibrate(trial: Space, target_s: float) -> int:
    """Epochs for which one `measured` trial's total_s comes close to `target_s`, from a trial run here.

    The second of two runs counts (the first pays this process's first-use costs); its epochs are
    split into a fixed part (total_s less the epochs) and a median epoch.
    """
    if target_s <= 0:
        raise ValueError(f"--trial-seconds must be > 0, got {target_s}")
    calibration = space(trial, trial.name, CALIBRATION_EPOCHS, 1).expand()[0]
    for _ in range(2):
        row = run_trial(here(calibration, trial.planner.registry if trial.planner else None))  # a user's, imported here
    fixed = row["total_s"] - row["warmup_s"] - row["train_s"]
    return max(2, round((target_s - fixed) / row["epoch_s_median"]))


def measure(sp: Space, out: Path, concurrency: int | None, log) -> Path:
    """Run `sp` with at most `concurrency` trials at once (None: as the CPUs allow); returns its
    directory (rows, SWEEP_FILE)."""
    import ray

    cpus = int(ray.cluster_resources().get("CPU", 1))  # each trial asks for one
    slots = min(concurrency or cpus, cpus, sp.repeats)
    load_before = os.getloadavg()
    start = time.time()  # wall clock: compared with the rows' file times
    store = runner.run(sp, out, max_concurrent=concurrency, log=log)
    end = time.time()
    record = {"start": start, "end": end, "slots": slots, "concurrency": concurrency,
              "load_before": load_before, "load_after": os.getloadavg()}
    (store.dir / SWEEP_FILE).write_text(json.dumps(record, indent=1))
    return store.dir


def _numbers(text: str, kind, flag: str) -> list:
    """Comma-separated values > 0 of `kind`; 'auto' stands for None where `kind` is int."""
    words = [v.strip() for v in text.split(",") if v.strip()]
    try:
        values = [None if w == "auto" and kind is int else kind(w) for w in words]
    except ValueError:
        raise ValueError(f"{flag} takes comma-separated numbers, got {text!r}") from None
    if not values or any(v is not None and v <= 0 for v in values):
        raise ValueError(f"{flag} needs values > 0, got {text!r}")
    return values


@dataclass(frozen=True)
class Flags:
    """The command line, parsed once (`parse_args`), --smoke's sizes in place; named as the shared flags are
    (sweeps/cli.py)."""

    out: Path  # results root: the measurements' rows go to OUT/NAME-<stamp>-*/
    name: str  # prefix of the measurements' names
    workload: list  # your workload's reference (path/to/job.py:ATTR), one at most
    param: list  # (axis, value) of your workload's own axes
    trial_seconds: str  # comma-separated target lengths of one trial, s (study parses them, `_numbers`)
    trials: int  # trials per measurement
    concurrency: str  # comma-separated max_concurrent values, 'auto': as many as the CPUs allow
    repeats: int  # measurements of each length and concurrency
    smoke: bool
    address: str | None  # a running Ray cluster's, or None: a local one
    trial_timeout: float  # s: a trial's limit
    plan_timeout: float  # s: the limit of the process that plans your workload (sweeps/plan.py)
    verbose: bool  # the runner's line per trial


def parse_args(argv=None) -> Flags:
    p = cli.parser(__doc__, "overhead", "prefix of the measurements' names: OUT/NAME-<stamp>-*/")
    p.add_argument("--trial-seconds", default="0.1,1,10",
                   help="comma-separated target lengths of one trial (total_s), each calibrated to epochs")
    p.add_argument("--trials", type=cli.at_least(2), default=20, help="trials per measurement (N)")
    p.add_argument("--concurrency", default="1,auto",
                   help="comma-separated max_concurrent values: 1 gives the serial picture, "
                        "auto as many as the CPUs allow (scaling.py's default)")
    p.add_argument("--repeats", type=cli.at_least(1), default=3, help="measurements of each length and concurrency")
    p.add_argument("--verbose", action="store_true", help="print the runner's line per trial")
    args = p.parse_args(argv)
    flags = Flags(args.out, args.name, args.workload, args.param, args.trial_seconds, args.trials, args.concurrency,
                  args.repeats, args.smoke, args.address, args.trial_timeout, args.plan_timeout, args.verbose)
    return dataclasses.replace(flags, trial_seconds="0.05", trials=4, repeats=1) if flags.smoke else flags


def main(argv=None) -> int:
    flags = parse_args(argv)
    planner = Planner()  # this sweep's planning of your workload, handed to its Space
    return exit_status(lambda: study(flags, planner), planner)


def study(flags: Flags, planner: Planner) -> int:
    targets = _numbers(flags.trial_seconds, float, "--trial-seconds")
    concurrency = _numbers(flags.concurrency, int, "--concurrency")
    log = print if flags.verbose else (lambda line: None)
    trial = measured(flags, planner)  # checked, and your workload's module imported, before Ray starts (it ships it)
    what = trial.expand()[0].label("workload", *SIZE_AXES)
    start = time.perf_counter()
    connect(flags.address, planner.registry.shipping)
    print(f"ray start: {time.perf_counter() - start:.2f} s; load average {os.getloadavg()[0]:.2f}")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    results = []
    print(header())
    for target in targets:
        epochs = calibrate(trial, target)
        print(f"# {target:g} s trials: {epochs} epochs of {what}")
        for repeat in range(flags.repeats):
            for c in concurrency:  # the ways alternate, so a change in load falls on both
                name = f"{flags.name}-{stamp}-{target:g}s-c{c or 'auto'}-r{repeat}"
                directory = measure(space(trial, name, epochs, flags.trials), flags.out, c, log)
                results.append({"target_s": target, "dir": str(directory), **figures(*measurement(directory))})
                print(line(results[-1]))
    print(summary(results))
    print(f"rows in {flags.out}/{flags.name}-{stamp}-*/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

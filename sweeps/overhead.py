"""Orchestration overhead: what a sweep costs beyond its trials' own time (a benchmark, not a test).

    python sweeps/overhead.py                              # 0.1, 1 and 10 s trials, 1 and all at a time, 3 repeats
    python sweeps/overhead.py --smoke                      # 4 trials of ~0.05 s, once each way: checks the path
    python sweeps/overhead.py --trial-seconds 1 --trials 40 --concurrency 1 --repeats 5

Each measurement is a sweep of N short `disc` trials (depth DEPTH, one CPU thread, seeds 0..N-1)
through the whole path: Ray Tune, the trainable of trainables/train.py, the Parquet rows written by
sweeps/runner.py. The trial length is calibrated first: one trial runs in this process and the
epochs are chosen so that its time comes close to --trial-seconds. Rows go to
OUT/overhead-<stamp>-<length>s-c<concurrency>-r<repeat>/ like any sweep's, with `_sweep.json`
beside them: the sweep's wall-clock start and end, its slots and the load average around it, so
every figure can be computed again from the directory alone (`figures(read(dir))`).

The figures, per measurement (slots: trials that can run at once, min(concurrency, CPUs, N); with
`--concurrency auto` Tune starts as many as the CPUs allow, as sweeps/scaling.py does by default):

    own_s        sum of the trials' total_s, each trial's wall time inside the trainable (setup, warm-up,
                 training, evaluation, row): the trial's own time, the honest ideal to compare with
    train_s      sum of warmup_s + train_s: the part of own_s spent training
    over_ideal   wall_s x slots / own_s - 1: the sweep's time beyond the ideal (ours: <= 10% for 10 s
                 trials; Ray's scalability target: < 20%)
    per_trial_s  (wall_s x slots - own_s) / N: start-up cost per trial, in slot-seconds
                 (ours: <= 0.2 s on a 2-core machine)
    start_s      from the sweep's start to its first row, less that trial's total_s: Tune's set-up,
                 the first worker process and its imports
    gap_s        one at a time only: mean time between a row and the next, less the next trial's
                 total_s: the cost per trial once the sweep runs
    rows_per_s   rows written per second of wall time
    fixed_s      median of total_s less its timed phases: the trainable's own cost that is not
                 training (environment, the co-running registry, summaries)
    first_s      one at a time only: the first trial's total_s less the median of the others: what a
                 fresh worker pays inside the trainable

Ray's own start (`ray.init`) is timed once, apart. Other jobs on the machine skew the figures: the
load average is printed before and after each measurement; repeat where it was high.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

from sweeps import runner
from sweeps.cli import HelpFormatter
from sweeps.space import Space
from trainables.config import TrialConfig
from trainables.train import run_trial

DEPTH = 6  # disc's doubling MLP 2 -> 4 -> ... -> 64 -> 2: a small step, so epochs set the trial's length
CALIBRATION_EPOCHS = 20  # epochs of the calibration trial, one warm-up included
PHASES = ("setup_s", "h2d_s", "warmup_s", "train_s", "eval_s")
SWEEP_FILE = "_sweep.json"  # leading '_': Parquet readers of the directory skip it


def trial_config(epochs: int) -> TrialConfig:
    return TrialConfig("disc", depth=DEPTH, epochs=epochs, threads=1)


def calibrate(target_s: float) -> int:
    """Epochs for which one trial's total_s comes close to `target_s`, from a trial run here.

    The second of two runs counts (the first pays this process's first-use costs); its epochs are
    split into a fixed part (total_s less the epochs) and a median epoch.
    """
    if target_s <= 0:
        raise ValueError(f"--trial-seconds must be > 0, got {target_s}")
    for _ in range(2):
        row = run_trial(trial_config(CALIBRATION_EPOCHS))
    fixed = row["total_s"] - row["warmup_s"] - row["train_s"]
    return max(2, round((target_s - fixed) / row["epoch_s_median"]))


def space(name: str, epochs: int, trials: int) -> Space:
    """`trials` distinct configs (seeds 0..trials-1) of one length: nothing is skipped as measured."""
    return Space(name, {"disc": {"depth": [DEPTH], "epochs": [epochs]}}, ("cpu",), cpu_threads=1, repeats=trials)


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


def read(directory: Path | str) -> tuple[pd.DataFrame, dict]:
    """A measurement's rows, each with `written_at` (its file's time: when the driver wrote it), and
    its SWEEP_FILE record."""
    directory = Path(directory)
    sweep = json.loads((directory / SWEEP_FILE).read_text())
    rows = pd.read_parquet(directory)
    rows["written_at"] = [os.stat(directory / f"{h}.parquet").st_mtime_ns / 1e9 for h in rows["config_hash"]]
    return rows.sort_values("written_at", ignore_index=True), sweep


def figures(rows: pd.DataFrame, sweep: dict) -> dict:
    """The module docstring's figures from one measurement's rows (with `written_at`) and record."""
    failed = rows[rows["status"] != "ok"]
    if len(failed):
        raise ValueError(f"{len(failed)} of {len(rows)} trials failed, e.g. {failed['error'].iloc[0].splitlines()[0]!r}; "
                         "the overhead of failed trials is not comparable: fix them and measure again")
    n, slots = len(rows), sweep["slots"]
    wall = sweep["end"] - sweep["start"]
    own = rows["total_s"].sum()
    serial = slots == 1 and n > 1
    written = rows["written_at"]
    return {
        "trials": n,
        "slots": slots,
        "trial_s": rows["total_s"].median(),
        "wall_s": wall,
        "own_s": own,
        "train_s": (rows["warmup_s"] + rows["train_s"]).sum(),
        "over_ideal": wall * slots / own - 1,
        "per_trial_s": (wall * slots - own) / n,
        "start_s": written.iloc[0] - sweep["start"] - rows["total_s"].iloc[0],
        "gap_s": (written.iloc[-1] - written.iloc[0] - rows["total_s"].iloc[1:].sum()) / (n - 1) if serial else None,
        "rows_per_s": n / wall,
        "fixed_s": (rows["total_s"] - rows[list(PHASES)].sum(axis=1)).median(),
        "first_s": rows["total_s"].iloc[0] - rows["total_s"].iloc[1:].median() if serial else None,
        "load_before": sweep["load_before"][0],
        "load_after": sweep["load_after"][0],
    }


# column, header, format: the table printed per measurement and the summary over repeats
COLUMNS = [("trials", "N", "{:d}"), ("slots", "slots", "{:d}"), ("trial_s", "trial_s", "{:.3f}"),
           ("wall_s", "wall_s", "{:.2f}"), ("own_s", "own_s", "{:.2f}"), ("train_s", "train_s", "{:.2f}"),
           ("over_ideal", "over_ideal", "{:.1%}"), ("per_trial_s", "per_trial_s", "{:.3f}"),
           ("start_s", "start_s", "{:.2f}"), ("gap_s", "gap_s", "{:.3f}"), ("rows_per_s", "rows/s", "{:.2f}"),
           ("fixed_s", "fixed_s", "{:.4f}"), ("first_s", "first_s", "{:.3f}"),
           ("load_before", "load<", "{:.2f}"), ("load_after", "load>", "{:.2f}")]
SUMMARY = ("over_ideal", "per_trial_s", "start_s", "gap_s", "rows_per_s", "fixed_s")


def _cell(fmt: str, value) -> str:
    return "-" if value is None or pd.isna(value) else fmt.format(value)


def header() -> str:
    return "  ".join(["target_s"] + [h for _, h, _ in COLUMNS])


def line(result: dict) -> str:
    """One measurement's figures under `header()`."""
    return "  ".join([f"{result['target_s']:g}"] + [_cell(f, result[k]) for k, _, f in COLUMNS])


def summary(results: list[dict]) -> str:
    """Per (trial length, slots): the median and range over repeats of each SUMMARY figure."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["target_s"], r["slots"]), []).append(r)
    lines = ["median [min, max] over repeats"]
    for (target, slots), rs in groups.items():
        cells = []
        for key in SUMMARY:
            fmt = next(f for k, _, f in COLUMNS if k == key)
            values = [r[key] for r in rs if r[key] is not None]
            if values:
                cells.append(f"{key} {fmt.format(statistics.median(values))} "
                             f"[{fmt.format(min(values))}, {fmt.format(max(values))}]")
        lines.append(f"{target:g} s trials, {slots} at a time, {len(rs)} repeats: " + "; ".join(cells))
    return "\n".join(lines)


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


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--trial-seconds", default="0.1,1,10",
                   help="comma-separated target lengths of one trial (total_s), each calibrated to epochs")
    p.add_argument("--trials", type=int, default=20, help="trials per measurement (N)")
    p.add_argument("--concurrency", default="1,auto",
                   help="comma-separated max_concurrent values: 1 gives the serial picture, "
                        "auto as many as the CPUs allow (scaling.py's default)")
    p.add_argument("--repeats", type=int, default=3, help="measurements of each length and concurrency")
    p.add_argument("--smoke", action="store_true", help="4 trials of ~0.05 s, once each way: checks the path")
    p.add_argument("--out", default="results", type=Path, help="results root: rows go to OUT/overhead-*/")
    p.add_argument("--address", default=None, help="address of a running Ray cluster (default: start a local one)")
    p.add_argument("--verbose", action="store_true", help="print the runner's line per trial")
    args = p.parse_args(argv)
    if args.smoke:
        args.trial_seconds, args.trials, args.repeats = "0.05", 4, 1
    if args.trials < 2 or args.repeats < 1:
        p.error(f"--trials must be >= 2 and --repeats >= 1, got {args.trials} and {args.repeats}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        targets = _numbers(args.trial_seconds, float, "--trial-seconds")
        concurrency = _numbers(args.concurrency, int, "--concurrency")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log = print if args.verbose else (lambda line: None)
    start = time.perf_counter()
    runner.connect(args.address)
    print(f"ray start: {time.perf_counter() - start:.2f} s; load average {os.getloadavg()[0]:.2f}")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    results = []
    print(header())
    for target in targets:
        epochs = calibrate(target)
        print(f"# {target:g} s trials: {epochs} epochs of disc depth {DEPTH}")
        for repeat in range(args.repeats):
            for c in concurrency:  # the ways alternate, so a change in load falls on both
                name = f"overhead-{stamp}-{target:g}s-c{c or 'auto'}-r{repeat}"
                directory = measure(space(name, epochs, args.trials), args.out, c, log)
                results.append({"target_s": target, "dir": str(directory), **figures(*read(directory))})
                print(line(results[-1]))
    print(summary(results))
    print(f"rows in {args.out}/overhead-{stamp}-*/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Held-out jobs measured on a GPU against what `crossover predict` says of them, as a user would ask it.

    python studies/heldout_check.py docs/data/held-out-jobs-h200-2026-11-28.jsonl
    python studies/heldout_check.py RUNS.jsonl --jobs 2 --save /tmp/predicted.json   # 2 predictions at once, kept
    python studies/heldout_check.py RUNS.jsonl --predicted /tmp/predicted.json       # the table again, none re-run
    python studies/heldout_check.py HOST1.jsonl HOST2.jsonl --predicted P.json     # two hosts' runs pooled a point

RUNS.jsonl is `python studies/reference.py --real --workload examples/heldout.py:workload`'s output: one line a
run of the plain loop (studies/parity.py plain), each with its workload, arch, batch, precision, engine, epochs and
peak memory, and the GPU it ran on. For each eager point (workload, arch, batch, precision), its runs' median
epoch (each run's median over its timed epochs) and largest allocated peak; then `crossover predict --workload W
--param arch=A --batch-size B --dataset-size N --epochs 1 --precision P --json -` in a process of its own, from
this checkout, as a user types it, and its line for the GPU the runs ran on (analysis/model device_key): the
epoch's prediction and its 90% interval, and the memory it says the run needs. A prediction that fails is a row
that says why. The engines 'compile' and 'graph' (a host-bound step cured) are a second table: their medians
beside the eager one's; `crossover predict` predicts the eager step alone.

These runs are validation data: never rows a fit reads (results/reference/), nor a choice of the model's form.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from crossover.analysis.decide.memory import CONTEXT_BYTES  # predict's memory has it; a run's allocated peak not
from crossover.analysis.model import device_key, load_devices

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 600  # s: one prediction past its counting's own limit (--timeout): a fit and a table, at most
FAILED_CHARS = 90  # of a failed prediction's message in the table (--save keeps it whole)


@dataclass(frozen=True)
class Point:
    workload: str  # the job file as --workload takes it
    params: tuple  # (name, value) of its own axes: arch, and any other the runs gave
    batch_size: int  # samples a step
    dataset_size: int  # samples an epoch
    precision: str
    gpu: str | None  # analysis/devices.yaml's key of the GPU the runs ran on; None: none (`predict`: no line for it)
    timeout_s: int | None = None  # s crossover predict may count its step (its --timeout); None: its own default


@dataclass(frozen=True)
class Predicted:
    epoch_s: float | None  # s an epoch, predicted; None where the prediction failed
    low_s: float | None  # its 90% interval
    high_s: float | None
    needs_gb: float | None  # GB the run needs, predicted (decide.memory_needed)
    error: str | None  # the failure's last line, where it failed


def measured(runs: pd.DataFrame) -> pd.DataFrame:
    """One line per (workload, arch, batch, dataset size, precision, engine, GPU) of the ok runs: the runs' median
    epoch, their min and max, their count, the largest allocated peak (GB); and the points with no ok run (oom,
    error) with their status. Eager runs that followed a compile or a capture in their process are left out
    (studies/reference.py real_runs says why)."""
    keys = ["workload", "arch", "params", "batch_size", "dataset_size", "precision", "engine", "device_name"]
    runs = runs.assign(params=[json.dumps(p, sort_keys=True) for p in runs["params"]])  # a dict: hashable as text
    if "after_cures" in runs:  # an eager run in a process that compiled or captured before: left out (real_runs)
        runs = runs[(runs["engine"] != "eager") | ~runs["after_cures"].fillna(False).astype(bool)]
    out = []
    for key, group in runs.groupby(keys, sort=False):
        ok = group[group["status"] == "ok"]
        medians = [float(m) for m in ok.get("epoch_s_median", [])]  # a file of failed runs alone has no such column
        out.append({**dict(zip(keys, key)), "runs": len(medians),
                    "epoch_s": statistics.median(medians) if medians else None,
                    "epoch_s_min": min(medians, default=None), "epoch_s_max": max(medians, default=None),
                    "peak_gb": ok["peak_allocated_bytes"].max() / 1e9 if len(ok) and "peak_allocated_bytes" in ok
                    else None,
                    "status": "ok" if medians else ", ".join(sorted(set(group["status"])))})
    return pd.DataFrame(out)


def predict(point: Point) -> Predicted:
    """`crossover predict` of one point, in a process of its own from this checkout: its line for `point.gpu`."""
    timeout_s = TIMEOUT_S + (point.timeout_s or 0)
    command = [sys.executable, "-m", "crossover.sweeps.command", "predict", "--workload", point.workload,
               *(["--timeout", str(point.timeout_s)] if point.timeout_s else []),
               *(a for name, value in point.params for a in ("--param", f"{name}={value}")),
               "--batch-size", str(point.batch_size), "--dataset-size", str(point.dataset_size), "--epochs", "1",
               "--precision", point.precision, "--json", "-"]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Predicted(None, None, None, None, f"no answer in {timeout_s:.0f} s")
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        return Predicted(None, None, None, None, (said or [f"exit status {done.returncode}"])[-1].strip())
    line = next((x for x in json.loads(done.stdout) if x["gpu"] == point.gpu), None)
    if line is None:
        return Predicted(None, None, None, None, f"no line for {point.gpu}")
    return Predicted(line["epoch_s"], line["epoch_s_low"], line["epoch_s_high"], line["needs_gb"], None)


def measured_table(points: pd.DataFrame) -> list[str]:
    """The measured points alone: the runs' median epoch [min-max], their count and the largest peak."""
    return aligned(("arch", "batch", "precision", "engine", "s/epoch [min-max]", "runs", "peak GB"), [
        (m["arch"], m["batch_size"], m["precision"], m["engine"],
         f"{m['epoch_s']:.4f} [{m['epoch_s_min']:.4f}-{m['epoch_s_max']:.4f}]" if m["status"] == "ok" else m["status"],
         m["runs"], "-" if m["peak_gb"] is None or m["peak_gb"] != m["peak_gb"] else f"{m['peak_gb']:.2f}")
        for _, m in points.iterrows()])


def compared(points: pd.DataFrame, predicted: dict) -> list[dict]:
    """Each measured point with its prediction: the error (predicted over measured, %) and whether the measured
    epoch is inside the 90% interval, None where either side failed."""
    out = []
    for _, m in points.iterrows():
        p = predicted[key(m)]
        both = m["status"] == "ok" and p.error is None
        out.append({**m.to_dict(), "predicted": p,
                    "error_pct": (p.epoch_s / m["epoch_s"] - 1) * 100 if both else None,
                    "inside": p.low_s <= m["epoch_s"] <= p.high_s if both else None})
    return out


def table(rows: list[dict]) -> list[str]:
    """`compared`'s rows, one line each, aligned."""
    heads = ("arch", "batch", "precision", "measured s/epoch [min-max]", "predicted [90%]", "error", "inside",
             "peak GB", "predicted GB")
    lines = []
    for r in rows:
        p = r["predicted"]
        lines.append((r["arch"], r["batch_size"], r["precision"],
                      f"{r['epoch_s']:.4f} [{r['epoch_s_min']:.4f}-{r['epoch_s_max']:.4f}]" if r["status"] == "ok"
                      else r["status"],
                      f"{p.epoch_s:.4f} [{p.low_s:.4f}-{p.high_s:.4f}]" if p.error is None else
                      f"failed: {p.error[:FAILED_CHARS]}{'...' if len(p.error) > FAILED_CHARS else ''}",
                      "-" if r["error_pct"] is None else f"{r['error_pct']:+.0f}%",
                      "-" if r["inside"] is None else "yes" if r["inside"] else "no",
                      "-" if r["peak_gb"] is None or r["peak_gb"] != r["peak_gb"] else f"{r['peak_gb']:.2f}",
                      "-" if p.needs_gb is None else f"{p.needs_gb:.2f}"))
    return aligned(heads, lines)


# targets of a prediction for families no fit saw, at each precision (printed, never asserted): |error| median and
# worst, the share of measured epochs inside the 90% interval, and the memory said within so much of the peak
TARGETS: dict[str, float] = {"median": 15.0, "worst": 40.0, "memory": 15.0}
COVERAGE = (85.0, 95.0)  # % of the measured epochs inside the interval, at least and at most


def summary(rows: list[dict]) -> list[str]:
    """Per precision and in all: the points measured and predicted, |error| median and worst, coverage, the memory
    within TARGETS' share of the measured peak (the peak the run allocated; predict's figure less its CUDA context),
    each against its target."""
    out = []
    for precision in [*dict.fromkeys(r["precision"] for r in rows), "all"]:
        both = [r for r in rows if r["inside"] is not None and precision in ("all", r["precision"])]
        if not both:
            continue
        errors = sorted(abs(r["error_pct"]) for r in both)
        median, worst = statistics.median(errors), errors[-1]
        coverage = 100 * sum(r["inside"] for r in both) / len(both)
        memory = [abs(r["predicted"].needs_gb - CONTEXT_BYTES / 1e9 - r["peak_gb"]) / r["peak_gb"] * 100 for r in both
                  if r["predicted"].needs_gb is not None and r["peak_gb"] and r["peak_gb"] == r["peak_gb"]]
        lo, hi = COVERAGE
        said = [f"median {median:.0f}% (<= {TARGETS['median']:.0f}%: {met(median <= TARGETS['median'])})",
                f"worst {worst:.0f}% (<= {TARGETS['worst']:.0f}%: {met(worst <= TARGETS['worst'])})",
                f"coverage {coverage:.0f}% ({lo:.0f}-{hi:.0f}%: {met(lo <= coverage <= hi)})"]
        if memory:
            within = sum(m <= TARGETS["memory"] for m in memory)
            said.append(f"memory within {TARGETS['memory']:.0f}% on {within} of {len(memory)} "
                        f"({met(within == len(memory))})")
        out.append(f"{precision}: {len(both)} of {sum(precision in ('all', r['precision']) for r in rows)} points "
                   f"measured and predicted; " + "; ".join(said))
    return out


def met(ok: bool) -> str:
    return "met" if ok else "missed"


def cures(points: pd.DataFrame) -> list[str]:
    """Each point timed in more than one engine: the medians side by side, and each engine's speed-up on eager."""
    heads = ("arch", "batch", "precision", "eager s/epoch", "compile", "graph", "compile x", "graph x")
    lines = []
    for (arch, batch, precision), group in points.groupby(["arch", "batch_size", "precision"], sort=False):
        by = dict(zip(group["engine"], group["epoch_s"]))
        if len(by) < 2:
            continue
        eager = by.get("eager")
        cell = lambda e: f"{by[e]:.4f}" if by.get(e) is not None and by[e] == by[e] else "-"  # noqa: E731
        ratio = lambda e: f"{eager / by[e]:.2f}" if eager and by.get(e) and by[e] == by[e] else "-"  # noqa: E731
        lines.append((arch, batch, precision, cell("eager"), cell("compile"), cell("graph"), ratio("compile"),
                      ratio("graph")))
    return aligned(heads, lines)


def aligned(heads: tuple, lines: list) -> list[str]:
    widths = [max(len(str(x)) for x in column) for column in zip(heads, *lines)]
    return ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [heads, *lines]]


def key(m) -> str:
    return json.dumps([m["workload"], m["params"], int(m["batch_size"]), int(m["dataset_size"]), m["precision"],
                       m["device_name"]])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", type=Path, nargs="+",
                   help="JSON lines of python studies/reference.py --real --workload ...; several: one host each, a point's runs pooled")
    p.add_argument("--jobs", type=int, default=1, help="predictions run at once (each counts a step on the CPU)")
    p.add_argument("--save", type=Path, default=None, help="write the predictions as JSON to this file")
    p.add_argument("--gpu", default=None,
                   help="the GPU of the GPU table to read predictions for (default: the runs' device_name's)")
    p.add_argument("--measured", action="store_true", help="print the measured points alone; predict nothing")
    p.add_argument("--predicted", type=Path, default=None,
                   help="read the predictions of a --save file; only the points it lacks are predicted")
    p.add_argument("--timeout", type=int, default=None, metavar="S",
                   help="crossover predict's --timeout: seconds its counting of one step may take (default: its own)")
    args = p.parse_args(argv)
    points = measured(pd.concat([pd.read_json(path, lines=True) for path in args.runs], ignore_index=True))
    if args.measured:
        print("\n".join(measured_table(points)))
        return 0
    eager = points[points["engine"] == "eager"]
    devices = load_devices()
    predicted = {k: Predicted(**v) for k, v in json.loads(args.predicted.read_text()).items()} if args.predicted \
        else {}
    asked = {key(m): Point(m["workload"], tuple(json.loads(m["params"]).items()), int(m["batch_size"]),
                           int(m["dataset_size"]), m["precision"], args.gpu or device_key(m["device_name"], devices),
                           args.timeout) for _, m in eager.iterrows() if key(m) not in predicted}
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        predicted |= dict(zip(asked, pool.map(predict, asked.values())))
    if args.save:
        args.save.write_text(json.dumps({k: v.__dict__ for k, v in predicted.items()}, indent=1) + "\n")
    first = points.iloc[0]
    print(f"{', '.join(map(str, args.runs))}: {first['device_name']}; `crossover predict` from {ROOT}, "
          f"its {args.gpu or device_key(first['device_name'], devices)} line")
    rows = compared(eager, predicted)
    print("\n".join(table(rows)))
    print("\n".join(summary(rows)))
    if len(cured := cures(points)) > 1:
        print("\nhost-bound points cured as a user would (engines: the plain loop of python studies/parity.py); predict says eager alone")
        print("\n".join(cured))
    return 0


if __name__ == "__main__":
    sys.exit(main())

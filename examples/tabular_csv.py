"""A user's workload: an MLP classifier on your own CSV, read with pandas.

    python examples/tabular_csv.py data.csv --target label --width 256 --depth 3 --devices cpu
    python examples/tabular_csv.py data.csv --smoke                  # the smallest size, 2 epochs
    python sweeps/scaling.py --workload examples/tabular_csv.py:workload --param csv=$PWD/data.csv --param target=label

The CSV has a header row. Its numeric columns other than the target are the features, standardised by
the mean and standard deviation of the trial's training rows (other columns are left out); the target
column's distinct values are the classes (pd.factorize). The last fifth of the rows is the test split,
the same rows at every dataset_size, so test accuracy compares across sizes; a trial trains on the
first dataset_size of the other rows, in the file's order: shuffle a file sorted by its target first.
The model: Linear(features, width), ReLU, depth hidden layers of width, Linear(width, classes).

Run as a script, it sweeps dataset_size over a sixteenth, a quarter and all of the CSV's training rows
(--smoke: the smallest) at the one --width and --depth given. Through sweeps/scaling.py, which has no
flag for width and depth, it sweeps the Workload's own grid: 625, 2,500 and 10,000 rows at width 64,
depth 2, so the CSV needs 12,500 rows there.

A sweep's config holds the CSV's path, not its contents: a file changed in place keeps the rows
measured before it (run it under another path or --name). Each row's data_source names the file and
its SHA-256, so rows of different contents can be told apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from crossover.analysis import summary
from crossover.analysis.cli import HelpFormatter
from crossover.sweeps import cli, cluster, runner
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.config import ConfigError, TrialConfig
from crossover.data import Data
from crossover.trainables.trial import resolve
from crossover.workload import Param, Workload
from crossover.trainables.workloads import mlp

TEST_SHARE = 5  # the last 1/TEST_SHARE of the rows is the test split
_FRAMES: dict[str, pd.DataFrame] = {}  # path -> the parsed CSV, once per process: trials and the model's size share it


def frame(path: str) -> pd.DataFrame:
    """The CSV at `path`, parsed once per process."""
    if path not in _FRAMES:
        _FRAMES[path] = pd.read_csv(path)
    return _FRAMES[path]


def train_rows(n: int) -> int:
    """Rows a trial may train on, of a CSV of `n`: all but the test split."""
    return n - n // TEST_SHARE


def columns(cfg: TrialConfig) -> tuple[pd.DataFrame, pd.Series]:
    """The features (the numeric columns but the target) and the target of the trial's CSV."""
    table, target = frame(cfg.params["csv"]), cfg.params["target"]
    return table.drop(columns=target).select_dtypes("number"), table[target]


def make_data(cfg: TrialConfig) -> Data:
    features, target = columns(cfg)
    x = torch.from_numpy(features.to_numpy(np.float32))
    y = torch.from_numpy(pd.factorize(target, sort=True)[0].astype(np.int64))
    n = train_rows(len(y))
    train = x[: cfg.dataset_size]
    mean, std = train.mean(0), train.std(0, correction=0)
    std = torch.where(std > 0, std, 1.0)  # a constant column stays 0 instead of dividing by 0
    digest = hashlib.sha256(Path(cfg.params["csv"]).read_bytes()).hexdigest()[:12]
    return Data((train - mean) / std, y[: cfg.dataset_size], (x[n:] - mean) / std, y[n:],
                f"csv:{cfg.params['csv']} (sha256 {digest})")


def make_model(cfg: TrialConfig) -> nn.Module:
    features, target = columns(cfg)
    return mlp([features.shape[1]] + [cfg.width] * cfg.depth + [target.nunique()])


def check(cfg: TrialConfig) -> None:
    """Refuses, before anything runs, a CSV that is not given, not there, or not one this model can learn."""
    path, target = cfg.params["csv"], cfg.params["target"]
    if not path:
        raise ConfigError("csv", "workload 'tabular_csv' needs your CSV: give --param csv=PATH (absolute; a header "
                                 "row, numeric feature columns and a target column), or run "
                                 "python examples/tabular_csv.py PATH")
    if not Path(path).is_absolute():  # every Ray worker reads it, from a working directory of its own
        raise ConfigError("csv", f"csv must be an absolute path, got {path!r}: give --param csv={Path(path).resolve()}")
    if not Path(path).is_file():
        raise ConfigError("csv", f"no file {path}: give the path of an existing CSV (--param csv=PATH)")
    try:
        table = frame(path)
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise ConfigError("csv", f"{path} does not parse as a CSV with a header row: {exc}") from None
    if target not in table.columns:
        raise ConfigError("target", f"{path} has no column {target!r} (its columns: {list(table.columns)}): "
                                    "give --param target=COLUMN")
    for column in table.columns.drop(target):
        numbers = pd.to_numeric(table[column], errors="coerce")
        bad = numbers.isna() & table[column].notna()
        if bad.any() and numbers.notna().any():  # a word among numbers: a column of words alone is left out
            row = int(bad.to_numpy().argmax())
            raise ConfigError("csv", f"{path}, line {row + 2}, column {column!r}: {table[column].iloc[row]!r} is not a "
                                     "number in a column of numbers: fix the cell, or drop the column")
    features, _ = columns(cfg)
    if features.shape[1] == 0:
        raise ConfigError("csv", f"{path} has no numeric column besides the target {target!r}: the features must "
                                 "be numbers")
    empty = [c for c in [*features, target] if table[c].isna().any()]
    if empty:
        raise ConfigError("csv", f"{path} has empty cells in columns {empty}: fill them or drop those rows")
    if cfg.dataset_size > train_rows(len(table)):
        raise ConfigError("dataset_size", f"dataset_size must be <= {train_rows(len(table)):,}, the training rows of "
                                          f"{path} ({len(table):,} rows, the last fifth held out for testing), got "
                                          f"{cfg.dataset_size:,}")


workload = Workload(
    "tabular_csv",
    make_data=make_data,
    make_model=make_model,
    make_loss=nn.CrossEntropyLoss,
    make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr),
    defaults={"depth": 2, "width": 64, "batch_size": 64, "dataset_size": 10_000, "epochs": 3, "lr": 1e-3},
    axes={"depth", "width"},
    params={"csv": Param("", help="path of the CSV (absolute): a header row, numeric features, a target column"),
            "target": Param("target", help="the column of class labels")},
    check=check,
    fusable=True,  # Adam, accuracy, one tensor of inputs: K seeds train as one vmapped MLP
    pipeline=True,  # mlp() is an nn.Sequential: pipe:N cuts it into stages
)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    p.add_argument("csv", type=Path, help="the CSV: a header row, numeric feature columns and the target column")
    p.add_argument("--target", default="target", help="the column of class labels")
    p.add_argument("--width", type=cli.at_least(1), default=workload.defaults["width"], help="nodes per hidden layer")
    p.add_argument("--depth", type=cli.at_least(1), default=workload.defaults["depth"], help="hidden layers")
    p.add_argument("--devices", default=None, help="comma-separated devices (cpu, cuda, ...); default: every device "
                                                   "the Ray cluster has")
    p.add_argument("--smoke", action="store_true", help="the smallest dataset size alone, 2 epochs")
    p.add_argument("--repeats", type=cli.at_least(1), default=3, help="independent runs (seeds) per size")
    p.add_argument("--out", type=Path, default=Path("results"), help="results root: rows go to OUT/NAME/")
    p.add_argument("--name", default="tabular_csv", help="sweep name")
    p.add_argument("--address", default=None, help="address of a running Ray cluster (default: start a local one)")
    return p.parse_args(argv)


def space(args: argparse.Namespace, planner: Planner) -> Space:
    """The sweep: the workload's grid rule (Workload.grid) at the CSV's training rows, at one width and depth;
    `planner` plans the workload in a process of its own (sweeps/plan.py)."""
    params = {"csv": str(args.csv.expanduser().resolve()), "target": args.target}
    ref = f"{Path(__file__).resolve()}:workload"
    wl = planner.registry.register(ref)  # before Ray starts: its runtime_env ships the file to the workers
    resolve(TrialConfig(wl.name, module=wl.ref, dataset_size=1, batch_size=1, params=params))  # the CSV, checked
    sized = dataclasses.replace(wl, defaults={**wl.defaults, "dataset_size": train_rows(len(frame(params["csv"])))})
    grid = {**sized.grid("smoke" if args.smoke else "default"), "width": [args.width], "depth": [args.depth]}
    cluster.connect(args.address, planner.registry.shipping)
    types = cluster.node_types()
    devices = tuple(args.devices.split(",")) if args.devices else cluster.cluster_devices(types)
    return Space(args.name, {ref: grid}, devices, cluster.node_cpus(types), args.repeats, params=params,
                 planner=planner)


def main(argv=None) -> int:
    args = parse_args(argv)
    planner = Planner()
    return runner.run_studies(lambda: [space(args, planner)], args.out, render, planner)


def render(rows: pd.DataFrame) -> str:
    """The summary as sweeps/scaling.py prints it: each arm (device, its name and threads) a column."""
    return summary.render(rows.assign(device=rows["arm"]))


if __name__ == "__main__":
    sys.exit(main())

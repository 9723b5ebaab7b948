"""Reading results directories: one or several sweeps' Parquet rows as one DataFrame, checked.

    from .load import read
    rows = read("results/laptop", "results/h100")      # what `python -m crossover.analysis report` calls
    rows = read("results")                             # every sweep under it (`sweep_dirs`)

Every file is read on its own, so a directory whose rows were written by two versions of
crossover/schema.py is named and refused instead of being silently merged. Each row gains `results_dir`
(where it came from), `arm` (what it ran on: the device string, plus the device name and thread
count where the rows hold more than one of those for the same device, as when a laptop's CPU and a
cloud host's CPU are read together) and its device's fields (DEVICE_FIELDS: `is_cpu`, `whole_gpu`, ...,
parsed once here by trainables/devices.py, so that no reader tests the device string). The row helpers
every reader shares live here too: `eager_ok` (the rows a plain run is compared on), `keys` (a row's
configuration as one string, KEY) and `is_reference` (a row of the shipped reference folders). Reads rows
only (pyarrow, pandas); never imports torch or ray.
"""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from crossover.schema import CONFIG_COLUMNS, MISSING_PRECISION, NAMES, SCHEMA, SCHEMA_VERSION, SIZE_AXES

from ..trainables.devices import parse

# What tells two arms of the same device string apart, in the order they appear in the label.
ARM_PARTS = ("device_name", "torch_threads")
# The DeviceSpec properties each row gains when read: what the readers select rows by (all bool but gpus).
DEVICE_FIELDS = ("is_cpu", "whole_gpu", "packed", "pipelined", "distributed", "uses_gpu", "gpus")


def packaged(name: str) -> Path:
    """A file or folder the analysis package carries (pyproject.toml package-data: prices.yaml, devices.yaml,
    home_boxes/, notebooks/, and reference/ in a wheel), found by importlib.resources wherever the package is
    (a checkout, site-packages); a Path, as a wheel installs as files."""
    found = resources.files("crossover.analysis") / name
    if not isinstance(found, Path):  # a Traversable of no file (a zip import), which Path() refuses as well
        raise TypeError(f"{name}: crossover.analysis must be installed as files (pip install), got {found!r}")
    return found.resolve()


@cache
def _checkout() -> Path | None:
    """The checkout this code runs from (an editable install too): the folder above the packages, where it holds
    results/reference/; None where it is installed from a wheel."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "results" / "reference").is_dir() else None


@cache
def _reference() -> Path:
    return checkout / "results" / "reference" if (checkout := _checkout()) else packaged("reference")


# CHECKOUT, the checkout (`_checkout`), and REFERENCE, the shipped reference rows, measured on other hosts
# (results/reference/*/README.md): set beside yours by default (analysis/summary.py), so a folder of your sweeps is
# read without them (`sweep_dirs`). Installed from a wheel, its copy of them: crossover/analysis/reference/
# (pyproject.toml maps the one onto the other). Both are looked for on the disk at their first use (`__getattr__`),
# not as the module is imported.
CHECKOUT: Path | None
REFERENCE: Path


def __getattr__(name: str) -> Path | None:
    """CHECKOUT and REFERENCE, found at their first use (a module's attributes made on demand, PEP 562)."""
    if name == "CHECKOUT":
        return _checkout()
    if name == "REFERENCE":
        return _reference()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# A sweep's configuration, for matching rows of any run length and seed to it (`keys`).
KEY = [c for c in CONFIG_COLUMNS if c not in ("device", "seed", "epochs", "warmup_epochs")]


def is_reference(results_dir) -> bool:
    """Whether a row's results_dir is one of the shipped reference folders (under REFERENCE)."""
    return Path(str(results_dir)).resolve().is_relative_to(_reference())


def _fmt(value) -> str:
    return "-" if pd.isna(value) else f"{value:g}" if isinstance(value, (int, float, np.number)) else str(value)


def keys(frame: pd.DataFrame, columns: list[str] = KEY) -> pd.Series:
    """Each line's configuration as one string (nulls and numbers of any dtype written alike)."""
    return frame[columns].apply(lambda r: "|".join(_fmt(v) for v in r), axis=1) if len(frame) else pd.Series(dtype=str)


def eager_ok(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows of the eager engine at PyTorch's default precision (what a user's plain run gets; a CPU
    row at fp32 reads as it, `compared_precision`), each with its config_key (`keys`)."""
    ok = rows[(rows["status"] == "ok") & rows["engine"].fillna("eager").eq("eager") & rows["precision"].eq("default")]
    return ok.assign(config_key=keys(ok))


def read(*dirs: str | Path) -> pd.DataFrame:
    """All rows of `dirs` (each a results/<sweep>/ directory, or a folder of them: `sweep_dirs`), with
    `results_dir` (the sweep's directory), `arm` and the device's fields added (`labelled`)."""
    if not dirs:
        raise ValueError("no results directory given: pass one or more, e.g. results/scaling")
    tables: list[pa.Table] = []
    versions: dict[int, Path] = {}  # schema version -> the first file of it
    for directory in dict.fromkeys(d for given in dirs for d in sweep_dirs(given)):  # each once, in order
        for path in sorted(directory.glob("*.parquet")):
            try:
                table = pq.read_table(path)
            except (pa.ArrowException, OSError) as exc:  # truncated by a crash, or not Parquet at all
                raise ValueError(f"{path} is not a readable row file ({str(exc).splitlines()[0]}): move it out of "
                                 f"{directory}, or run its sweep again, which sets it aside") from None
            _check_file(path, table)
            for version in set(table["schema_version"].to_pylist()):
                versions.setdefault(version, path)
            tables.append(table.append_column("results_dir", pa.array([str(directory)] * len(table))))
    _check_versions(versions)
    rows = pa.concat_tables(tables, promote_options="default").to_pandas()
    _check_times(rows)
    # a column added to the schema after these rows were written (context, precision) reads as null
    rows = rows.assign(**{name: None for name in NAMES if name not in rows})
    return labelled(rows)


def labelled(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with what `read` adds to the stored columns besides `results_dir`: the fields of each row's
    parsed device (DEVICE_FIELDS), `precision` as compared (`compared_precision`), and `arm`."""
    rows = rows.assign(**device_fields(rows))
    rows = rows.assign(precision=compared_precision(rows))
    return rows.assign(arm=arm_labels(rows))


def precisions_of(frame: pd.DataFrame) -> pd.Series:
    """Each row's precision (a row's, a counted step's or a configuration's), a missing one read as the schema's
    one meaning of it (MISSING_PRECISION): the one place a frame without it is read."""
    if "precision" not in frame:
        return pd.Series(MISSING_PRECISION.value, index=frame.index)
    return frame["precision"].astype(object).fillna(MISSING_PRECISION.value)


def compared_precision(rows: pd.DataFrame) -> pd.Series:
    """Each row's precision as the analysis compares it: a row written before the column ran at fp32, and on
    a CPU, where TF32 does not exist, strict fp32 and PyTorch's default are one computation: such CPU rows
    read as 'default', so they stand beside the GPUs' default rows. On a GPU the two stay apart (fp32 turns
    off the TF32 that cuDNN's convolutions use by default)."""
    precision = precisions_of(rows)
    return precision.mask(rows["is_cpu"] & precision.eq("fp32"), "default")


def device_fields(rows: pd.DataFrame) -> dict[str, pd.Series]:
    """Column -> each row's DeviceSpec property (DEVICE_FIELDS), the device string parsed once per value."""
    specs = {}
    for device in rows["device"].unique():
        try:
            specs[device] = parse(device)
        except ValueError as exc:  # ConfigError
            where = rows.loc[rows["device"] == device, "results_dir"].iloc[0] if "results_dir" in rows else "the rows"
            raise ValueError(f"{where}: a row's device column is {device!r}, which is not a device string ({exc}); "
                             "move its file out of the directory, or rewrite the column") from None
    # astype: an empty frame's column would be object, not bool or int
    return {name: rows["device"].map(lambda d, n=name: getattr(specs[d], n)).astype(int if name == "gpus" else bool)
            for name in DEVICE_FIELDS}


def sweep_dirs(directory: str | Path) -> list[Path]:
    """The sweeps' directories that `directory` names: itself where it holds *.parquet rows (one sweep's,
    results/scaling), else every folder under it that does (results/, results/reference/, one of its
    hosts' folders). Folders named '_...' or '.…' (Tune's state, runs, locks, reports, rows set aside)
    are skipped, and so is the shipped REFERENCE under a folder outside it: its GPU rows are set beside
    yours by default, its other rows are other hosts' studies (pass results/reference to read them)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"results directory {directory} does not exist: run a sweep first "
                                f"(crossover sweep --out {directory.parent} --name {directory.name}) or check the path")
    skip = None if directory.resolve().is_relative_to(reference := _reference()) else reference
    found = []
    for root, subdirs, files in os.walk(directory):
        here = Path(root)
        if any(f.endswith(".parquet") for f in files):
            found.append(here)
            subdirs.clear()  # a sweep's directory holds its rows alone (sweeps/store.py)
        else:
            subdirs[:] = sorted(d for d in subdirs if not d.startswith(("_", ".")) and (here / d).resolve() != skip)
    if not found:
        shipped = f" (the reference rows shipped with crossover, {skip}, are read only where you pass that folder)" \
            if skip and (directory / skip.name).resolve() == skip else ""
        raise ValueError(f"results directory {directory} holds no *.parquet rows, in it or in any sweep's folder "
                         f"under it{shipped}: run a sweep first (crossover sweep --out {directory}), or "
                         "pass the directory that has them")
    return sorted(found)


def notebook_dirs(spec: str | None, root: Path) -> list[Path]:
    """The results directories a notebook reads (analysis/notebooks/): those of `spec` ($CROSSOVER_RESULTS,
    separated by ':'), a relative one from `root` (the checkout, or the folder you copied the notebooks to: where
    the README's commands run and results/ lives, not the notebook's own folder, where its kernel starts); else
    root/results/scaling where a sweep wrote it; else the newest reference scaling sweep (REFERENCE/*/scaling)
    that has rows of a CPU and of a GPU, a crossover to show (a second host's folder may hold GPU rows alone);
    else none."""
    dirs = [Path(d) if Path(d).is_absolute() else root / d for d in (spec or "").split(":") if d]
    if dirs:
        return dirs
    if (root / "results" / "scaling").is_dir():
        return [root / "results" / "scaling"]
    shipped = {d: rows["finished_at"].max() for d in _reference().glob("*/scaling")
               if (rows := read(d))["is_cpu"].any() and not rows["is_cpu"].all()}
    return [max(shipped, key=shipped.__getitem__)] if shipped else []


def _check_file(path: Path, table: pa.Table) -> None:
    """A row file of this schema: a schema_version on every row, a status, and each column of the type
    crossover/schema.py gives it; else refused, naming the file, the column and the fix."""
    for column in ("schema_version", "status"):
        if column not in table.column_names:
            raise ValueError(f"{path} has no {column} column: it was not written by a crossover sweep; move it "
                             f"out of {path.parent}")
    if table["schema_version"].null_count:
        raise ValueError(f"{path} has rows with a null schema_version: it was not written by a crossover sweep; "
                         f"move it out of {path.parent}, or re-run its sweep")
    for field in table.schema:
        if field.name in SCHEMA.names and not _same_type(field.type, SCHEMA.field(field.name).type):
            raise ValueError(f"{path}: column {field.name} is {field.type}, but crossover's schema makes it "
                             f"{SCHEMA.field(field.name).type}: rewrite it to the schema (python -m crossover.analysis migrate "
                             f"{path.parent}) or re-run its sweep")


def _same_type(read: pa.DataType, written: pa.DataType) -> bool:
    """Whether a column read back is of the schema's type: Parquet keeps timestamp[s] as milliseconds,
    and a column of nulls alone may come back typeless."""
    both_timestamps = pa.types.is_timestamp(read) and pa.types.is_timestamp(written) and read.tz == written.tz
    return read == written or both_timestamps or read == pa.null()


# What the analysis computes with, from each ok row: the crossovers resample `epoch_s`, the costs use
# `total_s` (a trial) and `samples_per_s` (a million samples). Each must be a positive, finite number
# (a list of them for epoch_s); `total_s` and `samples_per_s` may be null (rows that predate them).
_MEASURED = {"epoch_s_median": "an epoch time", "epoch_s": "an epoch time", "total_s": "a trial time",
             "samples_per_s": "a throughput"}
_MAY_BE_NULL = ("total_s", "samples_per_s")


def _positive(value) -> bool:
    try:
        return bool(np.isfinite(value) and value > 0)
    except TypeError:  # None, or not a number
        return False


def _check_times(rows: pd.DataFrame) -> None:
    """Every ok row's measured times and throughput positive, finite numbers (_MEASURED); a row that is
    not is named (its file, sweep, trial and configuration), never dropped or printed as a measurement."""
    if "epoch_s_median" not in rows:
        raise ValueError("the rows have no epoch_s_median column: they were not written by a crossover sweep")
    ok = rows["status"] == "ok"
    for column, what in _MEASURED.items():
        if column not in rows:
            continue
        if column == "epoch_s":  # every epoch timed; null only where a row kept no list
            good = rows[column].map(lambda xs: xs is None or (len(xs) > 0 and all(_positive(x) for x in xs)))
        else:
            good = rows[column].map(_positive) | (rows[column].isna() if column in _MAY_BE_NULL else False)
        bad = rows[ok & ~good.astype(bool)]
        if len(bad):
            r = bad.iloc[0]
            value = [x if x is None else float(x) for x in r[column]] if column == "epoch_s" else r[column]
            unit = "samples a second" if column == "samples_per_s" else "seconds"
            raise ValueError(f"{len(bad)} ok rows with {what} that is not a positive, finite number of {unit}, "
                             f"e.g. {column}={value} in sweep {r['sweep']!r}, trial {r['trial_id']}, "
                             f"config {r['config_hash']} ({r['workload']} {r['device']} {sizes_label(bad.head(1)).iloc[0]}) "
                             f"in {r['results_dir']}: move that file out of the directory, or re-run its configuration")


def _check_versions(versions: dict[int, Path]) -> None:
    """One schema version across every row read, and the one this code reads."""
    if len(versions) > 1:
        seen = ", ".join(f"version {v} (e.g. {p})" for v, p in sorted(versions.items()))
        raise ValueError(f"rows of {len(versions)} schema versions read together: {seen}; keep each version's "
                         "rows in their own results directory and re-run the old sweep to compare them")
    (version, path), = versions.items()
    if version != SCHEMA_VERSION:
        raise ValueError(f"rows of schema version {version} (e.g. {path}), but this analysis reads version "
                         f"{SCHEMA_VERSION}: re-run the sweep with this version of crossover")


def arm_labels(rows: pd.DataFrame) -> pd.Series:
    """'cuda', 'cuda graph bf16' (an engine other than eager, a precision other than PyTorch's default: each
    part of the arm, so rows of two precisions are never pooled; a row written before the precision column
    reads as fp32), or 'cpu (Intel Xeon, 2 threads)' where one device string covers several machines or
    thread counts."""
    labels = rows["device"].astype(str)
    labels += rows["engine"].map(lambda v: "" if pd.isna(v) or v == "eager" else f" {v}")
    labels += precisions_of(rows).map(lambda v: "" if v == "default" else f" {v}")
    for _, group in rows.groupby("device", sort=False):
        # a failed trial's row names the CPU it failed on, not the device it asked for: it tells no arm apart
        ok = group[group["status"] == "ok"]
        parts = [c for c in ARM_PARTS if ok[c].nunique(dropna=False) > 1]
        if parts:
            detail = group.apply(lambda r: ", ".join(_part(c, r[c]) for c in parts), axis=1)
            labels[group.index] = labels[group.index] + " (" + detail + ")"
    return labels


def _part(column: str, value) -> str:
    return f"{value:.0f} threads" if column == "torch_threads" else str(value)


def environment(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per arm and host: what the rows say each measured device was."""
    columns = ["arm", "device", "device_name", "cpu_model", "hostname", "torch_threads", "torch_version",
               "cuda_version", "ray_version", "python_version", "results_dir"]
    counts = rows.groupby(columns, dropna=False).agg(rows=("status", "size"), failed=("status", lambda s: int((s != "ok").sum())))
    return counts.reset_index()


def cold_starts(rows: pd.DataFrame) -> pd.Series:
    """Whether each row was its worker process's first trial (`cold_start`: its setup, transfer and
    warm-up paid imports, the CUDA context and the allocator's growth that later trials find done).

    Rows written before the column existed hold null, and for them this is a guess: per results
    directory, host and device, the trial that finished first (`finished_at`, whole seconds; ties go
    to the lowest Tune trial id, which Tune starts first) is taken as cold. A sweep that ran several
    workers of a device at once had as many cold trials; the guess finds the first of them only
    (seen in results/reference/h200x2-2026-11-21/scaling: two CUDA trials with a 0.25 s warm-up,
    where the rest took 0.02 s). Rows without a finish time are taken as warm."""
    recorded = rows["cold_start"] if "cold_start" in rows else pd.Series(None, index=rows.index, dtype=object)
    cold = recorded.eq(True)
    guess = rows[recorded.isna()]
    if "finished_at" in guess and guess["finished_at"].notna().any():
        keys = [c for c in ("results_dir", "hostname", "device") if c in guess]
        timed = guess[guess["finished_at"].notna()]
        order = ["finished_at", "trial_id"] if "trial_id" in timed else ["finished_at"]
        first = timed.sort_values(order, na_position="last").groupby(keys, dropna=False, sort=False).head(1).index
        cold[first] = True
    return cold


def representative(rows: pd.DataFrame) -> pd.DataFrame:
    """Per workload, one ok row per arm of one configuration: the largest measured on the most arms."""
    ok = rows[rows["status"] == "ok"]
    config = [c for c in CONFIG_COLUMNS if c not in ("device", "seed")]
    keyed = ok.assign(_key=ok.groupby(config, dropna=False).ngroup())
    score = keyed.groupby("_key").agg(arms=("arm", "nunique"), n_params=("n_params", "max"),
                                      dataset_size=("dataset_size", "max"), workload=("workload", "first"))
    best = score.sort_values(["arms", "n_params", "dataset_size"]).groupby("workload").tail(1).index
    return keyed[keyed["_key"].isin(best)].drop_duplicates(["_key", "arm"]).drop(columns="_key")


def sizes_label(rows: pd.DataFrame) -> pd.Series:
    """'depth=12, batch_size=100, dataset_size=1,000': the sizes of each row's configuration."""
    labels = [", ".join(f"{k}={v:,.0f}" for k, v in r.items() if pd.notna(v)) for _, r in rows[list(SIZE_AXES)].iterrows()]
    return pd.Series(labels, index=rows.index, dtype=str)  # a Series even with no rows (all trials failed)


def config_label(rows: pd.DataFrame) -> pd.Series:
    """'disc | depth=12, batch_size=100, dataset_size=1,000': which configuration a panel shows."""
    return rows["workload"] + " | " + sizes_label(rows)

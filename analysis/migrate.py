"""Rewriting row files to the current schema: one schema version, one set of columns.

    python -m crossover.analysis migrate results/reference          # every row file below, recursively
    python -m crossover.analysis migrate --copy-counts FROM_DIR TO_DIR...   # per-class step costs from FROM's GPU rows
    python -m crossover.analysis migrate --compact results/reference          # each sweep's rows as one file

A row file whose columns differ from crossover/schema.py's SCHEMA (written before a column was added,
or with a column of nulls alone stored typeless) is rewritten as exactly SCHEMA: the columns it lacks
become null, every column in schema order and of the schema's type, and its schema_version is kept.
Rows of another schema version than SCHEMA_VERSION, a column the schema does not know, or a type that
cannot be cast safely (text where a number goes, a number past its type, a fraction in an integer
column, a timestamp of another time zone) are refused naming the file, the column and the fix; every
file is checked before any is written, so a refusal leaves every file as it was. Row files are the
*.parquet files below the directories given, past any file or folder whose name starts with '_' or '.'
(reports, Tune's state, files set aside, a writer's temporary file). Each is written under a
temporary name in its own directory, flushed to disk and renamed over the old one (analysis/atomic.py
`write_atomic`, with which sweeps/store.py writes every row): a crash leaves the old file or the new,
never half of one. Reads rows only (pyarrow); never imports torch or ray.

`--copy-counts` (`copy_counts`) fills a GPU row's per-op-class step costs (crossover/schema.py's
OP_COLUMNS, and flops/bytes/launches_per_step where the row has none) from the rows below FROM_DIR
that counted them: a step's costs are a property of the configuration on a CUDA device with the same
torch (same workload, grid axes, batch, precision, engine, loop: `COUNT_KEY`), not of its timing or
its GPU model. A row takes them where its key matches counted CUDA rows of exactly one set of counts,
and says so in `costs_note` (`COPIED`). CPU rows, rows that already have counts, and rows whose
configuration was counted nowhere or with differing counts are left as they were.

`--compact` (`compact`) turns each sweep's folder of row files (one a trial, as sweeps/store.py writes
them) into one file named after the folder, the rows in the order of their files, each config_hash
once: the shipped reference rows are an archive, read whole by every reader, and a file a trial
stored the schema's metadata (about 21 KB) once a row: 1,800 rows took about 38 MB, past what a lent
GPU machine's call carries beside Ray. A sweep run again into a compacted folder resumes as before
(sweeps/store.py reads the config hashes inside every file) and adds its files beside; `--compact`
again folds them in. The combined file is written first, then the others removed: a crash between
leaves each row twice, which the next `--compact` folds back to once.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from crossover.schema import CONFIG_COLUMNS, MISSING_PRECISION, OP_COLUMNS, SCHEMA, SCHEMA_VERSION, to_table

from ..trainables.devices import parse
from .atomic import write_atomic

# What makes two GPU rows' step costs equal: the configuration less its device and seed, how it ran
# (precision, null in rows written before the column: fp32; engine) and the torch that counted them.
COUNT_KEY = [c for c in CONFIG_COLUMNS if c not in ("device", "seed")] + ["precision", "engine", "torch_version"]
TOTALS = ("flops_per_step", "bytes_per_step", "launches_per_step")
COPIED = "per-class counts copied from the {name} row of the same configuration, same torch"


def row_files(*dirs: str | Path) -> list[Path]:
    """The *.parquet files below `dirs`, past names starting with '_' or '.' at any depth."""
    files = []
    for directory in map(Path, dirs):
        if not directory.is_dir():
            raise FileNotFoundError(f"results directory {directory} does not exist: check the path")
        files += [p for p in directory.rglob("*.parquet")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(directory).parts)]
    return sorted(files)


@cache  # worked out at the first file checked, not as the package is imported
def stored_schema() -> pa.Schema:
    """SCHEMA as it reads back from a Parquet file (which keeps timestamp[s] as milliseconds)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(SCHEMA.empty_table(), buffer)
    return pq.read_schema(pa.BufferReader(buffer.getvalue()))


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether a column's values can keep their meaning as `target`: nulls alone, numbers to numbers,
    text to text, timestamps of the same time zone. The cast itself then refuses a value that changes."""
    def number(t: pa.DataType) -> bool:
        return pa.types.is_integer(t) or pa.types.is_floating(t)

    def text(t: pa.DataType) -> bool:
        return pa.types.is_string(t) or pa.types.is_large_string(t)

    if pa.types.is_null(source) or source == target:
        return True
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        return source.tz == target.tz
    return (number(source) and number(target)) or (text(source) and text(target))


def to_schema(path: Path) -> pa.Table | None:
    """The rows of `path` as a table of exactly SCHEMA, or None where the file already is; raises
    ValueError naming the file, the column and the fix where it cannot be rewritten without loss."""
    keep = f"move {path.name} out of {path.parent}, or re-run its sweep with this checkout"
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path} is not readable as Parquet ({exc}): {keep}") from None
    if table.schema.equals(stored_schema(), check_metadata=False):
        return None
    if "schema_version" not in table.column_names or set(table["schema_version"].to_pylist()) != {SCHEMA_VERSION}:
        raise ValueError(f"{path}: column schema_version is not {SCHEMA_VERSION} on every row (crossover.schema's "
                         f"SCHEMA_VERSION): only rows of this version take its columns; {keep}")
    unknown = [name for name in table.column_names if name not in SCHEMA.names]
    if unknown:
        raise ValueError(f"{path}: column {unknown[0]} is not in crossover.schema: add it to COLUMNS (and bump "
                         f"SCHEMA_VERSION if it changes what a row means) before migrating, or {keep}")
    columns = []
    for field in SCHEMA:
        if field.name not in table.column_names:
            columns.append(pa.nulls(len(table), field.type))
            continue
        column = table[field.name]
        refused = f"{path}: column {field.name} is {column.type}, but crossover's schema makes it {field.type}"
        if not _castable(column.type, field.type):
            raise ValueError(f"{refused}: no cast keeps its meaning; {keep}")
        try:
            columns.append(column.cast(field.type, safe=True))
        except pa.ArrowInvalid as exc:
            raise ValueError(f"{refused}, and a value does not fit ({exc}): {keep}") from None
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def migrate(*dirs: str | Path) -> tuple[int, int]:
    """Rewrites every row file below `dirs` whose columns differ from SCHEMA; (rewritten, already current).
    Every file is checked first: one that cannot be rewritten stops the run before any is written."""
    files = row_files(*dirs)
    if not files:
        raise ValueError(f"no *.parquet row files below {', '.join(map(str, dirs))}: pass the results "
                         "directories that hold them (e.g. the reference rows shipped with crossover)")
    stale = {path: table for path in files if (table := to_schema(path)) is not None}
    for path, table in stale.items():
        write_atomic(path, table)
    return len(stale), len(files) - len(stale)


def _current(path: Path) -> pa.Table:
    """The rows of `path` as exactly SCHEMA (migrated in memory where its columns are older)."""
    table = to_schema(path)
    return pq.read_table(path) if table is None else table


def _count_key(row: dict) -> tuple:
    return tuple(MISSING_PRECISION.value if c == "precision" and row[c] is None else row[c] for c in COUNT_KEY)


def _counted(*dirs: str | Path) -> dict[tuple, dict]:
    """COUNT_KEY -> {counts: (name, value)... of OP_COLUMNS and TOTALS -> GPU names} of the ok
    single-GPU rows below `dirs` that have every per-class column."""
    found: dict[tuple, dict] = {}
    for path in row_files(*dirs):
        for row in _current(path).to_pylist():
            if parse(row["device"]).whole_gpu and row["status"] == "ok" and all(row[c] is not None for c in OP_COLUMNS):
                counts = tuple((c, row[c]) for c in (*OP_COLUMNS, *TOTALS))
                found.setdefault(_count_key(row), {}).setdefault(counts, set()).add(row["device_name"])
    return found


def _filled(row: dict, counted: dict[tuple, dict]) -> dict | None:
    """`row` with the counts of its configuration copied in, or None where it takes none: not a
    single-GPU row, already counted, or its configuration counted nowhere or with differing counts."""
    if not parse(row["device"]).whole_gpu or any(row[c] is not None for c in OP_COLUMNS):
        return None
    sets = counted.get(_count_key(row), {})
    if len(sets) != 1:
        return None
    (counts, names), = sets.items()
    new = {c: v for c, v in counts if c in OP_COLUMNS or row[c] is None}
    note = COPIED.format(name=" / ".join(sorted(names)))
    return row | new | {"costs_note": "; ".join(filter(None, [row["costs_note"], note]))}


def copy_counts(sources: list[str | Path], *dirs: str | Path) -> tuple[int, int]:
    """Fills the GPU rows below `dirs` that lack per-class counts from the rows below `sources` of the
    same configuration (module docstring); (rows filled, GPU rows left without counts). Every file is
    read before any is written; each changed file is written atomically, as exactly SCHEMA."""
    counted = _counted(*sources)
    if not counted:
        raise ValueError(f"no ok cuda rows with per-class counts below {', '.join(map(str, sources))}: pass a "
                         "folder of rows counted on a GPU (e.g. an H100's reference rows shipped with crossover)")
    files = row_files(*dirs)
    if not files:
        raise ValueError(f"no *.parquet row files below {', '.join(map(str, dirs))}: pass the results "
                         "directories that hold them")
    changed, filled, left = {}, 0, 0
    for path in files:
        rows = _current(path).to_pylist()
        new = [_filled(row, counted) for row in rows]
        filled += sum(n is not None for n in new)
        left += sum(n is None and parse(r["device"]).whole_gpu and r["matmul_flops_per_step"] is None
                    for r, n in zip(rows, new))
        if any(n is not None for n in new):
            changed[path] = to_table([n or r for r, n in zip(rows, new)])
    for path, table in changed.items():
        write_atomic(path, table)
    return filled, left


def compact(*dirs: str | Path) -> tuple[int, int]:
    """Each folder below `dirs` holding more than one row file, as one file `<folder>.parquet` of exactly
    SCHEMA (module docstring); (folders compacted, row files removed)."""
    by_folder: dict[Path, list[Path]] = {}
    for path in row_files(*dirs):
        by_folder.setdefault(path.parent, []).append(path)
    if not by_folder:
        raise ValueError(f"no *.parquet row files below {', '.join(map(str, dirs))}: pass the results "
                         "directories that hold them (e.g. the reference rows shipped with crossover)")
    tables = {folder: [_current(p) for p in files] for folder, files in by_folder.items() if len(files) > 1}
    removed = 0
    for folder, parts in tables.items():
        rows = pa.concat_tables([t.cast(SCHEMA) for t in parts])
        first, seen = [], set()
        for i, h in enumerate(rows["config_hash"].to_pylist()):
            if h not in seen:
                seen.add(h)
                first.append(i)
        target = folder / f"{folder.name}.parquet"
        write_atomic(target, rows.take(first))
        for path in by_folder[folder]:
            if path != target:
                path.unlink()
                removed += 1
    return len(tables), removed

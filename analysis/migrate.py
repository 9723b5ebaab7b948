"""Rewriting row files to the current schema: one schema version, one set of columns.

    python -m analysis migrate results/reference          # every row file below, recursively

A row file whose columns differ from analysis/schema.py's SCHEMA (written before a column was added,
or with a column of nulls alone stored typeless) is rewritten as exactly SCHEMA: the columns it lacks
become null, every column in schema order and of the schema's type, and its schema_version is kept.
Rows of another schema version than SCHEMA_VERSION, a column the schema does not know, or a type that
cannot be cast safely (text where a number goes, a number past its type, a fraction in an integer
column, a timestamp of another time zone) are refused naming the file, the column and the fix; every
file is checked before any is written, so a refusal leaves every file as it was. Row files are the
*.parquet files below the directories given, past any file or folder whose name starts with '_' or '.'
(reports, Tune's state, files set aside, a writer's temporary file). Each is written under a
temporary name in its own directory, flushed to disk and renamed over the old one (`write_atomic`,
with which sweeps/store.py writes every row): a crash leaves the old file or the new, never half of
one. Reads rows only (pyarrow); never imports torch or ray.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.schema import SCHEMA, SCHEMA_VERSION


def row_files(*dirs: str | Path) -> list[Path]:
    """The *.parquet files below `dirs`, past names starting with '_' or '.' at any depth."""
    files = []
    for directory in map(Path, dirs):
        if not directory.is_dir():
            raise FileNotFoundError(f"results directory {directory} does not exist: check the path")
        files += [p for p in directory.rglob("*.parquet")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(directory).parts)]
    return sorted(files)


def _stored_schema() -> pa.Schema:
    """SCHEMA as it reads back from a Parquet file (which keeps timestamp[s] as milliseconds)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(SCHEMA.empty_table(), buffer)
    return pq.read_schema(pa.BufferReader(buffer.getvalue()))


STORED = _stored_schema()


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether a column's values can keep their meaning as `target`: nulls alone, numbers to numbers,
    text to text, timestamps of the same time zone. The cast itself then refuses a value that changes."""
    def number(t):
        return pa.types.is_integer(t) or pa.types.is_floating(t)

    def text(t):
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
    if table.schema.equals(STORED, check_metadata=False):
        return None
    if "schema_version" not in table.column_names or set(table["schema_version"].to_pylist()) != {SCHEMA_VERSION}:
        raise ValueError(f"{path}: column schema_version is not {SCHEMA_VERSION} on every row (analysis/schema.py's "
                         f"SCHEMA_VERSION): only rows of this version take its columns; {keep}")
    unknown = [name for name in table.column_names if name not in SCHEMA.names]
    if unknown:
        raise ValueError(f"{path}: column {unknown[0]} is not in analysis/schema.py: add it to COLUMNS (and bump "
                         f"SCHEMA_VERSION if it changes what a row means) before migrating, or {keep}")
    columns = []
    for field in SCHEMA:
        if field.name not in table.column_names:
            columns.append(pa.nulls(len(table), field.type))
            continue
        column = table[field.name]
        refused = f"{path}: column {field.name} is {column.type}, but analysis/schema.py makes it {field.type}"
        if not _castable(column.type, field.type):
            raise ValueError(f"{refused}: no cast keeps its meaning; {keep}")
        try:
            columns.append(column.cast(field.type, safe=True))
        except pa.ArrowInvalid as exc:
            raise ValueError(f"{refused}, and a value does not fit ({exc}): {keep}") from None
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would, for a moment, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:  # no /proc (macOS)
        pass
    return 0o022


def write_atomic(path: Path, table: pa.Table) -> None:
    """`table` over `path`, atomically: a temporary file beside it, fsynced, renamed, the rename fsynced."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide the rows from the user's group and others
        with os.fdopen(fd, "wb") as f:
            pq.write_table(table, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def migrate(*dirs: str | Path) -> tuple[int, int]:
    """Rewrites every row file below `dirs` whose columns differ from SCHEMA; (rewritten, already current).
    Every file is checked first: one that cannot be rewritten stops the run before any is written."""
    files = row_files(*dirs)
    if not files:
        raise ValueError(f"no *.parquet row files below {', '.join(map(str, dirs))}: pass the results "
                         "directories that hold them (e.g. results/reference)")
    stale = {path: table for path in files if (table := to_schema(path)) is not None}
    for path, table in stale.items():
        write_atomic(path, table)
    return len(stale), len(files) - len(stale)

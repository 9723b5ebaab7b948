"""Writing a file atomically: the one way a Parquet file of rows, or an entry of the cache, reaches the disk.

    from .atomic import write_atomic, write_text_atomic
    write_atomic(Path("results/scaling/3f2a.parquet"), schema.to_table([row]))
    write_text_atomic(Path("~/.cache/crossover/count/3f2a.json"), text)      # analysis/cache.py

A temporary file beside the target, flushed and fsynced, renamed over it, the rename fsynced: a crash,
a kill or a power loss leaves the old file or the new, never half of one, and of two writers at once the
last rename wins whole. sweeps/store.py writes every trial's row with it, analysis/migrate.py every
rewritten file, analysis/cache.py every entry. Needs only pyarrow, so the writer and the readers both
reach down to it; never imports torch or ray.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


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
    _replace(path, lambda f: pq.write_table(table, f))


def write_text_atomic(path: Path, text: str) -> None:
    """`text` (UTF-8) over `path`, atomically, as `write_atomic` writes a table."""
    _replace(path, lambda f: f.write(text.encode()))


def _replace(path: Path, write: Callable) -> None:
    """What `write` writes to a binary file, over `path`: a temporary file beside it, fsynced, renamed, the
    rename fsynced."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide the rows from the user's group and others
        with os.fdopen(fd, "wb") as f:
            write(f)
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

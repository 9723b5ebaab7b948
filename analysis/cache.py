"""What crossover computed once and can reuse, kept on disk in the user's cache folder: JSON entries by key.

    entry = cache.read("fit", key)              # None where absent, unreadable or written by another format
    cache.write("fit", key, {"theta": [...]})   # atomically (analysis/atomic.py): concurrent writers are safe

The folder is $XDG_CACHE_HOME/crossover, else ~/.cache/crossover: never a results folder (--out) nor the
checkout. Two things are kept: the per-class model fitted on the shipped reference rows (analysis/model/predict.py
`shipped`, keyed by `digest` of the rows' files, the device table, the public tables and the analysis code) and
one counted step of a job (sweeps/count_cache.py, keyed by the job's fingerprint, crossover's code and torch's
version). A key that names everything its value was computed from makes invalidation a change of key: an old
entry is never read again. Deleting the folder loses nothing but time. Never imports torch or ray.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

from .atomic import write_text_atomic

FORMAT = 1  # the entries' layout: a change of it is a change of every key


def folder() -> Path:
    """The cache's folder: $XDG_CACHE_HOME/crossover, else ~/.cache/crossover (created when first written)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crossover"


def digest(*parts: bytes | str) -> str:
    """32 hex digits of `parts`, each length-prefixed (so that ('ab', 'c') and ('a', 'bc') differ)."""
    hashed = hashlib.sha256(str(FORMAT).encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hashed.update(len(data).to_bytes(8, "little"))
        hashed.update(data)
    return hashed.hexdigest()[:32]


def files(*roots: Path, suffixes: tuple[str, ...] = ()) -> list[bytes]:
    """Every file under `roots` (each a file or a folder; of `suffixes` alone where given), as its path relative to
    its root and its bytes, in a fixed order: what a key of things read from those files is computed from."""
    found = []
    for root in (r for r in roots if r.exists()):
        paths = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in paths:
            if "__pycache__" in path.parts or (suffixes and path.suffix not in suffixes):
                continue
            found += [str(path.relative_to(root) if root.is_dir() else path.name).encode(), path.read_bytes()]
    return found


def version(package: str) -> str:
    """`package`'s installed version, read without importing it ('none' where it is not installed)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def read(kind: str, key: str) -> dict | None:
    """The entry `key` of `kind`, or None where there is none or it cannot be read as one."""
    try:
        entry = json.loads((folder() / kind / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def write(kind: str, key: str, value: dict) -> None:
    """`value` as the entry `key` of `kind`, atomically; where the folder cannot be written (a read-only home), not
    at all: the cache saves time, and its absence costs no answer."""
    path = folder() / kind / f"{key}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(value))
    except OSError:
        pass

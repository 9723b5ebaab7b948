"""What else ran on this node while a trial was timed: a registry of timed windows in the node's /tmp.

Each trial writes its window (start, then end) to a small file; at the end of its own window it reads
the others and keeps those whose windows overlapped. Packed trials, CPU trials beside GPU trials,
or a user's other jobs through crossover all show up in the row's `co_running`, so a timing taken
while the node was shared can be told from one taken alone (`--exclusive`).

    with Window("disc cuda/4 depth=6 seed=0", config_hash) as window:
        ...timed epochs...
    window.overlapping   # ['disc cuda/4 depth=6 seed=1', ...]
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

REGISTRY = Path(tempfile.gettempdir()) / "crossover-windows"
KEEP_S = 24 * 3600  # windows older than this are removed by the next trial (an open one: its pid was reused)
MARGIN_S = 10.0  # finished windows are kept this much longer: a trial starting now may not have written its file yet


class Window:
    def __init__(self, label: str, owner: str):
        self.label, self.owner = label, owner  # owner: ranks of one trial share it and are not neighbours
        self.path = REGISTRY / f"{owner}-{os.getpid()}-{time.time_ns()}.json"
        self.overlapping: list[str] = []

    def _write(self, record: dict) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.path)

    def __enter__(self) -> "Window":
        if not REGISTRY.exists():
            REGISTRY.mkdir(parents=True, exist_ok=True)
            # shared by every user's trials on the node, like /tmp itself: writable, but only the
            # owner of a file may remove it
            with contextlib.suppress(PermissionError):
                REGISTRY.chmod(0o1777)
        self.start = time.time()
        self._write({"label": self.label, "owner": self.owner, "start": self.start, "end": None})
        return self

    def __exit__(self, *exc) -> None:
        end = time.time()
        self._write({"label": self.label, "owner": self.owner, "start": self.start, "end": end})
        windows = {}
        for path in REGISTRY.glob("*.json"):
            try:
                windows[path] = json.loads(path.read_text())
            except (OSError, ValueError):  # removed or being replaced by its owner
                continue
        # An open window whose process is gone is over. A finished window matters only to windows open
        # when it ended: once every open one started after its end, no trial reads it again. Keeping a
        # day of windows instead made every trial read them all: 1,200 on this 2-core machine, 19 ms of
        # each 0.1 s trial's total_s (sweeps/overhead.py: fixed_s 19 ms before, 3.5 ms after).
        dead = {path for path, w in windows.items() if w["end"] is None and not _alive(path)}
        horizon = min([end] + [w["start"] for p, w in windows.items() if w["end"] is None and p not in dead])
        seen = set()
        for path, other in windows.items():
            # counted before it may be removed: a neighbour that finished well inside this window overlapped it
            if (path not in dead and other["owner"] != self.owner and other["start"] < end
                    and (other["end"] is None or other["end"] > self.start)):
                seen.add(other["label"])
            if (path in dead or (other["end"] or other["start"]) < end - KEEP_S
                    or (other["end"] is not None and other["end"] < horizon - MARGIN_S)):
                with contextlib.suppress(PermissionError):  # another user's: theirs to remove
                    path.unlink(missing_ok=True)
        self.overlapping = sorted(seen)


def _alive(path: Path) -> bool:
    """Whether the process that wrote the window file `path` (<owner>-<pid>-<ns>.json) still runs."""
    try:
        os.kill(int(path.stem.rsplit("-", 2)[1]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):  # another user's process, or a name not of this form
        return True
    return True

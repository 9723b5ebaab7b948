"""Why a child process that ran a user's code was killed: out of memory, or a SIGKILL of another cause.

    watch = Watch()                  # before the child starts: the kernel's OOM-kill counts
    watch.look(child.pid)            # while it runs, every few tenths of a second: its peak resident memory
    watch.why(child.returncode)      # once it ended: 'was killed by signal SIGSEGV', or what the memory says

The kernel's OOM killer ends a process with SIGKILL and tells the process nothing. It does count: the memory
cgroup the process lives in (cgroup v2 memory.events, v1 memory.oom_control) and the machine (/proc/vmstat) each
keep an `oom_kill` counter. A count that rose while the child ran says the kernel killed for memory then (on a
shared machine, possibly another process: the child's own peak, beside the limit, says whose). Where no counter
can be read, a child last seen near the limit is most likely out of memory; otherwise both causes are said.
sweeps/plan.py words its planning child's death with it.
"""

from __future__ import annotations

import signal
from pathlib import Path

NEAR = 0.85  # a peak at this share of the limit or more counts as near it: the last look may miss the final growth


def _counter(text: str, name: str = "oom_kill") -> int | None:
    """The number after `name` on its line of a kernel's file `text` ('oom_kill 3', 'VmHWM:  2048 kB'), or None."""
    for line in text.splitlines():
        key, *value = line.replace(":", " ").split()
        if key == name and value and value[0].isdigit():
            return int(value[0])
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _memory_cgroup() -> list[Path]:
    """This process's memory cgroup's folders, as mounted here: v2's unified one and v1's memory one."""
    found = []
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            found.append(Path("/sys/fs/cgroup") / path.lstrip("/"))
        elif "memory" in controllers.split(","):
            found.append(Path("/sys/fs/cgroup/memory") / path.lstrip("/"))
    return found


def oom_kills() -> tuple[int | None, ...]:
    """The kernel's OOM-kill counts: of this process's memory cgroup (a child started from here is in it), then
    the machine's; None where one cannot be read."""
    cgroup = [_counter(_read(folder / "memory.events")) if "memory" not in folder.parts else
              _counter(_read(folder / "memory.oom_control")) for folder in _memory_cgroup()]
    return (*cgroup, _counter(_read(Path("/proc/vmstat"))))


def memory_limit() -> tuple[int | None, str]:
    """(bytes, what they are) of the memory a child started from here may use: its cgroup's limit where lower than
    the machine's memory, else the machine's; (None, '') where neither can be read."""
    total = _counter(_read(Path("/proc/meminfo")), "MemTotal")  # kB
    best = (total * 1024, "this machine's memory") if total else (None, "")
    for folder in _memory_cgroup():
        for name in ("memory.max", "memory.limit_in_bytes"):
            text = _read(folder / name).strip()
            if text.isdigit() and (best[0] is None or int(text) < best[0]):
                best = (int(text), f"its memory cgroup's limit ({folder / name})")
    return best


def peak_rss(pid: int) -> int | None:
    """Bytes: the peak resident memory of the live process `pid` so far (VmHWM), None where it cannot be read."""
    kb = _counter(_read(Path(f"/proc/{pid}/status")), "VmHWM")
    return None if kb is None else kb * 1024


def gib(n: int) -> str:
    """Bytes as a reader sizes memory: '3.2 GiB', '310 MiB'."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def words(returncode: int, peak: int | None, limit: int | None, what: str, oom_rose: bool | None) -> tuple[str, bool]:
    """How a child that ended with `returncode` (< 0: killed by that signal) died, and whether the cause is
    memory (its fix is then memory's): `peak` its last peak resident bytes seen, `limit` the bytes it may use
    (`what` they are), `oom_rose` whether a kernel OOM-kill count rose while it ran (None: none could be read)."""
    name = signal.Signals(-returncode).name
    if returncode != -signal.SIGKILL:
        return f"was killed by signal {name}", False
    held = f"{gib(peak)} resident at its last look" if peak else "its memory unknown"
    of = f", of the {gib(limit)} of {what}" if limit else ""
    if oom_rose:
        return (f"ran out of memory: the kernel's OOM killer ended it (SIGKILL; the kernel's count of OOM kills "
                f"rose while it ran), {held}{of}"), True
    if oom_rose is None and peak is not None and limit is not None and peak >= NEAR * limit:
        return f"was killed by SIGKILL {held}, near the {gib(limit)} of {what}: most likely out of memory", True
    return (f"was killed by SIGKILL from outside ({held}{of}): the kernel's OOM killer (no OOM kill was "
            f"counted{' here' if oom_rose is False else ''}), or another process's kill"), False


class Watch:
    """One child's memory, watched from its parent (module docstring)."""

    def __init__(self) -> None:
        self.before = oom_kills()  # the kernel's counts as the child starts
        self.peak: int | None = None  # bytes: the child's peak resident memory, at the last look

    def look(self, pid: int) -> None:
        """The child's peak resident memory read again (kept where it can no longer be read: it has ended)."""
        self.peak = peak_rss(pid) or self.peak

    def why(self, returncode: int) -> tuple[str, bool]:
        """`words` of the child's death (returncode < 0) from what was watched."""
        after = oom_kills()
        pairs = [(a, b) for a, b in zip(self.before, after) if a is not None and b is not None]
        rose = any(b > a for a, b in pairs) if pairs else None
        return words(returncode, self.peak, *memory_limit(), rose)


MEMORY_FIX = ("make_data and the model need more memory than the process had: give a smaller dataset_size (the "
              "Workload's defaults, or --dataset-size), make the data as it is read (a memory-mapped file), or run "
              "where there is more memory")

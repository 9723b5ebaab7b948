"""What else ran on this node while a trial was timed: a registry of timed windows in the node's /tmp,
and the host's CPU use over the window.

Each trial writes its window (start, then end, and the cores its process owns) to a small file in its
sweep's own folder of the registry (REGISTRY/<sweep>/, the sweep named by the driver in SWEEP_ENV); at the
end of its own window it reads every sweep's and keeps those whose windows overlapped: a trial timed while
another sweep on the node ran is told apart too. A sweep removes only its own folder's records, never
another's: two sweeps at once leave each other's alone. Packed trials, CPU
trials beside GPU trials, or a user's other jobs through crossover all show up in the row's
`co_running`, so a timing taken while the node was shared can be told from one taken alone
(`--exclusive`).

A job that is not crossover's writes no window, so the window also reads the host's CPU time
(/proc/stat) and its own process's (getrusage, every thread) at both ends. What the host spent busy
on other processes (`other_cpu_s`), less what the crossover trials beside it explain and an allowance
for Ray's own processes, is CPU use from outside: past it, the row is flagged `outside_load`. A
trial beside it explains its cores for the time it overlapped: the whole Tune trial, set-up and
evaluation too, through the Claim the trainable holds (trainables/trainable.py); a trial run outside
Tune, or a data-parallel rank, through its window only. Where /proc/stat cannot be read (macOS),
those columns are null.

    with Claim("disc cuda/4 depth=6 seed=0", config_hash, cores=1):       # the Tune trial
        ...set-up, warm-up...
        with Window("disc cuda/4 depth=6 seed=0", config_hash, cores=1) as window:
            ...timed epochs...
    window.overlapping   # ['disc cuda/4 depth=6 seed=1', ...]
    window.columns()     # the row's co_running and load columns (crossover/schema.py)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import stat
import tempfile
import time
from pathlib import Path

# Per user and private (0700): another user can neither plant windows there (fake co_running labels, or
# records that once failed every trial on the node) nor read what this user ran. What is read there is
# still taken as untrusted (read_record): a malformed entry is skipped, never a failed trial.
REGISTRY = Path(tempfile.gettempdir()) / f"crossover-windows-{os.getuid()}"
# The sweep a process's records belong to: its folder's name in REGISTRY. The driver names it before Ray starts
# (sweeps/cluster.py connect) and hands it to its workers through the runtime_env; a trial run outside a sweep
# (a test, a counted step) writes to OUTSIDE.
SWEEP_ENV = "CROSSOVER_SWEEP"
OUTSIDE = "outside-a-sweep"
KEEP_S = 24 * 3600  # windows older than this are removed by the next trial (an open one: its pid was reused)
MARGIN_S = 10.0  # finished windows are kept this much longer: a trial starting now may not have written its file yet
MAX_RECORD_BYTES = 4096  # a window file is ~150 bytes; anything longer is not one

# Cores of CPU use per second of window that nothing in the registry explains and that are still not called
# outside load: Ray's own processes and the kernel's. Three times the most Ray took, a quarter of one busy core:
# docs/devices.md, "What outside load allows for".
ALLOWANCE_CORES = 0.25
# /proc/stat counts busy time in ticks (1/CLK_TCK s, 10 ms) per CPU: at each end of a window a CPU's
# count is off by up to a tick, independently of the others', so the host's total is off by about
# sqrt(CPUs) ticks; TICKS_SLACK times that is not called outside load either (a few hundredths of a
# second on 2 CPUs, 0.23 s on 128; its spread measured: docs/devices.md, "What outside load allows for").
TICKS_SLACK = 2


class Claim:
    """A Tune trial's cores, claimed in the registry for its whole run (set-up to its last row), so that
    another trial's window counts them as crossover's own CPU use outside this trial's timed epochs too.
    A claim reads nothing and is never listed in co_running (trainables/trainable.py holds one)."""

    timed = False

    def __init__(self, label: str, owner: str, cores: float = 1):
        self.label, self.owner = label, owner  # owner: ranks of one trial share it and are not neighbours
        self.cores = cores  # cores the trial's process owns: a CPU trial's threads, 1 driving a GPU
        self.path = REGISTRY / sweep() / f"{owner}-{os.getpid()}-{time.time_ns()}.json"

    def _write(self, end: float | None) -> None:
        record = {"label": self.label, "owner": self.owner, "start": self.start, "end": end, "cores": self.cores,
                  "timed": self.timed}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.path)

    def __enter__(self):
        private_registry()
        self.start = time.time()
        self._write(None)
        return self

    def __exit__(self, *exc) -> None:
        self.end = time.time()
        self._write(self.end)


def sweep() -> str:
    """The name of this process's sweep (SWEEP_ENV), its folder in REGISTRY; OUTSIDE where none is named. One
    line naming the fix for a name that is not one folder's."""
    name = os.environ.get(SWEEP_ENV) or OUTSIDE
    if name.startswith(".") or not all(c.isalnum() or c in "-_." for c in name):
        raise RuntimeError(f"{SWEEP_ENV}={name!r} names the folder of REGISTRY a sweep's trials record their windows "
                           f"in: give letters, digits, '-', '_' or '.', not starting with '.', or unset it")
    return name


def private_registry() -> Path:
    """This sweep's folder of REGISTRY, made where missing (each mode 0700); refused, naming the fix, where
    REGISTRY is not a directory this user owns and only this user may write: one planted by another user could
    feed every trial's row. REGISTRY itself is shared by every sweep of this user and never removed by one."""
    with contextlib.suppress(FileExistsError):
        REGISTRY.mkdir(mode=0o700, parents=True)
    info = os.lstat(REGISTRY)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise RuntimeError(f"{REGISTRY}, where trials on this node record their timed windows, is not a directory "
                           f"private to this user (owner uid {info.st_uid}, mode {stat.filemode(info.st_mode)}): "
                           f"remove it (rm -r {REGISTRY}) and run again; trials make it afresh, mode 0700")
    own = REGISTRY / sweep()
    own.mkdir(mode=0o700, exist_ok=True)
    return own


class Window(Claim):
    """A trial's timed epochs: registered like a claim, and at their end the other windows that
    overlapped them (co_running) and the host's CPU use over them (load columns) are read."""

    timed = True

    def __init__(self, label: str, owner: str, cores: float = 1):
        super().__init__(label, owner, cores)
        self.overlapping: list[str] = []
        self.neighbour_core_s = 0.0  # core-seconds the other trials' windows and claims owned inside this one
        self.load: dict = {}

    def __enter__(self) -> "Window":
        super().__enter__()
        self._cpu = host_cpu(), own_cpu_s()
        return self

    def __exit__(self, *exc) -> None:
        cpu = host_cpu(), own_cpu_s()  # first: what follows is the registry's cost, not the window's
        super().__exit__()
        end = self.end
        records = {}
        for path in REGISTRY.glob("*/*.json"):  # every sweep's: another sweep's trial beside this one is a neighbour
            record = read_record(path)
            if record is not None:  # removed, being replaced by its owner, or not a window
                records[path] = record
        # An open window whose process is gone is over. A finished record matters only to windows open
        # when it ended: once every open one started after its end, no trial reads it again. Keeping a
        # day of windows instead made every trial read them all: 1,200 on this 2-core machine, 19 ms of
        # each 0.1 s trial's total_s (studies/overhead.py: fixed_s 19 ms before, 3.5 ms after).
        dead = {path for path, r in records.items() if r["end"] is None and not _alive(path)}
        # counted before they may be removed: a neighbour that finished well inside this window overlapped it
        beside = {path: other for path, other in records.items()
                  if path not in dead and path != self.path and other["start"] < end
                  and (other["end"] is None or other["end"] > self.start)}
        _remove_stale(records, dead, end, self.path.parent)
        self.overlapping = sorted({r["label"] for r in beside.values() if r["timed"] and r["owner"] != self.owner})
        self.neighbour_core_s = core_seconds(self.start, end, owning(beside), os.cpu_count() or 1)
        self.load = load_columns(self._cpu, cpu, end - self.start, self.neighbour_core_s)

    def columns(self) -> dict:
        """The row's columns from this window: co_running and the host's load (crossover/schema.py)."""
        return {"co_running": self.overlapping, **self.load}


def _remove_stale(records: dict[Path, dict], dead: set[Path], now: float, own: Path) -> None:
    """The records of `records` in this sweep's folder `own` no window will read again, removed: those of a process
    gone (`dead`), older than KEEP_S, or finished MARGIN_S before every window still open started. Another sweep's
    are its own to remove, but for those older than KEEP_S: a sweep killed before its end left them."""
    horizon = min([now] + [r["start"] for p, r in records.items() if r["end"] is None and r["timed"]
                           and p not in dead])  # a claim reads nothing: it holds nothing back
    for path, record in records.items():
        mine = path.parent == own
        if ((record["end"] or record["start"]) < now - KEEP_S
                or mine and (path in dead or (record["end"] is not None and record["end"] < horizon - MARGIN_S))):
            with contextlib.suppress(PermissionError):  # not this user's to remove: left
                path.unlink(missing_ok=True)


def prune() -> None:
    """What this sweep's trials left in its folder of REGISTRY on this node, removed once the sweep is over
    (sweeps/cluster.py leave_nothing): the records no open window will read (`_remove_stale`, MARGIN_S after they
    ended: a sweep's last trials' records are read by no one), and the folder itself where nothing is left in it.
    Another sweep's folder, running or not, is left as it is."""
    own = REGISTRY / sweep()
    if not own.is_dir():
        return
    records = {path: r for path in REGISTRY.glob("*/*.json") if (r := read_record(path)) is not None}
    _remove_stale(records, {path for path, r in records.items() if r["end"] is None and not _alive(path)},
                  time.time() + MARGIN_S, own)
    with contextlib.suppress(OSError):  # a record of this sweep's still open, or one being written: it stays
        own.rmdir()


def owning(records: dict[Path, dict]) -> list[dict]:
    """Of the records that overlapped a window, those whose cores explain CPU use the window saw: every
    other process's claim, and its windows where it holds no claim (a data-parallel rank, a trial run
    outside Tune). A window's own process is left out: its CPU time is counted whole as its own."""
    claimed = {_pid(p) for p, r in records.items() if not r["timed"]}
    return [r for p, r in records.items()
            if _pid(p) != os.getpid() and (not r["timed"] or _pid(p) not in claimed)]


def core_seconds(start: float, end: float, others: list[dict], host_cpus: int) -> float:
    """Core-seconds that the records `others` (windows, claims) owned inside [start, end]: each one's
    cores (at most the host's) for the time it overlapped; an open one runs on to `end`."""
    total = 0.0
    for other in others:
        overlap = min(end, other["end"] if other["end"] is not None else end) - max(start, other["start"])
        total += min(other["cores"], host_cpus) * max(overlap, 0.0)
    return total


def load_columns(before: tuple, after: tuple, window_s: float, neighbour_core_s: float) -> dict:
    """The row's load columns from the (host_cpu(), own_cpu_s()) read at the window's start and end.

    other_cpu_s: the host's busy CPU time less this process's own (every thread of it); outside_load:
    more of it than the neighbours explain (`neighbour_core_s`), by more than ALLOWANCE_CORES per
    second of window and TICKS_SLACK ticks times sqrt(CPUs). Null where /proc/stat could not be read."""
    host_cpus = os.cpu_count()
    try:
        load_avg = os.getloadavg()[0]
    except OSError:  # no load average on this OS
        load_avg = None
    columns = {"load_avg_1m": load_avg, "host_cpus": host_cpus, "cpu_steal_s": None, "other_cpu_s": None,
               "outside_load": None}
    (host0, own0), (host1, own1) = before, after
    if host0 is None or host1 is None:
        return columns
    (busy0, steal0, tick), (busy1, steal1, _) = host0, host1
    other = (busy1 - busy0) - (own1 - own0)
    unexplained = other - neighbour_core_s
    slack = ALLOWANCE_CORES * window_s + TICKS_SLACK * math.sqrt(host_cpus or 1) * tick
    return {**columns, "cpu_steal_s": steal1 - steal0, "other_cpu_s": other, "outside_load": unexplained > slack}


def host_cpu() -> tuple[float, float, float] | None:
    """The host's CPU seconds since boot from /proc/stat's first line, (busy, stolen, one tick), or None
    where it cannot be read. Busy is user + nice + system + irq + softirq (guest time is already in
    user); idle, iowait and steal are not busy."""
    try:
        with open("/proc/stat") as f:
            name, *fields = f.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
        tick = 1 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):  # no /proc (macOS), a kernel without steal, no sysconf
        return None
    if name != "cpu":
        return None
    return (user + nice + system + irq + softirq) * tick, steal * tick, tick


def own_cpu_s() -> float:
    """CPU seconds this process has run, every thread of it (torch's intra-op pool included), and its
    child processes: those that ended, and those alive now, at any depth (torch.compile's compile
    workers: 0.6 s of a 1 s window on an H200 host, which flagged 21 of 26 compile trials outside_load)."""
    usage, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + ended.ru_utime + ended.ru_stime + _descendants_cpu_s()


def _descendants_cpu_s() -> float:
    """CPU seconds of this process's live descendants, from /proc/<pid>/stat (0 where there is no /proc)."""
    parents: dict[int, list[int]] = {}  # pid -> its children's
    times: dict[int, float] = {}  # pid -> its CPU seconds
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        tick = 1 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the command, which may hold spaces
        except (OSError, IndexError):  # it ended meanwhile
            continue
        parents.setdefault(int(fields[1]), []).append(int(pid))  # fields: state, ppid, ..., utime (12), stime (13)
        times[int(pid)] = (int(fields[11]) + int(fields[12])) * tick
    total, todo = 0.0, list(parents.get(os.getpid(), []))
    while todo:
        child = todo.pop()
        total += times[child]
        todo += parents.get(child, [])
    return total


def read_record(path: Path) -> dict | None:
    """The window in `path`, or None where it is not one: what is read in the registry is untrusted (a
    crashed writer's, a user's by hand), so a file that is not a regular file, is too long, or lacks a
    field of the right type is skipped, never a failed trial."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, MAX_RECORD_BYTES + 1)
        record = json.loads(text.decode()) if len(text) <= MAX_RECORD_BYTES else None
    except (OSError, ValueError):  # removed or being replaced by its owner, or not JSON
        return None
    finally:
        os.close(fd)
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)  # noqa: E731
    if not (isinstance(record, dict) and isinstance(record.get("label"), str) and isinstance(record.get("owner"), str)
            and number(record.get("start")) and (record.get("end") is None or number(record["end"]))):
        return None
    cores = record.get("cores", 1)  # a window written before cores were recorded: one core
    timed = record.get("timed", True)  # before claims, every record was a timed window
    if not number(cores) or cores < 0 or not isinstance(timed, bool):
        return None
    return {**record, "cores": cores, "timed": timed}


def _pid(path: Path) -> int | None:
    """The pid in a window file's name (<owner>-<pid>-<ns>.json), or None where the name is not of that form."""
    try:
        return int(path.stem.rsplit("-", 2)[1])
    except (ValueError, IndexError):
        return None


def _alive(path: Path) -> bool:
    """Whether the process that wrote the window file `path` still runs."""
    pid = _pid(path)
    if pid is None or pid <= 0:  # a name not of the form: not ours to judge
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process, or no pid at all
        return True
    return True

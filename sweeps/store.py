"""Trial rows on disk: one Parquet file per measured configuration, written atomically by the driver.

    results/<sweep>/<config_hash>.parquet    one row, schema crossover/schema.py: nothing else in there
    results/_locks/<sweep>                   held while a sweep writes results/<sweep>/: who holds it
    results/_runs/<sweep>.jsonl              each run's wall time (crossover/schema.py: runs_file)
    results/_tune/<sweep>/                   Tune's own state (sweeps/runner.py), unless --storage-path
    results/_logs/<sweep>.log                what Tune logged while the sweep ran (a failed trial's traceback)
    results/_aside/<sweep>/                  files found in results/<sweep>/ that are not rows, moved aside
    results/_reports/<sweep>/                the report (analysis/report.py)

A results directory holds its rows alone: pandas, pyarrow, DuckDB and polars read it whole (`DIR`, or
`DIR/*.parquet`). The rest sits beside the results directories under names starting with '_', which
pandas and pyarrow skip when they read `results/` as one dataset; so a sweep's name may not start
with '_' or '.', and is one folder's name (`check_name`: letters, digits, '_', '-', '.', '+'). A row is written under a
hidden temporary name, flushed to disk and renamed into place (analysis/atomic.py: write_atomic), so a
crash, a kill or a power loss leaves either the whole row or none; a row that cannot be written (a full
disk, a quota) stops the sweep (WriteFailed: the directory, the error, the fix), the rows before it kept. Re-running a sweep skips the
configs whose row says 'ok' and measures the rest again; a new row for a config replaces its old
failed one, so nothing is duplicated. One sweep at a time writes a directory (`locked`): a second is
refused, naming the first. What is not a row (a stray file, a truncated or unreadable row file) is
moved to _aside/<sweep>/ with a warning (a folder too; never over an earlier one of the same name), so it
neither blocks the resume nor a reader of the directory.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import itertools
import json
import math
import os
import pickle
import re
import shutil
import socket
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import ray
from ray import tune
from ray.exceptions import RayActorError
from tqdm import tqdm

from crossover import schema
from crossover.config import TrialConfig
from crossover.schema import ROW_KEY

from ..analysis.atomic import write_atomic
from ..trainables.exits import LAST_WORDS, crash
from ..trainables.rows import crash_text, failed_row, own_code
from ..trainables.shipping import Shipping
from ..trainables.trial import Trial

LOCKS = "_locks"  # results/_locks/<sweep>
OLD_FILES = ("_lock", "_runs.jsonl")  # where earlier versions kept them, in the results directory
ASIDE = "_aside"  # results/_aside/<sweep>/
TUNE = "_tune"  # results/_tune/<sweep>/
LOGS = "_logs"  # results/_logs/<sweep>.log
WAIT_NOTE_S = 30.0  # while every trial waits for resources, the progress line says so this often
BAR = "{desc}: {n_fmt}/{total_fmt} trials done |{bar:16}| {elapsed}, ETA {remaining}{postfix}"  # RowWriter's line
BAR_REFRESH_S = 1.0  # how often the progress line's clock and counts are redrawn between rows, on a terminal
# Written to a file or a pipe, the progress line is a line of its own at each tenth of the trials and every 30 s
# between (the clock and the ETA), not a redraw at each row: 197 redraws were 20 KB of one sweep's log
LOGGED_TENTHS, LOGGED_EVERY_S = 10, 30.0
FAILED_SHOWN = 3  # failed trials said in a line each under the progress line; the rest only counted on it
SAID_WIDTH, SAID_LINES = 100, 2  # each in at most 2 lines of 100 columns: the end of a sweep fits 25 lines of 100
DISK_FULL = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}  # no space, past the file-size limit, past the quota
# A sweep's name is a folder under --out (and under _tune, _locks, _runs, _reports), Tune's experiment name and
# text in the report: one path component, never '..', '/', markup, or a name readers skip ('_', '.'). '+' joins
# several workloads' names (sweeps/scaling.py: sweep_name).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # a terminal's colour and cursor codes


def check_name(name: str) -> str:
    """`name` if it may name a sweep (NAME), else ValueError naming it, the rule and the fix."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"sweep name {name!r} must be letters, digits, '_', '-', '.' or '+', starting with "
                         "a letter or digit, at most 64 characters: it becomes a folder under --out; give --name "
                         "another name")
    return name


class WriteFailed(Exception):
    """A row (or Tune's state) could not be written: the sweep stops, its message names the directory,
    the error and the fix; the rows already written stay, and the row in flight was never half-written."""


class Store:
    def __init__(self, directory: Path | str) -> None:
        self.dir = Path(directory)

    @property
    def lock_path(self) -> Path:
        return self.dir.parent / LOCKS / self.dir.name

    @property
    def aside(self) -> Path:
        """Where files found in the directory that are not rows go: beside it, never in it."""
        return self.dir.parent / ASIDE / self.dir.name

    @property
    def log_path(self) -> Path:
        """What Tune logs while the sweep runs goes here, not to the terminal (sweeps/runner.py tune_log)."""
        return self.dir.parent / LOGS / f"{self.dir.name}.log"

    @property
    def tune_storage(self) -> Path:
        """Tune's default storage_path, beside the results directory: Tune keeps the sweep's state in
        <it>/<sweep>/ (RunConfig's name)."""
        return self.dir.parent / TUNE

    def write(self, row: dict) -> Path:
        path = self.dir / f"{row['config_hash']}.parquet"
        try:
            write_atomic(path, schema.to_table([row]))
        except OSError as exc:
            raise WriteFailed(self.cannot_write(f"the row of {row['workload']} {row['device']} to {self.dir}",
                                                exc)) from None
        return path

    def log_run(self, record: dict) -> None:
        """One run's wall time and size, a line of its runs file (crossover/schema.py: runs_file)."""
        path = schema.runs_file(self.dir)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as exc:
            raise WriteFailed(self.cannot_write(f"{path}", exc)) from None

    def cannot_write(self, what: str, exc: OSError) -> str:
        """The message of a write that failed: what, the error, what is kept and the fix."""
        code = errno.errorcode.get(exc.errno or 0, "no errno")  # 0 is no error's code
        fix = ("free space on that disk (or raise the file-size limit or the quota that stopped it)"
               if exc.errno in DISK_FULL else "make it writable")
        return (f"cannot write {what} ({exc.strerror or exc}, {code}): the {len(self.files())} rows in {self.dir} "
                f"are kept, and no row was half-written; {fix}, then run the same command again to measure the "
                "rest (or give another --out)")

    def files(self) -> list[Path]:
        return sorted(self.dir.glob("*.parquet")) if self.dir.is_dir() else []

    def check(self) -> None:
        """What refuses the directory before anything runs (a sweep calls it before Ray starts): a name
        readers skip, a file, a folder of sweeps, a place this user cannot write."""
        if self.dir.name.startswith(("_", ".")):
            raise ValueError(f"sweep name {self.dir.name!r} starts with '_' or '.', which readers of {self.dir.parent} "
                             f"skip (and {TUNE}, {ASIDE}, {LOGS}, {schema.REPORTS}, {LOCKS} and {schema.RUNS} are taken there): give --name another name")
        check_name(self.dir.name)
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(f"results directory {self.dir} is a file: give --out a directory (or another --name)")
        if self.dir.is_dir() and (nested := next((p for p in self.dir.iterdir() if p.is_dir() and not p.name.startswith(".")
                                                  and next(p.rglob("*.parquet"), None)), None)):
            raise ValueError(f"results directory {self.dir} holds a folder of rows ({nested.name}/): it is a folder "
                             "of sweeps (such as results/), not one sweep's: give another --name")
        existing = next(p for p in (self.dir, *self.dir.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            why = "a file" if not existing.is_dir() else "not writable by this user"
            raise ValueError(f"results directory {self.dir} cannot be written ({existing} is {why}): give --out a "
                             "writable directory")

    @contextlib.contextmanager
    def locked(self, log=print):
        """Hold the directory for one sweep: created if need be, left-overs of a killed writer removed,
        non-rows moved aside. Raises ValueError where it cannot be written or another sweep holds it."""
        self.check()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(self.lock_path, "a+")
        except OSError as exc:
            raise ValueError(f"results directory {self.dir} cannot be written ({exc.strerror}): give --out a "
                             "writable directory") from None
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                raise ValueError(f"results directory {self.dir} is being written by another sweep "
                                 f"({lock.read().strip() or 'holder unknown'}): wait for it to end, or give "
                                 "this one another --name") from None
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()} on {socket.gethostname()} since {dt.datetime.now():%Y-%m-%d %H:%M:%S}: "
                       f"{' '.join(sys.argv)}\n")
            lock.flush()
            for tmp in self.dir.glob(".*.tmp"):  # a killed writer's: no other writer can be at work now
                tmp.unlink(missing_ok=True)
                log(f"warning: removed {tmp}, a row a killed sweep left half-written (its configuration runs again)")
            self._move_old_files()
            self._set_aside([p for p in self.dir.iterdir() if not p.name.startswith(".")
                             and not (p.is_file() and p.suffix == ".parquet")],
                            "not a row file", log)  # a folder too: pd.read_parquet(DIR) fails on one
            yield self

    def _move_old_files(self) -> None:
        """An earlier version's lock (no longer held: this process holds the new one) removed, and its
        runs file's lines moved to the new one."""
        old_lock, old_runs = (self.dir / name for name in OLD_FILES)
        old_lock.unlink(missing_ok=True)
        if old_runs.exists():
            runs = schema.runs_file(self.dir)
            runs.parent.mkdir(parents=True, exist_ok=True)
            with open(runs, "a") as f:
                f.write(old_runs.read_text())
            old_runs.unlink()

    def measured(self, log=print) -> set[str]:
        """Config hashes that already have an 'ok' row of this schema version; unreadable row files and rows
        of another version are moved aside (their configs run again, and their new rows take their names)."""
        done, unreadable, other = set(), [], []
        for path in self.files():
            try:
                table = pq.read_table(path, columns=["config_hash", "status", "schema_version"])
            except (pa.ArrowException, OSError):
                unreadable.append(path)
                continue
            if set(table["schema_version"].to_pylist()) != {schema.SCHEMA_VERSION}:
                other.append(path)
                continue
            done |= {h for h, s in zip(table["config_hash"].to_pylist(), table["status"].to_pylist()) if s == "ok"}
        self._set_aside(unreadable, "unreadable as Parquet (truncated, or not a row a sweep wrote): its "
                                    "configuration runs again", log)
        self._set_aside(other, f"a row of another schema version than this code's {schema.SCHEMA_VERSION} "
                               "(crossover.schema): its configuration runs again", log)
        return done

    def _set_aside(self, paths: list[Path], why: str, log) -> None:
        for path in paths:
            self.aside.mkdir(parents=True, exist_ok=True)
            target = self.aside / path.name
            for n in itertools.count(1):  # never over what an earlier run set aside under that name
                if not target.exists():
                    break
                target = self.aside / f"{path.name}.{n}"
            shutil.move(path, target)
            log(f"warning: {path} is {why}; moved to {target}")


class _Lines:
    """A file or pipe as tqdm's progress line writes to it: each drawing (tqdm's '\\r', the line, spaces over the
    last one) a line of its own, the bare clearing and the closing newline dropped."""

    def __init__(self, file):
        self.file = file

    def write(self, text: str) -> None:
        line = text.strip("\r\n ")
        if line:
            self.file.write(line + "\n")

    def flush(self) -> None:
        self.file.flush()


class RowWriter(tune.Callback):
    """Writes each trial's row the moment the driver hears of it, and reports progress as it goes: a
    line per row through `log`, or with `bar`, one updating line instead (tqdm, on stderr: rows done of
    all, the time so far and an ETA at the mean pace so far), `log` then saying only what is not a row
    (a wait, a lost worker, a warning). `shipping`: the sweep's (sweeps/space.py Space.shipping), which names a
    user's job in the rows it writes for a dead worker's trials."""

    def __init__(self, store: Store, sweep: str, trials: list[Trial], log=print, bar: bool = False,
                 max_failures: int = 2, shipping: Shipping | None = None):
        self.store, self.sweep, self.total, self.log, self.bar = store, sweep, len(trials), log, bar
        self.shipping = shipping
        self.max_failures = max_failures  # times a trial whose worker was lost runs again (on_trial_error), and once more
        self.line = None  # the tqdm line, made at the first step and never pickled (Tune pickles its callbacks)
        self.trials = {t.hash: t for t in trials}  # a dead worker's rows are written from these
        self.written: set[str] = set()  # trial ids whose rows are on disk
        self.hashes: set[str] = set()  # config hashes of those rows
        self.running: dict = {}  # trial id -> (Tune trial, its worker's actor id) for trials with no row yet
        self.lost: dict = {}  # member config hashes of a Tune trial -> times its worker was lost
        self.rows = self.failed = 0
        self.start = self.noted = self.busy = self.drawn = time.monotonic()  # busy: a trial last ran then

    def __getstate__(self) -> dict:
        return {**self.__dict__, "line": None}

    def _line(self):
        """The progress line (with `bar`), made at its first use; None without `bar`. On a terminal it redraws in
        place; written to a file or a pipe, tqdm draws it at each LOGGED_TENTHS of the trials (miniters; no
        maxinterval, which would draw it at every row after a pause), on_step_end every LOGGED_EVERY_S, each
        drawing a line of its own (`_Lines`)."""
        if self.bar and self.line is None:
            tty = sys.stderr.isatty()
            sparse = {} if tty else {"miniters": max(1, -(-self.total // LOGGED_TENTHS)), "mininterval": 0,
                                     "maxinterval": math.inf}
            self.line = tqdm(total=self.total, initial=self.rows, desc=f"sweep {self.sweep!r}", unit="trial",
                             file=sys.stderr if tty else _Lines(sys.stderr), smoothing=0, bar_format=BAR, **sparse)
        return self.line

    def _say(self, line: str) -> None:
        """A line through `log`, above the progress line where there is one."""
        if self.line is None:
            self.log(line)
        else:
            with tqdm.external_write_mode():
                self.log(line)

    def close(self) -> None:
        """The progress line's last state, left on the screen."""
        if self.line is not None:
            self.line.close()
            self.line = None

    def _write(self, trial, row: dict, trials) -> None:
        row = {**row, "schema_version": schema.SCHEMA_VERSION, "sweep": self.sweep,
               "trial_id": trial.trial_id, "finished_at": dt.datetime.now(dt.timezone.utc)}
        self.store.write(row)
        self.written.add(trial.trial_id)
        self.hashes.add(row["config_hash"])
        self.running.pop(trial.trial_id, None)
        self.rows += 1
        self.failed += row["status"] != "ok"
        self.busy = time.monotonic()
        line = self._line()
        if line is None:
            self.log(f"{self._progress(trials, trial)} {_headline(row)}")
            return
        line.set_postfix_str(self._counts(trials, trial), refresh=False)
        line.update(1)
        if row["status"] != "ok" and self.failed <= FAILED_SHOWN:  # a failure is said, the first few, a line each
            for part in textwrap.wrap(_headline(row), SAID_WIDTH, subsequent_indent="    ", max_lines=SAID_LINES,
                                      placeholder=" ..."):
                self._say(part)
        elif row["status"] != "ok" and self.failed == FAILED_SHOWN + 1:  # said once, as the first unsaid one comes
            self._say("more failures: their rows say why (the report's 'Failed trials')")

    def _write_failed(self, trial, error: str, trials) -> None:
        """Error rows, written by the driver, for every member of a Tune trial whose worker died."""
        for member in _members(trial):
            self._write(trial, failed_row(self.trials[member], error, self.shipping), trials)

    def _progress(self, trials, reporting) -> str:
        running = sum(t.status == "RUNNING" and t is not reporting for t in trials)
        pending = sum(t.status == "PENDING" for t in trials)
        elapsed = dt.timedelta(seconds=round(time.monotonic() - self.start))
        return f"[{self.rows}/{self.total} done, {running} running, {pending} pending, {elapsed}]"

    def _counts(self, trials, reporting) -> str:
        """The progress line's tail: ', 1 running, 2 failed'."""
        running = sum(t.status == "RUNNING" and t is not reporting for t in trials)
        return f"{running} running" + (f", {self.failed} failed" if self.failed else "")

    def on_step_end(self, iteration, trials, **info):
        # Tune 2.60 calls on_step_end every loop of its controller (on_step: never, measured).
        # A sweep whose trials have all waited WAIT_NOTE_S with none running (for the autoscaler's nodes,
        # or for another job's trials to end) says so every WAIT_NOTE_S, instead of waiting in silence:
        # what they ask for, what is free. Not in the instant between two trials, when none is RUNNING
        # yet the worker Tune reuses still holds the resources (it said "free now {}" there).
        now = time.monotonic()
        if any(t.status == "RUNNING" for t in trials):
            self.busy = now
        line = self._line()
        if line is not None and now - self.drawn >= (BAR_REFRESH_S if sys.stderr.isatty() else LOGGED_EVERY_S):
            self.drawn = now
            line.set_postfix_str(self._counts(trials, None), refresh=False)
            line.refresh()  # the clock and the ETA move between rows too
        pending = [t for t in trials if t.status == "PENDING"]
        if pending and now - self.busy >= WAIT_NOTE_S and now - self.noted >= WAIT_NOTE_S:
            self.noted = now
            free = {k: v for k, v in ray.available_resources().items() if k in ("CPU", "GPU")}
            self._say(f"{self._progress(trials, None)} waiting for resources: {len(pending)} trials pending, the "
                      f"next asks for {pending[0].config['group']['resources']}, free now {free}; none has run for "
                      f"{now - self.busy:.0f} s")

    def on_trial_start(self, iteration, trials, trial, **info):
        self.busy = time.monotonic()
        # the worker's actor id: Ray's memory monitor names the worker it kills by it (write_killed). An
        # ActorHandle has no public accessor for it in Ray 2.60 (pinned in pyproject.toml); the memory
        # monitor tests of tests/test_reliability.py fail if a Ray upgrade takes it away.
        self.running[trial.trial_id] = (trial, trial.temporary_state.ray_actor._actor_id.hex())

    def on_trial_result(self, iteration, trials, trial, result, **info):
        # A trial retried after its rows were written (its node died as it ended) keeps the first rows.
        if ROW_KEY in result and trial.trial_id not in self.written:
            for row in result[ROW_KEY]:  # one, or a fused trial's members
                self._write(trial, row, trials)

    def on_trial_error(self, iteration, trials, trial, **info):
        # The trial's worker died: Tune retries nothing (runner._tuner: max_failures 0), the sweep decides here.
        # Its own code crashed it (a segfault, an abort: the last words it left, trainables/exits.py): the row
        # now, the signal and the workload's call in it, for it would crash again. Killed from outside (the
        # kernel's OOM killer) or its node lost, leaving no words: the trial runs again in the sweep's next pass
        # (a fresh Tuner, fresh workers), max_failures times and once more, then it is a row. The once more:
        # Tune 2.60 hands a reused worker killed between two trials to the next trial, which fails at once,
        # never having started (seen in tests/test_reliability.py's kernel-kill test, one run in four).
        if trial.trial_id in self.written:
            return
        text = _trial_error(trial)
        if _worker_lost(trial, text):
            # Tune 2.60 gives a fresh worker's trial the driver's staging folder, a reused worker's trial its working
            # directory (ray/tune/trainable/function_trainable.py: setup, reset): its last words are in one of them
            folders = {trial.local_path, trial.storage.trial_working_directory} - {None}
            said = next(filter(None, (crash(Path(f) / LAST_WORDS, own_code) for f in folders)), None)
            if said:
                self._write_failed(trial, crash_text(*said), trials)
                return
            key = _members(trial)
            self.lost[key] = self.lost.get(key, 0) + 1
            if self.lost[key] <= self.max_failures + 1:
                self.running.pop(trial.trial_id, None)
                self._say(f"{self._progress(trials, trial)} {trial.trial_id} lost its worker (killed from outside, or "
                          f"its node died): running it again after this pass, with a fresh worker, failure "
                          f"{self.lost[key]}")
                return
            text = f"the worker was lost {self.lost[key]} times (killed from outside, or its node died)\n{text}"
        self._write_failed(trial, text, trials)

    def write_killed(self, error: Exception, max_failures: int) -> int:
        """After Tune ended the run on a worker death it does not handle (sweeps/runner.py: _fit). Where
        `error` names the worker of a Tune trial in flight by its actor id (Ray's memory monitor does:
        the trial's own memory, so it would die again), error rows headed by `error`'s first line for
        those. Where it names none (a kill from outside, such as the kernel's OOM killer, caught between
        two of Tune's steps), the trials in flight run again, as Tune's own retries would, up to
        `max_failures` times each, then get the error row. Returns how many Tune trials were in flight:
        0 means the error is none of this."""
        text = str(error).strip()
        in_flight = [trial for trial, _ in self.running.values()]
        named = [trial for trial, actor in self.running.values() if actor in text]
        for trial in named or in_flight:
            key = _members(trial)
            self.lost[key] = self.lost.get(key, 0) + 1
            if named or self.lost[key] > max_failures:
                self._write_failed(trial, text, [])  # Tune's run has ended: none running, none pending
            else:
                self._say(f"{trial.trial_id} lost its worker ({text.splitlines()[0] if text else type(error).__name__}):"
                          f" running it again, failure {self.lost[key]}")
        self.running.clear()
        return len(in_flight)


def _members(trial) -> tuple:
    """What identifies a Tune trial across the sweep's passes (Tuners): its members' config hashes."""
    return tuple(TrialConfig.from_dict(m).config_hash() for m in trial.config["group"]["trials"])


def _worker_lost(trial, text: str) -> bool:
    """Whether Tune ended `trial` on the death of its worker (a RayActorError: the actor died, or became
    unreachable with its node), not on an error of Ray's that names a cause (the memory monitor's)."""
    try:  # the driver's copy: Trial.get_pickled_error reads the storage's, synced after the callbacks
        error = pickle.loads(Path(trial.pickled_error_file).read_bytes()) if trial.pickled_error_file else None
    except (OSError, EOFError, pickle.UnpicklingError):
        error = None
    if error is not None:
        return isinstance(error, RayActorError)
    return "ActorDiedError" in text or "The actor died" in text


def _trial_error(trial) -> str:
    """The row's error for a trial Tune gave up on: the reason on the first line (the headline), then
    the end of Tune's error file."""
    path = trial.error_file
    if not (path and os.path.exists(path)):
        return f"trial {trial.trial_id} failed on its worker without an error file"
    text = ANSI.sub("", Path(path).read_text())  # Ray colours a remote traceback's frames for a terminal
    return f"{_reason(text)}\n{text[-4000:]}"


def _reason(text: str) -> str:
    """What went wrong, from Tune's error file: past its 'Failure # 1 (occurred at ...)' header, the
    exception line that ends a traceback, else the first line (Ray's memory monitor writes no traceback)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("Failure # ")]
    if lines and lines[0].startswith("Traceback"):
        ends = [line for line in lines[1:] if not line.startswith((" ", "Traceback", "The above exception",
                                                                    "During handling"))]
        return ends[0] if ends else lines[-1]
    return lines[0] if lines else "no reason given in Tune's error file"


def _headline(row: dict) -> str:
    axes = " ".join(f"{k}={row[k]}" for k in schema.SIZE_AXES if row.get(k) is not None)
    what = f"{row['workload']} {row['device']} {axes}"
    if row["status"] != "ok":
        return f"{what}: FAILED {row['error'].splitlines()[0]}"
    return (f"{what}: {row['epoch_s_median'] * 1e3:.2f} ms/epoch "
            f"(IQR {row['epoch_s_iqr'] * 1e3:.2f}), {row['samples_per_s']:,.0f} samples/s")

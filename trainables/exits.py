"""A workload's os._exit, ray.shutdown and os.kill of its own process, trapped in the thread that runs its trial:
the trial is a row that names the call, and its Ray worker lives on. A crash no Python code can trap (a
segfault in a C extension, an abort) leaves its last words in the trial's folder, which the driver reads
(sweeps/store.py): the trial is then a row that names the signal and the workload's call, not a lost node.

    with exits_trapped():   # trainables/trainable.py (a trial), trainables/ddp.py (each data-parallel rank)
        run_trial(trial)
    with last_words(Path(tune.get_context().get_trial_dir()) / LAST_WORDS):   # trainables/trainable.py
        ...
    crash(path, own_code)   # the driver (sweeps/store.py), after the trial's worker died: what killed it, or None
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import sys
import threading
from pathlib import Path

import ray


class WorkerExit(BaseException):
    """os._exit(code), ray.shutdown() or os.kill of its own process, called by a workload's code in a trial's
    thread (`exits_trapped`), raised instead: the trial is a row naming the call, and its worker lives on. Let
    through, the worker died (or lost Ray after its row), Ray could say no more than "the actor died
    unexpectedly", and the trial was run again as if a node had been lost."""

    def __init__(self, call: str):
        super().__init__(f"the workload's code called {call}, which would end its Ray worker: the trial stopped there")
        self.call = call

    def __reduce__(self):  # made again from its call, not its message, where Ray sends it from a Train worker
        return type(self), (self.call,)


@contextlib.contextmanager
def exits_trapped():
    """Within it, os._exit, ray.shutdown, and os.kill or signal.raise_signal of this process with a signal that
    would end it, from this thread of this process, raise WorkerExit; from another thread (Ray's own) or a process
    the trial forked (a DataLoader's worker), they do what they always do."""
    real_exit, real_shutdown, real_kill, real_raise = os._exit, ray.shutdown, os.kill, signal.raise_signal
    pid, thread = os.getpid(), threading.get_ident()

    def ours() -> bool:
        return os.getpid() == pid and threading.get_ident() == thread

    def exit_(code):
        if not ours():
            real_exit(code)
        raise WorkerExit(f"os._exit({code})")

    def shutdown(*args, **kwargs):
        if not ours():
            return real_shutdown(*args, **kwargs)
        raise WorkerExit("ray.shutdown()")

    def kill(target, signum):
        if ours() and target in (pid, 0) and _fatal(signum):  # 0: its process group, itself among them
            raise WorkerExit(f"os.kill({'os.getpid()' if target == pid else target}, {signal.Signals(signum).name})")
        return real_kill(target, signum)

    def raise_signal(signum):
        if ours() and _fatal(signum):
            raise WorkerExit(f"signal.raise_signal({signal.Signals(signum).name})")
        return real_raise(signum)

    os._exit, ray.shutdown, os.kill, signal.raise_signal = exit_, shutdown, kill, raise_signal
    try:
        yield
    finally:
        os._exit, ray.shutdown, os.kill, signal.raise_signal = real_exit, real_shutdown, real_kill, real_raise


# signals whose default action is not to end the process
_HARMLESS = {signal.SIGCHLD, signal.SIGCONT, signal.SIGURG, signal.SIGWINCH}


def _fatal(signum) -> bool:
    """Whether `signum` sent to this process would end it: SIGKILL and SIGSTOP always, another where no handler
    of the process's own catches it."""
    try:
        signum = signal.Signals(signum)
    except ValueError:  # a number no signal has: os.kill refuses it itself
        return False
    if signum in (signal.SIGKILL, signal.SIGSTOP):
        return True
    return signum not in _HARMLESS and signal.getsignal(signum) == signal.SIG_DFL


LAST_WORDS = "last_words.txt"  # in a trial's folder on its worker's node: Python's stack when a signal killed it

# faulthandler's words for the signals it dumps the stack on -> the signal's name
_FATAL_ERRORS = {"Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS", "Illegal instruction": "SIGILL",
                 "Floating-point exception": "SIGFPE", "Aborted": "SIGABRT"}
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)')


@contextlib.contextmanager
def last_words(path: Path):
    """Within it, a crash of this process by SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT writes the crashing
    thread's Python stack to `path` (faulthandler) before the process dies: the driver reads it (`crash`) and
    rows the trial as its code's crash, not a lost node. A path that cannot be written (a node whose disk is
    full): no last words, and the death is a lost worker's as before."""
    try:
        words = open(path, "w")
    except OSError:
        words = None
    if words is not None:
        faulthandler.enable(words, all_threads=False)
    try:
        yield
    finally:
        if words is not None:
            # as Ray's worker had it (ray/_private/worker.py); a stderr with no file behind it: left off
            with contextlib.suppress(RuntimeError, ValueError, AttributeError, OSError):
                faulthandler.enable(sys.stderr, all_threads=False)
            words.close()
            with contextlib.suppress(OSError):
                os.unlink(path)  # the trial ended alive: nothing to say


def crash(path: Path, own) -> tuple[str, list[tuple[str, int, str]]] | None:
    """What `last_words` wrote at `path` before its process died: the signal's name and the crashing thread's
    frames (file, line, function), innermost last, of those `own(file)` calls the workload's own (any frames,
    where none is). None where nothing was written: the process was killed from outside (SIGKILL), or died on
    another node, whose folder this process cannot read."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    found = re.search(r"Fatal Python error: (.+)", text)
    if not found:
        return None
    said = found.group(1).strip()
    name = next((sig for words, sig in _FATAL_ERRORS.items() if said.startswith(words)), said)
    frames = [(m["file"], int(m["line"]), m["name"]) for m in map(_FRAME.match, text.splitlines()) if m][::-1]
    return name, [f for f in frames if own(f[0])] or frames

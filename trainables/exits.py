"""A workload's os._exit and ray.shutdown, trapped in the thread that runs its trial: the trial is a row that
names the call, and its Ray worker lives on.

    with exits_trapped():   # trainables/trainable.py (a trial), trainables/ddp.py (each data-parallel rank)
        run_trial(trial)
"""

from __future__ import annotations

import contextlib
import os
import threading

import ray


class WorkerExit(BaseException):
    """os._exit(code) or ray.shutdown(), called by a workload's code in a trial's thread (`exits_trapped`), raised
    instead: the trial is a row naming the call, and its worker lives on. Let through, the worker died (or lost
    Ray after its row), Ray could say no more than "the actor died unexpectedly", and Tune ran the trial again
    as if a node had been lost."""

    def __init__(self, call: str):
        super().__init__(f"the workload's code called {call}, which would end its Ray worker: the trial stopped there")
        self.call = call

    def __reduce__(self):  # made again from its call, not its message, where Ray sends it from a Train worker
        return type(self), (self.call,)


@contextlib.contextmanager
def exits_trapped():
    """Within it, os._exit and ray.shutdown from this thread of this process raise WorkerExit; from another
    thread (Ray's own) or a process the trial forked (a DataLoader's worker), they do what they always do."""
    real_exit, real_shutdown, pid, thread = os._exit, ray.shutdown, os.getpid(), threading.get_ident()

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

    os._exit, ray.shutdown = exit_, shutdown
    try:
        yield
    finally:
        os._exit, ray.shutdown = real_exit, real_shutdown

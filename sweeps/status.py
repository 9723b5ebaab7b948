"""How a sweep ends: its exit status, and the signals that stop it as Ctrl-C does.

    return exit_status(lambda: sweep(args), planner)     # a sweep script's main(): a message and a status, no traceback
    return measured_status(rows, str(directory), planner)  # the body's own: NOTHING_MEASURED where every trial failed

sweeps/runner.py `run` raises Interrupted once it has said which rows it kept and how to resume.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

from .plan import Planner
from .store import WriteFailed

INTERRUPTED = 128 + signal.SIGINT  # exit status of a sweep stopped by Ctrl-C (130), as a shell reports it
WRITE_FAILED = 1  # exit status of a sweep stopped by a row it could not write (a full disk: WriteFailed)
PLAN_FAILED = 2  # exit status of a sweep with a workload whose planning failed (sweeps/plan.py), the rest measured
NOTHING_MEASURED = 1  # exit status of a sweep that ran to its end with no ok row: every trial failed


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP in a sweep that has said which rows it kept and how to resume (sweeps/runner.py
    `run`)."""


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # a scheduler's kill, a closed terminal: each stops a sweep as Ctrl-C does


@contextlib.contextmanager
def stop_signals() -> Iterator[list[int]]:
    """Within it, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does, so a
    sweep stops by one path: its rows kept, how to resume said (sweeps/runner.py `run`). Yields the signals
    received: Ray's ray.get turns the exception into a plain KeyboardInterrupt, so the number is kept here for the
    exit status (`exit_status`). A second signal ends the process at once.

    A signal ignored when the sweep began stays ignored, as Unix programs leave it: whoever started the sweep
    asked that it outlive that signal (nohup ignores SIGHUP, so that a closed terminal leaves the sweep running;
    a background job of a non-interactive shell ignores SIGINT, which Python leaves ignored too)."""
    received: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> NoReturn:
        received.append(signum)
        for stop_signal in held:
            signal.signal(stop_signal, signal.SIG_DFL)
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()  # only the main thread may set handlers
    caught = [s for s in STOP_SIGNALS if signal.getsignal(s) != signal.SIG_IGN] if main else []
    held = {s: signal.signal(s, stop) for s in caught}
    try:
        yield received
    finally:
        for stop_signal, handler in held.items():
            signal.signal(stop_signal, handler)



def exit_status(body, planner: Planner | None = None) -> int:
    """`body()`, a sweep script's work, and its exit status; what ends a sweep early becomes a message
    and a status instead of a traceback: a bad space or flag 2, a row (or Tune's state) that could not
    be written WRITE_FAILED, Ctrl-C INTERRUPTED, SIGTERM or SIGHUP 128 + the signal, as a shell reports
    it (143, 129; said here where sweeps/runner.py `run` has not said how to resume: while a workload was imported or
    planned). A stop signal ignored when the sweep began (nohup, a background job) stays ignored (`stop_signals`).
    The rows written stay. A sweep that ends with a workload whose planning failed (`planner`, the one the sweep's
    Spaces were given: sweeps/plan.py; its trials error rows) is PLAN_FAILED; one whose every trial failed,
    NOTHING_MEASURED (`measured_status`, which the body returns).

    A sweep that SIGTERM or SIGHUP stopped while it ran (`run`'s Interrupted) ends its process here, once its line
    is said (`_leave`): `timeout`, systemd and a closing terminal send the signal to the whole process group, Ray's
    GCS and raylet too, and Ray's shutdown as the interpreter exited then waited 60 s for the GCS that was gone
    ("Failed to connect to GCS within 60 seconds", status 1). So does one stopped before `run`, while a workload was
    planned, where a process this process's Ray started has ended too (`_ray_stopped`)."""
    with stop_signals() as received:
        try:
            status = body()
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except WriteFailed as exc:  # a full disk: the message says which rows are kept and how to go on
            print(f"error: {exc}", file=sys.stderr)
            return WRITE_FAILED
        except KeyboardInterrupt as exc:  # no report of a part
            if not isinstance(exc, Interrupted):
                print("interrupted: the rows written so far are kept; run the same command again to measure the "
                      "rest", file=sys.stderr)
            if received and (isinstance(exc, Interrupted) or _ray_stopped()):
                _leave(128 + received[0])
            return 128 + received[0] if received else INTERRUPTED
        return status or (PLAN_FAILED if planner and planner.faulted() else 0)


def _ray_stopped(wait_s: float = 1.0) -> bool:
    """Whether a process that this process's Ray started (its GCS, raylet, dashboard, monitors) has ended, or ends
    within `wait_s`: the stop signal went to the whole process group, and Ray's shutdown then waits on the GCS and
    raylet as they stop (10 s, seen when SIGTERM came while a workload was planned, after Ray started and before
    `run`; its Python daemons end at once, the GCS and raylet later). False where this process started no Ray (none,
    or a cluster's), and where the signal came to this process alone."""
    import ray
    from ray._private import worker  # Ray 2.60: the processes it started, on its node object

    node = worker._global_node if ray.is_initialized() else None
    started: list = [] if node is None else [info.process for infos in node.all_processes.values() for info in infos]
    deadline = time.monotonic() + wait_s
    while started:
        if any(process.poll() is not None for process in started):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return False


def _leave(status: int) -> None:
    """This process ended at once with `status`, past Ray's shutdown and the interpreter's own exit: both wait on
    the GCS, which the signal that stopped the sweep may have stopped too. Every row is already on disk (each written
    whole as its trial ended: sweeps/store.py) and the store's lock is the kernel's (flock), let go with the process.
    The GCS and raylet this process started end with it (Ray's kernel fate-sharing, PR_SET_PDEATHSIG), the raylet's
    agents once they find it gone (a minute or two, seen where SIGTERM went to the driver alone), and a cluster's GCS
    ends the job of a driver whose connection is gone. Ctrl-C (SIGINT) never comes here: Ray's processes block it
    (ray/_private/services.py), so its shutdown finds them."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def measured_status(rows, where: str, planner: Planner | None = None) -> int:
    """A sweep's exit status from its rows, read at its end (those of `where`, its folders): 0 where one is ok;
    else one line saying that every trial failed and where their errors are, and NOTHING_MEASURED, or
    PLAN_FAILED where `planner` failed to plan a workload (its line said why already)."""
    if len(rows) == 0 or (rows["status"] == "ok").any():
        return 0
    print(f"error: every trial failed, none was measured: the {len(rows)} rows in {where} say why (their 'error' "
          "column; crossover report shows them as 'Failed trials')", file=sys.stderr)
    return PLAN_FAILED if planner and planner.faulted() else NOTHING_MEASURED

"""The Tune entry point: one Tune trial (a single trial, or a fused group of them), one report of its rows.

    tune.Tuner(tune.with_resources(TrialWorker, ...), param_space={"group": ...})   # sweeps/runner.py

The config Tune hands the worker is converted and resolved here, once (trainables/trial.py), and the
resolved trials go down to the one runner that fits them: fused (several members), data-parallel
(ddp:N, ddp-cpu:N) or a single process (everything else). Any failure is a measurement too: it
becomes the trials' rows, not an exception. While it runs, the trial claims its cores in the node's
registry (trainables/neighbours.py), what it prints goes to its trial folder, capped (trainables/output.py), and
its rows say whether it was its worker's first (cold_start: `TrialWorker` counts them).
"""

from __future__ import annotations

# torch.optim's first optimizer imports torch._dynamo: 1.2 s on 2 cores that a fresh worker's first
# trial counted in its total_s (studies/overhead.py, first_s); imported with this module, it is not.
import torch._dynamo  # noqa: F401
import ctypes
import threading
from pathlib import Path

from ray import tune
from ray.tune.result import RESULT_DUPLICATE
from ray.tune.trainable.function_trainable import FunctionTrainable

from crossover.config import TrialConfig
from crossover.schema import ROW_KEY

from . import env
from .ddp import run_ddp
from .exits import LAST_WORDS, WorkerExit, exits_trapped, last_words
from .fused import run_fused
from .neighbours import Claim
from .output import OUTPUT, capped
from .rows import error_text, failed_row
from .train import run_trial
from .trial import Trial, resolve


def run(trials: list[Trial]) -> list[dict]:
    """The rows of one Tune trial's resolved trials: fused, data-parallel or single-process."""
    if len(trials) > 1:
        return run_fused(trials)
    if trials[0].spec.distributed:
        return [run_ddp(trials[0])]
    return [run_trial(trials[0])]


class TrialTimeout(Exception):
    """Raised in a trial's thread when it has run past its time limit (--trial-timeout)."""


class Deadline:
    """Stops the code under it after `seconds` by raising TrialTimeout in its thread
    (PyThreadState_SetAsyncExc, as threading's own tests do): the trial becomes a row that says so, and
    its worker runs the next one. Python delivers it at the thread's next bytecode, so a hang inside one
    long C call (a kernel, a blocking read) ends when that call returns."""

    def __init__(self, seconds: float | None, why: str | None = None):
        self.seconds, self.lock, self.done = seconds, threading.Lock(), False
        self.why = why or "--trial-timeout"  # what set the limit, in the row's error: the flag, or the search's budget

    def __enter__(self):
        if self.seconds:
            thread = threading.get_ident()
            self.timer = threading.Timer(self.seconds, self._expire, args=(thread,))
            self.timer.daemon = True
            self.timer.start()
        return self

    def _expire(self, thread: int) -> None:
        with self.lock:
            if not self.done:
                message = f"the trial ran past its limit of {self.seconds:g} s ({self.why}) and was stopped"
                error = type("TrialTimeout", (TrialTimeout,), {"__init__": lambda e: TrialTimeout.__init__(e, message)})
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(error))

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.done = True
        if self.seconds:
            self.timer.cancel()


class TrialWorker(FunctionTrainable):
    """The Tune trainable: one per Ray worker process (Tune's actor), which `reuse_actors` (sweeps/runner.py) hands
    trial after trial. A Tune function trainable is such a class (ray/tune/trainable/function_trainable.py
    wrap_function); this one holds what only its process can know: how many Tune trials it has started. Its first
    pays the imports, the CUDA context and the allocator's growth that the rest find done: that row's fixed costs are
    not comparable (cold_start)."""

    def setup(self, config: dict) -> None:
        super().setup(config)
        self.trials_started = 0  # setup runs once a worker; a reused one's next trial comes through reset_config

    def _trainable_func(self, config: dict) -> None:
        """FunctionTrainable's hook, run in its training thread once a Tune trial: `trainable`, then the end of the
        trial said as wrap_function says it for a function that returns."""
        cold = self.trials_started == 0
        self.trials_started += 1
        trainable(config, cold)
        tune.report({RESULT_DUPLICATE: True})


def trainable(config: dict, cold: bool) -> None:
    """One Tune trial: resolve the config once, run it, report its rows once, each marked cold_start where
    `cold` (its worker process's first trial: `TrialWorker`) or where it was data-parallel (its Ray Train workers start
    afresh every time)."""
    configs = [TrialConfig.from_dict(c) for c in config["group"]["trials"]]
    subjects: list[Trial | TrialConfig] = list(configs)  # what a failure's rows name: the trials, once resolved
    try:
        folder = Path(tune.get_context().get_trial_dir())
        # what it prints: its first MiB in the trial's folder, not all of it in Ray's session logs under /tmp; a
        # crash no exception can carry (a segfault): its signal and stack, left there for the driver
        with capped(folder / OUTPUT), last_words(folder / LAST_WORDS), \
                Deadline(config["group"].get("timeout_s"), config["group"].get("timeout_why")), exits_trapped():
            trials = [resolve(cfg) for cfg in configs]
            subjects = list(trials)
            # the cores it asked Ray for, claimed for the whole trial: beside trials' windows count its
            # set-up, warm-up and evaluation as crossover's own, not as another job's (outside_load)
            with Claim(trials[0].label(), trials[0].hash, trials[0].resources["cpu"]):
                rows = run(trials)
    # any failure is a measurement too: rows. A user's sys.exit, os._exit or ray.shutdown (WorkerExit) and
    # KeyboardInterrupt too: raised in the trial's own thread, they are its code's (Ray stops a worker by killing
    # its process)
    except (Exception, SystemExit, KeyboardInterrupt, WorkerExit) as exc:
        text = error_text(exc)
        rows = [{**failed_row(subject, text), **env.environment(())} for subject in subjects]
    cold = cold or any(isinstance(s, Trial) and s.spec.distributed for s in subjects)
    tune.report({ROW_KEY: [{**row, "cold_start": cold} for row in rows]})

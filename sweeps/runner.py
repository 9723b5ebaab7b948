"""Runs a Space on Ray Tune: skips what is already measured, writes rows as trials end.

    store = run(space, args.out, args.max_concurrent)     # a sweep script's, once sweeps/cluster.py connect has run
    return run_studies(lambda: spaces(flags, planner), flags.out, render, planner)   # a study's sweeps, its figures

Every sweep script (sweeps/scaling.py, ...) builds a Space and calls `run`. Ray is started where the caller has
not connected yet (sweeps/cluster.py `connect`), so tests and scripts share one path. The Ray it runs on:
sweeps/cluster.py; what no node can hold: sweeps/placeable.py; how a sweep ends: sweeps/status.py.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import time
from functools import partial
from pathlib import Path

from ray import tune
from ray.exceptions import RayError

from crossover.schema import SCHEMA_VERSION

from ..analysis.load import read
from ..trainables.rows import failed_row
from ..trainables.trainable import TrialWorker
from .cluster import check_shipped, node_types, tune_settings, workers_reniced
from .placeable import check_placeable
from .plan import Planner
from .space import FIXED_BUDGET, FuseBudget, Space, fuse_budget, groups, resources_for
from .status import Interrupted, exit_status, measured_status
from .store import DISK_FULL, RowWriter, Store, WriteFailed



def run(space: Space, out: Path | str, max_concurrent: int | None = None, log=print, *,
        storage_path: str | None = None, max_failures: int = 2, cluster_config: Path | str | None = None,
        progress: bool = False, head=None) -> Store:
    """Measure every config of `space` not yet in `out`/<name>; returns the store holding the rows.

    What it says goes through `log`: a line per trial as its row is written, or with `progress` one
    updating line on stderr instead (done of all, an ETA), `log` then saying only what is not a row.
    Its first line (the trials, those measured already) goes to `head` where given (the search's rounds
    send theirs to its --verbose detail: sweeps/search.py says what the whole search ran).

    Tune's own state goes to `storage_path` (a URI such as s3://bucket/crossover on a cluster), else
    to `out`/_tune/<name>/, beside the rows' directory (sweeps/store.py), and what Tune logs to
    `out`/_logs/<name>.log (`tune_log`). The users' trials are planned in a process of their own first
    (the space's planner: sweeps/plan.py); those of a workload whose planning failed are written as error rows,
    never run. A trial whose worker was lost (killed from outside, its node dead) is run again in the sweep's next pass,
    `max_failures` times and once more (RowWriter.on_trial_error); one whose own code crashed its worker (a
    segfault) is its row at once; any other failure is already a row (trainables/trainable.py). A worker Ray's
    memory monitor kills mid-training is an error row at once (`_fit`). Raises WriteFailed where a row, or Tune's
    state, cannot be written (a full disk): the rows written stay.
    """
    trials = space.expand()  # refuses a bad space before anything runs
    planner = space.planner  # None: a space of built-ins alone, nothing of a user's to plan
    if planner:
        check_shipped(trials, planner.registry.shipping)  # what Ray's workers have of the modules it planned
        planner.member_sizes(trials, space.plan_timeout_s)  # users' trials estimated in one process of their own
    # a workload whose planning failed (sweeps/plan.py said how, once) is rowed without running
    faults = {t.hash: why for t in trials if planner and (why := planner.fault(t.wl))}
    faulted, trials = [t for t in trials if t.hash in faults], [t for t in trials if t.hash not in faults]
    tune_settings()  # for a caller that started Ray itself, not through connect
    budget = fuse_budget() if space.fuse == "auto" else FIXED_BUDGET  # read once, before any trial holds the GPU
    check_placeable(space, groups(trials, space.fuse, budget, planner), node_types(cluster_config))
    if not workers_reniced():
        log("note: Ray was started without crossover.sweeps.cluster.connect, so its workers run at nice 15, below "
            "every other process on the node; start it with runtime_env={'env_vars': "
            "crossover.sweeps.cluster.WORKER_ENV}")
    if storage_path and "://" not in storage_path:  # a local folder: refused now, not at Tune's first write
        try:
            Path(storage_path).mkdir(parents=True, exist_ok=True)
            writable = os.access(storage_path, os.W_OK | os.X_OK)
        except OSError as exc:
            writable, why = False, exc.strerror
        else:
            why = "not writable by this user"
        if not writable:
            raise ValueError(f"--storage-path {storage_path} cannot hold Tune's state ({why}): give a folder you can "
                             "write, a URI such as s3://bucket/crossover, or leave it out (OUT/_tune)")
    store = Store(Path(out) / space.name)
    with store.locked(log):
        for trial in faulted:
            store.write({**failed_row(trial, faults[trial.hash], space.shipping), "sweep": space.name, "trial_id": None,
                         "schema_version": SCHEMA_VERSION, "finished_at": dt.datetime.now(dt.timezone.utc)})
        if faulted:
            log(f"{len(faulted)} trials of {sorted({t.wl.name for t in faulted})} written as error rows, not run: "
                "their planning failed (said above)")
        try:
            with tune_log(store.log_path):
                _run(space, trials, store, max_concurrent, log, storage_path, max_failures, budget, progress,
                     log if head is None else head)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP (sweeps/status.py stop_signals)
            log(f"interrupted: the {len(store.files())} rows in {store.dir} are kept; run the same command again to "
                "measure the rest (configs with an 'ok' row are skipped)")
            raise Interrupted from None
    return store


@contextlib.contextmanager
def tune_log(path: Path):
    """Within it, what Tune logs goes to `path` and not to the terminal: a trial whose worker died was 30 lines
    of Ray's traceback there, each time Tune ran it again; and so do the raylet's lines (`raylet_lines_logged`). The
    sweep says a line per failed trial itself (RowWriter), and the trial's row holds its error. Both loggers are put
    back as they were when it ends, however it ends (an error, Ctrl-C)."""
    loggers = [logging.getLogger("ray.tune"), logging.getLogger(RAYLET_LOGGER)]
    handler = _FirstLine(path, delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for logger in loggers:  # not on to Ray's "ray" logger, whose handler prints to the terminal
        logger.addHandler(handler)
        logger.propagate = False
    try:
        with raylet_lines_logged():
            yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
            logger.propagate = True
        handler.close()


class _FirstLine(logging.FileHandler):
    """A log file made, with its folder, at its first line (with delay=True): a run that logs nothing leaves no
    empty OUT/_logs/NAME.log."""

    def _open(self):
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


RAYLET_LOGGER = "ray.raylet"  # where `raylet_lines_logged` sends the raylet's lines; tune_log writes it to the run's log


@contextlib.contextmanager
def raylet_lines_logged():
    """Within it, the error lines this process's Ray hears from its raylets ("A worker died or was killed ...": one
    for each death of a worker) are records of the Python logger RAYLET_LOGGER, at ERROR, not Ray's prints; Ray's
    printer is put back at the end, however it ends.

    The one hook on a private name in the sweep, kept because Ray has no public way to it (Ray 2.60): its driver's
    thread that hears them (ray/_private/worker.py listen_error_messages) prints each, in colour, on stdout, through
    the module's `print_to_stdstream`, whatever ray.init's log_to_driver and logging_level, LoggingConfig or
    RAY_DEDUP_LOGS say (those reach the workers' output and Ray's loggers, not this thread), and the raylet has no
    setting that stops it sending them. Everything else of Ray's and Tune's output is quieted through their settings
    (sweeps/cluster.py connect and tune_settings, `_tuner`'s verbose=0).

    One comes a moment after the row of the trial whose worker died: one about the run's last trial may come after
    the run has ended. Ray offers no flush of them (its thread waits on the GCS's next message), and waiting a
    guessed while would slow every run, so such a line is printed by Ray as Ray prints it (stdout, deduplicated), or
    goes to the log of the next run that has begun; none is dropped."""
    from ray._private import worker

    raylet = logging.getLogger(RAYLET_LOGGER)

    def logged(data: dict, ignore_prefix: bool = False) -> None:  # print_to_stdstream's signature
        for line in data["lines"]:
            raylet.error(line)

    ray_own = worker.print_to_stdstream
    worker.print_to_stdstream = logged
    try:
        yield
    finally:
        worker.print_to_stdstream = ray_own


def _run(space: Space, trials: list, store: Store, max_concurrent: int | None, log, storage_path: str | None,
         max_failures: int, budget: FuseBudget, progress: bool = False, head=print) -> None:
    """The sweep itself, in a directory this process holds; its first line through `head`."""
    done = store.measured(log)
    todo = [t for t in trials if t.hash not in done]
    head(f"sweep {space.name!r}: {len(trials)} trials, {len(trials) - len(todo)} already measured "
         f"in {store.dir}, {len(todo)} to run")
    if not todo:
        return
    batches = groups(todo, space.fuse, budget, space.planner)
    if len(batches) < len(todo):
        log(f"fused: {len(todo)} trials in {len(batches)} Tune trials (--fuse {space.fuse}"
            + (f"; budget {budget})" if space.fuse == "auto" else ")"))
    if max_concurrent is None and any(t.cfg.exclusive or t.spec.distributed for t in todo):
        # --exclusive: one trial at a time, so nothing shares its node while it is timed; data-parallel
        # trials: their drivers would otherwise start together and wait on GPUs they cannot all get
        max_concurrent = 1
        log("one trial at a time (exclusive timing, or data-parallel trials)")
    writer = RowWriter(store, space.name, todo, log, bar=progress, max_failures=max_failures)
    storage = storage_path or str(store.tune_storage.resolve())
    start, left = time.time(), todo
    try:
        while left:
            _fit(partial(_tuner, space, left, budget, writer, max_concurrent, storage), writer, store, storage,
                 max_failures)
            left = [t for t in left if t.hash not in writer.hashes]
    finally:  # the progress line ends before what follows it (the end's summary, or how to resume)
        writer.close()
    # the sweep's own wall time, beside its rows: what N trials cost as a whole (analysis/engines.py)
    store.log_run({"start": start, "end": time.time(), "trials": len(todo), "tune_trials": len(batches),
                   "max_concurrent": max_concurrent})


def _tuner(space: Space, trials: list, budget: FuseBudget, writer: RowWriter, max_concurrent: int | None,
           storage: str) -> tune.Tuner:
    return tune.Tuner(
        # Ray's annotation has the callable return a PlacementGroupFactory; Tune's Trial takes a dict as well
        tune.with_resources(TrialWorker, resources_for),  # type: ignore[arg-type]
        param_space=space.param_space(groups(trials, space.fuse, budget, space.planner)),
        # reuse_actors: one worker runs trial after trial, so a worker's start and its ray.tune and torch
        # imports are paid once, not between every two trials (docs/overhead.md, "Measured").
        # Not for engine 'compile': torch.compile's state is the process's, and a reused worker broke its
        # trials after the first (docs/engines.md, "compile in every trial").
        tune_config=tune.TuneConfig(max_concurrent_trials=max_concurrent,
                                    reuse_actors=all(t.cfg.engine != "compile" for t in trials),
                                    trial_dirname_creator=lambda trial: trial.trial_id),
        run_config=tune.RunConfig(
            name=space.name,
            storage_path=storage,
            callbacks=[writer],
            verbose=0,
            # a trial whose worker died is not retried by Tune, which cannot tell its code's crash from a lost
            # node: the writer decides (RowWriter.on_trial_error), and the next pass runs what it keeps
            failure_config=tune.FailureConfig(max_failures=0),
            # what a trial printed (trainables/output.py) is written in its trial folder, which Ray 2.60 stages
            # under /tmp/ray/session_*/artifacts/; uploaded to OUT/_tune/NAME/TRIAL/ only with sync_artifacts, as
            # its one report ends the trial (a reused worker's trials kept theirs under /tmp, its first alone here)
            sync_config=tune.SyncConfig(sync_artifacts=True),
        ),
    )


def _fit(make_tuner, writer: RowWriter, store: Store, storage: str, max_failures: int) -> None:
    """Makes the Tuner and runs it to its end, or to a worker death Tune 2.60 does not handle;
    then the trials it took down are rows, and the caller runs the rest again. A row, or Tune's state
    in `storage`, that cannot be written stops the sweep (WriteFailed).

    Tune's actor manager (ray/air/execution/_internal/actor_manager.py) hands a trial only the
    RayActorError and RayTaskError of its worker's tasks. Ray's memory monitor, killing a worker in
    the middle of a task (a trial's training, not its worker's start), fails that task with
    ray.exceptions.OutOfMemoryError instead, and Tune ends the whole run with `RuntimeError: Caught
    unexpected exception`. The trial it killed gets its error row (the reason, its sizes) and is not
    run again in this sweep; the trials it took down with it (running beside it) run again. A worker
    death that names no trial's worker runs the trials in flight again, `max_failures` times at most
    (RowWriter.write_killed).
    """
    try:
        make_tuner().fit()  # the Tuner writes its state as it is made
    except Exception as exc:  # what is none of the three below goes on up as it was
        failed = _in_chain(exc, WriteFailed)
        if failed:
            raise failed from None
        full = _in_chain(exc, OSError)
        if full and full.errno in DISK_FULL:  # Tune's own state: the Tuner's, its experiment's
            raise WriteFailed(store.cannot_write(f"Tune's state to {storage}", full)) from None
        died = exc.__cause__ if isinstance(exc, RuntimeError) else None
        if not (isinstance(died, RayError) and writer.write_killed(died, max_failures)):
            raise


def _in_chain(exc: BaseException | None, kind: type):
    """The first exception of `kind` among `exc` and what it was raised from or while handling: Tune
    re-raises a callback's exception as a TuneError holding only its traceback's text."""
    while exc is not None and not isinstance(exc, kind):
        exc = exc.__cause__ or exc.__context__
    return exc


def run_studies(make_spaces, out: Path | str, render, planner: Planner | None = None) -> int:
    """A study's sweeps one after another (their trials never share GPUs), then `render` of all their
    rows printed; the exit status of sweeps/status.py `exit_status` (NOTHING_MEASURED where every trial failed,
    PLAN_FAILED where `planner`, its spaces' planner, failed to plan a workload). For studies/parallel.py,
    engines.py, precision.py."""
    def body() -> int:
        dirs = [run(space, out).dir for space in make_spaces()]
        rows = read(*dirs)
        print(render(rows))
        return measured_status(rows, ", ".join(map(str, dirs)), planner)
    return exit_status(body, planner)

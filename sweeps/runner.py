"""Runs a Space on Ray Tune: skips what is already measured, writes rows as trials end.

Every sweep script (sweeps/scaling.py, ...) builds a Space and calls `run`. Ray is started here
only if the caller has not connected yet (`connect`), so tests and scripts share one path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import math
import os
import signal
import sys
import threading
import time
from functools import partial
from pathlib import Path

# Tune's CSV/JSON/TensorBoard loggers would duplicate every row in its trial folders, and slow every trial
# (docs/overhead.md, "Measured"); the Parquet rows are the record. Set before Tune is imported.
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
# Ctrl-C stops the sweep at once (KeyboardInterrupt), not Tune's way: Tune's handler lets the trials
# end, returns as if the sweep had finished (a report of part of it, status 0) and advises
# Tuner.restore, which is not how a sweep resumes here (the same command again: `run`).
os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")
# A worker that dies (a failed CUDA trial, a kill) sends the driver an error message; Ray prints it
# through its distributed tqdm, which then replaces builtins.print in the driver for good. The
# RowWriter's `log` (the print bound when `run` was defined) was then no longer builtins.print, and
# the next sweep's Tuner died pickling it ("Can't pickle <built-in function print>: it's not the same
# object as builtins.print"). The sweep's progress line is tqdm's own, not Ray's: print stays Python's.
os.environ.setdefault("RAY_TQDM_PATCH_PRINT", "0")
# Tune's console output: its new one prints a "Configuration for experiment" box and "View detailed
# results here" whatever RunConfig's verbose (ray/tune/experimental/output.py, Ray 2.60); the legacy
# one at verbose 0 prints nothing. The sweep says what it runs itself (sweeps/store.py: RowWriter).
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

import ray  # noqa: E402
import yaml  # noqa: E402
from ray import tune  # noqa: E402
from ray.exceptions import RayError  # noqa: E402

from crossover.analysis.load import read  # noqa: E402
from crossover.schema import SCHEMA_VERSION  # noqa: E402
from crossover.sweeps import plan  # noqa: E402
from crossover.sweeps.space import CPU_NODE, FIXED_BUDGET, FuseBudget, Space, fuse_budget, groups, resources_for  # noqa: E402
from crossover.sweeps.store import DISK_FULL, RowWriter, Store, WriteFailed  # noqa: E402
from crossover.trainables.devices import ddp_worker_resources  # noqa: E402
from crossover.trainables.rows import failed_row  # noqa: E402
from crossover.trainables.trainable import trainable  # noqa: E402
from crossover.trainables.shipping import shipped, shipped_sources  # noqa: E402

# Tune's end-of-run analysis looks for the logger files switched off above; the rows are in Parquet.
logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)

INTERRUPTED = 128 + signal.SIGINT  # exit status of a sweep stopped by Ctrl-C (130), as a shell reports it
WRITE_FAILED = 1  # exit status of a sweep stopped by a row it could not write (a full disk: WriteFailed)
PLAN_FAILED = 2  # exit status of a sweep with a workload whose planning failed (sweeps/plan.py), the rest measured
NOTHING_MEASURED = 1  # exit status of a sweep that ran to its end with no ok row: every trial failed

# Where `ray up` leaves the cluster config on the head node: the node types its autoscaler may add.
BOOTSTRAP_CONFIG = Path("~/ray_bootstrap_config.yaml").expanduser()


# Workers at the driver's priority, not Ray's nice 15 (a CPU trial's threads waited for any one that gave up its
# core), and Ray Train's poll at 0.2 s, not 2 s (each step of a data-parallel trial waited for the next poll):
# measured in docs/overhead.md, "Worker priority and Ray Train's health-check poll".
WORKER_ENV = {"RAY_worker_niceness": "0", "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2"}


# What a user's module (trainables/shipping.py) ships with, to every worker, through runtime_env's
# py_modules: a single .py file, or its package's folder less these. Ray packs each into a zip in its GCS,
# refused past GCS_STORAGE_MAX_SIZE (512 MiB, gRPC's message limit) and warned of past half that; a
# folder past SHIP_MAX_BYTES is refused here first, naming it: data and checkpoints belong on disk.
SHIP_EXCLUDES = ["__pycache__/", "*.pyc", ".git/", ".ipynb_checkpoints/", "*.pt", "*.pth", "*.ckpt", "*.parquet"]
SHIP_MAX_BYTES = 100 * 2**20
_sent: dict[str, str | None] = {}  # the modules this process started Ray with (runtime_env): path -> source's sha256


def runtime_env() -> dict:
    """This job's runtime_env: its workers at the driver's priority (WORKER_ENV), and the user's workload
    modules registered so far (crossover.trainables.shipping.shipped) on every worker's import path."""
    modules = shipped()
    for path in map(Path, modules):
        if path.is_dir():
            size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
            if size > SHIP_MAX_BYTES:
                raise ValueError(f"the package {path} of your workload holds {size / 2**20:,.0f} MiB, more than the "
                                 f"{SHIP_MAX_BYTES / 2**20:.0f} MiB shipped to Ray's workers: move data and "
                                 "checkpoints out of it (the workload reads them from a path), or install the package "
                                 "on every node")
    _sent.update(shipped_sources())
    env = {"env_vars": WORKER_ENV}
    return {**env, "py_modules": modules, "excludes": SHIP_EXCLUDES} if modules else env


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP in a sweep that has said which rows it kept and how to resume (`run`)."""


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # a scheduler's kill, a closed terminal: each stops a sweep as Ctrl-C does


@contextlib.contextmanager
def stop_signals():
    """Within it, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does, so a
    sweep stops by one path: its rows kept, how to resume said (`run`). Yields the signals received: Ray's
    ray.get turns the exception into a plain KeyboardInterrupt, so the number is kept here for the exit
    status (`exit_status`). A second signal ends the process at once.

    A signal ignored when the sweep began stays ignored, as Unix programs leave it: whoever started the sweep
    asked that it outlive that signal (nohup ignores SIGHUP, so that a closed terminal leaves the sweep running;
    a background job of a non-interactive shell ignores SIGINT, which Python leaves ignored too)."""
    received = []

    def stop(signum, frame):
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


def connect(address: str | None) -> None:
    """Join a running cluster (`address`), or start Ray in this process with the machine's cores;
    either way, this job's workers run at the driver's priority (WORKER_ENV) and import the user's
    workload modules registered before it (runtime_env).

    ray.init puts its own handlers on SIGTERM: a Python one, and absl's failure handler in its core
    worker, which printed "*** SIGTERM received ***" and a stack of addresses, then aborted with 134 and
    no word of the rows kept. The Python handlers the caller had (`stop_signals`) are put back."""
    if ray.is_initialized():
        return
    held = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    # logging_level: Ray's start-up lines ("Started a local Ray instance", the token warning) and Tune's
    # INFO and WARNING lines kept off the sweep's output; its errors still shown
    if address:
        ray.init(address=address, log_to_driver=False, runtime_env=runtime_env(), logging_level=logging.ERROR)
    else:
        ray.init(include_dashboard=False, log_to_driver=False, runtime_env=runtime_env(), logging_level=logging.ERROR)
    for stop_signal, handler in held.items():
        if callable(handler) and threading.current_thread() is threading.main_thread():
            signal.signal(stop_signal, handler)


def check_shipped(trials: list) -> None:
    """Refuses a sweep whose user modules Ray's workers would not have, or would have as they were: Ray started
    before they were registered, or before their file was edited and registered again (the same process).
    Only the modules of these trials' workloads: another registered earlier in the process is not this sweep's."""
    now = shipped_sources({t.cfg.module.split(":")[0].split(".")[0] for t in trials if t.cfg.module})
    missing = sorted(set(now) - set(_sent))
    if missing:
        raise ValueError(f"your workload's module {missing[0]} reaches Ray's workers only through runtime_env, and Ray "
                         "was started without it: build the space before crossover.sweeps.runner.connect, or start Ray with "
                         "ray.init(runtime_env=crossover.sweeps.runner.runtime_env())")
    changed = sorted(path for path, source in now.items() if _sent[path] != source)
    if changed:  # its workers would run the old code, and refuse it as not what the sweep planned with
        raise ValueError(f"your workload's module {changed[0]} changed since Ray was started, and Ray's workers have "
                         "the copy it had then: start Ray again (ray.shutdown(), then "
                         "ray.init(runtime_env=crossover.sweeps.runner.runtime_env())), or run the sweep in a new process")


def workers_reniced() -> bool:
    """Whether this job's workers start with WORKER_ENV: not where Ray was started without `connect`."""
    env_vars = ray.get_runtime_context().runtime_env.get("env_vars") or {}
    return all(env_vars.get(k) == v for k, v in WORKER_ENV.items())


def node_types(cluster_config: Path | str | None = None) -> list[dict]:
    """Resources of every alive node and of every node the cluster's autoscaler may add: each node type
    as many times as its max_workers (at most the cluster's max_workers, Ray's default 2).

    The node types come from `cluster_config` (an autoscaling config, such as cluster.yaml) or, on the
    head of a `ray up` cluster, from BOOTSTRAP_CONFIG: a sweep started before its workers are up
    still sees the GPUs and CPU nodes it is going to get.
    """
    types = [n["Resources"] for n in ray.nodes() if n["Alive"]]
    path = Path(cluster_config) if cluster_config else BOOTSTRAP_CONFIG
    if not cluster_config and not path.exists():
        return types
    try:
        config = yaml.safe_load(path.read_text())
        available, cap = config["available_node_types"], int(config.get("max_workers", 2))
        return types + [t.get("resources", {}) for t in available.values()
                        for _ in range(min(int(t.get("max_workers", cap)), cap))]
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"cluster config {path} has no readable available_node_types ({exc!r}); "
                         "give --cluster-config the autoscaling config the cluster was started with") from None


def cpu_nodes_only(types: list[dict]) -> bool:
    """Whether the cluster marks its CPU nodes (cluster.yaml): then CPU trials keep to them."""
    return any(CPU_NODE in t for t in types)


# A CPU trial's room for Ray's own processes: one core from 4 cores up, two from 16 up (node_cpus). On a 16-core
# GPU host the CSV example's MLP at batch 128 (sub-millisecond parallel regions) ran 1.51x as long through the
# sweep as in one process at 15 threads, 1.04x at 14 (docs/parity.md, 2026-11-26).
RAY_ROOM = ((16, 2), (4, 1))  # (CPUs of the node at least, cores left to Ray), largest first


def node_cpus(types: list[dict]) -> int:
    """What a CPU trial may own: the CPUs of the largest node it may run on, less RAY_ROOM's cores for Ray's own
    processes. A trial's threads on every core of a 16-core node starved Ray's GCS until the driver lost it
    ("Failed to connect to GCS within 60 seconds"); on a laptop's two cores the CPU arm keeps both, as the
    laptop's owner would train on both."""
    marked = cpu_nodes_only(types)
    cpus = int(max(t.get("CPU", 0) for t in types if not marked or CPU_NODE in t))
    return cpus - next((room for least, room in RAY_ROOM if cpus >= least), 0)


def connected(flags):
    """Ray connected at `flags.address` (a frozen Flags of a study script), and (flags with `cpu_threads` filled
    in, node_cpus where not given; the node types)."""
    connect(flags.address)
    types = node_types()
    return dataclasses.replace(flags, cpu_threads=flags.cpu_threads or node_cpus(types)), types


def cluster_devices(types: list[dict]) -> tuple[str, ...]:
    return ("cpu", "cuda") if any(t.get("GPU", 0) > 0 for t in types) else ("cpu",)


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
    (sweeps/plan.py); those of a workload whose planning failed are written as error rows, never run. A
    trial whose worker was lost (killed from outside, its node dead) is run again in the sweep's next pass,
    `max_failures` times and once more (RowWriter.on_trial_error); one whose own code crashed its worker (a
    segfault) is its row at once; any other failure is already a row (trainables/trainable.py). A worker Ray's
    memory monitor kills mid-training is an error row at once (`_fit`). Raises WriteFailed where a row, or Tune's
    state, cannot be written (a full disk): the rows written stay.
    """
    trials = space.expand()  # refuses a bad space before anything runs
    check_shipped(trials)
    plan.member_sizes(trials, space.plan_timeout_s)  # users' trials estimated in one process of their own
    # a workload whose planning failed (sweeps/plan.py said how, once) is rowed without running
    faulted, trials = [t for t in trials if plan.fault(t.wl)], [t for t in trials if not plan.fault(t.wl)]
    budget = fuse_budget() if space.fuse == "auto" else FIXED_BUDGET  # read once, before any trial holds the GPU
    check_placeable(space, groups(trials, space.fuse, budget), node_types(cluster_config))
    if not workers_reniced():
        log("note: Ray was started without crossover.sweeps.runner.connect, so its workers run at nice 15, below every "
            "other process on the node; start it with runtime_env={'env_vars': crossover.sweeps.runner.WORKER_ENV}")
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
            store.write({**failed_row(trial, plan.fault(trial.wl)), "sweep": space.name, "trial_id": None,
                         "schema_version": SCHEMA_VERSION, "finished_at": dt.datetime.now(dt.timezone.utc)})
        if faulted:
            log(f"{len(faulted)} trials of {sorted({t.wl.name for t in faulted})} written as error rows, not run: "
                "their planning failed (said above)")
        try:
            with tune_log(store.log_path):
                _run(space, trials, store, max_concurrent, log, storage_path, max_failures, budget, progress,
                     log if head is None else head)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP (stop_signals)
            log(f"interrupted: the {len(store.files())} rows in {store.dir} are kept; run the same command again to "
                "measure the rest (configs with an 'ok' row are skipped)")
            raise Interrupted from None
    return store


@contextlib.contextmanager
def tune_log(path: Path):
    """Within it, what Tune logs goes to `path` and not to the terminal: a trial whose worker died was 30 lines
    of Ray's traceback there, each time Tune ran it again; and so do the raylet's lines (`raylet_lines_to`). The
    sweep says a line per failed trial itself (RowWriter), and the trial's row holds its error."""
    tune_logger = logging.getLogger("ray.tune")
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    tune_logger.addHandler(handler)
    tune_logger.propagate = False
    raylet_lines_to(path)
    try:
        yield
    finally:
        tune_logger.removeHandler(handler)
        tune_logger.propagate = True
        handler.close()


def raylet_lines_to(path: Path) -> None:
    """The error lines this process's Ray prints from its raylets ("(raylet) A worker died or was killed ...": one
    for each death of a worker, in colour, on stdout, whatever log_to_driver says) appended to `path`, the run's
    log, from now on. Ray has no switch for them; its driver prints them through `print_to_stdstream`, replaced
    here. They come after the row of the trial whose worker died (a sweep's last trial's, after the sweep has
    ended), so they go to the latest run's log until another run sends them to its own."""
    from ray._private import worker

    def append(data: dict, ignore_prefix: bool = False) -> None:
        now = dt.datetime.now()  # as tune_log's Formatter writes its time
        with open(path, "a") as log:
            log.writelines(f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d} ERROR ray ({data.get('pid')}): "
                           f"{line}\n" for line in data["lines"])

    worker.print_to_stdstream = append


def _run(space: Space, trials: list, store: Store, max_concurrent: int | None, log, storage_path: str | None,
         max_failures: int, budget: FuseBudget, progress: bool = False, head=print) -> None:
    """The sweep itself, in a directory this process holds; its first line through `head`."""
    done = store.measured(log)
    todo = [t for t in trials if t.hash not in done]
    head(f"sweep {space.name!r}: {len(trials)} trials, {len(trials) - len(todo)} already measured "
         f"in {store.dir}, {len(todo)} to run")
    if not todo:
        return
    batches = groups(todo, space.fuse, budget)
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
        tune.with_resources(trainable, resources_for),
        param_space=space.param_space(groups(trials, space.fuse, budget)),
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


def _in_chain(exc: BaseException, kind: type):
    """The first exception of `kind` among `exc` and what it was raised from or while handling: Tune
    re-raises a callback's exception as a TuneError holding only its traceback's text."""
    while exc is not None and not isinstance(exc, kind):
        exc = exc.__cause__ or exc.__context__
    return exc


# Ray Train 2.60 (trainables/ddp.py) runs a data-parallel trial as: the Tune trial itself (its own
# request, a quarter core: trainables/devices.py), Ray Train's TrainController actor (num_cpus=0, on
# the driver's node: ray/train/v2/api/data_parallel_trainer.py) and a placement group of N bundles of
# ddp_worker_resources, packed where they fit. `ddp-cpu:2` on 2 cores needs 2 x 1 + 0.25 CPUs: it
# never starts, and Ray Train retries its WorkerGroupStartupTimeoutError every 60 s, for ever.
_RAY_NAMES = {"cpu": "CPU", "gpu": "GPU"}  # Tune's resource names -> Ray's
_FIXES = {
    "cpu": "give --cpu-threads at most the CPUs of the largest node",
    "ddp-cpu": "give --cpu-threads fewer than the CPUs there are (the N workers share --cpu-threads, at least "
               "1 core each, beside the trial's own quarter core: the default, every core, leaves none for it), "
               "or ask for fewer workers (ddp-cpu:N with N + 0.25 <= the CPUs)",
    "ddp": "ask for fewer GPUs (ddp:N)", "pipe": "ask for fewer stages (pipe:N)", "cuda": "",
}
_MORE = ("drop it from --devices, connect to a cluster that has them (--address), or name the autoscaling config "
         "whose node types do (--cluster-config)")


def bundles(space: Space, group: list) -> list[dict]:
    """The Ray resource bundles one Tune trial holds at once: its own request, then its Ray Train workers'."""
    trial = group[0]
    own = {_RAY_NAMES.get(k, k): v for k, v in space.request(trial).items() if v}
    return [own] + ([ddp_worker_resources(trial.spec, trial.cfg.threads)] * trial.spec.count
                    if trial.spec.distributed else [])


def placement_problem(space: Space, group: list, nodes: list[dict]) -> tuple[str, str] | None:
    """Why the Tune trial of `group` can never be placed on `nodes` (every node the cluster has or may
    add), and the fix; None where it can: a bundle no node holds, more in all than the nodes have
    together, or an estimate of its memory past the memory of every node it fits on. The estimate is
    trainables/fused.py's member_bytes (a user's found in a process of its own: sweeps/plan.py): weights, gradients and two optimiser moments (4 x 4 bytes a
    parameter), the data, and every new tensor a batch's forward makes (activations, feature maps),
    forward and backward; no allocator rounding or workspaces in it, so what it refuses cannot fit."""
    def fits(bundle, node):
        return all(node.get(k, 0) >= v for k, v in bundle.items())

    held, kind = bundles(space, group), group[0].spec.kind
    resource_fix = f"{_FIXES[kind] + ', or ' if _FIXES[kind] else ''}{_MORE}"
    for bundle in (held[0], held[-1]):
        if not any(fits(bundle, n) for n in nodes):
            return f"asks Ray for {bundle} in one place, and no node has that much", resource_fix
    need = {k: sum(b.get(k, 0) for b in held) for k in held[0].keys() | held[-1].keys()}
    total = {k: sum(n.get(k, 0) for n in nodes) for k in need}
    if not fits(need, total):
        return (f"needs {need} at once ({len(held) - 1} Ray Train workers of {held[-1]} beside the trial's own "
                f"{held[0]}; Ray Train's controller asks for none), and the cluster has {total} in all"), resource_fix
    try:
        # a user's, from the process that planned it (sweeps/plan.py); None where its model failed on the meta
        # device: not estimated, it runs, and its row says what failed (an OOM, its own error)
        one = plan.member_bytes(group[0], space.plan_timeout_s)
        estimate = None if one is None else len(group) * one
    except (RuntimeError, OverflowError, ValueError):  # a built-in's shape past int64: no machine holds it
        estimate = math.inf
    memory = [n.get("memory", 0) + n.get("object_store_memory", 0) for n in nodes if fits(held[0], n)]
    if estimate is not None and memory and all(memory) and estimate > max(memory):  # 0: a node type whose memory is not known
        size = "more than 2^63 bytes" if estimate == math.inf else f"at least {estimate / 2**30:,.1f} GiB"
        return (f"({group[0].label()}) needs {size} (weights, gradients, optimiser "
                f"state, data, a batch's activations), more than the {max(memory) / 2**30:,.1f} GiB of the largest "
                "node it fits on"), "give it smaller sizes (depth, width, batch_size, dataset_size)"
    return None


def check_placeable(space: Space, batches: list[list], nodes: list[dict]) -> None:
    """Refuses, before anything runs, Tune trials that no node of the cluster (alive, or that its
    autoscaler may add) can ever hold: one message per device and reason, naming the flag and the fix."""
    problems = {}
    for group in batches:
        found = placement_problem(space, group, nodes)
        if found:
            why, fix = found
            device = group[0].cfg.device
            problems.setdefault((device, fix), f"device {device!r} (--devices) in sweep {space.name!r} {why}: {fix}")
    if problems:
        raise ValueError("\n".join(problems.values()))


def exit_status(body) -> int:
    """`body()`, a sweep script's work, and its exit status; what ends a sweep early becomes a message
    and a status instead of a traceback: a bad space or flag 2, a row (or Tune's state) that could not
    be written WRITE_FAILED, Ctrl-C INTERRUPTED, SIGTERM or SIGHUP 128 + the signal, as a shell reports
    it (143, 129; said here where `run` has not said how to resume: while a workload was imported or
    planned). A stop signal ignored when the sweep began (nohup, a background job) stays ignored (`stop_signals`).
    The rows written stay. A sweep that ends with a workload whose planning failed (sweeps/plan.py:
    its trials error rows) is PLAN_FAILED; one whose every trial failed, NOTHING_MEASURED (`measured_status`,
    which the body returns).

    A sweep that SIGTERM or SIGHUP stopped while it ran (`run`'s Interrupted) ends its process here, once its line
    is said (`_leave`): `timeout`, systemd and a closing terminal send the signal to the whole process group, Ray's
    GCS and raylet too, and Ray's shutdown as the interpreter exited then waited 60 s for the GCS that was gone
    ("Failed to connect to GCS within 60 seconds", status 1)."""
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
            elif received:
                _leave(128 + received[0])
            return 128 + received[0] if received else INTERRUPTED
        return status or (PLAN_FAILED if plan.faulted() else 0)


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


def measured_status(rows, where: str) -> int:
    """A sweep's exit status from its rows, read at its end (those of `where`, its folders): 0 where one is ok;
    else one line saying that every trial failed and where their errors are, and NOTHING_MEASURED, or
    PLAN_FAILED where a workload's planning failed (its line said why already)."""
    if len(rows) == 0 or (rows["status"] == "ok").any():
        return 0
    print(f"error: every trial failed, none was measured: the {len(rows)} rows in {where} say why (their 'error' "
          "column; python -m crossover.analysis report shows them as 'Failed trials')", file=sys.stderr)
    return PLAN_FAILED if plan.faulted() else NOTHING_MEASURED


def run_studies(make_spaces, out: Path | str, render) -> int:
    """A study's sweeps one after another (their trials never share GPUs), then `render` of all their
    rows printed; the exit status of `exit_status` (NOTHING_MEASURED where every trial failed). For
    sweeps/parallel.py, engines.py, precision.py."""
    def body() -> int:
        dirs = [run(space, out).dir for space in make_spaces()]
        rows = read(*dirs)
        print(render(rows))
        return measured_status(rows, ", ".join(map(str, dirs)))
    return exit_status(body)

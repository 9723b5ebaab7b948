"""The Ray a sweep runs on: Tune's settings in this process, the connection to Ray (started here, or a cluster joined),
what its workers are given (WORKER_ENV, the user's modules), and what its nodes hold.

    connect(args.address, planner.registry.shipping)   # a sweep script's main(): Ray joined or started with its modules
    types = node_types(args.cluster_config)
    devices, cpus = cluster_devices(types), node_cpus(types)

sweeps/runner.py runs a sweep on it; sweeps/placeable.py refuses what no node of it can hold.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import os
import secrets
import shutil
import signal
import threading
from pathlib import Path

import ray
import yaml

from ..trainables import neighbours
from ..trainables.shipping import ORIGINS_ENV, SHIP_EXCLUDES, Shipping
from .space import CPU_NODE
from .status import STOP_SIGNALS

# Where `ray up` leaves the cluster config on the head node: the node types its autoscaler may add.
BOOTSTRAP_CONFIG = Path("~/ray_bootstrap_config.yaml").expanduser()


def tune_settings() -> None:
    """Tune's and Ray's settings for a sweep, in this process's environment (and so in that of the Ray it starts:
    `connect`). Called by `connect` and sweeps/runner.py `run`, never at import: Ray 2.60 reads each when it is
    used, not when it is imported (the file named beside each), so setting them before the first Tuner is early
    enough. A value the user set already is kept."""
    # Tune's CSV/JSON/TensorBoard loggers would duplicate every row in its trial folders, and slow every trial
    # (docs/overhead.md, "Measured"); the Parquet rows are the record. Read as a run makes its callbacks
    # (ray/tune/utils/callback.py).
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    # Ctrl-C stops the sweep at once (KeyboardInterrupt), not Tune's way: Tune's handler lets the trials
    # end, returns as if the sweep had finished (a report of part of it, status 0) and advises
    # Tuner.restore, which is not how a sweep resumes here (the same command again: `run`). Read as a run
    # starts (ray/tune/tune.py).
    os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")
    # A worker that dies (a failed CUDA trial, a kill) sends the driver an error message; Ray prints it
    # through its distributed tqdm, which then replaces builtins.print in the driver for good. The
    # RowWriter's `log` (the print bound when `run` was defined) was then no longer builtins.print, and
    # the next sweep's Tuner died pickling it ("Can't pickle <built-in function print>: it's not the same
    # object as builtins.print"). The sweep's progress line is tqdm's own, not Ray's: print stays Python's.
    # Read as Ray's tqdm makes its first bar (ray/experimental/tqdm_ray.py instance).
    os.environ.setdefault("RAY_TQDM_PATCH_PRINT", "0")
    # Tune's console output: its new one prints a "Configuration for experiment" box and "View detailed
    # results here" whatever RunConfig's verbose (ray/tune/experimental/output.py, Ray 2.60); the legacy
    # one at verbose 0 prints nothing. The sweep says what it runs itself (sweeps/store.py: RowWriter).
    # Read as a run starts (output.py get_air_verbosity).
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Tune's end-of-run analysis looks for the logger files switched off above; the rows are in Parquet.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)


# Workers at the driver's priority, not Ray's nice 15 (a CPU trial's threads waited for any one that gave up its
# core), and Ray Train's poll at 0.2 s, not 2 s (each step of a data-parallel trial waited for the next poll):
# measured in docs/overhead.md, "Worker priority and Ray Train's health-check poll".
WORKER_ENV = {"RAY_worker_niceness": "0", "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2"}


def runtime_env(shipping: Shipping | None = None) -> dict:
    """This job's runtime_env: its workers at the driver's priority (WORKER_ENV), and the user's workloads the
    sweep's `shipping` has declared so far on every worker (Shipping.shipped: each job file's folder, each package's;
    each at most SHIP_MAX_BYTES, checked as it was declared), with where each came from (ORIGINS_ENV: a worker
    finds its job's folder by it, and a row names the job by the driver's path). What it ships is recorded as sent
    in `shipping` (`check_shipped`); None: no user's module."""
    # the sweep's folder of the trials' window registry, where connect named it (trainables/neighbours.py SWEEP_ENV)
    env_vars = WORKER_ENV | {k: v for k, v in os.environ.items() if k == neighbours.SWEEP_ENV}
    if shipping is None or not shipping.files:
        return {"env_vars": env_vars}
    shipping.sent.update(shipping.shipped_sources())
    return {"env_vars": {**env_vars, ORIGINS_ENV: json.dumps(shipping.origins())}, "py_modules": shipping.shipped(),
            "excludes": SHIP_EXCLUDES}


def connect(address: str | None, shipping: Shipping | None = None, keep: Path | None = None,
            num_cpus: int | None = None) -> None:
    """Join a running cluster (`address`, else $RAY_ADDRESS), or start Ray in this process with the machine's cores
    (`num_cpus`: that many instead);
    either way, this job's workers run at the driver's priority (WORKER_ENV) and import the user's
    workload modules the sweep's `shipping` declared before it (runtime_env; its Planner's: sweeps/plan.py). A Ray
    started here has its session folder (its logs, sockets and the runtime_env's copies, under /tmp/ray: 0.2-3.4 MB a
    sweep) removed as this process ends, or moved into `keep` (`leave_nothing`); a cluster joined keeps its own. The
    sweep's trials record their timed windows in a folder of its own (neighbours.SWEEP_ENV, named here where the
    user has not): a second sweep at once on the same machine removes only its own.

    ray.init puts its own handlers on SIGTERM: a Python one, and absl's failure handler in its core
    worker, which printed "*** SIGTERM received ***" and a stack of addresses, then aborted with 134 and
    no word of the rows kept. The Python handlers the caller had (sweeps/status.py `stop_signals`) are put back."""
    tune_settings()
    if ray.is_initialized():
        return
    # this driver's, for its workers (runtime_env) and its own end (leave_nothing): the pid keeps two drivers of a
    # host apart, the random part two hosts' drivers whose trials share a node
    os.environ.setdefault(neighbours.SWEEP_ENV, f"sweep-{os.getpid()}-{secrets.token_hex(4)}")
    held = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    # logging_level: Ray's start-up lines ("Started a local Ray instance", the token warning) and Tune's
    # INFO and WARNING lines kept off the sweep's output; its errors still shown
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, log_to_driver=False, runtime_env=runtime_env(shipping), logging_level=logging.ERROR)
    else:  # "local": with no address Ray joins the cluster named in /tmp/ray/ray_current_cluster, which a cluster
        # that was stopped leaves behind; joining that dead address waited minutes, then failed
        started = ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                           runtime_env=runtime_env(shipping), logging_level=logging.ERROR)
        # registered after ray.init's own shutdown at exit, so run before it: Ray is shut down here, then its folder
        # (ray.init returns a RayContext, which has address_info; its annotation says BaseContext, which has not)
        atexit.register(leave_nothing, Path(started.address_info["session_dir"]), keep)  # type: ignore[attr-defined]
    for stop_signal, handler in held.items():
        if callable(handler) and threading.current_thread() is threading.main_thread():
            signal.signal(stop_signal, handler)


def leave_nothing(session: Path, keep: Path | None = None) -> None:
    """Ray shut down, then the session folder it made (`session`) removed, or moved into `keep` (a sweep's
    --keep-ray-session: OUT/_ray/), and this sweep's records of its trials' windows. Only for a Ray this process
    started: `connect` calls it as the process ends. Nothing else is touched: Ray's link session_latest is Ray's (a
    driver started since names its own session by it; Ray points it anew at each start), and another sweep's
    files are its own."""
    ray.shutdown()
    neighbours.prune()  # the last trials' records of their timed windows (trainables/neighbours.py), read by no one
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        shutil.move(str(session), str(keep / session.name))
    else:
        shutil.rmtree(session, ignore_errors=True)


def check_shipped(trials: list, shipping: Shipping) -> None:
    """Refuses a sweep whose user modules Ray's workers would not have, or would have as they were: Ray started
    without the sweep's `shipping` (runtime_env), or before they were declared in it, or before their file was edited
    and declared again (the same process). Only the modules of these trials' workloads: another declared earlier is
    not this sweep's."""
    now = shipping.shipped_sources({t.cfg.module.split(":")[0].split(".")[0] for t in trials if t.cfg.module})
    missing = sorted(set(now) - set(shipping.sent))
    if missing:
        raise ValueError(f"your workload's module {missing[0]} reaches Ray's workers only through runtime_env, and Ray "
                         "was started without it: build the space before crossover.sweeps.cluster.connect(address, "
                         "planner.registry.shipping), or start Ray with "
                         "ray.init(runtime_env=crossover.sweeps.cluster.runtime_env(planner.registry.shipping))")
    changed = sorted(path for path, source in now.items() if shipping.sent[path] != source)
    if changed:  # its workers would run the old code, and refuse it as not what the sweep planned with
        raise ValueError(f"your workload's module {changed[0]} changed since Ray was started, and Ray's workers have "
                         "the copy it had then: start Ray again (ray.shutdown(), then "
                         "ray.init(runtime_env=crossover.sweeps.cluster.runtime_env(planner.registry.shipping))), "
                         "or run the sweep in a new process")


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


def connected(flags, shipping: Shipping | None = None):
    """Ray connected at `flags.address` (a frozen Flags of a study script) with the sweep's `shipping`, and (flags
    with `cpu_threads` filled in, node_cpus where not given; the node types)."""
    connect(flags.address, shipping)
    types = node_types()
    return dataclasses.replace(flags, cpu_threads=flags.cpu_threads or node_cpus(types)), types


def threads(flags) -> int:
    """The CPU threads a trial of `flags` (a study script's Flags) takes, as `connected` fills them in; one line
    naming the field for flags it did not fill."""
    if flags.cpu_threads is None:
        raise ValueError("cpu_threads: give the flags connected() returns (node_cpus where not given), got None")
    return flags.cpu_threads


def cluster_devices(types: list[dict]) -> tuple[str, ...]:
    return ("cpu", "cuda") if any(t.get("GPU", 0) > 0 for t in types) else ("cpu",)


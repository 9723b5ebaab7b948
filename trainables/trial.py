"""The one boundary: a TrialConfig resolved into a Trial, once per process, before anything runs.

    trial = resolve(TrialConfig("disc", device="cuda", depth=6))
    trial.cfg.batch_size   # 100: the seed's, filled in
    trial.spec             # DeviceSpec(kind='cuda', count=1): the device string, parsed
    trial.wl               # the Workload (in a sweep's driver, a user's as a WorkloadSpec: plain data)

`resolve` fills every unset axis with the workload's seed's value, checks every field, and parses
the device string; a bad field raises ConfigError naming it, what was given and what to do. The
sweep resolves each config when it expands its space (so a bad space is refused before any trial runs),
and the trainable resolves what Tune hands its worker, once; everything below takes the Trial. The
sweep's driver resolves a user's workload's configs against its WorkloadSpec, never its code: its `check`
runs in a planning process (sweeps/plan.py refusals), and the worker runs it again with the rest.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from crossover import data as datasets
from crossover.config import DATA_SOURCES, ENGINES, LOOPS, ConfigError, TrialConfig, count
from crossover.config import WorkloadError
from crossover.schema import SEED_AXES, SIZE_AXES
from crossover.workload import Workload, WorkloadSpec, filled_in

from . import precision
from .devices import DeviceSpec, parse, resources
from .graph import CAPTURED
from .registry import Registry, fingerprint
from .workloads import WORKLOADS

# counts, each in [1, MAXIMA]; dataset_size first: peaks' full batch is its dataset_size, and a bad one is named as such
_INTEGERS = ("dataset_size",) + tuple(a for a in SEED_AXES if a not in ("lr", "dataset_size")) + ("threads", "micro_batches")


@dataclass(frozen=True)
class Trial:
    """A resolved config: every axis filled, every field checked, the device parsed (see `resolve`)."""

    cfg: TrialConfig  # with the seed's defaults filled in
    spec: DeviceSpec  # cfg.device, parsed
    wl: Workload | WorkloadSpec  # the workload cfg.workload names (a built-in) or cfg.module holds (a user's)

    @cached_property
    def hash(self) -> str:
        return self.cfg.config_hash()

    @property
    def resources(self) -> dict:
        """What the trial asks Ray for: {'cpu': cores, 'gpu': GPUs} (trainables/devices.py)."""
        return resources(self.spec, self.cfg.threads)

    @property
    def workload(self) -> Workload:
        """The Workload itself, which the process that trains the trial holds (`resolve` in a worker, `here`);
        ValueError where the trial holds a WorkloadSpec, the plain data a sweep's driver knows a user's one by."""
        if not isinstance(self.wl, Workload):
            raise ValueError(f"trial {self.label()}: workload {self.wl.name!r} is a WorkloadSpec, which runs no code; "
                             "resolve the trial in the process that trains it (crossover.trainables.trial here)")
        return self.wl

    def label(self, *fields: str) -> str:
        """'workload=disc device=cpu depth=6 seed=0': the trial's name among its neighbours (its `fields`,
        or the workload, device, sizes and seed), without the unset ones."""
        fields = fields or ("workload", "device") + SIZE_AXES + ("seed",)
        return " ".join(f"{k}={getattr(self.cfg, k)}" for k in fields if getattr(self.cfg, k) is not None)


def resolve(cfg: TrialConfig, workload: Workload | WorkloadSpec | None = None) -> Trial:
    """The config with the seed's defaults filled in, every field checked, its device parsed; its workload
    `workload` where given (a sweep's driver gives a user's WorkloadSpec), else found here (`workload_of`).

    Raises ConfigError naming the field, the value and what to do; nothing runs before this passes. A
    WorkloadSpec's own check is not run here: it is the user's code (sweeps/plan.py refusals runs it).
    """
    wl = workload_of(cfg) if workload is None else workload
    spec = parse(cfg.device)
    if spec.pipelined and not wl.pipeline:
        raise ConfigError("device", f"device {cfg.device!r}: a pipeline splits workloads whose model is an "
                                    f"nn.Sequential (Workload.pipeline: disc, peaks, tabular), not {wl.name}")
    for axis in ("depth", "width", "context"):
        if axis not in wl.axes and getattr(cfg, axis) not in (None, wl.defaults[axis]):
            raise ConfigError(axis, f"{axis} is not an axis of workload {wl.name!r} (got {getattr(cfg, axis)}); "
                              f"its axes are {sorted(wl.axes)}")
    filled = {axis: wl.defaults[axis] if getattr(cfg, axis) is None else getattr(cfg, axis) for axis in SEED_AXES}
    if filled["batch_size"] is None:  # full batch (peaks)
        filled["batch_size"] = filled["dataset_size"]
    # only a pipeline cuts batches: elsewhere the axis is dropped, so a grid over it adds no trials
    filled["micro_batches"] = (cfg.micro_batches or 4) if spec.pipelined else None
    filled["params"] = _params(wl, cfg.params)
    cfg = dataclasses.replace(cfg, **filled)

    # numpy's as int; typed Any, as replace checks a ** dict's values against every field's type, not these int ones
    counts: dict[str, Any] = {name: count(name, getattr(cfg, name)) for name in _INTEGERS}
    cfg = dataclasses.replace(cfg, **counts)
    if cfg.dataset_size is None or cfg.batch_size is None or cfg.epochs is None:  # a workload's default None
        unset = next(name for name in ("dataset_size", "batch_size", "epochs") if getattr(cfg, name) is None)
        raise ConfigError(unset, f"{unset} is unset: give it, or a default for it in workload {wl.name!r}'s defaults")
    if cfg.batch_size > cfg.dataset_size:
        raise ConfigError("batch_size", f"batch_size must be <= dataset_size ({cfg.dataset_size}), got {cfg.batch_size}")
    if spec.distributed and cfg.batch_size < spec.count:
        raise ConfigError("batch_size", f"batch_size must be >= the {spec.count} workers of {cfg.device!r} "
                                        f"(each takes a share of every batch), got {cfg.batch_size}")
    if not 0 <= cfg.warmup_epochs < cfg.epochs:
        raise ConfigError("warmup_epochs", f"warmup_epochs must be in [0, epochs) = [0, {cfg.epochs}), got "
                                           f"{cfg.warmup_epochs}: at least one epoch must be timed")
    if not (isinstance(cfg.lr, (int, float)) and 0 < cfg.lr < math.inf):
        raise ConfigError("lr", f"lr must be a finite number > 0, got {cfg.lr!r}")
    if not (isinstance(cfg.min_timed_s, (int, float)) and 0 <= cfg.min_timed_s < math.inf):
        raise ConfigError("min_timed_s", f"min_timed_s must be a number of seconds >= 0, got {cfg.min_timed_s!r}")
    if cfg.loop not in LOOPS:
        raise ConfigError("loop", f"loop must be one of {list(LOOPS)}, got {cfg.loop!r}")
    _check_engine(cfg, spec, wl)
    precision.check(cfg, spec)
    if isinstance(wl, Workload) and wl.check is not None:
        wl.check(cfg)
    if wl.images:
        if cfg.data not in DATA_SOURCES:
            raise ConfigError("data", f"data must be one of {list(DATA_SOURCES)}, got {cfg.data!r}")
        try:
            datasets.image_source(cfg.data, cfg.data_dir, cfg.dataset_size)
        except ValueError as exc:
            raise ConfigError("data", str(exc)) from None
    elif cfg.data != "auto":
        raise ConfigError("data", f"data is only for image workloads (Workload.images: mnist_cnn, lenet); {wl.name} "
                                  "makes its own")
    return Trial(cfg, spec, wl)


def here(trial: Trial, registry: Registry | None = None) -> Trial:
    """`trial` with its Workload itself, imported in this process from the file its sweep's `registry` declared
    (the sweep's Planner's), where the driver knew it by its WorkloadSpec alone: for a benchmark that times a user's
    trial in its own process on purpose (studies/parity.py's plain loop and run_trial, studies/overhead.py's
    calibration), never for a sweep."""
    if isinstance(trial.wl, Workload):
        return trial
    if registry is not None and trial.cfg.module:
        registry.load(trial.cfg.module)  # imported here once; `workload_of` finds it and checks its fingerprint
    return resolve(trial.cfg)


def workload_of(cfg: TrialConfig) -> Workload:
    """The workload of a config: a built-in by name, or a user's by module (imported here by name: a worker has
    it from runtime_env), checked to be the code the driver planned with (its fingerprint)."""
    if cfg.module is None:
        if cfg.workload not in WORKLOADS:
            raise ConfigError("workload", f"workload must be one of {sorted(WORKLOADS)} or a module's "
                                          f"(--workload path/to/job.py:ATTR), got {cfg.workload!r}")
        return WORKLOADS[cfg.workload]
    try:  # a worker's registry declares nothing: the module from Ray's copy, or imported here already (`here`)
        wl = Registry().load(cfg.module)
    except WorkloadError as exc:
        raise ConfigError("module", str(exc)) from None
    if wl.name != cfg.workload:
        raise ConfigError("workload", f"module {cfg.module!r} holds workload {wl.name!r}, not {cfg.workload!r}")
    if cfg.fingerprint is not None and fingerprint(wl) != cfg.fingerprint:
        raise ConfigError("fingerprint", f"module {cfg.module!r} here is not the code the sweep planned with "
                                         f"(fingerprint {fingerprint(wl)}, planned {cfg.fingerprint}): the file "
                                         "changed while the sweep ran; run the sweep again")
    return wl


def _params(wl: Workload | WorkloadSpec, given: dict | None) -> dict | None:
    """The workload's own axes: each given value checked (type, range), the rest at their defaults."""
    unknown = sorted(set(given or {}) - set(wl.params))
    if unknown:
        raise ConfigError(unknown[0], f"{unknown[0]} is not an axis of workload {wl.name!r}; its own axes are "
                                      f"{sorted(wl.params) or 'none'}, its shared ones {sorted(wl.axes)}")
    return {name: p.check(name, (given or {}).get(name, p.default), wl.name)
            for name, p in wl.params.items()} or None


def _check_engine(cfg: TrialConfig, spec: DeviceSpec, wl: Workload | WorkloadSpec) -> None:
    """What each engine can run: refused here, by name, rather than silently run another way."""
    if cfg.engine not in ENGINES:
        raise ConfigError("engine", f"engine must be one of {list(ENGINES)}, got {cfg.engine!r}")
    if cfg.engine == "eager":
        return
    if not spec.single_process:
        raise ConfigError("engine", f"engine {cfg.engine!r} runs single-process trials (cpu, cuda, cuda/K), "
                                    f"not {cfg.device!r}: use engine 'eager' there")
    if cfg.warmup_epochs < 1:
        raise ConfigError("warmup_epochs", f"engine {cfg.engine!r} needs warmup_epochs >= 1, so that "
                                           "compilation or capture stays out of the timed epochs")
    if cfg.engine == "triton" and (not wl.kernel or cfg.depth != 2 or cfg.precision not in ("default", "fp32")):
        raise ConfigError("engine", "engine 'triton' runs peaks' MLP 2 -> H1 -> H2 -> 1 (depth 2) in float32 in one "
                                    "kernel (crossover.trainables.mlp_kernel), not "
                                    f"{cfg.workload} at depth {cfg.depth} in {cfg.precision}: use engine 'graph'")
    if cfg.engine in CAPTURED:
        if not (spec.whole_gpu or spec.packed):
            raise ConfigError("engine", f"engine {cfg.engine!r} captures a CUDA graph: it needs device cuda or cuda/K")
        if cfg.loop == "seed":
            raise ConfigError("loop", "loop 'seed' syncs with the host every step, which a CUDA graph cannot "
                                      f"hold: use loop 'fast' with engine {cfg.engine!r}")
        if filled_in(cfg.dataset_size, "dataset_size") % filled_in(cfg.batch_size, "batch_size"):
            raise ConfigError("batch_size", f"engine {cfg.engine!r} replays one static shape, so every batch must "
                                            f"be full: dataset_size ({cfg.dataset_size}) must be a multiple of "
                                            f"batch_size ({cfg.batch_size})")

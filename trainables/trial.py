"""The one boundary: a TrialConfig resolved into a Trial, once per process, before anything runs.

    trial = resolve(TrialConfig("disc", device="cuda", depth=6))
    trial.cfg.batch_size   # 100: the seed's, filled in
    trial.spec             # DeviceSpec(kind='cuda', count=1): the device string, parsed
    trial.wl               # the Workload

`resolve` fills every unset axis with the workload's seed's value, checks every field, and parses
the device string; a bad field raises ConfigError naming it, what was given and what to do. The
sweep resolves each config when it expands its space (so a bad space is refused before any trial runs),
and the trainable resolves what Tune hands its worker, once; everything below takes the Trial.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property

from analysis.schema import SEED_AXES, SIZE_AXES
from trainables import data as datasets
from trainables import precision
from trainables.config import DATA_SOURCES, ENGINES, LOOPS, ConfigError, TrialConfig, count
from trainables.devices import DeviceSpec, parse, resources
from trainables.graph import CAPTURED
from trainables.workloads import HEAD_DIM, WORKLOADS, Workload

# counts, each in [1, MAXIMA]; dataset_size first: peaks' full batch is its dataset_size, and a bad one is named as such
_INTEGERS = ("dataset_size",) + tuple(a for a in SEED_AXES if a not in ("lr", "dataset_size")) + ("threads", "micro_batches")


@dataclass(frozen=True)
class Trial:
    """A resolved config: every axis filled, every field checked, the device parsed (see `resolve`)."""

    cfg: TrialConfig  # with the seed's defaults filled in
    spec: DeviceSpec  # cfg.device, parsed

    @property
    def wl(self) -> Workload:
        return WORKLOADS[self.cfg.workload]

    @cached_property
    def hash(self) -> str:
        return self.cfg.config_hash()

    @property
    def resources(self) -> dict:
        """What the trial asks Ray for: {'cpu': cores, 'gpu': GPUs} (trainables/devices.py)."""
        return resources(self.spec, self.cfg.threads)

    def label(self, *fields: str) -> str:
        """'workload=disc device=cpu depth=6 seed=0': the trial's name among its neighbours (its `fields`,
        or the workload, device, sizes and seed), without the unset ones."""
        fields = fields or ("workload", "device") + SIZE_AXES + ("seed",)
        return " ".join(f"{k}={getattr(self.cfg, k)}" for k in fields if getattr(self.cfg, k) is not None)


def resolve(cfg: TrialConfig) -> Trial:
    """The config with the seed's defaults filled in, every field checked, its device parsed.

    Raises ConfigError naming the field, the value and what to do; nothing runs before this passes.
    """
    if cfg.workload not in WORKLOADS:
        raise ConfigError("workload", f"workload must be one of {sorted(WORKLOADS)}, got {cfg.workload!r}")
    wl = WORKLOADS[cfg.workload]
    spec = parse(cfg.device)
    if spec.kind == "pipe" and not wl.sequential:
        raise ConfigError("device", f"device {cfg.device!r}: a pipeline splits the MLP workloads "
                                    f"(disc, peaks, tabular), not {wl.name}")
    for axis in ("depth", "width", "context"):
        if axis not in wl.axes and getattr(cfg, axis) not in (None, wl.defaults[axis]):
            raise ConfigError(axis, f"{axis} is not an axis of workload {wl.name!r} (got {getattr(cfg, axis)}); "
                              f"its axes are {sorted(wl.axes)}")
    filled = {axis: wl.defaults[axis] if getattr(cfg, axis) is None else getattr(cfg, axis) for axis in SEED_AXES}
    if filled["batch_size"] is None:  # full batch (peaks)
        filled["batch_size"] = filled["dataset_size"]
    # only a pipeline cuts batches: elsewhere the axis is dropped, so a grid over it adds no trials
    filled["micro_batches"] = (cfg.micro_batches or 4) if spec.kind == "pipe" else None
    cfg = dataclasses.replace(cfg, **filled)

    cfg = dataclasses.replace(cfg, **{name: count(name, getattr(cfg, name)) for name in _INTEGERS})  # numpy's as int
    if wl.name == "disc" and cfg.width is None and cfg.depth < 2:
        raise ConfigError("depth", f"depth must be >= 2 for disc's doubling MLP (2 -> 4 -> ... -> 2^depth -> 2), "
                                   f"got {cfg.depth}")
    if wl.name == "transformer":
        _check_transformer(cfg)
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
    _check_engine(cfg, spec)
    precision.check(cfg, spec)
    if wl.name == "peaks" and math.isqrt(cfg.dataset_size) ** 2 != cfg.dataset_size:
        n = math.isqrt(cfg.dataset_size)
        raise ConfigError("dataset_size", f"dataset_size must be a perfect square N*N for peaks (an N x N grid), "
                                          f"got {cfg.dataset_size}; nearest: {n * n} or {(n + 1) ** 2}")
    if wl.images:
        if cfg.data not in DATA_SOURCES:
            raise ConfigError("data", f"data must be one of {list(DATA_SOURCES)}, got {cfg.data!r}")
        try:
            datasets.image_source(cfg.data, cfg.data_dir, cfg.dataset_size)
        except ValueError as exc:
            raise ConfigError("data", str(exc)) from None
    elif cfg.data != "auto":
        raise ConfigError("data", f"data is only for image workloads (mnist_cnn, lenet); {wl.name} generates its own")
    return Trial(cfg, spec)


def _check_transformer(cfg: TrialConfig) -> None:
    """Heads of HEAD_DIM each must split the width, and the sequences must fit the text."""
    if cfg.width % HEAD_DIM:
        raise ConfigError("width", f"width must be a multiple of {HEAD_DIM} for the transformer (attention heads of "
                                   f"{HEAD_DIM}), got {cfg.width}; nearest: {max(HEAD_DIM, cfg.width // HEAD_DIM * HEAD_DIM)}")
    try:
        datasets.check_text(cfg.dataset_size, cfg.context)
    except ValueError as exc:
        raise ConfigError("dataset_size", str(exc)) from None


def _check_engine(cfg: TrialConfig, spec: DeviceSpec) -> None:
    """What each engine can run: refused here, by name, rather than silently run another way."""
    if cfg.engine not in ENGINES:
        raise ConfigError("engine", f"engine must be one of {list(ENGINES)}, got {cfg.engine!r}")
    if cfg.engine == "eager":
        return
    if spec.kind not in ("cpu", "cuda"):
        raise ConfigError("engine", f"engine {cfg.engine!r} runs single-process trials (cpu, cuda, cuda/K), "
                                    f"not {cfg.device!r}: use engine 'eager' there")
    if cfg.warmup_epochs < 1:
        raise ConfigError("warmup_epochs", f"engine {cfg.engine!r} needs warmup_epochs >= 1, so that "
                                           "compilation or capture stays out of the timed epochs")
    if cfg.engine == "triton" and (cfg.workload != "peaks" or cfg.depth != 2 or cfg.precision != "fp32"):
        raise ConfigError("engine", "engine 'triton' runs peaks' MLP 2 -> H1 -> H2 -> 1 (depth 2) in fp32 in one "
                                    "kernel (trainables/mlp_kernel.py), not "
                                    f"{cfg.workload} at depth {cfg.depth} in {cfg.precision}: use engine 'graph'")
    if cfg.engine in CAPTURED:
        if spec.kind != "cuda":
            raise ConfigError("engine", f"engine {cfg.engine!r} captures a CUDA graph: it needs device cuda or cuda/K")
        if cfg.loop == "seed":
            raise ConfigError("loop", "loop 'seed' syncs with the host every step, which a CUDA graph cannot "
                                      f"hold: use loop 'fast' with engine {cfg.engine!r}")
        if cfg.dataset_size % cfg.batch_size:
            raise ConfigError("batch_size", f"engine {cfg.engine!r} replays one static shape, so every batch must "
                                            f"be full: dataset_size ({cfg.dataset_size}) must be a multiple of "
                                            f"batch_size ({cfg.batch_size})")

"""One trial's configuration: a frozen dataclass, converted from Tune's dict at one boundary.

`TrialConfig.from_dict(config)` is the trainable's first line; everything below it takes typed
fields. `None` on an axis means "the seed's value": `crossover.trainables.trial.resolve` fills it in and
checks every field, so a bad search space is refused before anything runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
from dataclasses import dataclass

from crossover.schema import MISSING_PRECISION, PRECISIONS  # noqa: F401 (named here beside the rows' columns: the analysis reads them too)

LOOPS = ("fast", "seed")
ENGINES = ("eager", "graph", "compile", "triton")


class ConfigError(ValueError):
    """A config field with a bad value; `field` names it so a sweep can say which axis."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class WorkloadError(ValueError):
    """A workload that cannot be used, in one line: a Workload made wrong (naming the workload, the field and the
    fix), or a reference that names none (naming the module, the attribute and the fix)."""


# The largest value each count may take: past these no trial fits any machine this project runs on,
# or ends in a day, so a typo (width 1e9, dataset_size 1e12, epochs 1e9) is refused by name before
# anything runs, not hours in. Below them, what fits is the cluster's memory's to say
# (sweeps/placeable.py refuses a trial whose estimated bytes no node can hold).
MAXIMA = {"depth": 1_000, "width": 1_000_000, "batch_size": 100_000_000, "dataset_size": 1_000_000_000,
          "epochs": 1_000_000, "threads": 4_096, "micro_batches": 4_096, "context": 1_000_000}


def count(name: str, value) -> int | None:
    """`value` as a count of field `name`: an integer (numpy's too) in [1, MAXIMA[name]], or None (unset).
    Raises ConfigError naming the field, the value and the range."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ConfigError(name, f"{name} must be an integer >= 1, got {value!r}")
    if int(value) > MAXIMA[name]:
        raise ConfigError(name, f"{name} must be <= {MAXIMA[name]:,}, got {int(value):,}: no machine holds or "
                                f"ends a trial that size; give {name} a smaller value")
    return int(value)
DATA_SOURCES = ("auto", "mnist", "digits", "synthetic")


@dataclass(frozen=True)
class TrialConfig:
    workload: str  # the workload's name: a built-in's (crossover.trainables.workloads.WORKLOADS), or a user's
    device: str = "cpu"  # cpu, cuda, cuda/K, ddp:N, ddp-cpu:N or pipe:N (trainables/devices.py)
    depth: int | None = None  # layers; meaning per workload, None = the seed's
    width: int | None = None  # nodes per hidden layer, or channel multiplier for CNNs; None = seed's
    batch_size: int | None = None  # samples per optimiser step; None = the seed's
    dataset_size: int | None = None  # training samples (transformer: sequences); None = the seed's
    context: int | None = None  # transformer: tokens per sequence; None = the seed's (other workloads: None)
    epochs: int | None = None  # epochs in total, warm-up included, at least; None = the seed's
    warmup_epochs: int = 1  # first epochs left out of the timed training
    min_timed_s: float = 0.5  # s: timed epochs go on past `epochs` until this much is timed (trainables/timing.py)
    lr: float | None = None  # learning rate; None = the seed's
    loop: str = "fast"  # 'fast': no host sync per step; 'seed': the seeds' loop, .item() per step
    engine: str = "eager"  # eager, graph (the whole step in a CUDA graph), compile (torch.compile) or triton
    # (peaks: forward, loss and backward in one Triton kernel, trainables/mlp_kernel.py, the step captured as graph's)
    precision: str = "default"  # default (PyTorch's), fp32 (strict), tf32, bf16 or fp16 (PRECISIONS)
    seed: int = 0  # seeds data, initialisation and shuffling
    data: str = "auto"  # image workloads: auto, mnist, digits or synthetic
    data_dir: str | None = None  # directory holding torchvision's MNIST/raw IDX files
    threads: int = 1  # CPU threads: torch.set_num_threads, and the CPUs asked of Ray (per worker for ddp-cpu)
    micro_batches: int | None = None  # pipe:N only: micro-batches per batch; None = 4 (other devices: None)
    exclusive: bool = False  # timing grade: the sweep runs this trial with nothing beside it
    module: str | None = None  # a user's workload: 'module:attr' it is imported from (None: a built-in)
    fingerprint: str | None = None  # a user's workload: its code's fingerprint (crossover/workload.py)
    params: dict | None = None  # the workload's own axes (Workload.params): name -> value

    @classmethod
    def from_dict(cls, config: dict) -> "TrialConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(config) - names)
        if unknown:
            raise ValueError(f"unknown config keys {unknown}; known: {sorted(names)}")
        return cls(**config)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def config_hash(self) -> str:
        """Stable id of what is measured: every field, data_dir too (another directory may hold other
        images, and without one the image workloads fall back to digits or synthetic data). A field added
        after rows were recorded counts only off its default (ADDED), so those rows keep their hashes."""
        fields = {k: v for k, v in self.to_dict().items() if k not in ADDED or v != ADDED[k]}
        blob = json.dumps(fields, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


# Fields added after rows were recorded, and their defaults: at the default they leave the config's
# hash as it was, so a results directory resumes and the reference rows keep their hashes.
ADDED = {"precision": MISSING_PRECISION.value, "context": None, "module": None, "fingerprint": None, "params": None}

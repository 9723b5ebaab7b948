"""A step to count: which job, at which configuration and precision, as the command layer counts it in a process of
its own (sweeps/counting.py) and the analysis names what it needs counted (analysis/decide/ `steps`, `wanted`).

    Step("job.py:workload", epochs=30, batch_size=64, dataset_size=50_000, axes=(("width", 128),))
    crossover predict --workload job.py:workload --epochs 30 --batch-size 64 --dataset-size 50000 --width 128

Frozen and hashable: `crossover decide` and `crossover report` count every step the analysis will look up and hand
it the counts keyed by their Step (sweeps/command.py); sweeps/count_cache.py keeps a counted step under its key.
Imports nothing of the project, so that both layers read it.
"""

from __future__ import annotations

from dataclasses import dataclass

TIMEOUT_S = 120  # s: counting one step may take this long; a make_data, make_model or step that hangs stops there
AXES = ("depth", "width", "context")  # the shared axes a workload may declare, each with a flag of its own


@dataclass(frozen=True)
class Step:
    """One step of a job to count: `crossover predict`'s flags, or a planned run's configuration."""

    workload: str  # path/to/job.py:ATTR, package.module:ATTR, or a built-in's name
    epochs: int  # epochs of the planned run
    batch_size: int | None = None  # samples a step; None: the workload's default
    dataset_size: int | None = None  # samples an epoch; None: the workload's default
    axes: tuple[tuple[str, int], ...] = ()  # (an axis of AXES, value) given
    params: tuple[tuple[str, object], ...] = ()  # the workload's own axes (--param NAME=VALUE)
    timeout_s: float = TIMEOUT_S  # s the counting process may run
    precision: str = "default"  # the precision the run trains at (trainables/precision.py PRECISIONS)
    # folders put on the counting process's path after crossover's: where a package's module (package.module:ATTR)
    # imports from, the folder a row's workload_path names
    folders: tuple[str, ...] = ()

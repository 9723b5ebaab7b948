"""The run a user asks about (`Request`), built once at the command boundary and taken as it is by every layer below:

    crossover predict --workload job.py:workload --epochs 30 --precision bf16 --gpus 1,8   # sweeps/predict.py
    crossover decide results/job --epochs 30 --dataset-size 50000 --gpus 1,8               # analysis/__main__.py
    crossover report results/job --epochs 30 --dataset-size 50000                          # analysis/__main__.py
    python sweeps/scaling.py ...   # the end of a sweep: the swept workload's own run (sweeps/scaling.py)

Here, under every module of analysis/decide/ that prices it, so that each reads it as the command made it. Its
precision is the schema's `Precision` (crossover/schema.py), the one the counted step (crossover/step.py) and the
rows' column hold too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crossover.schema import Precision

from ..prices import Option

MOST = 8  # GPUs of one instance the default counts reach: the largest instance offered
# The axes a planned run names with a flag of their own; any other (lr, loop, a workload's own) with --param.
AXIS_FLAGS = {"batch_size": "--batch-size", "width": "--width", "depth": "--depth", "context": "--context"}


@dataclass(frozen=True)
class Request:
    """The run the user plans (--epochs, --dataset-size), priced instead of the measured grid: one configuration of
    one workload (the axes that pick it among the rows' named in `axes`), at one precision, on the counts of GPUs of
    one instance and of instances asked, its batch a GPU's or the run's."""

    epochs: int  # epochs of the run, its warm-up epochs among them
    samples: int  # samples an epoch: the dataset's size
    workload: str | None = None  # whose rows price it; None: the rows' only workload
    trials: int | None = None  # runs of it (seeds), side by side where an option has the GPUs; None: one
    # (axis, value as given): a column of the configuration (batch_size, width, depth, context: their own
    # flags; lr, loop, ...: --param) or one of the workload's own axes (workload_params, --param k=v)
    axes: tuple[tuple[str, str], ...] = ()
    precision: Precision = Precision.DEFAULT  # the precision it trains at (--precision)
    gpus: tuple[int, ...] = ()  # GPUs of one instance (--gpus); (): 1 and every count an offered instance has, to MOST
    nodes: int = 1  # instances joined by their network (--nodes)
    global_batch: bool = False  # the batch is the run's, split over the GPUs (--global-batch), not a GPU's

    def __post_init__(self) -> None:
        for flag, n in (("--epochs", self.epochs), ("--dataset-size", self.samples), ("--trials", self.trials)):
            if n is not None and n < 1:
                raise ValueError(f"{flag} must be >= 1, got {n} (the planned run)")
        for flag, values in (("--gpus", self.gpus), ("--nodes", (self.nodes,))):
            if any(v < 1 for v in values):
                raise ValueError(f"{flag} must be whole numbers >= 1, got {','.join(map(str, values))}")
        for axis, value in self.axes:
            if not axis:
                raise ValueError(f"--param ={value}: the axis's name is empty; write --param NAME=VALUE, e.g. "
                                 "--param image_size=32")
            if axis in AXIS_FLAGS and not (str(value).isdigit() and int(value) >= 1):
                raise ValueError(f"{AXIS_FLAGS[axis]} must be a whole number >= 1, got {value!r} (the planned run)")

    @property
    def job(self) -> str | None:
        """The job file or module `workload` names where it is a reference (--workload path/to/job.py:ATTR): what
        the planned step is counted from, in place of the one the rows name (workload_path); None: a name."""
        return self.workload if self.workload and ":" in self.workload else None

    @property
    def job_module(self) -> str | None:
        """`job` as its rows' workload_module says it: 'job:ATTR' for path/to/job.py:ATTR (a worker imports a job
        file by its name), a package's module as given."""
        if self.job is None:
            return None
        module, attr = self.job.rsplit(":", 1)
        return f"{Path(module).stem if module.endswith('.py') or '/' in module else module}:{attr}"

    @property
    def named(self) -> dict[str, str]:
        return dict(self.axes)

    @property
    def batch_words(self) -> str:
        """What the batch is, as every screen says it: 'a GPU' (each GPU takes it), or with --global-batch 'in all,
        split over the GPUs'."""
        return "in all, split over the GPUs" if self.global_batch else "a GPU"

    def counts(self, options: list[Option]) -> list[int]:
        """The GPU counts of one instance to price: those asked, else 1 and every count an instance offers to MOST."""
        return sorted(set(self.gpus) if self.gpus else {1} | {o.gpus for o in options if o.gpu and o.gpus <= MOST})

    def instance(self, options: list[Option], gpu: str, gpus: int) -> Option | None:
        """The instance a run on `gpus` GPUs of model `gpu` is rented on: for a count asked (--gpus), the smallest that
        has as many (`smallest`); for the default counts, every count an instance has, one of exactly that many."""
        found = smallest(options, gpu, gpus, self.nodes)
        return found if self.gpus or (found is not None and found.gpus == gpus) else None

    def unoffered(self, options: list[Option]) -> str | None:
        """Where no instance of `options` has as many GPUs as a count asked: which counts it has, in words ('no
        instance of the price table has 16 GPUs (the counts offered: 1, 2, 4, 8)'); None where each count has one."""
        offered = sorted({o.gpus for o in options if o.gpu and (self.nodes == 1 or o.network)})
        lacking = [n for n in self.counts(options) if not offered or n > offered[-1]]
        if not lacking:
            return None
        return (f"no instance of the price table has {' or '.join(map(str, lacking))} GPUs"
                + (" with a network between nodes" if self.nodes > 1 else "")
                + f" (the counts offered: {', '.join(map(str, offered))})")

    def per_gpu(self, batch: int, gpus: int) -> int:
        """The batch one GPU takes on `gpus` GPUs of each of the nodes: the batch itself, or its share of it."""
        ranks = gpus * self.nodes
        if not self.global_batch:
            return batch
        if batch % ranks:
            raise ValueError(f"--global-batch: a batch of {batch:,} does not split evenly over {ranks} GPUs; give a "
                             f"multiple of {ranks}, or leave --global-batch out (then --batch-size is a GPU's)")
        return batch // ranks

    def batches(self, batch: int, options: list[Option]) -> list[int]:
        """The per-GPU batches other than `batch` the run needs a step counted at, on its counts of GPUs (with
        --global-batch, each count's share of the run's batch)."""
        return sorted({self.per_gpu(batch, n) for n in self.counts(options)} - {batch})


def smallest(options: list[Option], gpu: str, gpus: int, nodes: int = 1) -> Option | None:
    """The instance a run on `gpus` GPUs of model `gpu` is rented on: of the smallest count of them at least `gpus`
    (billed whole: an instance of 4 for a run on 3), the cheapest on demand (many.instances prices every one of that
    count); with `nodes` > 1, one with a network between nodes; None where no instance has that many."""
    offered = [o for o in options if o.gpu == gpu and o.gpus >= gpus and (nodes == 1 or o.network)]
    return min(offered, key=lambda o: (o.gpus, o.on_demand.usd_per_h), default=None)

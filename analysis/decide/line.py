"""What the answer holds, typed: each configuration priced and its trials (`Config`), an option's figures for the
run (`Line`) and a home box's break-even against an option (`Even`): what `answer` hands the text, the report, the
charts and `crossover predict`, each figure read by its name.

What is priced (grid.py) and `table` and the data-parallel pricing (many.py) compute on DataFrames, a line a row;
`configs` and `lines` turn such a frame into typed values once, where the answer is made (`Line.of`, `Config.of`
name a column no field holds: a figure is never dropped unseen), and `frame` turns them back into one for a chart or
a printed table.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

NAN = math.nan


@dataclass(frozen=True)
class Line:
    """One option's time and cost for the run: a rented instance (on demand or spot, on one GPU or on all of an
    instance's), your CPU or GPUs, a home box, or a GPU model no option of the price table has ('no price').
    A float that is not known is NaN; a text, a count or a yes/no that is not known is None."""

    option: str  # its name: 'RunPod H100 SXM community', 'your CPU, 16 threads (measured here)', 'H100 (no price)'
    kind: str  # 'on-demand', 'spot', grid.OWN_CPU, grid.OWN_GPU, grid.HOME_BOX, 'no price'
    model: str  # the GPU model (the GPU table's key), or the CPU's name ('CPU' for a rented one)
    gpus: int  # GPUs of one instance (0: a CPU)
    # the run's wall time (a rental's start-up included, billed), in s and in h, each with its 90% interval
    wall_s: float
    wall_lo_s: float
    wall_hi_s: float
    wall_h: float
    wall_lo_h: float
    wall_hi_h: float
    usd: float  # what the run costs, with its interval; NaN: no price
    usd_lo: float
    usd_hi: float
    predicted: bool  # whether any figure rests on a prediction ('~')
    basis: str  # how it is costed: '1 x H100, rented whole; 180 s start-up; billed per 1 s, at least 60 s'
    predicted_share: float = NAN  # the share of its GPU-time predicted (1: wholly the model's)
    nodes: int = 1  # instances joined by their network
    # the run on its GPUs alone (makespan; no start-up), with its interval
    run_s: float = NAN
    run_lo: float = NAN
    run_hi: float = NAN
    # a planned run's time per epoch, with its interval
    epoch_s: float = NAN
    epoch_lo: float = NAN
    epoch_hi: float = NAN
    packed: int | None = None  # trials a GPU held at once where rows measured them packed (cuda/K)
    gpu_s: float = NAN  # GPU-seconds the sweep holds
    hosts: str | None = None  # where its rows were measured
    measured_at: pd.Timestamp | None = None  # the newest finished_at of its rows
    busy: str = ""  # the busy marks of the rows it rests on (grid.BUSY_MARKS)
    power_w: float = NAN  # the power its rows measured (RAPL, NVML), per device
    electricity: str | None = None  # your machine's: what its electricity is costed at
    # where a planned run's size lies against the sizes measured, and how far a figure was carried
    reach: str | None = None
    factor: float = NAN
    modelled: bool | None = None
    extrapolated: bool | None = None
    unreliable: bool | None = None
    # what analysis/model/ says of a predicted step beside its time (speeds.HOST)
    host_share: float = NAN
    host_bound: bool | None = None
    bound_by: str | None = None
    graph_helps: bool | None = None
    graph_epoch_s: float = NAN
    graph_epoch_s_lo: float = NAN
    graph_epoch_s_hi: float = NAN
    compile_epoch_s: float = NAN
    compile_epoch_s_lo: float = NAN
    compile_epoch_s_hi: float = NAN
    # GPU memory: what the run needs, how that was found, the card's, whether it fits; where not, the largest batch
    # that does and the steps of it that accumulate the run's batch (crossover predict)
    needs_bytes: float = NAN
    needs_gb: float = NAN
    needs_how: str | None = None
    memory_gb: float = NAN
    fits: bool | None = None
    largest_batch: int | None = None
    accumulate_steps: int | None = None
    # a rental's start-up (in wall_s, billed) and its price's date, source and age
    startup_s: float = NAN
    price_date: str | None = None
    price_source: str | None = None
    price_stale: bool | None = None
    # a home box: its write-off and electricity, whether it is for sale (not a record of what a box cost once)
    energy_usd: float = NAN
    fixed_usd_per_month: float = NAN
    for_sale: bool | None = None
    purchase_usd: float = NAN
    lifetime_years: float = NAN
    utilisation: float = NAN
    # the box to buy's break-even (choosing.picks): runs a month past which it costs less than renting `even_against`
    even_n: float = NAN
    even_against: str | None = None
    even_against_usd: float = NAN
    even_predicted: bool | None = None
    # a run on several GPUs (many.py): the batch a GPU takes and the run's, efficiency, DDP or FSDP, the link
    per_gpu_batch: int | None = None
    global_batch: int | None = None
    efficiency: float = NAN
    parallel: str | None = None
    link: str | None = None
    comm_s: float = NAN
    instance_gpus: int | None = None  # the GPUs of the instance it is rented on, where that has more than the run uses

    @classmethod
    def of(cls, cells: Mapping) -> Line:
        """The line of a row of `table`'s (or many.py's) frame: each cell as its field's type holds it (a null
        float NaN, any other null None, numpy's scalars Python's). ValueError where a column has no field."""
        return _of(cls, cells, SCRATCH)

    @property
    def several(self) -> bool:
        """Whether the run spans several GPUs (of one instance or of several)."""
        return self.gpus * self.nodes > 1


# columns a frame holds while it is priced and no line keeps: the run's sizes set beside each line
SCRATCH = {"samples", "batch_size"}


def _of(cls, cells: Mapping, scratch: Collection[str] = ()):
    """A `cls` of a frame's row: each cell as its field's type holds it; ValueError naming a column (not in
    `scratch`) that no field holds."""
    kinds = {f.name: str(f.type) for f in fields(cls)}
    unknown = set(cells) - kinds.keys() - set(scratch)
    if unknown:
        raise ValueError(f"columns without a field of {cls.__name__}: {sorted(unknown)}; add them to "
                         f"{cls.__name__}'s fields ({__name__})")
    return cls(**{name: _cell(cells[name], kind) for name, kind in kinds.items() if name in cells})


def _null(value) -> bool:
    return value is None or value is pd.NaT or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _cell(value, kind: str):
    """`value` as a field of type `kind` (its annotation's text) holds it."""
    value = value.item() if isinstance(value, np.generic) else value
    if kind == "float":
        return NAN if _null(value) else float(value)
    if _null(value):
        return None if "None" in kind else {"str": "", "int": 0, "bool": False}[kind]
    if kind.startswith("int"):
        return int(value)
    if kind.startswith("bool"):
        return bool(value)
    return value


@dataclass(frozen=True)
class Even:
    """A home box against the best option of a class (the cheapest on-demand GPU, the cheapest spot GPU, your CPU):
    the runs a month past which the box costs less, and the box's hours of use that takes (choosing.break_even)."""

    box: str  # the box's option
    against: str  # the option it is set against
    versus: str  # the class: 'cheapest on-demand GPU', 'cheapest spot GPU', 'own CPU'
    against_usd: float  # the option's cost of a run
    against_h: float  # and its wall time
    box_usd_energy: float  # the box's electricity for a run
    box_h: float  # and its wall time
    fixed_usd_per_month: float  # the box's write-off a month
    sweeps_per_month: float  # runs a month past which the box costs less (inf: never)
    box_hours_per_month: float  # the box's hours of use at that many runs
    predicted: bool  # whether either side's figure rests on a prediction


@dataclass(frozen=True)
class Config:
    """A configuration the answer prices and how many trials of it: one of the sweep's (grid.sweep: what the rows
    measured), the planned run (grid.plan_grid: its shape at the plan's epochs and size), or a step counted with no
    row (grid.counted_grid). A size the configuration does not have is None."""

    config_key: str  # the rows' configuration key (a planned run's: its shape; a counted step's: 'run')
    workload: str
    epochs: int
    warmup_epochs: int
    trials: int
    depth: int | None = None
    width: int | None = None
    batch_size: int | None = None
    dataset_size: int | None = None
    context: int | None = None
    config: str | None = None  # its sizes in words (load.sizes_label)
    full_batch: bool = False  # its batch is the whole dataset (peaks): it grows with the dataset

    @classmethod
    def of(cls, cells: Mapping) -> Config:
        """The configuration of a row of grid.py's frames (`Line.of`'s rules)."""
        return _of(cls, cells)


def configs(grid: pd.DataFrame) -> tuple[Config, ...]:
    """Every row of `grid` (grid.py's) as a Config, in its order."""
    return tuple(Config.of(row) for row in grid.to_dict("records"))


def lines(frame: pd.DataFrame) -> tuple[Line, ...]:
    """Every row of `frame` (`table`'s, many.py's) as a Line, in its order."""
    return tuple(Line.of(row) for row in frame.to_dict("records"))


def frame(said: Iterable[Line | Even | Config]) -> pd.DataFrame:
    """Lines (or break-evens, configurations) as a frame, a field a column: for a chart or a printed table."""
    return pd.DataFrame([dataclasses.asdict(line) for line in said])

"""A step to count: which job, at which configuration and precision, as the command layer counts it in a process of
its own (sweeps/counting.py) and the analysis names what it needs counted (analysis/decide/ `steps`, `wanted`).

    Step("job.py:workload", epochs=30, batch_size=64, dataset_size=50_000, axes=(("width", 128),))
    crossover predict --workload job.py:workload --epochs 30 --batch-size 64 --dataset-size 50000 --width 128

Frozen and hashable: `crossover decide` and `crossover report` count every step the analysis will look up and hand
it the counts keyed by their Step (sweeps/command.py); sweeps/count_cache.py keeps a counted step under its key.
Imports nothing of the project but the schema's Precision, so that both layers read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from crossover.schema import Precision

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
    precision: Precision = Precision.DEFAULT  # the precision the run trains at
    # folders put on the counting process's path after crossover's: where a package's module (package.module:ATTR)
    # imports from, the folder a row's workload_path names
    folders: tuple[str, ...] = ()


# a count's columns that grow with the batch: a line between the two batches counted (`Counted`)
PEAK = ("peak_memory_bytes", "peak_memory_per_sample_bytes")


def _lined_up(small: list, large: list) -> list[tuple]:
    """The ops of a step at two batch sizes ([kind, dtype, FLOPs, bytes, launches] each, in the order dispatched)
    paired: an op of both (the same kind, dtype and launches, in the same place of the step) its FLOPs and bytes at
    each, times (1, 1); an op of one alone (a loop over the batch's samples runs its body once more a sample: a
    detector's per-image proposals) its own at both batches, times (1, 0) or (0, 1). Each as (kind, dtype, launches,
    FLOPs at each, bytes at each, times at each)."""
    def same(a, b):
        return a[0] == b[0] and a[1] == b[1] and a[4] == b[4]

    def both(a, b):
        return (a[0], a[1], a[4], (a[2], b[2]), (a[3], b[3]), (1, 1))

    def alone(op, times):
        return (op[0], op[1], op[4], (op[2], op[2]), (op[3], op[3]), times)

    if len(small) == len(large) and all(map(same, small, large)):  # most steps: the same ops, larger
        return [both(a, b) for a, b in zip(small, large)]
    import difflib  # only a step whose ops depend on its batch pays for the alignment

    sig = [[(op[0], op[1], op[4]) for op in ops] for ops in (small, large)]
    paired: list[tuple] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, sig[0], sig[1], autojunk=False).get_opcodes():
        if tag == "equal":
            paired += [both(a, b) for a, b in zip(small[i1:i2], large[j1:j2])]
        else:
            paired += [alone(op, (1, 0)) for op in small[i1:i2]] + [alone(op, (0, 1)) for op in large[j1:j2]]
    return paired


@dataclass(frozen=True)
class Counted:
    """A job's step counted at two batch sizes, which every batch is a line through: FLOPs, bytes, launches and the
    memory a step holds grow with its samples (a per-sample term) over what a step costs whatever its batch (the
    weights, the optimiser, the launches). sweeps/count_step.py counts it; `at` gives the count a batch has, as a
    row's columns, with no torch and no process: `crossover predict` asked again at another batch size answers by
    arithmetic (sweeps/count_cache.py keeps it). A step whose ops depend on its batch (a loop over its samples) has
    its ops lined up (`_lined_up`): an op of the larger batch alone is run once more for each sample more."""

    row: dict  # the count's columns that its batch does not change (workload, model, n_params, counted_on, ...)
    batches: tuple[int, int]  # samples a step of the two counts, the smaller first
    values: dict  # a column that grows with the batch -> its value at each of `batches` (None: not counted)
    ops: tuple  # (kind, dtype, launches, FLOPs at each batch, bytes at each, times dispatched at each) an op
    peak: tuple | None = None  # (peak_memory_bytes at batches[1], peak_memory_per_sample_bytes) or None

    @classmethod
    def of(cls, small: dict, large: dict) -> Counted:
        """From count_step's two counts of one step (each a row's columns, with `ops_sequence`), at the smaller
        batch and the larger; the larger's peak (its peak and a sample's share of it) is the step's."""
        batches = (int(small["batch_size"]), int(large["batch_size"]))
        grows = [k for k, v in large.items() if k.endswith("_per_step") and k != "ops_per_step"
                 and (v is None or isinstance(v, (int, float)))]
        fixed = {k: v for k, v in large.items()
                 if k not in grows and k not in (*PEAK, "ops_per_step", "ops_sequence", "batch_size",
                                                 "dataset_size", "steps_per_epoch")}
        merged: dict[tuple, tuple[int, int]] = {}  # an op dispatched many times (a loop's body) listed once
        for *same, times in _lined_up(small["ops_sequence"], large["ops_sequence"]) if "ops_sequence" in large else ():
            was = merged.get(tuple(same), (0, 0))
            merged[tuple(same)] = (was[0] + times[0], was[1] + times[1])
        ops = tuple((*same, times) for same, times in merged.items())
        peak = (large["peak_memory_bytes"], large.get("peak_memory_per_sample_bytes")) \
            if large.get("peak_memory_bytes") is not None else None
        return cls(fixed, batches, {k: (small.get(k), large[k]) for k in grows}, ops, peak)

    def _line(self, a, b, batch: int):
        if a is None or b is None:
            return b
        lo, hi = self.batches
        return a + (b - a) * (batch - lo) / (hi - lo) if hi != lo else b

    def at(self, batch: int, dataset_size: int) -> dict:
        """The count of a step of `batch` samples, in an epoch of `dataset_size`: the columns count_step's row has
        (the per-step figures on the line through the two counts, never below 0; ops_per_step op by op, as
        trainables/costs.py ops_json lists them; the peak from the larger count and a sample's share)."""
        values = {}
        for k, (a, b) in self.values.items():
            v = self._line(a, b, batch)
            values[k] = None if v is None else max(round(v), 0)
        merged: dict = {}
        for kind, dtype, launches, flops, moved, times in self.ops:
            n = max(self._line(times[0], times[1], batch), 0.0)
            if n:
                key = (kind, dtype, max(round(self._line(flops[0], flops[1], batch)), 0),
                       max(round(self._line(moved[0], moved[1], batch)), 0), launches)
                merged[key] = merged.get(key, 0) + n
        listed = [[*key, int(n) if float(n).is_integer() else round(n, 3)]
                  for key, n in sorted(merged.items(), key=lambda kv: (-kv[0][2], -kv[0][3]))]
        peak = {}
        if self.peak is not None:
            top, per_sample = self.peak
            peak = {"peak_memory_bytes": top if per_sample is None else top + per_sample * (batch - self.batches[1]),
                    "peak_memory_per_sample_bytes": per_sample}
        return {**self.row, "batch_size": batch, "dataset_size": dataset_size,
                "counted_batches": " and ".join(f"{b:,}" for b in self.batches) + " samples",
                "steps_per_epoch": -(-dataset_size // batch), **values,
                **({"ops_per_step": json.dumps(listed)} if self.ops else {}), **peak}

    def to_json(self) -> dict:
        return {"row": self.row, "batches": list(self.batches), "values": {k: list(v) for k, v in self.values.items()},
                "ops": [[k, d, n, list(f), list(b), list(t)] for k, d, n, f, b, t in self.ops],
                "peak": list(self.peak) if self.peak is not None else None}

    @classmethod
    def from_json(cls, kept: dict) -> Counted:
        return cls(dict(kept["row"]), tuple(kept["batches"]), {k: tuple(v) for k, v in kept["values"].items()},
                   tuple((k, d, n, tuple(f), tuple(b), tuple(t)) for k, d, n, f, b, t in kept["ops"]),
                   tuple(kept["peak"]) if kept.get("peak") is not None else None)

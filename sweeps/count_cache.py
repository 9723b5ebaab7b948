"""A job's counted step, kept in the user's cache folder: `crossover predict`, `decide` or `report --epochs` asked
again for the same step, at any batch size, dataset size or number of epochs, answers without starting a process,
importing torch or running the job's code.

    counts = count_cache.recount(step, replace(step, precision="default"))   # {Step: its count}: sweeps/command.py
    kept, counting = count_cache.begin(steps)     # what is kept; a process started for the rest (sweeps/predict.py,
    counts = kept | count_cache.end(counting, started)   # which fits the model meanwhile)

A step's count depends on the job, its configuration (depth, width, context, its own axes), the precision and the
code that counts it; not on the dataset's size or the epochs (steps_per_epoch is arithmetic, redone here at the size
asked), and on the batch size along a line (crossover.step Counted: the step is counted at two batch sizes, every
other one is arithmetic). So the key (`key`) is the job's fingerprint (trainables/fingerprint.py `of`: the job file's
bytes, and those of the Python modules beside it, where they are few: MODULES_BESIDE), the configuration but its
batch and dataset size (kept where no batch size is given: a workload's default batch may follow its dataset size,
peaks' does), the precision, crossover's counting code (trainables/, sweeps/count_step.py, the schema) and the
installed torch and torchvision. One process counts every precision a configuration is asked at (`begin`). Editing
the job file, a module beside it, or crossover's code is a new key: the next call counts again. A job named as
package.module:ATTR is not kept (where its files are is known only once it is imported, in the counting process),
but for an example job (`--workload zoo`: crossover.examples.zoo:workload), keyed by its file's bytes.
The entries are analysis/cache.py's, under its folder's count/. A kept count at another dataset size does not
run the workload's own `check` at that size again: a check that refuses a dataset size alone (examples/realsize.py's
last batch of one sample) is met where the step is counted, not on the cached answer.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from crossover import schema
from crossover.step import Counted, Step

from ..analysis import cache
from ..trainables import fingerprint
from ..trainables.job import example_file, is_reference, locate
from .counting import PredictError, finish, start

MODULES_BESIDE = (64, 4 * 2**20)  # at most so many .py files, of at most so many bytes in all, beside the job file
KIND = "count"  # the cache's folder for these entries

# crossover's code that a count runs: trainables/ (the loop, the counters), the counting process, the schema
COUNTING = (Path(fingerprint.__file__).resolve().parent, Path(__file__).resolve().with_name("count_step.py"),
            Path(schema.__file__).resolve())


def job_fingerprint(ref: str) -> str | None:
    """The job's fingerprint: its file's bytes and those of the modules beside it (at most MODULES_BESIDE; else the
    file's alone); an example job's module (crossover.examples.zoo:workload) its file's bytes alone (the examples
    import none of each other); a built-in's name as it is (its code is crossover's); None for any other
    package.module:ATTR."""
    if not is_reference(ref):
        return fingerprint.of(ref.encode(), "built-in")
    module, _, path = locate(ref)
    if path is None:
        example = example_file(module)
        return fingerprint.of(example.read_bytes(), "example") if example is not None else None
    beside = sorted(p for p in path.parent.glob("*.py") if p != path)
    few = len(beside) <= MODULES_BESIDE[0] and sum(p.stat().st_size for p in beside) <= MODULES_BESIDE[1]
    return fingerprint.of(path.read_bytes(), cache.digest(*cache.files(*beside)) if few else "its file alone")


def key(step: Step) -> str | None:
    """The entry's key for `step` (module docstring); None where it is not kept. step.folders is no part of it: a
    step names folders only where its job is a module by name (package.module:ATTR), which is never kept but for an
    example job, which imports from crossover's own folder."""
    job = job_fingerprint(step.workload)
    if job is None:
        return None
    given = step.batch_size is not None  # any batch is a line through the count (crossover.step Counted)
    return cache.digest(job, step.workload, repr(step.axes), repr(sorted(step.params)), step.precision,
                        "any" if given else "default", "any" if given else str(step.dataset_size),
                        cache.version("crossover"), cache.version("torch"), cache.version("torchvision"),
                        *cache.files(*COUNTING, suffixes=(".py",)))


def _at(step: Step, config: dict, counted: Counted, default_samples: int | None) -> dict | None:
    """The count of `step` (at its batch size and dataset size, else the workload's default ones), or None where
    the count cannot give it (a batch larger than the dataset: counted anew, the counting process says what is
    wrong)."""
    batch, samples = step.batch_size or config["batch_size"], step.dataset_size or default_samples
    if samples is None or batch > samples:
        return None
    return config | counted.at(batch, samples)


def read(step: Step) -> dict | None:
    """The kept count of `step`, at its batch and dataset size (the workload's default where it gives none), or None
    where none is kept, or none it can give."""
    name = key(step)
    entry = cache.read(KIND, name) if name else None
    if entry is None:
        return None
    return _at(step, entry["config"], Counted.from_json(entry["counted"]), entry.get("default_dataset_size"))


def keep(step: Step, config: dict, counted: dict[str, Counted]) -> dict | None:
    """The counting process's answer to `step` (the configuration's columns, and its count at each precision) kept,
    each precision under its `key`, with the workload's default dataset size where the step gave none (and, where it
    gave no batch size, under the key of the batch it counted at too: a later call at another batch reads it);
    `step`'s count returned."""
    default = config["dataset_size"] if step.dataset_size is None else None
    for precision, line in counted.items():
        at = replace(step, precision=schema.Precision(precision))  # the process's answer keys each by its value
        for each in {at, replace(at, batch_size=config["batch_size"])}:
            name = key(each)
            if name:
                known = cache.read(KIND, name) or {}
                cache.write(KIND, name, {"config": config, "counted": line.to_json(),
                                         "default_dataset_size": default or known.get("default_dataset_size")})
    return _at(step, config, counted[step.precision], default)


@dataclass
class Counting:
    """A counting process under way (`begin`) and the steps it answers: one job and configuration, at one or more
    precisions and batch sizes."""

    process: subprocess.Popen
    steps: tuple[Step, ...]


def begin(steps: Sequence[Step]) -> tuple[dict[Step, dict], list[Counting]]:
    """The `steps` kept in the cache, and a counting process started for the rest: one per job and configuration,
    which counts every precision they ask (the batch sizes are a line through its count)."""
    kept = {s: c for s in steps if (c := read(s)) is not None}
    groups: dict[Step, list[Step]] = {}
    for s in steps:
        if s not in kept:  # one process a configuration: its precision and (where given) its batch are the count's
            groups.setdefault(replace(s, precision=schema.Precision.DEFAULT, epochs=0,
                                      batch_size=None if s.batch_size is None else 0), []).append(s)
    return kept, [Counting(start(g[0], tuple(s.precision for s in g)), tuple(g)) for g in groups.values()]


def end(counting: Sequence[Counting], started: float) -> dict[Step, dict]:
    """Each counting process finished (within its steps' time limit from `started`) and kept: its steps' counts;
    PredictError (a ValueError) where one cannot be counted. The processes still running are stopped then."""
    counts: dict[Step, dict] = {}
    try:
        for c in counting:
            config, counted = finish(c.process, c.steps[0], started)
            for s in c.steps:
                found = keep(s, config, counted)
                if found is None:
                    raise PredictError(f"--workload {s.workload}: batch {s.batch_size} is larger than the dataset "
                                       f"({s.dataset_size or config['dataset_size']} samples): give a smaller "
                                       "--batch-size or a larger --dataset-size")
                counts[s] = found
    finally:
        for c in counting:
            if c.process.poll() is None:  # one failed first: the others are not left behind
                c.process.kill()
                c.process.wait()
    return counts


def recount(*steps: Step) -> dict[Step, dict]:
    """`steps`, from the count cache where they were counted before, else counted now (and kept); PredictError (a
    ValueError) where one cannot be counted."""
    kept, counting = begin(steps)
    return kept | end(counting, time.monotonic())

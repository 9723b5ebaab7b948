"""A job's counted step, kept in the user's cache folder: `crossover predict`, `decide` or `report --epochs` asked
again for the same step answers without starting a process, importing torch or running the job's code.

    kept = count_cache.read(step)            # the counted step at step's dataset size, or None: count it
    counted = count_cache.keep(step, finish(start(step), step, started))   # sweeps/predict.py
    counted = count_cache.recount(step)      # the two together: sweeps/command.py, predict's smaller batches

A step's count depends on the job, its configuration (batch size, depth, width, context, its own axes), the precision
and the code that counts it; not on the dataset's size or the epochs (steps_per_epoch is arithmetic, redone here at
the size asked). So the key (`key`) is the job's fingerprint (trainables/fingerprint.py `of`: the job file's bytes,
and those of the Python modules beside it, where they are few: MODULES_BESIDE), the configuration but its dataset
size (kept where no batch size is given: a workload's default batch may follow it, peaks' does), the precision,
crossover's counting code (trainables/, sweeps/count_step.py, the schema) and the installed torch and torchvision.
Editing the job file, a module beside it, or crossover's code is a new key: the next call counts again. A job named
as package.module:ATTR is not kept (where its files are is known only once it is imported, in the counting process),
but for an example job (`--workload zoo`: crossover.examples.zoo:workload), keyed by its file's bytes.
The entries are analysis/cache.py's, under its folder's count/. A kept count at another dataset size does not
run the workload's own `check` at that size again: a check that refuses a dataset size alone (examples/realsize.py's
last batch of one sample) is met where the step is counted, not on the cached answer.
"""

from __future__ import annotations

import time
from pathlib import Path

from crossover import schema
from crossover.step import Step

from ..analysis import cache
from ..trainables import fingerprint
from ..trainables.job import example_file, is_reference, locate
from .counting import finish, start

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
    dataset = "any" if step.batch_size is not None else str(step.dataset_size)
    return cache.digest(job, step.workload, repr(step.axes), repr(sorted(step.params)), step.precision,
                        str(step.batch_size), dataset, cache.version("crossover"), cache.version("torch"),
                        cache.version("torchvision"), *cache.files(*COUNTING, suffixes=(".py",)))


def read(step: Step) -> dict | None:
    """The kept count of `step`, at its dataset size (the workload's default where it gives none), or None
    where none is kept, or none at a size the entry can give (the default, or a batch larger than the dataset)."""
    name = key(step)
    entry = cache.read(KIND, name) if name else None
    if entry is None:
        return None
    counted = dict(entry["counted"])
    samples = step.dataset_size or entry.get("default_dataset_size")
    if samples is None or counted["batch_size"] > samples:  # counted anew: the counting process says what is wrong
        return None
    return counted | {"dataset_size": samples, "steps_per_epoch": -(-samples // counted["batch_size"])}


def keep(step: Step, counted: dict) -> dict:
    """`counted` (the counting process's answer to `step`) kept under `key`, with the workload's default dataset
    size where the step gave none; returned as it is."""
    name = key(step)
    if name:
        known = cache.read(KIND, name) or {}
        default = counted["dataset_size"] if step.dataset_size is None else known.get("default_dataset_size")
        cache.write(KIND, name, {"counted": counted, "default_dataset_size": default})
    return counted


def recount(step: Step) -> dict:
    """`step`, from the count cache where it was counted before, else counted now (and kept); PredictError (a
    ValueError) where it cannot be counted."""
    return read(step) or keep(step, finish(start(step), step, time.monotonic()))

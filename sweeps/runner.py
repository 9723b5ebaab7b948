"""Runs a Space on Ray Tune: skips what is already measured, writes rows as trials end.

Every sweep script (sweeps/scaling.py, ...) builds a Space and calls `run`. Ray is started here
only if the caller has not connected yet (`connect`), so tests and scripts share one path.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

# Tune's CSV/JSON/TensorBoard loggers would duplicate every row in its trial folders; the Parquet
# rows are the record. Set before Tune is imported.
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")

import ray  # noqa: E402
from ray import tune  # noqa: E402

from sweeps.space import Space, resources_for  # noqa: E402
from sweeps.store import RowWriter, Store  # noqa: E402
from trainables.devices import parse  # noqa: E402
from trainables.train import trainable  # noqa: E402

# Tune's end-of-run analysis looks for the logger files switched off above; the rows are in Parquet.
logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)


def connect(address: str | None) -> None:
    """Join a running cluster (`address`), or start Ray in this process with the machine's cores."""
    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(include_dashboard=False, log_to_driver=False)


def node_cpus() -> int:
    """CPUs of the largest alive node: what a CPU trial may own."""
    return int(max(n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]))


def cluster_devices() -> tuple[str, ...]:
    return ("cpu", "cuda") if ray.cluster_resources().get("GPU", 0) > 0 else ("cpu",)


def run(space: Space, out: Path | str, max_concurrent: int | None = None, log=print) -> Store:
    """Measure every config of `space` not yet in `out`/<name>; returns the store holding the rows."""
    configs = space.expand()  # refuses a bad space before anything runs
    if any(parse(c.device).is_cuda for c in configs) and ray.cluster_resources().get("GPU", 0) == 0:
        raise ValueError(f"device 'cuda' asked for in sweep {space.name!r} but the Ray cluster has no GPU; "
                         "drop it from --devices, or connect to a cluster with GPUs (--address)")
    store = Store(Path(out) / space.name)
    done = store.measured()
    todo = [c for c in configs if c.config_hash() not in done]
    log(f"sweep {space.name!r}: {len(configs)} trials, {len(configs) - len(todo)} already measured "
        f"in {store.dir}, {len(todo)} to run")
    if not todo:
        return store
    tuner = tune.Tuner(
        tune.with_resources(trainable, resources_for),
        param_space=space.param_space(todo),
        tune_config=tune.TuneConfig(max_concurrent_trials=max_concurrent, reuse_actors=True,
                                    trial_dirname_creator=lambda trial: trial.trial_id),
        run_config=tune.RunConfig(
            name=space.name,
            storage_path=str((store.dir / "_tune").resolve()),
            callbacks=[RowWriter(store, space.name, len(todo), log)],
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=0),
        ),
    )
    tuner.fit()
    return store

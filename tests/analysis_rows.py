"""Synthetic result rows for the analysis tests: schema-exact, with a crossover planted where asked."""

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from crossover.analysis.load import labelled
from crossover import schema


def plant(*args, **kwargs) -> pd.DataFrame:
    """planted_rows as load.read() returns them."""
    return frame(planted_rows(*args, **kwargs))


def planted_rows(sizes, cpu, gpu, epochs=9, noise=0.1, seed=0, workload="disc", axis="n_params", runs=1,
                 run_noise=0.0, **fixed) -> list[dict]:
    """Rows whose true time per epoch is cpu(x) on 'cpu' and gpu(x) on 'cuda', with lognormal noise per epoch.

    `runs` rows (seeds 0, 1, ...) per device and size; each run's epochs share a lognormal offset of
    sd `run_noise` (run-to-run noise: one run's epochs agree with each other, the runs do not).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for device, curve in (("cpu", cpu), ("cuda", gpu)):
        for i, x in enumerate(sizes):
            for run in range(runs):
                offset = rng.normal(0, run_noise) if run_noise else 0.0  # no draw: the one-run stream is unchanged
                epoch_s = (curve(x) * np.exp(offset + rng.normal(0, noise, epochs))).tolist()
                # n_params follows the model's shape in real rows: give each size its own depth
                shape = {"depth": i + 1} if axis == "n_params" else {}
                rows.append(row(workload, device, epoch_s, **shape, **{axis: int(x), "seed": run, **fixed}))
    return rows


def row(workload, device, epoch_s, **values) -> dict:
    """One ok row with every timing column consistent with `epoch_s`."""
    e = np.asarray(epoch_s)
    base = {"schema_version": schema.SCHEMA_VERSION, "sweep": "synthetic", "status": "ok", "workload": workload,
            "device": device, "batch_size": 100, "dataset_size": 1000, "epochs": len(e) + 1, "warmup_epochs": 1,
            "lr": 0.1, "loop": "fast", "precision": "default", "seed": 0, "data_requested": "auto", "n_params": 1000,
            "depth": 4,
            "h2d_s": 0.001, "warmup_s": float(e[0]), "train_s": float(e.sum()), "eval_s": float(e.mean() / 4),
            "setup_s": 0.01, "epoch_s": e.tolist(), "epoch_s_median": float(np.median(e)),
            "epoch_s_iqr": float(np.subtract(*np.percentile(e, [75, 25]))), "epoch_s_min": float(e.min()),
            "epoch_s_max": float(e.max()), "steps_per_epoch": 10, "train_loss": 0.3, "train_accuracy": 0.9,
            "hostname": "box", "device_name": "NVIDIA H100 80GB HBM3" if device != "cpu" else "Intel(R) Xeon(R) Processor",
            "cpu_model": "Intel(R) Xeon(R) Processor", "torch_threads": 2 if device == "cpu" else 1,
            "torch_version": "2.14.1", "ray_version": "2.60.0", "python_version": "3.11.7"}
    base.update(values)
    base["samples_per_s"] = base["dataset_size"] / float(e.mean())
    base["total_s"] = base["setup_s"] + base["h2d_s"] + base["warmup_s"] + base["train_s"] + base["eval_s"]
    base["config_hash"] = f"{workload}-{device}-{hash(tuple(sorted((k, str(v)) for k, v in values.items())))}"
    return base


def write(rows, directory):
    """Rows as a results directory: one Parquet file each, as sweeps/store.py writes them."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(rows):
        pq.write_table(schema.to_table([r]), directory / f"{i}.parquet")
    return directory


def frame(rows) -> pd.DataFrame:
    """Rows as load.read() returns them: the exact schema's table as pandas, with an arm and the device's fields."""
    return labelled(schema.to_table(rows).to_pandas().assign(results_dir="synthetic"))


def user_cpu_rows(directory, workload="my_cnn"):
    """A user's own model measured on the CPU alone, as a results directory: the ResNet-18 example's CPU rows
    as measured (results/reference/h100-2026-11-26/resnet18), renamed `workload`, which no GPU row measured."""
    import pyarrow as pa

    from crossover.analysis.load import REFERENCE
    table = pq.read_table(REFERENCE / "h100-2026-11-26" / "resnet18" / "resnet18-cpu.parquet")
    for name, value in (("workload", workload), ("workload_module", f"{workload}:workload")):
        column = pa.array([value] * len(table), table.schema.field(name).type)
        table = table.set_column(table.schema.get_field_index(name), name, column)
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / "rows.parquet")
    return directory

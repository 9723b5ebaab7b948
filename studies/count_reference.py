"""Every configuration of the shipped reference GPU rows, counted as `crossover predict` counts a user's job.

    python studies/count_reference.py            # writes results/reference/_step-counts/counts.parquet
    python studies/count_reference.py --neusight # writes results/reference/_step-counts/neusight.parquet
    python studies/count_reference.py --memory   # writes results/reference/_step-counts/memory.parquet

The laptop's case: a user without a GPU has only a step counted on the CPU (sweeps/count_step.py: the meta
device, the optimiser's update as a GPU runs it), never the GPU's own count. `python -m crossover.analysis model
--validate` predicts each held-out workload's reference GPU rows from these counts, so its error is the
one `crossover predict` makes, not the smaller one of a fit handed the GPU's own count.

One count per distinct (workload, its own axes, depth, width, context, batch size) of the eager, ok
reference rows of one CPU or a whole GPU at PyTorch's default or strict FP32 precision (one computation to
count); a step's counts do not depend on the dataset's size. The rows written before a step's costs were counted
(the seeds' first sweeps, 2026-11-21 and -22) take their costs from here too (analysis/model/counts.py
`step_costs`). The examples' modules are read from examples/; the CSV example's data is made again where its rows
name it (examples/make_csv.py, its seed). Run it again whenever the reference rows change; it prints what it
counted.

With --neusight it counts instead the configurations of NeuSight's whole-model labels
(analysis/public-tables/neusight_train_latency.csv: BERT-large at 512 tokens, GPT-2 large at 1,024), written
as examples/realsize.py's, for `model --validate` to predict: labels of GPUs nobody here measured, in no fit.
With --memory, each real-sized reference configuration's peak memory as `crossover predict` counts it (its
precision's), and its training set's bytes a sample, for `model --validate` to set against the peak its rows measured.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from crossover.schema import BUILTIN_MODULE, FORWARD_OPS, OPS_PER_STEP, OP_COLUMNS

from crossover.analysis.load import REFERENCE, read
from crossover.analysis.model import COUNTED as OUT
from crossover.analysis.model import MEMORY_COUNTED, NEUSIGHT_COUNTED, NEUSIGHT_LABELS
from crossover.sweeps.count_step import counted

KEYS = ["workload", "workload_params", "depth", "width", "context", "batch_size"]
COUNTS = ["flops_per_step", "bytes_per_step", "launches_per_step", FORWARD_OPS, *OP_COLUMNS, OPS_PER_STEP]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def reference(module: str | None, workload: str) -> str:
    """The workload as count_step takes it: a built-in's name, or an example's path/to/job.py:ATTR."""
    if not isinstance(module, str) or module == BUILTIN_MODULE:
        return workload
    name, attr = module.split(":")
    return f"{EXAMPLES / name.split('.')[-1]}.py:{attr}"


def configs(rows: pd.DataFrame) -> pd.DataFrame:
    """The configurations to count: every one of a usable row's (analysis/model/counts.py `_usable`: ok, eager, on
    one CPU or a whole GPU, not fused) at PyTorch's default or strict FP32 precision, a row written before the step's
    costs were counted among them (the model reads its costs from here)."""
    fused = rows["fused_members"].fillna(1).gt(1) if "fused_members" in rows else False
    usable = rows[(rows["status"] == "ok") & (rows["whole_gpu"] | rows["is_cpu"]) & rows["engine"].eq("eager")
                  & ~fused & rows["precision"].fillna("fp32").isin(["default", "fp32"])]
    return usable.drop_duplicates(KEYS)[[*KEYS, "workload_module", "dataset_size"]]


def neusight() -> int:
    """Each (model, tokens, batch) of NeuSight's labels, counted as examples/realsize.py's arch of that name at
    PyTorch's default precision (the labels are FP32), as `crossover predict` counts a user's job."""
    from crossover.examples.realsize import ARCHS  # the labels' models the example writes: BERT-large and GPT-2 large

    labels = pd.read_csv(NEUSIGHT_LABELS).drop_duplicates(["model", "seq_len", "batch_size"])
    labels = labels[labels["model"].isin(ARCHS)]
    out = []
    for c in labels.itertuples(index=False):
        batch = int(c.batch_size)
        got = counted(reference("realsize:workload", "realsize"), batch, batch, {},
                      {"arch": c.model, "tokens": int(c.seq_len)})
        out.append({**got, "label_model": c.model, "seq_len": int(c.seq_len)})
        print(c.model, f"{c.seq_len} tokens, batch {batch}: {got['flops_per_step'] / 1e12:.2f} TFLOP, "
              f"{got['launches_per_step']} ops on {got['counted_on']}", flush=True)
    NEUSIGHT_COUNTED.parent.mkdir(exist_ok=True)
    pd.DataFrame(out).to_parquet(NEUSIGHT_COUNTED, index=False)
    print(f"{len(out)} configurations counted: {NEUSIGHT_COUNTED}")
    return 0


def memory() -> int:
    """Each configuration of the real-sized reference rows (the only ones that measured a peak in the plain loop:
    studies/reference.py --real): the peak `crossover predict` counts for it (peak_memory_bytes, without the 70 MB
    decide adds) and what a sample of its training set holds (sample_bytes), which the measured peak also holds
    for every sample past one batch (the whole set stayed on the GPU)."""
    from torch.utils._pytree import tree_leaves

    from crossover.config import TrialConfig
    from crossover.trainables.registry import Registry
    from crossover.trainables.trial import resolve

    rows = read(REFERENCE)
    real = rows[rows["workload_module"].fillna("").str.startswith("realsize:") & rows["peak_gpu_bytes"].notna()]
    ref = reference("realsize:workload", "realsize")
    wl, out = Registry().register(ref), []
    for c in real.drop_duplicates(["workload_params", "batch_size", "precision"]).itertuples(index=False):
        params, batch = json.loads(c.workload_params), int(c.batch_size)
        got = counted(ref, batch, batch, {}, params, c.precision)
        data = wl.data(resolve(TrialConfig(wl.name, batch_size=batch, dataset_size=batch, module=wl.ref,
                                           params=params)).cfg)
        out.append({"workload_params": c.workload_params, "batch_size": batch, "precision": c.precision,
                    "peak_memory_bytes": got.get("peak_memory_bytes"),
                    "sample_bytes": sum(t.nbytes for t in tree_leaves((data.x, data.y))) / batch})
        print(params["arch"], f"batch {batch} {c.precision}: {out[-1]['peak_memory_bytes'] / 1e9:.2f} GB counted",
              flush=True)
    pd.DataFrame(out).to_parquet(MEMORY_COUNTED, index=False)
    print(f"{len(out)} configurations counted: {MEMORY_COUNTED}")
    return 0


def main() -> int:
    if "--neusight" in sys.argv[1:]:
        return neusight()
    if "--memory" in sys.argv[1:]:
        return memory()
    from crossover.examples.make_csv import write  # the CSV example's data, where a row names its file

    out = []
    c: Any  # a row of configs(): each column of one type, which pandas-stubs cannot know by name
    for c in configs(read(REFERENCE)).itertuples(index=False):
        params = json.loads(c.workload_params) if isinstance(c.workload_params, str) else {}
        if "csv" in params and not Path(params["csv"]).exists():
            write(Path(params["csv"]))
        axes = {a: int(getattr(c, a)) for a in ("depth", "width", "context") if pd.notna(getattr(c, a))}
        got = counted(reference(c.workload_module, c.workload), int(c.batch_size), int(c.dataset_size), axes, params)
        out.append({**{k: getattr(c, k) for k in KEYS}, **{k: got.get(k) for k in COUNTS},
                    "counted_on": got["counted_on"]})
        print(c.workload, params or "", axes, f"batch {c.batch_size}: {got['launches_per_step']} ops on "
              f"{got['counted_on']}", flush=True)
    OUT.parent.mkdir(exist_ok=True)
    pd.DataFrame(out).to_parquet(OUT, index=False)
    print(f"{len(out)} configurations counted: {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

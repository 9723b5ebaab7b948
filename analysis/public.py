"""Public cross-GPU training measurements, read beside the model: Lambda's deeplearning-benchmark tables.

    throughputs()              # one row per (precision, table, benchmark, GPU key): median over Lambda's hosts
    dominance(throughputs())   # (precision, A, B): A faster than B on every benchmark both ran at that precision
    faster_than("default")     # per GPU, those it outran on every public benchmark (analysis/model/ orders by it)
    fit_rows(keys)             # Lambda's ResNet-50 as rows the model fits on (analysis/model/ shipped)

analysis/ordering.py checks the model against them.

The figures (analysis/public-tables/lambda_train_throughput.csv, derived by analysis/public-tables/derive_lambda.py; its
README.md gives the source, commit, licence, batch sizes and containers) are throughputs of NVIDIA's
DeepLearningExamples on Lambda's hosts at Lambda's batch sizes, not our harness: they rank GPUs and say
how far apart they are, never what a user's loop takes. Lambda's "fp32" ran with TF32 where the GPU has it
(an A100 beats an RTX 4090, which has 4x its FP32 peak, by 1.7x on BERT: only tensor cores do that); its
"fp16" is mixed precision. Lambda's GPU names map onto analysis/devices.yaml's keys by NAMES. Reads files
only: never imports torch or ray.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from pathlib import Path

import pandas as pd
import yaml

from .load import packaged

HERE = Path(__file__).with_name("public-tables")
LAMBDA = HERE / "lambda_train_throughput.csv"
DEVICES = packaged("devices.yaml")
RESNET50 = HERE / "resnet50_steps.json"  # ResNet-50's counted step at each of Lambda's batch sizes
# Lambda's name_gpu -> a devices.yaml key, the first pattern that matches; a name none matches (GH200 80GB,
# which no datasheet describes) is left out of every comparison.
NAMES = ((r"GH200_96GB", "GH200"), (r"B200", "B200"), (r"(?<!G)H200", "H200"), (r"H100.*PCIe", "H100 PCIe"),
         (r"H100.*SXM5", "H100"), (r"A100 40GB PCIe", "A100 40GB"), (r"A100 80GB PCIe", "A100 PCIe"),
         (r"A100 80GB SXM4", "A100"), (r"RTX 6000 Ada", "6000 Ada"), (r"RTX A6000", "RTX A6000"),
         (r"RTX 4090", "RTX 4090"), (r"RTX 3090", "RTX 3090"), (r"Quadro RTX 8000", "RTX 8000"), (r"V100", "V100"),
         (r"\bA10\b", "A10"))
PUBLIC_WORKLOAD = "resnet50 (Lambda)"  # the fitted rows' workload (`fit_rows`)


def gpu_key(name: str) -> str | None:
    """The devices.yaml key of one of Lambda's GPU names (NAMES), or None."""
    return next((key for pattern, key in NAMES if re.search(pattern, name)), None)


def load(path: Path = LAMBDA, devices_path: Path = DEVICES) -> pd.DataFrame:
    """Lambda's single-GPU rows with their devices.yaml key in `gpu` (rows of unmapped names dropped); a key
    the device table lacks is refused by name (its keys alone are read here: analysis/model/ reads the table)."""
    rows = pd.read_csv(path)
    rows = rows.assign(gpu=rows["name_gpu"].map(gpu_key)).dropna(subset=["gpu"])
    unknown = sorted(set(rows["gpu"]) - set(yaml.safe_load(Path(devices_path).read_text()) or {}))
    if unknown:
        raise ValueError(f"{path}: GPUs {unknown} are not in {devices_path}: add an entry, or fix {__name__}'s NAMES")
    return rows


def throughputs(rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (precision, table, benchmark, gpu): the median throughput over Lambda's hosts of that GPU, the
    batch size and the hosts."""
    rows = load() if rows is None else rows
    return rows.groupby(["precision", "table", "benchmark", "gpu"], as_index=False).agg(
        throughput=("throughput", "median"), batch_size=("batch_size", "first"), hosts=("name_gpu", "nunique"))


def dominance(table: pd.DataFrame) -> list[tuple[str, str, str, int]]:
    """(precision, A, B, shared): A's throughput above B's on every one of the `shared` (table, benchmark)
    pairs both ran at that precision (at least one)."""
    out: list[tuple[str, str, str, int]] = []
    for precision, part in table.groupby("precision"):
        wide = part.pivot_table(index=["table", "benchmark"], columns="gpu", values="throughput")
        values, ran = wide.to_numpy(float), wide.notna().to_numpy()
        for (i, a), (j, b) in itertools.permutations(enumerate(wide.columns), 2):
            both = ran[:, i] & ran[:, j]  # in arrays: as pandas' per pair, the 380-odd pairs took a second
            if both.any() and (values[both, i] > values[both, j]).all():
                out.append((str(precision), str(a), str(b), int(both.sum())))
    return out


@functools.cache
def faster_than(precision: str) -> dict[str, frozenset]:
    """Per GPU, every GPU it outruns on the public tables at `precision` (a model's: fp16 and bf16 read the
    fp16 table, the rest the fp32 one): those it beat on every shared benchmark, and theirs in turn (the
    transitive closure, so that clamping a prediction to them keeps every pair in order: model `_predicted`)."""
    table = "fp16" if precision in ("fp16", "bf16") else "fp32"
    beaten: dict[str, set] = {}
    for p, a, b, _ in dominance(throughputs()):
        if p == table:
            beaten.setdefault(a, set()).add(b)
    closed = {}
    for gpu in beaten:
        seen, todo = set(), [gpu]
        while todo:
            for other in beaten.get(todo.pop(), ()):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        closed[gpu] = frozenset(seen - {gpu})
    return closed


def resnet50_public(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per GPU, Lambda's fp32 ResNet-50 training throughput (images/s; the median over its hosts and
    tables) and the batch it ran at."""
    table = throughputs() if table is None else table
    r50 = table[(table["precision"] == "fp32") & (table["benchmark"] == "resnet50")]
    return r50.groupby("gpu").agg(public=("throughput", "median"), batch_size=("batch_size", "first"),
                                      hosts=("hosts", "sum")).reset_index()


def resnet50_steps(batches) -> pd.DataFrame:
    """ResNet-50's counted step (RESNET50) at each batch of `batches`, in that order, at PyTorch's default
    precision (TF32 in its convolutions, as Lambda's "fp32" ran them)."""
    counted = pd.DataFrame(json.loads(RESNET50.read_text())["rows"]).set_index("batch_size", drop=False)
    missing = sorted(set(batches) - set(counted.index))
    if missing:
        raise ValueError(f"{RESNET50} has no counted step at batch {missing}: count one (its 'made_by' says how)")
    return counted.loc[list(batches)].reset_index(drop=True).assign(precision="default")


def fit_rows(devices, public: pd.DataFrame | None = None) -> pd.DataFrame:
    """Lambda's fp32 ResNet-50 figures as rows the model fits on (analysis/model/ `shipped`): one per GPU of
    `devices` (keys), its counted step at Lambda's batch, its step time the batch over the images a second,
    at TF32 convolutions (precision 'default'), its GPU's key in `gpu`. The large, compute-bound steps the
    reference rows lack."""
    public = resnet50_public() if public is None else public
    public = public[public["gpu"].isin(list(devices))].reset_index(drop=True)
    frame = resnet50_steps(public["batch_size"].astype(int))
    return frame.assign(gpu=public["gpu"].to_numpy(), workload=PUBLIC_WORKLOAD,
                        step_s=public["batch_size"].to_numpy(float) / public["public"].to_numpy(float))

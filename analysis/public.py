"""Public cross-GPU training measurements, read beside the model: Lambda's deeplearning-benchmark tables.

    python -m analysis model --validate       # ends with the leave-one-GPU-out over these tables (`render_held_out`)

    throughputs()              # one row per (precision, table, benchmark, GPU key): median over Lambda's hosts
    dominance(throughputs())   # (precision, A, B): A faster than B on every benchmark both ran at that precision
    held_out()                 # ResNet-50 at Lambda's fp32 batch, each GPU predicted with its own figure left out

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

import numpy as np
import pandas as pd

from analysis import model

HERE = Path(__file__).with_name("public-tables")
LAMBDA = HERE / "lambda_train_throughput.csv"
RESNET50 = HERE / "resnet50_steps.json"  # ResNet-50's counted step at each of Lambda's batch sizes
# Lambda's name_gpu -> a devices.yaml key, the first pattern that matches; a name none matches (GH200 80GB,
# which no datasheet describes) is left out of every comparison.
NAMES = ((r"GH200_96GB", "GH200"), (r"B200", "B200"), (r"(?<!G)H200", "H200"), (r"H100.*PCIe", "H100 PCIe"),
         (r"H100.*SXM5", "H100"), (r"A100 40GB PCIe", "A100 40GB"), (r"A100 80GB PCIe", "A100 PCIe"),
         (r"A100 80GB SXM4", "A100"), (r"RTX 6000 Ada", "6000 Ada"), (r"RTX A6000", "RTX A6000"),
         (r"RTX 4090", "RTX 4090"), (r"RTX 3090", "RTX 3090"), (r"Quadro RTX 8000", "RTX 8000"), (r"V100", "V100"),
         (r"\bA10\b", "A10"))
# The model's precision for each of Lambda's: TF32 tensor cores in convolutions and matmuls for its "fp32"
# (module docstring), FP16 for its mixed precision (analysis/model.py: the BF16 peak, FP32's without one).
PRECISION = {"fp32": "tf32", "fp16": "fp16"}
TIE = 0.02  # predictions this close (relative step time) count as a tie in the ordering check
TARGET = 0.25  # issue 30: median leave-one-GPU-out error over the public tables, on >= MIN_GPUS GPU models
MIN_GPUS = 8


def gpu_key(name: str) -> str | None:
    """The devices.yaml key of one of Lambda's GPU names (NAMES), or None."""
    return next((key for pattern, key in NAMES if re.search(pattern, name)), None)


def load(path: Path = LAMBDA, devices_path: Path = model.DEVICES) -> pd.DataFrame:
    """Lambda's single-GPU rows with their devices.yaml key in `gpu` (rows of unmapped names dropped); a key
    the device table lacks is refused by name."""
    rows = pd.read_csv(path)
    rows = rows.assign(gpu=rows["name_gpu"].map(gpu_key)).dropna(subset=["gpu"])
    unknown = sorted(set(rows["gpu"]) - set(model.load_devices(devices_path)))
    if unknown:
        raise ValueError(f"{path}: GPUs {unknown} are not in {devices_path}: add an entry, or fix analysis/public.py NAMES")
    return rows


def throughputs(rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (precision, table, benchmark, gpu): the median throughput over Lambda's hosts of that GPU, the
    batch size, the hosts, and `relative`: over the H100 SXM's in the same table (NaN where it has none)."""
    rows = load() if rows is None else rows
    keys = ["precision", "table", "benchmark", "gpu"]
    out = rows.groupby(keys, as_index=False).agg(throughput=("throughput", "median"),
                                                 batch_size=("batch_size", "first"), hosts=("name_gpu", "nunique"))
    h100 = out[out["gpu"] == "H100"].set_index(keys[:3])["throughput"]
    return out.assign(relative=out["throughput"] / out.set_index(keys[:3]).index.map(h100).to_numpy(float))


def dominance(table: pd.DataFrame) -> list[tuple[str, str, str, int]]:
    """(precision, A, B, shared): A's throughput above B's on every one of the `shared` (table, benchmark)
    pairs both ran at that precision (at least one)."""
    out = []
    for precision, part in table.groupby("precision"):
        wide = part.pivot_table(index=["table", "benchmark"], columns="gpu", values="throughput")
        for a, b in itertools.permutations(wide.columns, 2):
            both = wide[[a, b]].dropna()
            if len(both) and (both[a] > both[b]).all():
                out.append((precision, a, b, len(both)))
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


def reference_configs() -> pd.DataFrame:
    """One row per configuration of the shipped reference rows' GPU rows with every per-class column: the
    representative step costs the ordering check predicts."""
    devices = model.load_devices()
    rows = model.gpu_rows(model.reference_rows(), devices)
    rows = rows[model.form_of(rows) == model.PER_CLASS]
    return rows.drop_duplicates(model._config_keys(rows)).reset_index(drop=True)


def step_s(configs: pd.DataFrame, gpus: list[str], precision: str) -> pd.DataFrame:
    """The shipped per-class model's step time of each configuration (rows) on each GPU (columns), every
    configuration run at `precision`."""
    at = configs.assign(precision=precision)
    out = {g: (p["epoch_s_median"] / p["steps_per_epoch"]).to_numpy() for g in gpus
           for p in [model.predict_counted(at, [g])]}
    return pd.DataFrame(out, index=configs.index)


def ordering_violations(configs: pd.DataFrame, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (configuration, pair) where the model predicts `faster` slower than `slower` by more than
    TIE (`ratio`: its step time over the other's), though `faster` beat `slower` on every one of the `shared`
    public benchmarks of `precision`; no rows where the model respects the public ordering."""
    table = throughputs() if table is None else table
    pairs = dominance(table)
    out = []
    for precision in sorted({p for p, *_ in pairs}):
        gpus = sorted({g for p, a, b, _ in pairs if p == precision for g in (a, b)})
        times = step_s(configs, gpus, PRECISION[precision])
        for _, a, b, shared in (p for p in pairs if p[0] == precision):
            ratio = times[a] / times[b]
            for i in np.flatnonzero((ratio > 1 + TIE).to_numpy()):
                c = configs.iloc[i]
                out.append({"precision": precision, "faster": a, "slower": b, "shared": shared, "ratio": ratio.iloc[i],
                            "workload": c["workload"], "model": c["model"], "batch_size": c["batch_size"]})
    return pd.DataFrame(out, columns=["precision", "faster", "slower", "shared", "ratio", "workload", "model",
                                      "batch_size"])


# ---- leave one GPU out: ResNet-50 at Lambda's fp32 batch ----

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


def fit_rows(devices: dict, public: pd.DataFrame | None = None) -> pd.DataFrame:
    """Lambda's fp32 ResNet-50 figures as rows the model fits on (analysis/model.py `shipped`): one per GPU of
    the device table, its counted step at Lambda's batch, its step time the batch over the images a second,
    at TF32 convolutions (precision 'default'). The large, compute-bound steps the reference rows lack."""
    public = resnet50_public() if public is None else public
    public = public[public["gpu"].isin(list(devices))].reset_index(drop=True)
    frame = resnet50_steps(public["batch_size"].astype(int))
    return frame.assign(**{model.MATCH_KEY: public["gpu"].to_numpy(), "workload": model.PUBLIC_WORKLOAD,
                           "step_s": public["batch_size"].to_numpy(float) / public["public"].to_numpy(float)})


def held_out() -> pd.DataFrame:
    """Per GPU with a public ResNet-50 figure: its throughput predicted by the model fitted as `shipped` fits
    it (the reference rows and the other GPUs' public rows) but without that GPU's own public row, from its
    device table entry alone (no public efficiency). Errors are predicted / public - 1."""
    devices = model.load_devices()
    reference = model.gpu_rows(model.reference_rows(), devices)
    reference = reference[model.form_of(reference) == model.PER_CLASS]
    rows = fit_rows(devices)
    predicted = []
    for k in range(len(rows)):
        rest = pd.concat([reference, rows.drop(index=k)], ignore_index=True)
        predicted.append(rows["batch_size"].iloc[k] / model.fit(rest, devices).step_s(rows.iloc[[k]], devices)[0])
    public = rows["batch_size"].to_numpy(float) / rows["step_s"].to_numpy(float)
    return pd.DataFrame({"gpu": rows[model.MATCH_KEY], "batch_size": rows["batch_size"], "public": public,
                         "predicted": predicted, "error": np.array(predicted) / public - 1})


def render_held_out(table: pd.DataFrame | None = None) -> str:
    """The leave-one-GPU-out table over the public figures, and the issue's target met or missed, with why."""
    table = held_out() if table is None else table
    shown = table.assign(public=table["public"].map(lambda v: f"{v:,.0f}"),
                         predicted=table["predicted"].map(lambda v: f"{v:,.0f}"),
                         error=table["error"].map(lambda v: f"{v:+.0%}"))
    median, n = table["error"].abs().median(), len(table)
    worst = table.loc[table["error"].abs().idxmax()]
    ok = median <= TARGET and n >= MIN_GPUS
    lines = ["== leave one GPU out over the public tables: ResNet-50 training, images/s, at Lambda's fp32 batch "
             "(TF32 convolutions) ==",
             "  public: Lambda's throughput (lambdal/deeplearning-benchmark, NVIDIA DeepLearningExamples on Lambda's "
             "hosts at its batch, median over its hosts; analysis/public-tables/README.md), not our harness's loop",
             "  predicted: the model fitted on the reference rows and every other GPU's public row, this GPU's own "
             "left out, from its datasheet figures (analysis/devices.yaml)",
             shown.to_string(index=False),
             f"  median |error| over {n} GPU models: {median:.0%}; target: median <= {TARGET:.0%} on >= {MIN_GPUS} "
             f"GPU models: {'met' if ok else 'missed'}"]
    if abs(worst["error"]) > TARGET:
        lines.append(f"    worst: {worst['gpu']} {worst['error']:+.0%}: its public figure ran far from what its datasheet "
                     "figures give beside the others' (a power limit, a host, one container); rows of it measured by our "
                     "harness, or a second public source, would say which")
    return "\n".join(lines)

"""The shipped model checked against the public tables (analysis/public.py): the ordering, and each GPU held out.

    python -m crossover.analysis model --validate       # ends with the leave-one-GPU-out over these tables (`render_held_out`)

    ordering_violations(reference_configs())  # none: no GPU faster on every public benchmark is predicted slower
    held_out()                                # ResNet-50 at Lambda's fp32 batch, each GPU predicted with its own
                                              # public row left out of the fit

Reads files only: never imports torch or ray.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import model, public

# The model's precision for each of Lambda's: TF32 tensor cores in convolutions and matmuls for its "fp32"
# (module docstring), FP16 for its mixed precision (analysis/model/: the BF16 peak, FP32's without one).
PRECISION = {"fp32": "tf32", "fp16": "fp16"}
TIE = 0.02  # predictions this close (relative step time) count as a tie in the ordering check
TARGET = 0.25  # the model's target: median leave-one-GPU-out error over the public tables, on >= MIN_GPUS GPU models
MIN_GPUS = 8


def reference_configs() -> pd.DataFrame:
    """One row per configuration of the shipped reference rows' GPU rows with every per-class column: the
    representative step costs the ordering check predicts."""
    rows = model.reference_gpu_rows(model.load_devices())
    return rows.drop_duplicates(model.config_keys(rows)).reset_index(drop=True)


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
    table = public.throughputs() if table is None else table
    pairs = public.dominance(table)
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


def held_out() -> pd.DataFrame:
    """Per GPU with a public ResNet-50 figure: its throughput predicted by the model fitted as `shipped` fits
    it (the reference rows and the other GPUs' public rows) but without that GPU's own public row, from its
    device table entry alone (no public efficiency). Errors are predicted / public - 1."""
    devices = model.load_devices()
    reference, rows = model.reference_gpu_rows(devices), model.public_rows(devices)
    predicted = []
    for k in range(len(rows)):
        rest = pd.concat([reference, rows.drop(index=k)], ignore_index=True)
        predicted.append(rows["batch_size"].iloc[k] / model.fit(rest, devices).step_s(rows.iloc[[k]], devices)[0])
    measured = rows["batch_size"].to_numpy(float) / rows["step_s"].to_numpy(float)
    return pd.DataFrame({"gpu": rows[model.MATCH_KEY], "batch_size": rows["batch_size"], "public": measured,
                         "predicted": predicted, "error": np.array(predicted) / measured - 1})


def render_held_out(table: pd.DataFrame | None = None) -> str:
    """The leave-one-GPU-out table over the public figures, and TARGET met or missed, with why."""
    table = held_out() if table is None else table
    shown = table.assign(public=table["public"].map(lambda v: f"{v:,.0f}"),
                         predicted=table["predicted"].map(lambda v: f"{v:,.0f}"),
                         error=table["error"].map(lambda v: f"{v:+.0%}"))
    median, n = table["error"].abs().median(), len(table)
    worst = table.iloc[table["error"].abs().argmax()]
    ok = median <= TARGET and n >= MIN_GPUS
    lines = ["== leave one GPU out over the public tables: ResNet-50 training, images/s, at Lambda's fp32 batch "
             "(TF32 convolutions) ==",
             "  public: Lambda's throughput (lambdal/deeplearning-benchmark, NVIDIA DeepLearningExamples on Lambda's "
             "hosts at its batch, median over its hosts; the public tables shipped with crossover), not our harness's loop",
             "  predicted: the model fitted on the reference rows and every other GPU's public row, this GPU's own "
             "left out, from its datasheet figures (the GPU table shipped with crossover)",
             shown.to_string(index=False),
             f"  median |error| over {n} GPU models: {median:.0%}; target: median <= {TARGET:.0%} on >= {MIN_GPUS} "
             f"GPU models: {'met' if ok else 'missed'}"]
    if abs(worst["error"]) > TARGET:
        lines.append(f"    worst: {worst['gpu']} {worst['error']:+.0%}: its public figure ran far from what its datasheet "
                     "figures give beside the others' (a power limit, a host, one container); rows of it measured by our "
                     "harness, or a second public source, would say which")
    return "\n".join(lines)

"""Whether a run fits a card: the GPU memory it needs (`memory_needed`) and the largest batch that fits (`largest_batch`).
trainables/memory.py, of the same name a layer down, counts the step's peak this starts from.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import model
from .grid import along


# What a run needs of a GPU's memory beyond the peak torch allocated (peak_gpu_bytes counts only its
# allocations): the CUDA context and the cuDNN and cuBLAS handles, about 0.3-0.6 GB (docs/cost.md).
CONTEXT_BYTES = 0.5e9
# The estimate where no GPU row measured the peak (docs/cost.md, "Fits in memory"): per parameter that trains, 4-byte
# weights, gradients and Adam's two moments; per frozen one (n_frozen_params, requires_grad False) its weight
# alone, which takes no gradient and no optimiser state; a step moves each saved activation about ACTIVATION_MOVES times
# (written and read in the forward, read and its gradient written in the backward); and what every measured
# peak holds besides them (index tensors, cuBLAS workspace: the smallest reference peak), which a counted
# peak (trainables/memory.py) does not see either: the reference zoo's measured peaks sit 85-125 MB above it.
BYTES_PER_PARAM = 16
BYTES_PER_FROZEN_PARAM = 4
ACTIVATION_MOVES = 4
FLOOR_BYTES = 70e6


def memory_needed(at: pd.DataFrame, samples: int, full_batch: bool) -> dict:
    """GPU memory a run of one configuration needs at `samples` (needs_bytes, CONTEXT_BYTES included) and
    how it was found (needs_how). Measured: the GPU rows' peak_gpu_bytes (the same on every card); with the
    data kept on the GPU and two sizes or more, the line through the peaks at one batch's size, for a run
    whose data does not fit moves it to the host (trainables/devices.py, `holds`); a whole-dataset batch
    along the sizes to `samples`. Else, where `crossover predict` counted the step's peak
    (peak_memory_bytes: trainables/memory.py), that + FLOOR_BYTES; else estimated from n_params (and
    n_frozen_params, where the count has it) and the step's bytes (BYTES_PER_PARAM, BYTES_PER_FROZEN_PARAM,
    ACTIVATION_MOVES, FLOOR_BYTES); null where the rows lack bytes_per_step."""
    gpu = at[at["whole_gpu"] & at["peak_gpu_bytes"].notna()] if "peak_gpu_bytes" in at else at.iloc[:0]
    if len(gpu):
        per_size = gpu.groupby("dataset_size")["peak_gpu_bytes"].median()
        sizes, peaks = per_size.index.to_numpy(float), per_size.to_numpy(float)
        on_gpu = gpu["data_on_device"].fillna(False).astype(bool).any() if "data_on_device" in gpu else False
        if full_batch:
            peak = along(sizes, peaks, samples).value
        elif on_gpu and len(sizes) > 1:
            peak = max(along(sizes, peaks, float(gpu["batch_size"].iloc[0])).value, FLOOR_BYTES)
        else:
            peak = float(np.median(peaks))
        names = sorted({model.device_key(n, model.load_devices()) or n for n in gpu["device_name"]})
        return {"needs_bytes": peak + CONTEXT_BYTES, "needs_how": f"peak measured on {', '.join(names)}"}
    if "peak_memory_bytes" in at and at["peak_memory_bytes"].notna().any():
        steps = at[at["peak_memory_bytes"].notna()]
        each = steps["peak_memory_bytes"] + FLOOR_BYTES
        how = f"a step's peak, counted, + {FLOOR_BYTES / 1e6:g} MB workspaces"
    elif "bytes_per_step" in at and at["bytes_per_step"].notna().any():
        steps = at[at["bytes_per_step"].notna()]
        moved = steps["bytes_per_step"] - steps.get("optimizer_bytes_per_step", pd.Series(0, index=steps.index)).fillna(0)
        frozen = steps["n_frozen_params"].fillna(0) if "n_frozen_params" in steps else 0
        each = (BYTES_PER_PARAM * steps["n_params"] + BYTES_PER_FROZEN_PARAM * frozen
                + moved.clip(lower=0) / ACTIVATION_MOVES + FLOOR_BYTES)
        how = "estimated from n_params and bytes_per_step"
    else:
        return {"needs_bytes": math.nan, "needs_how": "not known: no GPU peak and no bytes_per_step in the rows"}
    per_size = each.groupby(steps["dataset_size"]).median()
    peak = (along(per_size.index.to_numpy(float), per_size.to_numpy(float), samples).value if full_batch
            else float(per_size.median()))
    return {"needs_bytes": peak + CONTEXT_BYTES, "needs_how": how}


def largest_batch(needs_bytes: float, per_sample_bytes: float, batch_size: int, memory_gb: float) -> int:
    """The largest batch whose step fits a card of `memory_gb`, from what the run needs at `batch_size`
    (`memory_needed`) and what a sample adds to it (sweeps/count_step.py's peak_memory_per_sample_bytes):
    the need is a line in the batch size, a fixed part (weights, gradients, optimiser states, CONTEXT_BYTES)
    and a part per sample (activations, the batch). 0 where not even one sample fits, or where a sample adds
    nothing (the batch is not what does not fit)."""
    if not per_sample_bytes > 0:
        return 0
    fixed = needs_bytes - per_sample_bytes * batch_size
    return max(int((memory_gb * 1e9 - fixed) // per_sample_bytes), 0)

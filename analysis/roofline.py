"""The hardware's floor: no step is shorter than its arithmetic at the datasheet's peak and its optimiser's bytes
at the datasheet's bandwidth.

    floor_s(configs, device)   # per configuration (rows with the per-class step counts), seconds a step

A counted step's matrix products, convolutions and recurrent nets (their FLOPs: trainables/costs.py) run at no more
than the GPU's dense peak at the precision their operands have (`peaks`), and its optimiser's update, which
reads and writes every weight, gradient and state once, at no more than its memory bandwidth. Kernels on one
stream run one after another, so the floor is the sum of the three. The other classes' bytes are left out:
their count assumes no cache reuse and may overstate what a GPU moves. analysis/model/ clamps every prediction
for a GPU of the table to this floor; tests/test_roofline.py checks that it does, for every GPU, reference
configuration and precision. Reads rows only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .load import precisions_of


def peaks(device, precision: str) -> tuple[float, float]:
    """The dense peaks (FLOP/s) that matrix products and convolutions run at, at `precision` as PyTorch runs it:
    default, matrix products at strict FP32 and convolutions at TF32 (cuDNN's default); fp32 both strict; tf32
    both TF32; bf16 and fp16 both at the tensor cores' rate for that type. A GPU without the unit runs at the rate
    PyTorch falls back to (Device.peak: FP32)."""
    matmul = {"default": "fp32", "fp32": "fp32"}.get(precision, precision)
    conv = {"default": "tf32"}.get(precision, precision)
    return device.peak(matmul), device.peak(conv)


def floor_s(configs: pd.DataFrame, device) -> np.ndarray:
    """Seconds a step of each configuration takes at least on `device` (module docstring): its matrix products'
    and cuDNN's (convolutions', recurrent nets') FLOPs at the peaks of its precision, and its optimiser's bytes at
    the bandwidth."""
    precision = precisions_of(configs)
    matmul, conv = np.array([peaks(device, p) for p in precision], float).reshape(-1, 2).T
    counts = configs.reindex(columns=["matmul_flops_per_step", "conv_flops_per_step", "rnn_flops_per_step",
                                      "optimizer_bytes_per_step"])
    counts = counts.astype(float).fillna(0).to_numpy()
    return counts[:, 0] / matmul + (counts[:, 1] + counts[:, 2]) / conv + counts[:, 3] / device.memory_bytes_per_s

"""The operator-level GPU time (analysis/model/operators.py): a study's op priced at its measured time, another
shape from its neighbours' share of the roofline, another GPU by the op's bound."""
import json

import numpy as np
import pandas as pd
import pytest

from crossover.analysis import model
from crossover.analysis.model import operators

H100 = "NVIDIA H100 80GB HBM3"


def _study(tmp_path, rows, name="ops-h100.parquet"):
    frame = pd.DataFrame([{"device_name": H100, "group": "g", "case": "c", "params": json.dumps(r),
                           "kernels": 1.0, **r} for r in rows])
    frame.to_parquet(tmp_path / name)
    return operators.studies(tmp_path)


def _matmul(flops, bytes_, gpu_s, precision="bf16"):
    return {"op_class": "matmul", "precision": precision, "flops": flops, "bytes": bytes_, "ops": 1, "gpu_s": gpu_s}


def test_a_studied_shape_is_priced_at_its_measured_time_and_others_at_their_neighbours_share(tmp_path):
    # three bf16 products measured at 50% of the H100's bf16 peak, and an element-wise op
    peak = model.load_devices()["H100"].bf16_flops
    (study,) = _study(tmp_path, [_matmul(f, 1e3, f / (0.5 * peak)) for f in (1e11, 1e12, 1e13)] +
                      [{"op_class": "elementwise", "precision": "default", "flops": 0, "bytes": 1e3, "ops": 1, "gpu_s": 1e-3}])
    assert study.key == "H100"
    t, _ = study.per_launch("matmul", "bf16", np.array([1e12]), np.array([1e3]))
    assert t[0] == pytest.approx(1e12 / (0.5 * peak))
    # between studied shapes, and past the largest: the same share of the peak (a large op's share saturates)
    t, _ = study.per_launch("matmul", "bf16", np.array([3e12, 1e15]), np.array([1e3, 1e3]))
    assert t == pytest.approx(np.array([3e12, 1e15]) / (0.5 * peak))
    # its own shape left out, the op is priced from the others (here the same share)
    t, _ = study.per_launch("matmul", "bf16", np.array([1e12]), np.array([1e3]), leave_out=True)
    assert t[0] == pytest.approx(1e12 / (0.5 * peak))
    # a kind or unit the study has no op of: NaN, no price
    t, _ = study.per_launch("conv", "tf32", np.array([1e12]), np.array([1e3]))
    assert np.isnan(t).all()


def test_another_gpu_scales_the_time_above_the_fixed_latency_by_its_bound(tmp_path):
    devices = model.load_devices()
    h100 = devices["H100"]
    peak, bandwidth = h100.bf16_flops, h100.memory_bytes_per_s
    # a compute-bound product at 50% of peak, and a memory-bound one at 50% of bandwidth
    tiny = {"op_class": "elementwise", "precision": "default", "flops": 0, "bytes": 1e3, "ops": 1, "gpu_s": 2e-6}
    (study,) = _study(tmp_path, [_matmul(1e12, 1e3, 1e12 / (0.5 * peak)), _matmul(1e3, 1e10, 1e10 / (0.5 * bandwidth)),
                                 tiny])  # the tiny op sets the study's fixed latency a kernel
    f, b = np.array([1e12, 1e3]), np.array([1e3, 1e10])

    def on(slower_peak, slower_bandwidth):
        return study.on("matmul", "bf16", f, b, peak / slower_peak, bandwidth / slower_bandwidth)

    same = on(1, 1)
    assert same == pytest.approx([1e12 / (0.5 * peak), 1e10 / (0.5 * bandwidth)], rel=1e-3)
    # half the peak doubles the compute-bound op and leaves the memory-bound one; half the bandwidth the other way
    assert on(2, 1) / same == pytest.approx([2, 1], rel=1e-3)
    assert on(1, 2) / same == pytest.approx([1, 2], rel=1e-3)


def test_an_op_of_fixed_latency_costs_the_same_on_a_slower_gpu(tmp_path):
    # an op whose time is all its kernels' fixed time (the study's smallest, its latency quantile) does not slow
    # with a GPU's peak or bandwidth
    tiny = [{"op_class": "elementwise", "precision": "default", "flops": 0, "bytes": 1e3, "ops": 1, "gpu_s": 2e-6}] * 3
    (study,) = _study(tmp_path, tiny)
    assert study.on("elementwise", None, np.zeros(1), np.array([1e3]), 1.0, 1e9)[0] == pytest.approx(2e-6)


def test_an_op_runs_on_the_unit_its_dtype_and_precision_give():
    assert operators.unit("matmul", "float32", "default") == "fp32"  # PyTorch's default: strict FP32 products
    assert operators.unit("conv", "float32", "default") == "tf32"  # cuDNN's default
    assert operators.unit("conv", "float32", "fp32") == "fp32"
    assert operators.unit("matmul", "bfloat16", "bf16") == "bf16"
    assert operators.unit("matmul", "float32", "bf16") == "fp32"  # an op autocast keeps in FP32
    assert operators.unit("elementwise", "bfloat16", "bf16") is None  # moves bytes only


def test_the_model_s_recurrent_launch_costs_start_from_the_shipped_study():
    # the priors of k_rnn and k_rnn_call are the study's cuDNN kernel and call on the host, in launch overheads
    per_kernel, per_call = operators.rnn_host_s()
    overhead = model.load_devices()["H100"].launch_overhead_s
    assert model.PARAMETERS["k_rnn"] * overhead == pytest.approx(per_kernel, rel=0.05)
    assert model.PARAMETERS["k_rnn_call"] * overhead == pytest.approx(per_call, rel=0.05)


def test_a_recurrent_case_s_wall_time_splits_into_its_calls_and_its_kernels(tmp_path):
    # planted: 1 ms a call, 10 us a kernel, two calls a case, on one GPU at two precision groups
    rows = [{"op_class": "rnn", "precision": p, "flops": 1e9, "bytes": 1e6, "ops": 2, "gpu_s": 1e-4, "kernels": k,
             "wall_s": 2e-3 + k * 1e-5} for p in ("default", "bf16") for k in (13.0, 200.0, 3000.0)]
    frame = pd.DataFrame([{"device_name": H100, "group": "g", "case": "lstm", "params": "{}", **r} for r in rows])
    frame.to_parquet(tmp_path / "ops-h100.parquet")
    assert operators.rnn_host_s(tmp_path) == pytest.approx((1e-5, 1e-3), rel=1e-6)

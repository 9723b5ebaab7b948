"""The hardware's floor (analysis/roofline.py): no prediction for any GPU of analysis/devices.yaml, at any
precision, is shorter than the step's arithmetic at the datasheet's peak, and public orderings apply only at the
precision their tables ran at.

    python -m pytest -q tests/test_roofline.py
"""

import pandas as pd
import pytest

from crossover.analysis import model, roofline
from crossover.config import PRECISIONS


@pytest.fixture(scope="module")
def shipped():
    return model.shipped(model.PER_CLASS)


@pytest.fixture(scope="module")
def configs():
    """One row of every configuration the reference rows measured on a GPU, with its counted step."""
    devices = model.load_devices()
    rows = model.reference_gpu_rows(devices)
    return rows.drop_duplicates(model.config_keys(rows) + ["workload_params"]).reset_index(drop=True)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_no_prediction_for_any_gpu_and_reference_configuration_is_faster_than_the_hardware(shipped, configs,
                                                                                              precision):
    devices = model.load_devices()
    on = configs.assign(precision=precision)
    for key, device in devices.items():
        step = model.ordered_step_s(on, shipped, devices, key)
        floor = roofline.floor_s(on, device)
        assert (step >= floor * (1 - 1e-9)).all(), (key, precision, on[step < floor]["workload_params"].tolist()[:3])


def test_the_floor_prices_default_matrix_products_at_strict_fp32_and_convolutions_at_tf32():
    a100 = model.load_devices()["A100"]
    step = pd.DataFrame({"matmul_flops_per_step": [19.5e12], "conv_flops_per_step": [156e12],
                         "optimizer_bytes_per_step": [a100.memory_bytes_per_s], "precision": ["default"]})
    assert roofline.floor_s(step, a100) == pytest.approx([3.0])  # 1 s of each at the A100's FP32, TF32, bandwidth
    assert roofline.floor_s(step.assign(precision="bf16"), a100)[0] == pytest.approx(
        (19.5e12 + 156e12) / 312e12 + 1)


def test_an_a100s_strict_fp32_transformer_step_is_never_predicted_under_its_fp32_peak(shipped, configs):
    devices = model.load_devices()
    text = configs[configs["matmul_flops_per_step"] > 10 * configs["conv_flops_per_step"].fillna(0)]
    text = text.sort_values("matmul_flops_per_step").tail(5).assign(precision="default")
    step = model.ordered_step_s(text, shipped, devices, "A100")
    assert (step >= text["matmul_flops_per_step"].to_numpy() / devices["A100"].fp32_flops).all()


def test_public_orderings_apply_at_the_precision_their_tables_ran_at():
    rows = pd.DataFrame({"precision": ["default", "default", "fp32", "tf32", "bf16", "fp16"],
                         "conv_flops_per_step": [9.0, 0.0, 9.0, 0.0, 0.0, 9.0],
                         "matmul_flops_per_step": [1.0, 9.0, 1.0, 9.0, 9.0, 1.0]})
    # a CNN at the default runs its convolutions at TF32, as Lambda's "fp32" did; a transformer's strict FP32
    # matrix products ran in no public table
    assert model.public_precision(rows).fillna("none").tolist() == ["fp32", "none", "none", "fp32", "fp16", "fp16"]


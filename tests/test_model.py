"""The model of time per epoch (analysis/model/): it recovers a GPU planted in synthetic rows, its
held-out error is |predicted/measured - 1| with the device left out, a GPU is never predicted where
a row of it measured, and the device table refuses an entry without its source or date."""

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from crossover.analysis import model
from crossover.analysis.load import device_fields
from crossover.schema import CONFIG_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
# Planted GPUs: (peak FP32 FLOP/s, bytes/s, s per launch) and the truth the rows are drawn from.
PLANTED = {"G1": (20e12, 2e12, 4e-6), "G2": (60e12, 3e12, 6e-6), "G3": (10e12, 0.5e12, 5e-6)}
LAUNCH_SCALE, E_COMPUTE, E_MEMORY = 3.0, 0.5, 0.4


def device_table(path: Path, planted: dict, tf32: bool = False) -> Path:
    """A device table of planted GPUs {key: (FP32 FLOP/s, bytes/s, s per launch)} (TF32 at FP32's rate
    where `tf32`), written to `path`."""
    entries = {k: {"name": f"Planted {k}", "fp32_flops": f, "tf32_flops": f if tf32 else None, "bf16_flops": None,
                   "memory_bytes_per_s": b, "launch_overhead_s": o, "source": "planted", "date": "2026-11"}
               for k, (f, b, o) in planted.items()}
    path.write_text(yaml.safe_dump(entries))
    return path


@pytest.fixture
def table(tmp_path):
    return device_table(tmp_path / "devices.yaml", PLANTED)


def _rows(key: str, slower: float = 1.0) -> pd.DataFrame:
    """disc rows on a planted GPU at sizes from launch- to compute-bound, timed as the model says."""
    peak, bandwidth, overhead = PLANTED[key]
    rows = []
    for depth in range(3, 16):
        sizes = [2] + [2 ** k for k in range(2, depth + 1)] + [2]
        flops = 100 * 2 * (3 * sum(a * b for a, b in itertools.pairwise(sizes)) - 2 * 4)
        params = sum(a * b + b for a, b in itertools.pairwise(sizes))
        launches, nbytes = 12 + 8 * depth, 4 * (6 * params + 12 * 100 * sum(sizes))
        step = launches * overhead * LAUNCH_SCALE + max(flops / (peak * E_COMPUTE), nbytes / (bandwidth * E_MEMORY))
        config = dict.fromkeys(CONFIG_COLUMNS) | {"workload": "disc", "depth": depth, "batch_size": 100,
                                                      "dataset_size": 1000, "epochs": 5, "seed": 0, "loop": "fast"}
        rows.append(config | {"device": "cuda", "engine": "eager", "status": "ok", "device_name": f"NVIDIA Planted {key}", "torch_threads": 1,
                              "model": "fc " + "-".join(map(str, sizes)), "n_params": params, "steps_per_epoch": 10,
                              "epoch_s_median": 10 * step * slower, "flops_per_step": flops,
                              "bytes_per_step": nbytes, "launches_per_step": launches})
    rows = pd.DataFrame(rows)
    return rows.assign(**device_fields(rows))  # what the model reads of load.read()'s additions


def test_the_model_recovers_a_planted_gpu_from_the_others_rows(table):
    measured = pd.concat([_rows("G1"), _rows("G2")], ignore_index=True)
    predicted = model.predict(measured, ["G3", "G1"], table)
    assert set(predicted["device_name"]) == {"G3"}  # G1 was measured: the measurement wins
    truth = _rows("G3").set_index("depth")["epoch_s_median"]
    got = predicted.groupby("depth")["epoch_s_median"].first()
    assert np.allclose(got, truth.loc[got.index], rtol=0.01)
    assert (predicted["epoch_s_lo"] <= predicted["epoch_s_median"]).all()
    assert (predicted["epoch_s_median"] <= predicted["epoch_s_hi"]).all() and predicted["predicted"].all()
    assert np.allclose(predicted["samples_per_s"], 1000 / predicted["epoch_s_median"])


def test_the_held_out_error_is_the_left_out_devices_distance_from_its_prediction(table):
    # G3 measured 25% slower than the truth the others follow: left out, it is predicted at the truth,
    # so its error is |1/1.25 - 1| = 20% at every size; G1 and G2, left out in turn, are recovered
    # from the other and G3 together, within G3's pull on the fit
    rows = pd.concat([_rows("G1"), _rows("G2"), _rows("G3", slower=1.25)], ignore_index=True)
    checked = model.validate(rows, table)
    table_ = checked[checked["split"] == "device"].set_index("held_out")
    assert table_.loc["G3", "median_error"] == pytest.approx(0.2, abs=0.01)
    assert table_.loc["G3", "worst_error"] == pytest.approx(0.2, abs=0.01)
    assert set(table_.index) == {"G1", "G2", "G3"}
    alone = model.validate(_rows("G1"), table)
    assert alone.iloc[0]["note"] == "no other device to fit on"
    assert set(checked["form"]) == {model.THREE_TERM}  # the planted rows have no per-class columns


def test_bounds_say_launch_for_small_models_and_compute_for_large_ones(table):
    rows = pd.concat([_rows("G1"), _rows("G2")], ignore_index=True).assign(arm="cuda")
    bound = model.bounds(rows, table).set_index(["device_name", "depth"])["bound"]
    assert bound[("NVIDIA Planted G1", 3)] == "launch" and bound[("NVIDIA Planted G1", 15)] == "compute"


@pytest.mark.parametrize("field", ["source", "date"])
def test_a_device_entry_without_its_source_or_date_is_refused_by_name(table, tmp_path, field):
    entries = yaml.safe_load(table.read_text())
    del entries["G2"][field]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(entries))
    with pytest.raises(ValueError, match=rf"device 'G2' lacks \['{field}'\]"):
        model.load_devices(bad)


def test_the_shipped_table_names_every_gpu_by_its_short_key():
    devices = model.load_devices()
    assert set(devices) == {"H100", "H200", "A100", "L4", "T4", "A10G", "RTX 3060", "RTX 4090", "RTX 5090", "GTX 960",
                            # Lambda's public tables' GPUs (analysis/public.py)
                            "V100", "RTX 8000", "RTX 3090", "A10", "RTX A6000", "A100 40GB", "A100 PCIe",
                            "6000 Ada", "H100 PCIe", "GH200", "B200"}
    assert model.device_key("NVIDIA H100 80GB HBM3", devices) == "H100"
    assert model.device_key("NVIDIA GeForce RTX 4090", devices) == "RTX 4090"
    assert model.device_key("NVIDIA L40S", devices) is None  # not an L4
    assert model.device_key("NVIDIA A10G", devices) == "A10G" and model.device_key("NVIDIA GH200 480GB", devices) == "GH200"
    assert model.device_key("NVIDIA H100 PCIe", devices) == "H100 PCIe"  # the longest key it holds
    assert devices["T4"].peak("bf16") == devices["T4"].fp32_flops  # no BF16 unit: FP32's peak


def test_fp16_runs_at_a_gpus_fp16_tensor_cores_and_a_gpu_without_a_precisions_unit_says_so():
    devices = model.load_devices()
    v100, h100, gtx = devices["V100"], devices["H100"], devices["GTX 960"]
    assert v100.peak("fp16") == v100.fp16_flops > 5 * v100.fp32_flops  # Volta's FP16 tensor cores, no BF16
    assert v100.lacks("fp16") is None and v100.lacks("bf16") == "BF16" and v100.lacks("tf32") == "TF32"
    assert h100.peak("fp16") == h100.bf16_flops and h100.lacks("bf16") is None  # fp16 at bf16's rate where not given
    assert gtx.peak("fp16") == gtx.fp32_flops and gtx.lacks("fp16") == "FP16 tensor-core"
    assert all(d.lacks(p) is None for d in devices.values() for p in ("default", "fp32"))


def test_an_fp16_figure_that_is_not_a_number_is_refused_by_name(table, tmp_path):
    entries = yaml.safe_load(table.read_text())
    entries["G2"]["fp16_flops"] = "fast"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(entries))
    with pytest.raises(ValueError, match=r"device 'G2': fp16_flops must be a number above 0"):
        model.load_devices(bad)


def test_the_reference_rows_predict_unmeasured_gpus_and_model_imports_neither_torch_nor_ray():
    rows = __import__("crossover.analysis.load", fromlist=["read"]).read(ROOT / "results/reference/h200-2026-11-26/scaling")
    predicted = model.predict(rows, ["A100", "H200"])
    assert set(predicted["device_name"]) == {"A100"} and predicted["epoch_s_median"].gt(0).all()
    check = "import crossover.analysis.model, sys; print(sorted({'torch', 'ray'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_gpu_measured_at_some_sizes_is_predicted_at_the_others_only(table):
    g1 = _rows("G1")
    measured = pd.concat([g1[g1["depth"] <= 9], _rows("G2")], ignore_index=True)  # G1 stops at depth 9
    predicted = model.predict(measured, ["G1"], table)
    assert sorted(predicted["depth"]) == list(range(10, 16))  # its measured sizes are never predicted
    assert (predicted["predicted"] & predicted["device_name"].eq("G1")).all()


def test_only_a_reused_workers_rows_timed_before_the_cupti_fix_pay_its_launch_slowdown():
    rows = pd.DataFrame({"finished_at": pd.to_datetime(["2026-11-25T10:00Z", "2026-11-25T10:01Z", "2026-11-27T10:00Z",
                                                        "2026-11-25T10:02Z"], utc=True),
                         "cold_start": [False, True, False, False], "launches_per_step": [300.0, 300.0, 300.0, None]})
    assert model.cupti_attached(rows).tolist() == [True, False, False, False]


def test_the_laptops_case_predicts_from_the_cpus_count_of_the_same_configuration(tmp_path):
    key = {"workload": ["disc", "disc"], "workload_params": [None, None], "depth": [4.0, 6.0], "width": [None, None],
           "context": [None, None], "batch_size": [100, 100]}
    rows = pd.DataFrame({**key, "launches_per_step": [90.0, 120.0], "step_s": [1.0, 2.0]}, index=[7, 9])
    counted = pd.DataFrame({k: v[:1] for k, v in key.items()} | {"launches_per_step": [40.0]})
    counted.to_parquet(tmp_path / "counted.parquet")
    got = model.as_counted(rows, tmp_path / "counted.parquet")
    assert got.index.tolist() == [7]  # depth 6 was never counted: left out, not predicted from the GPU's count
    assert got.loc[7, "launches_per_step"] == 40 and got.loc[7, "step_s"] == 1.0

"""The public cross-GPU tables (analysis/public/): every GPU name mapped onto the device table, fp16 kept apart
from fp32, the ordering check (a GPU faster on every public benchmark is never predicted slower, but for the
pairs named in KNOWN, which the datasheet figures alone cannot order), and the leave-one-GPU-out over them."""

import ast
from pathlib import Path

import pytest

from analysis import model, public

ROOT = Path(__file__).resolve().parent.parent
# (precision, faster, slower) that the model, fitted on the reference rows, orders against the public tables.
# RTX 3090 / A10: the A10's datasheet tensor peaks (TF32 62.5, BF16 125 TFLOP/s at 150 W) are above the
# 3090's FP32-accumulate ones (35.6, 71), yet the 3090 wins all 9 of Lambda's benchmarks by 9-47%; the
# worst is tiny 'disc' MLPs, whose small-matmul term scales with 1/peak. The A100s / RTX 6000 Ada: its
# TF32 peak (182 TFLOP/s) is above theirs (156), and the model has it up to 3% faster on compute-bound steps.
KNOWN = {("fp32", "RTX 3090", "A10"), ("fp16", "RTX 3090", "A10"), ("fp32", "A100", "6000 Ada"),
         ("fp32", "A100 PCIe", "6000 Ada"), ("fp32", "A100 40GB", "6000 Ada")}


@pytest.fixture(scope="module")
def table():
    return public.throughputs()


@pytest.fixture(scope="module")
def violations(table):
    configs = public.reference_configs().drop_duplicates(["workload", "model", "batch_size", "precision"])
    return public.ordering_violations(configs.reset_index(drop=True), table)


def test_every_lambda_gpu_name_maps_onto_a_device_key_but_the_one_no_datasheet_describes():
    names = set(public.pd.read_csv(public.LAMBDA)["name_gpu"])
    unmapped = {n for n in names if public.gpu_key(n) is None}
    assert unmapped and all("GH200_80GB" in n for n in unmapped)
    rows = public.load()
    assert set(rows["gpu"]) <= set(model.load_devices())
    assert {"V100", "A10", "RTX 4090", "A100", "H100", "H100 PCIe", "H200", "B200"} <= set(rows["gpu"])
    assert public.gpu_key("LambdaOD_1x_1xGH200_96GB_192-222-57-0_v2") == "GH200"  # not an H200
    assert public.gpu_key("LambdaCloud A100 40GB PCIe") == "A100 40GB" and public.gpu_key("LambdaCloud A10") == "A10"


def test_fp16_and_fp32_figures_are_kept_apart_each_with_its_batch_and_container(table):
    rows = public.load()
    assert set(rows["precision"]) == {"fp32", "fp16"}
    assert rows["batch_size"].notna().all() and rows["container"].str.startswith("nvcr.io/nvidia/pytorch:").all()
    r50 = table[(table["benchmark"] == "resnet50") & (table["gpu"] == "A100")].set_index("precision")
    assert r50.loc["fp16", "throughput"] > r50.loc["fp32", "throughput"]  # mixed precision is faster: not pooled
    assert r50.loc["fp32", "batch_size"] == 640 and r50.loc["fp16", "batch_size"] == 1280


def test_dominance_needs_a_win_on_every_shared_benchmark(table):
    pairs = {(p, a, b) for p, a, b, _ in public.dominance(table)}
    assert ("fp32", "H100", "A100") in pairs and ("fp32", "A100", "H100") not in pairs
    assert ("fp32", "B200", "H200") in pairs  # the v2 table's GPUs among themselves
    assert not any(a in ("RTX 4090", "6000 Ada") and b in ("RTX 4090", "6000 Ada") for _, a, b in pairs)
    assert ("fp32", "V100", "RTX 8000") not in pairs or ("fp32", "RTX 8000", "V100") not in pairs


def _pairs(violations) -> set:
    return set(violations[["precision", "faster", "slower"]].itertuples(index=False, name=None))


def test_no_gpu_faster_on_every_public_benchmark_is_predicted_slower_but_the_known_pairs(violations):
    new = violations[[p not in KNOWN for p in violations[["precision", "faster", "slower"]].itertuples(index=False, name=None)]]
    assert new.empty, f"the model orders these against the public tables:\n{new.to_string()}"


def test_the_known_violations_still_happen_so_a_fix_must_shrink_the_list(violations):
    assert _pairs(violations) == KNOWN
    assert violations["ratio"].max() < 1.5  # and none by more than this


def test_leave_one_gpu_out_covers_at_least_eight_gpu_models_each_unseen_by_its_own_fit():
    held = public.held_out()
    assert len(held) >= public.MIN_GPUS and held["gpu"].is_unique
    assert held["refit_error"].abs().median() <= public.TARGET
    # the refitted share moves with what is left out: each GPU's fit is its own, without its figure
    assert held[f"{public.FREE}_fitted"].nunique() == len(held)
    text = public.render_held_out(held)
    assert "not our harness" in text and "median |error|" in text and "target (issue 30)" in text


def test_public_imports_neither_torch_nor_ray():
    tree = ast.parse((ROOT / "analysis" / "public.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"torch", "ray"}

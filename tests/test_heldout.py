"""The held-out jobs (examples/heldout.py), their timing path (studies/reference.py --real --workload) and their
check against `crossover predict` (studies/heldout_check.py): each network trains at its tiny size and changes only
what it leaves unfrozen, the custom Function's hand-written gradient is autograd's, the detector's boxes are valid,
each network of a family the count must handle (a detector, a mixture of experts, a Python loop over time) is
counted as `crossover predict` counts it, the timing's smoke path writes a line a run, and the check's table says
which predictions hold.

    python -m pytest tests/test_heldout.py
"""

import argparse
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from crossover.sweeps.count_step import counted
from crossover.config import TrialConfig
from crossover.data import take
from crossover.trainables.registry import Registry
from crossover.trainables.trial import resolve

import heldout_check
import reference

register = Registry().register  # this module's workloads, imported here

JOB = Path(__file__).resolve().parent.parent / "examples" / "heldout.py"
WL = register(f"{JOB}:workload")
heldout = __import__(WL.make_model.__module__)  # the job file's module, as registered
# what each arch trains, by its parameters' names; None: every parameter
TRAINED = {"lora_gpt2_small": (".a.", ".b."), "lora_gpt2_medium": (".a.", ".b."), "frozen_resnet50": ("layer4.", "fc."),
           "probe_vit_b_16": ("heads.head.",), "frozen_bert": ("encoder.layers.1.", "encoder.layers.2.", "head.")}
# the families no reference row holds, each counted here as `crossover predict` counts it; the detector's count runs
# its step for real on the CPU, several times (costs, then the peak at two batches): half a minute on 2 cores
FAMILIES = ("video_r3d", pytest.param("fasterrcnn", marks=pytest.mark.slow), "mamba_scan", "moe", "wavenet",
            "frozen_bert", "pointnet", "lora_gpt2_small")


@pytest.mark.parametrize("arch", list(heldout.ARCHS))
def test_each_network_takes_a_step_at_its_tiny_size_and_changes_only_what_it_leaves_unfrozen(arch):
    cfg = resolve(TrialConfig(WL.name, device="cpu", batch_size=2, dataset_size=4, epochs=2, module=WL.ref,
                              params={"arch": arch, "tiny": 1})).cfg
    torch.manual_seed(0)
    model, data = WL.make_model(cfg), WL.data(cfg)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = WL.make_optimizer(model.parameters(), cfg.lr)
    loss, _ = WL.run_step(model, take(data.x, slice(0, 2)), data.y[:2], WL.make_loss())
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    changed = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    assert changed and changed <= trained
    if arch in TRAINED:
        assert trained == {n for n in before if any(part in f".{n}" for part in TRAINED[arch])}
    else:
        assert trained == set(before)


@pytest.mark.parametrize("arch", FAMILIES)
def test_each_family_is_counted_as_crossover_predict_counts_it(arch):
    step = counted(f"{JOB}:workload", 2, None, {}, {"arch": arch, "tiny": 1})
    assert step["flops_per_step"] > 0 and step["launches_per_step"] > 0 and step["n_params"] > 0


def test_the_detectors_targets_are_one_to_four_boxes_an_image_inside_it_each_of_a_class_not_the_background():
    side, most, classes = heldout.TINY["fasterrcnn"]
    y = heldout.boxes(64, side, most, classes, torch.Generator().manual_seed(0))
    real = y[..., 0] >= 0
    assert y.shape == (64, most, 5) and set(real.sum(1).tolist()) == set(range(1, most + 1))
    assert (y[..., 0][~real] == -1).all() and set(y[..., 0][real].long().tolist()) <= set(range(1, classes))
    box = y[real][:, 1:]
    assert (box[:, 2:] > box[:, :2]).all() and (box >= 0).all() and (box <= side).all()


def test_the_swish_functions_hand_written_gradient_is_autograds():
    x = torch.randn(16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(heldout.SwishFunction.apply, (x,))


def test_the_default_table_cures_only_the_host_bound_jobs_after_every_eager_round():
    args = argparse.Namespace(workload=[reference.UNSEEN_JOBS], held_out=False, archs=None, batch_sizes=None,
                              smoke=False, engines=("eager", "compile", "graph"), precisions="default,bf16", repeats=3)
    runs = reference.real_runs(args, Registry())
    eager = [r for r in runs if r[4] == "eager"]
    points = {(a, b, p) for a, bs in reference.UNSEEN.items() for b in bs for p in ("default", "bf16")}
    assert sorted(eager) == sorted((r, *p, "eager") for r in range(3) for p in points)
    assert runs[:len(eager)] == eager and [r[0] for r in eager] == sorted(r[0] for r in eager)
    assert {a for _, a, _, _, e in runs if e != "eager"} == set(reference.CURED)


def test_the_real_smoke_path_writes_a_line_a_run_with_its_params_and_engine(tmp_path):
    reference.main(["--real", "--workload", f"{JOB}:workload", "--smoke", "--devices", "cpu", "--engines", "eager",
                    "--archs", "mlp,embbag,lora_gpt2_small", "--out", str(tmp_path), "--name", "t"])
    lines = [json.loads(x) for x in (tmp_path / "t-heldout-real.jsonl").read_text().splitlines()]
    assert [(x["arch"], x["precision"]) for x in lines] == [
        (a, p) for a in ("mlp", "embbag", "lora_gpt2_small") for p in ("default", "bf16")]
    assert all(x["status"] == "ok" and x["engine"] == "eager" and x["params"] == {"arch": x["arch"], "tiny": 1}
               and x["epoch_s_median"] > 0 and x["dataset_size"] == 2 * x["batch_size"] for x in lines)


def run(arch, precision, status="ok", epoch_s=1.0, peak=2e9):
    return {"workload": "examples/heldout.py:workload", "arch": arch, "params": {"arch": arch}, "batch_size": 8,
            "dataset_size": 64, "precision": precision, "engine": "eager", "device_name": "NVIDIA H200",
            "status": status, "epoch_s_median": epoch_s, "peak_allocated_bytes": peak}


def test_the_check_says_which_measured_epochs_are_inside_their_interval_and_which_predictions_failed():
    runs = pd.DataFrame([run("mlp", "bf16", epoch_s=s) for s in (0.9, 1.0, 1.3)] +
                        [run("unet", "bf16"), {**run("embbag", "bf16"), "status": "oom"}])
    points = heldout_check.measured(runs)
    assert points.set_index("arch").loc["mlp", "epoch_s"] == 1.0
    predicted = {heldout_check.key(m): p for (_, m), p in zip(points.iterrows(), [
        heldout_check.Predicted(1.2, 0.8, 1.5, 3.0, None),
        heldout_check.Predicted(None, None, None, None, "error: counted costs lack matmul"),
        heldout_check.Predicted(0.5, 0.4, 0.6, 1.0, None)])}
    rows = heldout_check.compared(points, predicted)
    assert [(r["arch"], r["inside"]) for r in rows] == [("mlp", True), ("unet", None), ("embbag", None)]
    assert rows[0]["error_pct"] == pytest.approx(20)
    text = "\n".join(heldout_check.table(rows))
    assert "failed: error: counted costs lack matmul" in text and "+20%" in text and "oom" in text

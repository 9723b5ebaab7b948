"""GPU behaviour, run on a machine with CUDA (they skip cleanly without): CPU and GPU train alike,
packed trials keep to their share, pipelines and DDP across GPUs match one device, and a CPU trial
on a GPU node never touches the GPU.

    python -m pytest -q tests/test_gpu.py      # on the GPU machine
"""

import dataclasses

import pandas as pd
import pytest
import torch

from crossover.sweeps.space import Space
from crossover.config import TrialConfig
from crossover.trainables.devices import parse
from crossover.trainables.placement import placement
from crossover.trainables.fused import run_fused
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve

gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(gpus == 0, reason="needs CUDA")
two_gpus = pytest.mark.skipif(gpus < 2, reason="needs 2 GPUs")


@pytest.fixture
def no_tf32():
    """Full fp32 on the GPU, for comparisons with the CPU; restores the defaults after. A trial sets its own
    precision when it starts (trainables/precision.py): its `default` turns TF32 convolutions back on, so a
    comparison that needs strict fp32 inside a trial asks for precision="fp32" too."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# First steps from the same seed agree to this relative tolerance with TF32 off.
FIRST_STEPS_RTOL = 1e-4


@pytest.mark.parametrize("workload, kw", [
    ("disc", dict(depth=10)),
    ("peaks", dict(dataset_size=2500)),
    ("tabular", dict(dataset_size=2000)),
    ("lenet", dict(dataset_size=1000)),
])
def test_cpu_and_gpu_first_steps_agree(no_tf32, workload, kw):
    cpu = run_trial(resolve(TrialConfig(workload, epochs=2, min_timed_s=0, **kw)))
    gpu = run_trial(resolve(TrialConfig(workload, device="cuda", epochs=2, min_timed_s=0, **kw)))
    print(f"{workload}: cpu {cpu['train_loss']:.8f} gpu {gpu['train_loss']:.8f}")
    assert gpu["train_loss"] == pytest.approx(cpu["train_loss"], rel=FIRST_STEPS_RTOL)
    assert gpu["peak_gpu_bytes"] > 0 and "cpu" not in gpu["device_name"].lower()


def test_seeds_claim_no_difference_in_accuracy(no_tf32):
    # seed 002: "with literally no difference in model accuracy"; its LeNet and hyper-parameters on
    # real digits, 15 epochs
    cfg = dict(dataset_size=1437, epochs=15, min_timed_s=0)
    cpu = run_trial(resolve(TrialConfig("lenet", **cfg)))
    gpu = run_trial(resolve(TrialConfig("lenet", device="cuda", **cfg)))
    print(f"lenet test accuracy: cpu {cpu['test_accuracy']:.4f} gpu {gpu['test_accuracy']:.4f}")
    assert cpu["test_accuracy"] > 0.9
    assert abs(gpu["test_accuracy"] - cpu["test_accuracy"]) <= 0.01


def test_a_packed_trial_refuses_to_start_without_its_share():
    free, total = torch.cuda.mem_get_info()
    hog = torch.empty(int(free - 0.3 * total), dtype=torch.uint8, device="cuda")  # leave 30%: < 45%
    try:
        with pytest.raises(RuntimeError, match="needs its share of the card"):
            placement(parse("cuda/2"))
        placement(parse("cuda/4"))  # 22.5% fits
    finally:
        del hog
        torch.cuda.empty_cache()
        placement(parse("cuda"))  # lifts the cap again


def test_a_packed_trial_runs_within_its_cap():
    row = run_trial(resolve(TrialConfig("disc", device="cuda/8", depth=8, epochs=3)))
    total = torch.cuda.get_device_properties(0).total_memory
    assert row["status"] == "ok" and row["peak_gpu_bytes"] < 0.9 / 8 * total
    placement(parse("cuda"))


def test_a_cpu_trial_on_a_gpu_node_never_touches_the_gpu(local_gpu_ray):
    ray = local_gpu_ray

    @ray.remote(num_cpus=1, num_gpus=0)
    def cpu_trial():
        import os

        row = run_trial(resolve(TrialConfig("disc", depth=4, epochs=2)))
        return row["device_name"], torch.cuda.is_initialized(), os.environ.get("CUDA_VISIBLE_DEVICES")

    device_name, initialised, visible = ray.get(cpu_trial.remote())
    print(f"zero-GPU Ray task: CUDA_VISIBLE_DEVICES={visible!r}, cuda initialised: {initialised}")
    assert not initialised and "NVIDIA" not in device_name


@two_gpus
def test_a_two_gpu_pipeline_matches_one_gpu(no_tf32):
    kw = dict(depth=8, width=1024, dataset_size=4096, batch_size=512, epochs=3, min_timed_s=0)
    one = run_trial(resolve(TrialConfig("tabular", device="cuda", **kw)))
    piped = run_trial(resolve(TrialConfig("tabular", device="pipe:2", micro_batches=4, **kw)))
    assert "+" in piped["device_name"]
    # micro-batches change the matrix products' shapes, so cuBLAS sums in another order: 3 epochs
    # of 8 steps drift further than the first steps do
    assert piped["train_loss"] == pytest.approx(one["train_loss"], rel=1e-3)


@two_gpus
def test_a_pipeline_epoch_is_timed_the_same_by_events_and_by_a_synchronised_wall_clock():
    # the events mark every stage's work (trainables/timing.py); train_s is perf_counter between
    # synchronisations of both GPUs around the same epochs
    row = run_trial(resolve(TrialConfig("tabular", device="pipe:2", micro_batches=4, depth=8, width=2048,
                                        dataset_size=16384, batch_size=1024, epochs=7)))
    events = sum(row["epoch_s"])
    print(f"pipe:2: {len(row['epoch_s'])} epochs, events {events * 1e3:.2f} ms, wall clock {row['train_s'] * 1e3:.2f} ms")
    assert events == pytest.approx(row["train_s"], rel=0.05)


@two_gpus
def test_ddp_on_two_gpus_over_nccl_matches_one_gpu(no_tf32, local_gpu_ray, tmp_path):
    from crossover.sweeps import runner

    grid = {"disc": {"depth": [8], "epochs": [3]}}
    runner.run(Space("ddp-gpu", grid, ("cuda", "ddp:2"), fixed={"min_timed_s": 0}), tmp_path, max_concurrent=1,
               log=print)
    rows = pd.read_parquet(tmp_path / "ddp-gpu").set_index("device")
    assert set(rows["status"]) == {"ok"}, rows["error"].dropna().tolist()
    assert rows.loc["ddp:2", "world_size"] == 2
    # TF32 is a process setting: the workers keep torch's default (matmul TF32 off), so fp32 holds
    assert rows.loc["ddp:2", "train_loss"] == pytest.approx(rows.loc["cuda", "train_loss"], rel=1e-3)


@pytest.mark.parametrize("workload, kw", [
    ("disc", dict(depth=10)),
    ("peaks", dict(dataset_size=2500)),  # Adam: its step count must be captured
    ("mnist_cnn", dict(dataset_size=1000)),  # dropout's random numbers inside the graph
])
def test_the_captured_step_trains_as_the_eager_one(no_tf32, workload, kw):
    eager = run_trial(resolve(TrialConfig(workload, device="cuda", epochs=4, min_timed_s=0, **kw)))
    graph = run_trial(resolve(TrialConfig(workload, device="cuda", epochs=4, engine="graph", min_timed_s=0, **kw)))
    print(f"{workload}: eager {eager['epoch_s_median'] * 1e3:.3f} ms/epoch, graph {graph['epoch_s_median'] * 1e3:.3f}, "
          f"capture {graph['compile_s']:.3f} s")
    assert graph["compile_s"] > 0
    if workload == "mnist_cnn":  # dropout draws differ between the graph's and eager's generator offsets
        assert graph["train_loss"] == pytest.approx(eager["train_loss"], rel=0.1)
    else:
        assert graph["loss_curve"] == pytest.approx(eager["loss_curve"], rel=FIRST_STEPS_RTOL)


@pytest.mark.parametrize("workload, kw, lrs", [
    ("peaks", dict(dataset_size=400, epochs=6), [0.08, 0.01, 0.03]),  # Adam: its step count on the device
    ("tabular", dict(dataset_size=512, epochs=3), [1e-3, 3e-3, 1e-3]),  # shuffled: indices copied in a replay
    # grouped convolutions, SGD with momentum, and dropout: each member's masks from its own generator,
    # registered with the graph
    ("mnist_cnn", dict(dataset_size=200, batch_size=50, epochs=3), [0.01, 0.05, 0.02]),
])
def test_a_fused_member_in_the_graph_engine_reproduces_its_run_alone(no_tf32, workload, kw, lrs):
    # strict fp32 (the fixture's setting, which a trial's `default` precision would turn back to TF32 convolutions):
    # a fused group's grouped convolution and a member's own round differently in TF32 (0.08% on an H200)
    members = [resolve(TrialConfig(workload, device="cuda", engine="graph", seed=seed, lr=lr, min_timed_s=0,
                                   precision="fp32", **kw)) for seed, lr in enumerate(lrs)]
    fused = run_fused(members)
    for member, row in zip(members, fused):
        alone = run_trial(member)  # the same trial in the graph engine, alone
        assert row["compile_s"] > 0 and row["fused_members"] == 3
        assert row["loss_curve"] == pytest.approx(alone["loss_curve"], rel=1e-4, abs=1e-7)
    assert len({tuple(r["loss_curve"]) for r in fused}) == 3  # the members did differ


@pytest.mark.parametrize("kw", [dict(dataset_size=2500), dict(dataset_size=1600, width=33)])
def test_a_fused_member_in_the_triton_engine_reproduces_its_run_alone(no_tf32, kw):
    lrs = [0.08, 0.01, 0.03]
    members = [resolve(TrialConfig("peaks", device="cuda", engine="triton", seed=seed, lr=lr, epochs=6, min_timed_s=0,
                                   **kw)) for seed, lr in enumerate(lrs)]
    fused = run_fused(members)
    for member, row in zip(members, fused):
        alone = run_trial(resolve(dataclasses.replace(member.cfg, engine="graph")))  # autograd's step, alone
        assert row["compile_s"] > 0 and row["fused_members"] == 3
        assert row["loss_curve"] == pytest.approx(alone["loss_curve"], rel=1e-4, abs=1e-7)
    assert len({tuple(r["loss_curve"]) for r in fused}) == 3  # the members did differ
    assert run_trial(members[0])["fused_members"] == 1  # alone, engine 'triton' is a fused trial of one


def test_the_fused_budget_is_half_the_gpus_free_memory_and_its_groups_fit_it():
    from crossover.sweeps.space import FUSE_FREE_SHARE, fuse_budget, groups
    from crossover.trainables.fused import member_bytes

    budget = fuse_budget()
    free, _ = torch.cuda.mem_get_info()
    assert budget.bytes == pytest.approx(FUSE_FREE_SHARE * free, rel=0.05)
    assert torch.cuda.get_device_name() in budget.source
    trials = Space("auto", {"tabular": {"dataset_size": [10240], "width": [1024]}}, ("cuda",), repeats=80).expand()
    batches = groups(trials, "auto", budget)
    assert sum(map(len, batches)) == 80 and all(len(g) * member_bytes(g[0]) <= budget.bytes for g in batches)


def test_the_compiled_model_on_the_gpu_trains_as_the_eager_one(no_tf32):
    kw = dict(depth=8, epochs=5, min_timed_s=0)
    eager = run_trial(resolve(TrialConfig("disc", device="cuda", **kw)))
    compiled = run_trial(resolve(TrialConfig("disc", device="cuda", engine="compile", **kw)))
    print(f"disc depth 8: eager {eager['epoch_s_median'] * 1e3:.3f} ms/epoch, compile "
          f"{compiled['epoch_s_median'] * 1e3:.3f} (warm-up with compilation {compiled['warmup_s']:.1f} s)")
    assert compiled["loss_curve"] == pytest.approx(eager["loss_curve"], rel=1e-3)
    assert compiled["warmup_s"] > eager["warmup_s"]  # the compilation, kept out of the timed epochs


def test_compile_trials_in_a_row_through_a_sweep_all_run(local_gpu_ray, tmp_path):
    # once, in one reused worker, every compile trial after the first failed in inductor's CUDA-graph
    # trees (thread-local state set up only in the thread that first compiled); each compile trial now
    # runs in a worker of its own (sweeps/runner.py)
    from crossover.sweeps import runner

    grid = {"disc": {"depth": [4, 8], "epochs": [3]}, "peaks": {"dataset_size": [2500], "epochs": [3]}}
    runner.run(Space("compile-gpu", grid, ("cuda",), fixed={"engine": "compile", "min_timed_s": 0}), tmp_path,
               max_concurrent=1, log=print)
    rows = pd.read_parquet(tmp_path / "compile-gpu")
    assert list(rows["status"]) == ["ok"] * 3, rows["error"].dropna().tolist()
    assert rows["cold_start"].all()  # each its worker's first trial


def test_a_cuda_trial_measures_its_gpu_energy_and_counts_its_launches():
    row = run_trial(resolve(TrialConfig("disc", device="cuda", depth=10, epochs=3)))
    assert row["gpu_energy_j"] is not None, row["energy_note"]
    assert 0 < row["gpu_energy_j"] < 1000 * row["train_s"]  # no board draws 1000 W
    assert row["launches_per_step"] > 10 and row["flops_per_step"] > 0  # 10 Linears forward alone
    graph = run_trial(resolve(TrialConfig("disc", device="cuda", depth=10, epochs=3, engine="graph")))
    assert graph["launches_per_step"] == 3 and graph["flops_per_step"] == row["flops_per_step"]


def test_the_operator_study_times_each_kind_of_op_it_counts(tmp_path):
    import opbench
    assert opbench.main(["--out", str(tmp_path), "--groups", "matmul,conv", "--precisions", "default,bf16",
                         "--budget", "20"]) == 0
    rows = pd.read_parquet(tmp_path / "ops.parquet")
    timed = rows[rows["gpu_s"] > 0]
    assert {"matmul", "conv"} <= set(timed["op_class"])
    assert set(rows["precision"]) == {"default", "bf16"}
    mm = timed[timed["case"].eq("mm") & timed["op_class"].eq("matmul")]
    assert (mm["flops"] > 0).all() and (mm["flops"] / mm["gpu_s"] < 2e15).all()  # no op past any GPU's datasheet

"""Device strings: the resources each asks of Ray, the placement it gets, and the variants' equivalence
on the CPU (a two-stage pipeline, and DDP over gloo with two Ray Train workers)."""

import subprocess
import sys

import pandas as pd
import pytest
import torch

from sweeps.space import Space
from trainables.config import ConfigError, TrialConfig
from trainables.devices import Placement, kernels_for, parse, placement, resources, threads_for
from trainables.pipeline import balanced_stages
from trainables.train import run_trial
from trainables.trial import resolve
from trainables.workloads import mlp


@pytest.mark.parametrize("device, threads, expected", [
    ("cpu", 4, {"cpu": 4, "gpu": 0}),
    ("cuda", 4, {"cpu": 1, "gpu": 1.0}),
    ("cuda/4", 4, {"cpu": 1, "gpu": 0.25}),
    ("cuda/8", 1, {"cpu": 1, "gpu": 0.125}),
    ("pipe:2", 1, {"cpu": 1, "gpu": 2}),
    ("ddp:2", 1, {"cpu": 0.25, "gpu": 0}),  # the TorchTrainer's workers ask for the GPUs
    ("ddp-cpu:2", 2, {"cpu": 0.25, "gpu": 0}),
])
def test_each_device_asks_ray_for_what_it_uses(device, threads, expected):
    assert resources(parse(device), threads) == expected


def test_threads_follow_the_device():
    assert [threads_for(parse(d), 8) for d in ("cpu", "cuda", "cuda/2", "ddp-cpu:2", "ddp-cpu:16", "pipe:2")] == [8, 1, 1, 4, 1, 1]


@pytest.mark.parametrize("bad", ["gpu", "cuda:0", "cpu/2", "ddp", "pipe:0", "cuda/0", "ddp:x", 3])
def test_malformed_devices_are_refused(bad):
    with pytest.raises(ValueError, match="device"):
        parse(bad)


def test_a_pipeline_is_refused_for_a_cnn_by_name():
    with pytest.raises(ConfigError, match="a pipeline splits workloads whose model is an nn.Sequential") as info:
        resolve(TrialConfig("lenet", device="pipe:2"))
    assert info.value.field == "device"


def test_a_cpu_trial_gets_the_cpu_and_never_initialises_cuda():
    # a fresh process: in this one another test may have used the GPU
    script = ("import torch; from trainables.config import TrialConfig; from trainables.train import run_trial; "
              "from trainables.trial import resolve; "
              "run_trial(resolve(TrialConfig('disc', depth=3, epochs=2))); print(torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert placement(parse("cpu")).devices == (torch.device("cpu"),)
    assert out.stdout.strip() == "False"


def test_kernels_for_reads_torchs_arch_list():
    built = ["sm_75", "sm_80", "sm_90", "compute_90"]
    assert kernels_for(80, built) and kernels_for(100, built)  # 10.0 runs the sm_90 PTX
    assert not kernels_for(50, built)  # seed 001's Quadro M500M: "no kernel image is available"
    assert not kernels_for(86, ["sm_80", "sm_90"])


def test_pipeline_stages_balance_parameters_and_keep_every_layer():
    model = mlp([2] + [2 ** k for k in range(2, 11)] + [2])  # disc depth 10
    stages = balanced_stages(model, 2)
    sizes = [sum(p.numel() for p in s.parameters()) for s in stages]
    assert sum(sizes) == 703_142 and max(sizes) == 527_362  # the best contiguous cut
    assert sum(len(s) for s in stages) == len(model)
    with pytest.raises(ValueError, match="pipe:4 needs at least 4 Linear layers"):
        balanced_stages(mlp([2, 8, 2]), 4)


def test_a_pipeline_of_micro_batches_trains_as_the_whole_model():
    kw = dict(depth=3, width=32, dataset_size=512, epochs=3, min_timed_s=0)
    trial = resolve(TrialConfig("tabular", device="pipe:2", micro_batches=4, **kw))
    cpu = torch.device("cpu")
    piped = run_trial(trial, Placement((cpu, cpu), micro_batches=4))
    whole = run_trial(resolve(TrialConfig("tabular", **kw)))
    assert piped["train_loss"] == pytest.approx(whole["train_loss"], rel=1e-5)
    assert piped["micro_batches"] == 4 and piped["n_params"] == whole["n_params"]


@pytest.mark.slow
def test_ddp_over_gloo_through_ray_train_matches_one_process(local_ray, tmp_path):
    # one Ray Train worker: two (2 x 1 CPU, and the trial's own 0.25) never fit 2 cores, and are refused
    # (tests/test_reliability.py); two workers against one process: ddp:2 on a GPU machine (tests/test_gpu.py)
    from sweeps import runner

    grid = {"disc": {"depth": [6], "epochs": [3], "dataset_size": [400]}}
    runner.run(Space("ddp", grid, ("cpu", "ddp-cpu:1"), cpu_threads=1, fixed={"min_timed_s": 0}), tmp_path,
               log=lambda line: None)
    rows = pd.read_parquet(tmp_path / "ddp").set_index("device")
    assert set(rows["status"]) == {"ok"}, rows["error"].dropna().tolist()
    ddp, single = rows.loc["ddp-cpu:1"], rows.loc["cpu"]
    assert ddp["world_size"] == 1 and len(ddp["per_rank_samples_per_s"]) == 1
    assert ddp["torch_threads"] == 1 and ddp["cpus_requested"] == 0.25
    assert ddp["train_loss"] == pytest.approx(single["train_loss"], rel=1e-5)
    assert ddp["train_accuracy"] == single["train_accuracy"]

"""The parity benchmark (studies/parity.py): its plain loop does run_trial's work, a user's workload too
(a batch that is a dict, through its step hook) at each batch size asked for, and its smoke run on a
Ray started as every sweep starts it prints times that its rows give again, from trials that ran at the
driver's priority on the threads they asked for."""

import dataclasses
import os
import re

import pandas as pd
import pytest
import torch

from crossover.schema import SIZE_AXES
from crossover.config import TrialConfig
from crossover.trainables.timing import more_epochs
from crossover.trainables.train import run_trial
from crossover.trainables.trial import here, resolve

import parity

# A user's workload whose batch is a dict of two tensors: its step hook feeds both to the model.
JOB = """
import torch
from torch import nn

from crossover.data import Data
from crossover.workload import Param, Workload


class Two(nn.Module):
    def __init__(self, n, width):
        super().__init__()
        self.left, self.right = nn.Linear(n, width), nn.Linear(n, width)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(width, 2))

    def forward(self, left, right):
        return self.head(self.left(left) + self.right(right))


def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    x = {side: torch.randn(cfg.dataset_size, cfg.params["n_features"], generator=g) for side in ("left", "right")}
    return Data(x, ((x["left"] - x["right"]).sum(1) > 0).long(), None, None, source="random")


def step(model, x, y, loss):
    out = model(x["left"], x["right"])
    return loss(out, y), out


workload = Workload(
    "pairs", make_data=data, make_model=lambda cfg: Two(cfg.params["n_features"], cfg.width),
    make_loss=nn.CrossEntropyLoss, make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr), step=step,
    defaults={"width": 32, "batch_size": 64, "dataset_size": 2048, "epochs": 3, "lr": 1e-3},
    axes={"width"}, params={"n_features": Param(8, low=1, high=1000)})
"""


@pytest.fixture
def job(tmp_path):
    """JOB's reference, as --workload takes it."""
    path = tmp_path / "parity_job.py"
    path.write_text(JOB)
    return f"{path}:workload"


@pytest.mark.parametrize("kw", [
    dict(workload="disc", depth=4, epochs=3),  # the data's own order, SGD
    dict(workload="tabular", dataset_size=640, epochs=3),  # shuffled every epoch, Adam
    dict(workload="lenet", dataset_size=300, epochs=2, data="synthetic"),  # a loss summed over the batch
])
def test_the_plain_loop_does_the_work_of_run_trial_in_either_loop(kw):
    seed = resolve(TrialConfig(loop="seed", min_timed_s=0, **kw))
    run = parity.plain(seed)
    assert len(run["seconds"]) == seed.cfg.epochs - seed.cfg.warmup_epochs
    assert run["epoch_loss"] == pytest.approx(run_trial(seed)["train_loss"], rel=1e-6)
    # the careful user's loop syncs nowhere and sums nothing, and trains the same model on the same batches
    fast = parity.plain(resolve(TrialConfig(min_timed_s=0, **kw)))
    assert fast["epoch_loss"] is None and fast["last_loss"] == pytest.approx(run["last_loss"], rel=1e-6)


def test_the_plain_loop_runs_at_pytorchs_defaults_whatever_a_trial_left():
    saved = torch.get_num_threads(), torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        run_trial(resolve(TrialConfig("disc", depth=2, epochs=2, min_timed_s=0, precision="fp32")))  # TF32 off
        parity.plain(resolve(TrialConfig("disc", depth=2, epochs=2, min_timed_s=0, threads=1)))
        assert not torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert torch.get_num_threads() == 1  # on the CPU, the trial's threads: both sides own the same cores
    finally:
        torch.set_num_threads(saved[0])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[1:]


def test_a_users_workload_runs_at_each_batch_size_and_its_plain_loop_takes_its_dict_batches(job, planner):
    flags = parity.parse_args(["--smoke", "--workload", job, "--batch-sizes", "32,128", "--epochs", "3"])
    assert flags.loops == ("fast",) and flags.repeats == 1  # yours alone: the default path, once with --smoke
    trials = parity.space(flags, "p", "cpu", "fast", 1, planner).expand()
    assert [(t.cfg.workload, t.cfg.module, t.cfg.batch_size, t.cfg.loop, t.cfg.precision) for t in trials] == [
        ("pairs", "parity_job:workload", 32, "fast", "default"),
        ("pairs", "parity_job:workload", 128, "fast", "default")]  # no built-in beside it
    assert parity.config(trials[0]) == "pairs width=32 batch_size=32 dataset_size=128 n_features=8"
    here(trials[0], planner.registry)  # the job imported in this process from its file, as parity's main does
    run = parity.plain(trials[0])  # 3 epochs, the warm-up left out, then more as a trial takes for min_timed_s
    first = run["seconds"][:2]
    assert len(run["seconds"]) == 2 + more_epochs(2, sum(first), trials[0].cfg.min_timed_s) > 2
    exact = resolve(dataclasses.replace(trials[0].cfg, min_timed_s=0))
    assert len(parity.plain(exact)["seconds"]) == 2
    seed = resolve(dataclasses.replace(parity.space(flags, "p", "cpu", "seed", 1, planner).expand()[0].cfg,
                                       min_timed_s=0))
    assert parity.plain(seed)["epoch_loss"] == pytest.approx(run_trial(seed)["train_loss"], rel=1e-6)
    # without --smoke: its default grid cut to one configuration, the first value of each axis
    # and at least 4 epochs (3 timed after the warm-up), as a sweep's median takes
    assert parity.grids(parity.parse_args(["--workload", job]), "cpu", planner) == {
        job: {"dataset_size": [128], "epochs": [4]}}
    # the seeds' configurations: both loops, the seeds' as a comparison
    assert parity.parse_args([]).loops == ("fast", "seed")
    with pytest.raises(SystemExit):
        parity.parse_args(["--loops", "fast,slow"])


@pytest.fixture(scope="module")
def sweep_ray():
    """Ray as every sweep script starts it (crossover.sweeps.cluster.connect), with the machine's CPUs."""
    import ray

    from crossover.sweeps import cluster

    cluster.connect(None)
    yield ray
    ray.shutdown()


def test_a_ratio_past_the_target_says_whether_every_repeat_was_past_or_only_the_median():
    def runs(*ratios):
        return [{"sweep": r * 100.0, "plain": 100.0} for r in ratios]

    cpu, gpu = (resolve(TrialConfig("disc", device=d, depth=4)) for d in ("cpu", "cuda"))
    assert parity.verdict([(cpu, runs(0.95, 1.02, 1.08)), (gpu, runs(1.0, 1.1, 0.9))]) == [
        "worst sweep/plain of the default path 1.02: within the target 1.10 (* marks a configuration past it)."]
    lines = parity.verdict([(cpu, runs(1.12, 1.25, 1.15)), (gpu, runs(0.95, 1.19, 1.24))])
    assert lines[0].startswith("worst sweep/plain of the default path 1.19: past the target 1.10")
    assert lines[1].endswith("on cpu: 1.15, past in every one of its 3 repeats")
    assert lines[2].endswith("on cuda: 1.19, past in the median, within its repeats' spread (0.95-1.24): "
                             "more repeats would tell")


def test_smoke_run_prints_what_its_rows_give_again_from_trials_at_the_drivers_priority(sweep_ray, tmp_path, capsys):
    from crossover.sweeps import cluster

    assert cluster.workers_reniced()
    assert parity.main(["--smoke", "--devices", "cpu", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    cpus = cluster.node_cpus(cluster.node_types())  # a sweep's CPU trial's: every core but Ray's room (RAY_ROOM)
    assert f"a Ray worker of {cpus} CPUs: nice {os.nice(0)}, OMP_NUM_THREADS={cpus}," in out[1]

    # Ray starts its workers at nice 15; the sweep's trials ran at this process's niceness, on the
    # threads they asked Ray for (as sweeps/scaling.py gives them), in the default path and the seeds' loop
    header = out.index(next(line for line in out if line.startswith("config")))
    lines = [re.split(r"\s{2,}", line) for line in out[header + 1:header + 5]]
    assert sorted(line[2] for line in lines) == ["default", "default", "seed", "seed"]
    for loop in ("fast", "seed"):
        rows = pd.read_parquet(next(tmp_path.glob(f"parity-*-r0-cpu-{loop}")))
        assert len(rows) == 2 and set(rows["status"]) == {"ok"} and set(rows["loop"]) == {loop}
        assert set(rows["precision"]) == {"default"}
        assert (rows["nice"] == os.nice(0)).all()
        assert (rows["torch_threads"] == cpus).all() and (rows["cpus_requested"] == cpus).all()
        by_config = rows.set_index(rows.apply(
            lambda r: " ".join([r["workload"], *(f"{a}={int(r[a])}" for a in SIZE_AXES if pd.notna(r[a]))]), axis=1))
        label = "default" if loop == "fast" else "seed"
        for config, device, _, plain, direct, sweep, sweep_plain, direct_plain, sweep_direct, _ in (
                line for line in lines if line[2] == label):
            row = by_config.loc[config]
            assert device == "cpu"
            ms = {k: float(cell.split()[0]) for k, cell in (("plain", plain), ("direct", direct), ("sweep", sweep))}
            assert ms["sweep"] == pytest.approx(row["epoch_s_median"] * 1e3, abs=0.006)
            # one repeat: each ratio is the two times' before the cells rounded them to 2 decimals (half a unit
            # each way: at a fraction of a millisecond that moves the ratio by several hundredths), then itself
            # rounded to 2 decimals
            for printed, a, b in ((sweep_plain, "sweep", "plain"), (direct_plain, "direct", "plain"),
                                  (sweep_direct, "sweep", "direct")):
                low, high = (ms[a] - 0.005) / (ms[b] + 0.005), (ms[a] + 0.005) / max(ms[b] - 0.005, 1e-9)
                assert low - 0.005 <= float(printed.split()[0]) <= high + 0.005, (printed, ms[a], ms[b])
    assert any(line.startswith("worst sweep/plain of the default path ") for line in out)

"""The parity benchmark (sweeps/parity.py): its plain loop does run_trial's work, a user's workload too
(a batch that is a dict, through its step hook) at each batch size asked for, and its smoke run on a
Ray started as every sweep starts it prints times that its rows give again, from trials that ran at the
driver's priority on the threads they asked for."""

import os
import re

import pandas as pd
import pytest

from analysis.schema import SIZE_AXES
from sweeps import parity
from trainables import workload
from trainables.config import TrialConfig
from trainables.train import run_trial
from trainables.trial import resolve

# A user's workload whose batch is a dict of two tensors: its step hook feeds both to the model.
JOB = """
import torch
from torch import nn

from trainables.data import Data
from trainables.workload import Param, Workload


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
def job(tmp_path, monkeypatch):
    """JOB's reference, as --workload takes it. Registering ships its module to every Ray this process
    starts later (trainables.workload.shipped): restored after the test, so no later sweep here asks for it."""
    monkeypatch.setattr(workload, "_SHIPPED", dict(workload._SHIPPED))
    path = tmp_path / "parity_job.py"
    path.write_text(JOB)
    return f"{path}:workload"


@pytest.mark.parametrize("kw", [
    dict(workload="disc", depth=4, epochs=3),  # the data's own order, SGD
    dict(workload="tabular", dataset_size=640, epochs=3),  # shuffled every epoch, Adam
    dict(workload="lenet", dataset_size=300, epochs=2, data="synthetic"),  # a loss summed over the batch
])
def test_the_plain_loop_does_the_work_of_run_trial(kw):
    trial = resolve(TrialConfig(loop="seed", min_timed_s=0, **kw))
    seconds, loss = parity.plain(trial)
    assert len(seconds) == trial.cfg.epochs - trial.cfg.warmup_epochs
    assert loss == pytest.approx(run_trial(trial)["train_loss"], rel=1e-6)


def test_a_users_workload_runs_at_each_batch_size_and_its_plain_loop_takes_its_dict_batches(job):
    args = parity.parse_args(["--smoke", "--workload", job, "--batch-sizes", "32,128", "--epochs", "3"])
    trials = parity.space(args, "p", "cpu", 1).expand()
    assert [(t.cfg.workload, t.cfg.module, t.cfg.batch_size) for t in trials] == [
        ("pairs", "parity_job:workload", 32), ("pairs", "parity_job:workload", 128)]  # no built-in beside it
    assert parity.config(trials[0]) == "pairs width=32 batch_size=32 dataset_size=128 n_features=8"
    seconds, loss = parity.plain(trials[0])
    assert len(seconds) == 2  # 3 epochs, the warm-up left out
    assert loss == pytest.approx(run_trial(trials[0])["train_loss"], rel=1e-6)
    # without --smoke: its default grid cut to one configuration, the first value of each axis
    assert parity.grids(parity.parse_args(["--workload", job]), "cpu") == {job: {"dataset_size": [128]}}


@pytest.fixture(scope="module")
def sweep_ray():
    """Ray as every sweep script starts it (sweeps.runner.connect), with the machine's CPUs."""
    import ray

    from sweeps import runner

    runner.connect(None)
    yield ray
    ray.shutdown()


def test_smoke_run_prints_what_its_rows_give_again_from_trials_at_the_drivers_priority(sweep_ray, tmp_path, capsys):
    from sweeps import runner

    assert runner.workers_reniced()
    assert parity.main(["--smoke", "--devices", "cpu", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    cpus = int(sweep_ray.cluster_resources()["CPU"])
    assert f"a Ray worker of {cpus} CPUs: nice {os.nice(0)}, OMP_NUM_THREADS={cpus}," in out[1]

    # Ray starts its workers at nice 15; the sweep's trials ran at this process's niceness, on the
    # threads they asked Ray for (all of the machine's CPUs, as sweeps/scaling.py gives them)
    rows = pd.read_parquet(next(tmp_path.glob("parity-*-r0-cpu")))
    assert len(rows) == 2 and set(rows["status"]) == {"ok"}
    assert (rows["nice"] == os.nice(0)).all()
    assert (rows["torch_threads"] == cpus).all() and (rows["cpus_requested"] == cpus).all()

    header = out.index(next(line for line in out if line.startswith("config")))
    lines = [re.split(r"\s{2,}", line) for line in out[header + 1:header + 3]]
    by_config = rows.set_index(rows.apply(
        lambda r: " ".join([r["workload"], *(f"{a}={int(r[a])}" for a in SIZE_AXES if pd.notna(r[a]))]), axis=1))
    for config, device, plain, direct, sweep, sweep_plain, direct_plain, sweep_direct, load in lines:
        row = by_config.loc[config]
        assert device == "cpu"
        ms = {k: float(cell.split()[0]) for k, cell in (("plain", plain), ("direct", direct), ("sweep", sweep))}
        assert ms["sweep"] == pytest.approx(row["epoch_s_median"] * 1e3, abs=0.006)
        # one repeat: each ratio is the two cells' (rounded to 2 decimals each)
        for printed, a, b in ((sweep_plain, "sweep", "plain"), (direct_plain, "direct", "plain"),
                              (sweep_direct, "sweep", "direct")):
            assert float(printed.split()[0]) == pytest.approx(ms[a] / ms[b], abs=0.01 + 0.01 * ms[a] / ms[b])
    assert out[-1].startswith("worst sweep/plain ")

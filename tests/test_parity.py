"""The parity benchmark (sweeps/parity.py): its plain loop does run_trial's work, and its smoke run on a
Ray started as every sweep starts it prints times that its rows give again, from trials that ran at the
driver's priority on the threads they asked for."""

import os
import re

import pandas as pd
import pytest

from sweeps import parity
from trainables.config import TrialConfig
from trainables.train import run_trial
from trainables.trial import resolve


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
    by_config = rows.set_index(rows["workload"] + " " + rows.apply(
        lambda r: f"depth={r['depth']} dataset_size={r['dataset_size']}", axis=1))
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

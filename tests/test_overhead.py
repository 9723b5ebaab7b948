"""The overhead benchmark (studies/overhead.py, figures in analysis/overhead.py): its figures recover overheads
planted in rows, a user's workload replaces disc's trial, and its smoke run on a real local Ray prints figures
that the rows and the sweep record give again."""

import json
from pathlib import Path

import pandas as pd
import pytest

from crossover.analysis import overhead
from crossover.trainables.workloads import WORKLOADS

import overhead as benchmark

# A user's workload file: its smoke grid (Workload.grid) is 2 epochs of 64 samples at batch 64.
JOB = """
import torch
from torch import nn

from crossover.data import Data
from crossover.workload import Workload


def data(cfg):
    x = torch.randn(cfg.dataset_size, 4, generator=torch.Generator().manual_seed(cfg.seed))
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")


workload = Workload(
    "mine", make_data=data, make_model=lambda cfg: nn.Linear(4, 2),
    make_loss=nn.CrossEntropyLoss, make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
    defaults={"batch_size": 64, "dataset_size": 1000})
"""


def test_a_users_workload_replaces_discs_trial_and_only_one_is_taken(tmp_path, planner):
    (tmp_path / "overhead_job.py").write_text(JOB)
    ref = f"{tmp_path / 'overhead_job.py'}:workload"
    trial = benchmark.measured(benchmark.parse_args(["--smoke", "--workload", ref]), planner)
    trials = benchmark.space(trial, "o", epochs=5, trials=4).expand()
    assert {(t.cfg.workload, t.cfg.module, t.cfg.dataset_size, t.cfg.epochs, t.cfg.threads, t.cfg.min_timed_s)
            for t in trials} == {("mine", "overhead_job:workload", 64, 5, 1, 0)}  # its smoke configuration, one thread
    assert sorted(t.cfg.seed for t in trials) == [0, 1, 2, 3]
    disc = benchmark.space(benchmark.measured(benchmark.parse_args(["--smoke"]), planner), "o", 5, 2).expand()
    assert {(t.cfg.workload, t.cfg.depth) for t in disc} == {("disc", *WORKLOADS["disc"].grids["overhead"]["depth"])}
    with pytest.raises(ValueError, match="overhead repeats one trial, so give one workload, got 2"):
        benchmark.measured(benchmark.parse_args(["--workload", ref, "--workload", ref]), planner)


def planted(n: int, trial_s: float, start_s: float, gap_s: float) -> tuple[pd.DataFrame, dict]:
    """Rows of n trials run one at a time: the first row written start_s + trial_s after the sweep
    began, each next one gap_s + trial_s later; each trial spends 0.01 s outside its phases."""
    written = [100.0 + start_s + trial_s + k * (gap_s + trial_s) for k in range(n)]
    rows = pd.DataFrame({"status": "ok", "total_s": trial_s, "setup_s": 0.01, "h2d_s": 0.0,
                         "warmup_s": 0.1 * trial_s, "train_s": 0.9 * trial_s - 0.02, "eval_s": 0.0,
                         "written_at": written}, index=range(n))
    sweep = {"start": 100.0, "end": written[-1] + 0.5, "slots": 1, "load_before": [0.5] * 3, "load_after": [0.7] * 3}
    return rows, sweep


def test_figures_recover_planted_overheads():
    rows, sweep = planted(n=10, trial_s=1.0, start_s=3.0, gap_s=0.05)
    f = overhead.figures(rows, sweep)
    wall = 3.0 + 10 * 1.0 + 9 * 0.05 + 0.5
    assert f["wall_s"] == pytest.approx(wall) and f["own_s"] == pytest.approx(10.0)
    assert f["over_ideal"] == pytest.approx(wall / 10.0 - 1)
    assert f["per_trial_s"] == pytest.approx((wall - 10.0) / 10)
    assert f["start_s"] == pytest.approx(3.0) and f["gap_s"] == pytest.approx(0.05)
    assert f["rows_per_s"] == pytest.approx(10 / wall)
    assert f["fixed_s"] == pytest.approx(0.01) and f["first_s"] == pytest.approx(0.0)
    assert f["train_s"] == pytest.approx(10 * (1.0 - 0.02)) and f["load_before"] == 0.5


def test_concurrent_figures_count_slot_seconds():
    rows, sweep = planted(n=4, trial_s=1.0, start_s=2.0, gap_s=0.0)
    f = overhead.figures(rows, {**sweep, "slots": 2})
    assert f["per_trial_s"] == pytest.approx((2 * f["wall_s"] - 4.0) / 4)
    assert f["over_ideal"] == pytest.approx(2 * f["wall_s"] / 4.0 - 1)
    assert f["gap_s"] is None and f["first_s"] is None  # one at a time only


def test_failed_trials_are_refused():
    rows, sweep = planted(n=3, trial_s=1.0, start_s=2.0, gap_s=0.0)
    rows.loc[1, ["status", "error"]] = ["error", "RuntimeError: out of memory\n..."]
    with pytest.raises(ValueError, match="1 of 3 trials failed, e.g. 'RuntimeError: out of memory'"):
        overhead.figures(rows, sweep)


@pytest.mark.slow
def test_smoke_run_prints_figures_the_rows_give_again(local_ray, tmp_path, capsys):
    assert benchmark.main(["--smoke", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    header = overhead.header().split("  ")
    lines = [dict(zip(header, line.split("  "))) for line in printed if line.startswith("0.05  ")]
    dirs = sorted(tmp_path.glob("overhead-*-0.05s-c*-r0"))  # c1, then cauto: the order they ran
    assert [d.name.split("-")[-2] for d in dirs] == ["c1", "cauto"] and len(lines) == 2

    for directory, line in zip(dirs, lines):
        rows = pd.read_parquet(directory)
        sweep = json.loads((directory / "_sweep.json").read_text())
        assert len(rows) == 4 and set(rows["status"]) == {"ok"} and rows["config_hash"].is_unique
        wall, own, slots = sweep["end"] - sweep["start"], rows["total_s"].sum(), sweep["slots"]
        assert int(line["N"]) == 4 and int(line["slots"]) == slots
        assert float(line["wall_s"]) == pytest.approx(wall, abs=0.006)
        assert float(line["own_s"]) == pytest.approx(own, abs=0.006)
        assert float(line["per_trial_s"]) == pytest.approx((wall * slots - own) / 4, abs=0.0006)
        assert float(line["rows/s"]) == pytest.approx(4 / wall, abs=0.006)
        # a sweep cannot beat its own trials, and no row is written before its trial ran
        assert wall * slots >= own
        written = sorted(Path(directory, f"{h}.parquet").stat().st_mtime for h in rows["config_hash"])
        assert written[0] - sweep["start"] >= rows["total_s"].min()
    serial = lines[0]
    assert serial["slots"] == "1" and float(serial["gap_s"]) > 0 and float(serial["start_s"]) > 0
    cpus = int(local_ray.cluster_resources()["CPU"])  # 'auto': as many at once as the fixture's Ray has CPUs
    assert lines[1]["slots"] == str(cpus) and (lines[1]["gap_s"] == "-" if cpus > 1 else float(lines[1]["gap_s"]) > 0)

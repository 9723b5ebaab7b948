"""Sweeps on a real local Ray: rows reach Parquet with every column, failures become rows,
bad spaces are refused before anything runs, and an interrupted sweep resumes without loss or duplicates."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds
import pytest

from crossover import schema
from crossover.sweeps.cluster import node_cpus
from crossover.sweeps.space import CPU_NODE, Space, groups, resources_for

ROOT = Path(__file__).resolve().parent.parent
TINY = {"disc": {"depth": [2, 3], "epochs": [3]}, "peaks": {"dataset_size": [100], "epochs": [5]}}


def run(space, out):
    from crossover.sweeps import runner

    return runner.run(space, out, log=lambda line: None)


def test_a_sweep_writes_one_row_per_trial_with_every_column(local_ray, tmp_path):
    store = run(Space("tiny", TINY, ("cpu",), cpu_threads=2, repeats=2), tmp_path)
    rows = pd.read_parquet(tmp_path / "tiny")
    assert list(rows.columns) == schema.NAMES
    assert len(rows) == 6 and rows["config_hash"].is_unique
    assert set(rows["status"]) == {"ok"}
    assert sorted(rows["seed"]) == [0, 0, 0, 1, 1, 1]
    measured = [c for c in schema.NAMES if c not in ("error", "test_loss", "test_accuracy", "train_accuracy",
                                                      "peak_gpu_bytes", "width", "cuda_version", "micro_batches",
                                                      "compile_s", "fused_group", "context", "gpu_ids",
                                                      # a built-in's: no own axes, accuracy its metric, costs counted
                                                      "workload_params", "train_metric", "test_metric", "costs_note",
                                                      # null where this host has no counter (energy_note says why)
                                                      "gpu_energy_j", "cpu_energy_j", "energy_note",
                                                      # null where the workload left torch's threads alone
                                                      "threads_note",
                                                      # null but on a ddp trial's row; null for a built-in workload
                                                      "rank_node_ids", "workload_path")]
    assert not rows[measured].isna().any().any(), rows[measured].isna().sum()
    assert (rows["cpus_requested"] == 2).all() and (rows["torch_threads"] == 2).all()
    assert 1 <= rows["cold_start"].sum() < len(rows)  # a reused worker's first trial is cold, the next ones not
    assert (rows["host_cpus"] == os.cpu_count()).all() and (rows["other_cpu_s"] >= -0.1).all()
    assert (rows["sweep"] == "tiny").all() and (rows["schema_version"] == schema.SCHEMA_VERSION).all()
    # the same directory is one dataset for pyarrow and DuckDB too
    assert ds.dataset(store.dir, format="parquet").count_rows() == 6
    duckdb = pytest.importorskip("duckdb")
    assert duckdb.sql(f"select count(*) from '{store.dir}/*.parquet'").fetchall()[0][0] == 6


def test_a_second_run_measures_only_what_is_missing(local_ray, tmp_path):
    run(Space("again", {"disc": {"depth": [2], "epochs": [3]}}, ("cpu",)), tmp_path)
    first = pd.read_parquet(tmp_path / "again")
    run(Space("again", {"disc": {"depth": [2, 3], "epochs": [3]}}, ("cpu",)), tmp_path)
    second = pd.read_parquet(tmp_path / "again")
    assert len(second) == 2 and second["config_hash"].is_unique
    kept = second.set_index("config_hash").loc[first["config_hash"], "trial_id"]
    assert list(kept) == list(first["trial_id"])  # the measured row was not re-measured


def test_a_failing_trial_becomes_a_failed_row_and_the_sweep_goes_on(local_ray, tmp_path):
    # Ray's accounting has a GPU, this machine has no CUDA: the 'cuda' trial fails on its node
    run(Space("fails", {"disc": {"depth": [2], "epochs": [3]}}, ("cpu", "cuda")), tmp_path)
    rows = pd.read_parquet(tmp_path / "fails").set_index("device")
    assert rows.loc["cpu", "status"] == "ok"
    assert rows.loc["cuda", "status"] == "error"
    assert "CUDA not available on node" in rows.loc["cuda", "error"]
    assert rows.loc["cuda", "depth"] == 2 and rows.loc["cuda", "gpus_requested"] == 1


@pytest.mark.parametrize("grids, devices, words", [
    ({"disc": {"width": [8, 0]}}, ("cpu",), "width must be an integer >= 1, got 0 (sweep 'bad', workload 'disc', axis width)"),
    ({"nope": {}}, ("cpu",), "workload must be one of"),
    ({"disc": {}}, ("cpu", "tpu"), "device must be one of the forms ['cpu', 'cuda', 'cuda/K', 'ddp:N', 'ddp-cpu:N', 'pipe:N'], got 'tpu' "
     "(sweep 'bad', axis device)"),
    ({"disc": {"batch_size": [5000]}}, ("cpu",), "batch_size must be <= dataset_size (1000), got 5000"),
    ({"disc": {"colour": [1]}}, ("cpu",), "axis must be one of"),
    ({"disc": {"depth": []}}, ("cpu",), "depth needs a non-empty list"),
])
def test_a_bad_space_is_refused_before_anything_runs(grids, devices, words, tmp_path):
    with pytest.raises(ValueError) as info:
        Space("bad", grids, devices).expand()
    assert words in str(info.value)
    assert not (tmp_path / "bad").exists()


def test_a_one_epoch_trial_is_swept_without_a_warm_up_epoch_unless_the_sweep_sets_one():
    # a Workload whose defaults say epochs: 1 was refused: its one epoch was TrialConfig's warm-up
    trials = Space("one", {"disc": {"depth": [2], "epochs": [1, 3]}}, ("cpu",)).expand()
    assert sorted((t.cfg.epochs, t.cfg.warmup_epochs) for t in trials) == [(1, 0), (3, 1)]
    with pytest.raises(ValueError, match=r"axis warmup_epochs\)$"):  # set by the sweep: kept, and refused as ever
        Space("one", {"disc": {"epochs": [1]}}, ("cpu",), fixed={"warmup_epochs": 1}).expand()


@pytest.mark.parametrize("depths, more", [([2, 3, 4], 0), ([2, 3, 4, 5], 1)], ids=["three", "four"])
def test_failures_past_the_third_are_said_to_be_more_once_and_only_when_there_are_more(local_ray, tmp_path, depths,
                                                                                       more):
    from crossover.sweeps import runner

    said = []  # Ray's accounting has a GPU, this machine has no CUDA: every 'cuda' trial fails
    runner.run(Space("fails", {"disc": {"depth": depths, "epochs": [3]}}, ("cuda",)), tmp_path, log=said.append,
               progress=True)
    assert sum(": FAILED " in line for line in said) == 3, said
    assert sum(line.startswith("more failures") for line in said) == more, said


def test_each_grid_point_carries_the_resources_of_its_device():
    space = Space("r", {"disc": {}}, ("cpu", "cuda"), cpu_threads=4)
    points = space.param_space(groups(space.expand(), "off"))["group"]["grid_search"]
    requests = {p["trials"][0]["device"]: resources_for({"group": p}) for p in points}
    assert requests == {"cpu": {"cpu": 4, "gpu": 0}, "cuda": {"cpu": 1, "gpu": 1.0}}
    marked = Space("r", {"disc": {}}, ("cpu", "cuda"), cpu_threads=4, cpu_nodes_only=True)
    assert [marked.request(t) for t in marked.expand()] == [{"cpu": 4, "gpu": 0, CPU_NODE: 0.001},
                                                            {"cpu": 1, "gpu": 1.0}]


@pytest.mark.parametrize("cpus, owned", [(2, 2), (3, 3), (4, 3), (8, 7), (15, 14), (16, 14), (64, 62)])
def test_a_cpu_trial_leaves_rays_processes_room_on_a_larger_node(cpus, owned):
    assert node_cpus([{"CPU": cpus}]) == owned
    # with marked CPU nodes, the CPU trial sizes itself to them, not to a larger GPU node
    assert node_cpus([{"CPU": cpus, CPU_NODE: 1}, {"CPU": 2 * cpus, "GPU": 1}]) == owned


@pytest.mark.slow
def test_killed_sweep_resumes_without_losing_or_duplicating_rows(tmp_path):
    cmd = [sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workloads", "disc", "--devices", "cpu", "--grid",
           "full", "--out", str(tmp_path), "--name", "killed", "--max-concurrent", "1", "--repeats", "1"]
    out = tmp_path / "killed"
    proc = subprocess.Popen(cmd, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(list(out.glob("*.parquet"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its local Ray, mid-sweep
    proc.wait()
    before = pd.read_parquet(out)
    assert 3 <= len(before) < 11, "the sweep should have been cut mid-way"

    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{len(before)} already measured" in done.stdout
    after = pd.read_parquet(out)
    assert len(after) == 11 and after["config_hash"].is_unique  # disc depths 2..12, once each
    assert sorted(after["depth"]) == list(range(2, 13))
    kept = after.set_index("config_hash").loc[before["config_hash"], "finished_at"]
    assert list(kept) == list(before["finished_at"])  # rows written before the kill are untouched
    assert not list(out.glob(".*.tmp"))


@pytest.mark.slow
def test_the_end_of_a_sweep_fits_one_screen_answer_first_and_verbose_shows_every_table(tmp_path):
    # what counts is the whole run's stdout; the progress line is on stderr. --out . : the paths printed are
    # the user's to choose, and this test's own are long
    cmd = [sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workloads", "disc", "--smoke", "--devices", "cpu",
           "--out", ".", "--no-report"]
    done = subprocess.run(cmd + ["--repeats", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) <= 25 and max(map(len, lines)) <= 100, done.stdout
    assert lines[0].startswith("sweep 'smoke': 2 trials")  # what it runs, then at the end the answer first
    assert lines[1].startswith("Where the GPU trains faster than the CPU") and lines[2].startswith("  disc  ")
    # what the sweep costs as `crossover decide` names it: the GPU to rent, the box to buy, your CPU
    for pick in ("rent, fastest: ", "rent, cheapest: ", "buy: ", "your CPU: "):
        assert sum(line.startswith(pick) for line in lines) == 1, (pick, done.stdout)
    assert lines[-1] == "report: not written (--no-report); crossover report smoke writes it"
    assert "ms/epoch" not in done.stdout and "median time per epoch" not in done.stdout  # no line per trial, no table
    said = done.stdout + done.stderr
    for noise in ("Configuration for experiment", "View detailed results", "Started a local Ray instance"):
        assert noise not in said, noise
    assert "sweep 'smoke': 2/2 trials done" in done.stderr  # the one progress line, redrawn

    verbose = subprocess.run(cmd + ["--repeats", "2", "--verbose"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert sum("ms/epoch" in line for line in verbose.stdout.splitlines()) == 2  # a line per trial run (seed 1)
    for table in ("== disc: median time per epoch, ms ==", "== the sweep:", "how each option is costed:"):
        assert table in verbose.stdout, table
    assert "trials done" not in verbose.stderr


@pytest.mark.slow
def test_a_cluster_address_left_behind_by_a_stopped_cluster_is_not_joined(tmp_path):
    # Ray records the last cluster it started in RAY_TMPDIR/ray/ray_current_cluster and, given no address, joins
    # it; a stopped cluster leaves the file behind. The sweep starts its own local Ray instead of waiting on it.
    ray_tmp = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: Ray's socket paths live under it
    (ray_tmp / "ray").mkdir()
    (ray_tmp / "ray" / "ray_current_cluster").write_text("192.0.2.1:6379")  # TEST-NET: nothing answers there
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"RAY_TMPDIR": str(ray_tmp),
                                                                          "TMPDIR": str(ray_tmp)}
    cmd = [sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workloads", "disc", "--smoke", "--devices", "cpu",
           "--repeats", "1", "--out", str(tmp_path), "--no-report"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
        # the Ray it started is gone, its session folder too; asked to, the next run keeps its own under OUT/_ray/
        left = sorted(p.name for p in (ray_tmp / "ray").iterdir())
        windows = list(ray_tmp.glob("crossover-windows-*/*"))  # the sweep's records of its trials' timed windows
        kept = subprocess.run(cmd + ["--keep-ray-session"], capture_output=True, text=True, timeout=240, env=env)
        left_kept = sorted(p.name for p in (ray_tmp / "ray").iterdir())
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (pd.read_parquet(tmp_path / "smoke")["status"] == "ok").all()
    # Ray's link session_latest is Ray's own: another driver may be reading it
    assert not [name for name in left if name.startswith("session_2")] and not windows, (left, windows)
    assert kept.returncode == 0 and not [name for name in left_kept if name.startswith("session_2")], left_kept
    assert len(list((tmp_path / "_ray").glob("session_*/logs"))) == 1
    assert all(log.stat().st_size for log in tmp_path.glob("_logs/*")), list(tmp_path.glob("_logs/*"))


def _worker_dies(ray):
    """A task whose worker exits outright, as a segfault in a trial would: Ray's raylet then tells the driver "A worker
    died or was killed ..." (not retried, so once)."""
    @ray.remote(max_retries=0)
    def die():
        os._exit(1)

    with pytest.raises(ray.exceptions.WorkerCrashedError):
        ray.get(die.remote())


def _heard(read, words: str) -> str:
    """What `read` returns once it holds `words`: Ray's driver hears the raylet a moment after the worker died."""
    said = ""
    for _ in range(600):
        said += read()
        if words in said:
            break
        time.sleep(0.1)
    return said


def test_a_dead_workers_raylet_line_goes_to_the_runs_log_not_the_terminal_and_after_it_ray_prints_it(local_ray,
                                                                                                     tmp_path, capfd):
    from crossover.sweeps.runner import tune_log

    log = tmp_path / "_logs" / "run.log"
    died = "A worker died or was killed"
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C mid-run
        with tune_log(log):
            _worker_dies(local_ray)
            assert died in _heard(lambda: log.read_text() if log.exists() else "", died)
            raise KeyboardInterrupt
    assert died not in capfd.readouterr().out
    # one line, as the run's log has Tune's: its time, then level and logger
    said = [line.split(" ", 2)[2] for line in log.read_text().splitlines() if died in line]
    assert len(said) == 1 and said[0].startswith(f"ERROR ray.raylet: {died}"), said
    # the run over, Ctrl-C and all: Ray's own lines are Ray's again, on the terminal, and the run's log has no more
    _worker_dies(local_ray)
    assert died in _heard(lambda: capfd.readouterr().out, died)
    assert log.read_text().count(died) == 1


# A job whose trial waits, inside its sweep's claim, for the test to open GATE: its sweep runs as long as the test
# needs, whatever the host's speed. Only in Ray's worker: planning and probing it (processes without Ray) go on.
GATED = """
import os, time
import ray
import torch
from torch import nn
from crossover import Data, Workload

def data(cfg):
    while ray.is_initialized() and not os.path.exists(os.environ["GATE"]):
        time.sleep(0.05)
    x = torch.randn(cfg.dataset_size, 4, generator=torch.Generator().manual_seed(cfg.seed))
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")

workload = Workload("gated", make_data=data, make_model=lambda cfg: nn.Linear(4, 2), make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
                    defaults={"batch_size": 16, "dataset_size": 32, "epochs": 2},
                    grids={"default": {"dataset_size": [32], "epochs": [2]}})
"""


@pytest.mark.slow
def test_two_sweeps_at_once_on_one_machine_leave_each_others_files_alone(tmp_path):
    # the first sweep's trial holds on (GATED) while a second sweep runs from start to end beside it: the second's
    # end removes its own Ray session and window records, and not the first's, nor Ray's link session_latest
    tmp = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: Ray's socket paths live under it
    (tmp_path / "gated.py").write_text(GATED)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {
        "RAY_TMPDIR": str(tmp), "TMPDIR": str(tmp), "GATE": str(tmp_path / "open")}
    registry = tmp / f"crossover-windows-{os.getuid()}"
    sweep = [sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--devices", "cpu", "--repeats", "1", "--no-report"]
    gated = ["--workload", f"{tmp_path / 'gated.py'}:workload", "--grid", "full", "--out", str(tmp_path / "a")]
    first = subprocess.Popen(sweep + gated, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # Ray's start and the planning of the job, however loaded the host
        while not list(registry.glob("sweep-*/*.json")) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        held = {p: p.read_bytes() for p in registry.glob("sweep-*/*.json")}  # the first sweep's trial's claim
        sessions = {p.name for p in (tmp / "ray").glob("session_2*")}
        second = subprocess.run(sweep + ["--workloads", "disc", "--smoke", "--out", str(tmp_path / "b")], env=env,
                                capture_output=True, text=True, timeout=300)
        running = first.poll() is None
        kept = {p: p.exists() and p.read_bytes() == text for p, text in held.items()}
        sessions_kept = {p.name for p in (tmp / "ray").glob("session_2*")}
        latest = (tmp / "ray" / "session_latest").is_symlink()
        (tmp_path / "open").touch()
        out, err = first.communicate(timeout=300)
        left = sorted(p.relative_to(tmp) for p in registry.rglob("*")), sorted((tmp / "ray").glob("session_2*"))
    finally:
        first.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    assert held and len(sessions) == 1, (held, sessions, first.poll(), first.stderr and first.stderr.read())
    assert second.returncode == 0, second.stderr[-3000:]
    assert running and all(kept.values()) and sessions <= sessions_kept and latest, (running, kept, sessions_kept)
    assert first.returncode == 0, err[-3000:]
    for out_folder, name in ((tmp_path / "a", "gated"), (tmp_path / "b", "smoke")):
        rows = pd.read_parquet(out_folder / name)
        assert len(rows) >= 1 and (rows["status"] == "ok").all(), rows[["status", "error"]].to_string()
    assert left == ([], []), left  # each sweep's end removed its own: nothing of either is left

"""Reliability, each case planted for real: what can never run is refused by name before anything runs,
what dies while running becomes a row, and Ctrl-C leaves with 130 and the way to resume (SIGTERM and
SIGHUP the same, with 143 and 129).

    python -m pytest tests/test_reliability.py

Every refusal names the field or flag and the fix; no measured row is lost, duplicated or rewritten.
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crossover.sweeps.space import Space, groups
from crossover.config import MAXIMA, ConfigError, TrialConfig
from crossover.trainables.trial import resolve

ROOT = Path(__file__).resolve().parent.parent
SCALING = [sys.executable, str(ROOT / "sweeps" / "scaling.py")]


# --- sizes with no sane bound, refused at config time -------------------------------------------

@pytest.mark.parametrize("cfg, field, words", [
    (TrialConfig("tabular", width=10**9), "width", "width must be <= 1,000,000, got 1,000,000,000"),
    (TrialConfig("tabular", dataset_size=10**12), "dataset_size", "dataset_size must be <= 1,000,000,000"),
    (TrialConfig("tabular", epochs=10**9), "epochs", "epochs must be <= 1,000,000"),
    (TrialConfig("disc", depth=10**4), "depth", "depth must be <= 1,000"),
    (TrialConfig("tabular", lr=float("inf")), "lr", "lr must be a finite number > 0, got inf"),
    (TrialConfig("tabular", lr=float("nan")), "lr", "lr must be a finite number > 0, got nan"),
    (TrialConfig("peaks", dataset_size=0), "dataset_size", "dataset_size must be an integer >= 1, got 0"),
    (TrialConfig("disc", device="ddp:0"), "device", "device 'ddp:0': the count must be >= 1, e.g. 'ddp:1'"),
    (TrialConfig("disc", device="cpu/2"), "device", "'cpu' takes no count"),
])
def test_a_size_past_any_machine_is_refused_naming_the_field(cfg, field, words):
    with pytest.raises(ConfigError) as info:
        resolve(cfg)
    assert info.value.field == field and words in str(info.value)
    if field == "device" and "ddp" in words:
        assert "cpu" not in str(info.value)


def test_numpy_integers_are_counts_and_resolve_to_plain_ints():
    trial = resolve(TrialConfig("disc", depth=np.int64(4), epochs=np.int32(3)))
    assert trial.cfg.depth == 4 and type(trial.cfg.depth) is int and type(trial.cfg.epochs) is int
    assert trial.hash == resolve(TrialConfig("disc", depth=4, epochs=3)).hash
    assert all(MAXIMA[k] >= 1 for k in MAXIMA)


@pytest.mark.slow
def test_a_bad_workload_or_axis_is_refused_before_ray_starts(tmp_path):
    for flags, words in [(["--workloads", "nope"], "--workloads: unknown ['nope']"),
                         (["--workloads", "disc", "--devices", "tpu"], "device must be one of the forms")]:
        done = subprocess.run(SCALING + flags + ["--out", str(tmp_path)], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "RAY_ADDRESS": ""})
        assert done.returncode == 2 and words in done.stderr, done.stderr[-2000:]
        assert "Ray" not in done.stdout + done.stderr  # no Ray was started: nothing of it printed
    assert list(tmp_path.iterdir()) == []


# --- requests the cluster can never place, refused before trials start ----------------------------

NODE_2CPU = {"CPU": 2.0, "memory": 16 * 2**30, "object_store_memory": 4 * 2**30}


def problems(devices, cpu_threads, grids=None, nodes=(NODE_2CPU,)):
    from crossover.sweeps import placeable

    space = Space("s", grids or {"disc": {"depth": [2]}}, devices, cpu_threads=cpu_threads)
    try:
        placeable.check_placeable(space, groups(space.expand(), "off"), list(nodes))
    except ValueError as exc:
        return str(exc)
    return None


def test_ray_train_workers_and_the_trial_itself_are_counted_against_the_cores():
    # Ray Train 2.60: N worker bundles of --cpu-threads/N CPUs (1 at least) + the Tune trial's 0.25;
    # its controller actor asks for none
    assert "needs {'CPU': 2.25} at once (2 Ray Train workers of {'CPU': 1}" in problems(("ddp-cpu:2",), 2)
    assert "ddp-cpu:N with N + 0.25 <= the CPUs" in problems(("ddp-cpu:2",), 2)
    # ddp-cpu:1 at the default --cpu-threads (every core) cannot fit beside its trial: the fix names the flag
    assert "give --cpu-threads fewer than the CPUs there are" in problems(("ddp-cpu:1",), 2)
    assert problems(("ddp-cpu:1",), 1) is None
    two_nodes = (NODE_2CPU, NODE_2CPU)  # the workers' placement group packs across nodes where it must
    assert problems(("ddp-cpu:2",), 2, nodes=two_nodes) is None
    assert "asks Ray for {'CPU': 3} in one place" in problems(("ddp-cpu:2",), 6, nodes=two_nodes)


@pytest.mark.parametrize("flag, value, low", [("--max-failures", "-1", 0), ("--cpu-threads", "0", 1),
                                               ("--max-concurrent", "0", 1), ("--repeats", "0", 1)])
@pytest.mark.slow
def test_counts_that_would_mean_no_limit_or_for_ever_are_refused_by_flag(flag, value, low):
    # --max-failures -1 was Tune's 'retry for ever'; --cpu-threads 0 and --max-concurrent 0, 'no limit'
    done = subprocess.run(SCALING + [flag, value], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and f"argument {flag}: must be an integer >= {low}, got '{value}'" in done.stderr


@pytest.mark.slow
def test_a_storage_path_that_cannot_be_written_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    done = subprocess.run(SCALING + ["--smoke", "--devices", "cpu", "--out", str(tmp_path), "--storage-path",
                                     str(tmp_path / "file" / "tune")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"--storage-path {tmp_path / 'file' / 'tune'} cannot hold Tune's state (" in done.stderr
    assert "give a folder you can write" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "smoke").exists() or not list((tmp_path / "smoke").glob("*.parquet"))


def test_more_threads_than_the_largest_node_or_a_gpu_it_lacks_is_refused_by_flag():
    assert "device 'cpu' (--devices) in sweep 's' asks Ray for {'CPU': 4} in one place, and no node has that " \
           "much: give --cpu-threads at most the CPUs of the largest node" in problems(("cpu",), 4)
    assert "device 'cuda' (--devices)" in problems(("cuda",), 1) and "--cluster-config" in problems(("cuda",), 1)
    autoscaled = (NODE_2CPU, {"CPU": 4, "GPU": 1})  # a node type the autoscaler may add: it waits, not refused
    assert problems(("cuda", "cpu"), 4, nodes=autoscaled) is None


def test_a_size_no_node_has_memory_for_is_refused_naming_the_sizes():
    message = problems(("cpu",), 1, {"tabular": {"dataset_size": [900_000_000]}})
    assert "(workload=tabular device=cpu depth=2 width=64 batch_size=64 dataset_size=900000000 seed=0) needs " \
           "at least 75.4 GiB" in message and "20.0 GiB of the largest node" in message
    assert "give it smaller sizes" in message
    assert "needs more than 2^63 bytes" in problems(("cpu",), 1, {"disc": {"depth": [40]}})
    assert problems(("cpu",), 1, {"disc": {"depth": [40]}}, nodes=({"CPU": 2},)) is None  # memory unknown


@pytest.mark.parametrize("flags, words", [
    (["--devices", "ddp-cpu:2", "--cpu-threads", "2"], "needs {'CPU': 2.25} at once"),
    (["--devices", "cpu", "--cpu-threads", "4"], "asks Ray for {'CPU': 4} in one place"),
])
def test_the_sweep_refuses_what_this_machine_can_never_place(local_ray, tmp_path, capsys, flags, words):
    from crossover.sweeps import scaling

    assert scaling.main(["--smoke", "--workloads", "disc", "--out", str(tmp_path), "--no-report"] + flags) == 2
    assert words in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing written


def test_a_sweep_whose_trials_all_wait_says_what_they_wait_for_and_runs_once_freed(local_ray, tmp_path, monkeypatch):
    from crossover.sweeps import runner, store

    monkeypatch.setattr(store, "WAIT_NOTE_S", 0.5)  # the note's interval, not what it says
    go = tmp_path / "go"

    @local_ray.remote(num_cpus=local_ray.cluster_resources()["CPU"])
    def hold(path, guard_s=120):  # another job's task, holding every CPU of this Ray until told to go
        deadline = time.monotonic() + guard_s  # a guard against a hang: the assertions say what went wrong
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)

    held = hold.remote(str(go))
    while local_ray.available_resources().get("CPU", 0) > 0:  # until it holds them
        time.sleep(0.05)
    lines = []

    def log(line):
        lines.append(line)
        if "waiting for resources" in line:
            go.touch()

    written = runner.run(Space("waits", {"disc": {"depth": [2], "epochs": [2]}}, ("cpu",), cpu_threads=1),
                         tmp_path, log=log)
    local_ray.get(held)
    waiting = [line for line in lines if "waiting for resources" in line]
    assert waiting and "1 trials pending, the next asks for {'cpu': 1, 'gpu': 0}" in waiting[0]
    assert "free now {" in waiting[0]
    rows = pd.read_parquet(written.dir)
    assert len(rows) == 1 and (rows["status"] == "ok").all()  # freed, the trial ran


# --- what dies while running is a row ---------------------------------------------------------------

@pytest.mark.slow
def test_a_trial_killed_by_rays_memory_monitor_is_an_error_row_headed_by_the_reason(tmp_path):
    # Ray's memory monitor, told that any use is too much, kills the trial's worker; with no retry
    # left (--max-failures 0) the driver writes its row and the sweep goes on to the end: with no ok row, status 1
    cmd = SCALING + ["--smoke", "--workloads", "peaks", "--devices", "cpu", "--repeats", "1", "--max-failures", "0",
                     "--out", str(tmp_path), "--no-report", "--cpu-threads", "1"]
    env = {**os.environ, "RAY_memory_usage_threshold": "0.001", "RAY_memory_monitor_refresh_ms": "50",
           "RAY_ADDRESS": ""}
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 1 and "error: every trial failed, none was measured" in done.stderr, done.stderr[-3000:]
    rows = pd.read_parquet(tmp_path / "smoke")
    assert len(rows) == 2 and set(rows["status"]) == {"error"} and rows["config_hash"].is_unique
    assert sorted(rows["dataset_size"]) == [100, 400]  # the sizes, in the row
    headline = rows["error"].str.split("\n").str[0]
    assert headline.str.contains("killed due to the node running low on memory").all(), headline.tolist()
    said = " ".join(done.stdout.split())  # a failure's line is wrapped at 100 columns (sweeps/store.py SAID_WIDTH)
    assert "FAILED Failure #" not in said, done.stdout
    assert "killed due to the node running low on memory" in said, done.stdout  # 'N worker(s) were' or 'Task was'


# A sweep of three tabular trials, one at a time: the second trains for about 22 s on 2 cores (2.2 s an epoch,
# 2026-11-28), past the several seconds the pressure below takes to build beside a CPU burner (100,000 samples
# trained in 5 s there and finished before it did)
OOM_SWEEP = """
import sys
from crossover.sweeps import cluster, runner
from crossover.sweeps.space import Space

cluster.connect(None)
space = Space("oom", {"tabular": {"dataset_size": [1000, 400000, 2000], "epochs": [10]}}, ("cpu",), cpu_threads=1)
runner.run(space, sys.argv[1], max_concurrent=1)
"""
# Memory the test itself takes, 256 MiB at a time, until it is killed: the node's pressure, from outside Ray.
PRESSURE = """
import sys, time
import numpy as np
held = []
while len(held) * 2**28 < int(sys.argv[1]):
    held.append(np.ones(2**28, dtype=np.uint8))  # written, so resident
    time.sleep(0.1)
time.sleep(600)
"""
MARGIN = 3 * 2**30  # above the node's use before the sweep: its Ray, driver and trial worker took about 1 GiB


@pytest.mark.slow
def test_a_trial_killed_by_rays_memory_monitor_mid_training_is_an_error_row_and_the_sweep_goes_on(tmp_path):
    # Ray's memory monitor kills a worker in the middle of a trial's training: Tune 2.60 gets
    # OutOfMemoryError from the trial's task, which it does not handle ("RuntimeError: Caught unexpected
    # exception"). The kill threshold is set MARGIN above the node's use now, as Ray counts it (the
    # cgroup where there is one), so it does not depend on the host's memory; once the first trial has
    # its row (the second runs on the same, reused worker: it is training, its worker long started),
    # the test fills memory until Ray kills that worker.
    from ray._private.utils import get_system_memory, get_used_memory

    threshold = (get_used_memory() + MARGIN) / get_system_memory()
    env = {**os.environ, "RAY_memory_usage_threshold": f"{threshold:.4f}", "RAY_memory_monitor_refresh_ms": "50",
           "RAY_ADDRESS": ""}
    out = tmp_path / "oom"
    sweep = subprocess.Popen([sys.executable, "-c", OOM_SWEEP, str(tmp_path)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    pressure = None
    try:
        deadline = time.monotonic() + 240  # a guard against a hang, not a measurement
        while not list(out.glob("*.parquet")) and time.monotonic() < deadline and sweep.poll() is None:
            time.sleep(0.05)
        pressure = subprocess.Popen([sys.executable, "-c", PRESSURE, str(MARGIN + 2**30)])
        while len(list(out.glob("*.parquet"))) < 2 and time.monotonic() < deadline and sweep.poll() is None:
            time.sleep(0.05)
        pressure.kill()  # before the third trial's new worker starts (seconds: its imports)
        stdout, stderr = sweep.communicate(timeout=240)
    finally:
        for proc in (pressure, sweep):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert sweep.returncode == 0, stdout[-2000:] + stderr[-3000:]
    assert "Caught unexpected exception" not in stderr
    rows = pd.read_parquet(out).set_index("dataset_size")
    assert sorted(rows.index) == [1000, 2000, 400000] and rows["config_hash"].is_unique  # one row each
    assert list(rows.loc[[1000, 2000], "status"]) == ["ok", "ok"]  # the trial after it ran
    killed = rows.loc[400000]
    assert killed["status"] == "error" and killed["workload"] == "tabular"  # its sizes in the row
    assert killed["error"].startswith("1 worker(s) were killed due to the node running low on memory")
    said = " ".join(stdout.split())  # a failure's line is wrapped at 100 columns (sweeps/store.py SAID_WIDTH)
    assert "dataset_size=400000: FAILED 1 worker(s) were killed due to the node running low on memory" in said


# The disc grid one trial at a time: 11 rows, about 30 s on 2 cores.
DISC = SCALING + ["--workloads", "disc", "--grid", "full", "--devices", "cpu", "--cpu-threads", "1", "--max-concurrent",
                  "1", "--repeats", "1", "--no-report", "--no-reference"]


def _trial_workers(session: int) -> list[int]:
    """Pids of the Tune trial workers (Ray names them by their class, trainables/trainable.py TrialWorker:
    ray::TrialWorker...) in the process session `session`."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.getsid(int(entry.name)) == session and \
                    (entry / "cmdline").read_bytes().startswith(b"ray::TrialWorker"):
                pids.append(int(entry.name))
        except OSError:  # gone meanwhile
            pass
    return pids


@pytest.mark.slow
def test_a_trial_worker_the_kernel_kills_costs_a_rerun_not_the_sweep(tmp_path):
    # The kernel's OOM killer sends SIGKILL, and names nothing. Here the sweep's reused trial worker is
    # killed up to three times, each once another row has come: in a trial's training or between two trials,
    # as it falls. Every trial still ends with exactly one row, measured. On a fast machine the last trials
    # can end between two looks for a worker, so the sweep may finish after one or two kills: one is enough
    # to show a kill costs a rerun, not the sweep.
    out = tmp_path / "killed"
    proc = subprocess.Popen(DISC + ["--out", str(tmp_path), "--name", "killed"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env={**os.environ, "RAY_ADDRESS": ""})
    kills = 0
    try:
        deadline = time.monotonic() + 240  # a guard against a hang, not a measurement
        while kills < 3 and time.monotonic() < deadline and proc.poll() is None:
            if len(list(out.glob("*.parquet"))) > 2 * kills and (workers := _trial_workers(proc.pid)):
                for pid in workers:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                kills += 1
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert kills >= 1 and proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
    rows = pd.read_parquet(out)
    assert len(rows) == 11 and rows["config_hash"].is_unique
    assert set(rows["status"]) == {"ok"}, list(rows.loc[rows["status"] != "ok", "error"])


@pytest.mark.slow
def test_a_row_that_cannot_be_written_ends_the_sweep_with_1_naming_the_directory_and_keeps_every_row(tmp_path):
    # Not a full disk: a file-size limit (RLIMIT_FSIZE) put on the running driver alone (prlimit; Ray's
    # processes, started before, keep theirs) once it has written 3 rows, with SIGXFSZ ignored, so that
    # its next write fails with EFBIG where a full disk gives ENOSPC and a quota EDQUOT: the same OSError,
    # raised in the same write.
    import resource

    out = tmp_path / "full"
    cmd = DISC + ["--out", str(tmp_path), "--name", "full"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "RAY_ADDRESS": ""},
                            preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 240  # a guard against a hang, not a measurement
        while len(list(out.glob("*.parquet"))) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))  # a row is ~20 KB
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, stdout[-2000:] + stderr[-3000:]
    before = pd.read_parquet(out)  # every file a whole row: none half-written, no temporary file left
    assert 3 <= len(before) < 11 and set(before["status"]) == {"ok"}
    assert [p.name for p in out.iterdir() if p.suffix != ".parquet"] == []  # rows alone
    # The limit stops the driver's next write: the next row (sweeps/store.py) or, on some hosts first, the
    # state Tune saves between trials (sweeps/runner.py). Either way the project's own message names what
    # it could not write, and the rows kept in the directory are those read back above.
    said = re.search(r"^error: cannot write (.+) \(File too large, EFBIG\): the (\d+) rows in (.+) are kept", stderr,
                     re.MULTILINE)
    assert said, stderr[-3000:]
    assert said[1] in (f"the row of disc cpu to {out}", f"Tune's state to {tmp_path / '_tune'}"), said[0]
    assert (int(said[2]), said[3]) == (len(before), str(out)), said[0]
    assert "free space on that disk" in stderr and "run the same command again" in stderr
    assert "Traceback" not in stdout + stderr and "TuneError" not in stdout + stderr

    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=240,
                           env={**os.environ, "RAY_ADDRESS": ""})
    assert again.returncode == 0 and f"{len(before)} already measured" in again.stdout, again.stderr[-2000:]
    after = pd.read_parquet(out)
    assert len(after) == 11 and after["config_hash"].is_unique
    kept = after.set_index("config_hash").loc[before["config_hash"], "finished_at"]
    assert list(kept) == list(before["finished_at"])


def test_tunes_own_state_that_cannot_be_written_ends_the_sweep_the_same_way(local_ray, tmp_path):
    # The driver under a 1 KiB file-size limit from its start (SIGXFSZ ignored): its lock file fits, the
    # state the Tuner writes as it is made does not. Ray itself is this test's (local_ray), started
    # without the limit: the driver only connects to it (the object store's file alone is GiBs).
    import resource

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))

    address = local_ray.get_runtime_context().gcs_address
    done = subprocess.run(DISC + ["--address", address, "--out", str(tmp_path), "--name", "full"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240, preexec_fn=limited,
                          env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"error: cannot write Tune's state to {tmp_path / '_tune'} (" in done.stderr
    assert f"File too large, EFBIG): the 0 rows in {tmp_path / 'full'} are kept" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("study", ["parity", "overhead"])
@pytest.mark.slow
def test_the_other_studies_end_the_same_way_on_a_full_disk(local_ray, tmp_path, study):
    # studies/parity.py and studies/overhead.py write through the same runner: the same message and status,
    # not the traceback they printed before (the driver under the 1 KiB limit of the test above)
    import resource

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))

    address = local_ray.get_runtime_context().gcs_address
    cmd = [sys.executable, str(ROOT / "studies" / f"{study}.py"), "--smoke", "--address", address, "--out", str(tmp_path)]
    done = subprocess.run(cmd + (["--devices", "cpu", "--cpu-threads", "1"] if study == "parity" else []),
                          cwd=tmp_path, capture_output=True, text=True, timeout=240, preexec_fn=limited,
                          env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"error: cannot write Tune's state to {tmp_path / '_tune'} (" in done.stderr
    assert "are kept" in done.stderr and "Traceback" not in done.stdout + done.stderr


def test_the_headline_of_a_tune_error_file_is_its_reason():
    from crossover.sweeps.store import _reason

    traced = ("Failure # 1 (occurred at 2026-11-22_10-18-00)\nTraceback (most recent call last):\n  File \"x\", "
              "line 1, in f\n    g()\nray.exceptions.ActorDiedError: The actor died unexpectedly\n\tmore")
    assert _reason(traced) == "ray.exceptions.ActorDiedError: The actor died unexpectedly"
    assert _reason("Failure # 1 (occurred at x)\n1 worker(s) were killed\nmore") == "1 worker(s) were killed"
    assert _reason("") == "no reason given in Tune's error file"


# --- Ctrl-C ---------------------------------------------------------------------------------------------

# How a sweep's launcher leaves the signals it inherits: a command typed at a terminal, and one started as
# `(nohup crossover sweep ... &)` (nohup ignores SIGHUP; a background job of a non-interactive shell, SIGINT).
FROM_A_TERMINAL = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL,
                   signal.SIGHUP: signal.SIG_DFL}
UNDER_NOHUP_IN_THE_BACKGROUND = {**FROM_A_TERMINAL, signal.SIGINT: signal.SIG_IGN, signal.SIGHUP: signal.SIG_IGN}


@contextlib.contextmanager
def started(launched):
    """This process's signals as `launched` leaves them, then as they were: what a test of stopping sees must not
    depend on how pytest itself was started."""
    held = {s: signal.signal(s, handler) for s, handler in launched.items()}
    try:
        yield
    finally:
        for s, handler in held.items():
            signal.signal(s, handler)


def as_from_a_terminal():
    """In a sweep's child process, before it execs: the signals as a command typed at a terminal has them (the
    child's Python puts its Ctrl-C handler on a default SIGINT), not as it would inherit them from pytest."""
    for s in FROM_A_TERMINAL:
        signal.signal(s, signal.SIG_DFL)


def sent(stop, wait):
    """A sweep's body that receives `stop` from outside, then works on for `wait` seconds."""
    os.kill(os.getpid(), stop)
    time.sleep(wait)
    return 0


@pytest.mark.slow
def test_ctrl_c_leaves_with_130_says_how_to_resume_and_keeps_every_row(tmp_path):
    cmd = SCALING + ["--workloads", "disc", "--grid", "full", "--devices", "cpu", "--cpu-threads", "1", "--out",
                     str(tmp_path), "--name", "cut", "--max-concurrent", "1", "--repeats", "1"]
    out = tmp_path / "cut"
    proc = subprocess.Popen(cmd, cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "RAY_ADDRESS": ""},
                            preexec_fn=as_from_a_terminal)
    try:
        deadline = time.monotonic() + 240
        while len(list(out.glob("*.parquet"))) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)  # the driver, as Ctrl-C would
        printed, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, printed[-3000:]
    assert "run the same command again to measure the rest" in printed
    assert "Tuner.restore" not in printed and "report:" not in printed and not (tmp_path / "_reports").exists()
    before = pd.read_parquet(out)
    assert 2 <= len(before) < 11 and before["config_hash"].is_unique and set(before["status"]) == {"ok"}

    again = subprocess.run(cmd + ["--no-report"], cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{len(before)} already measured" in again.stdout
    after = pd.read_parquet(out)
    assert len(after) == 11 and after["config_hash"].is_unique
    kept = after.set_index("config_hash").loc[before["config_hash"], "finished_at"]
    assert list(kept) == list(before["finished_at"])


def stopped(cmd: list[str], out: Path, send, wait_s: float) -> tuple[int, str, dict]:
    """A sweep run as `cmd`, as from a terminal, in a process group of its own, and stopped by `send(its pid)` once its
    first row is in `out`: its exit status, what it printed, and every row file there when the signal was sent (name
    -> rows). It must end within `wait_s` of the signal: a guard against a hang, not a measurement."""
    proc = subprocess.Popen(cmd, cwd=out.parent, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "RAY_ADDRESS": ""},
                            preexec_fn=as_from_a_terminal)
    try:
        deadline = time.monotonic() + 240  # a guard against a hang, not a measurement
        while not (kept := sorted(out.glob("*.parquet"))) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        before = {p.name: pd.read_parquet(p) for p in kept}
        assert proc.poll() is None, proc.communicate()[0][-3000:]  # still running: the signal finds trials left
        send(proc.pid)
        printed, _ = proc.communicate(timeout=wait_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, printed, before


def assert_said_and_kept(printed: str, out: Path, before: dict) -> None:
    """The stopped sweep's one line says how many rows it kept and how to go on; each row there before is unchanged."""
    assert "Traceback" not in printed and "Fatal Python error" not in printed, printed[-3000:]
    assert [line for line in printed.splitlines() if "run the same command again" in line] == [
        f"interrupted: the {len(list(out.glob('*.parquet')))} rows in {out} are kept; run the same command again to "
        "measure the rest (configs with an 'ok' row are skipped)"]
    for name, row in before.items():  # still there, whole, unchanged
        assert pd.read_parquet(out / name).equals(row)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.slow
def test_sigterm_and_sighup_stop_a_sweep_as_ctrl_c_does_with_128_plus_the_signal(tmp_path, stop):
    # A scheduler's kill (SIGTERM) or a closed terminal (SIGHUP): before, SIGTERM met absl's failure
    # handler, which Ray puts in the driver ("*** SIGTERM received ***", a stack of addresses, abort: 134)
    cmd = SCALING + ["--workloads", "disc", "--smoke", "--devices", "cpu", "--cpu-threads", "1", "--max-concurrent",
                     "1", "--repeats", "2", "--out", str(tmp_path), "--no-report", "--no-reference"]
    out = tmp_path / "smoke"
    status, printed, before = stopped(cmd, out, lambda pid: os.kill(pid, stop), 120)  # the driver alone
    assert status == 128 + stop, printed[-3000:]
    assert "received" not in printed and "most recent call first" not in printed, printed[-3000:]
    assert_said_and_kept(printed, out, before)
    assert 1 <= len(before) < 4

    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=400,
                           env={**os.environ, "RAY_ADDRESS": ""})
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    after = pd.read_parquet(out)
    assert len(after) == 4 and after["config_hash"].is_unique and set(after["status"]) == {"ok"}


# A job whose every step sleeps: its trials end one at a time, seconds apart, so that a signal finds rows written and
# trials left (the built-ins' smoke trials can all end within one poll)
STEADY = """
import time
import torch
from torch import nn
from crossover import Data, Workload


class Steady(nn.Linear):
    def forward(self, x):
        time.sleep(0.02)
        return super().forward(x)


def data(cfg):
    x = torch.randn(cfg.dataset_size, 4)
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")


workload = Workload("steady", make_data=data, make_model=lambda cfg: Steady(4, 2), make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
                    defaults={"batch_size": 16, "dataset_size": 160, "epochs": 3})
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["SIGTERM", "SIGHUP", "SIGINT"])
@pytest.mark.slow
def test_a_stop_signal_to_the_whole_process_group_ends_the_sweep_in_seconds_with_its_line_and_rows(tmp_path, stop):
    # timeout, systemd and a closing terminal signal the whole group, Ray's GCS and raylet with the driver: before,
    # the driver then waited 60 s for the gone GCS and ended with Ray's "Failed to connect to GCS", status 1
    (tmp_path / "steady.py").write_text(STEADY)
    cmd = SCALING + ["--workload", f"{tmp_path / 'steady.py'}:workload", "--grid", "full", "--devices", "cpu",
                     "--batch-size", "8,16,32,40", "--dataset-size", "160", "--epochs", "3", "--cpu-threads", "1",
                     "--max-concurrent", "1", "--repeats", "2", "--out", str(tmp_path), "--no-report", "--no-reference"]
    out = tmp_path / "steady"
    # the group: the driver, Ray's GCS, raylet, agents and workers; 30 s, where the fault waited 60
    status, printed, before = stopped(cmd, out, lambda pid: os.killpg(pid, stop), 30)
    assert status == 128 + stop and "GCS" not in printed, printed[-3000:]
    assert_said_and_kept(printed, out, before)
    assert 1 <= len(before) < 8


SLOW_SECOND_PLAN = """
import os, time
from pathlib import Path
import torch
from torch import nn
from crossover import Data, Workload

MARK = Path(os.environ["PLAN_MARK"])


def model(cfg):
    # planned twice: its import checked before Ray starts, its sizes once Ray is up; the second waits to be stopped
    if MARK.exists():
        MARK.with_suffix(".second").touch()
        time.sleep(120)
    MARK.touch()
    return nn.Linear(4, 2)


def data(cfg):
    x = torch.randn(cfg.dataset_size, 4)
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")


workload = Workload("planned", make_data=data, make_model=model, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
                    defaults={"batch_size": 16, "dataset_size": 160, "epochs": 3})
"""


@pytest.mark.slow
def test_a_stop_signal_to_the_group_while_a_workload_is_planned_ends_the_sweep_and_leaves_no_plan_log(tmp_path):
    # SIGTERM to the group after Ray started, while the workload's sizes were planned: the driver waited 10 s in Ray's
    # shutdown for the GCS and raylet the signal was stopping, and left the planning process's empty log in TMPDIR
    (tmp_path / "planned.py").write_text(SLOW_SECOND_PLAN)
    # a TMPDIR of its own, short: Ray's socket paths under it must stay within 107 bytes
    temp, mark = Path(tempfile.mkdtemp(prefix="xo-")), tmp_path / "planned.mark"
    cmd = SCALING + ["--workload", f"{tmp_path / 'planned.py'}:workload", "--smoke", "--devices", "cpu",
                     "--out", str(tmp_path), "--no-report", "--no-reference"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "RAY_ADDRESS": "", "TMPDIR": str(temp), "PLAN_MARK": str(mark)},
                            preexec_fn=as_from_a_terminal)
    try:
        deadline = time.monotonic() + 240  # a guard against a hang, not a measurement
        while not mark.with_suffix(".second").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        os.killpg(proc.pid, signal.SIGTERM)
        printed, _ = proc.communicate(timeout=60)  # a guard: the planning process sleeps 120 s
        left = list(temp.glob("crossover-plan-*.log"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
    assert proc.returncode == 128 + signal.SIGTERM and "GCS" not in printed, printed[-3000:]
    assert "interrupted: the rows written so far are kept" in printed, printed[-3000:]
    assert not left, printed[-3000:]


def test_exit_status_is_128_plus_the_stop_signal_and_the_handlers_are_put_back():
    from crossover.sweeps import status

    with started(FROM_A_TERMINAL):
        # 30 s: a guard, never waited for: the handler raises at the next bytecode
        assert status.exit_status(lambda: sent(signal.SIGTERM, 30)) == 143
        assert status.exit_status(lambda: sent(signal.SIGHUP, 30)) == 129
        assert status.exit_status(lambda: sent(signal.SIGINT, 30)) == status.INTERRUPTED == 130
        assert {s: signal.getsignal(s) for s in FROM_A_TERMINAL} == FROM_A_TERMINAL


def test_a_sweep_started_under_nohup_in_the_background_outlives_sighup_and_sigint_and_still_stops_on_sigterm():
    from crossover.sweeps import status

    with started(UNDER_NOHUP_IN_THE_BACKGROUND):
        # 0.2 s: time for a handler, had one been put on the signal, to raise (an ignored signal is discarded at once)
        assert status.exit_status(lambda: sent(signal.SIGHUP, 0.2)) == 0
        assert status.exit_status(lambda: sent(signal.SIGINT, 0.2)) == 0
        assert status.exit_status(lambda: sent(signal.SIGTERM, 30)) == 143
        assert {s: signal.getsignal(s) for s in UNDER_NOHUP_IN_THE_BACKGROUND} == UNDER_NOHUP_IN_THE_BACKGROUND


# --- rows of another schema, or with times that are no measurement ---------------------------------

def test_a_row_of_another_schema_version_is_set_aside_not_taken_as_measured(tmp_path):
    from analysis_rows import row

    from crossover import schema
    from crossover.sweeps.store import Store

    store = Store(tmp_path / "s")
    lines = []
    with store.locked(lines.append):
        store.write({**row("disc", "cpu", [0.01, 0.011]), "config_hash": "a" * 16})
        store.write({**row("disc", "cpu", [0.01, 0.011]), "config_hash": "b" * 16,
                     "schema_version": schema.SCHEMA_VERSION + 1})
        assert store.measured(lines.append) == {"a" * 16}
    assert [p.name for p in store.aside.iterdir()] == ["b" * 16 + ".parquet"]  # kept, not lost, out of the rows' way
    assert "a row of another schema version than this code's" in lines[-1]


def write_rows(directory, rows):
    import pyarrow.parquet as pq

    from crossover import schema

    directory.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(rows):
        pq.write_table(schema.to_table([{**r, "config_hash": f"{i:016x}"}]), directory / f"{i:016x}.parquet")


@pytest.mark.parametrize("median", [float("nan"), 0.0, -0.01, float("inf"), None])
def test_analysis_refuses_an_epoch_time_that_is_no_measurement_naming_the_row(tmp_path, median):
    from analysis_rows import row

    from crossover.analysis.load import read

    write_rows(tmp_path / "d", [row("disc", "cpu", [0.01, 0.011]),
                                {**row("disc", "cuda", [0.01, 0.011]), "epoch_s_median": median, "trial_id": "t_9"}])
    with pytest.raises(ValueError, match=r"1 ok rows with an epoch time that is not a positive, finite number of "
                                         r"seconds, e\.g\. epoch_s_median=.* in sweep .*, trial t_9, config "
                                         r"0000000000000001 \(disc cuda .*\) in .*: move that file out"):
        read(tmp_path / "d")


@pytest.mark.parametrize("column, value, words", [
    ("epoch_s", [0.01, float("nan"), 0.011], "an epoch time that is not a positive, finite number of seconds, "
                                              "e.g. epoch_s=[0.01, nan, 0.011]"),
    ("epoch_s", [0.01, -0.02, 0.011], "an epoch time that is not a positive, finite number of seconds"),
    ("total_s", -3.0, "a trial time that is not a positive, finite number of seconds, e.g. total_s=-3.0"),
    ("samples_per_s", float("inf"), "a throughput that is not a positive, finite number of samples a second"),
])
def test_analysis_refuses_any_time_or_throughput_it_computes_with_that_is_no_measurement(tmp_path, column, value, words):
    # one NaN among a row's epochs turned a crossover's verdict into "within noise"; a negative total_s
    # gave a negative cost per trial, an infinite throughput a cost per million samples of 0
    from analysis_rows import row

    from crossover.analysis.load import read

    write_rows(tmp_path / "d", [row("disc", "cpu", [0.01, 0.011]),
                                {**row("disc", "cuda", [0.01, 0.011]), column: value, "trial_id": "t_9"}])
    with pytest.raises(ValueError, match=r"1 ok rows with " + re.escape(words) + r".*trial t_9.*: move that file out"):
        read(tmp_path / "d")


def test_the_analysis_names_a_truncated_row_file_and_a_report_it_cannot_write(tmp_path):
    from analysis_rows import row

    write_rows(tmp_path / "d", [row("disc", "cpu", [0.01, 0.011]), row("disc", "cuda", [0.004, 0.005])])
    analysis = [sys.executable, "-m", "crossover.analysis", "report", str(tmp_path / "d"), "--no-reference"]
    (tmp_path / "file").write_text("not a folder")
    done = subprocess.run(analysis + ["--out", str(tmp_path / "file" / "report")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"error: cannot write {tmp_path / 'file' / 'report'}" in done.stderr and "the rows are unchanged" in done.stderr

    first = sorted((tmp_path / "d").glob("*.parquet"))[0]
    first.write_bytes(first.read_bytes()[:100])  # truncated by a crash, before a sweep set it aside
    done = subprocess.run(analysis, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"error: {first} is not a readable row file (" in done.stderr
    assert "run its sweep again, which sets it aside" in done.stderr


def test_rows_with_no_status_a_null_version_or_a_changed_type_are_named_not_a_traceback(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from analysis_rows import row

    from crossover import schema
    from crossover.analysis.load import read

    good = schema.to_table([row("disc", "cpu", [0.01, 0.011])])
    cases = {"has no status column": good.drop_columns(["status"]),
             "has rows with a null schema_version": good.set_column(0, "schema_version", pa.array([None], pa.int64())),
             "column depth is string, but crossover's schema makes it int64: rewrite it":
                 good.set_column(good.schema.get_field_index("depth"), "depth", pa.array(["2"]))}
    for words, table in cases.items():
        directory = tmp_path / words.split(",")[0].replace(" ", "-")
        directory.mkdir()
        pq.write_table(table, directory / "0.parquet")
        with pytest.raises(ValueError) as info:
            read(directory)
        assert str(directory / "0.parquet") in str(info.value) and words in str(info.value)

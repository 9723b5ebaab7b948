"""The co-running registry (trainables/neighbours.py) on real files and processes: windows that overlap
are reported, a window no trial can read again is removed, a dead process's open window is over, a
malformed file is skipped, neighbours' cores count for the time they overlapped, and a real trial
timed beside a busy process that is not crossover's is flagged outside_load."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from crossover.trainables import neighbours
from crossover.config import TrialConfig
from crossover.trainables.neighbours import Window
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """This sweep's folder of a registry of the test's own: where its windows are written."""
    monkeypatch.setattr(neighbours, "REGISTRY", tmp_path)
    monkeypatch.delenv(neighbours.SWEEP_ENV, raising=False)
    return neighbours.private_registry()


def planted(registry, name: str, pid: int, start: float, end: float | None) -> str:
    """A window file as another trial's process would have left it."""
    (registry / f"{name}-{pid}-1.json").write_text(json.dumps({"label": name, "owner": name, "start": start, "end": end}))
    return f"{name}-{pid}-1.json"


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_overlapping_windows_are_reported(registry):
    with Window("a", "A") as a, Window("b", "B") as b:  # b ends first, while a is still open
        pass
    assert b.overlapping == ["a"] and a.overlapping == ["b"]


def test_a_finished_window_stays_while_a_window_open_at_its_end_runs(registry):
    now, alive = time.time(), os.getpid()
    long_open = planted(registry, "long", alive, now - 300, None)  # a live trial, open since before `old`
    old = planted(registry, "old", alive, now - 200, now - 100)
    with Window("me", "ME") as me:
        pass
    assert {long_open, old} <= {p.name for p in registry.iterdir()}  # `long` still has to read `old`
    assert me.overlapping == ["long"]

    (registry / long_open).unlink()  # that trial ended and was read: nothing open began before `old` ended
    with Window("me", "ME"):
        pass
    assert old not in {p.name for p in registry.iterdir()}


def test_a_dead_process_open_window_is_over(registry):
    now = time.time()
    ghost = planted(registry, "ghost", dead_pid(), now - 50, None)  # its worker was killed mid-trial
    with Window("me", "ME") as me:
        pass
    assert me.overlapping == [] and ghost not in {p.name for p in registry.iterdir()}


def test_a_neighbour_that_finished_inside_the_window_is_reported_before_it_is_removed(registry, monkeypatch):
    monkeypatch.setattr(neighbours, "MARGIN_S", 0.0)  # nothing open is left to read it: it goes this time
    with Window("me", "ME") as me:
        quick = planted(registry, "quick", os.getpid(), me.start, me.start + 1e-6)
        time.sleep(0.01)
    assert me.overlapping == ["quick"] and quick not in {p.name for p in registry.iterdir()}


def test_neighbours_cores_count_for_the_time_they_overlapped(registry):
    with Window("me", "ME", cores=1) as me:
        start = me.start
        files = {  # name: (cores, start, end) relative to the window's start
            "before": (4, -5.0, -1.0),  # ended before the window: nothing
            "early": (2, -5.0, 0.05),  # overlapped its first 0.05 s
            "late": (3, 0.02, None),  # open since 0.02 s in: runs on to the window's end
            "huge": (10 ** 6, 0.0, 0.01),  # more cores than the host has: counted as the host's
        }
        for name, (cores, t0, t1) in files.items():  # written as by another live process (this one's parent)
            (registry / f"{name}-{os.getppid()}-1.json").write_text(json.dumps(
                {"label": name, "owner": name, "start": start + t0, "end": None if t1 is None else start + t1,
                 "cores": cores}))
        time.sleep(0.1)
    window_s = me.end - me.start
    assert me.overlapping == ["early", "huge", "late"]
    owned = lambda cores: min(cores, os.cpu_count())  # noqa: E731  no neighbour owns more than the host
    assert me.neighbour_core_s == pytest.approx(owned(2) * 0.05 + owned(3) * (window_s - 0.02) + owned(10 ** 6) * 0.01)


def test_a_window_of_the_same_process_is_a_neighbour_but_its_cores_are_already_counted(registry):
    with Window("a", "A", cores=4) as a, Window("b", "B", cores=4) as b:
        time.sleep(0.02)
    assert b.overlapping == ["a"] and a.overlapping == ["b"]
    assert a.neighbour_core_s == b.neighbour_core_s == 0  # the process's own CPU time holds both


def test_a_malformed_file_in_the_registry_is_skipped(registry):
    (registry / "junk-1-1.json").write_text("not json")
    (registry / "list-1-1.json").write_text("[1, 2]")
    (registry / "nolabel-1-1.json").write_text(json.dumps({"owner": "x", "start": 0, "end": None}))
    (registry / "text-1-1.json").write_text(json.dumps({"label": "t", "owner": "t", "start": "yesterday", "end": None}))
    (registry / "cores-1-1.json").write_text(json.dumps({"label": "c", "owner": "c", "start": 0, "end": None,
                                                         "cores": "all"}))
    (registry / "long-1-1.json").write_text(json.dumps({"label": "x" * 10_000, "owner": "l", "start": 0, "end": None}))
    (registry / "dir-1-1.json").mkdir()
    os.mkfifo(registry / "fifo-1-1.json")  # a reader that opened it blocking would wait forever
    (registry / "no-pid.json").write_text(json.dumps({"label": "n", "owner": "n", "start": time.time(), "end": None}))
    with Window("me", "ME") as me:
        pass
    assert me.overlapping == ["n"]  # the one well-formed window (its file name has no pid: taken as alive)
    assert me.load["host_cpus"] == os.cpu_count()


def test_without_proc_stat_the_load_columns_are_null_and_nothing_fails():
    # as on macOS: host_cpu() found no /proc/stat at one end of the window
    columns = neighbours.load_columns((None, 1.0), (None, 2.0), window_s=1.0, neighbour_core_s=0.0)
    assert columns["cpu_steal_s"] is columns["other_cpu_s"] is columns["outside_load"] is None
    assert columns["host_cpus"] == os.cpu_count()


# 40 epochs: about 0.4 s timed on 2 cores, long enough for /proc/stat's 10 ms ticks to show one busy
# core (4 epochs, 30 ms, missed it in 1 of 4 tries here)
TRIAL = TrialConfig("disc", depth=8, epochs=40, threads=1)


def test_a_trial_beside_a_busy_process_is_flagged_outside_load(registry):
    # On 2 cores (CI): the busy process takes one, the trial's one thread the other, and the window
    # sees a core's worth of CPU time that no crossover trial and no allowance for Ray explains.
    # not this process's descendant (those count as the trial's own): started by a launcher that exits
    launch = ("import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'while True: pass'], "
              "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")
    busy = int(subprocess.run([sys.executable, "-c", launch], capture_output=True, text=True, check=True).stdout)
    try:
        time.sleep(0.3)  # spinning by the time the trial is timed
        loaded = run_trial(resolve(TRIAL))
    finally:
        os.kill(busy, signal.SIGKILL)
    assert loaded["outside_load"] is True and loaded["co_running"] == []
    assert loaded["other_cpu_s"] > 0.6 * loaded["train_s"]


def proc_cpu_s(pid: int) -> float:
    """CPU seconds of process `pid` itself (utime + stime), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * (1 / os.sysconf("SC_CLK_TCK"))


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_trials_own_child_processes_count_as_its_own_cpu_time():
    # torch.compile's compile workers are the trial's descendants: their CPU time is the trial's, not load
    # from outside; here a grandchild spins while this process sleeps. Whatever CPU share a loaded host
    # gives it, every second it spins between the two readings is in this process's own CPU time (a
    # fixed wall-time window asked for half a core: a CPU burner beside it on 2 cores gave it less)
    spin = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'while True: pass']); "
            "print(p.pid, flush=True); p.wait()")
    child = subprocess.Popen([sys.executable, "-c", spin], start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        before, spun = neighbours.own_cpu_s(), proc_cpu_s(grandchild)
        while proc_cpu_s(grandchild) - spun < 0.3:  # however long the host's load makes that take
            time.sleep(0.05)
        spun = proc_cpu_s(grandchild) - spun
        spent = neighbours.own_cpu_s() - before
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert spent >= spun - 1e-9 and spun >= 0.3, (spent, spun)  # 1e-9: float sums of whole ticks


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_other_cpu_s_is_what_other_processes_spent_never_the_windows_own_threads_however_busy_the_host(registry):
    # A trial alone is not flagged because its own threads are never taken for another's: other_cpu_s is the
    # host's busy time less every thread of this process. Read here apart from the window (/proc/stat, and
    # /proc/self/stat rather than getrusage) just outside it, the two agree whatever else the host runs: they
    # differ by what other processes spent in the moments between the two reads, at most every core for those
    # moments, and by ticks. Torch's second intra-op thread spins inside: counted as another's, it would add its
    # half of a core-second of work (a test that skipped on a busy host checked nothing there)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    a, pid = torch.randn(256, 256), os.getpid()
    try:
        began, host0, own0 = time.monotonic(), neighbours.host_cpu(), proc_cpu_s(pid)
        with Window("me", "ME", cores=2) as me:
            work0, spun = time.monotonic(), proc_cpu_s(pid)
            while proc_cpu_s(pid) - spun < 1.0:  # however long the host's load makes that take
                a @ a
            work_s = time.monotonic() - work0
        ended, host1, own1 = time.monotonic(), neighbours.host_cpu(), proc_cpu_s(pid)
    finally:
        torch.set_num_threads(threads)
    other = (host1[0] - host0[0]) - (own1 - own0)
    between_s = (ended - began) - work_s  # outside the work, inside the reads here: the window's reads are in it
    ticks = 2 * (os.cpu_count() or 1) + 2  # /proc/stat's per-CPU counts and this process's, off by a tick at each end
    slack = (os.cpu_count() or 1) * between_s + ticks * host0[2]
    assert other - slack <= me.load["other_cpu_s"] <= other + slack, (me.load, other, between_s)


def test_a_neighbours_claim_counts_its_whole_trial_once_and_is_not_co_running(registry):
    parent = os.getppid()  # another live process: the neighbour
    with Window("me", "ME", cores=1) as me:
        start = me.start
        # the neighbour's Tune trial claims 2 cores from before this window to 0.06 s into it; its own
        # timed window, inside the claim, is counted through the claim and not again
        for name, timed, t0, t1 in (("claim", False, -3.0, 0.06), ("timed", True, -1.0, 0.04)):
            (registry / f"{name}-{parent}-1.json").write_text(json.dumps(
                {"label": name, "owner": "NB", "start": start + t0, "end": start + t1, "cores": 2, "timed": timed}))
        time.sleep(0.1)
    assert me.overlapping == ["timed"]  # its timed window is co-running; a claim never is
    assert me.neighbour_core_s == pytest.approx(min(2, os.cpu_count()) * 0.06)


def test_the_registry_is_private_to_its_user_and_a_shared_one_is_refused(tmp_path, monkeypatch):
    assert neighbours.REGISTRY.name == f"crossover-windows-{os.getuid()}"
    private = tmp_path / "made"
    monkeypatch.setattr(neighbours, "REGISTRY", private)
    with Window("me", "ME"):
        pass
    assert (private.stat().st_mode & 0o777) == 0o700 and private.stat().st_uid == os.getuid()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp/crossover-windows was: anyone could plant windows
    monkeypatch.setattr(neighbours, "REGISTRY", shared)
    with pytest.raises(RuntimeError, match=r"is not a directory private to this user .*mode drwxrwxrwt.*: "
                                           r"remove it \(rm -r .*shared\) and run again"), Window("me", "ME"):
        pass


def test_a_planted_record_missing_its_fields_never_fails_a_trial(registry):
    # a record without 'end' once raised KeyError in every trial
    (registry / "x-1-1.json").write_text(json.dumps({"label": "x"}))
    row = run_trial(resolve(TrialConfig("disc", depth=2, epochs=2, dataset_size=100, min_timed_s=0)))
    assert row["status"] == "ok" and row["co_running"] == []


def test_a_sweeps_end_removes_the_records_no_window_will_read_and_its_folder_once_it_is_empty(tmp_path, monkeypatch):
    monkeypatch.setattr(neighbours, "REGISTRY", tmp_path / "windows")
    monkeypatch.setenv(neighbours.SWEEP_ENV, "mine")
    with Window("done", "a"):
        pass
    with neighbours.Claim("running", "b") as running:
        neighbours.prune()  # the finished window is read by no one; the open claim stays
        assert [p.name for p in (tmp_path / "windows" / "mine").iterdir()] == [running.path.name]
    neighbours.prune()
    assert [p.name for p in (tmp_path / "windows").iterdir()] == []  # the registry, shared by every sweep, stays
    neighbours.prune()  # nothing there: nothing to do


def test_another_sweeps_windows_are_neighbours_and_are_left_to_it(tmp_path, monkeypatch):
    monkeypatch.setattr(neighbours, "REGISTRY", tmp_path)
    monkeypatch.setenv(neighbours.SWEEP_ENV, "other")
    with Window("theirs", "T") as theirs:  # a sweep beside this one: it ends first, its records stay its own
        monkeypatch.setenv(neighbours.SWEEP_ENV, "mine")
        with Window("mine", "M") as mine:
            pass
    assert mine.overlapping == ["theirs"] and theirs.overlapping == ["mine"]
    time.sleep(0.01)
    monkeypatch.setattr(neighbours, "MARGIN_S", 0.0)  # every finished record is read by no one now
    with Window("later", "L"):
        pass
    neighbours.prune()  # this sweep's end: its own folder goes, the other sweep's records are left to it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]
    assert [p.name for p in (tmp_path / "other").iterdir()] == [theirs.path.name]


def test_a_sweep_name_that_is_not_a_folder_is_refused(monkeypatch):
    monkeypatch.setenv(neighbours.SWEEP_ENV, "../elsewhere")
    with pytest.raises(RuntimeError, match=r"CROSSOVER_SWEEP='../elsewhere' names the folder .*or unset it"):
        neighbours.sweep()

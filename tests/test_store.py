"""The results directory keeps itself whole: one sweep writes it at a time, a stray or truncated file
neither blocks a resume nor a reader, a killed writer's left-overs go, and a directory that cannot be
written is refused by name before anything runs."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from analysis_rows import row
from crossover.sweeps.store import Store


def test_a_second_sweep_on_the_same_directory_is_refused_naming_the_first(tmp_path):
    # the first holder is another process, as a second sweep would meet it
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from crossover.sweeps.store import Store
        with Store({str(tmp_path / 's')!r}).locked(log=lambda line: None):
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=rf"is being written by another sweep \(pid {holder.pid} on .*\)"):
            with Store(tmp_path / "s").locked():
                pass
    finally:
        holder.kill()
        holder.wait()
    with Store(tmp_path / "s").locked(log=lambda line: None):  # free again once the holder is gone
        pass


def test_strays_truncated_rows_and_leftovers_are_set_aside_and_the_rows_read(tmp_path):
    store = Store(tmp_path / "s")
    with store.locked():
        kept = store.write({**row("disc", "cpu", [0.01, 0.011]), "config_hash": "a" * 16})
    (store.dir / "notes.txt").write_text("my notes")
    (store.dir / ("b" * 16 + ".parquet")).write_bytes(kept.read_bytes()[:100])  # truncated by a crash
    (store.dir / ".x.tmp").write_bytes(b"half a row")  # a killed writer's
    lines = []
    with store.locked(log=lines.append):
        assert store.measured(lines.append) == {"a" * 16}
    # beside the results directory, not in it: the directory holds its rows alone
    assert sorted(p.name for p in (tmp_path / "_aside" / "s").iterdir()) == ["b" * 16 + ".parquet", "notes.txt"]
    assert sorted(p.name for p in store.dir.iterdir()) == ["a" * 16 + ".parquet"]
    assert len(lines) == 3 and all(line.startswith("warning: ") for line in lines)
    assert any("x.tmp, a row a killed sweep left half-written" in line for line in lines)
    assert not list(store.dir.glob(".*.tmp"))
    assert len(pd.read_parquet(store.dir)) == 1  # the directory reads as rows again

    # a folder (pd.read_parquet(DIR) failed on one), and a second notes.txt: the first one set aside stays
    (store.dir / "_report").mkdir()
    (store.dir / "_report" / "index.html").write_text("<html/>")
    (store.dir / "notes.txt").write_text("newer notes")
    with store.locked(log=lines.append):
        pass
    aside = tmp_path / "_aside" / "s"
    assert (aside / "notes.txt").read_text() == "my notes" and (aside / "notes.txt.1").read_text() == "newer notes"
    assert (aside / "_report" / "index.html").exists() and "moved to " + str(aside / "notes.txt.1") in lines[-1] + lines[-2]
    assert sorted(p.name for p in store.dir.iterdir()) == ["a" * 16 + ".parquet"]
    assert len(pd.read_parquet(store.dir)) == 1

    # an earlier version's lock and runs file in the directory: the lock gone, the runs' lines moved beside it
    (store.dir / "_lock").write_text("pid 1")
    (store.dir / "_runs.jsonl").write_text('{"start": 1.0, "end": 2.0, "trials": 1}\n')
    with store.locked(log=lines.append):
        store.log_run({"start": 3.0, "end": 4.0, "trials": 1})
    assert sorted(p.name for p in store.dir.iterdir()) == ["a" * 16 + ".parquet"]
    assert (tmp_path / "_runs" / "s.jsonl").read_text().count("\n") == 2

    # a folder of sweeps, such as results/reference, given as one sweep's directory: refused, nothing moved
    with pytest.raises(ValueError, match=r"holds a folder of rows \((s|_aside)/\).*not one sweep's: give another --name"):
        with Store(tmp_path).locked():
            pass
    assert (store.dir / ("a" * 16 + ".parquet")).exists()


def test_a_directory_that_cannot_be_written_is_refused_by_name(tmp_path):
    # a name readers of results/ skip, where Tune's state, reports and files set aside live
    for name in ("_tune", ".hidden"):
        with pytest.raises(ValueError, match=f"sweep name '{name}' starts with '_' or '.'.*give --name another"):
            with Store(tmp_path / name).locked():
                pass
    assert not list(tmp_path.iterdir())
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match="is a file: give --out a directory"):
        with Store(afile).locked():
            pass
    # --out a file: refused by check, which a sweep calls before Ray starts
    with pytest.raises(ValueError, match=rf"{afile / 's'} cannot be written \({afile} is a file\): give --out a writable"):
        Store(afile / "s").check()
    # /proc takes no new directory, whoever asks (root writes anywhere else)
    with pytest.raises(ValueError, match="cannot be written .*: give --out a writable directory"):
        with Store("/proc/self/crossover-results").locked():
            pass


def test_a_worker_death_that_names_no_trial_runs_the_trials_in_flight_again_then_rows_them(tmp_path):
    # Tune ends its run on a worker death it does not handle (sweeps/runner.py: _fit). The memory monitor
    # names the worker it killed: that trial's row at once. A death that names none (a SIGKILL from
    # outside): the trials in flight run again, max_failures times, then get their row.
    from ray.exceptions import WorkerCrashedError
    from ray.tune.experiment import Trial

    from crossover.sweeps.space import Space, groups
    from crossover.sweeps.store import RowWriter

    space = Space("killed", {"disc": {"depth": [2, 3]}}, ("cpu",))
    trials = space.expand()
    tune_trials = [Trial("trainable", config={"group": g}, stub=True)
                   for g in space.param_space(groups(trials, "off"))["group"]["grid_search"]]
    lines = []
    for name in ("killed", "named"):
        (tmp_path / name).mkdir()  # as Store.locked makes it when a sweep starts
    writer = RowWriter(Store(tmp_path / "killed"), "killed", trials, lines.append)

    def in_flight():
        writer.running = {t.trial_id: (t, f"actor{i}") for i, t in enumerate(tune_trials)}

    in_flight()
    assert writer.write_killed(WorkerCrashedError(), max_failures=1) == 2
    assert not list((tmp_path / "killed").glob("*.parquet")) and len(lines) == 2
    assert "lost its worker" in lines[0] and "running it again, failure 1" in lines[0]
    in_flight()
    assert writer.write_killed(WorkerCrashedError(), max_failures=1) == 2  # a second time: past max_failures
    rows = pd.read_parquet(tmp_path / "killed")
    assert len(rows) == 2 and set(rows["status"]) == {"error"} and sorted(rows["depth"]) == [2, 3]

    named = RowWriter(Store(tmp_path / "named"), "named", trials, lines.append)
    named.running = {t.trial_id: (t, f"actor{i}") for i, t in enumerate(tune_trials)}
    assert named.write_killed(RuntimeError("Task was killed (actor ID: actor1, pid=7)"), max_failures=2) == 2
    rows = pd.read_parquet(tmp_path / "named")
    assert len(rows) == 1 and rows["depth"].iloc[0] == 3 and rows["error"].iloc[0].startswith("Task was killed")


def test_a_row_is_on_disk_before_its_name_and_its_name_before_the_next(tmp_path, monkeypatch):
    # A power loss must leave the whole row or none: the file is fsynced before the rename, and the
    # directory after it. Which descriptors os.fsync saw is recorded; the real fsync still runs.
    synced = []
    real = os.fsync

    def recording(fd):
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    store = Store(tmp_path / "s")
    with store.locked():
        path = store.write({**row("disc", "cpu", [0.01, 0.011]), "config_hash": "a" * 16})
    assert len(synced) == 2
    assert os.path.dirname(synced[0]) == str(store.dir) and os.path.basename(synced[0]).endswith(".tmp")
    assert synced[1] == str(store.dir) and path.exists()
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask  # as any file this user makes, not mkstemp's 0600


def test_writing_a_row_pulls_in_neither_the_charts_nor_the_statistics():
    # the row writer runs in the sweep's driver: the report's altair and scipy are seconds of import there
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = "import crossover.sweeps.store, sys; print('altair' in sys.modules, 'scipy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("name", ["../../x", "/abs", "a/b", "<script>alert(1)</script>", "x" * 200, "x" * 65, "..", "_tune"])
def test_a_sweep_name_that_is_no_single_folder_name_is_refused(name):
    from crossover.sweeps.space import Space

    with pytest.raises(ValueError, match=r"sweep name .* must be letters, digits, '_', '-', '\.' or '\+'"):
        Space(name, {"disc": {}})


def test_the_sweep_script_refuses_a_name_out_of_its_folder_in_one_line_and_writes_nothing(tmp_path):
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "sweeps" / "scaling.py"), "--name", "../../x", "--out",
                           str(tmp_path / "o" / "a"), "--smoke", "--devices", "cpu", "--workloads", "disc", "--no-report"],
                          cwd=root, capture_output=True, text=True, timeout=120, env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: sweep name '../../x' must be letters, digits, '_', '-', '.' or '+', starting with a letter or digit, "
        "at most 64 characters: it becomes a folder under --out; give --name another name"]
    assert list(tmp_path.rglob("*")) == []


def test_the_progress_line_written_to_a_file_is_a_line_at_each_tenth_not_a_redraw_at_each_row(tmp_path, capsys):
    # pytest's capture is no terminal, as a log file or a pipe is not: 40 rows draw a line at the start, at each
    # 4th row (and as it closes), each a line of its own, where a terminal's line is redrawn in place at each row
    from ray.tune.experiment import Trial

    from crossover.sweeps.space import Space, groups
    from crossover.sweeps.store import RowWriter

    space = Space("logged", {"disc": {"depth": list(range(2, 42))}}, ("cpu",))
    trials = space.expand()
    tune_trials = [Trial("trainable", config={"group": g}, stub=True)
                   for g in space.param_space(groups(trials, "off"))["group"]["grid_search"]]
    (tmp_path / "logged").mkdir()  # as Store.locked makes it when a sweep starts
    writer = RowWriter(Store(tmp_path / "logged"), "logged", trials, bar=True)
    writer._line()  # as the sweep's first step makes it, before any row
    for n, trial in enumerate(tune_trials):
        writer._write(trial, {**row("disc", "cpu", [0.01, 0.011]), "config_hash": f"{n:016x}"}, tune_trials)
    writer.close()
    err = capsys.readouterr().err
    drawn = [int(line.removeprefix("sweep 'logged': ").split("/40 trials done")[0]) for line in err.splitlines()]
    assert "\r" not in err and drawn[:11] == list(range(0, 41, 4)) and set(drawn[11:]) <= {40}, repr(err)

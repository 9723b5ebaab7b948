"""The results directory keeps itself whole: one sweep writes it at a time, a stray or truncated file
neither blocks a resume nor a reader, a killed writer's left-overs go, and a directory that cannot be
written is refused by name before anything runs."""

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from analysis_rows import row
from sweeps.store import LOCK, Store


def test_a_second_sweep_on_the_same_directory_is_refused_naming_the_first(tmp_path):
    # the first holder is another process, as a second sweep would meet it
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from sweeps.store import Store
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
    # beside the results directory, not in it: the directory holds its rows and _lock alone
    assert sorted(p.name for p in (tmp_path / "_aside" / "s").iterdir()) == ["b" * 16 + ".parquet", "notes.txt"]
    assert sorted(p.name for p in store.dir.iterdir()) == [LOCK, "a" * 16 + ".parquet"]
    assert len(lines) == 2 and all(line.startswith("warning: ") for line in lines)
    assert not list(store.dir.glob(".*.tmp"))
    assert len(pd.read_parquet(store.dir)) == 1  # the directory reads as rows again, _lock skipped


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
    # /proc takes no new directory, whoever asks (root writes anywhere else)
    with pytest.raises(ValueError, match="cannot be written .*: give --out a writable directory"):
        with Store("/proc/self/crossover-results").locked():
            pass

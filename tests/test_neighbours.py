"""The co-running registry (trainables/neighbours.py) on real files and processes: windows that overlap
are reported, a window no trial can read again is removed, and a dead process's open window is over."""

import json
import os
import subprocess
import sys
import time

import pytest

from trainables import neighbours
from trainables.neighbours import Window


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setattr(neighbours, "REGISTRY", tmp_path)
    return tmp_path


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

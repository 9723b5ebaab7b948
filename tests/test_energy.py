"""Energy columns (trainables/energy.py): a real trial on a machine without a counter gets nulls and the
reason; RAPL's counters are read from real files, their wraparound handled. The GPU's counter is
checked in tests/test_gpu.py."""

import pytest
import torch

from crossover.schema import to_table
from crossover.trainables import energy
from crossover.config import TrialConfig
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve


def test_a_cpu_trial_has_no_gpu_energy_and_says_why_where_a_counter_is_missing():
    row = run_trial(resolve(TrialConfig("peaks", dataset_size=400, epochs=3, min_timed_s=0)))
    assert row["gpu_energy_j"] is None and "gpu: none used (CPU trial)" in row["energy_note"]
    readable, reason = energy._rapl_packages()
    if readable:  # a host whose RAPL counters this process may read
        assert row["cpu_energy_j"] > 0 and "cpu:" not in row["energy_note"]
    else:  # this VM: no /sys/class/powercap
        assert row["cpu_energy_j"] is None and reason in row["energy_note"] and reason.startswith("cpu: ")
    assert to_table([row]).num_rows == 1


def _zone(root, name, uj, max_uj):
    zone = root / name
    zone.mkdir()
    (zone / "energy_uj").write_text(f"{uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone


def test_rapl_package_counters_are_summed_across_a_wraparound(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "POWERCAP", tmp_path)
    first = _zone(tmp_path, "intel-rapl:0", 999_000_000, 1_000_000_000)
    second = _zone(tmp_path, "intel-rapl:1", 5_000_000, 1_000_000_000)
    _zone(tmp_path, "intel-rapl:0:0", 1, 1_000_000_000)  # a sub-zone (core): inside its package, not added
    with energy.Meter((torch.device("cpu"),)) as meter:
        (first / "energy_uj").write_text("2000000\n")  # wrapped: 1,000,000 + 2,000,000 uJ
        (second / "energy_uj").write_text("9000000\n")  # 4,000,000 uJ
    columns = meter.columns()
    assert columns["cpu_energy_j"] == pytest.approx(7.0)
    assert columns["gpu_energy_j"] is None and columns["energy_note"] == "gpu: none used (CPU trial)"


def test_an_unreadable_rapl_counter_is_a_null_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "POWERCAP", tmp_path)
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()  # no energy_uj in it, as where only root may read it
    with energy.Meter((torch.device("cpu"),)) as meter:
        pass
    columns = meter.columns()
    assert columns["cpu_energy_j"] is None
    assert f"cpu: {zone / 'energy_uj'} not readable" in columns["energy_note"]

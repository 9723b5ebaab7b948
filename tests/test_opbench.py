"""The operator study's command where it cannot measure: one line and exit 2, nothing written (tests/test_gpu.py
runs it on a GPU)."""

import pytest
import torch

import opbench


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_the_operator_study_refuses_a_machine_without_a_gpu_in_one_line(tmp_path, capsys):
    assert opbench.main(["--out", str(tmp_path / "ops")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no CUDA device" in err
    assert not (tmp_path / "ops").exists()

"""The host microbenchmark (studies/hostbench.py) run tiny on the CPU, for real: every case timed, its ops counted as a
step's count has them, and the counts say what each case is for."""

import json
import math

import pytest
import torch

import hostbench


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostbench") / "host.json"
    assert hostbench.main(["--device", "cpu", "--smoke", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_every_case_is_timed_and_its_environment_kept(found):
    assert [c["case"] for c in found["cases"]] == [c.name for c in hostbench.CASES]
    assert all(math.isfinite(c["us_per_unit"]) and all(t > 0 for t in c["us_per_call"]) for c in found["cases"])
    assert found["environment"]["device"] == "cpu" and found["environment"]["torch_version"] == torch.__version__


def test_the_counts_tell_the_kinds_apart(found):
    by = {c["case"]: c for c in found["cases"]}
    assert by["forward op, autograd recording"]["ops_per_unit"] == 1
    # autocast casts a frozen weight and bias at every call, a trainable one's once a region (cached)
    frozen, trainable = by["bf16 autocast nn.Linear, frozen"], by["bf16 autocast nn.Linear, trainable"]
    assert frozen["ops_per_unit"] == trainable["ops_per_unit"] + 2
    assert by["backward node (autograd engine)"]["ops_per_unit"] == 1
    # without foreach, Adam's ops grow with the parameter tensors; a Python loop's with its iterations
    assert by["Adam step, foreach False"]["ops_per_unit"] >= 4
    assert by["Python loop: h = h * a[t] + b[t]"]["ops_per_unit"] == 2


def test_a_machine_without_cuda_is_refused_in_one_line(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("checks a machine without CUDA")
    assert hostbench.main(["--out", str(tmp_path / "h.json")]) == 2
    assert "no CUDA device" in capsys.readouterr().err and not (tmp_path / "h.json").exists()


def test_its_op_count_is_a_steps_count():
    from crossover.trainables.costs import Traffic
    device = torch.device("cpu")
    for case in hostbench.CASES:
        call = case.make(device, case.sizes[0])()
        with Traffic() as traffic:
            call()
        assert hostbench.ops_of(case.make(device, case.sizes[0])) == traffic.ops, case.name

"""Device strings: parsed in trainables/devices.py alone, the resources each asks of Ray, the placement it
gets, and the variants' equivalence on the CPU (a two-stage pipeline, and DDP over gloo with two Ray Train
workers)."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from analysis_rows import frame, row
from crossover.sweeps.space import Space
from crossover.config import ConfigError, TrialConfig
from crossover.trainables.devices import parse, resources, threads_for
from crossover.trainables.placement import Placement, kernels_for, placement
from crossover.trainables.pipeline import balanced_stages
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve
from crossover.trainables.workloads import mlp

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("device, threads, expected", [
    ("cpu", 4, {"cpu": 4, "gpu": 0}),
    ("cuda", 4, {"cpu": 1, "gpu": 1.0}),
    ("cuda/4", 4, {"cpu": 1, "gpu": 0.25}),
    ("cuda/8", 1, {"cpu": 1, "gpu": 0.125}),
    ("pipe:2", 1, {"cpu": 1, "gpu": 2}),
    ("ddp:2", 1, {"cpu": 0.25, "gpu": 0}),  # the TorchTrainer's workers ask for the GPUs
    ("ddp-cpu:2", 2, {"cpu": 0.25, "gpu": 0}),
])
def test_each_device_asks_ray_for_what_it_uses(device, threads, expected):
    assert resources(parse(device), threads) == expected


@pytest.mark.parametrize("device, fields", [
    # is_cpu, whole_gpu, packed, single_process, pipelined, distributed, uses_gpu, gpus
    ("cpu", (True, False, False, True, False, False, False, 0)),
    ("cuda", (False, True, False, True, False, False, True, 1)),
    ("cuda/1", (False, True, False, True, False, False, True, 1)),  # one trial per GPU: a whole one
    ("cuda/4", (False, False, True, True, False, False, True, 1)),
    ("ddp:1", (False, False, False, False, False, True, True, 1)),
    ("ddp:4", (False, False, False, False, False, True, True, 4)),
    ("ddp-cpu:2", (False, False, False, False, False, True, False, 0)),
    ("pipe:2", (False, False, False, False, True, False, True, 2)),
])
def test_the_spec_answers_what_its_readers_ask(device, fields):
    spec = parse(device)
    names = ("is_cpu", "whole_gpu", "packed", "single_process", "pipelined", "distributed", "uses_gpu", "gpus")
    assert tuple(getattr(spec, n) for n in names) == fields


def test_rows_read_carry_their_devices_fields():
    from crossover.analysis.load import DEVICE_FIELDS

    devices = ["cpu", "cuda", "cuda/4", "ddp:2", "ddp-cpu:2", "pipe:2"]
    rows = frame([row("disc", d, [0.1, 0.1]) for d in devices]).set_index("device")
    for device in devices:
        assert rows.loc[device, list(DEVICE_FIELDS)].tolist() == [getattr(parse(device), f) for f in DEVICE_FIELDS]


def test_the_device_vocabulary_imports_no_torch():
    check = "import crossover.trainables.devices, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# What parsing a device string looks like: a device string (cpu, cuda, cuda/K, ddp:N, ddp-cpu:N, pipe:N, or
# a prefix of one: 'ddp:', 'cuda/') compared, matched or split on; or a regex naming one.
_DEVICE = re.compile(r"^(cpu|cuda|ddp|ddp-cpu|pipe)([:/]\d*)?$")
_PATTERN = re.compile(r"\b(cpu|cuda|ddp|pipe)\b")
_TESTS = {"startswith", "endswith", "split", "rsplit", "partition", "rpartition", "removeprefix", "removesuffix",
          "isin", "eq", "ne"}
_REGEX = {"match", "fullmatch", "search", "findall", "contains", "compile", "sub"}
# What the check lets pass, and why: file -> the source of each such test
_NOT_DEVICES = {
    "trainables/neighbours.py": {'name != "cpu"'},  # /proc/stat's first line is named 'cpu': the CPUs' total
    "studies/parallel.py": {'study == "ddp"', 'study == "pipe"'},  # the studies' names (packed, ddp, pipe)
}


def _literals(node) -> list[str]:
    """The string constants of `node`, or of the tuple, list or set it is."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def device_tests(source: str) -> list[tuple[int, str]]:
    """(line, source) of each place `source` tests a device string, outside trainables/devices.py's parse.
    A torch device's `.type == "cuda"` is torch's vocabulary, not ours, and is not counted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr == "type" for o in operands):
                continue
            hit = any(_DEVICE.match(s) for o in operands for s in _literals(o))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            args = [*node.args, *(k.value for k in node.keywords)]
            strings = [s for a in args for s in _literals(a)]
            hit = (node.func.attr in _TESTS and any(_DEVICE.match(s) for s in strings)
                   or node.func.attr in _REGEX and any(_PATTERN.search(s) for s in strings))
        elif isinstance(node, ast.MatchValue):
            hit = any(_DEVICE.match(s) for s in _literals(node.value))
        else:
            continue
        if hit:
            found.append((node.lineno, ast.get_source_segment(source, node)))
    return found


def test_no_module_but_devices_parses_a_device_string():
    found = []
    for path in sorted(p for package in ("crossover", "trainables", "sweeps", "analysis") for p in (ROOT / package).glob("*.py")):
        name = str(path.relative_to(ROOT))
        if name == "trainables/devices.py":
            continue
        found += [f"{name}:{line}: {text}" for line, text in device_tests(path.read_text())
                  if text not in _NOT_DEVICES.get(name, set())]
    assert found == [], ("device strings tested outside trainables/devices.py: ask the parsed DeviceSpec (a "
                         "trial's .spec, parse(), or the fields analysis/load.py adds to rows) instead\n"
                         + "\n".join(found))


def test_the_check_sees_each_way_of_parsing():
    planted = ['d == "cpu"', 'rows["device"] != "cuda"', 'd in ("cpu", "cuda")', '"cuda" in devices',
               'd.startswith("ddp:")', 'rows["device"].str.startswith("pipe:")', 'rows["device"].isin(["cpu", "cuda"])',
               'int(d.split("ddp:")[1])', 'rows["device"].str.fullmatch(r"cuda/\\d+")', 're.match(r"ddp:(\\d+)", d)',
               'sorted(xs, key=lambda d: d != "cuda/4")', 'rows.loc[rows["device"].eq("cpu")]']
    assert [source for source in planted if not device_tests(source)] == []
    not_parsing = ['device.type == "cuda"', 'torch.device("cuda", 0)', 'x = "cpu"', 'asked["cpu"]', 'd == gpu',
                   'f"ddp:{n}"', 'args.devices.split(",")']
    assert [source for source in not_parsing if device_tests(source)] == []


def test_threads_follow_the_device():
    assert [threads_for(parse(d), 8) for d in ("cpu", "cuda", "cuda/2", "ddp-cpu:2", "ddp-cpu:16", "pipe:2")] == [8, 1, 1, 4, 1, 1]


@pytest.mark.parametrize("bad", ["gpu", "cuda:0", "cpu/2", "ddp", "pipe:0", "cuda/0", "ddp:x", 3])
def test_malformed_devices_are_refused(bad):
    with pytest.raises(ValueError, match="device"):
        parse(bad)


def test_a_pipeline_is_refused_for_a_cnn_by_name():
    with pytest.raises(ConfigError, match="a pipeline splits workloads whose model is an nn.Sequential") as info:
        resolve(TrialConfig("lenet", device="pipe:2"))
    assert info.value.field == "device"


def test_a_cpu_trial_gets_the_cpu_and_never_initialises_cuda():
    # a fresh process: in this one another test may have used the GPU
    script = ("import torch; from crossover.config import TrialConfig; from crossover.trainables.train import run_trial; "
              "from crossover.trainables.trial import resolve; "
              "run_trial(resolve(TrialConfig('disc', depth=3, epochs=2))); print(torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert placement(parse("cpu")).devices == (torch.device("cpu"),)
    assert out.stdout.strip() == "False"


def test_kernels_for_reads_torchs_arch_list():
    built = ["sm_75", "sm_80", "sm_90", "compute_90"]
    assert kernels_for(80, built) and kernels_for(100, built)  # 10.0 runs the sm_90 PTX
    assert not kernels_for(50, built)  # seed 001's Quadro M500M: "no kernel image is available"
    assert not kernels_for(86, ["sm_80", "sm_90"])


def test_pipeline_stages_balance_parameters_and_keep_every_layer():
    model = mlp([2] + [2 ** k for k in range(2, 11)] + [2])  # disc depth 10
    stages = balanced_stages(model, 2)
    sizes = [sum(p.numel() for p in s.parameters()) for s in stages]
    assert sum(sizes) == 703_142 and max(sizes) == 527_362  # the best contiguous cut
    assert sum(len(s) for s in stages) == len(model)
    with pytest.raises(ValueError, match="pipe:4 needs at least 4 Linear layers"):
        balanced_stages(mlp([2, 8, 2]), 4)


def test_a_pipeline_of_micro_batches_trains_as_the_whole_model():
    kw = dict(depth=3, width=32, dataset_size=512, epochs=3, min_timed_s=0)
    trial = resolve(TrialConfig("tabular", device="pipe:2", micro_batches=4, **kw))
    cpu = torch.device("cpu")
    piped = run_trial(trial, Placement((cpu, cpu), micro_batches=4))
    whole = run_trial(resolve(TrialConfig("tabular", **kw)))
    assert piped["train_loss"] == pytest.approx(whole["train_loss"], rel=1e-5)
    assert piped["micro_batches"] == 4 and piped["n_params"] == whole["n_params"]


@pytest.mark.slow
def test_ddp_over_gloo_through_ray_train_matches_one_process(local_ray, tmp_path):
    # one Ray Train worker: two (2 x 1 CPU, and the trial's own 0.25) never fit 2 cores, and are refused
    # (tests/test_reliability.py); two workers against one process: ddp:2 on a GPU machine (tests/test_gpu.py)
    from crossover.sweeps import runner

    grid = {"disc": {"depth": [6], "epochs": [3], "dataset_size": [400]}}
    runner.run(Space("ddp", grid, ("cpu", "ddp-cpu:1"), cpu_threads=1, fixed={"min_timed_s": 0}), tmp_path,
               log=lambda line: None)
    rows = pd.read_parquet(tmp_path / "ddp").set_index("device")
    assert set(rows["status"]) == {"ok"}, rows["error"].dropna().tolist()
    ddp, single = rows.loc["ddp-cpu:1"], rows.loc["cpu"]
    assert ddp["world_size"] == 1 and len(ddp["per_rank_samples_per_s"]) == 1
    assert ddp["torch_threads"] == 1 and ddp["cpus_requested"] == 0.25
    assert ddp["train_loss"] == pytest.approx(single["train_loss"], rel=1e-5)
    assert ddp["train_accuracy"] == single["train_accuracy"]

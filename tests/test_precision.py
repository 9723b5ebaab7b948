"""The precision axis: each precision the CPU takes trains like fp32 within its rounding, the rest are
refused by name before anything runs, no trial inherits another's TF32 setting, a user's workload joins
every precision's sweep, and the analysis keeps precisions apart as arms."""

import dataclasses

import pytest
import torch

from crossover import schema
from crossover.analysis.load import arm_labels
from crossover.config import ConfigError, TrialConfig
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve

# bfloat16 keeps 8 significant bits: each product and sum in the forward pass rounds by up to 2^-9
# (0.2%) relative. Over 2-3 epochs of tens of steps the loss drifts by a few of those roundings (0.01%
# for disc, 0.3% for lenet measured here); 2% leaves room for that and still fails a step that learns
# differently (a lost gradient scale, a wrong cast of the targets).
BF16_RTOL = 2e-2


@pytest.mark.parametrize("workload, kw", [
    ("disc", {"depth": 6}),
    ("tabular", {"dataset_size": 2000}),  # Adam
    ("lenet", {"dataset_size": 1000}),  # convolutions, a summed loss
])
def test_bf16_on_the_cpu_trains_as_fp32_within_its_rounding(workload, kw):
    fp32 = run_trial(resolve(TrialConfig(workload, epochs=3, min_timed_s=0, **kw)))
    bf16 = run_trial(resolve(TrialConfig(workload, epochs=3, min_timed_s=0, precision="bf16", **kw)))
    print(f"{workload}: fp32 {fp32['loss_curve']}, bf16 {bf16['loss_curve']}")
    assert bf16["precision"] == "bf16" and fp32["precision"] == "default"
    assert bf16["loss_curve"] == pytest.approx(fp32["loss_curve"], rel=BF16_RTOL)
    assert bf16["loss_curve"] != fp32["loss_curve"]  # it did run in bfloat16: the rounding differs
    if fp32["test_loss"] is not None:
        assert bf16["test_loss"] == pytest.approx(fp32["test_loss"], rel=BF16_RTOL)


@pytest.mark.parametrize("precision, device", [("tf32", "cpu"), ("fp16", "cpu"), ("fp16", "ddp-cpu:2")])
def test_what_the_cpu_cannot_run_is_refused_by_name(precision, device):
    with pytest.raises(ConfigError, match=f"precision '{precision}' needs a GPU.*use 'default', 'fp32' or 'bf16'") as info:
        resolve(TrialConfig("disc", device=device, precision=precision))
    assert info.value.field == "precision"


def test_an_unknown_precision_and_fp16_in_a_cuda_graph_are_refused_by_name():
    with pytest.raises(ConfigError, match=r"precision must be one of \['default', 'fp32', 'tf32', 'bf16', 'fp16'\], got 'fp8'"):
        resolve(TrialConfig("disc", precision="fp8"))
    with pytest.raises(ConfigError, match="GradScaler.*use engine 'eager' or 'compile' with fp16") as info:
        resolve(TrialConfig("disc", device="cuda", engine="graph", precision="fp16"))
    assert info.value.field == "precision"


def test_a_trial_sets_tf32_from_its_own_precision_whatever_the_last_one_left():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # as a tf32 trial leaves it
        run_trial(resolve(TrialConfig("disc", depth=3, epochs=2, min_timed_s=0, precision="fp32")))
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        run_trial(resolve(TrialConfig("disc", depth=3, epochs=2, min_timed_s=0)))  # PyTorch's defaults again
        assert not torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_rows_recorded_at_fp32_keep_their_hashes_and_the_default_precision_is_measured_afresh():
    # the hash of TrialConfig('disc') before precision and context were fields, when every trial ran at fp32:
    # such results directories resume, and rows of PyTorch's default precision are never taken for them
    assert TrialConfig("disc", precision="fp32").config_hash() == "85bd4815017842c2"
    assert TrialConfig("disc").config_hash() != "85bd4815017842c2"
    assert TrialConfig("disc", precision="bf16").config_hash() != "85bd4815017842c2"


# A user's workload file with an axis of its own: its smoke grid (Workload.grid) is 2 epochs of 250 samples.
JOB = """
import torch
from torch import nn

from crossover.data import Data
from crossover.workload import Param, Workload


def data(cfg):
    x = torch.randn(cfg.dataset_size, cfg.params["n_features"], generator=torch.Generator().manual_seed(cfg.seed))
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")


workload = Workload(
    "mine", make_data=data, make_model=lambda cfg: nn.Linear(cfg.params["n_features"], 2),
    make_loss=nn.CrossEntropyLoss, make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
    defaults={"batch_size": 250, "dataset_size": 4000}, params={"n_features": Param(4, low=1, high=64)})
"""


def test_a_users_workload_joins_every_device_and_precision(tmp_path, planner):
    import lower_precision as study

    # registering ships its module to any Ray this process starts later: restored after the test (conftest's fresh)
    (tmp_path / "precision_job.py").write_text(JOB)
    ref = f"{tmp_path / 'precision_job.py'}:workload"
    flags = study.parse_args(["--workloads", "disc", "--workload", ref, "--param", "n_features=8", "--name", "p",
                              "--cpu-threads", "1", "--repeats", "1", "--trial-timeout", "60", "--plan-timeout", "60"])
    swept = {s.name: {(t.cfg.workload, t.cfg.precision, t.cfg.dataset_size, str(t.cfg.params)) for t in s.expand()}
             for s in study.spaces(flags, planner, "smoke", ("cpu", "cuda"))}
    assert set(swept) == {f"p-{d}-{p}" for d, ps in study.PRECISIONS.items() for p in ps}
    for name, trials in swept.items():
        precision = name.split("-")[-1]
        assert trials == {("disc", precision, 1000, "None"), ("mine", precision, 250, "{'n_features': 8}")}
    # without --workloads, yours alone
    alone = study.spaces(dataclasses.replace(flags, workloads=None), planner, "smoke", ("cpu",))
    assert {t.cfg.workload for s in alone for t in s.expand()} == {"mine"}


def test_precisions_are_arms_of_their_own():
    rows = schema.to_table([
        {"device": "cpu", "engine": "eager", "precision": "default", "status": "ok"},
        {"device": "cpu", "engine": "eager", "precision": "fp32", "status": "ok"},
        {"device": "cpu", "engine": "eager", "precision": "bf16", "status": "ok"},
        {"device": "cuda", "engine": "graph", "precision": "bf16", "status": "ok"},
        {"device": "cuda", "engine": "eager", "precision": None, "status": "ok"},  # written before the column: fp32
    ]).to_pandas()
    assert list(arm_labels(rows)) == ["cpu", "cpu fp32", "cpu bf16", "cuda graph bf16", "cuda fp32"]


@pytest.mark.slow
def test_the_precision_study_runs_on_the_cpu_and_sets_loss_beside_time(tmp_path, capsys):
    import os

    import ray

    from crossover.analysis import engines
    from crossover.analysis.load import read
    import lower_precision as study
    from crossover.sweeps.cluster import WORKER_ENV

    ray.init(address="local", num_cpus=min(2, os.cpu_count() or 1), num_gpus=0, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": WORKER_ENV})
    try:
        assert study.main(["--smoke", "--repeats", "1", "--out", str(tmp_path), "--name", "p"]) == 0
    finally:
        ray.shutdown()
    swept = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("_"))  # _tune: Tune's state
    assert swept == ["p-cpu-bf16", "p-cpu-default"]
    rows = read(tmp_path / "p-cpu-bf16", tmp_path / "p-cpu-default")
    assert set(rows["status"]) == {"ok"} and len(rows) == 6  # disc, mnist_cnn, transformer; default and bf16
    table = engines.precisions(rows).reset_index()
    bf16 = table[table["precision"] == "bf16"]
    assert len(bf16) == 3 and bf16["speedup"].notna().all()
    assert bf16["loss_ratio"].to_numpy() == pytest.approx(1, rel=BF16_RTOL)
    assert "per precision: time per epoch (ms) beside what it learnt" in capsys.readouterr().out


# ---- a step counted at bf16 on the meta device, as CUDA's autocast runs it (precision.GpuAutocast) ----

def _encoder_step(device, cast):
    """A pre-norm transformer block and a linear head: one forward under `cast`, backward, an SGD step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(64, 4, 256, batch_first=True, norm_first=True),
                                torch.nn.Flatten(), torch.nn.Linear(16 * 64, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16, 64, device=device), torch.randint(0, 10, (8,), device=device)

    def step():
        with cast:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def _dtypes(step) -> list[tuple[str, torch.dtype]]:
    """(aten op, its first output's dtype) of each op `step` dispatches, attention fused as count_step counts it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from crossover.sweeps.count_step import attention_as_on_a_gpu

    seen = []

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            if isinstance(first, torch.Tensor):
                seen.append((func.overloadpacket.__name__, first.dtype))
            return out
    with attention_as_on_a_gpu(), Seen():
        step()
    return seen


def test_a_step_counted_at_bf16_runs_its_matmuls_forward_and_backward_in_bf16_and_its_layer_norms_in_fp32():
    from crossover.trainables.precision import autocast

    seen = _dtypes(_encoder_step("meta", autocast("bf16", "meta")))
    mm = {dtype for name, dtype in seen if name in ("mm", "addmm", "bmm")}
    assert mm == {torch.bfloat16}  # the forward's products and the backward's, at the forward's type
    assert {dtype for name, dtype in seen if name == "native_layer_norm"} == {torch.float32}
    assert {dtype for name, dtype in seen if name == "native_layer_norm_backward"} == {torch.float32}
    assert ("_to_copy", torch.bfloat16) in seen and ("_to_copy", torch.float32) in seen  # the casts are ops too
    assert {dtype for name, dtype in _dtypes(_encoder_step("meta", autocast("default", "meta")))
            if name in ("mm", "addmm", "bmm")} == {torch.float32}


def test_a_step_counted_at_bf16_moves_fewer_bytes_than_at_the_default_and_the_same_flops():
    from crossover.trainables.costs import count
    from crossover.trainables.precision import autocast

    from crossover.sweeps.count_step import attention_as_on_a_gpu

    with attention_as_on_a_gpu():
        default = count(_encoder_step("meta", autocast("default", "meta")), on_gpu=False)
        bf16 = count(_encoder_step("meta", autocast("bf16", "meta")), on_gpu=False)
    assert bf16["flops_per_step"] == default["flops_per_step"]
    assert bf16["matmul_bytes_per_step"] < 0.7 * default["matmul_bytes_per_step"]
    assert bf16["optimizer_bytes_per_step"] == default["optimizer_bytes_per_step"]  # the weights stay float32


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_meta_count_at_bf16_runs_each_op_at_the_type_cudas_autocast_runs_it():
    from crossover.trainables.precision import autocast

    on_gpu = _dtypes(_encoder_step("cuda", torch.autocast("cuda", dtype=torch.bfloat16)))
    counted = _dtypes(_encoder_step("meta", autocast("bf16", "meta")))
    compute = ("mm", "addmm", "bmm", "native_layer_norm", "_log_softmax", "nll_loss_forward", "gelu", "relu")
    assert [s for s in counted if s[0] in compute] == [s for s in on_gpu if s[0] in compute]

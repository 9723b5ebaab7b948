"""Any nn.Module that trains is answered: a step without some op class (no matrix product, no convolution, no norm,
no recurrent net) counts that class 0, never missing, on the meta device as `crossover predict` counts it, and the
shipped model predicts it on every GPU. The networks: a fully convolutional one with a transposed convolution and
batch norm (a segmentation net's parts), a plain MLP, an nn.EmbeddingBag before a Linear, a torch.autograd.Function
of its own, and one whose forward needs real values (counted on the CPU instead)."""

import json
import math

import pandas as pd
import pytest
from test_command import crossover

from crossover.analysis import model
from crossover.schema import OP_CLASSES, OP_COLUMNS
from crossover.sweeps.count_step import counted

JOB = """
import torch
from torch import nn
from crossover.data import Data
from crossover.workload import Param, Workload


class Product(torch.autograd.Function):
    # x @ w with a backward of its own: each gradient only where it is wanted
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x.mm(w)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return (grad.mm(w.t()) if ctx.needs_input_grad[0] else None,
                x.t().mm(grad) if ctx.needs_input_grad[1] else None)

class Custom(nn.Module):
    def __init__(self, features, units):
        super().__init__()
        self.w = nn.Parameter(torch.randn(features, units) / features ** 0.5)

    def forward(self, x):
        return Product.apply(x, self.w)

class Bag(nn.Module):
    def __init__(self, vocabulary, units):
        super().__init__()
        self.bag, self.out = nn.EmbeddingBag(vocabulary, units, mode="mean"), nn.Linear(units, 2)

    def forward(self, x):
        return self.out(self.bag(x))

class Gated(nn.Module):  # a branch on a value: the meta device has none
    def __init__(self, units):
        super().__init__()
        self.a, self.b = nn.Linear(32, units), nn.Linear(units, 2)

    def forward(self, x):
        h = self.a(x)
        return self.b(h.relu() if h.mean().item() > -1e9 else h)

def fcn(c):
    return nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                         nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
                         nn.ConvTranspose2d(2 * c, c, 2, stride=2), nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 2, 1))

def model(cfg):
    arch, units = cfg.params["arch"], cfg.params["units"]
    return {"fcn": lambda: fcn(units), "custom": lambda: Custom(32, units), "gated": lambda: Gated(units),
            "mlp": lambda: nn.Sequential(nn.Linear(32, units), nn.ReLU(), nn.Linear(units, 2)),
            "bag": lambda: Bag(1000, units)}[arch]()

def data(cfg):
    g, n, arch = torch.Generator().manual_seed(cfg.seed), cfg.dataset_size, cfg.params["arch"]
    if arch == "fcn":  # a label a pixel: a segmentation
        x, y = torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 2, (n, 32, 32), generator=g)
    elif arch == "bag":  # 12 token ids a sample
        x, y = torch.randint(0, 1000, (n, 12), generator=g), torch.randint(0, 2, (n,), generator=g)
    else:
        x, y = torch.randn(n, 32, generator=g), torch.randint(0, 2, (n,), generator=g)
    return Data(x, y, None, None, source="random")

workload = Workload("any_module", make_data=data, make_model=model, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr),
                    defaults={"batch_size": 64, "dataset_size": 4096, "epochs": 3, "lr": 1e-3},
                    params={"arch": Param("mlp", choices=("fcn", "mlp", "bag", "custom", "gated"), help="the net"),
                            "units": Param(16, low=1, high=4096, help="channels or units")})
"""

# The classes each network's step uses; every other class of OP_CLASSES is 0 (the optimiser's are Adam's)
USES = {"fcn": {"conv", "norm", "elementwise", "optimizer"}, "mlp": {"matmul", "elementwise", "optimizer"},
        "bag": {"matmul", "elementwise", "optimizer"}, "custom": {"matmul", "elementwise", "optimizer"},
        "gated": {"matmul", "elementwise", "optimizer"}}
BATCH, UNITS = 64, 16


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("any") / "any_module_job.py"
    path.write_text(JOB)
    return f"{path}:workload"


@pytest.fixture(scope="module")
def steps(job) -> dict[str, dict]:
    """Each network's step counted as `crossover predict` counts it (sweeps/count_step.py)."""
    return {arch: counted(job, BATCH, 4096, {}, {"arch": arch, "units": UNITS}) for arch in USES}


@pytest.mark.parametrize("arch", sorted(USES))
def test_an_op_class_a_step_does_not_use_is_counted_zero_not_missing(steps, arch):
    step = steps[arch]
    assert "costs_note" not in step, step.get("costs_note")
    # where the meta device has shapes alone, it counts; a forward that reads a value is counted on the CPU
    assert step["counted_on"] == ("cpu" if arch == "gated" else "meta")
    assert all(isinstance(step[c], int) for c in OP_COLUMNS)
    for c in OP_CLASSES:
        launches = step[f"{c}_launches_per_step"]
        assert (launches > 0) == (c in USES[arch]), (c, launches)
        if c not in USES[arch]:
            assert step[f"{c}_flops_per_step"] == step[f"{c}_bytes_per_step"] == 0
    assert step["flops_per_step"] > 0


def test_a_custom_autograd_functions_products_are_counted_from_the_ops_it_dispatches(steps):
    # forward x @ w, backward x^T @ grad alone (the data needs no gradient): 2 products of 2 x batch x 32 x units
    step = steps["custom"]
    assert step["matmul_flops_per_step"] == step["flops_per_step"] == 2 * 2 * BATCH * 32 * UNITS
    assert step["matmul_launches_per_step"] == 2


def test_a_transposed_convolutions_backward_is_counted(steps):
    # the transposed convolution's backward (input's and weight's gradients) at torch's formula: forward and
    # backward of a 2x2 stride-2 transposed convolution from 32 channels to 16 at 16 x 16 -> 32 x 32
    transposed_forward = 2 * BATCH * 32 * 16 * 2 * 2 * 16 * 16
    assert steps["fcn"]["conv_flops_per_step"] > 3 * transposed_forward


@pytest.mark.parametrize("arch", sorted(USES))
def test_every_gpu_predicts_any_module_with_an_interval_and_in_order(steps, arch):
    gpus = list(model.load_devices())
    got = model.predict_counted(pd.DataFrame([steps[arch]]), gpus).set_index("device_name")
    assert sorted(got.index) == sorted(gpus)
    assert got["model_form"].eq(model.PER_CLASS).all()
    for gpu, line in got.iterrows():
        assert math.isfinite(line["epoch_s_median"]) and line["epoch_s_median"] > 0, gpu
        assert 0 < line["epoch_s_lo"] < line["epoch_s_median"] < line["epoch_s_hi"] < math.inf, gpu
    assert got.loc["H100", "epoch_s_median"] <= got.loc["T4", "epoch_s_median"]
    assert got.loc["H200", "epoch_s_median"] <= got.loc["GTX 960", "epoch_s_median"]
    assert "any_module" not in model.shipped(model.PER_CLASS).seen  # a network the fit never saw


def test_crossover_predict_answers_a_net_without_a_matrix_product_in_bf16(job):
    done = crossover("predict", "--workload", job, "--param", "arch=fcn", "--epochs", "2", "--precision", "bf16",
                     "--json", "-")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert {r["gpu"] for r in listed} == set(model.load_devices())
    assert all(r["epoch_s"] > 0 and r["epoch_s_low"] < r["epoch_s"] < r["epoch_s_high"] for r in listed)


def test_a_step_the_counters_cannot_count_is_one_line_naming_why(tmp_path):
    # the step runs, but an op of it has a FLOP formula that raises: no prediction, and the op's error says why
    path = tmp_path / "uncounted_job.py"
    path.write_text(JOB + """
from torch.utils.flop_counter import register_flop_formula
@register_flop_formula(torch.ops.aten._embedding_bag)
def broken(*args, **kwargs):
    raise ValueError("no formula here")
""")
    done = crossover("predict", "--workload", f"{path}:workload", "--param", "arch=bag", "--epochs", "1")
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "one step ran but its costs were not counted: ValueError: no formula here" in line, line

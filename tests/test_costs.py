"""What a step costs, counted on a real trial (trainables/costs.py): FLOPs by hand, the count a row without the
columns takes (its configuration's, as crossover predict counts it), and a counting that leaves the trial as it was."""

import json

import pandas as pd
import pytest
import torch

from crossover.analysis import model
from crossover.schema import FORWARD_OPS, OPS_PER_STEP, OP_CLASSES, OP_MEASURES
from crossover.config import TrialConfig
from crossover.trainables.costs import RNN_KERNELS, count, op_class
from crossover.sweeps.count_step import counted
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve


def _trial(workload, **kw):
    return run_trial(resolve(TrialConfig(workload, epochs=2, min_timed_s=0, **kw)))


def test_flops_per_step_of_a_tiny_mlp_is_the_hand_count():
    row = _trial("disc", depth=3, width=8, batch_size=50, dataset_size=200)  # Linear 2->8, 8->8, 8->2
    products = [2 * 8, 8 * 8, 8 * 2]
    forward = sum(2 * p * 50 for p in products)  # 2 x in x out per Linear per sample
    weight_grads = forward
    input_grads = sum(2 * p * 50 for p in products[1:])  # the first Linear's input needs no gradient
    assert row["flops_per_step"] == forward + weight_grads + input_grads
    assert row["flops_per_step"] == 3 * forward - 2 * products[0] * 50


def test_a_step_moves_at_least_its_weights_and_launches_its_layers():
    row = _trial("tabular", depth=2, width=32, dataset_size=640)
    weights = 4 * row["n_params"]
    assert row["bytes_per_step"] > 3 * weights  # read by forward and backward, written by the optimiser
    assert row["launches_per_step"] > 3 * 3  # three Linears, forward and backward
    assert row["cpu_energy_j"] is None or row["cpu_energy_j"] > 0


def test_counting_a_step_leaves_the_trial_as_it_was():
    # the count runs on copies under a forked random state: a mnist_cnn trial (dropout draws from the
    # global generator) trains to the same loss twice, and its loss is what the count did not change
    a = _trial("mnist_cnn", dataset_size=400, batch_size=100, data="digits")
    b = _trial("mnist_cnn", dataset_size=400, batch_size=100, data="digits")
    assert a["train_loss"] == b["train_loss"] and a["flops_per_step"] == b["flops_per_step"] > 0


def test_a_row_without_counts_takes_its_configurations_count_as_crossover_predict_counts_it():
    # a row written before the counts (the seeds' first sweeps) takes the shipped count of its configuration
    # (studies/count_reference.py), which is what count_step counts today; a row's own count wins; a configuration
    # counted nowhere has none, and the model leaves its rows out
    key = {"workload": "disc", "workload_params": None, "depth": 3, "width": None, "context": None, "batch_size": 100}
    rows = pd.DataFrame([key | {"flops_per_step": None, "bytes_per_step": None, "launches_per_step": None},
                         key | {"flops_per_step": 1.0, "bytes_per_step": 2.0, "launches_per_step": 3.0},
                         key | {"depth": 97, "flops_per_step": None, "bytes_per_step": None, "launches_per_step": None}])
    got = model.step_costs(rows)
    assert got["costs_counted"].tolist() == [False, True, False]
    assert got.iloc[1][list(model.COST_COLUMNS)].tolist() == [1.0, 2.0, 3.0]
    assert got.iloc[2][list(model.COST_COLUMNS)].isna().all()
    today = counted("disc", 100, 1000, {"depth": 3}, {})
    assert got.iloc[0][list(model.COST_COLUMNS)].tolist() == [today[c] for c in model.COST_COLUMNS]


def test_the_three_term_model_prices_a_step_at_the_precision_its_counted_flops_run_at():
    # PyTorch's default runs cuDNN's convolutions at TF32 and matrix products at FP32: a step is priced at TF32
    # where its counted conv (and rnn) FLOPs outweigh its matrix products', whatever its workload's name
    from crossover.analysis.model.threeterm import _precision
    rows = pd.DataFrame({"workload": ["a", "b", "c", "d", "e"], "precision": ["default", "default", "default", "bf16", None],
                         "conv_flops_per_step": [9.0, 1.0, None, 9.0, 9.0], "rnn_flops_per_step": [0.0, 0.0, None, 0, 0],
                         "matmul_flops_per_step": [1.0, 9.0, None, 1.0, 1.0]})
    assert _precision(rows).tolist() == ["tf32", "fp32", "fp32", "bf16", "fp32"]


def test_a_steps_costs_split_by_op_class_add_up_to_its_totals():
    # a conv net with batch norm and Adam: every class has ops, and the classes partition the step
    row = _trial("mnist_cnn", dataset_size=100, batch_size=20, width=3, data="digits")
    classes = {c: {m: row[f"{c}_{m}_per_step"] for m in OP_MEASURES} for c in OP_CLASSES}
    assert sum(v["flops"] for v in classes.values()) == row["flops_per_step"]
    assert sum(v["bytes"] for v in classes.values()) == row["bytes_per_step"]
    assert sum(v["launches"] for v in classes.values()) == row["launches_per_step"]  # on the CPU: its aten ops
    assert classes["conv"]["flops"] > 0 and classes["matmul"]["flops"] > 0  # convolutions, then the classifier
    assert classes["optimizer"]["launches"] > 0 and classes["optimizer"]["flops"] == 0
    assert classes["elementwise"]["bytes"] > 0
    # and the same step op by op (the per-op model's input) adds up to each class's columns
    ops = json.loads(row[OPS_PER_STEP])
    for c in OP_CLASSES:
        mine = [op for op in ops if op[0] == c]
        for m, at in (("flops", 2), ("bytes", 3), ("launches", 4)):
            assert sum(op[at] * op[5] for op in mine) == row[f"{c}_{m}_per_step"], (c, m)
    assert {op[1] for op in ops} <= {"float32", "int64", "none"}  # the dtypes a float32 step computes in


def test_an_mlp_has_no_conv_or_norm_ops_and_its_optimiser_reads_every_weight():
    row = _trial("tabular", depth=2, width=32, dataset_size=640)
    assert row["conv_launches_per_step"] == row["norm_launches_per_step"] == 0
    assert row["matmul_flops_per_step"] == row["flops_per_step"]
    assert row["optimizer_bytes_per_step"] >= 3 * 4 * row["n_params"]  # weights, gradients read; weights written


def test_the_forward_ops_are_the_forward_passs_alone():
    # the optimiser's ops and the backward's are not the forward's: SGD and Adam count the same forward ops,
    # and a layer more adds its Linear and ReLU to the forward, and their gradients' ops besides to the step
    x, y = torch.randn(4, 8), torch.randn(4, 1)

    def counted(layers: int, optimizer) -> dict:
        net = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()) for _ in range(layers)],
                                  torch.nn.Linear(8, 1))
        opt = optimizer(net.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        return count(step, on_gpu=False)

    sgd, adam, deeper = counted(2, torch.optim.SGD), counted(2, torch.optim.Adam), counted(3, torch.optim.SGD)
    assert sgd[FORWARD_OPS] == adam[FORWARD_OPS] and sgd["launches_per_step"] < adam["launches_per_step"]
    assert deeper[FORWARD_OPS] - sgd[FORWARD_OPS] == 2  # addmm, relu
    assert deeper["launches_per_step"] - sgd["launches_per_step"] > 2
    assert 0 < sgd[FORWARD_OPS] < sgd["launches_per_step"]


@pytest.mark.parametrize("name, cls", [("addmm", "matmul"), ("mm", "matmul"), ("convolution_backward", "conv"),
                                       ("native_batch_norm", "norm"), ("native_layer_norm_backward", "norm"),
                                       ("relu", "elementwise"), ("nll_loss_forward", "elementwise"),
                                       ("_cudnn_rnn", "rnn"), ("_cudnn_rnn_backward", "rnn")])
def test_op_class_names_the_class_of_an_aten_op(name, cls):
    assert op_class(name) == cls


RNNS = [lambda: torch.nn.LSTM(12, 16, num_layers=2, batch_first=True),
        lambda: torch.nn.GRU(12, 16, bidirectional=True, batch_first=True),
        lambda: torch.nn.RNN(12, 16, num_layers=3, batch_first=True),
        lambda: torch.nn.LSTM(12, 16, proj_size=8, batch_first=True)]


@pytest.mark.parametrize("make", RNNS, ids=["lstm", "gru-bidirectional", "rnn-3-layers", "lstm-projected"])
def test_a_cudnn_rnns_flops_are_the_matrix_products_the_cpu_spells_out(make):
    # the same net's step on the CPU (every time step's cell ops, FlopCounterMode's own formulas) and on the
    # meta device as cuDNN's two ops (costs.rnn_flops, from the weights' shapes): the same matrix products,
    # but for the first step's state gradient, which the CPU skips (the zero state needs none) and cuDNN
    # computes; the input needs its gradient here, so that both compute it
    from crossover.sweeps.count_step import rnn_as_on_a_gpu

    def step(device):
        torch.manual_seed(0)
        net = make().to(device)
        x = torch.randn(4, 24, 12, device=device, requires_grad=True)
        return lambda: net(x)[0].sum().backward()

    with torch.backends.mkldnn.flags(enabled=False):  # else the CPU runs oneDNN's fused layer, uncounted too
        cpu = count(step("cpu"), False)
    with rnn_as_on_a_gpu():
        cudnn = count(step("meta"), False)
    assert cudnn["rnn_flops_per_step"] == cudnn["flops_per_step"] > 0  # a class of its own, at cuDNN's precision
    assert cudnn["conv_flops_per_step"] == cpu["rnn_flops_per_step"] == 0
    assert cudnn["rnn_flops_per_step"] == pytest.approx(cpu["matmul_flops_per_step"], rel=0.03)
    # two ops counted as cuDNN's kernels, a few per time step, layer and direction, in place of the cells'
    net = make()
    layers = net.num_layers * (2 if net.bidirectional else 1)
    assert cudnn["rnn_launches_per_step"] == sum(round(a * 24 * layers + b * layers + c) for a, b, c in RNN_KERNELS.values())
    assert cudnn["launches_per_step"] < cpu["launches_per_step"] / 2


@pytest.mark.parametrize("groups", [1, 4, 32])
def test_a_grouped_convolutions_backward_counts_what_it_computes(groups):
    # forward, input's gradient and weight's gradient: each a multiply-add per output element and filter element
    x = torch.randn(2, 32, 9, 9, requires_grad=True)
    w = torch.randn(16 if groups == 4 else 32, 32 // groups, 3, 3, requires_grad=True)

    def step():
        torch.nn.functional.conv2d(x, w, padding=1, groups=groups).sum().backward()
    out = torch.nn.functional.conv2d(x, w, padding=1, groups=groups)
    assert count(step, on_gpu=False)["conv_flops_per_step"] == 3 * 2 * out.numel() * w[0].numel()

"""Frozen parameters (requires_grad False) counted as PyTorch runs them: no gradient, no optimiser state, and the
backward's products only where autograd runs them, in the FLOPs, bytes, launches and peak that `crossover predict`
counts (sweeps/count_step.py `counted`, on job files written here) and in the memory decide judges a card by.

    python -m pytest -q tests/test_frozen.py

The two everyday cases: LoRA (every weight frozen, low-rank adapters on the attention's q and v trained) against
the same transformer fully trained, and a frozen CNN backbone with a new head (or its last block trained too).
"""

from pathlib import Path

import pandas as pd
import pytest

from crossover.analysis import decide
from crossover.sweeps.count_step import counted

F32 = 4  # bytes an element

# A decoder of LAYERS pre-norm blocks of WIDTH (q, k, v, o and a 4x MLP, no dropout), an embedding and a head over
# VOCAB; --param lora=1 freezes every weight and adapts q and v with rank RANK (LoRA: base(x) + B(A(x)))
WIDTH, HEADS, LAYERS, VOCAB, TOKENS, RANK, BATCH = 128, 4, 2, 128, 4, 4, 2
LORA_JOB = f"""
import torch
from torch import nn
from torch.nn import functional as F
from crossover import Data, Param, Workload


class LoRA(nn.Module):
    def __init__(self, base):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.a = nn.Parameter(torch.randn({RANK}, base.in_features) * 0.01)
        self.b = nn.Parameter(torch.zeros(base.out_features, {RANK}))

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.a), self.b)

class Block(nn.Module):
    def __init__(self, lora):
        super().__init__()
        w = {WIDTH}
        self.n1, self.n2 = nn.LayerNorm(w), nn.LayerNorm(w)
        self.q, self.k, self.v, self.o = (nn.Linear(w, w) for _ in range(4))
        if lora:
            self.q, self.v = LoRA(self.q), LoRA(self.v)
        self.mlp = nn.Sequential(nn.Linear(w, 4 * w), nn.GELU(), nn.Linear(4 * w, w))

    def forward(self, x):
        b, t, w = x.shape
        h = self.n1(x)
        q, k, v = (m(h).view(b, t, {HEADS}, -1).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, w))
        return x + self.mlp(self.n2(x))

class Decoder(nn.Module):
    def __init__(self, lora):
        super().__init__()
        self.embed = nn.Embedding({VOCAB}, {WIDTH})
        self.blocks = nn.Sequential(*(Block(lora) for _ in range({LAYERS})))
        self.head = nn.Linear({WIDTH}, {VOCAB})
        if lora:
            for name, p in self.named_parameters():
                p.requires_grad_(name.endswith((".a", ".b")))

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))

def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randint(0, {VOCAB}, (cfg.dataset_size, {TOKENS}), generator=g)
    return Data(x, torch.randint(0, {VOCAB}, (cfg.dataset_size, {TOKENS}), generator=g), None, None, source="random")

def step(model, x, y, loss):
    out = model(x)
    return loss(out.flatten(0, 1), y.flatten()), out

workload = Workload("lora_decoder", make_data=data, make_model=lambda cfg: Decoder(cfg.params["lora"] == 1),
                    make_loss=nn.CrossEntropyLoss, make_optimizer=lambda params, lr: torch.optim.AdamW(params, lr=lr),
                    defaults={{"batch_size": {BATCH}, "dataset_size": 64, "epochs": 1, "lr": 1e-3}}, metric="loss",
                    step=step, params={{"lora": Param(0, low=0, high=1, help="1: frozen, LoRA on q and v")}})
"""

# Two convolutions (3 -> 8 at 16 x 16, 8 -> 16 at stride 2) and a head of 10 classes; --param trains: 0 the head
# alone (the backbone frozen), 1 the last convolution and the head, 2 everything
IMAGE, C1, C2, CLASSES, IMAGES = 16, 8, 16, 10, 8
CNN_JOB = f"""
import torch
from torch import nn
from crossover import Data, Param, Workload

def model(cfg):
    net = nn.Sequential(nn.Conv2d(3, {C1}, 3, padding=1), nn.ReLU(), nn.Conv2d({C1}, {C2}, 3, stride=2, padding=1),
                        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear({C2}, {CLASSES}))
    frozen = {{0: net[:5], 1: net[:1], 2: net[:0]}}[cfg.params["trains"]]
    frozen.requires_grad_(False)
    return net

def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, 3, {IMAGE}, {IMAGE}, generator=g)
    return Data(x, torch.randint(0, {CLASSES}, (cfg.dataset_size,), generator=g), None, None, source="random")

workload = Workload("frozen_cnn", make_data=data, make_model=model, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
                    defaults={{"batch_size": {IMAGES}, "dataset_size": 64, "epochs": 1, "lr": 0.01}},
                    params={{"trains": Param(0, low=0, high=2, help="0: the head, 1: and the last conv, 2: all")}})
"""


def job(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return f"{path}:workload"


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    """The decoder's step counted fully trained and with LoRA, as `crossover predict` counts it."""
    ref = job(tmp_path_factory.mktemp("lora"), "lora_decoder", LORA_JOB)
    return {lora: counted(ref, BATCH, 64, {}, {"lora": lora}) for lora in (0, 1)}


def test_lora_trains_its_adapters_alone_and_holds_the_rest_as_frozen_weights(decoders):
    full, lora = decoders[0], decoders[1]
    adapters = LAYERS * 2 * RANK * (WIDTH + WIDTH)  # q's and v's A (rank x in) and B (out x rank) in every block
    assert (lora["n_params"], lora["n_frozen_params"]) == (adapters, full["n_params"])
    assert full["n_frozen_params"] == 0 and lora["counted_on"] == full["counted_on"] == "meta"
    # the tensors DDP's reducer hooks are the trained ones alone: an A and a B of q's and of v's in every block
    assert lora["n_param_tensors"] == LAYERS * 2 * 2 < full["n_param_tensors"]


def test_lora_counts_no_weight_gradient_product_for_a_frozen_layer_and_the_adapters_own(decoders):
    full, lora = decoders[0], decoders[1]
    n = BATCH * TOKENS  # rows every Linear multiplies
    per_block, head = 12 * WIDTH * WIDTH, WIDTH * VOCAB  # q, k, v, o (w x w each) and the MLP (2 x w x 4w)
    # fully trained, every Linear's forward, input gradient and weight gradient: 3 x 2 FLOPs a multiply-add; the
    # attention's kernels, the same in both (its backward computes q's, k's and v's gradients in one kernel)
    linears = 6 * n * (LAYERS * per_block + head)
    attention = full["matmul_flops_per_step"] - linears
    # with LoRA: each frozen Linear's forward, and its input's gradient only where that input needs one: not the
    # first block's q, k and v, whose input is the frozen embedding's; no weight gradient at all
    frozen = 2 * n * (LAYERS * per_block + head) + 2 * n * (LAYERS * per_block + head - 3 * WIDTH * WIDTH)
    # each adapter (in = out = WIDTH): x A^T and (x A^T) B^T forward; B's and A's weight gradients, the gradient
    # into A's output, and into x but in the first block (its input takes none)
    adapter = 2 * n * RANK * WIDTH
    adapters = 2 * LAYERS * 2 * adapter + 2 * (LAYERS - 1) * 4 * adapter + 2 * 3 * adapter
    assert lora["matmul_flops_per_step"] == frozen + adapters + attention
    assert lora["flops_per_step"] == lora["matmul_flops_per_step"] < 0.7 * full["flops_per_step"]


def test_lora_moves_no_weight_gradient_and_updates_only_the_adapters(decoders):
    full, lora = decoders[0], decoders[1]
    # AdamW's foreach update moves the same bytes a parameter whichever train, and fewer kernels over fewer tensors
    per_param = [d["optimizer_bytes_per_step"] / d["n_params"] for d in (full, lora)]
    assert per_param[1] == pytest.approx(per_param[0], rel=0.05)
    assert lora["optimizer_launches_per_step"] < full["optimizer_launches_per_step"]
    # besides the update, at least every frozen weight's gradient, written once, is not moved
    update = full["optimizer_bytes_per_step"] - lora["optimizer_bytes_per_step"]
    assert full["bytes_per_step"] - lora["bytes_per_step"] - update > F32 * lora["n_frozen_params"]
    assert lora["launches_per_step"] < full["launches_per_step"]


def test_lora_peaks_lower_by_the_gradients_and_adam_state_frozen_weights_do_not_have(decoders):
    full, lora = decoders[0], decoders[1]
    # a frozen parameter holds its weight alone: no gradient (4 bytes), no AdamW moments (8), and no share of the
    # foreach update's temporary (4), which the fully trained step's peak, in the update, holds; the activations
    # here are a few hundred kB beside 7 MB of parameters
    assert "peak_memory_note" not in lora
    assert full["peak_memory_bytes"] - lora["peak_memory_bytes"] == pytest.approx(
        16 * lora["n_frozen_params"], rel=0.1)
    # and decide judges a card by that, as `crossover predict` does
    needs = [decide.memory_needed(pd.DataFrame([d]), 64, False)["needs_bytes"] for d in (full, lora)]
    assert needs[0] - needs[1] == full["peak_memory_bytes"] - lora["peak_memory_bytes"]


@pytest.fixture(scope="module")
def cnns(tmp_path_factory):
    ref = job(tmp_path_factory.mktemp("cnn"), "frozen_cnn", CNN_JOB)
    return {trains: counted(ref, IMAGES, 64, {}, {"trains": trains}) for trains in (0, 1, 2)}


def test_a_frozen_backbones_backward_is_its_new_heads_alone(cnns):
    conv1 = 2 * IMAGES * C1 * IMAGE * IMAGE * 3 * 9  # FLOPs of each convolution's forward: 2 x outputs x a filter
    conv2 = 2 * IMAGES * C2 * (IMAGE // 2) ** 2 * C1 * 9
    head = 2 * IMAGES * C2 * CLASSES
    probe, last, full = cnns[0], cnns[1], cnns[2]
    assert probe["n_params"] == C2 * CLASSES + CLASSES and probe["peak_memory_bytes"] < full["peak_memory_bytes"]
    # the head alone: its weight's gradient; nothing reaches the backbone (no convolution_backward, not even the
    # input gradient its first frozen layers would pass on)
    assert (probe["conv_flops_per_step"], probe["conv_launches_per_step"]) == (conv1 + conv2, 2)
    assert probe["flops_per_step"] == conv1 + conv2 + head + head
    # the last convolution trained: its weight's gradient, not its input's (the frozen one below needs none); and
    # the head's input gradient, which now leads somewhere
    assert (last["conv_flops_per_step"], last["conv_launches_per_step"]) == (conv1 + 2 * conv2, 3)
    assert last["flops_per_step"] == conv1 + 2 * conv2 + 3 * head
    # everything trained: the first convolution's weight gradient (the images take none), the second's two
    assert full["flops_per_step"] == 2 * conv1 + 3 * conv2 + 3 * head
    assert probe["launches_per_step"] < last["launches_per_step"] < full["launches_per_step"]
    assert probe["optimizer_bytes_per_step"] < last["optimizer_bytes_per_step"] < full["optimizer_bytes_per_step"]

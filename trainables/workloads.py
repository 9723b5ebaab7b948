"""The seeds' five workloads and a transformer, each defined once through the public interface a user's
own workload uses (crossover/workload.py: factories, axes, checks, capabilities, grids); a seed's
defaults reproduce its seed. Nothing outside this file branches on a built-in's name (tests/test_layout.py checks).

| workload  | seed | model (defaults)                                   | loss, optimiser            | batch | data     | epochs |
|-----------|------|----------------------------------------------------|----------------------------|-------|----------|--------|
| disc      | 000  | doubling MLP 2->4->...->2^depth->2, ReLU, depth 10  | cross-entropy, SGD 0.1     | 100   | 1,000    | 100    |
| mnist_cnn | 001  | PyTorch MNIST example Net (conv 10, 20; fc 50)     | NLL, SGD 0.01 momentum 0.5 | 200   | 60,000   | 25     |
| lenet     | 002  | that seed's LeNet (conv 6 k3 p1, 16 k5; fc 120, 84)| summed cross-entropy, SGD 1e-3 | 100 | 60,000 | 50     |
| peaks     | 003  | MLP 2->20->5->1, ReLU                               | MSE, Adam 0.08             | full  | 200 x 200| 2000   |
| tabular   | 004  | MLP 16 -> depth x width -> 2, ReLU (2 x 64)        | cross-entropy, Adam 1e-3   | 64    | 10,000   | 20     |
| transformer | -  | nanoGPT-shaped, 2 blocks of width 64, context 64   | next-byte CE, AdamW 1e-3   | 32    | 1,024 seq| 3      |

Axes, per workload (anything else is refused):
- disc: depth = Linear layers (the seed's "layers"; 10 gives 703,142 parameters); width unset gives
  the seed's doubling widths, width set gives the plain MLP 2 -> width x (depth-1) -> 2.
- mnist_cnn, lenet: width multiplies the convolutions' channel counts; no depth axis.
- peaks: width set gives hidden layers depth x width (depth defaults to the seed's 2); unset, 20 -> 5.
- tabular: depth hidden layers x width nodes, the seed's "hidden layers" and "nodes".
- transformer: depth = blocks, width = embedding (a multiple of HEAD_DIM), context = tokens per
  sequence, dataset_size = training sequences of the stdlib's sources (crossover/data.py `text`).
- all: batch_size, dataset_size (peaks: a perfect square, N x N), epochs, lr.
Seed 004 does not print its values; its defaults here are ours, chosen to run in seconds on a CPU.
The image workloads' 60,000 samples are MNIST's; without MNIST they fall back as crossover/data.py says.
trainables/trial.py fills a config's unset axes from these defaults and checks every field; each workload's
`check` adds its own (peaks' perfect square, the transformer's heads), its capabilities say what else
may run it (fused: all but the transformer, whose AdamW the fused optimiser lacks; a pipeline: the
MLPs; engine 'triton': peaks), and its `grids` are sweeps/scaling.py's and the studies' (`with_grid`): a study
sweeps the built-ins that declare its grid, so that no other file keys anything by a built-in's name.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from crossover import data as datasets
from crossover.config import ConfigError, TrialConfig
from crossover.workload import Workload, filled_in


def mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers through `sizes` with ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class MnistNet(nn.Module):
    """pytorch/examples mnist `Net` as seed 001 ran it; `width` multiplies the channel counts."""

    def __init__(self, width: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10 * width, kernel_size=5)
        self.conv2 = nn.Conv2d(10 * width, 20 * width, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320 * width, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


class LeNet(nn.Module):
    """Seed 002's LeNet exactly as written there (no activations); `width` multiplies the channels."""

    def __init__(self, width: int = 1):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 6 * width, 3, stride=1, padding=1),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(6 * width, 16 * width, 5, stride=1, padding=0),
            nn.MaxPool2d(2, 2),
        )
        self.fc = nn.Sequential(nn.Linear(400 * width, 120), nn.Linear(120, 84), nn.Linear(84, 10))

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


HEAD_DIM = 16  # the transformer's attention heads: width / HEAD_DIM of them, so width must be a multiple


class Block(nn.Module):
    """A pre-LayerNorm transformer block, as nanoGPT's: causal self-attention, then a 4x GELU MLP."""

    def __init__(self, width: int):
        super().__init__()
        self.heads = width // HEAD_DIM
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    """A decoder-only character-level transformer shaped as nanoGPT's: token and position embeddings,
    `depth` pre-LN blocks of `width`, a final LayerNorm and an LM head tied to the token embedding.
    No dropout. Returns logits as (batch, vocabulary, context), the shape nn.CrossEntropyLoss takes."""

    def __init__(self, depth: int, width: int, context: int, vocab: int = datasets.TEXT_VOCAB):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight  # tied, as nanoGPT and GPT-2
        # nanoGPT's initialisation: weights N(0, 0.02), biases 0, each residual projection scaled by
        # 1/sqrt(2 depth); torch's defaults (embeddings N(0, 1)) started the loss near 8.7, above ln 256
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * depth) if name.endswith(("proj.weight", "mlp.2.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, idx):
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln(self.blocks(x))).transpose(1, 2)


_MLP = frozenset({"depth", "width"})


def _disc_model(cfg: TrialConfig) -> nn.Module:
    depth = filled_in(cfg.depth, "depth")
    if cfg.width is None:
        return mlp([2] + [2 ** k for k in range(2, depth + 1)] + [2])
    return mlp([2] + [cfg.width] * (depth - 1) + [2])


def _disc_check(cfg: TrialConfig) -> None:
    if cfg.width is None and filled_in(cfg.depth, "depth") < 2:
        raise ConfigError("depth", f"depth must be >= 2 for disc's doubling MLP (2 -> 4 -> ... -> 2^depth -> 2), "
                                   f"got {cfg.depth}")


def _peaks_model(cfg: TrialConfig) -> nn.Module:
    return mlp([2, 20, 5, 1] if cfg.width is None else [2] + [cfg.width] * filled_in(cfg.depth, "depth") + [1])


def _peaks_check(cfg: TrialConfig) -> None:
    size = filled_in(cfg.dataset_size, "dataset_size")
    if math.isqrt(size) ** 2 != size:
        n = math.isqrt(size)
        raise ConfigError("dataset_size", f"dataset_size must be a perfect square N*N for peaks (an N x N grid), "
                                          f"got {cfg.dataset_size}; nearest: {n * n} or {(n + 1) ** 2}")


def _transformer_check(cfg: TrialConfig) -> None:
    """Heads of HEAD_DIM each must split the width, and the sequences must fit the text."""
    width = filled_in(cfg.width, "width")
    if width % HEAD_DIM:
        raise ConfigError("width", f"width must be a multiple of {HEAD_DIM} for the transformer (attention heads of "
                                   f"{HEAD_DIM}), got {width}; nearest: {max(HEAD_DIM, width // HEAD_DIM * HEAD_DIM)}")
    try:
        datasets.check_text(filled_in(cfg.dataset_size, "dataset_size"), filled_in(cfg.context, "context"))
    except ValueError as exc:
        raise ConfigError("dataset_size", str(exc)) from None


def _images(cfg: TrialConfig) -> datasets.Data:
    return datasets.images(cfg.data, cfg.data_dir, filled_in(cfg.dataset_size, "dataset_size"), cfg.seed)


def _features(n: int) -> Callable[[TrialConfig], torch.Tensor]:
    return lambda cfg: torch.empty(n)


# sweeps/scaling.py's grids. Each varies the axes its seed was about; epochs are cut from the seeds' (100,
# 25, 50, 2000) because per-epoch times reach a stable median within a few epochs: 1 warm-up + the rest
# timed. 'smoke': the whole grid cut to about a minute on 2 cores, at sizes of 'default' (so the shipped
# reference rows have the same configurations to set beside), two per workload. 'seeds': each seed's own
# configuration (MNIST-sized image sets: synthetic unless --data-dir), fewer epochs, the same per-epoch work.
# The studies' grids, named '<study>-<its grid>' (`with_grid`; each script's docstring says what its study
# measures):
# - engines-*: sizes where every batch is full, as the graph engine requires (dataset_size a multiple of
#   batch_size); engines-fused-*: seed 003's trial at 40,000 points, the fused steps' member (docs/engines.md).
# - precision-*: a small and a large size of an MLP, a CNN and the transformer.
# - parity-cpu, parity-cuda: the epochs of studies/parity.py's runs of the 'seeds' configuration, warm-up
#   included: enough timed epochs for a median, few enough for 7 minutes in all on 16 cores and an H200 (disc
#   depth 12 about 0.5 s an epoch on a CPU there, peaks about 10 ms on a GPU); parity-smoke: its --smoke.
#   parity-ddp-smoke: studies/parity_ddp.py's --smoke, a tiny MLP on ddp-cpu:2 over gloo (its sizes its own).
# - studies/parallel.py: packed-*, the small trial packed K to a GPU; ddp-seed-*, seed 000's MLP at its own size
#   on ddp:N; parallel-*, the large MLP of the ddp and pipe studies: 8 hidden layers of 8,192, 537M parameters
#   (fp32, with Adam's state, 8.6 GB per replica): compute-bound steps, as DDP and pipelines are meant for;
#   32,768 samples, 8 steps an epoch at B = 4,096, about 2 s on one H200.
# - overhead: the trial studies/overhead.py repeats: a small step (2 -> 4 -> ... -> 64 -> 2), so epochs set its
#   length.
WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload(
        "disc", defaults=dict(depth=10, width=None, batch_size=100, dataset_size=1000, epochs=100, lr=0.1),
        axes=_MLP, shuffle=False, fusable=True, pipeline=True, check=_disc_check, sample=_features(2),
        make_data=lambda c: datasets.disc(filled_in(c.dataset_size, "dataset_size"), c.seed),
        make_model=_disc_model,
        make_loss=nn.CrossEntropyLoss,
        make_optimizer=lambda p, lr: torch.optim.SGD(p, lr=lr),
        grids={"default": {"depth": list(range(2, 13)), "epochs": [6]},  # seed 000: parameter count
               "smoke": {"depth": [2, 4], "epochs": [3]},
               "seeds": {"depth": [8, 9, 10, 11, 12], "epochs": [20]},
               "engines-default": {"depth": list(range(2, 13)), "epochs": [20]},
               "engines-smoke": {"depth": [2, 4], "epochs": [3]},
               "precision-default": {"depth": [6, 10], "epochs": [20]},
               "precision-smoke": {"depth": [4], "epochs": [3]},
               "parity-cpu": {"epochs": [6]}, "parity-cuda": {"epochs": [20]},
               "parity-smoke": {"depth": [6], "epochs": [4]}, "parity-ddp-smoke": {"depth": [2]},
               "packed-default": {"depth": [8], "epochs": [150]}, "packed-smoke": {"depth": [4], "epochs": [5]},
               "ddp-seed-default": {"epochs": [20]}, "ddp-seed-smoke": {"epochs": [5]},
               "overhead": {"depth": [6]}},
    ),
    Workload(
        "mnist_cnn", defaults=dict(depth=None, width=1, batch_size=200, dataset_size=60000, epochs=25, lr=0.01),
        axes=frozenset({"width"}), fusable=True, images=True, sample=lambda c: torch.empty(datasets.IMAGE_SHAPE),
        make_data=_images,
        make_model=lambda c: MnistNet(filled_in(c.width, "width")),
        make_loss=nn.NLLLoss,
        make_optimizer=lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.5),
        test_batch_size=800,
        grids={"default": {"width": [1, 2, 4, 8], "dataset_size": [1437], "epochs": [4]},  # all of digits
               "smoke": {"width": [1, 2], "dataset_size": [1437], "epochs": [2]},
               "seeds": {"epochs": [3]},
               "engines-default": {"dataset_size": [1400], "width": [1, 2, 4, 8], "epochs": [4]},
               "precision-default": {"width": [1, 4], "dataset_size": [1437], "epochs": [6]},
               "precision-smoke": {"width": [1], "dataset_size": [1437], "epochs": [2]},
               "parity-cpu": {"epochs": [4]}, "parity-cuda": {"epochs": [4]}},
    ),
    Workload(
        "lenet", defaults=dict(depth=None, width=1, batch_size=100, dataset_size=60000, epochs=50, lr=1e-3),
        axes=frozenset({"width"}), fusable=True, images=True, sample=lambda c: torch.empty(datasets.IMAGE_SHAPE),
        make_data=_images,
        make_model=lambda c: LeNet(filled_in(c.width, "width")),
        make_loss=lambda: nn.CrossEntropyLoss(reduction="sum"),  # the seed's size_average=False
        make_optimizer=lambda p, lr: torch.optim.SGD(p, lr=lr),
        # seed 002's loss is summed over the batch, so its step grows with the batch: past ~200 it diverges
        grids={"default": {"batch_size": [16, 32, 64, 100], "dataset_size": [1437], "epochs": [4]},
               "smoke": {"batch_size": [64, 100], "dataset_size": [1437], "epochs": [2]},
               "seeds": {"epochs": [3]},
               "engines-default": {"dataset_size": [1400], "batch_size": [25, 50, 100], "epochs": [4]},
               "parity-cpu": {"epochs": [4]}, "parity-cuda": {"epochs": [4]}},
    ),
    Workload(
        "peaks", defaults=dict(depth=2, width=None, batch_size=None, dataset_size=40000, epochs=2000, lr=0.08),
        axes=_MLP, metric="loss", shuffle=False, fusable=True, pipeline=True, kernel=True, check=_peaks_check,
        sample=_features(2),
        make_data=lambda c: datasets.peaks(filled_in(c.dataset_size, "dataset_size")),
        make_model=_peaks_model,
        make_loss=nn.MSELoss,
        make_optimizer=lambda p, lr: torch.optim.Adam(p, lr=lr),
        grids={"default": {"dataset_size": [100, 400, 2500, 10000, 40000, 160000], "epochs": [200]},  # seed: 40,000
               "smoke": {"dataset_size": [100, 400], "epochs": [20]},
               "seeds": {"dataset_size": [40000], "epochs": [2000]},
               "engines-default": {"dataset_size": [400, 2500, 10000, 40000, 160000], "epochs": [200]},
               "engines-smoke": {"dataset_size": [400], "epochs": [5]},
               "engines-fused-default": {"dataset_size": [40000], "epochs": [200]},
               "engines-fused-smoke": {"dataset_size": [400], "epochs": [5]},
               "parity-cpu": {"epochs": [100]}, "parity-cuda": {"epochs": [200]},
               "parity-smoke": {"dataset_size": [2500], "epochs": [40]}},
    ),
    Workload(
        "tabular", defaults=dict(depth=2, width=64, batch_size=64, dataset_size=10000, epochs=20, lr=1e-3),
        axes=_MLP, fusable=True, pipeline=True, sample=_features(datasets.TABULAR_FEATURES),
        make_data=lambda c: datasets.tabular(filled_in(c.dataset_size, "dataset_size"), c.seed),
        make_model=lambda c: mlp([datasets.TABULAR_FEATURES] + [filled_in(c.width, "width")] * filled_in(c.depth, "depth")
                                 + [2]),
        make_loss=nn.CrossEntropyLoss,
        make_optimizer=lambda p, lr: torch.optim.Adam(p, lr=lr),
        grids={"default": {"dataset_size": [1000, 10000, 100000], "width": [64, 256, 1024], "epochs": [3]},  # seed 004
               "smoke": {"dataset_size": [1000, 10000], "epochs": [2]},
               "seeds": {"epochs": [5]},
               "engines-default": {"dataset_size": [10240], "width": [64, 256, 1024], "epochs": [4]},
               "parity-cpu": {"epochs": [6]}, "parity-cuda": {"epochs": [6]},
               "parallel-default": {"depth": [8], "width": [8192], "dataset_size": [32768], "epochs": [3]},
               "parallel-smoke": {"depth": [8], "width": [64], "dataset_size": [2048], "epochs": [3]}},
    ),
    Workload(
        "transformer", defaults=dict(depth=2, width=64, batch_size=32, dataset_size=1024, epochs=3, lr=1e-3, context=64),
        axes=frozenset({"depth", "width", "context"}), metric="loss", check=_transformer_check,
        # AdamW (weight decay) is not among the fused optimiser's rules: not fusable
        sample=lambda c: torch.zeros(filled_in(c.context, "context"), dtype=torch.long),
        make_data=lambda c: datasets.text(filled_in(c.dataset_size, "dataset_size"), filled_in(c.context, "context")),
        make_model=lambda c: Transformer(filled_in(c.depth, "depth"), filled_in(c.width, "width"),
                                         filled_in(c.context, "context")),
        make_loss=nn.CrossEntropyLoss,  # per token, averaged over the batch's tokens
        make_optimizer=lambda p, lr: torch.optim.AdamW(p, lr=lr),
        # no seed: what people rent GPUs for, at sizes a 2-core laptop trains in seconds (35k to 1.6M parameters)
        grids={"default": {"width": [32, 64, 128, 256], "context": [32], "dataset_size": [512], "epochs": [3]},
               "smoke": {"width": [32, 64], "context": [32], "dataset_size": [512], "epochs": [2]},
               "seeds": {"epochs": [3]},
               "precision-default": {"width": [64, 256], "dataset_size": [1024], "epochs": [4]},
               "precision-smoke": {"width": [32], "context": [32], "dataset_size": [256], "epochs": [2]}},
    ),
]}


def with_grid(grid: str) -> dict[str, dict]:
    """The built-ins that declare the study grid `grid` ('engines-default', WORKLOADS' comment), each with it:
    what a study sweeps of them, in WORKLOADS' order."""
    return {name: wl.grids[grid] for name, wl in WORKLOADS.items() if grid in wl.grids}


def describe(model: nn.Module) -> str:
    """Short shape of a model: its Linear sizes, or its layer types."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    convs = [m.out_channels for m in model.modules() if isinstance(m, nn.Conv2d)]
    sizes = [linears[0].in_features] + [m.out_features for m in linears] if linears else []
    head = f"conv {'-'.join(map(str, convs))}; " if convs else ""
    return head + "fc " + "-".join(map(str, sizes))


def n_params(model: nn.Module) -> int:
    """The parameters that train (requires_grad): each has a gradient and the optimiser's state."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def n_frozen_params(model: nn.Module) -> int:
    """The parameters that do not train (requires_grad False: a fine-tuned model's frozen weights): held as weights
    alone, with no gradient and no optimiser state (torch.optim skips a parameter whose .grad is None)."""
    return sum(p.numel() for p in model.parameters() if not p.requires_grad)

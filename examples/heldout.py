"""A user's workload of families no reference row holds, at real sizes: to judge `crossover predict` on
models its fit never saw.

    crossover predict --workload examples/heldout.py:workload --param arch=unet --batch-size 32 \\
        --dataset-size 256 --epochs 1 --precision bf16
    python sweeps/reference.py --real --workload examples/heldout.py:workload --out /tmp/heldout   # on a GPU
    python sweeps/heldout_check.py docs/data/held-out-jobs-h200-2026-11-28.jsonl   # measured against predicted

One job file, one axis (`arch`) naming the network, and `tiny` (1: every network at a toy size, to check the
code on a CPU). Each is trained with AdamW over model.parameters() (frozen parameters have no gradient,
and torch.optim skips them) on random inputs and labels seeded by the trial's seed: timing only, no test
split.

- `unet`: a segmentation U-Net of 4 levels (64 to 1,024 channels; each a double 3x3 convolution with
  BatchNorm and ReLU, ConvTranspose2d up-sampling, skip connections concatenated, no nn.Linear) on
  3 x 256 x 256 images, a class a pixel of 21 (cross-entropy over every pixel).
- `mlp`: 3,072 inputs, 4 hidden layers of 4,096 (ReLU, no norm), 1,000 classes.
- `embbag`: DLRM-like: 8 nn.EmbeddingBag tables of 200,000 rows of 64 (mode 'sum', bags of 20 ids),
  a bottom MLP over 13 dense features, the pairwise dot products of the 9 vectors, a top MLP, one logit
  (binary cross-entropy).
- `customfn`: torchvision's ResNet-50 whose every ReLU is a swish written as a torch.autograd.Function
  (forward and backward by hand), 224 px, 1,000 classes.
- `lora_gpt2_small`, `lora_gpt2_medium`: GPT-2-sized decoders (12 x 768, 12 heads; 24 x 1,024, 16 heads)
  over 512 tokens, blocks of their own (q, k, v, o as nn.Linear, pre-norm, causal scaled_dot_product_attention),
  every weight frozen but rank-8 LoRA adapters on q and v; next-token loss over GPT-2's vocabulary.
- `frozen_resnet50`: torchvision's ResNet-50 frozen but layer4 and a new fc (BatchNorm left in training
  mode, as model.train() leaves it); `probe_vit_b_16`: torchvision's ViT-B/16 frozen but a new head
  (a linear probe). 224 px, 1,000 classes.
- `small_mixer` (an MLP-Mixer of 8 blocks of width 128 over 4-pixel patches) and `small_cnn` (three
  convolutions with BatchNorm) on 3 x 32 x 32 images, 10 classes: small enough that a GPU step is bound
  by the host's launches at small batches.
"""

from __future__ import annotations

import torch
import torchvision
from torch import nn
from torch.nn import functional as F

from crossover import ConfigError, Data, Param, TrialConfig, Workload

GPT2_VOCAB = 50_257
# name -> (what it takes: 'image' of IMAGE[arch] pixels, 'segmentation', 'features', 'recommender', 'tokens';
# whether it holds BatchNorm, which cannot normalise a last batch of one sample in training)
ARCHS = {
    "unet": ("segmentation", True),
    "mlp": ("features", False),
    "embbag": ("recommender", False),
    "customfn": ("image", True),
    "lora_gpt2_small": ("tokens", False),
    "lora_gpt2_medium": ("tokens", False),
    "frozen_resnet50": ("image", True),
    "probe_vit_b_16": ("image", False),
    "small_mixer": ("image", False),
    "small_cnn": ("image", True),
}
# Sizes, real and `tiny`: image pixels a side; U-Net (base width, classes); MLP (inputs, hidden width, hidden
# layers, classes); DLRM (tables, rows, dim, ids a bag, dense features); a decoder (layers, width, heads, tokens,
# vocabulary) by arch
REAL = {"unet_image": 256, "image": 224, "small_image": 32, "unet": (64, 21), "mlp": (3072, 4096, 4, 1000),
        "embbag": (8, 200_000, 64, 20, 13), "lora_gpt2_small": (12, 768, 12, 512, GPT2_VOCAB),
        "lora_gpt2_medium": (24, 1024, 16, 512, GPT2_VOCAB)}
TINY = {"unet_image": 32, "image": 32, "small_image": 32, "unet": (4, 3), "mlp": (48, 32, 4, 10),
        "embbag": (8, 100, 8, 4, 13), "lora_gpt2_small": (2, 32, 2, 16, 100), "lora_gpt2_medium": (2, 32, 2, 16, 100)}
LORA_RANK = 8


def sizes(cfg: TrialConfig) -> dict:
    return TINY if cfg.params["tiny"] else REAL


def image(cfg: TrialConfig) -> int:
    arch = cfg.params["arch"]
    return sizes(cfg)["unet_image" if arch == "unet" else "small_image" if arch.startswith("small") else "image"]


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """4 levels down (double convolutions, max-pooling), a bottom, and 4 up (a transposed convolution, the
    level's skip concatenated, a double convolution); a 1x1 convolution to `classes` scores a pixel."""

    def __init__(self, width: int, classes: int, levels: int = 4):
        super().__init__()
        widths = [width * 2 ** i for i in range(levels)]
        self.down = nn.ModuleList(double_conv(cin, cout) for cin, cout in zip([3, *widths[:-1]], widths))
        self.bottom = double_conv(widths[-1], 2 * widths[-1])
        self.up = nn.ModuleList(nn.ConvTranspose2d(2 * w, w, 2, stride=2) for w in reversed(widths))
        self.decode = nn.ModuleList(double_conv(2 * w, w) for w in reversed(widths))
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, block, skip in zip(self.up, self.decode, reversed(skips)):
            x = block(torch.cat([skip, up(x)], dim=1))
        return self.head(x)


def mlp(*widths: int, last_relu: bool = False) -> nn.Sequential:
    layers = []
    for cin, cout in zip(widths, widths[1:]):
        layers += [nn.Linear(cin, cout), nn.ReLU()]
    return nn.Sequential(*(layers if last_relu else layers[:-1]))


class DLRM(nn.Module):
    """Embedding bags (sum of a bag's rows) for the sparse features, a bottom MLP for the dense ones to the
    same width, their pairwise dot products (DLRM's interaction) beside the bottom's output, a top MLP."""

    def __init__(self, tables: int, rows: int, dim: int, dense: int):
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        self.bottom = mlp(dense, 8 * dim, 4 * dim, dim, last_relu=True)
        # the pairs (i < j) of the tables' vectors and the bottom's, a buffer so that it moves with the model
        self.register_buffer("pairs", torch.triu_indices(tables + 1, tables + 1, offset=1), persistent=False)
        self.top = mlp(dim + self.pairs.shape[1], 8 * dim, 4 * dim, 1)

    def forward(self, x: dict) -> torch.Tensor:
        dense = self.bottom(x["dense"])
        vectors = torch.stack([dense, *(table(x["ids"][:, t]) for t, table in enumerate(self.tables))], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([dense, dots], dim=1)).squeeze(1)


class SwishFunction(torch.autograd.Function):
    """x * sigmoid(x), its gradient written by hand: what a user's custom op looks like to autograd."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * s * (1 + x * (1 - s))


class Swish(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SwishFunction.apply(x)


def swapped(model: nn.Module) -> nn.Module:
    """`model` with every nn.ReLU replaced by Swish."""
    for name, child in model.named_children():
        setattr(model, name, Swish() if isinstance(child, nn.ReLU) else swapped(child))
    return model


class LoRA(nn.Module):
    """A frozen nn.Linear plus a trained low-rank update B(A(x)) (B zero at the start, as LoRA's paper has it)."""

    def __init__(self, base: nn.Linear, rank: int):
        super().__init__()
        self.base = base
        self.a = nn.Linear(base.in_features, rank, bias=False)
        self.b = nn.Linear(rank, base.out_features, bias=False)
        nn.init.zeros_(self.b.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.b(self.a(x))


class Block(nn.Module):
    """A GPT-2 block: pre-norm causal self-attention (explicit q, k, v, o) and a 4x GELU MLP, each residual."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))
        self.fc, self.proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        q, k, v = (p(h).unflatten(2, (self.heads, -1)).transpose(1, 2) for p in (self.q, self.k, self.v))
        x = x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2))
        return x + self.proj(F.gelu(self.fc(self.norm2(x))))


class Decoder(nn.Module):
    """Token and learned position embeddings, `layers` Blocks, a final norm and a head tied to the embedding."""

    def __init__(self, layers: int, width: int, heads: int, tokens: int, vocab: int):
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, width), nn.Embedding(tokens, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=0.02)  # GPT-2's

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.position(torch.arange(x.shape[1], device=x.device))
        return self.head(self.norm(self.blocks(h)))


def lora(model: Decoder, rank: int) -> Decoder:
    """`model` frozen, with LoRA adapters (trained) on every block's q and v."""
    model.requires_grad_(False)
    for block in model.blocks:
        block.q, block.v = LoRA(block.q, rank), LoRA(block.v, rank)
    return model


class Mixer(nn.Module):
    """An MLP-Mixer: `patch`-pixel patches embedded to `width`, `depth` blocks mixing tokens then channels."""

    def __init__(self, size: int, patch: int, width: int, depth: int, classes: int):
        super().__init__()
        tokens = (size // patch) ** 2
        self.embed = nn.Conv2d(3, width, patch, stride=patch)
        self.token_norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))
        self.token_mlps = nn.ModuleList(nn.Sequential(nn.Linear(tokens, tokens), nn.GELU(), nn.Linear(tokens, tokens))
                                        for _ in range(depth))
        self.channel_norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))
        self.channel_mlps = nn.ModuleList(mlp(width, 4 * width, width) for _ in range(depth))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2)  # (batch, tokens, width)
        for tn, tm, cn, cm in zip(self.token_norms, self.token_mlps, self.channel_norms, self.channel_mlps):
            x = x + tm(tn(x).transpose(1, 2)).transpose(1, 2)
            x = x + cm(cn(x))
        return self.head(self.norm(x).mean(1))


def small_cnn(width: int) -> nn.Sequential:
    def conv(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
    return nn.Sequential(*conv(3, width), nn.MaxPool2d(2), *conv(width, 2 * width), nn.MaxPool2d(2),
                         *conv(2 * width, 4 * width), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, 10))


def make_model(cfg: TrialConfig) -> nn.Module:
    arch, s, tiny = cfg.params["arch"], sizes(cfg), cfg.params["tiny"]
    if arch == "unet":
        return UNet(*s["unet"])
    if arch == "mlp":
        inputs, width, layers, classes = s["mlp"]
        return mlp(inputs, *[width] * layers, classes)
    if arch == "embbag":
        tables, rows, dim, _, dense = s["embbag"]
        return DLRM(tables, rows, dim, dense)
    if arch == "customfn":
        return swapped(torchvision.models.resnet50(weights=None))
    if arch.startswith("lora_"):
        return lora(Decoder(*s[arch]), LORA_RANK)
    if arch == "frozen_resnet50":
        model = torchvision.models.resnet50(weights=None).requires_grad_(False)
        model.layer4.requires_grad_(True)
        model.fc = nn.Linear(model.fc.in_features, 1000)
        return model
    if arch == "probe_vit_b_16":
        model = (torchvision.models.VisionTransformer(32, 16, 2, 2, 32, 64) if tiny else
                 torchvision.models.vit_b_16(weights=None)).requires_grad_(False)
        model.heads.head = nn.Linear(model.heads.head.in_features, 1000)
        return model
    if arch == "small_mixer":
        return Mixer(image(cfg), 4, 16 if tiny else 128, 2 if tiny else 8, 10)
    return small_cnn(8 if tiny else 32)


def make_data(cfg: TrialConfig) -> Data:
    arch, s, n = cfg.params["arch"], sizes(cfg), cfg.dataset_size
    kind = ARCHS[arch][0]
    g = torch.Generator().manual_seed(cfg.seed)
    if kind == "segmentation":
        side, classes = image(cfg), s["unet"][1]
        x, y = torch.randn(n, 3, side, side, generator=g), torch.randint(0, classes, (n, side, side), generator=g)
    elif kind == "features":
        inputs, _, _, classes = s["mlp"]
        x, y = torch.randn(n, inputs, generator=g), torch.randint(0, classes, (n,), generator=g)
    elif kind == "recommender":
        tables, rows, _, bag, dense = s["embbag"]
        x = {"dense": torch.randn(n, dense, generator=g), "ids": torch.randint(0, rows, (n, tables, bag), generator=g)}
        y = torch.randint(0, 2, (n,), generator=g).float()
    elif kind == "tokens":
        _, _, _, tokens, vocab = s[arch]
        # the targets are the next tokens (random here, as the inputs are)
        x, y = torch.randint(0, vocab, (n, tokens), generator=g), torch.randint(0, vocab, (n, tokens), generator=g)
    else:
        side, classes = image(cfg), 10 if arch.startswith("small") else 1000
        x, y = torch.randn(n, 3, side, side, generator=g), torch.randint(0, classes, (n,), generator=g)
    return Data(x, y, None, None, "random inputs (timing only)")


class Loss(nn.Module):
    """Cross-entropy over class indices (a class a sample, a pixel or a token), binary cross-entropy on a
    logit where the targets are 0/1 floats (`embbag`): one loss for every arch of the file."""

    def forward(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if y.is_floating_point():
            return F.binary_cross_entropy_with_logits(out, y)
        return F.cross_entropy(out.flatten(0, 1) if out.dim() == 3 else out, y.flatten() if out.dim() == 3 else y)


def check(cfg: TrialConfig) -> None:
    """Refuses a last batch of one sample to the nets with BatchNorm: it cannot normalise one value in training."""
    if ARCHS[cfg.params["arch"]][1] and (cfg.dataset_size - 1) % cfg.batch_size == 0:
        raise ConfigError("dataset_size", f"dataset_size {cfg.dataset_size:,} in batches of {cfg.batch_size} leaves a "
                                          "batch of one sample, which BatchNorm cannot normalise in training: change "
                                          "dataset_size or batch_size")


workload = Workload(
    "heldout",
    make_data=make_data,
    make_model=make_model,
    make_loss=Loss,
    make_optimizer=lambda params, lr: torch.optim.AdamW(params, lr=lr),
    defaults={"batch_size": 32, "dataset_size": 256, "epochs": 4, "lr": 1e-3},
    params={"arch": Param("unet", choices=tuple(ARCHS), help="the network (examples/heldout.py ARCHS)"),
            "tiny": Param(0, low=0, high=1, help="1: every network at a toy size, to check the code on a CPU")},
    metric="loss",
    check=check,
    grids={"default": {"dataset_size": [256], "epochs": [4]}, "smoke": {"dataset_size": [8], "epochs": [2]}},
)

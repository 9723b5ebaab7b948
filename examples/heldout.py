"""A user's workload of families no reference row holds, at real sizes: to judge `crossover predict` on
models its fit never saw.

    crossover predict --workload examples/heldout.py:workload --param arch=unet --batch-size 32 \\
        --dataset-size 256 --epochs 1 --precision bf16
    python studies/reference.py --real --workload examples/heldout.py:workload --out /tmp/heldout   # on a GPU
    python studies/heldout_check.py docs/data/held-out-jobs-h200-2026-11-28.jsonl   # measured against predicted

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
- `video_r3d`: torchvision's R3D-18 (3-D convolutions) on clips of 3 x 16 x 112 x 112, 400 classes (Kinetics').
- `fasterrcnn`: torchvision's Faster R-CNN (ResNet-50 FPN, every layer trained, 91 classes: COCO's) in training
  mode on 3 x 512 x 512 images, which its transform leaves at that size (min_size = max_size = 512), each with 1-4
  random boxes; its loss the sum of its four (`step` hands it the images and the boxes as it takes them).
- `mamba_scan`: a Mamba-style language model of 4 blocks of width 256 (state 16, inner width 512) whose selective
  scan is a Python loop over the 256 tokens (`MambaBlock`); next-token loss over GPT-2's vocabulary.
- `moe`: a decoder of 6 blocks of width 512, 8 heads, 256 tokens, each block's feed-forward 8 experts with top-2
  routing written the common way (`MoE`: topk, nonzero, index_add_); next-token loss over GPT-2's vocabulary.
- `wavenet`: a WaveNet of 2 stacks of 10 dilated causal convolutions (dilations 1 to 512; 64 residual and 128 skip
  channels; gated tanh x sigmoid) over 16,000 samples of mu-law audio, 256 classes a sample.
- `frozen_bert`: a BERT-base-sized encoder (torch's nn.TransformerEncoder, 12 x 768, 12 heads, post-norm, GELU)
  over 128 tokens of BERT's vocabulary, frozen but its top two layers and a new head (pooler and classifier),
  2 classes.
- `pointnet`: PointNet's classifier (shared MLPs 3-64-128-1024 as 1x1 Conv1d, a max-pool over the points, FC
  512-256-40, BatchNorm throughout, no T-Nets) on 1,024 points a sample, 40 classes (ModelNet40's).

studies/reference.py's UNSEEN holds two batch sizes an arch that a user would pick, as --real times them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torchvision
from torch import nn
from torch.nn import functional as F
from torchvision.models.detection import FasterRCNN

from crossover import ConfigError, Data, Param, TrialConfig, Workload
from crossover.workload import default_step

GPT2_VOCAB = 50_257
BERT_VOCAB = 30_522
# name -> (what it takes: 'image' of IMAGE[arch] pixels, 'segmentation', 'features', 'recommender', 'tokens' (a
# class a token), 'sentence' (tokens, a class a sequence), 'audio', 'points', 'video', 'detection' (images and boxes);
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
    "video_r3d": ("video", True),
    "fasterrcnn": ("detection", True),
    "mamba_scan": ("tokens", False),
    "moe": ("tokens", False),
    "wavenet": ("audio", False),
    "frozen_bert": ("sentence", False),
    "pointnet": ("points", True),
}
# Sizes, real and `tiny`: image pixels a side; U-Net (base width, classes); MLP (inputs, hidden width, hidden
# layers, classes); DLRM (tables, rows, dim, ids a bag, dense features); a decoder (layers, width, heads, tokens,
# vocabulary) by arch; a clip (frames, pixels a side, classes); detection (pixels a side, most boxes an image,
# classes, the background's included); the scan (layers, width, state, tokens, vocabulary); the mixture (layers,
# width, heads, experts, tokens, vocabulary); WaveNet (stacks, layers a stack, residual and skip channels, samples,
# classes); the encoder (layers, width, heads, tokens, vocabulary, classes); PointNet (points, classes).
REAL = {"unet_image": 256, "image": 224, "small_image": 32, "unet": (64, 21), "mlp": (3072, 4096, 4, 1000),
        "embbag": (8, 200_000, 64, 20, 13), "lora_gpt2_small": (12, 768, 12, 512, GPT2_VOCAB),
        "lora_gpt2_medium": (24, 1024, 16, 512, GPT2_VOCAB), "video_r3d": (16, 112, 400), "fasterrcnn": (512, 4, 91),
        "mamba_scan": (4, 256, 16, 256, GPT2_VOCAB), "moe": (6, 512, 8, 8, 256, GPT2_VOCAB),
        "wavenet": (2, 10, 64, 128, 16_000, 256), "frozen_bert": (12, 768, 12, 128, BERT_VOCAB, 2),
        "pointnet": (1024, 40)}
TINY = {"unet_image": 32, "image": 32, "small_image": 32, "unet": (4, 3), "mlp": (48, 32, 4, 10),
        "embbag": (8, 100, 8, 4, 13), "lora_gpt2_small": (2, 32, 2, 16, 100), "lora_gpt2_medium": (2, 32, 2, 16, 100),
        "video_r3d": (2, 16, 10), "fasterrcnn": (64, 4, 5), "mamba_scan": (2, 16, 4, 16, 100),
        "moe": (2, 32, 2, 4, 16, 100), "wavenet": (1, 4, 8, 16, 64, 16), "frozen_bert": (3, 32, 2, 16, 100, 2),
        "pointnet": (64, 40)}
LORA_RANK = 8
TOP_K = 2  # experts a token of `moe`
# `fasterrcnn` at its tiny size: proposals kept before and after the RPN's NMS and regions sampled a training image,
# about a tenth of torchvision's (2,000, 2,000, 512): its box head over 512 regions an image would be most of a
# tiny step on a CPU (2 s on one thread as it is, 2026-12-07)
TINY_DETECTOR = {"rpn_pre_nms_top_n_train": 200, "rpn_post_nms_top_n_train": 100, "box_batch_size_per_image": 64}


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


def ffn(width: int) -> nn.Sequential:
    """A transformer's feed-forward: 4x wider, GELU."""
    return nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))


class Block(nn.Module):
    """A GPT-2 block: pre-norm causal self-attention (explicit q, k, v, o) and a feed-forward (`ffn`, or the
    one given: a mixture of experts), each residual."""

    def __init__(self, width: int, heads: int, feed_forward: nn.Module | None = None):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))
        self.ffn = ffn(width) if feed_forward is None else feed_forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        q, k, v = (p(h).unflatten(2, (self.heads, -1)).transpose(1, 2) for p in (self.q, self.k, self.v))
        x = x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2))
        return x + self.ffn(self.norm2(x))


class MoE(nn.Module):
    """`experts` feed-forwards (`ffn`), each token sent to the `top` its router scores highest and their outputs
    summed, weighted by the router's softmax renormalised over those `top`: routed as most PyTorch code of a
    mixture does it, a gather of each expert's tokens (`nonzero`) and a scatter back (`index_add_`), so that each
    expert's batch is as large as the data makes it (a shape no count knows before the step runs)."""

    def __init__(self, width: int, experts: int, top: int):
        super().__init__()
        self.top = top
        self.router = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(ffn(width) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(0, 1)  # (tokens, width)
        weights, chosen = torch.topk(self.router(flat).softmax(-1), self.top, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            # under autocast the expert's output is bf16, the sum the residual stream's dtype
            out.index_add_(0, token, (expert(flat[token]) * weights[token, slot, None]).to(out.dtype))
        return out.view_as(x)


class Decoder(nn.Module):
    """Token and learned position embeddings, `layers` Blocks (their feed-forward `feed_forward()`'s where given),
    a final norm and a head tied to the embedding."""

    def __init__(self, layers: int, width: int, heads: int, tokens: int, vocab: int,
                 feed_forward: Callable[[], nn.Module] | None = None):
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, width), nn.Embedding(tokens, width)
        self.blocks = nn.Sequential(*(Block(width, heads, feed_forward and feed_forward()) for _ in range(layers)))
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


class MambaBlock(nn.Module):
    """Mamba's block (Gu and Dao, 2023), its selective scan written as the recurrence it is, a Python loop over
    time: a pre-norm, an in-projection to the inner width and a gate, a depthwise causal convolution, then from
    each token its own step size delta_t and projections B_t, C_t; the state h_t = exp(delta_t A) h_{t-1} +
    delta_t B_t x_t, the output y_t = C_t . h_t + D x_t, gated, projected back and added to the residual."""

    def __init__(self, width: int, state: int, expand: int = 2, kernel: int = 4):
        super().__init__()
        inner, self.state, self.rank = expand * width, state, math.ceil(width / 16)  # delta's rank: Mamba's
        self.norm = nn.LayerNorm(width)
        self.in_proj = nn.Linear(width, 2 * inner, bias=False)
        self.conv = nn.Conv1d(inner, inner, kernel, groups=inner, padding=kernel - 1)
        self.x_proj = nn.Linear(inner, self.rank + 2 * state, bias=False)
        self.dt_proj = nn.Linear(self.rank, inner)
        # A = -exp(a_log), a row 1..state for each channel: Mamba's (S4D-real) initialisation
        self.a_log = nn.Parameter(torch.log(torch.arange(1, state + 1, dtype=torch.float32)).repeat(inner, 1))
        self.d = nn.Parameter(torch.ones(inner))
        self.out_proj = nn.Linear(inner, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        u, gate = self.in_proj(self.norm(x)).chunk(2, dim=-1)  # (batch, tokens, inner) each
        # causal: the convolution pads both ends, and the outputs past the last token are cut
        u = F.silu(self.conv(u.transpose(1, 2))[..., :length].transpose(1, 2))
        dt, b, c = self.x_proj(u).split([self.rank, self.state, self.state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))  # (batch, tokens, inner)
        decay = torch.exp(delta.unsqueeze(-1) * -torch.exp(self.a_log))  # (batch, tokens, inner, state)
        drive = (delta * u).unsqueeze(-1) * b.unsqueeze(2)  # delta_t B_t x_t, the same shape
        # unbound once: a step's slice t of each, where indexing [:, t] would give each step's backward a
        # gradient of the whole tensor to fill
        decays, drives, cs = decay.unbind(1), drive.unbind(1), c.unsqueeze(-1).unbind(1)
        h = decay.new_zeros(decay.shape[0], decay.shape[2], self.state)  # (batch, inner, state)
        ys = []
        for t in range(length):
            h = decays[t] * h + drives[t]
            ys.append((h @ cs[t]).squeeze(-1))  # C_t . h_t: (batch, inner)
        y = torch.stack(ys, dim=1) + u * self.d
        return x + self.out_proj(y * F.silu(gate))


class Mamba(nn.Module):
    """A token embedding, `layers` MambaBlocks, a final norm and a head tied to the embedding."""

    def __init__(self, layers: int, width: int, state: int, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.Sequential(*(MambaBlock(width, state) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=0.02)  # GPT-2's, as Decoder's: logits near 0 at the start

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.embed(x))))


class WaveNet(nn.Module):
    """WaveNet (van den Oord et al., 2016): the previous samples (mu-law classes) embedded to `residual` channels,
    `stacks` x `layers` gated layers (a causal convolution of width 2 dilated 1, 2, 4, ... to tanh x sigmoid, a
    1x1 convolution back to the residual and one to the skip channels), the skips summed, ReLU, two 1x1
    convolutions to `classes` scores a sample."""

    def __init__(self, stacks: int, layers: int, residual: int, skip: int, classes: int):
        super().__init__()
        self.dilations = [2 ** i for i in range(layers)] * stacks
        self.embed = nn.Embedding(classes, residual)
        self.filters = nn.ModuleList(nn.Conv1d(residual, 2 * residual, 2, dilation=d) for d in self.dilations)
        self.residuals = nn.ModuleList(nn.Conv1d(residual, residual, 1) for _ in self.dilations)
        self.skips = nn.ModuleList(nn.Conv1d(residual, skip, 1) for _ in self.dilations)
        self.head = nn.Sequential(nn.ReLU(), nn.Conv1d(skip, classes, 1), nn.ReLU(), nn.Conv1d(classes, classes, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x).transpose(1, 2)  # (batch, residual, samples)
        skips = torch.zeros((), device=h.device)
        for d, filt, res, skip in zip(self.dilations, self.filters, self.residuals, self.skips):
            tanh, sigmoid = filt(F.pad(h, (d, 0))).chunk(2, dim=1)  # padded on the left: causal
            z = torch.tanh(tanh) * torch.sigmoid(sigmoid)
            h = h + res(z)
            skips = skips + skip(z)
        return self.head(skips).transpose(1, 2)  # (batch, samples, classes): a sample's scores last, as a token's


class Encoder(nn.Module):
    """BERT's shape: token and learned position embeddings, LayerNorm and dropout, torch's post-norm
    nn.TransformerEncoder (GELU, dropout 0.1), and a head on the first token (a tanh pooler, a classifier)."""

    def __init__(self, layers: int, width: int, heads: int, tokens: int, vocab: int, classes: int):
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, width), nn.Embedding(tokens, width)
        self.norm, self.dropout = nn.LayerNorm(width), nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, 0.1, "gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dropout(self.norm(self.embed(x) + self.position(torch.arange(x.shape[1], device=x.device))))
        return self.head(self.encoder(h)[:, 0])


def pointnet(classes: int) -> nn.Sequential:
    """PointNet's classifier on (batch, 3, points): shared MLPs (1x1 convolutions), a max-pool over the points,
    fully connected layers; BatchNorm after each but the last, dropout before it (PointNet's 0.7 kept)."""
    def shared(cin, cout):
        return [nn.Conv1d(cin, cout, 1), nn.BatchNorm1d(cout), nn.ReLU()]

    def fc(cin, cout):
        return [nn.Linear(cin, cout), nn.BatchNorm1d(cout), nn.ReLU()]
    return nn.Sequential(*shared(3, 64), *shared(64, 128), *shared(128, 1024), nn.AdaptiveMaxPool1d(1), nn.Flatten(),
                         *fc(1024, 512), *fc(512, 256), nn.Dropout(0.3), nn.Linear(256, classes))


def detection_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: nn.Module):
    """A detector's step: its images and, built from `y` (a padded (label, x1, y1, x2, y2) a box; label -1 the
    padding), the targets as torchvision takes them, a dict of boxes and labels an image; its loss the sum of the
    losses it returns. Every other arch's is `model(x)` and the loss (default_step)."""
    if not isinstance(model, FasterRCNN):
        return default_step(model, x, y, loss)
    targets = [{"boxes": boxes[boxes[:, 0] >= 0, 1:], "labels": boxes[boxes[:, 0] >= 0, 0].long()} for boxes in y]
    total = sum(model(list(x), targets).values())
    return total, total


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
    if arch == "small_cnn":
        return small_cnn(8 if tiny else 32)
    if arch == "video_r3d":
        return torchvision.models.video.r3d_18(weights=None, num_classes=s[arch][2])
    if arch == "fasterrcnn":
        side, _, classes = s[arch]
        # the images' own size at both bounds: the transform leaves them as they are (but for its normalisation)
        return torchvision.models.detection.fasterrcnn_resnet50_fpn(
            weights=None, weights_backbone=None, num_classes=classes, min_size=side, max_size=side,
            **(TINY_DETECTOR if tiny else {}))
    if arch == "mamba_scan":
        layers, width, state, _, vocab = s[arch]
        return Mamba(layers, width, state, vocab)
    if arch == "moe":
        layers, width, heads, experts, tokens, vocab = s[arch]
        return Decoder(layers, width, heads, tokens, vocab, lambda: MoE(width, experts, TOP_K))
    if arch == "wavenet":
        stacks, layers, residual, skip, _, classes = s[arch]
        return WaveNet(stacks, layers, residual, skip, classes)
    if arch == "frozen_bert":
        model = Encoder(*s[arch]).requires_grad_(False)
        model.encoder.layers[-2:].requires_grad_(True)
        model.head.requires_grad_(True)
        return model
    return pointnet(s[arch][1])


def boxes(n: int, side: int, most: int, classes: int, g: torch.Generator) -> torch.Tensor:
    """`n` images' boxes as one tensor a batch can be sliced from: (n, most, 5), each row (label, x1, y1, x2, y2) in
    pixels, 1 to `most` boxes an image (labels 1 to classes - 1: 0 is the background), the rest padding (label -1).
    Each box starts in the image's first 60% and spans 10-40% of a side: inside the image, never empty."""
    count = torch.randint(1, most + 1, (n, 1), generator=g)
    labels = torch.randint(1, classes, (n, most), generator=g).float()
    labels[torch.arange(most) >= count] = -1
    corner = torch.rand(n, most, 2, generator=g) * 0.6 * side
    size = (0.1 + 0.3 * torch.rand(n, most, 2, generator=g)) * side
    return torch.cat([labels.unsqueeze(-1), corner, corner + size], dim=-1)


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
        *_, tokens, vocab = s[arch]
        # the targets are the next tokens (random here, as the inputs are)
        x, y = torch.randint(0, vocab, (n, tokens), generator=g), torch.randint(0, vocab, (n, tokens), generator=g)
    elif kind == "sentence":
        *_, tokens, vocab, classes = s[arch]
        x, y = torch.randint(0, vocab, (n, tokens), generator=g), torch.randint(0, classes, (n,), generator=g)
    elif kind == "audio":
        *_, samples, classes = s[arch]
        # mu-law classes: the previous samples in, the next ones the targets
        x, y = (torch.randint(0, classes, (n, samples), generator=g) for _ in range(2))
    elif kind == "points":
        points, classes = s[arch]
        x, y = torch.randn(n, 3, points, generator=g), torch.randint(0, classes, (n,), generator=g)
    elif kind == "video":
        frames, side, classes = s[arch]
        x, y = torch.randn(n, 3, frames, side, side, generator=g), torch.randint(0, classes, (n,), generator=g)
    elif kind == "detection":
        x, y = torch.rand(n, 3, s[arch][0], s[arch][0], generator=g), boxes(n, *s[arch], g)
    else:
        side, classes = image(cfg), 10 if arch.startswith("small") else 1000
        x, y = torch.randn(n, 3, side, side, generator=g), torch.randint(0, classes, (n,), generator=g)
    return Data(x, y, None, None, "random inputs (timing only)")


class Loss(nn.Module):
    """Cross-entropy over class indices (a class a sample, a pixel, a token or a sample of audio; scores a token's
    or an audio sample's last), binary cross-entropy on a logit where the targets are 0/1 floats (`embbag`): one
    loss for every arch of the file but the detector's, which is its own (`detection_step`)."""

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
    step=detection_step,
    check=check,
    grids={"default": {"dataset_size": [256], "epochs": [4]}, "smoke": {"dataset_size": [8], "epochs": [2]}},
)

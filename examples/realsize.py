"""A user's workload at the sizes people rent GPUs for: 224-pixel vision models, BERT- and GPT-2-sized
transformers, recurrent nets over speech frames and text.

    crossover predict --workload examples/realsize.py:workload --param arch=vit_b_16 --batch-size 64 \\
        --dataset-size 100000 --epochs 10 --precision bf16
    python sweeps/reference.py --real --out /tmp/ref          # the real-sized reference set, plain loop, on a GPU

One job file, one axis (`arch`) naming the network, and `tokens` for the text models' sequence length (0:
the network's own, ARCHS). Each is trained with AdamW on random inputs and labels seeded by the trial's
seed, since nothing is downloaded at run time: timing only, no test split.

- 224-pixel images, 1,000 classes: torchvision's own networks (weights=None), and `vit_s_16`, torchvision's
  VisionTransformer at ViT-S/16's size (12 layers of width 384, 6 heads), which torchvision does not name.
- Text: `TextTransformer`, token and position embeddings and nn.TransformerEncoder blocks (GELU, dropout
  0.1; attention through scaled_dot_product_attention). The encoders (BERT-sized: post-norm) classify
  the first token into 2 classes; the decoders (GPT-2-sized: pre-norm, causal) predict every next token
  over GPT-2's vocabulary (their loss is the mean over every token: `step`).
- Recurrent: `lstm_speech`, a 3-layer LSTM over 80-dimensional speech frames classifying 35 keywords;
  `gru_text`, an embedding and a 2-layer GRU classifying a text into 2 classes.
- Fine-tuned (FINE_TUNED): every weight frozen (requires_grad False) but a few. `lora_gpt2_small` and
  `lora_gpt2_medium`, GPT-2-sized decoders at 512 tokens with LoRA adapters of rank 8 on each block's attention q
  and v (`LoRADecoder`); `frozen_resnet50`, ResNet-50 with its last block (layer4) and head trained;
  `probe_vit_b_16`, ViT-B/16 with its head alone trained (linear probing).
"""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from crossover import ConfigError, Data, Param, TrialConfig, Workload

BERT_VOCAB, GPT2_VOCAB = 30_522, 50_257
# name -> (family, what it is built from, its shape); the text models' shape is (layers, width, heads, tokens)
ARCHS = {
    "resnet50": ("cnn", "torchvision", None),
    "resnet101": ("cnn", "torchvision", None),
    "convnext_tiny": ("cnn", "torchvision", None),
    "efficientnet_b0": ("cnn", "torchvision", None),
    "mobilenet_v3_large": ("cnn", "torchvision", None),
    "regnet_y_1_6gf": ("cnn", "torchvision", None),
    "vit_b_16": ("vision transformer", "torchvision", None),
    "vit_s_16": ("vision transformer", "vit", (12, 384, 6, 1536)),
    "swin_t": ("vision transformer", "torchvision", None),
    "bert_base": ("text transformer", "encoder", (12, 768, 12, 128)),
    "bert_large": ("text transformer", "encoder", (24, 1024, 16, 512)),
    "gpt2_small": ("text transformer", "decoder", (12, 768, 12, 1024)),
    "gpt2_medium": ("text transformer", "decoder", (24, 1024, 16, 1024)),
    "gpt2_large": ("text transformer", "decoder", (36, 1280, 20, 1024)),
    "lstm_speech": ("recurrent", "lstm", (3, 768, 80, 300)),  # layers, hidden, features a frame, frames
    "gru_text": ("recurrent", "gru", (2, 512, 256, 256)),  # layers, hidden, embedding width, tokens
}
IMAGE = 224
KEYWORDS = 35  # lstm_speech's classes (a keyword-spotting set's size)

# --- Fine-tuned networks: frozen weights (requires_grad False), a few of them trained ---------------------------
# The everyday way to train a large network today: its weights frozen, so that they take no gradient, no optimiser
# state and no weight-gradient product, but for a few. name -> (its ARCHS entry, which sets its data and sequence
# length; what trains: 'lora', adapters of rank LORA_RANK on each block's attention q and v (`LoRADecoder`), or the
# named children of the torchvision network the name ends in)
FINE_TUNED = {
    "lora_gpt2_small": (("text transformer", "decoder", (12, 768, 12, 512)), "lora"),
    "lora_gpt2_medium": (("text transformer", "decoder", (24, 1024, 16, 512)), "lora"),
    "frozen_resnet50": (("cnn", "torchvision", None), ("layer4", "fc")),  # the last block and the head
    "probe_vit_b_16": (("vision transformer", "torchvision", None), ("heads",)),  # linear probing: the head alone
}
ARCHS.update({name: entry for name, (entry, _) in FINE_TUNED.items()})
LORA_RANK, LORA_ALPHA = 8, 16  # an adapter's rank, and its output's scale alpha / rank (PEFT's LoraConfig's names)


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus a trained low-rank update, as PEFT's LoRA: base(x) + B(A(x)) x alpha / rank, with A
    (rank x in) small and random and B (out x rank) zero, so that training starts from the frozen layer's output."""

    def __init__(self, base: nn.Linear, rank: int = LORA_RANK, alpha: int = LORA_ALPHA):
        super().__init__()
        self.base, self.scale = base.requires_grad_(False), alpha / rank
        self.a = nn.Parameter(torch.randn(rank, base.in_features) / base.in_features ** 0.5)
        self.b = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + nn.functional.linear(nn.functional.linear(x, self.a), self.b) * self.scale


class LoRABlock(nn.Module):
    """A pre-norm decoder block as nn.TransformerEncoderLayer's (GELU, dropout 0.1 in the same three places and on
    the attention's weights), but with its attention's q, k, v and o as Linear layers of their own, where
    nn.MultiheadAttention's one fused in_proj gives LoRA no q or v to adapt; q and v adapted."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))
        self.q, self.v = LoRALinear(self.q), LoRALinear(self.v)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * width, width))
        self.drop1, self.drop2 = nn.Dropout(0.1), nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, w = x.shape
        h = self.norm1(x)
        q, k, v = (m(h).view(b, t, self.heads, w // self.heads).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0, is_causal=True)
        x = x + self.drop1(self.o(a.transpose(1, 2).reshape(b, t, w)))
        return x + self.drop2(self.mlp(self.norm2(x)))


class LoRADecoder(nn.Module):
    """TextTransformer's GPT-2-style decoder (its embeddings, final norm and head) over `LoRABlock`s, every weight
    frozen but the adapters'."""

    def __init__(self, vocab: int, tokens: int, layers: int, width: int, heads: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(1, tokens, width))
        self.blocks = nn.Sequential(*(LoRABlock(width, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        for name, p in self.named_parameters():
            p.requires_grad_(name.endswith((".a", ".b")))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.embed(x) + self.position[:, :x.shape[1]])))


def fine_tuned(cfg: TrialConfig) -> nn.Module:
    """A FINE_TUNED network, its frozen weights' requires_grad False."""
    arch = cfg.params["arch"]
    (_, _, shape), trains = FINE_TUNED[arch]
    if trains == "lora":
        layers, width, heads, _ = shape
        return LoRADecoder(GPT2_VOCAB, tokens(cfg), layers, width, heads)
    model = torchvision.models.get_model(arch.split("_", 1)[1], weights=None).requires_grad_(False)
    for name in trains:  # weights=None: the head is as new as a replaced one
        getattr(model, name).requires_grad_(True)
    return model
# --- end of the fine-tuned networks -----------------------------------------------------------------------------


class TextTransformer(nn.Module):
    """Token and learned position embeddings, `layers` transformer blocks of `width` with `heads` heads, and a
    head: over every position to the vocabulary where `causal` (a GPT-2-style decoder, pre-norm), else from the
    first position to `classes` (a BERT-style encoder, post-norm)."""

    def __init__(self, vocab: int, tokens: int, layers: int, width: int, heads: int, causal: bool, classes: int = 2):
        super().__init__()
        self.causal = causal
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(1, tokens, width))
        block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=causal)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab if causal else classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.position[:, :x.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device) if self.causal else None
        h = self.norm(self.blocks(h, mask=mask, is_causal=self.causal))
        return self.head(h if self.causal else h[:, 0])


class Recurrent(nn.Module):
    """A recurrent net (`cell`: nn.LSTM, nn.GRU) over a sequence, classifying from its last step; token ids
    are embedded first where `vocab` is given, else the inputs are the frames' features."""

    def __init__(self, cell, layers: int, hidden: int, features: int, classes: int, vocab: int | None = None):
        super().__init__()
        self.embed = nn.Embedding(vocab, features) if vocab else nn.Identity()
        self.rnn = cell(features, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(x))
        return self.head(out[:, -1])


def tokens(cfg: TrialConfig) -> int:
    """The sequence length of a text or recurrent arch: --param tokens, else the arch's own."""
    return cfg.params["tokens"] or ARCHS[cfg.params["arch"]][2][3]


def make_model(cfg: TrialConfig) -> nn.Module:
    arch = cfg.params["arch"]
    if arch in FINE_TUNED:
        return fine_tuned(cfg)
    _, built, shape = ARCHS[arch]
    if built == "torchvision":
        return torchvision.models.get_model(arch, weights=None)
    if built == "vit":
        layers, width, heads, mlp = shape
        return torchvision.models.VisionTransformer(IMAGE, 16, layers, heads, width, mlp)
    if built in ("encoder", "decoder"):
        layers, width, heads, _ = shape
        vocab = GPT2_VOCAB if built == "decoder" else BERT_VOCAB
        return TextTransformer(vocab, tokens(cfg), layers, width, heads, causal=built == "decoder")
    layers, hidden, features, _ = shape
    if built == "lstm":
        return Recurrent(nn.LSTM, layers, hidden, features, KEYWORDS)
    return Recurrent(nn.GRU, layers, hidden, features, 2, vocab=BERT_VOCAB)


def sample(cfg: TrialConfig) -> torch.Tensor:
    """One input: an image, a sequence of token ids, or of speech frames."""
    _, built, shape = ARCHS[cfg.params["arch"]]
    if built in ("torchvision", "vit"):
        return torch.randn(3, IMAGE, IMAGE)
    if built == "lstm":
        return torch.randn(tokens(cfg), shape[2])
    return torch.randint(0, GPT2_VOCAB if built == "decoder" else BERT_VOCAB, (tokens(cfg),))


def make_data(cfg: TrialConfig) -> Data:
    arch = cfg.params["arch"]
    _, built, _ = ARCHS[arch]
    g = torch.Generator().manual_seed(cfg.seed)
    n = cfg.dataset_size
    if built in ("torchvision", "vit"):
        x, y = torch.randn(n, 3, IMAGE, IMAGE, generator=g), torch.randint(0, 1000, (n,), generator=g)
    elif built == "lstm":
        x, y = torch.randn(n, *sample(cfg).shape, generator=g), torch.randint(0, KEYWORDS, (n,), generator=g)
    else:
        vocab = GPT2_VOCAB if built == "decoder" else BERT_VOCAB
        x = torch.randint(0, vocab, (n, tokens(cfg)), generator=g)
        # a decoder's targets are the next tokens (random here, as its inputs are); the others' one class each
        y = torch.randint(0, vocab, (n, tokens(cfg)), generator=g) if built == "decoder" else \
            torch.randint(0, 2, (n,), generator=g)
    return Data(x, y, None, None, "random inputs (timing only)")


def step(model, x, y, loss):
    """The model's output and its loss; a decoder's over every position's next-token logits (batch x tokens
    rows)."""
    out = model(x)
    if out.dim() == 3:
        return loss(out.flatten(0, 1), y.flatten()), out
    return loss(out, y), out


def check(cfg: TrialConfig) -> None:
    """Refuses a last batch of one sample to the CNNs: BatchNorm cannot normalise one value in training."""
    if ARCHS[cfg.params["arch"]][0] == "cnn" and (cfg.dataset_size - 1) % cfg.batch_size == 0:
        raise ConfigError("dataset_size", f"dataset_size {cfg.dataset_size:,} in batches of {cfg.batch_size} leaves a "
                                          "batch of one sample, which BatchNorm cannot normalise in training: change "
                                          "dataset_size or batch_size")


workload = Workload(
    "realsize",
    make_data=make_data,
    make_model=make_model,
    make_loss=nn.CrossEntropyLoss,
    make_optimizer=lambda params, lr: torch.optim.AdamW(params, lr=lr),
    defaults={"batch_size": 32, "dataset_size": 512, "epochs": 4, "lr": 1e-4},
    params={"arch": Param("resnet50", choices=tuple(ARCHS), help="the network (examples/realsize.py ARCHS)"),
            "tokens": Param(0, low=0, high=4096, help="tokens (or frames) a sequence; 0: the network's own")},
    metric="loss",
    step=step,
    check=check,
    sample=sample,
    grids={"default": {"dataset_size": [512], "epochs": [4]}, "smoke": {"dataset_size": [64], "epochs": [2]}},
)

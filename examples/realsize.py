"""A user's workload at the sizes people rent GPUs for: 224-pixel vision models, BERT- and GPT-2-sized
transformers, recurrent nets over speech frames and text.

    crossover predict --workload examples/realsize.py:workload --param arch=vit_b_16 --batch-size 64 \\
        --dataset-size 100000 --epochs 10 --precision bf16
    python studies/reference.py --real --out /tmp/ref          # the real-sized reference set, plain loop, on a GPU

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

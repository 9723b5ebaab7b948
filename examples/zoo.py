"""A user's workload: any of several classifiers of different families on CIFAR-shaped images.

    python sweeps/scaling.py --workload examples/zoo.py:workload --param arch=mobilenet_v3_small --devices cpu
    python studies/parity.py --workload examples/zoo.py:workload --param arch=vgg11_bn --batch-sizes 32,128

One job file, one axis (`arch`) naming the network: a plain convolution stack (VGG), depthwise and
inverted-residual blocks (MobileNet, ShuffleNet, EfficientNet), dense connections (DenseNet), grouped
convolutions (RegNet, ResNeXt), fire modules (SqueezeNet), large-kernel blocks with layer norms
(ConvNeXt), each torchvision's own (weights=None, 10 classes); and two that are not convolutional, built
here: `vit_tiny`, torchvision's VisionTransformer cut to CIFAR (4-pixel patches, 6 layers of width 256),
`lstm_rows`, a 2-layer LSTM that reads an image row by row (one step per row), and `gru_rows`, the same
with a GRU. Each is trained on random images of `image_size` pixels a side (3 channels) with random
labels, seeded by the trial's seed: timing only, no test split, and every row's data_source says so.
The images are random because nothing is downloaded at run time.
"""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from crossover import ConfigError, Data, Param, TrialConfig, Workload

ARCHS = ("resnet18", "resnet34", "resnet50", "wide_resnet50_2", "vgg11_bn", "mobilenet_v3_small",
         "mobilenet_v3_large", "mobilenet_v2", "mnasnet1_0", "shufflenet_v2_x1_0", "efficientnet_b0", "densenet121",
         "regnet_y_400mf", "resnext50_32x4d", "squeezenet1_1", "convnext_tiny", "vit_tiny", "lstm_rows", "gru_rows")


class RowRNN(nn.Module):
    """Reads an image (channels, rows, columns) as a sequence of its rows, each row's pixels of every
    channel one step's features, with a recurrent net (`cell`: nn.LSTM, nn.GRU); classifies from the last
    step's hidden state."""

    def __init__(self, size: int, cell=nn.LSTM, hidden: int = 256, layers: int = 2, classes: int = 10):
        super().__init__()
        self.rnn = cell(3 * size, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.permute(0, 2, 1, 3).flatten(2)  # (batch, rows, channels x columns)
        out, _ = self.rnn(rows)
        return self.head(out[:, -1])


def make_data(cfg: TrialConfig) -> Data:
    size = cfg.params["image_size"]
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, 3, size, size, generator=g)
    y = torch.randint(0, 10, (cfg.dataset_size,), generator=g)
    return Data(x, y, None, None, "random images (timing only)")


def make_model(cfg: TrialConfig) -> nn.Module:
    arch, size = cfg.params["arch"], cfg.params["image_size"]
    if arch == "vit_tiny":
        return torchvision.models.VisionTransformer(image_size=size, patch_size=4, num_layers=6, num_heads=8,
                                                    hidden_dim=256, mlp_dim=1024, num_classes=10)
    if arch in ("lstm_rows", "gru_rows"):
        return RowRNN(size, nn.LSTM if arch == "lstm_rows" else nn.GRU)
    return torchvision.models.get_model(arch, weights=None, num_classes=10)


def check(cfg: TrialConfig) -> None:
    """Refuses a last batch of one image: BatchNorm cannot normalise one value in training."""
    if (cfg.dataset_size - 1) % cfg.batch_size == 0:
        raise ConfigError("dataset_size", f"dataset_size {cfg.dataset_size:,} in batches of {cfg.batch_size} leaves a "
                                          "batch of one image, which BatchNorm cannot normalise in training: change "
                                          "dataset_size or batch_size")


workload = Workload(
    "zoo",
    make_data=make_data,
    make_model=make_model,
    make_loss=nn.CrossEntropyLoss,
    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
    defaults={"batch_size": 128, "dataset_size": 4096, "epochs": 3, "lr": 0.01},
    params={"arch": Param("mobilenet_v3_small", choices=ARCHS, help="the classifier: a torchvision model's name, vit_tiny, lstm_rows or gru_rows"),
            "image_size": Param(32, low=32, high=256, help="pixels a side of the random images")},
    check=check,
    sample=lambda cfg: torch.empty(3, cfg.params["image_size"], cfg.params["image_size"]),
    grids={"default": {"dataset_size": [512, 2048, 8192], "epochs": [2]},
           "smoke": {"dataset_size": [256], "epochs": [2]}},
)

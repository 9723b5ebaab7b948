"""A user's workload: torchvision's ResNet-18 on CIFAR-10-shaped images (3 x 32 x 32, 10 classes).

    python sweeps/scaling.py --workload examples/resnet_cifar.py:workload --devices cpu,cuda
    python sweeps/scaling.py --workload examples/resnet_cifar.py:workload --param cifar_dir=$HOME/data --smoke
    python sweeps/scaling.py --workload examples/resnet_cifar.py:workload --param image_size=64 --grid seeds

With `--param cifar_dir=DIR` it reads real CIFAR-10 from DIR, in the python-pickle layout of
https://www.cs.toronto.edu/~kriz/cifar.html (DIR/cifar-10-batches-py/data_batch_1..5 and test_batch,
or DIR itself holding them): the first dataset_size training images, and the 10,000 test images as the
test split. Nothing is downloaded. Without it, random images of that shape and random labels, seeded by
the trial's seed: timing only, no test split, and every row's data_source says so. `image_size` other
than 32 resizes the images (bilinear), so the same network meets more pixels.

The model is torchvision's ImageNet ResNet-18 (weights=None) with a 10-class head: 11,181,642
parameters. Its stem (a stride-2 7x7 convolution, then max-pooling) brings 32 x 32 down to 8 x 8 before
the first block, so at 32 pixels it is cheap for its size; it is not the CIFAR variant of the paper.
A training step costs 6.95 GFLOP for a batch of 32 (the row's flops_per_step): 2.5 ms an image at
batch 128 on two idle Xeon cores (an H100 host's, pinned with taskset, 2026-11-25), ten times that on a
2-core VM busy with other jobs. A trial trains at least 4 epochs (1 warm-up, then at least 3 timed:
trainables/timing.py), so the grids are sized for a CPU: 'default' dataset_size 512, 2,048 and 8,192
at 2 epochs (43,008 images: about 2 minutes with --repeats 1 on those idle cores), 'smoke' 256
images (seconds), 'seeds' all 50,000 (for a GPU: about 8 minutes a trial on those two cores).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from crossover import ConfigError, Data, Param, TrialConfig, Workload

BATCHES = "cifar-10-batches-py"  # the folder the official archive unpacks to
TRAIN_FILES = [f"data_batch_{i}" for i in range(1, 6)]  # 10,000 images each
CIFAR_TRAIN = 50_000
# per-channel mean and standard deviation of CIFAR-10's training pixels, on [0, 1]; the often-copied std
# 0.2023, 0.1994, 0.2010 is the mean of each image's own std (kuangliu/pytorch-cifar issue 19)
MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def batches_dir(cifar_dir: str) -> Path:
    """The folder holding data_batch_1..5 and test_batch: `cifar_dir` itself or its cifar-10-batches-py."""
    root = Path(cifar_dir)
    return root if (root / "test_batch").is_file() else root / BATCHES


def read_cifar(folder: Path, n_train: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first `n_train` training images and all test images of the pickled CIFAR-10 in `folder`:
    (train images uint8 N x 3 x 32 x 32, train labels int64, test images, test labels). The files are
    pickles, which run code when loaded: point it at the official archive's files only."""
    def load(name: str) -> tuple[np.ndarray, np.ndarray]:
        with open(folder / name, "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        return batch[b"data"].reshape(-1, 3, 32, 32), np.asarray(batch[b"labels"], dtype=np.int64)

    parts = []
    for name in TRAIN_FILES:  # only as many files as the images asked for need
        if sum(len(y) for _, y in parts) >= n_train:
            break
        parts.append(load(name))
    x, y = (np.concatenate(a) for a in zip(*parts))
    if len(y) < n_train:
        raise ValueError(f"dataset_size must be <= the {len(y):,} training images in {folder}, got {n_train:,}")
    return (x[:n_train], y[:n_train], *load("test_batch"))


def _normalise(images: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 N x 3 x 32 x 32 as float, normalised by CIFAR-10's mean and std, resized to size x size."""
    x = (images.float() / 255 - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)
    return x if size == 32 else F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)


def make_data(cfg: TrialConfig) -> Data:
    size, cifar_dir = cfg.params["image_size"], cfg.params["cifar_dir"]
    if cifar_dir:
        x, y, test_x, test_y = map(torch.from_numpy, read_cifar(batches_dir(cifar_dir), cfg.dataset_size))
        return Data(_normalise(x, size), y, _normalise(test_x, size), test_y, f"cifar-10:{batches_dir(cifar_dir)}")
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randint(0, 256, (cfg.dataset_size, 3, 32, 32), dtype=torch.uint8, generator=g)
    y = torch.randint(0, 10, (cfg.dataset_size,), generator=g)
    return Data(_normalise(x, size), y, None, None, "random (no CIFAR-10: give --param cifar_dir=DIR)")


def check(cfg: TrialConfig) -> None:
    """Refuses, before anything runs, a last batch of one image, a CIFAR-10 folder that is not one, or more
    images than CIFAR-10 holds."""
    # up to 32 pixels, layer4's feature map is 1 x 1 (ceil(size / 32)): one image leaves BatchNorm one value
    if cfg.params["image_size"] <= 32 and (cfg.dataset_size - 1) % cfg.batch_size == 0:
        raise ConfigError("dataset_size", f"dataset_size {cfg.dataset_size:,} in batches of {cfg.batch_size} leaves a "
                                          "batch of one image, which BatchNorm cannot normalise in training: change "
                                          "dataset_size or batch_size")
    cifar_dir = cfg.params["cifar_dir"]
    if not cifar_dir:
        return
    if not Path(cifar_dir).is_absolute():  # every Ray worker reads it, from a working directory of its own
        raise ConfigError("cifar_dir", f"cifar_dir must be an absolute path, got {cifar_dir!r}: give "
                                       f"--param cifar_dir={Path(cifar_dir).resolve()}")
    folder = batches_dir(cifar_dir)
    missing = [n for n in TRAIN_FILES + ["test_batch"] if not (folder / n).is_file()]
    if missing:
        raise ConfigError("cifar_dir", f"no CIFAR-10 in {cifar_dir}: {folder} lacks {missing}; give --param "
                                       f"cifar_dir=DIR where DIR or DIR/{BATCHES} holds data_batch_1..5 and "
                                       "test_batch (the python version's archive, unpacked)")
    if cfg.dataset_size > CIFAR_TRAIN:
        raise ConfigError("dataset_size", f"dataset_size must be <= CIFAR-10's {CIFAR_TRAIN:,} training images, "
                                          f"got {cfg.dataset_size:,}")


workload = Workload(
    "resnet18_cifar",
    make_data=make_data,
    make_model=lambda cfg: torchvision.models.resnet18(weights=None, num_classes=10),
    make_loss=nn.CrossEntropyLoss,
    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
    defaults={"batch_size": 128, "dataset_size": CIFAR_TRAIN, "epochs": 3, "lr": 0.05},
    params={"cifar_dir": Param("", help="folder of CIFAR-10's python pickles (absolute); '' = random images"),
            "image_size": Param(32, low=16, high=256, help="pixels a side the images are resized to")},
    check=check,
    # one input without building the data: the sweep's memory estimate would otherwise read the files
    sample=lambda cfg: torch.empty(3, cfg.params["image_size"], cfg.params["image_size"]),
    test_batch_size=500,  # 10,000 test images in 20 batches
    grids={"default": {"dataset_size": [512, 2048, 8192], "epochs": [2]},
           "smoke": {"dataset_size": [256], "epochs": [2]},
           "seeds": {"dataset_size": [CIFAR_TRAIN]}},
)

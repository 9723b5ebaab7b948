"""Datasets as in-memory tensors. Nothing is downloaded: MNIST comes from local IDX files only.

Image workloads take `data` = auto | mnist | digits | synthetic:
    mnist      torchvision's MNIST read from `data_dir` (download=False): 60,000 train, 10,000 test
    digits     scikit-learn's bundled handwritten digits (1,797 real 8x8 images, shipped with the
               package), upscaled to 28x28: 1,437 train, 360 test; for accuracy without MNIST
    synthetic  random images and labels of MNIST's shape: timing only, no test split
    auto       mnist when data_dir is given, else digits when dataset_size fits, else synthetic
Every trial's row records the source it used.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_leaves, tree_map

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # the PyTorch MNIST example's normalisation
IMAGE_SHAPE = (1, 28, 28)  # MNIST's: channels, height, width; the digits are upscaled to it
DIGITS_TRAIN = 1437  # of scikit-learn's 1,797 digits; the other 360 are the test split


@dataclass(frozen=True)
class Data:
    """A workload's data, held in memory: inputs one tensor, or a dict of tensors (several inputs: a
    Workload's `step` takes them), each indexed by sample along its first dimension; targets one tensor."""

    x: torch.Tensor | dict  # training inputs
    y: torch.Tensor  # training targets
    test_x: torch.Tensor | dict | None  # None: the workload has no test split
    test_y: torch.Tensor | None
    source: str  # what the row's data_source says: where the data came from, 'random' where it is made up

    def __post_init__(self) -> None:
        """Refused when made, in the workload's make_data, so that the trial's error row names the mismatch:
        the loop takes input i and target i by one index, and a shorter y was read as the dataset's size."""
        for inputs, targets, split in ((self.x, self.y, ""), (self.test_x, self.test_y, "test_")):
            if (inputs is None) != (targets is None):
                raise ValueError(f"Data: {split}x and {split}y must both be given or both be None, got "
                                 f"{type(inputs).__name__} and {type(targets).__name__}")
            if inputs is None:
                continue
            named = {**(inputs if isinstance(inputs, dict) else {f"{split}x": inputs}), f"{split}y": targets}
            for name, t in named.items():
                if not isinstance(t, torch.Tensor) or t.dim() == 0:
                    raise ValueError(f"Data: {name} must be a tensor whose first dimension is the samples (x may be "
                                     f"a dict of them), got {type(t).__name__} {getattr(t, 'shape', '')}".rstrip())
            if len({len(t) for t in named.values()}) > 1:
                said = ", ".join(f"{name} {len(t):,}" for name, t in named.items())
                raise ValueError(f"Data: {split}x and {split}y must hold as many samples, got {said}: give one "
                                 "target per input sample")
            for name, t in named.items():  # as make_data made them, on the CPU: moved copies were checked there
                if t.device.type != "cpu" or not t.is_floating_point():
                    continue
                bad = ~torch.isfinite(t.reshape(len(t), -1)).all(1)  # per sample
                if bad.any():
                    raise ValueError(f"Data: {name} has NaN or infinite values in {int(bad.sum()):,} samples (the first: "
                                     f"sample {int(bad.nonzero()[0, 0]):,}): a loss over them is NaN from the first "
                                     "step; clean or drop those samples")

    def to(self, inputs: torch.device, targets: torch.device) -> "Data":
        """Inputs on the model's first device, targets on its last (the same but for a pipeline)."""
        return Data(move(self.x, inputs), move(self.y, targets), move(self.test_x, inputs),
                    move(self.test_y, targets), self.source)

    def pin(self) -> "Data":
        """Kept on the host in page-locked memory, so batches copy to a GPU asynchronously."""
        if not torch.cuda.is_available():
            return self
        def pin(t):  # a tensor, a dict of them, or None (as `move`)
            return None if t is None else tree_map(lambda leaf: leaf.pin_memory(), t)
        return Data(pin(self.x), pin(self.y), pin(self.test_x), pin(self.test_y), self.source)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in tree_leaves((self.x, self.y, self.test_x, self.test_y)) if t is not None)

    @property
    def n(self) -> int:
        """Training samples."""
        return len(self.y)

    @property
    def n_test(self) -> int:
        return 0 if self.test_y is None else len(self.test_y)

    @property
    def device(self) -> torch.device:
        """Where the inputs are."""
        return tree_leaves(self.x)[0].device


def move(x, device: torch.device, non_blocking: bool = False):
    """Inputs (a tensor or a dict of them; None stays None) on `device`."""
    return None if x is None else tree_map(lambda t: t.to(device, non_blocking=non_blocking), x)


def take(x, index):
    """The samples `index` (a slice or indices) of inputs `x`: a tensor, or each tensor of a dict."""
    return tree_map(lambda t: t[index], x)


def images(data: str, data_dir: str | None, dataset_size: int, seed: int) -> Data:
    source = image_source(data, data_dir, dataset_size)
    if source == "mnist":
        assert data_dir is not None, "image_source says 'mnist' only where a data_dir is given"
        return _mnist(Path(data_dir), dataset_size)
    if source == "digits":
        return _digits(dataset_size, seed)
    return _synthetic(dataset_size, seed)


def image_source(data: str, data_dir: str | None, dataset_size: int) -> str:
    """Which source `data` means for this size; refuses what cannot be honoured."""
    if data == "auto":
        if data_dir:
            return "mnist"
        return "digits" if dataset_size <= DIGITS_TRAIN else "synthetic"
    if data == "mnist" and not data_dir:
        raise ValueError("data 'mnist' needs data_dir (--data-dir): a directory with MNIST/raw/*-ubyte")
    if data == "digits" and dataset_size > DIGITS_TRAIN:
        raise ValueError(
            f"dataset_size must be <= {DIGITS_TRAIN} with data 'digits', got {dataset_size}; "
            "use data 'synthetic' for timing at larger sizes, or real MNIST with --data-dir"
        )
    return data


# torchvision's MNIST/raw files and their dimensions (images: count, rows, columns; labels: count)
MNIST_FILES = {"train-images-idx3-ubyte": 3, "train-labels-idx1-ubyte": 1,
               "t10k-images-idx3-ubyte": 3, "t10k-labels-idx1-ubyte": 1}


def _idx_dims(path: Path, ndim: int) -> tuple[int, ...]:
    """The dimensions in an IDX file's header; refuses, naming the file and the fix, one that is missing,
    not IDX of unsigned bytes (its magic number), or of another length than its header says (truncated)."""
    fix = "put the original file there (torchvision's MNIST/raw layout; nothing is downloaded at run time)"
    try:
        with open(path, "rb") as f:
            header, size = f.read(4 + 4 * ndim), os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        raise FileNotFoundError(f"no MNIST IDX file {path}: expected the four files {sorted(MNIST_FILES)} "
                                f"under {path.parent}; {fix}") from None
    if len(header) < 4 + 4 * ndim or header[:4] != bytes([0, 0, 0x08, ndim]):
        raise ValueError(f"{path} is not an MNIST IDX file (magic number {header[:4].hex() or 'missing'}, expected "
                         f"0000080{ndim}: unsigned bytes, {ndim} dimensions): {fix}")
    dims = struct.unpack(f">{ndim}I", header[4:])
    if size != 4 + 4 * ndim + math.prod(dims):
        raise ValueError(f"{path} holds {size:,} bytes but its header ({' x '.join(map(str, dims))}) says "
                         f"{4 + 4 * ndim + math.prod(dims):,}: truncated or corrupt; {fix}")
    return dims


def _mnist(root: Path, dataset_size: int) -> Data:
    from torchvision.datasets import MNIST

    dims = {name: _idx_dims(root / "MNIST" / "raw" / name, ndim) for name, ndim in MNIST_FILES.items()}
    for split in ("train", "t10k"):
        if dims[f"{split}-images-idx3-ubyte"][0] != dims[f"{split}-labels-idx1-ubyte"][0]:
            raise ValueError(f"{root}/MNIST/raw holds {dims[f'{split}-images-idx3-ubyte'][0]:,} {split} images but "
                             f"{dims[f'{split}-labels-idx1-ubyte'][0]:,} labels: put the original pair of files there")
    try:
        train = MNIST(str(root), train=True, download=False)
        test = MNIST(str(root), train=False, download=False)
    except RuntimeError as exc:  # torchvision: "Dataset not found. You can use download=True ..."
        raise FileNotFoundError(
            f"no MNIST IDX files under {root}: expected {root}/MNIST/raw/train-images-idx3-ubyte and "
            "the other three files (torchvision's layout); nothing is downloaded at run time"
        ) from exc
    if dataset_size > len(train.data):
        raise ValueError(f"dataset_size must be <= {len(train.data)} for MNIST in {root}, got {dataset_size}")
    norm = lambda d: ((d.float() / 255.0 - MNIST_MEAN) / MNIST_STD).unsqueeze(1)  # noqa: E731
    return Data(norm(train.data[:dataset_size]), train.targets[:dataset_size].long(),
                norm(test.data), test.targets.long(), f"mnist:{root}")


def _digits(dataset_size: int, seed: int) -> Data:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0  # 0..16 -> 0..1
    x = F.interpolate(x, size=IMAGE_SHAPE[1:], mode="bilinear", align_corners=False)
    x = (x - MNIST_MEAN) / MNIST_STD
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    train, test = order[:DIGITS_TRAIN][:dataset_size], order[DIGITS_TRAIN:]
    return Data(x[train], y[train], x[test], y[test], "digits")


def _synthetic(dataset_size: int, seed: int) -> Data:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(dataset_size, *IMAGE_SHAPE, generator=gen)
    y = torch.randint(0, 10, (dataset_size,), generator=gen)
    return Data(x, y, None, None, "synthetic")


def disc(dataset_size: int, seed: int) -> Data:
    """Seed 000: points uniform in [0,1]^2, label 1 inside radius 1/sqrt(2*pi); the seed's scalar normalisation."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.empty(dataset_size, 2).uniform_(0, 1, generator=gen)
    y = x.pow(2).sum(1).sub(1 / (2 * math.pi)).sign().neg().add(1).div(2).ceil().long()
    x = (x - x.mean()) / x.std()
    return Data(x, y, None, None, "generated")


def peaks(dataset_size: int) -> Data:
    """Seed 003: MATLAB's peaks function on an N x N grid over [-3, 3]^2 (N*N = dataset_size)."""
    n = math.isqrt(dataset_size)
    axis = torch.linspace(-3, 3, n)
    x1 = axis.repeat(n)  # Julia's repeat(x1, outer=Nx2)
    x2 = axis.repeat_interleave(n)  # repeat(x2, inner=Nx1)
    y = (3 * (1 - x1) ** 2 * torch.exp(-(x1**2) - (x2 + 1) ** 2)
         - 10 * (x1 / 5 - x1**3 - x2**5) * torch.exp(-(x1**2) - x2**2)
         - 1 / 3 * torch.exp(-((x1 + 1) ** 2) - x2**2))
    return Data(torch.stack([x1, x2], 1), y.unsqueeze(1), None, None, "generated")


TABULAR_FEATURES = 16


def tabular(dataset_size: int, seed: int) -> Data:
    """Seed 004: a pandas DataFrame of rows x features turned into tensors; a nonlinear binary target.

    A quarter as many rows again form the test split.
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    n_test = max(1, dataset_size // 4)
    frame = pd.DataFrame(rng.standard_normal((dataset_size + n_test, TABULAR_FEATURES)),
                         columns=[f"x{i}" for i in range(TABULAR_FEATURES)])
    weights = rng.standard_normal(TABULAR_FEATURES)
    frame["label"] = ((frame.to_numpy() @ weights + np.sin(3 * frame["x0"]) * frame["x1"]) > 0).astype(np.int64)
    x = torch.tensor(frame.drop(columns="label").to_numpy(np.float32))
    y = torch.tensor(frame["label"].to_numpy())
    return Data(x[:dataset_size], y[:dataset_size], x[dataset_size:], y[dataset_size:], "generated")


# The transformer's text: the sources of Python's own standard library (the *.py files at the top of
# sysconfig's stdlib directory, in name order, read as bytes), which every Python install ships:
# 4.7 MB on CPython 3.11. A byte is a token (vocabulary 256), so the text needs no tokeniser and the
# dataset is the same bytes wherever the same Python version runs; another version's stdlib differs.
TEXT_VOCAB = 256


def _text_files() -> list[Path]:
    import sysconfig

    return sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))


def text_test_size(dataset_size: int) -> int:
    """Test sequences beside `dataset_size` training ones: one in eight, at least one."""
    return max(1, dataset_size // 8)


def check_text(dataset_size: int, context: int) -> None:
    """Raises ValueError where the standard library's text holds fewer bytes than the sequences need."""
    need = (dataset_size + text_test_size(dataset_size)) * (context + 1)
    have = sum(f.stat().st_size for f in _text_files())
    if need > have:
        raise ValueError(f"dataset_size x (context + 1) must fit the {have:,} bytes of text (the standard library's "
                         f"sources, with a test eighth beside), got {dataset_size:,} sequences of {context + 1} "
                         f"bytes: at most {have * 8 // (9 * (context + 1)):,} sequences at context {context}")


def text(dataset_size: int, context: int) -> Data:
    """`dataset_size` training sequences of `context` + 1 bytes, back to back from the start of the text
    (inputs: the first `context`; targets: the same shifted by one), then the test sequences after them."""
    import sys

    n_test = text_test_size(dataset_size)
    need = (dataset_size + n_test) * (context + 1)
    chunks, have = [], 0
    for path in _text_files():
        if have >= need:
            break
        chunks.append(path.read_bytes())
        have += len(chunks[-1])
    tokens = torch.frombuffer(bytearray(b"".join(chunks)[:need]), dtype=torch.uint8).long()
    seqs = tokens.view(dataset_size + n_test, context + 1)
    x, y = seqs[:, :-1].contiguous(), seqs[:, 1:].contiguous()
    return Data(x[:dataset_size], y[:dataset_size], x[dataset_size:], y[dataset_size:],
                f"python {sys.version_info.major}.{sys.version_info.minor} stdlib sources")

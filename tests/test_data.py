"""Data sources: MNIST from local IDX files (written here, in torchvision's layout), digits, synthetic."""

import struct

import numpy as np
import pytest
import torch

from trainables.config import TrialConfig
from trainables.data import DIGITS_TRAIN, MNIST_MEAN, MNIST_STD, images
from trainables.train import run_trial
from trainables.trial import resolve


def write_idx(path, array: np.ndarray):
    magic = (0x08 << 8) | array.ndim
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.astype(np.uint8).tobytes())


@pytest.fixture
def mnist_dir(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 300), ("t10k", 50)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n, dtype=np.uint8))
    return tmp_path


def test_mnist_is_read_from_local_idx_files(mnist_dir):
    data = images("auto", str(mnist_dir), 200, seed=0)
    assert data.source == f"mnist:{mnist_dir}"
    assert data.x.shape == (200, 1, 28, 28) and data.n_test == 50
    raw = np.fromfile(mnist_dir / "MNIST/raw/train-images-idx3-ubyte", np.uint8, offset=16)[:784]
    expected = (torch.tensor(raw, dtype=torch.float32) / 255 - MNIST_MEAN) / MNIST_STD
    assert torch.allclose(data.x[0].flatten(), expected)


def test_a_trial_on_mnist_records_its_source(mnist_dir):
    row = run_trial(resolve(TrialConfig("lenet", dataset_size=300, epochs=2, data_dir=str(mnist_dir))))
    assert row["data_source"] == f"mnist:{mnist_dir}" and row["n_test"] == 50


def test_missing_mnist_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        images("mnist", str(tmp_path), 100, seed=0)


def test_digits_are_real_upscaled_digits_with_a_test_split():
    data = images("auto", None, DIGITS_TRAIN, seed=0)
    assert data.source == "digits" and data.x.shape == (DIGITS_TRAIN, 1, 28, 28) and data.n_test == 360
    assert set(data.y.tolist()) == set(range(10))


def test_auto_falls_back_to_synthetic_past_digits_size():
    data = images("auto", None, DIGITS_TRAIN + 1, seed=0)
    assert data.source == "synthetic" and data.test_x is None

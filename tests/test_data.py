"""Data sources: MNIST from local IDX files (written here, in torchvision's layout), digits, synthetic."""

import re
import struct

import numpy as np
import pytest
import torch

from crossover.config import TrialConfig
from crossover.data import DIGITS_TRAIN, MNIST_MEAN, MNIST_STD, Data, images
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve


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


@pytest.mark.parametrize("damage, words", [
    (lambda p: p.write_bytes(p.read_bytes()[:1000]), (r"holds 1,000 bytes but its header \(300 x 28 x 28\) says "
                                                       r"235,216: truncated or corrupt; put the original file there")),
    (lambda p: p.write_bytes(b"\x1f\x8b" + p.read_bytes()[2:]), (r"is not an MNIST IDX file \(magic number "
                                                                  r"1f8b0803, expected 00000803")),
    (lambda p: p.unlink(), r"no MNIST IDX file .*train-images-idx3-ubyte: expected the four files"),
])
def test_a_corrupt_mnist_file_is_named_with_the_fix(mnist_dir, damage, words):
    path = mnist_dir / "MNIST/raw/train-images-idx3-ubyte"
    damage(path)
    with pytest.raises((ValueError, FileNotFoundError), match=words) as info:
        images("mnist", str(mnist_dir), 100, seed=0)
    assert "train-images-idx3-ubyte" in str(info.value)


def test_images_and_labels_of_different_counts_fail_the_trial_naming_the_pair(mnist_dir):
    from crossover.trainables.trainable import run

    path = mnist_dir / "MNIST/raw/t10k-labels-idx1-ubyte"
    write_idx(path, np.zeros(49, np.uint8))  # one label short of its 50 images
    with pytest.raises(ValueError, match=r"holds 50 t10k images but 49 labels") as info:
        run([resolve(TrialConfig("lenet", dataset_size=100, epochs=2, data_dir=str(mnist_dir)))])
    assert str(mnist_dir) in str(info.value)


@pytest.mark.parametrize("x, y, words", [
    (torch.zeros(64, 3), torch.zeros(57), "x and y must hold as many samples, got x 64, y 57"),
    ({"a": torch.zeros(8, 3), "b": torch.zeros(7, 5)}, torch.zeros(8), "got a 8, b 7, y 8"),
    ([[0.0, 1.0]], torch.zeros(1), "x must be a tensor whose first dimension is the samples"),
])
def test_data_whose_inputs_and_targets_do_not_pair_up_is_refused_when_made_naming_both(x, y, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        Data(x, y, None, None, "random")
    with pytest.raises(ValueError, match="test_x and test_y must both be given or both be None"):
        Data(torch.zeros(4, 3), torch.zeros(4), torch.zeros(2, 3), None, "random")


def test_inputs_with_nan_or_infinity_are_refused_when_made_naming_how_many_samples_and_the_first():
    x = torch.randn(10, 3, 4)
    x[4, 1, 2], x[7, 0, 0] = float("nan"), float("inf")
    with pytest.raises(ValueError, match=r"Data: x has NaN or infinite values in 2 samples \(the first: sample 4\)"):
        Data(x, torch.zeros(10, dtype=torch.long), None, None, "test")
    Data(torch.randn(10, 3), torch.zeros(10, dtype=torch.long), None, None, "test")  # finite: made

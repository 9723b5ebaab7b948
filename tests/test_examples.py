"""The two example workloads (examples/): each trains a real trial, reads its data as documented, says in
the row where the data came from, and refuses a bad config by name with the fix.

    python -m pytest tests/test_examples.py

Each is registered from its file as a user's would be (crossover.workload.register) and its trials run
in this process (run_trial); their sweeps through Ray are the examples' own commands (module docstrings).
"""

import pickle
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from crossover.config import ConfigError, TrialConfig
from crossover.trainables.fused import run_fused
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve
from crossover.trainables.registry import Registry, fingerprint

register = Registry().register  # this module's workloads, imported here

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RESNET = register(f"{EXAMPLES / 'resnet_cifar.py'}:workload")
CSV = register(f"{EXAMPLES / 'tabular_csv.py'}:workload")
TINY = {"epochs": 2, "min_timed_s": 0}  # one warm-up epoch, one timed: the rows, not the timings, are checked


def trial(wl, **kw):
    """A resolved trial of a user's workload, its config built as sweeps/space.py builds it."""
    return resolve(TrialConfig(wl.name, module=wl.ref, fingerprint=fingerprint(wl), **TINY, **kw))


def write_cifar(root: Path, per_batch: int = 8, n_test: int = 6) -> Path:
    """CIFAR-10's python layout under root/cifar-10-batches-py: five training batches and a test batch of
    random pixels, labels counting up from the file's number (so which file an image came from shows)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, n, first in [(f"data_batch_{i}", per_batch, i) for i in range(1, 6)] + [("test_batch", n_test, 0)]:
        pixels = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        (folder / name).write_bytes(pickle.dumps({b"data": pixels, b"labels": [(first + j) % 10 for j in range(n)]}))
    return folder


def test_resnet_trains_on_random_images_and_its_row_says_they_are_random():
    row = run_trial(trial(RESNET, dataset_size=32, batch_size=16, params={"image_size": 16}))
    assert row["status"] == "ok" and row["workload"] == "resnet18_cifar"
    assert row["data_source"] == "random (no CIFAR-10: give --param cifar_dir=DIR)" and row["n_test"] == 0
    assert row["n_params"] == 11_181_642  # torchvision's resnet18 with a 10-class head
    assert row["flops_per_step"] > 0 and np.isfinite(row["train_loss"])


def test_resnet_reads_cifar_pickles_from_the_folder_or_its_parent(tmp_path):
    folder = write_cifar(tmp_path)
    for given in (tmp_path, folder):
        data = RESNET.make_data(trial(RESNET, dataset_size=12, batch_size=4, params={"cifar_dir": str(given)}).cfg)
        assert data.source == f"cifar-10:{folder}" and data.x.shape == (12, 3, 32, 32) and data.n_test == 6
        # the first 8 images of data_batch_1, then 4 of data_batch_2; the test batch whole
        assert data.y.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 2, 3, 4, 5] and data.test_y.tolist() == [0, 1, 2, 3, 4, 5]
    raw = pickle.loads((folder / "data_batch_1").read_bytes())[b"data"][0].reshape(3, 32, 32)
    red = (raw[0] / 255 - 0.4914) / 0.2470  # CIFAR-10's mean and std, channel by channel
    assert torch.allclose(data.x[0, 0], torch.tensor(red, dtype=torch.float32), atol=1e-5)
    row = run_trial(trial(RESNET, dataset_size=12, batch_size=4, params={"cifar_dir": str(tmp_path), "image_size": 16}))
    assert row["status"] == "ok" and row["data_source"] == f"cifar-10:{folder}"
    assert row["n_test"] == 6 and 0 <= row["test_accuracy"] <= 1


@pytest.mark.parametrize("kw, field, words", [
    (dict(params={"cifar_dir": "cifar"}), "cifar_dir", "cifar_dir must be an absolute path"),
    (dict(params={"cifar_dir": "/nowhere"}), "cifar_dir",
     "give --param cifar_dir=DIR where DIR or DIR/cifar-10-batches-py"),
    (dict(params={"image_size": 8}), "image_size", "must be in [16, 256], got 8"),
    (dict(dataset_size=65, batch_size=32), "dataset_size", "leaves a batch of one image"),
])
def test_resnet_refuses_bad_configs_by_name(kw, field, words):
    with pytest.raises(ConfigError, match=re.escape(words)) as info:
        trial(RESNET, **{"dataset_size": 64, "batch_size": 32, **kw})
    assert info.value.field == field


@pytest.fixture(scope="module")
def csv(tmp_path_factory) -> Path:
    """200 rows: five numeric features, a text column the model leaves out, three classes named by text."""
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.standard_normal((200, 5)) * [1, 10, 100, 1, 1] + 5, columns=list("abcde"))
    table["city"] = rng.choice(["Oslo", "Lima"], 200)
    table["label"] = np.select([table.a > 5.5, table.a < 4.5], ["high", "low"], "mid")
    path = tmp_path_factory.mktemp("csv") / "data.csv"
    table.to_csv(path, index=False)
    return path


def test_the_csv_mlp_takes_its_features_and_classes_from_the_csv(csv):
    t = trial(CSV, dataset_size=100, width=16, depth=2, params={"csv": str(csv), "target": "label"})
    model = CSV.make_model(t.cfg)
    assert model[0].in_features == 5 and model[-1].out_features == 3  # 'city' is text: not a feature
    data = CSV.make_data(t.cfg)
    assert torch.allclose(data.x.mean(0), torch.zeros(5), atol=1e-5)  # standardised by the training rows
    assert torch.allclose(data.x.std(0, correction=0), torch.ones(5), atol=1e-4)
    row = run_trial(t)
    assert row["status"] == "ok" and row["n_params"] == (5 * 16 + 16) + (16 * 16 + 16) + (16 * 3 + 3)
    assert row["n_test"] == 40 and 0 <= row["test_accuracy"] <= 1  # the last fifth of the 200 rows
    assert row["data_source"].startswith(f"csv:{csv} (sha256 ")


def test_a_fused_csv_member_trains_as_it_does_alone(csv):
    """Workload.fusable holds: Adam, accuracy, one tensor of inputs."""
    members = [trial(CSV, dataset_size=128, width=16, seed=seed, params={"csv": str(csv), "target": "label"})
               for seed in (0, 1)]
    fused = run_fused(members)
    for member, row in zip(members, fused):
        assert row["fused_members"] == 2
        assert row["loss_curve"] == pytest.approx(run_trial(member)["loss_curve"], rel=1e-4, abs=1e-7)
    assert fused[0]["loss_curve"] != fused[1]["loss_curve"]  # the members did differ


@pytest.mark.parametrize("params, size, field, words", [  # ...: the test's CSV
    ({}, 64, "csv", "give --param csv=PATH"),
    ({"csv": "data.csv"}, 64, "csv", "csv must be an absolute path"),
    ({"csv": "/nowhere.csv"}, 64, "csv", "no file /nowhere.csv"),
    ({"csv": ..., "target": "y"}, 64, "target",
     "has no column 'y' (its columns: ['a', 'b', 'c', 'd', 'e', 'city', 'label']): give --param target=COLUMN"),
    ({"csv": ..., "target": "label"}, 161, "dataset_size", "dataset_size must be <= 160, the training rows of"),
    ({"csv": "word", "target": "label"}, 64, "csv", "line 5, column 'b': 'x1' is not a number in a column of numbers"),
])
def test_the_csv_workload_refuses_bad_configs_by_name(csv, params, size, field, words):
    with pytest.raises(ConfigError, match=re.escape(words)) as info:
        if params.get("csv") == "word":  # the test's CSV with a word in a column of numbers, on its fourth row
            lines = csv.read_text().splitlines()
            cells = lines[4].split(",")
            cells[1] = "x1"
            csv = csv.with_name("word.csv")
            csv.write_text("\n".join(lines[:4] + [",".join(cells)] + lines[5:]) + "\n")
            params = {**params, "csv": ...}
        trial(CSV, dataset_size=size, params={k: str(csv) if v is ... else v for k, v in params.items()})
    assert info.value.field == field

"""The sixth workload, a nanoGPT-shaped character-level transformer on the standard library's sources:
its parameter count is the hand formula, a step is the same on 1 and 2 threads, it learns, and what
it cannot take is refused by name."""

import math

import pytest
import torch

from crossover import data as datasets
from crossover.config import ConfigError, TrialConfig
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve
from crossover.trainables.workloads import WORKLOADS, n_params


@pytest.mark.parametrize("depth, width, context", [(1, 16, 8), (2, 64, 64), (4, 128, 32)])
def test_its_parameter_count_is_the_hand_formula(depth, width, context):
    v, c, t = datasets.TEXT_VOCAB, width, context
    # token and position embeddings (the LM head is tied to the first), per block two LayerNorms (2c
    # each), qkv (3c^2 + 3c), the projection (c^2 + c) and the MLP (4c^2 + 4c and 4c^2 + c); a final LayerNorm
    formula = v * c + t * c + depth * (12 * c * c + 13 * c) + 2 * c
    cfg = resolve(TrialConfig("transformer", depth=depth, width=width, context=context)).cfg
    assert n_params(WORKLOADS["transformer"].make_model(cfg)) == formula


def test_the_text_is_the_same_bytes_every_time_and_targets_are_the_inputs_shifted():
    a, b = datasets.text(64, 32), datasets.text(64, 32)
    assert torch.equal(a.x, b.x) and torch.equal(a.test_y, b.test_y)
    assert a.x.shape == (64, 32) and a.n_test == 8 and int(a.x.max()) < datasets.TEXT_VOCAB
    assert torch.equal(a.x[:, 1:], a.y[:, :-1])


def test_one_step_gives_the_same_loss_on_1_and_2_threads():
    # dataset_size = batch_size: an epoch is one step; the timed epoch's loss is the second step's
    kw = {"depth": 2, "width": 32, "context": 16, "dataset_size": 16, "batch_size": 16, "epochs": 2, "min_timed_s": 0}
    one, two = (run_trial(resolve(TrialConfig("transformer", threads=n, **kw))) for n in (1, 2))
    assert one["torch_threads"] == 1 and two["torch_threads"] == 2
    assert two["loss_curve"] == pytest.approx(one["loss_curve"], abs=1e-5)


def test_it_learns():
    row = run_trial(resolve(TrialConfig("transformer", depth=1, width=32, context=32, dataset_size=256,
                                        epochs=5, min_timed_s=0)))
    curve = row["loss_curve"]
    assert all(b < a for a, b in zip(curve, curve[1:])), curve
    assert curve[-1] < math.log(datasets.TEXT_VOCAB) and row["test_loss"] < math.log(datasets.TEXT_VOCAB)
    assert row["train_accuracy"] is None and row["data_source"].endswith("stdlib sources")


def test_what_it_cannot_take_is_refused_by_name():
    with pytest.raises(ConfigError, match="width must be a multiple of 16 for the transformer.*got 40; nearest: 32"):
        resolve(TrialConfig("transformer", width=40))
    with pytest.raises(ConfigError, match="must fit the .* bytes of text") as info:
        resolve(TrialConfig("transformer", dataset_size=10_000_000, batch_size=32))
    assert info.value.field == "dataset_size"
    with pytest.raises(ConfigError, match="context is not an axis of workload 'disc'"):
        resolve(TrialConfig("disc", context=32))

"""The workloads reproduce their seeds, refuse bad configs by name, and train the same on any thread count."""

import math
import re

import pytest
import torch

from crossover.config import ConfigError, TrialConfig
from crossover.trainables.timing import more_epochs
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve
from crossover.trainables.workloads import WORKLOADS, n_params


def model(workload, **kw):
    return WORKLOADS[workload].make_model(resolve(TrialConfig(workload, **kw)).cfg)


def test_disc_depth_10_has_the_seeds_700k_parameters():
    assert n_params(model("disc", depth=10)) == 703_142


@pytest.mark.parametrize("workload, expected", [
    ("mnist_cnn", 21_840),  # pytorch/examples mnist Net
    ("lenet", 61_610),  # conv 60 + 2,416, fc 48,120 + 10,164 + 850
    ("peaks", 2 * 20 + 20 + 20 * 5 + 5 + 5 + 1),
])
def test_default_models_are_the_seeds(workload, expected):
    assert n_params(model(workload)) == expected


def test_width_gives_the_plain_mlp_and_multiplies_cnn_channels():
    plain = model("disc", depth=3, width=8)  # 2 -> 8 -> 8 -> 2
    assert [m.out_features for m in plain if isinstance(m, torch.nn.Linear)] == [8, 8, 2]
    wide = model("mnist_cnn", width=2)
    assert (wide.conv1.out_channels, wide.conv2.out_channels, wide.fc1.in_features) == (20, 40, 640)


def test_defaults_are_the_seeds_hyperparameters():
    cfg = resolve(TrialConfig("disc")).cfg
    assert (cfg.batch_size, cfg.dataset_size, cfg.epochs, cfg.lr) == (100, 1000, 100, 0.1)
    peaks = resolve(TrialConfig("peaks")).cfg
    assert peaks.batch_size == peaks.dataset_size == 40_000 and peaks.epochs == 2000
    opt = WORKLOADS["mnist_cnn"].make_optimizer(model("mnist_cnn").parameters(), 0.01)
    assert opt.defaults["momentum"] == 0.5
    assert WORKLOADS["lenet"].make_loss().reduction == "sum"


@pytest.mark.parametrize("kw, field, words", [
    (dict(workload="disc", width=0), "width", "width must be an integer >= 1, got 0"),
    (dict(workload="nope"), "workload", "workload must be one of"),
    (dict(workload="disc", device="tpu"), "device", "device must be one of"),
    (dict(workload="disc", batch_size=2000), "batch_size", "batch_size must be <= dataset_size (1000), got 2000"),
    (dict(workload="lenet", depth=3), "depth", "depth is not an axis of workload 'lenet'"),
    (dict(workload="peaks", dataset_size=1000), "dataset_size", "nearest: 961 or 1024"),
    (dict(workload="mnist_cnn", data="digits", dataset_size=5000), "data", "use data 'synthetic'"),
    (dict(workload="disc", epochs=1, warmup_epochs=1), "warmup_epochs", "at least one epoch must be timed"),
    (dict(workload="disc", engine="jit"), "engine", "engine must be one of ['eager', 'graph', 'compile', 'triton']"),
    (dict(workload="disc", engine="graph"), "engine", "engine 'graph' captures a CUDA graph: it needs device cuda"),
    (dict(workload="disc", engine="graph", device="cuda", loop="seed"), "loop", "a CUDA graph cannot hold"),
    (dict(workload="tabular", engine="graph", device="cuda", dataset_size=1000), "batch_size",
     "dataset_size (1000) must be a multiple of batch_size (64)"),
    (dict(workload="disc", engine="compile", warmup_epochs=0), "warmup_epochs", "compilation or capture stays out"),
    (dict(workload="disc", engine="compile", device="ddp:2"), "engine", "use engine 'eager' there"),
])
def test_bad_configs_are_refused_by_name(kw, field, words):
    with pytest.raises(ConfigError, match=re.escape(words)) as info:
        resolve(TrialConfig(**kw))
    assert info.value.field == field


def test_one_seeded_step_gives_the_same_loss_on_1_and_2_threads():
    losses = []
    for threads in (1, 2):
        row = run_trial(resolve(TrialConfig("disc", depth=8, epochs=2, warmup_epochs=1, dataset_size=200, threads=threads,
                                            min_timed_s=0)))
        losses.append(row["train_loss"])
        assert row["torch_threads"] == threads
    assert math.isclose(losses[0], losses[1], rel_tol=1e-5)


def test_a_trial_reports_time_quality_and_environment():
    row = run_trial(resolve(TrialConfig("tabular", dataset_size=512, epochs=4, batch_size=64)))
    # 3 epochs asked, timed on toward min_timed_s (0.5 s), at most 10 x 3
    assert 3 <= len(row["epoch_s"]) == row["timed_epochs"] <= 30 and row["steps_per_epoch"] == 8
    assert timed_as_the_rule_says(row, TrialConfig.min_timed_s)
    assert row["epoch_s_min"] <= row["epoch_s_median"] <= row["epoch_s_max"]
    assert row["train_s"] >= sum(row["epoch_s"]) * 0.99  # the phase holds the epochs
    assert row["total_s"] > row["train_s"] + row["warmup_s"]
    assert 0.5 < row["test_accuracy"] <= 1 and row["n_test"] == 128
    assert row["samples_per_s"] == pytest.approx(512 * row["timed_epochs"] / sum(row["epoch_s"]))
    assert row["device_name"] == row["cpu_model"] and row["peak_gpu_bytes"] is None
    assert len(row["loss_curve"]) == row["timed_epochs"] and row["loss_curve"][-1] == pytest.approx(row["train_loss"])


def timed_as_the_rule_says(row: dict, min_s: float) -> bool:
    """Whether the row timed as many epochs past its own as `more_epochs` asks for, from its own numbers.

    The rule saw the wall time of the trial's own epochs, which lies between their marked sum and what
    the train phase (train_s) holds beside the extra epochs; the rule gives fewer epochs for more time,
    so the count lies between its answers at those two bounds. A sum of epoch times >= min_s, asserted
    before, failed under load (0.4936 s for 0.5): the extra epochs ran faster than the first ones."""
    own, timed = row["epochs"] - row["warmup_epochs"], row["epoch_s"]
    slowest, fastest = row["train_s"] - sum(timed[own:]), sum(timed[:own])
    return more_epochs(own, slowest, min_s) <= len(timed) - own <= more_epochs(own, fastest, min_s)


@pytest.mark.parametrize("done, elapsed, min_s, more", [
    (2, 0.2, 0.0, 0),  # no minimum time: the trial's own epochs
    (2, 0.2, 0.1, 1),  # at least MIN_TIMED_EPOCHS = 3
    (2, 0.2, 1.0, 8),  # 0.1 s an epoch: 10 epochs for 1 s
    (2, 0.002, 1.0, 18),  # 1 ms an epoch: capped at 10 x 2
    (20, 4.0, 1.0, 0),  # enough already
    (1, 0.0, 1.0, 2),  # too fast to measure: MIN_TIMED_EPOCHS
])
def test_more_epochs_are_timed_until_the_minimum_is_reached(done, elapsed, min_s, more):
    assert more_epochs(done, elapsed, min_s) == more


def test_a_short_trial_is_timed_until_its_minimum_time():
    row = run_trial(resolve(TrialConfig("disc", depth=3, dataset_size=200, epochs=3, min_timed_s=0.2)))
    assert 3 <= row["timed_epochs"] <= 20 and timed_as_the_rule_says(row, 0.2)
    exact = run_trial(resolve(TrialConfig("disc", depth=3, dataset_size=200, epochs=8, min_timed_s=0)))
    assert exact["timed_epochs"] == 7 and exact["epochs"] == 8  # with no minimum time, the trial's own
    one = run_trial(resolve(TrialConfig("disc", depth=3, dataset_size=200, epochs=2, min_timed_s=0)))
    assert one["timed_epochs"] == 1
    assert row["data_on_device"] and row["engine"] == "eager" and row["compile_s"] is None


def test_training_learns_the_seed_task():
    # seed 000 reaches low training error within its 100 epochs; 30 suffice at depth 6
    row = run_trial(resolve(TrialConfig("disc", depth=6, epochs=30)))
    assert row["train_accuracy"] > 0.9


def test_seed_loop_and_fast_loop_train_identically():
    # the fast loop counts the epoch's correct predictions once an epoch, the seed loop step by step: one count
    fast = run_trial(resolve(TrialConfig("disc", depth=4, epochs=3, min_timed_s=0)))
    seed = run_trial(resolve(TrialConfig("disc", depth=4, epochs=3, loop="seed", min_timed_s=0)))
    assert seed["train_loss"] == pytest.approx(fast["train_loss"], rel=1e-6)
    assert 0.5 < fast["train_accuracy"] < 1 and seed["train_accuracy"] == fast["train_accuracy"]


class NanAtCall(torch.nn.Module):
    """Cross-entropy, NaN from its `at`-th call on: a loss that fails at a known step (each trial makes its own)."""

    def __init__(self, at: int):
        super().__init__()
        self.at, self.calls = at, 0

    def forward(self, out, y):
        self.calls += 1
        loss = torch.nn.functional.cross_entropy(out, y)
        return loss * float("nan") if self.calls >= self.at else loss


def test_a_diverging_trial_names_the_step_and_its_loss_and_no_cause():
    from crossover.data import Data
    from crossover.workload import Workload

    def data(cfg):
        g = torch.Generator().manual_seed(cfg.seed)
        return Data(torch.randn(cfg.dataset_size, 4, generator=g), torch.randint(0, 2, (cfg.dataset_size,), generator=g),
                    None, None, source="random")

    # 4 steps an epoch, the first epoch the warm-up's: its 6th step is the 2nd of epoch 2
    wl = Workload("nan_at_6", make_data=data, make_model=lambda cfg: torch.nn.Linear(4, 2),
                  make_loss=lambda: NanAtCall(6), make_optimizer=lambda p, lr: torch.optim.SGD(p, lr=lr),
                  defaults={"batch_size": 16, "dataset_size": 64, "epochs": 3})
    with pytest.raises(FloatingPointError) as info:
        run_trial(resolve(TrialConfig("nan_at_6", min_timed_s=0), wl))
    said = str(info.value)
    assert re.fullmatch(r"training loss was nan at step 2 of epoch 2 \(the trial replayed from its start a step at "
                        r"a time; the step before: 0\.\d+\)", said), said
    with pytest.raises(FloatingPointError) as info:  # a model that diverges: the step it did, whatever the cause
        run_trial(resolve(TrialConfig("peaks", dataset_size=100, epochs=30, lr=1e30)))
    assert re.match(r"training loss was (nan|inf) at step \d+ of epoch \d+ ", str(info.value)), str(info.value)
    assert "lr" not in str(info.value)


@pytest.mark.slow
def test_the_compiled_model_trains_as_the_eager_one():
    kw = dict(dataset_size=400, epochs=3, min_timed_s=0)
    eager = run_trial(resolve(TrialConfig("peaks", **kw)))
    compiled = run_trial(resolve(TrialConfig("peaks", engine="compile", **kw)))
    assert compiled["loss_curve"] == pytest.approx(eager["loss_curve"], rel=1e-4)
    assert compiled["warmup_s"] > compiled["epoch_s_max"]  # compilation stayed in the warm-up

"""Fused trials: each member of a batched model trains exactly as it would alone, the sweep groups only
what may fuse, and a fused sweep writes one row per member."""

import pandas as pd
import pytest
import torch

from crossover.sweeps.space import FUSE_BUDGET_BYTES, FuseBudget, Space, fuse_budget, groups
from crossover.config import TrialConfig
from crossover.trainables.fused import fusion_key, member_bytes, run_fused
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve


@pytest.mark.parametrize("workload, kw, lrs", [
    ("disc", dict(depth=5, epochs=4), [0.1, 0.05, 0.2]),  # SGD, no shuffling
    ("peaks", dict(dataset_size=400, epochs=6), [0.08, 0.01, 0.03]),  # Adam, full batch
    ("tabular", dict(dataset_size=512, epochs=3), [1e-3, 3e-3, 1e-3]),  # Adam, shuffled, a test split
    # convolutions (one grouped convolution under vmap); mnist_cnn: SGD with momentum, and dropout, each
    # member's masks its own; lenet: a summed loss. Real digits, a test split of 360.
    ("mnist_cnn", dict(dataset_size=200, batch_size=50, epochs=3), [0.01, 0.05, 0.02]),
    ("lenet", dict(dataset_size=200, batch_size=50, epochs=3), [1e-3, 3e-3, 1e-3]),
])
def test_a_fused_member_reproduces_the_trial_run_alone(workload, kw, lrs):
    members = [resolve(TrialConfig(workload, seed=seed, lr=lr, min_timed_s=0, **kw)) for seed, lr in enumerate(lrs)]
    fused = run_fused(members)
    for member, row in zip(members, fused):
        alone = run_trial(member)
        assert row["config_hash"] == alone["config_hash"] and row["fused_members"] == 3
        assert row["loss_curve"] == pytest.approx(alone["loss_curve"], rel=1e-4, abs=1e-7)
        if alone["test_accuracy"] is not None:
            assert row["test_accuracy"] == pytest.approx(alone["test_accuracy"], abs=1 / alone["n_test"])
    assert len({r["fused_group"] for r in fused}) == 1
    assert len({tuple(r["loss_curve"]) for r in fused}) == 3  # the members did differ


# Columns only a fused row fills: the id its group shares (a trial alone has no group).
FUSED_ONLY = {"fused_group"}


@pytest.mark.parametrize("workload, kw", [
    ("peaks", dict(dataset_size=400, epochs=3)),  # no test split, metric 'loss'
    ("tabular", dict(dataset_size=512, epochs=2)),  # a test split, accuracy, shuffled
])
def test_a_fused_row_has_the_non_null_columns_of_a_single_row(workload, kw):
    members = [resolve(TrialConfig(workload, seed=seed, min_timed_s=0, **kw)) for seed in range(2)]
    alone = run_trial(members[0])
    filled = lambda row: {column for column, value in row.items() if value is not None}  # noqa: E731
    for row in run_fused(members):
        assert row["status"] == "ok" and row["fused_members"] == 2
        assert filled(row) - FUSED_ONLY == filled(alone), (filled(row) ^ filled(alone)) - FUSED_ONLY
        assert row["flops_per_step"] == alone["flops_per_step"]  # a member's share of the group's step: its own


def test_only_configs_that_differ_in_seed_and_lr_fuse():
    base = resolve(TrialConfig("peaks", dataset_size=400, epochs=3))
    assert fusion_key(base) == fusion_key(resolve(TrialConfig("peaks", dataset_size=400, epochs=3, seed=4, lr=0.5)))
    assert fusion_key(base) != fusion_key(resolve(TrialConfig("peaks", dataset_size=900, epochs=3)))
    assert fusion_key(resolve(TrialConfig("lenet"))) == fusion_key(resolve(TrialConfig("lenet", seed=2)))  # a CNN
    assert fusion_key(resolve(TrialConfig("transformer"))) is None  # its AdamW: not fused
    assert fusion_key(resolve(TrialConfig("disc", engine="compile"))) is None
    assert fusion_key(resolve(TrialConfig("disc", device="ddp-cpu:2"))) is None

    space = Space("f", {"peaks": {"dataset_size": [400, 900], "lr": [0.01, 0.08]}, "transformer": {"epochs": [2]}},
                  repeats=3)
    trials = space.expand()
    sizes = sorted(len(g) for g in groups(trials, "4"))
    assert sizes == [1, 1, 1, 2, 2, 4, 4]  # the transformer's 3 alone; each peaks size's 6 in groups of 4 and 2
    assert sorted(len(g) for g in groups(trials, "auto")) == [1, 1, 1, 6, 6]  # small members: all fit
    assert groups(trials, "off") == [[t] for t in trials]
    small = member_bytes(trials[0])  # dataset_size 400: two fit the budget below; 900: alone
    assert trials[-4].cfg.dataset_size == 900 and member_bytes(trials[-4]) > 2 * small
    assert sorted(len(g) for g in groups(trials, "auto", FuseBudget(2 * small, "test"))) == [1] * 9 + [2] * 3
    with pytest.raises(ValueError, match="fuse must be 'off', 'auto' or a number"):
        groups(trials, "many")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fallback: a driver that sees no GPU")
def test_without_a_gpu_the_fused_budget_is_the_fixed_one():
    assert fuse_budget() == FuseBudget(FUSE_BUDGET_BYTES, "the fixed budget: the driver sees no GPU")


def test_a_fused_sweep_writes_a_row_per_member(local_ray, tmp_path):
    from crossover.sweeps import runner

    space = Space("fused", {"peaks": {"dataset_size": [400], "epochs": [4]}}, repeats=4, fuse="auto")
    lines = []
    runner.run(space, tmp_path, log=lines.append)
    # no GPU in this driver's sight: the fixed budget, and the log says so
    assert "fused: 4 trials in 1 Tune trials (--fuse auto; budget 8.0 GiB a group (the fixed budget: the driver " \
           "sees no GPU))" in lines
    rows = pd.read_parquet(tmp_path / "fused")
    assert len(rows) == 4 and set(rows["status"]) == {"ok"} and rows["config_hash"].is_unique
    assert set(rows["fused_members"]) == {4} and rows["fused_group"].nunique() == 1
    assert rows["trial_id"].nunique() == 1  # one Tune trial

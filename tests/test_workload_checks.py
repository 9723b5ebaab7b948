"""A Workload is checked when it is made: each misuse is refused in one line naming the workload, the field and the
fix, before any trial (crossover/workload.py Workload.__post_init__); a make_data that returns no Data, or targets
its loss does not take, is refused where planning first makes a batch, in the planning process (sweeps/plan.py),
and its trials never run. A reference to a job is checked first as source, never run (trainables/job.py); a loss of
the user's own without `reduction` trains as a mean; a make_model that sets torch's threads does not set the
trial's.

    python -m pytest tests/test_workload_checks.py
"""

import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from crossover.sweeps import plan
from crossover.sweeps.space import Space
from crossover.config import TrialConfig
from crossover.data import Data
from crossover.trainables.job import check
from crossover.trainables.train import run_trial
from crossover.trainables.trial import resolve
from crossover.config import WorkloadError
from crossover.workload import Param, Workload


def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, 8, generator=g)
    return Data(x, torch.randint(0, 2, (cfg.dataset_size,), generator=g), None, None, source="random")


GOOD = dict(make_data=data, make_model=lambda cfg: nn.Linear(8, 2), make_loss=nn.CrossEntropyLoss,
            make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
            defaults={"batch_size": 16, "dataset_size": 64, "epochs": 2})


@pytest.mark.parametrize("change, words", [
    ({"make_loss": nn.CrossEntropyLoss()},
     "Workload 'mine': make_loss must make the loss, got the loss itself (CrossEntropyLoss); each trial calls "
     "make_loss() for its own: e.g. make_loss=nn.CrossEntropyLoss"),
    ({"make_model": nn.Linear(8, 2)}, "Workload 'mine': make_model must make the model, got the model itself (Linear)"),
    ({"make_optimizer": lambda params: torch.optim.SGD(params, lr=0.1)},
     "Workload 'mine': make_optimizer is called as make_optimizer(params, lr), but <lambda> takes (params); e.g. "
     "make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr)"),
    ({"make_optimizer": "sgd"}, "Workload 'mine': make_optimizer must be a function, called as "
                                "make_optimizer(params, lr), got a str"),
    ({"make_data": lambda: None}, "Workload 'mine': make_data is called as make_data(cfg), but <lambda> takes ()"),
    ({"step": lambda model, x: model(x)}, "Workload 'mine': step is called as step(model, x, y, loss)"),
    ({"metric": lambda outputs: outputs.sum()}, "Workload 'mine': metric is called as metric(outputs, targets)"),
    ({"defaults": {"batchsize": 32}}, "Workload 'mine': defaults['batchsize'] is no axis of crossover's; did you "
                                      "mean 'batch_size'?"),
    ({"defaults": {"colour": 3}}, "Workload 'mine': defaults['colour'] is no axis of crossover's; give one of depth, "
                                  "width, context, batch_size, dataset_size, epochs, lr, or declare an axis of its "
                                  "own in params: params={'colour': Param(default)}"),
    ({"defaults": {"channels": 32}, "params": {"channels": Param(16)}},
     "Workload 'mine': defaults['channels'] is no axis of crossover's; channels is its own axis: leave it out of "
     "defaults, its default is params['channels'].default"),
    ({"params": {"channels": 16}}, "Workload 'mine': params['channels'] must be a Param, got 16; give "
                                   "params={'channels': Param(16)}"),
], ids=["loss-instance", "model-instance", "optimiser-of-one-argument", "optimiser-not-a-function",
        "data-of-no-argument", "step-of-two", "metric-of-one", "defaults-typo", "defaults-unknown",
        "defaults-own-axis", "param-not-a-Param"])
def test_a_misused_workload_is_refused_when_made_in_one_line_naming_the_field_and_the_fix(change, words):
    with pytest.raises(WorkloadError) as info:
        Workload("mine", **{**GOOD, **change})
    said = str(info.value)
    assert said.startswith(words) and "\n" not in said, said


def test_factories_crossover_can_call_pass_classes_and_defaults_included():
    made = Workload("mine", **{**GOOD, "make_optimizer": torch.optim.SGD, "params": {"channels": Param(16)}})
    assert made.defaults["batch_size"] == 16 and made.make_loss is nn.CrossEntropyLoss
    from crossover.trainables.workloads import WORKLOADS  # the built-ins are made through the same checks
    assert {"disc", "mnist_cnn", "lenet", "peaks", "tabular", "transformer"} <= set(WORKLOADS)


def test_make_data_that_returns_no_data_is_refused_by_its_workload_in_a_trial_too():
    tupled = Workload("tupled", **{**GOOD, "make_data": lambda cfg: (data(cfg).x, data(cfg).y)})
    cfg = TrialConfig("tupled", batch_size=16, dataset_size=64, epochs=2)
    with pytest.raises(WorkloadError, match=r"^Workload 'tupled': make_data must return a crossover.Data, got "
                                            r"a tuple; return Data\(x, y, test_x, test_y, source='...'\)"):
        tupled.data(cfg)
    assert Workload("good", **GOOD).data(cfg).n == 64


JOB = '''
import torch
from torch import nn
from crossover.data import Data
from crossover.workload import Workload


def data(cfg):
    x = torch.randn(cfg.dataset_size, 8)
    {returns}

workload = Workload("{name}", make_data=data, make_model=lambda cfg: nn.Linear(8, 2), make_loss={loss},
                    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
                    defaults={{"batch_size": 16, "dataset_size": 64, "epochs": 2}})
'''


def job(folder, name, returns="return Data(x, (x.sum(1) > 0).long(), None, None, source='random')",
        loss="nn.CrossEntropyLoss") -> str:
    (folder / f"{name}.py").write_text(JOB.format(name=name, returns=returns, loss=loss))
    return f"{folder / name}.py:workload"


def test_a_job_file_whose_workload_is_misused_is_refused_as_planned_in_one_line(tmp_path, planner):
    ref = job(tmp_path, "wc_loss", loss="nn.CrossEntropyLoss()")
    with pytest.raises(plan.PlanError) as info:
        Space("refused", {ref: {}}, planner=planner).expand()
    said = str(info.value)
    assert said == (f"--workload {ref!r}: Workload 'wc_loss': make_loss must make the loss, got the loss itself "
                    "(CrossEntropyLoss); each trial calls make_loss() for its own: e.g. make_loss=nn.CrossEntropyLoss, "
                    "or make_loss=lambda: nn.CrossEntropyLoss(reduction='sum')"), said
    assert "wc_loss" not in sys.modules  # refused in the planning process: never imported here


def test_a_make_data_that_returns_a_tuple_is_faulted_as_planned_and_its_trials_never_run(tmp_path, planner, capfd):
    ref = job(tmp_path, "wc_tuple", returns="return x, (x.sum(1) > 0).long()")
    trials = Space("tupled", {ref: {"batch_size": [8, 16]}}, planner=planner).expand()
    planner.member_sizes(trials)
    said = planner.fault(trials[0].wl)
    assert said == ("wc_tuple:workload: Workload 'wc_tuple': make_data must return a crossover.Data, got a tuple; "
                    "return Data(x, y, test_x, test_y, source='...') (test_x and test_y None where it has no test "
                    "split); its trials are error rows and do not run"), said
    err = capfd.readouterr().err
    assert err.count("error: ") == 1 and said in err  # said once, for both sizes


def targets(dtype, *shape):
    """A make_data whose targets are zeros of `dtype` and shape (samples, *shape)."""
    return lambda cfg: Data(data(cfg).x, torch.zeros(cfg.dataset_size, *shape, dtype=dtype), None, None, source="random")


@pytest.mark.parametrize("loss, dtype, shape, words", [
    (nn.CrossEntropyLoss, torch.float32, (), "make_data's Data.y is torch.float32 of shape (64,), but its loss "
     "CrossEntropyLoss takes class indices as torch.int64 or torch.uint8: give y.long(), or class probabilities as "
     "floats of the outputs' shape"),
    (nn.CrossEntropyLoss, torch.bool, (), "Data.y is torch.bool of shape (64,), but its loss CrossEntropyLoss takes "
     "class indices"),
    (nn.NLLLoss, torch.int32, (), "Data.y is torch.int32 of shape (64,), but its loss NLLLoss takes class indices as "
     "torch.int64 or torch.uint8: give y.long()"),
    (nn.MSELoss, torch.long, (2,), "Data.y is torch.int64 of shape (64, 2), but its loss MSELoss takes real-valued "
     "targets: give y.float()"),
    (nn.BCEWithLogitsLoss, torch.long, (2,), "its loss BCEWithLogitsLoss takes real-valued targets: give y.float()"),
], ids=["ce-float", "ce-bool", "nll-int32", "mse-long", "bce-long"])
def test_targets_of_a_dtype_the_loss_does_not_take_are_refused_naming_the_workload_the_field_and_the_fix(
        loss, dtype, shape, words):
    wl = Workload("mine", **{**GOOD, "make_loss": loss, "make_data": targets(dtype, *shape)})
    with pytest.raises(WorkloadError) as info:
        wl.data(TrialConfig("mine", batch_size=16, dataset_size=64, epochs=2))
    said = str(info.value)
    assert said.startswith("Workload 'mine': make_data's Data.y is ") and words in said and "\n" not in said, said


@pytest.mark.parametrize("loss, dtype, shape", [
    (nn.CrossEntropyLoss, torch.long, ()), (nn.CrossEntropyLoss, torch.uint8, ()),
    (nn.CrossEntropyLoss, torch.float32, (2,)),  # class probabilities
    (nn.MSELoss, torch.float64, (2,)), (nn.L1Loss, torch.float32, (2,)),
    (nn.CosineEmbeddingLoss, torch.long, ()),  # a loss not in the tables: unchecked
], ids=["ce-long", "ce-uint8", "ce-probabilities", "mse-double", "l1-float", "unlisted"])
def test_targets_the_loss_takes_pass_and_a_step_of_its_own_is_trusted_with_its_targets(loss, dtype, shape):
    cfg = TrialConfig("mine", batch_size=16, dataset_size=64, epochs=2)
    assert Workload("mine", **{**GOOD, "make_loss": loss, "make_data": targets(dtype, *shape)}).data(cfg).n == 64
    stepped = Workload("mine", **{**GOOD, "make_data": targets(torch.float32), "step": lambda m, x, y, loss: (
        loss(m(x), y.long()), m(x))})
    assert stepped.data(cfg).y.dtype == torch.float32


def test_float_class_indices_are_faulted_as_planned_and_a_trial_given_them_is_an_error_row(tmp_path, planner, capfd):
    from crossover.trainables.rows import error_text, failed_row
    from crossover.trainables.train import run_trial
    from crossover.trainables.trial import here

    ref = job(tmp_path, "wc_float", returns="return Data(x, (x.sum(1) > 0).float(), None, None, source='random')")
    trials = Space("floats", {ref: {"batch_size": [16]}}, planner=planner).expand()
    planner.member_sizes(trials)
    said = planner.fault(trials[0].wl)
    assert said == ("wc_float:workload: Workload 'wc_float': make_data's Data.y is torch.float32 of shape (16,), but "
                    "its loss CrossEntropyLoss takes class indices as torch.int64 or torch.uint8: give y.long(), or "
                    "class probabilities as floats of the outputs' shape; its trials are error rows and do not run"), said
    assert capfd.readouterr().err.count("error: ") == 1
    with pytest.raises(WorkloadError) as info:  # a trial that ran anyway is refused as it makes its data
        run_trial(here(trials[0], planner.registry))  # its Workload itself, in this process
    row = failed_row(trials[0], error_text(info.value))  # its row, as trainables/trainable.py writes it
    assert row["status"] == "error" and row["error"].startswith("WorkloadError: Workload 'wc_float': make_data's "
                                                                "Data.y is torch.float32 of shape (64,)"), row


class MeanCrossEntropy(nn.Module):
    """A user's own loss, a plain nn.Module: no `reduction` attribute, averaging as F.cross_entropy does."""

    def forward(self, out, y):
        return F.cross_entropy(out, y)


def test_a_users_loss_without_reduction_trains_as_the_mean_torchs_own_loss_takes():
    cfg = TrialConfig("mine", batch_size=16, dataset_size=64, epochs=2, min_timed_s=0)
    own, torchs = (run_trial(resolve(cfg, Workload("mine", **{**GOOD, "make_loss": loss})))
                   for loss in (MeanCrossEntropy, nn.CrossEntropyLoss))
    assert own["status"] == "ok", own.get("error")
    assert own["train_loss"] == pytest.approx(torchs["train_loss"])  # per sample, not a batch's sum of them


class Outputs(nn.Module):
    """A model whose output is no tensor, as a Hugging Face model's or a model of several heads."""

    def __init__(self, kind):
        super().__init__()
        self.layer, self.kind = nn.Linear(2, 2), kind

    def forward(self, x):
        out = self.layer(x)
        return {"logits": out, "hidden": x} if self.kind is dict else (out, x)


class FirstOutput(nn.Module):
    """A user's loss that takes a model's tuple of outputs itself."""

    def forward(self, out, y):
        return F.cross_entropy(out[0], y)


@pytest.mark.parametrize("kind, fix", [
    (dict, "give the Workload a step that takes the tensor the loss needs (of keys ['logits', 'hidden']): "
           "def step(model, x, y, loss): out = model(x)[KEY]; return loss(out, y), out"),
    (tuple, "give the Workload a step that takes the tensor the loss needs: "
            "def step(model, x, y, loss): out = model(x)[0]; return loss(out, y), out")])
def test_a_model_output_that_is_no_tensor_given_to_torchs_loss_names_the_step_that_takes_it(kind, fix):
    x, y = torch.randn(4, 2), torch.zeros(4, dtype=torch.long)
    with pytest.raises(TypeError) as info:
        Workload("outputs", **GOOD).run_step(Outputs(kind), x, y, nn.CrossEntropyLoss())
    assert str(info.value) == f"the model returned a {kind.__name__}, not a tensor, and the loss takes a tensor: {fix}"
    loss, out = Workload("outputs", **GOOD).run_step(Outputs(tuple), x, y, FirstOutput())  # a loss that takes it
    assert torch.isfinite(loss) and isinstance(out, tuple)


def test_a_reference_is_checked_as_source_and_its_packages_are_never_run(tmp_path, monkeypatch):
    package = tmp_path / "wc_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('run')\n")
    (package / "jobs.py").write_text("raise SystemExit('run')\ntry:\n    from x import y as workload\n"
                                     "except ImportError:\n    if True:\n        (other, workload) = 1, 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    check("wc_pkg.jobs:workload")  # bound in an `except`'s `if`, by a tuple
    check("wc_pkg.jobs:other")
    with pytest.raises(WorkloadError, match=r"^--workload 'wc_pkg.jobs:workloads': \S+/wc_pkg/jobs.py defines no "
                                            r"'workloads' at its top level; did you mean 'workload'\?$"):
        check("wc_pkg.jobs:workloads")
    assert "wc_pkg" not in sys.modules
    check("tabular")  # a built-in's name: checked where the built-ins are


def test_a_package_not_installed_is_refused_where_imported_unguarded_by_the_job_or_a_module_beside_it(tmp_path):
    (tmp_path / "wc_helper.py").write_text("import json\nfrom wc_missing_pkg.models import net\n")
    (tmp_path / "wc_uses.py").write_text("import torch\nfrom wc_helper import net\nworkload = net\n")
    with pytest.raises(WorkloadError) as info:
        check(f"{tmp_path}/wc_uses.py:workload")
    assert str(info.value).startswith(f"--workload '{tmp_path}/wc_uses.py:workload': {tmp_path}/wc_helper.py:2 "
                                      "imports 'wc_missing_pkg', which is not installed here: install it"), info.value
    # guarded (an optional dependency), or in a function: found, or not, as it runs
    (tmp_path / "wc_guarded.py").write_text("try:\n    import wc_missing_pkg\nexcept ImportError:\n    pass\n"
                                            "def later():\n    import wc_missing_pkg\nworkload = 1\n")
    check(f"{tmp_path}/wc_guarded.py:workload")


@pytest.mark.parametrize("source, passes", [
    ("globals()['workload'] = 1\n", True),
    ("from os.path import *\n", True),
    ("def __getattr__(name):\n    return 1\n", True),
    ("def make():\n    workload = 1\n", False),  # a function's own name is not the module's
    ("workload = (\n", False),
], ids=["globals", "star-import", "module-getattr", "in-a-function", "syntax-error"])
def test_a_name_a_module_may_make_as_it_runs_passes_and_one_it_cannot_is_refused(tmp_path, source, passes):
    (tmp_path / "wc_made.py").write_text(source)
    ref = f"{tmp_path}/wc_made.py:workload"
    if passes:
        check(ref)
        return
    with pytest.raises(WorkloadError) as info:
        check(ref)
    said = str(info.value)
    assert said.startswith(f"--workload {ref!r}: {tmp_path}/wc_made.py ") and "\n" not in said, said


def test_a_make_model_that_sets_torchs_threads_is_timed_at_the_trials_own_and_its_row_says_so():
    def grabbing(cfg):
        torch.set_num_threads(3)  # as a job that sizes torch for a whole machine does
        return nn.Linear(8, 2)

    before = torch.get_num_threads()
    try:
        row = run_trial(resolve(TrialConfig("mine", threads=2, batch_size=16, dataset_size=64, epochs=2, min_timed_s=0),
                                Workload("mine", **{**GOOD, "make_model": grabbing})))
        alone = run_trial(resolve(TrialConfig("mine", threads=2, batch_size=16, dataset_size=64, epochs=2,
                                              min_timed_s=0), Workload("mine", **GOOD)))
    finally:
        torch.set_num_threads(before)
    assert row["status"] == "ok" and row["torch_threads"] == 2  # the timed epochs ran at the trial's count
    assert row["threads_note"] == ("the workload set torch's threads to 3 as it built its data, model, optimiser and "
                                   "loss; put back to the trial's 2 before the timed epochs")
    assert alone["threads_note"] is None and alone["torch_threads"] == 2

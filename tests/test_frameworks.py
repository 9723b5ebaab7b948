"""crossover.frameworks: a Workload from a timm model name, a transformers config and a LightningModule, each a job
file of a few lines, trains a real step through crossover's own loop and is counted as `crossover predict` counts
it; gradient accumulation steps as one batch would; a framework's precision flag and a missing library are refused
in one line naming the fix; and a model output that is no tensor, given to the loss, names the step that takes its
.logits."""

import json
import sys

import pytest
import torch
from test_command import crossover

from crossover.config import TrialConfig
from crossover.sweeps.count_step import counted
from crossover.trainables.placement import Placement
from crossover.trainables.registry import Registry
from crossover.trainables.timing import Clock, Timer
from crossover.trainables.train import Loop
from crossover.trainables.trial import resolve
from crossover.trainables.workloads import n_params

pytest.importorskip("timm")
pytest.importorskip("transformers")
pytest.importorskip("lightning")

TIMM_JOB = """
from crossover.frameworks import timm_workload
workload = timm_workload("resnet18", image_size=32, num_classes=10, batch_size=8, dataset_size=64)
"""
BERT_JOB = """
from transformers import BertConfig
from crossover.frameworks import hf_workload
config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=500)
workload = hf_workload(config, seq_len=16, num_labels=3, per_device_train_batch_size=4, gradient_accumulation_steps=2)
"""
GPT_JOB = """
from transformers import GPT2Config
from crossover.frameworks import hf_workload
config = GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=500, n_positions=64, bos_token_id=0, eos_token_id=0)
workload = hf_workload(config, "causal-lm", seq_len=16, per_device_train_batch_size=4)
"""
LIGHTNING_MODULE = """
import torch
import lightning.pytorch as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Lit(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return {"loss": nn.functional.cross_entropy(self.net(x), y)}

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.5)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 10)}


class Numbers(pl.LightningDataModule):
    def setup(self, stage):
        x = torch.randn(96, 8, generator=torch.Generator().manual_seed(0))
        self.train = TensorDataset(x, (x.sum(1) > 0).long())

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=16, shuffle=True)
"""
LIGHTNING_JOB = """
from crossover.frameworks import lightning_workload
from {module} import Lit, Numbers
workload = lightning_workload(Lit, Numbers(), accumulate_grad_batches={steps})
"""


def job(tmp_path, name: str, text: str, **fill) -> str:
    """A job file `name`.py (a module of its own name: each test imports its own) and its reference."""
    if "{module}" in text:
        (tmp_path / f"{name}_model.py").write_text(LIGHTNING_MODULE)
        fill["module"] = f"{name}_model"
    path = tmp_path / f"{name}.py"
    path.write_text(text.format(**fill) if fill else text)
    assert len(path.read_text().strip().splitlines()) <= 5  # a job of a few lines
    return f"{path}:workload"


def one_step(ref: str, **axes) -> tuple[Loop, dict, dict]:
    """A loop of the job's trial on the CPU, one batch large, and the model's parameters before and after one epoch
    of it: one step."""
    wl = Registry().register(ref)
    batch = axes.pop("batch_size", None) or wl.defaults["batch_size"]
    trial = resolve(TrialConfig(wl.name, module=wl.ref, batch_size=batch, dataset_size=batch, epochs=1,
                               warmup_epochs=0, **axes))
    cpu = torch.device("cpu")
    loop = Loop.build(trial, Placement((cpu,)), Timer(Clock((cpu,))))
    before = {k: v.clone() for k, v in loop.model.state_dict().items()}
    loss = loop.epoch()
    assert torch.isfinite(loss) and loss > 0
    return loop, before, loop.model.state_dict()


@pytest.mark.parametrize("name, text, fill", [
    ("fw_timm", TIMM_JOB, {}), ("fw_bert", BERT_JOB, {}), ("fw_gpt", GPT_JOB, {}),
    ("fw_lit", LIGHTNING_JOB, {"steps": 2})], ids=["timm", "hf-classification", "hf-causal-lm", "lightning"])
def test_a_job_of_a_few_lines_trains_a_step_in_crossovers_loop_and_is_counted(tmp_path, name, text, fill):
    ref = job(tmp_path, name, text, **fill)
    loop, before, after = one_step(ref)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the optimiser stepped
    step = counted(ref, None, 1024, {}, {})
    assert step["n_params"] == n_params(loop.model) > 0
    assert step["flops_per_step"] > 0 and step["counted_on"] == "meta"  # shapes alone: nothing of the job reads a value
    assert step["steps_per_epoch"] == -(-1024 // step["batch_size"])


def test_the_frameworks_flags_become_crossovers_axes(tmp_path):
    bert = Registry().register(job(tmp_path, "fw_flags_bert", BERT_JOB))
    # per_device_train_batch_size x gradient_accumulation_steps: the samples of one optimiser step
    assert (bert.defaults["batch_size"], bert.defaults["context"], bert.defaults["lr"]) == (8, 16, 5e-5)
    lit = Registry().register(job(tmp_path, "fw_flags_lit", LIGHTNING_JOB, steps=3))
    # the loader's batch x accumulate_grad_batches; the DataModule's samples; configure_optimizers' lr
    assert (lit.defaults["batch_size"], lit.defaults["dataset_size"], lit.defaults["lr"]) == (48, 96, 0.5)
    timm = Registry().register(job(tmp_path, "fw_flags_timm", TIMM_JOB))
    assert timm.params["image_size"].default == 32 and timm.defaults["batch_size"] == 8


def test_accumulated_micro_batches_step_as_the_whole_batch_would(tmp_path):
    """Two micro-batches of 16, each its own forward and backward, and one optimiser step: the weights one step of
    the batch of 32 gives (a mean loss, no batch statistics), and the loss reported is the batch's."""
    whole, before, stepped = one_step(job(tmp_path, "fw_acc_one", LIGHTNING_JOB, steps=1), batch_size=32)
    twice, before_too, accumulated = one_step(job(tmp_path, "fw_acc_two", LIGHTNING_JOB, steps=2), batch_size=32)
    assert all(torch.equal(before[k], before_too[k]) for k in before)  # one seed, one start
    for k in stepped:
        torch.testing.assert_close(accumulated[k], stepped[k])
    torch.testing.assert_close(twice.loss_sum, whole.loss_sum)


def test_accumulation_refuses_a_batch_smaller_than_its_steps_and_fp16(tmp_path):
    from crossover.config import ConfigError

    wl = Registry().register(job(tmp_path, "fw_acc_refused", LIGHTNING_JOB, steps=4))
    with pytest.raises(ConfigError, match=r"batch_size must be >= accumulate_grad_batches \(4\), got 2"):
        wl.check(TrialConfig(wl.name, batch_size=2))
    with pytest.raises(ConfigError, match="use --precision bf16"):
        wl.check(TrialConfig(wl.name, batch_size=64, precision="fp16"))


def test_a_frameworks_precision_flag_names_the_commands_flag():
    from crossover.frameworks import hf_workload, lightning_workload
    from transformers import BertConfig

    with pytest.raises(ValueError) as info:
        lightning_workload(torch.nn.Linear(2, 2), data=torch.zeros(4, 2), precision="bf16-mixed")
    assert str(info.value) == ("precision='bf16-mixed': the precision is the command's, not the job's: give "
                               "--precision bf16 to crossover sweep or predict instead, and leave it out here")
    with pytest.raises(ValueError, match="fp16=True: .* give --precision fp16 to crossover sweep or predict"):
        hf_workload(BertConfig(), fp16=True)


def test_a_missing_library_is_one_line_naming_the_extra(monkeypatch):
    from crossover.frameworks import hf_workload, timm_workload

    monkeypatch.setitem(sys.modules, "timm", None)  # as where it is not installed: its import fails
    with pytest.raises(ModuleNotFoundError) as info:
        timm_workload("resnet18")
    assert str(info.value) == "timm_workload needs timm, which is not installed: pip install 'crossover[timm]'"
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'crossover\[hf\]'"):
        hf_workload("bert-base-uncased")


def test_a_model_output_that_is_no_tensor_given_to_the_loss_names_the_step_that_takes_its_logits(tmp_path):
    """A transformers classifier given to crossover's default step (model(x), then the loss), as a user writes it
    before giving it a step: one line naming the fix, not torch's 'must be Tensor'."""
    path = tmp_path / "fw_no_step.py"
    path.write_text(BERT_JOB.replace("workload = hf_workload", "made = hf_workload") + """
import torch
from crossover import Data, Workload
def data(cfg):
    return Data(torch.randint(0, 500, (cfg.dataset_size, 16)), torch.randint(0, 3, (cfg.dataset_size,)), None, None,
                source="random")
workload = Workload("no_step", make_data=data, make_model=made.make_model, make_loss=torch.nn.CrossEntropyLoss,
                    make_optimizer=made.make_optimizer, defaults={"batch_size": 4})
""")
    with pytest.raises(TypeError) as info:
        one_step(f"{path}:workload")
    said = str(info.value)
    assert said.startswith("the model returned a SequenceClassifierOutput, not a tensor, and the loss takes a tensor: "
                           "give the Workload a step that takes its .logits"), said
    assert "crossover.frameworks.hf_workload" in said and "\n" not in said
    assert len(f"not counted: TypeError: {said}") <= 300  # whole in a counted step's costs_note, as predict says it


@pytest.mark.slow
def test_crossover_predict_answers_a_timm_job_of_two_lines(tmp_path):
    ref = job(tmp_path, "fw_predict_timm", TIMM_JOB)
    done = crossover("predict", "--workload", ref, "--epochs", "1", "--dataset-size", "1024", "--json", "-")
    assert done.returncode == 0, done.stderr
    lines = json.loads(done.stdout)
    assert {line["workload"] for line in lines} == {"resnet18"}
    assert all(line["batch_size"] == 8 and line["dataset_size"] == 1024 for line in lines)
    assert all(line["epoch_s"] > 0 for line in lines)

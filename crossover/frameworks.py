"""A Workload from a model the user already has: a Lightning module, a Hugging Face transformers model, a timm model.

    # job.py
    from crossover.frameworks import timm_workload
    workload = timm_workload("resnet50", image_size=224, num_classes=1000, batch_size=64)

    crossover predict --workload job.py:workload --epochs 10

Each helper returns a crossover `Workload` (crossover/workload.py) built through the library's public API, which
is an optional extra of the package, imported when the helper is called: `import crossover` never needs it, and a
missing one is one line naming the extra (`pip install 'crossover[timm]'`). What each framework's flags become:

    batch size            Workload defaults' batch_size: the samples of one optimiser step
    gradient accumulation the step runs the batch as that many micro-batches, a backward each (`accumulating`)
    learning rate         defaults' lr (Lightning: the lr configure_optimizers gives, scaled by a sweep's lr)
    precision             the command's --precision (bf16, fp16): a job holds none, and a helper refuses one
                          in one line naming the flag, so that the answer never times a precision the job did not ask
    LR scheduler          not run: crossover times the step, and a scheduler's update is a few scalar ops an epoch

Data is made up where the framework has none to give (random images for timm, random tokens for transformers): the
time of a step does not depend on the values, and nothing is downloaded. Weights are initialised, never loaded.
"""

from __future__ import annotations

import copy
import importlib
import re
import weakref

import torch
from torch import nn
from torch.utils._pytree import tree_leaves, tree_map

from crossover.config import ConfigError, WorkloadError
from crossover.data import Data, take
from crossover.workload import Param, Workload, filled_in, sums

# the extra that installs each library (pyproject.toml's [project.optional-dependencies])
EXTRAS = {"timm": "timm", "transformers": "hf"}
# Lightning's precision flags as crossover's --precision names them (None: no autocast precision, which crossover has not)
LIGHTNING_PRECISION = {"32-true": "default", "32": "default", 32: "default", "bf16-mixed": "bf16",
                       "16-mixed": "fp16", "bf16-true": None, "16-true": None, "64-true": None, "64": None, 64: None}
HF_TASKS = ("sequence-classification", "causal-lm")


def _library(module: str, helper: str):
    """`module` imported, or ModuleNotFoundError in one line naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name is None or exc.name.split(".")[0] != top:
            raise  # the library is there and something it imports is not: its own error says what
        raise ModuleNotFoundError(f"{helper} needs {top}, which is not installed: pip install "
                                  f"'crossover[{EXTRAS[top]}]'", name=top) from None


def _name(text: str) -> str:
    """`text` as a Workload's name (crossover/workload.py NAME): other characters as '-', a letter first."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "-", text.split("/")[-1])[:64]
    return cleaned if cleaned[:1].isalpha() else f"m{cleaned}"[:64]


def _precision_refused(given, crossover: str | None, flag: str) -> None:
    """ValueError naming the command's flag where the framework's precision `given` (crossover's `crossover`) is
    not PyTorch's default: a Workload holds no precision, the command that sweeps or predicts it names one."""
    if crossover == "default":
        return
    fix = (f"give --precision {crossover} to crossover sweep or predict instead" if crossover else
           "crossover trains in autocast (mixed) precision alone: --precision bf16 or fp16 of the command")
    raise ValueError(f"{flag}={given!r}: the precision is the command's, not the job's: {fix}, and leave it out here")


def accumulating(step, steps: int):
    """`step` (model, x, y, loss) -> (loss, outputs) run as `steps` micro-batches of the batch, each one's forward and
    backward in turn, as a framework's gradient accumulation runs them: the gradients add up over the batch, and
    crossover's loop steps the optimiser once. The backward of each micro-batch but the last runs here; the last one's
    loss, with the others' values added (detached), is returned for the loop's own backward, so the loss it reports is
    the batch's. Outside training (no gradient: evaluation) the batch runs whole."""
    if steps == 1:
        return step

    def accumulated(model, x, y, loss):
        if not torch.is_grad_enabled():
            return step(model, x, y, loss)
        n, done, outputs = len(y), 0.0, []
        bounds = [n * i // steps for i in range(steps + 1)]
        for i, (start, end) in enumerate(zip(bounds, bounds[1:])):
            part, out = step(model, take(x, slice(start, end)), y[start:end], loss)
            # a mean's share of the batch's mean; a loss that sums is the batch's sum as it is
            part = part if sums(loss) else part * ((end - start) / n)
            outputs.append(out)
            if i < steps - 1:
                part.backward()
                done = done + part.detach()
        # the outputs for the metric (None where the step gives none: a loss alone)
        return part + done, None if outputs[0] is None else torch.cat(outputs)

    return accumulated


def _accumulation_check(steps: int, flag: str):
    """A Workload's check for `steps` micro-batches: a batch of at least that many samples, and no fp16, whose
    GradScaler scales the loss the loop calls backward on, not the micro-batches' backward run inside the step."""
    def check(cfg):
        batch = filled_in(cfg.batch_size, "batch_size")
        if batch < steps:
            raise ConfigError("batch_size", f"batch_size must be >= {flag} ({steps}), got {batch}: each of its "
                                            "micro-batches takes a sample at least")
        if steps > 1 and cfg.precision == "fp16":
            raise ConfigError("precision", f"precision 'fp16' with {flag}={steps}: fp16's loss scaling does not reach "
                                           "the micro-batches' own backward; use --precision bf16, or "
                                           f"{flag}=1 with the batch of one micro-batch")
    return check


# --- timm -------------------------------------------------------------------------------------------------------------

def timm_workload(model: str, *, image_size: int = 224, num_classes: int = 1000, batch_size: int = 64,
                  dataset_size: int = 1024, in_chans: int = 3, opt: str = "adamw", lr: float = 1e-3,
                  weight_decay: float = 0.05, name: str | None = None, **model_kwargs) -> Workload:
    """A timm model by name (timm.create_model(model, pretrained=False, num_classes=..., in_chans=...)) trained on
    random images of `image_size` pixels square (an axis of its own: --param image_size=N) and `num_classes` labels,
    with cross-entropy and timm's optimiser `opt` (timm.optim.create_optimizer_v2). `model_kwargs` go to create_model
    (drop_rate=0.1, ...)."""
    timm = _library("timm", "timm_workload")
    optim = _library("timm.optim", "timm_workload")
    if not timm.is_model(model):
        raise WorkloadError(f"timm_workload: timm has no model {model!r}; timm.list_models('{model[:4]}*') lists those "
                            "it has")

    def data(cfg):
        g = torch.Generator().manual_seed(cfg.seed)
        size = cfg.params["image_size"]
        x = torch.randn(cfg.dataset_size, in_chans, size, size, generator=g)
        return Data(x, torch.randint(0, num_classes, (cfg.dataset_size,), generator=g), None, None, source="random")

    def make_model(cfg):
        return timm.create_model(model, pretrained=False, num_classes=num_classes, in_chans=in_chans, **model_kwargs)

    def make_optimizer(params, lr):
        return optim.create_optimizer_v2(params, opt=opt, lr=lr, weight_decay=weight_decay)

    return Workload(name or _name(model), make_data=data, make_model=make_model, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=make_optimizer,
                    defaults={"batch_size": batch_size, "dataset_size": dataset_size, "lr": lr},
                    params={"image_size": Param(image_size, low=8, high=4096, help="pixels, square")})


# --- Hugging Face transformers -----------------------------------------------------------------------------------------

def hf_workload(model, task: str = "sequence-classification", *, seq_len: int = 128, num_labels: int = 2,
                per_device_train_batch_size: int = 8, gradient_accumulation_steps: int = 1,
                learning_rate: float = 5e-5, weight_decay: float = 0.0, bf16: bool = False, fp16: bool = False,
                dataset_size: int = 1024, name: str | None = None) -> Workload:
    """A transformers model for `task` ('sequence-classification' or 'causal-lm'), from a model id (its config read
    with AutoConfig.from_pretrained; the weights are initialised from it, never downloaded) or a config object
    (BertConfig(...), GPT2Config(...)), trained on random tokens of `seq_len` (crossover's context axis: --context N)
    with AdamW, as the Trainer's default. The arguments are TrainingArguments' where it has them: a step takes
    per_device_train_batch_size x gradient_accumulation_steps samples (`accumulating`). The loss is crossover's
    cross-entropy on the output's .logits: of the labels (accuracy its metric), or of each next token (a causal LM;
    its metric the loss)."""
    transformers = _library("transformers", "hf_workload")
    if task not in HF_TASKS:
        raise WorkloadError(f"hf_workload: task must be one of {list(HF_TASKS)}, got {task!r}")
    for flag, on, said in (("bf16", bf16, "bf16"), ("fp16", fp16, "fp16")):
        _precision_refused(on, "default" if not on else said, flag)
    if isinstance(model, str):
        config = transformers.AutoConfig.from_pretrained(model)
    elif isinstance(model, transformers.PretrainedConfig):
        config = copy.deepcopy(model)  # the user's object is left as it was
    else:
        raise WorkloadError(f"hf_workload: model must be a model id or a transformers config (BertConfig(...)), got a "
                            f"{type(model).__name__}")
    auto = transformers.AutoModelForCausalLM
    if task == "sequence-classification":
        auto = transformers.AutoModelForSequenceClassification
        config.num_labels = num_labels
        if getattr(config, "pad_token_id", None) is None:  # a batch of several sequences needs one (GPT-2 has none)
            config.pad_token_id = getattr(config, "eos_token_id", None) or 0
    positions = next((getattr(config, k) for k in ("max_position_embeddings", "n_positions", "max_seq_len")
                      if isinstance(getattr(config, k, None), int)), None)
    steps = gradient_accumulation_steps

    def data(cfg):
        g = torch.Generator().manual_seed(cfg.seed)
        # a causal LM's targets are its inputs shifted by a token: a sequence of context + 1 tokens holds both
        tokens = torch.randint(0, config.vocab_size, (cfg.dataset_size, cfg.context + 1), generator=g)
        # no attention_mask: one of ones (no padding) is read on the host (transformers' masking) and then left
        # out of the attention; without it the step is the same, and it can be counted on the meta device
        x = {"input_ids": tokens[:, :-1]}
        y = tokens[:, 1:] if task == "causal-lm" else torch.randint(0, num_labels, (cfg.dataset_size,), generator=g)
        return Data(x, y, None, None, source="random")

    def step(model, x, y, loss):
        # the output's .logits and crossover's loss, not the model's own .loss: that one reads a value on the host
        # (an .item()), which the meta device a step is counted on has not, and the count would run on the CPU
        logits = model(**x).logits
        return loss(logits.flatten(0, 1), y.flatten()) if task == "causal-lm" else loss(logits, y), logits

    accumulation = _accumulation_check(steps, "gradient_accumulation_steps")

    def check(cfg):
        if positions is not None and cfg.context > positions:
            raise ConfigError("context", f"context must be <= {positions:,}, the positions of the model's config, got "
                                         f"{cfg.context:,}")
        accumulation(cfg)

    return Workload(name or _name(model if isinstance(model, str) else f"{config.model_type}-{task}"),
                    make_data=data, make_model=lambda cfg: auto.from_config(config),
                    make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay),
                    step=accumulating(step, steps), check=check,
                    metric="loss" if task == "causal-lm" else "accuracy",
                    defaults={"batch_size": per_device_train_batch_size * steps, "dataset_size": dataset_size,
                              "context": seq_len, "lr": learning_rate},
                    axes=frozenset({"context"}))


# --- Lightning --------------------------------------------------------------------------------------------------------

SEQUENCE_KEY = re.compile(r"\[(\d+)\]")  # a batch of a tuple or list held as a dict: item i under '[i]'


def _as_inputs(batch) -> tuple[torch.Tensor | dict, int]:
    """A batch as a Lightning module takes it (a tensor, a tuple or list of tensors, or a dict of them) as crossover's
    inputs (a tensor or a dict of them: a tuple's item i under '[i]'), and its samples."""
    if isinstance(batch, torch.Tensor):
        return batch, len(batch)
    if isinstance(batch, (tuple, list)):
        batch = {f"[{i}]": t for i, t in enumerate(batch)}
    if not isinstance(batch, dict) or not batch or not all(isinstance(t, torch.Tensor) for t in batch.values()):
        raise WorkloadError(f"lightning_workload: a batch must be a tensor, a tuple or list of tensors, or a dict of "
                            f"them, got {type(batch).__name__}")
    return batch, len(next(iter(batch.values())))


def _as_batch(x):
    """What `_as_inputs` made, as the module's training_step takes it (a tuple or list as a list, as a DataLoader
    collates one)."""
    if isinstance(x, dict) and x and all(SEQUENCE_KEY.fullmatch(k) for k in x):
        return [x[f"[{i}]"] for i in range(len(x))]
    return x


def _loaded(datamodule) -> tuple[dict | torch.Tensor, int, int | None]:
    """A LightningDataModule's training set, every batch of its train_dataloader() put together: the inputs, the
    samples and the loader's batch size."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    # a loader that shuffles draws its order from torch's generator: seeded here, on a copy of its state, so that every
    # process that imports the job holds the same samples in the same order (crossover shuffles each epoch itself)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        batches = [_as_inputs(b)[0] for b in loader]
    if not batches:
        raise WorkloadError(f"lightning_workload: {type(datamodule).__name__}.train_dataloader() gave no batch")
    joined = tree_map(lambda *parts: torch.cat(parts), batches[0], *batches[1:])
    return joined, len(tree_leaves(joined)[0]), getattr(loader, "batch_size", None)


def _optimizer_of(configured, owner: str):
    """The optimiser configure_optimizers gave (an optimiser; a list or tuple holding one, with or without a list of
    schedulers; a dict with 'optimizer'); its schedulers are not run (module docstring)."""
    if isinstance(configured, dict):
        configured = configured.get("optimizer")
    if isinstance(configured, (list, tuple)) and configured and isinstance(configured[0], (list, tuple)):
        configured = configured[0]  # ([optimisers], [schedulers])
    if isinstance(configured, (list, tuple)):
        configured = configured[0] if len(configured) == 1 else configured
        configured = configured.get("optimizer") if isinstance(configured, dict) else configured
    if not isinstance(configured, torch.optim.Optimizer):
        raise WorkloadError(f"lightning_workload: {owner}.configure_optimizers() must give one optimiser (alone, in a "
                            f"list, or under 'optimizer'), got {type(configured).__name__}; several optimisers need "
                            "manual optimisation, which crossover's loop does not run")
    return configured


def lightning_workload(module, datamodule=None, *, data=None, batch_size: int | None = None,
                       accumulate_grad_batches: int = 1, precision="32-true", dataset_size: int | None = None,
                       name: str | None = None) -> Workload:
    """A LightningModule trained by crossover's loop: its training_step(batch, batch_idx) gives the loss (a tensor,
    or a dict with 'loss'), its configure_optimizers() the optimiser. `module` is the module (each trial trains a
    copy of it) or a function of no arguments that makes one (a class: each trial's seed then initialises it). The
    data is a LightningDataModule's train_dataloader(), put together in memory, or `data`: a batch of every sample
    (a tensor, a tuple of tensors, or a dict of them) as training_step takes one. `batch_size` (default: the
    loader's), `accumulate_grad_batches` and `precision` are the Trainer's: a step takes batch_size x
    accumulate_grad_batches samples (`accumulating`), and a precision is the command's (module docstring)."""
    if precision not in LIGHTNING_PRECISION:
        raise ValueError(f"precision={precision!r}: give one of Lightning's ({', '.join(map(repr, LIGHTNING_PRECISION))})")
    _precision_refused(precision, LIGHTNING_PRECISION[precision], "precision")
    if (datamodule is None) == (data is None):
        raise WorkloadError("lightning_workload: give the data as a LightningDataModule or as data=(x, y), one of them")
    make = module if callable(module) and not isinstance(module, nn.Module) else None
    first = make() if make else module
    owner = type(first).__name__
    for method in ("training_step", "configure_optimizers"):
        if not callable(getattr(first, method, None)):
            raise WorkloadError(f"lightning_workload: {owner} has no {method}(); crossover takes a LightningModule's")
    if not getattr(first, "automatic_optimization", True):
        raise WorkloadError(f"lightning_workload: {owner} sets automatic_optimization False; crossover's loop runs "
                            "the backward and the optimiser itself, as Lightning's automatic optimisation does")
    own_lr = _optimizer_of(first.configure_optimizers(), owner).param_groups[0]["lr"]
    if datamodule is not None:
        inputs, n, loader_batch = _loaded(datamodule)
        source = type(datamodule).__name__
    else:
        (inputs, n), loader_batch, source = _as_inputs(data), None, "tensors"
    batch = batch_size or loader_batch or 32
    made: weakref.WeakSet = weakref.WeakSet()  # this workload's modules, so that make_optimizer finds a trial's

    def make_data(cfg):
        if cfg.dataset_size > n:
            raise ConfigError("dataset_size", f"dataset_size must be <= {n:,}, the samples of {source}, got "
                                              f"{cfg.dataset_size:,}")
        # y: each sample's index, as the loop's batches need targets; training_step takes its own from the inputs
        return Data(take(inputs, slice(0, cfg.dataset_size)), torch.arange(cfg.dataset_size), None, None, source)

    def make_model(cfg):
        model = make() if make else copy.deepcopy(module)
        made.add(model)
        return model

    def make_optimizer(params, lr):
        params = list(params)
        model = next((m for m in made if any(p is params[0] for p in m.parameters())), None)
        if model is None:
            raise WorkloadError(f"lightning_workload: make_optimizer was given parameters of no {owner} this workload "
                                "made; crossover calls it with the parameters of the model make_model made")
        optimizer = _optimizer_of(model.configure_optimizers(), owner)
        for group in optimizer.param_groups:  # a sweep's lr scales every group's as the module's own lr
            group["lr"] *= lr / own_lr
        return optimizer

    def step(model, x, y, loss):
        out = model.training_step(_as_batch(x), 0)
        out = out.get("loss") if isinstance(out, dict) else out
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{owner}.training_step must return the loss (a tensor, or a dict with 'loss') for "
                            f"crossover to time the step, got {type(out).__name__}")
        return out, None

    return Workload(name or _name(owner), make_data=make_data, make_model=make_model, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=make_optimizer, step=accumulating(step, accumulate_grad_batches),
                    check=_accumulation_check(accumulate_grad_batches, "accumulate_grad_batches"), metric="loss",
                    defaults={"batch_size": batch * accumulate_grad_batches, "dataset_size": dataset_size or n,
                              "lr": own_lr})


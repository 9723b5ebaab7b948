"""The public interface of a workload: what crossover needs of a training job to sweep, time and price it.

A workload is data, a model, a loss and an optimiser, each made by a factory from the trial's config,
and the axes a sweep may vary. The six built-ins (trainables/workloads.py) are defined through this
interface and nothing else; a user's own job is one more `Workload` in a file of theirs:

    # job.py
    from torch import nn
    import torch
    from crossover import Data, Param, Workload

    def data(cfg):
        g = torch.Generator().manual_seed(cfg.seed)
        x = torch.randn(cfg.dataset_size, cfg.params["n_features"], generator=g)
        return Data(x, (x.sum(1) > 0).long(), None, None, source="random")

    workload = Workload(
        "mine", make_data=data,
        make_model=lambda cfg: nn.Sequential(nn.Linear(cfg.params["n_features"], cfg.width), nn.ReLU(),
                                             nn.Linear(cfg.width, 2)),
        make_loss=nn.CrossEntropyLoss, make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr),
        defaults={"width": 64, "batch_size": 64, "dataset_size": 4096, "epochs": 3, "lr": 1e-3},
        axes={"width"}, params={"n_features": Param(16, low=1, high=100_000)})

    crossover sweep --workload job.py:workload          # or: --workload package.module:workload

A workload is named on the command line as `path/to/file.py:attr` or `package.module:attr`; the
attribute is a Workload, or a function of no arguments that returns one. A sweep's driver knows it as a
WorkloadSpec, the Workload as plain data that a process of its own found (sweeps/plan.py). How it is imported
and shipped to Ray's workers: trainables/registry.py; its fingerprint in every trial's config hash:
trainables/fingerprint.py.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import torch
from torch import nn

from crossover.config import ConfigError, TrialConfig, WorkloadError
from crossover.data import Data
from crossover.schema import SEED_AXES

# Every workload varies these; depth, width and context only where it declares them (`axes`).
SHARED_AXES = frozenset(SEED_AXES) - {"depth", "width", "context"}
# What a workload leaves out of `defaults` takes these values.
SHARED_DEFAULTS = {"depth": None, "width": None, "context": None, "batch_size": 64, "dataset_size": 1024,
                   "epochs": 3, "lr": 1e-3}
METRICS = ("accuracy", "loss")  # or a function (outputs, targets) -> a per-batch sum of a per-sample score
# A workload's name is a column, a folder name in charts' files and text in the HTML report: letters,
# digits, '_', '-' and '.', starting with a letter.
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
# How crossover calls each function a Workload holds (always by position), and a call that fits, for the fix
# its refusal gives: a factory of the wrong shape is refused when the Workload is made, not in every trial.
CALLS = {
    "make_data": ("cfg", "make_data=lambda cfg: Data(x, y, test_x, test_y, source='random')"),
    "make_model": ("cfg", "make_model=lambda cfg: nn.Linear(8, 2)"),
    "make_loss": ("", "make_loss=nn.CrossEntropyLoss, or make_loss=lambda: nn.CrossEntropyLoss(reduction='sum')"),
    "make_optimizer": ("params, lr", "make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr)"),
    "step": ("model, x, y, loss", "def step(model, x, y, loss): out = model(**x); return loss(out, y), out"),
    "check": ("cfg", "check=lambda cfg: None (raising ConfigError for a config it cannot run)"),
    "sample": ("cfg", "sample=lambda cfg: torch.empty(3, 32, 32)"),
    "metric": ("outputs, targets", "metric=lambda outputs, targets: (outputs.argmax(1) == targets).sum()"),
}
# What each factory makes: given that thing itself (nn.CrossEntropyLoss() for nn.CrossEntropyLoss), it is refused
# by name, as every trial must make its own (an optimiser holds one model's parameters, a model one trial's weights).
MADE = {"make_data": ("the data", Data), "make_model": ("the model", nn.Module), "make_loss": ("the loss", nn.Module),
        "make_optimizer": ("the optimiser", torch.optim.Optimizer)}
# The targets torch's own losses take, checked on make_data's (`Workload.data`), so that a mismatch is refused as
# planned, not at a trial's first step. A loss of class indices takes these integer dtypes (what torch 2.11 takes);
# CrossEntropyLoss also takes class probabilities: floats of the outputs' shape (two or more dimensions).
INDEX_TYPES = {nn.CrossEntropyLoss: (torch.long, torch.uint8), nn.NLLLoss: (torch.long, torch.uint8),
               nn.MultiMarginLoss: (torch.long,)}
# A loss of real values takes floats. MSELoss, L1Loss and SmoothL1Loss would promote integers and run; refused too,
# as integer targets there are most likely class labels meant for another loss, and where they are not, y.float()
# is the one call the user adds. A loss in neither is the user's own, and unchecked.
REAL_VALUED = (nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.BCELoss, nn.BCEWithLogitsLoss, nn.KLDivLoss)


@dataclass(frozen=True)
class Param:
    """One of a workload's own axes (image_size, n_features, a CSV's path): its default, its type
    (that of the default), and the values it may take: [low, high] for numbers, or `choices`."""

    default: int | float | str | bool
    low: float | None = None  # numbers: the least value allowed
    high: float | None = None  # numbers: the largest value allowed
    choices: tuple | None = None  # the values allowed, where they are a list
    help: str = ""  # one line: what it means, with its unit

    def check(self, name: str, value, workload: str):
        """`value` as this axis's type; raises ConfigError naming the axis, the value and the range (WorkloadError
        where the Param gives a range, low or high, to a value that is no number)."""
        kind = type(self.default)
        where = f"{name} (an axis of workload {workload!r})"
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is int and hasattr(value, "__index__") and not isinstance(value, bool):
            value = int(value)  # numpy's integers too
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(name, f"{where} must be {kind.__name__}, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(name, f"{where} must be one of {list(self.choices)}, got {value!r}")
        if self.low is not None or self.high is not None:
            if not isinstance(value, (int, float)):
                raise WorkloadError(f"{where} is a {kind.__name__}, which has no range: low and high bound numbers; "
                                    "give choices=... for the values it may take")
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                raise ConfigError(name, f"{where} must be in [{self.low}, {self.high}], got {value!r}")
        return value


T = TypeVar("T")


def filled_in(value: T | None, name: str) -> T:
    """`value`, the TrialConfig field `name` (batch_size, depth, lr, ...), which trainables/trial.py resolve fills in
    from the workload's defaults, so a factory's or a trial's cfg holds it. ValueError naming the field where it is
    None: a config used unresolved, or a workload whose model reads an axis it gives no default."""
    if value is None:
        raise ValueError(f"config field {name} is None: resolve the config first (crossover.trainables.trial "
                         f"resolve), which fills it in from the workload's defaults, or give the workload one")
    return value


def sums(loss: nn.Module) -> bool:
    """Whether `loss` sums its batch's samples (reduction 'sum') rather than averaging them: what turns its value
    into a per-sample loss, and under DDP scales its gradient. A loss of the user's with no `reduction` (a plain
    nn.Module) is taken to average, as torch's losses and functions do by default; one that sums says so with
    `self.reduction = "sum"`."""
    return getattr(loss, "reduction", "mean") == "sum"


def default_step(model: nn.Module, x, y, loss: nn.Module):
    """One forward and loss: `model(x)`, then `loss(outputs, y)`; returns (loss, outputs). An output that is no
    tensor (a Hugging Face model's SequenceClassifierOutput, a dict, a tuple) which the loss refuses is one line
    naming the step that takes the tensor out of it, where torch's loss says only that it 'must be Tensor' (a loss
    of the user's that takes such an output takes it)."""
    out = model(x)
    try:
        return loss(out, y), out
    except TypeError as exc:
        if isinstance(out, torch.Tensor):
            raise
        raise TypeError(f"the model returned a {type(out).__name__}, not a tensor, and the loss takes a tensor: "
                        f"{_output_fix(out)}") from exc


def _output_fix(out) -> str:
    """The fix for a model's output that is no tensor: a Workload step that takes the tensor the loss needs."""
    if hasattr(out, "logits") or hasattr(out, "loss"):  # a transformers ModelOutput
        # short enough for a row's costs_note (300 characters), where a counted step's error is kept
        return ("give the Workload a step that takes its .logits (or .loss): def step(model, x, y, loss): "
                "out = model(x).logits; return loss(out, y), out; or use crossover.frameworks.hf_workload")
    if isinstance(out, dict):
        return (f"give the Workload a step that takes the tensor the loss needs (of keys {list(out)[:5]}): "
                "def step(model, x, y, loss): out = model(x)[KEY]; return loss(out, y), out")
    return ("give the Workload a step that takes the tensor the loss needs: "
            "def step(model, x, y, loss): out = model(x)[0]; return loss(out, y), out")


def _targets_refused(loss: nn.Module, y: torch.Tensor) -> str | None:
    """Why `loss` (one of torch's: INDEX_TYPES, REAL_VALUED) cannot take targets `y`, with the fix; None where it
    can, or where the loss is the user's own."""
    kind = next((k for k in INDEX_TYPES if isinstance(loss, k)), None)
    if kind is nn.CrossEntropyLoss and y.is_floating_point() and y.dim() >= 2:
        return None  # class probabilities; their shape against the outputs' is told at the first step
    if kind is not None and y.dtype not in INDEX_TYPES[kind]:
        also = ", or class probabilities as floats of the outputs' shape" if kind is nn.CrossEntropyLoss else ""
        return f"takes class indices as {' or '.join(map(str, INDEX_TYPES[kind]))}: give y.long(){also}"
    if isinstance(loss, REAL_VALUED) and not y.is_floating_point():
        return "takes real-valued targets: give y.float()"
    return None


def _named(function) -> str:
    """A function's name as its code has it (a lambda's is '<lambda>'), else its repr."""
    return getattr(function, "__qualname__", None) or repr(function)


def _axis_fix(key: str, params: dict) -> str:
    """What to do with a default whose key is no shared axis: its own axis's default goes in its Param; a typo
    gets the axis it is close to."""
    if key in params:
        return f"{key} is its own axis: leave it out of defaults, its default is params[{key!r}].default"
    close = difflib.get_close_matches(key, SHARED_DEFAULTS, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return (f"give one of {', '.join(SHARED_DEFAULTS)}, or declare an axis of its own in params: "
            f"params={{{key!r}: Param(default)}}")


# eq=False: a Workload is hashed and compared by identity, so it can be a grid's key (Space); generated from
# its fields, the hash failed on its dicts (defaults, params)
@dataclass(frozen=True, eq=False)
class Workload:
    """A training job crossover can sweep. Factories take the trial's resolved config (TrialConfig:
    its shared axes filled in, its own in `cfg.params`); everything they make is built on the CPU and
    moved to the trial's device by crossover."""

    name: str  # the rows' `workload`: letters, digits, '_', '-', '.' (NAME)
    make_data: Callable[[TrialConfig], object]  # -> crossover.Data: inputs (a tensor, or a dict of them), targets
    make_model: Callable[[TrialConfig], nn.Module]
    make_loss: Callable[[], nn.Module]  # its reduction 'mean' or 'sum' says how a batch's loss is counted (`sums`)
    make_optimizer: Callable[[Iterator[nn.Parameter], float], torch.optim.Optimizer]  # (model.parameters(), lr)
    defaults: dict = field(default_factory=dict)  # the shared axes' values where a sweep leaves them unset
    axes: frozenset = frozenset()  # of depth, width, context: the ones this workload varies (the rest always)
    params: dict = field(default_factory=dict)  # its own axes: name -> Param
    metric: str | Callable = "accuracy"  # 'accuracy' (argmax), 'loss' (none but the loss), or a function
    step: Callable | None = None  # (model, x, y, loss) -> (loss, outputs): a batch that is not one tensor
    check: Callable[[TrialConfig], None] | None = None  # raises ConfigError for a config it cannot run
    shuffle: bool = True  # reshuffle the training set every epoch
    test_batch_size: int | None = None  # None: the training batch size
    # grid name -> {axis: [values]}: sweeps/scaling.py's ('smoke', 'seeds') and a study's ('engines-default': the
    # built-ins a study sweeps are those that declare its grid, trainables/workloads.py with_grid)
    grids: dict = field(default_factory=dict)
    # Capabilities: what crossover may do with it beyond a single process (never a check of its name)
    fusable: bool = False  # K seeds as one vmapped model (trainables/fused.py): its optimiser is SGD or Adam
    pipeline: bool = False  # an nn.Sequential a pipeline (pipe:N) can cut into stages
    images: bool = False  # takes the image data options (`data`, `data_dir`: crossover/data.py)
    kernel: bool = False  # engine 'triton' has a kernel of its model (trainables/mlp_kernel.py)
    sample: Callable[[TrialConfig], torch.Tensor] | None = None  # one input sample; None: make_data's first
    ref: str | None = None  # 'module:attr' it was registered as (`register`); None for the built-ins

    def __post_init__(self) -> None:
        """Refused here, in one line naming the workload, the field and the fix (WorkloadError), whatever can be
        told without running the user's code: each function's kind and how crossover calls it, the defaults'
        keys, the axes and params. What its data is can only be told by calling make_data (`data`)."""
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise WorkloadError(f"Workload name must be letters, digits, '_', '-' or '.', starting with a letter "
                                f"(at most 64), got {self.name!r}")
        for field_name in CALLS:
            self._check_call(field_name)
        unknown = set(self.axes) - set(SEED_AXES)
        if unknown:
            raise WorkloadError(f"Workload {self.name!r}: axes are of depth, width, context (the rest are shared), "
                                f"got {sorted(unknown)}; declare its own axes in params")
        clash = set(self.params) & (set(SEED_AXES) | {f.name for f in dataclasses.fields(TrialConfig)})
        if clash:
            raise WorkloadError(f"Workload {self.name!r}: params {sorted(clash)} shadow crossover's own axes; "
                                "rename them")
        for name, param in self.params.items():
            if not isinstance(param, Param):
                raise WorkloadError(f"Workload {self.name!r}: params[{name!r}] must be a Param, got {param!r}; give "
                                    f"params={{{name!r}: Param({param!r})}} (its default, and low, high or choices)")
        for key in self.defaults:
            if key not in SHARED_DEFAULTS:
                raise WorkloadError(f"Workload {self.name!r}: defaults[{key!r}] is no axis of crossover's; "
                                    + _axis_fix(key, self.params))
        if not (self.metric in METRICS or callable(self.metric)):
            raise WorkloadError(f"Workload {self.name!r}: metric must be one of {list(METRICS)} or a function, "
                                f"got {self.metric!r}")
        if self.fusable and (self.step is not None or not isinstance(self.metric, str)):
            raise WorkloadError(f"Workload {self.name!r}: fusable needs one tensor of inputs (no step) and metric "
                                "'accuracy' or 'loss'; set fusable=False")
        object.__setattr__(self, "defaults", {**SHARED_DEFAULTS, **self.defaults})
        object.__setattr__(self, "axes", frozenset(self.axes) | SHARED_AXES)
        for axis in ("depth", "width", "context"):
            if axis in self.axes and self.defaults[axis] is None and axis != "width":
                raise WorkloadError(f"Workload {self.name!r}: axis {axis} needs a default in defaults")

    def _check_call(self, field_name: str) -> None:
        """The function in `field_name` can be called as crossover calls it (CALLS); optional ones may be None,
        and metric a name. What a factory makes, given in its place (MADE), is refused: each trial makes its own."""
        value = getattr(self, field_name)
        if (value is None and not field_name.startswith("make_")) or (field_name == "metric" and not callable(value)):
            return  # an optional one left out; a metric given by name, checked against METRICS
        args, example = CALLS[field_name]
        where = f"Workload {self.name!r}: {field_name}"
        made = MADE.get(field_name)
        if made and isinstance(value, made[1]):
            raise WorkloadError(f"{where} must make {made[0]}, got {made[0]} itself ({type(value).__name__}); each "
                                f"trial calls {field_name}({args}) for its own: e.g. {example}")
        if not callable(value):
            raise WorkloadError(f"{where} must be a function, called as {field_name}({args}), got a "
                                f"{type(value).__name__}; e.g. {example}")
        try:
            signature = inspect.signature(value)
        except (TypeError, ValueError):  # a builtin without one: how it is called is told at its first call
            return
        try:
            signature.bind(*[None] * (args.count(",") + 1 if args else 0))
        except TypeError:
            raise WorkloadError(f"{where} is called as {field_name}({args}), but {_named(value)} takes "
                                f"{signature}; e.g. {example}") from None

    @property
    def classifies(self) -> bool:
        return self.metric == "accuracy"

    def data(self, cfg: TrialConfig) -> Data:
        """make_data(cfg), refused in one line where it is no Data (a tuple, say), or where its targets are of a dtype
        its loss does not take (float class indices for CrossEntropyLoss, integers for MSELoss: `_targets_refused`;
        not where a `step` hands the loss its targets its own way): the one way crossover makes a workload's data,
        so that planning (sweeps/plan.py) refuses it before any trial, and a trial's row says the same."""
        made = self.make_data(cfg)
        if not isinstance(made, Data):
            raise WorkloadError(f"Workload {self.name!r}: make_data must return a crossover.Data, got a "
                                f"{type(made).__name__}; return Data(x, y, test_x, test_y, source='...') (test_x and "
                                "test_y None where it has no test split)")
        if self.step is None:
            loss = self.make_loss()
            for name, y in (("y", made.y), ("test_y", made.test_y)):
                if y is None:
                    continue
                why = _targets_refused(loss, y)
                if why:
                    raise WorkloadError(f"Workload {self.name!r}: make_data's Data.{name} is {y.dtype} of shape "
                                        f"{tuple(y.shape)}, but its loss {type(loss).__name__} {why}")
        return made

    def run_step(self, model, x, y, loss):
        """(loss, outputs) of one batch: the workload's `step`, or `model(x)` and the loss."""
        return (self.step or default_step)(model, x, y, loss)

    def grid(self, name: str) -> dict:
        """Its grid for sweeps/scaling.py's grid `name` (`grid_of`)."""
        return grid_of(self.grids, self.defaults, name)

    def spec(self, fingerprint: str) -> WorkloadSpec:
        """What the sweep's driver knows of it (WorkloadSpec), `fingerprint` its `fingerprint` as found here. Only a
        registered Workload has one: its `ref` is how the driver's workers import it."""
        if self.ref is None:
            raise ValueError(f"Workload {self.name!r} has no ref, which its spec needs; register it first "
                             "(crossover.trainables.registry's Registry.register)")
        return WorkloadSpec(self.name, self.ref, fingerprint, self.defaults, self.axes, self.params, self.grids,
                            self.fusable, self.pipeline, self.images, self.kernel, has_sample=self.sample is not None,
                            has_step=self.step is not None, has_check=self.check is not None)


def grid_of(grids: dict, defaults: dict, name: str) -> dict:
    """A workload's grid for sweeps/scaling.py's grid `name`: its own (`grids`), or dataset_size at a sixteenth,
    a quarter and all of the default ('smoke': the smallest of them, two epochs)."""
    if name in grids:
        return grids[name]
    size, batch = defaults["dataset_size"], defaults["batch_size"]
    sizes = sorted({max(batch or 1, size // k) for k in (16, 4, 1)})
    if name == "smoke":
        return {"dataset_size": sizes[:1], "epochs": [2]}
    return {"dataset_size": sizes}


# eq=False: hashed by identity, a grid's key as a Workload is
@dataclass(frozen=True, eq=False)
class WorkloadSpec:
    """A user's Workload as plain data, as the process that planned it found it (sweeps/plan.py): all that a
    sweep's driver knows of it, so that the driver never runs the user's code. A driver's Trial holds it in place
    of the Workload (sweeps/space.py); the trial's worker imports the Workload itself by `ref` (`load`)."""

    name: str  # the rows' `workload` (Workload.name)
    ref: str  # 'module:attr', as a worker imports it
    fingerprint: str  # 16 hex digits (`fingerprint`), as the planning process found them; a worker checks its own
    defaults: dict  # Workload.defaults, SHARED_DEFAULTS filled in
    axes: frozenset  # Workload.axes, the shared ones included
    params: dict  # its own axes: name -> Param
    grids: dict  # Workload.grids: grid name -> {axis: [values]}
    fusable: bool = False  # the capabilities, as Workload has them
    pipeline: bool = False
    images: bool = False
    kernel: bool = False
    has_sample: bool = False  # a sample function of its own (Workload.sample)
    has_step: bool = False  # a step function of its own (Workload.step)
    has_check: bool = False  # a check of its own (Workload.check): run by a planning process (sweeps/plan.py refusals)

    def grid(self, name: str) -> dict:
        """Its grid for sweeps/scaling.py's grid `name` (`grid_of`), as Workload.grid."""
        return grid_of(self.grids, self.defaults, name)

    def to_dict(self) -> dict:
        """As JSON takes it (the planning process's answer): axes a sorted list, each Param a dict."""
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, "axes": sorted(self.axes),
                "params": {n: dataclasses.asdict(p) for n, p in self.params.items()}}

    @classmethod
    def from_dict(cls, given: dict) -> WorkloadSpec:
        params = {n: Param(**{**p, "choices": None if p["choices"] is None else tuple(p["choices"])})
                  for n, p in given["params"].items()}
        return cls(**{**given, "axes": frozenset(given["axes"]), "params": params})

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
attribute is a Workload, or a function of no arguments that returns one. A sweep's driver never imports it:
it `declare`s the module, to ship it to every Ray worker through `runtime_env` (`py_modules`), and a process
of its own imports it (sweeps/plan.py) and answers with a WorkloadSpec, the Workload as plain data, which is
all the driver knows of it. A worker imports it by module name (`load`), never by the driver's path;
`register` imports it in the process that calls it. Its `fingerprint` (the module's source and the model's
parameter shapes) is part of every trial's config hash, so editing the model measures again instead of
returning the old rows.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from crossover.schema import SEED_AXES
from crossover.trainables.config import ConfigError, TrialConfig
from crossover.trainables.data import Data
from crossover.trainables.job import WorkloadError, is_reference, locate  # a reference, parsed with no torch

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
        """`value` as this axis's type; raises ConfigError naming the axis, the value and the range."""
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
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ConfigError(name, f"{where} must be in [{self.low}, {self.high}], got {value!r}")
        return value


def sums(loss: nn.Module) -> bool:
    """Whether `loss` sums its batch's samples (reduction 'sum') rather than averaging them: what turns its value
    into a per-sample loss, and under DDP scales its gradient. A loss of the user's with no `reduction` (a plain
    nn.Module) is taken to average, as torch's losses and functions do by default; one that sums says so with
    `self.reduction = "sum"`."""
    return getattr(loss, "reduction", "mean") == "sum"


def default_step(model: nn.Module, x, y, loss: nn.Module):
    """One forward and loss: `model(x)`, then `loss(outputs, y)`; returns (loss, outputs)."""
    out = model(x)
    return loss(out, y), out


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
    make_optimizer: Callable[[object, float], torch.optim.Optimizer]  # (parameters, lr)
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
    images: bool = False  # takes the image data options (`data`, `data_dir`: trainables/data.py)
    kernel: bool = False  # engine 'triton' has a kernel of its model (trainables/mlp_kernel.py)
    sample: Callable[[TrialConfig], torch.Tensor] | None = None  # one input sample; None: make_data's first
    ref: str | None = None  # 'module:attr' it was registered as (`register`); None for the built-ins

    def __post_init__(self):
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
                why = None if y is None else _targets_refused(loss, y)
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
        """What the sweep's driver knows of it (WorkloadSpec), `fingerprint` its `fingerprint` as found here."""
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


# -- registration: a reference on the command line (parsed and checked in trainables/job.py), imported once here
# and by name in every worker


class Registry:
    """What a process has registered of users' workloads: the modules it ships to Ray's workers and their sources
    as declared, and the fingerprint of each workload it has found. State of the process, as sys.modules is (what
    it records is what this process imported, and a worker imports by name what the driver shipped): one per
    process, REGISTRY, whose methods are this module's functions of the same names (`declare`, `register`,
    `load`, ...). A test starts from a copy of its dicts (tests/conftest.py `fresh`)."""

    def __init__(self):
        self.files: dict[str, Path] = {}  # module name -> the file or package folder shipped to the workers
        self.sources: dict[str, str] = {}  # module name -> sha256 of its file's bytes as declared here (`declare`)
        self.texts: dict[str, bytes] = {}  # a shipped file's path -> its bytes as declared (`imported_text`)
        self.fingerprints: dict[str, str] = {}  # ref -> fingerprint, once per version of its module

    def declare(self, text: str) -> tuple[str, str, Path | None]:
        """(module, attribute, file) of the reference `text` (`locate`), a file's module shipped to the Ray workers
        from now on (`shipped`) without importing it here: what a sweep's driver does (sweeps/plan.py), whose
        planning process imports it. A package's module is shipped once that process has found its folder (`ship`)."""
        module, attr, path = locate(text)
        if path is not None:
            shipped = self.files.get(module)
            if shipped is not None and shipped != path:
                raise WorkloadError(f"--workload {text!r}: module {module!r} is already {shipped}; two files of one "
                                    "name cannot both reach the workers: rename one")
            data = path.read_bytes()
            self.sources[module], self.texts[str(path)] = hashlib.sha256(data).hexdigest(), data
            self.files[module] = path
        return module, attr, path

    def ship(self, module: str, path: str | None) -> None:
        """The top-level package `module` shipped to the workers from its `path` (`package_path`, as the process
        that imported it found it), unless it is shipped already (that process imported a copy of it); None:
        installed, or crossover's own, which every worker has."""
        if path is not None and module not in self.files:
            self.files[module] = Path(path)

    def register(self, text: str) -> Workload:
        """The Workload `text` names ('path/file.py:attr' or 'package.module:attr'), imported in this process; its
        module is then shipped to the Ray workers by `runtime_env` (`shipped`). Raises WorkloadError naming what is
        wrong. A sweep's driver never calls it: its planning process does (sweeps/plan.py), and the driver
        `declare`s."""
        module, attr, path = locate(text)
        if path is not None:
            # imported again where the file changed since (an edit in a notebook): its new code, its new fingerprint
            stale = (module not in sys.modules or getattr(sys.modules[module], "__file__", None) != str(path)
                     or self.sources.get(module) != digest(path))
            self.declare(text)
            if stale:
                self._import_file(module, path, text)
        else:
            _import(module, text)
            self.ship(module.split(".")[0], package_path(module))
        return _resolve_attr(module, attr, text)

    def load(self, ref: str) -> Workload:
        """The workload 'module:attr' in this process: imported by name (a worker has it from `runtime_env`), or
        from the file `declare`d for it (a benchmark that times a user's trial in its own process: sweeps/parity.py)."""
        module, attr = ref.rsplit(":", 1)
        if module not in sys.modules:
            if module in self.files and self.files[module].is_file():
                self._import_file(module, self.files[module], ref)
            else:
                _import(module, ref)
        return _resolve_attr(module, attr, ref)

    def shipped(self) -> list[str]:
        """The user modules to ship to every worker (runtime_env py_modules): files and package folders."""
        return [str(p) for p in self.files.values()]

    def shipped_sources(self, modules=None) -> dict[str, str | None]:
        """Each module of `shipped` (or of those named `modules`), by path, with the sha256 of its file as
        imported here (None: a package)."""
        return {str(p): self.sources.get(module) for module, p in self.files.items()
                if modules is None or module in modules}

    def imported_text(self, path: str | Path) -> bytes | None:
        """The bytes of the shipped file `path` as it was declared here (None: not a registered file): what a
        planning process copies where the file has gone since (the workers have it from Ray's runtime_env)."""
        return self.texts.get(str(path))

    def source(self, ref: str) -> str | None:
        """The sha256 of the file module of `ref` ('module:attr') as declared here; None for a package's, or one
        not registered."""
        return self.sources.get(ref.split(":")[0])

    def fingerprint(self, workload: Workload | WorkloadSpec) -> str:
        """16 hex digits of the workload module's source and of its model's parameter shapes at its defaults
        (built on the meta device: no memory, no time), found once a version of its module in this process: a
        worker's, or a planning process's (sweeps/plan.py), which a WorkloadSpec holds. What changes either
        measures again."""
        if isinstance(workload, WorkloadSpec):
            return workload.fingerprint
        key = workload.ref or workload.name
        if key not in self.fingerprints:
            module = sys.modules[(workload.ref or "crossover.trainables.workloads:").split(":")[0]]
            # the file's bytes, as the worker's copy from runtime_env has them (not linecache's, which may be
            # stale), read before the model is built (a model that writes its file changes no fingerprint)
            self.fingerprints[key] = _fingerprint(Path(module.__file__).read_bytes(), shapes(workload))
        return self.fingerprints[key]

    def _import_file(self, module: str, path: Path, text: str) -> None:
        for ref in [r for r in self.fingerprints if r.split(":")[0] == module]:  # its previous version's
            del self.fingerprints[ref]
        _exec_file(module, path, text)


REGISTRY = Registry()  # this process's
declare, ship, register, load = REGISTRY.declare, REGISTRY.ship, REGISTRY.register, REGISTRY.load
shipped, shipped_sources, imported_text = REGISTRY.shipped, REGISTRY.shipped_sources, REGISTRY.imported_text
source, fingerprint = REGISTRY.source, REGISTRY.fingerprint


def reference(workload: Workload) -> str:
    """The reference of a Workload object given in Python (`Space(grids={workload: ...})`): the one it was
    registered by, else its file and the top-level name it is found under (a module in a package: the module's
    name), so that a planning process and the workers import it as a file on the command line would be. Reads
    the module's names, and runs none of its code."""
    if workload.ref:
        return workload.ref
    module = sys.modules.get(getattr(workload.make_model, "__module__", ""), None)
    names = [n for n, v in vars(module).items() if v is workload] if module else []
    path = getattr(module, "__file__", None)
    if not names or not path:
        raise WorkloadError(f"workload {workload.name!r}: define it at the top level of a module or file (workers import "
                            "it from there), e.g. `workload = Workload(...)` in job.py")
    in_package = "." in module.__name__ and module.__name__ != "__main__"
    return f"{module.__name__}:{names[0]}" if in_package else f"{path}:{names[0]}"


def _fingerprint(text: bytes, found: str) -> str:
    """`fingerprint` of a module's bytes `text` and its model's shapes `found`."""
    hashed = hashlib.sha256(text)
    hashed.update(found.encode())
    return hashed.hexdigest()[:16]


def shapes(workload: Workload) -> str:
    """The model's parameter shapes at its defaults, built on the meta device, as text (the fingerprint's part):
    where it cannot be built there, what it raised."""
    cfg = TrialConfig(workload.name, **{k: v for k, v in workload.defaults.items()},
                      params={n: p.default for n, p in workload.params.items()} or None)
    try:
        with torch.device("meta"):
            model = workload.make_model(cfg)
        return repr([(n, tuple(p.shape)) for n, p in model.named_parameters()])
    except (Exception, SystemExit) as exc:  # a model that needs its data to be built: the source alone identifies
        # it; a sys.exit in the user's factory is its trial's to report (a row), not the planner's to obey
        return repr(f"not built at its defaults: {type(exc).__name__}")


def _exec_file(module: str, path: Path, text: str) -> None:
    """The file `path` imported as `module` (in sys.modules from now on); WorkloadError where it does not import."""
    spec = importlib.util.spec_from_file_location(module, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    try:
        spec.loader.exec_module(loaded)
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM: sweeps/runner.py stop_signals) while it imports: an interruption
        del sys.modules[module]
        raise
    except WorkloadError as exc:  # a Workload it makes, refused: that line says the field and the fix
        del sys.modules[module]
        raise WorkloadError(f"--workload {text!r}: {exc}") from None
    except BaseException as exc:  # SystemExit too: a user's module is not ours to end the sweep
        del sys.modules[module]
        raise WorkloadError(f"--workload {text!r}: {path} does not import: {type(exc).__name__}: {exc}; "
                            f"fix the file (python {path} shows the traceback)") from None


def _import(module: str, text: str) -> None:
    try:
        importlib.import_module(module)
    except KeyboardInterrupt:
        raise
    except WorkloadError as exc:
        raise WorkloadError(f"workload {text!r}: {exc}") from None
    except BaseException as exc:
        raise WorkloadError(f"workload {text!r}: module {module!r} does not import: {type(exc).__name__}: {exc}; "
                            "give a module on the Python path, or the path of its file (path/to/job.py:ATTR)") from None


def digest(path: Path) -> str:
    """The sha256 of a file's bytes: what tells an edited module from the one imported."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_path(module: str) -> str | None:
    """The folder (or file) of an imported module's top-level package, to ship (`ship`); None where it is
    installed (site-packages) or ours."""
    top = sys.modules[module.split(".")[0]]
    path = Path(getattr(top, "__file__", None) or "")
    if not path.name or "site-packages" in path.parts or top.__name__ == "crossover":
        return None
    return str(path.parent if path.name == "__init__.py" else path)


def _resolve_attr(module: str, attr: str, text: str) -> Workload:
    try:
        found = getattr(sys.modules[module], attr)
    except AttributeError:
        public = sorted(n for n, v in vars(sys.modules[module]).items() if isinstance(v, Workload))
        raise WorkloadError(f"workload {text!r}: module {module!r} has no attribute {attr!r}"
                            + (f"; its Workloads: {public}" if public else "; define `workload = Workload(...)` there"))
    if callable(found) and not isinstance(found, Workload):
        try:
            found = found()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise WorkloadError(f"workload {text!r}: {module}.{attr}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(found, Workload):
        raise WorkloadError(f"workload {text!r}: {module}.{attr} is a {type(found).__name__}, not a "
                            "crossover.Workload (or a function returning one)")
    return dataclasses.replace(found, ref=f"{module}:{attr}") if found.ref is None else found

"""The model's half of `crossover predict` (sweeps/predict.py, of the same name a layer up, is the command: it counts
the step and prints the answer). Predictions for GPUs nobody measured: the fit on the measured GPUs with its
intervals and the public tables' efficiencies (`Predictor`), ordered by the public tables at their precision and
never under the hardware's floor (analysis/roofline.py); `shipped`, the model fitted on the shipped reference rows,
kept in the user's cache folder (analysis/cache.py) once fitted.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crossover import schema
from crossover.schema import OPS_PER_STEP

from .. import cache as disk
from .. import public, roofline
from ..load import REFERENCE, precisions_of, read
from .counts import CLASS_COLUMNS, PER_CLASS, THREE_TERM, _usable, config_keys, form_of, gpu_rows
from .device_table import DEVICES, Device, MATCH_KEY, load_devices
from .hosts import HOST_BOUND, Cure, cure, host_spread, widened
from .intervals import conformal_q, scores
from .perclass import COMPUTE_CLASSES, EFFICIENCY, Fit, fit


@dataclass(frozen=True)
class Predictor:
    """A fit on the measured GPUs' rows and the conformal quantiles of its held-out log errors."""

    fit: Fit
    seen: frozenset  # workloads of the rows fitted
    q: dict  # 'device' / 'workload' -> conformal quantile of |log(measured / predicted)| at ALPHA
    # GPU key -> measured / predicted speed of its public rows (analysis/public.py) under the fit: its
    # FLOP/s and bandwidth are scaled by it, so a GPU faster than another on the public benchmarks is not
    # predicted slower for its datasheet (the A10's TF32 peak is 1.8x the RTX 3090's; Lambda has the 3090
    # 1.1-1.5x faster on all of its benchmarks)
    efficiency: dict = dataclasses.field(default_factory=dict)
    # log spread of one host's time about the hosts' mean, per unit of a step's host share (hosts.host_spread): an
    # interval's host part; NaN where the rows fitted hold no configuration timed on two hosts of one GPU
    host_spread: float = math.nan
    cure: Cure | None = None  # the step under CUDA graphs and torch.compile (hosts.cure); None: no engines' rows

    def interval(self, workload: str) -> tuple[float, str]:
        """The quantile for a prediction of `workload` on an unmeasured GPU, and whose residuals it is:
        leave-one-device-out's for a workload the fit saw, leave-one-workload-out's for a new one (either
        one where the other could not be computed)."""
        order = ("device", "workload") if workload in self.seen else ("workload", "device")
        source = next((s for s in order if s in self.q), None)
        return (self.q[source], source) if source else (float("nan"), "none: one GPU and one workload only")

    def to_json(self) -> dict:
        """The predictor as JSON's values (a per-class fit's: a three-term fit's Calibration is not kept), each
        float exactly: `from_json` gives it back to the last bit."""
        return {"form": self.fit.form, "theta": [float(t) for t in self.fit.theta], "rms": float(self.fit.rms),
                "seen": sorted(self.seen), "q": {k: float(v) for k, v in self.q.items()},
                "efficiency": {str(k): float(v) for k, v in self.efficiency.items()},
                "host_spread": float(self.host_spread),
                "cure": dataclasses.asdict(self.cure) if self.cure is not None else None}

    @classmethod
    def from_json(cls, value: dict) -> Predictor:
        return cls(Fit(value["form"], tuple(value["theta"]), None, value["rms"]), frozenset(value["seen"]),
                   value["q"], value["efficiency"], value["host_spread"],
                   Cure(**value["cure"]) if value["cure"] is not None else None)


def predictor(frame: pd.DataFrame, devices: dict[str, Device], form: str, engines: pd.DataFrame | None = None) -> Predictor:
    """The fit of `form` on `frame`'s rows, its conformal quantiles and public efficiencies, the spread of its
    rows' hosts (per-class form) and, from `engines` (rows of the engines' study), the step under CUDA graphs."""
    fitted = fit(frame, devices, form)
    rows = frame[frame["workload"].eq(public.PUBLIC_WORKLOAD)]
    speed = fitted.step_s(rows, devices) / rows["step_s"].to_numpy(float) if len(rows) else []
    measured = frame[~frame["workload"].eq(public.PUBLIC_WORKLOAD)]
    per_class = form == PER_CLASS
    return Predictor(fitted, frozenset(frame["workload"]),
                     {k: conformal_q(s) for k, s in scores(frame, devices, form).items()},
                     pd.Series(speed, index=rows[MATCH_KEY].to_numpy()).groupby(level=0).median().to_dict(),
                     host_spread(measured, fitted, devices) if per_class else math.nan,
                     cure(engines, fitted, devices) if per_class and engines is not None else None)


def _step_s(configs: pd.DataFrame, model: Predictor, devices: dict[str, Device], key: str) -> np.ndarray:
    on = configs.assign(**{MATCH_KEY: key, EFFICIENCY: model.efficiency.get(key, 1.0)})
    return model.fit.step_s(on, devices) if len(on) else np.zeros(0)


def public_precision(configs: pd.DataFrame) -> pd.Series:
    """The public tables' precision each configuration's arithmetic runs at, None where no table ran it: bf16
    and fp16 Lambda's "fp16" (AMP); tf32, and PyTorch's default where cuDNN's convolutions and recurrent nets
    (TF32 by default) hold most of the FLOPs, Lambda's "fp32", which ran at TF32; strict FP32 matrix products (fp32, and the default's),
    none."""
    precision = precisions_of(configs)
    flops = configs.reindex(columns=[f"{c}_flops_per_step" for c in COMPUTE_CLASSES]).astype(float).fillna(0)
    convs = flops["conv_flops_per_step"] + flops["rnn_flops_per_step"] >= flops["matmul_flops_per_step"]
    table = precision.map({"bf16": "fp16", "fp16": "fp16", "tf32": "fp32", "fp32": None, "default": "fp32"})
    return table.where(~precision.eq("default") | convs, None)


def ordered_step_s(configs: pd.DataFrame, model: Predictor, devices: dict[str, Device], key: str) -> np.ndarray:
    """`ordered`'s step times alone."""
    return ordered(configs, model, devices, key)[0]


def ordered(configs: pd.DataFrame, model: Predictor, devices: dict[str, Device], key: str,
            times: Callable[[str], np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The model's step time of `configs` on the GPU `key`, no slower than its prediction for any GPU that
    `key` outran on every public benchmark at the precision the configuration's arithmetic runs at
    (`public_precision`, analysis/public.py `faster_than`): where the datasheet's figures say otherwise (the
    A10's TF32 peak, which its 150 W never reaches; the RTX 6000 Ada's over the A100s'), the public measurement
    orders them; no faster than the hardware of any GPU that outran `key` allows (that GPU's roofline floor: else
    the faster GPU, held at its floor, would be predicted slower); and never shorter than its own hardware allows
    (analysis/roofline.py floor_s). With it, per configuration, the GPU whose prediction set the figure where the
    first rule did (a bound, not the model's figure for `key`: its own is slower), else None. `times`: the model's
    step times of `configs` on a GPU, by its key, where the caller keeps them (`predict_counted` asks every GPU's)."""
    times = times or (lambda gpu: _step_s(configs, model, devices, gpu))
    own = times(key)
    step, bound_by = own.copy(), np.full(len(own), None, dtype=object)
    table = public_precision(configs)
    for value in table.dropna().unique():
        rows = (table == value).to_numpy()
        outran = public.faster_than(value)
        for other in outran.get(key, ()):
            if other in devices:
                theirs = times(other)[rows]
                lower = rows.copy()
                lower[rows] = theirs < step[rows]
                bound_by[lower] = other
                step[rows] = np.minimum(step[rows], theirs)
        for other in (g for g, beaten in outran.items() if key in beaten and g in devices):
            step[rows] = np.maximum(step[rows], roofline.floor_s(configs[rows], devices[other]))
    out = np.maximum(step, roofline.floor_s(configs, devices[key])) if len(configs) else step
    # numpy's annotations take no None for an array (an object array's None, as np.where makes it): hence the ignore
    return out, np.where(out < own * (1 - 1e-9), bound_by, None)  # type: ignore[call-overload]


def _predicted(configs: pd.DataFrame, model: Predictor, devices: dict[str, Device], key: str,
               default: pd.DataFrame | None = None, times: Callable[[str], np.ndarray] | None = None) -> pd.DataFrame:
    """The model's epoch times of `configs` (usable rows, one per configuration) on the GPU `key` (`ordered`),
    with their conformal interval, widened by its host's part (hosts.widened: the step's host share x the spread
    of the reference rows' hosts), whose lower end is no shorter than the hardware allows either (analysis/
    roofline.py); bound_by, the GPU whose figure set it (`ordered`); at a precision whose unit `key` lacks
    (Device.lacks: bf16 on a T4), no faster than its prediction at PyTorch's default (`default`: the same
    configurations counted at the default, else these counts priced at it), lacks_unit saying so; the host's
    share of the step (host_share, host_bound past hosts.HOST_BOUND); and the step under CUDA graphs and under
    torch.compile's reduce-overhead (`Cure`), each with its interval, never slower than the eager figure. `times`:
    as `ordered` takes it."""
    on = configs.assign(**{MATCH_KEY: key})
    steps = on["steps_per_epoch"].to_numpy(float)
    step, bound_by = ordered(configs, model, devices, key, times) if len(on) else (np.zeros(0), np.zeros(0, dtype=object))
    precision = precisions_of(on)
    lacks = precision.map(lambda p: devices[key].lacks(p) if key else None).to_numpy(object)
    if (lacks != None).any():  # noqa: E711 (an array's elementwise comparison)
        at_default = (default if default is not None else configs).assign(precision="default")
        step = np.where(lacks != None, np.maximum(step, ordered_step_s(at_default, model, devices, key)), step)  # noqa: E711
        # the default's figure is its own GPU's; the ignore: numpy's annotations take no None for an array
        bound_by = np.where(lacks != None, None, bound_by)  # type: ignore[call-overload]  # noqa: E711
    epoch = steps * step
    floor = steps * roofline.floor_s(configs, devices[key]) if len(on) else np.zeros(0)
    intervals, source = zip(*[model.interval(w) for w in on["workload"]]) if len(on) else ((), ())
    q = np.array(intervals, float)
    per_class = model.fit.form == PER_CLASS and len(on)
    parts = model.fit.parts(on.assign(**{EFFICIENCY: model.efficiency.get(key, 1.0)}), devices) if per_class else None
    share = parts.host_share if parts is not None else np.full(len(on), np.nan)
    wide = widened(q, np.nan_to_num(share), model.host_spread)
    lo = np.maximum(epoch * np.exp(-wide), floor)
    out = on[config_keys(on) + ["n_params", "steps_per_epoch"]].assign(
        device="cuda", device_name=key, epoch_s_median=epoch, epoch_s_lo=lo, epoch_s_hi=epoch * np.exp(wide),
        predicted=True, model_form=model.fit.form, interval_from=list(source), bound_by=bound_by, lacks_unit=lacks,
        host_share=share, host_bound=share > HOST_BOUND, **_cured(model.cure, parts, steps, epoch, floor, q, lo))
    return out.assign(samples_per_s=on["dataset_size"] / out["epoch_s_median"])


def _cured(found: Cure | None, parts, steps: np.ndarray, epoch: np.ndarray, floor: np.ndarray, q: np.ndarray,
           eager_lo: np.ndarray) -> dict:
    """The epoch under CUDA graphs (graph_*) and under torch.compile(mode="reduce-overhead") (compile_*), each with
    its interval (the model's own, q, and the calibration's, in quadrature: the host's part is gone), never slower
    than the eager `epoch` nor faster than the hardware (`floor`); graph_helps where the graph's figure lies below
    the eager one's interval (`eager_lo`). Given for a step bound by the host alone (Parts.host_share past
    HOST_BOUND), as the steps `Cure` was calibrated on were (host shares 0.53-0.81 under the fit): a step the GPU
    bounds keeps most of its time under a graph, and the fit's GPU time of its small kernels (the size terms) is
    what the calibration cannot tell from the host's. NaN elsewhere, and where no engines' rows calibrated it."""
    names = [f"{e}_epoch_s{end}" for e in ("graph", "compile") for end in ("", "_lo", "_hi")]
    if found is None or parts is None:
        return {n: np.full(len(epoch), np.nan) for n in names} | {"graph_helps": np.zeros(len(epoch), bool)}
    out: dict[str, np.ndarray] = {}
    for engine, step_s, spread in (("graph", found.graph_s(parts), found.q_graph),
                                   ("compile", found.compiled_s(parts), found.q_compile)):
        mid = np.where(parts.host_share > HOST_BOUND, np.clip(steps * step_s, floor, epoch), np.nan)
        wide = np.sqrt(np.square(q) + spread ** 2)
        out |= {f"{engine}_epoch_s": mid, f"{engine}_epoch_s_lo": np.maximum(mid * np.exp(-wide), floor),
                f"{engine}_epoch_s_hi": np.minimum(mid * np.exp(wide), epoch * np.exp(q))}
    return out | {"graph_helps": out["graph_epoch_s"] < eager_lo}


def predict(rows: pd.DataFrame, gpus: list[str], path: Path = DEVICES,
            fitted: Callable[[str], Predictor] | None = None) -> pd.DataFrame:
    """For each configuration measured in `rows` and each GPU key in `gpus` that no row measured at that
    configuration: its predicted epoch_s_median with a 90% conformal interval (epoch_s_lo, epoch_s_hi),
    samples_per_s, predicted=True, model_form (PER_CLASS, or THREE_TERM for a configuration whose rows
    lack the per-class columns) and interval_from (whose held-out residuals gave the interval).

    `fitted(form)` gives the model of each form: `shipped` (what analysis/decide/ passes: the shipped
    reference rows' fit, so a prediction never moves with what else `rows` holds); None, a fit on `rows`'
    own GPU rows. The step costs of a configuration come from one of its rows (a GPU row first: its
    launches are the GPU's). Where a row of the GPU measured the configuration, it is not predicted: the
    measurement wins; a GPU measured at some configurations (the H100 reference rows: disc and peaks
    only) is predicted at the others."""
    devices = _known(gpus, path)
    measured = gpu_rows(rows, devices)
    per_class = measured[form_of(measured) == PER_CLASS]
    if fitted is None:
        if measured.empty:
            raise ValueError("no rows of a GPU in the device table to calibrate the model on: read a GPU's results "
                             "alongside, e.g. the reference rows shipped with crossover")
        models = {}

        def fitted(form: str) -> Predictor:
            if form not in models:
                models[form] = predictor(per_class if form == PER_CLASS else measured, devices, form)
            return models[form]
        per_class_known = len(per_class) > 0
    else:
        per_class_known = True  # the shipped reference rows have the per-class columns
    usable = _usable(rows).sort_values("whole_gpu", key=lambda whole: ~whole, kind="stable")
    keys = config_keys(usable)
    configs = usable.drop_duplicates(keys)
    forms = form_of(configs) if per_class_known else pd.Series(THREE_TERM, index=configs.index)
    frames = []
    for key in gpus:
        done = measured.loc[measured[MATCH_KEY] == key, keys].drop_duplicates()
        todo = configs.assign(_form=forms).merge(done, on=keys, how="left", indicator=True)
        todo = todo[todo["_merge"] == "left_only"].drop(columns="_merge")
        frames += [_predicted(part.drop(columns="_form"), fitted(form), devices, key)
                   for form, part in todo.groupby("_form")]
    if frames:
        return pd.concat(frames, ignore_index=True)
    empty = configs.iloc[:0]
    return _predicted(empty, Predictor(Fit(THREE_TERM, (), None, 0.0), frozenset(), {}), devices, "")


def predict_counted(configs: pd.DataFrame, gpus: list[str], path: Path = DEVICES,
                    default: pd.DataFrame | None = None) -> pd.DataFrame:
    """`predict` for configurations nobody timed (sweeps/predict.py: a step counted on the CPU, not
    trained): one line each with the configuration's columns, workload, precision, steps_per_epoch and
    the step's counted costs (every per-class column), predicted on each GPU of `gpus` by the `shipped`
    per-class model. `default`: the same configurations counted at PyTorch's default precision (line for line),
    which a GPU lacking the unit of theirs is never predicted faster than (`_predicted`)."""
    devices = _known(gpus, path)
    lacking = [c for c in CLASS_COLUMNS if c not in configs or configs[c].isna().any()]
    if lacking:
        raise ValueError(f"the step's counted costs lack {lacking[:3]}{'...' if len(lacking) > 3 else ''}: the "
                         "per-class model predicts from every op class's FLOPs, bytes and launches")
    on = configs.reindex(columns=list(dict.fromkeys([*config_keys(configs), *configs.columns])))
    if default is not None:  # the configuration's own sizes (the run's dataset size, steps an epoch) kept
        default = on.assign(**{c: default[c].to_numpy() for c in (*CLASS_COLUMNS, OPS_PER_STEP) if c in default})
    fitted = shipped(PER_CLASS, path)
    # each GPU's step times once: a GPU's figure is bounded by those of the GPUs it outran (`ordered`)
    times = functools.cache(lambda gpu: _step_s(on, fitted, devices, gpu))
    return pd.concat([_predicted(on, fitted, devices, key, default, times) for key in gpus], ignore_index=True)


@dataclass(frozen=True)
class Prediction:
    """A counted step's epoch on one GPU, predicted (`predict_step`): its time and 90% interval, the host's share of
    the step and whether the host bounds it, the GPU whose figure bounds this one's (never slower than a GPU it
    outran in public benchmarks: `ordered`), and the epoch under CUDA graphs and under torch.compile, each with its
    interval, graph_helps where the graph's figure lies below the eager one's interval (`_cured`)."""

    gpu: str  # the GPU table's key
    epoch_s: float
    epoch_lo: float
    epoch_hi: float
    host_share: float  # NaN: not known (a form of the model without the host's part)
    host_bound: bool
    bound_by: str | None
    graph_helps: bool
    graph_epoch_s: float
    graph_epoch_s_lo: float
    graph_epoch_s_hi: float
    compile_epoch_s: float
    compile_epoch_s_lo: float
    compile_epoch_s_hi: float


def predict_step(step: pd.DataFrame, gpus: list[str], default: pd.DataFrame | None = None,
                 path: Path = DEVICES) -> tuple[Prediction, ...]:
    """`predict_counted` of one counted configuration (`step`: one line), a Prediction per GPU of `gpus`, in
    their order: what analysis/decide/ prices a configuration no row measured by (`at_plan`). Asked again in a
    process for the same step, GPUs and table (one GPU and several of one instance price the same step), answered
    from the first answer: a GPU's prediction is a tenth of a second or more on a 2-core host."""
    return _predicted_step(_Asked(step, tuple(gpus), default, Path(path)))


@dataclass(frozen=True, eq=False)
class _Asked:
    """`predict_step`'s question, equal to another where its step's (and default's) columns, GPUs and table are."""

    step: pd.DataFrame
    gpus: tuple[str, ...]
    default: pd.DataFrame | None
    path: Path

    @property
    def key(self) -> tuple:
        def said(frame: pd.DataFrame | None) -> str | None:  # NaN and NA compare equal here, as the same text
            return None if frame is None else frame.to_json(orient="split", date_format="iso", double_precision=15)
        return said(self.step), self.gpus, said(self.default), str(self.path)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Asked) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@functools.lru_cache(maxsize=16)
def _predicted_step(asked: _Asked) -> tuple[Prediction, ...]:
    found = predict_counted(asked.step, list(asked.gpus), asked.path, asked.default)
    lines: Iterable[Any] = found.itertuples()  # each column of one type, which pandas-stubs cannot know by name
    return tuple(Prediction(str(g.device_name), float(g.epoch_s_median), float(g.epoch_s_lo), float(g.epoch_s_hi),
                            float(g.host_share), bool(g.host_bound), g.bound_by if isinstance(g.bound_by, str) else None,
                            bool(g.graph_helps), *(float(getattr(g, f"{e}_epoch_s{end}"))
                                                   for e in ("graph", "compile") for end in ("", "_lo", "_hi")))
                 for g in lines)


def _known(gpus: list[str], path: Path) -> dict[str, Device]:
    """The device table, where it knows every GPU of `gpus`; else refused naming the unknown ones."""
    devices = load_devices(path)
    unknown = [g for g in gpus if g not in devices]
    if unknown:
        raise ValueError(f"GPUs {unknown} are not in {path}: use its keys {sorted(devices)}, or add an entry")
    return devices


def public_rows(devices: dict[str, Device]) -> pd.DataFrame:
    """The public tables' rows the model fits on (analysis/public.py fit_rows), keyed as GPU rows are."""
    return public.fit_rows(list(devices)).rename(columns={"gpu": MATCH_KEY})


@cache
def reference_rows() -> pd.DataFrame:
    """Every row of the shipped results/reference/ (analysis/load.py REFERENCE), read once a process: what
    `shipped` fits on. The folders do not change while a process runs; callers filter, never modify."""
    return read(REFERENCE)


def reference_gpu_rows(devices: dict[str, Device], form: str = PER_CLASS) -> pd.DataFrame:
    """The shipped reference rows' usable GPU rows of `form` (`gpu_rows`), per-class ones alone for PER_CLASS:
    what `shipped` fits on beside the public rows, and what analysis/ordering.py predicts and holds out."""
    measured = gpu_rows(reference_rows(), devices)
    return measured[form_of(measured) == PER_CLASS] if form == PER_CLASS else measured


@cache
def shipped(form: str, path: Path = DEVICES) -> Predictor:
    """The model of `form` fitted on the shipped reference rows' GPU rows (`reference_rows`) and, in the
    per-class form, the public training figures of the GPUs we cannot rent (analysis/public.py `fit_rows`:
    Lambda's ResNet-50, one row a GPU), with its conformal quantiles and the GPUs' public efficiencies: what analysis/decide/, the verdict and sweeps/predict.py predict with, so that a
    prediction rests on the reference GPUs alone, never on what else the user's folder holds. Fitted once a
    process (9 s of CPU time on a 2-core VM: each model and GPU held out once for the intervals), and the per-class
    fit once a machine: it is kept in the user's cache folder under `shipped_key`, and read from there (0.1 s)."""
    key = shipped_key(form, path)
    if form == PER_CLASS and (kept := disk.read("fit", key)) is not None:
        return Predictor.from_json(kept)
    devices = load_devices(path)
    measured = reference_gpu_rows(devices, form)
    if form == PER_CLASS:
        measured = pd.concat([measured, public_rows(devices)], ignore_index=True)
    fitted = predictor(measured, devices, form, reference_rows() if form == PER_CLASS else None)
    if form == PER_CLASS:
        disk.write("fit", key, fitted.to_json())
    return fitted


def shipped_key(form: str, path: Path = DEVICES) -> str:
    """The key of `shipped`'s fit in the cache: every file it is computed from (the reference rows, the device
    table, and the analysis package: its code, the public tables), the row schema, and the numerical libraries'
    versions. Any change of one is a new key, and a fit again."""
    analysis = Path(__file__).resolve().parents[1]
    return disk.digest(form, *disk.files(REFERENCE, Path(path), analysis, Path(schema.__file__).resolve()),
                       *(disk.version(p) for p in ("numpy", "pandas", "scipy", "pyarrow")))

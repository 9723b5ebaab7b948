"""Each configuration's time on each GPU model and CPU: measured where rows measured it, else analysis/model/'s
prediction (`predictions`, `at_plan` for a planned run), along the dataset size where the rows measured others.

A planned run's step is data handed in: `wanted` names the step (crossover/step.py) to count, the command layer
counts it as `crossover predict` does (sweeps/command.py), and `planned_step` reads the count by its Step. Nothing
here starts a process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from crossover.schema import BUILTIN_MODULE, Precision, given
from crossover.step import AXES, Step

from .. import model
from ..cost import measures
from ..load import KEY, eager_ok, is_reference, keys
from .grid import _power_w, _trial_s, along, busy, planned_rows
from .request import Request
from .memory import memory_needed


SPEED = ["config_key", "source", "trial_s", "trial_lo", "trial_hi", "k", "predicted", "hosts", "date", "busy", "power_w",
         "threads", "own", "cpu", "needs_bytes", "needs_how"]


def _yours_first(group: pd.DataFrame) -> pd.DataFrame:
    """A GPU model's rows at one configuration: those of your machine (not under results/reference/)
    where there are any, else all of them."""
    own = group[~group["results_dir"].map(is_reference)] if "results_dir" in group else group
    return own if len(own) else group


def _measured(config_key: str, source: str, trial_s: float, group: pd.DataFrame) -> dict:
    """A measured speed: no interval, where and when its rows were measured (hosts, newest finished_at), and
    whether they were timed on a busy host (`busy`)."""
    hosts = sorted(set(group["hostname"].dropna().astype(str))) if "hostname" in group else []
    when = pd.to_datetime(group["finished_at"], utc=True).max() if "finished_at" in group else pd.NaT
    return {"config_key": config_key, "source": source, "trial_s": trial_s, "trial_lo": trial_s, "trial_hi": trial_s,
            "predicted": False, "hosts": ", ".join(hosts), "date": when, "busy": busy(group)}


def _epochs(guess: pd.DataFrame) -> tuple[float, float, float]:
    """analysis/model/'s epoch time and its interval (epoch_s_lo, epoch_s_hi; the median where absent)."""
    mid = float(guess["epoch_s_median"].median())
    ends = [float(guess[c].median()) if c in guess and guess[c].notna().any() else mid for c in ("epoch_s_lo", "epoch_s_hi")]
    return mid, ends[0], ends[1]


def _keyed(predicted: pd.DataFrame) -> pd.DataFrame:
    return predicted.assign(config_key=keys(predicted)) if len(predicted) else predicted.assign(config_key=[])


def speeds(rows: pd.DataFrame, predicted: pd.DataFrame, grid: pd.DataFrame, gpus: list[str]) -> pd.DataFrame:
    """Per configuration of the sweep and GPU model or CPU arm: the trial's time with its interval (a
    prediction's; none where measured), its packing K, whether predicted, where and when it was measured,
    and the measured GPU power (null where not measured). A GPU's own rows at a configuration always win
    over a prediction, and your machine's rows over the reference rows (`_yours_first`)."""
    ok = eager_ok(rows)
    ok = ok[ok["config_key"].isin(grid["config_key"])]
    pred = _keyed(predicted)
    lines = []
    line: Any  # a row of the grid: each column of one type, which pandas-stubs cannot know by name
    for line in grid.itertuples():
        at = ok[ok["config_key"] == line.config_key]
        needs = memory_needed(at, line.dataset_size, False)
        gpu_rows = at[at["whole_gpu"] | at["packed"]]
        for gpu in gpus:
            mine = _yours_first(gpu_rows[[measures(n, gpu) for n in gpu_rows["device_name"]]])
            if len(mine):
                packs = {int(str(d).split("/")[1]) if "/" in str(d) else 1: g for d, g in mine.groupby("device")}
                k, group = min(packs.items(), key=lambda kg: _trial_s(kg[1], line) / kg[0])
                lines.append(_measured(line.config_key, gpu, _trial_s(group, line), group)
                             | {"k": k, "power_w": _power_w(group), **needs})
                continue
            guess = pred[(pred["config_key"] == line.config_key) & (pred["device_name"] == gpu)]
            if len(guess):  # the fixed seconds are measured (another GPU's, else the CPU's); the epochs predicted
                fixed = (gpu_rows if len(gpu_rows) else at)[["setup_s", "h2d_s", "eval_s"]].sum(axis=1).median()
                epochs = max(line.epochs - line.warmup_epochs, 1) + line.warmup_epochs
                mid, lo, hi = ((0 if pd.isna(fixed) else fixed) + epochs * e for e in _epochs(guess))
                lines.append({"config_key": line.config_key, "source": gpu, "trial_s": mid, "trial_lo": lo, "trial_hi": hi,
                              "k": 1, "predicted": True, "hosts": "", "date": pd.NaT, "busy": "", "power_w": math.nan,
                              **needs})
        for (cpu, threads), group in at[at["is_cpu"]].groupby(["device_name", "torch_threads"]):
            group = _yours_first(group)
            lines.append(_measured(line.config_key, f"{cpu}, {threads:.0f} threads", _trial_s(group, line), group)
                         | {"k": 1, "power_w": _power_w(group, "cpu_energy_j"), "threads": int(threads), "cpu": "CPU",
                            "own": not all(map(is_reference, group["results_dir"]))})
    return pd.DataFrame(lines, columns=SPEED)


def _points(group: pd.DataFrame) -> pd.DataFrame:
    """Measured rows as one point per dataset size: median epoch time (no interval: epoch_lo and epoch_hi
    the same), and median fixed seconds of a run besides its epochs (set-up, transfer, evaluation, and
    what the warm-up epochs took beyond steady ones)."""
    parts = group[["setup_s", "h2d_s", "eval_s"]].sum(axis=1)
    beyond = (group["warmup_s"] - group["warmup_epochs"] * group["epoch_s_median"]).fillna(0)
    points = (group.assign(epoch_s=group["epoch_s_median"], fixed_s=parts + beyond)
              .groupby("dataset_size", as_index=False)[["epoch_s", "fixed_s"]].median())
    return points.assign(epoch_lo=points["epoch_s"], epoch_hi=points["epoch_s"], modelled=False)


def _guessed(guess: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """analysis/model/'s predictions as points: its epoch time and interval, and the fixed seconds the
    measured rows of the same configuration took (the warm-up counted as a steady epoch, as `speeds` does)."""
    fixed = measured.assign(f=measured[["setup_s", "h2d_s", "eval_s"]].sum(axis=1)).groupby("config_key")["f"].median()
    ends = {e: guess[c] if c in guess else guess["epoch_s_median"] for e, c in (("epoch_lo", "epoch_s_lo"), ("epoch_hi", "epoch_s_hi"))}
    points = guess.assign(epoch_s=guess["epoch_s_median"], fixed_s=guess["config_key"].map(fixed).fillna(0), **ends)
    points = points.assign(epoch_lo=points["epoch_lo"].fillna(points["epoch_s"]), epoch_hi=points["epoch_hi"].fillna(points["epoch_s"]))
    return (points.groupby("dataset_size", as_index=False)[["epoch_s", "fixed_s", "epoch_lo", "epoch_hi"]].median()
            .assign(modelled=True))


def _planned(points: pd.DataFrame, plan: Request) -> dict:
    """The planned run's time from one source's points, its interval (the model's, carried along the
    same lines; the fixed seconds are measured), and where plan.samples lies against the points."""
    points = points.sort_values("dataset_size", ignore_index=True)
    sizes = points["dataset_size"].to_numpy(float)
    epoch, lo, hi = (along(sizes, points[c].to_numpy(float), plan.samples) for c in ("epoch_s", "epoch_lo", "epoch_hi"))
    fixed = max(along(sizes, points["fixed_s"].to_numpy(float), plan.samples).value, 0.0)
    modelled = bool(points["modelled"].to_numpy()[list(epoch.used)].any())
    outside = epoch.side in ("past", "below")
    return {"trial_s": fixed + plan.epochs * epoch.value, "trial_lo": fixed + plan.epochs * min(lo.value, epoch.value),
            "trial_hi": fixed + plan.epochs * max(hi.value, epoch.value), "epoch_s": epoch.value,
            "epoch_lo": min(lo.value, epoch.value), "epoch_hi": max(hi.value, epoch.value), "predicted": modelled or outside,
            "modelled": modelled, "extrapolated": outside, "unreliable": epoch.unreliable, "factor": epoch.factor,
            "spread": epoch.spread,
            "reach": epoch.reach}


# what a decision's note says where its planned step is not counted so (planned_step; decide.brief
# shows every such note)
NOT_COUNTED = "the planned step is not counted"


def job_reference(line: dict) -> tuple[str, str | None]:
    """The reference a row's job is counted by, from any folder, and the path the row names where it is not found
    from here (else None): a built-in's name; a job file's path (workload_path) and attribute; a package's module
    (workload_module: its Step names the folder of workload_path, which the counting process puts on its path); in
    rows written before workload_path, workload_module as it imports from the current folder."""
    module, cell = str(line["workload_module"]), line.get("workload_path")
    if module == BUILTIN_MODULE:
        return line["workload"], None
    if not given(cell):
        return module, None
    path = str(cell)
    found = Path(path).is_file() if path.endswith(".py") else Path(path).is_dir()
    if not found:
        return module, path
    return (f"{path}:{module.rsplit(':', 1)[-1]}" if path.endswith(".py") else module), None


def _line(mine: pd.DataFrame) -> pd.Series:
    """The row the planned step is counted from: of the planned configuration's rows (`planned_rows`), the CPU's
    first, as the rows' own count is taken."""
    return mine.sort_values("is_cpu", ascending=False, kind="stable").iloc[0]


def _names_job(line: pd.Series, plan: Request) -> bool:
    """Whether there is a job to count the planned step from: plan.job, or the one the rows name (workload_module)."""
    module = line.get("workload_module")
    return bool(plan.job or isinstance(module, str) and module)


def _step(line: dict, plan: Request) -> tuple[Step | None, str | None]:
    """The step the planned run needs counted, from a row of its configuration (`line`: its batch size, depth, width,
    context and the workload's own axes), for the job plan.job names, else the one the row names (`job_reference`);
    and the job file the row names where it is not found from here (the step then None)."""
    ref, missing = (plan.job, None) if plan.job else job_reference(line)
    if missing is not None:
        return None, missing
    params = json.loads(line["workload_params"]) if isinstance(line.get("workload_params"), str) else {}
    path = str(line["workload_path"]) if given(line.get("workload_path")) else ""
    # a package's module imports from the folder its rows name, put on the counting process's path
    folders = (path,) if path and not path.endswith(".py") and ref == line.get("workload_module") else ()
    return Step(ref, plan.epochs, int(line["batch_size"]), plan.samples,
                tuple((a, int(line[a])) for a in AXES if given(line.get(a))), tuple(sorted(params.items())),
                precision=plan.precision, folders=folders), None


def wanted(rows: pd.DataFrame, plan: Request) -> Step | None:
    """The step the planned run needs counted (crossover/step.py), what `planned_step` looks up in its counts; None
    where nothing is to be counted: the batch is the whole dataset, the rows name no job, or the job file they name
    is not found from here. Starts no process and writes nothing."""
    mine = planned_rows(rows, plan)
    if mine["full_batch"].any():
        return None
    line = _line(mine)
    return _step(line.to_dict(), plan)[0] if _names_job(line, plan) else None


def planned_step(rows: pd.DataFrame, plan: Request, counts: Mapping[Step, dict | str] | None = None
                 ) -> tuple[pd.DataFrame | None, str]:
    """The planned configuration's one step and its counted costs (one line: the configuration's columns and
    model.CLASS_COLUMNS), what `at_plan` predicts the GPUs from, and a note where it is not counted as `crossover
    predict` counts it. `counts`: every step the command layer counted (`crossover decide` and `crossover report`
    count each step `steps` names, as predict does, in a process of their own, and hand the counts over), keyed by
    the Step (`wanted`): a dict, the step counted; a str, why it could not be. Where it could not be, the job file is
    not found from here, or `counts` is None (the analysis run alone), the count a row of the configuration made
    (the CPU's first), and the note says so and what the figures then rest on. None: the rows hold no count of
    every op class, or the batch is the whole dataset (it grows with the run's size)."""
    mine = planned_rows(rows, plan)
    if mine["full_batch"].any():
        return None, ""
    line = _line(mine)
    counted = mine[mine[list(model.CLASS_COLUMNS)].notna().all(axis=1)] if set(model.CLASS_COLUMNS) <= set(mine) \
        else mine.iloc[:0]
    counted = counted.sort_values("is_cpu", ascending=False, kind="stable").head(1)
    module = line.get("workload_module")
    if not _names_job(line, plan):  # rows that name no job: their own count
        return (None if counted.empty else counted), ""
    if counts is None:  # the analysis run alone: handed no counts
        why = f"{NOT_COUNTED} as crossover predict counts it (python -m crossover.analysis counts nothing)"
        fix = "; crossover decide and crossover report count it"
    else:
        step, missing = _step(line.to_dict(), plan)
        if step is None:
            why = f"the job file {missing} named by the rows (workload_path) was not found from here; {NOT_COUNTED}"
        elif isinstance(counts[step], dict):
            return pd.DataFrame([counts[step]]), ""
        else:  # why the command layer could not count it: its PredictError's line
            why = f"{NOT_COUNTED} as crossover predict counts it ({counts[step]})"
        fix = "" if module == BUILTIN_MODULE else \
            f"; run where the job is found, or pass --workload path/to/job.py:{str(module).rsplit(':', 1)[-1]}"
    rests = (f"the step a row counted, GPU memory {memory_needed(counted, plan.samples, False)['needs_how']}"
             if len(counted) else "the model's predictions along the sizes measured (no row counted a step)")
    return (None if counted.empty else counted), f"  {why}: figures fall back to {rests}{fix}"


def at_plan(config_key: str, counted: pd.DataFrame, plan: Request, gpus: list[str],
            default: pd.DataFrame | None = None) -> pd.DataFrame:
    """analysis/model/'s prediction of the planned configuration itself on each GPU of `gpus` its device table
    knows, as `speeds` lines (SPEED, and a planned run's columns): the step of `counted` (`planned_step`, counted at
    the run's batch size), plan.samples' steps an epoch, at plan.precision; the run's time plan.epochs x the time
    per epoch, on the GPU alone (nothing of it was timed: no set-up, transfer or evaluation). What `crossover
    predict` and `decide` both price a GPU no row measured at that configuration by, so that both say one figure.
    `default`: the step counted at PyTorch's default precision, which a GPU without plan.precision's unit (bf16 on a
    T4) is never predicted faster than; its lines carry HOST too."""
    batch = int(counted["batch_size"].iloc[0])
    configs = counted.assign(dataset_size=plan.samples, steps_per_epoch=-(-plan.samples // batch),
                             precision=plan.precision)
    known = [g for g in gpus if g in model.load_devices()]
    guess = model.predict_step(configs, known, default=default) if known else ()
    needs = memory_needed(configs, plan.samples, False)
    return pd.DataFrame([{
        "config_key": config_key, "source": g.gpu, "k": 1, "predicted": True, "hosts": "", "date": pd.NaT,
        "busy": "", "power_w": math.nan, "threads": math.nan, **needs, "modelled": True, "extrapolated": False,
        "unreliable": False, "factor": 1.0, "spread": math.nan, "reach": OWN_SIZE,
        **{f"trial{end}": plan.epochs * v for end, v in (("_s", g.epoch_s), ("_lo", g.epoch_lo), ("_hi", g.epoch_hi))},
        "epoch_s": g.epoch_s, "epoch_lo": g.epoch_lo, "epoch_hi": g.epoch_hi,
        **{c: getattr(g, c) for c in HOST}} for g in guess],
        columns=SPEED + PLANNED + HOST)


# what analysis/model/ says of a predicted step beside its time (model.Prediction): the host's share of it and
# whether it is bound by the host, the GPU whose figure bounds it, and its epoch under CUDA graphs and torch.compile
HOST = ["host_share", "host_bound", "bound_by", "graph_helps",
        *(f"{e}_epoch_s{end}" for e in ("graph", "compile") for end in ("", "_lo", "_hi"))]
OWN_SIZE = "predicted at its own size"  # a planned run's `reach` where the model predicted that configuration itself
PLANNED = ["modelled", "extrapolated", "unreliable", "factor", "spread", "reach", "epoch_s", "epoch_lo", "epoch_hi"]


def corrected(line: dict, points: pd.DataFrame, plan: Request, batch: int) -> dict:
    """`at_plan`'s line for a GPU whose rows measured the configuration at other dataset sizes, scaled by what
    they measured against what the model says at the nearest of them (the same step, that size's steps an
    epoch); its interval scaled alike, and its reach naming the size the correction rests on."""
    near = points.iloc[(points["dataset_size"] - plan.samples).abs().argsort()[:1]].iloc[0]
    said = line["epoch_s"] * -(-int(near["dataset_size"]) // batch) / -(-plan.samples // batch)
    scale = float(near["epoch_s"]) / said if said > 0 else 1.0
    scaled = {c: line[c] * scale for c in ("trial_s", "trial_lo", "trial_hi", "epoch_s", "epoch_lo", "epoch_hi",
                                           *(c for c in HOST if c.endswith(("_s", "_lo", "_hi"))))}
    return line | scaled | {"reach": f"{OWN_SIZE}, x{scale:.2g} as measured at {near['dataset_size']:,.0f}"}


def stepped(group: pd.DataFrame, plan: Request, batch: int) -> dict:
    """A CPU's planned run where its rows measured the configuration at one dataset size, not plan.samples, as
    `corrected` treats a GPU's: the run's step is the one they timed (the same model at the same batch; what a step
    costs, as analysis/model/ prices it from the step's counted costs, does not change with N), so its time per
    epoch is theirs a step x N's steps, its interval the fastest and the slowest epoch they timed (epoch_s_min,
    epoch_s_max) scaled alike, and its fixed seconds (set-up, evaluation) theirs, never scaled by N. Its reach
    says how far from the size measured: '195x past 256, its step as timed there'."""
    point = _points(group).iloc[0]
    size = int(point["dataset_size"])
    scale = -(-plan.samples // batch) / -(-size // batch)
    epoch = float(point["epoch_s"]) * scale
    ends = [float(group[c].agg(f)) / float(point["epoch_s"]) if c in group and group[c].notna().any() else 1.0
            for c, f in (("epoch_s_min", "min"), ("epoch_s_max", "max"))]
    lo, hi = epoch * min(ends[0], 1.0), epoch * max(ends[1], 1.0)
    fixed = max(float(point["fixed_s"]), 0.0)
    side, factor = ("past", plan.samples / size) if plan.samples > size else ("below", size / plan.samples)
    return {"trial_s": fixed + plan.epochs * epoch, "trial_lo": fixed + plan.epochs * lo,
            "trial_hi": fixed + plan.epochs * hi, "epoch_s": epoch, "epoch_lo": lo, "epoch_hi": hi, "predicted": True,
            "modelled": False, "extrapolated": True, "unreliable": False, "factor": factor, "spread": math.nan,
            "reach": f"{factor:,.3g}x {side} {size:,}, its step as timed there"}


def plan_speeds(rows: pd.DataFrame, predicted: pd.DataFrame, grid: pd.DataFrame, gpus: list[str],
                plan: Request, counted: pd.DataFrame | None = None, default: pd.DataFrame | None = None) -> pd.DataFrame:
    """`speeds` for the planned run: per shape and GPU model or CPU arm, the run's time at plan.samples.
    A GPU's own rows (your machine's first) at plan.samples, or around it (the line between the two sizes
    around it), give the measurement, at PyTorch's default precision (the rows'); elsewhere the model's
    prediction of the configuration itself (`at_plan`, from `counted`: `planned_step`; `default`, its count at
    PyTorch's default precision, for the GPUs without plan.precision's unit), scaled by the GPU's
    rows at other sizes where it has some (`corrected`); without a count of every op class, the model's
    predictions at the sizes measured, along them (`along`). A CPU's rows along the sizes they measured; where they
    measured one, its step as timed there (`stepped`), never a line per sample far past it."""
    ok = planned_rows(rows, plan)
    pred = _keyed(predicted)
    pred = pred.assign(shape=pred["config_key"].map(dict(zip(ok["config_key"], ok["shape"]))))
    lines = []
    line: Any  # a row of the grid: each column of one type, which pandas-stubs cannot know by name
    for line in grid.itertuples():
        at = ok[ok["shape"] == line.config_key]
        needs = memory_needed(at, plan.samples, line.full_batch)
        gpu_rows = at[at["whole_gpu"]]  # one run holds a whole GPU: packed rows (cuda/K) left aside
        own = at_plan(line.config_key, counted, plan, gpus, default) if counted is not None else \
            pd.DataFrame(columns=SPEED)
        for gpu in gpus:
            mine = gpu_rows[[measures(n, gpu) for n in gpu_rows["device_name"]]]
            mine = pd.concat([_yours_first(g) for _, g in mine.groupby("config_key")]) if len(mine) else mine
            points = _points(mine) if len(mine) and plan.precision == Precision.DEFAULT else pd.DataFrame()
            sizes = points.get("dataset_size", pd.Series(dtype=float))
            covered = len(points) and (sizes.eq(plan.samples).any() or sizes.min() < plan.samples < sizes.max())
            guessed = own[own["source"] == gpu]
            if not covered and len(guessed):
                said = guessed.iloc[0].to_dict()
                said = corrected(said, points, plan, int(line.batch_size)) if len(points) else said
                measured_peak = str(needs["needs_how"]).startswith("peak measured")  # a GPU's peak beats a count
                lines.append(said | (needs if measured_peak else {}))
                continue
            guess = pred[(pred["shape"] == line.config_key) & (pred["device_name"] == gpu)]
            guess = guess[~guess["dataset_size"].isin(sizes)]  # a measured size wins
            if len(guess) and not covered:
                points = pd.concat([points, _guessed(guess, gpu_rows if len(gpu_rows) else at)], ignore_index=True)
            if len(points):
                where = (_measured(line.config_key, gpu, 0.0, mine) if len(mine) else
                         {"hosts": "", "date": pd.NaT, "busy": ""})
                lines.append(where | {"config_key": line.config_key, "source": gpu, "k": 1, **_planned(points, plan),
                                      "power_w": _power_w(mine) if len(mine) else math.nan, **needs})
        for (cpu, threads), group in at[at["is_cpu"]].groupby(["device_name", "torch_threads"]):
            group = pd.concat([_yours_first(g) for _, g in group.groupby("config_key")])
            points = _points(group)
            one = len(points) == 1 and points["dataset_size"].iloc[0] != plan.samples and not line.full_batch
            lines.append(_measured(line.config_key, f"{cpu}, {threads:.0f} threads", 0.0, group)
                         | {"k": 1, **(stepped(group, plan, int(line.batch_size)) if one else _planned(points, plan)),
                            "power_w": _power_w(group, "cpu_energy_j"),
                            "threads": int(threads), "own": not all(map(is_reference, group["results_dir"])), "cpu": "CPU"})
    return pd.DataFrame(lines, columns=SPEED + PLANNED + HOST)


def missing(grid: pd.DataFrame, speed: pd.DataFrame, models: list[str]) -> list[str]:
    """A note for every GPU model left out: neither measured nor predicted at some configuration of the sweep."""
    notes = []
    for gpu in models:
        lacking = set(grid["config_key"]) - set(speed.loc[speed["source"] == gpu, "config_key"])
        if lacking:
            names = grid.loc[grid["config_key"].isin(lacking), "workload"].value_counts()
            notes.append(f"  left out: {gpu}, with no measured or predicted time at {len(lacking)} of {len(grid)} "
                         f"configurations ({', '.join(f'{w} {n}' for w, n in names.items())}); crossover's model "
                         "predicts a configuration from its rows' counted step costs, which these lack: sweep it "
                         "again with this version, which counts them")
    return notes


def predictions(rows: pd.DataFrame, gpus: list[str]) -> tuple[pd.DataFrame, str]:
    """analysis/model/'s predictions, with their interval, for the GPU models among `gpus` that its
    device table knows, at every configuration no row of theirs measured, and a note where it could make
    none. The model is fitted on the shipped reference rows alone (model.shipped), and each configuration
    is predicted from its own rows' counted step costs: a user's model measured on the CPU alone is
    predicted on every GPU, and no figure moves with what else the folder holds (the built-ins' rows, the
    reference rows set beside them, --no-reference)."""
    known = [g for g in gpus if g in model.load_devices()]
    none = pd.DataFrame(columns=KEY + ["device_name", "epoch_s_median", "epoch_s_lo", "epoch_s_hi"])
    if not known:
        return none, ""
    try:
        return model.predict(rows, known, fitted=model.shipped), ""
    except ValueError as exc:  # the model's own words: what to read alongside
        return none, f"  not predicted ({', '.join(known)}): {exc}"

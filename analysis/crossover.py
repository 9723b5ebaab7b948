"""Crossover points: past which size device B trains faster than device A, with a bootstrap interval.

    python -m analysis report results/scaling          # the table is in the report, and printed
    from analysis.crossover import find, render; print(render(find(rows)))

For each workload and each axis (n_params, depth, width, batch_size, dataset_size), the rows are cut
into slices that hold every other configuration column fixed (seeds are pooled: they are repeats).
In a slice, each pair of arms (A, the baseline, is the CPU where there is one) is compared at every
size both measured. The answer is one of:

    crossover               one change of winner: the point is interpolated in log-log space between
                            the last size where one wins and the first where the other does, i.e. where
                            the straight lines through the two log-log points cross;
    B faster everywhere     B wins at every measured size;
    none in measured range  A wins at every measured size;
    several crossings       the winner changes more than once (all crossings are listed).

The interval comes from a bootstrap over the repeated per-epoch times: each draw resamples every
row's timed epochs (`epoch_s`) with replacement, pooled across repeats, recomputes the statistic at
every size and finds the crossing again. Draws in which B wins everywhere put the crossover below the
range (-inf), draws in which A wins everywhere above it (+inf), so an interval can be open-ended;
`draws_agree` is the share of draws that give the same kind of answer as the measurement.

Three metrics:
    epoch_s               median time per timed epoch;
    time_to_target_loss_s time until the training loss first reaches the lowest loss both arms reached
                          at that size (from each row's per-epoch `loss_curve`): h2d_s + warmup_s + the
                          timed epochs up to that one, at the pooled mean epoch time. Rows without a
                          loss curve (written before the column existed) give no line for it;
    time_to_final_loss_s  time to reach the trial's final training loss: h2d_s + warmup_s + the timed
                          epochs. Both arms train the same model from the same seed on the same data
                          order, so they reach that loss after the same epochs; a point counts only
                          where their final losses agree within `loss_rtol`.

Reads rows only (numpy, pandas); never imports torch or ray.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.schema import CONFIG_COLUMNS, CROSSOVER_AXES, SIZE_AXES

METRICS = ["epoch_s", "time_to_final_loss_s", "time_to_target_loss_s"]


@dataclass(frozen=True)
class Bootstrap:
    draws: int = 1000  # resamples of every row's epoch times
    confidence: float = 0.95  # two-sided interval, e.g. 0.95 -> 2.5th to 97.5th percentile
    seed: int = 0  # numpy Generator seed; each slice derives its own stream from it and the slice's key
    loss_rtol: float = 0.02  # time_to_final_loss_s: final train losses of A and B within this relative gap


def held_fixed(axis: str) -> list[str]:
    """Configuration columns held fixed while `axis` varies (device compared, seeds pooled)."""
    varied = {"device", "seed", axis} | ({"depth", "width"} if axis == "n_params" else set())
    return [c for c in CONFIG_COLUMNS if c not in varied]


def slices(rows: pd.DataFrame, axis: str):
    """(workload, label, slice rows) for each slice of ok rows where `axis` takes two values or more.

    Along dataset_size, a full-batch trial (peaks) grows its batch with its data: "full batch" is what
    is held fixed there, not the batch's size, or no two of its sizes would share a slice.
    """
    ok = rows[(rows["status"] == "ok") & rows[axis].notna()]
    keys = held_fixed(axis)
    if axis == "dataset_size":
        ok = ok.assign(batch=np.where(ok["batch_size"] == ok["dataset_size"], "full", ok["batch_size"].astype(str)))
        keys = ["batch" if k == "batch_size" else k for k in keys]
    for key, group in ok.groupby(keys, dropna=False, sort=True):
        if group[axis].nunique() >= 2:
            fixed = dict(zip(keys, key))
            shown = {**fixed, "batch_size": fixed.get("batch", fixed.get("batch_size"))}
            label = ", ".join(f"{a}={_size(shown[a])}" for a in SIZE_AXES if a in shown and pd.notna(shown[a]))
            yield fixed["workload"], label or "-", group


def _size(value) -> str:
    return value if isinstance(value, str) else f"{value:,.0f}"


def baseline_first(arms) -> list[str]:
    """Arms in comparison order: the CPU ones first, so that A is the CPU and B the accelerator."""
    return sorted(arms, key=lambda arm: (not str(arm).startswith("cpu"), str(arm)))


def find(rows: pd.DataFrame, boot: Bootstrap = Bootstrap()) -> pd.DataFrame:
    """The tidy crossover table: one line per workload, axis, slice, pair of arms and metric."""
    lines = []
    for axis in CROSSOVER_AXES:
        for workload, label, group in slices(rows, axis):
            rng = np.random.default_rng([boot.seed, zlib.crc32(f"{workload}|{axis}|{label}".encode())])
            points = {arm: _points(g, axis, rng, boot.draws) for arm, g in group.groupby("arm")}
            for a, b in itertools.combinations(baseline_first(points), 2):
                for metric in METRICS:
                    line = _compare(points[a], points[b], metric, boot)
                    if line:
                        lines.append({"workload": workload, "axis": axis, "held_fixed": label,
                                      "device_a": a, "device_b": b, "metric": metric, **line})
    table = pd.DataFrame(lines, columns=COLUMNS)
    return table.assign(answer=[answer(line) for line in table.itertuples()])


COLUMNS = ["workload", "axis", "held_fixed", "device_a", "device_b", "metric", "n_points", "x_min", "x_max",
           "verdict", "faster_below", "faster_above", "crossover", "ci_low", "ci_high", "draws_agree",
           "crossings", "note"]


@dataclass
class _Points:
    """One arm of one slice, per size: the statistic measured and its bootstrap draws."""
    x: np.ndarray  # sizes, ascending
    epoch: np.ndarray  # median epoch time, s
    epoch_draws: np.ndarray  # (draws, sizes)
    to_loss: np.ndarray  # time to the final loss, s
    to_loss_draws: np.ndarray  # (draws, sizes)
    loss: np.ndarray  # final train loss (mean over repeats)
    fixed: np.ndarray  # h2d_s + warmup_s (mean over repeats), s
    epoch_mean: np.ndarray  # mean timed epoch, s
    epoch_mean_draws: np.ndarray  # (draws, sizes)
    curves: list  # per size, the loss per timed epoch (mean over repeats), or None where a row has none


def _points(group: pd.DataFrame, axis: str, rng: np.random.Generator, draws: int) -> _Points:
    x, curves = [], []
    cols = {k: [] for k in ("epoch", "epoch_draws", "to_loss", "to_loss_draws", "loss", "fixed", "epoch_mean",
                            "epoch_mean_draws")}
    for size, at in group.groupby(axis, sort=True):
        pool = np.concatenate([np.asarray(e, dtype=float) for e in at["epoch_s"]])
        resampled = pool[rng.integers(0, len(pool), size=(draws, len(pool)))]
        # time to the final loss: fixed costs + as many epochs as were timed, at the pooled mean
        fixed, timed = (at["h2d_s"] + at["warmup_s"]).mean(), np.mean([len(e) for e in at["epoch_s"]])
        x.append(size)
        cols["epoch"].append(np.median(pool))
        cols["epoch_draws"].append(np.median(resampled, axis=1))
        cols["to_loss"].append(fixed + timed * pool.mean())
        cols["to_loss_draws"].append(fixed + timed * resampled.mean(axis=1))
        cols["loss"].append(at["train_loss"].mean())
        cols["fixed"].append(fixed)
        cols["epoch_mean"].append(pool.mean())
        cols["epoch_mean_draws"].append(resampled.mean(axis=1))
        known = [c for c in at["loss_curve"] if c is not None and len(c)]
        same_length = len(known) == len(at) and len({len(c) for c in known}) == 1
        curves.append(np.mean(np.stack(known), axis=0) if same_length else None)
    arrays = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    return _Points(np.asarray(x, dtype=float), curves=curves,
                   **{k: (v.T if k.endswith("draws") else v) for k, v in arrays.items()})


def _to_target(a: _Points, b: _Points, ia: np.ndarray, ib: np.ndarray):
    """Per common size, each arm's time (and draws) to the lowest loss both reached; None without curves."""
    if any(a.curves[i] is None for i in ia) or any(b.curves[i] is None for i in ib):
        return None
    out = {}
    for side, pts, idx in (("a", a, ia), ("b", b, ib)):
        other, oidx = (b, ib) if side == "a" else (a, ia)
        epochs = np.array([np.argmax(pts.curves[i] <= max(pts.curves[i].min(), other.curves[j].min())) + 1
                           for i, j in zip(idx, oidx)])
        out[side] = (pts.fixed[idx] + epochs * pts.epoch_mean[idx],
                     pts.fixed[idx] + epochs * pts.epoch_mean_draws[:, idx])
    return out


def _compare(a: _Points, b: _Points, metric: str, boot: Bootstrap) -> dict | None:
    common = np.intersect1d(a.x, b.x)
    if len(common) < 2:
        return None
    ia, ib = np.searchsorted(a.x, common), np.searchsorted(b.x, common)
    note = ""
    if metric == "time_to_final_loss_s":
        la, lb = a.loss[ia], b.loss[ib]
        same = np.abs(la - lb) <= boot.loss_rtol * np.maximum(np.abs(la), np.abs(lb))
        if not same.all():
            note = (f"{(~same).sum()} of {len(same)} sizes dropped: final train loss differs by more than "
                    f"{boot.loss_rtol:.0%} between the arms, so they did not reach the same target")
        common, ia, ib = common[same], ia[same], ib[same]
        if len(common) < 2:
            return {"n_points": len(common), "verdict": "not computable", "crossings": [], "note": note}
    if metric == "time_to_target_loss_s":
        times = _to_target(a, b, ia, ib)
        if times is None:
            return None
        (ta, ta_draws), (tb, tb_draws) = times["a"], times["b"]
    else:
        stat = "epoch" if metric == "epoch_s" else "to_loss"
        ta, ta_draws = getattr(a, stat)[ia], getattr(a, stat + "_draws")[:, ia]
        tb, tb_draws = getattr(b, stat)[ib], getattr(b, stat + "_draws")[:, ib]
    # log(tA / tB) > 0 where B is faster; row 0 is the measurement, the rest the bootstrap draws
    measured = np.log(ta / tb)[None, :]
    drawn = np.log(ta_draws / tb_draws)
    return {**_verdict(np.log(common), measured, drawn, boot.confidence), "note": note,
            "n_points": len(common), "x_min": common[0], "x_max": common[-1]}


def _verdict(logx: np.ndarray, measured: np.ndarray, drawn: np.ndarray, confidence: float) -> dict:
    kind, first = _classify(logx, np.vstack([measured, drawn]))
    wins = measured[0] > 0  # B faster at each size
    flips = np.flatnonzero(wins[1:] != wins[:-1])
    crossings = np.exp(_interpolate(logx, measured[np.zeros(len(flips), int)], flips)).tolist()
    verdict = {"all_b": "B faster everywhere", "all_a": "none in measured range"}.get(
        kind[0], "several crossings" if kind[0] == "several" else "crossover")
    out = {"verdict": verdict, "crossings": crossings, "draws_agree": float(np.mean(kind[1:] == kind[0])),
           "faster_below": "B" if wins[0] else "A", "faster_above": "B" if wins[-1] else "A",
           "crossover": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    if verdict == "crossover":
        # the faster device above the crossing winning everywhere puts it below the range, and vice versa
        below, above = ("all_b", "all_a") if kind[0] == "a_to_b" else ("all_a", "all_b")
        draws = np.where(kind[1:] == kind[0], first[1:], np.nan)
        draws[kind[1:] == below], draws[kind[1:] == above] = -np.inf, np.inf
        draws = draws[~np.isnan(draws)]
        tail = (1 - confidence) / 2
        low, high = np.quantile(draws, [tail, 1 - tail], method="inverted_cdf") if len(draws) else (np.nan, np.nan)
        out.update(crossover=float(np.exp(first[0])), ci_low=float(np.exp(low)), ci_high=float(np.exp(high)))
    return out


def _classify(logx: np.ndarray, logr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per curve (row of log tA/tB over sizes): its kind, and log x of its crossing where there is one."""
    wins = logr > 0
    flips = wins[:, 1:] != wins[:, :-1]
    n = flips.sum(axis=1)
    first = flips.argmax(axis=1)
    rising = wins[np.arange(len(wins)), first + 1]
    kind = np.select([n == 0, n > 1, rising], [np.where(wins[:, 0], "all_b", "all_a"), "several", "a_to_b"], "b_to_a")
    with np.errstate(divide="ignore", invalid="ignore"):  # curves with no crossing: their value is dropped
        return kind, np.where(n == 1, _interpolate(logx, logr, first), np.nan)


def _interpolate(logx: np.ndarray, logr: np.ndarray, i: np.ndarray) -> np.ndarray:
    """log x where the line through (logx[i], logr[:, i]) and (logx[i+1], logr[:, i+1]) meets zero, per row."""
    rows = np.arange(len(i))
    lo, hi = logr[rows, i], logr[rows, i + 1]
    return logx[i] - lo * (logx[i + 1] - logx[i]) / (hi - lo)


def answer(line) -> str:
    """The line in words: 'cuda faster past n_params ~ 1.2e+05 (95% CI 9.8e+04 to 1.5e+05)'."""
    name = {"A": line.device_a, "B": line.device_b}
    if line.verdict == "crossover":
        ci = f"{_bound(line.ci_low, line.x_min, '<')} to {_bound(line.ci_high, line.x_max, '>')}"
        return (f"{name[line.faster_above]} faster past {line.axis} ~ {line.crossover:.3g} (CI {ci}; "
                f"{line.draws_agree:.0%} of draws agree)")
    if line.verdict == "B faster everywhere":
        return f"{line.device_b} faster at every size ({line.draws_agree:.0%} of draws agree)"
    if line.verdict == "none in measured range":
        return f"no crossover in the measured range: {line.device_a} faster at every size ({line.draws_agree:.0%} of draws agree)"
    if line.verdict == "several crossings":
        return f"several crossings, at {line.axis} ~ " + ", ".join(f"{c:.3g}" for c in line.crossings)
    return f"not computable: {line.note}"


def _bound(value: float, edge: float, sign: str) -> str:
    return f"{sign}{edge:.3g} (outside the measured range)" if np.isinf(value) else f"{value:.3g}"


def render(table: pd.DataFrame, rows: pd.DataFrame | None = None) -> str:
    """The table as text, one block per workload: what `python -m analysis report` prints."""
    if table.empty:
        arms = sorted(rows.loc[rows["status"] == "ok", "arm"].unique()) if rows is not None else []
        return (f"no crossover to compute: no two arms measured at the same sizes (arms: {', '.join(arms) or 'none'}); "
                "sweep a second device, or read a second results directory alongside")
    parts = []
    for workload, group in table.groupby("workload", sort=True):
        parts.append(f"== {workload} ==")
        shown = group[["axis", "held_fixed", "device_a", "device_b", "metric", "n_points", "answer"]]
        parts.append(shown.to_string(index=False))
    return "\n".join(parts)


def write(table: pd.DataFrame, path: Path) -> Path:
    """The table as Parquet (crossings as a list column)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(path, index=False)
    return path

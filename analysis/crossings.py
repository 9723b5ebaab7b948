"""Crossover points: past which size device B trains faster than device A, with a bootstrap interval.

    python -m crossover.analysis report results/scaling          # the table is in the report, and printed
    from .selection import select; s = select(rows)
    from .crossings import find, render; print(render(find(s), s))

For each workload and each axis (n_params, depth, width, batch_size, dataset_size), the rows are cut
into slices that hold every other configuration column fixed but the run's length (epochs and
warm-up epochs: RUN_LENGTH), so rows of one size compare per epoch whatever their epoch counts. In a
slice, the rows of one arm at one size are its runs: they differ only by `seed` or run length (or
are the same configuration measured again), so they are independent repeats. Each pair of arms
(A, the baseline, is the CPU where there is one) is compared at every size both measured, on
d = log(tA / tB), > 0 where B is faster.

The bootstrap resamples runs, then epochs. Each draw picks, at every size and for each arm, as many
runs as were measured, with replacement, then resamples each picked run's timed epochs (`epoch_s`)
with replacement within that run, pools them and recomputes the statistic. Run-to-run differences
are thus in the interval, not only the epoch-to-epoch jitter. Where a size has a single run, the draw
can only resample that run's epochs: the interval then misses the run-to-run noise, and is narrower
than a repeat of the run would show. With few runs it is still too narrow, as no draw lies beyond the
measured runs' range: equal arms whose runs differ by 20% (epochs steady) were called within noise
in 17 of 40 plantings with 3 runs a size, 36 of 40 with 5 (tests/analysis_rows.py, 9 sizes, 400
draws). Sweep 5 seeds or more where that matters.

Noise first, then winners (in the spirit of nvbench's compare, which calls a difference SAME when it
is within the noise and FAST or SLOW beyond it). At each common size, the draws give a percentile
interval of d at the level `confidence` shared over the n sizes (Bonferroni: each size's interval is
at 1 - (1 - confidence) / n, so that equal arms are called equal at every size with about the
stated confidence, not at each size alone). A size is labelled

    B   the interval lies above 0: B faster beyond the noise;
    A   it lies below 0: A faster beyond the noise;
    =   it holds 0: within the noise (SAME or ambiguous; no winner is claimed there).

Reading the labels from the smallest size up, sizes marked = are skipped, and the answer is:

    within noise            every size is =: "within noise over the measured range";
    B faster everywhere     B wins at every size with a winner (= sizes are counted in the answer);
    none in measured range  A wins at every size with a winner;
    crossover               the winner changes once: the first and the last winners beyond the noise
                            differ, and a change of winner is only claimed between two such sizes. The
                            point is where d turns sign (first turn in that direction) between the last
                            size the first winner holds and the first size the second one does,
                            interpolated in log-log space: where the straight line through the two
                            log-log points meets d = 0. A sign change of d at = sizes elsewhere is noise
                            and is not reported;
    several crossings       the winner changes more than once; each change is placed as above and listed.

`crossings` lists the measured changes of winner, `n_within_noise` counts the sizes marked =, and
`faster_below` / `faster_above` name the first and the last winner (none where all is within noise).
`speedup` is tA / tB at the largest common size (how many times faster B is there; < 1 where A is
faster), and `speedup_low` / `speedup_high` its percentile interval over the draws at `confidence`.

Every draw is read the same way. A draw is judged as a repeat measurement with the measurement's
noise: its interval at each size is the measured interval moved to the draw's value of d. Each draw
so gets one of the kinds in `DRAW_KINDS` (the verdicts above, a crossover split by which side is
faster above it), `verdict_shares` holds the share of draws of each kind (they sum to 1) and
`draws_agree` the share of the measured verdict's kind: how often a repeat would answer the same,
not the chance that the answer is right (equal arms, 9 sizes, 1% noise: "within noise" in 39 of 40
plantings, but only 57% of draws agree on average, as a repeat often finds one size beyond the noise).

For a crossover, every draw places it: at the draw's first change of winner towards the side faster
above the measured crossover (placed as above; in a draw with several crossings, its first crossing
in the measured direction). A draw without such a change counts at -inf (below the range) where the
side faster above already wins at its smallest size with a winner (B everywhere, for a crossover
towards B), at +inf (above the range) otherwise (A everywhere). Draws within noise place nothing:
the interval is the percentile interval (at `confidence` itself) over the other draws, and the
answer states their share. The answer lists the share of every kind of draw where the measured kind
has under 95% of them. Open bounds are stored as -inf and +inf, and shown as
"<x_min (outside the measured range)" and ">x_max (outside the measured range)".

Three metrics:
    epoch_s               median time per timed epoch, of all the runs' epochs pooled;
    time_to_target_loss_s time until the training loss first reaches the lowest loss both arms reached
                          at that size (from each row's per-epoch `loss_curve`): h2d_s + warmup_s + the
                          timed epochs up to that one, at the pooled mean epoch time. Rows without a
                          loss curve (written before the column existed) give no line for it;
    time_to_final_loss_s  time to the training loss after the epochs both arms timed (arms time
                          different counts: trainables/timing.py): h2d_s + warmup_s + that many epochs
                          at the pooled mean epoch time. Both arms train the same model from the same
                          seed on the same data order, so they hold the same loss there; a point counts
                          only where those losses agree within `loss_rtol`. Rows without loss curves:
                          each arm's final loss after its own timed epochs.
A draw recomputes each from its runs (their fixed costs and epoch counts) and resampled epochs.

The fixed costs (h2d_s + warmup_s) of a worker process's first trial are inflated (imports, CUDA
context, allocator growth: `cold_start`, and crossover.analysis.load.cold_starts for rows written before it).
Where a size's runs hold warm ones, their fixed costs are the warm runs' alone (drawn among them);
where every run is cold they are kept, and the line's note names the sizes and arms.

The rows timed are chosen once, before: `select` (analysis/selection.py) sets aside rows flagged
`outside_load` where a quiet row of the same configuration and arm exists, and gives the `Selected`
that `find` and `render` read.

Reads rows only (numpy, pandas); never imports torch or ray.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from crossover.schema import CONFIG_COLUMNS, CROSSOVER_AXES, SIZE_AXES

from .load import cold_starts
from .selection import RUN_LENGTH, Selected

METRICS = ["epoch_s", "time_to_final_loss_s", "time_to_target_loss_s"]

CROSSOVER, B_EVERYWHERE, A_EVERYWHERE, SEVERAL, WITHIN_NOISE, NOT_COMPUTABLE = (
    "crossover", "B faster everywhere", "none in measured range", "several crossings", "within noise",
    "not computable")
# What a draw (or the measurement) can say; a crossover is split by the side faster above it
TO_B, TO_A = f"{CROSSOVER}, B faster above", f"{CROSSOVER}, A faster above"
DRAW_KINDS = (TO_B, TO_A, B_EVERYWHERE, A_EVERYWHERE, SEVERAL, WITHIN_NOISE)
SHOW_SHARES_BELOW = 0.95  # the answer lists every kind's share of draws where the measured one has less


@dataclass(frozen=True)
class Bootstrap:
    draws: int = 1000  # resamples of every size's runs, then of each drawn run's epoch times
    confidence: float = 0.95  # two-sided, e.g. 0.95 -> 2.5th to 97.5th percentile; shared over the sizes
    seed: int = 0  # numpy Generator seed; each slice derives its own stream from it and the slice's key
    loss_rtol: float = 0.02  # time_to_final_loss_s: final train losses of A and B within this relative gap


BOOT = Bootstrap()  # the default resampling: one frozen value, shared as a default argument


def held_fixed(axis: str) -> list[str]:
    """Configuration columns held fixed while `axis` varies (device compared, seeds are runs, the run's
    length free)."""
    varied = {"device", "seed", axis} | RUN_LENGTH | ({"depth", "width"} if axis == "n_params" else set())
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


def baseline_first(rows: pd.DataFrame) -> list[str]:
    """The arms of `rows` in comparison order: the CPU ones (`is_cpu`) first, so that A is the CPU and B
    the accelerator."""
    cpu = rows.groupby("arm", sort=False)["is_cpu"].first()
    return sorted(cpu.index, key=lambda arm: (not cpu[arm], str(arm)))



def find(selected: Selected, boot: Bootstrap = BOOT) -> pd.DataFrame:
    """The tidy crossover table of `selected`'s timed rows: one line per workload, axis, slice, pair of
    arms and metric."""
    # cold: over all rows (a directory's trials), then the timed ones kept
    rows = selected.rows.assign(_cold=cold_starts(selected.rows))[selected.kept]
    lines = []
    for axis in CROSSOVER_AXES:
        for workload, label, group in slices(rows, axis):
            rng = np.random.default_rng([boot.seed, zlib.crc32(f"{workload}|{axis}|{label}".encode())])
            points = {arm: _points(arm, g, axis, rng, boot.draws) for arm, g in group.groupby("arm")}
            cpu = group.groupby("arm")["is_cpu"].first()
            for a, b in itertools.combinations(baseline_first(group), 2):
                for metric in METRICS:
                    line = _compare(points[a], points[b], metric, boot)
                    if line:
                        lines.append({"workload": workload, "axis": axis, "held_fixed": label,
                                      "device_a": a, "device_b": b, "is_cpu_a": cpu[a], "is_cpu_b": cpu[b],
                                      "metric": metric, **line})
    table = pd.DataFrame(lines, columns=COLUMNS)
    return table.assign(answer=[answer(line) for line in table.itertuples()])


# device_a / device_b: the arms (analysis/load.py); is_cpu_a / is_cpu_b: whether each is a 'cpu' arm, the
# CPU-against-GPU lines the verdict and the search read.
COLUMNS = ["workload", "axis", "held_fixed", "device_a", "device_b", "is_cpu_a", "is_cpu_b", "metric", "n_points",
           "x_min", "x_max", "verdict", "faster_below", "faster_above", "crossover", "ci_low", "ci_high", "speedup",
           "speedup_low", "speedup_high", "draws_agree",
           "verdict_shares", "n_within_noise", "crossings", "note"]


@dataclass
class _Points:
    """One arm of one slice, per size: the statistic measured and its bootstrap draws."""
    arm: str
    x: np.ndarray  # sizes, ascending
    epoch: np.ndarray  # median epoch time, s
    epoch_draws: np.ndarray  # (draws, sizes)
    to_loss: np.ndarray  # time to the final loss, s
    to_loss_draws: np.ndarray  # (draws, sizes)
    loss: np.ndarray  # final train loss (mean over runs)
    fixed: np.ndarray  # h2d_s + warmup_s (mean over runs), s
    fixed_draws: np.ndarray  # (draws, sizes)
    epoch_mean: np.ndarray  # mean timed epoch, s
    epoch_mean_draws: np.ndarray  # (draws, sizes)
    curves: list  # per size, the loss per timed epoch (mean over runs), or None where a row has none
    cold_only: np.ndarray  # per size, whether every run was its worker's first (fixed costs inflated)


def _resample(runs: list[np.ndarray], rng: np.random.Generator, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Two-level bootstrap of one size's runs: (draws, runs) the runs drawn with replacement, and
    (draws, runs x longest run) the epochs of each drawn run resampled within it, NaN past its length."""
    lengths = np.array([len(r) for r in runs])
    longest = lengths.max()
    padded = np.full((len(runs), longest), np.nan)
    for i, run in enumerate(runs):
        padded[i, :len(run)] = run
    picked = rng.integers(0, len(runs), size=(draws, len(runs)))
    n = lengths[picked][..., None]  # (draws, runs, 1): the drawn run's epoch count
    within = (rng.random((draws, len(runs), longest)) * n).astype(int)  # uniform in [0, n) per slot
    epochs = np.where(np.arange(longest) < n, padded[picked[..., None], within], np.nan)
    return picked, epochs.reshape(draws, -1)


def _points(arm: str, group: pd.DataFrame, axis: str, rng: np.random.Generator, draws: int) -> _Points:
    x, curves, cold_only = [], [], []
    cols: dict[str, list] = {k: [] for k in ("epoch", "epoch_draws", "to_loss", "to_loss_draws", "loss", "fixed", "fixed_draws",
                            "epoch_mean", "epoch_mean_draws")}
    for size, at in group.groupby(axis, sort=True):
        runs = [np.asarray(e, dtype=float) for e in at["epoch_s"]]
        pool = np.concatenate(runs)
        picked, resampled = _resample(runs, rng, draws)
        ragged = np.isnan(resampled).any()  # runs of different lengths: nan-aware (and slower) statistics
        # time to the final loss: fixed costs + as many epochs as were timed, at the pooled mean
        fixed, fixed_draws = _fixed(at, picked, rng)
        timed = np.array([len(r) for r in runs], float)
        mean_draws = np.nanmean(resampled, axis=1)
        x.append(size)
        cold_only.append(at["_cold"].all())
        cols["epoch"].append(np.median(pool))
        cols["epoch_draws"].append(np.nanmedian(resampled, axis=1) if ragged else np.median(resampled, axis=1))
        cols["to_loss"].append(fixed + timed.mean() * pool.mean())
        cols["to_loss_draws"].append(fixed_draws + timed[picked].mean(axis=1) * mean_draws)
        cols["loss"].append(at["train_loss"].mean())
        cols["fixed"].append(fixed)
        cols["fixed_draws"].append(fixed_draws)
        cols["epoch_mean"].append(pool.mean())
        cols["epoch_mean_draws"].append(mean_draws)
        # the runs' mean loss per epoch, over the epochs every run timed (runs time different counts)
        known = [np.asarray(c, dtype=float) for c in at["loss_curve"] if c is not None and len(c)]
        shortest = min((len(c) for c in known), default=0)
        curves.append(np.mean([c[:shortest] for c in known], axis=0) if len(known) == len(at) else None)
    arrays = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    return _Points(arm, np.asarray(x, dtype=float), curves=curves, cold_only=np.asarray(cold_only, dtype=bool),
                   **{k: (v.T if k.endswith("draws") else v) for k, v in arrays.items()})


def _fixed(at: pd.DataFrame, picked: np.ndarray, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """One size's fixed costs (h2d_s + warmup_s, mean over runs) and their draws: of the runs each draw
    picked, or, where warm and cold runs are mixed, of the warm runs alone, drawn among themselves."""
    fixed, cold = (at["h2d_s"] + at["warmup_s"]).to_numpy(float), at["_cold"].to_numpy(bool)
    if cold.all() or not cold.any():
        return fixed.mean(), fixed[picked].mean(axis=1)
    warm = fixed[~cold]
    return warm.mean(), warm[rng.integers(0, len(warm), size=(len(picked), len(warm)))].mean(axis=1)


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
                     pts.fixed_draws[:, idx] + epochs * pts.epoch_mean_draws[:, idx])
    return out


def _to_common_epoch(a: _Points, b: _Points, ia: np.ndarray, ib: np.ndarray):
    """Per common size, for each arm: its loss after the epochs both arms timed, and its time (and
    draws) to that epoch; None without curves. The arms train the same model from the same seed on the
    same data order, so after the same epochs they hold the same loss (checked by the caller)."""
    if any(a.curves[i] is None for i in ia) or any(b.curves[i] is None for i in ib):
        return None
    epochs = np.array([min(len(a.curves[i]), len(b.curves[j])) for i, j in zip(ia, ib)])
    return tuple((np.array([pts.curves[i][n - 1] for i, n in zip(idx, epochs)]),
                  pts.fixed[idx] + epochs * pts.epoch_mean[idx],
                  pts.fixed_draws[:, idx] + epochs * pts.epoch_mean_draws[:, idx]) for pts, idx in ((a, ia), (b, ib)))


def _compare(a: _Points, b: _Points, metric: str, boot: Bootstrap) -> dict | None:
    common = np.intersect1d(a.x, b.x)
    if len(common) < 2:
        return None
    ia, ib = np.searchsorted(a.x, common), np.searchsorted(b.x, common)
    note = ""
    if metric != "epoch_s":
        note = _cold_note(common, a, b, ia, ib)
    if metric == "time_to_final_loss_s":
        common_epochs = _to_common_epoch(a, b, ia, ib)
        if common_epochs is None:  # rows without loss curves: each arm's final loss after its own epochs
            (la, ta_all, ta_draws_all), (lb, tb_all, tb_draws_all) = (
                (pts.loss[idx], pts.to_loss[idx], pts.to_loss_draws[:, idx]) for pts, idx in ((a, ia), (b, ib)))
        else:
            (la, ta_all, ta_draws_all), (lb, tb_all, tb_draws_all) = common_epochs
        same = np.abs(la - lb) <= boot.loss_rtol * np.maximum(np.abs(la), np.abs(lb))
        if not same.all():
            dropped = (f"{(~same).sum()} of {len(same)} sizes dropped: the train loss after the epochs both timed "
                       f"differs by more than {boot.loss_rtol:.0%} between the arms, so they did not reach the same "
                       "target")
            note = "; ".join(filter(None, [dropped, _cold_note(common[same], a, b, ia[same], ib[same])]))
        common, ia, ib = common[same], ia[same], ib[same]
        if len(common) < 2:
            return {"n_points": len(common), "verdict": NOT_COMPUTABLE, "crossings": [], "verdict_shares": None,
                    "note": note}
        ta, ta_draws, tb, tb_draws = ta_all[same], ta_draws_all[:, same], tb_all[same], tb_draws_all[:, same]
    elif metric == "time_to_target_loss_s":
        times = _to_target(a, b, ia, ib)
        if times is None:
            return None
        (ta, ta_draws), (tb, tb_draws) = times["a"], times["b"]
    else:  # epoch_s
        ta, ta_draws, tb, tb_draws = a.epoch[ia], a.epoch_draws[:, ia], b.epoch[ib], b.epoch_draws[:, ib]
    # log(tA / tB) > 0 where B is faster
    return {**_verdict(np.log(common), np.log(ta / tb), np.log(ta_draws / tb_draws), boot.confidence),
            "note": note, "n_points": len(common), "x_min": common[0], "x_max": common[-1]}


def _cold_note(x: np.ndarray, a: _Points, b: _Points, ia: np.ndarray, ib: np.ndarray) -> str:
    """The sizes `x` whose fixed costs come from cold rows only, and on which arm, in words."""
    where = [f"{v:.3g} ({' and '.join(p.arm for p, cold in ((a, ca), (b, cb)) if cold)})"
             for v, ca, cb in zip(x, a.cold_only[ia], b.cold_only[ib]) if ca or cb]
    if not where:
        return ""
    return (f"fixed costs from cold rows only (a worker's first trial: imports, CUDA context, allocator growth) "
            f"at {', '.join(where)}")


def _verdict(logx: np.ndarray, measured: np.ndarray, drawn: np.ndarray, confidence: float) -> dict:
    """The line's verdict, crossover and interval from d = log(tA/tB): measured (sizes,), drawn (draws, sizes)."""
    tail = (1 - confidence) / (2 * len(logx))  # each size's interval at 1 - (1 - confidence) / n
    low, high = np.quantile(drawn, [tail, 1 - tail], axis=0)
    # a curve is judged with the measured noise: the measured interval, moved to the curve's own d
    below, above = np.maximum(measured - low, 0), np.maximum(high - measured, 0)
    curves = np.vstack([measured, drawn])  # row 0 is the measurement, the rest the draws
    labels = np.where(curves - below > 0, 1, np.where(curves + above < 0, -1, 0))
    last, changes = _winners(labels)
    kinds = _kinds(labels, last, changes)
    shares = {kind: float(np.mean(kinds[1:] == kind)) for kind in DRAW_KINDS}
    kind = kinds[0]
    side = {1: "B", -1: "A"}
    winners = labels[0][labels[0] != 0]
    out = {"verdict": CROSSOVER if kind.startswith(CROSSOVER) else kind, "draws_agree": shares[kind],
           "verdict_shares": shares, "n_within_noise": int((labels[0] == 0).sum()),
           "faster_below": side[winners[0]] if len(winners) else None,
           "faster_above": side[winners[-1]] if len(winners) else None,
           "crossings": [float(np.exp(_at_change(logx, curves[:1], labels[:1], last[:1], one[None])[0]))
                         for one in np.eye(len(logx), dtype=bool)[changes[0]]],
           "crossover": np.nan, "ci_low": np.nan, "ci_high": np.nan, **_speedup(measured[-1], drawn[:, -1], confidence)}
    if out["verdict"] == CROSSOVER:
        to = winners[-1]
        event = changes & (labels == to)  # a change of winner towards the side faster above
        first = labels[np.arange(len(labels)), (labels != 0).argmax(axis=1)]  # winner at the first size with one
        placed = np.where(event.any(axis=1), _at_change(logx, curves, labels, last, event),
                          np.where(first == to, -np.inf, np.where(first == -to, np.inf, np.nan)))
        drawn_at = placed[1:][~np.isnan(placed[1:])]  # draws within noise place nothing; their share is stated
        tails = [(1 - confidence) / 2, 1 - (1 - confidence) / 2]
        lo, hi = np.quantile(drawn_at, tails, method="inverted_cdf") if len(drawn_at) else (np.nan, np.nan)
        out.update(crossover=float(np.exp(placed[0])), ci_low=_unlog(lo), ci_high=_unlog(hi))
    return out


def _speedup(measured: float, drawn: np.ndarray, confidence: float) -> dict:
    """How much faster B is than A at the largest common size (tA / tB, < 1 where A is faster), and its
    percentile interval at `confidence` (one size: no correction for the others)."""
    tails = [(1 - confidence) / 2, 1 - (1 - confidence) / 2]
    low, high = np.exp(np.quantile(drawn, tails))
    return {"speedup": float(np.exp(measured)), "speedup_low": float(low), "speedup_high": float(high)}


def _unlog(value: float) -> float:
    """exp, but an open bound stays -inf or +inf (exp(-inf) = 0 would read as a size)."""
    return float(value) if np.isinf(value) else float(np.exp(value))


def _winners(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per curve and size: the index of the last size at or before it with a winner (-1 if none), and
    whether the winner at this size differs from the last one before it (a change of winner)."""
    n = labels.shape[1]
    last = np.maximum.accumulate(np.where(labels != 0, np.arange(n), -1), axis=1)
    held = np.where(last >= 0, np.take_along_axis(labels, np.maximum(last, 0), axis=1), 0)
    before = np.pad(held[:, :-1], ((0, 0), (1, 0)))
    return last, (labels != 0) & (before != 0) & (labels != before)


def _kinds(labels: np.ndarray, last: np.ndarray, changes: np.ndarray) -> np.ndarray:
    """Per curve, its kind among DRAW_KINDS."""
    n = changes.sum(axis=1)
    final = np.take_along_axis(labels, np.maximum(last[:, -1:], 0), axis=1)[:, 0]  # the last winner
    return np.select([last[:, -1] < 0, n > 1, (n == 0) & (final > 0), n == 0, final > 0],
                     [WITHIN_NOISE, SEVERAL, B_EVERYWHERE, A_EVERYWHERE, TO_B], TO_A)


def _at_change(logx: np.ndarray, logr: np.ndarray, labels: np.ndarray, last: np.ndarray,
               event: np.ndarray) -> np.ndarray:
    """Per curve, log x of the change of winner at its first `event` size k: where d first turns towards
    the new winner between j, the last size before k with a winner, and k. NaN for curves without an event."""
    rows, n = np.arange(len(logr)), logr.shape[1]
    k = event.argmax(axis=1)
    j = last[rows, np.maximum(k - 1, 0)][:, None]
    to = labels[rows, k][:, None]
    sign = np.where(logr > 0, 1, -1)
    m = np.arange(n - 1)
    # d at j has the old winner's sign and at k the new one's, so a turn lies in [j, k)
    turns = (sign[:, :-1] == -to) & (sign[:, 1:] == to) & (m >= j) & (m < k[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):  # curves without an event: their value is dropped
        return np.where(event.any(axis=1), interpolate(logx, logr, turns.argmax(axis=1)), np.nan)


def interpolate(logx: np.ndarray, logr: np.ndarray, i: np.ndarray) -> np.ndarray:
    """log x where the line through (logx[i], logr[:, i]) and (logx[i+1], logr[:, i+1]) meets zero, per row."""
    rows = np.arange(len(i))
    lo, hi = logr[rows, i], logr[rows, i + 1]
    return logx[i] - lo * (logx[i + 1] - logx[i]) / (hi - lo)


def answer(line) -> str:
    """The line in words: 'cuda faster past n_params ~ 1.2e+05 (CI 9.8e+04 to 1.5e+05; 99% of draws agree)'."""
    name = {"A": line.device_a, "B": line.device_b}
    if line.verdict == NOT_COMPUTABLE:
        return f"not computable: {line.note}"
    draws = _draws(line)
    noisy = f", except {line.n_within_noise:.0f} of {line.n_points} within noise" if line.n_within_noise else ""
    if line.verdict == CROSSOVER:
        ci = f"{_bound(line.ci_low, line.x_min, '<')} to {_bound(line.ci_high, line.x_max, '>')}"
        placed = 1 - line.verdict_shares[WITHIN_NOISE]
        over = f" over the {placed:.1%} of draws not within noise" if placed < 1 else ""
        return f"{name[line.faster_above]} faster past {line.axis} ~ {line.crossover:.3g} (CI {ci}{over}; {draws})"
    if line.verdict == B_EVERYWHERE:
        return f"{line.device_b} faster at {_every(line)}{noisy} ({draws})"
    if line.verdict == A_EVERYWHERE:
        return f"no crossover in the measured range: {line.device_a} faster at {_every(line)}{noisy} ({draws})"
    if line.verdict == SEVERAL:
        return f"several crossings, at {line.axis} ~ " + ", ".join(f"{c:.3g}" for c in line.crossings) + f" ({draws})"
    return (f"within noise over the measured range: neither {line.device_a} nor {line.device_b} faster beyond "
            f"the noise at any of {line.n_points} sizes ({draws})")


def _every(line) -> str:
    """'every size', or where one size was measured 'the one size measured (x 256)': a claim no wider than the data."""
    return "every size" if line.n_points > 1 else f"the one size measured ({line.axis} {line.x_max:.3g})"


def _draws(line) -> str:
    """'97% of draws agree', or every kind's share of draws where the measured kind has under 95% of them."""
    if line.draws_agree >= SHOW_SHARES_BELOW:
        return f"{line.draws_agree:.0%} of draws agree"
    words = {TO_B: f"crossover with {line.device_b} faster above", TO_A: f"crossover with {line.device_a} faster above",
             B_EVERYWHERE: f"{line.device_b} faster everywhere", A_EVERYWHERE: f"{line.device_a} faster everywhere"}
    shares = sorted(line.verdict_shares.items(), key=lambda kv: -kv[1])
    return "draws: " + ", ".join(f"{share:.0%} {words.get(kind, kind)}" for kind, share in shares if share > 0)


def _bound(value: float, edge: float, sign: str) -> str:
    """An interval bound; an open one (-inf, +inf) as the edge of the measured range it lies beyond."""
    return f"{sign}{edge:.3g} (outside the measured range)" if np.isinf(value) else f"{value:.3g}"


def render(table: pd.DataFrame, selected: Selected | None = None) -> str:
    """The table as text, one block per workload, and what `selected` left out of the rows `find` read:
    what `python -m crossover.analysis report` prints."""
    dropped = selected.left_out if selected is not None else ""
    if table.empty:
        kept = None if selected is None else selected.timed
        arms = sorted(kept.loc[kept["status"] == "ok", "arm"].unique()) if kept is not None else []
        nothing = (f"no crossover to compute: no two arms measured at the same sizes "
                   f"(arms: {', '.join(arms) or 'none'}); sweep a second device, or read a second results "
                   "directory alongside")
        return "\n".join(filter(None, [nothing, dropped]))
    parts = []
    for workload, group in table.groupby("workload", sort=True):
        parts.append(f"== {workload} ==")
        shown = group[["axis", "held_fixed", "device_a", "device_b", "metric", "n_points", "answer"]]
        parts.append(shown.to_string(index=False))
        noted = (group["note"].fillna("") != "") & (group["verdict"] != NOT_COMPUTABLE)  # that answer is its note
        notes = group.loc[noted, ["axis", "device_a", "device_b", "metric", "note"]]
        parts += [f"  note ({n.axis}, {n.device_a} vs {n.device_b}, {n.metric}): {n.note}" for n in notes.itertuples()]
    return "\n".join(parts + ([dropped] if dropped else []))


def write(table: pd.DataFrame, path: Path) -> Path:
    """The table as Parquet (crossings as a list column)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(path, index=False)
    return path

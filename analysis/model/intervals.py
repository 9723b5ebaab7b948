"""Split-conformal intervals: the quantile of held-out log errors (`conformal_q`), and the held-out residuals
they are drawn from, by device and by model (`held_out`, `scores`).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from .counts import MODEL, PER_CLASS, as_counted, with_model
from .device_table import Device, MATCH_KEY
from .perclass import fit

ALPHA = 0.1  # the intervals are (1 - ALPHA) = 90% conformal intervals


def conformal_q(scores, alpha: float = ALPHA) -> float:
    """The conformal quantile of |scores|: the ceil((n+1)(1-alpha))-th smallest (inf where that is past n,
    too few scores for the level; NaN with none)."""
    s = np.sort(np.abs(np.asarray(scores, float)[~np.isnan(np.asarray(scores, float))]))
    if not len(s):
        return float("nan")
    k = math.ceil((len(s) + 1) * (1 - alpha))
    return float(s[k - 1]) if k <= len(s) else float("inf")


def held_out(frame: pd.DataFrame, devices: dict[str, Device] | None, form: str, by: str,
             costs: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> pd.Series:
    """log(measured / predicted) of each row's step time, predicted by a fit on the rows of the other
    values of `by` (a device key, a workload), from the held rows' own step costs or from `costs(held)`'s
    (`as_counted`: the CPU's count; a row it leaves out stays NaN); NaN where no other value has rows."""
    out, whole = pd.Series(np.nan, index=frame.index), None
    for _, held in frame.groupby(by):
        rest = frame.drop(index=held.index)
        held = costs(held) if costs else held
        if len(rest) and len(held):
            if whole is None:  # each held-out fit starts from the whole's (`fit`)
                whole = fit(frame, devices, form)
            out[held.index] = np.log(held["step_s"].to_numpy(float)
                                     / fit(rest, devices, form, start=whole).step_s(held, devices))
    return out


def scores(frame: pd.DataFrame, devices: dict[str, Device] | None, form: str) -> dict[str, pd.Series]:
    """The held-out residuals intervals are drawn from: leave-one-device-out where two or more GPUs have
    rows ('device'), leave-one-model-out (`with_model`) where two or more models do ('workload')."""
    out, frame = {}, with_model(frame)
    if devices is not None and frame[MATCH_KEY].nunique() > 1:
        out["device"] = held_out(frame, devices, form, MATCH_KEY)
    if frame[MODEL].nunique() > 1:
        # a workload no GPU measured is predicted from its CPU count (sweeps/count_step.py): its interval is
        # drawn from held-out models predicted so, where the reference configurations were counted so
        counted = held_out(frame, devices, form, MODEL, as_counted) if form == PER_CLASS else pd.Series()
        out["workload"] = counted.dropna() if counted.notna().any() else held_out(frame, devices, form, MODEL)
    return out

"""Leave one family of models out: the model's error on a kind of network it was never fitted on, per precision.

    python -m crossover.analysis model --validate     # prints this table and its targets after the others

A row's family is read from its model's shape and its counted step (`family`), never from its workload's
name: `CNN` (two convolution layers or more), `vision transformer` (one: a patch embedding), `recurrent` (no
convolution layer, and work in the rnn class: cuDNN's recurrent nets, trainables/costs.py), `MLP or
transformer` (fully connected layers alone: the step's count does not tell attention's matrix products from
an MLP's). Each family in turn is held out of the fit (analysis/model/ `fit`, on every other GPU row and
the public tables' rows, as `shipped` fits) and predicted from its step counted on a laptop (`as_counted`):
per (family, model, GPU, precision) the median and worst |predicted / measured - 1| of step time, and how
many rows fell inside the 90% conformal interval drawn from the rest's own leave-one-family-out residuals.
Reads rows only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from . import model, roofline

FAMILIES = ("CNN", "vision transformer", "recurrent", "MLP or transformer")
FAMILY = "_family"
TARGETS: dict[str, Any] = {"median": 0.15, "worst": 0.35, "coverage": (0.85, 0.95)}


def family(rows: pd.DataFrame) -> pd.Series:
    """Each row's family (module docstring), from `model` ("conv 64-64-...; fc 2048-1000") and its counted step."""
    shape = rows["model"].fillna("")
    convs = shape.str.extract(r"conv ([\d-]+)")[0].fillna("").map(lambda s: len(s.split("-")) if s else 0)
    rnn = rows["rnn_flops_per_step"].fillna(0).gt(0)
    return pd.Series(np.select([convs >= 2, convs == 1, rnn], FAMILIES[:3], FAMILIES[3]), index=rows.index)


def _predicted(rest: pd.DataFrame, held: pd.DataFrame, devices) -> np.ndarray:
    """Step times of `held` by the fit on `rest`, never under the hardware's floor (analysis/roofline.py)."""
    step = model.fit(rest, devices).step_s(held, devices)
    floor = pd.Series(np.nan, index=held.index)
    for key, on in held.groupby(model.MATCH_KEY):  # one floor a GPU, over its rows together
        floor[on.index] = roofline.floor_s(on, devices[key])
    return np.maximum(step, floor.to_numpy())


def _residuals(frame: pd.DataFrame, devices) -> pd.Series:
    """log(measured / predicted) of each row, its family held out of the fit and its step as counted on a laptop."""
    out = pd.Series(np.nan, index=frame.index)
    for _, held in frame.groupby(FAMILY):
        counted = model.as_counted(held)
        if len(counted) and len(frame) > len(held):
            out[counted.index] = np.log(counted["step_s"].to_numpy() / _predicted(frame.drop(index=held.index),
                                                                                  counted, devices))
    return out


def validate(rows: pd.DataFrame, path=model.DEVICES) -> pd.DataFrame:
    """Per (family held out, model, GPU, precision): rows, median and worst error, rows inside the 90% interval
    (module docstring). The public tables' rows stay in every fit; they are held out by GPU elsewhere."""
    devices = model.load_devices(path)
    gpus = model.gpu_rows(rows, devices)
    gpus = model.with_model(gpus[model.form_of(gpus) == model.PER_CLASS])
    gpus = gpus.assign(**{FAMILY: family(gpus)})
    public = model.public_rows(devices).assign(**{FAMILY: "public"})
    out = []
    for name, held in gpus.groupby(FAMILY):
        rest = pd.concat([gpus.drop(index=held.index), public], ignore_index=True)
        counted = model.as_counted(held)
        if counted.empty:
            continue
        residual = np.log(counted["step_s"].to_numpy() / _predicted(rest, counted, devices))
        q = model.conformal_q(_residuals(rest[rest[FAMILY] != "public"], devices).dropna())
        cells = counted.assign(error=np.abs(np.exp(-residual) - 1), inside=np.abs(residual) <= q)
        for (m, gpu, precision), cell in cells.groupby([model.MODEL, model.MATCH_KEY, "precision"]):
            out.append({"family": name, "model": m, "gpu": gpu, "precision": precision, "rows": len(cell),
                        "median_error": cell["error"].median(), "worst_error": cell["error"].max(),
                        "inside": int(cell["inside"].sum())})
    return pd.DataFrame(out, columns=["family", "model", "gpu", "precision", "rows", "median_error", "worst_error",
                                      "inside"])


def render(table: pd.DataFrame) -> str:
    """The cells, then per precision the targets (TARGETS) over the cells' median errors and the coverage."""
    if table.empty:
        return "leave one family out: no GPU rows with the per-class columns"
    shown = table.assign(coverage=table["inside"] / table["rows"])
    for c in ("median_error", "worst_error", "coverage"):
        shown[c] = shown[c].map(lambda v: f"{v:.0%}")
    lines = ["== leave one family of models out, each predicted from its step counted on a laptop: |predicted / "
             "measured - 1| of step time; coverage of the 90% interval drawn from the other families ==",
             shown.drop(columns="inside").to_string(index=False),
             "== targets (per precision, over the (model, GPU) cells' median errors; printed, not asserted) =="]
    low, high = TARGETS["coverage"]
    for precision, part in table.groupby("precision"):
        median, worst = part["median_error"].median(), part["median_error"].max()
        share = part["inside"].sum() / part["rows"].sum()
        ok = median <= TARGETS["median"] and worst <= TARGETS["worst"] and low <= share <= high
        lines.append(f"  {precision}: median {median:.0%} (target <= {TARGETS['median']:.0%}), worst {worst:.0%} "
                     f"(target <= {TARGETS['worst']:.0%}), coverage {share:.0%} over {part['rows'].sum()} rows "
                     f"(target {low:.0%}-{high:.0%}) over {len(part)} cells: " + ("met" if ok else "missed"))
        if not ok:
            bad = part.sort_values("median_error", ascending=False).head(3)
            lines.append("    worst: " + "; ".join(f"{r.model} on {r.gpu} {r.median_error:.0%}" for r in bad.itertuples())
                         + ". What would fix it: rows of more models of each family, on more GPUs and hosts (one "
                         "H100 host's plain loop is the only real-sized source), and the host's own cost per op")
    return "\n".join(lines)

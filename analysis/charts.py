"""Altair charts of result rows: each function takes a DataFrame and returns a chart of named layers.

    python -m analysis report results/scaling      # draws them all into the report, each also as HTML + PNG

    epoch_time_vs_size   time per epoch vs size, log-log, a line per arm; the crossover as a rule, its
                         interval as a band (the seeds' central picture)
    speedup_heatmap      speedup of B over A over two axes (depth x width by default)
    epoch_times          every timed epoch per arm (seed 001's "Epoch Times")
    execution_time       mean epoch, test (eval) and total time per arm (seed 001's "Execution Time")
    throughput_vs_batch  training samples per second vs batch size
    cost_per_million     dollars per million training samples per price option, bars (analysis/cost.py)
    sweep_cost           the whole sweep's cost per option, bars, a predicted one's 90% interval as a rule (analysis/decide.py)
    pareto_front         the sweep's cost against its wall time per option, labelled, the front drawn, the
                         intervals of predicted options as rules across (time) and up (cost)
    break_even           cost a month against sweeps a month: each home box against the best of each class

Reads rows only (pandas, altair, vl-convert); never imports torch or ray.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from analysis.crossover import baseline_first, slices
from analysis.decide import monthly, pareto
from analysis.load import config_label, representative

alt.data_transformers.disable_max_rows()  # a results directory is small; charts embed their rows
LOG = alt.Scale(type="log")
ARM = alt.Color("arm:N").title("device")


def _spread(pool: np.ndarray) -> dict:
    q25, median, q75 = np.percentile(pool, [25, 50, 75])
    return {"median": median, "q25": q25, "q75": q75}


def curves(rows: pd.DataFrame, axis: str, value=lambda at: np.concatenate(at["epoch_s"].to_list())) -> pd.DataFrame:
    """Per slice of `axis` (crossover.slices), arm and size: median and quartiles of `value`'s pooled samples."""
    out = [{"workload": w, "panel": f"{w} | {label}", "held_fixed": label, "arm": arm, "x": x, **_spread(value(at))}
           for w, label, group in slices(rows, axis)
           for (arm, x), at in group.groupby(["arm", axis], sort=True)]
    return pd.DataFrame(out, columns=["workload", "panel", "held_fixed", "arm", "x", "median", "q25", "q75"])


def _panels(chart, data: pd.DataFrame, title: str):
    """Facet a layered chart into one panel per workload and slice, each with its own scales."""
    return (alt.layer(*chart, data=data)
            .facet(facet=alt.Facet("panel:N").title(None), columns=3)
            .resolve_scale(x="independent", y="independent")
            .properties(title=title))


def epoch_time_vs_size(rows: pd.DataFrame, table: pd.DataFrame, axis: str = "n_params"):
    """Median time per epoch (IQR shaded) vs `axis` on log axes per arm; crossovers of `table` as rule + band."""
    measured = curves(rows, axis).assign(layer="measured")
    found = table[(table["axis"] == axis) & (table["metric"] == "epoch_s") & (table["verdict"] == "crossover")]
    marks = found.assign(
        layer="crossover", panel=found["workload"] + " | " + found["held_fixed"],
        ci_low=found["ci_low"].clip(lower=found["x_min"]), ci_high=found["ci_high"].clip(upper=found["x_max"]),
    )[["layer", "panel", "crossover", "ci_low", "ci_high", "answer"]]
    data = pd.concat([measured, marks], ignore_index=True)
    is_measured, is_crossover = alt.datum.layer == "measured", alt.datum.layer == "crossover"
    base = alt.Chart().encode(x=alt.X("x:Q").scale(LOG).title(axis))
    band = base.mark_rect(opacity=0.15, color="gray").encode(x="ci_low:Q", x2="ci_high:Q").transform_filter(is_crossover)
    spread = base.mark_area(opacity=0.2).encode(y=alt.Y("q25:Q").scale(LOG), y2="q75:Q", color=ARM).transform_filter(is_measured)
    line = (base.mark_line(point=True)
            .encode(y=alt.Y("median:Q").scale(LOG).title("time per epoch, s (median, IQR shaded)"), color=ARM,
                    tooltip=["arm:N", alt.Tooltip("x:Q", title=axis), alt.Tooltip("median:Q", format=".4g")])
            .transform_filter(is_measured))
    rule = base.mark_rule(strokeDash=[4, 3], color="black").encode(x="crossover:Q", tooltip="answer:N").transform_filter(is_crossover)
    return _panels([band, spread, line, rule], data, f"Time per epoch vs {axis}: crossover (dashed) and its interval (band)")


def speedup_heatmap(rows: pd.DataFrame, workload: str, x: str = "depth", y: str = "width",
                    a: str | None = None, b: str | None = None):
    """tA / tB (median epoch time) over two axes for one workload; > 1 where B is faster."""
    ok = rows[(rows["status"] == "ok") & (rows["workload"] == workload)]
    arms = baseline_first(ok)
    if len(arms) < 2:
        raise ValueError(f"speedup_heatmap: workload {workload!r} was measured on {arms or 'no arm'}; "
                         "it needs two arms (sweep a second device or read a second results directory)")
    a, b = a or arms[0], b or arms[1]
    medians = (ok.groupby([x, y, "arm"])["epoch_s"].apply(lambda e: float(np.median(np.concatenate(e.to_list()))))
               .unstack("arm").dropna(subset=[a, b]).reset_index())
    data = medians.assign(speedup=medians[a] / medians[b])
    base = alt.Chart(data).encode(x=alt.X(f"{x}:O").title(x), y=alt.Y(f"{y}:O").sort("descending").title(y))
    rect = base.mark_rect().encode(
        color=alt.Color("speedup:Q").scale(type="log", scheme="blueorange", domainMid=1).title(f"{a} / {b} time"),
        tooltip=[f"{x}:O", f"{y}:O", alt.Tooltip("speedup:Q", format=".3g")])
    text = base.mark_text().encode(text=alt.Text("speedup:Q", format=".2g"))
    return (rect + text).properties(title=f"{workload}: speedup of {b} over {a} per epoch (> 1: {b} faster)")


def epoch_times(rows: pd.DataFrame):
    """Every timed epoch of one configuration per workload, a line per arm, its median as a rule."""
    shown = representative(rows)
    data = (shown.assign(panel=config_label(shown), seconds=shown["epoch_s"])
            .explode("seconds")[["panel", "arm", "seconds", "warmup_epochs"]]
            .astype({"seconds": float}))
    data["epoch"] = data.groupby(["panel", "arm"]).cumcount() + data["warmup_epochs"] + 1
    base = alt.Chart().encode(color=ARM)
    line = base.mark_line(point=True).encode(x=alt.X("epoch:Q").axis(tickMinStep=1).title("epoch (after warm-up)"),
                                             y=alt.Y("seconds:Q").title("time, s"), tooltip=["arm:N", "epoch:Q", "seconds:Q"])
    median = base.mark_rule(strokeDash=[4, 3]).encode(y="median(seconds):Q")
    return _panels([line, median], data, "Epoch times (seed 001): every timed epoch, median dashed")


def execution_time(rows: pd.DataFrame):
    """Mean epoch, test (eval_s) and total time per arm, for one configuration per workload."""
    shown = representative(rows)
    shown = shown.assign(panel=config_label(shown), **{"mean epoch": shown["epoch_s"].apply(np.mean),
                                                 "test": shown["eval_s"], "total": shown["total_s"]})
    data = shown.melt(id_vars=["panel", "arm"], value_vars=["mean epoch", "test", "total"], var_name="time", value_name="seconds")
    base = alt.Chart().encode(x=alt.X("time:N").sort(["mean epoch", "test", "total"]).title(None),
                              xOffset="arm:N", y=alt.Y("seconds:Q").title("time, s"))
    bars = base.mark_bar().encode(color=ARM, tooltip=["arm:N", "time:N", alt.Tooltip("seconds:Q", format=".4g")])
    labels = base.mark_text(angle=270, align="left", dx=3, fontSize=9).encode(text=alt.Text("seconds:Q", format=".3g"))
    return _panels([bars, labels], data, "Execution time (seed 001): mean epoch, test and total per device")


def throughput_vs_batch(rows: pd.DataFrame):
    """Training samples per second vs batch size, log-log, per arm (per-epoch quartiles shaded)."""
    per_epoch = lambda at: np.concatenate([size / np.asarray(e) for size, e in zip(at["dataset_size"], at["epoch_s"])])  # noqa: E731
    data = curves(rows, "batch_size", per_epoch)
    base = alt.Chart().encode(x=alt.X("x:Q").scale(LOG).title("batch size"), color=ARM)
    band = base.mark_area(opacity=0.2).encode(y=alt.Y("q25:Q").scale(LOG), y2="q75:Q")
    line = base.mark_line(point=True).encode(y=alt.Y("median:Q").scale(LOG).title("samples / s (median, IQR shaded)"),
                                             tooltip=["arm:N", "x:Q", alt.Tooltip("median:Q", format=".4g")])
    return _panels([band, line], data, "Throughput vs batch size")


def cost_per_million(costs: pd.DataFrame):
    """Dollars per million training samples per option (cost.table's rows), bars from zero, one panel per workload config."""
    data = costs.dropna(subset=["usd_per_million_samples"]).assign(panel=lambda d: d["workload"] + " | " + d["config"])
    base = alt.Chart().encode(y=alt.Y("option:N").sort("x").title(None),
                              x=alt.X("usd_per_million_samples:Q").title("cost per million training samples, US dollars"))
    bars = base.mark_bar().encode(color=alt.Color("pricing:N").title("pricing"),
                                  tooltip=["option:N", "arm:N", "assumption:N", alt.Tooltip("usd_per_million_samples:Q", format=".3g")])
    labels = base.mark_text(align="left", dx=3, fontSize=9).encode(text=alt.Text("usd_per_million_samples:Q", format="$.3g"))
    return (alt.layer(bars, labels, data=data).facet(facet=alt.Facet("panel:N").title(None), columns=2)
            .resolve_scale(y="independent", x="independent").properties(title="Cost per million training samples"))


def _decision_data(options: pd.DataFrame) -> pd.DataFrame:
    share = options["predicted_share"] if "predicted_share" in options else options["predicted"].astype(float)
    label = options["option"] + np.where(share >= 1 - 1e-9, " (predicted)",
                                         np.where(share > 0, " (" + share.map("{:.0%}".format) + " predicted)", ""))
    return options.assign(label=label, front=pareto(options), predicted=options["predicted"].astype(bool),
                          usd_label=np.where(options["predicted"], "~", "") + options["usd"].map("${:,.2f}".format)
                          + " in " + options["wall_h"].map("{:.3g} h".format))


def sweep_cost(options: pd.DataFrame):
    """The sweep's cost per option (decide.table's rows) as bars, each labelled with its cost and wall time;
    predicted options paler."""
    data = _decision_data(options)
    base = alt.Chart(data).encode(y=alt.Y("label:N").sort(alt.EncodingSortField("usd")).title(None),
                                  x=alt.X("usd:Q").title("cost of the whole sweep, US dollars"))
    bars = base.mark_bar().encode(color=alt.Color("kind:N").title("option"),
                                  opacity=alt.Opacity("predicted:N").scale(domain=[False, True], range=[1.0, 0.4]).legend(None),
                                  tooltip=["option:N", "model:N", "basis:N", alt.Tooltip("usd:Q", format="$,.2f"),
                                           alt.Tooltip("wall_h:Q", title="wall time, h", format=".3g")])
    ranges = base.mark_rule(color="black").encode(x="usd_lo:Q", x2="usd_hi:Q").transform_filter(alt.datum.predicted)
    labels = base.mark_text(align="left", dx=3, fontSize=9).encode(text="usd_label:N")
    return (bars + ranges + labels).properties(
        title="What the sweep costs on each option (paler: predicted; black rule: its 90% interval)", width=480)


def pareto_front(options: pd.DataFrame):
    """Cost against wall time of the sweep, one point per option labelled directly (hollow: predicted), the
    cost-versus-time front as a line."""
    data = _decision_data(options)
    base = alt.Chart(data).encode(x=alt.X("wall_h:Q").scale(type="log").title("wall time of the sweep, hours (log)"),
                                  y=alt.Y("usd:Q").scale(type="symlog", constant=0.01).title("cost of the sweep, US dollars (symlog)"),
                                  color=alt.Color("kind:N").title("option"))
    tips = ["option:N", "model:N", "basis:N", alt.Tooltip("usd:Q", format="$,.2f"), alt.Tooltip("wall_h:Q", format=".3g")]
    measured = base.mark_point(filled=True, size=60).encode(tooltip=tips).transform_filter(~alt.datum.predicted)
    predicted = base.mark_point(filled=False, size=60).encode(tooltip=tips).transform_filter(alt.datum.predicted)
    front = base.mark_line(color="black", strokeDash=[4, 3], interpolate="step-after").encode(color=alt.value("black")).transform_filter(alt.datum.front)
    # a predicted option's 90% interval: its wall time across, its cost up and down (one interval, both figures)
    time_range = base.mark_rule(opacity=0.6).encode(x=alt.X("wall_lo_h:Q").scale(type="log"), x2="wall_hi_h:Q"
                                                    ).transform_filter(alt.datum.predicted)
    cost_range = base.mark_rule(opacity=0.6).encode(y=alt.Y("usd_lo:Q").scale(type="symlog", constant=0.01), y2="usd_hi:Q"
                                                    ).transform_filter(alt.datum.predicted)
    labels = base.mark_text(align="left", dx=6, dy=-4, fontSize=9).encode(text="label:N")
    return (front + time_range + cost_range + measured + predicted + labels).properties(
        title="The sweep: cost against time per option (hollow: predicted, its 90% interval as lines; dashed: the front)",
        width=560, height=360)


def break_even(lines: pd.DataFrame, points: pd.DataFrame):
    """Monthly cost against sweeps a month (decide.monthly's lines): each home box against the best option of
    each class, every line labelled at its end, the break-even as a rule; one panel per box."""
    ends = lines.groupby(["box", "option"], sort=False).tail(1)
    rules = points[np.isfinite(points["sweeps_per_month"])].assign(option=lambda d: d["against"] + " (" + d["versus"] + ")")
    x = alt.X("sweeps:Q").scale(type="log").title("sweeps a month (log)")
    y = alt.Y("usd_per_month:Q").scale(type="symlog").title("cost a month, US dollars (symlog)")
    line = alt.Chart().mark_line().encode(x=x, y=y, color=alt.Color("option:N").legend(None),
                                          tooltip=["option:N", alt.Tooltip("sweeps:Q", format=".3g"),
                                                   alt.Tooltip("usd_per_month:Q", format="$,.2f")])
    label = alt.Chart().mark_text(align="left", dx=4, fontSize=9).encode(x=x, y=y, text="option:N", color="option:N")
    rule = alt.Chart().mark_rule(strokeDash=[4, 3]).encode(x="sweeps_per_month:Q", color="option:N",
                                                          tooltip=["option:N", alt.Tooltip("sweeps_per_month:Q", format=".3g")])
    data = pd.concat([lines.assign(layer="line"), ends.assign(layer="end"),
                      rules[["box", "option", "sweeps_per_month"]].assign(layer="rule")], ignore_index=True)
    return (alt.layer(line.transform_filter(alt.datum.layer == "line"), label.transform_filter(alt.datum.layer == "end"),
                      rule.transform_filter(alt.datum.layer == "rule"), data=data)
            .properties(width=420, height=260)
            .facet(facet=alt.Facet("box:N").title(None), columns=2)
            .properties(title="Home box against the best option of each class: cost a month (dashed: break-even)"))


def decision(options: pd.DataFrame, even: pd.DataFrame) -> dict[str, object]:
    """The decision's charts by file name (analysis/decide.py's table and break-even)."""
    drawn = {"sweep_cost": sweep_cost(options), "sweep_front": pareto_front(options)} if len(options) else {}
    return drawn | ({"break_even": break_even(monthly(even), even)} if len(even) else {})


def save(chart, stem: Path) -> list[Path]:
    """The chart as standalone HTML (JavaScript inlined: opens offline) and as PNG, next to each other."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".html"), stem.with_suffix(".png")]
    chart.save(paths[0], inline=True)
    chart.save(paths[1], scale_factor=2)
    return paths


NO_VL_CONVERT = "altair needs vl-convert-python, missing or too old here; pip install vl-convert-python"


def save_all(named: dict[str, object], out: Path) -> tuple[dict[str, Path], str]:
    """Each chart of `named` saved as `save` does, in `out`: their HTML paths by name, and ''; or, where
    they cannot be written, none and the line that says why and the fix ('charts: not written (...)').
    A command that prints an answer first says that line after it, and keeps its answer and exit status."""
    try:
        return {name: save(chart, out / name)[0] for name, chart in named.items()}, ""
    except ImportError:  # altair saves through vl-convert: an install without it, or with an old one
        why = NO_VL_CONVERT
    except OSError as exc:  # a folder that cannot be written, a full disk
        why = f"cannot write {exc.filename or out}: {exc.strerror or exc}; give --out a folder you can write"
    return {}, f"charts: not written ({why})"

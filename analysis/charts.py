"""Altair charts of result rows: each function takes a DataFrame and returns a chart of named layers.

    python -m crossover.analysis report results/scaling      # draws them all into the report, each also as HTML + PNG

    epoch_time_vs_size   time per epoch vs size, log-log, a line per arm; the crossover as a rule, its
                         interval as a band (the seeds' central picture)
    speedup_heatmap      speedup of B over A over two axes (depth x width by default)
    epoch_times          every timed epoch per arm (seed 001's "Epoch Times")
    execution_time       mean epoch, test (eval) and total time per arm (seed 001's "Execution Time")
    throughput_vs_batch  training samples per second vs batch size
    cost_per_million     dollars per million training samples per price option, bars (analysis/cost.py)
    sweep_cost           what was priced (the sweep, or a planned run) per option: a point on a log dollar axis,
                         a predicted one's 90% interval as a rule (analysis/decide/)
    pareto_front         its cost against its wall time per option, log axes ticked in dollars and in s, min,
                         h; the front and the picks labelled, no two labels meeting (`placed`), the rest by
                         tooltip; the intervals of predicted options as rules across (time) and up (cost)
    break_even           cost a month against runs a month: each home box against the best of each class

Reads rows only (pandas, altair, vl-convert); never imports torch or ray.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from .crossings import baseline_first, slices
from .decide import Even, Line, frame, money, monthly, pareto, run_time
from .load import config_label, representative


def _rows(data: pd.DataFrame) -> dict:
    """A chart's rows as Altair writes them (alt.to_values), all of them: handed a DataFrame, Altair's default
    transformer refuses one over 5,000 rows unless its global setting is changed. A results directory is small; the
    charts embed their rows."""
    return alt.to_values(data)


def _styled(chart):
    """The chart with the settings every chart of this module has, carried in its own config rather than an Altair
    theme enabled for the whole process: its axes drop a tick label that would come within 4 px of another (a log
    axis's default labels, 200, 300, 400, otherwise run together into one unreadable number), and a panel given no
    size is Vega-Lite's own 200 px (Altair's default theme, where no other is enabled, would make it 300)."""
    return (chart.configure_axis(labelOverlap="greedy", labelSeparation=4)
            .configure_view(continuousWidth=200, continuousHeight=200))


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
    return _styled(alt.layer(*chart, data=_rows(data))
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
    base = alt.Chart(_rows(data)).encode(x=alt.X(f"{x}:O").title(x), y=alt.Y(f"{y}:O").sort("descending").title(y))
    rect = base.mark_rect().encode(
        color=alt.Color("speedup:Q").scale(type="log", scheme="blueorange", domainMid=1).title(f"{a} / {b} time"),
        tooltip=[f"{x}:O", f"{y}:O", alt.Tooltip("speedup:Q", format=".3g")])
    text = base.mark_text().encode(text=alt.Text("speedup:Q", format=".2g"))
    # a cell as wide as its figure ('0.81') at the text's font, so that neighbours' figures never meet
    return _styled((rect + text).properties(title=f"{workload}: speedup of {b} over {a} per epoch (> 1: {b} faster)",
                                            width=alt.Step(40)))


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
    return _styled(alt.layer(bars, labels, data=_rows(data)).facet(facet=alt.Facet("panel:N").title(None), columns=2)
                   .resolve_scale(y="independent", x="independent").properties(title="Cost per million training samples"))


def _decision_data(options: Sequence[Line], picks: Mapping[str, Line | None]) -> pd.DataFrame:
    """The options as the decision's charts draw them, a field a column: each labelled with its option, what
    share is predicted, its figures (`said`: cost and wall time), whether it is on the front and whether it is
    named (on the front, or one of `picks`: decide.picks')."""
    data = frame(options)
    share = data["predicted_share"].fillna(data["predicted"].astype(float))
    label = data["option"] + np.where(share >= 1 - 1e-9, " (predicted)",
                                      np.where(share > 0, " (" + share.map("{:.0%}".format) + " predicted)", ""))
    front = data["option"].isin([o.option for o in pareto(options)])
    picked = {line.option for line in picks.values() if line is not None}
    return data.assign(label=label, said=[f"{money(o)}, {run_time(o)}" for o in options], front=front,
                       named=front | data["option"].isin(picked))


def _decades(low: float, high: float, steps=(1, 2, 5)) -> list[float]:
    """Tick values from `steps` x 10^k within [low, high]: $0.001, $0.002, $0.005, $0.01, ..."""
    ks = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    return [s * 10.0 ** k for k in ks for s in steps if low <= s * 10.0 ** k <= high]


def _log_domain(values: pd.Series) -> tuple[float, float]:
    """A log axis's ends around the positive `values`, a fifth of a decade beyond either (a zero, an owned
    option's cost where its electricity rounds to nothing, is drawn at the lower end)."""
    positive = values[values > 0]
    low, high = (float(positive.min()), float(positive.max())) if len(positive) else (0.01, 1.0)
    return low / 10 ** 0.2, max(high, low * 10) * 10 ** 0.2


def dollars(values: pd.Series, title: str, room: int) -> tuple[alt.Scale, alt.Axis]:
    """A log scale over the dollars `values` span, with ticks at 1, 2 and 5 of every decade, else 1 and 3,
    else 1, else every other decade: as many as `room` ticks (what the axis's length holds), each written in
    full: '$0.002', '$0.05', '$1', '$20': readable where nearly every option costs under a dollar, which a
    symlog axis leaves without a tick."""
    low, high = _log_domain(values)
    ticks = next((t for t in (_decades(low, high, steps) for steps in ((1, 2, 5), (1, 3), (1,))) if len(t) <= room),
                 _decades(low, high, (1,))[::2])
    return (alt.Scale(type="log", domain=[low, high], nice=False),
            alt.Axis(values=ticks, title=title, labelExpr="'$' + format(datum.value, ',.3~r')"))


# Wall times' ticks, in hours: seconds, minutes, hours and days a reader counts in.
TIMES_H = [s / 3600 for s in (1, 2, 5, 10, 20, 30)] + [m / 60 for m in (1, 2, 5, 10, 20, 30)] + \
          [1, 2, 5, 10, 24, 48, 120, 240, 720, 2400, 7200]


def hours(values: pd.Series, title: str, room: int) -> tuple[alt.Scale, alt.Axis]:
    """A log scale over the hours `values` span, ticked in seconds, minutes or hours as each reads best, as
    many as `room` ticks."""
    low, high = _log_domain(values)
    ticks = [t for t in TIMES_H if low <= t <= high]
    ticks = ticks[::math.ceil(len(ticks) / room)] if ticks else ticks
    said = ("datum.value < 1 / 60 ? format(datum.value * 3600, '~r') + ' s' : datum.value < 1 ? "
            "format(datum.value * 60, '~r') + ' min' : format(datum.value, ',~r') + ' h'")
    return alt.Scale(type="log", domain=[low, high], nice=False), alt.Axis(values=ticks, title=title, labelExpr=said)


def sweep_cost(options: Sequence[Line], picks: Mapping[str, Line | None], priced: str):
    """What `priced` costs on each option (decide.table's rows), cheapest first: a point per option on a log
    dollar axis, a predicted one's 90% interval as a rule; each option's cost and wall time in its axis
    label, so no two labels can meet."""
    data = _decision_data(options, picks)
    data = data.assign(row=data["label"] + "  " + data["said"])
    scale, axis = dollars(pd.concat([data["usd"], data["usd_lo"], data["usd_hi"]]), "cost, US dollars (log)", 420 // 45)
    base = alt.Chart(_rows(data)).encode(y=alt.Y("row:N").sort(field="usd").title(None).axis(labelLimit=520),
                                  x=alt.X("usd:Q").scale(scale).axis(axis))
    tips = ["option:N", "model:N", "basis:N", alt.Tooltip("said:N", title="cost, wall time")]
    ranges = base.mark_rule(color="black").encode(x="usd_lo:Q", x2="usd_hi:Q").transform_filter(alt.datum.predicted)
    points = base.mark_point(filled=True, size=50).encode(
        color=alt.Color("kind:N").title("option").legend(orient="bottom"),
        opacity=alt.Opacity("predicted:N").scale(domain=[False, True], range=[1.0, 0.4]).legend(None), tooltip=tips)
    return _styled((ranges + points).properties(
        title=alt.Title(f"What {priced} costs on each option", subtitle="paler: predicted, its 90% interval as a black rule"),
        width=420))


PLOT = (560, 360)  # the front chart's plot, in pixels: where its labels go is worked out in them
FONT = 10  # its labels' font size, pixels
CHAR_PX, LINE_PX = 6.2, 13  # a label's width per character and its height at FONT, with a margin


def _px(value: float, ends: tuple[float, float], size: float) -> float:
    """Where `value` lies along a log axis of `size` pixels from ends[0] to ends[1]."""
    return size * (math.log(value) - math.log(ends[0])) / (math.log(ends[1]) - math.log(ends[0]))


def _meeting(boxes: list[tuple], left: float, top: float, width: float) -> list[tuple]:
    """The boxes (left, top, right, bottom) that a label of `width` at (left, top) would cover."""
    return [b for b in boxes if b[0] < left + width and left < b[2] and b[1] < top + LINE_PX and top < b[3]]


def placed(data: pd.DataFrame, x: tuple[float, float], y: tuple[float, float], plot: tuple[int, int] = PLOT) -> pd.DataFrame:
    """A label for each named option (data's `named`) where no two meet: each starts beside its point, on
    the right (on the left where it would leave the plot), and moves down, or else up, past the labels
    already placed that it would cover. Returns label_y (in the data's units), side ('right', 'left') and
    the label's box in pixels (left, top, right, bottom), by the option's index."""
    width, height = plot
    boxes: list[tuple[float, float, float, float]] = []
    out = []
    named = data[data["named"]].assign(_x=lambda d: d["wall_h"].clip(lower=x[0]), _y=lambda d: d["usd"].clip(lower=y[0]))
    for i, o in named.sort_values("_y", ascending=False).iterrows():
        at, top = _px(o["_x"], x, width), height - _px(o["_y"], y, height) - LINE_PX / 2
        w = CHAR_PX * len(o["label"])
        side = "right" if at + 8 + w <= width or at - 8 - w < 0 else "left"
        left = at + 8 if side == "right" else at - 8 - w
        down = up = top
        while meets := _meeting(boxes, left, down, w):
            down = max(b[3] for b in meets)
        while meets := _meeting(boxes, left, up, w):
            up = min(b[1] for b in meets) - LINE_PX
        top = down if down + LINE_PX <= height or up < 0 else up
        boxes.append((left, top, left + w, top + LINE_PX))
        level = 1 - (top + LINE_PX / 2) / height  # the label's middle, as a share of the axis from the bottom
        out.append({"index": i, "label_y": math.exp(math.log(y[0]) + level * (math.log(y[1]) - math.log(y[0]))),
                    "side": side, "box": boxes[-1]})
    return pd.DataFrame(out, columns=["index", "label_y", "side", "box"]).set_index("index")


def pareto_front(options: Sequence[Line], picks: Mapping[str, Line | None], priced: str):
    """Cost against wall time of `priced` on log axes, a point per option (hollow: predicted, its 90% interval
    as lines across and up), the cost-versus-time front dashed. Only the front and the picks are labelled,
    each label moved off the others (`placed`) with a thin line back to its point where it moved; every
    option's figures are in its tooltip."""
    data = _decision_data(options, picks)
    x_scale, x_axis = hours(pd.concat([data["wall_h"], data["wall_lo_h"], data["wall_hi_h"]]), "wall time (log)", PLOT[0] // 50)
    y_scale, y_axis = dollars(pd.concat([data["usd"], data["usd_lo"], data["usd_hi"]]), "cost, US dollars (log)",
                              PLOT[1] // 20)
    labels = placed(data, x_scale.domain, y_scale.domain)
    data = data.join(labels[["label_y", "side"]]).assign(usd_shown=data["usd"].clip(lower=y_scale.domain[0]))
    x, y = alt.X("wall_h:Q").scale(x_scale).axis(x_axis), alt.Y("usd_shown:Q").scale(y_scale).axis(y_axis)
    base = alt.Chart(_rows(data)).encode(x=x, y=y, color=alt.Color("kind:N").title("option"))
    tips = ["option:N", "model:N", "basis:N", alt.Tooltip("said:N", title="cost, wall time"), "front:N"]
    measured = base.mark_point(filled=True, size=60).encode(tooltip=tips).transform_filter(~alt.datum.predicted)
    predicted = base.mark_point(filled=False, size=60).encode(tooltip=tips).transform_filter(alt.datum.predicted)
    front = base.mark_line(color="black", strokeDash=[4, 3], interpolate="step-after").encode(color=alt.value("black")).transform_filter(alt.datum.front)
    # a predicted option's 90% interval: its wall time across, its cost up and down (one interval, both figures)
    time_range = base.mark_rule(opacity=0.6).encode(x="wall_lo_h:Q", x2="wall_hi_h:Q").transform_filter(alt.datum.predicted)
    cost_range = base.mark_rule(opacity=0.6).encode(y="usd_lo:Q", y2="usd_hi:Q").transform_filter(alt.datum.predicted)
    leader = base.mark_rule(color="gray", strokeWidth=0.5).encode(y2="label_y:Q", color=alt.value("gray")).transform_filter(alt.datum.named)
    text = [base.mark_text(align=align, dx=dx, fontSize=FONT, baseline="middle")  # a label right of its point starts there
            .encode(y=alt.Y("label_y:Q"), text="label:N", color=alt.value("black"))
            .transform_filter((alt.datum.side == side) & alt.datum.named)
            for side, align, dx in (("right", "left", 8), ("left", "right", -8))]
    return _styled(alt.layer(front, time_range, cost_range, leader, measured, predicted, *text).properties(
        title=alt.Title(f"{priced[0].upper()}{priced[1:]}: cost against wall time per option",
                        subtitle="hollow: predicted, its 90% interval as lines; dashed: the front; labelled: the front "
                                 "and the picks (the rest: hover a point)"),
        width=PLOT[0], height=PLOT[1]))


def break_even(lines: pd.DataFrame, even: Sequence[Even], priced: str):
    """Monthly cost against runs like `priced` a month (decide.monthly's lines): each home box against the
    best option of each class, the break-even as a rule; one panel per box, the lines named in the legend."""
    ends = (float(lines["sweeps"].min()), float(lines["sweeps"].max()))
    unit = "sweeps" if priced == "the sweep" else "runs"
    x = (alt.X("sweeps:Q").scale(type="log", domain=list(ends), nice=False).title(f"{unit} a month (log)")
         .axis(values=_decades(*ends, (1,)), format=",~r"))
    scale, axis = dollars(lines["usd_per_month"], "cost a month, US dollars (log)", 260 // 20)
    y = alt.Y("usd_per_month:Q").scale(scale).axis(axis)
    points = frame(even)
    rules = points[np.isfinite(points["sweeps_per_month"])].assign(option=lambda d: d["against"] + " (" + d["versus"] + ")")
    option = alt.Color("option:N").title(None).legend(orient="bottom", columns=2, labelLimit=480)
    line = alt.Chart().mark_line().encode(x=x, y=y, color=option,
                                          tooltip=["option:N", alt.Tooltip("sweeps:Q", format=".3g"),
                                                   alt.Tooltip("usd_per_month:Q", format="$,.2f")])
    rule = alt.Chart().mark_rule(strokeDash=[4, 3]).encode(x="sweeps_per_month:Q", color="option:N",
                                                          tooltip=["option:N", alt.Tooltip("sweeps_per_month:Q", format=".3g")])
    data = pd.concat([lines.assign(layer="line"), rules[["box", "option", "sweeps_per_month"]].assign(layer="rule")],
                     ignore_index=True)
    return _styled(alt.layer(line.transform_filter(alt.datum.layer == "line"), rule.transform_filter(alt.datum.layer == "rule"),
                             data=_rows(data))
                   .properties(width=420, height=260)
                   .facet(facet=alt.Facet("box:N").title(None), columns=2)
                   .properties(title=alt.Title(f"Home box against the best option of each class: cost a month of "
                                               f"{priced}", subtitle="dashed: where the box becomes the cheaper")))


def decision(options: Sequence[Line], even: Sequence[Even], picks: Mapping[str, Line | None], priced: str,
             prefix: str) -> dict[str, object]:
    """The decision's charts (analysis/decide/'s table, picks and break-even) by file name, each name
    starting with `prefix` so that each command writes its own files ('sweep' for the report's sweep, 'run'
    for its planned run, 'decide' for `decide`'s); `priced` names what was priced in every title."""
    drawn = ({f"{prefix}_cost": sweep_cost(options, picks, priced), f"{prefix}_front": pareto_front(options, picks, priced)}
             if options else {})
    return drawn | ({f"{prefix}_break_even": break_even(monthly(even), even, priced)} if even else {})


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

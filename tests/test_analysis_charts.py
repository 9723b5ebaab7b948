"""Every chart is valid Vega-Lite (Altair's own validation and jsonschema against the schema file
Altair ships), is built of named layers, and saves as standalone HTML and PNG."""

import json
import subprocess
import sys
from pathlib import Path

import altair as alt
import jsonschema
import numpy as np
import pandas as pd
import pytest
from analysis_rows import frame, plant, row

from crossover.analysis import charts, cost, decide, prices
from crossover.analysis.crossings import Bootstrap, find
from crossover.analysis.load import KEY, eager_ok
from crossover.analysis.selection import select

SCHEMA = Path(alt.__file__).parent / "vegalite" / alt.SCHEMA_VERSION.split(".")[0] / "schema" / "vega-lite-schema.json"


@pytest.fixture(scope="module")
def rows():
    grid = frame([row("tabular", device, list(t * np.array([1.02, 1.0, 0.97])), depth=d, width=w, n_params=d * w * w)
                  for device in ("cpu", "cuda") for d in (1, 2, 4) for w in (16, 64, 256)
                  for t in [d * w * w * (1e-7 if device == "cpu" else 1e-9) + (0 if device == "cpu" else 2e-4)]])
    return pd.concat([plant(np.geomspace(1e2, 1e6, 6), lambda x: 1e-3 * x / 1e4, lambda x: 1e-3 * (x / 1e4) ** 0.5),
                      plant([16, 32, 64, 128], lambda b: 1 / b, lambda b: 0.1 / b, workload="lenet", axis="batch_size"),
                      grid], ignore_index=True)


def every_chart(rows):
    table = find(select(rows), Bootstrap(draws=50))
    options, billing = prices.load_prices()
    boxes = [prices.load_home_box(p) for p in prices.home_boxes()]
    gpu = eager_ok(rows)[lambda r: r["device"] == "cuda"]  # the boxes' GPUs predicted at half the H100's speed
    predicted = pd.concat([gpu[KEY].assign(device_name=b.gpu, epoch_s_median=2 * gpu["epoch_s_median"]) for b in boxes])
    answer = decide.decide(rows, predicted, options, billing, boxes)
    found, picks, even = answer.lines, answer.picks, answer.evens
    return {
        "epoch_time_vs_size": charts.epoch_time_vs_size(rows, table, "n_params"),
        "speedup_heatmap": charts.speedup_heatmap(rows, "tabular"),
        "epoch_times": charts.epoch_times(rows),
        "execution_time": charts.execution_time(rows),
        "throughput_vs_batch": charts.throughput_vs_batch(rows),
        "cost_per_million": charts.cost_per_million(cost.table(rows, options)),
        **charts.decision(found, even, picks, "the sweep", "sweep"),
    }


def test_every_chart_validates_against_the_vega_lite_schema(rows):
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    for name, chart in every_chart(rows).items():
        spec = chart.to_dict(validate=True)
        errors = [e.message for e in validator.iter_errors(spec)]
        assert not errors, (name, errors[:3])
        assert spec["$schema"].endswith(f"{alt.SCHEMA_VERSION}.json")


def test_importing_crossover_leaves_altairs_settings_as_they_were_and_a_chart_over_5000_rows_still_draws():
    # in a process of its own: this one has imported the package already
    said = subprocess.run([sys.executable, "-c", "import altair as alt; before = (alt.theme.active, alt.theme.names(), "
                           "alt.data_transformers.active, alt.data_transformers.options); "
                           "import crossover.analysis.__main__, crossover.analysis.charts; "
                           "print(before == (alt.theme.active, alt.theme.names(), alt.data_transformers.active, "
                           "alt.data_transformers.options))"], capture_output=True, text=True, timeout=120)
    assert said.stdout.strip() == "True", said.stderr[-2000:]
    many = frame([row("tabular", device, [1e-3] * 3000) for device in ("cpu", "cuda")])  # 6000 epochs drawn
    spec = charts.epoch_times(many).to_dict()
    assert len(spec["datasets"][spec["data"]["name"]]) == 6000
    assert spec["config"]["axis"] == {"labelOverlap": "greedy", "labelSeparation": 4}


def test_the_central_chart_layers_band_spread_line_and_rule(rows):
    spec = every_chart(rows)["epoch_time_vs_size"].to_dict()
    marks = [layer["mark"]["type"] for layer in spec["spec"]["layer"]]
    assert marks == ["rect", "area", "line", "rule"]
    crossover = [r for r in spec["datasets"][spec["data"]["name"]] if r.get("layer") == "crossover" and r["panel"].startswith("disc")]
    assert len(crossover) == 1 and crossover[0]["ci_low"] < crossover[0]["crossover"] < crossover[0]["ci_high"]


def test_the_heatmap_shows_speedup_over_depth_and_width(rows):
    spec = charts.speedup_heatmap(rows, "tabular").to_dict()
    values = pd.DataFrame(spec["datasets"][spec["data"]["name"]])
    assert len(values) == 9 and (values["speedup"] > 0).all()
    assert values.sort_values(["depth", "width"])["speedup"].iloc[-1] > 1  # the GPU wins at the largest
    with pytest.raises(ValueError, match="it needs two arms"):
        charts.speedup_heatmap(rows[rows["device"] == "cpu"], "tabular")


def test_save_writes_standalone_html_and_png(rows, tmp_path):
    html, png = charts.save(every_chart(rows)["epoch_times"], tmp_path / "sub" / "epoch_times")
    assert html.read_text().count("<script") >= 1 and "cdn.jsdelivr" not in html.read_text()  # inlined: opens offline
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_front_chart_labels_the_front_and_the_picks_alone_and_no_two_labels_meet():
    # 40 options crowded into a decade of time and cost, a dozen of them on the front
    rng = np.random.default_rng(0)
    wall_h = np.geomspace(0.05, 0.5, 40) * rng.uniform(0.9, 1.1, 40)
    usd = 0.02 / wall_h * rng.uniform(1.0, 3.0, 40)
    options = decide.lines(pd.DataFrame({
        "option": [f"option number {i}" for i in range(40)], "kind": "on-demand", "model": "H100", "gpus": 1,
        "basis": "b", "predicted": False, "usd": usd, "usd_lo": usd, "usd_hi": usd, "wall_h": wall_h,
        "wall_lo_h": wall_h, "wall_hi_h": wall_h, "wall_s": wall_h * 3600, "wall_lo_s": wall_h * 3600,
        "wall_hi_s": wall_h * 3600}))
    picks = {"cheapest": options[int(np.argmin(usd))], "within 1 h": options[7]}
    data = charts._decision_data(options, picks)
    assert set(data.loc[data["named"], "option"]) == {o.option for o in decide.pareto(options)} | {"option number 7"}
    labels = charts.placed(data, charts._log_domain(data["wall_h"]), charts._log_domain(data["usd"]))
    assert len(labels) == data["named"].sum() >= 5
    boxes = list(labels["box"])
    for i, a in enumerate(boxes):
        assert 0 <= a[0] and a[2] <= charts.PLOT[0] and 0 <= a[1] and a[3] <= charts.PLOT[1], a  # inside the plot
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    spec = charts.pareto_front(options, picks, "the sweep").to_dict()
    assert spec["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"  # ticks on a log scale, not a symlog
    assert "$" in spec["layer"][0]["encoding"]["y"]["axis"]["labelExpr"]

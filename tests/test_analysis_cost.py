"""The price file and home-box files: read, checked, refused with the file, line, field and fix; cost per row by hand."""

import datetime as dt

import pytest
import yaml
from analysis_rows import frame, row
from analysis_rows import write as write_rows

from crossover.analysis import cost, prices
from crossover.analysis.__main__ import main

PRICE = {"date": "2026-01", "source": "https://example.com/pricing"}
PROVIDERS = {"P": {"step_s": 3600, "minimum_s": 3600, "startup_s": 600, **PRICE},
             "Q": {"step_s": 1, "minimum_s": 60, "startup_s": 0, **PRICE}}
OPTIONS = [
    {"name": "one T4", "provider": "P", "region": "r", "gpu": "T4", "gpus": 1, "vcpus": 4,
     "on_demand": {"usd_per_h": 3.6, **PRICE}, "spot": {"usd_per_h": 1.1, **PRICE}},
    {"name": "eight T4", "provider": "Q", "region": "r", "gpu": "T4", "gpus": 8, "vcpus": 96,
     "on_demand": {"usd_per_h": 8.8, **PRICE}, "spot": None},
    {"name": "cpu2", "provider": "P", "region": "r", "gpu": None, "gpus": 0, "vcpus": 2,
     "on_demand": {"usd_per_h": 0.05, **PRICE}, "spot": None},
    {"name": "cpu8", "provider": "P", "region": "r", "gpu": None, "gpus": 0, "vcpus": 8,
     "on_demand": {"usd_per_h": 0.4, **PRICE}, "spot": None},
]
BOX = {"name": "box", "gpu": "GTX 960", "purchase_usd": 240, "purchase_date": "2025-01", "purchase_source": "a shop",
       "lifetime_years": 2, "power_w": 500, "utilisation": 0.5, "electricity_usd_per_kwh": 0.2}


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_home_box_costs_match_hand_figures(tmp_path):
    box = prices.load_home_box(write(tmp_path, "box.yaml", BOX))
    assert box.fixed_usd_per_month == pytest.approx(10.0)  # 240 / 24 months
    assert box.energy_usd_per_h == pytest.approx(0.1)  # 0.5 kW x 0.2 $/kWh
    assert box.usd_per_h == pytest.approx(10 / (0.5 * 730) + 0.1)


def test_cost_per_epoch_trial_and_million_samples_on_the_rows_gpu_model(tmp_path):
    options, billing = prices.load_prices(write(tmp_path, "prices.yaml", {"providers": PROVIDERS, "options": OPTIONS}))
    assert billing["P"].charged_s(601) == 3600 and billing["Q"].charged_s(30) == 60 and billing["Q"].charged_s(61.2) == 62
    t4 = row("disc", "cuda", [2.0, 2.0, 2.0], device_name="Tesla T4", gpus_requested=1.0, dataset_size=2000)
    t4.update(total_s=36.0, samples_per_s=1000.0)
    h100 = row("disc", "cuda", [1.0], gpus_requested=1.0)  # no H100 price here: no line
    cpu = row("disc", "cpu", [1.0], torch_threads=2, gpus_requested=0.0)
    costs = cost.table(frame([t4, h100, cpu]), options).set_index("option")
    t4 = costs[costs["device_name"] == "Tesla T4"]
    assert t4.loc["one T4", "usd_per_epoch"] == pytest.approx(3.6 * 2 / 3600)
    assert t4.loc["one T4", "usd_per_trial"] == pytest.approx(3.6 * 36 / 3600)
    assert t4.loc["one T4", "usd_per_million_samples"] == pytest.approx(1.0)  # 3.6 $/h / 3.6e6 samples/h x 1e6
    assert t4.loc["one T4 (spot)", "usd_per_h"] == pytest.approx(1.1)
    assert t4.loc["eight T4", "usd_per_h"] == pytest.approx(1.1)  # one GPU of eight: 8.8 / 8
    assert "NVIDIA H100 80GB HBM3" not in set(costs["device_name"])
    assert list(costs[costs["arm"] == "cpu"].index) == ["cpu2"]  # the smallest CPU instance with 2 vCPUs


def test_a_gpu_model_is_matched_as_a_word():
    assert cost.measures("NVIDIA A100-SXM4-80GB", "A100") and cost.measures("NVIDIA GeForce RTX 4090", "rtx 4090")
    assert not cost.measures("NVIDIA A100-SXM4-80GB", "A10") and not cost.measures("NVIDIA L40S", "L4")


def test_prices_older_than_12_months_are_flagged_with_their_source(tmp_path):
    old = [dict(OPTIONS[2], on_demand={"usd_per_h": 0.05, "date": "2025-06", "source": "https://old"})]
    options, _ = prices.load_prices(write(tmp_path, "p.yaml", {"providers": PROVIDERS, "options": old}))
    assert cost.stale(options, dt.date(2026, 5, 1)) == []
    assert cost.stale(options, dt.date(2026, 11, 22)) == [
        "cpu2 on-demand: $0.05/h is of 2025-06, over 12 months before 2026-11-22: re-read https://old"]


def test_the_project_price_table_and_home_boxes_load():
    options, billing = prices.load_prices()
    assert {o.provider for o in options} == set(billing) >= {"AWS", "GCP", "Lambda", "RunPod"}
    # no 2026 source priced a T4 (AWS g4dn, GCP n1 + T4): those lines were dropped on 2026-11-27
    assert {"H200", "H100", "A100", "L4", "A10G"} <= {o.gpu for o in options}
    assert any(o.gpu == "H200" and o.gpus == 1 for o in options)  # a single H200 rented
    boxes = {prices.load_home_box(p).gpu for p in prices.home_boxes()}
    assert boxes == {"GTX 960", "RTX 3060", "RTX 4090", "RTX 5090"}


def _option(field, value, kind=None):
    def edit(options):
        target = options[0][kind] if kind else options[0]
        target.pop(field) if value is KeyError else target.update({field: value})
    return edit


@pytest.mark.parametrize("edit, words", [
    (_option("source", KeyError, "on_demand"), "option 'one T4', on_demand (line 9) lacks source"),
    (_option("date", KeyError, "spot"), "option 'one T4', spot (line 13) lacks date"),
    (_option("usd_per_h", "3.6", "on_demand"), "on_demand, field usd_per_h (line 9): must be a plain number in US dollars"),
    (_option("usd_per_h", -1, "on_demand"), "on_demand, field usd_per_h (line 9): must be > 0 (US dollars per instance-hour), got -1"),
    (_option("usd_per_h", 0, "spot"), "spot, field usd_per_h (line 13): must be > 0"),
    (_option("usd_per_h", float("nan"), "spot"), "spot, field usd_per_h (line 13): must be a plain number"),
    (_option("vcpus", 0), "option 'one T4', field vcpus (line 7): must be >= 1 (vCPUs), got 0"),
    (_option("gpu", None), "option 'one T4', field gpu (line 5): a GPU instance names its gpu model"),
    (_option("provider", "Z"), "field provider (line 3): 'Z' has no billing under 'providers:'"),
    (_option("date", "June 2025", "on_demand"), "on_demand, field date (line 10): must be a date, YYYY-MM or YYYY-MM-DD"),
    (_option("colour", "red"), "option 'one T4' has unknown field(s) ['colour']"),
])
def test_a_bad_price_file_is_refused_naming_the_line_and_field(tmp_path, edit, words):
    options = [{**o, "on_demand": dict(o["on_demand"]), "spot": o["spot"] and dict(o["spot"])} for o in OPTIONS]
    edit(options)
    with pytest.raises(ValueError) as info:
        prices.load_prices(write(tmp_path, "bad.yaml", {"options": options, "providers": PROVIDERS}))
    assert words in str(info.value)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return write_rows([row("disc", "cpu", [1.0, 1.0])], tmp_path_factory.mktemp("results") / "mine")


@pytest.mark.parametrize("text, words", [
    ({"lifetime_years": 0}, "field lifetime_years (line 6): must be > 0 (years), got 0"),
    ({"utilisation": "25%"}, "field utilisation (line 8): must be a plain number in a fraction of the month, e.g. 0.25 (no unit, no % sign), got '25%'"),
    ({"power_w": "220W"}, "field power_w (line 7): must be a plain number in watts (no unit, no % sign), got '220W'"),
    ({"matches": "GTX [960"}, "field matches (line 10): not a valid regular expression"),
    ({"purchase_usd": -250}, "field purchase_usd (line 3): must be >= 0 (US dollars), got -250"),
    ({"power_w": -220}, "field power_w (line 7): must be > 0 (watts), got -220"),
    ({"electricity_usd_per_kwh": -0.17}, "field electricity_usd_per_kwh (line 9): must be >= 0"),
    ({"utilisation": 2}, "field utilisation (line 8): must be > 0 and <= 1"),
    ({"purchase_date": None}, "field purchase_date (line 4): must be a date"),
    ("name: box\ngpu: [GTX 960\n", "not valid YAML at line 3, column 1"),
])
def test_a_bad_home_box_is_refused_with_the_field_and_fix_and_no_traceback(tmp_path, results, capsys, text, words):
    path = tmp_path / "box.yaml"
    path.write_text(text if isinstance(text, str) else yaml.safe_dump({**BOX, **text, "matches": text.get("matches")}, sort_keys=False))
    status = main(["decide", str(results), "--no-reference", "--home-box", str(path)])
    err = capsys.readouterr().err
    assert status == 2 and words in err and "Traceback" not in err, err


def test_a_missing_home_box_says_what_to_copy(tmp_path):
    with pytest.raises(FileNotFoundError, match="copy .*seed002_gtx960.yaml and edit it"):
        prices.load_home_box(tmp_path / "nope.yaml")

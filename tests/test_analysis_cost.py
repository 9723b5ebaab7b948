"""The cost model against figures worked out by hand, and clear errors for a bad price or box file."""

import math

import numpy as np
import pytest
import yaml

from analysis import cost
from analysis_rows import frame, row

BOX = {"name": "box", "purchase_usd": 240, "lifetime_years": 2, "power_w": 500, "utilisation": 0.5,
       "electricity_usd_per_kwh": 0.2, "matches": "GTX 960"}
PRICE = {"date": "2026-01", "source": "https://example.com/pricing"}
OPTIONS = [
    {"name": "one T4", "provider": "P", "region": "r", "gpus": 1, "vcpus": 4, "matches": "T4",
     "on_demand": {"usd_per_h": 3.6, **PRICE}, "spot": {"usd_per_h": 1.1, **PRICE}},
    {"name": "eight T4", "provider": "Q", "region": "r", "gpus": 8, "vcpus": 96, "matches": "T4",
     "on_demand": {"usd_per_h": 8.8, **PRICE}, "spot": None},
    {"name": "cpu2", "provider": "P", "region": "r", "gpus": 0, "vcpus": 2, "matches": None,
     "on_demand": {"usd_per_h": 0.05, **PRICE}, "spot": None},
    {"name": "cpu8", "provider": "P", "region": "r", "gpus": 0, "vcpus": 8, "matches": None,
     "on_demand": {"usd_per_h": 0.4, **PRICE}, "spot": None},
]


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def setup(tmp_path):
    options = cost.load_prices(write(tmp_path, "prices.yaml", {"options": OPTIONS}))
    box = cost.load_home_box(write(tmp_path, "box.yaml", BOX))
    # one GPU trial on a T4: 2 s epochs, 36 s in all, 1000 samples/s; the same on the box at half the speed
    t4 = row("disc", "cuda", [2.0, 2.0, 2.0], device_name="Tesla T4", gpus_requested=1.0, dataset_size=2000)
    t4.update(total_s=36.0, samples_per_s=1000.0)
    home = row("disc", "cuda", [4.0, 4.0, 4.0], device_name="NVIDIA GeForce GTX 960", gpus_requested=1.0, dataset_size=2000)
    home.update(samples_per_s=500.0, config_hash="home")
    cpu = row("disc", "cpu", [1.0], torch_threads=2, gpus_requested=0.0)
    return options, box, frame([t4, home, cpu])


def test_the_home_box_costs_match_hand_figures(setup):
    _, box, _ = setup
    assert box.fixed_usd_per_month == pytest.approx(10.0)  # 240 / 24 months
    assert box.energy_usd_per_h == pytest.approx(0.1)  # 0.5 kW x 0.2 $/kWh
    assert box.usd_per_h == pytest.approx(10 / (0.5 * 730) + 0.1)


def test_cost_per_epoch_trial_and_million_samples(setup):
    options, box, rows = setup
    costs = cost.table(rows, options, box).set_index("option")
    t4 = costs[costs["device_name"] == "Tesla T4"]
    assert t4.loc["one T4", "usd_per_epoch"] == pytest.approx(3.6 * 2 / 3600)
    assert t4.loc["one T4", "usd_per_trial"] == pytest.approx(3.6 * 36 / 3600)
    assert t4.loc["one T4", "usd_per_million_samples"] == pytest.approx(1.0)  # 3.6 $/h / 3.6e6 samples/h x 1e6
    assert t4.loc["one T4 (spot)", "usd_per_h"] == pytest.approx(1.1)
    assert t4.loc["eight T4", "usd_per_h"] == pytest.approx(1.1)  # one GPU of eight: 8.8 / 8
    assert "1 of 8 GPUs" in t4.loc["eight T4", "assumption"]
    # the CPU trial of 2 threads is priced on the smallest CPU instance of its provider that has 2 vCPUs
    assert list(costs[costs["arm"] == "cpu"].index) == ["cpu2"]
    assert costs.loc["box", "usd_per_h"] == pytest.approx(box.usd_per_h)


def test_break_even_hours_per_month(setup):
    options, box, rows = setup
    even = cost.break_even(box, options, cost.table(rows, options, box)).set_index("option")
    # measured on both: the box is half as fast, so an hour at home does half an hour of rented work
    assert even.loc["one T4 (spot)", "speed"] == pytest.approx(0.5)
    assert even.loc["one T4 (spot)", "break_even_h_per_month"] == pytest.approx(10 / (1.1 * 0.5 - 0.1))
    assert even.loc["one T4", "break_even_h_per_month"] == pytest.approx(10 / (3.6 * 0.5 - 0.1))
    # never measured on the box: equal speed, and said so
    assert even.loc["cpu8", "break_even_h_per_month"] == pytest.approx(10 / (0.4 - 0.1))
    assert "equal speed assumed" in even.loc["cpu8", "basis"]
    # renting for less than the box's electricity: the box never pays off
    assert math.isinf(even.loc["cpu2", "break_even_h_per_month"])
    lines = cost.monthly(box, even.reset_index())
    home = lines[lines["kind"] == "home box"]
    assert np.allclose(home["usd_per_month"], 10 + 0.1 * home["hours"])


def test_the_project_price_table_has_every_field_and_the_example_box_loads():
    options = cost.load_prices()
    assert {o.provider for o in options} >= {"AWS", "GCP", "Lambda", "RunPod"}
    assert any(o.gpus == 0 for o in options) and any(o.matches and "H100" in o.matches for o in options)
    assert cost.load_home_box(cost.PRICES.parent / "home_boxes" / "seed002_gtx960.yaml").purchase_usd == 250


@pytest.mark.parametrize("edit, words", [
    (lambda o: o[0]["on_demand"].pop("source"), "option 'one T4', on_demand lacks source: every price needs usd_per_h, date and source"),
    (lambda o: o[1].pop("vcpus"), "option 'eight T4' lacks vcpus"),
    (lambda o: o[2].update(colour="red"), "option 'cpu2' has unknown field(s) ['colour']"),
    (lambda o: o[3].update(on_demand=None), "option 'cpu8': on_demand is null"),
])
def test_a_price_file_missing_a_field_is_refused_naming_it(tmp_path, edit, words):
    options = [dict(o, on_demand=dict(o["on_demand"])) for o in OPTIONS]
    edit(options)
    with pytest.raises(ValueError) as info:
        cost.load_prices(write(tmp_path, "bad.yaml", {"options": options}))
    assert words in str(info.value)


def test_a_bad_home_box_is_refused(tmp_path):
    with pytest.raises(ValueError, match="lacks power_w"):
        cost.load_home_box(write(tmp_path, "box.yaml", {k: v for k, v in BOX.items() if k != "power_w"}))
    with pytest.raises(ValueError, match=r"utilisation is the fraction of the month it trains, in \(0, 1\], got 2"):
        cost.load_home_box(write(tmp_path, "box.yaml", {**BOX, "utilisation": 2}))
    with pytest.raises(FileNotFoundError, match="copy analysis/home_boxes/seed002_gtx960.yaml"):
        cost.load_home_box(tmp_path / "nope.yaml")

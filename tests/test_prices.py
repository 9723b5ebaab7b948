"""The shipped prices (every line dated and sourced, the old ones flagged) and SkyPilot catalogs as price files."""

import datetime as dt
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from analysis_rows import row
from analysis_rows import write as write_rows

from crossover.analysis import cost, prices
from crossover.analysis.__main__ import main

HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n"
LINES = [
    "p5.48xlarge,H100,8.0,192.0,2048.0,,55.04,20.1,us-east-1,us-east-1a\n",  # line 2
    "p5.48xlarge,H100,8.0,192.0,2048.0,,55.04,18.5,us-east-1,us-east-1b\n",  # line 3: the same type, cheaper spot
    "p4de.24xlarge,A100-80GB,8.0,96.0,1152.0,,27.44705,,us-east-1,us-east-1a\n",  # line 4: no spot price
    "p3.2xlarge,V100,1.0,8.0,61.0,,3.06,0.9,us-east-1,us-east-1a\n",  # line 5: a GPU devices.yaml lacks
    "c7i.large,,,2.0,4.0,,0.08925,0.03,us-east-1,us-east-1a\n",  # line 6: a CPU instance
]


AS_OF = dt.date(2026, 11, 26)  # the day the shipped prices were last checked: fixed, so no test rots


def catalog(tmp_path, lines=LINES, header=HEADER, cloud="aws"):
    path = tmp_path / cloud / "vms.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "".join(lines))
    os.utime(path, (dt.datetime(2026, 11, 20).timestamp(),) * 2)
    return path


def test_every_shipped_price_and_billing_has_a_date_and_a_source():
    options, billing = prices.load_prices()
    dated = [p for o in options for _, p in o.prices()] + list(billing.values())
    assert dated and all(p.date and p.source.startswith("https://") for p in dated)
    assert all(prices.day(p.date) <= dt.date(2026, 11, 25) for p in dated)  # nothing dated after it was read
    assert {"Nebius", "Vast.ai"} <= set(billing)  # the 2026 lists' providers
    by_name = {o.name: o for o in options}
    assert by_name["AWS p5.48xlarge"].on_demand.usd_per_h == 55.04
    assert by_name["RunPod H100 SXM community"].on_demand.usd_per_h == 2.69
    assert all(line.endswith("a secondary source only") for line in cost.secondary(options))
    assert any("RunPod H200 community on-demand: $3.59/h of 2026-09-25 was read on" in line for line in cost.secondary(options))


def test_a_price_is_stale_from_the_366th_day_after_its_date():
    price = prices.Price(1.0, "2025-11-26", "https://example.com/pricing")
    assert not price.is_stale(dt.date(2026, 11, 26)) and price.is_stale(dt.date(2026, 11, 27))
    assert prices.Price(1.0, "2025-11", "https://example.com/pricing").is_stale(AS_OF)  # a month is its first day


def test_every_shipped_price_older_than_12_months_is_flagged_and_says_why_it_was_not_re_read():
    options, _ = prices.load_prices()
    old = [(o, kind, p) for o in options for kind, p in o.prices() if p.is_stale(AS_OF)]
    assert len(cost.stale(options, AS_OF)) == len(old)  # each one listed, with its source to re-read
    assert all(f"re-read {p.source}" in line for (_, _, p), line in zip(old, cost.stale(options, AS_OF)))
    assert all("not re-read" in p.note for _, _, p in old), [o.name for o, _, p in old if "not re-read" not in p.note]
    recent = [p for o in options for _, p in o.prices() if not p.is_stale(AS_OF)]
    assert recent and not any("not re-read" in p.note for p in recent)  # a re-read price does not claim otherwise


def test_no_shipped_price_was_over_12_months_old_when_they_were_re_read():
    # on 2026-11-27 every price is of the last 12 months (a line no 2026 source confirmed was dropped)
    options, _ = prices.load_prices()
    assert cost.stale(options, dt.date(2026, 11, 27)) == []


def test_every_shipped_home_box_is_priced_in_2026_with_a_source_and_none_is_stale():
    # the cards' prices re-read on 2026-11-27; seed 002's box is what the seed paid, a record
    boxes = {b.name: b for b in map(prices.load_home_box, prices.home_boxes())}
    market = [b for b in boxes.values() if not b.record]
    assert len(market) == 3 and all(prices.day(b.purchase_date).year == 2026 for b in market)
    assert all("https://" in b.purchase_source for b in market)
    assert cost.stale_boxes(list(boxes.values()), dt.date(2026, 11, 27)) == []
    assert boxes["GTX 960 box of 2017 (used)"].record and boxes["GTX 960 box of 2017 (used)"].purchase_date == "2017-12"
    assert boxes["RTX 5090 card"].purchase_usd == 2699 and boxes["RTX 3060 card"].purchase_usd == 339


def test_the_prices_age_counts_and_names_every_stale_price_a_home_box_s_included():
    stamp = {"source": "https://example.com/pricing"}
    options = [prices.Option("cpu2", "P", "r", None, 0, 2, prices.Price(0.05, "2025-06", **stamp),
                           prices.Price(0.02, "2026-11", **stamp))]
    box = dict(gpu="RTX 4090", lifetime_years=4, power_w=600, utilisation=0.25, electricity_usd_per_kwh=0.17)
    boxes = [prices.HomeBox("old box", purchase_usd=3000, purchase_date="2025-06", purchase_source="https://shop/4090", **box),
             prices.HomeBox("new box", purchase_usd=2699, purchase_date="2026-06-22", purchase_source="https://shop/5090", **box),
             prices.HomeBox("seed box", purchase_usd=250, purchase_date="2017-12", purchase_source="the seed", record=True, **box)]
    lines = cost.dated(options, boxes, AS_OF)
    assert lines[0] == "prices over 12 months old: 2 of 4 (2 rental, 2 home-box purchases) on 2026-11-26"
    assert lines[1] == ("stale price: cpu2 on-demand: $0.05/h is of 2025-06, over 12 months before 2026-11-26: "
                        "re-read https://example.com/pricing")
    assert lines[2] == ("stale price: old box purchase: $3000 is of 2025-06, over 12 months before 2026-11-26: "
                        "re-read https://shop/4090")  # a stale home box's price is named, with its source
    assert not any("new box" in line for line in lines)  # of this year
    assert lines[3:] == ["a record, not a price: seed box's $250 is what was paid in 2017-12, never re-read"]
    assert cost.dated(options[:0], boxes[1:], AS_OF)[0].startswith("prices over 12 months old: 0 of 1 ")
    rows = pd.DataFrame(columns=["config_hash", "workload", "config", "assumption", "price_date", "option"])
    out = cost.render(rows, rows, options, AS_OF, boxes)
    assert "  prices over 12 months old: 2 of 4" in out and "  stale price: old box purchase: $3000" in out


def test_a_price_older_than_12_months_is_flagged_in_the_output(tmp_path, capsys):
    stamp = {"source": "https://example.com/pricing"}
    recent = dt.date.today().isoformat()  # `cost` judges by today's clock: a price of today is never stale
    data = {"providers": {"P": {"step_s": 1, "minimum_s": 60, "startup_s": 0, "date": "2026-11", **stamp}},
            "options": [{"name": "cpu2", "provider": "P", "region": "r", "gpu": None, "gpus": 0, "vcpus": 2,
                         "on_demand": {"usd_per_h": 0.05, "date": "2025-06", **stamp},
                         "spot": {"usd_per_h": 0.02, "date": recent, "via": "https://a.list", **stamp}}]}
    price_file = tmp_path / "old.yaml"
    price_file.write_text(yaml.safe_dump(data, sort_keys=False))
    results = write_rows([row("disc", "cpu", [1.0, 1.0], torch_threads=2, gpus_requested=0.0)], tmp_path / "mine")
    assert main(["cost", str(results), "--prices", str(price_file), "--out", str(tmp_path / "charts")]) == 0
    out = capsys.readouterr().out
    assert "stale price: cpu2 on-demand: $0.05/h is of 2025-06, over 12 months before" in out
    assert "  prices over 12 months old: " in out and " rental, 3 home-box purchases) on " in out  # counted, boxes too
    assert "cpu2 (stale price of 2025-06)" in out.split("assumption:")[0]  # flagged where it is listed
    assert "cpu2 (spot) (stale" not in out
    assert "cpu2 spot" not in out.split("stale price:")[1].split("\n")[0]  # today's is recent
    assert f"secondary source: cpu2 spot: $0.02/h of {recent} was read on https://a.list" in out
    # decide says it on the option that uses the price, in its source, and not on today's
    assert main(["decide", str(results), "--prices", str(price_file), "--verbose", "--out", str(tmp_path / "charts")]) == 0
    decided = capsys.readouterr().out
    lines = decided.splitlines()  # how each option is billed, the options named after it, a line wrapped
    assert any(line.rstrip().endswith("stale price of 2025-06: cpu2") for line in lines), decided
    assert not any("stale price of 2025-06: cpu2 (spot)" in line for line in lines)


def test_a_skypilot_catalog_loads_as_options(tmp_path):
    options, billing = prices.load_prices(catalog(tmp_path))
    by_name = {o.name: o for o in options}
    assert list(by_name) == ["AWS p5.48xlarge us-east-1", "AWS p4de.24xlarge us-east-1", "AWS p3.2xlarge us-east-1",
                             "AWS c7i.large us-east-1"]
    p5 = by_name["AWS p5.48xlarge us-east-1"]
    assert (p5.gpu, p5.gpus, p5.vcpus, p5.on_demand.usd_per_h, p5.spot.usd_per_h) == ("H100", 8, 192, 55.04, 18.5)
    assert p5.on_demand.date == "2026-11-20" and "vms.csv (SkyPilot catalog, line 2)" in p5.on_demand.source
    assert "line 3" in p5.spot.source  # the cheaper zone's line
    assert by_name["AWS p4de.24xlarge us-east-1"].gpu == "A100" and by_name["AWS p4de.24xlarge us-east-1"].spot is None
    assert by_name["AWS p3.2xlarge us-east-1"].gpu == "V100"  # unknown to devices.yaml: kept by its name
    assert by_name["AWS c7i.large us-east-1"].gpu is None and by_name["AWS c7i.large us-east-1"].gpus == 0
    assert billing == {"AWS": prices.load_prices(prices.PRICES)[1]["AWS"]}  # the project's AWS billing


def test_a_catalog_of_an_unknown_cloud_gets_the_stated_default_billing(tmp_path):
    options, billing = prices.load_prices(catalog(tmp_path, LINES[-1:], cloud="mycloud"))
    assert options[0].provider == prices.SKYPILOT_PROVIDER
    bill = billing[prices.SKYPILOT_PROVIDER]
    assert (bill.step_s, bill.minimum_s, bill.startup_s) == (60, 60, 300) and "no billing known" in bill.note


@pytest.mark.parametrize("header, lines, words", [
    ("", [], "vms.csv, line 1: the file is empty"),
    (HEADER.replace(",SpotPrice", ""), [], "vms.csv, line 1: no column SpotPrice in the header"),
    (HEADER, [], "vms.csv, line 2: no instance under the header"),
    (HEADER, LINES[:2] + [LINES[2].replace("27.44705", "$27")], "vms.csv, line 4, column Price: must be a plain number above 0, got '$27'"),
    (HEADER, [LINES[0].replace("55.04", "-55.04")], "vms.csv, line 2, column Price: must be a plain number above 0, got '-55.04'"),
    (HEADER, [LINES[0].replace("55.04", "")], "vms.csv, line 2, column Price: must be a plain number above 0, got ''"),
    (HEADER, LINES[:1] + [LINES[1].replace("18.5", "nan")], "vms.csv, line 3, column SpotPrice: must be a plain number above 0 or empty"),
    (HEADER, [LINES[3].replace("V100,1.0", "V100,")], "vms.csv, line 2, column AcceleratorCount: must be a plain number"),
    (HEADER, [LINES[4].replace("c7i.large", "")], "vms.csv, line 2, column InstanceType: is empty"),
])
def test_a_malformed_catalog_is_refused_naming_the_line_and_column(tmp_path, header, lines, words):
    with pytest.raises(ValueError) as info:
        prices.load_prices(catalog(tmp_path, lines, header))
    assert words in str(info.value) and str(tmp_path) in str(info.value)
    assert ";" in str(info.value)  # then what to do


def test_a_price_file_of_another_kind_is_refused_by_its_suffix(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text("{}")
    with pytest.raises(ValueError, match=r"prices.json: a price file is our YAML .* or a SkyPilot catalog"):
        prices.load_prices(path)


def test_a_skypilot_accelerator_name_maps_to_a_device_key():
    keys = ["H100", "A100", "A10G", "L4", "RTX 4090"]
    assert [prices.gpu_model(n, keys) for n in ("A100-80GB", "H100-MEGA", "RTX4090", "A10G", "A10", "L40S", "V100")] == \
        ["A100", "H100", "RTX 4090", "A10G", "A10", "L40S", "V100"]
    assert prices.provider_of(Path("catalogs/v8/gcp/vms.csv")) == "GCP"


@pytest.mark.parametrize("name", ["prices.yaml", "vms.csv"])
def test_a_price_file_that_is_not_utf8_text_is_refused_naming_its_line(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"# prices\n\xff\xfe binary\n")
    with pytest.raises(ValueError) as info:
        prices.load_prices(path)
    assert str(info.value).startswith(f"{path}, line 2: not UTF-8 text") and "save it as UTF-8" in str(info.value)


"""The decision on planted rows: a sweep's wall time and cost by hand (start-up, billing minimum, packing),
the fastest, the cheapest and the cheapest within a deadline, a predicted GPU marked, and every chart;
the user's planned run (--epochs, --dataset-size) priced from a line planted along the dataset size."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from analysis_rows import frame, row, user_cpu_rows
from analysis_rows import write as write_rows
from test_analysis_cost import write

from crossover.analysis import charts, decide, prices
from crossover.analysis.__main__ import main
from crossover.analysis.load import KEY, REFERENCE, eager_ok, is_reference

PRICE = {"date": "2026-01", "source": "https://example.com/pricing"}
PROVIDERS = {"Hourly": {"step_s": 3600, "minimum_s": 3600, "startup_s": 600, **PRICE},
             "Second": {"step_s": 1, "minimum_s": 60, "startup_s": 0, **PRICE}}
OPTIONS = [
    {"name": "one H100", "provider": "Hourly", "region": "r", "gpu": "H100", "gpus": 1, "vcpus": 8,
     "on_demand": {"usd_per_h": 2.0, **PRICE}, "spot": {"usd_per_h": 1.0, **PRICE}},
    {"name": "eight H100", "provider": "Second", "region": "r", "gpu": "H100", "gpus": 8, "vcpus": 96,
     "on_demand": {"usd_per_h": 16.0, **PRICE}, "spot": None},
]
BOX = {"name": "4090 box", "gpu": "RTX 4090", "purchase_usd": 8760, "purchase_date": "2026-01", "purchase_source": "a shop",
       "lifetime_years": 1, "power_w": 1000, "utilisation": 1.0, "electricity_usd_per_kwh": 0.5}


def _timed(r, setup, warmup, eval_s):
    """A row whose fixed costs are set: its trial at 11 epochs (1 warm-up) takes setup + warmup + eval + 10 epochs."""
    r.update(setup_s=setup, h2d_s=0.0, warmup_s=warmup, eval_s=eval_s, epochs=11, warmup_epochs=1)
    return r


@pytest.fixture
def planted(tmp_path):
    options, billing = prices.load_prices(write(tmp_path, "p.yaml", {"providers": PROVIDERS, "options": OPTIONS}))
    box = prices.load_home_box(write(tmp_path, "box.yaml", BOX))
    rows = frame([
        _timed(row("disc", "cuda", [2.0] * 3, gpus_requested=1.0), 1, 2, 1),  # 1 + 2 + 1 + 10 x 2 = 24 s a trial
        _timed(row("disc", "cuda/4", [4.0] * 3, gpus_requested=0.25), 1, 4, 1),  # 46 s, four on a GPU: 11.5 GPU-s a trial
        _timed(row("disc", "cpu", [10.0] * 3), 1, 10, 1),  # 112 s
    ])
    # the user's own rows: the CPU is theirs; the H100's are the shipped reference rows, of another host
    rows = rows.assign(results_dir=np.where(rows["device"] == "cpu", "/home/me/results/mine", str(REFERENCE / "h100")))
    key = eager_ok(rows)[KEY].iloc[:1]
    # 2 s fixed + 11 x 3 = 35 s, within 2 + 11 x 2.5 = 29.5 s and 2 + 11 x 4 = 46 s
    predicted = key.assign(device_name="RTX 4090", epoch_s_median=3.0, epoch_s_lo=2.5, epoch_s_hi=4.0, predicted=True)
    return rows, predicted, options, billing, [box]


def test_the_sweep_costs_what_the_hand_figures_say(planted):
    answer = decide.decide(*planted, asked={"disc": 10}, deadline_h=0.1)
    grid, found, picks = answer.grid, answer.lines, answer.picks
    assert sum(c.trials for c in grid) == 10
    got = {o.option: o for o in found}
    # one H100: packed four to the GPU (11.5 GPU-s < 24 s a trial), 10 x 11.5 = 115 s, + 600 s start-up,
    # billed by the hour with an hour's minimum
    assert got["one H100"].packed == 4
    assert got["one H100"].wall_s == pytest.approx(600 + 115)
    assert got["one H100"].usd == pytest.approx(2.0)
    assert got["one H100 (spot)"].usd == pytest.approx(1.0)
    # eight H100: the longest trial (46 s) bounds the makespan; billed per second with a minute's minimum
    assert got["eight H100"].wall_s == pytest.approx(46)
    assert got["eight H100"].usd == pytest.approx(16.0 * 60 / 3600)
    # own CPU: one trial after another, already owned: its electricity alone, at the nominal 65 W (no RAPL row)
    own = next(o for o in found if o.kind == decide.OWN_CPU)
    assert own.wall_s == pytest.approx(10 * 112) and own.usd == pytest.approx(1120 / 3600 * 0.065 * 0.17)
    # the box at its own, predicted, speed: 10 x 35 s at $1/h write-off + 1 kW x $0.5/kWh
    assert got["4090 box"].wall_s == pytest.approx(350)
    assert got["4090 box"].usd == pytest.approx(350 / 3600 * 1.5)
    assert got["4090 box"].predicted and not got["eight H100"].predicted
    assert [picks[k].option for k in ("fastest", "cheapest", "cheapest within 0.1 h")] == \
        ["eight H100", own.option, "4090 box"]
    assert decide.picks(found, 0.05)["cheapest within 0.05 h"].option == "eight H100"
    assert decide.picks(found, 0.001)["cheapest within 0.001 h"] is None


def test_the_break_even_uses_the_box_at_its_own_speed(planted):
    evens = decide.decide(*planted, asked={"disc": 10}).evens
    by = {e.versus: e for e in evens}
    line = by["cheapest on-demand GPU"]
    assert line.against == "eight H100"
    energy = 350 / 3600 * 1.0 * 0.5  # the box's electricity per sweep at its nominal 1 kW
    assert line.sweeps_per_month == pytest.approx(730 / (16.0 * 60 / 3600 - energy))
    assert line.box_hours_per_month == pytest.approx(line.sweeps_per_month * 350 / 3600)
    assert by["own CPU"].sweeps_per_month == float("inf")


def test_measured_gpu_energy_replaces_the_nominal_power(planted):
    rows, predicted, options, billing, boxes = planted
    measured = frame([_timed(row("disc", "cuda", [3.0] * 3, device_name="NVIDIA GeForce RTX 4090", gpus_requested=1.0,
                                 gpu_energy_j=900.0 * 2, train_s=9.0), 1, 1, 0)])
    rows = pd.concat([rows, measured.assign(results_dir="/x")], ignore_index=True)
    found = decide.decide(rows, predicted, options, billing, boxes, asked={"disc": 10}).lines
    box = next(o for o in found if o.option == "4090 box")
    assert not box.predicted  # the measured row wins over the prediction
    assert "measured GPU power 200 W" in box.basis  # 1,800 J over 9 s of timed epochs


def test_the_measured_grid_is_the_default_sweep_and_a_missing_workload_is_refused(planted):
    rows = planted[0]
    assert decide.sweep(rows)["trials"].tolist() == [1]
    with pytest.raises(ValueError, match="--workload peaks: no ok row of it"):
        decide.sweep(rows, {"peaks": 5})


def test_the_front_and_every_decision_chart_render(planted):
    answer = decide.decide(*planted, asked={"disc": 10})
    found, picks, even = answer.lines, answer.picks, answer.evens
    front = [o.option for o in decide.pareto(found)]
    assert front == ["eight H100", "4090 box", next(o.option for o in found if o.kind == decide.OWN_CPU)]
    drawn = charts.decision(found, even, picks, "the sweep", "sweep")
    assert set(drawn) == {"sweep_cost", "sweep_front", "sweep_break_even"}
    for chart in drawn.values():
        spec = chart.to_dict()
        assert "predicted" in str(spec) or "sweeps" in str(spec)
    assert "4090 box (predicted)" in str(drawn["sweep_front"].to_dict())


def test_your_cpu_rows_are_set_beside_the_reference_gpu_rows_of_the_same_configurations():
    from crossover.analysis import summary
    mine = frame([row("disc", "cpu", [0.01] * 3, depth=d, n_params=10 * d, seed=s, data_requested="generated")
                  for d in (2, 3, 4) for s in (0, 1)])  # the default grid's disc, as `make run` measures it
    both = summary.with_reference(mine.assign(results_dir="/home/me/results/scaling"))
    gpus = both[both["device"] == "cuda"]
    assert set(gpus["depth"]) == {2, 3, 4} and gpus["results_dir"].map(is_reference).all()
    assert "cuda (NVIDIA H200)" in set(both["arm"])
    note = summary.reference_note(both)
    assert note.startswith("your cpu (Intel(R) Xeon(R) Processor) against") and "NVIDIA H200 measured on 2026-11-26" in note
    assert "another host" in note


def test_each_gpu_model_takes_the_reference_folder_that_measured_most_of_your_configurations(tmp_path):
    from crossover.analysis import summary
    from analysis_rows import write as write_rows

    def gpu(depths, when):
        return [row("disc", "cuda", [0.02] * 3, depth=d, n_params=10 * d, data_requested="generated",
                    device_name="NVIDIA H200", finished_at=pd.Timestamp(when, tz="UTC")) for d in depths]

    root = tmp_path / "reference"
    write_rows(gpu((2, 3, 4), "2026-11-20"), root / "older-scaling")  # every configuration
    write_rows(gpu((3,), "2026-11-22"), root / "newer-study")  # newer, but one configuration only
    mine = frame([row("disc", "cpu", [0.01] * 3, depth=d, n_params=10 * d, data_requested="generated")
                  for d in (2, 3, 4)]).assign(results_dir=str(tmp_path / "mine"))
    both = summary.with_reference(mine, root)
    picked = both[both["device"] == "cuda"]
    assert sorted(picked["depth"]) == [2, 3, 4] and set(picked["results_dir"]) == {str(root / "older-scaling")}


def test_among_folders_that_measured_as_many_of_your_configurations_the_one_with_more_runs_wins(tmp_path):
    from crossover.analysis import summary
    from analysis_rows import write as write_rows

    def gpu(depths, seeds, when):
        return [row("disc", "cuda", [0.02] * 3, depth=d, n_params=10 * d, data_requested="generated", seed=s,
                    device_name="NVIDIA H200", finished_at=pd.Timestamp(when, tz="UTC")) for d in depths for s in seeds]

    root = tmp_path / "reference"
    write_rows(gpu((2, 3), range(3), "2026-11-20"), root / "scaling")  # 3 runs a configuration
    write_rows(gpu((2, 3), range(1), "2026-11-22"), root / "newer-study")  # newer, the same ones once
    mine = frame([row("disc", "cpu", [0.01] * 3, depth=d, n_params=10 * d, data_requested="generated")
                  for d in (2, 3)]).assign(results_dir=str(tmp_path / "mine"))
    picked = summary.with_reference(mine, root).query("device == 'cuda'")
    assert len(picked) == 6 and set(picked["results_dir"]) == {str(root / "scaling")}


# The planned run: per device, epoch time a + b x N at three measured sizes, one second of fixed costs a run.
LINES = {"cpu": (0.01, 1e-5), "cuda": (0.02, 2e-6)}
SIZES = (1000, 2000, 4000)


def planned_rows(workload="tab", sizes=SIZES, slower=1.0, **values) -> list[dict]:
    """Rows on a planted line (`slower` times it): fixed costs 1 s a run (set-up 1 s, the warm-up epoch as
    fast as the others)."""
    rows = []
    for device, (a, b) in LINES.items():
        for n in sizes:
            epoch = slower * (a + b * n)
            r = row(workload, device, [epoch] * 3, dataset_size=n, gpus_requested=1.0 if device == "cuda" else None,
                    **{k: n if v == "N" else v for k, v in values.items()})
            rows.append(_timed(r, 1.0, epoch, 0.0) | {"epochs": 4})
    return rows


@pytest.fixture
def planned(planted):
    _, _, options, billing, _ = planted
    rows = frame(planned_rows()).assign(results_dir="/home/me/results/mine")
    none = pd.DataFrame(columns=KEY + ["device_name", "epoch_s_median"])  # no GPU model left to predict
    return rows, none, options, billing, []


def option_row(text: str, option: str) -> str:
    """An option's row of --verbose's tables, its cells in every table that holds some, one space apart."""
    return " ".join(" ".join(t.split()[len(option.split()):]) for t in text.splitlines() if t.strip().startswith(option + " "))


def _priced(planned, epochs, samples):
    plan = decide.Request(epochs, samples)
    answer = decide.decide(*planned, plan=plan)
    grid, found, picks, even, notes = answer.grid, answer.lines, answer.picks, answer.evens, answer.notes
    return found, decide.render(found, grid, picks, even, notes, plan)


def test_the_planned_run_takes_the_fitted_time_per_epoch_times_its_epochs(planned):
    for epochs, n in ((10, 40_000), (20, 40_000), (10, 3_000), (7, 2_000)):
        found, _ = _priced(planned, epochs, n)
        got = {o.option: o for o in found}
        own = next(o for o in found if o.kind == decide.OWN_CPU)
        assert own.wall_s == pytest.approx(1 + epochs * (0.01 + 1e-5 * n))
        # eight H100 billed per second, no start-up: the wall is the one run
        assert got["eight H100"].wall_s == pytest.approx(1 + epochs * (0.02 + 2e-6 * n))
        assert got["one H100"].wall_s == pytest.approx(600 + 1 + epochs * (0.02 + 2e-6 * n))


def test_the_planned_run_says_whether_its_size_was_measured_or_how_far_outside(planned):
    inside, text = _priced(planned, 10, 3_000)
    assert {o.reach for o in inside} == {"inside 1,000-4,000"} and not any(o.predicted for o in inside)
    assert "~" not in text.split("\n")[2] and "planned run: 10 epochs of 3,000 samples of tab, depth 4, batch 100 ==" in text
    measured, _ = _priced(planned, 10, 2_000)
    assert {o.reach for o in measured} == {"measured"} and not any(o.predicted for o in measured)
    past, text = _priced(planned, 10, 40_000)
    assert {o.reach for o in past} == {"10x past 4,000 ±0.0%"}  # a line through three points on it: no residual
    assert all(o.predicted for o in past) and all(o.extrapolated for o in past) and not any(o.modelled for o in past)
    own = next(o.option for o in past if o.kind == decide.OWN_CPU)
    # its time per epoch and the run's (1 + 10 x 0.41 s), extrapolated, its electricity at the nominal 65 W, no price
    assert option_row(text, own).endswith("0.41 s/epoch ~5.1 s < $0.01 extrapolated 10x past 4,000 ±0.0% *")
    assert f"  measured on box; electricity: nominal 65 W (--cpu-watts): {own}" in text
    below, _ = _priced(planned, 10, 100)
    assert {o.reach for o in below} == {"10x below 1,000 ±0.0%"}


def test_a_planned_run_is_one_named_shape_never_a_sum_and_a_whole_dataset_batch_grows_with_it(planted):
    _, _, options, billing, _ = planted
    two = frame(planned_rows(width=64) + planned_rows(width=128, slower=2.0)).assign(results_dir="/home/me/r")
    none = pd.DataFrame(columns=KEY + ["device_name", "epoch_s_median"])
    with pytest.raises(ValueError, match=r"the rows hold widths 64 and 128: give --width 64 or --width 128"):
        decide.decide(two, none, options, billing, [], plan=decide.Request(10, 8_000))
    answer = decide.decide(two, none, options, billing, [], plan=decide.Request(10, 8_000, axes=(("width", "128"),)))
    grid, found = answer.grid, answer.lines
    assert [(c.width, c.trials) for c in grid] == [(128, 1)]
    own = next(o for o in found if o.kind == decide.OWN_CPU)
    assert own.wall_s == pytest.approx(1 + 10 * 2 * (0.01 + 1e-5 * 8_000))  # the wide shape alone
    assert own.epoch_s == pytest.approx(2 * (0.01 + 1e-5 * 8_000))
    full = frame(planned_rows(batch_size="N")).assign(results_dir="/home/me/r")  # peaks: one batch, the whole set
    plan = decide.Request(10, 8_000)
    answer = decide.decide(full, none, options, billing, [], plan=plan)
    grid, found = answer.grid, answer.lines
    assert [c.batch_size for c in grid] == [8_000]
    assert next(o for o in found if o.kind == decide.OWN_CPU).wall_s == pytest.approx(1 + 10 * (0.01 + 1e-5 * 8_000))


def test_a_size_outside_one_measured_size_scales_per_sample_and_a_falling_line_is_held_flat():
    one = decide.along(np.array([1000.0]), np.array([0.5]), 3000)
    assert one.value == pytest.approx(1.5) and one.reach == "3x past 1,000 per sample"
    flat = decide.along(np.array([1e3, 2e3, 4e3]), np.array([1.0, 0.9, 0.95]), 8000)  # noise on a flat curve
    assert flat.value == pytest.approx(0.95) and flat.reach.startswith("2x past 4,000 ±")
    curved = decide.along(np.array([1e3, 2e3, 4e3, 8e3]), np.array([1.0, 1.0, 3.0, 9.0]), 16000)
    assert curved.used == (1, 2, 3) and curved.spread > 0.05  # the three largest sizes; their misfit shown


def test_a_planned_run_without_workload_is_refused_naming_the_workloads_present(tmp_path, capsys):
    results = write_rows(planned_rows("tab") + planned_rows("peaks"), tmp_path / "mine")
    assert main(["decide", str(results), "--epochs", "5", "--dataset-size", "9000", "--no-reference"]) == 2
    err = capsys.readouterr().err
    assert "--workload is needed with --epochs/--dataset-size" in err and "2 workloads (peaks, tab)" in err
    assert main(["decide", str(results), "--epochs", "5", "--workload", "tab", "--no-reference"]) == 2
    assert "--epochs needs --dataset-size too" in capsys.readouterr().err
    assert main(["decide", str(results), "--epochs", "5", "--samples", "9000", "--workload", "lenet",
                 "--no-reference"]) == 2
    assert "--workload lenet: no ok row of it in the results read (workloads there: peaks, tab)" in capsys.readouterr().err


def _host_rows(workloads, device, epoch, host, when, **values) -> list[dict]:
    return [_timed(row(w, device, [epoch] * 3, hostname=host, finished_at=pd.Timestamp(when, tz="UTC"),
                       gpus_requested=1.0 if device == "cuda" else None, **values), 1, epoch, 1) for w in workloads]


def test_a_measured_gpu_is_never_labelled_predicted_and_the_one_you_ran_on_is_an_option(planted, tmp_path):
    from crossover.analysis.load import read
    _, _, options, billing, boxes = planted
    # your H100 host measured disc only (24 s a trial); its CPU measured disc and tabular (112 s each)
    mine = write_rows(_host_rows(["disc"], "cuda", 2.0, "h100-host", "2026-11-24")
                      + _host_rows(["disc", "tabular"], "cpu", 10.0, "h100-host", "2026-11-24"), tmp_path / "mine")
    rows = read(mine)
    tab = eager_ok(rows).query("workload == 'tabular'")[KEY].iloc[:1]
    # the model's word for the H100 at tabular, the one configuration no H100 row measured: 2 s fixed + 11 x 6 s
    predicted = tab.assign(device_name="H100", epoch_s_median=6.0, epoch_s_lo=5.0, epoch_s_hi=8.0, predicted=True)

    found = decide.decide(rows, predicted, options, billing, boxes, asked={"disc": 4}).lines
    got = {o.option: o for o in found}
    yours = got["your H100 (measured here)"]
    # already owned: its electricity alone, at the nominal 300 W (no gpu_energy_j in these rows)
    assert yours.kind == decide.OWN_GPU and yours.wall_s == pytest.approx(4 * 24)
    assert yours.usd == pytest.approx(4 * 24 / 3600 * 0.3 * 0.17) and "nominal 300 W" in yours.electricity
    for option in ("your H100 (measured here)", "one H100", "eight H100"):
        line = got[option]
        assert not line.predicted and decide.source(line).startswith("measured on h100-host, 2026-11-24")
        assert "~" not in decide.said(line) and "predicted" not in decide.source(line)

    found = decide.decide(rows, predicted, options, billing, boxes, asked={"disc": 1, "tabular": 1}).lines
    got = {o.option: o for o in found}
    share = 68 / (24 + 68)  # the tabular trial's share of the GPU-time: predicted
    for option in ("your H100 (measured here)", "one H100"):
        assert got[option].predicted_share == pytest.approx(share)
        assert decide.source(got[option]).startswith(f"{share:.0%} predicted; measured on h100-host, 2026-11-24")
    # the H100 measured at disc is not predicted there: the prediction, made for tabular only, is used there only
    assert got["eight H100"].wall_s == pytest.approx(68) and got["eight H100"].wall_lo_s == pytest.approx(57)


def test_a_predicted_figure_prints_its_interval_and_the_chart_draws_it(planted):
    answer = decide.decide(*planted, asked={"disc": 10})
    found, picks = answer.lines, answer.picks
    box = next(o for o in found if o.option == "4090 box")
    # 10 trials of 2 s fixed + 11 epochs at 3 s (2.5 s to 4 s): the fixed seconds are measured, not uncertain
    assert (box.wall_lo_s, box.wall_s, box.wall_hi_s) == pytest.approx((295, 350, 460))
    assert box.usd_lo == pytest.approx(295 / 3600 * 1.5) and box.usd_hi == pytest.approx(460 / 3600 * 1.5)
    assert decide.said(box) == "4090 box, ~5.83 min (4.9-7.7), ~$0.15 (0.12-0.19)"
    assert decide.source(box) == "predicted"
    drawn = charts.decision(found, (), picks, "the sweep", "sweep")
    spec = str(drawn["sweep_front"].to_dict())
    assert "wall_lo_h" in spec and "wall_hi_h" in spec and "usd_lo" in spec and "usd_hi" in spec
    assert "usd_hi" in str(drawn["sweep_cost"].to_dict())


def test_the_default_decision_names_three_picks_in_its_lines_and_verbose_shows_the_break_even(tmp_path, monkeypatch, capsys):
    """A realistic set: an H100 host's own rows of every built-in (the shipped ones, copied as yours), the
    reference rows set beside them, the shipped prices and home boxes."""
    import shutil
    shutil.copytree(REFERENCE / "h100-2026-11-26" / "scaling", tmp_path / "mine" / "scaling")
    monkeypatch.chdir(tmp_path)
    assert main(["decide", "mine", "--deadline", "1", "--out", "charts"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert len(lines) <= decide.BRIEF_LINES <= 25 and max(map(len, lines)) <= 100, text
    # the three picks, each with its run time and cost: the GPU to rent, the box to buy (its break-even in sweeps a
    # month and what its write-off assumes), your CPU; and your own GPU, which the rows measured
    picked = {t.split(": ")[0]: t for t in lines if ": " in t}
    assert {"rent, fastest", "buy", "your CPU", "your GPU", "cheapest within 1 h"} <= set(picked), text
    assert picked["cheapest within 1 h"] == "cheapest within 1 h: your H100 (measured here), as your GPU above"
    assert all(" min" in picked[k] or " h," in picked[k] for k in ("rent, fastest", "buy", "your CPU")), text
    buy = " ".join(" ".join(text.split("buy: ")[1].split("\n")[:4]).split())
    assert "sweeps a month against renting" in buy and "write-off: $" in buy and "of each month" in buy, text
    assert not buy.startswith("GTX 960 box of 2017"), text  # what that box cost in 2017 is a record, not one for sale
    assert picked["your GPU"].startswith("your GPU: your H100 (measured here)"), text
    assert sum("stale prices" in t for t in lines) <= 1 and "against the cheapest" not in text
    assert main(["decide", "mine", "--verbose", "--out", "charts"]) == 0
    verbose = capsys.readouterr().out
    assert "against the cheapest on-demand GPU" in verbose and "how each option is costed:" in verbose


def test_a_user_model_measured_on_one_gpu_is_predicted_elsewhere_with_an_interval():
    # the ResNet-18 example's shipped rows (one GPU, one workload) are predicted from the fit on every shipped
    # reference row: an unmeasured GPU gets a finite 90% interval around its prediction, never none
    from crossover.analysis.load import REFERENCE, read
    rows = read(REFERENCE / "h100-2026-11-26" / "resnet18")
    guess, note = decide.predictions(rows, ["A100"])
    mine = guess[guess["workload"] == "resnet18_cifar"]
    assert not note and len(mine) and np.isfinite(mine[["epoch_s_lo", "epoch_s_hi"]].to_numpy(float)).all()
    assert (mine["epoch_s_lo"] < mine["epoch_s_median"]).all() and (mine["epoch_s_median"] < mine["epoch_s_hi"]).all()


def test_a_user_workload_in_a_folder_of_its_own_gets_gpu_options_and_the_same_beside_the_builtins(tmp_path):
    """A user's model measured on the CPU alone, in a folder of its own: every GPU with a price or a home box
    is an option, predicted with its interval; with the built-ins' CPU rows in the same folder (and the
    reference GPU rows they bring beside them) every figure is the same to the last digit."""
    import shutil

    from crossover.analysis import model
    from crossover.analysis.load import REFERENCE
    user_cpu_rows(tmp_path / "alone" / "my_cnn")
    user_cpu_rows(tmp_path / "shared" / "my_cnn")
    shutil.copytree(REFERENCE / "h100-2026-11-26" / "scaling", tmp_path / "shared" / "scaling",
                    ignore=shutil.ignore_patterns("*gpu*"))
    run = ["--epochs", "30", "--dataset-size", "50000", "--out", str(tmp_path / "charts"), "--json"]
    assert main(["decide", str(tmp_path / "alone"), *run, str(tmp_path / "alone.json")]) == 0
    assert main(["decide", str(tmp_path / "shared"), "--workload", "my_cnn", *run, str(tmp_path / "shared.json")]) == 0
    alone, shared = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("alone", "shared"))
    gpus = [r for r in alone if r["gpu"]]
    options, _ = prices.load_prices()
    offered = {o.gpu for o in options if o.gpu} | {prices.load_home_box(p).gpu for p in prices.home_boxes()}
    assert {r["gpu"] for r in gpus} == offered and offered <= set(model.load_devices())
    assert all(r["basis"] == "predicted" and r["epoch_s_low"] < r["epoch_s"] < r["epoch_s_high"] for r in gpus)
    assert all(r["fits"] is True for r in gpus)  # an 11M-parameter CNN fits every card, the 2 GB GTX 960 too
    figures = ("epoch_s", "epoch_s_low", "epoch_s_high", "run_s", "usd", "basis")
    assert ({r["option"]: [r[f] for f in figures] for r in alone} == {r["option"]: [r[f] for f in figures] for r in shared})


def test_the_decision_is_printed_even_where_its_charts_cannot_be_written(tmp_path, monkeypatch, capsys):
    # --out under a file: the charts' folder cannot be made (a real OSError), and the answer stays, exit 0
    import shutil
    shutil.copytree(REFERENCE / "h100-2026-11-21-engines" / "engines-cpu", tmp_path / "mine" / "engines-cpu")
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.chdir(tmp_path)
    assert main(["decide", "mine", "--out", "file/charts"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert any(t.startswith("rent, fastest: ") for t in lines), out
    assert lines[-1] == ("charts: not written (cannot write file/charts: Not a directory; give --out a folder you "
                         "can write)")
    assert "Traceback" not in out + err


# One planned run: one configuration, whether it fits each card, your own machine's electricity.
T4_PRICES = {"providers": PROVIDERS, "options": OPTIONS + [
    {"name": "one T4", "provider": "Second", "region": "r", "gpu": "T4", "gpus": 1, "vcpus": 4,
     "on_demand": {"usd_per_h": 0.1, **PRICE}, "spot": None}]}


def test_a_folder_of_two_batch_sizes_asks_which_and_prices_the_one_named_never_their_sum(tmp_path, capsys):
    results = write_rows(planned_rows(batch_size=32) + planned_rows(batch_size=128, slower=0.5), tmp_path / "mine")
    run = ["decide", str(results), "--epochs", "10", "--dataset-size", "4000", "--no-reference", "--out", str(tmp_path / "c")]
    assert main(run) == 2
    assert ("the rows hold batch sizes 32 and 128: give --batch-size 32 or --batch-size 128"
            in capsys.readouterr().err)
    assert main(run + ["--batch-size", "64"]) == 2
    assert "--batch-size 64: the rows of tab hold batch sizes 32 and 128 only" in capsys.readouterr().err
    assert main(run + ["--batch-size", "128", "--json", str(tmp_path / "run.json")]) == 0
    out = capsys.readouterr().out
    assert "== the planned run: 10 epochs of 4,000 samples of tab, depth 4, batch 128 ==" in out
    listed = json.loads((tmp_path / "run.json").read_text())
    own = next(r for r in listed if r["option"].startswith("your CPU"))
    epoch = 0.5 * (0.01 + 1e-5 * 4000)  # batch 128's line alone: batch 32's (twice as slow) is not added
    assert own["epoch_s"] == pytest.approx(epoch) and own["run_s"] == pytest.approx(1 + 10 * epoch)
    assert (own["batch_size"], own["dataset_size"], own["gpu"], own["basis"]) == (128, 4000, None, "measured")
    # the line says the time per epoch, the run's time and its cost
    assert f"your CPU, 2 threads (measured here), {epoch:.3g} s/epoch, " in out


def test_json_lists_every_option_with_its_figures_on_stdout(tmp_path, capsys):
    results = write_rows(planned_rows(), tmp_path / "mine")
    assert main(["decide", str(results), "--epochs", "10", "--dataset-size", "3000", "--no-reference",
                 "--out", str(tmp_path / "c"), "--json", "-"]) == 0
    out, err = capsys.readouterr()
    listed = json.loads(out)  # stdout holds the JSON alone; the answer went to stderr
    assert "the planned run" in err and len(listed) > 3
    fields = {"option", "gpu", "batch_size", "dataset_size", "epoch_s", "epoch_s_low", "epoch_s_high", "run_s", "usd",
              "fits", "basis"}
    assert all(fields <= set(r) for r in listed)
    h100 = next(r for r in listed if r["option"] == "Lambda 1x H100 SXM")
    assert h100["gpu"] == "H100" and h100["basis"] == "measured" and h100["epoch_s"] == pytest.approx(0.02 + 2e-6 * 3000)
    assert h100["epoch_s_low"] == h100["epoch_s"] == h100["epoch_s_high"] and h100["fits"] is None  # no peak, no bytes
    assert decide.records((), pd.DataFrame()) == []


def _big(rows, peak=None):
    """Rows of a model too large for a 16 GB card: 1.5e9 parameters, 4 GB moved a step (activations ~1 GB)."""
    for r in rows:
        r.update(n_params=1_500_000_000, bytes_per_step=4_000_000_000, optimizer_bytes_per_step=0)
        if peak and r["device"] == "cuda":
            r.update(peak_gpu_bytes=peak, data_on_device=True)
    return rows


@pytest.mark.parametrize("measured", [True, False])
def test_a_model_too_large_for_a_16_gb_card_does_not_fit_the_t4_and_is_never_picked(tmp_path, measured):
    from crossover.analysis.load import read
    options, billing = prices.load_prices(write(tmp_path, "p.yaml", T4_PRICES))
    rows = planned_rows() if measured else [r for r in planned_rows() if r["device"] == "cpu"]
    rows = read(write_rows(_big(rows, 30e9 if measured else None), tmp_path / "mine"))
    key = eager_ok(rows)[KEY].drop_duplicates()
    # the T4 predicted far faster than anything: only its memory keeps it out of the picks
    guess = [key.assign(device_name=gpu, epoch_s_median=1e-4, epoch_s_lo=1e-4, epoch_s_hi=2e-4) for gpu in ["T4"] +
             ([] if measured else ["H100"])]
    plan = decide.Request(10, 3000)
    answer = decide.decide(rows, pd.concat(guess), options, billing, [], plan=plan)
    grid, found, picks, even, notes = answer.grid, answer.lines, answer.picks, answer.evens, answer.notes
    t4 = next(o for o in found if o.option == "one T4")
    needs = 30e9 + decide.CONTEXT_BYTES if measured else 16 * 1.5e9 + 4e9 / 4 + decide.FLOOR_BYTES + decide.CONTEXT_BYTES
    assert t4.fits is False and t4.needs_gb == pytest.approx(needs / 1e9)
    assert all(o.fits is True for o in found if o.model == "H100")
    text = decide.render(found, grid, picks, even, notes, plan)
    t4_line = option_row(text, "one T4")
    assert f"does not fit: needs ~{needs / 1e9:.2g} GB of 16" in t4_line
    assert "peak measured on H100" in text if measured else "estimated from n_params and bytes_per_step" in text
    assert picks["fastest"].option != "one T4" and picks["cheapest"].option != "one T4"
    assert "one T4" not in [o.option for o in decide.pareto(found)]
    assert "does not fit T4 (16 GB), left out of the picks" in " ".join(decide.brief(found, grid, picks, notes, plan).split())


def test_your_cpu_costs_its_electricity_measured_by_rapl_else_at_nominal_watts(planted):
    _, _, options, billing, _ = planted
    none = pd.DataFrame(columns=KEY + ["device_name", "epoch_s_median"])
    rows = planned_rows()
    plan = decide.Request(10, 3000)
    wall = 1 + 10 * (0.01 + 1e-5 * 3000)
    found = decide.decide(frame(rows).assign(results_dir="/home/me/r"), none, options, billing, [], plan=plan,
                          power=prices.Electricity(usd_per_kwh=0.2, cpu_w=30)).lines
    own = next(o for o in found if o.kind == decide.OWN_CPU)
    assert own.usd > 0 and own.usd == pytest.approx(wall / 3600 * 0.030 * 0.2)
    assert decide.source(own).endswith("electricity: nominal 30 W (--cpu-watts)") and "30 W" in own.basis
    for r in rows:  # RAPL read 40 W over the timed epochs
        r["cpu_energy_j"] = 40.0 * r["train_s"] if r["device"] == "cpu" else None
    found = decide.decide(frame(rows).assign(results_dir="/home/me/r"), none, options, billing, [], plan=plan,
                          power=prices.Electricity(usd_per_kwh=0.2, cpu_w=30)).lines
    own = next(o for o in found if o.kind == decide.OWN_CPU)
    assert own.usd == pytest.approx(wall / 3600 * 0.040 * 0.2)
    assert decide.source(own).endswith("electricity: RAPL 40 W")
    with pytest.raises(ValueError, match="--cpu-watts must be a number > 0, got -5"):
        prices.Electricity(cpu_w=-5)


def test_a_busy_extrapolation_whose_error_exceeds_it_is_marked_and_never_called_measured(planned):
    _, none, options, billing, _ = planned
    # CPU rows timed on a busy host, no quiet row of any: 22, 1.5 and 23 s an epoch at 1,000, 2,000 and 4,000
    # samples, so the line past them is off by 516% (RMS) where it was measured
    rows = frame([_timed(row("net", "cpu", [t] * 3, dataset_size=n, outside_load=True), 1.0, t, 0.0) | {"epochs": 4}
                  for n, t in ((1_000, 22.0), (2_000, 1.5), (4_000, 23.0))]).assign(results_dir="/home/me/results/mine")
    plan = decide.Request(epochs=30, samples=50_000)
    answer = decide.decide(rows, none, options, billing, [], plan=plan)
    grid, found, picks, even, notes = answer.grid, answer.lines, answer.picks, answer.evens, answer.notes
    mine = next(o for o in found if o.kind == decide.OWN_CPU)
    said = decide.how_known(mine, plan, picked=True)
    assert said.startswith("unreliable: measure nearer 50,000 (12.5x past 4,000 ±") and said.endswith("[busy]")
    assert "measured" not in said.replace("measure nearer", "")
    brief = decide.brief(found, grid, picks, notes, plan)
    assert len(brief.splitlines()) <= decide.BRIEF_LINES and max(map(len, brief.splitlines())) <= decide.WIDTH
    flat = " ".join(brief.split())  # a pick wraps rather than lose its end
    assert "[busy]: timed while your machine was busy" in flat
    cheapest = flat[flat.index("your CPU: "):]  # the CPU pick: the only option
    assert cheapest.split("< $0.01; ")[1].startswith("unreliable: measure nearer 50,000") and "; measured" not in cheapest
    # the verbose table and its source column carry the mark too
    assert "[busy]" in decide.source(mine) and "unreliable: measure nearer 50,000" in decide.render(
        found, grid, picks, even, notes, plan)


def test_a_loaded_row_beside_a_quiet_one_of_its_configuration_is_left_out_of_the_decision(planned):
    _, none, options, billing, _ = planned
    quiet = row("net", "cpu", [1.0] * 3, seed=0)
    loaded = row("net", "cpu", [9.0] * 3, seed=1, outside_load=True)  # the same configuration, timed on a busy host
    rows = frame([_timed(r, 0.0, r["epoch_s"][0], 0.0) for r in (quiet, loaded)]).assign(results_dir="/home/me/results/mine")
    found = decide.decide(rows, none, options, billing, []).lines
    mine = next(o for o in found if o.kind == decide.OWN_CPU)
    assert mine.wall_s == pytest.approx(10 * 1.0 + 1.0) and "[busy]" not in decide.source(mine)


def test_memory_needed_takes_a_counted_peak_over_the_formula_and_the_formula_where_none_was_counted():
    step = {"dataset_size": 1000, "n_params": 10_000_000, "bytes_per_step": 8e9, "optimizer_bytes_per_step": 0.0}
    counted = decide.memory_needed(pd.DataFrame([step | {"peak_memory_bytes": 3e9}]), 1000, False)
    assert counted["needs_bytes"] == 3e9 + decide.FLOOR_BYTES + decide.CONTEXT_BYTES
    assert counted["needs_how"].startswith("a step's peak, counted")
    formula = decide.memory_needed(pd.DataFrame([step | {"peak_memory_bytes": None}]), 1000, False)
    assert formula["needs_how"] == "estimated from n_params and bytes_per_step"
    assert formula["needs_bytes"] == pytest.approx(16 * 10_000_000 + 8e9 / 4 + decide.FLOOR_BYTES + decide.CONTEXT_BYTES)
    # a frozen parameter (requires_grad False) holds its weight alone: no gradient, no optimiser state
    frozen = decide.memory_needed(pd.DataFrame([step | {"peak_memory_bytes": None, "n_frozen_params": 300_000_000}]),
                                  1000, False)
    assert frozen["needs_bytes"] - formula["needs_bytes"] == pytest.approx(4 * 300_000_000)


def test_the_largest_batch_that_fits_is_the_cards_memory_less_the_fixed_part_over_a_samples_share():
    # 10 GB at batch 64, 0.1 GB of it a sample: 3.6 GB fixed; an 8 GB card holds 44 samples beside it
    assert decide.largest_batch(10e9, 0.1e9, 64, 8) == 44
    assert decide.largest_batch(10e9, 0.1e9, 64, 3) == 0  # not even the fixed part fits
    assert decide.largest_batch(10e9, 0.0, 64, 8) == 0  # a sample adds nothing: a smaller batch cannot help


def test_figures_carry_the_digits_their_interval_supports():
    # a break-even resting on a prediction to two figures ('~680 runs a month', never '~683.06'); a measured one three
    assert [decide.significant(v, 2) for v in (683.06, 0.04567, 12_345.6, 7.0)] == ["680", "0.046", "12,000", "7.0"]
    assert decide.significant(683.06, 3) == "683"
    even = [decide.Even(box="box", against="one H100", versus="cheapest on-demand GPU", against_usd=1.0,
                        against_h=float("nan"), box_usd_energy=float("nan"), box_h=float("nan"),
                        fixed_usd_per_month=float("nan"), sweeps_per_month=683.06, box_hours_per_month=12.345,
                        predicted=True)]
    assert decide.evens(even, "run") == ["box against the cheapest on-demand GPU (one H100, $1.00 a run): cheaper "
                                          "beyond ~680 runs a month (12 h of use)"]


def test_a_cpu_measured_at_one_size_is_its_step_as_timed_there_never_a_line_per_sample(tmp_path):
    # the user's CPU timed 256 samples (4 steps of 64) at 1.0 s an epoch, its epochs 0.9-1.2 s, 3 s of set-up; the run is
    # 10 epochs of 50,000 (782 steps): 782 / 4 of its epoch, the interval its fastest and slowest epoch scaled alike, the
    # set-up as timed (not 195x); the reach says how far from the size measured
    mine = frame([_timed(row("mine", "cpu", [0.9, 1.0, 1.2], batch_size=64, dataset_size=256), 3.0, 1.0, 0.0)])
    options, billing = prices.load_prices(write(tmp_path, "p.yaml", {"providers": PROVIDERS, "options": OPTIONS}))
    answer = decide.decide(mine, None, options, billing, [], plan=decide.Request(10, 50_000))
    own = next(o for o in answer.lines if o.kind == decide.OWN_CPU)
    steps = 782 / 4
    assert own.epoch_s == pytest.approx(1.0 * steps) and own.epoch_s != pytest.approx(1.0 * 50_000 / 256)
    assert (own.epoch_lo, own.epoch_hi) == (pytest.approx(0.9 * steps), pytest.approx(1.2 * steps))
    assert own.wall_s == pytest.approx(3.0 + 10 * steps)
    assert own.predicted and own.reach == "195x past 256, its step as timed there"
    said = decide.brief(answer.lines, answer.grid, answer.picks, answer.notes, answer.request)
    assert "your CPU: " in said and "~196 s/epoch (176-235)" in " ".join(said.split())


def test_the_fronts_figures_are_never_cut_only_an_options_name(tmp_path):
    # a run of a fraction of a cent: its cost and interval run to 40 columns, and stay whole on the front's line
    mine = frame([_timed(row("mine", "cpu", [0.9, 1.0, 1.2], batch_size=64, dataset_size=256), 3.0, 1.0, 0.0)])
    options, billing = prices.load_prices(write(tmp_path, "p.yaml", {"providers": PROVIDERS, "options": OPTIONS}))
    answer = decide.decide(mine, None, options, billing, [], plan=decide.Request(10, 50_000))
    tiny = [dataclasses.replace(o, usd=o.usd * 1e-7, usd_lo=o.usd_lo * 1e-7, usd_hi=o.usd_hi * 1e-7)
            for o in answer.lines]
    said = decide.brief(tiny, answer.grid, answer.picks, answer.notes, answer.request, lines=40).splitlines()
    front = said[said.index(next(s for s in said if s.startswith("the cost-versus-time front"))) + 1:]
    front = [s for s in front if s.startswith("  ")]
    for line in front:  # each option's figures whole on its line, whatever of its name or source is cut
        option = next(o for o in tiny if line[2:].startswith(o.option[:8]))
        assert decide.money(option) in line and decide.run_time(option) in line, line


def test_money_and_time_read_as_people_read_them_whatever_their_size(tmp_path):
    # one form of each, in every screen: no exponent, no run of zeros, seconds under a minute
    assert [decide.usd(v) for v in (0, 2.6e-7, 7.2e-6, 0.0099, 0.01, 0.314, 1234.5)] == [
        "$0.00", "< $0.01", "< $0.01", "< $0.01", "$0.01", "$0.31", "$1,234.50"]
    assert [decide.duration(s) for s in (0.0302, 31.4, 60, 302, 5400, 3600 * 1234)] == [
        "0.0302 s", "31.4 s", "1 min", "5.03 min", "1.5 h", "1,230 h"]
    mine = frame([_timed(row("mine", "cpu", [0.9, 1.0, 1.2], batch_size=64, dataset_size=256), 3.0, 1.0, 0.0)])
    options, billing = prices.load_prices(write(tmp_path, "p.yaml", {"providers": PROVIDERS, "options": OPTIONS}))
    own = next(o for o in decide.decide(mine, None, options, billing, [], plan=decide.Request(10, 50_000)).lines
               if o.kind == decide.OWN_CPU)

    def predicted(usd, lo, hi, wall_s=30.2, wall_lo_s=20.0, wall_hi_s=45.0):
        return dataclasses.replace(own, predicted=True, usd=usd, usd_lo=lo, usd_hi=hi, wall_s=wall_s,
                                   wall_lo_s=wall_lo_s, wall_hi_s=wall_hi_s)

    # an interval follows the same rule: under a cent it says only how far above one it may reach
    assert [decide.money(predicted(*usd)) for usd in ((2.6e-7, 1e-7, 5e-7), (0.005, 0.003, 0.02),
                                                      (0.03, 0.005, 0.05), (0.31, 0.25, 0.40))] == [
        "< $0.01", "< $0.01 (up to 0.02)", "~$0.03 (up to 0.05)", "~$0.31 (0.25-0.40)"]
    assert decide.run_time(predicted(0.31, 0.25, 0.40)) == "~30.2 s (20-45)"
    assert decide.run_time(predicted(0.31, 0.25, 0.40, 0.0302, 0.02, 0.045)) == "~0.0302 s (0.02-0.045)"
    assert decide.run_time(predicted(0.31, 0.25, 0.40, 290.0, 230.0, 6000.0)) == "~4.83 min (3.8-100)"


def test_every_table_of_verbose_fits_the_width_split_where_it_must(planned, tmp_path):
    # the planned run's table had 14 columns, 300 and more wide: split into tables, each led by the option's name
    found, text = _priced(planned, 10, 40_000)
    lines = text.splitlines()
    assert all(len(line) <= decide.WIDTH or " " not in line.strip() for line in lines), text  # an address stays whole
    tables = [n for n, line in enumerate(lines) if line.split()[:1] == ["option"]]
    assert len(tables) >= 2, text
    for start in tables:  # every option in every table, a row each
        rows = [line.strip() for line in lines[start + 1:start + 1 + len(found)]]
        assert [next(o.option for o in found if r.startswith(o.option + " ")) for r in rows] == [
            o.option for o in found], text
    for o in found:  # its cells whole
        assert decide.money(o) in option_row(text, o.option) and decide.run_time(o) in option_row(text, o.option)


def test_a_command_line_names_the_steps_its_decision_looks_up_and_prints_nothing_where_it_is_refused(tmp_path, capsys):
    # what `crossover decide` and `report` count before they hand the analysis the counts (sweeps/command.py): the
    # planned run's step, at PyTorch's default precision too where the run trains at another; none where there is no
    # planned run or the line is refused, which main, run after, says in its one line
    from crossover.analysis.__main__ import wanted
    from crossover.schema import BUILTIN_MODULE
    from crossover.step import Step

    results = write_rows([row("peaks", "cpu", [0.01, 0.011], batch_size=64, dataset_size=256, width=128,
                              workload_module=BUILTIN_MODULE)], tmp_path / "mine")
    run = ["decide", str(results), "--epochs", "10", "--dataset-size", "50000", "--no-reference"]
    step = Step("peaks", 10, 64, 50_000, (("depth", 4), ("width", 128)))
    assert wanted(run) == (step,) and wanted(["report", *run[1:]]) == (step,)
    assert wanted([*run, "--precision", "bf16"]) == (Step("peaks", 10, 64, 50_000, step.axes, precision="bf16"), step)
    for refused in (run[:2], ["summary", str(results)], ["decide", "--bogus"], ["decide", "--help"],
                    ["decide", str(tmp_path / "none"), "--epochs", "1", "--dataset-size", "9"], [*run, "--epochs", "0"]):
        assert wanted(refused) == (), refused
    assert capsys.readouterr() == ("", "")

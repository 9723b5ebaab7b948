"""The crossover finder on synthetic rows with a planted crossover: it finds the point, says 'none'
where there is none, says 'within noise' where the arms are equal, says the other answers as such, and
its interval, over runs, covers the truth in most plantings and counts every draw. A row timed under
outside load is left out unless asked for, and a cold row's fixed costs give way to warm runs'."""

import numpy as np
import pandas as pd
import pytest

from crossover.analysis.crossings import DRAW_KINDS, TO_A, TO_B, Bootstrap, find, render
from crossover.analysis.load import cold_starts
from crossover.analysis.selection import select, timed
from analysis_rows import frame, plant, row

SIZES = np.geomspace(1e2, 1e6, 9)
CPU = lambda x: 1e-3 * x / 1e4  # noqa: E731  time per epoch grows linearly with size on the CPU
GPU = lambda x: 1e-3 * (x / 1e4) ** 0.5  # noqa: E731  and as its square root on the GPU: equal at x = 1e4


def equal_at(x0):
    """The GPU's curve, equal to the CPU's at x0 and growing as its square root."""
    return lambda x: CPU(x0) * (x / x0) ** 0.5


FEW = Bootstrap(draws=400)


def epoch_line(rows, boot=FEW):
    table = find(select(rows), boot)
    return table[(table["metric"] == "epoch_s") & (table["axis"] == "n_params")].iloc[0]


def test_recovers_a_planted_crossover_and_names_the_faster_side():
    line = epoch_line(plant(SIZES, CPU, GPU, noise=0.05))
    assert line["verdict"] == "crossover"
    assert (line["device_a"], line["device_b"]) == ("cpu", "cuda")
    assert (line["faster_below"], line["faster_above"]) == ("A", "B")
    assert line["crossover"] == pytest.approx(1e4, rel=0.15)
    assert line["ci_low"] < line["crossover"] < line["ci_high"]
    assert line["answer"].startswith("cuda faster past n_params ~ ")


def test_interval_covers_the_planted_point_in_most_seeded_draws():
    covered = [line["ci_low"] <= 1e4 <= line["ci_high"]
               for line in (epoch_line(plant(SIZES, CPU, GPU, seed=s)) for s in range(40))]
    assert np.mean(covered) >= 0.8, covered


def test_interval_over_runs_covers_the_planted_point_when_runs_disagree():
    # five runs a size, each run's epochs steady (1%) but the runs 20% apart: resampling runs first
    # keeps the run-to-run noise in the interval (measured: 39 of 40 plantings covered, 400 draws each);
    # the bootstrap of pooled epochs that this replaced, treating them as independent, covered 24 of 40
    covered = [line["ci_low"] <= 1e4 <= line["ci_high"]
               for line in (epoch_line(plant(SIZES, CPU, GPU, seed=s, runs=5, run_noise=0.2, noise=0.01))
                            for s in range(40))]
    assert np.mean(covered) >= 0.8, covered


def test_runs_that_disagree_widen_the_interval():
    def width(run_noise, seed):
        line = epoch_line(plant(SIZES, CPU, GPU, seed=seed, runs=3, run_noise=run_noise, noise=0.05))
        return np.log(line["ci_high"] / line["ci_low"])
    for seed in range(3):
        assert width(0.2, seed) > 2 * width(0.0, seed)


@pytest.mark.parametrize("runs", [1, 3])
def test_equal_arms_are_within_noise(runs):
    line = epoch_line(plant(SIZES, CPU, CPU, noise=0.01, runs=runs))
    assert line["verdict"] == "within noise" and line["n_within_noise"] == len(SIZES)
    assert np.isnan(line["crossover"]) and pd.isna(line["faster_above"]) and line["crossings"] == []
    assert line["answer"].startswith("within noise over the measured range: neither cpu nor cuda faster")
    assert line["draws_agree"] == line["verdict_shares"]["within noise"]


def test_a_crossing_within_noise_is_one_crossover_when_the_ends_differ():
    # the CPU wins clearly below 1e3, the GPU above 1e5, and in between they are equal: there, the
    # measured sign of log(tA/tB) turns back and forth, which is noise and not several crossings
    gpu = lambda x: CPU(x) * (3.0 if x < 999 else 1.0 if x < 1.1e5 else 1 / 3)  # noqa: E731
    rows = plant(SIZES, CPU, gpu, noise=0.05, seed=1)
    medians = rows.assign(m=rows["epoch_s"].map(np.median)).pivot_table(index="n_params", columns="device", values="m")
    signs = np.sign(np.log(medians["cpu"] / medians["cuda"]))
    assert (signs.diff().abs() > 0).sum() > 1  # the measured sign turns more than once
    line = epoch_line(rows)
    assert line["verdict"] == "crossover" and len(line["crossings"]) == 1
    assert (line["faster_below"], line["faster_above"]) == ("A", "B") and line["n_within_noise"] == 5
    assert 316 < line["crossover"] < 3.2e5 and line["ci_low"] >= 316 and line["ci_high"] <= 3.2e5


@pytest.mark.parametrize("gpu", [GPU, CPU, lambda x: CPU(x) / 10, equal_at(160),
                                 lambda x: CPU(x) * (0.3 if 1e3 < x < 1e5 else 3.0)])
def test_every_draw_counts_in_the_verdict_shares(gpu):
    line = epoch_line(plant(SIZES, CPU, gpu, runs=2, run_noise=0.1))
    shares = line["verdict_shares"]
    assert list(shares) == list(DRAW_KINDS) and sum(shares.values()) == pytest.approx(1)
    crossover = {"B": TO_B, "A": TO_A}.get(line["faster_above"])
    assert line["draws_agree"] == shares[crossover if line["verdict"] == "crossover" else line["verdict"]]
    if line["draws_agree"] < 0.95:
        assert "draws: " in line["answer"]


@pytest.mark.parametrize("gpu, verdict, words", [
    (lambda x: 10 * CPU(x), "none in measured range", "no crossover in the measured range: cpu faster at every size"),
    (lambda x: CPU(x) / 10, "B faster everywhere", "cuda faster at every size"),
])
def test_no_crossing_is_an_answer(gpu, verdict, words):
    line = epoch_line(plant(SIZES, CPU, gpu))
    assert line["verdict"] == verdict and np.isnan(line["crossover"])
    assert line["answer"].startswith(words)
    assert line["draws_agree"] == 1.0


def test_several_crossings_are_listed():
    # the GPU wins only in the middle of the range: two crossings, near 1e3 and 1e5
    gpu = lambda x: CPU(x) * (0.3 if 1e3 < x < 1e5 else 3.0)  # noqa: E731
    line = epoch_line(plant(SIZES, CPU, gpu, noise=0.01))
    assert line["verdict"] == "several crossings"
    assert len(line["crossings"]) == 2 and 1e3 / 3 < line["crossings"][0] < 1e3 * 3
    assert "several crossings" in line["answer"]


@pytest.mark.parametrize("x0, bound, beyond, everywhere, shown", [
    # just above the smallest size: some draws have the GPU faster everywhere, the crossover below the range
    (160, "ci_low", "B faster everywhere", "cuda faster everywhere", "CI <100 (outside the measured range) to "),
    # just below the largest: some draws have the CPU faster everywhere, the crossover above the range
    (7e5, "ci_high", "none in measured range", "cpu faster everywhere", " to >1e+06 (outside the measured range)"),
])
def test_a_crossover_at_the_range_edge_has_an_open_interval_shown_as_such(x0, bound, beyond, everywhere, shown):
    line = epoch_line(plant(SIZES, CPU, equal_at(x0)))
    assert line["verdict"] == "crossover" and line["draws_agree"] < 0.95
    assert np.isinf(line[bound]) and line["ci_low"] < x0 < line["ci_high"]
    share = line["verdict_shares"][beyond]  # the draws that disagree are all of this kind, and they count
    assert share == pytest.approx(1 - line["draws_agree"])
    assert shown in line["answer"] and f"{share:.0%} {everywhere}" in line["answer"]
    assert " 0 to " not in line["answer"]  # exp(-inf) is not shown as a size


def test_the_bootstrap_is_seeded():
    rows = plant(SIZES, CPU, GPU)
    first, again = (epoch_line(rows, Bootstrap(draws=200, seed=7)) for _ in range(2))
    assert (first["ci_low"], first["ci_high"]) == (again["ci_low"], again["ci_high"])


def test_time_to_final_loss_needs_the_same_final_loss():
    rows = plant(SIZES, CPU, GPU)
    same = find(select(rows), Bootstrap(draws=100))
    assert set(same["metric"]) == {"epoch_s", "time_to_final_loss_s"}
    assert (same["verdict"] == "crossover").all()
    rows.loc[rows["device"] == "cuda", "train_loss"] = 0.9  # the GPU ended elsewhere: no common target
    diverged = find(select(rows), Bootstrap(draws=100)).query("axis == 'n_params'").set_index("metric")
    assert diverged.loc["time_to_final_loss_s", "verdict"] == "not computable"
    assert "train loss after the epochs both timed differs" in diverged.loc["time_to_final_loss_s", "note"]


def test_slices_hold_the_other_axes_fixed_and_take_seeds_as_runs_of_one_point():
    rows = frame([row("tabular", device, [t * 1.01, t, t * 0.99], width=w, dataset_size=n, seed=seed)
                  for device, slope in (("cpu", 1e-6), ("cuda", 1e-7))
                  for w in (64, 256) for n in (1000, 10000, 100000) for seed in (0, 1)
                  for t in [slope * n * w + (0 if device == "cpu" else 5e-3)]])
    table = find(select(rows), Bootstrap(draws=50))
    by_size = table[(table["axis"] == "dataset_size") & (table["metric"] == "epoch_s")]
    assert sorted(by_size["held_fixed"]) == ["depth=4, width=256, batch_size=100", "depth=4, width=64, batch_size=100"]
    assert (by_size["n_points"] == 3).all()  # seeds 0 and 1 are runs of one point, not separate points
    assert "== tabular ==" in render(table)


def test_one_arm_means_nothing_to_compare():
    rows = plant(SIZES, CPU, GPU)
    cpu = select(rows[rows["device"] == "cpu"])
    table = find(cpu)
    assert table.empty
    assert "no two arms measured at the same sizes (arms: cpu)" in render(table, cpu)


def test_time_to_a_target_loss_counts_the_epochs_each_arm_needs():
    # the GPU is 2x faster per epoch at every size, but its loss curve needs 4 epochs to reach what
    # the CPU reaches after 1: in time to that loss, the CPU wins everywhere
    rows = plant(SIZES, lambda x: 2e-3, lambda x: 1e-3, epochs=5, noise=0.01)
    fast, slow = [0.1, 0.1, 0.1, 0.1, 0.1], [0.5, 0.3, 0.2, 0.1, 0.1]
    rows["loss_curve"] = [fast if d == "cpu" else slow for d in rows["device"]]
    rows["h2d_s"] = rows["warmup_s"] = 0.0
    table = find(select(rows), Bootstrap(draws=100)).query("axis == 'n_params'").set_index("metric")
    assert table.loc["epoch_s", "verdict"] == "B faster everywhere"
    assert table.loc["time_to_target_loss_s", "verdict"] == "none in measured range"  # 2 ms x 1 < 1 ms x 4
    rows["loss_curve"] = [fast] * len(rows)  # the same curve: the per-epoch speed decides again
    same = find(select(rows), Bootstrap(draws=100)).query("axis == 'n_params'").set_index("metric")
    assert same.loc["time_to_target_loss_s", "verdict"] == "B faster everywhere"


def test_rows_without_loss_curves_give_no_time_to_target():
    table = find(select(plant(SIZES, CPU, GPU)), Bootstrap(draws=50))
    assert "time_to_target_loss_s" not in set(table["metric"])


def test_a_full_batch_workload_is_one_slice_along_dataset_size():
    sizes = [400, 2500, 10000, 40000]
    rows = frame([row("peaks", device, [t, t, t], dataset_size=n, batch_size=n, depth=2)
                  for device, slope, base in (("cpu", 1e-7, 0.0), ("cuda", 0.0, 1.5e-3))
                  for n in sizes for t in [base + slope * n]])
    line = find(select(rows), Bootstrap(draws=50)).query("axis == 'dataset_size' and metric == 'epoch_s'").iloc[0]
    assert line["held_fixed"] == "depth=2, batch_size=full" and line["n_points"] == 4
    assert line["verdict"] == "crossover" and line["crossover"] == pytest.approx(15000, rel=0.5)


def test_a_row_timed_under_outside_load_is_left_out_where_its_configuration_has_quiet_rows():
    rows = plant(SIZES, CPU, GPU, noise=0.05, runs=2)
    rows["outside_load"] = None  # not measured (older rows, macOS): counts as quiet
    (slow,) = rows.index[(rows["device"] == "cpu") & (rows["n_params"] == int(SIZES[1])) & (rows["seed"] == 0)]
    rows.at[slow, "epoch_s"] = [t * 100 for t in rows.at[slow, "epoch_s"]]  # another job took its cores
    rows.at[slow, "outside_load"] = True
    rows.loc[rows.index[-3:], "outside_load"] = False  # measured and quiet (GPU rows)
    assert list(timed(rows).index) == [i for i in rows.index if i != slow]  # seed 1 is quiet there
    line = epoch_line(rows)
    assert line["n_points"] == len(SIZES) and line["verdict"] == "crossover"
    assert line["crossover"] == pytest.approx(1e4, rel=0.15)
    everything = select(rows, include_loaded=True)
    kept = find(everything, Bootstrap(draws=400)).query("axis == 'n_params' and metric == 'epoch_s'")
    assert kept.iloc[0]["n_within_noise"] > line["n_within_noise"]  # the busy run, kept, blurs SIZES[1]
    said = render(find(select(rows), Bootstrap(draws=50)), select(rows))
    assert f"1 of {len(rows)} ok rows were timed while the host was busy" in said
    assert "1 left out of the crossovers (the same configuration has quiet rows)" in said
    assert "kept, as asked" in render(kept, everything)


def test_where_a_configuration_has_only_busy_rows_they_are_used_and_counted():
    # a loaded 2-core VM: every CPU row flagged, the reference GPU rows quiet; an answer all the same
    rows = plant(SIZES, CPU, GPU, noise=0.05)
    rows["outside_load"] = rows["device"] == "cpu"
    assert timed(rows).equals(rows) and select(rows).busy.sum() == len(SIZES)
    line = epoch_line(rows)
    assert line["n_points"] == len(SIZES) and line["verdict"] == "crossover"
    said = render(find(select(rows), Bootstrap(draws=50)), select(rows))
    assert f"{len(SIZES)} kept where the configuration has no quiet row (the answer says so)" in said
    assert "left out" not in said


def cold_planted(cold_runs: int):
    """Three runs a size; at the smallest size `cold_runs` of the CPU's runs were their worker's first,
    with 1 s more of warm-up (imports, allocator growth): in time to the final loss they alone would
    make the CPU lose there."""
    rows = plant(SIZES, CPU, GPU, noise=0.02, runs=3)
    rows["cold_start"] = False
    first = rows.index[(rows["device"] == "cpu") & (rows["n_params"] == int(SIZES[0]))][:cold_runs]
    rows.loc[first, "warmup_s"] += 1.0
    rows.loc[first, "cold_start"] = True
    return find(select(rows), Bootstrap(draws=200)).query("axis == 'n_params'").set_index("metric")


def test_cold_rows_fixed_costs_give_way_to_warm_runs_of_the_same_size():
    table = cold_planted(cold_runs=1)
    assert table.loc["time_to_final_loss_s", "verdict"] == "crossover"  # as planted: the cold run's 1 s is out
    assert table.loc["time_to_final_loss_s", "note"] == ""
    assert table.loc["epoch_s", "verdict"] == "crossover"


def test_a_size_with_only_cold_runs_keeps_them_and_says_so():
    table = cold_planted(cold_runs=3)
    line = table.loc["time_to_final_loss_s"]
    assert line["verdict"] == "several crossings"  # what the cold rows say: nothing warm to replace them
    assert line["note"] == ("fixed costs from cold rows only (a worker's first trial: imports, CUDA context, "
                            "allocator growth) at 100 (cpu)")
    assert table.loc["epoch_s", "note"] == ""  # timed epochs come after the warm-up: no note there


def test_rows_written_before_cold_start_existed_take_each_hosts_first_trial_as_cold():
    at = pd.Timestamp("2026-11-21 21:24:35", tz="UTC")
    rows = frame([row("disc", device, [1.0], hostname=host, trial_id=trial_id, finished_at=at + pd.Timedelta(seconds=s))
                  for device, host, trial_id, s in [
                      ("cpu", "a", "t_00012", 0), ("cpu", "a", "t_00000", 0),  # a tie: Tune started 00000 first
                      ("cpu", "a", "t_00002", 9), ("cuda", "a", "t_00001", 5), ("cuda", "a", "t_00003", 6),
                      ("cpu", "b", "t_00004", 7)]])
    assert list(rows.loc[cold_starts(rows), "trial_id"]) == ["t_00000", "t_00001", "t_00004"]
    rows["cold_start"] = [False, False, True, None, None, None]  # recorded where known: taken as it is
    assert list(rows.loc[cold_starts(rows), "trial_id"]) == ["t_00002", "t_00001", "t_00004"]


def test_rows_of_different_epoch_counts_compare_per_epoch():
    # a laptop's short run beside reference rows run longer, at the same sizes
    rows = plant(SIZES, CPU, GPU, noise=0.05)
    rows.loc[rows["device"] == "cpu", "epochs"] = 3
    line = epoch_line(rows)
    assert line["verdict"] == "crossover" and line["crossover"] == pytest.approx(1e4, rel=0.15)

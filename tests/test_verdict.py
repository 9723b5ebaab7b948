"""The verdict, on synthetic rows with a planted answer: it names a planted crossover with its interval,
says "within noise" for a planted tie, says which side wins everywhere and by how much, renders in
lines of at most 100 columns with the answer first, and the summary under each table says the same."""

import numpy as np
import pandas as pd
import pytest

from crossover.analysis import decide, summary, verdict
from crossover.analysis.crossings import A_EVERYWHERE, Bootstrap
from crossover.analysis.load import REFERENCE
from crossover.analysis.selection import select
from analysis_rows import plant, user_cpu_rows

SIZES = np.geomspace(1e2, 1e6, 9)
CPU = lambda x: 1e-3 * x / 1e4  # noqa: E731  linear in size on the CPU
GPU = lambda x: 1e-3 * (x / 1e4) ** 0.5  # noqa: E731  as its square root on the GPU: equal at x = 1e4
BOOT = Bootstrap(draws=200)


def finding(rows) -> verdict.Finding:
    (found,) = verdict.reach(select(rows), BOOT).findings
    return found


def test_a_planted_crossover_is_named_with_its_interval_and_the_speedup_beyond_it():
    found = finding(plant(SIZES, CPU, GPU, noise=0.05))
    assert found.kind == "crossover" and found.line["axis"] == "n_params"
    assert found.line["crossover"] == pytest.approx(1e4, rel=0.15)
    low, high = found.line["ci_low"], found.line["ci_high"]
    assert low < 1e4 < high
    assert found.words.startswith(f"GPU faster past {verdict.amount(found.line['crossover'])} parameters (CI ")
    # at the largest size the GPU is 10x faster: the ratio of the planted curves at 1e6
    assert found.line["speedup"] == pytest.approx(CPU(1e6) / GPU(1e6), rel=0.1)
    assert found.line["speedup_low"] < found.line["speedup"] < found.line["speedup_high"]
    assert ", 10x at 1M (" in found.words


def test_a_planted_tie_is_within_noise_and_the_summary_says_so_too():
    rows = plant(SIZES, CPU, CPU, noise=0.01, runs=3)
    said = verdict.reach(select(rows), BOOT)
    (found,) = said.findings
    assert found.kind == "within noise"
    assert found.words.startswith("within noise: neither is faster beyond the noise at any of its 9 sizes")
    # the summary's medians differ by chance at every size; its verdict line is the crossover's noise test
    text = summary.render(rows.assign(device=rows["arm"]), said)
    assert "verdict: within noise" in text and "faster device changes" not in text


@pytest.mark.parametrize("cpu, gpu, words", [
    (CPU, lambda x: CPU(x) / 4, "GPU faster at every size measured: 4x at 1M parameters ("),
    (CPU, lambda x: CPU(x) * 2,
     "the CPU is faster at every size measured: the GPU takes 2x as long at 1M parameters ("),
])
def test_one_side_faster_everywhere_says_by_how_much(cpu, gpu, words):
    assert finding(plant(SIZES, cpu, gpu, noise=0.02)).words.startswith(words)


def test_a_side_faster_everywhere_but_tied_at_the_largest_size_says_the_tie_not_a_speed_up():
    # the GPU takes twice the CPU's time at the smallest size, the same at the largest (a planted tie
    # there): the answer must not read "the CPU is faster ... the GPU takes 1x as long"
    found = finding(plant(SIZES, CPU, lambda x: CPU(x) * (2 - np.log(x / 1e2) / np.log(1e4)), noise=0.05, runs=3))
    assert found.kind == A_EVERYWHERE, found.words
    assert found.words.startswith("the CPU faster where the noise lets a size tell; at 1M parameters within noise "
                                  "(the GPU takes "), found.words


def test_a_workload_without_a_gpu_to_compare_with_says_so():
    rows = plant(SIZES, CPU, GPU, noise=0.05)
    found = finding(rows[rows["device"] == "cpu"])
    assert found.kind == verdict.NOT_COMPARED and "no GPU rows" in found.words


def test_a_workload_measured_on_the_cpu_alone_is_answered_on_every_gpu_each_figure_predicted(tmp_path):
    from crossover.analysis import model
    from crossover.analysis.load import read
    rows = read(user_cpu_rows(tmp_path / "my_cnn"))
    said = verdict.reach(select(rows), BOOT, decision=True)
    (found,) = said.findings
    assert found.kind == verdict.PREDICTED and "no GPU row: predicted per GPU" in found.words
    assert sorted(line.split(":")[0] for line in found.gpus) == sorted(model.load_devices())
    # an 11M-parameter CNN, 4.4 s an epoch of 8,192 images on the CPU: every GPU predicted, with its interval, and
    # set against the CPU; every one but the 2015 GTX 960 (2.4 TFLOP/s) faster at every size
    assert all(": predicted ~" in line and "; GPU faster" in line for line in found.gpus), found.gpus
    assert all("GPU faster at every size measured, ~" in line for line in found.gpus if not line.startswith("GTX 960")), \
        found.gpus
    text = verdict.render(said)
    assert "not compared" not in text and max(map(len, text.splitlines())) <= 100
    # the end of a sweep: the fastest GPU and how many more, then the three picks as `crossover decide` names them
    lines = text.splitlines()
    assert len(lines) <= verdict.SHORT and found.gpus[0] in " ".join(text.split()), text
    assert f"and {len(found.gpus) - 1} more GPU models" in text
    for pick in ("rent, fastest: ", "rent, cheapest: ", "buy: ", "your CPU: "):
        assert sum(line.startswith(pick) for line in lines) == 1, (pick, text)
    # one renderer: the picks' lines are decide.brief's for the same decision, as `crossover decide` prints them
    d = said.decision
    first = decide.brief(d.lines, d.grid, d.picks, d.notes, None, (), decide.BRIEF_LINES).splitlines()
    chosen = first[first.index(next(t for t in first if t.startswith("rent, fastest: "))):
                   first.index(next(t for t in first if t.startswith("your CPU: "))) + 1]
    assert "\n".join(chosen) in text
    # --verbose lists every GPU predicted
    full = " ".join(verdict.render(said, verbose=True).split())
    assert all(line in full for line in found.gpus)
    # the report's first screen as the terminal's: the fastest GPU's line, the others folded behind how many they are
    import html
    import re
    from crossover.analysis import report
    page = re.sub(r"<span class=n>(.*?)</span>", r"\1", report.write_page(said, [tmp_path / "my_cnn"], tmp_path / "page")
                  .read_text())  # the figures' nowrap spans taken off
    fold = page.index(f"<details><summary>and {len(found.gpus) - 1} more GPU models")
    assert 0 < page.index(html.escape(found.gpus[0])) < fold
    assert all(page.index(html.escape(line)) > fold for line in found.gpus[1:])


def test_a_predicted_gpu_overtakes_the_cpu_where_the_prediction_crosses_it_with_the_ends_interval():
    # the CPU 1, 10 and 100 s an epoch; the GPU predicted 10 s (5-20): equal at 10,000 samples; the optimistic end
    # crosses at 5,000, the pessimistic at 20,000 (log-log between the sizes around)
    at = pd.DataFrame({"dataset_size": [1e3, 1e4, 1e5], "cpu_s": [1.0, 10.0, 100.0], "epoch_s_median": 10.0,
                       "epoch_s_lo": 5.0, "epoch_s_hi": 20.0})
    assert verdict._against(at, "dataset_size") == "GPU faster past ~10k samples (between 5,000 and 20k)"
    assert verdict._against(at.assign(cpu_s=[20.0, 40.0, 80.0]), "dataset_size") == \
        "GPU faster at every size measured, ~8x (4x-16x)"
    # one size measured: the claim names it, no wider than the data
    for one in (at.iloc[:1], at.assign(dataset_size=1e3)):  # one size, as one point or as several seeds' points
        assert verdict._against(one.assign(cpu_s=20.0), "dataset_size") == \
            "GPU faster at the one size measured (1,000 samples), ~2x (1x-4x)"


def test_a_cpu_only_workload_whose_step_was_not_counted_is_not_compared_and_says_why():
    rows = plant(SIZES, CPU, GPU, noise=0.05, workload="mine")  # a user's workload: no counted step costs
    found = verdict.predicted("mine", rows[rows["device"] == "cpu"])
    assert found.kind == verdict.NOT_COMPARED and not found.gpus
    assert found.words.startswith("not compared: no GPU rows at its sizes, and no GPU predicted: its rows lack the "
                                  "step's counted costs"), found.words


def test_the_answer_comes_first_in_lines_of_at_most_100_columns():
    rows = plant(SIZES, CPU, GPU, noise=0.05, workload="a_workload_with_a_rather_long_name").assign(
        outside_load=False)
    rows.loc[0, "outside_load"] = True  # a busy row, used (no quiet one beside it): its long lines are wrapped
    text = verdict.render(verdict.reach(select(rows), BOOT))
    lines = text.splitlines()
    assert lines[0].startswith("Where the GPU trains faster than the CPU") and "GPU faster past" in lines[1]
    assert max(map(len, lines)) <= verdict.WIDTH, text
    assert "1 of 18 ok rows were timed while the host was busy" in " ".join(text.split())
    full = verdict.render(verdict.reach(select(rows), BOOT), verbose=True)
    assert full.startswith(lines[0]) and "== a_workload_with_a_rather_long_name ==" in full  # the crossover table


def test_a_workload_timed_on_a_busy_machine_gets_its_answer_saying_so():
    # a loaded 2-core VM flags every CPU row: the answer is still given, and says the CPU times may be slow
    rows = plant(SIZES, CPU, GPU, noise=0.05).assign(outside_load=lambda r: r["device"] == "cpu")
    found = finding(rows)
    assert found.kind == "crossover" and found.line["crossover"] == pytest.approx(1e4, rel=0.15)
    assert found.words.endswith(" [busy]"), found.words
    text = " ".join(verdict.render(verdict.reach(select(rows), BOOT)).split())
    assert "[busy]: timed while your machine was busy (other processes on its CPUs): those times may be slow" in text
    assert "[busy ref]" not in text
    assert verdict.NOT_COMPARED not in text and "kept where the configuration has no quiet row" in text
    # where the same configuration has a quiet row too, the busy one is left out and the answer is plain
    quiet = plant(SIZES, CPU, GPU, noise=0.05, seed=1).assign(outside_load=False)
    both = pd.concat([rows, quiet[quiet["device"] == "cpu"].assign(seed=1)], ignore_index=True)
    assert "busy" not in finding(both).words
    # busy reference GPU rows (another host's) are named as such, never as "your machine"
    shipped = rows.assign(outside_load=rows["device"] != "cpu",
                          results_dir=np.where(rows["device"] == "cpu", "mine", str(REFERENCE / "h" / "s")))
    assert finding(shipped).words.endswith(" [busy ref]") and "[busy]" not in finding(shipped).words


def test_the_cost_line_counts_the_trials_your_rows_ran_not_the_reference_rows_beside_them():
    # the search ran the CPU once at most sizes, twice at two; the reference GPU rows beside them have 3 runs
    # a size: "a run like this sweep" is what ran (2 + 7 x 1 = 11 trials over 9 configurations), not 27
    cpu = plant(SIZES, CPU, GPU, noise=0.05, runs=3)
    mine = cpu[(cpu["device"] == "cpu") & ((cpu["seed"] == 0) | ((cpu["seed"] == 1) & (cpu["depth"] <= 2)))]
    ref = cpu[cpu["device"] != "cpu"].assign(results_dir=str(REFERENCE / "h100-planted"),
                                             finished_at=pd.Timestamp("2026-11-25", tz="UTC"))
    rows = pd.concat([mine.assign(results_dir="/home/me/results/scaling"), ref], ignore_index=True)
    said = verdict.reach(select(rows), BOOT, decision=True)
    assert sum(c.trials for c in said.decision.grid) == 11 and len(said.decision.grid) == 9
    assert "== the sweep: 11 trials, 9 configurations:" in verdict.render(said)


def test_six_answers_on_a_busy_machine_fit_the_screen():
    # every CPU row flagged (a CPU burner beside make run): each answer carries a mark, explained once
    names = ["disc", "lenet", "mnist_cnn", "peaks", "tabular", "transformer"]
    rows = pd.concat([plant(SIZES, CPU, GPU, noise=0.05, workload=w) for w in names], ignore_index=True)
    text = verdict.render(verdict.reach(select(rows.assign(outside_load=rows["device"] == "cpu")), BOOT))
    lines = text.splitlines()
    assert len(lines) <= 25 and max(map(len, lines)) <= 100, text
    assert sum(line.endswith("[busy]") for line in lines) == len(names) and text.count("[busy]: timed while") == 1


def test_a_busy_mark_is_explained_once_on_the_short_screen():
    said = ["  disc  GPU faster [busy]", "  [busy]: timed while your machine was busy", "rent, fastest: X",
            "[busy]: timed while your machine was busy", "  same words", "  same words"]
    assert verdict._once(said) == said[:3] + said[4:]  # the mark's second explanation goes; other repeats stay


def test_the_short_screen_keeps_the_picks_whole_whatever_its_room(tmp_path):
    from analysis_rows import user_cpu_rows
    from crossover.analysis.load import read
    said = verdict.reach(select(read(user_cpu_rows(tmp_path / "my_cnn"))), BOOT, decision=True)
    roomy, tight = verdict.render(said).splitlines(), verdict.render(said, lines=8).splitlines()
    assert len(roomy) <= verdict.SHORT and len(tight) < len(roomy)
    for pick in ("rent, fastest: ", "rent, cheapest: ", "buy: ", "your CPU: "):
        assert sum(line.startswith(pick) for line in tight) == 1, tight
    assert any(line.startswith("GPU memory: needs ~") and "fits" in line for line in tight), tight


def test_the_closing_answer_says_it_priced_the_sweeps_trials_or_answers_for_the_planned_run(tmp_path):
    from crossover.analysis.load import read
    from crossover.sweeps.plan import Planner
    from crossover.sweeps.scaling import planned_run
    from crossover.workload import Param, WorkloadSpec
    rows = summary.with_reference(read(user_cpu_rows(tmp_path / "my_cnn")))
    # the sweep's own trials: said so where renting does not pay for them
    sweep = " ".join(verdict.render(verdict.reach(select(rows), BOOT, decision=True)).split())
    assert "renting does not pay for this sweep's 9 trials: your CPU" in sweep, sweep
    # a sweep of one job of the user's: the run its defaults plan, as the sweep's end asks it
    planner = Planner()
    spec = WorkloadSpec("my_cnn", "my_cnn:workload", "0" * 16, {"epochs": 30, "dataset_size": 8192, "batch_size": 128,
                        "width": None, "depth": None, "context": None, "lr": 0.1}, frozenset(),
                        {"image_size": Param(32, low=8, high=512)}, {})
    planner.planned[("my_cnn:workload", None)] = (spec, None)
    plan = planned_run(planner)
    assert plan == decide.Request(30, 8192, "my_cnn", None, (("batch_size", "128"), ("image_size", "32")))
    said = verdict.reach(select(rows), BOOT, decision=True, plan=plan)
    assert said.decision.request == plan
    text = " ".join(verdict.render(said).split())
    assert "== the planned run: 30 epochs of 8,192 samples of my_cnn" in text and "this sweep's" not in text, text
    # a run the rows cannot price (a batch they never measured): the sweep's own trials, said so
    other = verdict.reach(select(rows), BOOT, decision=True, plan=decide.Request(30, 8192, "my_cnn", None,
                                                                             (("batch_size", "7"),)))
    assert other.decision.request is None

"""The adaptive crossover search (sweeps/search.py): its rule (sweeps/stopping.py) on planted rows without
Ray (a planted crossover found to the grid's resolution, a planted tie called within noise, the stopping rule's
intervals covering a planted ratio at their nominal rate), its budget (sweeps/budget.py), the benchmark beside
the full grid (sweeps/compare.py), and one real search through Ray, resumed."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from crossover.analysis.crossings import A_EVERYWHERE, B_EVERYWHERE, CROSSOVER, WITHIN_NOISE
from crossover.analysis.load import REFERENCE, read
from crossover.sweeps import budget, compare, search, stopping
from crossover.sweeps.budget import MAX_SHARE, Ask
from crossover.sweeps.stopping import ALPHA, CAP, Line, Runs
from crossover.sweeps.space import Space
from tests.analysis_rows import frame, row, write
from crossover.trainables.rows import config_row
from tests.conftest import CPUS

DEPTHS = tuple(range(2, 13))  # disc's default grid: 11 sizes


def measure(line: Line, cpu, gpu, noise: float, seed: int, gpu_runs: int = 3):
    """Runs the search's rule to its end on planted times: cpu(x) and gpu(x) seconds an epoch, each run's
    median epoch log-normal around them (sd `noise`), the GPU side measured `gpu_runs` times at every size
    beforehand (as the reference rows are). Returns the rows measured (analysis_rows' schema) and the rule's
    runs of them."""
    rng = np.random.default_rng(seed)
    rows = [row(line.workload, "cuda", [gpu(x) * math.exp(rng.normal(0, noise))], **{line.axis: x}, seed=k)
            for x in line.sizes for k in range(gpu_runs)]
    while True:
        measured = stopping.runs(frame(rows), line.axis)
        wanted = stopping.next_runs(line, measured)
        if not wanted:
            return rows, measured
        for size, target in wanted.items():
            have = len(measured[size].cpu) if size in measured else 0
            assert target > have, (size, target, have)  # every round measures more
            rows += [row(line.workload, "cpu", [cpu(size) * math.exp(rng.normal(0, noise))], **{line.axis: size},
                         seed=k) for k in range(have, target)]


def test_the_search_finds_a_planted_crossover_to_the_grids_resolution_in_fewer_runs_than_the_grid():
    line = Line("disc", "depth", DEPTHS)
    gpu = lambda x: 0.010  # noqa: E731
    cpu = lambda x: 0.010 * 1.6 ** (x - 8.4)  # the CPU's time grows past the GPU's at depth 8.4  # noqa: E731
    rows, measured = measure(line, cpu, gpu, noise=0.05, seed=1)
    v = stopping.verdict(line, measured)
    assert v.kind == CROSSOVER and v.faster_above == stopping.GPU
    (a, b, x), = v.changes
    assert (a, b) == (8, 9), v.points  # neighbours in the grid, around the planted 8.4
    assert 8 <= x <= 9
    cpu_runs = sum(r["device"] == "cpu" for r in rows)
    assert cpu_runs < 3 * len(DEPTHS), cpu_runs  # the full grid: 3 runs at each of 11 sizes
    assert {p.size for p in v.points} < set(DEPTHS)  # sizes far from the change were never measured
    assert "faster past depth ~ 8." in v.text("the NVIDIA H200")


def test_a_crossover_towards_the_cpu_is_found_too():
    line = Line("lenet", "batch_size", (16, 32, 64, 100))  # small batches: the GPU waits on launches
    rows, measured = measure(line, lambda x: 0.05, lambda x: 0.05 * (40 / x) ** 1.5, noise=0.03, seed=2)
    v = stopping.verdict(line, measured)
    assert v.kind == CROSSOVER and v.faster_above == stopping.GPU and v.changes[0][:2] == (32, 64)


@pytest.mark.parametrize("cpu_over_gpu, kind", [(3.0, B_EVERYWHERE), (1 / 3, A_EVERYWHERE)])
def test_a_device_faster_everywhere_costs_the_bracket_alone(cpu_over_gpu, kind):
    line = Line("disc", "depth", DEPTHS)
    rows, measured = measure(line, lambda x: 0.01 * cpu_over_gpu, lambda x: 0.01, noise=0.05, seed=3)
    v = stopping.verdict(line, measured)
    assert v.kind == kind
    assert sorted(measured) == [2, 7, 12]
    assert [len(measured[x].cpu) for x in (2, 7, 12)] == [stopping.BRACKET_RUNS, stopping.BRACKET_RUNS, 1]


def test_a_planted_tie_is_within_noise_and_spends_its_repeats_there():
    line = Line("disc", "depth", DEPTHS)
    rows, measured = measure(line, lambda x: 0.01, lambda x: 0.01, noise=0.15, seed=4)
    v = stopping.verdict(line, measured)
    assert v.kind == WITHIN_NOISE, v.points
    assert all(p.label == stopping.SAME and p.low < 1 < p.high for p in v.points)
    assert "within noise at every measured size" in v.text()
    assert all(len(r.cpu) <= CAP for r in measured.values())


@pytest.mark.parametrize("spread", [0.0, 0.1])
def test_the_stopping_rules_interval_covers_a_planted_ratio_at_its_nominal_rate(spread):
    # Many searches on planted log-normal times: ratios of exactly 1 (spread 0: where a look that happens to
    # exclude 1 stops the point, the case sequential looks make hardest), or spread around 1. The interval at
    # each point's last look must cover its planted ratio at least 1 - ALPHA of the time, within Monte-Carlo
    # error. (Each look at 1 - ALPHA instead, without the split over the looks, covered 92% of ties.)
    rng = np.random.default_rng(23)
    covered = total = 0
    sizes = (1, 2, 4, 8, 16)
    line = Line("planted", "dataset_size", sizes)
    for _ in range(300):
        noise, slope = rng.uniform(0.02, 0.3), rng.normal(0, spread)
        ratio = {x: math.exp(slope * (i - 2) + rng.normal(0, spread / 2)) for i, x in enumerate(sizes)}
        gpu = {x: [math.exp(rng.normal(0, noise)) for _ in range(3)] for x in sizes}
        cpu = {x: [] for x in sizes}
        while wanted := stopping.next_runs(line, {x: Runs(tuple(cpu[x]), tuple(gpu[x])) for x in sizes if cpu[x]}):
            for x, target in wanted.items():
                cpu[x] += [ratio[x] * math.exp(rng.normal(0, noise)) for _ in range(target - len(cpu[x]))]
        points = stopping.evaluate({x: Runs(tuple(cpu[x]), tuple(gpu[x])) for x in sizes if cpu[x]})
        for x, p in points.items():
            total += 1
            covered += p.low <= ratio[x] <= p.high
    rate, se = covered / total, math.sqrt(ALPHA * (1 - ALPHA) / total)
    assert rate >= 1 - ALPHA - 3 * se, f"{covered} of {total} intervals covered the planted ratio ({rate:.3f})"


def test_the_search_reads_busy_rows_by_the_verdicts_rule_and_replaces_one_left_out_by_a_new_seed(tmp_path):
    # analysis/selection.py `timed`, for the search as for the verdict: a row flagged outside_load is left out
    # where its configuration has a quiet row, used where it has none (a loaded VM flags every CPU row)
    space = Space("busy", {"disc": {"depth": list(DEPTHS), "epochs": [6]}}, ("cpu",), cpu_threads=2)
    p = search.plan(space, tmp_path)
    line, = p.lines

    def planted(size, seed, busy, epoch=0.01):
        trial = p.trials[line][(size, seed, "cpu")]
        return {**row("disc", "cpu", [epoch] * 5), **config_row(trial), "sweep": "busy", "seed": seed,
                "outside_load": busy}

    rows = [planted(2, 0, True, epoch=1.0), planted(2, 1, False), planted(7, 0, True), planted(7, 1, True)]
    s = search.state(p, frame(rows))
    assert s.measured[line][2].cpu == (0.01,) and s.measured[line][7].cpu == (0.01, 0.01)
    assert {k[:2] for k in s.own[line]} == {(2, 0), (2, 1), (7, 0), (7, 1)}  # measured: never run again
    assert stopping.runs(frame(rows), "depth")[2].cpu == (0.01,)
    asked = {a.size: a for a in search.asks(p, s, {line: set()})}
    assert [t.cfg.seed for t in asked[2].trials] == [2] and asked[2].upto == 3  # a new seed, beside 0 and 1


def test_a_trial_predicted_past_the_budget_is_skipped_saying_why():
    line = Line("disc", "depth", DEPTHS)
    cheap, dear, pricey = (Ask(line, x, 0, 2, cost, ()) for x, cost in ((2, (1.0, 1.0)), (7, (8.0, 8.0)),
                                                                          (12, (40.0, 40.0))))
    run, skip = budget.afford([pricey, dear, cheap], left_s=10.0, budget_s=100.0)
    assert run == [cheap]  # cheapest first: 2 s of the 10 left; the next 16 s do not fit
    reasons = dict((a.size, why) for a, why in skip)
    assert reasons[7] == "predicted 16 s, past the 8 s left of --budget 100 s"
    assert reasons[12] == f"predicted 40 s, more than {MAX_SHARE:.0%} of --budget 100 s"


def test_what_the_search_skipped_is_said_in_two_lines_of_100_columns_dearest_first():
    # what `make run` prints of it by default (each size and its reason: --verbose); 2 trials an ask
    line = Line("disc", "depth", DEPTHS)
    dear = [(Ask(line, k, 0, 2, (k * 10.0, k * 10.0), ("t", "t")), "why") for k in range(3, 12)]  # 30-110 s
    cheap = [(Ask(line, k, 0, 2, (1.0, 1.0), ("t", "t")), "why") for k in (2, 12)]
    said = budget.skipped_lines(dear + cheap, budget_s=100.0)
    assert len(said) == 2 and all(len(text) <= 100 for text in said), said
    assert said == ["  predicted past 15% of it: disc depth=11 (110 s), disc depth=10 (100 s) and 7 more",
                    "  past what was left of it: 4 trials at 2 sizes (a larger --budget measures them)"]
    assert budget.skipped_lines(dear[:1], budget_s=100.0) == ["  predicted past 15% of it: disc depth=3 (30 s)"]


def test_a_trials_time_is_predicted_from_the_nearest_measured_size_scaled_as_the_reference_scales():
    cfg = Space("p", {"disc": {"depth": [8], "epochs": [6]}}).expand()[0].cfg  # 6 epochs, 1 of warm-up
    own = {4: (0.5, 0.2)}  # at depth 4: 0.5 s besides the epochs, 0.2 s an epoch
    ref = {4: 0.01, 8: 0.04}  # the reference's epoch grows 4x from depth 4 to 8
    assert budget.predict_s(8, cfg, own, ref, factor=1.0) == pytest.approx(2.0 + 0.8 * 6 + budget.TRIAL_S)
    assert budget.predict_s(8, cfg, {}, ref, factor=3.0) == pytest.approx(1.0 + 0.12 * 6 + budget.TRIAL_S)
    assert budget.predict_s(8, cfg, {}, {}, factor=3.0) is None  # nothing to go on: run, unpredicted


def test_the_benchmark_sets_the_search_beside_the_full_grid_and_finds_them_within_one_size_step(tmp_path):
    # Planted rows in two folders, at the configurations the search and the full grid run (their config
    # hashes): the CPU's time per epoch the reference H200's times 1.6 ** (depth - 8.4), so that the CPU
    # falls behind past depth 8.4; the full grid at every depth 3 times, the search where its rule asks.
    space = Space("bench", {"disc": {"depth": list(DEPTHS), "epochs": [6]}}, ("cpu",), cpu_threads=2, repeats=3)
    p = search.plan(space, tmp_path)
    line, = p.lines
    rng = np.random.default_rng(5)

    def planted(size, seed):
        epoch = float(np.median(p.gpu_runs[line][size])) * 1.6 ** (size - 8.4) * math.exp(rng.normal(0, 0.03))
        trial = p.trials[line][(size, seed, "cpu")]
        return {**row("disc", "cpu", [epoch] * 5), **config_row(trial), "sweep": "bench", "seed": seed}

    write([planted(x, k) for x in DEPTHS for k in range(3)], tmp_path / "full")
    mine = []
    while wanted := stopping.next_runs(line, search.state(p, frame(mine) if mine else None).measured[line]):
        mine += [planted(x, k) for x, target in wanted.items() for k in range(sum(r["depth"] == x for r in mine),
                                                                              target)]
    write(mine, tmp_path / "bench")
    table = compare.side_by_side(space, tmp_path, tmp_path / "bench", tmp_path / "full", {"search": 60.0, "full": 300.0})
    assert "GPU faster past depth ~ 8." in table and "size steps apart" in table, table
    assert "the search's crossover within one size step of the full grid's: 1 of 1 workloads" in table
    assert "full grid  GPU faster past depth" in table and "33 trials" in table
    assert "the search within 3 minutes: yes (60 s)" in table
    assert max(len(line) for line in table.splitlines()) <= 100


@pytest.mark.slow
def test_a_real_search_runs_through_ray_skips_past_its_budget_and_resumes_with_a_larger_one(local_ray, tmp_path):
    # peaks at sizes with reference GPU rows (results/reference/h200-2026-11-26/scaling, 3 runs each; their
    # 200 epochs compare per epoch with these 20), on the CPU alone: the GPU side is the reference's
    space = Space("found", {"peaks": {"dataset_size": [100, 400, 2500], "epochs": [20]}}, ("cpu",), cpu_threads=CPUS,
                  repeats=3)
    said = []
    none = search.search(space, tmp_path, budget_s=0.5, log=said.append)
    skipped = read(tmp_path / "found")
    # the first round's one trial (the first size, once) refused, and the budget spent: the search ends there
    assert none.trials == 0 and none.skipped == len(skipped) == 1 and set(skipped["dataset_size"]) == {100}
    assert (skipped["status"] == "error").all() and skipped["error"].str.startswith("skipped: predicted").all()
    # the line's first point is held to the budget left, not to 15% of it (its row predicts the rest), and
    # where nothing fits, the budget it needs is said
    assert "s left of --budget 0.5 s (--budget)" in skipped["error"].iloc[0]
    assert any(line.startswith("peaks: a trial at dataset_size=100 is predicted to take") for line in said)
    assert any(line.startswith("skipped peaks dataset_size=100 (1 trial): predicted") for line in said)

    found = search.search(space, tmp_path, budget_s=45, log=said.append)  # bounds the test's time; nothing timed
    rows = read(tmp_path / "found")
    ok = rows[rows["status"] == "ok"]
    assert found.trials == len(ok) >= 2 and rows["config_hash"].is_unique
    assert set(skipped["config_hash"]) <= set(ok["config_hash"])  # the skipped trials measured now, in their place
    full = {t.hash for t in Space("found", space.grids, ("cpu",), cpu_threads=CPUS, repeats=stopping.SEEDS).expand()}
    assert set(ok["config_hash"]) <= full  # the full grid's configurations: a later --grid full resumes on them
    v, = found.verdicts
    assert v.kind in (CROSSOVER, A_EVERYWHERE, B_EVERYWHERE, WITHIN_NOISE)
    # the GPU side is a reference GPU that ran every size at least twice (an interval needs two runs): of the
    # shipped folders, the H200's of 2026-11-22 and the H100's of 2026-11-25 both did (3 runs); never one with fewer
    model = found.gpu_name[v.line].removeprefix("the ").removesuffix(" (reference)")
    shipped = read(REFERENCE)
    gpu = shipped[(shipped["device_name"] == model) & (shipped["workload"] == "peaks") & (shipped["status"] == "ok")]
    runs = gpu[gpu["epochs"] == 200].groupby("dataset_size").size()
    assert all(runs.get(size, 0) >= 2 for size in (100, 400, 2500)), (model, runs)


def test_each_trial_gets_at_most_its_share_of_the_budget_never_more_than_the_trial_timeout():
    assert budget.trial_limit(150.0, 3600) == (MAX_SHARE * 150.0, "cut for the budget: 15% of --budget 150 s")
    assert budget.trial_limit(150.0, 10) == (10, "--trial-timeout")
    # a line's first trial may take what is left of the budget, where that is more: its row predicts the rest
    share = (MAX_SHARE * 150.0, "cut for the budget: 15% of --budget 150 s")
    left = (100.0, "cut for the budget: the 100 s left of --budget 150 s")
    assert budget.trial_limit(150.0, 3600, left_s=100.0) == left
    assert budget.trial_limit(150.0, 3600, left_s=10.0) == share
    assert budget.trial_limit(150.0, 60, left_s=100.0) == (60, "--trial-timeout")
    # (the cut itself, on a real Ray: tests/test_user_workload.py, a model whose larger size is slower than predicted)


def test_a_fresh_lines_first_point_needs_only_the_budget_left_and_where_none_fits_the_budget_it_needs_is_said():
    line = Line("disc", "depth", (2, 4))
    first = Ask(line, 2, 0, 1, (40.0,), ())
    assert budget.afford([first], left_s=100.0, budget_s=100.0)[0] == []  # past 15% of the budget: skipped ...
    assert budget.afford([first], left_s=100.0, budget_s=100.0, fresh=frozenset({line}))[0] == [first]  # ... unless
    run, skip = budget.afford([first], left_s=30.0, budget_s=100.0, fresh=frozenset({line}))
    assert run == [] and skip[0][1] == "predicted 40 s, past the 30 s left of --budget 100 s"
    assert budget.needs(skip, 100.0) == ("disc: a trial at depth=2 is predicted to take 40 s here, past what --budget "
                                         "100 s leaves: give --budget 270 or more")


@pytest.mark.slow
def test_the_default_search_ends_within_25_lines_of_100_columns_with_what_it_skipped_and_the_answer(tmp_path):
    # `make run`'s default path (the search, not --smoke) on two workloads; the progress line is on stderr.
    # --budget 20 s: some sizes are skipped, and what the search skipped must fit the screen too
    cmd = [sys.executable, str(Path(__file__).parents[1] / "sweeps" / "scaling.py"), "--workloads", "disc,peaks",
           "--devices", "cpu", "--budget", "20", "--out", ".", "--no-report"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) <= 25 and max(map(len, lines)) <= 100, done.stdout
    # a trial cut at its share of the budget (15% of 20 s) is said as it fails, before the summary: at most
    # 2 lines of 100 columns each, its second indented; past a round's third, the others are only counted. How
    # many are cut is the host's speed (a busy one cuts more), how each is said is not
    first = next(i for i, text in enumerate(lines) if text.startswith("search: "))
    said = lines[:first]
    assert all(": FAILED " in text or text.startswith(("    ", "more failures: ")) for text in said), done.stdout
    assert all(": FAILED " in before for before, text in zip([""] + said, said) if text.startswith("    ")), done.stdout
    assert "sweep 'scaling'" not in done.stdout, done.stdout  # each round's first line: --verbose
    answer = next(i for i, text in enumerate(lines) if text.startswith("Where the GPU trains faster than the CPU"))
    # the summary says how many it skipped in at most 2 lines, the second indented; which ones is --verbose's
    assert answer - first <= 2 and all(text.startswith("    ") for text in lines[first + 1:answer]), done.stdout
    assert "skipped for --budget 20 s (--verbose says which)" in " ".join(" ".join(lines[first:answer]).split()) or \
        "skipped" not in lines[first], done.stdout
    assert lines[answer + 1].startswith("  disc ") and lines[-1].startswith("report: not written")

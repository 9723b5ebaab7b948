"""One answer: every pick `crossover predict` and `crossover decide` name, on the first screen and in --json, is the
one rule's (decide.picks), and the first line names one of them. For built-in workloads, a job file of the user's
and a planned run decided from rows, each read from `--json -` (the records' `picks`) and from the screen beside it.
"""

import json
import math

import pytest
from analysis_rows import row, write
from test_command import crossover
from test_predict import job

from crossover.analysis import decide

pytestmark = pytest.mark.slow  # each runs crossover predict or decide as a process, counting a step


def agree(listed: list[dict], screen: str) -> None:
    """Every pick of the records `listed` by the one rule, and the screen naming the same options."""
    named: dict[str, dict] = {}
    for r in listed:
        for name in r["picks"]:
            assert name not in named, (name, r["option"], named.get(name, {}).get("option"))
            named[name] = r
    priced = [r for r in listed if r["fits"] is not False and r["usd"] is not None]
    rented = [r for r in priced if r["kind"] == "on-demand" and r["gpus"] > 0]
    by_time = lambda r: (r["run_s"], r["usd"])  # noqa: E731 (decide.by_time, read from the records)
    by_cost = lambda r: (r["usd"], r["run_s"])  # noqa: E731
    assert by_time(named[decide.FASTEST]) == min(map(by_time, priced))
    assert by_cost(named[decide.CHEAPEST]) == min(map(by_cost, priced))
    if rented:
        assert by_time(named[decide.RENT_FASTEST]) == min(map(by_time, rented))
        cheap = named.get(decide.RENT_CHEAPEST, named[decide.RENT_FASTEST])
        assert by_cost(cheap) == min(map(by_cost, rented))
    if decide.BUY in named:  # the box to buy is the cheapest box, by the rule that names the cheapest of all
        box = named[decide.BUY]
        assert box["kind"] == decide.HOME_BOX and math.isfinite(box["usd"])
        if named[decide.CHEAPEST]["kind"] == decide.HOME_BOX:
            assert named[decide.CHEAPEST]["option"] == box["option"]
    said = " ".join(screen.split())  # a pick wraps onto indented lines
    for name in decide.FIRST:
        if name in named:
            assert f"{name}: {named[name]['option']}" in said, (name, said)
    # the first line names a pick of the first screen, the one that beats every rental, or none where none does
    first = screen.splitlines()[0]
    if decide.BEATS in named:
        won = named[decide.BEATS]
        assert set(won["picks"]) & {decide.BUY, decide.YOUR_CPU, decide.YOUR_GPU}, won["picks"]
        assert said.split(": ", 1)[1].startswith(f"{won['option']}, "), first
        assert won["run_s"] < min(r["run_s"] for r in rented) and won["usd"] <= min(r["usd"] for r in rented)
    else:
        assert not first.startswith(("a box beats every rental", "renting does not pay")), first


@pytest.mark.parametrize("workload, flags", [
    ("mnist_cnn", ["--epochs", "3"]),
    ("transformer", ["--epochs", "2", "--gpus", "3"]),
    ("examples/zoo.py:workload", ["--param", "arch=resnet18", "--epochs", "10"]),
])
def test_predicts_picks_agree_with_each_other_and_with_the_first_line(workload, flags):
    done = crossover("predict", "--workload", workload, *flags, "--json", "-")
    assert done.returncode == 0, done.stderr
    agree(json.loads(done.stdout), done.stderr)


def test_a_job_files_picks_agree_in_predict_and_in_decide_of_a_planned_run(tmp_path):
    ref = job(tmp_path, "picks_job")
    done = crossover("predict", "--workload", ref, "--epochs", "20", "--dataset-size", "60000", "--json", "-")
    assert done.returncode == 0, done.stderr
    agree(json.loads(done.stdout), done.stderr)
    mine = [row("pred_mlp", "cpu", [0.01, 0.011, 0.012], batch_size=64, dataset_size=256, width=64, depth=None,
                steps_per_epoch=4, workload_params='{"n_features": 16}', workload_module=ref)]
    results = write(mine, tmp_path / "mine")
    done = crossover("decide", str(results), "--epochs", "20", "--dataset-size", "60000", "--out",
                     str(tmp_path / "charts"), "--json", "-")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert any(r["kind"] == decide.OWN_CPU for r in listed) and any(r["kind"] == decide.HOME_BOX for r in listed)
    screen = "\n".join(t for t in done.stderr.splitlines() if not t.startswith(("reference:", "charts:")))
    agree(listed, screen)

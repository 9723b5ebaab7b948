"""The `crossover` command run as a process: each subcommand's help shows the flags of the parser it
hands over to, `decide` prices a planned run from a results folder written here, a name that is no
subcommand is refused with the choices, and a job file, module or attribute that is not there is refused in the
same one line by every command, before torch is imported or a process started."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from analysis_rows import write
from test_decide import planned_rows

ROOT = Path(__file__).resolve().parent.parent


def crossover(*args: str) -> subprocess.CompletedProcess:
    """`crossover ARGS` as `python -m crossover.sweeps.command ARGS` from the repository: no installed script needed."""
    return subprocess.run([sys.executable, "-m", "crossover.sweeps.command", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("command, usage, flags", [
    ("sweep", "usage: crossover sweep", ["--smoke", "each workload's 'smoke' grid", "--devices", "--repeats"]),
    ("decide", "usage: crossover decide", ["--epochs", "--dataset-size N", "your planned run's samples", "--workload",
                                           "--deadline"]),
    ("report", "usage: crossover report", ["--draws", "bootstrap draws per crossover", "--include-loaded"]),
    ("predict", "usage: crossover predict", ["--workload", "--epochs", "--timeout", "--json", "--param"]),
])
def test_each_subcommand_shows_the_flags_of_the_command_it_stands_for(command, usage, flags):
    done = crossover(command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(usage)
    for flag in flags:
        assert flag in done.stdout


def test_the_analysis_run_by_its_module_names_itself_so_in_its_help():
    done = subprocess.run([sys.executable, "-m", "crossover.analysis", "decide", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m crossover.analysis decide")


def test_the_top_level_help_names_every_subcommand():
    done = crossover("--help")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())  # argparse wraps the lines
    assert all(f"{name} " in said for name in ("sweep", "decide", "report", "predict")), said


def test_decide_prices_a_planned_run_from_a_results_folder(tmp_path):
    results = write(planned_rows("tab"), tmp_path / "mine")
    done = crossover("decide", str(results), "--workload", "tab", "--epochs", "10", "--samples", "40000",
                     "--no-reference", "--out", str(tmp_path / "charts"), "--verbose")
    assert done.returncode == 0, done.stderr
    assert "== the planned run: 10 epochs of 40,000 samples of tab, depth 4, batch 100 ==" in done.stdout
    own = " ".join(line for line in done.stdout.splitlines() if line.strip().startswith("your CPU"))  # every table's
    assert "~5.1 s" in own and "10x past 4,000" in own  # 1 s + 10 x (0.01 + 1e-5 x 40,000) s, extrapolated
    assert max(map(len, done.stdout.splitlines())) <= 100, done.stdout
    assert (tmp_path / "charts" / "decide_front.html").exists()  # decide's own names: a report never overwrites them


def test_a_reader_that_goes_away_ends_the_command_without_a_traceback():
    # `crossover predict ... | head`: the pipe's reader closed before the command wrote its lines
    done = subprocess.Popen([sys.executable, "-m", "crossover.sweeps.command", "predict", "--workload", "tabular",
                             "--epochs", "2", "--dataset-size", "1000"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done.stdout.close()
    stderr = done.stderr.read()
    assert done.wait(timeout=600) == 1
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


def test_an_unknown_subcommand_exits_2_naming_the_choices():
    done = crossover("sweeps", "--smoke")
    assert done.returncode == 2
    assert "invalid choice: 'sweeps' (choose from 'sweep', 'decide', 'report', 'predict')" in done.stderr


# what each command is given beside --workload: all it needs to go on, were the workload there
GIVEN = [["predict", "--epochs", "3"], ["sweep", "--smoke", "--out", "{out}"],
         ["decide", str(ROOT / "results" / "reference"), "--epochs", "3", "--dataset-size", "100"]]


@pytest.mark.parametrize("ref, why", [
    ("{tmp}/nope.py:workload", "no file {tmp}/nope.py; give the path of a .py file that defines workload"),
    ("no_such_module.jobs:workload", "no module 'no_such_module.jobs' on the Python path; give a module that imports "
                                     "from here (PYTHONPATH), or the path of its file (path/to/job.py:ATTR)"),
    ("{tmp}/job.py:wrkload", "{tmp}/job.py defines no 'wrkload' at its top level; did you mean 'workload'?"),
    ("{tmp}/job.py", "give MODULE:ATTR or path/to/file.py:ATTR (the attribute a Workload, or a function that returns "
                     "one)"),
    ("{tmp}/needs.py:workload", "{tmp}/needs.py:2 imports 'no_such_package_xo', which is not installed here: install "
                                "it (pip install no_such_package_xo, or the package that provides it) into this "
                                "Python, or put its module beside the job file"),
], ids=["file", "module", "attribute", "no-attribute", "package-not-installed"])
def test_a_job_not_there_is_refused_in_one_line_by_every_command_before_torch_or_a_child_starts(tmp_path, ref, why):
    (tmp_path / "job.py").write_text("raise SystemExit('imported')\nworkload = None\n")  # read, never run
    (tmp_path / "needs.py").write_text("import os\nimport no_such_package_xo\nworkload = None\n")
    ref, why = ref.format(tmp=tmp_path), why.format(tmp=tmp_path)
    given = [[a.format(out=tmp_path / "out") for a in argv] for argv in GIVEN]
    # each command run in one process, timed there; then which of the heavy modules it imported (predict's
    # counting process is started once pandas is; a sweep's planning once torch and Ray are)
    script = ("import json, sys, time\nfrom crossover.sweeps.command import main\ntook = []\n"
              f"for argv in {given!r}:\n"
              "    began = time.monotonic()\n"
              f"    took.append((main([argv[0], '--workload', {ref!r}, *argv[1:]]), time.monotonic() - began))\n"
              "print(json.dumps([took, sorted({'torch', 'ray', 'pandas'} & set(sys.modules))]))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    took, heavy = json.loads(done.stdout)
    assert done.stderr.splitlines() == [f"error: --workload {ref!r}: {why}"] * len(GIVEN), done.stderr
    assert [status for status, _ in took] == [2] * len(GIVEN) and max(s for _, s in took) < 2, took
    assert heavy == [] and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_sweep_size_flags_replace_those_axes_of_the_grid_without_editing_it(tmp_path):
    done = crossover("sweep", "--workloads", "disc", "--smoke", "--devices", "cpu", "--repeats", "1", "--no-report",
                     "--batch-size", "8,16", "--dataset-size", "64", "--epochs", "2", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pd.read_parquet(tmp_path / "smoke")
    assert sorted(rows["batch_size"]) == [8, 8, 16, 16]  # disc's smoke depths 2 and 4, each at both batch sizes
    assert set(rows["dataset_size"]) == {64} and set(rows["epochs"]) == {2} and set(rows["status"]) == {"ok"}


@pytest.mark.parametrize("flag, value, why", [
    ("--batch-size", "8,0", "must be integers >= 1, comma-separated (e.g. 8,16), got '8,0'"),
    ("--dataset-size", "many", "must be integers >= 1, comma-separated (e.g. 8,16), got 'many'"),
    ("--epochs", "1,2", "must be an integer >= 1, got '1,2'"),
])
def test_a_bad_sweep_size_is_refused_in_one_line_naming_the_flag(flag, value, why, capsys):
    from crossover.sweeps import scaling

    with pytest.raises(SystemExit) as exit:
        scaling.parse_args([flag, value])
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: argument {flag}: {why}")

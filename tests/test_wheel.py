"""The install a user makes: the wheel built from this checkout (`pip wheel --no-deps .`), installed into a fresh
venv, runs the README's own-model job (it imports `crossover` alone) from a folder outside the checkout:
`crossover sweep`, `decide` and `report` answer, reading the prices, devices, home boxes and reference rows the
wheel carries. It installs one package, crossover: no top-level analysis, sweeps or trainables.

    python -m pytest tests/test_wheel.py --all

torch and ray are not installed again (gigabytes): the fresh venv reaches this interpreter's site-packages
through PYTHONPATH, named there after the venv's own, and .pth files (this one's editable install of crossover)
are not read from a folder on PYTHONPATH. So crossover's code and data come from the wheel alone.
"""

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
# where the installed commands find crossover's data and code: printed by the venv's python, one path a line
WHERE = """
from pathlib import Path
import crossover.analysis.prices, crossover.analysis.load, crossover.analysis.model, crossover.sweeps.cli, crossover.workload
import crossover.trainables.trial
print(crossover.analysis.prices.PRICES, crossover.analysis.prices.HOME_BOXES, crossover.analysis.model.DEVICES, crossover.analysis.load.REFERENCE,
      crossover.sweeps.cli.ROOT, Path(crossover.workload.__file__).parent, Path(crossover.trainables.trial.__file__).parent,
      sep="\\n")
"""
pytestmark = pytest.mark.slow  # a wheel built and a venv made (the index asked for setuptools), then a sweep


def run(cmd, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the venv's bin folder, its site-packages, the environment its commands run in) with the wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    # built from a copy of the files git would commit: a build leaves build/ and *.egg-info where it runs
    files = run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT).stdout
    source = tmp / "source"
    for name in filter(None, files.split("\0")):
        if (ROOT / name).is_file():  # a file deleted in the work tree but not yet in git's index is left out
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", tmp / "dist"])
    wheel = next((tmp / "dist").glob("crossover-*.whl"))
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", venv])
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", wheel])
    site = Path(run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]]),
           "RAY_ADDRESS": ""}
    return venv / "bin", site, env


def test_the_wheel_carries_the_prices_devices_home_boxes_notebooks_and_reference_rows(installed):
    bin_, site, env = installed
    for data in ("prices.yaml", "devices.yaml", "home_boxes/rtx4090.yaml", "notebooks/crossover.ipynb",
                 "reference/h100-2026-11-26/scaling/scaling-gpu.parquet", "reference/README.md",
                 "reference/h200x4-2026-11-28-ddp/figures.json"):  # the torchrun DDP loop, parallel --validate's
        assert (site / "crossover" / "analysis" / data).is_file(), data


def test_the_wheel_installs_crossover_alone_into_site_packages(installed):
    bin_, site, env = installed
    (record,) = site.glob("crossover-*.dist-info/RECORD")
    # what pip wrote, by top-level name ('..': the crossover command, in the venv's bin/)
    tops = {line.split("/")[0] for line in record.read_text().splitlines() if line.strip()} - {".."}
    assert tops == {"crossover", record.parent.name}, tops
    assert not any((site / name).exists() for name in ("analysis", "sweeps", "trainables"))
    assert {p.name for p in (site / "crossover").iterdir()} >= {"__init__.py", "schema.py", "analysis", "sweeps",
                                                                 "trainables"}
    # the studies stay in the checkout: the installed sweeps are the checkout's sweeps/, and nothing of studies/ ships
    assert {p.name for p in (site / "crossover" / "sweeps").glob("*.py")} == {p.name for p in (ROOT / "sweeps").glob("*.py")}
    assert not [line for line in record.read_text().splitlines() if "studies" in line or "parity" in line]


def test_the_installed_wheel_sweeps_decides_and_reports_from_a_folder_outside_the_checkout(installed, tmp_path):
    bin_, site, env = installed
    job = re.search(r"```python\n(# job\.py.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    assert {m.split(".")[0] for m in re.findall(r"^(?:from|import) (\S+)", job, re.M)} == {"torch", "crossover"}
    assert re.findall(r"^from crossover\S* import", job, re.M) == ["from crossover import"]  # crossover's names alone
    (tmp_path / "job.py").write_text(job)  # the README's own-model job, as a user copies it
    where = run([bin_ / "python", "-c", WHERE], cwd=tmp_path, env=env).stdout.split("\n")[:-1]
    ours = site / "crossover"
    assert [Path(p) for p in where] == [ours / "analysis" / "prices.yaml", ours / "analysis" / "home_boxes",
                                       ours / "analysis" / "devices.yaml", ours / "analysis" / "reference", site,
                                       ours, ours / "trainables"]  # the job file's names in crossover/, the rest below
    swept = run([bin_ / "crossover", "sweep", "--workload", "job.py:workload", "--smoke", "--devices", "cpu",
                 "--out", "OUT"], cwd=tmp_path, env=env)
    # every GPU predicted: analysis/model/ fitted on the wheel's reference rows, with its devices.yaml (the fastest
    # said, the others counted; --verbose lists each)
    said = " ".join(swept.stdout.split())
    assert re.search(r"B200: predicted ~[0-9.]+ s/epoch", said) and "and 20 more GPU models" in said, swept.stdout[-3000:]
    assert "report: " in swept.stdout
    decided = run([bin_ / "crossover", "decide", "OUT"], cwd=tmp_path, env=env)
    assert "rent, fastest: " in decided.stdout  # priced: the wheel's prices.yaml, read (where it is: WHERE, above)
    reported = run([bin_ / "crossover", "report", "OUT"], cwd=tmp_path, env=env)
    assert (tmp_path / reported.stdout.strip().splitlines()[-1].removeprefix("report: ")).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OUT", "job.py"]  # nothing written outside --out


def test_the_installed_wheel_sweeps_a_job_split_over_modules_and_a_package_and_decides_it_from_anywhere(installed,
                                                                                                         tmp_path):
    # the README's job as a project keeps it: its model in a module beside it, its data in a package of its own
    bin_, site, env = installed
    job = re.search(r"```python\n(# job\.py.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    defs = {m.group(1): m.group(0) for m in re.finditer(r"^def (data|model)\(cfg\):\n(?:    .*\n)+", job, re.M)}
    assert set(defs) == {"data", "model"}
    project = tmp_path / "project"
    (project / "mydata").mkdir(parents=True)
    (project / "mymodels.py").write_text("from torch import nn\n\n\n" + defs["model"])
    (project / "mydata" / "__init__.py").write_text("from .images import data\n")
    (project / "mydata" / "images.py").write_text("import torch\n\nfrom crossover import Data\n\n\n" + defs["data"])
    rest = job.replace(defs["data"], "").replace(defs["model"], "")
    (project / "job.py").write_text(rest.replace("from crossover import", "from mydata import data\n"
                                                 "from mymodels import model\nfrom crossover import", 1))
    swept = run([bin_ / "crossover", "sweep", "--workload", "job.py:workload", "--smoke", "--devices", "cpu",
                 "--out", "OUT", "--no-report"], cwd=project, env=env)
    rows = pd.read_parquet(project / "OUT")
    assert (rows["status"] == "ok").all() and len(rows) >= 2, swept.stdout[-3000:]
    assert set(rows["workload_path"]) == {str(project / "job.py")}
    # decided from the job's folder and from another: the planned step is counted from the job the rows name
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    here = run([bin_ / "crossover", "decide", "OUT", "--json", "-"], cwd=project, env=env).stdout
    there = run([bin_ / "crossover", "decide", project / "OUT", "--json", "-"], cwd=elsewhere, env=env).stdout
    assert here == there, (here[-2000:], there[-2000:])
    assert any(option["fits"] for option in json.loads(here)), here[-2000:]  # an answer, not an empty list


def test_the_installed_wheel_runs_an_example_job_by_its_name_from_a_folder_outside_the_checkout(installed, tmp_path):
    # the example jobs ship as crossover.examples: `--workload zoo` needs no file of the checkout
    bin_, site, env = installed
    assert {"zoo.py", "resnet_cifar.py", "tabular_csv.py", "realsize.py", "heldout.py"} <= \
        {p.name for p in (site / "crossover" / "examples").iterdir()}
    predicted = run([bin_ / "crossover", "predict", "--workload", "zoo", "--param", "arch=resnet18", "--epochs", "1",
                     "--batch-size", "32", "--dataset-size", "1000", "--json", "-"], cwd=tmp_path, env=env)
    options = json.loads(predicted.stdout)
    assert options and {o["workload"] for o in options} == {"zoo"}, predicted.stdout[-2000:]
    assert any(o["fits"] for o in options)
    swept = run([bin_ / "crossover", "sweep", "--workload", "zoo", "--param", "arch=shufflenet_v2_x1_0", "--smoke",
                 "--repeats", "1", "--devices", "cpu", "--out", "OUT", "--no-report"], cwd=tmp_path, env=env)
    rows = pd.read_parquet(tmp_path / "OUT")
    assert (rows["status"] == "ok").all() and set(rows["workload"]) == {"zoo"}, swept.stdout[-3000:]
    assert set(rows["workload_module"]) == {"crossover.examples.zoo:workload"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OUT"]  # nothing written outside --out

"""A trial's row is built from one definition: every config field lands in a schema column (or names
the one that stands for it), a failed trial becomes a row whatever failed, and the house's imports
point down (the schema below all, analysis below sweeps and trainables; no circle among the trainables)."""

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from crossover import schema
from crossover.config import TrialConfig
from crossover.trainables.rows import NOT_COLUMNS, config_row, failed_row
from crossover.trainables.trial import resolve

ROOT = Path(__file__).resolve().parents[1]


def test_every_config_field_is_a_column_or_names_the_one_that_stands_for_it():
    fields = {f.name for f in dataclasses.fields(TrialConfig)}
    assert set(NOT_COLUMNS) <= fields
    assert fields - set(NOT_COLUMNS) <= set(schema.NAMES)
    trial = resolve(TrialConfig("tabular", device="cuda/2", depth=3))
    row = config_row(trial)
    assert set(row) <= set(schema.NAMES) and set(schema.CONFIG_COLUMNS) <= set(row)
    assert (row["depth"], row["width"], row["batch_size"], row["gpus_requested"]) == (3, 64, 64, 0.5)
    assert row["data_requested"] == "generated" and row["config_hash"] == trial.hash


@pytest.mark.parametrize("cfg", [TrialConfig("disc", width=0), TrialConfig("nope"), TrialConfig("disc", device="tpu")])
def test_a_config_that_cannot_resolve_still_becomes_an_error_row(cfg):
    row = failed_row(cfg, "ConfigError: planted")
    assert row["status"] == "error" and row["config_hash"] == cfg.config_hash()
    assert (row["workload"], row["device"], row["width"]) == (cfg.workload, cfg.device, cfg.width)
    assert schema.to_table([row]).num_rows == 1  # it is a row of the schema


def test_the_trainable_reports_a_bad_config_as_its_error_row(local_ray, tmp_path):
    from ray import tune

    from crossover.schema import ROW_KEY
    from crossover.trainables.trainable import TrialWorker

    bad = {"trials": [TrialConfig("disc", width=0).to_dict()], "resources": {"cpu": 1, "gpu": 0}}
    results = tune.Tuner(tune.with_resources(TrialWorker, {"cpu": 1}), param_space={"group": bad},
                         run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)).fit()
    (row,) = results[0].metrics[ROW_KEY]
    assert row["status"] == "error" and row["error"].startswith("ConfigError: width must be an integer >= 1, got 0")
    assert row["width"] == 0 and row["workload"] == "disc"


def test_analysis_imports_neither_torch_nor_ray_nor_sweeps():
    # the loader and the decision, the package and its schema too: crossover/__init__.py imports a job file's
    # names (torch) only when one is asked for
    modules = ["crossover", "crossover.schema", *(f"crossover.analysis.{m}" for m in (
        "load", "decide", "report", "cost", "engines", "parallel", "overhead", "__main__"))]
    check = (f"import sys, {', '.join(modules)}; "
             "print(sorted(m for m in sys.modules if m in ('torch', 'ray', 'crossover.sweeps', 'crossover.trainables')))")
    out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['crossover.trainables']"  # its __init__ and the device vocabulary alone, below


def test_a_job_files_names_import_torch_when_first_asked_for():
    check = ("import sys, crossover; before = 'torch' in sys.modules; "
             "from crossover import ConfigError, Data, Param, TrialConfig, Workload; "
             "print(before, 'torch' in sys.modules, Workload.__module__, Data.__module__, crossover.__all__)")
    out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split(" ", 4) == ["False", "True", "crossover.workload", "crossover.data",
                                        "['ConfigError', 'Data', 'Param', 'TrialConfig', 'Workload']\n"]


def _imports(folder: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the project it imports, from the source (module level and in functions)."""
    graph = {}
    for path in folder.glob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        graph[f"{package}.{path.stem}"] = {n for n in names if n.startswith("crossover.")}
    return graph


def test_imports_point_down_with_no_circle():
    graph = {**_imports(ROOT / "crossover", "crossover"),
             **{k: v for p in ("trainables", "sweeps", "analysis") for k, v in _imports(ROOT / p, f"crossover.{p}").items()}}
    # the schema at the bottom: every layer reads it, and it reads none
    assert graph["crossover.schema"] == set()
    # one exception: the device vocabulary (torch-free, over crossover.config alone), so that rows are
    # read by the same parse as the trials that wrote them
    vocabulary = {"crossover.trainables.devices", "crossover.trainables.devices.parse"}
    assert graph["crossover.trainables.devices"] == {"crossover.config", "crossover.config.ConfigError"}
    assert not any(n.startswith(("crossover.sweeps", "crossover.trainables")) and n not in vocabulary
                   for m in graph if m.startswith("crossover.analysis") for n in graph[m])
    assert not any(n.startswith(("crossover.sweeps", "crossover.analysis"))
                   for m in graph if m.startswith("crossover.trainables") for n in graph[m])

    def reaches(start: str, seen: set) -> set:
        for n in graph.get(start, ()):
            if n in graph and n not in seen:
                seen.add(n)
                reaches(n, seen)
        return seen

    circles = sorted(m for m in graph if m in reaches(m, set()))
    assert circles == [], f"modules that import themselves back: {circles}"


def test_the_config_hash_tells_apart_what_changes_the_measurement():
    base = TrialConfig("lenet")
    assert TrialConfig("lenet", data_dir="/data/mnist").config_hash() != base.config_hash()  # MNIST, not digits
    from crossover.sweeps.scaling import parse_args  # one directory, however the flag spells it: one hash
    assert {parse_args(["--data-dir", d]).data_dir for d in ("/data/mnist", "/data/mnist/", "/data//mnist")} == {"/data/mnist"}
    assert TrialConfig("lenet", min_timed_s=2.0).config_hash() != base.config_hash()
    assert TrialConfig("lenet").config_hash() == base.config_hash()

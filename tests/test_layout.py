"""The checkout's layout is what tools read. Each module has one path: no links, and the folders trainables/, sweeps/
and analysis/ install as crossover.trainables, crossover.sweeps and crossover.analysis (pyproject.toml's
package-dir). An import between them is relative, so that a tool reading the files finds its file by the folders
alone (sweeps/cli.py `from ..analysis.cli import` -> analysis/cli.py), and Python finds the same file by the
dotted name. And a name means something in one place: a built-in workload's name keys nothing outside its Workload
(trainables/workloads.py)."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import crossover
from crossover.trainables.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("trainables", "sweeps", "analysis")

RESOLVE = """
import importlib.util, json, sys
print(json.dumps({name: importlib.util.find_spec(name).origin for name in json.loads(sys.argv[1])}))
"""


def modules() -> dict[str, Path]:
    """Every module of the package in the checkout, by its dotted name: the file it must resolve to."""
    found = {f"crossover.{f.stem}": f for f in (ROOT / "crossover").glob("*.py") if f.stem != "__init__"}
    # every subpackage (a folder with an __init__.py: analysis/decide/, analysis/model/), not a folder of data and
    # scripts (analysis/public-tables/)
    folders = [init.parent for package in PACKAGES for init in (ROOT / package).rglob("__init__.py")]
    for f in (f for folder in folders for f in folder.glob("*.py")):
        parts = f.relative_to(ROOT).with_suffix("").parts  # analysis/decide/grid -> crossover.analysis.decide.grid
        found[".".join(("crossover", *(parts[:-1] if f.stem == "__init__" else parts)))] = f
    return found


def test_every_dotted_name_resolves_to_its_one_file():
    files = modules()
    assert {"crossover.sweeps.runner", "crossover.workload", "crossover.analysis.load",
            "crossover.analysis.decide", "crossover.analysis.model.predict"} <= set(files)
    done = subprocess.run([sys.executable, "-c", RESOLVE, json.dumps(sorted(files))], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    origins = {name: Path(origin) for name, origin in json.loads(done.stdout).items()}
    assert {name: origins[name] for name in files} == files


def test_no_file_of_the_checkout_is_a_link():
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert [line for line in listed.splitlines() if line.startswith("120000")] == []


def imports(path: Path):
    """The `from X import ...` statements of a module, anywhere in it: (line, level, module, names)."""
    return [(node.lineno, node.level, node.module or "", [a.name for a in node.names])
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)]


def is_script(path: Path) -> bool:
    return "if __name__ == \"__main__\":" in path.read_text()


def test_an_import_between_the_folders_is_relative_and_names_a_file_by_the_folders_alone():
    files = [f for p in PACKAGES for f in (ROOT / p).rglob("*.py") if "public-tables" not in f.parts]
    unresolved, absolute, relative = [], [], 0
    for f in files:
        for line, level, module, names in imports(f):
            where = f"{f.relative_to(ROOT)}:{line}"
            if level:
                relative += 1
                base = f.parents[level - 1].joinpath(*module.split(".") if module else ())
                targets = [base] if module else [base / name for name in names]
                if not all(t.with_suffix(".py").is_file() or (t / "__init__.py").is_file() for t in targets):
                    unresolved.append(where)
            elif module.split(".")[:2] in (["crossover", p] for p in PACKAGES) and not is_script(f):
                absolute.append(where)  # only a script run by its path (python sweeps/scaling.py) has no package
    assert relative > 250 and unresolved == [] and absolute == []


def test_the_analysis_is_fed_data_it_imports_no_sweeps_module_and_starts_no_process():
    # the command layer (sweeps/) counts a step and hands the counts over (sweeps/counting.py); analysis/ reads them
    found = []
    for f in (f for f in (ROOT / "analysis").rglob("*.py") if "public-tables" not in f.parts):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [("." * node.level) + (node.module or "")] if isinstance(node, ast.ImportFrom) else []
            found += [f"{f.relative_to(ROOT)}: {n}" for n in names
                      if n.split(".")[0] in ("subprocess", "multiprocessing") or "sweeps" in n.split(".")]
    assert found == []


def test_the_analysis_takes_counted_steps_as_data_never_a_function_to_call():
    # `crossover decide` and `crossover report` hand the analysis the counts (crossover/step.py Step -> dict | str),
    # never a counting function: no parameter of analysis/ is named count, and each layer the counts pass takes them
    params = {}
    for f in (f for f in (ROOT / "analysis").rglob("*.py") if "public-tables" not in f.parts):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params[f"{f.relative_to(ROOT)}:{node.name}"] = {a.arg for a in (*node.args.args, *node.args.kwonlyargs)}
    assert [where for where, names in params.items() if "count" in names] == []
    for where in ("analysis/__main__.py:main", "analysis/report.py:build", "analysis/verdict.py:priced",
                  "analysis/decide/answer.py:decide", "analysis/decide/speeds.py:planned_step"):
        assert "counts" in params[where], where


def test_a_script_run_by_its_path_imports_by_the_package_name():
    # `python studies/parity.py` runs the file with no package: a relative import there fails
    said = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    scripts = {ROOT / m for m in re.findall(r"python3? ((?:sweeps|trainables|analysis|studies)/[\w/]+\.py)", said)}
    assert {ROOT / "sweeps" / "scaling.py", ROOT / "studies" / "parity.py"} <= scripts
    assert [str(s) for s in scripts if not s.is_file() or any(level for _, level, _, _ in imports(s))] == []


def test_the_studies_stand_apart_from_the_product_with_one_import_style():
    # a study imports the product by the package's name and another study by its own name (the script's folder is
    # first on its path); nothing the package installs imports a study, so the wheel needs none
    studies = {f.stem for f in (ROOT / "studies").glob("*.py")}
    assert {"parity", "reference", "engines", "count_reference"} <= studies
    assert not (ROOT / "studies" / "__init__.py").exists()
    wrong = [f"studies/{f.name}:{line}: {module}" for f in (ROOT / "studies").glob("*.py")
             for line, level, module, _ in imports(f)
             if level or module.split(".")[0] in PACKAGES or module.startswith("studies")]
    assert wrong == []
    product = [f for f in [*(ROOT / "crossover").glob("*.py"), *(f for p in PACKAGES for f in (ROOT / p).rglob("*.py"))]
               if "public-tables" not in f.parts]
    found = [f"{f.relative_to(ROOT)}: {name}" for f in product for node in ast.walk(ast.parse(f.read_text()))
             for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else
                          [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
             if name.split(".")[0] in studies | {"studies"}]
    assert found == []


# The names two folders share because they are one idea at two layers: a study and its figures (engines, overhead,
# parallel), the flags of the sweeps and of the analysis (cli), a command and its model (predict), a step's counted
# peak and what a run needs on a card (memory). Each pair's upper or lower module names the other in its docstring.
TWO_LAYERS = {"cli", "engines", "overhead", "parallel", "predict", "memory"}


def test_a_module_name_means_one_thing_across_the_folders():
    folders = ("crossover", *PACKAGES, "studies")
    files = [f for folder in folders for f in (ROOT / folder).rglob("*.py")
             if f.stem not in ("__init__", "__main__") and "public-tables" not in f.parts]
    by_name: dict[str, list[Path]] = {}
    for f in files:
        by_name.setdefault(f.stem, []).append(f)
    assert "crossover" not in by_name  # no module named after the package
    repeated = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert set(repeated) == TWO_LAYERS
    for name, paths in repeated.items():
        docs = {f: ast.get_docstring(ast.parse(f.read_text())) or "" for f in paths}
        named = [f for f, doc in docs.items() for other in paths if other != f and str(other.relative_to(ROOT)) in doc]
        assert named, name


def test_the_names_a_job_file_imports_resolve_statically_to_their_definitions():
    # crossover/__init__.py imports Data and Workload under TYPE_CHECKING (torch comes on first use), the rest at once
    tree = ast.parse((ROOT / "crossover" / "__init__.py").read_text())
    named = {a.name: node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             for a in node.names if node.module and node.module.startswith("crossover.")}
    assert set(crossover.__all__) <= set(named)
    for name in crossover.__all__:
        module = ROOT.joinpath(*named[name].split(".")).with_suffix(".py")
        defined = {n.name for n in ast.parse(module.read_text()).body if isinstance(n, ast.ClassDef)}
        assert name in defined, (name, module)
        assert getattr(crossover, name).__module__ == named[name]


# Where a built-in's name may be a string: its own definition, alone. Tests and examples/ name built-ins as a user
# would.
NAMED_HERE = {"trainables/workloads.py"}


def literals(tree: ast.AST):
    """The string constants of a module that are no docstring: (line, text)."""
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]


def test_no_built_in_workload_name_is_a_string_outside_its_workload():
    """A study's grid lives on the Workload (Workload.grids, trainables/workloads.with_grid), a capability in its flags:
    a name used as a key elsewhere would be a second definition of what the workload is."""
    files = [f for f in [*(ROOT / "crossover").glob("*.py"), *(f for p in PACKAGES for f in (ROOT / p).rglob("*.py"))]
             if f.relative_to(ROOT).as_posix() not in NAMED_HERE]
    assert len(files) > 60
    found = [f"{f.relative_to(ROOT)}:{line}: {text!r}" for f in files for line, text in literals(ast.parse(f.read_text()))
             if text in WORKLOADS]
    assert found == []

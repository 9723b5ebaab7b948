"""The checkout's layout is what tools read: every module's dotted name resolves, with nothing but the checkout on
the path and nothing run at import, to its own file through a folder of that name (crossover/sweeps ->
../sweeps), as an editor or a type checker resolves it. And a name means something in one place: a built-in
workload's name keys nothing outside its Workload (trainables/workloads.py)."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from crossover.trainables.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("trainables", "sweeps", "analysis")

# Run with -I: no PYTHONPATH, and the checkout first on the path, ahead of site-packages (an installed crossover or an
# editable install's finder would give another origin, which the test refuses). find_spec locates a module without
# running it, but its parent packages' __init__ run: crossover's imports nothing of the project, analysis/decide/'s
# and analysis/model/'s import their modules (and so numpy, pandas, yaml), which is why site-packages stays.
RESOLVE = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
print(json.dumps({name: importlib.util.find_spec(name).origin for name in json.loads(sys.argv[2])}))
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


def test_every_dotted_name_resolves_to_its_file_through_the_folder_it_names():
    files = modules()
    assert {"crossover.sweeps.runner", "crossover.trainables.workload", "crossover.analysis.load",
            "crossover.analysis.decide", "crossover.analysis.model.predict"} <= set(files)
    done = subprocess.run([sys.executable, "-I", "-c", RESOLVE, str(ROOT), json.dumps(sorted(files))],
                          capture_output=True, text=True, timeout=60, check=True)
    origins = {name: Path(origin) for name, origin in json.loads(done.stdout).items()}
    for name, file in files.items():
        # the path as found, not resolved (crossover/sweeps/runner.py): the one a tool follows from the name
        where = ROOT / "crossover" / Path(*name.split(".")[1:])
        assert origins[name] == (where / "__init__.py" if file.stem == "__init__" else where.with_suffix(".py")), name
        assert origins[name].resolve() == file.resolve(), name


def test_the_folders_are_relative_links_so_a_clone_anywhere_resolves_them():
    for package in PACKAGES:
        link = ROOT / "crossover" / package
        assert link.is_symlink() and os.readlink(link) == f"../{package}", link


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

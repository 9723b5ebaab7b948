"""mypy on the checkout as it is, each module under the name Python imports it by (`make typecheck`).

    .venv/bin/python .ci/typecheck.py        # what `make typecheck` runs; extra mypy flags pass through

A folder installs under another name (pyproject.toml's package-dir: sweeps/ is crossover.sweeps), which mypy cannot
be told: it names a file by its folders, and follows an import by the name to a folder of that name. So this hands
mypy every module with its name, read from the package-dir (sweeps/runner.py as crossover.sweeps.runner), and each
study as the script it is, by its own name (studies/parity.py as parity: its folder is first on its path). An import
then finds the module among them, and each error names the file in the checkout. The names go in through mypy's
build API (mypy.build.build with BuildSource), which mypy's command line has no flag for; the options are the
command line's, read from pyproject.toml's [tool.mypy].
"""

import os
import sys
from pathlib import Path

from mypy.build import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # mypy itself installs tomli where Python has no tomllib
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def folder(package: str, dirs: dict[str, str]) -> Path:
    """The checkout's folder of `package`: its own package-dir entry, else its parent's folder and its last name."""
    if package in dirs:
        return ROOT / dirs[package]
    parent, _, last = package.rpartition(".")
    return folder(parent, dirs) / last if parent else ROOT / package


def sources() -> list[BuildSource]:
    """Every module of the package by its dotted name, and every study by its own name."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = [BuildSource(str(f.relative_to(ROOT)), package if f.stem == "__init__" else f"{package}.{f.stem}")
             for package in setup["packages"] for f in sorted(folder(package, setup["package-dir"]).glob("*.py"))]
    return found + [BuildSource(str(f.relative_to(ROOT)), f.stem) for f in sorted((ROOT / "studies").glob("*.py"))]


def main() -> int:
    os.chdir(ROOT)  # pyproject.toml's paths (cache_dir) are the checkout's, and so is each error's
    _, options = process_options(["--config-file", "pyproject.toml", *sys.argv[1:]], require_targets=False)
    modules = sources()
    try:
        result = build(modules, options)
    except CompileError as e:  # a file mypy cannot parse, or a module found twice
        print("\n".join(e.messages))
        return 2
    print("\n".join(result.errors))
    errors = [line for line in result.errors if ": error:" in line]
    if errors:
        print(f"Found {len(errors)} errors (checked {len(modules)} source files)")
        return 1
    print(f"Success: no issues found in {len(modules)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the `crossover` command says is true from a wheel: its --help texts and the package's message strings name
commands as the user types them (`crossover sweep`, not `python sweeps/scaling.py`), data files by what they are (the
price table shipped with crossover, not analysis/prices.yaml), and no path outside the project is anywhere in the
package. tests/test_wheel.py builds and installs the wheel itself (slow); this reads the sources and the help."""

import ast
import re
import subprocess
import sys

import pytest
from test_command import ROOT
from test_layout import literals  # a module's string constants that are no docstring

# what only a checkout has: its scripts run by path, its commands by module where `crossover` has a subcommand, its
# data files and docs by their path there
CHECKOUT_ONLY = re.compile(
    r"python sweeps/|python -m crossover\.(analysis (report|decide)|sweeps\.(predict|command|scaling))\b"
    r"|analysis/(prices|devices)\.yaml|analysis/home_boxes|results/reference|docs/[\w-]+\.md")
OUTSIDE = re.compile(r"\.\./shared|seeds/0")  # the project's own sources, outside it
PACKAGE = ("analysis", "sweeps", "trainables", "crossover")


def test_no_message_string_of_the_package_names_a_checkout_only_command_or_path():
    found = [f"{path.relative_to(ROOT)}:{line}: {CHECKOUT_ONLY.search(text).group(0)!r}"
             for folder in PACKAGE for path in sorted((ROOT / folder).rglob("*.py"))
             for line, text in literals(ast.parse(path.read_text())) if CHECKOUT_ONLY.search(text)]
    assert not found, "\n".join(found)


def test_no_file_of_the_package_points_outside_the_project():
    found = [f"{path.relative_to(ROOT)}: {match.group(0)!r}"
             for folder in PACKAGE for path in sorted((ROOT / folder).rglob("*"))
             if path.is_file() and path.suffix in {".py", ".yaml", ".md", ".ipynb", ".json", ".csv", ".txt"}
             for match in [OUTSIDE.search(path.read_text(errors="replace"))] if match]
    assert not found, "\n".join(found)


def test_the_scan_finds_each_checkout_only_form_it_is_meant_to():
    # each form the issue saw, as it was written, is caught: the scans above can fail
    for said in ("(= python sweeps/scaling.py)", "python -m crossover.analysis report results/x",
                 "run a sweep first (python sweeps/scaling.py --name nosuch)", "cost: analysis/prices.yaml",
                 "fitted on results/reference", "docs/model.md, 'Bound by the host'"):
        assert CHECKOUT_ONLY.search(said), said
    assert OUTSIDE.search("../shared/seeds/002 (the blog post)")
    assert not CHECKOUT_ONLY.search("crossover sweep --out results; python -m crossover.analysis cost lists them")


@pytest.mark.parametrize("command", [[], ["sweep"], ["decide"], ["report"], ["predict"]])
def test_every_crossover_help_names_commands_and_files_as_a_wheel_has_them(command):
    done = subprocess.run([sys.executable, "-m", "crossover.sweeps.command", *command, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())  # argparse wraps the lines, a path among them
    assert said.startswith(f"usage: crossover {' '.join(command)}".rstrip()), said[:80]
    assert not CHECKOUT_ONLY.search(said) and not OUTSIDE.search(said), CHECKOUT_ONLY.search(said) or OUTSIDE.search(said)

"""What the `crossover` command says is true from a wheel: its --help texts (every subcommand's, and the main job's
script's) and the package's message strings name commands as the user types them (`crossover sweep`, not
`python sweeps/scaling.py` or `make run`), data files by what they are (the price table shipped with crossover, not
analysis/prices.yaml), a module by its dotted name (crossover.sweeps.plan, which a wheel has too, not sweeps/plan.py),
and no path outside the project is anywhere in the package. A failure names the file, the line and the words.
tests/test_wheel.py builds and installs the wheel itself (slow); this reads the sources and the help.

    python -m pytest tests/test_wheel_words.py
"""

import ast
import re
import subprocess
import sys

import pytest
from test_command import ROOT
from test_layout import literals  # a module's string constants that are no docstring

# the Makefile's targets: `make run` is a checkout's word for `crossover sweep`
TARGETS = re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M)
# what only a checkout has: its scripts run by path, its commands by module where `crossover` has a subcommand, its
# files and folders by their path there (a module is named by its dotted name, which a wheel has too), its Makefile
CHECKOUT_ONLY = re.compile(
    r"python (sweeps|studies)/|python -m crossover\.(analysis (report|decide)|sweeps\.(predict|command|scaling))\b"
    r"|\b(sweeps|studies|analysis|trainables|crossover|examples|tests|docs)/[\w./<>-]*|\bresults/reference\b"
    rf"|\bmake ({'|'.join(TARGETS)})\b")
OUTSIDE = re.compile(r"\.\./shared|seeds/0")  # the project's own sources, outside it
PACKAGE = ("analysis", "sweeps", "trainables", "crossover")
# what a user runs: every command's --help, the main job's script among them
HELPS = [[sys.executable, "-m", "crossover.sweeps.command", *command, "--help"]
         for command in ([], ["sweep"], ["decide"], ["report"], ["predict"])] + \
        [[sys.executable, "sweeps/scaling.py", "--help"]]


def offender(said: str) -> str:
    """The checkout form in `said`, with the words around it, or '' where there is none."""
    found = CHECKOUT_ONLY.search(said) or OUTSIDE.search(said)
    return f"{found.group(0)!r} in ...{said[max(found.start() - 80, 0):found.end() + 40]}..." if found else ""


def test_no_message_string_of_the_package_names_a_checkout_only_command_or_path():
    # every string of the package's code that is no docstring: its help, its errors, its printed lines
    found = [f"{path.relative_to(ROOT)}:{line}: {offender(text)}"
             for folder in PACKAGE for path in sorted((ROOT / folder).rglob("*.py"))
             for line, text in literals(ast.parse(path.read_text()))
             if CHECKOUT_ONLY.search(text)]
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
    # and each a wheel user was sent to: a module's file, a data file, a folder, a Makefile target
    for said in ("the planning process (sweeps/plan.py)", "every trial's precision (trainables/precision.py)",
                 "image data source (crossover/data.py)", "DDP, analysis/model/collective.py; an instance",
                 "the default fits `make run` in 3 minutes", "run `make test` first",
                 "a prediction (analysis/model/, or", "the parallel studies (python studies/parallel.py)"):
        assert CHECKOUT_ONLY.search(said), said
    for said in ("results/<sweep>", "rows go to OUT/NAME/", "python -m crossover.analysis parallel", "make it writable",
                 "crossover.analysis.model", "the GPU table shipped with crossover", "--workload zoo"):
        assert not CHECKOUT_ONLY.search(said), said


@pytest.mark.parametrize("command", HELPS, ids=lambda c: " ".join(c[1:-1]))
def test_every_help_names_commands_and_files_as_a_wheel_has_them(command):
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())  # argparse wraps the lines, a path among them
    if command[1] == "-m":
        assert said.startswith(f"usage: crossover {' '.join(command[3:-1])}".rstrip()), said[:80]
    assert not offender(said), f"{' '.join(command[1:])}: {offender(said)}"

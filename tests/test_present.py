"""The docs and the words the package says are of the present: none names a tracker's issue by number, in docs/, the
reference rows' READMEs, the package's data files (a price's note is printed) or any string of its code or the
studies' (what they print, their help, their docstrings). How a figure came to be is in `git log`."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ("analysis", "sweeps", "trainables", "crossover", "studies")  # and the studies, which print too
TEXT = {".md", ".yaml", ".json", ".txt", ".csv", ".ipynb"}
ISSUE = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def in_text(path: Path) -> list[str]:
    """Each line of a text file that names an issue: 'file:line: what'."""
    return [f"{_name(path)}:{n}: {match.group(0)!r}"
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if (match := ISSUE.search(line))]


def in_strings(path: Path) -> list[str]:
    """Each string constant of a module, docstrings included, that names an issue: 'file:line: what'."""
    return [f"{_name(path)}:{node.lineno}: {match.group(0)!r}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (match := ISSUE.search(node.value))]


def test_no_doc_data_file_or_string_of_the_package_names_an_issue_by_number():
    texts = [p for folder in ("docs", "results", *PACKAGE) for p in sorted((ROOT / folder).rglob("*"))
             if p.is_file() and p.suffix in TEXT]
    modules = [p for folder in PACKAGE for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(modules) > 60 and any(p.parent.name == "docs" for p in texts)
    found = [hit for p in texts for hit in in_text(p)] + [hit for p in modules for hit in in_strings(p)]
    assert not found, "\n".join(found)


def test_the_scan_finds_an_issue_named_as_it_was_written(tmp_path):
    for said in ("targets (issue 23; printed, never asserted):", "Checked again on 2026-11-26 (issue 29; superseded",
                 "Issue 42's six configurations", "Rows for issues 11 and 12", "issue #7"):
        assert ISSUE.search(said), said
    assert not ISSUE.search("a known issue; 12 of 16 trials") and not ISSUE.search("tissue 3")
    module = tmp_path / "m.py"
    module.write_text('"""A study."""\n\n\ndef f():\n    print("targets (issue 23):")\n')
    assert in_strings(module) == [f"{module}:5: 'issue 23'"]

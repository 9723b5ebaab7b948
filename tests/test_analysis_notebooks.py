"""The notebooks run top to bottom on a real kernel (this interpreter's) in a copy of the checkout, as a
fresh clone would, with no environment variable set; they are kept without outputs in git."""

import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from crossover.analysis.load import read

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "analysis" / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """The checkout's files as git sees them (tracked, and new ones not ignored): no results/scaling, no .venv."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    out = tmp_path_factory.mktemp("clone")
    for name in files:
        if (ROOT / name).is_file() and not name.startswith("results/scaling"):
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, out / name)
    return out


def test_the_notebooks_are_stored_without_outputs():
    assert [p.name for p in NOTEBOOKS] == ["cost.ipynb", "crossover.ipynb"]
    for path in NOTEBOOKS:
        cells = nbformat.read(path, as_version=4).cells
        assert all(not c.get("outputs") and not c.get("execution_count") for c in cells if c.cell_type == "code"), path


@pytest.mark.parametrize("name", [p.name for p in NOTEBOOKS], ids=lambda n: n.split(".")[0])
@pytest.mark.slow
def test_the_notebook_runs_in_a_fresh_clone_with_no_environment(name, clone, monkeypatch):
    monkeypatch.delenv("CROSSOVER_RESULTS", raising=False)
    path = clone / "analysis" / "notebooks" / name
    nb = nbformat.read(path, as_version=4)
    # 'python3' is ipykernel's own kernel; jupyter_client starts it with this interpreter (sys.executable)
    NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "\n".join(o.get("text", "") for o in outputs)
    # the newest reference scaling sweep with CPU and GPU rows, found from the clone's own results/reference, as
    # the notebooks choose it
    shipped = {d: rows["finished_at"].max() for d in (clone / "results" / "reference").glob("*/scaling")
               if (rows := read(d))["is_cpu"].any() and not rows["is_cpu"].all()}
    newest = max(shipped, key=shipped.get).relative_to(clone)
    assert str(newest) in text, (newest, text[:300])
    assert sum("image/svg+xml" in o.get("data", {}) for o in outputs) >= 3  # charts drawn offline, as SVG
    assert not any("cdn.jsdelivr" in str(o.get("data", {})) for o in outputs)
    assert re.search(r"\(NVIDIA H[0-9]+[^)]*\) faster past n_params", text) if name == "crossover.ipynb" \
        else "cheapest:" in text


def test_a_relative_crossover_results_is_read_from_the_checkout_not_from_the_notebooks_folder(monkeypatch):
    from crossover.analysis.load import notebook_dirs

    monkeypatch.chdir(ROOT / "analysis" / "notebooks")  # where a notebook's kernel starts
    assert notebook_dirs("results/scaling:/elsewhere/laptop", ROOT) == [ROOT / "results" / "scaling", Path("/elsewhere/laptop")]
    newest = notebook_dirs("", ROOT)  # unset: your results/scaling, else the newest reference scaling sweep
    assert len(newest) == 1 and newest[0].name == "scaling" and newest[0].is_dir()

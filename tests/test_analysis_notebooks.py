"""The notebooks run top to bottom on a real kernel (this interpreter's), and are kept without outputs in git."""

from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from analysis_rows import planted_rows, write

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "analysis" / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results directory of synthetic cpu and cuda rows, so that the notebooks have a crossover to show."""
    rows = planted_rows(np.geomspace(1e2, 1e6, 6), lambda x: 1e-3 * x / 1e4, lambda x: 1e-3 * (x / 1e4) ** 0.5)
    return write(rows, tmp_path_factory.mktemp("results") / "planted")


def test_the_notebooks_are_stored_without_outputs():
    assert [p.name for p in NOTEBOOKS] == ["cost.ipynb", "crossover.ipynb"]
    for path in NOTEBOOKS:
        cells = nbformat.read(path, as_version=4).cells
        assert all(not c.get("outputs") and not c.get("execution_count") for c in cells if c.cell_type == "code"), path


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_runs_on_a_real_kernel(path, results, monkeypatch):
    monkeypatch.setenv("CROSSOVER_RESULTS", str(results))
    nb = nbformat.read(path, as_version=4)
    # 'python3' is ipykernel's own kernel; jupyter_client starts it with this interpreter (sys.executable)
    NotebookClient(nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(path.parent)}}).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "cuda faster past n_params" in text if path.stem == "crossover" else "break-even" in text

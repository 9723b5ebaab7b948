"""Every reader sees every row and every column: the committed rows of results/reference/ read together
with a fresh sweep's through pandas, pyarrow, DuckDB and polars, and a fresh results directory, report
written, read whole by every reader (Tune's state, the report, the lock and the runs file live beside
it: polars' `read_parquet(DIR)` refuses a directory with any file that is not Parquet)."""

from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from crossover import schema
from crossover.analysis import report
from crossover.analysis.crossings import Bootstrap
from crossover.analysis.migrate import row_files
from crossover.sweeps.space import Space

ROOT = Path(__file__).resolve().parent.parent
# Only results/reference/ is committed (.gitignore); a checkout's own sweeps under results/ are not read.
REFERENCE = ROOT / "results" / "reference"
FRESH = {"disc": {"depth": [2, 3], "epochs": [3]}, "peaks": {"dataset_size": [100], "epochs": [5]}}


@pytest.fixture(scope="module")
def fresh(local_ray, tmp_path_factory):
    """A real smoke sweep through crossover.sweeps.runner, with its report written as sweeps/scaling.py writes it."""
    from crossover.sweeps import runner

    out = tmp_path_factory.mktemp("results")
    store = runner.run(Space("fresh", FRESH, ("cpu",), cpu_threads=1), out, log=lambda line: None)
    report.build([store.dir], boot=Bootstrap(draws=10), reference=False)
    return store


def readers(files: list[Path]) -> dict[str, tuple[int, list[str]]]:
    """(rows, columns) of `files` as each reader sees them, read as one dataset."""
    names = [str(f) for f in files]
    duck = duckdb.sql(f"SELECT * FROM read_parquet({names!r}, union_by_name=false)")
    arrow = ds.dataset(names, format="parquet").to_table()
    both = pd.read_parquet(names), pl.read_parquet(names)
    return {"pandas": (len(both[0]), list(both[0].columns)), "polars": (both[1].height, both[1].columns),
            "pyarrow.dataset": (arrow.num_rows, arrow.column_names),
            "duckdb": (duck.aggregate("count(*)").fetchall()[0][0], duck.columns)}


def test_the_committed_rows_and_a_fresh_sweeps_read_as_one_dataset_in_every_reader(fresh):
    committed = row_files(REFERENCE)
    assert committed, f"no row files under {REFERENCE}"
    files = committed + fresh.files()
    expected = sum(pq.read_metadata(f).num_rows for f in files)
    seen = readers(files)
    # every reader: every row and exactly the schema's columns (a reference file lacking one would make
    # DuckDB drop it, or polars raise, as they once did: python -m crossover.analysis migrate results/reference)
    assert seen == {name: (expected, schema.NAMES) for name in seen}
    # the fresh rows come last: a reader that took the first file's columns still kept theirs
    assert pl.read_parquet([str(f) for f in files])["sweep"].to_list()[-len(fresh.files()):] == ["fresh"] * len(fresh.files())


def test_a_fresh_results_directory_holds_rows_alone_and_the_globs_read_them_all(fresh):
    out = fresh.dir.parent
    rows = len(fresh.files())
    assert rows == len(Space("fresh", FRESH, ("cpu",)).expand())  # one file a trial
    # beside the rows, never among them: Tune's state, the report, the lock, the runs file
    assert {p.name for p in fresh.dir.iterdir()} == {p.name for p in fresh.files()}
    assert (out / "_reports" / "fresh" / "index.html").is_file() and (out / "_tune" / "fresh").is_dir()
    assert (out / "_locks" / "fresh").is_file() and schema.runs_file(fresh.dir).is_file()
    assert pl.read_parquet(str(fresh.dir)).height == rows and pd.read_parquet(fresh.dir).shape[0] == rows
    assert pl.read_parquet(str(fresh.dir / "*.parquet")).height == rows
    assert duckdb.sql(f"SELECT count(*) FROM '{fresh.dir}/*.parquet'").fetchall()[0][0] == rows
    assert duckdb.sql(f"SELECT count(*) FROM '{fresh.dir}/**/*.parquet'").fetchall()[0][0] == rows
    assert len(pd.read_parquet(fresh.dir)) == rows
    # results/ as one dataset: pyarrow skips _tune/ and _reports/ (the report's crossover.parquet is no row)
    assert ds.dataset(out, format="parquet").count_rows() == rows

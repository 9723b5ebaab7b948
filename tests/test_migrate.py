"""python -m crossover.analysis migrate: row files of older columns rewritten to exactly the schema's, atomically,
the current ones left alone, and a file that cannot be rewritten without loss refused by name with
every file left as it was."""

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from analysis_rows import row, write

from crossover import schema
from crossover.analysis.__main__ import main
from crossover.analysis.load import read
from crossover.analysis.migrate import copy_counts, migrate, stored_schema

FINISHED = dt.datetime(2026, 11, 21, 12, 30, 5, tzinfo=dt.timezone.utc)


def table(**values) -> pa.Table:
    return schema.to_table([{**row("disc", "cpu", [0.01, 0.012, 0.011], depth=3), "finished_at": FINISHED,
                             "trial_id": "t1", **values}])


def old(t: pa.Table) -> pa.Table:
    """As rows written before context, precision and gpu_ids existed: those columns absent, the others
    in another order, and micro_batches (null on every row) stored without a type."""
    t = t.drop_columns(["context", "precision", "gpu_ids"])
    t = t.set_column(t.schema.get_field_index("micro_batches"), "micro_batches", pa.nulls(len(t)))
    return t.select(list(reversed(t.column_names)))


def test_older_columns_are_rewritten_to_exactly_the_schema_and_current_files_are_left(tmp_path, capsys):
    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / "_aside").mkdir()
    pq.write_table(old(table()), tmp_path / "a" / "deep" / "old.parquet")
    pq.write_table(table(config_hash="c" * 16), tmp_path / "a" / "current.parquet")
    pq.write_table(pa.table({"x": [1]}), tmp_path / "_aside" / "stray.parquet")  # set aside: not a row file
    current = (tmp_path / "a" / "current.parquet").read_bytes()
    assert "context" not in pq.read_schema(tmp_path / "a" / "deep" / "old.parquet").names

    assert main(["migrate", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == ("1 row files rewritten to this version's schema's columns (schema version "
                                               "kept), 1 already current")
    rewritten = pq.read_table(tmp_path / "a" / "deep" / "old.parquet")
    assert rewritten.column_names == schema.NAMES
    assert rewritten.schema.field("micro_batches").type == pa.int64()
    assert rewritten.to_pylist()[0] == pq.read_table(tmp_path / "a" / "current.parquet").to_pylist()[0] | {
        "config_hash": rewritten["config_hash"][0].as_py(), "context": None, "precision": None, "gpu_ids": None}
    assert rewritten["schema_version"].to_pylist() == [schema.SCHEMA_VERSION]
    assert (tmp_path / "a" / "current.parquet").read_bytes() == current  # already current: not rewritten
    assert sorted(p.name for p in (tmp_path / "a" / "deep").iterdir()) == ["old.parquet"]  # no temporary left
    assert migrate(tmp_path) == (0, 2)
    assert len(read(tmp_path / "a", tmp_path / "a" / "deep")) == 2


@pytest.mark.parametrize("bad, column, fix", [
    (lambda t: t.append_column("colour", pa.array(["red"])), "colour", "add it to COLUMNS"),
    (lambda t: t.set_column(t.schema.get_field_index("depth"), "depth", pa.array(["3"])), "depth",
     "no cast keeps its meaning"),
    (lambda t: t.set_column(t.schema.get_field_index("depth"), "depth", pa.array([2.5])), "depth",
     "a value does not fit"),
    (lambda t: t.set_column(t.schema.get_field_index("finished_at"), "finished_at",
                            t["finished_at"].cast(pa.timestamp("s"))), "finished_at", "no cast keeps its meaning"),
    (lambda t: t.set_column(t.schema.get_field_index("schema_version"), "schema_version", pa.array([schema.SCHEMA_VERSION + 1])), "schema_version",
     "only rows of this version"),
])
def test_a_file_that_cannot_be_rewritten_without_loss_is_refused_and_nothing_is_written(bad, column, fix, tmp_path,
                                                                                         capsys):
    pq.write_table(old(table()), tmp_path / "a.parquet")  # migratable, but the run stops before writing it
    pq.write_table(bad(old(table(config_hash="b" * 16))), tmp_path / "b.parquet")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["migrate", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert f"{tmp_path / 'b.parquet'}: column {column} " in error and fix in error
    assert "move b.parquet out of" in error or "add it to COLUMNS" in error
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_directory_without_rows_or_that_does_not_exist_is_named(tmp_path, capsys):
    assert main(["migrate", str(tmp_path)]) == 2
    assert f"no *.parquet row files below {tmp_path}" in capsys.readouterr().err
    assert main(["migrate", str(tmp_path / "nope")]) == 2
    assert f"results directory {tmp_path / 'nope'} does not exist" in capsys.readouterr().err


def test_a_changed_column_type_on_reading_points_at_the_migration(tmp_path):
    t = table()
    pq.write_table(t.set_column(t.schema.get_field_index("depth"), "depth", t["depth"].cast(pa.int32())),
                   tmp_path / "a.parquet")
    with pytest.raises(ValueError, match=r"column depth is int32.*python -m crossover.analysis migrate "):
        read(tmp_path)
    assert migrate(tmp_path) == (1, 0)
    assert read(tmp_path)["depth"].tolist() == [3]


COUNTS = {c: 10 * (i + 1) for i, c in enumerate(schema.OP_COLUMNS)}
TOTALS = {"flops_per_step": 700, "bytes_per_step": 900, "launches_per_step": 60}


def test_copy_counts_fills_gpu_rows_of_the_same_configuration_and_torch_and_nothing_else(tmp_path, capsys):
    counted = {**COUNTS, **TOTALS, "precision": "fp32", "engine": "eager", "torch_version": "2.11.0+cu130"}
    src = write([row("disc", "cuda", [0.01] * 3, depth=3, seed=s, **counted) for s in (0, 1)]
                + [row("disc", "cpu", [0.01] * 3, depth=4, **counted),  # a CPU's counts are no GPU's
                   row("peaks", "cuda", [0.01] * 3, depth=3, **counted),  # two sets of counts for one
                   row("peaks", "cuda", [0.01] * 3, depth=3, **{**counted, "matmul_flops_per_step": 1})],
                tmp_path / "h100")
    h200 = {"engine": "eager", "torch_version": "2.11.0+cu130", "device_name": "NVIDIA H200", "precision": None,
            "launches_per_step": 64, "costs_note": "earlier note"}  # precision null: written before the column
    dst = write([row("disc", "cuda", [0.02] * 3, depth=3, seed=5, **h200),  # matches (seed and timing differ)
                 row("disc", "cpu", [0.02] * 3, depth=3, **h200),  # never a CPU row
                 row("disc", "cuda", [0.02] * 3, depth=3, **{**h200, "torch_version": "2.9.0"}),  # other torch
                 row("disc", "cuda", [0.02] * 3, depth=3, **{**h200, "precision": "bf16"}),  # other precision
                 row("disc", "cuda", [0.02] * 3, depth=4, **h200),  # counted on the CPU only
                 row("peaks", "cuda", [0.02] * 3, depth=3, **h200)],  # counted twice, differently
                tmp_path / "h200")
    untouched = {p.name: p.read_bytes() for p in dst.iterdir() if p.name != "0.parquet"}

    assert main(["migrate", "--copy-counts", str(src), str(dst)]) == 0
    assert capsys.readouterr().out.startswith("1 GPU rows took per-class counts from ")
    got = pq.read_table(dst / "0.parquet")
    assert got.schema.equals(stored_schema(), check_metadata=False) and got.num_rows == 1  # exactly the schema
    r = got.to_pylist()[0]
    assert {c: r[c] for c in COUNTS} == COUNTS
    assert (r["flops_per_step"], r["launches_per_step"]) == (700, 64)  # a total the row had is its own
    assert r["costs_note"] == ("earlier note; per-class counts copied from the NVIDIA H100 80GB HBM3 row of the "
                               "same configuration, same torch")
    assert r["epoch_s_median"] == 0.02 and r["seed"] == 5 and r["precision"] is None
    assert {p.name: p.read_bytes() for p in dst.iterdir() if p.name != "0.parquet"} == untouched
    assert copy_counts([src], dst) == (0, 4)  # filled once; the four other GPU rows stay without counts


def test_copy_counts_from_rows_without_counts_is_refused_by_name(tmp_path):
    src = write([row("disc", "cuda", [0.01] * 3)], tmp_path / "old")
    with pytest.raises(ValueError, match=f"no ok cuda rows with per-class counts below {tmp_path / 'old'}"):
        copy_counts([src], src)


def test_compacting_a_sweep_folder_keeps_every_row_once_and_a_sweep_still_resumes_on_it(tmp_path, capsys):
    from crossover.sweeps.store import Store
    rows = [{**row("disc", "cpu", [0.01 * (k + 1)] * 3, depth=k), "finished_at": FINISHED} for k in range(2, 6)]
    sweep = write(rows, tmp_path / "ref" / "scaling")
    other = write(rows[:1], tmp_path / "ref" / "alone")  # one file: nothing to fold
    before = read(sweep).sort_values("config_hash", ignore_index=True)
    assert main(["migrate", "--compact", str(tmp_path / "ref")]) == 0
    assert "1 sweep folders compacted to one row file each (4 row files folded in)" in capsys.readouterr().out
    assert [p.name for p in sweep.glob("*.parquet")] == ["scaling.parquet"] and len(list(other.glob("*.parquet"))) == 1
    after = read(sweep).sort_values("config_hash", ignore_index=True)
    assert pq.read_schema(sweep / "scaling.parquet").equals(stored_schema(), check_metadata=False)
    pd_columns = [c for c in before.columns if c != "epoch_s"]
    assert after[pd_columns].equals(before[pd_columns]) and after["epoch_s"].map(list).equals(before["epoch_s"].map(list))
    assert Store(sweep).measured(log=lambda *_: None) == set(before["config_hash"])  # resume reads inside the file
    # a crash after the combined file was written, before the others were removed: each row twice; again: once
    write(rows[:2], tmp_path / "again")
    for i, path in enumerate(sorted((tmp_path / "again").glob("*.parquet"))):
        path.rename(sweep / f"left-{i}.parquet")
    assert read(sweep)["config_hash"].duplicated().sum() == 2
    main(["migrate", "--compact", str(sweep)])
    assert len(read(sweep)) == 4 and read(sweep)["config_hash"].is_unique

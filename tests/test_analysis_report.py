"""Reading results directories and writing the report: from a real smoke sweep on a local Ray, with
clear errors for an empty or missing directory and rows of two schema versions, the rows it left out
(outside_load) counted, and without torch or ray."""

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crossover.analysis import report
from crossover.analysis.crossings import Bootstrap
from crossover.analysis.__main__ import main
from crossover.analysis.load import read
from analysis_rows import planted_rows, row, write
from crossover import schema
from crossover.sweeps.space import Space

SMOKE = {"disc": {"depth": [2, 3, 4], "epochs": [3]}, "peaks": {"dataset_size": [100, 400], "epochs": [4]}}


@pytest.fixture(scope="module")
def swept(local_ray, tmp_path_factory):
    """A real sweep: CPU trials that succeed, and 'cuda' trials that fail on this node (no CUDA)."""
    from crossover.sweeps import runner

    out = tmp_path_factory.mktemp("results")
    return runner.run(Space("smoke", SMOKE, ("cpu", "cuda"), cpu_threads=2), out, log=lambda line: None).dir


def test_the_report_renders_from_a_real_sweep(swept, tmp_path, capsys):
    # --include-loaded: on a machine shared with other work the sweep's rows may be flagged
    # outside_load, and what is drawn should not depend on that (the last test here checks the flag)
    assert main(["report", str(swept), "--draws", "50", "--include-loaded", "--no-reference"]) == 0
    printed = capsys.readouterr().out.splitlines()
    page = swept.parent / "_reports" / swept.name / "index.html"  # beside the rows, not among them
    # the terminal gets the answer and where the page is, on one screen; the tables are the page's
    assert printed[0].startswith("Where the GPU trains faster than the CPU") and printed[-1] == f"report: {page}"
    assert len(printed) <= report.SHORT_LINES and not any(line.startswith("== ") for line in printed), printed
    assert main(["report", str(swept), "--draws", "50", "--include-loaded", "--no-reference", "--verbose"]) == 0
    assert "no two arms measured at the same sizes (arms: cpu)" in capsys.readouterr().out  # the crossover table
    text = page.read_text()
    for part in ("The crossover table", "epoch_time_vs_n_params", "epoch_times", "execution_time", "Devices measured",
                 "Failed trials", "CUDA not available on node", "<svg"):
        assert part in text, part
    assert (page.parent / "epoch_time_vs_depth.png").stat().st_size > 0
    assert len(pd.read_parquet(swept)) == 10  # the report folder is not read back as rows
    assert main(["summary", str(swept)]) == 0
    assert "== disc: median time per epoch, ms ==" in capsys.readouterr().out


def test_several_directories_make_one_report_with_arms_told_apart(swept, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    here = pd.read_parquet(swept)["device_name"].iloc[0]
    elsewhere = f"not {here} (a planted host)"  # differs from this host's CPU name, whatever it is
    for path in swept.glob("*.parquet"):  # the same sweep, as if measured on another host's CPU
        table = pq.read_table(path)
        column = table.schema.get_field_index("device_name")
        pq.write_table(table.set_column(column, "device_name", pa.array([elsewhere] * len(table))), other / path.name)
    rows = read(swept, other)
    assert set(rows.loc[rows["device"] == "cpu", "arm"]) == {f"cpu ({elsewhere})", f"cpu ({here})"}
    page, text = report.build([swept, other], boot=Bootstrap(draws=50), include_loaded=True, verbose=True)
    assert page == swept.parent / "_reports" / "smoke+other" / "index.html"
    assert "== disc ==" in text and f"cpu ({elsewhere})" in text  # two CPU arms at the same sizes: a crossover table


def test_a_missing_or_empty_directory_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="results directory .*nope does not exist: run a sweep first"):
        read(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no \\*.parquet rows"):
        read(tmp_path / "empty")
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "error: results directory" in capsys.readouterr().err


def test_a_folder_of_sweeps_reads_every_sweep_under_it_and_skips_tunes_reports_and_the_reference(tmp_path, capsys):
    from crossover.analysis.load import REFERENCE, sweep_dirs

    results = tmp_path / "results"
    sweeps = {"scaling": results / "scaling", "other": results / "other", "mine": results / "laptop" / "mine"}
    for i, (name, directory) in enumerate(sweeps.items()):
        write(planted_rows([10, 100, 1000], lambda x: 1e-3 * x, lambda x: 0.1 + 1e-5 * x, epochs=3, seed=i,
                           sweep=name), directory)
    # what sits beside the sweeps and is no sweep's rows: a report's table, Tune's state, rows set aside
    for stray in ("_reports/scaling/crossover.parquet", "_tune/scaling/x.parquet", "_aside/scaling/0.parquet",
                  ".hidden/0.parquet"):
        (results / stray).parent.mkdir(parents=True)
        (results / stray).write_bytes(b"not a row")
    (results / "_runs").mkdir()

    assert sweep_dirs(results) == sorted(sweeps.values())
    assert sweep_dirs(sweeps["scaling"]) == [sweeps["scaling"]]  # a sweep's own folder: itself
    rows = read(results)
    assert set(rows["results_dir"]) == {str(d) for d in sweeps.values()} and set(rows["sweep"]) == set(sweeps)
    assert len(rows) == len(read(*sweeps.values())) == 3 * 2 * 3
    assert len(read(results, sweeps["scaling"])) == len(rows)  # a sweep named twice is read once

    assert main(["decide", str(results), "--no-reference", "--out", str(tmp_path / "charts")]) == 0
    assert main(["report", str(results), "--no-reference", "--draws", "20"]) == 0
    assert f"report: {results / '_reports' / 'results' / 'index.html'}" in capsys.readouterr().out  # beside the sweeps
    # the shipped reference rows under a folder of yours (results/reference) are not your sweeps: they are
    # set beside yours by default. Given itself, the reference folder is read whole.
    (results / "reference").symlink_to(REFERENCE, target_is_directory=True)
    assert sweep_dirs(results) == sorted(sweeps.values())
    assert len(sweep_dirs(REFERENCE)) > 1 and all(d.is_relative_to(REFERENCE) for d in sweep_dirs(REFERENCE))


def test_a_folder_with_no_sweep_under_it_says_so(tmp_path, capsys):
    from crossover.analysis.load import REFERENCE

    (tmp_path / "_tune" / "scaling").mkdir(parents=True)
    (tmp_path / "_tune" / "scaling" / "x.parquet").write_bytes(b"Tune's, not a row")
    assert main(["decide", str(tmp_path), "--no-reference"]) == 2
    err = capsys.readouterr().err
    assert f"error: results directory {tmp_path} holds no *.parquet rows, in it or in any sweep's folder under it" in err
    assert f"crossover sweep --out {tmp_path}" in err
    (tmp_path / "reference").symlink_to(REFERENCE, target_is_directory=True)  # results/ of a fresh clone
    assert main(["decide", str(tmp_path), "--no-reference"]) == 2
    assert f"(the reference rows shipped with crossover, {REFERENCE}, are read only where you pass that folder)" in \
        capsys.readouterr().err


def test_rows_of_two_schema_versions_are_refused(tmp_path):
    write([row("disc", "cpu", [1.0])], tmp_path / "a")
    write([{**row("disc", "cpu", [1.0]), "schema_version": schema.SCHEMA_VERSION + 1}], tmp_path / "b")
    with pytest.raises(ValueError, match="rows of 2 schema versions read together") as info:
        read(tmp_path / "a", tmp_path / "b")
    assert "keep each version's rows in their own results directory" in str(info.value)
    with pytest.raises(ValueError, match=f"but this analysis reads version {schema.SCHEMA_VERSION}"):
        read(tmp_path / "b")


def test_analysis_never_imports_torch_or_ray():
    code = ("import sys, crossover.analysis.__main__, crossover.analysis.report, crossover.analysis.cost, crossover.analysis.prices, crossover.analysis.charts, crossover.analysis.crossings, "
            "crossover.analysis.load, crossover.analysis.summary, crossover.analysis.verdict; "
            "print(sorted(m for m in ('torch', 'ray') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_sweep_whose_every_trial_failed_still_reports(swept, tmp_path, capsys):
    failed = pd.read_parquet(swept).query("status == 'error'")
    out = tmp_path / "failed"
    out.mkdir()
    pq.write_table(pa.Table.from_pandas(failed, schema=schema.SCHEMA, preserve_index=False), out / "rows.parquet")
    assert main(["report", str(out), "--draws", "10"]) == 0
    text = (out.parent / "_reports" / out.name / "index.html").read_text()
    assert "Failed trials" in text and "CUDA not available on node" in text


def test_the_report_says_how_many_loaded_rows_it_left_out_and_kept(tmp_path, capsys):
    from analysis_rows import planted_rows

    rows = planted_rows([1e2, 1e3, 1e4, 1e5], lambda x: 1e-7 * x, lambda x: 1e-4 * (x / 1e4) ** 0.5, runs=2)
    rows[0]["outside_load"] = True  # another job used the host while CPU 1e2 seed 0 was timed (seed 1: quiet)
    for r in rows[6:8]:
        r["outside_load"] = True  # both CPU rows at 1e5: no quiet one, so they are used, and said
    directory = write(rows, tmp_path / "loaded")
    reported = tmp_path / "_reports" / "loaded"
    assert main(["report", str(directory), "--draws", "20"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "3 of 16 ok rows were timed while the host was busy" in printed
    assert "1 left out of the crossovers (the same configuration has quiet rows)" in printed
    assert "2 kept where the configuration has no quiet row" in printed
    assert "[busy]: timed while your machine was busy (other processes on its CPUs)" in printed
    assert "<b>Left out:</b> 3 of 16 ok rows" in (reported / "index.html").read_text()
    assert pd.read_parquet(reported / "crossover.parquet").query("metric == 'epoch_s'")["n_points"].max() == 4
    assert main(["report", str(directory), "--draws", "20", "--include-loaded"]) == 0
    assert "kept, as asked (--include-loaded)" in capsys.readouterr().out


def test_energy_per_epoch_where_a_counter_was_read_and_nothing_where_none_was():
    from analysis_rows import frame

    measured = row("disc", "cuda", [0.5] * 4, depth=3, gpu_energy_j=200.0, energy_note="cpu: /sys/class/powercap absent")
    unread = row("disc", "cpu", [1.0] * 4, depth=3, energy_note="gpu: none used (CPU trial); cpu: /sys/class/powercap absent")
    table = report.energy_table(frame([measured, unread]))
    assert list(table["arm"]) == ["cuda"]  # the CPU row read no counter: left out, not shown as 0
    assert table["gpu_j_per_epoch"].iloc[0] == pytest.approx(200.0 / 4)
    assert table["gpu_watts"].iloc[0] == pytest.approx(200.0 / 2.0)  # over its 2 s of timed epochs
    assert "cpu_j_per_epoch" not in table and report.energy_table(frame([unread])).empty


def test_reports_of_the_reference_rows_are_written_outside_results_reference():
    from crossover.analysis.load import REFERENCE

    shipped = REFERENCE / "h200-2026-11-26" / "scaling"
    assert report.default_out([shipped]) == REFERENCE.parent / "_reports" / "scaling"
    assert report.default_out([Path("/x/results/laptop")]) == Path("/x/results/_reports/laptop")


@pytest.fixture(scope="module")
def yours_and_built_in(tmp_path_factory):
    """A user's model measured on the CPU alone and a built-in; the built-in's sweep skipped two sizes and had
    one trial fail; `decide` priced the user's planned run into the report's folder, then `report` wrote it."""
    from analysis_rows import user_cpu_rows

    root = tmp_path_factory.mktemp("yours")
    mine = user_cpu_rows(root / "mine", "my_cnn")
    skipped = [{**row("disc", "cpu", [1.0], depth=d), "status": "error",
                "error": f"skipped: predicted past 15% of it, {d * 10} s (--budget)"} for d in (8, 9)]
    failed = {**row("disc", "cuda", [1.0], depth=2), "status": "error", "error": "RuntimeError: CUDA not available\nmore"}
    builtins = write(planted_rows([10, 100, 1000, 10_000], lambda x: 1e-4 * x, lambda x: 0.05 + 1e-6 * x, epochs=4)
                     + skipped + [failed], root / "builtins")
    out = root / "report"
    plan = ["--epochs", "30", "--dataset-size", "50000", "--workload", "my_cnn"]
    assert main(["decide", str(mine), str(builtins), "--out", str(out), *plan]) == 0
    decided = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["report", str(mine), str(builtins), "--out", str(out), "--draws", "20", *plan]) == 0
    return out, decided


def test_the_page_opens_with_your_planned_run_then_your_workload_before_the_built_ins(yours_and_built_in):
    out, _ = yours_and_built_in
    page = (out / "index.html").read_text()
    order = [page.index(part) for part in ("<h2>Your planned run</h2>", "<h3>my_cnn <span class=whose>(yours: my_cnn:workload)",
                                           "<h3>disc <span class=whose>(built-in)", "<h2>What a run like this sweep costs</h2>",
                                           "<summary>The crossover table", "<h2>Charts</h2>")]
    assert order == sorted(order)
    answer = page[:page.index("<h2>Charts</h2>")]
    assert "<pre>" not in answer  # HTML, not a monospace block cut off at the page's edge
    planned = answer[:answer.index("<h2>Where the GPU")]
    for header in ("time per epoch", "run time", "cost", "measured or predicted"):
        assert f"<th>{header}</th>" in planned
    assert "30 epochs of 50,000 samples of my_cnn" in planned and "s/epoch (" in planned  # a predicted one's interval
    # its first screen, before any fold, names the terminal's three picks: the GPU to rent, the box to buy with its
    # break-even and what its write-off assumes, your CPU; each option's precision and its price's date
    first = planned[:planned.index("<details>")]
    for pick in ("<b>rent, fastest:</b>", "<b>buy:</b>", "<b>your CPU:</b>", "runs a month against renting", "write-off: $",
                 "<th>precision</th>", "<th>price</th>"):
        assert pick in first, pick
    assert re.search(r"<td>of (<span class=n>)?20\d\d-\d\d", first)  # a rented or bought option's price, with its date


def test_the_report_and_decide_write_their_own_chart_files(yours_and_built_in):
    out, decided = yours_and_built_in
    assert {"decide_cost.html", "decide_front.html"} <= set(decided)
    assert all((out / name).read_bytes() == content for name, content in decided.items())  # none overwritten
    written = {p.stem for p in out.glob("*.html")}
    assert {"run_cost", "run_front", "sweep_cost", "sweep_front"} <= written
    assert "planned run (30 epochs of 50,000 samples of my_cnn)" in (out / "run_front.html").read_text()


def test_skipped_trials_are_summed_in_one_line_with_their_sizes_folded(yours_and_built_in):
    out, _ = yours_and_built_in
    page = (out / "index.html").read_text()
    failures = page[page.index("<h2>Trials not measured</h2>"):]
    assert "<p>2 trials of 1 workload skipped by the search for its --budget" in failures
    folded = failures[failures.index("<details><summary>Their sizes</summary>"):failures.index("</details>")]
    assert "predicted past 15% of it, 80 s (--budget)" in folded and "90 s" in folded
    rest = failures[failures.index("</details>"):]
    assert "CUDA not available" in rest and "skipped:" not in rest and "more" not in rest  # the error's first line


def test_no_share_in_the_step_bound_table_lies_outside_zero_to_one():
    from crossover.analysis import model
    from crossover.analysis.load import REFERENCE

    tables = model.bound_table(read(REFERENCE / "h100-2026-11-26" / "scaling"))
    assert tables
    for workload, table in tables.items():
        shares = [c for c in table if "share" in c]
        assert all(table[c].between(0, 1).all() for c in shares), workload
        assert {"launch_to_step", "compute_to_step", "memory_to_step"} <= set(table)  # ratios, named as such

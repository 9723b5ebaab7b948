"""One standalone HTML page per analysis: the answer first (analysis/verdict.py), charts, the crossover
table, and every measured device's environment.

    python -m analysis report results/scaling                   # writes results/_reports/scaling/index.html
    python -m analysis report results/laptop results/h100       # several sweeps: results/_reports/laptop+h100/
    python -m analysis report results/scaling --no-reference    # your rows alone, no decision section

By default (the command line, and sweeps/scaling.py) your rows are set beside the reference GPU rows of
the same configurations (analysis/summary.py: with_reference), and the page ends with the decision:
the measured grid as the sweep, on every option of analysis/prices.yaml and every home box
(analysis/decide.py), predicted figures marked.

`python sweeps/scaling.py` writes it at the end of a run. Next to index.html: crossover.parquet (the
tidy table) and every chart as HTML and PNG. The page embeds the charts as SVG, so it opens offline
and can be mailed as one file. The report folder sits beside the results directory, never in it
(which holds rows alone), under a name starting with '_' that Parquet readers of results/ skip.
Reads rows only; never imports torch or ray.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import os
from pathlib import Path

import pandas as pd

from analysis import charts, decide, model, parallel, summary, verdict
from analysis.crossover import (
    Bootstrap,
    baseline_first,
    left_out,
    render,
    slices,
    timed,
    write,
)
from analysis.load import environment, read
from analysis.schema import CROSSOVER_AXES, REPORTS, SIZE_AXES


def default_out(dirs: list[Path]) -> Path:
    """<parent>/_reports/<DIR> for one results directory; <parent>/_reports/<a>+<b> for several. Reports
    of the shipped reference rows go to results/_reports/ instead: results/reference/ holds what is
    committed, and a report written into it would be a stray file there. A folder of sweeps (results/,
    load.sweep_dirs) keeps the report in it, beside its sweeps': results/_reports/results."""
    named = [Path(d) if Path(d).name not in ("", "..") else Path(os.path.abspath(d)) for d in dirs]  # '.' has no name
    first = named[0]
    of_sweeps = first.is_dir() and next(first.glob("*.parquet"), None) is None
    parent = decide.REFERENCE.parent if decide.is_reference(first) else first if of_sweeps else first.parent
    return parent / REPORTS / "+".join(d.name for d in named)


def cannot_write(exc: OSError) -> str:
    """The message of an output (report, chart, table) that could not be written: what, why, the fix."""
    return (f"cannot write {exc.filename or 'the output'} ({exc.strerror or exc}): the rows are unchanged; free "
            "space on that disk or make it writable (or give --out another folder), then run the command again")


def figures(rows: pd.DataFrame, table: pd.DataFrame) -> dict[str, object]:
    """Every chart the rows allow, by file name."""
    out = {f"epoch_time_vs_{axis}": charts.epoch_time_vs_size(rows, table, axis)
           for axis in CROSSOVER_AXES if next(slices(rows, axis), None)}
    ok = rows[rows["status"] == "ok"]
    for workload, group in ok.groupby("workload"):
        varied = [a for a in SIZE_AXES if group[a].nunique() > 1]
        if len(varied) >= 2 and group["arm"].nunique() >= 2:
            out[f"speedup_{workload}"] = charts.speedup_heatmap(rows, workload, *varied[:2])
    out["epoch_times"] = charts.epoch_times(rows)
    out["execution_time"] = charts.execution_time(rows)
    if next(slices(rows, "batch_size"), None):
        out["throughput_vs_batch"] = charts.throughput_vs_batch(rows)
    scaling = parallel.chart(rows)
    if scaling is not None:
        out["ddp_scaling"] = scaling
    return out


def _svg(chart) -> str:
    buffer = io.StringIO()
    chart.save(buffer, format="svg")
    return buffer.getvalue()


def bounds_section(rows: pd.DataFrame) -> list[str]:
    """What bounds a step, per workload (analysis/model.py): why the GPU loses on small models."""
    tables = model.bound_table(rows)
    if not tables:
        return []
    return ["<h2>What bounds a step</h2><p>Each arm's smallest, middle and largest model: the share of its measured "
            "step that launches (x the calibrated overhead), FLOPs at peak and bytes at full bandwidth would take; "
            "the largest is its bound (docs/model.md).</p>",
            *[f"<h3>{html.escape(w)}</h3>" + _table(t) for w, t in tables.items()]]


def energy_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per workload, arm and size where a counter was read: joules an epoch (the timed epochs' energy over
    their count) and the mean power over them, median over the runs; GPU boards (NVML) and CPU packages
    (RAPL) apart, each null where its counter was not read (energy_note says why)."""
    columns = [c for c in ("gpu_energy_j", "cpu_energy_j") if c in rows]
    ok = rows[(rows["status"] == "ok")].dropna(subset=columns, how="all") if columns else rows.iloc[:0]
    if ok.empty:
        return pd.DataFrame()
    sizes = [a for a in SIZE_AXES if ok[a].nunique() > 1]
    per = {f"{c[:3]}_j_per_epoch": ok[c] / ok["epoch_s"].map(len) for c in columns}  # epoch_s: the timed epochs
    per |= {f"{c[:3]}_watts": ok[c] / ok["train_s"] for c in columns}
    table = ok.assign(**per).groupby(["workload", "arm", *sizes], dropna=False)[list(per)].median()
    return table.dropna(axis=1, how="all").reset_index()


def energy_section(rows: pd.DataFrame) -> list[str]:
    table = energy_table(rows)
    if table.empty:
        return []
    return ["<h2>Energy</h2><p>Measured over the timed epochs: the GPU boards' energy counter (NVML) and the "
            "CPU packages' (RAPL, every process on them), per epoch and as mean power; rows whose counters "
            "could not be read are left out (their energy_note says why).</p>", _table(table)]


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, na_rep="", float_format=lambda v: f"{v:.4g}")


def build(dirs: list[str | Path], out: Path | None = None, boot: Bootstrap = Bootstrap(),
          include_loaded: bool = False, reference: bool = False) -> tuple[Path, str]:
    """Write the report for `dirs`; returns the page's path and the verdict in full as text (the answer,
    the crossover table and, with `reference`, the decision: analysis/verdict.py).

    Rows flagged outside_load are left out of the crossovers and the charts where their configuration has
    quiet rows, and used where it has none, unless `include_loaded` keeps them all (analysis/crossover.py
    `timed`); the page and the text say how many. The devices and the failed trials
    list every row. With `reference`, the reference GPU rows of the same configurations are read
    alongside, and the page and the text end with the decision."""
    dirs = [Path(d) for d in dirs]
    rows = read(*dirs)
    rows = summary.with_reference(rows) if reference else rows
    said = verdict.reach(rows, boot, include_loaded, decision=reference)
    return write_page(said, dirs, out), verdict.render(said, verbose=True)


def write_page(said: verdict.Verdict, dirs: list[str | Path], out: Path | None = None) -> Path:
    """The page of `said` (the verdict of the rows of `dirs`), with its charts and crossover.parquet, in
    `out` (default: default_out). It opens with the answer as the end of a sweep prints it."""
    dirs = [Path(d) for d in dirs]
    rows, table, boot, include_loaded = said.rows, said.crossovers, said.boot, said.include_loaded
    out = Path(out) if out else default_out(dirs)
    write(table, out / "crossover.parquet")
    drawn = figures(timed(rows, include_loaded), table)
    dropped = left_out(rows, include_loaded)
    for name, chart in drawn.items():
        charts.save(chart, out / name)
    failed = rows[rows["status"] != "ok"]
    arms = ", ".join(baseline_first(rows))
    note = verdict.reference_note(rows)
    sections = [
        f"<h1>crossover report: {html.escape(' + '.join(str(d) for d in dirs))}</h1>",
        "<h2>The answer</h2>", f"<pre>{html.escape(verdict.render(said))}</pre>",
        *([f"<p><b>Reference:</b> {html.escape(note)}</p>"] if note else []),
        f"<p>{len(rows)} trials ({len(failed)} failed) on {html.escape(arms)}; written {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. "
        "Crossover: where B (the second device) becomes faster than A per epoch, interpolated in log-log space, "
        f"with a {boot.confidence:.0%} bootstrap interval that resamples the runs (seeds), then each run's epochs "
        f"({boot.draws} draws, every one counted: a draw that puts the crossover beyond the measured range opens "
        "the interval there, shown as such, and the shares of the draws' verdicts are given where under 95%). "
        "Where a size's only runs were their worker's first trial (cold), the time-to-loss lines say so in their note. "
        "See analysis/crossover.py and analysis/verdict.py.</p>",
        *([f"<p><b>Left out:</b> {html.escape(dropped)}.</p>"] if dropped else []),
        "<h2>Crossover table</h2>",
        f"<pre>{html.escape(render(table, rows, include_loaded))}</pre>" if table.empty else
        _table(table[["workload", "axis", "held_fixed", "device_a", "device_b", "metric", "n_points", "answer", "note"]]),
        "<h2>Charts</h2>",
        *[f"<h3>{name}</h3><div>{_svg(chart)}</div><p><a href='{name}.html'>interactive</a> · <a href='{name}.png'>PNG</a></p>"
          for name, chart in drawn.items()],
        *bounds_section(rows),
        *energy_section(rows),
        "<h2>Devices measured</h2>", _table(environment(rows)),
    ]
    if said.decision is not None:
        d = said.decision
        drawn_decision = charts.decision(d.options, d.even)
        for name, chart in drawn_decision.items():
            charts.save(chart, out / name)
        sections += ["<h2>The decision: the measured grid as the sweep, on every option</h2>",
                     "<p>Wall time and cost of the whole sweep per option: start-up, billing step and minimum, "
                     "packing where measured; '~' and 'predicted': from analysis/model.py for a GPU no row measured. "
                     "See analysis/decide.py and docs/cost.md.</p>",
                     f"<pre>{html.escape(decide.render(d.options, d.grid, d.picks, d.even, d.notes))}</pre>",
                     *[f"<h3>{name}</h3><div>{_svg(chart)}</div>" for name, chart in drawn_decision.items()]]
    if len(failed):
        sections += ["<h2>Failed trials</h2>", _table(failed[["workload", "arm", "depth", "width", "batch_size", "dataset_size", "error"]]
                                                     .assign(error=failed["error"].str.split("\n").str[0]))]
    page = out / "index.html"
    style = "body{font-family:sans-serif;max-width:1400px;margin:auto}table{border-collapse:collapse;font-size:13px}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
    page.write_text(f"<!doctype html><meta charset='utf-8'><title>crossover report</title><style>{style}</style>\n" + "\n".join(sections))
    return page

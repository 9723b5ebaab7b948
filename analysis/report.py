"""One standalone HTML page per analysis: the answer first, as HTML (your planned run's options where one is
given, then each workload's verdict, yours before the built-ins: analysis/verdict.py, then what the sweep
costs: analysis/decide/); behind it the crossover table per workload (folded), the charts, what bounds a
step, energy, every measured device's environment and the trials not measured.

    python -m crossover.analysis report results/scaling                   # writes results/_reports/scaling/index.html
    python -m crossover.analysis report results/laptop results/h100       # several sweeps: results/_reports/laptop+h100/
    python -m crossover.analysis report results/scaling --no-reference    # your rows alone, no decision section
    crossover report results/zoo --epochs 30 --dataset-size 50000 --batch-size 128   # your run first

By default (the command line, and sweeps/scaling.py) your rows are set beside the reference GPU rows of
the same configurations (analysis/summary.py: with_reference), and the answer holds the decision: the
measured grid as the sweep, on every option of analysis/prices.yaml and every home box
(analysis/decide/), predicted figures marked.

`python sweeps/scaling.py` writes it at the end of a run. Next to index.html: crossover.parquet (the
tidy table) and every chart as HTML and PNG (the decision's as run_* and sweep_*: `decide` writes its own,
decide_*, which the report never overwrites). The page embeds the charts as SVG, so it opens offline
and can be mailed as one file. The report folder sits beside the results directory, never in it
(which holds rows alone), under a name starting with '_' that Parquet readers of results/ skip.
Reads rows only; never imports torch or ray.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from crossover.schema import BUILTIN_MODULE, CROSSOVER_AXES, REPORTS, SIZE_AXES
from crossover.step import Step

from . import charts, decide, model, parallel, summary, verdict
from .crossings import (
    BOOT,
    Bootstrap,
    baseline_first,
    render,
    slices,
    write,
)
from .load import CHECKOUT, environment, is_reference, read
from .selection import Selected, select


def default_out(dirs: list[Path]) -> Path:
    """<parent>/_reports/<DIR> for one results directory; <parent>/_reports/<a>+<b> for several. Reports
    of the shipped reference rows go to results/_reports/ instead (of the checkout; installed from a wheel, of the
    current folder): results/reference/ holds what is committed, and a report written into it would be a stray
    file there (or in site-packages). A folder of sweeps (results/,
    load.sweep_dirs) keeps the report in it, beside its sweeps': results/_reports/results."""
    named = [Path(d) if Path(d).name not in ("", "..") else Path(os.path.abspath(d)) for d in dirs]  # '.' has no name
    first = named[0]
    of_sweeps = first.is_dir() and next(first.glob("*.parquet"), None) is None
    parent = (CHECKOUT or Path.cwd()) / "results" if is_reference(first) else first if of_sweeps else first.parent
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
    """What bounds a step, per workload (analysis/model/): why the GPU loses on small models."""
    tables = model.bound_table(rows)
    if not tables:
        return []
    return ["<h2>What bounds a step</h2><p>Each arm's smallest, middle and largest model: the time its launches "
            "(x the calibrated overhead), its FLOPs at peak and its bytes at full bandwidth would take, each over the "
            "measured step (*_to_step: ratios, not shares; above 1, that term alone predicts more than was measured, "
            "as where a row ran faster than its device's fit); the largest is its bound.</p>",
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
    """`frame` as an HTML table; a column's name may break after each '_' (achieved_bytes_per_s), so that a
    wide table wraps within the page instead of running past it."""
    table = frame.to_html(index=False, border=0, na_rep="", float_format=lambda v: f"{v:.4g}")
    return re.sub(r"<th>([^<]*)</th>", lambda m: f"<th>{m.group(1).replace('_', '_<wbr>')}</th>", table)


# Lines the report command prints by default, its two paths included: the answer on one screen, the tables on the page
SHORT_LINES = 25


def build(dirs: list[str | Path], out: Path | None = None, boot: Bootstrap = BOOT,
          include_loaded: bool = False, reference: bool = False, plan: decide.Request | None = None,
          verbose: bool = False, counts: Mapping[Step, dict | str] | None = None) -> tuple[Path, str]:
    """Write the report for `dirs`; returns the page's path and the verdict as text, the planned run's decision
    first where `plan` is given (its steps' counts in `counts`, keyed by decide.steps' Steps: analysis/decide/
    planned_step): in at most SHORT_LINES - 2 lines (`short`: the answer and the costs' picks, as
    the end of a sweep says them), or with `verbose` in full (the answer, the crossover table and, with `reference`, the decision:
    analysis/verdict.py).

    Rows flagged outside_load are left out of the crossovers and the charts where their configuration has
    quiet rows, and used where it has none, unless `include_loaded` keeps them all (analysis/selection.py
    `select`, once, here where they are read); the page and the text say how many. The devices and the
    failed trials list every row. With `reference`, the reference GPU rows of the same configurations are read
    alongside, and the page and the text end with the decision."""
    dirs = [Path(d) for d in dirs]
    rows = read(*dirs)
    rows = summary.with_reference(rows) if reference else rows
    said = verdict.reach(select(rows, include_loaded), boot, decision=reference)
    planned = verdict.priced(rows, plan, counts) if plan else None
    page = write_page(said, dirs, out, planned)
    if not verbose:
        return page, short(said, planned)
    text = verdict.render(said, verbose=True)
    if planned:
        text = decide.render(planned.lines, planned.grid, planned.picks, planned.evens, planned.notes, plan) + "\n" + text
    return page, text


def short(said: verdict.Verdict, planned: decide.Decision | None = None, lines: int = SHORT_LINES - 2) -> str:
    """The answer in at most `lines` lines: the planned run's picks (decide.brief) where `planned` holds them, then
    each workload's verdict and what the sweep costs (verdict.render); past `lines`, the rest is left to the page,
    and the last line says so."""
    said_lines = verdict.render(said).splitlines()
    if planned:
        said_lines = decide.brief(planned.lines, planned.grid, planned.picks, planned.notes, planned.request,
                                  lines=decide.BRIEF_LINES).splitlines() + said_lines
    if len(said_lines) <= lines:
        return "\n".join(said_lines)
    return "\n".join(said_lines[:lines - 1] + [f"... {len(said_lines) - lines + 1} more lines: on the page below, "
                                                 "or printed with --verbose"])


# The page's layout, for a 1,400-px screen and a 390-px phone alike (tests/test_report_browser.py): a word wider than
# the page (a title's path) breaks where it must (overflow-wrap:break-word), a figure never does (no overflow-wrap in
# cells, where a column once broke "~$0.⏎01"), and a table wider than the screen scrolls in its own box
STYLE = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 8px;overflow-wrap:break-word}"
         "table{border-collapse:collapse;font-size:13px;display:block;max-width:100%;overflow-x:auto}"
         "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
         "svg{max-width:100%;height:auto}summary{cursor:pointer;font-weight:bold;margin:8px 0}"
         ".note{color:#555;font-size:13px}.whose{color:#555;font-weight:normal;font-size:14px}"
         "ul.gpus{margin:2px 0 8px;font-size:14px}.n{white-space:nowrap}")
# A figure a browser would break after its '-' or '–' (a range, "(1.7-⏎5.2)" in a phone's column; a date): `_unbroken`
FIGURE = re.compile(r"\d+(?:[.,]\d+)*(?:[-–]\d+(?:[.,]\d+)*)+")


def _unbroken(body: str) -> str:
    """`body` (the page's HTML) with each FIGURE of its text in a span that never breaks (class n). Text alone: not
    inside a tag, and not in an inline SVG, whose <text> takes no span."""
    def spans(text: re.Match) -> str:
        return FIGURE.sub(lambda f: f"<span class=n>{f.group(0)}</span>", text.group(0))

    return "".join(part if part.startswith("<svg") else re.sub(r"(?<=>)[^<]+(?=<)", spans, part)
                   for part in re.split(r"(<svg.*?</svg>)", body, flags=re.S))


def write_page(said: verdict.Verdict, dirs: list[str | Path], out: Path | None = None,
               planned: decide.Decision | None = None) -> Path:
    """The page of `said` (the verdict of the rows of `dirs`), with its charts and crossover.parquet, in
    `out` (default: default_out). It opens with the answer: the planned run's options where `planned`
    holds them, then each workload's verdict (yours first), then what the sweep costs; behind it, the
    crossover table per workload (folded), the charts, what bounds a step, energy, the devices, the
    failed trials."""
    folders = [Path(d) for d in dirs]
    rows, table, boot = said.rows, said.crossovers, said.boot
    out = Path(out) if out else default_out(folders)
    write(table, out / "crossover.parquet")
    drawn = figures(said.selected.timed, table)
    decisions = [(d, prefix) for d, prefix in ((planned, "run"), (said.decision, "sweep")) if d is not None]
    for d, prefix in decisions:
        drawn = charts.decision(d.lines, d.evens, d.picks, d.priced, prefix) | drawn
    for name, chart in drawn.items():
        charts.save(chart, out / name)
    failed = rows[rows["status"] != "ok"]
    dropped = said.selected.left_out
    note = verdict.reference_note(rows)
    sections = [
        f"<h1>crossover report: {html.escape(' + '.join(str(d) for d in folders))}</h1>",
        *(decision_section(planned, "Your planned run") if planned else []),
        *answer_section(said),
        *(decision_section(said.decision, "What a run like this sweep costs") if said.decision else []),
        *([f"<p><b>Reference:</b> {html.escape(note)}</p>"] if note else []),
        *([f"<p><b>Left out:</b> {html.escape(dropped)}.</p>"] if dropped else []),
        f"<p class=note>{len(rows)} trials ({len(failed)} not measured) on {html.escape(', '.join(baseline_first(rows)))}; "
        f"written {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC. "
        "Crossover: where B (the second device) becomes faster than A per epoch, interpolated in log-log space, "
        f"with a {boot.confidence:.0%} bootstrap interval that resamples the runs (seeds), then each run's epochs "
        f"({boot.draws} draws, every one counted: a draw that puts the crossover beyond the measured range opens "
        "the interval there, shown as such, and the shares of the draws' verdicts are given where under 95%). "
        "Where a size's only runs were their worker's first trial (cold), the time-to-loss lines say so in their "
        "note.</p>",
        *crossover_section(table, said.selected, [f.workload for f in said.findings]),
        "<h2>Charts</h2>",
        *[f"<h3>{name}</h3><div>{_svg(chart)}</div><p><a href='{name}.html'>interactive</a> · <a href='{name}.png'>PNG</a></p>"
          for name, chart in drawn.items()],
        *bounds_section(rows),
        *energy_section(rows),
        "<h2>Devices measured</h2>", _table(environment(rows)),
        *failed_section(failed),
    ]
    page = out / "index.html"
    # the viewport: a phone lays the page out at its own width, not as a 980-px desktop page shrunk
    page.write_text("<!doctype html><meta charset='utf-8'><meta name='viewport' content='width=device-width,initial-scale=1'>"
                    f"<title>crossover report</title><style>{STYLE}</style>\n" + _unbroken("\n".join(sections)))
    return page


def answer_section(said: verdict.Verdict) -> list[str]:
    """Per workload, yours first: whose it is and its verdict in a sentence, with the fastest GPU's predicted line
    where no GPU row measured it and every other GPU's folded (`verdict.folded`); the busy marks explained once."""
    if not said.findings:
        return ["<h2>Where the GPU trains faster than the CPU</h2>", f"<p>{html.escape(verdict.answer(said)[0])}</p>"]
    ok = said.rows[said.rows["status"] == "ok"]
    module = ok.groupby("workload")["workload_module"].first() if "workload_module" in ok else pd.Series(dtype=object)
    out = ["<h2>Where the GPU trains faster than the CPU</h2>",
           f"<p class=note>Time per epoch, the CPU against a GPU, {said.boot.confidence:.0%} intervals; '~': predicted "
           "by crossover's model, with its 90% interval.</p>"]
    for f in said.findings:
        whose = module.get(f.workload)
        whose = "built-in" if whose is None or pd.isna(whose) or whose == BUILTIN_MODULE else f"yours: {whose}"
        more = f" (1 of {f.others + 1} settings; the others in the crossover table)" if f.others else ""
        out.append(f"<h3>{html.escape(f.workload)} <span class=whose>({html.escape(whose)})</span></h3>"
                   f"<p>{html.escape(f.words + more)}</p>")
        first, rest = verdict.folded(f)  # the fastest GPU on the first screen, as the terminal has it; the rest folded
        if first:
            out.append("<ul class=gpus>" + "".join(f"<li>{html.escape(line)}</li>" for line in first) + "</ul>")
        if rest:
            out.append(f"<details><summary>{html.escape(rest)}</summary><ul class=gpus>"
                       + "".join(f"<li>{html.escape(line)}</li>" for line in f.gpus[1:]) + "</ul></details>")
    marks = [f"{m}: {why}" for m, why in decide.BUSY_MARKS.items() if any(m in f.words for f in said.findings)]
    return out + [f"<p class=note>{html.escape(m)}</p>" for m in marks]


def decision_section(d: decide.Decision, heading: str) -> list[str]:
    """`d` as HTML: what was priced, the picks as the terminal's first screen names them (decide.first: the GPU to
    rent, the box to buy with its break-even and what its write-off assumes, your CPU), a sentence each and a table of them
    (time per epoch for a planned run, the run's time and cost, each with its interval where predicted, how each is
    known, its precision and its price's date); folded below, the cost-versus-time front, every option, the
    break-even, how each is costed and the notes."""
    plan = d.request
    unit = "run" if plan else "sweep"
    head = decide.header(d.grid, plan).strip("= ")
    out = [f"<h2>{html.escape(heading)}</h2>", f"<p>{html.escape(head[0].upper() + head[1:])}.</p>"]
    if not d.lines:
        return out + [f"<p>{html.escape(n.strip())}</p>" for n in
                      ["no option has a measured or predicted time for every configuration", *d.notes]]
    chosen = decide.first(d.picks)
    picks = "".join(f"<li><b>{html.escape(name)}:</b> " + ("none" if line is None else html.escape(
                    f"{decide.said(line)}; {decide.how_known(line, plan, picked=True)}"
                    + (f"; {decide.bought(line, unit)}" if name == decide.BUY else ""))) + "</li>"
                    for name, line in chosen.items())
    named = {p.option for p in chosen.values() if p is not None}
    cards = decide.cards(d.lines)
    out += [f"<ul>{picks}</ul>", options_table([o for o in d.lines if o.option in named], chosen, plan),
            "<p class=note>'~': rests on a prediction (crossover's model, or a time extrapolated outside the dataset "
            "sizes measured), its 90% interval in brackets." + (f" {html.escape(cards)}." if cards else "") + "</p>",
            *[f"<p class=note>{html.escape(n)}</p>" for n in decide.busy_notes(d.lines)],
            f"<details><summary>The cost-versus-time front</summary>"
            f"{options_table(decide.pareto(d.lines), chosen, plan)}</details>",
            f"<details><summary>All {len(d.lines)} options</summary>{options_table(d.lines, chosen, plan)}</details>"]
    for title, lines in (("The home boxes' break-even", decide.evens(d.evens, unit)),
                         ("How each option is costed", decide.costed(d.lines)),
                         ("Notes", [n.strip() for n in d.notes])):
        if lines:
            out.append(f"<details><summary>{title}</summary><ul>" +
                       "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul></details>")
    return out


def options_table(options: Sequence[decide.Line], picks: Mapping[str, decide.Line | None],
                  plan: decide.Request | None) -> str:
    """Options as an HTML table, cheapest first: the option (and which pick it is), time per epoch (a
    planned run), the run's time, its cost, how it is known (measured, predicted, where the planned size lies),
    whether it fits the card, the precision it is for, and where and when its price was read (stale marked)."""
    named = {line.option: name for name, line in picks.items() if line is not None}
    shown = pd.DataFrame([{
        "option": o.option + (f" ({named[o.option]})" if o.option in named else ""),
        **({"time per epoch": decide.per_epoch(o)} if plan else {}),
        "run time": decide.run_time(o), "cost": decide.money(o), "measured or predicted": decide.how_known(o, plan),
        "GPU memory": decide.memory(o), "precision": decide.precision_of(o, plan), "price": decide.priced_on(o)}
        for o in sorted(options, key=decide.by_cost)])
    return _table(shown)


def crossover_section(table: pd.DataFrame, selected: Selected, order: list[str]) -> list[str]:
    """The crossover table folded, one table per workload in the answer's order."""
    if table.empty:
        return ["<details><summary>The crossover table: empty</summary>",
                f"<p>{html.escape(render(table, selected))}</p></details>"]
    columns = ["axis", "held_fixed", "device_a", "device_b", "metric", "n_points", "answer", "note"]
    parts = [f"<h3>{html.escape(w)}</h3>" + _table(table.loc[table["workload"] == w, columns])
             for w in order if (table["workload"] == w).any()]
    return [f"<details><summary>The crossover table: {len(table)} lines, per workload, axis, slice, pair of devices "
            "and metric</summary>", *parts, "</details>"]


def failed_section(failed: pd.DataFrame) -> list[str]:
    """The trials that did not measure: the search's skipped ones summed in one line, their sizes folded;
    every other failure in a table, its error's first line."""
    if failed.empty:
        return []
    error = failed["error"].fillna("").str.split("\n").str[0]
    skipped = error.str.startswith("skipped:")
    columns = ["workload", "arm", "depth", "width", "batch_size", "dataset_size"]
    out = ["<h2>Trials not measured</h2>"]
    if skipped.any():
        which = failed[skipped].assign(reason=error[skipped].str.removeprefix("skipped: "))
        out += [f"<p>{skipped.sum()} trial{'s' if skipped.sum() != 1 else ''} of "
                f"{which['workload'].nunique()} workload{'s' if which['workload'].nunique() != 1 else ''} skipped by the "
                "search for its --budget: not measured, and measured by a later run with a larger --budget.</p>",
                f"<details><summary>Their sizes</summary>{_table(which[columns + ['reason']])}</details>"]
    if (~skipped).any():
        out += ["<h3>Failed trials</h3>", _table(failed[~skipped][columns].assign(error=error[~skipped]))]
    return out

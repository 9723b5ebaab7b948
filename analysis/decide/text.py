"""The decision in words: the first screen (`brief`), every option (`render`, --verbose), the JSON records (`records`),
and the figures' rounding and marks.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Mapping, Sequence

import pandas as pd

from crossover.schema import SIZE_AXES, Precision

from ..model.device_table import load_devices
from .choosing import BEATS, BUY, RENTALS, by_time, first, fitting, pareto
from .grid import BUSY_MARKS, HOME_BOX, NEAREST
from .request import Request
from .line import Config, Even, Line
from .memory import CONTEXT_BYTES
from .speeds import NOT_COUNTED, OWN_SIZE


# lines of the default output at most, so the answer is read before the detail: the front, the picks, the stale prices
BRIEF_LINES = 20  # the first screen's picks, each wrapped rather than cut, and what is known of them
WIDTH = 100  # columns of a line of the default output
STALE = "stale prices:"  # the note on prices older than 12 months, the one note the default output keeps


HOST_MARK = "[host]"  # a predicted figure whose step is bound by the host (analysis/model/hosts.py)
BOUND_MARK = "(bound)"  # a figure set by a faster GPU's, in a table's cell (`bound_mark` says which, `bound_note` why)
HOST_WORDS = "bound by the host: faster GPUs do not help"


def bound_mark(line: Line) -> str:
    """' (bound: not slower than RTX 4090)' where the rule that a GPU is never predicted slower than one it outran
    on every public benchmark set the figure (analysis/model/ `ordered`), else ''."""
    return f" (bound: not slower than {line.bound_by})" if line.bound_by else ""


def bound_note(options: Sequence[Line]) -> str:
    """What the bound mark (`bound_mark`, BOUND_MARK in a table) says, once, naming each GPU whose figure set others';
    '' where none is bound."""
    bound: dict[str, list[str]] = {}
    for o in options:
        if o.bound_by:
            bound.setdefault(o.bound_by, []).append(o.model)
    if not bound:
        return ""
    said = "; ".join(f"{', '.join(dict.fromkeys(models))} as {other}" for other, models in bound.items())
    return (f"(bound: ...): a bound, not a figure of its own: never slower than a GPU it outran in public benchmarks: "
            f"{said}")


def graph_said(line: Line) -> str:
    """'~0.68 s/epoch (0.37-1.2)': the epoch under CUDA graphs, predicted, with its interval; '' where not given
    (a step the host does not bound, or one the graph's figure lies within the eager one's interval)."""
    if line.graph_helps is not True:
        return ""
    return per_epoch(dataclasses.replace(line, predicted=True, epoch_s=line.graph_epoch_s,
                                         epoch_lo=line.graph_epoch_s_lo, epoch_hi=line.graph_epoch_s_hi))


def host_note(options: Sequence[Line]) -> str:
    """One line for the host-bound options among `options` (HOST_MARK): what the mark means, and the cure's figure
    for the fastest of them ('with CUDA graphs: ~0.68 s/epoch (0.37-1.2) on RunPod H100 SXM community'); '' where
    none is."""
    bound = [o for o in options if o.host_bound is True]
    if not bound:
        return ""
    cured = min((o for o in bound if o.graph_helps is True), key=lambda o: o.graph_epoch_s, default=None)
    cure = f"; with CUDA graphs: {graph_said(cured)} on {cured.option}" if cured else ""
    return f"{HOST_MARK}: {HOST_WORDS}{cure} (predicted)"


def busy_notes(options: Sequence[Line]) -> list[str]:
    """What each busy mark among `options` means, a line each ('[busy]: timed while ...')."""
    used = "".join(o.busy for o in options)  # '[busy]' is not in '[busy ref]'
    return [f"{mark}: {why}" for mark, why in BUSY_MARKS.items() if mark in used]


def bought(line: Line, unit: str) -> str:
    """What buying the box means: its break-even in runs a month against renting, and what its write-off
    assumes ('pays for itself past ~680 runs a month against RunPod RTX 4090 community ($0.02 a run); write-off:
    $3,900 over 4 years, training 25% of each month, + electricity')."""
    assumes = (f"write-off: ${line.purchase_usd:,.0f} over {line.lifetime_years:g} years, training "
               f"{line.utilisation:.0%} of each month, + electricity")
    if math.isnan(line.even_n):
        return assumes
    n, guessed = line.even_n, bool(line.even_predicted)
    when = (f"never pays for itself: its electricity a {unit} costs more than renting" if math.isinf(n) else
            f"pays for itself past {'~' if guessed else ''}{significant(n, 2 if guessed else 3)} "
            f"{unit}s a month against renting {line.even_against} ({usd(line.even_against_usd)} a {unit})")
    return f"{when}; {assumes}"


CENT = 0.01  # dollars: what costs less is said "< $0.01", never to more places


def usd(v: float) -> str:
    """Dollars as one reads them, the one form of every sum of money said: '$0.31', '$1,234.50'; '< $0.01' above
    nothing and under a cent (a CPU's electricity, a smoke sweep's), never '$2.6e-07' nor '$0.0000072'."""
    return "< $0.01" if 0 < v < CENT else f"${v:,.2f}"


def duration(seconds: float, digits: int = 3) -> str:
    """A time as one reads it, the one form of every duration said: '31.4 s' under a minute, '4.82 min' under an
    hour, '1.5 h' past it; `digits` significant figures, never an exponent ('0.000504 min' is '0.0302 s')."""
    scale, unit = _unit(seconds)
    return f"{_figure(seconds / scale, digits)} {unit}"


def _unit(seconds: float) -> tuple[float, str]:
    """The unit a time of `seconds` is said in, and its seconds."""
    return (1, "s") if seconds < 60 else (60, "min") if seconds < 3600 else (3600, "h")


def _figure(v: float, digits: int) -> str:
    """`v` to `digits` significant figures, without an exponent or trailing zeros: 4.8, 0.0302, 1,230."""
    said = significant(v, digits)
    return said.rstrip("0").rstrip(".") if "." in said else said


def _ends(lo: float, hi: float) -> str:
    """' (lo-hi)', an interval after its figure, each end to two figures (all of them from 100 up: 0.91, 13, 430,
    1,124); '' where both ends round alike."""
    lo_said, hi_said = (f"{v:,.0f}" if abs(v) >= 100 else _figure(v, 2) for v in (lo, hi))
    return "" if lo_said == hi_said else f" ({lo_said}-{hi_said})"


def money(line: Line) -> str:
    """'$0.31', or where it rests on a prediction '~$0.31 (0.25-0.40)' (its 90% interval); under a cent (`usd`)
    '< $0.01', with the interval's top where that passes a cent: '< $0.01 (up to 0.02)'; an interval from under a
    cent: '~$0.03 (up to 0.05)'; $0 is exact."""
    if line.usd == 0 or not line.predicted:
        return usd(line.usd)
    lo, hi = (v if not math.isnan(v) else line.usd for v in (line.usd_lo, line.usd_hi))
    said = usd(line.usd)
    if hi < CENT:
        return said
    top = f"{hi:,.2f}"
    if lo < CENT:
        return ("" if line.usd < CENT else "~") + f"{said} (up to {top})"
    return f"~{said}" + ("" if f"{lo:,.2f}" == top else f" ({lo:,.2f}-{top})")


def run_time(line: Line) -> str:
    """'31.4 s', '4.82 min', '1.5 h' (`duration`), or where it rests on a prediction '~4.82 min (3.9-6.1)': the
    interval's ends in the figure's unit, to two figures."""
    if not line.predicted:
        return duration(line.wall_s)
    scale, _ = _unit(line.wall_s)
    lo, hi = ((v if not math.isnan(v) else line.wall_s) / scale for v in (line.wall_lo_s, line.wall_hi_s))
    return f"~{duration(line.wall_s)}{_ends(lo, hi)}"


def source(line: Line, short: bool = False) -> str:
    """Where an option's figures come from: 'measured on vm, 2026-11-21'; 'predicted' where wholly the
    model's; '62% predicted; measured on vm, 2026-11-21' where some configurations were measured (the
    share of its GPU-time that is predicted). `short`: '62% predicted; vm, 2026-11-21'. Your own machine's
    adds what its electricity is costed at: '...; electricity: RAPL 41 W' (measured), or 'nominal 65 W';
    rows timed on a busy host add their mark (`busy`): '... [busy]'."""
    power = (f"; electricity: {line.electricity}" if line.electricity else "") + line.busy
    share = float(line.predicted) if math.isnan(line.predicted_share) else line.predicted_share
    if share >= 1 - 1e-9:
        return "predicted" + power
    when = line.measured_at
    where = ", ".join(filter(None, [line.hosts or "", f"{when:%Y-%m-%d}" if when is not None else ""]))
    said_where = ("" if short and share > 0 else "measured") + (" on " if where and not (short and share > 0) else "") + where
    return (f"{share:.0%} predicted; {said_where}".rstrip("; ") if share > 0 else said_where) + power


def per_epoch(line: Line) -> str:
    """A planned run's time per epoch: '9.41 s/epoch', or where it rests on a prediction '~9.41 s/epoch (4.7-19)'."""
    figure = lambda v: _figure(v, 3) if abs(v) < 1000 else f"{v:,.0f}"  # noqa: E731 (1,124, never 1.12e+03)
    if not line.predicted:
        return f"{figure(line.epoch_s)} s/epoch"
    lo, hi = (v if not math.isnan(v) else line.epoch_s for v in (line.epoch_lo, line.epoch_hi))
    return f"~{figure(line.epoch_s)} s/epoch{_ends(lo, hi)}"


def memory(line: Line) -> str:
    """Whether the run fits a GPU option's card: 'fits: ~0.87 GB of 80', 'does not fit: needs ~31 GB of 16',
    'not known'; '' for a CPU."""
    if not line.gpus:
        return ""
    if line.fits is None:
        return "not known" + ("" if math.isnan(line.memory_gb) else f": ? of {line.memory_gb:g} GB")
    said = f"~{line.needs_gb:,.2g} GB of {line.memory_gb:g}"
    return f"fits: {said}" if line.fits else f"does not fit: needs {said}"


def said(line: Line) -> str:
    """An option in a few words: 'RTX 5090 box, ~8.82 s (7.2-11), < $0.01' ('~': predicted, 90% interval);
    a planned run's with its time per epoch first: 'RTX 5090 box, ~9.5 s/epoch (4.8-19), ~4.78 min ...'. A rented
    option's run time holds its start-up, said beside it: '~3.1 min (3.1-3.2) with 3 min start-up'; one rented on an
    instance of more GPUs than it uses says so: 'Lambda 4x H100 (on an instance of 4 GPUs, 3 used), ...'."""
    epoch = f"{per_epoch(line)}, " if not math.isnan(line.epoch_s) else ""
    held = startup(line)
    part = f" (on an instance of {line.instance_gpus} GPUs, {line.gpus} used)" if line.instance_gpus else ""
    return f"{line.option}{part}, {epoch}{run_time(line)}{f' with {held} start-up' if held else ''}, {money(line)}"


def startup(line: Line) -> str:
    """'3 min' where the option's run time holds a rented instance's start-up (startup_s, billed), else ''."""
    held = line.startup_s
    if math.isnan(held) or held <= 0:
        return ""
    return duration(held)


def not_renting(options: Sequence[Line], chosen: Mapping[str, Line | None], priced: str = "") -> str:
    """The first line where `chosen` (choosing.picks') holds the pick of yours (your CPU, your GPU) or the box to buy
    that is faster and no dearer than every rental the run fits, start-up included (BEATS): 'renting does not pay
    here: your CPU, 2 threads (measured here), 0.17 s for < $0.01, is faster and cheaper than every rental,
    start-up included (the fastest: RunPod H200 community, ~3.1 min with 3 min start-up)'; a box's begins 'a box
    beats every rental here'; with `priced`, what was priced in place of 'here' ('renting does not pay for this
    sweep's 9 trials: ...'); '' where none is."""
    best = chosen.get(BEATS)
    if best is None:
        return ""
    quick = min((o for o in fitting(options) if o.kind in RENTALS), key=by_time)
    held = f" with {startup(quick)} start-up" if startup(quick) else ""
    said = f"for {priced}" if priced else "here"
    return (f"{'a box beats every rental' if best.kind == HOME_BOX else 'renting does not pay'} {said}: "
            f"{best.option}, {run_time(best).split(' (')[0]} for {money(best).split(' (')[0]}, is faster and cheaper "
            f"than every rental, start-up included (the fastest: {quick.option}, "
            f"{run_time(quick).split(' (')[0]}{held})")


def _fit(text: str, width: int = WIDTH) -> str:
    """`text` in at most `width` columns (a line's WIDTH by default), cut with '…' where longer."""
    return text if len(text) <= width else text[:width - 1] + "…"


def header(grid: Sequence[Config], plan: Request | None) -> str:
    if plan:
        return _planned_header(grid, plan)
    trials = sum(c.trials for c in grid)
    per_workload = {w: sum(c.trials for c in grid if c.workload == w) for w in sorted({c.workload for c in grid})}
    return (f"== the sweep: {trials:,} trial{'s' if trials != 1 else ''}, {len(grid)} configuration"
            f"{'s' if len(grid) != 1 else ''}: {', '.join(f'{w} {n:,}' for w, n in per_workload.items())}")


def _planned_header(grid: Sequence[Config], plan: Request) -> str:
    """'30 epochs of 50,000 samples of resnet18_cifar, batch 128', and its other sizes and named axes."""
    line = grid[0]
    sizes = [f"{'batch' if a == 'batch_size' else a} {v:,.0f}" for a in SIZE_AXES
             if a != "dataset_size" and (v := getattr(line, a)) is not None]
    sizes += [f"{a} {v}" for a, v in plan.axes if a not in SIZE_AXES]
    full = " (one batch: the whole dataset)" if line.full_batch else ""
    runs = f", {plan.trials:,} runs of it" if plan.trials and plan.trials > 1 else ""
    precision = (f", precision {plan.precision} on the GPUs (the CPU's as measured, PyTorch's default)"
                 if plan.precision != Precision.DEFAULT else "")
    return (f"== the planned run: {plan.epochs:,} epochs of {plan.samples:,} samples of {line.workload}{full}, "
            f"{', '.join(sizes)}{runs}{precision} ==")


def cards(options: Sequence[Line], how: bool = True) -> str:
    """One line: what the run needs of a GPU's memory, how that was found (`how`), and the cards it does not fit."""
    gpu = [o for o in options if o.gpus > 0 and not math.isnan(o.needs_gb)]
    if not gpu:
        return ""
    need = max(gpu, key=lambda o: o.needs_gb)
    small = dict.fromkeys((o.model, o.memory_gb) for o in gpu if o.fits is False)
    said = ", ".join(f"{model} ({memory_gb:g} GB)" for model, memory_gb in small)
    found = f" ({need.needs_how}, + {CONTEXT_BYTES / 1e9:g} GB CUDA context)" if how else ""
    return (f"GPU memory: needs ~{need.needs_gb:,.2g} GB{found}: "
            + (f"does not fit {said}, left out of the picks" if said else "fits every card offered"))


def brief(options: Sequence[Line], grid: Sequence[Config], picks: Mapping[str, Line | None], notes: Sequence[str],
          plan: Request | None = None, head: tuple[str, ...] = (), lines: int = BRIEF_LINES) -> str:
    """The decision in at most `lines` lines of at most WIDTH columns (`python -m crossover.analysis decide`):
    the first line where renting does not pay (`not_renting`), `head` (wrapped), the sweep, what it needs of a GPU's
    memory and the cards it does not fit, the first screen's picks of `picks` (choosing.picks', `first`: the GPU to
    rent, fastest and cheapest; the box to buy, with its break-even and what its write-off assumes; your CPU; the
    cheapest within the deadline where one was asked), each with its time per epoch (a planned run), run time and
    cost, the cost-versus-time front where lines are left, the stale prices in one line,
    what each busy mark means, what --verbose adds. Where these pass `lines`, `head` goes and the memory takes
    one line; the picks are never cut. Every figure is marked: '~' and its 90% interval where it rests on a
    prediction, and its source."""
    said_head = _fit(header(grid, plan))
    top = [w for h in head if h for w in textwrap.wrap(h, WIDTH, subsequent_indent="    ")] + [said_head]
    dated = [n.strip() for n in notes if n.strip().startswith(STALE)]
    # a planned step not counted as predict counts it: the figures rest on another step, said in full
    uncounted = [w for n in notes if NOT_COUNTED in n for w in textwrap.wrap(n.strip(), WIDTH, subsequent_indent="    ")]
    rest = len(notes) - len(dated) - sum(NOT_COUNTED in n for n in notes)
    if not options:
        unit = "run" if plan else "sweep"
        return "\n".join(top + [f"no option has a measured or predicted time for every configuration of the {unit}"]
                         + [_fit(n.strip()) for n in notes][:max(lines - len(top) - 1, 0)])
    memory = cards(options)
    top += [w for w in textwrap.wrap(memory, WIDTH, subsequent_indent="    ")]
    more = (f"--verbose (and the report): all {len(options)} options, the break-even, how each is costed"
            + (f", {rest} notes" if rest else ""))
    said_picks = pick_lines(first(picks), plan)
    trials = sum(c.trials for c in grid)  # what the sweep's figures price: its own trials, as they ran
    priced = "the planned run" if plan else f"this sweep's {trials:,} trial{'s' if trials != 1 else ''}"
    opening = textwrap.wrap(not_renting(options, picks, priced), WIDTH, subsequent_indent="    ")
    tail = uncounted + [_fit(d) for d in dated + busy_notes(options) + [host_note(options)] if d] + [_fit(more)]
    if len(opening) + len(top) + len(said_picks) + len(tail) > lines:  # short of room: the picks stay whole, the head
        top = [said_head] + ([_fit(cards(options, how=False))] if memory else [])  # goes and the memory takes one line
    top = opening + top
    front = pareto(options)
    room = lines - len(top) - len(said_picks) - len(tail) - 1
    shown = front[:max(room, 0)]
    if not shown:
        return "\n".join(top + said_picks + tail)
    said_front = ("the cost-versus-time front, fastest first" +
                  (f" ({len(shown)} of {len(front)}; --verbose shows all):" if len(front) > room else ":"))
    cells = [(o.option,) + ((per_epoch(o),) if plan else ()) + (run_time(o), money(o), how_known(o, plan))
             for o in shown]
    n = len(cells[0]) - 1
    # the option's name cut with '…' (to 34 columns, less where the figures need them), never a figure: a line holds
    # them whole
    widths = [max(len(c[i]) for c in cells) for i in range(n)]
    room = WIDTH - 2 - 2 * n - sum(widths[1:]) - len("predicted")  # the source after them may be cut (_fit)
    widths[0] = min(widths[0], 34, max(room, 12))
    body = [_fit("  " + "  ".join(_fit(c[i], widths[i]).ljust(widths[i]) for i in range(n)) + "  " + c[n])
            for c in cells]
    return "\n".join(top + said_picks + [said_front] + body + tail)


def pick_lines(chosen: Mapping[str, Line | None], plan: Request | None, absent: dict[str, str] | None = None) -> list[str]:
    """The picks of `chosen` in words (choosing.picks'), each wrapped to WIDTH rather than cut: its option,
    time per epoch (a planned run), run time and cost, how each is known, and for the box to buy its break-even
    (`bought`); an option named again is not said again; a pick that is None is 'none', or `absent`'s words for it."""
    out: list[str] = []
    named: dict[str, str] = {}  # option -> the pick that named it first
    for name, line in chosen.items():
        again = None if line is None else named.setdefault(line.option, name)
        text = ((absent or {}).get(name, "none") if line is None else f"{line.option}, as {again} above"
                if again != name else f"{said(line)}; {how_known(line, plan, picked=True)}"
                + (f"; {bought(line, 'run' if plan else 'sweep')}" if name == BUY else ""))
        out += textwrap.wrap(f"{name}: {text}", WIDTH, subsequent_indent="    ")
    return out


def how_known(line: Line, plan: Request | None, short: bool = True, picked: bool = False) -> str:
    """`source` (`short`; a pick's: 'measured', 'predicted', '62% predicted'), and for a planned run
    where its size lies outside the sizes measured; an extrapolation whose error exceeds its figure is
    'unreliable: measure nearer N (...)' alone, never 'measured'. A busy host's mark stays."""
    return _known(line, plan, short, picked) + bound_mark(line) + (f" {HOST_MARK}" if line.host_bound is True else "")


def _known(line: Line, plan: Request | None, short: bool, picked: bool) -> str:
    reach = line.reach if plan else "measured"
    if plan and line.unreliable is True:
        return f"{reach}{line.busy}"
    said_source = source(line, short)
    if picked:
        said_source = (said_source.split(";")[0].split(" [busy")[0] if "predicted" in said_source else "measured") \
            + line.busy
    if reach is not None and reach.startswith(OWN_SIZE):  # 'predicted' says it; a correction is named
        return said_source + reach[len(OWN_SIZE):]
    return said_source + ("" if reach is None or reach == "measured" else f"; {reach}")


def render(options: Sequence[Line], grid: Sequence[Config], picks: Mapping[str, Line | None], even: Sequence[Even],
           notes: Sequence[str], plan: Request | None = None) -> str:
    """The whole decision as text (--verbose, the report): the sweep (or the planned run), every option
    (predicted figures marked '~' with their interval, every option's source), the picks, the break-even,
    how each option is costed, the notes. Every line within WIDTH columns: the options' table split into tables that
    fit (`tables`), each led by the option's name; where the figures come from and the prices' dates and sources a
    line each, naming their options (`grouped`); every sentence wrapped."""
    unit = "run" if plan else "sweep"
    head = header(grid, plan)
    if not options:
        return "\n".join(w for line in [head, f"no option has a measured or predicted time for every configuration of "
                                              f"the {unit}", *notes] for w in _wrapped(line))
    front = {id(o) for o in pareto(options)}
    shown = pd.DataFrame([{
        "option": o.option, "kind": o.kind, "model": o.model, "gpus": o.gpus, "packed": o.packed,
        "precision": precision_of(o, plan), "epoch": per_epoch(o) if plan else "", "wall": run_time(o),
        "cost": money(o), "memory": memory(o),
        "predicted": ", ".join(w for w, on in (("model", o.modelled), ("extrapolated", o.extrapolated)) if on),
        "dataset size": o.reach, "source": source(o), "price": priced_on(o), "front": "*" if id(o) in front else ""}
        for o in options])
    columns = (["option", "kind", "model", "gpus", "precision", "epoch", "wall", "cost", "memory", "predicted",
                "dataset size", "front"] if plan else
               ["option", "kind", "model", "gpus", "packed", "wall", "cost", "memory", "front"])
    laid = tables(shown[columns])
    parts = [head, "where the figures come from:"] + [f"  {line}" for line in grouped(options, source)]
    parts += ["prices of:"] + [f"  {line}" for line in grouped(options, priced_on)]
    parts.append("  ~: rests on crossover's model's prediction for a GPU no row measured, its 90% interval in brackets" +
                 (" (model), or on a time extrapolated outside the dataset sizes measured" if plan else "") +
                 "; *: on the cost-versus-time front; source: where the rows were measured, and the share predicted"
                 "; memory: what the run needs of the card (peak measured or estimated) of its GB")
    parts += [f"  {line}" for line in [cards(options)] if line]
    if plan:
        parts.append(f"  dataset size: where {plan.samples:,} lies against the sizes the option's rows measured: inside "
                     f"(a line between the two around it), or Kx past the largest / below the smallest (a least-squares "
                     f"line over the {NEAREST} sizes nearest that end, ± its RMS residual; one size: its time per sample)")
    for name, line in picks.items():
        parts.append(f"{name}: " + ("none" if line is None else said(line)))
    parts += evens(even, unit) + [f"  {note}" for note in busy_notes(options)]
    parts.append("how each option is costed:")
    parts += [f"  {line}" for line in costed(options)]
    parts += notes
    # the tables are laid out to WIDTH; every other line is wrapped to it, its own indent kept
    wrapped = [_wrapped(line) for line in parts]
    return "\n".join([*wrapped[0], *laid, *(w for lines in wrapped[1:] for w in lines)])


def _wrapped(line: str) -> list[str]:
    """`line` wrapped to WIDTH, its continuation indented four columns past its own indent; a word is never broken
    (an address longer than a line stands alone on its own, whole, to be copied)."""
    indent = " " * (len(line) - len(line.lstrip(" ")))
    return textwrap.wrap(line, WIDTH, subsequent_indent=indent + "    ", break_long_words=False,
                         break_on_hyphens=False) or [line]


def tables(shown: pd.DataFrame, width: int = WIDTH) -> list[str]:
    """`shown` as tables of at most `width` columns where its cells allow: each led by its first column (the option,
    never cut), with as many of the others, in their order, as fit beside it; a blank line between two tables."""
    said = shown.astype(str)
    wide = {c: max(len(c), said[c].str.len().max()) + 2 for c in said.columns}  # to_string's columns, 2 apart
    groups: list[list[str]] = [[]]
    used = wide[said.columns[0]]
    for column in said.columns[1:]:
        if groups[-1] and used + wide[column] > width:
            groups.append([])
            used = wide[said.columns[0]]
        groups[-1].append(column)
        used += wide[column]
    out = [said[[said.columns[0], *group]].to_string(index=False) for group in groups]
    return [block for text in out for block in [text, ""]][:-1]



def significant(v: float, digits: int) -> str:
    """`v` to `digits` significant figures, without an exponent: 683.06 to two is '680', 0.04567 '0.046'. A
    figure resting on a prediction (a 90% interval of ±30% or more) carries two; a measured one three."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    places = digits - 1 - math.floor(math.log10(abs(v)))
    return f"{round(v, places):,.{max(places, 0)}f}"


def evens(even: Sequence[Even], unit: str) -> list[str]:
    """Each home box's break-even against each class's best, a line each (`unit`: 'sweep' or 'run')."""
    lines = []
    for e in even:
        digits = 2 if e.predicted else 3
        when = (f"never: its electricity per {unit} costs more" if math.isinf(e.sweeps_per_month) else
                f"beyond {'~' if e.predicted else ''}{significant(e.sweeps_per_month, digits)} {unit}s a month "
                f"({duration(e.box_hours_per_month * 3600, digits)} of use)")
        lines.append(f"{e.box} against the {e.versus} ({e.against}, {usd(e.against_usd)} a {unit}): cheaper {when}")
    return lines


def priced_on(line: Line) -> str:
    """Where an option's price came from and when: 'of 2025-06 (runpod.io/pricing)', 'of 2024-05, STALE: re-read
    (aws.amazon.com/...)' past 12 months; '-' for your own machine (its electricity alone)."""
    if not line.price_date:
        return "-"
    stale_mark = ", STALE: re-read" if line.price_stale else ""
    return f"of {line.price_date}{stale_mark} ({line.price_source or 'no source given'})"


def precision_of(line: Line, plan: Request | None) -> Precision:
    """The precision an option's figure is for: the planned run's on a GPU (predicted at it, or measured where the
    rows ran it); PyTorch's default on a CPU, the one its rows ran at."""
    return plan.precision if plan and line.gpus > 0 else Precision.DEFAULT


def costed(options: Sequence[Line]) -> list[str]:
    """How each option is costed, a line per basis (in its order) naming its options."""
    return grouped(options, lambda o: o.basis)


def grouped(options: Sequence[Line], said) -> list[str]:
    """A line per distinct `said(option)` (in its order), naming the options it is said of: 'of 2026-09-25
    (https://www.runpod.io/pricing): RunPod RTX 4090 community, RunPod H200 community'."""
    return [f"{words}: {', '.join(o.option for o in options if said(o) == words)}"
            for words in sorted({said(o) for o in options})]


def _plain(value):
    """A Line's figure as JSON holds it: None where not known (NaN)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _many(o: Line, batch: int | None) -> dict:
    """A run's GPUs (decide/many.py): nodes, the batch a GPU takes and the run's, the scaling efficiency, the
    parallelism (one GPU, DDP, FSDP) and the link; a line of one GPU's, 1 node, its batch, efficiency 1."""
    if not o.gpus > 0:
        return {"nodes": None, "per_gpu_batch": None, "global_batch": None, "efficiency": None, "parallel": None}
    return {"nodes": o.nodes, "per_gpu_batch": batch if o.per_gpu_batch is None else o.per_gpu_batch,
            "global_batch": batch if o.global_batch is None else o.global_batch,
            "efficiency": 1.0 if math.isnan(o.efficiency) else o.efficiency, "parallel": o.parallel or "one GPU"}


def records(options: Sequence[Line], grid: Sequence[Config], plan: Request | None = None,
            picks: Mapping[str, Line | None] | None = None) -> list[dict]:
    """Every option's figures as plain values, one object each, in the table's order (`decide --json`, and
    any command that prices a run): option; kind; gpu (the GPU model, e.g. "H100"; None for a CPU) and gpus;
    the run's workload, epochs, precision, batch_size and dataset_size (None where the sweep holds several); epoch_s
    and its 90% interval epoch_s_low, epoch_s_high (a planned run only; the same figure where measured);
    run_s (wall time, a cloud's start-up included), usd, each with _low and _high; fits (None for a CPU
    or where not known), needs_gb, memory_gb; largest_batch and accumulate_steps (`crossover predict`, where the
    run does not fit: the largest batch that would, and the steps of it that make the run's batch); basis ("measured" or "predicted"), source, costed (how);
    price_date, price_source and price_stale (over 12 months old) of the price it is costed at, None for your own
    machine; precision (`precision_of`); lacks_unit, the unit that precision runs on where the GPU has none (e.g.
    "BF16" on a V100: priced at its FP32 peak and never faster than at the default, analysis/model/ Device.lacks),
    else None. Where analysis/model/ predicted the run (a planned run): host_share, the host's share of its step, and
    host_bound (past one half: faster GPUs do not help); bound_by, the GPU whose prediction bounds this one's figure
    (never slower than a GPU it outran on the public benchmarks: a bound, not the model's own figure), else None;
    graph_epoch_s and compile_epoch_s, each with _low and _high, the epoch under CUDA graphs and under
    torch.compile(mode="reduce-overhead"), predicted for a step bound by the host (else None), and graph_helps,
    whether the graph's figure lies below the eager one's interval; picks, the names of the picks of `picks`
    (choosing.picks': 'rent, fastest', 'buy', 'beats every rental', 'cheapest', ...) that are this option, in their
    order ([] where none is)."""
    devices = load_devices()
    named: dict[tuple, list[str]] = {}  # an option on its count of GPUs (an instance's name on 1 of its GPUs or all)
    for name, line in (picks or {}).items():
        if line is not None:
            named.setdefault((line.option, line.gpus, line.nodes), []).append(name)
    one = grid[0] if len(grid) == 1 else None
    size = lambda axis: None if one is None else getattr(one, axis)  # noqa: E731
    out = []
    for o in options:
        gpu = o.gpus > 0
        out.append({
            "option": o.option, "kind": o.kind, "gpu": o.model if gpu else None, "gpus": o.gpus,
            "workload": one.workload if one is not None else None, "epochs": plan.epochs if plan else None,
            "precision": precision_of(o, plan),
            "batch_size": size("batch_size"), "dataset_size": size("dataset_size"),
            **{name: _plain(getattr(o, field)) for name, field in
               (("epoch_s", "epoch_s"), ("epoch_s_low", "epoch_lo"), ("epoch_s_high", "epoch_hi"),
                ("run_s", "wall_s"), ("run_s_low", "wall_lo_s"), ("run_s_high", "wall_hi_s"),
                ("usd", "usd"), ("usd_low", "usd_lo"), ("usd_high", "usd_hi"))},
            "fits": o.fits if gpu else None,
            "needs_gb": _plain(o.needs_gb) if gpu else None,
            "memory_gb": _plain(o.memory_gb) if gpu else None,
            "largest_batch": o.largest_batch if gpu else None, "accumulate_steps": o.accumulate_steps if gpu else None,
            "basis": "predicted" if o.predicted else "measured", "source": source(o), "costed": o.basis,
            "price_date": o.price_date, "price_stale": o.price_stale if o.price_date else None,
            "price_source": o.price_source,
            "lacks_unit": devices[o.model].lacks(precision_of(o, plan)) if gpu and o.model in devices else None,
            "host_share": _plain(o.host_share) if gpu else None,
            "host_bound": o.host_bound is True if gpu and not math.isnan(o.host_share) else None,
            "bound_by": o.bound_by if gpu else None,
            **{f"{engine}_epoch_s{end}": _plain(getattr(o, f"{engine}_epoch_s{field}")) if gpu else None
               for engine in ("graph", "compile") for end, field in (("", ""), ("_low", "_lo"), ("_high", "_hi"))},
            "graph_helps": o.graph_helps is True if gpu and not math.isnan(o.host_share) else None,
            **_many(o, size("batch_size")), "picks": named.get((o.option, o.gpus, o.nodes), [])})
    return out

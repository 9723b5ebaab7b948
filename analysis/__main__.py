"""The analysis command line: reports, summaries and costs from results directories.

    python -m crossover.analysis report results/scaling [more dirs]     # HTML page + crossover table; prints the answer, both paths
    crossover report results/zoo --epochs 30 --dataset-size 50000 --batch-size 128   # opening with your run
    python -m crossover.analysis summary results/scaling                # median time per epoch per device and size
    python -m crossover.analysis cost results/scaling                   # cost per epoch, trial and million samples per row
    python -m crossover.analysis decide results/scaling --trials 1000 --workload peaks --deadline 2   # the sweep on every option
    crossover decide results/scaling --workload tabular --epochs 20 --dataset-size 1000000 --width 256   # your run
    crossover decide results/resnet --epochs 30 --dataset-size 50000 --batch-size 128 --json -   # as JSON
    python -m crossover.analysis parallel results/parallel-*            # packed, DDP and pipeline figures
    python -m crossover.analysis parallel --validate                     # the data-parallel model against DDP rows and Lambda's
    python -m crossover.analysis engines results/engines-*              # engines' speed-ups, fusion, crossovers
    python -m crossover.analysis model [DIRS] [--validate]              # the per-class model: bounds; held-out error, 90% coverage, targets (default: results/reference)
    python -m crossover.analysis migrate results/reference              # rewrite older row files to the schema's columns
    python -m crossover.analysis migrate --copy-counts FROM TO...       # per-class step costs from FROM's GPU rows into TO's

A folder of sweeps (results/, results/reference/) stands for every sweep under it, the shipped
results/reference/ only where named (analysis/load.py, sweep_dirs). A planned run (--epochs) is priced from its
step counted as `crossover predict` counts it where `crossover decide` or `crossover report` runs this module: they
ask `wanted(argv)` which steps it will look up, count each in a process of their own (sweeps/command.py) and hand
the counts to `main` as data. Run alone, it is handed none, counts nothing and says so.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from crossover.schema import Precision
from crossover.step import Step

from . import charts, cost, decide, engines, families, migrate, model, ordering, parallel, prices, report, summary, verdict
from .cli import HelpFormatter, gpu_counts, nodes, precision
from .crossings import Bootstrap
from .load import REFERENCE, read, representative
from .model import validate_parallel


def main(argv=None, prog: str = "python -m crossover.analysis",
         counts: Mapping[Step, dict | str] | None = None) -> int:
    """`prog`: the command as the user typed it, which every usage line and error begins with (`crossover` where
    sweeps/command.py hands a subcommand over: `usage: crossover decide ...`). `counts`: a planned run's steps
    counted as `crossover predict` counts them, keyed by the Step (`wanted` names them): each a dict, the counted
    step, or a str, why it could not be counted (analysis/decide/ planned_step). `crossover decide` and `crossover
    report` hand them over, so that they and predict say one figure; None (this module run alone): from the rows'
    own counts, and the decision notes that."""
    args = parser(prog).parse_args(argv)
    try:
        args.counts = counts
        return {"report": _report, "summary": _summary, "cost": _cost, "decide": _decide, "parallel": _parallel,
                "engines": _engines, "model": _model, "migrate": _migrate}[args.command](args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a report, chart or rewritten row that could not be written: a full disk
        print(f"error: {report.cannot_write(exc)}", file=sys.stderr)
        return 1


def wanted(argv) -> tuple[Step, ...]:
    """The steps `main(argv)` will look up in its counts (decide.steps): those of the planned run of `decide` or
    `report` (--epochs and --dataset-size), from the rows as they read them; none without a planned run, or where
    the arguments or the rows are refused: `main` then says why in its one line, so this prints nothing and never
    exits (argparse's exit on a bad flag, and its --help, are caught and silenced)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            args = parser().parse_args(argv)
        plan = _plan(args) if args.command in ("decide", "report") else None
        return decide.steps(_rows(args), plan) if plan else ()
    except (SystemExit, ValueError, OSError):
        return ()


def parser(prog: str = "python -m crossover.analysis") -> argparse.ArgumentParser:
    """The command line's parser, its usage lines beginning with `prog`."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="write the HTML report and the crossover table")
    rep.add_argument("dirs", nargs="+", type=Path, help="results directories (results/<sweep>), or folders of them (results/)")
    rep.add_argument("--out", type=Path, default=None, help="report folder (default: _reports/DIR beside DIR, or _reports/<a>+<b>)")
    rep.add_argument("--draws", type=int, default=Bootstrap.draws, help="bootstrap draws per crossover")
    rep.add_argument("--seed", type=int, default=Bootstrap.seed, help="bootstrap seed")
    rep.add_argument("--include-loaded", action="store_true",
                     help="keep rows flagged outside_load (another job used the host while they were timed) "
                          "in the crossovers and charts; by default they are left out, and counted")
    rep.add_argument("--workload", action="append", default=None,
                     help="with --epochs: the workload of your planned run (needed where the rows hold several), or "
                          "its job file (path/to/job.py:ATTR) to count the planned step from")
    rep.add_argument("--trials", type=int, action="append", default=None,
                     help="with --epochs: runs of the planned run, side by side where an option has the GPUs "
                          "(default: one)")
    _plan_arguments(rep, "the page opens with that run on every option (as decide prices it)")
    rep.add_argument("--verbose", action="store_true",
                     help="print every table of the page too: the crossover table and the whole decision (by "
                          f"default: where the page is and the answer, in at most {report.SHORT_LINES} lines)")
    summ = sub.add_parser("summary", help="print median time per epoch per device and size")
    summ.add_argument("dirs", nargs="+", type=Path, help="results directories")
    cst = sub.add_parser("cost", help="print and draw cost per epoch, trial and million samples of each row")
    cst.add_argument("dirs", nargs="+", type=Path, help="results directories")
    cst.add_argument("--prices", type=Path, default=prices.PRICES, help="price table: a YAML like the one shipped with crossover, or a SkyPilot catalog vms.csv (default: the one shipped)")
    cst.add_argument("--out", type=Path, default=None, help="folder for the charts (default: as for report)")
    dec = sub.add_parser("decide", help="the whole sweep's wall time and cost on every option: fastest, cheapest, "
                                        "cheapest within a deadline, the front, the home boxes' break-even")
    dec.add_argument("dirs", nargs="+", type=Path, help="results directories, or folders of them (results/)")
    dec.add_argument("--home-box", type=Path, action="append", default=None,
                     help="home box YAML, repeatable (default: every home box shipped with crossover)")
    dec.add_argument("--trials", type=int, action="append", default=None,
                     help="trials of the --workload of the same position, or with --epochs, runs of the planned run, "
                          "side by side where an option has the GPUs (default: the measured grid as the sweep; with "
                          "--epochs, one)")
    dec.add_argument("--workload", action="append", default=None,
                     help="workload of the --trials of the same position; with --epochs: the workload whose rows "
                          "price the planned run (needed where the rows hold several), or its job file "
                          "(path/to/job.py:ATTR) to count the planned step from, where the one the rows name "
                          "(workload_path) is not found from here")
    _plan_arguments(dec, "price that run on every option instead of the measured grid")
    dec.add_argument("--json", type=Path, default=None, metavar="PATH",
                     help="also write every option's figures as a JSON list to PATH ('-': stdout alone, the text "
                          "answer then to stderr): option, gpu, batch_size, dataset_size, epoch_s and its interval, "
                          "run_s, usd, fits, basis and more")
    dec.add_argument("--usd-per-kwh", type=float, default=prices.USD_PER_KWH,
                     help="your electricity's price: costs your own CPU and GPUs' runs (US dollars per kWh)")
    dec.add_argument("--cpu-watts", type=float, default=prices.CPU_W,
                     help="watts your CPU draws training, where no row read RAPL (cpu_energy_j)")
    dec.add_argument("--gpu-watts", type=float, default=prices.GPU_W,
                     help="watts each of your GPUs draws training, where no row read NVML (gpu_energy_j)")
    dec.add_argument("--deadline", type=float, default=None, help="hours: also name the cheapest option that ends within it")
    dec.add_argument("--prices", type=Path, default=prices.PRICES, help="price table: a YAML like the one shipped with crossover, or a SkyPilot catalog vms.csv (default: the one shipped)")
    dec.add_argument("--out", type=Path, default=None, help="folder for the charts (default: as for report)")
    dec.add_argument("--verbose", action="store_true",
                     help="print the whole decision: every option, the break-even, how each is costed, the notes "
                          f"(by default: the GPU to rent, the box to buy, your CPU, in at most {decide.BRIEF_LINES} lines)")
    for command in (rep, summ, dec):
        command.add_argument("--no-reference", action="store_true",
                             help="leave out the reference GPU rows shipped with crossover (by default, the newest "
                                  "reference GPU rows of the same configurations are set beside yours)")
    par = sub.add_parser("parallel", help="print the packed-trial, DDP and pipeline benchmark figures")
    par.add_argument("dirs", nargs="*", type=Path, help="results directories of the parallel studies")
    par.add_argument("--validate", action="store_true",
                     help="the data-parallel model (crossover's pricing of several GPUs) against the shipped DDP rows "
                          "and Lambda's 2-, 4- and 8-GPU rows: errors, coverage, targets")
    eng = sub.add_parser("engines", help="print the engines' speed-ups, fused throughput and crossovers")
    eng.add_argument("dirs", nargs="+", type=Path, help="results directories of the engines and precision studies")
    mod = sub.add_parser("model", help="print the model's calibration and what bounds each step")
    mod.add_argument("dirs", nargs="*", type=Path,
                     help="results directories (default: the reference rows shipped with crossover)")
    mod.add_argument("--validate", action="store_true",
                     help="also leave each GPU, then each workload, out in turn: error, coverage of the 90%% "
                          "conformal intervals, and the targets; then each GPU of the public tables shipped with "
                          "crossover")
    mod.add_argument("--devices", type=Path, default=model.DEVICES, help="device table YAML")
    mig = sub.add_parser("migrate", help="rewrite row files whose columns differ from this version's schema to "
                                         "exactly its columns")
    mig.add_argument("dirs", nargs="+", type=Path, help="directories searched for *.parquet rows, recursively")
    mig.add_argument("--copy-counts", metavar="FROM", type=Path, action="append", default=None,
                     help="instead: fill the per-class step costs of DIRS' GPU rows from FROM's GPU rows of the "
                          "same configuration and torch (repeatable)")
    mig.add_argument("--compact", action="store_true",
                     help="instead: each sweep's folder of row files below DIRS as one file")
    return p


def _plan_arguments(command: argparse.ArgumentParser, what: str) -> None:
    """The flags of a planned run: --epochs and --dataset-size, and the axes that name its configuration."""
    command.add_argument("--epochs", type=int, default=None,
                         help=f"your planned run's epochs (with --dataset-size): {what}")
    command.add_argument("--dataset-size", "--samples", dest="dataset_size", type=int, default=None, metavar="N",
                         help="your planned run's samples an epoch (with --epochs): a CPU's and a measured GPU's time per "
                              "epoch are fitted along the dataset sizes measured, each saying how far outside them N "
                              "lies; a GPU not measured at N is the model's prediction of the run itself")
    for axis, flag in decide.AXIS_FLAGS.items():
        command.add_argument(flag, dest=axis, default=None, metavar="N",
                             help=f"your planned run's {decide.AXIS_NAMES[axis][:-1]} (with --epochs): needed where the "
                                  f"rows hold several")
    command.add_argument("--param", action="append", default=None, metavar="NAME=VALUE",
                         help="your planned run's value of any other axis (with --epochs): a workload's own "
                              "(--param image_size=32) or a column of the configuration (--param lr=0.1); repeatable")
    command.add_argument("--precision", default=Precision.DEFAULT, type=precision, choices=list(Precision),
                         help="the precision your planned run trains at (with --epochs), as crossover predict takes it: "
                              "default (PyTorch's own), fp32 (strict), tf32, bf16 or fp16 (autocast); a GPU measured "
                              "at the default is then predicted at this one")
    command.add_argument("--gpus", type=gpu_counts, default=(), metavar="N[,N...]",
                         help="a planned run: the GPU counts of one instance to price it on, data-parallel at the batch a "
                              f"GPU takes (default: 1 and every count an instance offers, up to {decide.MOST}); each "
                              "count on the instance of the fewest GPUs that has as many, charged whole for the run's time")
    command.add_argument("--nodes", type=nodes, default=1, metavar="M",
                         help="a planned run: instances joined by their network (where the price table names it)")


def _report(args) -> int:
    plan = _plan(args)  # before reading: a bad flag is refused at once
    if plan is None and (args.workload or args.trials):
        raise ValueError(f"{'--workload' if args.workload else '--trials'} names your planned run: give --epochs and "
                         "--dataset-size too (--epochs 30 --dataset-size 50000)")
    page, text = report.build(args.dirs, args.out, Bootstrap(draws=args.draws, seed=args.seed), args.include_loaded,
                              reference=not args.no_reference, plan=plan, verbose=args.verbose,
                              counts=args.counts)
    print(text)
    print(f"crossover table: {page.parent / 'crossover.parquet'}")
    print(f"report: {page}")
    return 0


def _rows(args) -> pd.DataFrame:
    """The rows of args.dirs, with the reference GPU rows of the same configurations beside them unless
    --no-reference: what `summary` and `decide` read, and `report` (report.build reads them so too)."""
    rows = read(*args.dirs)
    return rows if args.no_reference else summary.with_reference(rows)


def _summary(args) -> int:
    rows = _rows(args)
    print("\n".join(filter(None, [summary.reference_note(rows), summary.render(rows.assign(device=rows["arm"]))])))
    return 0


def _parallel(args) -> int:
    if args.dirs:
        print(parallel.render(read(*args.dirs)))
    if args.validate:
        print(validate_parallel.render(*validate_parallel.validate()))
    if not args.dirs and not args.validate:
        print("parallel: give results directories of the parallel studies, or --validate")
        return 2
    return 0


def _engines(args) -> int:
    print(engines.render(read(*args.dirs)))
    return 0


def _model(args) -> int:
    rows = read(*(args.dirs or [REFERENCE]))
    print(model.render(rows, args.devices))
    if args.validate:
        print(model.render_validation(model.validate(rows, args.devices)))
        print(families.render(families.validate(rows, args.devices)))
        print(model.render_op_study(model.op_study(args.devices)))
        print(model.render_neusight(model.neusight(args.devices)))
        print(model.render_memory(model.memory(rows)))
        print(ordering.render_held_out())  # the GPUs no reference row measured: Lambda's public figures
    return 0


def _migrate(args) -> int:
    if args.compact:
        folders, removed = migrate.compact(*args.dirs)
        print(f"{folders} sweep folders compacted to one row file each ({removed} row files folded in)")
        return 0
    if args.copy_counts:
        filled, left = migrate.copy_counts(args.copy_counts, *args.dirs)
        print(f"{filled} GPU rows took per-class counts from {', '.join(map(str, args.copy_counts))}; "
              f"{left} GPU rows without counts left as they were (no single counted configuration matches)")
        return 0
    rewritten, current = migrate.migrate(*args.dirs)
    print(f"{rewritten} row files rewritten to this version's schema's columns (schema version kept), "
          f"{current} already current")
    return 0


def _cost(args) -> int:
    rows, (options, _) = read(*args.dirs), prices.load_prices(args.prices)
    costs = cost.table(rows, options)
    shown = costs[costs["config_hash"].isin(representative(rows)["config_hash"])]
    boxes = [prices.load_home_box(p) for p in prices.home_boxes()]  # their purchase prices' age is counted too
    print(cost.render(costs, representative(rows), options, boxes=boxes))
    out = args.out or report.default_out(args.dirs)
    drawn, why = charts.save_all({"cost_per_million": charts.cost_per_million(shown)}, out)
    print(why or f"chart: {drawn['cost_per_million']}")
    return 0


def _trials(args) -> dict[str, int] | None:
    if not args.trials and not args.workload:
        return None
    if len(args.trials or []) != len(args.workload or []):
        raise ValueError(f"--trials and --workload go in pairs (--trials 1000 --workload peaks); got "
                         f"{len(args.trials or [])} --trials and {len(args.workload or [])} --workload")
    return dict(zip(args.workload, args.trials))


def _axes(args) -> tuple[tuple[str, str], ...]:
    """The planned run's named axes: --batch-size, --width, --depth, --context and every --param NAME=VALUE."""
    named = [(axis, getattr(args, axis)) for axis in decide.AXIS_FLAGS if getattr(args, axis) is not None]
    for text in args.param or []:
        name, sep, value = text.partition("=")
        if not sep:
            raise ValueError(f"--param {text}: write NAME=VALUE, e.g. --param image_size=32")
        named.append((name.strip().replace("-", "_"), value.strip()))
    return tuple(named)


def _plan(args) -> decide.Request | None:
    """The planned run of --epochs and --dataset-size, with at most one --workload and one --trials, and
    the axes that name its configuration."""
    if args.epochs is None and args.dataset_size is None:
        if _axes(args):
            raise ValueError(f"{(args.param and '--param') or decide.AXIS_FLAGS[_axes(args)[0][0]]} names your "
                             "planned run's configuration: give --epochs and --dataset-size too "
                             "(--epochs 30 --dataset-size 50000 --batch-size 128)")
        return None
    if args.epochs is None or args.dataset_size is None:
        given, lacking = ("--epochs", "--dataset-size") if args.dataset_size is None else ("--dataset-size", "--epochs")
        raise ValueError(f"{given} needs {lacking} too: the planned run is E epochs of N samples "
                         "(--epochs 20 --dataset-size 1000000)")
    for flag, values in (("--workload", args.workload), ("--trials", args.trials)):
        if len(values or []) > 1:
            raise ValueError(f"{flag} given {len(values)} times: with --epochs and --dataset-size, the planned run "
                             f"is one workload's; give {flag} once")
    return decide.Request(args.epochs, args.dataset_size, (args.workload or [None])[0], (args.trials or [None])[0],
                          _axes(args), args.precision, args.gpus, args.nodes)


def _decide(args) -> int:
    plan = _plan(args)  # before reading: a bad flag is refused at once
    power = prices.Electricity(args.usd_per_kwh, args.cpu_watts, args.gpu_watts)
    rows = _rows(args)
    options, billing = prices.load_prices(args.prices)
    boxes = [prices.load_home_box(p) for p in (args.home_box or prices.home_boxes())]
    offer = decide.Offer(tuple(options), billing, tuple(boxes), power, deadline_h=args.deadline)
    answer = decide.answer(plan, args.counts, offer, rows, None if plan else _trials(args))
    grid, found, picks, even, notes = answer.grid, answer.lines, answer.picks, answer.evens, answer.notes
    text = sys.stderr if str(args.json) == "-" else sys.stdout  # stdout holds the JSON alone
    if args.json is not None:
        listed = json.dumps(decide.records(found, grid, plan, picks), indent=1)
        if str(args.json) == "-":
            print(listed)
        else:
            args.json.write_text(listed + "\n")
    if args.verbose:
        print("\n".join(filter(None, [summary.reference_note(rows), decide.render(found, grid, picks, even, notes, plan)])),
              file=text)
    else:
        print(decide.brief(found, grid, picks, notes, plan, (verdict.reference_line(rows),), decide.BRIEF_LINES - 1),
              file=text)
    if args.json is not None and str(args.json) != "-":
        print(f"json: {args.json} ({len(found)} options)", file=text)
    out = args.out or report.default_out(args.dirs)
    priced = answer.priced
    named = charts.decision(found, even, picks, priced, "decide")  # its own names: the report's never overwrite them
    drawn, why = charts.save_all(named, out)  # after the answer: charts that cannot be written never lose it
    if why or not named:
        print(why or "charts: none (no option to draw)", file=text)
    elif args.verbose:
        print("\n".join(f"chart: {path}" for path in drawn.values()), file=text)
    else:
        print(f"charts: {out}/{{{','.join(drawn)}}}.html", file=text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The analysis command line: reports, summaries and costs from results directories.

    python -m analysis report results/scaling [more dirs]     # HTML page + crossover table (prints both paths)
    python -m analysis summary results/scaling                # median time per epoch per device and size
    python -m analysis cost results/scaling --home-box analysis/home_boxes/seed002_gtx960.yaml
    python -m analysis parallel results/parallel-*            # packed, DDP and pipeline figures
    python -m analysis engines results/engines-*              # engines' speed-ups, fusion, crossovers
    python -m analysis model results/scaling [--validate]     # the model of unmeasured GPUs: bounds, leave-one-out error
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis import charts, cost, engines, model, parallel, report, summary
from analysis.crossover import Bootstrap
from analysis.load import read, representative
from analysis.cli import HelpFormatter


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="write the HTML report and the crossover table")
    rep.add_argument("dirs", nargs="+", type=Path, help="results directories (results/<sweep>)")
    rep.add_argument("--out", type=Path, default=None, help="report folder (default: DIR/_report, or results/_report_<a>+<b>)")
    rep.add_argument("--draws", type=int, default=Bootstrap.draws, help="bootstrap draws per crossover")
    rep.add_argument("--seed", type=int, default=Bootstrap.seed, help="bootstrap seed")
    rep.add_argument("--include-loaded", action="store_true",
                     help="keep rows flagged outside_load (another job used the host while they were timed) "
                          "in the crossovers and charts; by default they are left out, and counted")
    summ = sub.add_parser("summary", help="print median time per epoch per device and size")
    summ.add_argument("dirs", nargs="+", type=Path, help="results directories")
    cst = sub.add_parser("cost", help="print and draw cost per epoch, trial and million samples, and the break-even")
    cst.add_argument("dirs", nargs="+", type=Path, help="results directories")
    cst.add_argument("--home-box", type=Path, default=None, help="home box YAML (see analysis/home_boxes/)")
    cst.add_argument("--prices", type=Path, default=cost.PRICES, help="price table YAML")
    cst.add_argument("--out", type=Path, default=None, help="folder for the charts (default: as for report)")
    par = sub.add_parser("parallel", help="print the packed-trial, DDP and pipeline benchmark figures")
    par.add_argument("dirs", nargs="+", type=Path, help="results directories of sweeps/parallel.py")
    eng = sub.add_parser("engines", help="print the engines' speed-ups, fused throughput and crossovers")
    eng.add_argument("dirs", nargs="+", type=Path, help="results directories of sweeps/engines.py")
    mod = sub.add_parser("model", help="print the model's calibration and what bounds each step (docs/model.md)")
    mod.add_argument("dirs", nargs="+", type=Path, help="results directories")
    mod.add_argument("--validate", action="store_true",
                     help="also leave each measured device out in turn and print the error per workload")
    mod.add_argument("--devices", type=Path, default=model.DEVICES, help="device table YAML")
    args = p.parse_args(argv)
    try:
        return {"report": _report, "summary": _summary, "cost": _cost, "parallel": _parallel,
                "engines": _engines, "model": _model}[args.command](args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _report(args) -> int:
    page, text = report.build(args.dirs, args.out, Bootstrap(draws=args.draws, seed=args.seed), args.include_loaded)
    print(text)
    print(f"crossover table: {page.parent / 'crossover.parquet'}")
    print(f"report: {page}")
    return 0


def _summary(args) -> int:
    rows = read(*args.dirs)
    print(summary.render(rows.assign(device=rows["arm"])))
    return 0


def _parallel(args) -> int:
    print(parallel.render(read(*args.dirs)))
    return 0


def _engines(args) -> int:
    print(engines.render(read(*args.dirs)))
    return 0


def _model(args) -> int:
    rows = read(*args.dirs)
    print(model.render(rows, args.devices))
    if args.validate:
        print("== leave-one-out: |predicted / measured - 1| of epoch time ==")
        print(model.render_validation(model.validate(rows, args.devices)))
    return 0


def _cost(args) -> int:
    rows, options = read(*args.dirs), cost.load_prices(args.prices)
    box = cost.load_home_box(args.home_box) if args.home_box else None
    costs = cost.table(rows, options, box)
    even = cost.break_even(box, options, costs) if box else None
    print(cost.render(costs, box, even, representative(rows)))
    out = args.out or report.default_out(args.dirs)
    drawn = {"cost_per_million": charts.cost_per_million(costs[costs["config_hash"].isin(representative(rows)["config_hash"])])}
    if box:
        drawn["break_even"] = charts.break_even(cost.monthly(box, even), even)
    for name, chart in drawn.items():
        print(f"chart: {charts.save(chart, out / name)[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

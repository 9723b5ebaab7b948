"""The flags every sweep script shares, in one parent parser. analysis/cli.py, of the same name a layer down,
holds what the analysis's commands share too (the help format), which this builds on.

    p = cli.parser(__doc__, name="engines")    # --out, --name, --smoke, --address, --workload, --param, and -h
    p.add_argument(...)                         # the script's own flags
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Protocol

from ..analysis.cli import HelpFormatter
from ..trainables.job import EXAMPLES, named
from .counting import ROOT, child_env  # noqa: F401 (a child process's folder and environment)


def at_least(low: int):
    """An argparse type: an integer >= `low`, else the flag is refused by name (exit 2). Without it,
    `--max-failures -1` meant Tune's 'retry for ever', and 0 threads or trials at once meant 'no limit'."""
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value
    return check


def integers(low: int):
    """An argparse type: comma-separated integers, each >= `low`, as a list (a grid axis's values); else the flag
    is refused by name, with what was given (exit 2)."""
    one = at_least(low)

    def check(text: str) -> list[int]:
        try:
            return [one(v.strip()) for v in text.split(",")]
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"must be integers >= {low}, comma-separated (e.g. 8,16), "
                                             f"got {text!r}") from None
    return check


def names(known):
    """An argparse type: a comma-separated subset of `known`, as a tuple; a name not among them is refused,
    naming the choices (exit 2)."""
    def check(text: str) -> tuple[str, ...]:
        given = tuple(n.strip() for n in text.split(",") if n.strip())
        unknown = [n for n in given if n not in known]
        if unknown or not given:
            raise argparse.ArgumentTypeError(f"unknown {unknown or text!r}: choose from {', '.join(known)}")
        return given
    return check


TRIAL_TIMEOUT_S = 3600  # a trial that runs longer is stopped (trainables/trainable.py): a hang is a row, not a stall
PLAN_TIMEOUT_S = 60  # s the process that plans a sweep of your workload may run (sweeps/plan.py): a hang stops there


def param(text: str) -> tuple[str, object]:
    """--param NAME=VALUE: the value as an int, a float, or else the text (the workload's Param checks its type)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"must be NAME=VALUE, got {text!r}")
    for kind in (int, float):
        try:
            return name.strip(), kind(value)
        except ValueError:
            pass
    return name.strip(), value


class Chosen(Protocol):
    """What `builtins` reads of a script's command line: its argparse Namespace, or the frozen Flags it parsed."""

    @property
    def workloads(self) -> str | None: ...  # --workloads: comma-separated built-ins, or None

    @property
    def workload(self) -> list: ...  # --workload: your workloads' references (path/to/job.py:ATTR)


def builtins(args: Chosen, known, default=None) -> list[str]:
    """The built-in workloads a script sweeps: --workloads, else `default` (all it `known`s), or none where
    --workload names your own. Refuses a name it does not know, naming the choices."""
    given = args.workloads if args.workloads is not None else ("" if args.workload else ",".join(default or known))
    names = [w.strip() for w in given.split(",") if w.strip()]
    unknown = [w for w in names if w not in known]
    if unknown:
        raise ValueError(f"--workloads: unknown {unknown}; choose from {sorted(known)}, or give your own with "
                         "--workload path/to/job.py:ATTR")
    return names


SMOKE_HELP = "the whole study cut to tiny sizes: checks the path end to end"


def parser(doc: str, name: str | None, name_help: str = "sweep name: rows go to OUT/NAME/",
           smoke_help: str = SMOKE_HELP) -> argparse.ArgumentParser:
    """A script's parser: its docstring's first paragraph as description, and the shared flags (`smoke_help`: what
    --smoke does, with how long it took where the script measured it)."""
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--out", default="results", type=Path, help="results root: rows go to OUT/NAME/")
    shared.add_argument("--name", default=name, help=name_help)
    shared.add_argument("--smoke", action="store_true", help=smoke_help)
    shared.add_argument("--address", default=None, help="address of a running Ray cluster (default: start a local one)")
    shared.add_argument("--workload", action="append", default=[], type=named, metavar="REF",
                        help="your own workload, path/to/job.py:ATTR or package.module:ATTR (a "
                             f"crossover.Workload), or an example job's name ({', '.join(EXAMPLES)}); may be given "
                             "several times, beside --workloads")
    shared.add_argument("--param", action="append", default=[], type=param, metavar="NAME=VALUE",
                        help="a value of your workload's own axis (Workload.params), e.g. --param csv=data.csv; "
                             "may be given several times")
    shared.add_argument("--trial-timeout", type=at_least(1), default=TRIAL_TIMEOUT_S, metavar="S",
                        help="seconds a trial may run before it is stopped and rowed as timed out")
    shared.add_argument("--plan-timeout", type=at_least(1), default=PLAN_TIMEOUT_S, metavar="S",
                        help="seconds the process that imports your workload and plans its trials (its model's "
                             "shapes, its memory) may run your code before it is stopped; its own start-up "
                             "(importing crossover and torch) is not counted")
    return argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=HelpFormatter, parents=[shared])

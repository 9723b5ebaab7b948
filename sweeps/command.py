"""The `crossover` command: the sweep, the decision and the report under one name.

    crossover sweep --smoke                  # = python sweeps/scaling.py --smoke
    crossover decide results/scaling --workload tabular --epochs 20 --dataset-size 1000000 --width 256
                                             # your run on every option (python -m crossover.analysis decide, handed
                                             # the planned step counted as predict counts it: sweeps/counting.py)
    crossover report results/scaling         # = python -m crossover.analysis report results/scaling
    crossover predict --workload job.py:workload --batch-size 128 --dataset-size 50000 --epochs 30
                                             # = python -m crossover.sweeps.predict ...: every GPU, predicted, no sweep
    crossover sweep --help                   # each command's own flags, each with its help

`pip install -e .` puts it on the PATH (pyproject.toml, [project.scripts]); `python -m crossover.sweeps.command`
is the same without installing. A subcommand hands the rest of the line to the parser that owns those
flags (sweeps/scaling.py's, analysis/__main__.py's), so every flag has one definition and one help text. For
`decide` and `report`, this layer counts the steps the analysis names (its `wanted`) and hands it the counts: the
analysis starts no process.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass

from crossover.config import WorkloadError
from crossover.step import Step

from ..analysis.cli import HelpFormatter
from ..trainables.job import check
from .count_cache import recount


@dataclass(frozen=True)
class Command:
    module: str  # whose main(argv) runs it
    prefix: tuple[str, ...]  # put before the user's arguments: the analysis subcommand's name
    help: str


COMMANDS = {
    "sweep": Command("crossover.sweeps.scaling", (),
                     "time training on every device across model and data sizes; rows to results/NAME/"),
    "decide": Command("crossover.analysis.__main__", ("decide",),
                      "your planned run (--epochs, --dataset-size, --batch-size) or the sweep: time per epoch, "
                      "wall time, cost and memory fit on every option, fastest, cheapest, the home boxes' break-even"),
    "report": Command("crossover.analysis.__main__", ("report",),
                      "write the HTML report and the crossover table of results directories"),
    "predict": Command("crossover.sweeps.predict", (),
                       "your workload's time per epoch, run time, cost and memory fit on every GPU model, predicted "
                       "from one step counted, none timed: no sweep"),
}


def parser() -> argparse.ArgumentParser:
    """The top level alone: the subcommands, for --help and for refusing a name that is none of them."""
    p = argparse.ArgumentParser(prog="crossover", description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter,
                                epilog="each command's own flags: crossover COMMAND --help")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub.add_parser(name, add_help=False, help=command.help)
    return p


def given_workloads(argv: list[str]) -> list[str]:
    """The values of every `--workload X` and `--workload=X` of a subcommand's arguments."""
    return [*(v for flag, v in zip(argv, argv[1:]) if flag == "--workload"),
            *(a.split("=", 1)[1] for a in argv if a.startswith("--workload="))]


def counted(steps: tuple[Step, ...]) -> dict[Step, dict | str]:
    """Each of `steps` counted as `crossover predict` counts it (`recount`: from the count cache where it was counted
    before), or why it could not be: the error's line, which the analysis's note names (a ValueError, as
    PredictError is: the answer then rests on a row's count, never on no answer)."""
    counts: dict[Step, dict | str] = {}
    for step in steps:
        try:
            counts[step] = recount(step)[step]
        except ValueError as exc:
            counts[step] = str(exc)
    return counts


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # Only the first word is the top level's: the rest, --help included, is the subcommand's parser's.
    name = parser().parse_args(argv[:1]).command
    command = COMMANDS[name]
    if name == "sweep":
        # Its parser names itself after sys.argv[0], as `python sweeps/scaling.py` does: its usage line
        # then shows what was typed.
        sys.argv[0] = "crossover sweep"
    # Each job file or module named, checked before the subcommand's module is imported or starts a process that
    # imports the job: a typo is refused in under a second, in the same line under every command.
    try:
        for text in given_workloads(argv[1:]):
            check(text)
    except WorkloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Imported on demand: crossover.sweeps.scaling imports torch and Ray (16 s on a 2-core machine, against 7 s
    # for the analysis), which `crossover decide` and `crossover report` never need.
    module = importlib.import_module(command.module)
    try:
        # analysis/__main__.py's subcommand: its parser named `crossover`, so its usage `crossover decide`; handed the
        # steps it names counted here, as predict counts them (the analysis holds no process code)
        if command.prefix:
            handed = [*command.prefix, *argv[1:]]
            code = module.main(handed, prog="crossover", counts=counted(module.wanted(handed)))
        else:
            code = module.main(argv[1:])
        sys.stdout.flush()  # here, not at exit: a reader gone shows in this flush for output under the buffer's size
        return code
    except BrokenPipeError:
        # the reader went away (`crossover predict ... | head`): what it wanted was printed, so no traceback. Python's
        # own advice (the signal module's "Note on SIGPIPE"): point stdout at devnull, or the interpreter's flush at
        # exit raises again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())

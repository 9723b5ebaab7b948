"""The flags every sweep script shares, in one parent parser.

    p = cli.parser(__doc__, name="engines")    # --out, --name, --smoke, --address, and -h
    p.add_argument(...)                         # the script's own flags
"""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.cli import HelpFormatter


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


def parser(doc: str, name: str | None, name_help: str = "sweep name: rows go to OUT/NAME/") -> argparse.ArgumentParser:
    """A script's parser: its docstring's first paragraph as description, and the shared flags."""
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--out", default="results", type=Path, help="results root: rows go to OUT/NAME/")
    shared.add_argument("--name", default=name, help=name_help)
    shared.add_argument("--smoke", action="store_true",
                        help="the whole study cut to tiny sizes: checks the path end to end in about a minute")
    shared.add_argument("--address", default=None, help="address of a running Ray cluster (default: start a local one)")
    return argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=HelpFormatter, parents=[shared])

"""Every command's --help names each flag's default once, and `crossover decide` and `crossover predict` read
--gpus with one parser."""

import argparse
import contextlib
import io
import re

import pytest

from crossover.analysis import __main__ as analysis
from crossover.analysis.cli import gpu_counts
from crossover.sweeps import predict, scaling


def helps() -> dict[str, str]:
    """Each command line's --help, and its subcommands'."""
    top = [predict.parser(), analysis.parser()]
    subs = [p for t in top for a in t._actions if isinstance(a, argparse._SubParsersAction) for p in a.choices.values()]
    out = {p.prog: p.format_help() for p in top + subs}
    with contextlib.redirect_stdout(io.StringIO()) as said, pytest.raises(SystemExit):
        scaling.parse_args(["--help"])
    return out | {"crossover sweep": said.getvalue()}


@pytest.mark.parametrize("prog, text", helps().items())
def test_each_flags_default_is_named_once(prog, text):
    # one entry a flag: from its line to the next flag's
    for entry in re.split(r"\n(?=  -)", text):
        words = " ".join(entry.split())
        assert words.count("default:") <= 1, (prog, words)
        assert "(default: ())" not in words and "(default: [])" not in words, (prog, words)


def test_decide_and_predict_read_gpus_with_one_parser():
    decide = next(a for a in analysis.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["decide"]
    for p in (predict.parser(), decide):
        (gpus,) = [a for a in p._actions if "--gpus" in a.option_strings]
        assert gpus.type is gpu_counts and gpus.default == ()
    assert gpu_counts("1,3,8") == (1, 3, 8)
    for bad in ("0", "two", "1,,2"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be GPU counts >= 1"):
            gpu_counts(bad)

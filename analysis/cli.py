"""The command lines' shared parts: the help format, each flag's default shown once (`HelpFormatter`), and the one
parser of each option of a requested run that `crossover predict`, `crossover decide` and `crossover report` share:
--precision (`precision`), --gpus (`gpu_counts`) and --nodes (`nodes`). sweeps/cli.py, of the same name a layer up,
builds the sweep scripts' flags on them."""

import argparse

from crossover.schema import PRECISIONS, Precision


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each flag's default appended to its help, once: not where its help already says it ('default: ...'), nor
    where it has none (None, or an empty list: its help says what happens then)."""

    def _get_help_string(self, action):
        default, said = action.default, action.help or ""
        empty = default is None or (isinstance(default, (list, tuple)) and not default)
        return said if empty or "default:" in said else super()._get_help_string(action)


def precision(text: str) -> Precision:
    """--precision bf16 as Precision.BF16; anything else refused in one line, naming the choices."""
    try:
        return Precision(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(PRECISIONS)})") from None


def nodes(text: str) -> int:
    """--nodes 2 as 2: instances joined by their network, a whole number >= 1; anything else refused in one line."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of instances >= 1, e.g. 2; got {text!r}")
    return value


def gpu_counts(text: str) -> tuple[int, ...]:
    """--gpus 1,2,4,8 as (1, 2, 4, 8); anything else refused in one line."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be GPU counts >= 1 separated by commas, e.g. 1,2,4,8; got {text!r}")
    return values

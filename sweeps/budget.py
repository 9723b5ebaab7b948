"""The search's budget: each trial's predicted seconds, which asked trials fit --budget, and each trial's limit.

    from .budget import afford, predict_s, trial_limit
    run, skip = afford(asks, left_s=90.0, budget_s=150.0)   # the asks that fit, and why each other is skipped

Before a round, each trial's time is predicted (`predict_s`): this machine's rows of the workload at the
nearest measured size, scaled by the reference rows' ratio between the two sizes. A line with neither
(a user's workload, before its first trial) is probed first (sweeps/probe.py: a few of its steps timed in
a process of its own, with a time limit), and the probe stands in for the first size's row. A trial
predicted past the budget left, or past MAX_SHARE of the whole budget, is skipped (`afford`): the reason
is printed and written as an error row ('skipped: ...'), which the analysis reads as not measured and a
later run measures. Where no trial of the first round fits, one line says the budget the cheapest needs
(`needs`), before any trial starts. A prediction can be wrong, so each trial also has a hard limit
(`trial_limit`): MAX_SHARE of the budget, never more than --trial-timeout. A trial past it is stopped
(trainables/trainable.py Deadline) and becomes an error row whose error says it was cut for the budget
(CUT); its size gets no more runs in this search (`cut`), which goes on with the others (a later run with
a larger budget measures it). A line's first CPU point is the exception to the share, in `afford` and in
`trial_limit`: it may take what is left of the budget, since its row is what predicts the rest, and a
model slower than the share would otherwise land no row at all.

Pure functions of numbers, rows and the trials asked (sweeps/search.py's loop calls them); never imports
ray (trainables/timing.py, for how many epochs a trial times, imports torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..trainables.timing import EXTEND_AT_MOST, MIN_TIMED_EPOCHS
from .stopping import Line

# The default --budget: seconds of the search, its Tune runs and trials, from its first round. `make run`'s
# target is 3 minutes of sweep on a 2-core VM; Ray's start (about 10 s idle) and the summary and report
# at the end (about 15 s) come on top.
BUDGET_S = 150.0
PROBE_FLOOR_S = 30.0  # s a probe may take whatever the budget: its process's imports alone can take seconds
MAX_SHARE = 0.15  # no trial predicted to take more than this share of the budget runs: no one size eats the run
TUNER_S = 3.0  # a Tune run's own cost until measured: a fresh worker imports ray.tune and torch (2.5-4.3 s
# on 2 idle cores, sweeps/runner.py); the search then uses what its runs took beyond their trials
TRIAL_S = 0.1  # Tune's own time between two trials of one run, beside the trial's total_s (0.02-0.03 s, +margin)


def timed_epochs(epoch_s: float, epochs: int, warmup: int, min_timed_s: float) -> int:
    """Epochs a trial times at `epoch_s` an epoch, as trainables/timing.py decides it."""
    own = max(epochs - warmup, MIN_TIMED_EPOCHS)
    return min(max(own, math.ceil(min_timed_s / max(epoch_s, 1e-9))), EXTEND_AT_MOST * own)


def predict_s(size, cfg, own: dict, ref: dict, factor: float) -> float | None:
    """A trial's predicted seconds at `size` (config `cfg`: epochs, warm-up, min_timed_s). `own`: this
    machine's measured sizes of the line on the trial's device, size -> (seconds besides the epochs, epoch
    seconds); `ref`: the reference rows' epoch seconds by size (same device kind); `factor`: this machine's
    epoch time over the reference's, where it has no row of this line yet. None where nothing predicts it.

    From the nearest measured size y: epoch(x) = epoch(y) x ref(x) / ref(y) (by x / y where the reference
    lacks either, never faster for a larger x), and the time besides the epochs (data, model,
    evaluation, counting a step's costs) grown as much where x costs more. Else the reference's own epoch
    time at x times `factor`, plus a second besides."""
    if own:
        y = min(own, key=lambda s: (abs(math.log(s / size)), -s))
        rest, epoch = own[y]
        if size in ref and y in ref:
            grow = ref[size] / ref[y]
        else:  # no reference shape: as the size, and never faster for a larger one
            grow = max(size / y, 1.0) if size > y else min(size / y, 1.0)
        epoch, rest = epoch * grow, rest * max(grow, 1.0)
    elif size in ref:
        epoch, rest = ref[size] * factor, 1.0
    else:
        return None
    runs = cfg.warmup_epochs + timed_epochs(epoch, cfg.epochs, cfg.warmup_epochs, cfg.min_timed_s)
    return rest + epoch * runs + TRIAL_S


@dataclass(frozen=True)
class Ask:
    """One point's runs for the next round: its trials (target - have new seeds, every device) and their
    predicted seconds (None: nothing predicts one)."""

    line: Line
    size: object
    have: int
    target: int
    predicted: tuple  # per trial, as `trials`
    trials: tuple

    @property
    def cost(self) -> float:
        return sum(p or 0.0 for p in self.predicted)

    @property
    def upto(self) -> int:
        """The seeds runner.run must cover (0..upto-1) to run the trials: the lower ones are measured."""
        return max((t.cfg.seed for t in self.trials), default=-1) + 1


def _worst(ask: Ask) -> float:
    """An ask's dearest trial, predicted seconds (0 where none is predicted)."""
    return max((x or 0.0 for x in ask.predicted), default=0.0)


def afford(found: list[Ask], left_s: float, budget_s: float, fresh: frozenset = frozenset()
           ) -> tuple[list[Ask], list[tuple[Ask, str]]]:
    """The asks that fit, cheapest first: each trial within MAX_SHARE of the budget, all of them within
    `left_s`; and the others, each with why it is skipped. An ask of a `fresh` line (none of its sizes
    measured on this CPU yet) needs only to fit `left_s`: its row is what predicts the line's other trials,
    and a model slower than the share would otherwise land no row at all."""
    run, skip = [], []
    for ask in sorted(found, key=lambda a: a.cost):
        worst = _worst(ask)
        if worst > MAX_SHARE * budget_s and ask.line not in fresh:
            skip.append((ask, f"predicted {in_s(worst)}, more than {MAX_SHARE:.0%} of --budget {in_s(budget_s)}"))
        elif ask.cost > left_s:
            skip.append((ask, f"predicted {in_s(ask.cost)}, past the {in_s(max(left_s, 0))} left of --budget "
                              f"{in_s(budget_s)}"))
        else:
            run.append(ask)
            left_s -= ask.cost
    return run, skip


CUT = "cut for the budget"  # in the error of a trial stopped at trial_limit's share of the budget


def trial_limit(budget_s: float, timeout_s: float, left_s: float | None = None) -> tuple[float, str]:
    """Each trial's hard limit in the search, s, and what set it (the row's error names it): MAX_SHARE of
    the budget, never longer than `timeout_s` (--trial-timeout). A fresh line's first trial (`left_s` given:
    the budget left) may take all that is left instead, where that is more: the share is there to catch a
    wrong prediction, and cutting the one row that predicts the rest would leave the line with none."""
    share = MAX_SHARE * budget_s
    if left_s is not None and left_s > share:
        if left_s < timeout_s:
            return left_s, f"{CUT}: the {in_s(left_s)} left of --budget {in_s(budget_s)}"
        return timeout_s, "--trial-timeout"
    if share < timeout_s:
        return share, f"{CUT}: {MAX_SHARE:.0%} of --budget {in_s(budget_s)}"
    return timeout_s, "--trial-timeout"


def needs(skipped: list[tuple[Ask, str]], budget_s: float) -> str:
    """One line where no trial of the first round fits --budget: the cheapest skipped size, its predicted
    time, and the budget under which it is an ordinary trial (within MAX_SHARE of it), rounded up to 10 s."""
    ask = min((a for a, _ in skipped), key=lambda a: a.cost)
    need = math.ceil(ask.cost / MAX_SHARE / 10) * 10
    return (f"{ask.line.workload}: a trial at {ask.line.axis}={ask.size:,} is predicted to take {in_s(ask.cost)} "
            f"here, past what --budget {in_s(budget_s)} leaves: give --budget {need:,} or more")


def cut(rows: pd.DataFrame, group: list[Ask]) -> list[Ask]:
    """The asks of `group` with a trial cut for the budget (its row's error says so): their sizes are frozen."""
    failed = rows[(rows["status"] != "ok") & rows["error"].fillna("").str.contains(CUT, regex=False)]
    hit = set(failed["config_hash"])
    return [a for a in group if any(t.hash in hit for t in a.trials)]


def in_s(seconds: float) -> str:
    """'283 s', '1,200 s', '0.42 s'."""
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.2g} s"


def trial_count(n: int) -> str:
    return f"{n} trial{'s' if n != 1 else ''}"


def skipped_lines(skipped: list[tuple[Ask, str]], budget_s: float, width: int = 100) -> list[str]:
    """What the search skipped, in at most two lines of `width` columns: the sizes predicted past MAX_SHARE of
    the budget, dearest first, as many as fit; and how many trials found too little of the budget left."""
    dear = sorted((a for a, _ in skipped if _worst(a) > MAX_SHARE * budget_s), key=_worst, reverse=True)
    rest = [a for a, _ in skipped if _worst(a) <= MAX_SHARE * budget_s]
    said = []
    if dear:
        head, names = f"  predicted past {MAX_SHARE:.0%} of it: ", list[str]()
        for i, a in enumerate(dear):
            more = f" and {len(dear) - i - 1} more" if i < len(dear) - 1 else ""
            name = f"{a.line.workload} {a.line.axis}={a.size:,} ({in_s(_worst(a))})"
            if names and len(head + ", ".join(names + [name]) + more) > width:
                names[-1] += f" and {len(dear) - i} more"
                break
            names.append(name)
        said.append(head + ", ".join(names))
    if rest:
        said.append(f"  past what was left of it: {trial_count(sum(len(a.trials) for a in rest))} at {len(rest)} "
                    "sizes (a larger --budget measures them)")
    return said

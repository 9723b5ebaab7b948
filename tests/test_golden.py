"""One golden output per screen: the words a user reads first, held whole in tests/golden/*.txt.

    crossover predict --workload examples/zoo.py:workload --param arch=mobilenet_v2 --batch-size 128 \\
        --dataset-size 50000 --epochs 30                               -> tests/golden/predict.txt
    crossover decide DIR (the measured grid as the sweep)              -> tests/golden/decide.txt
    the end of `python sweeps/scaling.py` (the verdict, above its rows' folder and the report's path)
                                                                       -> tests/golden/sweep-end.txt

Each screen is made by the functions its command prints with, from fixed inputs: the step predict's counting
process printed for that job (tests/golden/predict-count.json), the CPU rows of the ResNet-18 example
(analysis_rows.user_cpu_rows), the shipped prices, home boxes and reference rows, and a fixed date for the
prices' age. Other tests assert figures and typed results; these hold the wording. After a deliberate change of
words or figures, write the files anew and read the change in `git diff tests/golden`:

    CROSSOVER_GOLDEN=write python -m pytest tests/test_golden.py
"""

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from analysis_rows import user_cpu_rows
from crossover.analysis import decide, summary, verdict
from crossover.analysis.decide import screen
from crossover.analysis.load import read
from crossover.analysis.selection import select
from crossover.step import Step

GOLDEN = Path(__file__).with_name("golden")
TODAY = dt.date(2026, 11, 29)  # the prices' age is counted to this day, so that a screen does not change as they age


def golden(name: str, text: str) -> None:
    """`text` as tests/golden/NAME holds it, or written there (CROSSOVER_GOLDEN=write)."""
    path = GOLDEN / name
    if os.environ.get("CROSSOVER_GOLDEN") == "write":
        path.write_text(text + "\n")
    assert path.is_file(), f"{path} is missing: CROSSOVER_GOLDEN=write python -m pytest {__file__} writes it"
    assert text + "\n" == path.read_text()
    assert max(map(len, text.splitlines())) <= decide.WIDTH


def test_predicts_first_screen():
    counted = json.loads((GOLDEN / "predict-count.json").read_text())
    step = Step("examples/zoo.py:workload", 30, 128, 50_000, params=(("arch", "mobilenet_v2"),))
    request = decide.Request(30, 50_000, "examples/zoo.py:workload", axes=(("batch_size", "128"),))
    offer = decide.Offer.shipped()
    assert request.batches(128, list(offer.options)) == []  # every GPU takes the counted batch: no other step
    said = screen.first_screen(decide.answer(request, {step: counted}, offer))
    assert len(said) <= screen.SCREEN
    golden("predict.txt", "\n".join(said))


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """The CPU rows of a user's CNN, beside the shipped reference rows, as the end of a sweep reads them."""
    rows = read(user_cpu_rows(tmp_path_factory.mktemp("rows") / "my_cnn"))
    return summary.with_reference(rows)


def test_decides_screen(cnn):
    answer = decide.answer(None, None, decide.Offer.shipped(today=TODAY), cnn)
    said = decide.brief(answer.lines, answer.grid, answer.picks, answer.notes, answer.request,
                        (verdict.reference_line(cnn),), decide.BRIEF_LINES - 1)  # as analysis/__main__.py _decide says it
    golden("decide.txt", said)


def test_the_end_of_a_sweep(cnn):
    said = verdict.reach(select(cnn), decision=True, today=TODAY)
    golden("sweep-end.txt", verdict.render(said, lines=verdict.SHORT))

"""The answer's typed results (analysis/decide/line.py, answer.py): a priced row becomes a Line whose fields hold
its figures as their types say, a column no field holds is refused by name, and a Decision (its configurations,
lines, picks and break-evens) cannot be changed."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from analysis_rows import user_cpu_rows
from crossover.analysis import decide, summary
from crossover.analysis.load import read

ROW = {"option": "one H100", "kind": "on-demand", "model": "H100", "gpus": np.int64(1), "wall_s": np.float64(90.0),
       "wall_lo_s": 80.0, "wall_hi_s": 100.0, "wall_h": 0.025, "wall_lo_h": 80 / 3600, "wall_hi_h": 100 / 3600,
       "usd": 0.05, "usd_lo": 0.04, "usd_hi": 0.06, "predicted": np.bool_(True), "basis": "1 x H100, rented whole",
       "fits": np.nan, "largest_batch": np.nan, "hosts": None, "measured_at": pd.NaT, "price_stale": np.bool_(False)}


def test_a_priced_row_becomes_a_line_of_python_values_its_unknowns_typed():
    line = decide.Line.of(ROW)
    assert (line.gpus, line.wall_s, line.predicted) == (1, 90.0, True)
    assert type(line.gpus) is int and type(line.wall_s) is float and type(line.predicted) is bool
    assert line.fits is None and line.largest_batch is None and line.measured_at is None  # nulls of a yes/no, a count
    assert math.isnan(line.epoch_s) and math.isnan(line.startup_s)  # a float no column gave: NaN
    assert line.price_stale is False and not line.several


def test_a_column_no_field_holds_is_refused_by_its_name():
    with pytest.raises(ValueError, match=r"columns without a field of Line: \['usd_per_sample'\]"):
        decide.Line.of(ROW | {"usd_per_sample": 1e-6})


def test_the_answer_holds_typed_lines_and_cannot_be_changed(tmp_path):
    rows = summary.with_reference(read(user_cpu_rows(tmp_path / "my_cnn")))
    answer = decide.answer(None, None, decide.Offer.shipped(), rows)
    assert [(c.workload, c.trials) for c in answer.grid] == [("my_cnn", 3)] * 3  # three sizes, three seeds each
    assert answer.lines and all(isinstance(o, decide.Line) for o in answer.lines)
    assert [o.usd for o in answer.lines] == sorted(o.usd for o in answer.lines)  # cheapest first
    assert all(isinstance(e, decide.Even) for e in answer.evens)
    fastest = answer.picks["fastest"]
    assert fastest is not None and fastest.wall_s == min(o.wall_s for o in decide.fitting(answer.lines))
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.lines = ()
    with pytest.raises(TypeError):
        answer.picks["fastest"] = None
    # a chart reads them back as a frame, a field a column, a line a row, in their order
    assert decide.frame(answer.lines)["option"].tolist() == [o.option for o in answer.lines]

"""Leave one family out (analysis/families.py): a row's family comes from its model's shape and its counted step.

    python -m pytest -q tests/test_families.py
"""

import pandas as pd

from crossover.analysis import families


def test_a_rows_family_is_read_from_its_models_shape_and_counted_step_never_its_name():
    rows = pd.DataFrame({"model": ["conv 64-64-256; fc 2048-1000", "conv 768; fc 768-3072-768-1000", "fc 768-35",
                                   "fc 768-3072-768-2", "fc 784-512-10"],
                         "rnn_flops_per_step": [0, 0, 3e11, 0, 0], "workload": ["a", "a", "a", "b", "b"]})
    assert families.family(rows).tolist() == ["CNN", "vision transformer", "recurrent", "MLP or transformer",
                                              "MLP or transformer"]

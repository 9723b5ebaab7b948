"""The CSV the reference rows of examples/tabular_csv.py were measured on: 16,000 rows of 32 standard-normal
features and a label of 10 classes (argmax of a random linear map plus noise), seeded, so anyone can make it again.

    python examples/make_csv.py data.csv
    python sweeps/scaling.py --workload examples/tabular_csv.py:workload --param csv=data.csv --param target=label
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd


def write(path: Path, rows: int = 16_000, features: int = 32, classes: int = 10) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, features))
    w = rng.standard_normal((features, classes))
    label = np.argmax(x @ w + 0.5 * rng.standard_normal((rows, classes)), axis=1)
    pd.DataFrame(x, columns=[f"f{i}" for i in range(features)]).assign(label=label).to_csv(path, index=False)


if __name__ == "__main__":
    write(Path(sys.argv[1]))

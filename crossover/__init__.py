"""What a job file imports: `from crossover import Workload, Data, Param, ConfigError, TrialConfig`.

    workload = Workload("mine", make_data=..., make_model=..., make_loss=nn.CrossEntropyLoss,
                        make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr))

The names a workload is written with, and nothing else: the Workload and its own axes (Param,
crossover/workload.py), the data its make_data returns (Data, crossover/data.py), the configuration its
factories read (TrialConfig, crossover/config.py) and the error that refuses a bad one (ConfigError).

The package holds the rest too: crossover.schema (the rows' columns, below every layer), crossover.step (a step
to count: the analysis names it, the command layer counts it), crossover.trainables, crossover.sweeps and
crossover.analysis, which are the folders trainables/, sweeps/ and analysis/ at the top of a checkout
(pyproject.toml's package-dir). Data and Workload hold torch tensors and modules, so they are imported
when first asked for: `import crossover.schema`, or anything of crossover.analysis, imports no torch. An editor or
a type checker reads them from the imports under TYPE_CHECKING below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from crossover.config import ConfigError, TrialConfig

if TYPE_CHECKING:
    from crossover.data import Data
    from crossover.workload import Param, Workload

# name -> the module that defines it, imported on first use (it imports torch)
_LAZY = {"Data": "crossover.data", "Param": "crossover.workload", "Workload": "crossover.workload"}
__all__ = ["ConfigError", "Data", "Param", "TrialConfig", "Workload"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'crossover' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""What a job file imports: `from crossover import Workload, Data, Param, ConfigError, TrialConfig`.

    workload = Workload("mine", make_data=..., make_model=..., make_loss=nn.CrossEntropyLoss,
                        make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr))

The names a workload is written with, and nothing else: the Workload and its own axes (Param,
trainables/workload.py), the data its make_data returns (Data, trainables/data.py), the configuration its
factories read (TrialConfig, trainables/config.py) and the error that refuses a bad one (ConfigError).
A job file that imports them from here does not depend on where they live inside the project.

The package holds the rest too: crossover.schema (the rows' columns, below every layer), crossover.trainables,
crossover.sweeps and crossover.analysis (the folders trainables/, sweeps/ and analysis/ of a checkout;
pyproject.toml's package-dir installs them here). The names above are imported when first asked for, so that
`import crossover.schema` or `crossover.analysis` imports no torch.
"""

import importlib
from pathlib import Path

# name -> the module that defines it
_NAMES = {"ConfigError": "crossover.trainables.config", "TrialConfig": "crossover.trainables.config",
          "Data": "crossover.trainables.data", "Param": "crossover.trainables.workload",
          "Workload": "crossover.trainables.workload"}
__all__ = sorted(_NAMES)

# In a checkout the packages sit beside this folder, not in it: the checkout's root joins the search path of
# crossover's subpackages, so that crossover.sweeps is the sweeps/ beside this file whatever else is installed
# (a checkout on sys.path, as a notebook or a child process puts it, runs its own code; a wheel has them inside).
_HERE = Path(__file__).resolve().parent
if not (_HERE / "trainables").is_dir() and (_HERE.parent / "trainables" / "__init__.py").is_file():
    __path__.append(str(_HERE.parent))


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'crossover' has no attribute {name!r}")
    value = getattr(importlib.import_module(_NAMES[name]), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

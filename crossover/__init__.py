"""What a job file imports: `from crossover import Workload, Data, Param, ConfigError, TrialConfig`.

    workload = Workload("mine", make_data=..., make_model=..., make_loss=nn.CrossEntropyLoss,
                        make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr))

The names a workload is written with, and nothing else: the Workload and its own axes (Param,
trainables/workload.py), the data its make_data returns (Data, trainables/data.py), the configuration its
factories read (TrialConfig, trainables/config.py) and the error that refuses a bad one (ConfigError).
A job file that imports them from here does not depend on where they live inside the project.

The package holds the rest too: crossover.schema (the rows' columns, below every layer), crossover.trainables,
crossover.sweeps and crossover.analysis. In a checkout they are the folders trainables/, sweeps/ and analysis/ at
its top, and this folder holds a relative symlink to each (crossover/sweeps -> ../sweeps), so that the dotted name
is a path: Python, an editor and a type checker all find crossover.sweeps.runner at crossover/sweeps/runner.py,
with nothing computed at import. A wheel holds them as real folders (pyproject.toml's package-dir). The names above
are imported when first asked for, so that `import crossover.schema` or `crossover.analysis` imports no torch.
"""

import importlib

# name -> the module that defines it
_NAMES = {"ConfigError": "crossover.trainables.config", "TrialConfig": "crossover.trainables.config",
          "Data": "crossover.trainables.data", "Param": "crossover.trainables.workload",
          "Workload": "crossover.trainables.workload"}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'crossover' has no attribute {name!r}")
    value = getattr(importlib.import_module(_NAMES[name]), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

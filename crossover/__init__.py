"""What a job file imports: `from crossover import Workload, Data, Param, ConfigError, TrialConfig`.

    workload = Workload("mine", make_data=..., make_model=..., make_loss=nn.CrossEntropyLoss,
                        make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr))

The names a workload is written with, and nothing else: the Workload and its own axes (Param,
trainables/workload.py), the data its make_data returns (Data, trainables/data.py), the configuration its
factories read (TrialConfig, trainables/config.py) and the error that refuses a bad one (ConfigError).
A job file that imports them from here does not depend on where they live inside the project.
"""

from crossover.trainables.config import ConfigError, TrialConfig
from crossover.trainables.data import Data
from crossover.trainables.workload import Param, Workload

__all__ = ["ConfigError", "Data", "Param", "TrialConfig", "Workload"]

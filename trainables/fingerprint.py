"""A workload's fingerprint: 16 hex digits of its module's source and of its model's parameter shapes at its defaults.

    key = of(Path(module.__file__).read_bytes(), shapes(workload))    # trainables/registry.py Registry.fingerprint

It is part of every trial's config hash (crossover/config.py), so that editing a user's model, or its module,
measures again instead of returning the old rows. The model is built on the meta device: no memory, no time.
`of` alone imports no torch: sweeps/count_cache.py keys a job's counted step by it in a process that never does.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from crossover.config import TrialConfig

if TYPE_CHECKING:
    from crossover.workload import Workload


def of(text: bytes, found: str) -> str:
    """16 hex digits of a module's bytes `text` and its model's shapes `found` (`shapes`)."""
    hashed = hashlib.sha256(text)
    hashed.update(found.encode())
    return hashed.hexdigest()[:16]


def shapes(workload: Workload) -> str:
    """The model's parameter shapes at its defaults, built on the meta device, as text (the fingerprint's part):
    where it cannot be built there, what it raised."""
    import torch

    cfg = TrialConfig(workload.name, **{k: v for k, v in workload.defaults.items()},
                      params={n: p.default for n, p in workload.params.items()} or None)
    try:
        with torch.device("meta"):
            model = workload.make_model(cfg)
        return repr([(n, tuple(p.shape)) for n, p in model.named_parameters()])
    except (Exception, SystemExit) as exc:  # a model that needs its data to be built: the source alone identifies
        # it; a sys.exit in the user's factory is its trial's to report (a row), not the planner's to obey
        return repr(f"not built at its defaults: {type(exc).__name__}")

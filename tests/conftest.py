"""Shared fixtures: a real local Ray (three logical CPUs, and a claimed GPU with no CUDA behind it)."""

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """Ray in this process: 3 CPUs (a 2-worker DDP trial needs 2.25), and 1 GPU that exists only in
    Ray's accounting.

    The GPU lets the scheduler place a 'cuda' trial so that the trial itself finds no CUDA, as on a
    misconfigured cluster node; CPU trials never look at it.
    """
    import ray
    from sweeps.runner import WORKER_ENV

    ray.init(num_cpus=3, num_gpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": WORKER_ENV})  # workers at the driver's priority, as sweeps.runner.connect
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local_gpu_ray():
    """Ray in this process with the machine's real CPUs and GPUs (the GPU tests)."""
    import ray
    from sweeps.runner import WORKER_ENV

    ray.init(include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": WORKER_ENV})
    yield ray
    ray.shutdown()

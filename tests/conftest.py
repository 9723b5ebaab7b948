"""Shared fixtures: a real local Ray with two CPUs (and, where asked, a claimed GPU with no CUDA)."""

import pytest


@pytest.fixture(scope="session")
def local_ray():
    """Ray in this process: 2 CPUs, and 1 GPU that exists only in Ray's accounting.

    The GPU lets the scheduler place a 'cuda' trial so that the trial itself finds no CUDA, as on a
    misconfigured cluster node; CPU trials never look at it.
    """
    import ray

    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()

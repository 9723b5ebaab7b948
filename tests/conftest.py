"""Shared fixtures: a real local Ray (at most the machine's CPUs, and a claimed GPU with no CUDA behind it);
and the `slow` tests, left out of `make test` unless --all (what CI runs: .ci/run)."""

import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--all", action="store_true",
                     help="run the tests marked slow too (make test ARGS=--all; CI runs every test)")


def pytest_collection_modifyitems(config, items):
    """Leaves out the tests marked slow, unless --all, a -m expression that chooses for itself, or a
    test named by its id (pytest tests/test_x.py::test_y)."""
    if config.getoption("--all") or config.getoption("markexpr") or any("::" in a for a in config.args):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def pytest_report_header(config):
    if not (config.getoption("--all") or config.getoption("markexpr")):
        return "tests marked slow are left out: make test ARGS=--all (or pytest --all) runs them, as CI does"

@pytest.fixture(autouse=True, scope="session")
def cache_folder(tmp_path_factory):
    """The user's cache folder (analysis/cache.py) in a temporary folder of the session's, for this process and every
    process a test starts: no test reads or writes ~/.cache."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME")
    else:
        os.environ["XDG_CACHE_HOME"] = before


# Never more CPUs than the machine has (a Ray that advertises more hides requests that can never be
# placed: ddp-cpu:2 on 2 cores); 2 where it has more, so the tests ask the same of every host.
CPUS = min(2, os.cpu_count() or 1)


@pytest.fixture(scope="module")
def local_ray():
    """Ray in this process: CPUS CPUs, and 1 GPU that exists only in Ray's accounting.

    The GPU lets the scheduler place a 'cuda' trial so that the trial itself finds no CUDA, as on a
    misconfigured cluster node; CPU trials never look at it.
    """
    import ray
    from crossover.sweeps.cluster import WORKER_ENV, tune_settings

    tune_settings()  # as crossover.sweeps.cluster.connect makes them before it starts Ray
    ray.init(address="local", num_cpus=CPUS, num_gpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": WORKER_ENV})  # workers at the driver's priority, as sweeps/cluster.py connect
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local_gpu_ray():
    """Ray in this process with the machine's real CPUs and GPUs (the GPU tests)."""
    import ray
    from crossover.sweeps.cluster import WORKER_ENV, tune_settings

    tune_settings()  # as crossover.sweeps.cluster.connect makes them before it starts Ray
    ray.init(address="local", include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": WORKER_ENV})
    yield ray
    ray.shutdown()


@pytest.fixture
def planner():
    """A sweep's planner of its users' workloads (sweeps/plan.py), the test's own, as a sweep script's main() makes
    one: its registry and what it ships are its own."""
    from crossover.sweeps.plan import Planner

    return Planner()

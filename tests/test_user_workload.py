"""A user's own workload (crossover/workload.py), end to end: written to a file, registered, shipped to
Ray's workers by runtime_env and swept there; its code's fingerprint in every trial's hash; any model
shape accounted; bad references refused by name before anything runs; its failures rows, not crashes.

    python -m pytest tests/test_user_workload.py

Every workload here is a real file in a temporary folder, imported as a user's would be, by the registry of this
module's planner (`jobs`); imported modules are the process's (sys.modules), so their names are this module's own
(uw_*). Ray is started here, after they are registered, with crossover.sweeps.cluster.runtime_env(planner's
shipping): conftest's local_ray starts it without them.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import ray
import torch

from crossover.sweeps import runner, search
from crossover.sweeps.cluster import runtime_env
from crossover.sweeps.budget import MAX_SHARE
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space, groups
from crossover.trainables.fused import member_bytes
from crossover.trainables.train import run_trial
from crossover.trainables.trial import here
from crossover.trainables.registry import Registry, fingerprint
from crossover.config import WorkloadError
from crossover.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
CPUS = min(2, os.cpu_count() or 1)  # as conftest's local_ray: never more than the machine has
TINY = {"min_timed_s": 0}  # two epochs, one of them timed: the rows, not the timings, are checked here

HEADER = """
import os, sys, time
import torch
from torch import nn
from crossover import Data, Param, Workload


def features(cfg, n_features=4):
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, n_features, generator=g)
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")

def adam(params, lr):
    return torch.optim.Adam(params, lr=lr)

SMALL = {"batch_size": 16, "dataset_size": 64, "epochs": 2}
"""

# The workload a user writes: an MLP with a width axis and an own axis, n_features.
JOB = HEADER + """
WIDTH = {width}

def mlp(cfg):
    return nn.Sequential(nn.Linear(cfg.params["n_features"], cfg.width), nn.ReLU(), nn.Linear(cfg.width, 2))

workload = Workload("uw_mlp", make_data=lambda cfg: features(cfg, cfg.params["n_features"]), make_model=mlp,
                    make_loss=nn.CrossEntropyLoss, make_optimizer=adam, defaults={**SMALL, "width": WIDTH},
                    axes={"width"}, params={"n_features": Param(4, low=1, high=64, help="inputs per sample")})
not_a_workload = 42
"""


def job_text(width: int) -> str:
    return JOB.replace("{width}", str(width))


# Models of shapes the built-ins do not have: no nn.Linear at all, BatchNorm and a residual, two inputs.
MODELS = HEADER + """
def images(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, 1, 8, 8, generator=g)
    return Data(x, (x.mean((1, 2, 3)) > 0).long(), None, None, source="random")

def conv_only(cfg):
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3, padding=1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten())

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))

def residual(cfg):
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), Block(4), Block(4),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))

class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.out = nn.Linear(3, 8), nn.Linear(5, 8), nn.Linear(8, 2)

    def forward(self, a, b):
        return self.out(torch.relu(self.a(a) + self.b(b)))

def pairs(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    a, b = torch.randn(cfg.dataset_size, 3, generator=g), torch.randn(cfg.dataset_size, 5, generator=g)
    return Data({"a": a, "b": b}, (a.sum(1) > b.sum(1)).long(), None, None, source="random")

def pair_step(model, x, y, loss):
    out = model(x["a"], x["b"])
    return loss(out, y), out

common = dict(make_loss=nn.CrossEntropyLoss, make_optimizer=adam, defaults=SMALL)
conv = Workload("uw_conv", make_data=images, make_model=conv_only, **common)
resnet = Workload("uw_resnet", make_data=images, make_model=residual, **common)
pair = Workload("uw_pair", make_data=pairs, make_model=lambda cfg: Pair(), step=pair_step, **common)
"""

# Each fails in its own way on the worker. The sweep's planning builds every model on the meta device, in a
# process of its own (sweeps/plan.py: tests/test_plan.py has its faults): the one that ends its process does so
# only where the model is built for real, so that the worker's trial is what fails; likewise the hang is in the
# optimiser's factory, which the worker alone runs.
FAILING = HEADER + """
def real(model):
    return next(model.parameters()).device.type != "meta"

def raises(cfg):
    raise RuntimeError("the user's factory broke")

class Wide(nn.Module):  # three outputs per sample for a loss that takes two classes' targets of another shape
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6)

    def forward(self, x):
        return self.fc(x).view(-1, 2, 3)

class Inf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x) * float("inf")

def exits(cfg):  # in the planning process too: SystemExit there is a model not built, and the worker's trial the row
    sys.exit(3)

def dies(cfg):
    model = nn.Linear(4, 2)
    if real(model):
        os._exit(1)
    return model

def hang(params, lr):  # the optimiser's factory runs on the worker alone
    while True:
        time.sleep(0.01)

def job(name, make_model, **kw):
    return Workload(name, make_data=features, make_model=make_model, make_loss=nn.CrossEntropyLoss,
                    **{"make_optimizer": adam, "defaults": SMALL, **kw})

raising = job("uw_raises", raises)
mismatch = job("uw_mismatch", lambda cfg: Wide())
nan = job("uw_nan", lambda cfg: Inf())
exiting = job("uw_exits", exits)
dying = job("uw_dies", dies)
hanging = job("uw_hangs", lambda cfg: nn.Linear(4, 2), make_optimizer=hang)
"""


FAILURES = ("raising", "mismatch", "nan", "exiting", "dying", "hanging")  # FAILING's workloads


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """The user's files, written and registered (imported here, shipped to Ray's workers from now on)."""
    folder = tmp_path_factory.mktemp("user")
    files = {"uw_job": job_text(8), "uw_edited": job_text(8), "uw_models": MODELS, "uw_failing": FAILING,
             "uw_broken": "def workload(:\n"}
    for stem, text in files.items():
        (folder / f"{stem}.py").write_text(text)
    refs = {stem: f"{folder / stem}.py" for stem in files}
    # the module's planner, as a sweep script's main() makes one: its tests plan the same files, and its registry's
    # shipping is what Ray is started with (`start_ray`)
    planner = Planner()
    register = planner.registry.register
    yield SimpleNamespace(folder=folder, **refs, planner=planner, job=register(f"{refs['uw_job']}:workload"),
                          edited=register(f"{refs['uw_edited']}:workload"),
                          models=[register(f"{refs['uw_models']}:{a}") for a in ("conv", "resnet", "pair")],
                          failing=[register(f"{refs['uw_failing']}:{a}") for a in FAILURES])
    ray.shutdown()


def start_ray(planner: Planner) -> None:
    """Ray in this process, with every module `planner`'s registry declared so far shipped to its workers."""
    ray.shutdown()
    ray.init(address="local", num_cpus=CPUS, include_dashboard=False, log_to_driver=False,
             runtime_env=runtime_env(planner.registry.shipping))


@pytest.fixture
def user_ray(jobs):
    """A local Ray started after the user's modules were registered (kept for the module's next test)."""
    if not ray.is_initialized():
        start_ray(jobs.planner)
    return jobs


def sweep(space: Space, out: Path, **kw) -> pd.DataFrame:
    runner.run(space, out, log=lambda line: None, **kw)
    return pd.read_parquet(out / space.name)


def params_of(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def swept(jobs, tmp_path_factory) -> pd.DataFrame:
    """One sweep on a local Ray: the user's workload at two values of its own axis, beside every failing one;
    each trial allowed 30 s (a hang's limit, which a loaded machine's good trial stays well within), a lost worker not
    retried (its trial gets one more pass, then its row)."""
    if not ray.is_initialized():
        start_ray(jobs.planner)
    grids = {f"{jobs.uw_job}:workload": {"n_features": [4, 6]}, **{wl: {} for wl in jobs.failing}}
    return sweep(Space("user", grids, fixed=TINY, timeout_s=30, planner=jobs.planner), tmp_path_factory.mktemp("swept"),
                 max_failures=0)


# --- a user's workload, swept --------------------------------------------------------------------

@pytest.mark.slow
def test_a_workload_in_a_file_is_swept_through_ray_and_its_rows_name_its_module_and_code(jobs, swept):
    rows = swept[swept["workload"] == "uw_mlp"]
    assert len(rows) == 2 and (rows["status"] == "ok").all(), rows["error"].tolist()
    assert set(rows["workload_module"]) == {"uw_job:workload"}
    assert set(rows["workload_fingerprint"]) == {fingerprint(jobs.job)}
    features = rows["workload_params"].map(lambda text: json.loads(text)["n_features"])
    assert sorted(features) == [4, 6]
    # Linear(n, 8) + Linear(8, 2): (n + 1) 8 + 8 2 + 2
    assert list(rows["n_params"]) == [(n + 1) * 8 + 18 for n in features]
    assert len(swept) == 2 + len(FAILURES) and swept["config_hash"].is_unique


@pytest.mark.slow
def test_editing_the_file_changes_its_fingerprint_and_the_resumed_sweep_measures_it_again(user_ray, tmp_path):
    path = Path(user_ray.uw_edited)
    space = Space("edited", {f"{path}:workload": {}}, fixed=TINY, planner=user_ray.planner)
    first = sweep(space, tmp_path)
    old, before = space.expand()[0], fingerprint(user_ray.edited)

    path.write_text(job_text(9))  # the user widens the model, in the same Python session
    after = fingerprint(user_ray.planner.registry.register(f"{path}:workload"))
    new = space.expand()[0]
    assert after != before and new.cfg.fingerprint == after and new.hash != old.hash

    with pytest.raises(ValueError, match=f"module {path} changed since Ray was started"):  # its workers: the old file
        runner.run(space, tmp_path, log=lambda line: None)
    start_ray(user_ray.planner)
    rows = sweep(space, tmp_path).set_index("workload_fingerprint")
    assert len(first) == 1 and len(rows) == 2 and (rows["status"] == "ok").all(), rows["error"].tolist()
    assert rows.loc[before, "n_params"] == 7 * 8 + 2  # the first row kept, not measured again
    assert rows.loc[before, "trial_id"] == first["trial_id"].iloc[0]
    assert rows.loc[after, "n_params"] == 7 * 9 + 2


# --- any model, accounted ------------------------------------------------------------------------

@pytest.mark.parametrize("index", [0, 1, 2], ids=["conv-only", "residual-batchnorm", "dict-batch"])
def test_a_conv_only_a_residual_and_a_two_input_model_train_and_are_accounted(jobs, index):
    wl = jobs.models[index]
    planned = Space("shapes", {wl: {}}, fixed=TINY, planner=jobs.planner).expand()[0]
    # as the driver groups it, from its spec and planned size
    assert groups([planned], "auto", planner=jobs.planner) == [[planned]]
    trial = here(planned)  # its Workload itself, in this process, to run it here
    model = wl.make_model(trial.cfg)
    assert index != 0 or not any(isinstance(m, torch.nn.Linear) for m in model.modules())  # conv-only: none at all
    row = run_trial(trial)
    assert row["status"] == "ok" and "costs_note" not in row, row.get("costs_note")
    assert row["flops_per_step"] > 0 and row["bytes_per_step"] > 0
    assert row["n_params"] == params_of(model)
    assert member_bytes(trial) > 16 * row["n_params"]  # its weights, gradients, moments, and its data and activations


# --- bad references and axes, refused before anything runs ----------------------------------------

def refused(grids, **kw) -> str:
    with pytest.raises(ValueError) as info:
        Space("bad", grids, fixed=TINY, planner=Planner(), **kw).expand()
    return str(info.value)


def test_a_module_that_does_not_import_is_refused_naming_its_file_and_error(jobs):
    message = refused({f"{jobs.uw_broken}:workload": {}})
    assert f"{jobs.uw_broken} does not import: SyntaxError" in message and "uw_broken" not in sys.modules


def test_a_missing_attribute_or_one_that_is_no_workload_is_refused_naming_module_and_attribute(jobs):
    missing = refused({f"{jobs.uw_job}:nope": {}})
    assert "module 'uw_job' has no attribute 'nope'; its Workloads: ['workload']" in missing
    other = refused({f"{jobs.uw_job}:not_a_workload": {}})
    assert "uw_job.not_a_workload is a int, not a crossover.Workload" in other


def test_an_axis_the_workload_does_not_declare_is_refused_in_a_grid_and_as_a_param(jobs):
    ref = f"{jobs.uw_job}:workload"
    assert "got 'colour' (sweep 'bad', workload 'uw_mlp')" in refused({ref: {"colour": [1]}})
    assert "depth is not an axis of workload 'uw_mlp'" in refused({ref: {"depth": [3]}})
    assert "--param colour is an axis of none of the workloads ['uw_mlp']" in refused({ref: {}}, params={"colour": 1})
    assert "n_features (an axis of workload 'uw_mlp') must be in [1, 64], got 0" in refused({ref: {}},
                                                                                             params={"n_features": 0})


def test_a_value_held_by_param_wins_over_the_grids_values_of_that_axis(jobs):
    trials = Space("held", {f"{jobs.uw_job}:workload": {"n_features": [4, 6]}}, params={"n_features": 5},
                   planner=jobs.planner).expand()
    assert [t.cfg.params for t in trials] == [{"n_features": 5}]


def test_the_sweep_script_refuses_a_bad_reference_with_one_line_and_no_traceback(jobs, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workload", f"{jobs.uw_job}:nope",
                           "--devices", "cpu", "--out", str(tmp_path), "--no-report"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [f"error: workload '{jobs.uw_job}:nope': module 'uw_job' has no "
                                                "attribute 'nope'; its Workloads: ['workload']"]
    assert not list(tmp_path.iterdir())  # nothing ran, nothing was written


def test_a_name_that_would_be_a_path_or_markup_is_refused(jobs, tmp_path):
    for name in ("../evil", "a/b", "<b>x</b>", "", ".hidden"):
        with pytest.raises(ValueError, match="Workload name must be letters, digits"):
            Workload(name, make_data=len, make_model=len, make_loss=len, make_optimizer=len)
    odd = tmp_path / "my job.py"
    shutil.copy(jobs.uw_job, odd)
    with pytest.raises(WorkloadError, match="is no Python module name; rename it"):
        jobs.planner.registry.register(f"{odd}:workload")


# --- failures on the worker: rows, and the sweep goes on ------------------------------------------

@pytest.mark.parametrize("name, words", [
    ("uw_raises", "RuntimeError: the user's factory broke"),
    ("uw_mismatch", "RuntimeError: Expected target size [16, 3], got [16]"),
    ("uw_nan", "FloatingPointError: training loss was nan at step 1 of epoch 1"),
    ("uw_exits", "SystemExit: 3"),
    ("uw_dies", "WorkerExit: the workload's code called os._exit(1), which would end its Ray worker"),
    ("uw_hangs", "the trial ran past its limit of 30 s (--trial-timeout) and was stopped"),
])
@pytest.mark.slow
def test_a_failing_user_workload_becomes_an_error_row_and_the_good_one_is_measured(swept, name, words):
    row = swept.set_index("workload").loc[name]
    assert row["status"] == "error" and words in row["error"], row["error"]
    assert row["workload_module"].startswith("uw_failing:")
    good = swept[swept["workload"] == "uw_mlp"]
    assert len(good) == 2 and (good["status"] == "ok").all(), good["error"].tolist()


# --- a cluster: the module reaches the worker node through runtime_env alone ----------------------

@pytest.mark.slow
def test_on_a_two_node_cluster_the_worker_node_runs_the_module_it_got_only_through_runtime_env(jobs, tmp_path):
    from ray.cluster_utils import Cluster

    ray.shutdown()  # this process's local Ray: never more CPUs in all than the machine has
    path = jobs.folder / "uw_remote.py"
    path.write_text(job_text(8).replace('"uw_mlp"', '"uw_remote"'))
    # the Workload object, registered: the space never reads the file again (a path as key would, at expand)
    space = Space("remote", {jobs.planner.registry.register(f"{path}:workload"): {"width": [4, 8]}}, fixed=TINY, planner=jobs.planner)
    space.expand()  # its fingerprint taken before Ray starts, as a sweep script checks its space first
    short = tempfile.mkdtemp(prefix="xo-", dir="/tmp")  # Ray's socket paths must stay short
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_TMPDIR", short)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        worker = cluster.add_node(num_cpus=CPUS)
        cluster.wait_for_nodes()
        moved = path.with_suffix(".away")
        try:
            ray.init(address=cluster.address, log_to_driver=False, runtime_env=runtime_env(jobs.planner.registry.shipping))
            path.rename(moved)  # uploaded at init: from now on the workers can have it from Ray alone
            rows = sweep(space, tmp_path)
        finally:
            if moved.exists():
                moved.rename(path)
            ray.shutdown()
            for node in list(cluster.worker_nodes):
                cluster.remove_node(node)
            cluster.remove_node(cluster.head_node)
    shutil.rmtree(short, ignore_errors=True)
    assert len(rows) == 2 and (rows["status"] == "ok").all(), rows["error"].tolist()
    assert set(rows["node_id"]) == {worker.node_id}
    assert set(rows["workload_module"]) == {"uw_remote:workload"}


# --- a slow model within the search's budget -------------------------------------------

# A model whose every forward pass sleeps `slow` s where the dataset holds `from_size` samples or more: its
# step is as slow on any host, so what the search does with it depends on the budget alone.
SLOW = HEADER + """
class Slow(nn.Module):
    def __init__(self, sleep_s):
        super().__init__()
        self.fc, self.sleep_s = nn.Linear(4, 2), sleep_s

    def forward(self, x):
        time.sleep(self.sleep_s)
        return self.fc(x)

def model(cfg):
    return Slow({slow} if cfg.dataset_size >= {from_size} else 0)

workload = Workload("{name}", make_data=features, make_model=model, make_loss=nn.CrossEntropyLoss, make_optimizer=adam,
                    defaults={"batch_size": 16, "dataset_size": 32, "epochs": {epochs}},
                    grids={"default": {"dataset_size": {sizes}, "epochs": [{epochs}]}})
"""


def slow_job(folder: Path, name: str, slow: float, sizes: list, epochs: int = 2, from_size: int = 0) -> str:
    """A job file of SLOW's model in `folder`, named `name` (its module too), and its reference."""
    text = SLOW
    for key, value in {"name": name, "slow": slow, "sizes": sizes, "epochs": epochs, "from_size": from_size}.items():
        text = text.replace("{" + key + "}", str(value))
    (folder / f"{name}.py").write_text(text)
    return f"{folder / name}.py:workload"


def stopped_clock() -> float:
    """A search's clock that the host's speed does not move: planning, probing and trials spend none of the
    budget, so what the search runs, skips and cuts follows from its predictions and rules alone. A trial is
    still stopped at its limit in real seconds (trainables/trainable.py Deadline)."""
    return 0.0


def test_a_users_workload_sweeps_into_a_folder_of_its_own_by_default(jobs):
    from crossover.sweeps import scaling

    def name(*flags):
        args = scaling.parse_args(["--workload", f"{jobs.uw_job}:workload", *flags])
        return scaling.build_space(args, jobs.planner, ("cpu",), 1, False).name

    assert name() == name("--grid", "full") == "uw_mlp"  # the workload's own name, not the built-ins' 'scaling'
    assert name("--smoke") == "uw_mlp-smoke"
    assert name("--name", "mine") == "mine"
    assert name("--workloads", "disc") == "scaling"  # beside the built-ins: their folder, as before


@pytest.mark.slow
def test_a_model_too_slow_for_a_trials_share_of_the_budget_still_lands_a_cpu_row_in_its_own_folder(tmp_path):
    # 2 s a forward pass: a trial at 32 samples (2 batches, 1 warm-up and 3 timed epochs, and a step counted)
    # takes about 22 s, past 15% of a 120 s budget (18 s); when a line's first trial was held to that share too,
    # every trial was cut there: no row. The budget leaves the trial room after the planning child and the
    # probe's steps (18-20 s on an idle 2-core VM, twice that beside a CPU burner: at a 50 s budget and 0.8 s
    # a pass, a loaded host skipped the trial as past what was left, a test of the host's speed)
    ref = slow_job(tmp_path, "uw_slow", 2.0, [32, 64])
    done = subprocess.run([sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workload", ref, "--devices", "cpu",
                           "--budget", "120", "--out", str(tmp_path / "out"), "--no-report"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("_")) == ["uw_slow"]
    rows = pd.read_parquet(tmp_path / "out" / "uw_slow")
    ok = rows[(rows["status"] == "ok") & (rows["device"] == "cpu")]
    assert len(ok) >= 1 and 32 in set(ok["dataset_size"]), rows[["dataset_size", "status", "error"]].to_string()
    assert f"rows in {tmp_path / 'out' / 'uw_slow'}" in done.stdout  # the end of the sweep reads its folder alone


@pytest.mark.slow
def test_a_model_no_trial_of_which_fits_the_budget_is_told_the_budget_it_needs_before_any_trial_runs(jobs, tmp_path):
    # 20 epochs of 0.8 s steps: 16 s a trial of sleep alone, past all a 10 s budget can leave, on a host of any
    # speed (the stopped clock: what planning and probing took is not what decides it). Nothing reaches Ray: the
    # probe times the model in a process of its own, and every trial is skipped
    ref = slow_job(tmp_path, "uw_toolong", 0.8, [16, 32], epochs=20)
    said = []
    space = Space("toolong", {ref: jobs.planner.registry.register(ref).grid("default")}, ("cpu",), cpu_threads=1, planner=jobs.planner)
    found = search.search(space, tmp_path, budget_s=10, log=said.append, clock=stopped_clock)
    need = [text for text in said if text.startswith("uw_toolong: a trial at dataset_size=16 is predicted to take ")]
    assert len(need) == 1 and need[0].endswith(" or more"), said
    budget = int(need[0].rsplit("give --budget ", 1)[1].split()[0].replace(",", ""))
    assert budget * MAX_SHARE >= 20 * 0.8  # its share holds the sleeps at least
    assert said.index(need[0]) < min(i for i, text in enumerate(said) if text.startswith("skipped "))
    rows = pd.read_parquet(tmp_path / "toolong")
    assert found.trials == 0 and rows["error"].str.startswith("skipped: predicted").all()


@pytest.mark.slow
def test_a_trial_past_its_share_of_the_budget_is_cut_its_size_frozen_and_the_search_goes_on(jobs, tmp_path):
    # fast at 32 samples, 2 s a forward pass from 64: the first size's rows predict 64 far below its time,
    # and its trials (16 slow steps or more) run past 15% of a 120 s budget (18 s, real seconds), where they
    # are stopped. The stopped clock: planning, probing and the first size's trials spend none of the budget,
    # so the second size is reached on a host of any speed (on the wall clock, a host with a CPU burner beside
    # it had spent a 40 s budget before it)
    ref = slow_job(tmp_path, "uw_jump", 2.0, [32, 64], from_size=64)
    space = Space("jump", {ref: jobs.planner.registry.register(ref).grid("default")}, ("cpu",), cpu_threads=CPUS, planner=jobs.planner)
    start_ray(jobs.planner)  # its module shipped to the workers
    said = []
    found = search.search(space, tmp_path, budget_s=120, log=said.append, clock=stopped_clock)
    rows = pd.read_parquet(tmp_path / "jump")
    small, large = rows[rows["dataset_size"] == 32], rows[rows["dataset_size"] == 64]
    # the first size's first row stands (its later runs may be skipped or cut on a busy host)
    assert small.loc[small["seed"] == 0, "status"].tolist() == ["ok"], small[["seed", "status", "error"]]
    assert (large["status"] == "error").all() and rows["config_hash"].is_unique  # none asked again once cut
    assert large["error"].str.startswith(
        "TrialTimeout: the trial ran past its limit of 18 s (cut for the budget: 15% of --budget 120 s)").any()
    assert 64 in {size for _, size in found.cut}  # frozen, and the search went on to its end
    summary = [line for line in said if line.startswith("search: ")]  # and its summary says so
    assert summary and "cut at 18 s a trial" in summary[-1]


PROBED = """
import os, time
import torch
from torch import nn
from crossover.data import Data
from crossover.workload import Workload

def features(cfg):
    x = torch.randn(cfg.dataset_size, 4, generator=torch.Generator().manual_seed(cfg.seed))
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")

def model(cfg):
    with open({marker!r}, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    time.sleep({hang})
    return nn.Linear(4, 2)

workload = Workload("{name}", make_data=features, make_model=model, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
                    defaults={{"batch_size": 8, "dataset_size": 64, "epochs": 2}})
"""


@pytest.mark.parametrize("hang", [0, 60])
def test_the_probe_runs_the_users_code_in_a_process_of_its_own_within_its_time_limit(tmp_path, monkeypatch, hang):
    from crossover.sweeps.probe import PROBE_TIMEOUT_S, probe
    from crossover.config import TrialConfig
    from crossover.trainables.trial import resolve

    registry = Registry()  # the test's: what the probe's child imports from
    name, marker = f"uw_probed_{hang}", tmp_path / "pids"
    (tmp_path / f"{name}.py").write_text(PROBED.format(marker=str(marker), hang=hang, name=name))
    wl = registry.register(f"{tmp_path / name}.py:workload")
    assert not marker.exists()  # registering and resolving run none of the model's code
    trial = resolve(TrialConfig(wl.name, module=wl.ref, min_timed_s=0))
    # the hang stopped at 20 s of its own code (the child's start-up not counted); the rest given the default's room
    found = probe(trial, timeout_s=20 if hang else PROBE_TIMEOUT_S, shipping=registry.shipping)
    pids = {int(p) for p in marker.read_text().split()}
    assert pids and os.getpid() not in pids  # the model was made, and never in this process
    if hang:
        assert found is None  # stopped at its limit: the trial then runs unpredicted
    else:
        assert found is not None and found.step_s > 0

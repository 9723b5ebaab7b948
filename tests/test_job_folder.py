"""A job of several files: a job.py that imports modules and a package beside it, as `python job.py` would, planned,
swept on a two-node Ray, and decided on from any folder.

    python -m pytest tests/test_job_folder.py           # the slow one (the cluster's sweep) with --all

Every job here is real files in a temporary folder: job.py, mymodels.py, mydata.py and a package mypkg/ beside
them. Each test writes its own, under a module name of its own (jf_*), since a process imports one module of a name.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from crossover.sweeps.counting import child_env  # this checkout first on a child's path, from any folder
from crossover.sweeps.plan import PlanError
from crossover.trainables import shipping
from crossover.config import WorkloadError

ROOT = Path(__file__).resolve().parent.parent

# the job: its model, data and optimiser each from a module or package of its own, beside it
JOB = """
from torch import nn
from crossover import Workload
from {prefix}models import net
from {prefix}data import data
from {prefix}pkg.optim import sgd

workload = Workload("{prefix}split", make_data=data, make_model=net, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=sgd, defaults={{"batch_size": 16, "dataset_size": 64, "epochs": 2, "width": 8}},
                    axes={{"width"}})
"""
MODELS = """
from torch import nn
from {prefix}pkg.layers import block


def net(cfg):
    return nn.Sequential(block(4, cfg.width), nn.Linear(cfg.width, 2))
"""
DATA = """
import torch
from crossover import Data

def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, 4, generator=g)
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")
"""
LAYERS = """
from torch import nn

def block(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, n_out), nn.ReLU())
"""
OPTIM = """
import torch

def sgd(params, lr):
    return torch.optim.SGD(params, lr=lr)
"""


def split_job(folder: Path, prefix: str) -> Path:
    """The job of several files in `folder`, its modules named `prefix`*: the job file's path."""
    package = folder / f"{prefix}pkg"
    package.mkdir(parents=True)
    for path, text in ((folder / f"{prefix}job.py", JOB), (folder / f"{prefix}models.py", MODELS),
                       (folder / f"{prefix}data.py", DATA), (package / "__init__.py", ""),
                       (package / "layers.py", LAYERS), (package / "optim.py", OPTIM)):
        path.write_text(text.format(prefix=prefix))
    return folder / f"{prefix}job.py"


# --- planned: its folder's modules import, its folder's code is its fingerprint -----------------------------

def test_a_job_of_several_files_plans_and_editing_a_module_beside_it_plans_it_again(tmp_path, planner):
    job = split_job(tmp_path / "proj", "jf_plan")
    first = planner.spec(f"{job}:workload")
    assert first.name == "jf_plansplit" and first.ref == "jf_planjob:workload"
    # its whole folder reaches the workers, and nothing else: the planner's shipping is the sweep's own
    assert planner.registry.shipping.shipped() == [str(job.parent)]
    models = job.parent / "jf_planmodels.py"
    models.write_text(models.read_text().replace("cfg.width, 2", "cfg.width, 3"))  # the model edited, not the job
    assert planner.spec(f"{job}:workload").fingerprint != first.fingerprint


def test_a_module_beside_the_job_that_does_not_import_is_said_by_its_exception_and_line(tmp_path, planner):
    job = split_job(tmp_path / "proj", "jf_bad")
    (job.parent / "jf_badmodels.py").write_text("from torch import nn\nimport jf_nowhere\n")
    with pytest.raises(PlanError) as info:
        planner.spec(f"{job}:workload")
    said = str(info.value)
    assert said == (f"--workload '{job}:workload': {job} does not import: ModuleNotFoundError: No module named "
                    f"'jf_nowhere' ({job.parent / 'jf_badmodels.py'}:2)")


def test_a_folder_past_the_limit_is_refused_in_one_line_and_what_rayignore_names_is_not_shipped(tmp_path,
                                                                                                 monkeypatch):
    job = split_job(tmp_path / "proj", "jf_big")
    (job.parent / "weights.bin").write_bytes(bytes(3 * 2**20))
    monkeypatch.setattr(shipping, "SHIP_MAX_BYTES", 2**20)
    with pytest.raises(WorkloadError) as info:
        shipping.Shipping().declare(f"{job}:workload")
    said = str(info.value)
    assert "\n" not in said and f"the job's folder {job.parent} holds 3 MiB or more" in said
    assert "past crossover's limit of 1 MiB" in said and ".rayignore" in said
    (job.parent / ".rayignore").write_text("*.bin\n")  # left out, as Ray leaves it out
    assert shipping.Shipping().declare(f"{job}:workload")[2] == job
    assert job.parent / "weights.bin" not in shipping.files(job.parent)
    assert job.parent / "jf_bigpkg" / "optim.py" in shipping.files(job.parent)


def test_a_folder_holding_rays_own_session_folder_is_refused_before_ray_copies_it_into_itself(tmp_path, monkeypatch):
    # TMPDIR inside the job's folder: Ray's sessions (and its copies of the shipped folder) would land in what it ships
    job = split_job(tmp_path / "proj", "jf_tmp")
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(job.parent / "tmp"))
    with pytest.raises(WorkloadError) as info:
        shipping.Shipping().declare(f"{job}:workload")
    said = str(info.value)
    assert "\n" not in said and f"the job's folder {job.parent} holds Ray's session folder {job.parent / 'tmp' / 'ray'}" \
        in said and "set TMPDIR (or RAY_TMPDIR) to a folder outside it" in said
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "elsewhere"))  # Ray's own variable wins, as in Ray
    assert shipping.Shipping().declare(f"{job}:workload")[2] == job


# --- swept on a two-node Ray -----------------------------------------------------------------------------

@pytest.mark.slow
def test_a_job_of_several_files_sweeps_on_a_two_node_cluster(tmp_path):
    from ray.cluster_utils import Cluster
    from test_cluster import need_two_cores, short_tmp

    need_two_cores()
    job = split_job(tmp_path / "proj", "jf_swept")
    ray_tmp = short_tmp()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_TMPDIR", ray_tmp)
        env.setenv("PYTHONPATH", child_env()["PYTHONPATH"])  # the nodes' workers run this checkout's crossover
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        nodes = {cluster.add_node(num_cpus=1).node_id for _ in range(2)}
        cluster.wait_for_nodes()
        try:
            # from another folder than the job's: its folder reaches the nodes through runtime_env alone
            done = subprocess.run([sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--address", cluster.address,
                                   "--workload", f"{job}:workload", "--devices", "cpu", "--smoke", "--out",
                                   str(tmp_path / "out"), "--no-report"], cwd=tmp_path, capture_output=True, text=True,
                                  timeout=400, env=child_env() | {"RAY_TMPDIR": ray_tmp})
        finally:
            for node in list(cluster.worker_nodes):
                cluster.remove_node(node)
            cluster.remove_node(cluster.head_node)
    shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = pd.read_parquet(tmp_path / "out" / "jf_sweptsplit-smoke")
    assert len(rows) >= 1 and (rows["status"] == "ok").all(), rows["error"].tolist()
    assert set(rows["node_id"]) <= nodes
    assert set(rows["workload_module"]) == {"jf_sweptjob:workload"} and set(rows["workload_path"]) == {str(job)}
    assert (rows["n_params"] == (4 + 1) * 8 + (8 + 1) * 2).all()


# --- decided from any folder -----------------------------------------------------------------------------

def decided(rows: pd.DataFrame, plan, where: Path, monkeypatch):
    """decide's records of the planned run on the rows, run from the folder `where`, its steps counted as `crossover
    decide` counts them; and its notes."""
    from crossover.analysis import decide, prices
    from crossover.sweeps.command import counted

    monkeypatch.chdir(where)
    options, billing = prices.load_prices()
    counts = counted(decide.steps(rows, plan))
    answer = decide.decide(rows, None, options, billing, [], plan=plan, counts=counts)
    return decide.records(answer.lines, answer.grid, plan), answer.notes


def test_decide_gives_one_answer_from_the_jobs_folder_and_from_any_other_and_says_where_the_job_is_not_found(
        tmp_path, monkeypatch):
    from analysis_rows import frame, row

    from crossover.analysis import decide
    from crossover.analysis.decide.speeds import NOT_COUNTED

    job = split_job(tmp_path / "proj", "jf_decided")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # a CPU row as a sweep of the job writes it: its module by name, its file by path; the row's own count is
    # none of predict's (an optimiser launch per tensor and more), so a count from the job shows in the figures
    counts = {f"{kind}_{what}_per_step": 0 for kind in ("conv", "rnn", "norm") for what in ("flops", "bytes",
                                                                                         "launches")}
    counts |= {"matmul_flops_per_step": 3e4, "matmul_bytes_per_step": 2e4, "matmul_launches_per_step": 6,
               "elementwise_flops_per_step": 2e3, "elementwise_bytes_per_step": 2e4, "elementwise_launches_per_step": 20,
               "optimizer_flops_per_step": 200, "optimizer_bytes_per_step": 2e3, "optimizer_launches_per_step": 99,
               "forward_ops_per_step": 10, "flops_per_step": 3.2e4, "bytes_per_step": 4.2e4, "launches_per_step": 125}
    rows = frame([row("jf_decidedsplit", "cpu", [0.01, 0.011, 0.012], batch_size=16, dataset_size=64, width=8,
                      depth=None, steps_per_epoch=4, n_params=58, workload_module="jf_decidedjob:workload",
                      workload_path=str(job), **counts)])
    plan = decide.Request(30, 50_000)
    here, notes_here = decided(rows, plan, job.parent, monkeypatch)
    there, notes_there = decided(rows, plan, elsewhere, monkeypatch)
    assert not any(NOT_COUNTED in n for n in notes_here + notes_there), notes_here + notes_there
    figures = ("option", "epoch_s", "epoch_s_low", "epoch_s_high", "run_s", "usd", "needs_gb", "basis")
    assert [[r.get(f) for f in figures] for r in here] == [[r.get(f) for f in figures] for r in there]
    assert any(r["gpu"] and r["basis"] == "predicted" for r in here)

    # the job gone from where the rows name it: one note says so and what the figures fall back to
    job.parent.rename(tmp_path / "moved")
    gone, notes = decided(rows, plan, elsewhere, monkeypatch)
    said = [n for n in notes if NOT_COUNTED in n]
    assert len(said) == 1 and "\n" not in said[0]
    assert f"the job file {job} named by the rows (workload_path) was not found from here" in said[0]
    assert "figures fall back to the step a row counted, GPU memory estimated from n_params and bytes_per_step" \
        in said[0] and "--workload path/to/job.py:workload" in said[0]
    # and --workload names it where it is now: the answer from the job again
    moved = decide.Request(30, 50_000, workload=f"{tmp_path / 'moved' / job.name}:workload")
    again, notes = decided(rows, moved, elsewhere, monkeypatch)
    assert not any(NOT_COUNTED in n for n in notes), notes
    assert [[r.get(f) for f in figures] for r in again] == [[r.get(f) for f in figures] for r in here]

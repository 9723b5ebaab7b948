"""Sweeps on a real multi-node Ray on this one machine, as on `ray up cluster.yaml`.

    python -m pytest tests/test_cluster.py

`ray.cluster_utils.Cluster` runs a head (no CPUs, as cluster.yaml's) and worker raylets that carry
cluster.yaml's node markers: CPU nodes `cpu_node`, GPU nodes `gpu_node` and a GPU that exists only
in Ray's accounting, so GPU trials are placed there and then find no CUDA. Ray's fake multinode
autoscaler (tests/fake_cluster.yaml) adds and removes such nodes as trials ask for them. Every
sweep is `python sweeps/scaling.py --address ...`, the command a cluster user runs.
"""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from crossover.sweeps.space import CPU_NODE, GPU_NODE

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ["--smoke", "--workloads", "disc,peaks", "--repeats", "1"]  # 4 configs per device


def ray_schema() -> dict:
    import ray

    return json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())


@pytest.mark.parametrize("path", ["cluster.yaml", "tests/fake_cluster.yaml", "tests/local_cluster.yaml"])
def test_cluster_configs_follow_the_schema_the_ray_wheel_ships(path):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(yaml.safe_load((ROOT / path).read_text()), ray_schema())


def test_cluster_yaml_marks_node_types_and_opens_nothing_but_ssh():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    types = config["available_node_types"]
    assert types[config["head_node_type"]]["resources"]["CPU"] == 0  # the head runs no trial
    workers = {name: t["resources"] for name, t in types.items() if name != config["head_node_type"]}
    assert all((CPU_NODE in r) != (GPU_NODE in r) for r in workers.values()), workers
    assert all(r.get("GPU", 0) > 0 for r in workers.values() if GPU_NODE in r)
    assert any(r.get("GPU", 0) > 1 for r in workers.values()), "a multi-GPU type for ddp:N"
    assert config["max_workers"] >= 1 and config["idle_timeout_minutes"] > 0
    assert config["provider"]["security_group"]["IpPermissions"] == []  # Ray adds SSH and intra-cluster only
    start = " ".join(config["head_start_ray_commands"] + config["worker_start_ray_commands"])
    assert "0.0.0.0" not in start and "--dashboard-host=127.0.0.1" in start
    assert "--env RAY_AUTH_MODE=token" in config["docker"]["run_options"]
    assert config["docker"]["image"] == "rayproject/ray:2.60.0-py311-gpu"


def test_cluster_yaml_gives_the_head_its_own_profile_pins_torch_and_keeps_the_token_private():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    head = config["available_node_types"][config["head_node_type"]]["node_config"]
    assert head["IamInstanceProfile"] == {"Name": "crossover-head"}  # not Ray's ray-autoscaler-v1
    docs = (ROOT / "docs" / "cluster.md").read_text()
    assert "instance profile, `crossover-head`" in docs and "arn:aws:s3:::BUCKET/crossover/*" in docs  # its policy
    assert not any("IamInstanceProfile" in t["node_config"] for name, t in config["available_node_types"].items()
                   if name != config["head_node_type"])
    pinned = next(line.split("?=", 1)[1].split() for line in (ROOT / "Makefile").read_text().splitlines()
                  if line.startswith("TORCH ?="))
    assert f"pip install -q {' '.join(pinned)}" in config["setup_commands"]
    assert "chmod 600 ~/.ray/auth_token" in config["setup_commands"]


# --- a fixed multi-node cluster -------------------------------------------------------------------

def short_tmp() -> str:
    # Ray's socket paths must stay under 108 characters: pytest's tmp_path is too deep.
    return tempfile.mkdtemp(prefix="xo-", dir="/tmp")


# Never more CPUs in all, at any moment, than this machine has: each cluster below holds 2 CPUs at
# most (a test that replaces a node removes it before adding the other; tests/fake_cluster.yaml lets
# its autoscaler add one CPU node and one GPU node), so it needs 2 cores.
def need_two_cores() -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("a CPU node and a GPU node of 1 CPU each need 2 cores")


@pytest.fixture(scope="module")
def cluster():
    """Head (0 CPUs), one CPU node (1 CPU), one GPU node (1 CPU, 1 GPU without CUDA): 2 CPUs in all."""
    from ray.cluster_utils import Cluster

    need_two_cores()
    tmp = short_tmp()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_TMPDIR", tmp)  # this cluster's sessions and address file, apart from other Rays
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        cpu = c.add_node(num_cpus=1, resources={CPU_NODE: 1})
        gpu = c.add_node(num_cpus=1, num_gpus=1, resources={GPU_NODE: 1})
        c.wait_for_nodes()
        try:
            # cpu_node: the CPU node now (a test that kills it puts its replacement here)
            yield SimpleNamespace(cluster=c, address=c.address, env={**os.environ}, cpu_node=cpu,
                                  gpu_ids={gpu.node_id})
        finally:
            # Not c.shutdown(): it also resets this process's Ray globals, which conftest's local_ray
            # may be using in the same pytest session. Removing the nodes stops every process.
            for node in list(c.worker_nodes):
                c.remove_node(node)
            c.remove_node(c.head_node)
    shutil.rmtree(tmp, ignore_errors=True)


def scaling(address: str, out: Path, name: str, *args: str) -> list[str]:
    return [sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--address", address,
            "--out", str(out), "--name", name, *args]


def run(cmd: list[str], env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def wait_for_rows(directory: Path, n: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 240  # a guard against a hang, not a measurement
    while len(list(directory.glob("*.parquet"))) < n:
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        assert time.monotonic() < deadline, f"fewer than {n} rows in {directory}"
        time.sleep(0.05)


@pytest.mark.slow
def test_cpu_trials_run_on_cpu_nodes_and_gpu_trials_only_on_gpu_nodes(cluster, tmp_path):
    # no --devices: the sweep sees the GPU node and measures on 'cpu' and 'cuda'
    run(scaling(cluster.address, tmp_path, "placed", *SMOKE), cluster.env)
    rows = pd.read_parquet(tmp_path / "placed")
    assert len(rows) == 8 and rows["config_hash"].is_unique  # every row reached the driver's Parquet
    cpu, gpu = rows[rows["device"] == "cpu"], rows[rows["device"] == "cuda"]
    assert len(cpu) == len(gpu) == 4
    assert set(cpu["node_id"]) == {cluster.cpu_node.node_id} and (cpu["status"] == "ok").all()
    assert (cpu["cpus_requested"] == 1).all()  # the CPU node's cores; the GPU node's don't count
    assert set(gpu["node_id"]) == cluster.gpu_ids
    assert (gpu["status"] == "error").all()
    assert gpu["error"].str.contains(f"CUDA not available on node {socket.gethostname()}").all()


@pytest.mark.slow
def test_a_worker_node_killed_mid_sweep_loses_no_row_and_its_trial_is_retried(cluster, tmp_path):
    c, victim = cluster.cluster, cluster.cpu_node  # the only node a CPU trial may run on
    out = tmp_path / "node-killed"
    cmd = scaling(cluster.address, tmp_path, "node-killed", "--workloads", "disc", "--grid", "full", "--devices", "cpu",
                  "--max-failures", "2", "--repeats", "1")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        wait_for_rows(out, 9, proc)  # disc depths 2..10 done: depth 11 (seconds, not milliseconds) runs
        time.sleep(0.5)
        before = pd.read_parquet(out)
        c.remove_node(victim, allow_graceful=False)  # SIGKILL: the node dies with its trial
        # as the autoscaler would: a new CPU node, once the old one is gone (2 CPUs in all, never 3)
        cluster.cpu_node = replacement = c.add_node(num_cpus=1, resources={CPU_NODE: 1})
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
    assert "lost its worker" in stdout  # the sweep ran the trial again instead of writing an error row
    after = pd.read_parquet(out)
    assert len(after) == 11 and after["config_hash"].is_unique  # disc depths 2..12, once each
    assert (after["status"] == "ok").all()
    kept = after.set_index("config_hash").loc[before["config_hash"]]
    assert list(kept["finished_at"]) == list(before["finished_at"])  # rows written before the kill stay
    assert set(before["node_id"]) == {victim.node_id}
    assert set(after["node_id"]) == {victim.node_id, replacement.node_id}


@pytest.mark.slow
def test_a_killed_driver_resumes_with_the_same_command(cluster, tmp_path):
    out = tmp_path / "driver-killed"
    cmd = scaling(cluster.address, tmp_path, "driver-killed", "--smoke", "--devices", "cpu", "--workloads",
                  "disc,peaks", "--repeats", "3", "--max-concurrent", "1")  # 12 short trials, one at a time
    proc = subprocess.Popen(cmd, cwd=ROOT, env=cluster.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_rows(out, 3, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver only: the cluster lives on
        proc.wait()
    before = pd.read_parquet(out)
    assert 3 <= len(before) < 12, "the sweep should have been cut mid-way"

    done = run(cmd, cluster.env)
    assert f"{len(before)} already measured" in done.stdout
    after = pd.read_parquet(out)
    assert len(after) == 12 and after["config_hash"].is_unique
    kept = after.set_index("config_hash").loc[before["config_hash"], "finished_at"]
    assert list(kept) == list(before["finished_at"])


# --- the fake multinode autoscaler ----------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.fixture
def autoscaling_cluster():
    """A head started as `ray up` starts one, with tests/fake_cluster.yaml's node types and token auth."""
    from ray.util import get_node_ip_address

    need_two_cores()
    tmp = short_tmp()
    address = f"{get_node_ip_address()}:{free_port()}"
    config = yaml.safe_load((ROOT / "tests" / "fake_cluster.yaml").read_text())
    config["provider"]["gcs_address"] = address
    path = Path(tmp) / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    token = Path(tmp) / "auth_token"
    token.write_text(secrets.token_hex(16))
    env = {**os.environ, "RAY_TMPDIR": tmp, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", f"--port={address.split(':')[1]}",
         "--num-cpus=0", "--include-dashboard=false", f"--autoscaling-config={path}", "--block"],
        env={**env, "RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield SimpleNamespace(address=address, config=path, env=env)
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # the head and every node the autoscaler started
        head.wait()
        kill_processes_under(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def kill_processes_under(directory: str) -> None:
    """SIGKILL any process of this cluster that left the head's process group (its session is here)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if directory.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


NODES = """
import json, ray
ray.init(address={address!r}, log_to_driver=False)
print(json.dumps(ray.nodes()))
"""


def nodes(cluster) -> list[dict]:
    """Every node the cluster has had, alive or gone, as `ray.nodes()` sees it from a driver."""
    done = run([sys.executable, "-c", NODES.format(address=cluster.address)], cluster.env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def alive_nodes(cluster) -> list[dict]:
    return [n for n in nodes(cluster) if n["Alive"]]


@pytest.mark.slow
def test_the_autoscaler_adds_nodes_for_pending_trials_and_removes_them_when_idle(autoscaling_cluster):
    cluster = autoscaling_cluster
    assert [n["Resources"].get("CPU", 0) for n in alive_nodes(cluster)] == [0]  # the head alone
    out = Path(cluster.config).parent / "results"
    # no --devices: the GPUs come from the node types in --cluster-config, before any node exists
    done = run(scaling(cluster.address, out, "autoscaled", "--smoke", "--workloads", "disc", "--repeats", "1",
                       "--cluster-config", str(cluster.config)), cluster.env)
    rows = pd.read_parquet(out / "autoscaled")
    # the node type of every node the autoscaler started, alive or already scaled down
    started = {n["NodeID"]: n["Labels"].get("node-type") for n in nodes(cluster)}
    # every node it ever started, together: no more CPUs than this machine's 2 (fake_cluster.yaml's caps)
    assert sum(n["Resources"].get("CPU", 0) for n in nodes(cluster)) <= 2, nodes(cluster)
    assert len(rows) == 4 and set(rows["device"]) == {"cpu", "cuda"}, done.stdout
    assert list(rows.sort_values("device")["node_id"].map(started)) == ["cpu", "cpu", "gpu", "gpu"], started
    cuda = rows[rows["device"] == "cuda"]
    assert (cuda["status"] == "error").all() and cuda["error"].str.contains("CUDA not available on node").all()
    assert (rows.loc[rows["device"] == "cpu", "status"] == "ok").all()

    deadline = time.monotonic() + 240  # idle_timeout_minutes is 0.1: a guard against a hang
    while len(alive_nodes(cluster)) > 1:
        assert time.monotonic() < deadline, "idle worker nodes were never removed"
        time.sleep(2)

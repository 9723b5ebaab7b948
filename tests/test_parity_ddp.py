"""The data-parallel parity (studies/parity_ddp.py) and the all-reduce probe (studies/allreduce.py): the ddp trials
take N x the plain loop's work a rank, the bus bandwidth follows NCCL's rule, a smoke run on a local Ray prints
what its rows and its plain loop's lines give, and a ddp trial's ranks go to two Ray nodes where no one holds both."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from crossover.sweeps.cli import ROOT, child_env

import allreduce
import parity_ddp


def test_bus_bandwidth_is_the_ring_all_reduces_bytes_over_the_slowest_link():
    # 100 MB in 0.1 s: 1 GB/s of algorithm bandwidth; a ring of N moves 2(N-1)/N of it over each link
    assert allreduce.bus_bandwidth(100_000_000, 0.1, 2) == pytest.approx(1e9)
    assert allreduce.bus_bandwidth(100_000_000, 0.1, 4) == pytest.approx(1.5e9)
    assert allreduce.bus_bandwidth(100_000_000, 0.1, 8) == pytest.approx(1.75e9)
    assert allreduce.bus_bandwidth(100_000_000, 0.1, 1) == 0  # one rank sends nothing
    with pytest.raises(ValueError, match="seconds > 0"):
        allreduce.bus_bandwidth(1, 0, 2)
    assert allreduce.rank_counts(4) == [2, 4] and allreduce.rank_counts(8) == [2, 4, 8] and allreduce.rank_counts(3) == [2]


def test_a_ddp_trial_takes_n_times_the_plain_loops_work_a_rank(planner):
    flags = parity_ddp.parse_args(["--smoke", "--cpu", "--gpus", "1,4", "--point", "precision=bf16"])
    pt = flags.points[0]
    assert pt == parity_ddp.Point((), "bf16") and pt.label == "bf16"
    plain = parity_ddp.space(flags, pt, 4, "cpu", planner).expand()[0].cfg
    ddp = parity_ddp.space(flags, pt, 4, "ddp-cpu:4", planner).expand()[0].cfg
    assert (plain.batch_size, plain.dataset_size, plain.threads) == (32, 64, 1)  # one rank's: 2 steps of 32
    assert (ddp.batch_size, ddp.dataset_size, ddp.device) == (128, 256, "ddp-cpu:4")  # the global batch: 4 x 32
    for cfg in (plain, ddp):  # exactly the epochs asked for, the first a warm-up, at the point's precision
        assert (cfg.precision, cfg.min_timed_s, cfg.epochs) == ("bf16", 0, 4)
    point = parity_ddp.point("arch=gpt2_small,tokens=128,precision=bf16")
    assert point.params == (("arch", "gpt2_small"), ("tokens", 128)) and point.slug == "gpt2_small-128-bf16"


def test_a_cpu_run_starts_a_ray_with_a_core_for_each_rank_and_the_trials_own_share():
    flags = parity_ddp.parse_args(["--smoke", "--cpu", "--gpus", "1,4"])
    assert parity_ddp.local_cpus(flags) >= 5  # four ranks a core each, the trial's quarter core, on any machine
    assert parity_ddp.local_cpus(parity_ddp.parse_args(["--smoke", "--cpu", "--address", "127.0.0.1:6379"])) is None


def test_the_study_measures_four_real_sized_models_at_the_default_and_bf16():
    flags = parity_ddp.parse_args(["--study", "--cpu"])
    assert flags.workload == parity_ddp.STUDY_WORKLOAD and (flags.repeats, flags.plain_repeats) == (3, 3)
    archs = [dict(pt.params)["arch"] for pt in flags.points]
    assert sorted(set(archs)) == ["bert_base", "gpt2_small", "resnet50", "vit_b_16"] and len(flags.points) == 8
    assert {pt.precision for pt in flags.points} == {"default", "bf16"}
    assert parity_ddp.parse_args(["--study", "--gpus", "1,2,4,8"]).gpus == (1, 2, 4, 8)
    with pytest.raises(SystemExit):
        parity_ddp.parse_args(["--study", "--smoke"])


@pytest.mark.slow
def test_the_probe_all_reduces_over_gloo_on_two_ranks(tmp_path):
    out = tmp_path / "ar.jsonl"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(ROOT / "studies" / "allreduce.py"), "--smoke", "--label", "gloo", "--json", str(out)],
                          cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert (line["label"], line["backend"], line["ranks"], line["bytes"]) == ("gloo", "gloo", 2, 1_000_000)
    assert line["busbw_GBps"] == pytest.approx(allreduce.bus_bandwidth(line["bytes"], line["seconds"], 2) / 1e9)


@pytest.fixture
def three_cpu_ray():
    """A local Ray of 3 CPUs: ddp-cpu:2's two workers and its trial's quarter core (more than this 2-core VM has:
    the smoke's tiny MLP takes milliseconds an epoch either way)."""
    import ray

    from crossover.sweeps.cluster import WORKER_ENV, tune_settings

    tune_settings()
    ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": WORKER_ENV})
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_smoke_run_prints_what_its_rows_and_its_plain_loop_give(three_cpu_ray, tmp_path, capsys):
    log = tmp_path / "parity.jsonl"
    assert parity_ddp.main(["--smoke", "--out", str(tmp_path), "--json", str(log)]) == 0
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    plain = {line["gpus"]: line for line in lines if line["part"] == "plain"}
    [ddp] = [line for line in lines if line["part"] == "ddp"]
    assert sorted(plain) == [1, 2] and all(len(p["epoch_s"]) == 3 for p in plain.values())  # 3 after the warm-up
    rows = pd.read_parquet(tmp_path / "parity-ddp-default-ddp2")
    assert len(rows) == 1 and rows["status"].tolist() == ["ok"] and rows["device"].tolist() == ["ddp-cpu:2"]
    assert (rows["batch_size"].tolist(), rows["world_size"].tolist(), rows["timed_epochs"].tolist()) == ([64], [2], [3])
    assert ddp["epoch_s_median"] == rows["epoch_s_median"].tolist()
    assert len(rows["rank_node_ids"][0]) == 2
    [host] = [line for line in lines if line["part"] == "host"]  # the rows' host and link, first
    assert lines[0] == host and host["link"] == "gloo over loopback (CPU ranks)" and host["cores"] >= 1
    out = capsys.readouterr().out.splitlines()
    assert any("target: ddp/plain at most 1.10x" in line for line in out)
    row = next(line for line in out if line.startswith("default  2"))
    ratio = ddp["epoch_s_median"][0] / plain[2]["epoch_s_median"]
    assert f"{ratio:.2f} ({ratio:.2f}-{ratio:.2f})" in row
    assert f"{plain[1]['epoch_s_median'] / plain[2]['epoch_s_median']:.2f}" in row  # the weak-scaling efficiency


@pytest.mark.slow
def test_a_ddp_trials_ranks_go_to_two_nodes_where_no_one_node_holds_both(tmp_path):
    from ray.cluster_utils import Cluster

    from crossover.sweeps import runner
    from crossover.sweeps.space import Space

    # one core a node, none on the head: a rank takes a core, so no node holds two ranks, and the trial's own
    # share (on any node) still leaves two nodes a rank each
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = [c.add_node(num_cpus=1) for _ in range(3)]
    c.wait_for_nodes()
    try:
        import ray

        from crossover.sweeps.cluster import connect

        connect(c.address)
        sp = Space("spread", {"disc": {"depth": [2], "epochs": [2]}}, ("ddp-cpu:2",), cpu_threads=2,
                   fixed={"min_timed_s": 0}, timeout_s=240)
        store = runner.run(sp, tmp_path, log=lambda line: None)
        rows = pd.read_parquet(store.dir)
        # the trial ended within its limit (a trial past it is rowed 'timeout') and wrote its row
        assert rows["status"].tolist() == ["ok"], rows["error"].tolist()
        assert rows["total_s"][0] < sp.timeout_s
        ranks = list(rows["rank_node_ids"][0])
        assert len(set(ranks)) == 2 and set(ranks) <= {n.node_id for n in nodes}, ranks
    finally:
        ray.shutdown()
        for node in list(c.worker_nodes):
            c.remove_node(node)
        c.remove_node(c.head_node)

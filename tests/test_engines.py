"""The engines study: its spaces are valid for every engine, a user's workload joins every engine that can
run its grid, and its figures come out of rows with known times (speed-up over eager, fused trials per
hour with a worker's cold first trial left out, a crossover per engine)."""

import argparse
import json

import numpy as np
import pytest
from analysis_rows import write

from crossover import schema
from crossover.analysis import engines
from crossover.analysis.load import labelled
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import groups

from engines import GRIDS, spaces


def args(**kw):
    return argparse.Namespace(**{"workloads": ",".join(GRIDS["default"]), "engines": "eager,graph,compile",
                                 "name": "e", "cpu_threads": 2, "workload": [], "param": [], "trial_timeout": 60,
                                 "plan_timeout": 60, **kw})


# A user's workload file: its default grid (Workload.grid) is dataset_size 64, 250 and 1000 at batch 64.
JOB = """
import torch
from torch import nn

from crossover.data import Data
from crossover.workload import Workload


def data(cfg):
    x = torch.randn(cfg.dataset_size, 4, generator=torch.Generator().manual_seed(cfg.seed))
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")


workload = Workload(
    "mine", make_data=data,
    make_model=lambda cfg: nn.Sequential(nn.Linear(4, cfg.width), nn.ReLU(), nn.Linear(cfg.width, 2)),
    make_loss=nn.CrossEntropyLoss, make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
    defaults={"width": 16, "batch_size": 64, "dataset_size": 1000}, axes={"width"})
"""


def test_a_users_workload_joins_the_cpu_baseline_and_every_engine_that_can_run_its_grid(tmp_path, planner):
    (tmp_path / "engines_job.py").write_text(JOB)
    ref = f"{tmp_path / 'engines_job.py'}:workload"
    notes = []
    study = {s.name: s for s in spaces(args(workload=[ref], workloads=None), planner, "default", log=notes.append)}
    assert set(study) == {"e-cpu", "e-gpu-eager", "e-gpu-compile"}  # no built-in beside it: no fused part
    assert {(t.cfg.workload, t.cfg.module, t.cfg.dataset_size) for t in study["e-cpu"].expand()} == {
        ("mine", "engines_job:workload", n) for n in (64, 250, 1000)}
    assert {t.cfg.engine for t in study["e-gpu-compile"].expand()} == {"compile"}
    # 250 samples are no whole number of batches of 64: graph cannot replay the last one, so it leaves it out
    assert len(notes) == 1 and f"--workload {ref} is left out of engine 'graph'" in notes[0]
    assert "multiple of batch_size" in notes[0]
    # 64 samples: one full batch
    smoke = {s.name: s for s in spaces(args(workload=[ref], workloads="disc"), planner, "smoke")}
    assert {t.cfg.workload for t in smoke["e-gpu-graph"].expand()} == {"disc", "mine"}


def test_every_engine_space_resolves_and_graph_gets_full_batches():
    study = {space.name: space for space in spaces(args(engines="eager,graph,compile,triton"), Planner(), "default")}
    fused = {f"e-fused-{engine}-k{k}" for engine in ("eager", "graph", "triton") for k in (1, 8, 64)}
    assert set(study) == {"e-cpu", "e-gpu-eager", "e-gpu-graph", "e-gpu-compile"} | fused  # triton: fused only
    made = {name: [t.cfg for t in space.expand()] for name, space in study.items()}
    assert all(c.dataset_size % c.batch_size == 0 for c in made["e-gpu-graph"])
    assert {c.engine for c in made["e-gpu-compile"]} == {"compile"}
    for engine in ("eager", "graph", "triton"):  # 3 fused trials of K members each, K = 1: alone
        for k in (1, 8, 64):
            members = groups(study[f"e-fused-{engine}-k{k}"].expand(), str(k))
            assert [len(g) for g in members] == [k] * 3
            assert {(t.cfg.engine, t.cfg.dataset_size) for g in members for t in g} == {(engine, 40000)}
    assert not [s for s in spaces(args(workloads="disc"), Planner(), "default") if "fused" in s.name]  # fused: peaks
    with pytest.raises(ValueError, match="--engines must be among"):
        spaces(args(engines="eager,jit"), Planner(), "default")


def row(sweep, device, engine, depth, ms, **kw):
    rng = np.random.default_rng(depth)
    times = list(ms / 1e3 * (1 + 0.01 * rng.standard_normal(5)))
    return {"sweep": sweep, "status": "ok", "gpus_requested": 0.0 if device == "cpu" else 1.0, "workload": "disc",
            "device": device, "engine": engine, "precision": "default", "depth": depth,
            "batch_size": 100, "dataset_size": 1000, "epochs": 6, "warmup_epochs": 1, "lr": 0.1, "loop": "fast",
            "seed": 0, "data_requested": "generated", "n_params": 4 ** depth, "epoch_s": times,
            "epoch_s_median": float(np.median(times)), "train_loss": 0.1, "total_s": 2.0, "fused_members": 1,
            "schema_version": schema.SCHEMA_VERSION, **kw}


@pytest.mark.parametrize("names", [("e-cpu", "e-gpu-eager", "e-gpu-graph", "e-alone", "e-fused"),
                                   ("mine", "mine", "renamed", "x", "y")])  # the rows' columns count, not the names
def test_the_figures_from_rows_with_known_times(names):
    cpu, eager, graph, alone, fused = names
    depths = range(2, 10)
    rows = schema.to_table(
        [row(cpu, "cpu", "eager", d, 2 ** d) for d in depths]  # the CPU doubles with each layer
        + [row(eager, "cuda", "eager", d, 40) for d in depths]  # eager GPU: launch-bound, flat
        + [row(graph, "cuda", "graph", d, 10) for d in depths]  # graph: 4x less
        + [row(alone, "cuda", "eager", 4, 20, total_s=3.0, seed=s, epochs=200) for s in range(2)]
        + [row(fused, "cuda", "eager", 4, 30, total_s=6.0, seed=s, epochs=200, fused_members=8, fused_group="g")
           for s in range(8)]
        # graph's fused trials, on batches of 50: set against graph's alone only
        + [row(alone, "cuda", "graph", 4, 2, total_s=1.0, seed=s, epochs=200, batch_size=50) for s in range(2)]
        + [row(fused, "cuda", "graph", 4, 3, total_s=2.0, seed=s, epochs=200, fused_members=8, fused_group="h",
               batch_size=50) for s in range(8)]
    ).to_pandas()
    rows = labelled(rows)
    speed = engines.speedup(rows)
    assert speed["graph_speedup"].to_numpy() == pytest.approx(4, rel=0.05)
    fused = engines.fused(rows).set_index(["engine", "how"])
    assert fused.loc[("eager", "one at a time"), "trials_per_hour"] == 1200
    assert fused.loc[("eager", "fused"), "trials_per_hour"] == 4800
    assert fused.loc[("eager", "fused"), "vs_one_at_a_time"] == 4
    assert fused.loc[("graph", "one at a time"), "trials_per_hour"] == 3600  # each engine against itself alone
    assert fused.loc[("graph", "fused"), "vs_one_at_a_time"] == 4
    cross = engines.crossovers(rows).query("axis == 'depth'").set_index("device_b")["crossover"]
    assert cross["cuda"] == pytest.approx(np.log2(40), abs=0.1)  # 2^d = 40 ms
    assert cross["cuda graph"] == pytest.approx(np.log2(10), abs=0.1)  # graph moves it to smaller models


def test_a_member_epoch_per_engine_and_k_against_the_flops_floor():
    def peaks(engine, k, ms, group=None, seed=0, gpu="NVIDIA H200"):
        return {**row("s", "cuda", engine, 2, ms, seed=seed, fused_members=k, fused_group=group),
                "epoch_s": [ms / 1e3] * 5, "epoch_s_median": ms / 1e3, "workload": "peaks", "model": "fc 2-20-5-1",
                "n_params": 171, "dataset_size": 40000, "batch_size": 40000, "steps_per_epoch": 1, "lr": 0.08,
                "device_name": gpu}
    rows = schema.to_table(
        [peaks("eager", 1, 1.6, seed=s) for s in range(3)]
        + [peaks("graph", 64, 4.0 + g, group=f"g{g}", seed=64 * g + s) for g in range(3) for s in range(64)]
        + [peaks("triton", 64, 0.64, group="t", seed=s) for s in range(64)]
        + [peaks("eager", 1, 9.0, gpu="a GPU the table lacks")]
        + [{**peaks("graph", 1, 0.2), "dataset_size": 2500, "batch_size": 2500}]  # never fused: left out
    ).to_pandas().pipe(labelled)
    table = engines.member_epochs(rows).reset_index().set_index(["engine", "k"])
    assert list(table.index) == [("eager", 1), ("graph", 64), ("triton", 64)]  # the unknown GPU left out
    floor = 40000 * 2 * (3 * (40 + 100 + 5) - 40) / 66.9e12 * 1e6  # the H200's fp32 peak, devices.yaml
    assert table["floor_us"].to_numpy() == pytest.approx([floor] * 3)
    graph = table.loc[("graph", 64)]
    assert graph["trials"] == 3 and graph["member_us"] == pytest.approx(5000 / 64)  # 5 ms a 64-member epoch
    assert (graph["low_us"], graph["high_us"]) == pytest.approx((4000 / 64, 6000 / 64))
    assert table.loc[("triton", 64), "vs_floor"] == pytest.approx(10 / floor)
    assert table.loc[("eager", 1), "trials"] == 3


def test_fused_against_alone_warm_cold_and_whole_sweeps_apart(tmp_path):
    from crossover.analysis.load import read

    alone = [row("x", "cuda", "eager", 4, 20, total_s=3.0, seed=s, epochs=200, cold_start=False) for s in range(3)]
    alone[0].update(total_s=8.0, cold_start=True)  # the worker's first trial: imports and CUDA context
    fused = [row("y", "cuda", "eager", 4, 30, total_s=t, seed=s, epochs=200, fused_members=8, fused_group=g,
                 cold_start=cold) for g, t, cold in (("g1", 11.0, True), ("g2", 6.0, False)) for s in range(8)]
    for name, rows_of, wall in (("alone", alone, 36.0), ("fused", fused, 18.0)):  # 3 trials in 36 s, 16 in 18 s
        write(rows_of, tmp_path / name)
        schema.runs_file(tmp_path / name).parent.mkdir(exist_ok=True)
        schema.runs_file(tmp_path / name).write_text(
            json.dumps({"start": 100.0, "end": 100.0 + wall, "trials": len(rows_of)}) + "\n")
    table = engines.fused(read(tmp_path / "alone", tmp_path / "fused")).set_index(["how", "kind"])
    assert table.loc[("one at a time", "warm"), "trial_s"] == 3.0 and table.loc[("fused", "warm"), "trial_s"] == 6.0
    assert table.loc[("one at a time", "cold"), "trial_s"] == 8.0 and table.loc[("fused", "cold"), "trial_s"] == 11.0
    assert table.loc[("fused", "warm"), "vs_one_at_a_time"] == 4  # 8 trials in 6 s against 1 in 3 s
    assert table.loc[("fused", "cold"), "vs_one_at_a_time"] == pytest.approx((8 / 11) / (1 / 8))
    assert table.loc[("one at a time", "sweep"), "trials_per_hour"] == 300  # 3 trials in 36 s
    assert table.loc[("fused", "sweep"), "trials_per_hour"] == 3200  # 16 trials in 18 s
    assert table.loc[("fused", "sweep"), "vs_one_at_a_time"] == pytest.approx(3200 / 300)


@pytest.fixture(scope="module")
def gpuless_ray():
    """Ray in this process as on a laptop: at most 2 of the machine's CPUs, no GPU."""
    import os

    import ray

    from crossover.sweeps.cluster import WORKER_ENV

    ray.init(address="local", num_cpus=min(2, os.cpu_count() or 1), num_gpus=0, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": WORKER_ENV})
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_the_study_runs_its_cpu_part_without_a_gpu_and_a_dead_worker_stops_no_later_sweep(gpuless_ray, tmp_path,
                                                                                           capsys):
    # a worker's death once reached the driver as an error message, Ray's tqdm then replaced
    # builtins.print there, and the next sweep's Tuner could not pickle the print its RowWriter held
    import builtins
    import os

    from crossover.analysis.load import read
    import engines as study
    from crossover.sweeps import runner
    from crossover.sweeps.space import Space

    @gpuless_ray.remote(max_retries=0)
    def die():
        os._exit(1)

    python_print = builtins.print
    with pytest.raises(gpuless_ray.exceptions.WorkerCrashedError):
        gpuless_ray.get(die.remote())
    assert study.main(["--smoke", "--out", str(tmp_path), "--name", "e"]) == 0  # tens of seconds: the message is in
    out = capsys.readouterr().out
    assert "no GPU in the Ray cluster: the CPU baseline only" in out
    rows = read(tmp_path / "e-cpu")
    assert len(rows) == 3 and set(rows["status"]) == {"ok"} and set(rows["device"]) == {"cpu"}
    # no GPU sweep was tried ('_tune', '_reports': Tune's state and reports sit beside the rows)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("_")) == ["e-cpu"]
    assert builtins.print is python_print
    after = runner.run(Space("after", {"disc": {"depth": [2], "epochs": [2]}}, ("cpu",),
                             fixed={"min_timed_s": 0}), tmp_path)
    assert list(read(after.dir)["status"]) == ["ok"]


@pytest.mark.slow
def test_compile_trials_in_a_row_each_compile_in_a_process_of_their_own(gpuless_ray, tmp_path):
    # In one reused worker, torch.compile's caches carried over from trial to trial: past 8 model
    # shapes dynamo stopped compiling and ran eager, labelled 'compile' (and on a GPU, inductor's
    # CUDA-graph trees broke every trial after the first). Each compile trial now starts its own worker.
    from crossover.analysis.load import read
    from crossover.sweeps import runner
    from crossover.sweeps.space import Space

    space = Space("compiled", {"disc": {"depth": [2, 3], "epochs": [2]}}, ("cpu",),
                  fixed={"engine": "compile", "min_timed_s": 0})
    rows = read(runner.run(space, tmp_path).dir)
    assert list(rows["status"]) == ["ok", "ok"] and set(rows["engine"]) == {"compile"}
    assert list(rows["cold_start"]) == [True, True]  # each the first trial of its worker process

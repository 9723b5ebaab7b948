"""The parallel studies' spaces (a user's workload in ddp, and in pipe where it can be piped), and their
benchmark figures computed from rows with known throughputs."""

import numpy as np
import pandas as pd
import pytest

from crossover.analysis import parallel
from crossover import schema
from crossover.analysis.load import labelled

from parallel import MICRO_BATCHES, gpu_counts, spaces


def rows(*specs, depth=8, width=64, workload="tabular"):
    """Rows of the schema: (device, batch_size, samples_per_s, gpu_ids, micro_batches), with what the
    trial asked for as the runner writes it; ddp and pipe rows run one at a time (exclusive)."""
    def asked(device, micro):
        kind, _, n = device.replace(":", "/").partition("/")
        gpus = {"cuda": 1 / int(n or 1), "pipe": int(n or 1)}.get(kind, 0.0)
        return {"gpus_requested": gpus, "world_size": int(n) if kind == "ddp" else 1,
                "exclusive": kind in ("ddp", "pipe") or (kind == "cuda" and micro is not None)}

    return schema.to_table([
        {"sweep": "any", "device": device, "batch_size": batch, "samples_per_s": sps, "status": "ok",
         "gpu_ids": ids, "micro_batches": micro, "workload": workload, "depth": depth, "width": width,
         "dataset_size": 65536, "epochs": 3, "fused_members": 1, "peak_gpu_bytes": 1, **asked(device, micro)}
        for device, batch, sps, ids, micro in specs]).to_pandas().pipe(labelled)


def test_packed_throughput_per_gpu_and_placement():
    table = parallel.packed(pd.concat([rows(
        ("cuda", 100, 1000.0, ["0"], None), ("cuda", 100, 1000.0, ["1"], None),
        *[("cuda/4", 100, 600.0, [gpu], None) for gpu in "00011111"],  # 8 trials on 2 GPUs, placed 3 and 5
    ), rows(("cuda", 100, 5.0, ["0"], None), depth=2)]))  # another model on one GPU: not this study's
    assert table.loc[4, "gpus"] == 2 and table.loc[4, "per_gpu_samples_per_s"] == 2400
    assert table.loc[4, "vs_one_per_gpu"] == pytest.approx(2.4)
    assert (table.loc[4, "fewest_on_a_gpu"], table.loc[4, "most_on_a_gpu"]) == (3, 5)
    assert table.loc[1, "trials"] == 2  # the depth-2 row is left out


def test_ddp_efficiency_strong_and_weak_with_the_range_over_runs():
    table = parallel.ddp(rows(
        ("ddp:1", 4096, 1000.0, ["0"], None), ("ddp:1", 4096, 1100.0, ["0"], None),
        ("ddp:4", 4096, 3000.0, list("0123"), None), ("ddp:4", 16384, 3800.0, list("0123"), None),
        ("ddp:4", 16384, 4000.0, list("0123"), None),
    )).set_index(["device", "batch_size"])
    weak = table.loc[("ddp:4", 16384)]
    assert weak["weak"] == pytest.approx(np.median([3800, 4000]) / (4 * 1050))
    assert (weak["weak_lo"], weak["weak_hi"]) == pytest.approx((3800 / 4400, 4000 / 4000))
    assert pd.isna(weak["strong"])  # no ddp:1 run at 16,384
    assert table.loc[("ddp:4", 4096), "strong"] == pytest.approx(3000 / 4200)
    assert table.loc[("ddp:4", 4096), "runs"] == 1 and table.loc[("ddp:1", 4096), "gpus"] == 1
    one = table.loc[("ddp:1", 4096)]  # 1 against itself, the range its two runs paired
    assert one["strong"] == pytest.approx(1) and (one["strong_lo"], one["strong_hi"]) == pytest.approx((1000 / 1100, 1100 / 1000))
    assert parallel.chart(rows(("ddp:1", 4096, 1000.0, ["0"], None),
                               ("ddp:2", 4096, 1900.0, ["0", "1"], None))).to_dict()["layer"]


def test_pipeline_against_one_gpu_per_stage_count():
    table = parallel.pipe(rows(("cuda", 4096, 1000.0, ["0"], 4), ("pipe:4", 4096, 1200.0, list("0123"), 4),
                               ("pipe:2", 4096, 1300.0, ["0", "1"], 4), ("pipe:2", 4096, 800.0, ["0", "1"], 1)))
    assert list(zip(table["device"], table["micro_batches"])) == [("pipe:2", 1), ("pipe:2", 4), ("pipe:4", 4)]
    assert list(table["vs_one_gpu"]) == pytest.approx([0.8, 1.3, 1.2])


def test_the_data_parallel_crossover_is_found_along_the_model_size():
    # ddp:4 pays its all-reduce at small widths and wins at large ones: per-epoch times planted
    specs = []
    for width, one, four in ((256, 0.01, 0.03), (1024, 0.1, 0.12), (4096, 1.0, 0.4), (8192, 4.0, 1.2)):
        for seed, jitter in enumerate((0.98, 1.0, 1.02)):
            for device, epoch in (("cuda", one), ("ddp:4", four)):
                specs.append(dict(device=device, width=width, seed=seed, n_params=width * width * 8,
                                  epoch_s=[epoch * jitter] * 3, epoch_s_median=epoch * jitter))
    table = schema.to_table([{"sweep": "any", "status": "ok", "workload": "tabular", "depth": 8, "batch_size": 4096,
                              "dataset_size": 32768, "epochs": 4, "warmup_epochs": 1, "world_size": 4 if s["device"] != "cuda" else 1,
                              "fused_members": 1, "samples_per_s": 32768 / s["epoch_s_median"], **s} for s in specs]).to_pandas()
    table = labelled(table)
    cross = parallel.crossover(table)
    assert len(cross) == 1 and "ddp:4 faster past n_params" in cross["answer"].iloc[0]
    assert 1024**2 * 8 < cross["crossover"].iloc[0] < 4096**2 * 8


def test_gpu_counts_are_the_powers_of_two_the_machine_holds():
    assert gpu_counts(1) == [1] and gpu_counts(4) == [1, 2, 4] and gpu_counts(6) == [1, 2, 4]
    assert gpu_counts(8) == [1, 2, 4, 8] and gpu_counts(0) == []


def test_the_studies_ask_for_what_they_compare():
    packed = spaces("packed", "p", gpus=2, smoke=True, repeats=3)
    assert [len(s.expand()) for s in packed] == [2, 4, 8, 16]  # K trials per GPU on each of 2 GPUs
    ddp = {s.name: {(t.cfg.device, t.cfg.batch_size) for t in s.expand()}
           for s in spaces("ddp", "p", 4, smoke=True, repeats=3)}
    assert ddp["p-ddp-1"] == {("ddp:1", 256), ("cuda", 256)}
    assert ddp["p-ddp-4"] == {("ddp:4", 256), ("ddp:4", 1024)}  # strong and weak
    assert {d for d, _ in ddp["p-ddp-seed"]} == {"cuda", "ddp:1", "ddp:2", "ddp:4"}
    assert {d for d, _ in ddp["p-ddp-width"]} == {"cuda", "ddp:4"}
    assert all(t.cfg.exclusive for s in spaces("ddp", "p", 4, True, 3) for t in s.expand())
    assert len(spaces("ddp", "p", 4, smoke=True, repeats=3)[0].expand()) == 2 * 3  # three runs each
    pipe = [t.cfg for t in spaces("pipe", "p", 4, smoke=True, repeats=1)[0].expand()]
    assert sorted(c.micro_batches for c in pipe if c.device == "pipe:4") == [1, 4, 8, 16]
    assert [c.micro_batches for c in pipe if c.device == "cuda"] == [None]  # one GPU: the axis drops
    with pytest.raises(ValueError, match="needs 2 GPUs"):
        spaces("pipe", "p", 1, smoke=True, repeats=1)
    with pytest.raises(ValueError, match="unknown study"):
        spaces("tpu", "p", 2, smoke=True, repeats=1)


# A user's workload file: an nn.Sequential a pipeline can cut, and the same model declared unpipeable.
JOB = """
import dataclasses

import torch
from torch import nn

from crossover.data import Data
from crossover.workload import Workload


def data(cfg):
    x = torch.randn(cfg.dataset_size, 4, generator=torch.Generator().manual_seed(cfg.seed))
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")


piped = Workload(
    "piped", make_data=data, pipeline=True,
    make_model=lambda cfg: nn.Sequential(nn.Linear(4, cfg.width), nn.ReLU(), nn.Linear(cfg.width, 2)),
    make_loss=nn.CrossEntropyLoss, make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
    defaults={"width": 16, "batch_size": 64, "dataset_size": 1024}, axes={"width"})
whole = dataclasses.replace(piped, name="whole", pipeline=False)
"""


def test_a_users_workload_joins_ddp_on_every_gpu_count_and_pipe_where_it_can_be_piped(tmp_path, planner):
    (tmp_path / "parallel_job.py").write_text(JOB)
    refs = [f"{tmp_path / 'parallel_job.py'}:{attr}" for attr in ("piped", "whole")]
    users = {ref: {"dataset_size": [256]} for ref in refs}
    notes = []

    def swept(study):
        return {s.name: {(t.cfg.workload, t.cfg.device, t.cfg.micro_batches) for t in s.expand()}
                for s in spaces(study, "p", 4, smoke=True, repeats=1, users=users, log=notes.append, planner=planner)}

    ddp = swept("ddp")
    devices = ("cuda", "ddp:1", "ddp:2", "ddp:4")
    assert ddp["p-ddp-user"] == {(w, d, None) for w in ("piped", "whole") for d in devices}
    assert all(t.cfg.exclusive for s in spaces("ddp", "p", 4, True, 1, users, planner=planner) for t in s.expand())
    pipe = swept("pipe")
    assert pipe["p-pipe-user"] == {("piped", "cuda", None)} | {
        ("piped", d, m) for d in ("pipe:2", "pipe:4") for m in MICRO_BATCHES}
    assert notes == [f"--workload {refs[1]} is left out of --studies pipe: its model is no nn.Sequential a pipeline "
                     "can cut (Workload.pipeline)"]
    assert {w for trials in swept("packed").values() for w, _, _ in trials} == {"disc"}  # packed: its one trial


def test_a_pipeline_is_set_against_one_gpu_rows_of_its_model_even_if_they_shared_the_machine():
    # the 2 x H200 reference rows of 2026-11-21 ran before trials were marked exclusive
    table = parallel.pipe(rows(("cuda", 4096, 1000.0, ["0"], None), ("pipe:2", 4096, 1300.0, ["0", "1"], 4)))
    assert list(table["vs_one_gpu"]) == pytest.approx([1.3])

"""The parallel studies' spaces, and their benchmark figures computed from rows with known throughputs."""

import pandas as pd
import pytest

from analysis import parallel
from analysis import schema
from sweeps.parallel import spaces


def rows(*specs, depth=8):
    """Rows of the schema: (sweep, device, batch_size, samples_per_s, co_running, micro_batches), with
    what the trial asked for as the runner writes it."""
    def asked(device):
        kind, _, n = device.replace(":", "/").partition("/")
        gpus = {"cuda": 1 / int(n or 1), "pipe": int(n or 1)}.get(kind, 0.0)
        return {"gpus_requested": gpus, "world_size": int(n) if kind == "ddp" else 1}

    return schema.to_table([
        {"sweep": sweep, "device": device, "batch_size": batch, "samples_per_s": sps, "status": "ok",
         "co_running": beside, "micro_batches": micro, "workload": "tabular", "depth": depth, "width": 64,
         "dataset_size": 65536, "epochs": 3, "fused_members": 1, **asked(device)}
        for sweep, device, batch, sps, beside, micro in specs]).to_pandas()


@pytest.mark.parametrize("one, four", [("p-packed-1", "p-packed-4"), ("anything", "else")])
def test_packed_throughput_per_gpu_against_one_trial_per_gpu(one, four):
    table = parallel.packed(pd.concat([rows(
        (one, "cuda", 100, 1000.0, [], None), (one, "cuda", 100, 1000.0, [], None),
        *[(four, "cuda/4", 100, 600.0, ["x"] * 7, None)] * 8,  # 8 trials on 2 GPUs
    ), rows((one, "cuda", 100, 5.0, [], None), depth=2)]))  # another model on one GPU: not this study's
    assert table.loc[4, "gpus"] == 2 and table.loc[4, "per_gpu_samples_per_s"] == 2400
    assert table.loc[4, "vs_one_per_gpu"] == pytest.approx(2.4)
    assert table.loc[4, "beside_median"] == 7


def test_ddp_efficiency_strong_and_weak():
    table = parallel.ddp(rows(
        ("p-ddp", "ddp:1", 4096, 1000.0, [], None), ("p-ddp", "ddp:1", 8192, 1100.0, [], None),
        ("p-ddp", "ddp:2", 4096, 1500.0, [], None), ("p-ddp", "ddp:2", 8192, 1900.0, [], None),
    )).set_index(["device", "batch_size"])
    assert table.loc[("ddp:2", 8192), "weak_efficiency"] == pytest.approx(1900 / 2000)
    assert table.loc[("ddp:2", 8192), "strong_efficiency"] == pytest.approx(1900 / 2200)
    assert table.loc[("ddp:2", 4096), "strong_efficiency"] == pytest.approx(0.75)


def test_pipeline_against_one_gpu():
    table = parallel.pipe(rows(("p-pipe", "cuda", 4096, 1000.0, [], None),
                               ("p-pipe", "pipe:2", 4096, 1300.0, [], 4), ("p-pipe", "pipe:2", 4096, 800.0, [], 1)))
    assert list(table["micro_batches"]) == [1, 4] and list(table["vs_one_gpu"]) == pytest.approx([0.8, 1.3])


def test_the_studies_ask_for_what_they_compare():
    packed = spaces("packed", "p", gpus=2, smoke=True)
    assert [len(s.expand()) for s in packed] == [2, 4, 8, 16]  # K trials per GPU on each of 2 GPUs
    ddp = {(t.cfg.device, t.cfg.batch_size) for t in spaces("ddp", "p", 2, smoke=True)[0].expand()}
    assert {("ddp:1", 256), ("ddp:2", 256), ("ddp:2", 512), ("cuda", 256)} <= ddp
    pipe = [t.cfg for t in spaces("pipe", "p", 2, smoke=True)[0].expand()]
    assert sorted(c.micro_batches for c in pipe if c.device == "pipe:2") == [1, 4, 8]
    assert [c.micro_batches for c in pipe if c.device == "cuda"] == [None]  # one GPU: the axis drops
    with pytest.raises(ValueError, match="unknown study"):
        spaces("tpu", "p", 2, smoke=True)

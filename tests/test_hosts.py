"""A prediction says what the host sets of its step and what cures it, and prices devices as they are: the host's
share and its bound (analysis/model/hosts.py), the interval widened by the hosts' spread, the step under CUDA
graphs; a precision a GPU lacks never faster than its default; a figure set by a faster GPU's flagged as a bound;
an offer's memory its own card's. On the shipped reference rows and the real-sized jobs' counted steps."""

import math

import numpy as np
import pandas as pd
import pytest

from crossover.analysis import decide, model, prices
from crossover.analysis.load import read
from crossover.analysis.model import hosts
from crossover.analysis.load import REFERENCE

GPUS = ["H100", "H200", "A100", "RTX 4090", "T4", "RTX 8000", "GTX 960"]


def real(arch: str, batch: int, precision: str) -> pd.DataFrame:
    """One real-sized job's step as `crossover predict` counts it (results/reference/real-2026-11-27), a run of 4,096."""
    rows = read(REFERENCE / "real-2026-11-27")
    rows = rows[rows["workload_params"].str.contains(f'"{arch}"') & rows["batch_size"].eq(batch)
                & rows["precision"].eq(precision)].head(1)
    return rows.assign(dataset_size=4096, steps_per_epoch=-(-4096 // batch)).reset_index(drop=True)


def by_gpu(configs: pd.DataFrame, default: pd.DataFrame | None = None) -> pd.DataFrame:
    return model.predict_counted(configs, GPUS, default=default).set_index("device_name")


def test_a_small_batch_is_bound_by_the_host_its_interval_spans_the_hosts_and_graphs_cure_it():
    small, large = by_gpu(real("resnet50", 16, "default")), by_gpu(real("resnet50", 128, "bf16"))
    fitted = model.shipped(model.PER_CLASS)
    assert fitted.host_spread > 0 and fitted.cure is not None and fitted.cure.pairs >= 20
    h100 = small.loc["H100"]
    assert h100["host_bound"] and h100["host_share"] > hosts.HOST_BOUND  # on the fastest GPUs the host holds most
    assert not small.loc["GTX 960", "host_bound"] and small.loc["GTX 960", "host_share"] < h100["host_share"]
    # the interval: the model's held-out quantile, widened by the host's part, the more the larger the host's share
    q = fitted.interval(h100["workload"])[0]
    assert math.log(h100["epoch_s_hi"] / h100["epoch_s_median"]) > q
    assert math.log(h100["epoch_s_hi"] / h100["epoch_s_median"]) == pytest.approx(
        math.hypot(q, h100["host_share"] * fitted.host_spread))
    # CUDA graphs: given where the host bounds the step, faster than the eager figure, and no faster than the hardware
    for frame in (small, large):
        bound = frame["host_bound"].astype(bool)
        assert frame.loc[~bound, "graph_epoch_s"].isna().all()
        assert (frame.loc[bound, "graph_epoch_s"] <= frame.loc[bound, "epoch_s_median"]).all()
        assert (frame.loc[bound, "graph_epoch_s_lo"] <= frame.loc[bound, "graph_epoch_s"]).all()
        helps = frame["graph_helps"].astype(bool)
        assert (frame.loc[helps, "graph_epoch_s"] < frame.loc[helps, "epoch_s_lo"]).all()
    # a ViT-S at batch 16 in bf16: its host holds nine tenths of the step, and a graph's figure lies below its interval
    vit = by_gpu(real("vit_s_16", 16, "bf16")).loc["H100"]
    assert vit["graph_helps"] and vit["graph_epoch_s"] < vit["epoch_s_lo"]


def test_the_hosts_spread_grows_with_a_host_that_dispatches_slower():
    devices, fitted = model.load_devices(), model.shipped(model.PER_CLASS)
    rows = model.reference_gpu_rows(devices)
    rows = rows[rows["results_dir"].astype(str).str.contains("h100-2026-11-26")]
    assert hosts.host_of(rows).nunique() >= 3  # three H100 hosts measured the same grid
    share = fitted.fit.parts(rows, devices).host_share
    slow = hosts.host_of(rows).eq("h100-2026-11-26-host3").to_numpy()
    planted = rows.assign(step_s=rows["step_s"] * np.where(slow, np.exp(1.5 * share), 1.0))
    assert hosts.host_spread(planted, fitted.fit, devices) > hosts.host_spread(rows, fitted.fit, devices) + 0.3
    assert math.isnan(hosts.host_spread(rows.iloc[:0], fitted.fit, devices))


def test_a_precision_a_gpu_lacks_is_never_predicted_faster_than_its_default():
    default = real("resnet50", 16, "default")
    plain, bf16 = by_gpu(default), by_gpu(real("resnet50", 16, "bf16"), default=default)
    for gpu in ("T4", "RTX 8000", "GTX 960"):  # no BF16 unit
        assert bf16.loc[gpu, "lacks_unit"] == "BF16"
        assert bf16.loc[gpu, "epoch_s_median"] >= plain.loc[gpu, "epoch_s_median"] * (1 - 1e-9), gpu
    assert bf16.loc["H100", "lacks_unit"] is None
    # without the default's count, the same count priced at the default
    alone = by_gpu(real("resnet50", 16, "bf16"))
    at_default = by_gpu(real("resnet50", 16, "bf16").assign(precision="default"))
    assert alone.loc["T4", "epoch_s_median"] >= at_default.loc["T4", "epoch_s_median"] * (1 - 1e-9)


def test_a_figure_set_by_a_faster_gpus_is_flagged_as_a_bound_in_the_json_records():
    frame = by_gpu(real("resnet50", 16, "default"))
    bound = frame[frame["bound_by"].notna()]
    assert len(bound)  # the A100, held to the RTX 4090 it outran on every public benchmark
    for gpu, line in bound.iterrows():
        assert line["epoch_s_median"] == pytest.approx(frame.loc[line["bound_by"], "epoch_s_median"]), gpu
    assert frame.loc["RTX 4090", "bound_by"] is None
    line = frame.reset_index().iloc[0]
    nan = float("nan")
    speed = [decide.Line.of({"option": "x", "kind": decide.NO_PRICE, "model": "A100", "gpus": 1, "wall_s": nan,
                             "wall_lo_s": nan, "wall_hi_s": nan, "wall_h": nan, "wall_lo_h": nan, "wall_hi_h": nan,
                             "usd": nan, "usd_lo": nan, "usd_hi": nan, "predicted": True, "basis": "b",
                             **{c: bound.iloc[0][c] for c in ("bound_by", "host_share", "host_bound")}})]
    run = decide.Config("run", str(line["workload"]), 30, 0, 1, batch_size=int(line["batch_size"]),
                        dataset_size=int(line["dataset_size"]))
    record = decide.records(speed, (run,))[0]
    assert record["bound_by"] == bound.iloc[0]["bound_by"] and record["host_share"] == pytest.approx(
        bound.iloc[0]["host_share"]) and isinstance(record["host_bound"], bool)


def test_an_offer_of_a_40_gb_a100_has_its_cards_memory():
    options, _ = prices.load_prices()
    devices = model.load_devices()
    forty = [o for o in options if o.gpu and ("40GB" in o.name.replace(" ", "") or o.name.startswith("AWS p4d."))]
    assert {o.name for o in forty} >= {"Lambda 1x A100 40GB", "AWS p4d.24xlarge"}
    assert all(devices[o.gpu].memory_gb == 40 for o in forty)
    assert decide.card_fits({"needs_bytes": 50e9}, devices[forty[0].gpu].memory_gb)["fits"] is False
    # SkyPilot's A100 is the 40 GB card, its A100-80GB the 80 GB one
    keys = list(devices)
    assert prices.gpu_model("A100", keys) == "A100 40GB" and prices.gpu_model("A100-80GB", keys) == "A100"


def test_a_host_bound_interval_spans_the_spread_the_reference_hosts_measured():
    # the configurations that two or more hosts of one GPU model timed (three H100 hosts, two H200 hosts): where the
    # host holds most of a step, the slowest host took up to 1.8x the fastest's time (docs/validation.md)
    devices, fitted = model.load_devices(), model.shipped(model.PER_CLASS)
    apart = hosts.hosts_apart(model.reference_gpu_rows(devices), fitted.fit, devices)
    bound = apart[apart["share"] > 0.7]
    assert len(bound) >= 30 and bound["hosts"].max() >= 3
    widest = bound["apart"].max()
    assert 1.3 < widest < 3
    # a prediction whose host holds nine tenths of its step spans it on the model's interval alone (q = 0), and a ViT-S
    # at batch 16 in bf16, host-bound on an H100, does
    assert math.exp(2 * hosts.widened(0.0, 0.9, fitted.host_spread)) >= widest
    vit = by_gpu(real("vit_s_16", 16, "bf16")).loc["H100"]
    assert vit["host_bound"] and vit["epoch_s_hi"] / vit["epoch_s_lo"] >= widest

"""The data-parallel model (analysis/model/collective.py) and a run priced on many GPUs (analysis/decide/many.py):
the ring's bytes, the bucket overlap's bounds, an instance charged whole, the batch a GPU takes and the global one,
FSDP where a copy does not fit, every link the tables name is known, and DDP's host work counted: the reducer's cost a
tensor and a bucket recovered from planted rows, more tensors a lower efficiency, the shipped validation's targets."""

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from crossover.analysis import decide
from crossover.analysis.decide import many
from crossover.analysis.model import collective, load_devices
from crossover.analysis.model.collective import (
    GRAD_BYTES, ddp_step, fsdp_bytes, fsdp_gpus, load_links, overlapped, ring_bytes)
from crossover.analysis.prices import Billing, Option, Price, load_prices
from crossover.schema import Precision
from crossover.step import Step

LINKS = load_links()


def test_a_ring_all_reduce_moves_2_n_minus_1_over_n_of_the_buffer_through_each_gpu():
    assert ring_bytes(1e9, 1) == 0
    assert ring_bytes(1e9, 2) == pytest.approx(1e9)
    assert ring_bytes(1e9, 4) == pytest.approx(1.5e9)
    assert ring_bytes(1e9, 8) == pytest.approx(1.75e9)
    # and the step's figure moves the same bytes: the gradients at 4 bytes a parameter
    step = ddp_step((0.1,) * 3, GRAD_BYTES * 25e6, 8, 1, LINKS["nvlink4"])
    assert step.moved_bytes == pytest.approx(ring_bytes(GRAD_BYTES * 25e6, 8))


@pytest.mark.parametrize("compute,comm,calls,contention", list(itertools.product(
    (1e-3, 0.05, 0.3), (1e-4, 0.02, 0.3, 2.0), (1, 2, 7, 86), (0.0, 0.5, 1.0))))
def test_the_bucket_overlap_is_never_faster_than_the_slower_nor_slower_than_the_sum(compute, comm, calls, contention):
    step = overlapped(compute, comm, calls, contention)
    assert max(compute, comm) - 1e-12 <= step <= compute + comm + 1e-12


def test_one_bucket_cannot_hide_and_many_hide_all_but_the_last_under_a_long_backward():
    assert overlapped(0.3, 0.01, 1, 0.0) == pytest.approx(0.31)  # the only bucket is the last one
    assert overlapped(0.3, 0.01, 10, 0.0) == pytest.approx(0.3 + 0.001)  # nine hide, the last 1/10 shows


def test_a_step_on_more_gpus_or_a_slower_link_is_no_faster_and_its_interval_holds_it():
    one = (0.09, 0.1, 0.12)
    grads = GRAD_BYTES * 340e6
    nvlink = [ddp_step(one, grads, n, 1, LINKS["nvlink4"]) for n in (2, 4, 8)]
    pcie = [ddp_step(one, grads, n, 1, LINKS["pcie4"]) for n in (2, 4, 8)]
    for fast, slow in zip(nvlink, pcie):
        assert fast.step_lo <= fast.step_s <= fast.step_hi and slow.step_lo <= slow.step_s <= slow.step_hi
        assert slow.step_s > fast.step_s and slow.comm_s > fast.comm_s
    assert [s.comm_s for s in pcie] == sorted(s.comm_s for s in pcie)
    assert ddp_step(one, grads, 1, 1, LINKS["nvlink4"]).step_s == one[1]  # one GPU: nothing to exchange
    # across nodes the network, slower than NVLink, sets the ring's pace
    assert ddp_step(one, grads, 8, 2, LINKS["nvlink4"], LINKS["efa-400"]).comm_s > nvlink[-1].comm_s
    with pytest.raises(ValueError, match="--nodes 2: no network between nodes"):
        ddp_step(one, grads, 8, 2, LINKS["nvlink4"])


def test_an_instance_is_charged_its_whole_price_for_the_runs_time_on_its_gpus():
    bill = Billing(step_s=60, minimum_s=60, startup_s=300, date="2026-09-20", source="x")
    eight = Option("Box 8x", "P", "us", "H100", 8, 64, Price(32.0, "2026-09-20", "x"), None)
    line = {"epoch_s": 100.0, "epoch_lo": 90.0, "epoch_hi": 120.0}
    priced = many.rented(line, eight, bill, 30, 1)
    wall = 300 + 30 * 100
    assert priced["wall_s"] == wall
    assert priced["usd"] == pytest.approx(32.0 * bill.charged_s(wall) / 3600)  # the instance's price, not a GPU's
    assert many.rented(line, eight, bill, 30, 2)["usd"] == pytest.approx(2 * priced["usd"])  # two of them
    assert priced["usd_lo"] < priced["usd"] < priced["usd_hi"]


def test_the_batch_is_a_gpus_unless_the_global_batch_is_kept():
    assert decide.Request(1, 64, gpus=(1, 8)).per_gpu(64, 8) == 64
    assert decide.Request(1, 64, gpus=(1, 8), nodes=2, global_batch=True).per_gpu(256, 8) == 16
    with pytest.raises(ValueError, match="does not split evenly over 8 GPUs"):
        decide.Request(1, 64, gpus=(8,), global_batch=True).per_gpu(100, 8)
    with pytest.raises(ValueError, match="--gpus must be whole numbers >= 1"):
        decide.Request(1, 64, gpus=(0, 2))
    one = {"epoch_s": 100.0, "epoch_lo": 80.0, "epoch_hi": 130.0, "needs_bytes": 5e9}
    line = many.scaled(one, 25e6, 64, 64_000, 8, 1, LINKS["nvlink4"], None, 80, 100.0)
    # 8 GPUs take 8 x 64 a step: an eighth of the steps, each a little longer than one GPU's
    assert (line["per_gpu_batch"], line["global_batch"], line["parallel"]) == (64, 512, "DDP")
    assert 100 / 8 < line["epoch_s"] < 100 / 8 * 1.1 and 0.9 < line["efficiency"] < 1
    assert line["epoch_lo"] < line["epoch_s"] < line["epoch_hi"]



def test_a_host_bound_step_stays_marked_on_many_gpus_with_the_hosts_share_of_the_longer_step():
    one = {"epoch_s": 100.0, "epoch_lo": 80.0, "epoch_hi": 130.0, "needs_bytes": 5e9, "host_share": 0.8,
           "host_bound": True, "bound_by": "GH200"}
    line = many.scaled(one, 25e6, 64, 64_000, 8, 1, LINKS["nvlink4"], None, 80, 100.0)
    step_s = line["epoch_s"] / (64_000 // (64 * 8))
    # one GPU's 1,000 steps of 0.1 s, each rank's host dispatching it as one GPU's does, and the reducer's work
    reducer = collective.HOST.seconds(collective.TENSORS_UNKNOWN, collective.buckets(GRAD_BYTES * 25e6))
    assert line["host_share"] == pytest.approx((0.8 * (100.0 / 1000) + reducer) / step_s)
    assert line["host_bound"] and line["bound_by"] == "GH200"
    unknown = many.scaled({k: v for k, v in one.items() if k != "host_share"}, 25e6, 64, 64_000, 8, 1,
                          LINKS["nvlink4"], None, 80, 100.0)
    assert unknown["host_bound"] is None  # no share said: neither bound nor free

def test_a_run_a_copy_of_which_does_not_fit_is_sharded_where_fsdp_fits():
    n_params = 7e9  # 112 GB of FP32 weights, gradients and Adam's moments, 10 GB of activations
    needs = collective.STATE_BYTES * n_params + 10e9
    assert fsdp_gpus(needs, n_params, 80e9) == 2 and fsdp_gpus(needs, n_params, 200e9) == 1
    assert fsdp_bytes(needs, n_params, 8) == pytest.approx(10e9 + 112e9 / 8)
    assert fsdp_gpus(200e9, 0.0, 80e9) is None  # activations alone too large: no count helps
    one = {"epoch_s": 100.0, "epoch_lo": 80.0, "epoch_hi": 130.0, "needs_bytes": needs}
    line = many.scaled(one, n_params, 8, 8_000, 8, 1, LINKS["nvlink4"], None, 80, 100.0)
    assert line["parallel"] == "FSDP" and line["fits"] and line["needs_bytes"] <= 80e9


def test_every_link_the_device_and_price_tables_name_is_known_with_its_source():
    devices = load_devices()
    assert all(d.link in LINKS for d in devices.values())
    for option in load_prices()[0]:
        if option.gpus > 1:
            link, network = many.links_of(option, option.gpu)
            assert link.scope == "gpu" and (network is None or network.scope == "node")
    assert many.links_of(next(o for o in load_prices()[0] if o.name == "Lambda 4x RTX A6000"), "RTX A6000")[0].key \
        == "pcie4"  # PCIe cards: priced as such
    assert all(link.source and link.date and link.bandwidth_bytes_per_s > 0 and not math.isnan(link.latency_s)
               for link in LINKS.values())


def _pairs(tensors, gpus, one_s, n_params) -> pd.DataFrame:
    """Synthetic DDP rows on H200s (NVLink 4), one a combination, as parallel --validate's pairs are laid out."""
    combos = list(itertools.product(tensors, gpus, one_s, n_params))
    return pd.DataFrame({"set": "synthetic", "host": "h", "model": [f"m{i % 4}" for i in range(len(combos))],
                         "case": "c", "gpu": "H200", "precision": "default", "gpus": [c[1] for c in combos],
                         "per_gpu_batch": 32, "n_params": [float(c[3]) for c in combos],
                         "tensors": [float(c[0]) for c in combos], "one_s": [c[2] for c in combos],
                         "step_s": math.nan})


def test_the_fit_recovers_the_reducers_planted_cost_a_tensor_and_a_bucket():
    from crossover.analysis.model import validate_parallel

    pairs = _pairs((16, 160, 400), (2, 4, 8), (0.003, 0.03, 0.2), (1e6, 100e6, 500e6))
    planted = collective.Host(per_tensor_s=25e-6, per_bucket_s=300e-6)
    pairs["step_s"] = validate_parallel.predicted(pairs, planted)["pred_s"].to_numpy()
    fitted = validate_parallel.fit_host(pairs)
    assert fitted.per_tensor_s == pytest.approx(planted.per_tensor_s, rel=1e-6)
    assert fitted.per_bucket_s == pytest.approx(planted.per_bucket_s, rel=1e-6)


def test_more_parameter_tensors_lower_the_efficiency_all_else_equal():
    one = (0.02, 0.02, 0.02)
    steps = [ddp_step(one, GRAD_BYTES * 25e6, 4, 1, LINKS["nvlink4"], tensors=t) for t in (20, 160, 600)]
    assert [s.step_s for s in steps] == sorted(s.step_s for s in steps) and steps[0].step_s < steps[-1].step_s
    effs = [collective.efficiency(one[1], 1, s.step_s) for s in steps]
    assert effs[0] > effs[1] > effs[2]
    # and the reducer's work is the counted tensors' and buckets', nothing where it costs nothing
    bare = ddp_step(one, GRAD_BYTES * 25e6, 4, 1, LINKS["nvlink4"], tensors=600, host=collective.Host(0.0, 0.0))
    assert steps[-1].step_s - bare.step_s == pytest.approx(collective.HOST.seconds(600, bare.calls))


def test_the_shipped_validation_meets_its_targets_on_the_measured_rows_and_names_the_unreachable():
    from crossover.analysis.model import validate_parallel

    found, host, spread = validate_parallel.validate()
    ours = found[found["set"] == "measured"]
    assert ours["efficiency_error"].abs().median() <= validate_parallel.TARGETS["median"]
    assert ours["efficiency_error"].abs().max() <= validate_parallel.TARGETS["worst"]
    assert host.per_tensor_s == pytest.approx(collective.HOST.per_tensor_s, rel=0.01)  # the shipped term is this fit
    beyond = validate_parallel.beyond(found)
    assert len(beyond) and (beyond["set"] == "Lambda").all() and (beyond["efficiency"] > 1).all()
    text = validate_parallel.render(found, host, spread)
    assert "rows above N times one GPU, not fitted:" in text and "us a parameter tensor" in text


def test_a_count_no_instance_has_is_priced_on_the_smallest_that_has_more_billed_whole():
    bill = Billing(step_s=1, minimum_s=60, startup_s=300, date="2026-09-20", source="x")
    options = [Option(f"Box {n}x", "P", "us", "H100", n, 8 * n, Price(4.0 * n, "2026-09-20", "x"), None)
               for n in (1, 2, 4, 8)] + [Option("Dear 4x", "Q", "us", "H100", 4, 32, Price(40.0, "2026-09-20", "x"), None)]
    assert decide.request.smallest(options, "H100", 3).name == "Box 4x"  # the fewest GPUs that are enough, the cheapest of them
    assert decide.request.smallest(options, "H100", 8).name == "Box 8x" and decide.request.smallest(options, "H100", 9) is None
    line = {"gpus": 3, "epoch_s": 100.0, "epoch_lo": 90.0, "epoch_hi": 120.0}
    priced = many.rented(line, options[2], bill, 30, 1)
    # the whole instance of 4 for the run's time on its 3, and said so
    assert priced["usd"] == pytest.approx(16.0 * bill.charged_s(300 + 30 * 100) / 3600)
    assert priced["instance_gpus"] == 4 and priced["basis"].startswith("3 of 4 x H100")
    assert many.rented(line | {"gpus": 4}, options[2], bill, 30, 1)["instance_gpus"] is None
    assert decide.Request(1, 64, gpus=(3, 8)).unoffered(options) is None
    assert decide.Request(1, 64, gpus=(3, 16)).unoffered(options) == \
        "no instance of the price table has 16 GPUs (the counts offered: 1, 2, 4, 8)"


def test_a_run_on_three_gpus_of_a_shipped_instance_of_four_is_said_so():
    options, billing = load_prices()
    offered = {o.gpus for o in options if o.gpu == "H100"}
    assert 3 not in offered and any(n > 3 for n in offered)
    step = {"epoch_s": 10.0, "epoch_lo": 9.0, "epoch_hi": 12.0, "source": "H100", "needs_bytes": 2e9}
    found = many.lines({64: pd.DataFrame([step])}, 25e6, 64, decide.Request(10, 64_000, gpus=(3,)), options, billing,
                       pd.DataFrame([step]))
    (line,) = found
    assert line.gpus == 3 and line.instance_gpus == decide.request.smallest(options, "H100", 3).gpus > 3
    assert line.kind == "on-demand" and line.per_gpu_batch == 64 and line.global_batch == 192
    assert f"(on an instance of {line.instance_gpus} GPUs, 3 used)" in decide.said(line)


def test_a_gpu_without_the_precisions_unit_is_never_faster_than_at_the_default_on_one_gpu_or_many():
    # a bf16 step counted at half the default's every cost a step: on a V100 (no BF16 unit) the run is priced at
    # the default's step itself, on 8 of them as on one, never at the narrower step's costs at the default's rates
    default = json.loads((Path(__file__).with_name("golden") / "predict-count.json").read_text())
    narrow = default | {k: v // 2 for k, v in default.items() if k.endswith("_per_step") and isinstance(v, int)} | {
        "precision": "bf16"}
    step = Step("examples/zoo.py:workload", 30, 128, 50_000, params=(("arch", "mobilenet_v2"),))
    counts = {replace(step, precision=Precision.BF16): narrow, step: default}
    offer = decide.Offer.shipped()
    at = {p: decide.answer(decide.Request(30, 50_000, axes=(("batch_size", "128"),), precision=p, gpus=(1, 8)),
                           counts, offer) for p in (Precision.BF16, Precision.DEFAULT)}
    v100 = {p: {o.gpus: o.epoch_s for o in found.lines if o.model == "V100"} for p, found in at.items()}
    assert v100[Precision.BF16].keys() == v100[Precision.DEFAULT].keys() == {1, 8}
    for gpus, epoch_s in v100[Precision.DEFAULT].items():
        assert v100[Precision.BF16][gpus] >= epoch_s * (1 - 1e-9), gpus
    h100 = {p: next(o.epoch_s for o in found.lines if o.model == "H100" and o.gpus == 8) for p, found in at.items()}
    assert h100[Precision.BF16] < h100[Precision.DEFAULT]  # a GPU with the unit gains from the narrower step

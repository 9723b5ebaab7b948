"""The per-class model and its conformal intervals (analysis/model/): it recovers a GPU planted in
synthetic rows with per-op-class costs, its conformal quantile covers at the nominal 90% over many
draws, and rows without the per-class columns fall back to the three-term model and say so."""

import numpy as np
import pandas as pd
import pytest

from crossover.analysis import model
import json

from crossover.analysis.model import operators, perclass
from crossover.analysis.model.validate import _without_optimizer
from crossover.analysis.model.perclass import _counts
from crossover.analysis.load import device_fields
from crossover.schema import CONFIG_COLUMNS, FORWARD_OPS, OP_CLASSES
from tests.test_model import device_table

# Planted GPUs: (peak FLOP/s, bytes/s, s per launch), and the parameters the rows' times follow. No two share a
# ratio of launch overhead to bandwidth: where two did, a fit on them could not tell a launch's cost on the host
# from a memory-bound op's floor (half_memory / bandwidth), which both scale a step's launches by.
# m_norm, m_grouped and u_conv_tensor at their priors: these steps have no grouped convolution or tensor cores, and
# too few norm bytes to show them, and
# a parameter the rows cannot tell apart stays at its prior (model.fit)
PLANTED = {"G1": (20e12, 2e12, 4e-6), "G2": (60e12, 4e12, 6e-6), "G3": (10e12, 0.5e12, 5e-6)}
TRUTH = {"u_matmul": 0.6, "u_tensor": 0.3, "half_matmul": 3e7, "u_conv": 0.4, "u_conv_tensor": 0.5, "half_conv": 2e8, "m_memory": 0.5, "m_norm": 0.7, "m_grouped": 0.7,
         "half_memory": 4e5, "k_launch": 3.0, "k_rnn": 2.3, "k_rnn_call": 270.0, "k_optimizer": 1.5, "k_forward": 2.0, "overlap": 2.0}


@pytest.fixture
def table(tmp_path):
    return device_table(tmp_path / "devices.yaml", PLANTED, tf32=True)


def _costs(workload: str, size: int) -> dict:
    """Per-class (FLOPs, bytes, launches) of a step and its forward ops: an MLP-like or a CNN-like op mix,
    growing with size; the launches drawn apart from the sizes and from each other, so that a kernel's, the
    optimiser's and the forward pass's launch costs show apart in the steps the host bounds."""
    s = 2.0 ** size
    n = np.random.default_rng([size, workload == "cnn"]).integers(1, 40, size=6)
    mix = {"mlp": {"matmul": (6e5 * s * s, 4e3 * s * s, 4 + n[0]), "conv": (0, 0, 0), "rnn": (0, 0, 0), "norm": (0, 0, 0),
                   "elementwise": (0, 2e4 * s, 20 + n[1]), "optimizer": (0, 3e3 * s * s, 20 + n[2])},
           "cnn": {"matmul": (2e5 * s, 1e4 * s, 4 + n[0]), "conv": (4e6 * s * s, 3e4 * s * s, 6 + n[3]), "rnn": (0, 0, 0),
                   "norm": (0, 6e4 * s, 6 + n[4]), "elementwise": (0, 9e4 * s, 20 + n[1]),
                   "optimizer": (0, 1e3 * s, 20 + n[2])}}[workload]
    return {f"{c}_{m}_per_step": int(v) for c, values in mix.items() for m, v in zip(("flops", "bytes", "launches"), values)} | {
        FORWARD_OPS: 10 + int(n[5])}


def _truth_step(key: str, costs: dict) -> float:
    peak, bandwidth, overhead = PLANTED[key]
    figures = {"tensor_matmul": np.array([False]), "tensor_conv": np.array([False]), "peak_matmul": np.array([peak]), "peak_conv": np.array([peak]), "bandwidth": np.array([bandwidth]),
               "overhead": np.array([overhead])}
    counts = _counts(pd.DataFrame([costs]), None, figures)
    theta = np.log([TRUTH[p] for p in model.PARAMETERS])
    return float(model.step_time(theta, counts, figures)[0])


def _rows(key: str, per_class: bool = True) -> pd.DataFrame:
    rows = []
    for workload in ("mlp", "cnn"):
        for size in range(1, 13):
            costs = _costs(workload, size)
            totals = {f"{m}_per_step": sum(costs[f"{c}_{m}_per_step"] for c in OP_CLASSES)
                      for m in ("flops", "bytes", "launches")}
            config = dict.fromkeys(CONFIG_COLUMNS) | {"workload": workload, "depth": size, "batch_size": 100,
                                                      "dataset_size": 1000, "epochs": 5, "seed": 0, "loop": "fast"}
            rows.append(config | totals | (costs if per_class else dict.fromkeys(costs)) | {
                "device": "cuda", "engine": "eager", "status": "ok", "device_name": f"NVIDIA Planted {key}",
                "torch_threads": 1, "model": f"{workload} {size}", "n_params": 10 * size, "steps_per_epoch": 10,
                "epoch_s_median": 10 * _truth_step(key, costs)})
    rows = pd.DataFrame(rows)
    return rows.assign(**device_fields(rows))  # what the model reads of load.read()'s additions


def test_the_per_class_model_recovers_a_planted_gpu_and_its_parameters(table):
    measured = pd.concat([_rows("G1"), _rows("G2")], ignore_index=True)
    fitted = model.fit(model.gpu_rows(measured, model.load_devices(table)), model.load_devices(table))
    got = fitted.parameters()
    for name in ("k_launch", "k_optimizer", "k_forward", "u_matmul", "u_conv"):  # the terms that bound a step
        assert got[name] == pytest.approx(TRUTH[name], rel=0.05), name
    predicted = model.predict(measured, ["G3", "G1"], table)
    assert set(predicted["device_name"]) == {"G3"}  # G1 was measured: the measurement wins
    assert (predicted["model_form"] == model.PER_CLASS).all()
    truth = _rows("G3").set_index(["workload", "depth"])["epoch_s_median"]
    got = predicted.set_index(["workload", "depth"])["epoch_s_median"]
    assert np.allclose(got, truth.loc[got.index], rtol=0.03)
    assert ((predicted["epoch_s_lo"] <= got.to_numpy()) & (got.to_numpy() <= predicted["epoch_s_hi"])).all()
    assert set(predicted["interval_from"]) == {"device"}  # a workload the fit saw: leave-one-device-out's


def test_a_step_listed_op_by_op_costs_the_gpu_what_each_op_costs(table):
    # one op a class carrying the class's totals is the per-class model, and so is any split of it: each op's
    # compute and memory bounds, (F + n s_half) / (peak u) and (B + n b_half) / (bandwidth m), are linear in its
    # FLOPs, bytes and launches; the ops differ from their class where each takes the larger of its own two
    rows = model.gpu_rows(_rows("G1"), model.load_devices(table))
    devices, theta = model.load_devices(table), np.log([TRUTH[p] for p in model.PARAMETERS])
    figures = perclass._figures(rows, devices)

    def listed(split):
        return [json.dumps([[c, "float32", r[f"{c}_flops_per_step"] / split, r[f"{c}_bytes_per_step"] / split,
                             r[f"{c}_launches_per_step"] / split, split] for c in OP_CLASSES
                            if r[f"{c}_launches_per_step"]]) for _, r in rows.iterrows()]
    per_class = model.step_time(theta, _counts(rows, None, figures), figures)
    one = model.step_time(theta, _counts(rows.assign(ops_per_step=listed(1)), devices, figures), figures)
    halves = model.step_time(theta, _counts(rows.assign(ops_per_step=listed(2)), devices, figures), figures)
    assert np.allclose(one, per_class)
    assert np.allclose(halves, per_class)
    # a compute-bound op and a memory-bound one, against the two summed into one op that compute bounds
    apart = [json.dumps([["matmul", "float32", 1e12, 1e6, 1, 1], ["matmul", "float32", 1e3, 1e11, 1, 1]])] * len(rows)
    summed = [json.dumps([["matmul", "float32", 1e12 + 1e3, 1e11 + 1e6, 2, 1]])] * len(rows)
    zero = {c: 0 for c in model.CLASS_COLUMNS}
    got = [model.step_time(theta, _counts(rows.assign(**zero, ops_per_step=v), devices, figures), figures)
           for v in (apart, summed)]
    assert (got[0] > 1.5 * got[1]).all()  # apart, each pays its own bound: the memory-bound op's bytes count


def test_a_recurrent_step_costs_the_host_cudnn_s_kernels_and_calls_apart_from_pytorch_s_ops(table):
    # cuDNN issues its kernels itself: k_rnn each, and k_rnn_call for each cuDNN RNN call of the op list (its entries'
    # times dispatched); the other classes' kernels k_launch
    rows = model.gpu_rows(_rows("G1"), model.load_devices(table)).iloc[:1]
    devices = model.load_devices(table)
    figures = perclass._figures(rows, devices)
    p, overhead = TRUTH, figures["overhead"][0]
    rnn = {"rnn_flops_per_step": 1e9, "rnn_bytes_per_step": 1e6, "rnn_launches_per_step": 600}
    listed = json.dumps([["rnn", "float32", 6e8, 6e5, 300, 2], ["rnn", "float32", 4e8, 4e5, 300, 1],
                         ["elementwise", "float32", 0, 1e3, 1, 4]])
    counts = _counts(rows.assign(**rnn, ops_per_step=listed), devices, figures)
    host = {c: t[0][0] for c, t in model.class_times(np.log([p[k] for k in model.PARAMETERS]), counts, figures).items()}
    assert host["rnn"] == pytest.approx(600 * overhead * p["k_rnn"])
    assert host[perclass.RNN_CALLS] == pytest.approx(3 * overhead * p["k_rnn_call"])
    assert host["elementwise"] == pytest.approx(rows["elementwise_launches_per_step"].iloc[0] * overhead * p["k_launch"])
    # a row without an op list has no calls counted
    without = _counts(rows.assign(**rnn, ops_per_step=None), devices, figures)
    assert without[perclass.RNN_CALLS][2][0] == 0


def test_the_op_study_prices_each_op_from_the_other_shapes_and_from_the_other_gpu(tmp_path):
    # two GPUs' studies of bf16 products, each at one share of its GPU's peak: every shape left out is priced at that
    # share from the others (no error), and each GPU from the other's study scaled by the roofline
    devices = model.load_devices()
    rows = [{"device_name": name, "group": "matmul", "case": "mm", "params": str(f), "precision": "bf16",
             "op_class": "matmul", "flops": f, "bytes": 1e3, "ops": 1, "kernels": 1.0,
             "gpu_s": f / (0.5 * devices[key].bf16_flops)}
            for key, name in (("H100", "NVIDIA H100 80GB HBM3"), ("H200", "NVIDIA H200"))
            for f in (1e11, 1e12, 1e13, 1e14)]
    pd.DataFrame(rows).to_parquet(tmp_path / "ops-both.parquet")
    table = model.op_study(folder=tmp_path).set_index(["gpu", "left_out"])
    assert table.loc[("H100", "shape"), "median_error"] == pytest.approx(0, abs=1e-6)
    assert table.loc[("H200", "shape"), "ops"] == 4
    # the H100 and the H200 have one bf16 peak: from the other GPU, each op at its own time
    assert table.loc[("H100", "GPU (from H200)"), "median_error"] == pytest.approx(0, abs=1e-6)
    # one shape twice as slow: left out, it is priced at the others' share, 50% under its time
    pd.DataFrame(rows).assign(gpu_s=lambda t: t["gpu_s"] * np.where(t["flops"].eq(1e12), 2, 1)).to_parquet(
        tmp_path / "ops-both.parquet")
    operators.studies.cache_clear(), operators.study_table.cache_clear()
    slow = model.op_study(folder=tmp_path)
    assert slow["p90_error"].max() > 0.3
    assert "never fitted on" in model.render_op_study(slow)


def test_conformal_intervals_cover_at_their_nominal_rate_over_many_draws():
    # 2,000 trials: 19 calibration residuals and one new one, exchangeable (heavy-tailed, skewed);
    # the new one falls within the conformal quantile in 90% of trials (at least, and about: k/(n+1) = 18/20)
    rng = np.random.default_rng(0)
    draws = rng.standard_t(3, size=(2000, 20)) + 0.3
    inside = [abs(d[-1]) <= model.conformal_q(d[:-1]) for d in draws]
    assert np.mean(inside) == pytest.approx(0.9, abs=0.03)
    assert model.conformal_q([0.1, 0.2]) == float("inf")  # too few scores for the level: unbounded
    assert model.conformal_q(np.arange(1, 101) / 100) == pytest.approx(0.91)  # ceil(101 x 0.9) = 91st


def test_rows_without_the_per_class_columns_fall_back_to_the_three_term_model_and_say_so(table):
    measured = pd.concat([_rows("G1", per_class=False), _rows("G2", per_class=False)], ignore_index=True)
    predicted = model.predict(measured, ["G3"], table)
    assert (predicted["model_form"] == model.THREE_TERM).all() and predicted["epoch_s_median"].gt(0).all()
    checked = model.validate(measured, table)
    assert set(checked["form"]) == {model.THREE_TERM}
    assert "three-term" in model.render_validation(checked)


def test_validation_holds_out_each_gpu_and_each_workload_and_covers_the_planted_truth(table):
    rows = pd.concat([_rows(k) for k in PLANTED], ignore_index=True)
    checked = model.validate(rows, table)
    device = checked[checked["split"] == "device"]
    assert set(device["held_out"]) == set(PLANTED) and device["median_error"].max() < 0.03
    assert set(checked.loc[checked["split"] == "workload", "held_out"]) == {"mlp", "cnn"}
    text = model.render_validation(checked)
    assert "leave one GPU out, every GPU with rows" in text and f"on {len(PLANTED)} GPU models" in text


def test_model_validate_without_dirs_validates_the_shipped_reference_rows(capsys):
    from crossover.analysis.__main__ import main

    assert main(["model", "--validate"]) == 0
    out = capsys.readouterr().out
    assert "== leave one GPU out" in out and "== leave one workload out" in out
    assert "== targets (per-class model, GPU rows; printed, not asserted" in out and "H200" in out


def test_rows_written_before_the_forward_count_take_it_from_the_cpus_count_of_their_configuration():
    from crossover.analysis.load import REFERENCE, read

    rows = read(REFERENCE / "h100-2026-11-26" / "scaling")
    assert rows[FORWARD_OPS].isna().all()  # measured before the column existed
    usable = model.gpu_rows(rows, model.load_devices())
    assert len(usable) and usable[FORWARD_OPS].notna().all()
    counted = pd.read_parquet(model.COUNTED)
    grid = usable.dropna(subset=["depth", "width"])  # the grids, whose configurations `keys` name
    assert grid["workload"].nunique() >= 2
    keys = ["workload", "depth", "width", "context", "batch_size"]
    for _, row in grid.drop_duplicates(keys).iterrows():
        same = counted[np.logical_and.reduce([counted[k].eq(row[k]) | (counted[k].isna() & pd.isna(row[k])) for k in keys])]
        assert same[FORWARD_OPS].tolist() == [row[FORWARD_OPS]]
    # a row the count has no configuration of stays without it, and the per-class model leaves it to the three-term one
    odd = rows.iloc[[0]].assign(batch_size=rows["batch_size"].iloc[0] + 1)
    assert model.form_of(model.gpu_rows(odd, model.load_devices())).eq(model.THREE_TERM).all()


def test_neusight_labels_are_set_against_the_count_without_its_optimiser_step(tmp_path):
    # labels drawn from the shipped fit's own prediction of the step without its optimiser: no error, every label
    # inside; labels of half that time: 100% too slow, each GPU's target missed
    counts = pd.read_parquet(model.NEUSIGHT_COUNTED)
    counts = counts[(counts["label_model"] == "bert_large") & (counts["batch_size"] == 2)]
    counts.to_parquet(tmp_path / "counts.parquet")
    stripped = _without_optimizer(counts)
    assert stripped["optimizer_flops_per_step"].eq(0).all() and stripped["optimizer_launches_per_step"].eq(0).all()
    assert np.allclose(stripped["bytes_per_step"], counts["bytes_per_step"] - counts["optimizer_bytes_per_step"])
    kinds = {op[0] for op in json.loads(stripped["ops_per_step"].iloc[0])}
    assert "optimizer" not in kinds and "matmul" in kinds
    gpus = {"H100": "NVIDIA H100 80GB HBM3", "V100": "Tesla V100-PCIE-32GB"}
    predicted = model.predict_counted(stripped.drop(columns=["label_model", "seq_len"]), list(gpus))
    labels = pd.DataFrame({"device_name": list(gpus.values()), "model": "bert_large", "seq_len": 512, "batch_size": 2,
                           "train_ms": 1e3 * predicted.set_index("device_name").loc[list(gpus), "epoch_s_median"].to_numpy()})
    labels.to_csv(tmp_path / "exact.csv", index=False)
    labels.assign(train_ms=labels["train_ms"] / 2).to_csv(tmp_path / "fast.csv", index=False)
    exact, fast = (model.neusight(labels=tmp_path / f"{name}.csv", counted=tmp_path / "counts.parquet")
                   for name in ("exact", "fast"))
    assert sorted(exact["gpu"]) == ["H100", "V100"] and np.allclose(exact["error"], 0) and exact["inside"].all()
    assert np.allclose(fast["error"], 1)
    assert model.render_neusight(exact).count(": met") == 2
    text = model.render_neusight(fast)
    assert text.count(": missed") == 2 and "predicted too slow" in text


def test_the_memory_check_sets_the_counted_peak_against_the_measured_one_batchs_data(tmp_path):
    # a run that kept 8 batches of 1 MB samples on the GPU measured 7 batches' data more than a run of one batch holds
    rows = pd.DataFrame({"workload_params": ['{"arch": "a"}', '{"arch": "b"}'], "batch_size": [4, 4],
                         "precision": ["default", "bf16"], "dataset_size": [32, 32], "device_name": ["H100", "H100"],
                         "peak_gpu_bytes": [1e9 + 28e6, 2e9 + 28e6], "rnn_flops_per_step": [0.0, 1e9]})
    counted = pd.DataFrame({"workload_params": rows["workload_params"], "batch_size": 4, "precision": rows["precision"],
                            "peak_memory_bytes": [1.1e9, 3e9], "sample_bytes": 1e6})
    counted.to_parquet(tmp_path / "memory.parquet")
    table = model.memory(rows, tmp_path / "memory.parquet")
    assert list(table["model"]) == ["a", "b"] and np.allclose(table["measured_gb"], [1.0, 2.0])
    assert np.allclose(table["error"], [0.1, 0.5])
    text = model.render_memory(table)
    assert "within 15%: 1 of 2" in text and "missed" in text and "+50% (b batch 4 bf16)" in text
    assert "cuDNN workspace" in text and "why (the others)" not in text  # b runs cuDNN's recurrent nets: their reason
    as_not = model.render_memory(table.assign(recurrent=False))
    assert "cuDNN workspace" not in as_not and "why (the others)" in as_not
    assert model.render_memory(table.iloc[:1]).endswith("(a batch 4 default): met")

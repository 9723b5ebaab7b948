"""`crossover predict` run as a process on a job file written here: a line per GPU model with its interval and
whether the run fits, the same figures as JSON; a job that hangs is stopped by the time limit, one that
exits is named with its status, each in one line and exit status 2; and a step counted on the meta device
counts what the CPU counts."""

import dataclasses
import json
import re

import pytest
import torch
from test_command import crossover

from crossover.analysis import model
from crossover.schema import OP_COLUMNS
from crossover.config import TrialConfig
from crossover.sweeps.count_step import as_on_a_gpu, counted
from crossover.trainables.timing import Clock, Timer
from crossover.trainables.train import Loop
from crossover.trainables.trial import resolve
from crossover.trainables.registry import Registry

register = Registry().register  # this module's workloads, imported here

JOB = """
import torch
from torch import nn
from crossover.data import Data
from crossover.workload import Param, Workload


def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, cfg.params["n_features"], generator=g)
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")

def mlp(cfg):
    {hook}
    return nn.Sequential(nn.Linear(cfg.params["n_features"], cfg.width), nn.ReLU(), nn.Linear(cfg.width, 2))

workload = Workload("pred_mlp", make_data=data, make_model=mlp, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.Adam(params, lr=lr),
                    defaults={"width": 64, "batch_size": 64, "dataset_size": 4096, "epochs": 3, "lr": 1e-3},
                    axes={"width"}, params={"n_features": Param(16, low=1, high=100_000)})
"""


def job(tmp_path, name: str, hook: str = "pass") -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(JOB.replace("{hook}", hook))
    return f"{path}:workload"


def test_predict_prints_every_gpu_with_its_interval_and_fit_and_the_same_as_json(tmp_path):
    ref = job(tmp_path, "pred_job")
    run = ["predict", "--workload", ref, "--batch-size", "256", "--dataset-size", "60000", "--epochs", "20",
           "--width", "512", "--param", "n_features=100", "--gpus", "1"]
    done = crossover(*run)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()  # the first screen: decide's picks, each with its time per epoch, run and cost
    assert len(first) <= 25 and max(map(len, first)) <= 100, done.stdout
    # a GPU's run of seconds beside a rental's 3 minutes of start-up: the first line says a box beats every rental
    assert first[0].startswith("a box beats every rental here: ") and "start-up included" in " ".join(first[:3])
    said = " ".join(done.stdout.split())  # a line wraps onto indented lines
    assert "== pred_mlp (width 512, n_features 100): 20 epochs of 60,000 samples, batch 256 a GPU, precision " \
        "default" in said, done.stdout
    for pick in ("rent, fastest: ", "buy: "):  # a pick wraps onto indented lines: its words up to the next ';'
        words = said[said.index(pick):].split(";")[0]
        taken = words.split(" s/epoch")[1]  # the run's time, in s under a minute, then min or h
        assert "$" in words and any(f" {unit} " in taken or f" {unit}," in taken for unit in ("s", "min", "h")), words
    assert sum(t.startswith("your CPU: ") for t in first) == 1
    assert "with 3 min start-up" in said  # a rental's run time holds its start-up, said beside it
    assert "crossover sweep --workload" in said and "--devices cpu" in said  # the CPU: nothing here timed it
    assert "s/epoch" in said and not any(t.split()[:2] == ["GPUs", "s/epoch"] for t in first)  # the table: --verbose

    lines = crossover(*run, "--verbose").stdout.splitlines()
    assert max(map(len, lines)) <= 100  # the table split into tables that fit, each led by the GPU
    heads = [i for i, line in enumerate(lines) if line.split()[:1] == ["GPUs"]]
    tables = [lines[i + 1:i + 1 + len(model.load_devices())] for i in heads]
    assert lines[heads[0]].split()[1] == "s/epoch" and lines[heads[-1]].split()[-1] == "fits"
    assert "start-up" in " ".join(lines[i] for i in heads)
    gpus = model.load_devices()
    for table in tables:  # each table's first column the GPU (the longest name a line begins with)
        assert sorted(max((g for g in gpus if f"{line.strip()} ".startswith(f"{g} ")), key=len) for line in table) \
            == sorted(gpus)
    for line in tables[0]:  # '~14.6 (8.5-25)': predicted, with its 90% interval
        assert any(c.startswith("~") for c in line.split()) and "-" in line.split("(")[1], line
    assert all(line.split()[-1] == "yes" for line in tables[-1])  # a small MLP fits every card
    # every option's name whole, and every run said alike: the GPU alone, the start-up in its own column
    said = "\n".join(line for table in tables for line in table)
    assert "RunPod H100 SXM community" in said and "no price" in said, tables
    assert "Nothing here was timed" in "\n".join(lines)

    done = crossover(*run, "--json", "-")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)  # stdout holds the JSON alone; the table went to stderr
    boxes = [r for r in listed if r["kind"] == "home box"]  # the boxes the picks may name, as decide prices them
    assert "s/epoch" in done.stderr and len(listed) - len(boxes) == len(model.load_devices()) and boxes
    listed = [r for r in listed if r["kind"] != "home box"]
    fields = {"option", "gpu", "batch_size", "dataset_size", "epoch_s", "epoch_s_low", "epoch_s_high", "run_s", "usd",
              "fits", "basis", "precision"}
    assert all(fields <= set(r) for r in listed) and {r["precision"] for r in listed} == {"default"}
    assert {r["gpu"] for r in listed} == set(model.load_devices())
    for r in listed:
        assert (r["batch_size"], r["dataset_size"], r["basis"], r["fits"]) == (256, 60000, "predicted", True)
        assert r["epoch_s_low"] < r["epoch_s"] < r["epoch_s_high"]
        # the GPU alone where no option prices it; where one does, its run as it bills it: its start-up beside it,
        # and the price's date
        if r["usd"] is None:
            assert r["run_s"] == pytest.approx(20 * r["epoch_s"]) and r["price_date"] is None
        else:
            assert r["run_s"] > 20 * r["epoch_s"] and re.fullmatch(r"20\d\d-\d\d(-\d\d)?", r["price_date"]), r
    assert any(r["usd"] is None for r in listed) and any(r["usd"] > 0 for r in listed if r["usd"] is not None)


def test_predict_on_several_gpus_keeps_the_global_batch_where_asked_and_says_each_lines_gpus_in_json(tmp_path):
    ref = job(tmp_path, "pred_many")
    done = crossover("predict", "--workload", ref, "--batch-size", "256", "--dataset-size", "60000", "--epochs", "20",
                     "--width", "512", "--param", "n_features=100", "--gpus", "1,8", "--global-batch", "--json", "-")
    assert done.returncode == 0, done.stderr
    listed = [r for r in json.loads(done.stdout) if r["kind"] != "home box"]  # the GPUs' lines, on 1 and 8
    assert all({"gpus", "nodes", "per_gpu_batch", "global_batch", "efficiency"} <= set(r) for r in listed)
    one = [r for r in listed if r["gpus"] == 1]
    eight = [r for r in listed if r["gpus"] == 8]
    assert len(one) == len(model.load_devices()) and eight  # every GPU on one; on 8, those an instance offers
    # --global-batch: the run's batch of 256 split over the GPUs, 32 a GPU on 8
    assert {(r["per_gpu_batch"], r["global_batch"], r["nodes"]) for r in one} == {(256, 256, 1)}
    assert {(r["per_gpu_batch"], r["global_batch"], r["nodes"]) for r in eight} == {(32, 256, 1)}
    assert all(r["efficiency"] == 1.0 for r in one) and all(0 < r["efficiency"] < 1 for r in eight)
    assert any(r["option"] == "Lambda 8x H100 SXM" for r in eight)  # the cheapest 8 x H100, whole
    assert "fastest:" in done.stderr and max(map(len, done.stderr.splitlines())) <= 100


def test_a_job_whose_make_model_hangs_is_stopped_by_the_time_limit_in_one_line(tmp_path):
    ref = job(tmp_path, "pred_hang", "import time; time.sleep(600)")
    done = crossover("predict", "--workload", ref, "--epochs", "1", "--timeout", "5")
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: --workload {ref}: counting one step did not finish within 5 s and was stopped")
    assert "give --timeout more seconds" in line


def test_a_job_that_exits_is_named_with_its_exit_status_in_one_line(tmp_path):
    ref = job(tmp_path, "pred_exit", "import os; os._exit(3)")
    done = crossover("predict", "--workload", ref, "--epochs", "1")
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: --workload {ref}: the process counting one step exited with status 3 before "
                           "it printed its counts"), line
    assert "python -m crossover.sweeps.count_step --workload" in line


def test_a_job_that_raises_while_counted_is_named_by_its_error_and_line_and_the_command_shows_the_traceback(tmp_path):
    import shlex
    import subprocess
    import sys

    ref = job(tmp_path, "pred_raises", 'raise ValueError("bad width")')
    done = crossover("predict", "--workload", ref, "--epochs", "1")
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "ValueError: bad width (in mlp, pred_raises.py:14)" in line  # as a failed trial's row says it
    suggested = shlex.split(line[line.index("(python -m ") + 1:line.index(" runs it alone")])
    alone = subprocess.run([sys.executable, *suggested[1:]], capture_output=True, text=True, timeout=600)
    assert alone.returncode == 1 and 'raise ValueError("bad width")' in alone.stderr  # the traceback's frame


def test_one_step_is_counted_whatever_epochs_the_jobs_defaults_give(tmp_path):
    path = tmp_path / "pred_one_epoch.py"
    path.write_text(JOB.replace("{hook}", "pass").replace('"epochs": 3', '"epochs": 1'))
    one = counted(f"{path}:workload", None, None, {}, {})  # a trial's warm-up epoch is no part of one step
    assert (one["workload"], one["batch_size"], one["counted_on"]) == ("pred_mlp", 64, "meta")


def test_a_step_counted_on_the_meta_device_counts_what_the_cpu_counts_with_a_gpus_optimiser(tmp_path):
    ref = job(tmp_path, "pred_meta")
    on_meta = counted(ref, 32, 1000, {"width": 128}, {})
    assert on_meta["counted_on"] == "meta" and on_meta["steps_per_epoch"] == 32  # 1,000 samples in batches of 32
    wl = register(ref)
    trial = resolve(TrialConfig(wl.name, batch_size=32, dataset_size=32, width=128, module=wl.ref))
    cpu = torch.device("cpu")
    from crossover.trainables.placement import Placement
    loop = Loop.build(trial, Placement((cpu,)), Timer(Clock((cpu,))))
    per_parameter = loop.step_costs()  # the CPU's own optimiser: an op or more per parameter tensor
    as_on_a_gpu(loop.opt)
    on_cpu = loop.step_costs()
    measures = ["flops_per_step", "bytes_per_step", "launches_per_step", *OP_COLUMNS]
    assert {m: on_meta[m] for m in measures} == {m: on_cpu[m] for m in measures}
    # the update counted as a GPU runs it (foreach): fewer ops than the CPU's loop over the 4 parameter tensors
    assert on_meta["optimizer_launches_per_step"] < per_parameter["optimizer_launches_per_step"]
    assert on_meta["n_params"] == 16 * 128 + 128 + 128 * 2 + 2
    assert dataclasses.asdict(trial.cfg)["dataset_size"] == 32


def test_attention_is_counted_as_the_fused_kernel_a_gpu_runs_not_as_the_meta_devices_math():
    from crossover.sweeps.count_step import attention_as_on_a_gpu
    from crossover.trainables.costs import count

    def step():  # a fresh layer each time: no gradient left to accumulate into
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).to("meta")
        layer(torch.randn(2, 16, 32, device="meta")).sum().backward()

    math = count(step, False)
    with attention_as_on_a_gpu():
        fused = count(step, False)
    assert torch.nn.functional.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention  # restored
    # one forward and one backward kernel in place of the bmm, softmax, scaling and their backward
    assert fused["matmul_launches_per_step"] < math["matmul_launches_per_step"]
    assert fused["elementwise_launches_per_step"] < math["elementwise_launches_per_step"]
    assert fused["matmul_flops_per_step"] > 0 and fused["launches_per_step"] < math["launches_per_step"]


def test_a_recurrent_net_is_counted_as_the_cudnn_ops_a_gpu_runs_not_as_its_cells():
    from crossover.sweeps.count_step import rnn_as_on_a_gpu
    from crossover.trainables.costs import count

    lstm = torch.nn.LSTM(8, 16, num_layers=2).to("meta")

    def step():
        out, (h, c) = lstm(torch.randn(10, 3, 8, device="meta"))  # (steps, batch, features): not batch_first
        assert out.shape == (10, 3, 16) and h.shape == c.shape == (2, 3, 16)
        out.sum().backward()

    cells = count(step, False)
    unrolled = torch._VF.lstm
    with rnn_as_on_a_gpu():
        cudnn = count(step, False)
    assert torch._VF.lstm is unrolled  # restored
    # the cells' hundreds of element-wise ops gone; the matrix products one forward and one backward op,
    # counted as their kernels
    assert cudnn["elementwise_launches_per_step"] < cells["elementwise_launches_per_step"] / 10
    assert cudnn["rnn_flops_per_step"] > cells["matmul_flops_per_step"] > 0  # cuDNN's first state gradient


def test_a_run_that_does_not_fit_a_card_says_the_largest_batch_that_does_and_the_steps_to_accumulate():
    from crossover.analysis import decide
    from crossover.analysis.decide.screen import smaller_note
    from crossover.analysis.decide import smaller
    nan = float("nan")
    lines = [decide.Line(option=f"{model} (no price)", kind=decide.NO_PRICE, model=model, gpus=1, wall_s=nan,
                         wall_lo_s=nan, wall_hi_s=nan, wall_h=nan, wall_lo_h=nan, wall_hi_h=nan, usd=nan, usd_lo=nan,
                         usd_hi=nan, predicted=True, basis="", fits=fits, needs_gb=needs, memory_gb=memory)
             for model, fits, needs, memory in (("H100", True, 10.0, 80.0), ("V100", False, 20.0, 16.0),
                                                ("T4", False, 20.0, 16.0), ("GTX 960", False, 20.0, 2.0),
                                                ("L4", None, nan, nan))]
    # 20 GB at batch 256, 0.05 GB a sample: 7.2 GB fixed, 176 samples on a 16 GB card, 2 steps of them make 256
    out = smaller(lines, {"batch_size": 256, "peak_memory_per_sample_bytes": 0.05e9})
    assert [o.largest_batch for o in out] == [None, 176, 176, 0, None]
    assert [o.accumulate_steps for o in out] == [None, 2, 2, None, None]
    note = smaller_note(out, 256)
    assert note == ("does not fit: V100, T4: largest batch that fits: 176 (accumulate 2 steps for batch 256); "
                    "GTX 960: not even batch 1 fits")
    assert all(o.largest_batch is None for o in smaller(lines, {"batch_size": 1, "peak_memory_per_sample_bytes": None}))


def test_predict_and_decide_give_one_figure_for_one_planned_run_on_every_gpu(tmp_path):
    # the user's CPU rows measured 256 samples; the run is 50,000: decide, like predict, prices each GPU at the model's
    # prediction of the run's own configuration, its step counted as predict counts it, never the 256 scaled 195x
    from analysis_rows import frame, row

    from crossover.analysis import decide, prices
    from crossover.analysis.decide.speeds import NOT_COUNTED
    from crossover.step import Step

    ref = job(tmp_path, "pred_same")
    step = counted(ref, 64, 50_000, {"width": 128}, {"n_features": 16})
    as_the_cpu_counts = {c: step[c] for c in step if c.endswith("_per_step")} | {
        "optimizer_launches_per_step": step["optimizer_launches_per_step"] + 40,  # the CPU's loop over the tensors
        "launches_per_step": step["launches_per_step"] + 40}
    mine = frame([row("pred_mlp", "cpu", [0.01, 0.011, 0.012], batch_size=64, dataset_size=256, width=128, depth=None,
                      steps_per_epoch=4, n_params=step["n_params"], workload_params='{"n_features": 16}',
                      workload_module=ref, **as_the_cpu_counts)])
    options, billing = prices.load_prices()
    plan = decide.Request(10, 50_000, axes=(("batch_size", "64"),))
    # the step decide looks up is the one predict is asked for (`crossover predict --workload REF --epochs 10
    # --batch-size 64 --dataset-size 50000 --width 128 --param n_features=16`), and decide takes its count as data
    wanted = Step(ref, 10, 64, 50_000, (("width", 128),), (("n_features", 16),))
    assert decide.steps(mine, plan) == (wanted,) and decide.wanted(mine, plan) == wanted
    offer = decide.Offer(tuple(options), billing)  # no home box
    # one function answers both: the rows with the step's count (decide), and the count alone (predict)
    answer = decide.answer(plan, {wanted: step}, offer, mine)
    found, notes = answer.lines, answer.notes
    said = [o for o in decide.answer(plan, {wanted: step}, offer).lines if o.gpus == 1]
    priced = [o for o in said if o.kind != decide.NO_PRICE]
    assert len(priced) >= 5 and not any("not counted" in n for n in notes)
    for line in priced:
        same = next(o for o in found if o.option == line.option)
        assert same.reach == decide.OWN_SIZE and same.predicted
        for figure in ("epoch_s", "epoch_lo", "epoch_hi", "wall_s", "usd", "usd_lo", "usd_hi"):
            assert getattr(same, figure) == pytest.approx(getattr(line, figure), rel=1e-9), (line.option, figure)
    # the CPU: its step as timed at 256 samples (4 steps), x 50,000's 782 steps, never a line per sample
    own = next(o for o in found if o.kind == decide.OWN_CPU)
    assert own.epoch_s == pytest.approx(0.011 * 782 / 4) and own.reach == "195x past 256, its step as timed there"
    # without predict's count (decide(counts=None)), a row's count: another step, another figure
    alone = decide.decide(mine, None, options, billing, [], plan=plan).lines
    h100 = [next(o.epoch_s for o in found if o.model == "H100"), next(o.epoch_s for o in alone if o.model == "H100")]
    assert h100[1] > h100[0]
    # a step the command layer could not count is handed as why: the note names it, the figures are the row's count's
    failed = decide.decide(mine, None, options, billing, [], plan=plan, counts={wanted: "--workload x: it hung"})
    (note,) = [n for n in failed.notes if NOT_COUNTED in n]
    assert note.startswith(f"  {NOT_COUNTED} as crossover predict counts it (--workload x: it hung): "
                           "figures fall back to the step a row counted")
    assert [o.epoch_s for o in failed.lines] == [o.epoch_s for o in alone]
    # at bf16, decide looks the step up at PyTorch's default precision too
    bf16 = dataclasses.replace(plan, precision="bf16")
    assert decide.steps(mine, bf16) == (dataclasses.replace(wanted, precision="bf16"), wanted)


def test_crossover_decide_counts_the_planned_step_and_the_analysis_alone_says_it_did_not(tmp_path):
    # `crossover decide` counts the planned step in a child process, as predict does (sweeps/counting.py), and hands
    # the analysis the count; `python -m crossover.analysis decide` starts no process: its figures rest on the row's
    # own count, and a note says so and which command counts it
    import subprocess
    import sys

    from analysis_rows import row, write
    from test_command import ROOT

    ref = job(tmp_path, "pred_both")
    step = counted(ref, 64, 256, {"width": 128}, {"n_features": 16})
    # the row's own count is the CPU's (an optimiser launch per tensor and more): not the step predict counts
    mine = [row("pred_mlp", "cpu", [0.01, 0.011, 0.012], batch_size=64, dataset_size=256, width=128, depth=None,
                steps_per_epoch=4, n_params=step["n_params"], workload_params='{"n_features": 16}', workload_module=ref,
                **{c: step[c] for c in step if c.endswith("_per_step")} | {"optimizer_launches_per_step": 99})]
    results = write(mine, tmp_path / "mine")
    run = ["decide", str(results), "--epochs", "10", "--dataset-size", "50000", "--no-reference",
           "--out", str(tmp_path / "charts"), "--json", "-"]
    said, notes = {}, {}
    for name, command in (("crossover decide", ["-m", "crossover.sweeps.command"]),
                          ("python -m crossover.analysis decide", ["-m", "crossover.analysis"])):
        done = subprocess.run([sys.executable, *command, *run], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (name, done.stderr)
        said[name] = {r["option"]: r for r in json.loads(done.stdout) if r["gpu"]}
        notes[name] = " ".join(done.stderr.split())
    ours, alone = said.values()
    assert "not counted" not in notes["crossover decide"]  # the step counted as predict counts it
    assert "not counted as crossover predict counts it (python -m crossover.analysis counts nothing)" in \
        notes["python -m crossover.analysis decide"]
    assert len(ours) >= 5 and ours.keys() == alone.keys()
    assert all(figures["source"] == "predicted" for figures in ours.values())
    # the row's 99 optimiser launches a step, against the counted step's few: every GPU slower on the row's count
    assert all(alone[option]["epoch_s"] > figures["epoch_s"] for option, figures in ours.items())


def test_the_gpus_without_the_unit_of_the_runs_precision_are_named_in_one_note():
    from crossover.analysis.decide import Request
    from crossover.analysis.decide.screen import unit_note
    from crossover.schema import Precision
    at = {p: Request(1, 64, precision=p) for p in Precision}
    assert unit_note(at[Precision.DEFAULT], ["H100", "V100"]) == "" and unit_note(at[Precision.BF16], ["H100", "A100"]) == ""
    note = unit_note(at[Precision.BF16], ["H100", "V100", "T4", "V100"])
    assert note.startswith("no BF16 unit on V100, T4:") and "FP32 peak" in note
    assert unit_note(at[Precision.FP16], ["V100", "T4"]) == ""  # their tensor cores take FP16

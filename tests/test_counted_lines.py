"""A step counted at two batch sizes answers every other batch by arithmetic (crossover.step Counted), and a step
whose ops depend on its data is counted: a detector (region proposals, NMS, ROI align), a top-2 mixture of experts
(topk, nonzero, index_add_) and a recurrence written as a Python loop of hundreds of steps, each through the counting
process as `crossover predict` counts it (sweeps/count_cache.py), none at the run's own batch for real."""

import json
from dataclasses import replace

import pytest

from crossover.step import Counted, Step
from crossover.sweeps import count_cache


def op(kind: str, flops: int, moved: int, launches: int = 1) -> list:
    return [kind, "float32", flops, moved, launches]


def row(batch: int, sequence: list, **figures) -> dict:
    return {"batch_size": batch, "dataset_size": batch, "workload": "w", "n_params": 10, "ops_sequence": sequence,
            **figures}


def test_the_same_ops_larger_are_a_line_through_the_two_counts():
    small = row(2, [op("matmul", 200, 40), op("elementwise", 0, 16)], flops_per_step=200, launches_per_step=2)
    large = row(4, [op("matmul", 400, 72), op("elementwise", 0, 32)], flops_per_step=400, launches_per_step=2)
    line = Counted.of(small, large)
    at = line.at(10, 100)
    assert (at["flops_per_step"], at["launches_per_step"], at["steps_per_epoch"]) == (1000, 2, 10)
    assert json.loads(at["ops_per_step"]) == [["matmul", "float32", 1000, 168, 1, 1], ["elementwise", "float32", 0, 80, 1, 1]]
    assert Counted.from_json(json.loads(json.dumps(line.to_json()))) == line  # kept and read back the same


def test_a_loop_over_the_samples_runs_its_body_once_more_a_sample():
    # a detector's per-image ops: the backbone's one op a batch, a box head's two ops an image
    body = [op("elementwise", 0, 8), op("matmul", 50, 10)]
    small = row(1, [op("conv", 100, 20), *body, op("optimizer", 0, 4)])
    large = row(2, [op("conv", 200, 36), *body, *body, op("optimizer", 0, 4)])
    at = json.loads(Counted.of(small, large).at(8, 8)["ops_per_step"])
    times = {(kind, flops): n for kind, _, flops, _, _, n in at}
    assert times == {("conv", 800): 1, ("matmul", 50): 8, ("elementwise", 0): 8, ("optimizer", 0): 1}


def test_a_loop_of_hundreds_of_identical_steps_is_one_entry():
    small = row(1, [op("matmul", 10, 4)] * 300)
    large = row(2, [op("matmul", 20, 6)] * 300)
    line = Counted.of(small, large)
    assert len(line.ops) == 1 and json.loads(line.at(5, 5)["ops_per_step"]) == [["matmul", "float32", 50, 12, 1, 300]]


# Three jobs whose step the meta device cannot run, small enough for a 2-core host
DETECTOR = '''
import torch, torchvision
from torch import nn
from crossover import Data, Workload

def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    corner = torch.rand(cfg.dataset_size, 2, 2, generator=g) * 48
    boxes = torch.cat([corner, corner + 8 + torch.rand(cfg.dataset_size, 2, 2, generator=g) * 40], -1)
    labels = torch.randint(1, 5, (cfg.dataset_size, 2, 1), generator=g).float()
    return Data(torch.rand(cfg.dataset_size, 3, 96, 96, generator=g), torch.cat([labels, boxes], -1), None, None,
                source="random boxes")

def step(model, x, y, loss):
    losses = model(list(x), [{"labels": t[:, 0].long(), "boxes": t[:, 1:]} for t in y])
    total = sum(losses.values())
    return total, total.detach()

workload = Workload("detector", make_data=data, make_loss=nn.Identity, step=step,
                    make_model=lambda cfg: torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
                        weights=None, weights_backbone=None, num_classes=5, min_size=96, max_size=96),
                    make_optimizer=lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9),
                    defaults={"batch_size": 8, "dataset_size": 64, "epochs": 1, "lr": 0.01})
'''

EXPERTS = '''
import torch
from torch import nn
from torch.nn import functional as F
from crossover import Data, Workload

class Experts(nn.Module):
    def __init__(self, width=32, n=8):
        super().__init__()
        self.router = nn.Linear(width, n)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(width, 64), nn.GELU(), nn.Linear(64, width))
                                     for _ in range(n))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weight, chosen = F.softmax(self.router(flat), -1).topk(2, -1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            out.index_add_(0, token, expert(flat[token]) * weight[token, slot, None])
        return out.reshape(x.shape)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.moe, self.head = nn.Embedding(64, 32), Experts(), nn.Linear(32, 64)

    def forward(self, x):
        h = self.embed(x)
        return self.head(h + self.moe(h)).flatten(0, 1)

def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    return Data(torch.randint(0, 64, (cfg.dataset_size, 16), generator=g),
                torch.randint(0, 64, (cfg.dataset_size, 16), generator=g), None, None, source="random tokens")

workload = Workload("experts", make_data=data, make_model=lambda cfg: Net(), make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda p, lr: torch.optim.AdamW(p, lr=lr),
                    step=lambda model, x, y, loss: (loss(out := model(x), y.flatten()), out),
                    defaults={"batch_size": 32, "dataset_size": 1024, "epochs": 1, "lr": 1e-3})
'''

SCAN = '''
import torch
from torch import nn
from crossover import Data, Workload

STEPS = 300  # time steps, each a few ops in Python

class Scan(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.delta, self.into, self.head = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, 4)

    def forward(self, x):
        h = torch.zeros(x.shape[0], x.shape[2], device=x.device)
        for t in range(x.shape[1]):
            gate = torch.sigmoid(self.delta(x[:, t]))
            h = gate * h + (1 - gate) * self.into(x[:, t])
        return self.head(h)

def data(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    return Data(torch.randn(cfg.dataset_size, STEPS, 16, generator=g),
                torch.randint(0, 4, (cfg.dataset_size,), generator=g), None, None, source="random sequences")

workload = Workload("scan", make_data=data, make_model=lambda cfg: Scan(), make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda p, lr: torch.optim.AdamW(p, lr=lr),
                    defaults={"batch_size": 64, "dataset_size": 1024, "epochs": 1, "lr": 1e-3})
'''


def job(folder, name: str, source: str) -> str:
    (folder / f"{name}.py").write_text(source)
    return f"{folder / name}.py:workload"


def count(ref: str, batch: int, others: tuple[int, ...]) -> tuple[dict, dict[int, dict]]:
    """The step at `batch`, as the counting process counts it, and at each of `others` from the count kept."""
    step = Step(ref, 1, batch, 1024, timeout_s=600)
    counted = count_cache.recount(step)[step]
    kept, counting = count_cache.begin([replace(step, batch_size=b) for b in others])
    assert counting == []  # read, not counted: no process started
    return counted, {s.batch_size: c for s, c in kept.items()}


@pytest.mark.slow
def test_a_detector_in_training_mode_is_counted_on_the_cpu_at_one_and_two_images(tmp_path):
    counted, at = count(job(tmp_path, "detector", DETECTOR), 8, (2, 16))
    assert counted["counted_on"] == "cpu" and counted["batch_size"] == 8
    # per image: the backbone's FLOPs, and the proposals' ops (a loop over the batch's images) grow with it
    assert at[16]["flops_per_step"] > 1.9 * counted["flops_per_step"] > 3.6 * at[2]["flops_per_step"]
    assert at[16]["launches_per_step"] > counted["launches_per_step"] > at[2]["launches_per_step"]
    assert counted["peak_memory_bytes"] > at[2]["peak_memory_bytes"] > 0


def test_a_top_2_mixture_of_experts_is_counted(tmp_path):
    counted, at = count(job(tmp_path, "experts", EXPERTS), 32, (128,))
    assert counted["counted_on"] == "cpu" and counted["matmul_flops_per_step"] > 0
    assert at[128]["matmul_flops_per_step"] == pytest.approx(4 * counted["matmul_flops_per_step"], rel=0.2)


def test_a_recurrence_written_as_a_python_loop_is_counted_on_the_meta_device(tmp_path):
    counted, at = count(job(tmp_path, "scan", SCAN), 64, (256,))
    assert counted["counted_on"] == "meta" and counted["forward_ops_per_step"] > 300 * 5
    assert at[256]["forward_ops_per_step"] == counted["forward_ops_per_step"]  # the same ops, larger
    assert at[256]["flops_per_step"] == pytest.approx(4 * counted["flops_per_step"], rel=0.01)

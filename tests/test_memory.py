"""trainables/memory.py: a step's peak memory, counted on the meta device, against figures worked out by hand
and (on a GPU machine) against torch.cuda.max_memory_allocated.

    python -m pytest -q tests/test_memory.py        # the GPU test is skipped where CUDA is not available
"""

import pytest
import torch
from torch import nn

from crossover.analysis import decide
from crossover.sweeps.count_step import attention_as_on_a_gpu, counted, dropout_as_on_a_gpu, rnn_as_on_a_gpu
from crossover.trainables.memory import cudnn_rnn_reserve_bytes, cudnn_rnn_workspace_bytes, step_peak

META = torch.device("meta")
F32 = 4  # bytes an element


def steady_peak(model, opt, x, y, device=META) -> int:
    """The counted peak of a training step after a first one (which makes Adam's states)."""
    crit = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        crit(model(x), y).backward()
        opt.step()

    step()
    return step_peak(step, device, model, opt, x, y)


def mlp(d: int, h: int, c: int, batch: int, foreach: bool):
    model = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, c)).to(META)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=foreach)
    x, y = torch.empty(batch, d, device=META), torch.zeros(batch, dtype=torch.long, device=META)
    return model, opt, x, y, sum(p.numel() for p in model.parameters())


def test_a_wide_mlps_peak_is_its_weights_gradients_adam_states_and_the_update_of_its_largest_weight():
    # 1000 -> 2000 -> 10 at batch 64: the weights outweigh the activations, and the peak is in Adam's update
    # (one tensor at a time, foreach=False): weights, gradients and the two moments (16 bytes a parameter),
    # the update's two temporaries of the largest weight (its moment's square root, that divided), the batch
    model, opt, x, y, n = mlp(1000, 2000, 10, 64, foreach=False)
    by_hand = 16 * n + 2 * 1000 * 2000 * F32 + 64 * 1000 * F32 + 64 * 8
    assert steady_peak(model, opt, x, y) == pytest.approx(by_hand, rel=0.02)


def test_a_long_batchs_peak_is_the_saved_activation_and_its_two_gradients_beside_the_weights():
    # 256 -> 1024 -> 16 at batch 4096: the activations outweigh the weights, and the peak is in the ReLU's
    # backward: weights and Adam's moments (12 bytes a parameter), the last layer's gradients (made first),
    # the ReLU's saved output, the gradient reaching it and the one it passes on (3 x batch x 1024), the batch
    model, opt, x, y, n = mlp(256, 1024, 16, 4096, foreach=False)
    by_hand = 12 * n + (1024 * 16 + 16) * F32 + 3 * 4096 * 1024 * F32 + 4096 * 256 * F32 + 4096 * 8
    assert steady_peak(model, opt, x, y) == pytest.approx(by_hand, rel=0.02)


def test_a_gpus_foreach_adam_holds_one_temporary_the_size_of_all_the_weights_not_two_of_the_largest():
    # the multi-tensor update (a GPU's default) makes each step's temporary for every weight at once
    model, opt, x, y, n = mlp(1000, 2000, 10, 64, foreach=True)
    assert steady_peak(model, opt, x, y) == pytest.approx(20 * n + 64 * 1000 * F32 + 64 * 8, rel=0.02)


def test_the_counted_peak_grows_with_the_batch_as_its_share_a_sample_says():
    one, two = (counted("tabular", batch, 16384, {"width": 256}, {}) for batch in (2048, 4096))
    assert one["counted_on"] == "meta" and two["peak_memory_bytes"] > 1.5 * one["peak_memory_bytes"]
    # the peak is a line in the batch size: twice the batch adds what a sample adds, that many times
    grown = one["peak_memory_bytes"] + 2048 * one["peak_memory_per_sample_bytes"]
    assert two["peak_memory_bytes"] == pytest.approx(grown, rel=0.02)
    assert two["peak_memory_per_sample_bytes"] == pytest.approx(one["peak_memory_per_sample_bytes"], rel=0.02)


def test_a_step_at_batch_one_has_a_peak_and_a_share_a_sample_from_the_step_at_two():
    one, two = counted("tabular", 1, 64, {}, {}), counted("tabular", 2, 64, {}, {})
    assert 0 < one["peak_memory_bytes"] < two["peak_memory_bytes"]
    assert one["peak_memory_per_sample_bytes"] == two["peak_memory_per_sample_bytes"] > 0


def dropout_mlp(p: float):
    """256 -> 1024 -> dropout(p) -> 16 with SGD (no states) at batch 4096, on the meta device."""
    model = nn.Sequential(nn.Linear(256, 1024), nn.Dropout(p), nn.Linear(1024, 16)).to(META)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, opt, torch.empty(4096, 256, device=META), torch.zeros(4096, dtype=torch.long, device=META)


def test_a_dropouts_mask_is_counted_at_one_byte_an_element_as_a_gpus_fused_dropout_keeps_it():
    # p=0: F.dropout hands its input on, so the step holds what it holds with dropout but the mask autograd keeps
    # for the backward; a GPU's fused dropout keeps it as bool, the meta device's decomposition at the input's dtype
    plain = steady_peak(*dropout_mlp(0.0))
    with dropout_as_on_a_gpu():
        assert steady_peak(*dropout_mlp(0.1)) - plain == 4096 * 1024  # bool: a byte an element
    assert steady_peak(*dropout_mlp(0.1)) - plain == 4096 * 1024 * F32  # the decomposition's float mask


def test_dropout_counted_as_on_a_gpu_is_the_fused_op_only_where_a_gpu_fuses_it():
    x = torch.empty(8, 4, device=META, requires_grad=True)
    with dropout_as_on_a_gpu():
        fused = nn.functional.dropout(x, 0.1, training=True)
        assert fused.grad_fn._saved_result1.dtype == torch.bool
        # not training, or p of 0: the input itself, as on a GPU; in place: the decomposition, as on a GPU
        assert nn.functional.dropout(x, 0.1, training=False) is x and nn.functional.dropout(x, 0.0) is x
        assert type(nn.functional.dropout(x.clone(), 0.1, inplace=True).grad_fn).__name__ == "MulBackward0"
    assert type(nn.functional.dropout(x, 0.1).grad_fn).__name__ == "MulBackward0"  # and none of it after


@pytest.mark.parametrize("shape, read_on_a_gpu", [
    (("lstm", 64, 16, 512, 3, 2, 4), 71_303_424),  # 3 layers, both directions, fp32
    (("gru", 300, 128, 768, 3, 1, 2), 1_179_648_256),  # bf16
    (("rnn_tanh", 8, 1, 64, 3, 2, 2), 10_496),  # fp16: the 256 bytes every reserve holds besides show
])
def test_the_reserve_formula_gives_what_cudnn_returned_for_the_same_shape(shape, read_on_a_gpu):
    # (mode, steps, batch, hidden, layers, directions, bytes an element) -> torch._cudnn_rnn's reserve's bytes on
    # an H200 (torch 2.11.0+cu130, cuDNN 9.19), three of the 1,944 shapes the formula was read off
    assert cudnn_rnn_reserve_bytes(*shape) == read_on_a_gpu


def lstm_step(steps: int, batch: int, layers: int = 2, hidden: int = 64, features: int = 32):
    """A steady training step of an nn.LSTM over (batch, steps, features) inputs, on the meta device, and what it
    holds before the step (the model, its optimiser, the batch)."""
    torch.manual_seed(0)
    model = nn.LSTM(features, hidden, layers, batch_first=True).to(META)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.empty(batch, steps, features, device=META)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x)[0].sum().backward()
        opt.step()
    step()
    return step, (model, opt, x)


def test_a_meta_lstms_forward_keeps_cudnns_reserve_at_the_formulas_size_and_none_when_not_training():
    step, (model, _, x) = lstm_step(16, 8)
    kept = {}

    class Reserve(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._cudnn_rnn.default:
                kept[model.training] = out[3].nbytes
            return out

    with rnn_as_on_a_gpu(buffers=True), Reserve():
        model(x)
        model.eval()
        model(x)
    # 4 bytes x 16 steps x 8 samples x 64 units x (5 x 2 layers + the first layer's output) + 256
    assert kept == {True: 4 * 16 * 8 * 64 * 11 + 256, False: 0}
    assert kept[True] == cudnn_rnn_reserve_bytes("lstm", 16, 8, 64, 2, 1, 4)


def test_an_lstms_counted_peak_holds_cudnns_reserve_and_grows_with_its_steps_and_its_batch():
    def peak(steps, batch):
        step, held = lstm_step(steps, batch)
        with rnn_as_on_a_gpu(buffers=True):
            step()
            return step_peak(step, META, *held)

    def cudnn(steps, batch):  # the reserve, and the workspace of the backward, which runs while the reserve is held
        return cudnn_rnn_reserve_bytes("lstm", steps, batch, 64, 2, 1, 4) + \
            cudnn_rnn_workspace_bytes("lstm", steps, batch, 64, 1, 4)

    base = peak(16, 8)
    # what the reserve and workspace add is in the step's peak, beside the outputs and their gradient
    assert base > cudnn(16, 8) + 2 * 16 * 8 * 64 * F32
    # twice the steps or twice the batch: the same rows, so the same growth (but the initial states, which are a
    # batch's), and at least what cuDNN's buffers grow by
    longer, wider = peak(32, 8) - base, peak(16, 16) - base
    assert longer >= cudnn(32, 8) - cudnn(16, 8)
    assert wider == pytest.approx(longer, rel=0.02)
    assert peak(64, 8) - peak(32, 8) == pytest.approx(2 * longer, rel=0.02)  # a line in the steps


def measured_against_counted(make_model, make_batch, make_opt) -> tuple[int, int]:
    """(torch.cuda.max_memory_allocated over a steady step on the GPU, the counted peak on the meta device +
    the workspaces decide adds to it): the same model, batch and optimiser on each."""
    def peak_on(device: torch.device) -> int:
        torch.manual_seed(0)
        with device:
            model = make_model()
            x, y = make_batch()
        opt = make_opt(model.parameters())
        crit = nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            crit(model(x).flatten(0, -2), y.flatten()).backward()
            opt.step()

        if device.type == "cuda":
            step()  # Adam's states, cuBLAS's workspace and cuDNN's choices made once, as a trial's warm-up
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            step()
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated()
        with attention_as_on_a_gpu(), dropout_as_on_a_gpu():
            step()
            return step_peak(step, device, model, opt, x, y) + decide.FLOOR_BYTES

    on_gpu = peak_on(torch.device("cuda"))
    torch.cuda.empty_cache()  # the GPU's model, optimiser and batch left with peak_on's frame
    return on_gpu, peak_on(META)


class Tokens(nn.Module):
    """A small encoder-only language model: 4 layers of width 512 over 256 tokens of 1,000."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 512)
        layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = nn.Linear(512, 1000)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", ["resnet18", "transformer"])
def test_the_counted_peak_is_within_15_percent_of_the_gpus_max_memory_allocated(name):
    torchvision = pytest.importorskip("torchvision")
    cases = {
        "resnet18": (lambda: torchvision.models.resnet18(num_classes=1000),
                     lambda: (torch.randn(32, 3, 224, 224), torch.randint(0, 1000, (32,))),
                     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True)),
        "transformer": (Tokens, lambda: (torch.randint(0, 1000, (16, 256)), torch.randint(0, 1000, (16, 256))),
                        lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True)),
    }
    measured, predicted = measured_against_counted(*cases[name])
    print(f"{name}: measured {measured / 1e6:,.1f} MB, counted {predicted / 1e6:,.1f} MB, {predicted / measured:.3f}x")
    assert predicted == pytest.approx(measured, rel=0.15)

"""Engine 'triton' (trainables/mlp_kernel.py): the fused MLP kernel's losses and gradients are autograd's,
and what it cannot run is refused by name. The kernel runs here in Triton's interpreter (on the CPU, in a
process of its own: TRITON_INTERPRET is read when a kernel is defined); tests/test_gpu.py runs it on a GPU."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from crossover.config import ConfigError, TrialConfig
from crossover.trainables.trial import resolve

triton = pytest.importorskip("triton")

CHECK = textwrap.dedent("""
    import json, sys
    import torch
    from torch.func import functional_call, stack_module_state, vmap
    from crossover.trainables.mlp_kernel import FusedMLP
    from crossover.trainables.workloads import mlp

    sizes, k, n = json.loads(sys.argv[1])
    torch.manual_seed(0)
    models = [mlp(sizes) for _ in range(k)]
    params, _ = stack_module_state(models)
    x, y = torch.randn(k, n, 2), torch.randn(k, n, 1)
    losses = vmap(lambda p, xb, yb: torch.nn.functional.mse_loss(functional_call(models[0], (p,), (xb,)), yb))(
        params, x, y)
    expected = torch.autograd.grad(losses.sum(), list(params.values()))
    kernel = FusedMLP(params, n)
    got_losses, got = kernel(x, y)
    errors = {name: ((got[name] - e).abs().max() / e.abs().max()).item() for name, e in zip(params, expected)}
    print(json.dumps({"loss": ((got_losses - losses).abs().max() / losses.abs().max()).item(), **errors,
                      "splits": kernel.splits}))
""")


@pytest.mark.skipif(tuple(int(v) for v in triton.__version__.split(".")[:2]) < (3, 8),
                    reason="Triton's interpreter before 3.8 fails on this kernel (3.6 on the H200 machine: a TypeError "
                           "in its grid executor); tests/test_gpu.py checks the compiled kernel against autograd there")
@pytest.mark.parametrize("sizes, k, n", [
    ([2, 20, 5, 1], 3, 300),  # seed 003's MLP; 300 points: a last block part-full
    ([2, 33, 17, 1], 2, 129),  # widths padded to 64 and 32
])
def test_the_kernel_gives_autograds_losses_and_gradients(sizes, k, n):
    run = subprocess.run([sys.executable, "-c", CHECK, json.dumps([sizes, k, n])], capture_output=True, text=True,
                         env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert run.returncode == 0, run.stderr
    errors = json.loads(run.stdout)
    assert errors.pop("splits") >= 2  # each member's points in several programs, their partial sums added
    assert set(errors) == {"loss", "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}
    assert max(errors.values()) < 1e-5, errors


@pytest.mark.parametrize("config, words", [
    (TrialConfig("disc", device="cuda", engine="triton"), "engine 'triton' runs peaks' MLP"),
    (TrialConfig("peaks", device="cuda", engine="triton", depth=3, width=8), "not peaks at depth 3"),
    (TrialConfig("peaks", device="cuda", engine="triton", precision="bf16"), "in bf16"),
    (TrialConfig("peaks", device="cpu", engine="triton"), "engine 'triton' captures a CUDA graph"),
    (TrialConfig("peaks", device="cuda", engine="triton", dataset_size=400, batch_size=300), "must be full"),
])
def test_what_the_kernel_cannot_run_is_refused_by_name(config, words):
    with pytest.raises(ConfigError, match=words):
        resolve(config)


def test_a_peaks_trial_of_any_width_at_depth_two_resolves():
    assert resolve(TrialConfig("peaks", device="cuda", engine="triton", width=64)).cfg.depth == 2

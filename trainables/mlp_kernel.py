"""Engine 'triton': a fused trial's whole forward, loss and backward in one Triton kernel, for peaks.

Seed 003's model is an MLP 2 -> 20 -> 5 -> 1 trained full-batch on 40,000 points: layers of 20 are far too
narrow for batched matrix products to use a GPU (trainables/fused.py's eager step reaches about
0.6 TFLOP/s), and each of its ~30 kernels reads and writes every point's activations. Here, as NVIDIA's
tiny-cuda-nn does for small MLPs, one kernel does it all with the activations in registers: each program
takes one member's points a block at a time, runs the forward (2 -> H1 -> H2 -> 1, ReLU between), the mean
squared error and the backward, and keeps its share of the gradients in registers; memory sees each point
once (12 bytes) and each program's partial gradients once. A grid of members x splits fills the GPU, and
the partial sums are added in a fixed order (no atomics: a run is repeatable to the bit).

Everything is fp32 (dot products in IEEE fp32, not TF32), so a member's loss curve is its run alone's to
rounding (tests/test_gpu.py); the optimiser step, the gather of the batch and the loss sums stay as the
fused step has them, and engine 'triton' captures the whole step in a CUDA graph as engine 'graph' does.

    grads = FusedMLP(params, batch)       # params: name -> K x weight, as trainables/fused.py stacks them
    losses, grads = grads(x, y)           # x: K x batch x 2, y: K x batch x 1 -> K mean losses, name -> K x grad

On a machine without a GPU the kernel runs in Triton's interpreter (TRITON_INTERPRET=1, tests/test_kernel.py).
"""

from __future__ import annotations

from typing import cast

import torch
import triton
import triton.language as tl

# The fastest on an H200 of 27 choices of these three by the kernel's time (docs/engines.md, "One kernel for a fused step").
BLOCK = 128  # points a program takes at a time
NUM_WARPS = 2
PROGRAMS_PER_SM = 8  # members x splits aims at this many programs a streaming multiprocessor
# fp32 dot products as fp32 fused multiply-adds, not TF32: "tf32x3" was faster at some choices (docs/engines.md)
# and as exact against autograd here, but it is not fp32's arithmetic
DOT = "ieee"
MIN_DOT = 16  # tl.dot's smallest dimension: hidden widths are padded (with zeros) to a power of two >= this


def shape_of(model: torch.nn.Module) -> tuple[int, int] | None:
    """(H1, H2) where `model` is the MLP this kernel runs: Linear(2, H1), ReLU, Linear(H1, H2), ReLU,
    Linear(H2, 1), with biases; else None."""
    layers = list(model.children()) if isinstance(model, torch.nn.Sequential) else []
    kinds = [type(m) for m in layers]
    if kinds != [torch.nn.Linear, torch.nn.ReLU, torch.nn.Linear, torch.nn.ReLU, torch.nn.Linear]:
        return None
    first, second, last = (cast(torch.nn.Linear, layers[i]) for i in (0, 2, 4))  # Linear each, as `kinds` says
    if first.in_features != 2 or last.out_features != 1 or any(m.bias is None for m in (first, second, last)):
        return None
    return first.out_features, second.out_features


@triton.jit
def _loss_and_grads(x_ptr, y_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, w3_ptr, b3_ptr,
                    gw1_ptr, gb1_ptr, gw2_ptr, gb2_ptr, gw3_ptr, gb3_ptr, loss_ptr,
                    n, chunk, inv_n,
                    H1: tl.constexpr, H2: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, BLOCK: tl.constexpr,
                    DOT: tl.constexpr):
    k = tl.program_id(0)  # the member
    s = tl.program_id(1)  # its split of the points
    part = k * tl.num_programs(1) + s  # where this program's partial sums go
    r1, r2 = tl.arange(0, P1), tl.arange(0, P2)
    m1, m2 = r1 < H1, r2 < H2
    # member k's weights, padded with zeros: W1 (H1 x 2) as its two columns, W2 (H2 x H1) transposed
    w1a = tl.load(w1_ptr + k * H1 * 2 + r1 * 2, mask=m1, other=0.0)
    w1b = tl.load(w1_ptr + k * H1 * 2 + r1 * 2 + 1, mask=m1, other=0.0)
    b1 = tl.load(b1_ptr + k * H1 + r1, mask=m1, other=0.0)
    w2t = tl.load(w2_ptr + k * H2 * H1 + r2[None, :] * H1 + r1[:, None], mask=m1[:, None] & m2[None, :], other=0.0)
    b2 = tl.load(b2_ptr + k * H2 + r2, mask=m2, other=0.0)
    w3 = tl.load(w3_ptr + k * H2 + r2, mask=m2, other=0.0)
    b3 = tl.load(b3_ptr + k)

    g_w1a = tl.zeros([P1], dtype=tl.float32)
    g_w1b = tl.zeros([P1], dtype=tl.float32)
    g_b1 = tl.zeros([P1], dtype=tl.float32)
    g_w2 = tl.zeros([P2, P1], dtype=tl.float32)
    g_b2 = tl.zeros([P2], dtype=tl.float32)
    g_w3 = tl.zeros([P2], dtype=tl.float32)
    g_b3 = tl.zeros([BLOCK], dtype=tl.float32)
    loss = tl.zeros([BLOCK], dtype=tl.float32)
    start = s * chunk
    end = tl.minimum(start + chunk, n)
    for offset in range(start, end, BLOCK):
        rows = offset + tl.arange(0, BLOCK)
        valid = rows < end
        x0 = tl.load(x_ptr + k * n * 2 + rows * 2, mask=valid, other=0.0)
        x1 = tl.load(x_ptr + k * n * 2 + rows * 2 + 1, mask=valid, other=0.0)
        y = tl.load(y_ptr + k * n + rows, mask=valid, other=0.0)
        # forward
        z1 = x0[:, None] * w1a[None, :] + x1[:, None] * w1b[None, :] + b1[None, :]  # BLOCK x P1
        h1 = tl.maximum(z1, 0.0)
        z2 = tl.dot(h1, w2t, input_precision=DOT) + b2[None, :]  # BLOCK x P2
        h2 = tl.maximum(z2, 0.0)
        out = tl.sum(h2 * w3[None, :], axis=1) + b3
        diff = tl.where(valid, out - y, 0.0)
        loss += diff * diff
        # backward of the mean over the batch; a padded or invalid row's gradient is zero throughout
        g = 2.0 * diff * inv_n
        g_b3 += g
        g_w3 += tl.sum(g[:, None] * h2, axis=0)
        g2 = tl.where(z2 > 0.0, g[:, None] * w3[None, :], 0.0)  # BLOCK x P2 (ReLU passes where its input > 0)
        g_b2 += tl.sum(g2, axis=0)
        g_w2 += tl.dot(tl.trans(g2), h1, input_precision=DOT)  # P2 x P1
        g1 = tl.where(z1 > 0.0, tl.dot(g2, tl.trans(w2t), input_precision=DOT), 0.0)  # BLOCK x P1
        g_b1 += tl.sum(g1, axis=0)
        g_w1a += tl.sum(g1 * x0[:, None], axis=0)
        g_w1b += tl.sum(g1 * x1[:, None], axis=0)

    tl.store(gw1_ptr + part * H1 * 2 + r1 * 2, g_w1a, mask=m1)
    tl.store(gw1_ptr + part * H1 * 2 + r1 * 2 + 1, g_w1b, mask=m1)
    tl.store(gb1_ptr + part * H1 + r1, g_b1, mask=m1)
    tl.store(gw2_ptr + part * H2 * H1 + r2[:, None] * H1 + r1[None, :], g_w2, mask=m2[:, None] & m1[None, :])
    tl.store(gb2_ptr + part * H2 + r2, g_b2, mask=m2)
    tl.store(gw3_ptr + part * H2 + r2, g_w3, mask=m2)
    tl.store(gb3_ptr + part, tl.sum(g_b3, axis=0))
    tl.store(loss_ptr + part, tl.sum(loss, axis=0))


def _padded(width: int) -> int:
    return max(MIN_DOT, triton.next_power_of_2(width))


class FusedMLP:
    """The members' losses and gradients for batches of `batch` points, from the stacked weights
    `params` (name -> K x the weight's shape, in the model's order: W1, b1, W2, b2, W3, b3). Its partial
    sums are allocated here, once, so a CUDA graph can capture calls to it."""

    def __init__(self, params: dict, batch: int):
        self.names = list(params)
        self.weights = [p.detach() for p in params.values()]  # views of the trained weights
        w1, _, w2, _, _, _ = self.weights
        self.k, self.h1, self.h2 = w1.shape[0], w1.shape[1], w2.shape[1]
        device = w1.device
        sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
        splits = max(1, min(triton.cdiv(batch, BLOCK), triton.cdiv(PROGRAMS_PER_SM * sms, self.k)))
        self.chunk = triton.cdiv(triton.cdiv(batch, splits), BLOCK) * BLOCK
        self.splits = triton.cdiv(batch, self.chunk)
        self.partials = [torch.empty(self.k, self.splits, *w.shape[1:], device=device) for w in self.weights]
        self.loss_parts = torch.empty(self.k, self.splits, device=device)
        self.batch = batch

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """x: K x batch x 2, y: K x batch x 1 (contiguous fp32) -> each member's mean squared error (K),
        and its gradients (name -> K x the weight's shape)."""
        if x.shape != (self.k, self.batch, 2) or y.shape != (self.k, self.batch, 1):
            raise ValueError(f"the fused MLP kernel was set up for {self.k} members x {self.batch} points; got x "
                             f"{tuple(x.shape)}, y {tuple(y.shape)}")
        _loss_and_grads[(self.k, self.splits)](
            x.contiguous(), y.contiguous(), *self.weights, *self.partials, self.loss_parts,
            self.batch, self.chunk, 1.0 / self.batch,
            H1=self.h1, H2=self.h2, P1=_padded(self.h1), P2=_padded(self.h2), BLOCK=BLOCK, DOT=DOT, num_warps=NUM_WARPS)
        grads = {name: part.sum(1) for name, part in zip(self.names, self.partials)}
        return self.loss_parts.sum(1) / self.batch, grads

"""The GPU memory one training step holds at its peak, counted from the tensors it makes, not measured.

    step_peak(step, device, model, opt, batch)   # bytes allocated at the step's peak on `device`

analysis/decide/memory.py, of the same name a layer up, turns this count into what a run needs on a card.

sweeps/count_step.py asks it, through trainables/train.py `Loop.step_costs` (in the step it counts the costs of) or
`Loop.step_peak`, for the `peak_memory_bytes` of `crossover predict`'s count: what torch's allocator holds at the
worst moment of one steady step, the CUDA context excluded (analysis/decide/ adds CONTEXT_BYTES). torch's own
MemTracker (torch.distributed._tools.mem_tracker) follows every tensor storage through the step: the parameters, the
gradients, the optimiser's states, the batch (handed in: made before the step), and each tensor the
step's ops make, from its creation until its storage is freed, so the activations autograd saves and the
transients (a backward's gradients, a foreach optimiser's temporaries) count while they live. Each counts
at its dtype's element size. It runs on the meta device (shapes only, as the rest of the count) as on the
CPU; on the meta device the sizes are not rounded up to the CUDA caching allocator's 512-byte blocks, which
moves a model of a few hundred tensors by well under 1%. docs/cost.md, "Fits in memory", says how close it
comes to torch.cuda.max_memory_allocated (tests/test_memory.py checks it on a GPU).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def step_peak(step: Callable[[], None], device: torch.device, *held) -> int:
    """Bytes allocated on `device` at the peak of one call of `step`, counting `held` (modules, optimisers,
    tensors made before the step: the model, its optimiser with its states, the batch) from the start.

    The optimiser's states are made at its first step (Adam's two moments, SGD's momentum): call it after
    one step, so that the figure is a steady step's, which holds them throughout."""
    tracker = _tracker()
    tracker.track_external(*held)
    # MemTracker hooks every parameter's gradient the first time its module runs forward, only to name that
    # gradient's memory (its storage counts either way), and a frozen parameter (requires_grad False: a
    # fine-tuned model's backbone, LoRA's base weights) refuses a hook: "cannot register a hook on a tensor
    # that doesn't require gradient" (torch 2.14). Marked as hooked already, it is left without one.
    for module in held:
        if isinstance(module, torch.nn.Module):
            for p in module.parameters():
                if not p.requires_grad:
                    tracker._param_to_grad_hook_handles[p] = (_NO_HOOK, _NO_HOOK)
    with tracker:
        step()
    return int(tracker.get_tracker_snapshot("peak").get(device, {}).get("Total", 0))


def _tracker():
    """torch's MemTracker, but for the peak of each module, which it updates after every op by walking every
    module tracked (a GPT-2-large's 400-odd, thousands of ops a step: most of the time a peak took); the whole
    step's peak, read here, is updated as MemTracker updates it, to the byte."""
    from torch.distributed._tools.mem_tracker import _TOTAL_KEY, MemTracker  # here: it imports torch.distributed

    class StepPeak(MemTracker):
        def _update_peak_stats(self, peak_state) -> None:
            for dev, dev_snap in self._curr_mem_snap.items():
                if self._peak_mem.get(dev, 0) < dev_snap[_TOTAL_KEY]:
                    self._peak_mem[dev] = dev_snap[_TOTAL_KEY]
                    self._peak_mem_snap[dev] = dict(dev_snap)

    return StepPeak()


class _NoHook:
    """A hook handle with nothing to remove: what `step_peak` gives MemTracker for a frozen parameter's hooks."""

    def remove(self) -> None:
        pass


_NO_HOOK = _NoHook()


# cuDNN's reserve space a training forward keeps for the backward, in elements of the input's dtype a time step,
# sample, direction and unit of hidden width and layer (CUDNN_GATE_STATES) plus, for each layer but the last, its
# output (one unit: the last layer's is the op's own output, already counted). The figures read as what each
# backward needs: an LSTM's 4 gates and its cell state, a GRU's 3 gates and 3 hidden-side products (its reset gate
# multiplies the candidate's hidden-side product, so that is kept apart), a plain RNN's activation. NVIDIA does not
# document the layout (cudnnGetRNNTempSpaceSizes is all its API says), so the figures were read off cuDNN itself:
# `torch._cudnn_rnn`'s reserve (PyTorch's aten/src/ATen/native/cudnn/RNN.cpp allocates exactly what
# cudnnGetRNNTempSpaceSizes returns) on an H200, torch 2.11.0+cu130, cuDNN 9.19, over 1,944 shapes (LSTM, GRU, RNN;
# fp32, bf16, fp16; 8-300 steps, batch 1-128, hidden 64-768, input 80 and 256, 1 and 3 layers, one and two
# directions): this formula gave every one to the byte (docs/cost.md, "Fits in memory").
CUDNN_GATE_STATES = {"lstm": 5, "gru": 6, "rnn_tanh": 1, "rnn_relu": 1}
CUDNN_RESERVE_PAD = 256  # bytes every reserve holds besides, whatever the shape (the same 1,944 shapes)


def cudnn_rnn_reserve_bytes(mode: str, steps: int, batch: int, hidden: int, layers: int, directions: int,
                            element_size: int) -> int:
    """Bytes of cuDNN's training reserve space for one `_cudnn_rnn` call (`CUDNN_GATE_STATES`): `mode` a
    torch._VF name ('lstm', 'gru', 'rnn_tanh', 'rnn_relu'), `element_size` the input's dtype's. An LSTM with a
    projection (proj_size) and a packed sequence were not among the shapes read."""
    per_unit = CUDNN_GATE_STATES[mode] * layers + layers - 1
    return element_size * steps * batch * directions * hidden * per_unit + CUDNN_RESERVE_PAD


def cudnn_rnn_workspace_bytes(mode: str, steps: int, batch: int, hidden: int, directions: int,
                              element_size: int) -> int:
    """Bytes of the workspace a `_cudnn_rnn` call (and again its backward) holds while it runs, at least: one
    layer's input-side products of every gate for every step and direction, which cuDNN's standard algorithm
    computes in one matrix product before the recurrence (3 gates' for a GRU, 1 for a plain RNN). A floor, not
    cuDNN's figure: on the 1,944 shapes above cuDNN's own (the allocator's peak in the call less what it returns)
    was 1.2-14x this for an LSTM of 4,800 rows or more (median 2.3x at fp32), 1.4-19x a GRU's, more where the rows
    are few (a fixed 8 MB or so). It is not measured per shape here, so it stays the floor it is."""
    gates = {"lstm": 4, "gru": 3}.get(mode, 1)
    return element_size * steps * batch * directions * gates * hidden

"""The environment a trial ran in, recorded in its row: node, CPU, GPU, threads, memory, versions."""

from __future__ import annotations

import os
import platform
import resource
import socket
from functools import cache

import torch


@cache
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_ids(gpus: list) -> list[str]:
    """The node's ids of `gpus`: torch numbers the visible GPUs from 0, CUDA_VISIBLE_DEVICES (which Ray
    sets to the GPUs it gave the worker) says which of the node's they are."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else None
    return [ids[d.index or 0] if ids else str(d.index or 0) for d in gpus]


def environment(devices: tuple) -> dict:
    """Columns describing where and with what a trial ran on `devices` (empty when it never got one)."""
    import ray

    gpus = [d for d in devices if d.type == "cuda"]
    return {
        "hostname": socket.gethostname(),
        # tells apart nodes that share a host; outside Ray (run_trial alone) asking would start a Ray
        "node_id": ray.get_runtime_context().get_node_id() if ray.is_initialized() else None,
        "device_name": " + ".join(torch.cuda.get_device_name(d) for d in gpus) if gpus else cpu_model(),
        "cpu_model": cpu_model(),
        "torch_threads": torch.get_num_threads(),
        "nice": os.nice(0),  # this thread's, which the threads it starts (OpenMP's) inherit
        # ru_maxrss is in KiB on Linux; it is the worker process's peak, which a reused actor carries over
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "gpu_ids": gpu_ids(gpus) or None,
        "peak_gpu_bytes": sum(torch.cuda.max_memory_allocated(d) for d in gpus) if gpus else None,
        "torch_version": torch.__version__,
        "ray_version": ray.__version__,
        "python_version": platform.python_version(),
        "cuda_version": torch.version.cuda,
    }

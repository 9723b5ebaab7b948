"""All-reduce bandwidth of the link a data-parallel step's gradients cross: torch.distributed.all_reduce of
buffers the size of DDP's gradient buckets (25 MB) and larger, timed on 2, 4, ... ranks of one torchrun group.

    torchrun --standalone --nproc_per_node 4 studies/allreduce.py --label nvlink --json ar.jsonl
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \\
        torchrun --standalone --nproc_per_node 4 studies/allreduce.py --label sockets --json ar.jsonl
    torchrun --standalone --nproc_per_node 2 studies/allreduce.py --smoke   # gloo on the CPU

NCCL reads its settings once a process, so one launch measures one link: the second command keeps NCCL off
NVLink and shared memory and sends every byte through sockets over loopback, as between two nodes with no
faster network. Each size is all-reduced WARMUP times, then ITERS times between two synchronisations and
barriers; rank 0 writes one JSON line a (ranks, size): the seconds an all-reduce, the algorithm bandwidth
(bytes / seconds) and the bus bandwidth by NCCL's rule (nccl-tests' doc/PERFORMANCE.md): a ring all-reduce
moves 2(N-1)/N of the buffer over the slowest link, so busbw = algbw x 2(N-1)/N, comparable across N and
with the link's own bandwidth. The NCCL_* settings the launch ran with are in every line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

SIZES_MB = (25, 50, 100)  # MB (10^6 bytes) a buffer: DDP's bucket (25 MB) and a few of them
SMOKE_SIZES_MB = (1,)
WARMUP, ITERS = 3, 10  # all-reduces before the timing (NCCL's channels and buffers set up), and timed


def bus_bandwidth(nbytes: int, seconds: float, ranks: int) -> float:
    """Bytes/s over the slowest link of a ring all-reduce of `nbytes` on `ranks` that took `seconds`: the
    algorithm bandwidth (nbytes / seconds) times 2(ranks - 1)/ranks (NCCL's rule)."""
    if ranks < 1 or seconds <= 0:
        raise ValueError(f"ranks must be >= 1 and seconds > 0, got ranks={ranks}, seconds={seconds}")
    return nbytes / seconds * 2 * (ranks - 1) / ranks


def rank_counts(world: int) -> list[int]:
    """2, 4, ... up to the group's size: the data-parallel widths measured."""
    return [2**i for i in range(1, world.bit_length()) if 2**i <= world]


def timed(buffer: torch.Tensor, group, device: torch.device) -> float:
    """Seconds one all-reduce of `buffer` over `group` takes: the mean of ITERS, after WARMUP."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier(group=group)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(WARMUP):
        dist.all_reduce(buffer, group=group)
    sync()
    start = time.perf_counter()
    for _ in range(ITERS):
        dist.all_reduce(buffer, group=group)
    sync()
    return (time.perf_counter() - start) / ITERS


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--label", default="default", help="the link's name in each line (e.g. nvlink, sockets)")
    p.add_argument("--sizes-mb", default=None, help=f"comma-separated buffer sizes in MB; default {SIZES_MB}")
    p.add_argument("--json", default=None, help="append each line to this file (rank 0); default: print only")
    p.add_argument("--smoke", action="store_true", help=f"{SMOKE_SIZES_MB} MB only: checks the path")
    args = p.parse_args(argv)
    sizes = [float(s) for s in args.sizes_mb.split(",")] if args.sizes_mb else (SMOKE_SIZES_MB if args.smoke
                                                                                  else SIZES_MB)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    settings = {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}
    for ranks in rank_counts(world):
        group = dist.new_group(list(range(ranks)))  # every rank creates every group, as torch requires
        for mb in sizes:
            nbytes = int(mb * 1e6) // 4 * 4
            if rank < ranks:
                seconds = timed(torch.ones(nbytes // 4, device=device), group, device)
                line = {"label": args.label, "backend": dist.get_backend(), "ranks": ranks, "bytes": nbytes,
                        "seconds": seconds, "algbw_GBps": nbytes / seconds / 1e9,
                        "busbw_GBps": bus_bandwidth(nbytes, seconds, ranks) / 1e9, "nccl_env": settings}
                if rank == 0:
                    print(json.dumps(line), flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(line) + "\n")
            dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

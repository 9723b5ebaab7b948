"""Data-parallel trials: Ray Train's TorchTrainer, run inside the Tune trial (`ddp:N`, `ddp-cpu:N`).

Each of the N workers runs the same `run_trial` as any other trial, with a Placement that gives it
its rank: it builds the whole dataset from the same seed, takes its share of every global batch,
and DDP all-reduces the gradients (NCCL on GPUs, gloo on CPUs). So `batch_size` is the global
batch, and N workers step exactly as one process would on the same data. Rank 0's row is the
trial's row, with every rank's throughput, GPUs and Ray node (`rank_node_ids`). The ranks go wherever
Ray places them: packed on one node where it holds all N, else across nodes (docs/cluster.md). The workers get the resolved Trial itself: nothing is
resolved or parsed again in them.

    run_ddp(resolve(TrialConfig("disc", device="ddp-cpu:2", threads=1)))
"""

from __future__ import annotations

import tempfile

import ray.cloudpickle
import ray.train
import ray.train.torch
import torch.distributed as dist
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer
from ray.train.v2.api.exceptions import WorkerGroupError

from .devices import ddp_worker_resources
from .exits import WorkerExit, exits_trapped
from .placement import Placement
from .registry import Registry
from .train import run_trial
from .trial import Trial

_ROW = "row"


def _trial(config: dict) -> Trial:
    """The trial, unpickled once its job's module imports here: a job file's module is found in the copy of its
    folder that Ray shipped (trainables/registry.py), which Ray Train's own processes do not put on their path, so the
    trial travels pickled and is opened in the rank, after `load`."""
    if config["module"]:
        Registry().load(config["module"])
    return ray.cloudpickle.loads(config["trial"])


def _worker(config: dict) -> None:
    context = ray.train.get_context()
    where = Placement((ray.train.torch.get_device(),), context.get_world_rank(), context.get_world_size())
    with exits_trapped():  # a rank's os._exit: its WorkerExit, which Ray Train hands back (run_ddp)
        row = run_trial(_trial(config), where)
    mine = (row["per_rank_samples_per_s"][0], row["gpu_ids"], row["node_id"])
    ranks = [mine] * where.world  # every rank's, in rank order: all_gather_object overwrites each item
    dist.all_gather_object(ranks, mine)
    rates = [rate for rate, _, _ in ranks]
    gpus = [gpu for _, ids, _ in ranks for gpu in ids or ()] or None
    nodes = [node for _, _, node in ranks]
    # Ray Train 2.60 returns metrics only with a checkpoint: rank 0 attaches an empty one
    with tempfile.TemporaryDirectory() as empty:
        checkpoint = ray.train.Checkpoint.from_directory(empty) if where.rank == 0 else None
        ray.train.report({_ROW: {**row, "per_rank_samples_per_s": rates, "gpu_ids": gpus, "rank_node_ids": nodes}},
                         checkpoint=checkpoint)


def run_ddp(trial: Trial) -> dict:
    gpu = trial.spec.uses_gpu
    trainer = TorchTrainer(
        _worker,
        train_loop_config={"trial": ray.cloudpickle.dumps(trial), "module": trial.cfg.module},
        # PACK: the ranks on as few nodes as hold them (one node's GPUs talk over NVLink, nodes over the network),
        # spilling onto more nodes where no one node has N workers' resources: ddp:4 on two 2-GPU nodes runs 2 + 2
        scaling_config=ScalingConfig(num_workers=trial.spec.count, use_gpu=gpu, placement_strategy="PACK",
                                     resources_per_worker=ddp_worker_resources(trial.spec, trial.cfg.threads)),
        torch_config=TorchConfig(backend="nccl" if gpu else "gloo"),
        # the row comes back as metrics; Train's own run folder (and the empty checkpoint) is scratch
        run_config=RunConfig(name=f"ddp-{trial.hash}", storage_path=tempfile.gettempdir()),
    )
    try:
        metrics = trainer.fit().metrics
        if metrics is None:  # rank 0 reports the row (`_worker`): a run that ends without it is Train's failure
            raise RuntimeError(f"ddp-{trial.hash}: Ray Train's run ended with no metrics, where rank 0 reports its row")
        return metrics[_ROW]
    except WorkerGroupError as exc:  # a rank's exit said as a single trial's is, not as Train's health check
        exits = [(rank, failure) for rank, failure in sorted(exc.worker_failures.items())
                 if isinstance(failure, WorkerExit)]
        if exits:
            rank, failure = exits[0]
            raise WorkerExit(f"{failure.call} in rank {rank} of {trial.spec.count}") from None
        raise

"""GPU parallelism studies: packed trials per GPU, data-parallel scaling, and a two-GPU pipeline.

    python sweeps/parallel.py                          # every study, on a machine with GPUs
    python sweeps/parallel.py --studies ddp,pipe       # those need 2 GPUs
    python sweeps/parallel.py --smoke                  # tiny sizes, to check the path end to end

Each study is one or more sweeps (rows in OUT/<name>-<study>...), run one after another so that
their trials do not share GPUs with another study's. At the end it prints the benchmark figures
(analysis/parallel.py): packed throughput per GPU against one trial per GPU, DDP scaling efficiency
(samples/s with 2 workers at twice the batch / 2 x samples/s with 1), and the pipeline against
one GPU.
"""

from __future__ import annotations

import sys

from analysis.parallel import render
from sweeps import cli, runner
from sweeps.space import Space

PACKING = (1, 2, 4, 8)  # trials per GPU
# A large MLP for data- and model-parallel work: 8 hidden layers of 8,192, 537M parameters (fp32,
# with Adam's state, 8.6 GB per replica): compute-bound steps, as DDP and pipelines are meant for.
BIG = {"depth": [8], "width": [8192], "dataset_size": [65536], "epochs": [3]}
SMOKE_BIG = {"depth": [4], "width": [64], "dataset_size": [2048], "epochs": [3]}


def spaces(study: str, name: str, gpus: int, smoke: bool) -> list[Space]:
    big = SMOKE_BIG if smoke else BIG
    batch = 256 if smoke else 4096
    if study == "packed":
        # the same small trial, K per GPU, enough of them to fill every GPU once
        grid = {"disc": {"depth": [4 if smoke else 8], "epochs": [5 if smoke else 150]}}
        return [Space(f"{name}-packed-{k}", grid, ("cuda" if k == 1 else f"cuda/{k}",), repeats=k * gpus)
                for k in PACKING]
    if study == "ddp":
        # one worker at batch B, two at B (strong scaling) and at 2B (weak scaling), and one plain GPU
        return [Space(f"{name}-ddp", {"tabular": {**big, "batch_size": [batch, 2 * batch]}},
                      ("cuda", "ddp:1", "ddp:2"))]
    if study == "pipe":
        return [Space(f"{name}-pipe", {"tabular": {**big, "batch_size": [batch], "micro_batches": [1, 4, 8]}},
                      ("cuda", "pipe:2"))]
    raise ValueError(f"--studies: unknown study {study!r}; choose from packed, ddp, pipe")


def main(argv=None) -> int:
    p = cli.parser(__doc__, "parallel", "prefix of the sweeps' names")
    p.add_argument("--studies", default="packed,ddp,pipe", help="comma-separated: packed, ddp, pipe")
    args = p.parse_args(argv)

    runner.connect(args.address)
    import ray

    gpus = int(ray.cluster_resources().get("GPU", 0))
    return runner.run_studies(
        lambda: [s for study in args.studies.split(",") for s in spaces(study.strip(), args.name, gpus, args.smoke)],
        args.out, render)


if __name__ == "__main__":
    sys.exit(main())

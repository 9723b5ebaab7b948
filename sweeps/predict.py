"""`crossover predict`: a workload's time per epoch, run time and cost on every GPU model, without a sweep.

    crossover predict --workload examples/zoo.py:workload --param arch=mobilenet_v2 --batch-size 128 \\
        --dataset-size 50000 --epochs 30
    crossover predict --workload job.py:workload --epochs 10 --json -      # the figures as JSON on stdout
    crossover predict --workload job.py:workload --epochs 10 --precision bf16   # trained in bf16 autocast

One step of the workload is counted (sweeps/count_step.py: FLOPs, bytes and launches per op class, as
a CPU trial's row counts them) in a process of its own (sweeps/counting.py, which `decide` counts a planned
run's step through too), with a time limit (--timeout): the user's code is
imported and run there, never here, and a hang or a crash ends this command with one line naming the
workload, what happened and the fix (exit status 2). Meanwhile this process fits analysis/model/ on the
shipped reference rows (model.shipped), the same fit `decide` and the end of a sweep predict with, kept in the
user's cache folder once fitted (analysis/cache.py). A step counted before, at any dataset size and epochs, is read
from that folder instead (sweeps/count_cache.py: keyed by the job file's fingerprint, its configuration and
precision, crossover's and torch's code): no process starts, and the answer comes in a second or two.

This module parses the flags, counts the steps, asks for the answer and prints it: the run as counted is one
`decide.Request`, priced by decide.answer (the answer `decide`, `report` and the end of a sweep give) on every GPU
model, on one GPU and on each count of GPUs of --gpus, and on every home box; analysis/decide/screen.py says it
(the first screen; every GPU model's line with --verbose) and decide.records lists it (--json). Every figure is
predicted, never measured. Reads no rows of the user's; imports neither torch nor ray. analysis/model/predict.py,
of the same name a layer down, is the model this command asks: the same idea, the command and its arithmetic.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from crossover.schema import Precision
from crossover.step import AXES, TIMEOUT_S, Step

from ..analysis import decide, model
from ..analysis.cli import HelpFormatter, gpu_counts, nodes, precision
from ..analysis.decide import screen
from ..trainables.job import EXAMPLES, named
from . import count_cache
from .cli import at_least, param
from .counting import PredictError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crossover predict", description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--workload", required=True, type=named, metavar="REF",
                   help="your workload, path/to/job.py:ATTR or package.module:ATTR, or an example job's name "
                        f"({', '.join(EXAMPLES)}) or a built-in's")
    p.add_argument("--epochs", type=at_least(1), required=True, help="epochs of your planned run")
    p.add_argument("--batch-size", type=at_least(1), default=None, metavar="N",
                   help="samples a step (default: the workload's)")
    p.add_argument("--dataset-size", type=at_least(1), default=None, metavar="N",
                   help="samples an epoch (default: the workload's)")
    for axis in AXES:
        p.add_argument(f"--{axis}", type=at_least(1), default=None, metavar="N",
                       help=f"the workload's {axis}, where it declares that axis (default: its own)")
    p.add_argument("--param", action="append", default=[], type=param, metavar="NAME=VALUE",
                   help="a value of your workload's own axis (Workload.params), e.g. --param arch=mobilenet_v2; "
                        "repeatable")
    p.add_argument("--precision", default=Precision.DEFAULT, type=precision, choices=list(Precision),
                   help="the precision you will train at: default (PyTorch's own: FP32, TF32 in cuDNN's convolutions), "
                        "fp32 (strict), tf32, bf16 (autocast) or fp16 (autocast with a GradScaler)")
    p.add_argument("--gpus", type=gpu_counts, default=(), metavar="N[,N...]",
                   help="GPUs of one instance to price the run on, data-parallel, each count on the instance of the "
                        "fewest GPUs that has as many (billed whole) (default: 1 and every count an instance of the "
                        f"price table has, up to {decide.MOST}), e.g. --gpus 1,2,4,8 or --gpus 3")
    p.add_argument("--nodes", type=nodes, default=1, metavar="M",
                   help="instances joined by their network, each of --gpus GPUs (priced where the price table names the network)")
    p.add_argument("--global-batch", action="store_true",
                   help="--batch-size is the run's batch, split over the GPUs (each takes batch / GPUs); without it, "
                        "--batch-size is what one GPU takes (torchrun's, Lightning's, per_device_train_batch_size)")
    p.add_argument("--timeout", type=at_least(1), default=TIMEOUT_S, metavar="S",
                   help="seconds the process that imports your job and counts one step may run before it is stopped")
    p.add_argument("--verbose", action="store_true",
                   help="after the picks, every GPU model's line (on each count of GPUs priced) and how each figure "
                        "is found")
    p.add_argument("--json", type=Path, default=None, metavar="PATH",
                   help="also write every GPU's figures as a JSON list to PATH ('-': stdout alone, the table then to "
                        "stderr): option, gpu, batch_size, dataset_size, epoch_s and its interval, run_s, usd, fits, "
                        "basis and more")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    axes = tuple((a, getattr(args, a)) for a in AXES if getattr(args, a) is not None)
    step = Step(args.workload, args.epochs, args.batch_size, args.dataset_size, axes, tuple(args.param), args.timeout,
                args.precision)
    started = time.monotonic()
    # at a precision other than the default, the step at the default too: a GPU without the precision's unit (bf16 on
    # a T4) is never predicted faster than there, on one GPU or many
    precisions = dict.fromkeys((args.precision, Precision.DEFAULT))
    kept, counting = count_cache.begin([replace(step, precision=p) for p in precisions])  # a step counted before: no process
    try:
        model.shipped(model.PER_CLASS)  # read from the cache, or fitted while the step is counted: two cores, two jobs
        counts = kept | count_cache.end(counting, started)
        counted = counts[step]
        # the run as counted: the workload's own batch and dataset size where the flags named none
        request = decide.Request(args.epochs, int(counted["dataset_size"]), args.workload, None,
                                 (("batch_size", str(counted["batch_size"])),
                                  *((a, str(v)) for a, v in [*axes, *args.param])),
                                 args.precision, args.gpus, args.nodes, args.global_batch)
        offer = decide.Offer.shipped()
        # each count of GPUs takes its share of the batch with --global-batch: a line through the count
        shares = [replace(step, batch_size=b, precision=p)
                  for b in request.batches(int(counted["batch_size"]), list(offer.options)) for p in precisions]
        found = decide.answer(request, {**counts, **count_cache.recount(*shares)}, offer)
    except (PredictError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = sys.stderr if str(args.json) == "-" else sys.stdout  # stdout holds the JSON alone
    if args.json is not None:
        listed = json.dumps(decide.records(found.lines, found.grid, found.request, found.picks), indent=1)
        print(listed) if str(args.json) == "-" else args.json.write_text(listed + "\n")
    print("\n".join(screen.first_screen(found)), file=text)
    if args.verbose:
        print(screen.render(found), file=text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

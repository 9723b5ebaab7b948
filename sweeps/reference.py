"""The reference architectures: examples/zoo.py's networks measured on a GPU, for the prediction model.

    python sweeps/reference.py --out /tmp/ref                 # REFERENCE archs, cuda, batch 32 and 128, 3 runs
    python sweeps/reference.py --held-out --out /tmp/ref      # HELD_OUT archs in a careful user's plain loop
    python sweeps/reference.py --archs vgg11_bn,lstm_rows --out /tmp/ref   # some of them (the same name resumes)
    python sweeps/reference.py --smoke --devices cpu          # two archs, tiny, once: checks the path

Without --held-out: one sweep (sweeps/runner.run, as `python sweeps/scaling.py` runs its trials) of every
REFERENCE architecture at a launch-bound and a compute-bound batch (BATCH_SIZES) on IMAGES random
CIFAR-shaped images (HELD_OUT_IMAGES with --held-out), --repeats runs a point, into OUT/NAME/: the rows analysis/model.py fits on once
they are shipped under results/reference/.

With --held-out: the HELD_OUT architectures, which the reference set leaves out so that a prediction for
them is a prediction for models the fit never saw, timed in sweeps/parity.py's plain loop (a careful
user's: PyTorch's defaults, no host sync inside an epoch, each epoch between two synchronisations, the
warm-up epoch left out), --repeats times each; it prints one line per architecture and batch (the median
and min-max of the runs' median epoch) and writes them to OUT/NAME-held-out.json. Set these beside what
`crossover predict --workload examples/zoo.py:workload --param arch=...` says for the same GPU.
"""

from __future__ import annotations

import json
import statistics
import sys

from crossover.sweeps import cli, runner
from crossover.sweeps.space import Space
from crossover.trainables.config import TrialConfig
from crossover.trainables.trial import resolve
from crossover.trainables.workload import register

ZOO = "examples/zoo.py:workload"
# Of examples/zoo.py's ARCHS: the families the model is fitted on (resnet18 is examples/resnet_cifar.py's,
# already a reference workload of its own) and the ones it must predict unseen.
REFERENCE = ("resnet50", "resnext50_32x4d", "vgg11_bn", "densenet121", "mobilenet_v3_small", "mobilenet_v2",
             "mnasnet1_0", "shufflenet_v2_x1_0", "efficientnet_b0", "regnet_y_400mf", "squeezenet1_1",
             "convnext_tiny", "vit_tiny", "lstm_rows", "gru_rows")
HELD_OUT = ("resnet34", "mobilenet_v3_large", "wide_resnet50_2")
BATCH_SIZES = (32, 128)  # launch-bound for most of them on a Hopper, and where the GPU's share grows
IMAGES = 2048  # the reference sweep; --held-out times 4,096 (HELD_OUT_IMAGES), as its shipped rows were measured
HELD_OUT_IMAGES = 4096
EPOCHS = 4  # the warm-up and 3 timed (trainables/timing.py MIN_TIMED_EPOCHS)
SMOKE = {"arch": ["squeezenet1_1", "lstm_rows"], "batch_size": [32], "dataset_size": [96], "epochs": [2]}


def grid(archs, smoke: bool, images: int = IMAGES) -> dict:
    return dict(SMOKE) if smoke else {"arch": list(archs), "batch_size": list(BATCH_SIZES),
                                      "dataset_size": [images], "epochs": [EPOCHS]}


def held_out(args) -> list[dict]:
    """The plain loop's median epoch per held-out arch and batch, --repeats runs each, interleaved."""
    from crossover.sweeps.parity import plain  # imports torch: only on this path

    wl = register(ZOO)
    g = grid(args.archs or HELD_OUT, args.smoke, HELD_OUT_IMAGES)
    points = [(a, b) for a in g["arch"] for b in g["batch_size"]]
    runs = {p: [] for p in points}
    for _ in range(args.repeats):
        for arch, batch in points:
            cfg = TrialConfig(wl.name, device=args.devices, batch_size=batch, dataset_size=g["dataset_size"][0],
                              epochs=g["epochs"][0], module=wl.ref, params={"arch": arch, "image_size": 32})
            runs[(arch, batch)].append(statistics.median(plain(resolve(cfg))["seconds"]))
    out = []
    for (arch, batch), seconds in runs.items():
        out.append({"arch": arch, "batch_size": batch, "dataset_size": g["dataset_size"][0], "device": args.devices,
                    "epoch_s_median": statistics.median(seconds), "epoch_s_runs": seconds})
        print(f"{arch:20s} batch {batch:4d}: {statistics.median(seconds):.4f} s an epoch "
              f"({min(seconds):.4f}-{max(seconds):.4f}, {len(seconds)} runs)", flush=True)
    return out


def main(argv=None) -> int:
    p = cli.parser(__doc__, "zoo-reference", "sweep name: rows go to OUT/NAME/")
    p.add_argument("--devices", default="cuda", help="one device: cuda (default), or cpu to check the path")
    p.add_argument("--repeats", type=cli.at_least(1), default=3, help="runs of every point")
    p.add_argument("--held-out", action="store_true", help="time the held-out archs in the plain loop instead")
    p.add_argument("--archs", type=cli.names(REFERENCE + HELD_OUT), default=None,
                   help="comma-separated archs of REFERENCE (HELD_OUT with --held-out) instead of all of them")
    args = p.parse_args(argv)
    if args.held_out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.name}-held-out.json").write_text(json.dumps(held_out(args), indent=1))
        return 0
    wl = register(ZOO)
    sp = Space(args.name, {wl.ref: grid(args.archs or REFERENCE, args.smoke)}, (args.devices,), repeats=args.repeats,
               fixed={"exclusive": True}, timeout_s=args.trial_timeout)
    return runner.exit_status(lambda: _sweep(sp, args))


def _sweep(sp: Space, args) -> int:
    sp.expand()  # every configuration checked before Ray starts
    runner.connect(args.address)
    store = runner.run(sp, args.out, max_concurrent=1, log=print)
    print(f"rows in {store.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The reference architectures: examples/zoo.py's networks measured on a GPU, for the prediction model.

    python studies/reference.py --out /tmp/ref                 # REFERENCE archs, cuda, batch 32 and 128, 3 runs
    python studies/reference.py --held-out --out /tmp/ref      # HELD_OUT archs in a careful user's plain loop
    python studies/reference.py --archs vgg11_bn,lstm_rows --out /tmp/ref   # some of them (the same name resumes)
    python studies/reference.py --smoke --devices cpu          # two archs, tiny, once: checks the path
    python studies/reference.py --real --out /tmp/ref          # examples/realsize.py's REAL archs, plain loop,
                                                              # default and bf16, 2 batch sizes, 3 runs, peak memory
    python studies/reference.py --real --held-out --out /tmp/ref   # REAL_HELD_OUT the same
    python studies/reference.py --real --workload examples/heldout.py:workload --out /tmp/ref
                                                  # UNSEEN, families no reference row holds; CURED also compiled
                                                  # and captured whole in a CUDA graph (engines compile, graph)
    python studies/reference.py --real --workload examples/heldout.py:workload --engines eager --deadline 450 \
        --archs video_r3d,fasterrcnn,mamba_scan,moe,wavenet,frozen_bert,pointnet,lora_gpt2_small --out /tmp/ref
                                                  # eight families at UNSEEN's two batches, default and bf16, 3 runs
                                                  # each: 96 runs, about 7 minutes on an H100 (estimated)
    python studies/reference.py --real --workload examples/heldout.py:workload --smoke --devices cpu
                                                  # its `tiny` networks, batch 2, 2 steps, once: checks the path
    python studies/reference.py --rows /tmp/ref/*-real.jsonl --out results/reference/real-2026-11-27
                                                  # --real's runs as rows the model fits on, counted here

Without --held-out: one sweep (sweeps/runner.run, as `python sweeps/scaling.py` runs its trials) of every
REFERENCE architecture at a launch-bound and a compute-bound batch (BATCH_SIZES) on IMAGES random
CIFAR-shaped images (HELD_OUT_IMAGES with --held-out), --repeats runs a point, into OUT/NAME/: the rows analysis/model/ fits on once
they are shipped under results/reference/.

With --held-out: the HELD_OUT architectures, which the reference set leaves out so that a prediction for
them is a prediction for models the fit never saw, timed in studies/parity.py's plain loop (a careful
user's: PyTorch's defaults, no host sync inside an epoch, each epoch between two synchronisations, the
warm-up epoch left out), --repeats times each; it prints one line per architecture and batch (the median
and min-max of the runs' median epoch) and writes them to OUT/NAME-held-out.json. Set these beside what
`crossover predict --workload examples/zoo.py:workload --param arch=...` says for the same GPU.
"""

from __future__ import annotations

import json
import statistics
import sys

from crossover.config import TrialConfig
from crossover.sweeps import cli, runner
from crossover.sweeps.cluster import connect
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.sweeps.status import exit_status
from crossover.trainables.registry import Registry
from crossover.trainables.trial import resolve

from parity import PLAIN_ENGINES, plain

ZOO = "examples/zoo.py:workload"
# Of examples/zoo.py's ARCHS: the families the model is fitted on (resnet18 is examples/resnet_cifar.py's,
# already a reference workload of its own) and the ones it must predict unseen.
REFERENCE = ("resnet50", "resnext50_32x4d", "vgg11_bn", "densenet121", "mobilenet_v3_small", "mobilenet_v2",
             "mnasnet1_0", "shufflenet_v2_x1_0", "efficientnet_b0", "regnet_y_400mf", "squeezenet1_1",
             "convnext_tiny", "vit_tiny", "lstm_rows", "gru_rows")
HELD_OUT = ("resnet34", "mobilenet_v3_large", "wide_resnet50_2")
# --real: examples/realsize.py's networks at the sizes people rent GPUs for, each at a small batch and at one that
# fills the GPU (samples a step), trained REAL_STEPS steps an epoch in the plain loop at each of REAL_PRECISIONS;
# REAL_HELD_OUT are in no reference set, for predictions of models the fit never saw
REALSIZE = "examples/realsize.py:workload"
REAL = {"resnet50": (16, 128), "convnext_tiny": (16, 128), "efficientnet_b0": (16, 128), "vit_b_16": (16, 128),
        "vit_s_16": (16, 128), "bert_base": (16, 128), "bert_large": (2, 16), "gpt2_small": (2, 16),
        "gpt2_medium": (1, 8), "lstm_speech": (16, 128)}
REAL_HELD_OUT = {"swin_t": (16, 128), "mobilenet_v3_large": (16, 128), "gru_text": (16, 128)}
REAL_STEPS = 8
REAL_PRECISIONS = ("default", "bf16")
# --real --workload examples/heldout.py:workload: networks of families no reference row holds (a U-Net, a plain
# MLP, embedding bags, a custom autograd.Function, LoRA, frozen backbones, a 3-D CNN, a detector, a Python-loop
# scan, a mixture of experts, a dilated-convolution audio net, a frozen encoder, PointNet), to judge predictions
# against and never to fit on; CURED are host-bound at their batch, and are also timed as a user would cure that
# (parity.plain's engines 'compile' and 'graph'). A workload of neither table takes --archs and --batch-sizes.
# The batches are ones a user picks, the larger well inside 80 GB; those of the seven families after small_cnn
# were chosen from their counted FLOPs (sweeps/count_step.py) so that an epoch of REAL_STEPS steps takes 0.1-2 s on
# an H100 (a guess before any was measured; pointnet's, host-bound at a user's batch, less).
UNSEEN_JOBS = "examples/heldout.py:workload"
UNSEEN = {"unet": (8, 32), "mlp": (64, 512), "embbag": (512, 4096), "customfn": (32, 128), "lora_gpt2_small": (8, 32),
          "lora_gpt2_medium": (8,), "frozen_resnet50": (16, 128), "probe_vit_b_16": (16, 128), "small_mixer": (16,),
          "small_cnn": (16,), "video_r3d": (8, 32), "fasterrcnn": (4, 16), "mamba_scan": (16, 64), "moe": (16, 64),
          "wavenet": (8, 32), "frozen_bert": (32, 128), "pointnet": (32, 256)}
CURED = ("small_mixer", "small_cnn")
REAL_SMOKE = {"batch_size": 2, "steps": 2, "epochs": 2}  # --real --smoke: once, the workload's `tiny` sizes
BATCH_SIZES = (32, 128)  # launch-bound for most of them on a Hopper, and where the GPU's share grows
IMAGES = 2048  # the reference sweep; --held-out times 4,096 (HELD_OUT_IMAGES), as its shipped rows were measured
HELD_OUT_IMAGES = 4096
EPOCHS = 4  # the warm-up and 3 timed (trainables/timing.py MIN_TIMED_EPOCHS)
SMOKE = {"arch": ["squeezenet1_1", "lstm_rows"], "batch_size": [32], "dataset_size": [96], "epochs": [2]}


def grid(archs, smoke: bool, images: int = IMAGES) -> dict:
    return dict(SMOKE) if smoke else {"arch": list(archs), "batch_size": list(BATCH_SIZES),
                                      "dataset_size": [images], "epochs": [EPOCHS]}


def held_out(args, registry: Registry) -> list[dict]:
    """The plain loop's median epoch per held-out arch and batch, --repeats runs each, interleaved."""
    wl = registry.register(ZOO)
    g = grid(args.archs or HELD_OUT, args.smoke, HELD_OUT_IMAGES)
    points = [(a, b) for a in g["arch"] for b in g["batch_size"]]
    runs: dict[tuple[str, int], list[float]] = {p: [] for p in points}
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


def real_runs(args, registry: Registry) -> list[tuple[int, str, int, str, str]]:
    """Every run of --real, in order: (repeat, arch, batch, precision, engine), --repeats rounds of the eager points,
    then --repeats rounds of the cures (engines compile, graph). The cures come last so that no eager run follows a
    compile or a capture in its process: on an H200 (2026-11-28) small_mixer, small_cnn and customfn at batch 32
    took 1.3-1.7x their first round's epoch in the rounds after a round's cures, the GPU-bound points the same
    within 1% (a second process that compiled nothing measured them at 0.9-1.6x, on another host: the cause is not
    settled; docs/data/held-out-jobs-h200-2026-11-28.md); and a capture that fails then spoils no eager run."""
    ref = args.workload[0] if args.workload else REALSIZE
    name = registry.register(ref).name  # the job file's, wherever it is named from
    unseen = name == registry.register(UNSEEN_JOBS).name
    table = UNSEEN if unseen else (REAL_HELD_OUT if args.held_out else REAL) if name == registry.register(REALSIZE).name else {}
    archs = args.archs or tuple(table)
    if not archs or [a for a in archs if a not in table and not args.batch_sizes]:
        raise SystemExit(f"--archs: {list(archs) or ref} has no table of batch sizes here (REAL, REAL_HELD_OUT, "
                         "UNSEEN): give --archs and --batch-sizes")
    rounds = 1 if args.smoke else args.repeats
    groups = [[e for e in args.engines if e == "eager"], [e for e in args.engines if e != "eager"]]
    return [(r, a, b, p, e) for group in groups for r in range(rounds) for e in group for a in archs
            for b in ([REAL_SMOKE["batch_size"]] if args.smoke else args.batch_sizes or table[a])
            for p in args.precisions.split(",") if e == "eager" or (unseen and a in CURED)]


def environment() -> dict:
    """Where the runs ran: the GPU (name, UUID, driver, from nvidia-smi), the host's CPU and name, torch and CUDA."""
    import platform
    import subprocess

    import torch

    env = {"device_name": torch.cuda.get_device_name() if torch.cuda.is_available() else platform.processor(),
           "torch": torch.__version__, "cuda": torch.version.cuda, "host": platform.node(),
           "cpu": next((line.split(":")[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                       "")}
    if torch.cuda.is_available():
        smi = subprocess.run(["nvidia-smi", "--query-gpu=uuid,driver_version", "--format=csv,noheader", "-i",
                              str(torch.cuda.current_device())], capture_output=True, text=True)
        if smi.returncode == 0:
            env["gpu_uuid"], env["driver"] = (v.strip() for v in smi.stdout.strip().split(","))
    return env


def real(args, out, registry: Registry) -> None:
    """The plain loop's epochs and peak memory for each real-sized arch (REAL, REAL_HELD_OUT with --held-out, or
    another --workload's: `real_runs`), batch, precision and engine, --repeats runs each, interleaved: one JSON
    line a run, appended to `out` as it ends, so that a run cut short keeps what it measured. No run starts
    after --deadline seconds; an engine that failed once is skipped in later rounds (a failed capture can leave
    the GPU's context unusable)."""
    import time

    import torch
    from torch._dynamo.utils import counters  # torch.compile's count of the graphs it left out of CUDA graphs

    ref = args.workload[0] if args.workload else REALSIZE
    wl = registry.register(ref)
    env, start, broken, cured = environment(), time.perf_counter(), set(), False
    steps = REAL_SMOKE["steps"] if args.smoke else args.steps
    extra = {"tiny": 1} if args.smoke and "tiny" in wl.params else {}
    for repeat, arch, batch, precision, engine in real_runs(args, registry):
        if args.deadline and time.perf_counter() - start > args.deadline:
            print(f"--deadline {args.deadline} s passed: no more runs", flush=True)
            return
        params = {"arch": arch, **extra, **dict(args.param)}
        cfg = TrialConfig(wl.name, device=args.devices, batch_size=batch, dataset_size=batch * steps,
                          epochs=REAL_SMOKE["epochs"] if args.smoke else EPOCHS, module=wl.ref, params=params,
                          precision=precision, min_timed_s=0 if args.smoke else TrialConfig.min_timed_s)
        # after_cures: a compile or a capture ran earlier in this process (real_runs says why it matters);
        # allocated_at_start_bytes: what earlier runs left allocated (CUDA graph pools), in the peak too
        line = {"workload": ref, "arch": arch, "params": params, "batch_size": batch, "dataset_size": batch * steps,
                "precision": precision, "engine": engine, "repeat": repeat, "after_cures": cured, **env}
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            line["allocated_at_start_bytes"] = torch.cuda.memory_allocated()
        skips = counters["inductor"]["cudagraph_skips"]
        cured = cured or engine != "eager"
        try:
            if engine in broken:
                raise RuntimeError(f"skipped: engine {engine} failed in an earlier run")
            run = plain(resolve(cfg), engine=engine)
        except torch.cuda.OutOfMemoryError as exc:
            line |= {"status": "oom", "error": str(exc).splitlines()[0]}
        except Exception as exc:  # noqa: BLE001 (a run that fails is a line that says why, the rest go on)
            if engine != "eager":
                broken.add(engine)
            line |= {"status": "error", "error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"}
        else:
            line |= {"status": "ok", "epoch_s": run["seconds"], "epoch_s_median": statistics.median(run["seconds"]),
                     "warmup_s": run["warmup_s"], "data_bytes": run["data_bytes"]}
            if engine == "compile":
                line["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"] - skips
            if torch.cuda.is_available():
                free, total = torch.cuda.mem_get_info()
                line |= {"peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                         "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
                         "context_bytes": total - free - torch.cuda.memory_reserved()}
        with open(out, "a") as f:
            f.write(json.dumps(line) + "\n")
        print(f"{arch:18s} batch {batch:4d} {precision:8s} {engine:7s} r{repeat}: " + (
            f"{line['epoch_s_median']:.4f} s an epoch, peak {line.get('peak_allocated_bytes', 0) / 1e9:.2f} GB"
            if line["status"] == "ok" else line["error"][:100]) + f" ({time.perf_counter() - start:.0f} s)",
            flush=True)


def real_rows(files: list, out) -> None:
    """The runs of `files` (--real's JSON lines, of one GPU or several) as rows of crossover/schema.py, one per
    arch, batch, precision and GPU, in OUT/real/rows.parquet: the runs' median epochs (the first --repeats ok runs of each point, each run's
    median over its timed epochs) and, in the per-class columns, the step as `crossover predict` counts it on a
    laptop (sweeps/count_step.py, the meta device, at the row's precision), which is what analysis/model/ fits
    and predicts from; peak_gpu_bytes the largest run's allocated peak, the training set on the GPU included."""
    import datetime as dt
    import hashlib

    import pandas as pd

    from crossover import schema
    from crossover.analysis.model import COUNTED_NOTE
    from crossover.sweeps.count_step import counted

    runs = pd.concat([pd.read_json(f, lines=True) for f in files], ignore_index=True)
    runs = runs[runs["status"] == "ok"]
    steps: dict[tuple[str, int, int, str], dict] = {}  # a step's count is every GPU's
    rows, now = [], dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    for (gpu, arch, batch, precision), group in runs.groupby(["device_name", "arch", "batch_size", "precision"]):
        group = group.head(3)
        shape = (arch, int(batch), int(group["dataset_size"].iloc[0]), precision)
        step = steps[shape] = steps.get(shape) or counted(REALSIZE, shape[1], shape[2], {}, {"arch": arch}, precision)
        medians = [float(m) for m in group["epoch_s_median"]]
        config = {k: step[k] for k in ("workload", "workload_module", "batch_size", "dataset_size", "lr", "loop",
                                        "engine", "seed", "workload_params", "n_params", "model", "steps_per_epoch")}
        costs = {k: v for k, v in step.items() if k in schema.NAMES and (k.endswith("_per_step") or k == "costs_note")}
        key = json.dumps([gpu, config["workload_params"], int(batch), precision], sort_keys=True)
        rows.append({**config, **costs, "schema_version": schema.SCHEMA_VERSION, "sweep": "real", "trial_id": "plain",
                     "config_hash": hashlib.sha256(key.encode()).hexdigest()[:16], "status": "ok", "finished_at": now,
                     "device": "cuda", "precision": precision, "epochs": EPOCHS, "warmup_epochs": 1,
                     "epoch_s": medians, "timed_epochs": len(medians), "epoch_s_median": statistics.median(medians),
                     "epoch_s_min": min(medians), "epoch_s_max": max(medians),
                     "samples_per_s": int(group["dataset_size"].iloc[0]) / statistics.median(medians),
                     "world_size": 1, "fused_members": 1, "gpus_requested": 1.0, "data_on_device": True,
                     "device_name": gpu, "peak_gpu_bytes": int(group["peak_allocated_bytes"].max()),
                     "torch_version": group["torch"].iloc[0], "cuda_version": str(group["cuda"].iloc[0]),
                     "hostname": group["host"].iloc[0], "cpu_model": group["cpu"].iloc[0], "cold_start": False,
                     "data_source": "random inputs (timing only); timed in studies/parity.py's plain loop",
                     "costs_note": f"{COUNTED_NOTE} (crossover.sweeps.count_step)"})
        print(f"{gpu} {arch} batch {batch} {precision}: {statistics.median(medians):.4f} s an epoch", flush=True)
    (out / "real").mkdir(parents=True, exist_ok=True)
    import pyarrow.parquet as pq
    pq.write_table(schema.to_table(rows), out / "real" / "rows.parquet")


def main(argv=None) -> int:
    p = cli.parser(__doc__, "zoo-reference", "sweep name: rows go to OUT/NAME/")
    p.add_argument("--devices", default="cuda", help="one device: cuda (default), or cpu to check the path")
    p.add_argument("--repeats", type=cli.at_least(1), default=3, help="runs of every point")
    p.add_argument("--held-out", action="store_true", help="time the held-out archs in the plain loop instead")
    p.add_argument("--real", action="store_true",
                   help="the realsize example's real-sized networks (REAL; REAL_HELD_OUT with --held-out) in the plain "
                        "loop: one JSON line a run to OUT/NAME-real.jsonl")
    p.add_argument("--precisions", default=",".join(REAL_PRECISIONS), help="--real: comma-separated precisions")
    p.add_argument("--engines", default=",".join(PLAIN_ENGINES), type=cli.names(PLAIN_ENGINES),
                   help="--real: the plain loop's engines; those but eager only for CURED (as studies/parity.py's plain loop)")
    p.add_argument("--steps", type=cli.at_least(1), default=REAL_STEPS, help="--real: steps an epoch")
    p.add_argument("--batch-sizes", type=cli.integers(1), default=None, metavar="B,B,...",
                   help="--real: every arch at these batch sizes instead of its own (REAL, UNSEEN)")
    p.add_argument("--deadline", type=cli.at_least(1), default=None, metavar="S",
                   help="--real: start no run after S seconds (what ran is written)")
    p.add_argument("--archs", type=lambda text: tuple(a.strip() for a in text.split(",") if a.strip()), default=None,
                   help="comma-separated archs of REFERENCE (HELD_OUT with --held-out) instead of all of them; with "
                        "--real, of its table (REAL, REAL_HELD_OUT, UNSEEN) or, with --batch-sizes, your workload's")
    p.add_argument("--rows", nargs="+", default=None, metavar="JSONL",
                   help="--real's runs as reference rows in OUT/real/ (`real_rows`), each step counted here")
    args = p.parse_args(argv)
    zoo = REFERENCE + HELD_OUT
    if not args.real and args.archs and (unknown := [a for a in args.archs if a not in zoo]):
        p.error(f"--archs: unknown {unknown}; choose from {', '.join(zoo)}")
    if args.rows:
        real_rows(args.rows, args.out)
        return 0
    registry = Registry()  # what this process imports of the zoo and your workload, and ships of them to Ray's workers
    if args.real:
        args.out.mkdir(parents=True, exist_ok=True)
        named = f"-{registry.register(args.workload[0]).name}" if args.workload else ""
        real(args, args.out / f"{args.name}{named}{'-held-out' if args.held_out else ''}-real.jsonl", registry)
        return 0
    if args.held_out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.name}-held-out.json").write_text(json.dumps(held_out(args, registry), indent=1))
        return 0
    wl = registry.register(ZOO)
    sp = Space(args.name, {wl.ref: grid(args.archs or REFERENCE, args.smoke)}, (args.devices,), repeats=args.repeats,
               fixed={"exclusive": True}, timeout_s=args.trial_timeout, planner=Planner(registry))
    return exit_status(lambda: _sweep(sp, args), sp.planner)


def _sweep(sp: Space, args) -> int:
    sp.expand()  # every configuration checked before Ray starts
    connect(args.address, sp.shipping)
    store = runner.run(sp, args.out, max_concurrent=1, log=print)
    print(f"rows in {store.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Data-parallel parity: crossover's `ddp:N` trials against a careful user's torchrun DDP loop at the same work a
GPU, and that loop's weak scaling over 1, 2, 4 GPUs (studies/parity.py is the one-device twin).

    python studies/parity_ddp.py --workload examples/realsize.py:workload \\
        --point arch=resnet50,precision=default --point arch=bert_base,precision=default --gpus 1,2,4
    python studies/parity_ddp.py --study --gpus 1,2,4,8   # the four real-sized models at default and bf16 (STUDY)
    python studies/parity_ddp.py --smoke          # disc on ddp-cpu:2 against torchrun over gloo: the path, on a CPU

The target: a `ddp:N` trial's epoch within TARGET (1.10x) of the plain loop's on N GPUs, the same work a GPU.

    plain   the loop of studies/parity.py `plain` on every rank of `torchrun --standalone --nproc_per_node N`
            (torch.distributed.run, NCCL on GPUs, gloo on CPUs): DistributedDataParallel at PyTorch's defaults,
            each rank its own random data on its device (its own seed: no DistributedSampler), a batch of
            --per-gpu-batch a rank and --steps steps an epoch, no host sync inside an epoch, a barrier and a
            device synchronisation around each timed epoch; the median of the epochs after the warm-up (rank 0's
            clock). One launch a GPU count measures every point, each --plain-repeats times; on one GPU the same
            loop without DDP (a user with one GPU does not wrap it): the weak-scaling base
    ddp     crossover's trial on `ddp:N` (`ddp-cpu:N` on CPUs) through Tune and Ray Train, as `crossover sweep`
            runs it: `ddp:N` takes the GLOBAL batch (trainables/ddp.py), so it runs at batch N x --per-gpu-batch
            and N x --per-gpu-batch x --steps samples, exactly the plain loop's work a rank; --repeats trials
            (seeds) a point, one at a time; their rows stay in OUT/NAME-<point>-ddpN/ like any sweep's

Both time --epochs epochs, the first a warm-up, and no more (min_timed_s 0). The plain loop runs first, at every
GPU count, then the ddp trials point by point in the order given, N by N; with --budget-s a point whose trials
would end past the budget (the last point's time a trial, FIRST_TRIAL_S before any, times --repeats) is left out
and said so. The table:
each point's plain seconds an epoch on 1 and N GPUs, the weak-scaling efficiency (one GPU's epoch over N's: the
same work a GPU), the ddp trials' median [min-max], and ddp/plain: the median (min-max) over the trials of each
trial's median over the plain loop's. Every measurement is a JSON line in --json as it ends, the first the host's
(`host`: its CPU, GPUs, the link between them as `nvidia-smi topo -m` gives it, torch's and Ray's versions, and the
NCCL settings of SOCKETS where set), so that its rows are reference rows with their host and link.

Both arms build DistributedDataParallel alike (trainables/placement.py, studies/parity.py): PyTorch's defaults,
25 MiB buckets, gradient_as_bucket_view, static_graph and find_unused_parameters off, buffers broadcast each
forward; neither syncs the host inside an epoch. What differs is Ray's: the rank's loop runs in a Ray Train worker
beside Ray's own threads and the Tune trial's process, and each rank builds the global batch's data and takes its
share of it (trainables/train.py `_batches`), where a plain rank makes its own.

Two Ray nodes on one host, NCCL kept off NVLink and shared memory (the rehearsal of two nodes: results/reference/
h200x4-2026-11-28-ddp/run.sh): export SOCKETS' settings before `ray start` on both nodes, so that every Ray worker
and torchrun rank has them, then give --address.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from crossover.analysis.load import read
from crossover.sweeps import cli, runner
from crossover.sweeps.cluster import connect
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.sweeps.status import exit_status
from crossover.trainables.devices import parse
from crossover.trainables.workloads import with_grid

TARGET = 1.10  # a ddp:N trial's epoch over the plain DDP loop's, at most
# NCCL between two nodes on one host: sockets over loopback, off NVLink (P2P) and shared memory
SOCKETS = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_DISABLE": "1"}
SMOKE = with_grid("parity-ddp-smoke")  # --smoke's built-in, tiny (trainables/workloads.py)
# s a ddp trial takes, start to row, until a point has run: ResNet-50's ddp:2 trials came 36 s apart on 4 x H200
# (2026-11-28), Ray Train's workers started afresh each time; the budget's guess for the first point
FIRST_TRIAL_S = 40.0


@dataclass(frozen=True)
class Point:
    """One configuration measured at every GPU count: the workload's own axes' values and a precision."""

    params: tuple  # ((axis, value), ...) of the workload's own axes (Workload.params), e.g. (('arch', 'resnet50'),)
    precision: str  # crossover/schema.py PRECISIONS: default is PyTorch's own

    @property
    def label(self) -> str:
        return " ".join([*(f"{v}" for _, v in self.params), self.precision])

    @property
    def slug(self) -> str:
        """The label as a sweep's name takes it (letters, digits, '-', '_', '.')."""
        return "-".join([*(str(v) for _, v in self.params), self.precision]).replace("/", "_")


# --study: the four real-sized models of examples/realsize.py, each at PyTorch's default and in bf16
STUDY_WORKLOAD = "examples/realsize.py:workload"
STUDY = tuple(Point((("arch", arch),), precision) for arch in ("resnet50", "vit_b_16", "bert_base", "gpt2_small")
              for precision in ("default", "bf16"))


def point(text: str) -> Point:
    """--point AXIS=VALUE,...[,precision=P]: an argparse type."""
    pairs = [cli.param(part) for part in text.split(",") if part.strip()]
    values = dict(pairs)
    return Point(tuple((k, v) for k, v in pairs if k != "precision"), str(values.get("precision", "default")))


@dataclass(frozen=True)
class Flags:
    """The command line, parsed once (`parse_args`)."""

    out: Path  # results root: the ddp trials' rows go to OUT/NAME-<point>-ddpN/
    name: str  # prefix of the sweeps' names
    workload: str | None  # your workload's reference (path/to/job.py:ATTR); None: --smoke's built-in
    param: tuple  # (axis, value) of your workload's own axes, held at every point
    points: tuple  # of Point, in the order measured
    gpus: tuple  # GPU counts (CPU ranks with --cpu): 1 is the plain loop alone, the weak-scaling base
    per_gpu_batch: int  # samples a rank takes a step
    steps: int  # steps an epoch
    epochs: int  # epochs of every run, the warm-up included
    repeats: int  # ddp trials (seeds) a point and GPU count
    plain_repeats: int  # plain-loop runs a point and GPU count, each its own model and data, in one launch
    cpu: bool  # ddp-cpu:N and gloo: no GPU needed
    budget_s: float | None  # s: no ddp point is started that would end past this since the start
    address: str | None  # a running Ray cluster, or None: a local one
    json: Path | None  # JSON lines of every measurement, appended as each ends
    trial_timeout: float  # s: a trial's limit
    plan_timeout: float  # s: the limit of the process that plans your workload (sweeps/plan.py)
    smoke: bool


def parse_args(argv=None) -> Flags:
    p = cli.parser(__doc__, "parity-ddp", "prefix of the sweeps' names: OUT/NAME-<point>-ddpN/")
    p.add_argument("--point", action="append", type=point, default=[], metavar="AXIS=VALUE,...,precision=P",
                   help="a configuration: your workload's own axes' values and a precision (default: PyTorch's); "
                        "may be given several times, measured in that order; default: the workload's defaults")
    p.add_argument("--gpus", type=cli.integers(1), default=None, metavar="N,N,...",
                   help="GPU counts (1: the plain loop alone, the weak-scaling base); default 1,2,4,8 up to the GPUs "
                        "torch sees, 1,2 with --cpu")
    p.add_argument("--per-gpu-batch", type=cli.at_least(1), default=32, help="samples a rank takes a step")
    p.add_argument("--steps", type=cli.at_least(1), default=16, help="steps an epoch")
    p.add_argument("--epochs", type=cli.at_least(2), default=4, help="epochs of every run, the first a warm-up")
    p.add_argument("--repeats", type=cli.at_least(1), default=3, help="ddp trials (seeds) a point and GPU count")
    p.add_argument("--plain-repeats", type=cli.at_least(1), default=3,
                   help="plain-loop runs a point and GPU count, each with its own model and data")
    p.add_argument("--cpu", action="store_true", help="ddp-cpu:N over gloo (default where torch sees no GPU)")
    p.add_argument("--study", action="store_true",
                   help=f"the real-sized study: {STUDY_WORKLOAD} at ResNet-50, ViT-B/16, BERT-base and a GPT-2-small "
                        "decoder, each at the default precision and bf16 (in place of --workload and --point)")
    p.add_argument("--budget-s", type=float, default=None, metavar="S",
                   help="start no ddp point that would end past S seconds from the start")
    p.add_argument("--json", type=Path, default=None, help="append every measurement to this file, a JSON line each")
    args = p.parse_args(argv)
    if len(args.workload) > 1:
        p.error("--workload: one workload a run (give its configurations with --point)")
    if args.study and (args.workload or args.point or args.smoke):
        p.error("--study measures its own workload and points: leave --workload, --point and --smoke out")
    cpu = args.cpu or not torch.cuda.is_available()
    gpus = tuple(args.gpus or ([1, 2] if cpu else [n for n in (1, 2, 4, 8) if n <= max(torch.cuda.device_count(), 1)]))
    workload = STUDY_WORKLOAD if args.study else args.workload[0] if args.workload else None
    if not workload and not args.smoke:
        p.error("nothing to measure: give --workload path/to/job.py:ATTR, --study or --smoke")
    smoke = args.smoke
    points = STUDY if args.study else tuple(args.point) or (Point((), "default"),)
    return Flags(args.out, args.name, workload, tuple(args.param), points, gpus, args.per_gpu_batch, 2 if smoke else args.steps,
                 args.epochs, 1 if smoke else args.repeats, 1 if smoke else args.plain_repeats, cpu, args.budget_s,
                 args.address, args.json, args.trial_timeout, args.plan_timeout, smoke)


def grid(flags: Flags, pt: Point, n: int, planner: Planner) -> dict:
    """{workload: grid} of `pt` at `n` ranks: n x the per-GPU batch and n x its samples an epoch."""
    batch = n * flags.per_gpu_batch
    own = {"batch_size": [batch], "dataset_size": [batch * flags.steps], "epochs": [flags.epochs]}
    if flags.workload is None:
        return {w: {**g, **own} for w, g in SMOKE.items()}
    planner.spec(flags.workload, flags.plan_timeout)  # planned, and shipped to Ray's workers, before Ray starts
    return {flags.workload: {**own, **{k: [v] for k, v in pt.params}}}


def space(flags: Flags, pt: Point, n: int, device: str, planner: Planner, name: str = "p") -> Space:
    """`pt` at `n` ranks' work on `device` (ddp:n, ddp-cpu:n; 'cuda' or 'cpu' for one rank of the plain loop)."""
    ranks = n if parse(device).distributed else 1  # a plain rank's work is one rank's, on one CPU thread
    return Space(name, grid(flags, pt, ranks, planner), (device,), cpu_threads=ranks,
                 repeats=flags.repeats, params=dict(flags.param),
                 fixed={"precision": pt.precision, "min_timed_s": 0, "exclusive": True},
                 timeout_s=flags.trial_timeout, plan_timeout_s=flags.plan_timeout, planner=planner)


def ddp_device(flags: Flags, n: int) -> str:
    return f"ddp-cpu:{n}" if flags.cpu else f"ddp:{n}"


# ---- the plain loop: one torchrun launch a GPU count, every point in it ----

def launch(flags: Flags, n: int, configs: list, timeout_s: float | None) -> list[dict]:
    """Run `configs` ([(label, TrialConfig of one rank's work), ...]) on `n` ranks of one torchrun launch
    (`rank_main`, in this module); returns rank 0's lines ({label, repeat, seconds}). A launch that fails or
    outruns `timeout_s` returns the lines that ended, and says why on stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        request, answer = Path(tmp) / "request.pkl", Path(tmp) / "answer.jsonl"
        request.write_bytes(pickle.dumps({"workload": flags.workload, "configs": configs,
                                          "repeats": flags.plain_repeats, "answer": str(answer)}))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
               str(Path(__file__).resolve()), "--rank-of", str(request)]
        try:
            done = subprocess.run(cmd, env=cli.child_env(), timeout=timeout_s, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"plain loop on {n}: torchrun exited {done.returncode}: {done.stderr[-2000:]}", file=sys.stderr)
        except subprocess.TimeoutExpired:
            print(f"plain loop on {n}: stopped at the budget ({timeout_s:.0f} s)", file=sys.stderr)
        return [json.loads(line) for line in answer.read_text().splitlines()] if answer.exists() else []


def rank_main(request_path: str) -> int:
    """One torchrun rank: every config of the request, each `repeats` times, through studies/parity.py's plain loop
    (DDP where the group has more than one rank), each rank on its own seed; rank 0 appends a line a run."""
    import torch.distributed as dist

    import parity
    from crossover.trainables.registry import Registry
    from crossover.trainables.trial import resolve

    request = pickle.loads(Path(request_path).read_bytes())
    cuda = parse(request["configs"][0][1].device).uses_gpu
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    if request["workload"]:
        Registry().register(request["workload"])  # the user's file, imported here: `resolve` finds it by its name
    for label, cfg in request["configs"]:
        for repeat in range(request["repeats"]):
            trial = resolve(dataclasses.replace(cfg, seed=cfg.seed + 1000 * repeat + rank))
            seconds = parity.plain(trial)["seconds"]
            if rank == 0:
                with open(request["answer"], "a") as f:
                    f.write(json.dumps({"label": label, "repeat": repeat, "seconds": seconds}) + "\n")
            if cuda:
                torch.cuda.empty_cache()  # the next model's memory, as a fresh process would have it
    dist.destroy_process_group()
    return 0


# ---- the study ----

def emit(flags: Flags, line: dict) -> None:
    print(json.dumps(line), flush=True)
    if flags.json:
        with open(flags.json, "a") as f:
            f.write(json.dumps(line) + "\n")


def plain_phase(flags: Flags, planner: Planner, start: float) -> dict:
    """{(point label, n): [median seconds of each plain run]}, one launch a GPU count."""
    found: dict[tuple[str, int], list[float]] = {}
    for n in flags.gpus:
        configs = [(pt.label, space(flags, pt, n, "cpu" if flags.cpu else "cuda", planner).expand()[0].cfg)
                   for pt in flags.points]
        left = flags.budget_s - (time.perf_counter() - start) if flags.budget_s else None
        if left is not None and left <= 0:
            emit(flags, {"part": "skipped", "point": "plain", "gpus": n, "why": "the budget was spent"})
            continue
        for line in launch(flags, n, configs, left):
            median = statistics.median(line["seconds"])
            found.setdefault((line["label"], n), []).append(median)
            emit(flags, {"part": "plain", "point": line["label"], "gpus": n, "repeat": line["repeat"],
                         "epoch_s": line["seconds"], "epoch_s_median": median})
    return found


def ddp_phase(flags: Flags, planner: Planner, start: float) -> dict:
    """{(point label, n): [each trial's epoch_s_median]}, the points in order, N by N, within --budget-s."""
    found, per_trial = {}, FIRST_TRIAL_S
    for pt in flags.points:
        for n in (n for n in flags.gpus if n > 1):
            elapsed = time.perf_counter() - start
            if flags.budget_s and elapsed + per_trial * flags.repeats > flags.budget_s:
                emit(flags, {"part": "skipped", "point": pt.label, "gpus": n,
                             "why": f"{elapsed:.0f} s of the budget's {flags.budget_s:.0f} s gone, and its "
                                    f"{flags.repeats} trials take about {per_trial * flags.repeats:.0f} s"})
                continue
            begun = time.perf_counter()
            sp = space(flags, pt, n, ddp_device(flags, n), planner, f"{flags.name}-{pt.slug}-ddp{n}")
            store = runner.run(sp, flags.out, max_concurrent=1, log=lambda line: None)
            per_trial = (time.perf_counter() - begun) / flags.repeats
            rows = read(store.dir)
            ok = rows[rows["status"] == "ok"]
            found[(pt.label, n)] = ok["epoch_s_median"].tolist()
            emit(flags, {"part": "ddp", "point": pt.label, "gpus": n, "device": sp.devices[0],
                         "epoch_s_median": ok["epoch_s_median"].tolist(), "seeds": ok["seed"].tolist(),
                         "rank_node_ids": [list(r) if r is not None else None for r in ok["rank_node_ids"]],
                         "failed": rows.loc[rows["status"] != "ok", "error"].tolist(), "rows": str(store.dir),
                         "trial_wall_s": per_trial})
    return found


def table(flags: Flags, plain: dict, ddp: dict) -> list[str]:
    """One line a point and GPU count: the plain loop on 1 and N, its weak-scaling efficiency, the ddp trials, and
    ddp/plain (a line past TARGET is starred)."""
    unit = "CPU ranks" if flags.cpu else "GPUs"
    heads = ("point", unit, "plain s/epoch, 1", "plain s/epoch, N", "weak-scaling eff.", "ddp s/epoch", "ddp/plain")
    lines = []
    for pt in flags.points:
        one = plain.get((pt.label, 1))
        for n in (n for n in flags.gpus if n > 1):
            mine, trials = plain.get((pt.label, n)), ddp.get((pt.label, n))
            eff = f"{statistics.median(one) / statistics.median(mine):.2f}" if one and mine else "-"
            ratio = "-"
            if mine and trials:
                r = [t / statistics.median(mine) for t in trials]
                ratio = f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})" + \
                    (" *" if statistics.median(r) > TARGET else "")
            lines.append((pt.label, n, _cell(one), _cell(mine), eff, _cell(trials), ratio))
    widths = [max(len(str(x)) for x in column) for column in zip(heads, *lines)]
    return ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [heads, *lines]]


def _cell(values) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.3f}" + (f" [{min(values):.3f}-{max(values):.3f}]" if len(values) > 1 else "")


def host(flags: Flags) -> dict:
    """Where this runs: the host's CPU, its GPUs and the link between them (`nvidia-smi topo -m`; gloo over
    loopback with --cpu), torch's and Ray's versions, and the NCCL settings of SOCKETS set here."""
    import platform

    import ray

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if not flags.cpu else []
    link = "gloo over loopback (CPU ranks)"
    if gpus:
        try:
            link = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            link = f"not read: {exc}"
    return {"part": "host", "hostname": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "gpus": gpus,
            "link": link, "torch": torch.__version__, "cuda": torch.version.cuda, "ray": ray.__version__,
            "nccl_settings": {k: os.environ[k] for k in SOCKETS if k in os.environ}, "address": flags.address}


def local_cpus(flags: Flags) -> int | None:
    """The CPUs of the Ray this starts where no cluster is given: with --cpu, at least a core each for the most
    ranks asked and the trial's own quarter core, more than a 2-core machine has (its smoke's tiny MLP shows the
    path, not a timing); else the machine's own (None)."""
    if not flags.cpu or flags.address:
        return None
    return max(os.cpu_count() or 1, max(flags.gpus) + 1)


def study(flags: Flags, planner: Planner) -> int:
    start = time.perf_counter()
    emit(flags, host(flags))
    for pt in flags.points:  # every configuration checked, and your workload planned, before anything runs
        space(flags, pt, 1, "cpu" if flags.cpu else "cuda", planner).expand()
    plain = plain_phase(flags, planner, start)
    connect(flags.address, planner.registry.shipping, num_cpus=local_cpus(flags))
    ddp = ddp_phase(flags, planner, start)
    lines = table(flags, plain, ddp)
    print("\n".join(lines))
    emit(flags, {"part": "table", "lines": lines, "seconds": time.perf_counter() - start})
    print(f"plain: torchrun's DDP loop (python studies/parity.py's plain), {flags.per_gpu_batch} samples a rank a step, "
          f"{flags.steps} steps an epoch, the median of {flags.epochs - 1} epochs after a warm-up; ddp: crossover's "
          f"trials at the global batch N x {flags.per_gpu_batch}, rows in {flags.out}/{flags.name}-*/ "
          f"({time.perf_counter() - start:.0f} s); target: ddp/plain at most {TARGET:.2f}x, '*' past it", flush=True)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rank-of"]:  # a torchrun rank of the plain loop (`launch`)
        return rank_main(argv[1])
    flags = parse_args(argv)
    planner = Planner()
    return exit_status(lambda: study(flags, planner), planner)


if __name__ == "__main__":
    sys.exit(main())

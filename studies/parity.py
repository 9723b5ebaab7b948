"""Parity: the sweep's default path against a careful user's plain PyTorch loop, per epoch, on the
seeds' configurations or on your own workload (a benchmark, not a test).

    python studies/parity.py --workload examples/resnet_cifar.py:workload --batch-sizes 32,128
    python studies/parity.py --workload examples/zoo.py:workload --param arch=vgg11_bn --batch-sizes 32,128
    python studies/parity.py --workload examples/tabular_csv.py:workload --param csv=data.csv
    python studies/parity.py                      # the seeds' configurations, cpu (+ cuda where torch sees one)
    python studies/parity.py --smoke              # two small configurations, once: checks the path in about a minute

The target: the harness's default path (`python sweeps/scaling.py`: loop 'fast', engine 'eager',
PyTorch's default precision) stays within TARGET (1.10x) of the same model trained by a careful user's
plain loop, per epoch, on the CPU and on a GPU. The configurations:

    built-ins   each seed's configuration (Workload.grid("seeds"), trainables/workloads.py), its epochs
                cut to EPOCHS; with --smoke, SMOKE (or the workload's own 'smoke' grid)
    --workload  your workload's 'default' grid (Workload.grid) cut to one configuration: the first value
                of each of its axes (the grids list sizes smallest first), at least 1 + MIN_TIMED_EPOCHS
                epochs (trainables/timing.py: 3 timed); with --smoke, its 'smoke' grid
    --batch-sizes, --dataset-size, --epochs  replace every configuration's batch size (one configuration
                each), dataset size and epochs

Each configuration, on each device here, runs three ways on the same work (the Trial the sweep
resolves: data, model, optimiser and loss from the workload's own factories, its seed), each timing
the epochs after the one warm-up epoch, and more as a sweep's trial does until half a second is timed
(the trial's min_timed_s, trainables/timing.py more_epochs: a 40 ms epoch timed 3 times varied 1.5x
between repeats on a GPU host):

    plain   the loop a careful user writes, in this process: data on the device, PyTorch's defaults
            (precision; threads: torch's own on a GPU, the trial's on the CPU, so both sides of the CPU
            comparison have the same cores); per batch zero_grad(set_to_none=True), forward and loss
            (the workload's `step`, where its batch is not one tensor), backward, step; no host sync
            inside an epoch; each epoch timed with perf_counter between two device synchronisations
    direct  run_trial (trainables/train.py) called in this process: our loop without Ray
    sweep   all of the device's configurations as one sweep (sweeps/runner.run, one trial at a time),
            as `python sweeps/scaling.py` runs them: Tune, the trainable on a reused Ray worker; each
            median read back from its row

With --loops fast,seed (the default for the seeds' configurations) each configuration is measured a
second time in the seeds' own loop, labelled 'seed': the plain loop then reads `.item()` every step and
counts correct predictions as seeds 000 and 002 do, and the trials run loop 'seed'. That host sync
every step hides whatever the default path adds, so it is a comparison with the seeds, not the target.

Per repeat and device, the three ways run one after another over all configurations, in the order
plain, direct, sweep, then reversed on the next repeat, so a change in the machine's load falls on
all three. Each cell of the table is the median over repeats of that way's median ms/epoch, with
its min-max; each ratio is the median (min-max) over repeats of the two ways' ratio within a
repeat: sweep/plain (the target), direct/plain (our loop's own cost) and sweep/direct (the Ray
worker's). `load` is the 1-minute load average around the configuration's runs. A configuration past
TARGET is starred, and a line under the table says whether it was past in every repeat or in the median
alone, the target inside its repeats' spread (`verdict`). The header says how this process and a Ray
worker are set up (niceness, threads, cores). CPU trials take every core but one where the node has four
or more, two from sixteen (sweeps/cluster.py node_cpus), which leaves Ray's own processes room.

Epochs are cut from the seeds' (EPOCHS: per-epoch times settle within a few), and the CPU runs of
the image workloads train on CPU_IMAGES of MNIST's 60,000 images (synthetic either way). The trials'
rows stay in OUT/NAME-<stamp>-r<k>-<device>-<loop>/ like any sweep's; the plain and direct times are
printed only. Interrupted (Ctrl-C, `timeout -s INT`), it prints the table of the repeats that ended. The
plain and direct ways run in this process: with --address, give a Ray on this machine.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypedDict, cast

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils._pytree import tree_leaves, tree_map

from crossover.analysis.load import read
from crossover.config import LOOPS, ConfigError
from crossover.data import move, take
from crossover.schema import SIZE_AXES
from crossover.sweeps import cli, runner
from crossover.sweeps.cluster import connected, threads
from crossover.sweeps.plan import Planner
from crossover.sweeps.space import Space
from crossover.sweeps.status import exit_status
from crossover.trainables import precision
from crossover.trainables.devices import parse
from crossover.trainables.timing import MIN_TIMED_EPOCHS, more_epochs
from crossover.trainables.train import run_trial
from crossover.trainables.trial import Trial, here
from crossover.trainables.workloads import WORKLOADS, with_grid
from crossover.workload import filled_in, sums

WAYS = ("plain", "direct", "sweep")
PLAIN_ENGINES = ("eager", "compile", "graph")  # the plain loop's step: as written, torch.compile'd, one CUDA graph
DEVICES = ("cpu", "cuda")  # the devices a plain loop runs on: a CPU's threads, or one whole GPU
# Epochs of every run of the seeds' configurations, its warm-up included, by device, as {workload: {"epochs":
# [n]}}: the built-ins that declare the study's grid 'parity-<device>' (trainables/workloads.py says why those
# counts), laid over their 'seeds' grid. Its workloads, the five with a seed, are the default --workloads.
EPOCHS = {device: with_grid(f"parity-{device}") for device in DEVICES}
CPU_IMAGES = 10_000  # images of the image workloads' CPU runs (all 60,000: seconds an epoch on 16 cores)
SMOKE = with_grid("parity-smoke")  # --smoke's configurations


def grids(flags: "Flags", device: str, planner: Planner) -> dict:
    """The configurations measured on `device`: workload (a built-in's name, or your --workload's
    reference, planned by `planner`) -> its grid, as the module's docstring says."""
    out = {}
    for name in flags.workloads:
        if flags.smoke:
            out[name] = dict(SMOKE.get(name) or WORKLOADS[name].grid("smoke"))
            continue
        out[name] = {**WORKLOADS[name].grid("seeds"), **EPOCHS[device].get(name, {})}
        if parse(device).is_cpu and WORKLOADS[name].images:
            out[name]["dataset_size"] = [CPU_IMAGES]
    for ref, grid in planner.user_grids(flags, "smoke" if flags.smoke else "default").items():
        out[ref] = grid if flags.smoke else {axis: values[:1] for axis, values in grid.items()}
        if not flags.smoke:  # a median of MIN_TIMED_EPOCHS epochs at least, after the warm-up, as a sweep's
            out[ref]["epochs"] = [max(out[ref].get("epochs", [0])[0], 1 + MIN_TIMED_EPOCHS)]
    for name, grid in out.items():
        out[name] = {**grid, **({"batch_size": flags.batch_sizes} if flags.batch_sizes else {}),
                     **({"dataset_size": [flags.dataset_size]} if flags.dataset_size else {}),
                     **({"epochs": [flags.epochs]} if flags.epochs else {})}
    return out


def space(flags: "Flags", name: str, device: str, loop: str, cpu_threads: int, planner: Planner) -> Space:
    """One device's configurations as one sweep in `loop` ('fast', the default path, or 'seed'), timed one
    trial at a time, each trial timing its epochs after the warm-up, and more up to its min_timed_s, as the
    plain loop does."""
    return Space(name, grids(flags, device, planner), (device,), cpu_threads, params=dict(flags.param),
                 fixed={"loop": loop, "exclusive": True}, timeout_s=flags.trial_timeout,
                 plan_timeout_s=flags.plan_timeout, planner=planner)


def _sync(device: torch.device) -> None:
    """The device's queued work done, and in a data-parallel group every rank's (a barrier, then the device again:
    each rank's timed epoch starts and ends together)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize(device)


def plain(trial: Trial, default_threads: int | None = None, engine: str = "eager") -> dict:
    """The plain PyTorch loop on the trial's work (the module's docstring says how it is written), in the
    trial's loop: 'fast' a careful user's, 'seed' the seeds' (`.item()` and correct counts every step).
    `engine` (PLAIN_ENGINES) is how a user would cure a host-bound step: 'compile' the model wrapped in
    torch.compile(mode="reduce-overhead"), the rest of the loop as it was; 'graph' the whole step captured in
    one CUDA graph (`graphed`); 'eager' neither.

    Like a trial, it times more epochs than the trial's own until min_timed_s is timed (more_epochs).
    Returns {'seconds': each timed epoch's, 'warmup_s': the warm-up epochs' (a compile or capture in them),
    'last_loss': the last step's loss, read after the timing,
    'epoch_loss': the seeds' loop's last epoch's loss per sample (run_trial's train_loss), else None,
    'data_bytes': what the training set holds on the device}. The trial's precision is written as a user
    writes it: torch.autocast around the forward pass and the loss, a GradScaler for fp16.
    `default_threads` is torch's own thread count, which a GPU loop keeps as a user's would.

    In a process group of more than one rank (torchrun: studies/parity_ddp.py) it is a careful user's DDP loop: the
    trial's work on each rank (its own data: give each rank its own seed), the model in DistributedDataParallel at
    PyTorch's defaults on this rank's GPU (torch.cuda.current_device(), which torchrun's script sets), a barrier
    around each timed epoch, and every rank timing the same number of epochs."""
    cfg, wl = trial.cfg, here(trial).workload  # the user's code, in this process: what the plain loop times
    device = torch.device("cuda", torch.cuda.current_device()) if trial.spec.uses_gpu else torch.device("cpu")
    world = dist.get_world_size() if dist.is_initialized() else 1
    seed_loop = cfg.loop == "seed"
    torch.set_num_threads(cfg.threads if device.type == "cpu" else default_threads or torch.get_num_threads())
    # the trial's precision as a user writes it: for default PyTorch's own TF32 flags, as a fresh process has them
    # (another way's trial in this process may have set others); bf16 and fp16 autocast around the forward pass
    # and the loss, its cast weights cached (autocast's default), fp16's loss scaled by a GradScaler
    precision.set_tf32(cfg.precision)
    # a CUDA graph cannot capture autocast's cache of cast weights (PyTorch's CUDA Graphs notes)
    amp = torch.autocast(device.type, dtype=torch.bfloat16 if cfg.precision == "bf16" else torch.float16,
                         enabled=cfg.precision in ("bf16", "fp16"), cache_enabled=engine != "graph")
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16")
    torch.manual_seed(cfg.seed)
    data = wl.data(cfg)
    model = wl.make_model(cfg).to(device)
    if world > 1:
        model = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    x, y = move(data.x, device), data.y.to(device)
    optimizer = wl.make_optimizer(model.parameters(), filled_in(cfg.lr, "lr"))
    criterion = wl.make_loss()
    summed = sums(criterion)
    shuffler = torch.Generator().manual_seed(cfg.seed)  # the order run_trial draws
    state: _State = {"running_loss": 0.0}
    if engine == "compile":
        # a Module compiled is a Module (torch's OptimizedModule), which torch.compile's annotation types as a callable
        model = torch.compile(model, mode="reduce-overhead")  # type: ignore[assignment]

    def train_step(inputs, target):
        optimizer.zero_grad(set_to_none=True)
        with amp:
            loss, output = wl.run_step(model, inputs, target, criterion)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss, output

    if engine == "graph":
        train_step = graphed(train_step, optimizer, take(x, slice(0, cfg.batch_size)), y[:cfg.batch_size], cfg)

    def epoch():
        order = torch.randperm(data.n, generator=shuffler).to(device) if wl.shuffle else None
        model.train()
        state["running_loss"] = 0.0
        correct = torch.zeros((), dtype=torch.long if wl.classifies else torch.float32, device=device)
        batch = filled_in(cfg.batch_size, "batch_size")
        for first in range(0, data.n, batch):
            index = slice(first, first + batch) if order is None else order[first:first + batch]
            inputs, target = take(x, index), y[index]
            loss, output = train_step(inputs, target)
            if seed_loop:
                state["running_loss"] += loss.item() * (1 if summed else len(target))
                if wl.metric != "loss":
                    # a metric neither 'loss' nor 'accuracy' is the workload's function (Workload checks it)
                    metric = cast(Callable, wl.metric)
                    correct += (output.argmax(1) == target).sum() if wl.classifies else metric(output, target)
        state["loss"] = loss

    def timed(n: int) -> list[float]:
        seconds = []
        for _ in range(n):
            _sync(device)
            start = time.perf_counter()
            epoch()
            _sync(device)
            seconds.append(time.perf_counter() - start)
        return seconds

    warmup = timed(cfg.warmup_epochs)
    seconds = timed(filled_in(cfg.epochs, "epochs") - cfg.warmup_epochs)
    # as many more as a trial times (trainables/timing.py): a short epoch timed 3 times says little; the same count
    # on every rank (the most any asks for), as a data-parallel trial's ranks agree on theirs
    more = torch.tensor(more_epochs(len(seconds), sum(seconds), cfg.min_timed_s), device=device)
    if world > 1:
        dist.all_reduce(more, op=dist.ReduceOp.MAX)
    seconds += timed(int(more.item()))
    return {"seconds": seconds, "warmup_s": sum(warmup), "last_loss": state["loss"].item(),
            "epoch_loss": state["running_loss"] / data.n if seed_loop else None,
            "data_bytes": sum(t.nbytes for t in tree_leaves((x, y)))}


class _State(TypedDict, total=False):
    """What the plain loop's epochs leave for it to read after the timing."""

    running_loss: float  # the seeds' loop's epoch's loss, summed on the host
    loss: torch.Tensor  # the last step's


def graphed(train_step, optimizer: torch.optim.Optimizer, inputs, target, cfg) -> Callable:
    """`train_step` (zero_grad, forward, backward, the optimiser's step) captured whole in one CUDA graph, as
    PyTorch's CUDA Graphs notes capture a whole network: warmed up on a side stream, then captured on static
    copies of the first batch; the step returned copies each batch into them and replays the graph. The
    optimiser is made capturable (its step count on the GPU), as those notes ask of Adam's and AdamW's."""
    if cfg.dataset_size % cfg.batch_size:
        raise ConfigError("dataset_size", f"engine 'graph' replays one batch shape: dataset_size {cfg.dataset_size} "
                                          f"must be a multiple of batch_size {cfg.batch_size}")
    if cfg.precision == "fp16":  # its GradScaler reads the gradients' overflow on the host every step
        raise ConfigError("precision", "engine 'graph' cannot capture fp16's GradScaler: give bf16 or default")
    for group in optimizer.param_groups:
        if "capturable" in group:
            group["capturable"] = True
    static = tree_map(torch.clone, (inputs, target))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            train_step(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = train_step(*static)

    def replay(inputs, target):
        for to, batch in zip(tree_leaves(static), tree_leaves((inputs, target))):
            to.copy_(batch)
        graph.replay()
        return out

    return replay


def _ms(epoch_s) -> float:
    return statistics.median(epoch_s) * 1e3


def measure(sp: Space, ways: tuple, out, log, default_threads: int) -> dict:
    """Each way's median ms/epoch for every trial of `sp`, in the order `ways`: {hash: {way: ms}},
    with the load average after each ('load')."""
    trials = sp.expand()
    got: dict[str, dict[str, Any]] = {t.hash: {"load": []} for t in trials}  # a way's ms; 'load': a list of them
    for way in ways:
        if way == "sweep":
            store = runner.run(sp, out, max_concurrent=1, log=log)
            rows = read(store.dir).set_index("config_hash")
            for t in trials:
                row = rows.loc[t.hash]
                if row["status"] != "ok":
                    raise RuntimeError(f"{t.label()}: its trial in the sweep failed: {row['error']}")
                got[t.hash]["sweep"] = row["epoch_s_median"] * 1e3
                got[t.hash]["load"].append(row["load_avg_1m"])
        else:
            for t in trials:
                mine = here(t, sp.planner.registry if sp.planner else None)  # its Workload, imported here from its file
                got[t.hash][way] = (_ms(plain(mine, default_threads)["seconds"]) if way == "plain"
                                    else run_trial(mine)["epoch_s_median"] * 1e3)
                got[t.hash]["load"].append(os.getloadavg()[0])
    return got


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def _ratios(runs: list[dict], a: str, b: str) -> list[float]:
    """Way `a` over way `b` within each repeat."""
    return [run[a] / run[b] for run in runs]


def _ratio(runs: list[dict], a: str, b: str) -> tuple[float, str]:
    r = _ratios(runs, a, b)
    return statistics.median(r), f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})"


TARGET = 1.10  # sweep/plain in the default path (loop 'fast'), at most


def verdict(results: list[tuple[Trial, list[dict]]]) -> list[str]:
    """The default path's worst sweep/plain against TARGET, and each configuration past it: past in every
    repeat (beyond the host's noise: with n repeats, a median ratio at or below TARGET gives that with
    probability at most 0.5^n), or past in the median alone, the target within the repeats' own spread
    (on a shared host a launch-bound epoch's per-repeat ratio spans 0.8-1.4: more repeats would tell)."""
    if not results:
        return []
    ratios = {f"{config(trial)} on {trial.cfg.device}": _ratios(runs, "sweep", "plain") for trial, runs in results}
    worst = max(statistics.median(r) for r in ratios.values())
    lines = [f"worst sweep/plain of the default path {worst:.2f}: {'within' if worst <= TARGET else 'past'} the "
             f"target {TARGET:.2f} (* marks a configuration past it)."]
    for name, r in ratios.items():
        if statistics.median(r) > TARGET:
            where = (f"past in every one of its {len(r)} repeats" if min(r) > TARGET else
                     f"past in the median, within its repeats' spread ({min(r):.2f}-{max(r):.2f}): more repeats "
                     f"would tell")
            lines.append(f"  * {name}: {statistics.median(r):.2f}, {where}")
    return lines


def config(trial: Trial) -> str:
    """The table's name of a configuration: the workload, its sizes, and its own axes' values."""
    own = [f"{k}={v}" for k, v in (trial.cfg.params or {}).items()]
    return " ".join([trial.cfg.workload, trial.label(*SIZE_AXES), *own])


def table(results: list[tuple[Trial, list[dict]]]) -> list[str]:
    """One line per configuration, device and loop: its ways' times and ratios over repeats; a default-path
    line past TARGET is starred."""
    heads = ("config", "device", "loop", "plain ms/epoch", "direct ms/epoch", "sweep ms/epoch",
             "sweep/plain", "direct/plain (our loop)", "sweep/direct (Ray worker)", "load")
    lines = []
    for trial, runs in results:
        ratio, sweep_plain = _ratio(runs, "sweep", "plain")
        loads = [x for run in runs for x in run["load"] if x is not None and x == x]  # NaN: not readable
        past = trial.cfg.loop == "fast" and ratio > TARGET
        lines.append((config(trial), trial.cfg.device, "default" if trial.cfg.loop == "fast" else "seed",
                      *(_cell([run[w] for run in runs]) for w in WAYS),
                      sweep_plain + (" *" if past else ""),
                      _ratio(runs, "direct", "plain")[1], _ratio(runs, "sweep", "direct")[1],
                      f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"))
    widths = [max(len(str(x)) for x in column) for column in zip(heads, *lines)]
    return ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [heads, *lines]]


def _physical_cores() -> int | None:
    """Cores, not hardware threads: distinct (physical id, core id) in /proc/cpuinfo; None where unreadable."""
    try:
        blocks = open("/proc/cpuinfo").read().split("\n\n")
    except OSError:
        return None
    fields = [{k.strip(): v.strip() for k, v in (line.split(":", 1) for line in b.splitlines() if ":" in line)}
              for b in blocks]
    cores = {(f.get("physical id"), f.get("core id")) for f in fields if "processor" in f}
    return None if not cores or (None, None) in cores else len(cores)


def _worker_setup(cpus: int) -> dict:
    """How a Ray worker of this job asking for `cpus` CPUs is set up: niceness, OMP_NUM_THREADS, cores it may use."""
    import ray

    @ray.remote(num_cpus=cpus)
    def facts():
        return {"nice": os.nice(0), "omp": os.environ.get("OMP_NUM_THREADS"), "cores": len(os.sched_getaffinity(0))}

    return ray.get(facts.remote())


def header(flags: "Flags", default_threads: int) -> str:
    worker = _worker_setup(threads(flags))
    return (f"parity: ms per epoch, the median of {flags.repeats} runs each way [min-max]; loops {', '.join(flags.loops)}; "
            f"CPU trials and the CPU plain loop on {flags.cpu_threads} threads, GPU trials on 1, the GPU plain loop on "
            f"torch's default; load average {os.getloadavg()[0]:.2f}\n"
            f"this process: nice {os.nice(0)}, {os.cpu_count()} logical CPUs, {_physical_cores() or '?'} cores, "
            f"torch's default {default_threads} threads; a Ray worker of {flags.cpu_threads} CPUs: nice "
            f"{worker['nice']}, OMP_NUM_THREADS={worker['omp']}, {worker['cores']} CPUs it may run on")


@dataclass(frozen=True)
class Flags:
    """The command line, parsed and checked once (`parse_args`); named as the shared flags are (sweeps/cli.py)."""

    out: Path  # results root: the sweeps' rows go to OUT/NAME-<stamp>-r<k>-<device>-<loop>/
    name: str  # prefix of the sweeps' names
    workloads: list  # the built-ins measured, by name
    workload: list  # your workloads' references (path/to/job.py:ATTR)
    param: list  # (axis, value) of your workloads' own axes
    devices: tuple  # of cpu, cuda
    loops: tuple  # of fast (the default path: the target), seed (the seeds' loop: a comparison)
    repeats: int  # runs of each way per configuration, interleaved
    cpu_threads: int | None  # threads of the CPU trials and the CPU plain loop; None: node_cpus, once Ray is up
    batch_sizes: list | None  # every configuration at each of these, or its own
    dataset_size: int | None  # every configuration's dataset size, or its own
    epochs: int | None  # epochs of every run, the warm-up included, or its own
    smoke: bool
    address: str | None  # a Ray on this machine, or None: a local one
    trial_timeout: float  # s: a trial's limit in the sweep
    plan_timeout: float  # s: the limit of the process that plans your workload (sweeps/plan.py)
    verbose: bool  # the runner's line per trial


def parse_args(argv=None) -> Flags:
    p = cli.parser(__doc__, "parity", "prefix of the sweeps' names: OUT/NAME-<stamp>-r<k>-<device>-<loop>/")
    p.add_argument("--workloads", default=None,
                   help=f"comma-separated built-in workloads of {list(WORKLOADS)}; default: the seeds' "
                        f"{list(EPOCHS['cpu'])} (with --smoke: {list(SMOKE)}), or none where --workload names your own")
    p.add_argument("--devices", default=None,
                   help="comma-separated devices of cpu, cuda; default: cpu, and cuda where torch sees a GPU")
    p.add_argument("--loops", default=None,
                   help="comma-separated loops of fast (the default path, the target) and seed (the seeds' own loop, "
                        "a labelled comparison); default: fast,seed for the seeds' configurations, fast for yours")
    p.add_argument("--dataset-size", type=cli.at_least(1), default=None, metavar="N",
                   help="every configuration's dataset size; default: its own")
    p.add_argument("--batch-sizes", type=cli.integers(1), default=None, metavar="B,B,...",
                   help="every configuration at each of these batch sizes (e.g. 32,128); default: its own")
    p.add_argument("--epochs", type=cli.at_least(2), default=None,
                   help="epochs of every run, its warm-up included; default: EPOCHS for the seeds' configurations, "
                        "the grid's or the workload's own for the rest")
    p.add_argument("--cpu-threads", type=cli.at_least(1), default=None,
                   help="threads (and Ray CPUs) of the CPU trials and the CPU plain loop; default: those a sweep's CPU "
                        "trials take (every core but one from four cores up, two from sixteen); GPU trials have one, "
                        "as in a sweep")
    p.add_argument("--repeats", type=cli.at_least(1), default=3,
                   help="runs of each way per configuration, interleaved (1 with --smoke)")
    p.add_argument("--verbose", action="store_true", help="print the runner's line per trial")
    args = p.parse_args(argv)
    try:
        workloads = cli.builtins(args, WORKLOADS, SMOKE if args.smoke else EPOCHS["cpu"])
    except ValueError as exc:
        p.error(str(exc))
    if not workloads and not args.workload:
        p.error("nothing to measure: give --workloads, --workload path/to/job.py:ATTR, or neither (the seeds')")
    devices = tuple(d.strip() for d in args.devices.split(",")) if args.devices else \
        ("cpu",) + (("cuda",) if torch.cuda.is_available() else ())
    if unknown := [d for d in devices if d not in DEVICES]:
        p.error(f"--devices: unknown {unknown}; choose from {', '.join(DEVICES)}")
    loops = tuple(w.strip() for w in args.loops.split(",")) if args.loops else \
        (("fast", "seed") if workloads else ("fast",))
    if unknown := [w for w in loops if w not in LOOPS]:
        p.error(f"--loops: unknown {unknown}; choose from {', '.join(LOOPS)}")
    return Flags(args.out, args.name, workloads, args.workload, args.param, devices, loops,
                 1 if args.smoke else args.repeats, args.cpu_threads, args.batch_sizes, args.dataset_size, args.epochs,
                 args.smoke, args.address, args.trial_timeout, args.plan_timeout, args.verbose)


def main(argv=None) -> int:
    flags = parse_args(argv)
    planner = Planner()  # this sweep's planning of your workload, handed to every Space it builds
    return exit_status(lambda: study(flags, planner), planner)


def study(flags: Flags, planner: Planner) -> int:
    default_threads = torch.get_num_threads()  # before any loop sets it
    start = time.perf_counter()
    for device in flags.devices:  # every configuration checked, and your workload's module imported, before Ray starts
        space(flags, flags.name, device, "fast", flags.cpu_threads or 1, planner).expand()
    flags, _ = connected(flags, planner.registry.shipping)
    print(header(flags, default_threads), flush=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    log = print if flags.verbose else (lambda line: None)
    results: dict[str, tuple[Trial, list[dict]]] = {}
    try:
        for repeat in range(flags.repeats):
            ways = WAYS if repeat % 2 == 0 else WAYS[::-1]
            for device in flags.devices:
                for loop in flags.loops:
                    name = f"{flags.name}-{stamp}-r{repeat}-{device}-{loop}"
                    sp = space(flags, name, device, loop, threads(flags), planner)
                    trials = {t.hash: t for t in sp.expand()}
                    for h, got in measure(sp, ways, flags.out, log, default_threads).items():
                        results.setdefault(h, (trials[h], []))[1].append(got)
            print(f"repeat {repeat + 1} of {flags.repeats} done ({time.perf_counter() - start:.0f} s)", flush=True)
    except KeyboardInterrupt:  # the repeats that ended are a table still, and say so
        if results:
            print(f"interrupted in repeat {repeat + 1} of {flags.repeats}: the table is of the runs that ended",
                  flush=True)
            report(flags, results, stamp, start)
        raise
    report(flags, results, stamp, start)
    return 0


def report(flags: Flags, results: dict, stamp: str, start: float) -> None:
    """The table (`table`), the worst default-path ratio against TARGET, and what the ways were."""
    print("\n".join(table(list(results.values()))))
    for line in verdict([(trial, runs) for trial, runs in results.values() if trial.cfg.loop == "fast"]):
        print(line)
    print(f"plain: a careful user's PyTorch loop in this process (loop seed: the seeds' loop, .item() every step); "
          f"direct: run_trial in this process; sweep: the trial through Tune on a Ray worker. Rows in "
          f"{flags.out}/{flags.name}-{stamp}-r*/ ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    sys.exit(main())

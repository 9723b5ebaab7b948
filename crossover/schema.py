"""The Parquet row schema: one row per trial, every column named with its unit.

This module is the single definition of what a results directory holds, and of the names every
other module derives from it: the axes a sweep varies, the phases a trial is timed in, the columns
that identify a configuration. It sits below its writers and its readers: the trainables build rows
with these names, the sweep writes them (`sweeps/store.py`), the analysis reads them (`analysis/`),
and this file needs only pyarrow, so every one of them reaches down to it and none back.

    python -c "from crossover.schema import describe; print(describe())"

Reading a results directory as one dataset:

    pandas:   pd.read_parquet("results/scaling")
    pyarrow:  pyarrow.dataset.dataset("results/scaling", format="parquet")
    DuckDB:   SELECT * FROM 'results/scaling/*.parquet'
    polars:   pl.read_parquet("results/scaling/*.parquet")

Units: `_s` seconds, `_bytes` bytes, `_per_s` per second; accuracy is a fraction in [0, 1].
"""

from __future__ import annotations

import enum
import math
from pathlib import Path

import pyarrow as pa

# Bump when a column changes meaning or type; readers refuse to mix versions.
SCHEMA_VERSION = 1

_F64, _I64, _STR = pa.float64(), pa.int64(), pa.string()


class Precision(str, enum.Enum):
    """The precision a step trains at, a closed set: what a planned run names (crossover predict, decide and report
    --precision), a step is counted at (crossover/step.py) and a row's `precision` column holds.
    trainables/precision.py says what each does and where it runs. A str, so that it is its own value in a row, a
    JSON record and a cache key."""

    DEFAULT = "default"  # PyTorch's own: what a plain loop gets (TF32 in cuDNN's convolutions, strict FP32 matmuls)
    FP32 = "fp32"  # strict: no TF32 anywhere
    TF32 = "tf32"  # TF32 matmuls and convolutions: a GPU
    BF16 = "bf16"  # autocast
    FP16 = "fp16"  # autocast and a GradScaler: a GPU

    def __str__(self) -> str:  # its value wherever it is said (Python 3.10 has no enum.StrEnum)
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


PRECISIONS = tuple(p.value for p in Precision)
# the one meaning of a missing precision: a row written before the column existed trained in strict FP32 (as
# config.ADDED fills it); every reader of a frame that may lack it (analysis/load.py `precisions_of`) says so
MISSING_PRECISION = Precision.FP32

# The axes, each a config column. Sizes: what makes a model or its data bigger, the axes a crossover
# is found along (with n_params, the model's parameters, which depth and width together set).
SIZE_AXES = ("depth", "width", "batch_size", "dataset_size", "context")
# Axes whose unset value is the workload's seed's (trainables/workloads.py gives each its default).
SEED_AXES = SIZE_AXES + ("epochs", "lr")
# Everything a sweep's grid may set (sweeps/space.py): micro_batches only matters to pipe:N.
GRID_AXES = SEED_AXES + ("micro_batches",)
# Crossovers are found along these (analysis/crossings.py).
CROSSOVER_AXES = ("n_params",) + SIZE_AXES
# The phases of a trial, each timed synchronised into the column <phase>_s (trainables/timing.py);
# COMPILE_PHASE runs only where an engine captures a graph, and its column is null elsewhere.
PHASES = ("setup", "h2d", "warmup", "train", "eval")
COMPILE_PHASE = "compile"
PHASE_COLUMNS = tuple(f"{phase}_s" for phase in PHASES)
# The op classes a step's costs are split into (trainables/costs.py classifies each aten op; analysis/model/
# predicts each class's time from its roofline bound): the optimiser's step is its own class, whatever its ops;
# cuDNN's recurrent nets are one too (rnn): one op that runs a chain of small matrix products, a kernel or two a
# time step, each waiting on the one before.
OP_CLASSES = ("matmul", "conv", "rnn", "norm", "elementwise", "optimizer")
OP_MEASURES = ("flops", "bytes", "launches")  # per class: the column <class>_<measure>_per_step
OP_COLUMNS = tuple(f"{c}_{m}_per_step" for c in OP_CLASSES for m in OP_MEASURES)
# Of those ops, the ones the forward pass dispatches (trainables/costs.py Traffic): the host pays the workload's
# Python for each, where autograd's engine dispatches the backward's from C++ (docs/model.md).
FORWARD_OPS = "forward_ops_per_step"
# Each distinct op of the step as the per-op model reads it (analysis/model/perclass.py): a JSON list of [class,
# dtype, FLOPs, bytes, launches, times dispatched] (trainables/costs.py ops_json); a class of OP_CLASSES, or
# 'conv_grouped' for a grouped or depthwise convolution (`op_kind`), which the per-class columns count in conv.
OPS_PER_STEP = "ops_per_step"

# (name, type, description). Order is the column order in the files.
COLUMNS: list[tuple[str, pa.DataType, str]] = [
    # identity
    ("schema_version", _I64, "version of this schema the row was written with"),
    ("sweep", _STR, "sweep name: the results/<sweep>/ directory"),
    ("trial_id", _STR, "Ray Tune's trial id"),
    ("config_hash", _STR, "hash of the trial's config; a re-run skips hashes already measured"),
    ("status", _STR, "'ok' or 'error'"),
    ("error", _STR, "error type and message when status is 'error', else null"),
    ("finished_at", pa.timestamp("s", tz="UTC"), "when the driver wrote the row"),
    # config (what was asked for, with the workload's defaults filled in)
    ("workload", _STR, "the workload's name: a built-in (disc, mnist_cnn, lenet, peaks, tabular, transformer: "
                       "crossover.trainables.workloads) or a user's (a crossover.Workload)"),
    ("workload_module", _STR, "'module:attr' a user's workload was imported from; 'trainables.workloads' for a built-in"),
    ("workload_fingerprint", _STR, "16 hex digits of the workload module's source and its model's parameter shapes "
                                   "(a user's is part of config_hash: edited code is measured again)"),
    ("workload_path", _STR, "a user's workload: where the sweep's driver shipped it from, so that decide and report "
                            "count its planned step from any folder: the job file's absolute path (job.py:ATTR), or "
                            "the folder its package imports from (package.module:ATTR); null for a built-in, and in "
                            "rows written before the column existed"),
    ("workload_params", _STR, "the workload's own axes (Workload.params) as JSON, e.g. {\"image_size\": 32}; null if none"),
    ("device", _STR, "device string as in the search space: cpu, cuda, cuda/K, ddp:N, ddp-cpu:N, pipe:N"),
    ("depth", _I64, "depth axis (meaning per workload, see crossover.trainables.workloads); null if not an axis"),
    ("width", _I64, "width axis (nodes per layer, or channel multiplier for CNNs); null = seed's shape"),
    ("batch_size", _I64, "training mini-batch size, samples"),
    ("dataset_size", _I64, "training samples (transformer: sequences of `context` tokens)"),
    ("context", _I64, "transformer: tokens per sequence (its context length); null for the other workloads"),
    ("epochs", _I64, "epochs asked for in total, warm-up included: at least this many were trained (timed_epochs)"),
    ("warmup_epochs", _I64, "first epochs excluded from the timed training"),
    ("min_timed_s", _F64, "timed epochs went on past `epochs` until this many seconds were timed"),
    ("lr", _F64, "learning rate"),
    ("loop", _STR, "'fast' (no host sync per step) or 'seed' (the seeds' own loop: .item() per step)"),
    ("engine", _STR, "eager, graph (whole step in one CUDA graph) or compile (torch.compile)"),
    ("precision", _STR, "default (PyTorch's: TF32 in cuDNN convolutions only), fp32 (strict: no TF32), tf32, bf16 "
                        "(autocast) or fp16 (autocast, GradScaler); null in rows written "
                        "before the column existed (fp32)"),
    ("seed", _I64, "random seed of data, init and shuffling"),
    ("micro_batches", _I64, "pipe:N only: micro-batches per batch, else null"),
    ("exclusive", pa.bool_(), "timing grade: the sweep ran this trial with no other trial beside it (--exclusive)"),
    ("data_requested", _STR, "data source asked for: auto, mnist, digits, synthetic, generated"),
    ("cpus_requested", _F64, "CPUs the trial asked Ray for"),
    ("gpus_requested", _F64, "GPUs the trial asked Ray for"),
    # model
    ("n_params", _I64, "trainable parameters of the model"),
    ("model", _STR, "short description of the model's shape"),
    # timings
    ("setup_s", _F64, "data generation or loading and model construction, on the host"),
    ("h2d_s", _F64, "moving data and model to the device, synchronised"),
    ("warmup_s", _F64, "the warm-up epochs (compile, autotune, allocator growth), excluded from train_s"),
    ("compile_s", _F64, "graph: capturing the step; compile: nothing apart (compilation is in warmup_s); else null"),
    ("data_on_device", pa.bool_(), "the data stayed on the device for the whole trial (else copied per batch)"),
    ("train_s", _F64, "the timed epochs, synchronised"),
    ("eval_s", _F64, "evaluation on the test split (0 when the workload has none)"),
    ("total_s", _F64, "whole trial wall time inside the trainable"),
    ("epoch_s", pa.list_(_F64), "each timed epoch, in order"),
    ("timed_epochs", _I64, "epochs timed: at least epochs - warmup_epochs, more until min_timed_s was timed "
                           "(crossover.trainables.timing); null in rows written before the column existed"),
    ("epoch_s_median", _F64, "median of epoch_s"),
    ("epoch_s_iqr", _F64, "interquartile range of epoch_s (75th minus 25th percentile)"),
    ("epoch_s_min", _F64, "fastest timed epoch"),
    ("epoch_s_max", _F64, "slowest timed epoch"),
    ("steps_per_epoch", _I64, "optimiser steps per epoch"),
    ("samples_per_s", _F64, "training samples per second over the timed epochs (all workers together)"),
    ("world_size", _I64, "processes training together: data-parallel workers, else 1"),
    ("fused_members", _I64, "trials trained together as one batched model (crossover.trainables.fused), else 1; the "
                            "timings are the group's; samples_per_s, the energy and the step costs this "
                            "member's share"),
    ("fused_group", _STR, "id shared by the members of one fused trial, else null"),
    ("per_rank_samples_per_s", pa.list_(_F64), "samples per second of each data-parallel rank, in rank order"),
    # what one optimiser step costs, counted once after the timed epochs on copies of the model and optimiser
    # (trainables/costs.py; docs/model.md); a fused member's: the group's step over its members; null for
    # data-parallel and pipeline trials and rows written before the columns existed (analysis/model/
    # computes them from the config there)
    ("flops_per_step", _I64, "FLOPs of one forward, backward and optimiser step on a full batch: matrix products "
                             "and convolutions (torch.utils.flop_counter.FlopCounterMode), 2 a multiply-add"),
    ("bytes_per_step", _I64, "bytes one step moves, an estimate: every aten op that is not a view reads each tensor "
                             "input and writes each output once (no cache reuse, no fusion)"),
    ("launches_per_step", _I64, "GPU: kernel launches of one step (torch.profiler's CUDA launch events); CPU: aten "
                                "ops dispatched that are not views; engine graph: 3 (two index copies, one replay); "
                                "engine compile: null"),
    *[(f"{c}_{m}_per_step", _I64, f"{m} of one step's {c} ops: " + {
        "flops": "FlopCounterMode's FLOPs (matrix products and convolutions only: 0 for the other classes)",
        "bytes": "bytes its aten ops read and write, as bytes_per_step estimates them",
        "launches": "its aten ops dispatched that are not views (on a GPU in eager mode, about a kernel each)"}[m]
      + "; null where not counted") for c in OP_CLASSES for m in OP_MEASURES],
    (FORWARD_OPS, _I64, "of the ops the per-class launches count, those the forward pass dispatches (the "
                        "workload's Python, each op paying the interpreter's and nn.Module's cost on the host), "
                        "where autograd's engine dispatches the backward's and the optimiser its own; null where "
                        "not counted"),
    (OPS_PER_STEP, _STR, "each distinct op of one step: a JSON list of [class, dtype, FLOPs, bytes, launches, times "
                         "dispatched] (the per-class columns, op by op; a grouped convolution's class "
                         "'conv_grouped'); null where not counted"),
    ("costs_note", _STR, "why flops/bytes/launches_per_step are null where they could not be counted (an op torch's "
                         "counters do not know); null where counted or not asked"),
    # energy over the timed epochs (trainables/energy.py)
    ("gpu_energy_j", _F64, "joules the trial's GPUs drew over the timed epochs, whole boards (NVML's energy "
                           "counter), summed over its GPUs; null where unreadable (energy_note says why)"),
    ("cpu_energy_j", _F64, "joules the CPU packages drew over the timed epochs, every process on them (RAPL "
                           "energy_uj, wraparound handled); null where unreadable (energy_note says why)"),
    ("energy_note", _STR, "why an energy column is null, e.g. 'cpu: /sys/class/powercap absent'; null when both were read"),
    # quality
    ("train_loss", _F64, "mean training loss per sample over the last epoch"),
    ("loss_curve", pa.list_(_F64), "mean training loss per sample of each timed epoch, in order"),
    ("train_accuracy", _F64, "training accuracy over the last epoch (classification), else null"),
    ("test_loss", _F64, "mean loss per sample on the test split, null if none"),
    ("test_accuracy", _F64, "accuracy on the test split, null if none or regression"),
    ("metric", _STR, "the workload's quality measure: 'accuracy', 'loss', or its own function's name"),
    ("train_metric", _F64, "a workload's own metric (not accuracy or loss), mean per sample over the last epoch"),
    ("test_metric", _F64, "a workload's own metric, mean per sample on the test split; null if none"),
    # environment
    ("data_source", _STR, "data actually used: 'mnist:<dir>', 'digits', 'synthetic', 'generated'"),
    ("n_test", _I64, "test samples (0 if none)"),
    ("co_running", pa.list_(_STR), "other crossover trials timed on the same node while this one was timed"),
    # the host's load over the timed epochs (trainables/neighbours.py); null where /proc/stat is not
    # readable (macOS) and in rows written before the columns existed
    ("load_avg_1m", _F64, "the host's 1-minute load average (runnable processes) at the end of the timed epochs"),
    ("host_cpus", _I64, "logical CPUs of the host (os.cpu_count()), to read load_avg_1m and other_cpu_s against"),
    ("cpu_steal_s", _F64, "CPU seconds, all CPUs together, the hypervisor stole from the host during the timed epochs"),
    ("other_cpu_s", _F64, "CPU seconds, all CPUs together, the host spent busy during the timed epochs on processes "
                          "other than this trial's (its threads included); /proc/stat counts in 10 ms ticks, so a "
                          "few hundredths either way, below zero too, are noise"),
    ("outside_load", pa.bool_(), "other_cpu_s is more than the crossover trials beside this one (their cores for the "
                                 "time they overlapped) and Ray's own processes explain (a quarter of a core): another "
                                 "job used the host. A window of a few hundredths of a second can miss one busy core. "
                                 "The crossover leaves these rows out unless told to keep them"),
    ("cold_start", pa.bool_(), "the first trial its worker process ran (imports, CUDA context, allocator growth: "
                               "setup_s, h2d_s, warmup_s run slower), and every data-parallel trial (Ray Train "
                               "starts its workers afresh); null in rows written before the column existed"),
    ("hostname", _STR, "node the trial ran on"),
    ("node_id", _STR, "Ray node id of the node the trial ran on; null in a row the driver wrote for a dead worker"),
    ("rank_node_ids", pa.list_(_STR), "ddp:N and ddp-cpu:N: the Ray node id of each rank, in rank order (ranks go "
                                      "wherever Ray places them: several nodes where no one node holds N); null for a "
                                      "single process and in rows written before the column existed"),
    ("device_name", _STR, "GPU name(s) joined by ' + ', or the CPU model for CPU trials"),
    ("gpu_ids", pa.list_(_STR), "the node's ids of the GPUs the trial ran on (as nvidia-smi and Ray number them; "
                                "every rank's for ddp:N), in order; null on CPU and in rows written before the column existed"),
    ("peak_gpu_bytes", _I64, "peak GPU memory allocated by torch during the trial, summed over its GPUs; null on CPU"),
    ("cpu_model", _STR, "CPU model of the node"),
    ("torch_threads", _I64, "torch.get_num_threads() as the trial's timed epochs ended"),
    ("threads_note", _STR, "where the workload's own code changed torch's thread count (torch.set_num_threads in "
                           "make_model, say) as the trial built it or warmed up: the count it set; the trial put its "
                           "own back (torch_threads) before the timed epochs. Null where the count was left alone, "
                           "and in rows written before the column existed"),
    ("nice", _I64, "niceness of the trial's thread (0: the driver's priority, as a sweep starts Ray's "
                   "workers; 15: Ray's own default, below every other process on the node); null in rows written "
                   "before the column existed"),
    ("peak_rss_bytes", _I64, "peak resident memory of the trial's worker process so far"),
    ("torch_version", _STR, "torch.__version__"),
    ("ray_version", _STR, "ray.__version__"),
    ("python_version", _STR, "platform.python_version()"),
    ("cuda_version", _STR, "torch.version.cuda, null for CPU-only builds"),
]

RUNS = "_runs"  # OUT/_runs/<sweep>.jsonl: beside the results directory OUT/<sweep>/, never in it
# Reports go beside the results directories, never in one (its readers see rows alone): OUT/_reports/<sweep>/
# (analysis/report.py). Here, below its writers and readers: the row writer names it without importing the report.
REPORTS = "_reports"
# workload_module of the built-ins; any other is a user's own. A label, not an import: the built-ins live in
# crossover.trainables.workloads, and rows written before the package was named crossover carry this value.
BUILTIN_MODULE = "trainables.workloads"
# The key under which a trial reports its rows to Tune (trainables/trainable.py) and the sweep finds them
# (sweeps/store.py): here, so that the row writer names it without importing the trainable and ray.tune.
ROW_KEY = "crossover_row"


def given(value) -> bool:
    """Whether a row's cell holds a value (not null, not NaN), read with pandas or without it."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def runs_file(directory: Path) -> Path:
    """One JSON line per run of the sweep whose rows are in `directory`: its wall-clock start and end
    (time.time()), the trials and Tune trials it ran, its max_concurrent (sweeps/runner.py). Outside the
    directory, so that it holds Parquet rows alone and every reader, polars' read_parquet(DIR) too,
    reads it whole."""
    return directory.parent / RUNS / f"{directory.name}.jsonl"

SCHEMA = pa.schema([pa.field(name, kind) for name, kind, _ in COLUMNS])
NAMES = [name for name, _, _ in COLUMNS]

# Columns that identify the measured configuration: equal values mean the same experiment (the
# engine and precision are not among them: the analysis compares them as arms, like devices).
CONFIG_COLUMNS = [
    "workload", "device", "depth", "width", "batch_size", "dataset_size", "context", "epochs",
    "warmup_epochs", "lr", "loop", "seed", "data_requested", "micro_batches",
]


def to_table(rows: list[dict]) -> pa.Table:
    """Rows (dicts) as a table of exactly SCHEMA; missing keys become null, unknown keys are refused."""
    unknown = sorted({key for row in rows for key in row} - set(NAMES))
    if unknown:
        raise ValueError(f"columns not in crossover.schema: {unknown}; add them to COLUMNS first")
    return pa.Table.from_pylist([{name: row.get(name) for name in NAMES} for row in rows], schema=SCHEMA)


def describe() -> str:
    """The schema as a Markdown table, for the README."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {doc} |" for name, kind, doc in COLUMNS]
    return "\n".join(lines)

"""Benchmark figures of studies/engines.py, from its rows alone:

- the speed-up of each engine over eager on the same GPU, per workload and size;
- fused trials per hour against the same trials one at a time: warm, cold and whole sweeps apart;
- the crossover against the CPU per engine: how far `graph`, `compile` and fusion pull it towards
  small models;
- per precision (studies/lower_precision.py), time per epoch beside the loss and accuracy it reached, and
  each against fp32 on the same device: a faster epoch that learns worse shows.

    python -m crossover.analysis engines results/engines-* results/precision-*
Rows are found by their columns (gpus_requested, engine, fused_members), never by a sweep's name, so
any sweep's rows that measured the same things give the same figures. Reads rows only (pandas);
never imports torch or ray.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from crossover.schema import CONFIG_COLUMNS, runs_file

from .crossings import Bootstrap, answer, find
from .load import cold_starts, precisions_of, sizes_label
from .model import DEVICES, device_key, load_devices, step_costs
from .selection import select

# Fused members differ only in these (trainables/fused.py): the rest of the config is the group's.
FUSABLE = ("seed", "lr")
FEWER = Bootstrap(draws=200)  # the resamples a study of engines draws: fewer than BOOT's 1000


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "ok"]


def speedup(rows: pd.DataFrame) -> pd.DataFrame:
    """Median epoch time per engine on the GPU, and each engine's speed-up over eager, for the
    configurations measured with more than one engine (trials alone, not fused)."""
    ok = _ok(rows)
    gpu = ok[(ok["gpus_requested"] > 0) & (ok["fused_members"] == 1)]
    if gpu.empty:
        return pd.DataFrame()
    table = (gpu.assign(sizes=sizes_label(gpu), ms=gpu["epoch_s_median"] * 1e3)
             .pivot_table(index=["workload", "device", "sizes", "epochs"], columns="engine", values="ms",
                          aggfunc="median"))
    table.columns.name = None
    table = table[table.notna().sum(axis=1) > 1]
    for engine in [e for e in table.columns if e != "eager"]:
        if "eager" in table.columns:
            table[f"{engine}_speedup"] = table["eager"] / table[engine]
    return table


def fused(rows: pd.DataFrame) -> pd.DataFrame:
    """Trials per hour, one at a time and fused, per engine, for the trials that were measured both ways
    (the same configuration but for seed and lr), three ways:

    warm    the median wall time (total_s) of trials, or fused groups, that were not their worker's
            first: the steady rate of a long sweep;
    cold    the same of those that were (imports, CUDA context: 5 s against 0.4 s in
            results/reference/h100-2026-11-21-engines): what a sweep of a few trials pays;
    sweep   a whole sweep's wall time (OUT/_runs/<sweep>.jsonl, sweeps/runner.py), Tune's start and
            scheduling included, for results directories that hold only that side's trials.
    `vs_one_at_a_time` sets each line against the one-at-a-time line of the same kind."""
    ok = _ok(rows.assign(cold=cold_starts(rows)))
    shared = [c for c in CONFIG_COLUMNS if c not in FUSABLE]
    tables = []
    for engine, members in ok[ok["fused_members"] > 1].groupby("engine"):  # each engine against itself alone
        alone = ok[(ok["fused_members"] == 1) & (ok["engine"] == engine)].merge(members[shared].drop_duplicates(),
                                                                                on=shared)
        if alone.empty:
            continue
        sides = [("one at a time", 1, alone, alone)]
        sides += [("fused", k, g.drop_duplicates("fused_group"), g) for k, g in members.groupby("fused_members")]
        lines = []
        for how, k, runs, side_rows in sides:
            for kind, part in (("warm", runs[~runs["cold"]]), ("cold", runs[runs["cold"]])):
                if len(part):
                    trial_s = part["total_s"].median()
                    lines.append({"engine": engine, "how": how, "members": k, "kind": kind, "runs": len(part),
                                  "trial_s": trial_s, "trials_per_hour": k * 3600 / trial_s})
            lines += [{"engine": engine, **line} for line in _sweeps(how, k, side_rows, ok)]
        out = pd.DataFrame(lines)
        base = out[out["how"] == "one at a time"].set_index("kind")["trials_per_hour"]
        tables.append(out.assign(vs_one_at_a_time=out["trials_per_hour"] / out["kind"].map(base)))
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def _sweeps(how: str, members: int, side: pd.DataFrame, ok: pd.DataFrame) -> list[dict]:
    """The whole-sweep line of one side: the runs recorded in the results directories that hold its
    trials and nothing else (none where the rows do not say where they were read from)."""
    if "results_dir" not in side:
        return []
    dirs = [d for d in side["results_dir"].unique() if set(ok.loc[ok["results_dir"] == d, "config_hash"])
            <= set(side["config_hash"])]
    runs = [json.loads(line) for d in dirs if runs_file(Path(d)).exists()
            for line in runs_file(Path(d)).read_text().splitlines() if line.strip()]
    if not runs:
        return []
    wall, trials = sum(r["end"] - r["start"] for r in runs), sum(r["trials"] for r in runs)
    return [{"how": how, "members": members, "kind": "sweep", "runs": trials, "trial_s": wall / trials * members,
             "trials_per_hour": trials * 3600 / wall}]


def member_epochs(rows: pd.DataFrame, path: Path = DEVICES) -> pd.DataFrame:
    """Per workload, size, engine and members per trial (K; 1: trials alone), for the sizes measured fused,
    on GPUs of the device table (analysis/devices.yaml): the median time of one member's epoch (the trial's
    epoch over K, in µs) with its range over the trials, and `floor_us`, the epoch's FLOPs at the GPU's fp32
    peak (analysis/model/ counts them: 6 per weight per sample less the first layer's input gradient);
    `vs_floor` the ratio.
    The floor counts no memory traffic: a step that keeps its activations on chip (engine 'triton') reads
    each sample once, a few bytes, so on these models FLOPs are the bound that cannot be beaten."""
    ok = _ok(rows)
    ok = ok[ok["whole_gpu"]]
    devices = load_devices(path)
    keys = ok["device_name"].map(lambda name: device_key(name, devices))
    ok = ok[keys.notna()].assign(gpu=keys[keys.notna()])
    if ok.empty:
        return pd.DataFrame()
    ok = ok.assign(sizes=sizes_label(ok))
    ok = ok[ok["sizes"].isin(ok.loc[ok["fused_members"] > 1, "sizes"])]  # sizes that were measured fused
    if ok.empty:
        return pd.DataFrame()
    ok = ok.assign(k=ok["fused_members"].fillna(1).astype(int),
                   member_us=ok["epoch_s_median"] / ok["fused_members"].fillna(1) * 1e6,
                   floor_us=step_costs(ok)["flops_per_step"] * ok["steps_per_epoch"]
                   / ok["gpu"].map(lambda g: devices[g].fp32_flops) * 1e6)
    # one line per fused trial (its members share its epoch time), then per K
    trials = pd.concat([ok[ok["fused_group"].isna()], ok[ok["fused_group"].notna()].drop_duplicates("fused_group")])
    table = (trials.groupby(["workload", "gpu", "sizes", "engine", "k"])
             .agg(trials=("member_us", "size"), member_us=("member_us", "median"), low_us=("member_us", "min"),
                  high_us=("member_us", "max"), floor_us=("floor_us", "median")))
    return table.assign(vs_floor=table["member_us"] / table["floor_us"])


def precisions(rows: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, device, engine and precision (trials alone): the median time per epoch, final
    training loss, test loss and test accuracy over its runs; for configurations measured at PyTorch's
    default precision and another, `speedup` (the default's epoch time over this one's) and `loss_ratio`
    (this training loss over the default's: above 1, it learnt less in the same epochs)."""
    ok = _ok(rows)
    ok = ok[ok["fused_members"].fillna(1) == 1].assign(precision=precisions_of(ok))
    if ok["precision"].nunique() < 2:
        return pd.DataFrame()
    keys = ["workload", "device", "engine", "sizes", "epochs"]
    table = (ok.assign(sizes=sizes_label(ok), ms=ok["epoch_s_median"] * 1e3)
             .groupby(keys + ["precision"], dropna=False)
             .agg(runs=("ms", "size"), ms=("ms", "median"), train_loss=("train_loss", "median"),
                  test_loss=("test_loss", "median"), test_accuracy=("test_accuracy", "median"))
             .reset_index())
    base = table[table["precision"] == "default"][keys + ["ms", "train_loss"]]
    table = table.merge(base, on=keys, how="left", suffixes=("", "_base"))
    table = table.assign(speedup=table["ms_base"] / table["ms"], loss_ratio=table["train_loss"] / table["train_loss_base"])
    return table.drop(columns=["ms_base", "train_loss_base"]).set_index(keys + ["precision"])


def crossovers(rows: pd.DataFrame, boot: Bootstrap = FEWER) -> pd.DataFrame:
    """Per workload and axis: where each GPU engine overtakes the CPU, per epoch (trials alone)."""
    table = find(select(rows[rows["fused_members"] == 1]), boot)
    table = table[(table["metric"] == "epoch_s") & table["is_cpu_a"] & ~table["is_cpu_b"]]
    return table.assign(answer=[answer(line) for line in table.itertuples()])[
        ["workload", "axis", "held_fixed", "device_a", "device_b", "crossover", "answer"]]


def render(rows: pd.DataFrame) -> str:
    parts = []
    for title, table in (("speed-up over eager on the GPU (ms per epoch)", speedup(rows)),
                         ("fused trials per hour against one at a time", fused(rows)),
                         ("one member's epoch (µs) by engine and members per trial, against its FLOPs at the "
                          "GPU's fp32 peak", member_epochs(rows)),
                         ("crossover against the CPU, per engine", crossovers(rows)),
                         ("per precision: time per epoch (ms) beside what it learnt, against PyTorch's default", precisions(rows))):
        if not table.empty:
            parts += [f"== {title} ==", table.to_string(float_format=lambda v: f"{v:,.3f}")]
    return "\n".join(parts) if parts else "no rows of the engines or precision studies"

"""Derive analysis/public-tables/lambda_train_throughput.csv and lambda_multi_gpu.csv from a clone of
lambdal/deeplearning-benchmark.

    python analysis/public-tables/derive_lambda.py /path/to/deeplearning-benchmark [COMMIT]

The repository has no licence file, so its CSVs are not copied: this writes the single-GPU training
throughputs they hold as a derived table, one row per (GPU row, precision, benchmark), with the batch size
each figure was measured at and the container it ran in (README.md beside this file). Run once, by hand;
nothing in analysis/ imports it.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

# v1: pytorch/pytorch-train-throughput-{fp32,fp16}.csv with its batch sizes in pytorch-train-bs-*.csv, run in
# NGC pytorch:22.10-py3; v2: pytorch-train-throughput-v2-*.csv, run in pytorch:24.10-py3 with the batch sizes
# of scripts/config_v2/config_pytorch_<memory>.sh (pytorch/README.md at the commit read).
V1_CONTAINER, V2_CONTAINER = "nvcr.io/nvidia/pytorch:22.10-py3", "nvcr.io/nvidia/pytorch:24.10-py3"
V2_GPU = re.compile(r"_(\d+)x(H100_80GB_SXM5|H100_80GB_PCIe|H200_140GB_SXM|GH200_96GB|GH200_80GB|B200_192GB)_")
V2_MEMORY = {"H100_80GB_SXM5": "80GB", "H100_80GB_PCIe": "80GB", "H200_140GB_SXM": "140GB", "GH200_96GB": "96GB",
             "GH200_80GB": "80GB", "B200_192GB": "192GB"}
BATCH_FLAGS = ("--batch-size", "--train-batch-size", "--batch_size", "SOLVER.IMS_PER_BATCH")
COLUMNS = ["table", "name_gpu", "precision", "benchmark", "throughput", "batch_size", "container", "commit"]


def show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def table(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def v2_batches(config: str, precision: str) -> dict[str, int]:
    """Per benchmark, the batch size a v2 config gives it (BERT's is its 5th positional argument)."""
    out, suffix = {}, "FP32" if precision == "fp32" else "(?:AMP|FP16)"
    for name, body in re.findall(rf"PyTorch_(\w+?)_{suffix}_PARAMS=\((.*?)\n\s*\)", config, re.S):
        words = re.findall(r'"([^"]*)"|(\S+)', body)
        words = [a or b for a, b in words]
        name = name.lower() if name != "SSD" else "ssd"
        if name.startswith("bert"):
            out[name] = int(words[4])
        for i, w in enumerate(words[:-1]):
            if w in BATCH_FLAGS:
                out[name] = int(words[i + 1])
    return out


def rows(repo: Path, commit: str) -> list[dict]:
    out = []
    for precision in ("fp32", "fp16"):
        path = f"pytorch/pytorch-train-throughput-{precision}.csv"
        batch = {r["name_gpu"]: r for r in table(show(repo, commit, f"pytorch/pytorch-train-bs-{precision}.csv"))}
        for r in table(show(repo, commit, path)):
            if float(r["num_gpu"]) != 1:
                continue
            for bench, value in list(r.items())[5:]:
                if float(value) > 0:  # 0.0: not run on that host
                    out.append({"table": path, "name_gpu": r["name_gpu"], "precision": precision, "benchmark": bench,
                                "throughput": float(value), "batch_size": int(float(batch[r["name_gpu"]][bench])),
                                "container": V1_CONTAINER, "commit": commit})
        path = f"pytorch/pytorch-train-throughput-v2-{precision}.csv"
        configs = {}
        for r in table(show(repo, commit, path)):
            name = r.pop("") if "" in r else r.pop("name_gpu")
            found = V2_GPU.findall(name + "_")
            if not found or int(found[-1][0]) != 1:
                continue
            memory = V2_MEMORY[found[-1][1]]
            if memory not in configs:
                configs[memory] = v2_batches(show(repo, commit, f"pytorch/scripts/config_v2/config_pytorch_{memory}.sh"),
                                             precision)
            for bench, value in r.items():
                if float(value) > 0:
                    out.append({"table": path, "name_gpu": name, "precision": precision, "benchmark": bench,
                                "throughput": float(value), "batch_size": configs[memory].get(bench, ""),
                                "container": V2_CONTAINER, "commit": commit})
    return out


MULTI_COLUMNS = ["table", "name_gpu", "num_gpu", "one_gpu", "precision", "benchmark", "throughput",
                 "one_gpu_throughput", "batch_size", "one_gpu_batch_size", "container", "commit"]


def multi_rows(repo: Path, commit: str) -> list[dict]:
    """Each v1 row of 2, 4 or 8 GPUs (num_gpu) beside the one-GPU row of the same host and GPU (its name less the
    count, 'Dell 2x H100 80GB SXM5' -> 'Dell H100 80GB SXM5'), per precision and benchmark: both throughputs and
    both batch sizes (the many-GPU row's is the global batch, N x the one-GPU row's). Rows without such a one-GPU
    row (LambdaCloud 8x H100 80GB SXM5) and benchmarks either left at 0 are left out."""
    out = []
    for precision in ("fp32", "fp16"):
        path = f"pytorch/pytorch-train-throughput-{precision}.csv"
        batch = {r["name_gpu"]: r for r in table(show(repo, commit, f"pytorch/pytorch-train-bs-{precision}.csv"))}
        rows = {r["name_gpu"]: r for r in table(show(repo, commit, path))}
        for name, r in rows.items():
            n = int(float(r["num_gpu"]))
            one = re.sub(r"\b\d+x ?", "", name)
            if n == 1 or one not in rows or int(float(rows[one]["num_gpu"])) != 1:
                continue
            for bench, value in list(r.items())[5:]:
                single = float(rows[one][bench])
                if float(value) > 0 and single > 0:
                    out.append({"table": path, "name_gpu": name, "num_gpu": n, "one_gpu": one, "precision": precision,
                                "benchmark": bench, "throughput": float(value), "one_gpu_throughput": single,
                                "batch_size": int(float(batch[name][bench])),
                                "one_gpu_batch_size": int(float(batch[one][bench])), "container": V1_CONTAINER,
                                "commit": commit})
    return out


def write(target: Path, columns, table) -> None:
    """`table`'s rows as a CSV of `columns` at `target`."""
    with target.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(table)
    print(f"wrote {target}")


def main(argv: list[str]) -> int:
    repo = Path(argv[0])
    commit = argv[1] if len(argv) > 1 else subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                                                          capture_output=True, text=True).stdout.strip()
    write(Path(__file__).with_name("lambda_train_throughput.csv"), COLUMNS, rows(repo, commit))
    write(Path(__file__).with_name("lambda_multi_gpu.csv"), MULTI_COLUMNS, multi_rows(repo, commit))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

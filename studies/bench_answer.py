"""A benchmark: the wall time from a user's sweep command to its answer, and `crossover predict`'s, on this machine.

    python studies/bench_answer.py          # examples/zoo.py's shufflenet_v2_x1_0 (1.3M parameters), on the CPU
    python studies/bench_answer.py --workload job.py:workload --param channels=64
    python studies/bench_answer.py --predict-only    # crossover predict alone, cold and warm, at real sizes

It runs `python -m crossover.sweeps.scaling --workload REF --devices cpu` (the same as `crossover sweep`; REF read from the
current folder: examples/zoo.py is the checkout's) with every other flag at its default (the
search within the default --budget, the answer, the report) into a fresh temporary --out, as a new user's
first sweep would, then prints what it said, the rows it landed and its wall time beside its
target (3 minutes on a 2-core VM without a GPU, for a model of about 1.5M parameters). The target is
printed, never asserted: on a machine others share, their work slows it, so the load average before and
after is printed too. Then it times `crossover predict` for the same workload (the run of 30 epochs of
50,000 samples at batch 128) against its target, PREDICT_TARGET_S.

Last, `crossover predict` on real-sized jobs (JOBS: a ResNet-50, whose step the meta device counts; a Faster
R-CNN and a top-2 mixture of experts, whose data-dependent shapes it cannot; a scan written as a Python loop over
time), beside the time this machine takes to `import torch, torchvision` in a fresh process: cold (the step counted;
the shipped fit made once before, as an install's first prediction makes it), then asked again at another dataset
size and epochs, another batch size, bf16 (counted at it), bf16 at another batch size and on 1, 2, 4 and 8 GPUs
(ASKED), each as a ratio to the import against its target (COLD_META, COLD_DATA, AGAIN). Every time is wall time,
from the command to its answer.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crossover.analysis.load import read

TARGET_S = 180.0  # s from command to answer, the install aside: what a new user's first sweep should take
PREDICT_TARGET_S = 15.0  # s from `crossover predict` to its answer
# `crossover predict`'s time to its answer as a ratio to `import torch, torchvision` in a fresh process of the same
# run: a job whose step is counted on the meta device, cold (its step not counted before; the shipped fit is, once an
# install); one whose step has data-dependent shapes (counted for real on the CPU, at the smallest batches), cold;
# and any call once the job's step is counted at that precision (another batch, dataset size, epochs, GPU count)
COLD_META, COLD_DATA, AGAIN = 3.0, 6.0, 0.8
# (what, --workload, its --param, --batch-size, the cold target): real-sized jobs
JOBS = (("ResNet-50", "realsize", "arch=resnet50", 32, COLD_META),
        ("Faster R-CNN", "heldout", "arch=fasterrcnn", 4, COLD_DATA),
        ("top-2 mixture of experts", "heldout", "arch=moe", 16, COLD_DATA),
        ("Python-loop scan", "heldout", "arch=mamba_scan", 16, COLD_META))
# the calls asked of each job in turn, from one cache folder: (what, flags but the batch's, batch x, target: None
# the job's cold one); the first counts the step, the fourth counts it at bf16
ASKED = (("cold: the step counted", ["--dataset-size", "50000", "--epochs", "30"], 1, None),
         ("another dataset size and epochs", ["--dataset-size", "20000", "--epochs", "5"], 1, AGAIN),
         ("another batch size", ["--dataset-size", "50000", "--epochs", "30"], 2, AGAIN),
         ("bf16: the step counted at it", ["--dataset-size", "50000", "--epochs", "30", "--precision", "bf16"], 1,
          None),
         ("bf16 at another batch size", ["--dataset-size", "50000", "--epochs", "30", "--precision", "bf16"], 4,
          AGAIN),
         ("--gpus 1,2,4,8", ["--dataset-size", "50000", "--epochs", "30", "--gpus", "1,2,4,8"], 1, AGAIN))


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """Seconds `cmd` took to end, the CPU seconds it and its children used (user and system: on a machine others
    load, what an idle one would take, near enough, where its processes use one core at a time), its exit status."""
    began, used = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    cpu = after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime
    return time.monotonic() - began, cpu, done.returncode


def real_sizes() -> int:
    """`crossover predict` on JOBS, each call of ASKED in turn from one cache folder (the shipped fit made in it
    first, as an install's first prediction makes it), beside `import torch, torchvision`'s time in a fresh process;
    each as a ratio to that import, against its target (printed, never asserted). The worst exit status."""
    took, cpu, _ = timed([sys.executable, "-c", "import torch, torchvision"])
    print(f"bench: import torch, torchvision in a fresh process: {took:.1f} s ({cpu:.1f} s CPU); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    worst = 0
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as folder:
        env = {**os.environ, "XDG_CACHE_HOME": folder}
        fit, _, status = timed([sys.executable, "-c", "from crossover.analysis import model; "
                                "model.shipped(model.PER_CLASS)"], env)
        print(f"bench: the shipped fit, made once an install (its first prediction makes it): {fit:.1f} s; exit "
              f"{status}")
        for name, ref, param, batch, cold in JOBS:
            for what, flags, times, target in ASKED:
                cmd = [sys.executable, "-m", "crossover.sweeps.command", "predict", "--workload", ref, "--param",
                       param, "--batch-size", str(batch * times), *flags]
                spent, used, status = timed(cmd, env)
                ratio, goal = spent / took, target or cold
                worst = max(worst, status)
                print(f"bench: predict {name:<24} {what:<32} {spent:5.1f} s ({used:4.1f} s CPU) = {ratio:4.2f}x the "
                      f"import (target {goal:g}x: {'met' if ratio <= goal else 'missed'}); exit {status}; load "
                      f"average {os.getloadavg()[0]:.1f}")
    return worst


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="zoo", help="the job to sweep, path/to/job.py:ATTR or an example job's name")
    p.add_argument("--param", action="append", default=None, metavar="NAME=VALUE",
                   help="its own axes' values (default: arch=shufflenet_v2_x1_0, for the zoo example)")
    p.add_argument("--predict-only", action="store_true",
                   help="time crossover predict alone (cold and again, JOBS), not the sweep")
    args = p.parse_args(argv)
    if args.predict_only:
        return real_sizes()
    params = args.param if args.param is not None else (
        ["arch=shufflenet_v2_x1_0"] if args.workload == "zoo" else [])
    with tempfile.TemporaryDirectory(prefix="bench-answer-") as out:
        cmd = [sys.executable, "-m", "crossover.sweeps.scaling", "--workload", args.workload,
               *(x for v in params for x in ("--param", v)), "--devices", "cpu", "--out", out]
        load = os.getloadavg()[0]
        began = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - began
        print(done.stdout, end="")
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
        folders = [d for d in Path(out).iterdir() if d.is_dir() and not d.name.startswith("_")]
        rows = read(*folders) if folders else None
    ok = 0 if rows is None else int(((rows["status"] == "ok") & rows["is_cpu"]).sum())
    print(f"bench: {' '.join(cmd[1:]).replace(out, 'OUT')}")
    print(f"bench: answer in {wall:.0f} s (target {TARGET_S:.0f} s: {'met' if wall <= TARGET_S else 'missed'}); "
          f"exit {done.returncode}; {ok} ok CPU row{'s' if ok != 1 else ''} of {0 if rows is None else len(rows)} in "
          f"{', '.join(d.name for d in folders) or 'no folder'}; load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores")
    predict = [sys.executable, "-m", "crossover.sweeps.command", "predict", "--workload", args.workload,
               *(x for v in params for x in ("--param", v)), "--batch-size", "128", "--dataset-size", "50000",
               "--epochs", "30"]
    began = time.monotonic()
    said = subprocess.run(predict, capture_output=True, text=True)
    took = time.monotonic() - began
    print(f"bench: {' '.join(predict[1:])}: answer in {took:.1f} s (target {PREDICT_TARGET_S:.0f} s: "
          f"{'met' if took <= PREDICT_TARGET_S else 'missed'}); exit {said.returncode}")
    return done.returncode or said.returncode or real_sizes()


if __name__ == "__main__":
    sys.exit(main())

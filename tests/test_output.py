"""What a trial prints is kept in its folder up to a MiB, the rest counted (trainables/output.py): a job that
printed 5 MB a step wrote 105 MB into Ray's session logs under /tmp, which nothing caps.

    python -m pytest tests/test_output.py
"""

import subprocess
import sys
from pathlib import Path

import pandas as pd

from crossover.sweeps.space import Space

ROOT = Path(__file__).resolve().parent.parent

# Python's print, C's write on stderr and a child process, under `capped`; then the process's own stdout again
CAPPED = """
import os, subprocess, sys
from pathlib import Path
from crossover.trainables.output import capped
with capped(Path(sys.argv[1]), limit=1000):
    print("p" * 3000)
    os.write(2, b"e" * 3000)
    subprocess.run([sys.executable, "-c", "print('c' * 3000)"], check=True)
print("after")
"""


def test_what_a_process_prints_under_capped_is_kept_to_the_limit_and_counted_then_its_streams_come_back(tmp_path):
    log = tmp_path / "trial" / "output.log"
    done = subprocess.run([sys.executable, "-c", CAPPED, str(log)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("after\n", "")  # nothing of it reached the process's own streams
    kept = log.read_bytes()
    assert kept == b"p" * 1000 + b"\n[crossover: 8,002 more bytes of output not kept]\n"  # 3,001 + 3,000 + 3,001


LOUD = """
import torch
from torch import nn
from crossover import Data, Workload


def data(cfg):
    print("x" * 3 * 2**20, flush=True)  # 3 MiB, each time the trial makes its data
    x = torch.randn(cfg.dataset_size, 4)
    return Data(x, (x.sum(1) > 0).long(), None, None, source="random")


workload = Workload("loud", make_data=data, make_model=lambda cfg: nn.Linear(4, 2), make_loss=nn.CrossEntropyLoss,
                    make_optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
                    defaults={"batch_size": 16, "dataset_size": 64, "epochs": 2})
"""


def test_a_trial_that_prints_megabytes_leaves_a_mib_in_its_folder_and_none_in_rays_logs(planner, tmp_path):
    import ray
    from conftest import CPUS
    from crossover.sweeps import cluster, runner

    (tmp_path / "loud.py").write_text(LOUD)
    # two trials, the second on the first's reused worker: each one's output reaches --out
    space = Space("loud", {f"{tmp_path / 'loud.py'}:workload": {"dataset_size": [64, 96]}}, ("cpu",), planner=planner)
    space.expand()  # planned, its module registered: shipped to the workers of the Ray started next
    ray.init(address="local", num_cpus=CPUS, include_dashboard=False, log_to_driver=False,
             runtime_env=cluster.runtime_env(planner.registry.shipping))
    try:
        logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
        store = runner.run(space, tmp_path / "out", max_concurrent=1, log=lambda line: None)  # one worker, reused
        printed = sum(f.stat().st_size for f in logs.glob("worker-*") if f.is_file())
        staged = list(logs.parent.rglob("output.log"))  # the trial's working folder, in Ray's session
    finally:
        ray.shutdown()
    rows = pd.read_parquet(store.dir)
    assert len(rows) == 2 and (rows["status"] == "ok").all()
    assert printed < 2**20  # Ray's own lines, not the 3 MiB twice
    kept = list((tmp_path / "out" / "_tune" / "loud").glob("*/output.log"))  # each trial's folder, under --out
    assert len(kept) == 2 and len(staged) <= 2, (kept, staged)
    for log in kept + staged:
        text = log.read_bytes()
        assert text.startswith(b"x" * 2**20) and text.endswith(b" more bytes of output not kept]\n")
        assert len(text) < 2**20 + 99

"""A user's code never runs in the sweep's driver (sweeps/plan.py): its import, its model's shapes and its memory
estimate run in a process of their own, under a time limit; what goes wrong there is one line and error rows, the
driver and its Ray untouched; a name never becomes a path; a fault in a worker is one clean row.

    python -m pytest tests/test_plan.py --all

Every job here is the README's minimal job, written to a temporary folder, with one change.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from sweeps import plan
from sweeps.space import Space
from trainables import workload

ROOT = Path(__file__).resolve().parent.parent

JOB = '''
import os, sys, time
import torch
from torch import nn
from trainables.data import Data
from trainables.workload import Workload

def data(cfg):
    {data}
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, 8, generator=g)
    return Data(x, torch.randint(0, 2, (cfg.dataset_size,), generator=g), None, None, source="random")

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        {forward}
        return self.fc(x)

def model(cfg):
    {model}
    return Net()

def optimiser(params, lr):
    {optimiser}
    return torch.optim.SGD(params, lr=lr)

workload = Workload("{name}", make_data=data, make_model=model, make_loss=nn.CrossEntropyLoss,
                    make_optimizer=optimiser, defaults={{"batch_size": 16, "dataset_size": 64, "epochs": 2}})
'''


def job(folder: Path, name: str, at_import: str = "", **code) -> str:
    """A job file `name`.py in `folder`, `code` put into its data, forward, model or optimiser; its reference."""
    text = at_import + "\n" + JOB.format(name=name, **{k: code.get(k, "pass") for k in
                                                       ("data", "forward", "model", "optimiser")})
    (folder / f"{name}.py").write_text(text)
    return f"{folder / name}.py:workload"


def test_planning_runs_the_users_code_in_a_process_of_its_own_on_a_copy_of_its_file(tmp_path, fresh, capfd):
    marker = tmp_path / "pids"
    ref = job(tmp_path, "pl_seen", model=f"open({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n'); "
                                         "open(__file__, 'a').write('# planned\\n')",
              forward="print('x' * 3_000_000)")
    before = Path(ref.split(":")[0]).read_bytes()
    trials = Space("seen", {ref: {}}).expand()
    sizes = plan.member_sizes(trials)
    pids = {int(p) for p in marker.read_text().split()}
    assert pids and os.getpid() not in pids  # its model was built, never in this process
    assert Path(ref.split(":")[0]).read_bytes() == before  # the copy it planned on took its writes
    assert sizes[trials[0].hash] > 16 * (8 * 2 + 2)  # weights, gradients, moments, and more
    out, err = capfd.readouterr()
    assert len(out) + len(err) < 10_000  # its 3 MB print went to the child's log, and the log away with it
    # the fingerprint a worker finds, building the model itself (trainables/workload.py shapes)
    assert trials[0].cfg.fingerprint == workload._fingerprint(trials[0].wl, repr([("fc.weight", (2, 8)),
                                                                                 ("fc.bias", (2,))]))


@pytest.mark.parametrize("code, words", [
    ({"model": "os._exit(3)"}, "make_model at its defaults on the meta device (its fingerprint), in a process of "
                               "its own (planning), exited with status 3"),
    ({"forward": "while True: pass"}, "forward pass on the meta device at batch_size=16 (its memory estimate), in "
                                      "a process of its own (planning), ran past its limit of 8 s (--plan-timeout)"),
    ({"data": "raise KeyboardInterrupt"}, "(its memory estimate), in a process of its own (planning), raised "
                                          "KeyboardInterrupt"),
], ids=["os._exit", "endless-forward", "KeyboardInterrupt"])
def test_a_workload_that_exits_hangs_or_interrupts_while_planned_is_faulted_and_this_process_goes_on(
        tmp_path, fresh, code, words, capfd):
    ref = job(tmp_path, f"pl_{list(code)[0]}", **code)
    space = Space("faulty", {ref: {}, "disc": {"depth": [2]}}, plan_timeout_s=8)
    trials = space.expand()
    plan.member_sizes(trials, space.plan_timeout_s)
    mine = [t for t in trials if t.wl.ref]
    said = plan.fault(mine[0].wl)
    assert said and words in said and "its trials are error rows" in said, said
    log = Path(re.search(r"Its output: (\S+)\.", said).group(1) if "Its output" in said else "")
    assert log.is_file()
    assert not any(plan.fault(t.wl) for t in trials if not t.wl.ref)  # the built-in beside it is planned as ever
    assert capfd.readouterr().err.count("error: ") == 1  # said once, where it was found
    log.unlink()


def test_a_module_that_exits_as_it_imports_is_refused_in_one_line_and_never_imported_here(tmp_path, fresh):
    ref = job(tmp_path, "pl_import", at_import="import os; os._exit(3)")
    with pytest.raises(plan.PlanError) as info:
        Space("refused", {ref: {}}).expand()
    said = str(info.value)
    assert said.startswith(f"--workload {ref}: importing {tmp_path / 'pl_import.py'}, in a process of its own "
                           "(planning), exited with status 3; nothing ran") and "\n" not in said
    assert "pl_import" not in sys.modules
    Path(re.search(r"Its output: (\S+)\.", said).group(1)).unlink()


def test_what_a_module_forks_as_it_is_planned_does_not_outlive_the_planning(tmp_path, fresh):
    marker = tmp_path / "forked"
    # each forked process appends its pid and its parent's: the planning child's fork, and (the driver still
    # imports the module once the child has) this test's own, which the test ends itself
    ref = job(tmp_path, "pl_fork", at_import=f"import os, time\nif os.fork() == 0:\n    with open({str(marker)!r}, 'a') "
                                             "as f:\n        f.write(f'{os.getpid()} {os.getppid()}\\n')\n"
                                             "    time.sleep(120)\n    os._exit(0)\n")
    plan.register(ref)

    def alive(pid):
        return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]

    deadline = time.monotonic() + 5  # both forks write as soon as they run, but after the imports return
    while time.monotonic() < deadline and (not marker.exists() or len(marker.read_text().splitlines()) < 2):
        time.sleep(0.05)
    forks = [tuple(map(int, line.split())) for line in marker.read_text().splitlines()]
    planning = [pid for pid, parent in forks if parent != os.getpid()]
    ours = [pid for pid, parent in forks if parent == os.getpid()]
    try:
        assert planning, forks  # the planning child imported the module, and its fork ran
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(map(alive, planning)):
            time.sleep(0.2)
        assert not any(map(alive, planning))
    finally:
        for pid in ours:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_sigterm_while_the_workload_imports_exits_143_and_says_interrupted(tmp_path):
    marker = tmp_path / "importing"
    ref = job(tmp_path, "pl_slow", at_import=f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(120)\n")
    sweep = subprocess.Popen([sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workload", ref, "--devices",
                              "cpu", "--smoke", "--out", str(tmp_path / "out"), "--no-report"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "RAY_ADDRESS": ""})
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    sweep.send_signal(signal.SIGTERM)
    out, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("interrupted: ") and "does not import" not in err


FAULTS = {  # workload -> what goes wrong, and where
    "pl_good": {},
    "pl_planexit": {"model": "os._exit(3)"},  # in planning: its rows are written, never run
    "pl_rayshutdown": {"model": "import ray; ray.shutdown()"},  # in planning (no Ray there) and in its worker
    "pl_workerexit": {"optimiser": "os._exit(4)"},  # the optimiser's factory runs on the worker alone
    "pl_interrupt": {"optimiser": "raise KeyboardInterrupt"},
}


@pytest.mark.slow
def test_a_sweep_of_faulty_jobs_rows_each_fault_cleanly_measures_the_good_one_and_exits_2(tmp_path):
    refs = [job(tmp_path, name, **code) for name, code in FAULTS.items()]
    sources = {ref: Path(ref.split(":")[0]).read_bytes() for ref in refs}
    out = tmp_path / "out"
    flags = [x for ref in refs for x in ("--workload", ref)]
    done = subprocess.run([sys.executable, str(ROOT / "sweeps" / "scaling.py"), *flags, "--devices", "cpu", "--smoke",
                           "--repeats", "1", "--out", str(out), "--name", "faulty", "--no-report"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "pl_planexit:workload: pl_planexit's make_model" in errors[0], errors
    assert "exited with status 3" in errors[0]
    assert "Traceback" not in done.stderr + done.stdout and "\x1b[" not in done.stderr + done.stdout
    rows = pd.read_parquet(out / "faulty").set_index("workload")
    assert rows.loc["pl_good", "status"] == "ok"
    assert rows.loc["pl_rayshutdown", "error"].startswith("WorkerExit: the workload's code called ray.shutdown()")
    assert rows.loc["pl_planexit", "error"].startswith("pl_planexit:workload: pl_planexit's make_model at its "
                                                       "defaults on the meta device")
    assert rows.loc["pl_workerexit", "error"].startswith("WorkerExit: the workload's code called os._exit(4)")
    assert rows.loc["pl_interrupt", "error"].startswith("KeyboardInterrupt (in optimiser, pl_interrupt.py:")
    assert not rows["error"].fillna("").str.contains("\x1b|lost its worker|actor died").any()
    assert "lost its worker" not in done.stdout  # no exit of the user's code was taken for a lost node
    assert {ref: Path(ref.split(":")[0]).read_bytes() for ref in refs} == sources
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*(f"{n}.py" for n in FAULTS), "out"])


@pytest.mark.slow
def test_a_worker_that_dies_is_one_line_on_the_terminal_and_rays_lines_go_to_the_runs_log(tmp_path):
    # a segfault in the user's code kills its worker outright, as no exit the trial can trap (WorkerExit) would
    ref = job(tmp_path, "pl_segv", optimiser="import ctypes; ctypes.string_at(0)")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workload", ref, "--devices", "cpu",
                           "--smoke", "--repeats", "1", "--max-failures", "0", "--out", str(out), "--name", "segv",
                           "--no-report"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RAY_ADDRESS": ""})
    said = done.stdout + done.stderr
    assert "(raylet)" not in said and "\x1b[" not in said and "Traceback" not in said, said[-3000:]
    assert len([line for line in done.stdout.splitlines() if ": FAILED " in line]) == 1, done.stdout
    assert "A worker died or was killed" in (out / "_logs" / "segv.log").read_text()
    assert (pd.read_parquet(out / "segv")["status"] == "error").all()


@pytest.mark.slow
def test_os_exit_in_a_data_parallel_rank_is_a_row_saying_the_call_the_status_and_the_rank(tmp_path):
    ref = job(tmp_path, "pl_ddpexit", optimiser="os._exit(4)")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workload", ref, "--devices",
                           "ddp-cpu:1", "--cpu-threads", "1", "--smoke", "--repeats", "1", "--max-failures", "0",
                           "--out", str(out), "--name", "ddpexit", "--no-report"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "RAY_ADDRESS": ""})
    rows = pd.read_parquet(out / "ddpexit")
    assert len(rows) == 1 and rows["error"][0].startswith(
        "WorkerExit: the workload's code called os._exit(4) in rank 0 of 1, which would end its Ray worker"), done.stdout
    assert "(raylet)" not in done.stdout + done.stderr and "lost its worker" not in done.stdout

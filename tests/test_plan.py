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
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from crossover.sweeps import plan
from crossover.sweeps.space import Space
from crossover import workload
from crossover.trainables import fingerprint

ROOT = Path(__file__).resolve().parent.parent

JOB = '''
import os, sys, time
import torch
from torch import nn
from crossover.data import Data
from crossover.workload import Workload


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


def output_of(said: str) -> str:
    """The planning process's output as the failure `said` names it: its log's text (the log then removed), or ''
    where it says the process printed nothing (and no log is left)."""
    if "It printed nothing" in said:
        return ""
    log = Path(re.search(r"Its output: (\S+)\.", said).group(1))
    text = log.read_text()
    log.unlink()
    return text


def test_planning_runs_the_users_code_in_a_process_of_its_own_on_a_copy_of_its_file(tmp_path, planner, capfd):
    marker = tmp_path / "pids"
    ref = job(tmp_path, "pl_seen", model=f"open({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n'); "
                                         "open(__file__, 'a').write('# planned\\n')",
              forward="print('x' * 3_000_000)")
    before = Path(ref.split(":")[0]).read_bytes()
    trials = Space("seen", {ref: {}}, planner=planner).expand()
    sizes = planner.member_sizes(trials)
    pids = {int(p) for p in marker.read_text().split()}
    assert pids and os.getpid() not in pids  # its model was built, never in this process
    assert Path(ref.split(":")[0]).read_bytes() == before  # the copy it planned on took its writes
    assert sizes[trials[0].hash] > 16 * (8 * 2 + 2)  # weights, gradients, moments, and more
    out, err = capfd.readouterr()
    assert len(out) + len(err) < 10_000  # its 3 MB print went to the child's log, and the log away with it
    # the fingerprint a worker finds, reading its file and building the model itself (trainables/fingerprint.py)
    assert trials[0].cfg.fingerprint == fingerprint.of(before, repr([("fc.weight", (2, 8)), ("fc.bias", (2,))]))
    assert "pl_seen" not in sys.modules  # the driver knows it by its spec alone


@pytest.mark.parametrize("code, words", [
    ({"model": "os._exit(3)"}, "make_model at its defaults on the meta device (its fingerprint), in a process of "
                               "its own (planning), exited with status 3"),
    ({"forward": "while True: pass"}, "forward pass on the meta device at batch_size=16 (its memory estimate), in "
                                      "a process of its own (planning), ran past its limit of 8 s (--plan-timeout, "
                                      "counted from when it began to run your code)"),
    ({"data": "raise KeyboardInterrupt"}, "(its memory estimate), in a process of its own (planning), raised "
                                          "KeyboardInterrupt"),
], ids=["os._exit", "endless-forward", "KeyboardInterrupt"])
def test_a_workload_that_exits_hangs_or_interrupts_while_planned_is_faulted_and_this_process_goes_on(
        tmp_path, planner, code, words, capfd):
    ref = job(tmp_path, f"pl_{list(code)[0]}", **code)
    space = Space("faulty", {ref: {}, "disc": {"depth": [2]}}, plan_timeout_s=8, planner=planner)
    trials = space.expand()
    planner.member_sizes(trials, space.plan_timeout_s)
    mine = [t for t in trials if t.wl.ref]
    said = planner.fault(mine[0].wl)
    assert said and words in said and "its trials are error rows" in said, said
    output_of(said)
    assert not any(planner.fault(t.wl) for t in trials if not t.wl.ref)  # the built-in beside it is planned as ever
    assert capfd.readouterr().err.count("error: ") == 1  # said once, where it was found


def test_the_planning_limit_counts_the_users_code_not_the_childs_start_up_or_exit(tmp_path, planner, monkeypatch):
    # a start-up and an exit each slower than the limit (as importing torch, and the interpreter's exit with it, are
    # on a loaded machine): sitecustomize runs before the child imports crossover, its atexit after the child has
    # answered, and the limit counts neither, so the workload is planned
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text("import atexit, time\n"
                                                        "time.sleep(8)\natexit.register(time.sleep, 8)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path / "site"),
                                                                   os.environ.get("PYTHONPATH")])))
    ref = job(tmp_path, "pl_slowstart")
    space = Space("slowstart", {ref: {}}, plan_timeout_s=4, planner=planner)
    trials = space.expand()
    sizes = planner.member_sizes(trials, space.plan_timeout_s)
    assert planner.fault(trials[0].wl) is None and sizes[trials[0].hash], planner.fault(trials[0].wl)


def test_a_module_that_exits_as_it_imports_is_refused_in_one_line_and_never_imported_here(tmp_path, planner):
    ref = job(tmp_path, "pl_import", at_import="print('loading', flush=True); import os; os._exit(3)")
    with pytest.raises(plan.PlanError) as info:
        Space("refused", {ref: {}}, planner=planner).expand()
    said = str(info.value)
    assert said.startswith(f"--workload {ref}: importing {tmp_path / 'pl_import.py'}, in a process of its own "
                           "(planning), exited with status 3; nothing ran") and "\n" not in said
    assert "pl_import" not in sys.modules
    assert output_of(said) == "loading\n"  # the log its line names: what it printed


@pytest.mark.parametrize("at_import", ["raise ValueError('no data here')",
                                       "print('loading'); raise ValueError('no data here')"], ids=["silent", "printing"])
def test_a_module_refused_as_it_imports_leaves_no_log_behind(tmp_path, planner, monkeypatch, at_import):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the planning process's log is written
    ref = job(tmp_path, "pl_raises", at_import=at_import)
    with pytest.raises(plan.PlanError, match=r"pl_raises.py does not import: ValueError: no data here \(.*pl_raises.py:\d+\)$"):
        Space("refused", {ref: {}}, planner=planner).expand()
    assert list(tmp_path.glob("crossover-plan-*")) == []  # its one line says it all: no log named, none left


def test_what_a_module_forks_as_it_is_planned_does_not_outlive_the_planning(tmp_path, planner):
    marker = tmp_path / "forked"
    # each forked process appends its pid and its parent's: the planning child's fork alone (the driver never
    # imports the module)
    ref = job(tmp_path, "pl_fork", at_import=f"import os, time\nif os.fork() == 0:\n    with open({str(marker)!r}, 'a') "
                                             "as f:\n        f.write(f'{os.getpid()} {os.getppid()}\\n')\n"
                                             "    time.sleep(120)\n    os._exit(0)\n")
    planner.spec(ref)

    def alive(pid):
        return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]

    deadline = time.monotonic() + 5  # the fork writes as soon as it runs, but after the import returns
    while time.monotonic() < deadline and not marker.exists():
        time.sleep(0.05)
    forks = [tuple(map(int, line.split())) for line in marker.read_text().splitlines()]
    assert forks and all(parent != os.getpid() for _, parent in forks), forks  # the planning child's, not ours
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid, _ in forks):
        time.sleep(0.2)
    assert not any(alive(pid) for pid, _ in forks)
    assert "pl_fork" not in sys.modules


def test_sigterm_while_the_workload_imports_exits_143_and_says_interrupted(tmp_path):
    marker = tmp_path / "importing"
    ref = job(tmp_path, "pl_slow", at_import=f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(120)\n")
    sweep = subprocess.Popen([sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workload", ref, "--devices",
                              "cpu", "--smoke", "--out", str(tmp_path / "out"), "--no-report"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "RAY_ADDRESS": ""})
    deadline = time.monotonic() + 300  # a guard: the sweep and its planning child start first
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    sweep.send_signal(signal.SIGTERM)
    out, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("interrupted: ") and "does not import" not in err


# A job that writes its process's id, and what ran, at import and in every function it gives crossover; its
# check refuses width 3, and runs `{check}` first.
SEEN_JOB = '''
import os
import torch
from torch import nn
from crossover.config import ConfigError
from crossover.data import Data
from crossover.workload import Workload

def seen(what):
    with open({marker!r}, "a") as f:
        f.write(f"{{os.getpid()}} {{what}}\\n")

seen("import")

def data(cfg):
    seen("make_data")
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.dataset_size, 8, generator=g)
    return Data(x, torch.randint(0, 2, (cfg.dataset_size,), generator=g), None, None, source="random")

def model(cfg):
    seen("make_model")
    return nn.Sequential(nn.Linear(8, cfg.width), nn.ReLU(), nn.Linear(cfg.width, 2))

def loss():
    seen("make_loss")
    return nn.CrossEntropyLoss()

def optimiser(params, lr):
    seen("make_optimizer")
    return torch.optim.SGD(params, lr=lr)

def check(cfg):
    seen("check")
    {check}
    if cfg.width == 3:
        raise ConfigError("width", "width 3 is refused by its check")

def sample(cfg):
    seen("sample")
    return torch.zeros(8)

def step(model, x, y, loss):
    seen("step")
    out = model(x)
    return loss(out, y), out

workload = Workload("{name}", make_data=data, make_model=model, make_loss=loss, make_optimizer=optimiser, check=check,
                    sample=sample, step=step, axes={{"width"}},
                    defaults={{"width": 4, "batch_size": 16, "dataset_size": 64, "epochs": 2}})
'''


def seen_job(folder: Path, name: str, check: str = "pass") -> tuple[str, Path]:
    """SEEN_JOB as `name`.py in `folder`: its reference, and the file its processes write their ids to."""
    marker = folder / f"{name}.seen"
    (folder / f"{name}.py").write_text(SEEN_JOB.format(marker=str(marker), name=name, check=check))
    return f"{folder / name}.py:workload", marker


def seen(marker: Path) -> dict[int, set]:
    """{process id: what ran there} of a SEEN_JOB's marker."""
    ran: dict[int, set] = {}
    for line in marker.read_text().splitlines():
        pid, what = line.split()
        ran.setdefault(int(pid), set()).add(what)
    return ran


def test_the_driver_plans_and_checks_a_users_workload_from_its_spec_and_never_runs_its_code(tmp_path, planner):
    ref, marker = seen_job(tmp_path, "pl_pids")
    trials = Space("pids", {ref: {"width": [4, 8]}}, planner=planner).expand()
    planner.member_sizes(trials)
    with pytest.raises(ValueError, match=r"width 3 is refused by its check \(sweep 'pids', workload 'pl_pids', axis "
                                         r"width\)"):
        Space("pids", {ref: {"width": [2, 3]}}, planner=planner).expand()
    ran = seen(marker)
    assert os.getpid() not in ran, ran[os.getpid()]
    assert set().union(*ran.values()) >= {"import", "make_model", "check", "make_data"}  # in planning processes
    assert "pl_pids" not in sys.modules
    wl = trials[0].wl
    assert isinstance(wl, workload.WorkloadSpec) and wl.has_check and wl.has_step and wl.has_sample
    assert [t.cfg.width for t in trials] == [4, 8] and {t.cfg.fingerprint for t in trials} == {wl.fingerprint}


@pytest.mark.parametrize("check, words", [
    ("os._exit(5)", "exited with status 5"),
    ("while True: pass", "ran past its limit of 8 s (--plan-timeout, counted from when it began to run your code)"),
], ids=["os._exit", "endless"])
def test_a_check_that_exits_or_hangs_faults_its_workload_in_planning_not_the_driver(tmp_path, planner, capfd, check,
                                                                                    words):
    ref, marker = seen_job(tmp_path, "pl_badcheck", check)
    trials = Space("badcheck", {ref: {"width": [4]}}, plan_timeout_s=8, planner=planner).expand()
    said = planner.fault(trials[0].wl)
    assert said and "pl_badcheck's check of " in said and words in said and "its trials are error rows" in said, said
    assert os.getpid() not in seen(marker)
    assert capfd.readouterr().err.count("error: ") == 1
    output_of(said)


@pytest.mark.slow
def test_a_sweep_of_a_users_job_runs_none_of_its_code_in_the_drivers_process(tmp_path):
    ref, marker = seen_job(tmp_path, "pl_sweeppids")
    out = tmp_path / "out"
    sweep = subprocess.Popen([sys.executable, str(ROOT / "sweeps" / "scaling.py"), "--workload", ref, "--devices",
                              "cpu", "--smoke", "--repeats", "1", "--out", str(out), "--name", "pids", "--no-report"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "RAY_ADDRESS": ""})
    stdout, stderr = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, stderr[-3000:]
    assert (pd.read_parquet(out / "pids")["status"] == "ok").all()
    ran = seen(marker)
    assert sweep.pid not in ran, ran[sweep.pid]
    assert set().union(*ran.values()) >= {"import", "check", "make_model", "make_data", "make_loss", "make_optimizer",
                                          "step"}  # in planning processes and Ray's workers


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


# Run in a process of its own: an os.kill the trap let through would end it, not pytest.
TRAPS = """
import os, signal, subprocess, sys
from crossover.trainables.exits import WorkerExit, exits_trapped

for call, kill in [("kill", lambda: os.kill(os.getpid(), signal.SIGKILL)), ("group", lambda: os.kill(0, signal.SIGKILL)),
                   ("raise", lambda: signal.raise_signal(signal.SIGTERM))]:
    with exits_trapped():
        try:
            kill()
        except WorkerExit as exc:
            print(call, exc)
signal.signal(signal.SIGUSR1, lambda *a: print("handled SIGUSR1"))
other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with exits_trapped():
    os.kill(os.getpid(), signal.SIGUSR1)  # caught by its handler: no exit, let through
    os.kill(other.pid, signal.SIGKILL)  # another process: sent
print("other", other.wait())
"""

CRASH = """
import ctypes, sys
from pathlib import Path
from crossover.trainables.exits import last_words

def make_model():
    ctypes.string_at(0)

with last_words(Path(sys.argv[1])):
    make_model()
"""


def test_a_kill_of_its_own_process_is_trapped_and_a_crash_leaves_its_signal_and_the_workloads_call(tmp_path):
    from crossover.trainables.exits import crash, last_words
    from crossover.trainables.rows import crash_text, own_code

    done = subprocess.run([sys.executable, "-c", TRAPS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout.splitlines()
    assert said[:3] == [f"{call} the workload's code called {what}, which would end its Ray worker: the trial stopped there"
                        for call, what in [("kill", "os.kill(os.getpid(), SIGKILL)"),
                                           ("group", "os.kill(0, SIGKILL)"),
                                           ("raise", "signal.raise_signal(SIGTERM)")]]
    assert said[3:] == ["handled SIGUSR1", f"other {-signal.SIGKILL}"]

    script, words = tmp_path / "job.py", tmp_path / "last_words.txt"
    script.write_text(CRASH)
    done = subprocess.run([sys.executable, str(script), str(words)], capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGSEGV
    name, frames = crash(words, own_code)
    assert name == "SIGSEGV" and [f[2] for f in frames] == ["<module>", "make_model"]  # the job's own, innermost last
    assert crash_text(name, frames).startswith("the worker was killed by signal SIGSEGV in make_model (job.py:7)\n")
    with last_words(tmp_path / "alive.txt"):  # a trial that ends alive leaves no words
        pass
    assert crash(tmp_path / "alive.txt", own_code) is None and crash(words.with_name("none.txt"), own_code) is None


# A make_model that segfaults and a make_data that kills its own process, each on the worker alone (a Ray
# worker's process title is 'ray::...'; planning runs both in a plain process).
ON_WORKER = "if open('/proc/self/cmdline').read().startswith('ray::'): "


@pytest.mark.slow
def test_a_worker_its_own_code_kills_is_one_row_naming_the_signal_or_call_never_retried_and_the_sweep_exits_1(tmp_path):
    refs = [job(tmp_path, "pl_crash", model=ON_WORKER + "import ctypes; ctypes.string_at(0)"),
            job(tmp_path, "pl_selfkill", data=ON_WORKER + "import signal; os.kill(os.getpid(), signal.SIGKILL)")]
    out = tmp_path / "out"
    flags = [x for ref in refs for x in ("--workload", ref)]
    done = subprocess.run([sys.executable, str(ROOT / "sweeps" / "scaling.py"), *flags, "--devices", "cpu", "--smoke",
                           "--repeats", "1", "--cpu-threads", "1", "--out", str(out), "--name", "own", "--no-report",
                           "--no-reference", "--verbose"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # every trial failed
    rows = pd.read_parquet(out / "own")
    assert len(rows) == 2 and rows["config_hash"].is_unique and (rows["status"] == "error").all()
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: every trial failed, none was measured: the 2 rows in {out / 'own'} say why (their "
                      "'error' column; crossover report shows them as 'Failed trials')"]
    said = done.stdout + done.stderr
    assert "(raylet)" not in said and "\x1b[" not in said and "Traceback" not in said, said[-3000:]
    # no ok row: nothing priced, no sweep header left without its configurations
    assert "== the sweep" not in done.stdout and "no option has" not in done.stdout, done.stdout[-3000:]
    assert all(log.stat().st_size for log in out.glob("_logs/*")), list(out.glob("_logs/*"))  # none left empty
    failed = [line for line in done.stdout.splitlines() if ": FAILED " in line]  # a line per trial, none retried
    assert len(failed) == 2 and "lost its worker" not in done.stdout, done.stdout[-3000:]
    crashed = rows[rows["workload"] == "pl_crash"]["error"]
    assert crashed.str.startswith("the worker was killed by signal SIGSEGV in model (pl_crash.py:").all(), crashed[0]
    assert crashed.str.contains("so the trial was not run again").all()
    killed = rows[rows["workload"] == "pl_selfkill"]["error"]
    assert killed.str.startswith("WorkerExit: the workload's code called os.kill(os.getpid(), SIGKILL), which would "
                                 "end its Ray worker: the trial stopped there (in data, pl_selfkill.py:").all()
    # one Tune trial each, in one pass: none was run again (a pass more would be Tune trials of new ids)
    assert len([p for p in (out / "_tune" / "own").iterdir() if p.is_dir()]) == 2


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


# --- a SIGKILL: the kernel's OOM killer, or another's kill (sweeps/killed.py) ----------------------------------

GIB = 2**30


@pytest.mark.parametrize("peak, rose, memory, words", [
    (7 * GIB, True, True, ["ran out of memory", "7.0 GiB resident", "of the 8.0 GiB of the test's limit"]),
    (7.5 * GIB, None, True, ["most likely out of memory", "7.5 GiB"]),  # no count to read: the peak says it
    (7.5 * GIB, False, False, ["the kernel's OOM killer", "or another process's kill"]),  # counted, and none rose
    (1 * GIB, None, False, ["the kernel's OOM killer", "or another process's kill", "1.0 GiB"]),
    (None, None, False, ["its memory unknown", "or another process's kill"]),
], ids=["counted", "near-the-limit", "not-counted", "far-from-it", "unknown"])
def test_a_sigkill_is_out_of_memory_on_the_kernels_count_or_a_peak_near_the_limit_else_both_causes_are_said(
        peak, rose, memory, words):
    from crossover.sweeps import killed

    said, is_memory = killed.words(-signal.SIGKILL, peak and int(peak), 8 * GIB, "the test's limit", rose)
    assert is_memory is memory and all(w in said for w in words), said
    assert "--plan-timeout" not in said
    assert killed.words(-signal.SIGSEGV, peak and int(peak), 8 * GIB, "the test's limit", rose) == \
        ("was killed by signal SIGSEGV", False)


def test_a_planning_process_killed_from_outside_names_both_causes_and_not_the_time_limit(tmp_path, planner):
    ref = job(tmp_path, "pl_killed", data="import subprocess; subprocess.run(['kill', '-9', str(os.getpid())])")
    space = Space("killed", {ref: {}}, plan_timeout_s=60, planner=planner)
    planner.member_sizes(space.expand(), space.plan_timeout_s)
    said = planner.fault(planner.spec(ref))
    assert "was killed by SIGKILL from outside" in said and "or another process's kill" in said, said
    assert "--plan-timeout" not in said and "resident" in said, said
    output_of(said)


def test_a_child_the_kernel_kills_for_memory_is_said_to_have_run_out_of_it_with_its_sizes(tmp_path):
    # a memory cgroup of 256 MiB under this process's own (cgroup v1's memory controller, writable by root here),
    # a child in it that fills it: the kernel's own OOM kill, counted where `Watch` reads
    from crossover.sweeps import killed
    from crossover.sweeps.plan import wait

    mine = next((f for f in killed._memory_cgroup() if "memory" in f.parts), None)
    group = mine / f"crossover-test-{os.getpid()}" if mine else None
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(256 * 2**20))
    except (OSError, AttributeError):
        pytest.skip("no memory cgroup of its own can be made here (cgroup v1, as root)")
    try:
        watch = killed.Watch()
        child = subprocess.Popen([sys.executable, "-c", "import os; a = []\nwhile True: a.append(os.urandom(2**20))"],
                                 preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
        wait(child, 120, lambda: True, lambda: False, lambda: watch.look(child.pid))  # its clock from the start
        said, memory = watch.why(child.returncode)
    finally:
        group.rmdir()
    assert child.returncode == -signal.SIGKILL and memory, said
    assert said.startswith("ran out of memory: the kernel's OOM killer ended it") and "MiB resident" in said, said

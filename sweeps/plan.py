"""A sweep's planning of a user's workload, in a process of its own: the driver never runs the user's code to plan.

    wl = plan.register("job.py:workload", timeout_s=120)   # imported in a child first, then here
    wl = plan.planned(workload_object, timeout_s=120)       # a Workload given in Python: its shapes from a child
    sizes = plan.member_sizes(trials, timeout_s=120)        # {trial hash: bytes, or None where not estimated}
    plan.fault(wl)                                          # why its planning failed (one line), or None

Planning a sweep runs a user's code three ways: importing the module, building the model at its defaults on
the meta device (its fingerprint's parameter shapes: trainables/workload.py), and making a batch of its data
and running a forward pass on the meta device (its memory estimate: trainables/fused.py member_bytes). Each
runs here in `python -m sweeps.plan`, under a time limit (--plan-timeout), on copies of the user's modules (a
module that writes to its own file writes the copy), its output in a log file (at most LOG_MAX_BYTES; never
on the terminal) that a failure names, and its whole process group killed when it ends (a module that forks
leaves nothing behind). The driver imports a module only once a child has, and never calls its factories to
plan: a workload that calls os._exit, hangs, shuts Ray down or raises KeyboardInterrupt while it is planned
touches neither the driver's process nor its Ray.

Where the child fails:
- importing the module (or the reference is bad): PlanError, one line; the sweep is refused before anything
  runs (exit status 2);
- building the model, or its memory estimate (the process exited, was killed, ran past the limit, or the code
  raised what is no Exception, such as KeyboardInterrupt): the workload is faulted (`fault`). Its trials are
  error rows the driver writes without running them (sweeps/runner.py), the sweep's other workloads are
  measured, and the sweep ends with exit status 2 (runner.exit_status). An Exception there is no fault: a
  model that needs its data to be built is not estimated, and its trials run;
- making its data, a misuse of the Workload that only its code shows (make_data returns no Data: Workload.data):
  faulted likewise, in the Workload's own one line.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from sweeps.cli import PLAN_TIMEOUT_S, child_env
from trainables import fused
from trainables import workload as workloads
from trainables.config import TrialConfig
from trainables.trial import Trial
from trainables.workload import Workload, WorkloadError

LOG_MAX_BYTES = 2**20  # of the planning process's output kept in its log; the rest is counted, not kept
COPY_EXCLUDES = ("__pycache__", "*.pyc", ".git", "*.pt", "*.pth", "*.ckpt", "*.parquet")  # a package's copy: code
NOT_PLANNED = "not built: its planning process failed"  # a faulted workload's shapes, in its fingerprint

_planned: dict[tuple, str] = {}  # (reference, its source's sha256 or None) -> its model's shapes, as a child found them
_faults: dict[str, str] = {}  # a workload's ref ('module:attr') -> why its planning failed
_sizes: dict[str, int | None] = {}  # trial hash -> member_bytes, as the child found it (None: not estimated)


class PlanError(WorkloadError):
    """A workload that cannot be planned at all (its module does not import): one line, the sweep refused."""


def register(text: str, timeout_s: float = PLAN_TIMEOUT_S) -> Workload:
    """The Workload `text` names ('path/file.py:attr', 'package.module:attr'), imported in a child process first,
    then here (trainables.workload.register), its fingerprint's shapes those the child found. Raises PlanError
    (or WorkloadError for a reference that names no file) where the module does not import there."""
    module, attr, path = workloads.locate(text)
    key = (text.strip(), workloads.digest(path) if path else None)
    if key not in _planned:  # planned again where the file changed since
        shapes, _ = _plan([(text.strip(), f"{{copy}}/{path.name}:{attr}" if path else f"{module}:{attr}")], timeout_s)
        _planned[key] = shapes[text.strip()]
    wl = workloads.register(text)
    workloads.planned(wl, _planned[key])
    return wl


def user_grids(args, grid: str) -> dict:
    """The --workload references of a sweep script's flags, each with its Workload's grid of that name
    (Workload.grid), each planned first within --plan-timeout (`register`)."""
    return {ref: register(ref, args.plan_timeout).grid(grid) for ref in args.workload}


def planned(wl: Workload, timeout_s: float = PLAN_TIMEOUT_S) -> Workload:
    """A Workload given as an object and registered (trainables.workload.from_object), its fingerprint's shapes
    found by a child that imports its module by name (a copy of it, as a worker does)."""
    key = (wl.ref, workloads.source(wl.ref))
    if key not in _planned:
        shapes, _ = _plan([(wl.ref, wl.ref)], timeout_s)
        _planned[key] = shapes[wl.ref]
    workloads.planned(wl, _planned[key])
    return wl


def fault(wl: Workload) -> str | None:
    """Why planning `wl` failed, in one line (module docstring), or None: a built-in's, or a user's planned."""
    return _faults.get(wl.ref) if wl.ref else None


def faulted() -> bool:
    """Whether planning any workload failed in this process (runner.exit_status: the sweep's exit status 2)."""
    return bool(_faults)


def member_sizes(trials: list[Trial], timeout_s: float = PLAN_TIMEOUT_S) -> dict[str, int | None]:
    """trainables.fused.member_bytes of each user's trial of `trials` not estimated yet, in one child process
    (a configuration per size: the seed and learning rate change no shape), by trial hash; None where it was not
    estimated (the model failed on the meta device, or its workload is faulted). The built-ins' are not here:
    their code is crossover's, estimated where they are needed."""
    ask: dict[str, Trial] = {}  # one trial per size
    for t in trials:
        if t.wl.ref and t.hash not in _sizes and not fault(t.wl):
            ask.setdefault(_size_key(t), t)
    if ask:
        _, got = _plan([], timeout_s, [t.cfg.to_dict() for t in ask.values()])
        by_key = {k: got.get(i) for i, k in enumerate(ask)}
        for t in trials:
            if t.wl.ref and t.hash not in _sizes and not fault(t.wl):
                _sizes[t.hash] = by_key.get(_size_key(t))
    return {t.hash: _sizes.get(t.hash) for t in trials if t.wl.ref}


def member_bytes(trial: Trial, timeout_s: float = PLAN_TIMEOUT_S) -> int | None:
    """trainables.fused.member_bytes of `trial`: a user's from a child process (`member_sizes`, asked now where it
    was not before), None where not estimated; a built-in's here (it may raise: a shape past int64)."""
    if trial.wl.ref is None:
        return fused.member_bytes(trial)
    return member_sizes([trial], timeout_s)[trial.hash]


def _size_key(trial: Trial) -> str:
    return TrialConfig.from_dict({**trial.cfg.to_dict(), "seed": 0, "lr": None}).config_hash()


def _plan(refs: list[tuple[str, str]], timeout_s: float, configs: list[dict] = ()) -> tuple[dict, dict]:
    """The child's work: each (reference, what the child registers) of `refs` imported and its model's shapes
    found, and each of `configs` estimated: ({reference: shapes}, {index in configs: bytes or None}). Raises
    PlanError where a module does not import. Where the child dies in a workload's code, that workload is
    faulted (its shapes NOT_PLANNED) and the rest is asked of a new child."""
    shapes: dict[str, str] = {}
    sizes: dict[int, int | None] = {}
    refs, configs = list(refs), list(enumerate(configs))
    while refs or configs:
        events, how, log = _call(refs, configs, timeout_s)
        doing = None
        for event in events:
            if "error" in event:  # the module does not import, or the reference names nothing
                raise PlanError(event["error"])
            if "doing" in event:
                doing = event
            elif "shapes" in event:
                shapes[event["text"]], doing = event["shapes"], None
            elif "bytes" in event:
                sizes[event["config"]], doing = event["bytes"], None
            elif "refused" in event:
                sizes[event["config"]], doing = None, None
                _fault(event["ref"], f"{event['ref']}: {event['refused']}; its trials are error rows and do not run")
        refs = [r for r in refs if r[0] not in shapes]
        configs = [c for c in configs if c[0] not in sizes]
        if how is None:
            Path(log).unlink()
            break
        if doing is None:  # crossover's own start-up failed, before any of the user's code
            raise PlanError(f"the planning process (python -m sweeps.plan) {how} before it ran your code; its "
                            f"output: {log}")
        said = f"{doing['doing']}, in a process of its own (planning), {how}"
        if "imports" in doing:
            raise PlanError(f"--workload {doing['text']}: {said}; nothing ran. Its output: {log}. Fix the module "
                            f"(python {doing['imports']} runs it alone), or give --plan-timeout more seconds")
        ref = doing["ref"]
        _fault(ref, f"{ref}: {said}; its trials are error rows and do not run. Its output: {log}. Fix the workload, "
                    "or give --plan-timeout more seconds")
        shapes.update({text: NOT_PLANNED for text, _ in refs if text == doing.get("text")})
        refs = [r for r in refs if r[0] not in shapes]
        configs = [c for c in configs if c[1]["module"] != ref]
    return shapes, sizes


def _fault(ref: str, why: str) -> None:
    """The workload `ref` faulted, `why` said once on stderr (the first reason found is kept: `fault`)."""
    if ref not in _faults:
        _faults[ref] = why
        print(f"error: {why}", file=sys.stderr)


def _call(refs: list[tuple[str, str]], configs: list[tuple[int, dict]], timeout_s: float) -> tuple[list, str | None, str]:
    """One run of the child: its events, how it failed (None: it did not), and its log file's path."""
    with tempfile.TemporaryDirectory(prefix="crossover-plan-") as tmp:
        copies = Path(tmp) / "copies"
        copies.mkdir()
        for path in map(Path, workloads.shipped()):  # the modules registered so far, by name, as a worker has them
            if path.is_dir():
                shutil.copytree(path, copies / path.name, ignore=shutil.ignore_patterns(*COPY_EXCLUDES))
            elif path.exists():
                shutil.copy2(path, copies / path.name)
            elif workloads.imported_text(path) is not None:  # moved since it was imported: as imported, as Ray has it
                (copies / path.name).write_bytes(workloads.imported_text(path))
        for text, load in refs:
            _, _, path = workloads.locate(text)
            if path:  # a file not registered yet
                shutil.copy2(path, copies / path.name)
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.jsonl"
        request.write_text(json.dumps({
            "refs": [{"text": text, "load": load.replace("{copy}", str(copies))} for text, load in refs],
            "configs": [{"index": i, "config": c} for i, c in configs]}))
        log = tempfile.NamedTemporaryFile(prefix="crossover-plan-", suffix=".log", delete=False)
        # -P: the user's modules import from the copies, never from the current folder (`-m` puts it first)
        process = subprocess.Popen([sys.executable, "-P", "-m", "sweeps.plan", str(request), str(answer)],
                                   env=child_env(str(copies)), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        drain = threading.Thread(target=_keep, args=(process.stdout, log), daemon=True)
        drain.start()
        try:
            process.wait(timeout=timeout_s)
            how = None if process.returncode == 0 else (
                f"was killed by signal {signal.Signals(-process.returncode).name}" if process.returncode < 0
                else f"exited with status {process.returncode}")
        except subprocess.TimeoutExpired:
            how = f"ran past its limit of {timeout_s:g} s (--plan-timeout) and was stopped"
        finally:  # its group: the child, and whatever it forked and left behind (Ctrl-C here too)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
            drain.join(timeout=5)
        events = [json.loads(line) for line in answer.read_text().splitlines()] if answer.exists() else []
        # what the child said it caught ("raised KeyboardInterrupt") says more than its exit status
        how = next((e["fault"] for e in events if "fault" in e), how)
        return events, how, log.name


def _keep(stream, log) -> None:
    """The child's output into `log`, its first LOG_MAX_BYTES; the rest read (the child never blocks on a full
    pipe) and counted at the end."""
    kept = dropped = 0
    with log:
        for chunk in iter(lambda: stream.read(65536), b""):
            room = max(LOG_MAX_BYTES - kept, 0)
            log.write(chunk[:room])
            kept, dropped = kept + min(len(chunk), room), dropped + max(len(chunk) - room, 0)
        if dropped:
            log.write(f"\n[crossover: {dropped:,} more bytes of output not kept]\n".encode())


# -- the child -----------------------------------------------------------------------------------------------


def main(request_path: str, answer_path: str) -> int:
    """The child: every reference of the request imported and its shapes found, every config's member_bytes,
    each announced on the answer file (a line of JSON, flushed) before it runs and answered after, so that the
    driver knows what a death interrupted. What is no Exception (KeyboardInterrupt) raised by the user's code is
    a fault, said as such."""
    from trainables.trial import resolve

    request = json.loads(Path(request_path).read_text())
    with open(answer_path, "a") as answer:
        def say(**event):
            answer.write(json.dumps(event) + "\n")
            answer.flush()

        try:
            for ref in request["refs"]:
                text, load = ref["text"], ref["load"]
                module, _, path = workloads.locate(text)
                say(doing=f"importing {path or module}", text=text, imports=str(path or module))
                try:
                    wl = workloads.register(load)
                except WorkloadError as exc:  # said as the user named it, not as the copy's path
                    copy = workloads.locate(load)[2]
                    said = str(exc).replace(load, text)
                    say(error=said.replace(str(copy), str(path)) if copy and path else said)
                    return 0
                say(doing=f"{wl.name}'s make_model at its defaults on the meta device (its fingerprint)", text=text,
                    ref=wl.ref)
                say(text=text, shapes=workloads.shapes(wl))
            for item in request["configs"]:
                # not checked against the driver's fingerprint: an estimate, of whatever the copy holds
                cfg = TrialConfig.from_dict({**item["config"], "fingerprint": None})
                say(doing=f"{cfg.workload}'s make_data, make_model and forward pass on the meta device at "
                          f"batch_size={cfg.batch_size} (its memory estimate)", config=item["index"], ref=cfg.module)
                try:
                    size = fused.member_bytes(resolve(cfg))
                except WorkloadError as exc:  # a misuse its code showed (make_data's result no Data): refused
                    say(config=item["index"], refused=str(exc), ref=cfg.module)
                    continue
                except (Exception, SystemExit):  # a model built only from its data, say: not estimated, it runs
                    size = None
                say(config=item["index"], bytes=size)
        except BaseException as exc:  # KeyboardInterrupt, GeneratorExit: the user's code, never a signal of ours
            say(fault=f"raised {type(exc).__name__}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

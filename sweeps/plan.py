"""A sweep's planning of a user's workload, in a process of its own: the driver never runs the user's code.

    planner = Planner()                                     # a sweep script's main(), once; its Spaces get it
    connect(address, planner.registry.shipping)             # Ray started with what it ships (sweeps/cluster.py)
    wl = planner.spec("job.py:workload", timeout_s=120)     # a WorkloadSpec: the Workload as plain data, from a child
    wl = planner.spec(workload_object, timeout_s=120)       # a Workload given in Python: its spec likewise
    planner.refusals(trials, timeout_s=120)                 # {trial hash: (field, why)} where its own check refuses it
    sizes = planner.member_sizes(trials, timeout_s=120)     # {trial hash: bytes, or None where not estimated}
    planner.fault(wl)                                       # why its planning failed (one line), or None

Planning a sweep runs a user's code four ways: importing the module, building the model at its defaults on
the meta device (its fingerprint's parameter shapes: crossover/workload.py), its own check of each config
(Workload.check), and making a batch of its data and running a forward pass on the meta device (its memory
estimate: trainables/fused.py member_bytes). Each runs here in `python -m crossover.sweeps.plan`, under a time limit
(--plan-timeout) that counts the user's code alone: from when the child says it is ready to run it, once crossover
and torch have imported and torch has run its first ops (`_warm`), to when it has answered, before its interpreter
exits (each seconds on a busy machine, which are no fault of the workload's; START_S bounds them), on copies of the
user's modules (a module that writes to its own file writes the copy), its output in a log file (its first MiB:
trainables/output.py keep; never on the terminal) that a failure names (none is left where it printed nothing, or
where the failure's one line says it all: a module that does not import), and its whole process group killed when it
ends (a module that forks leaves nothing behind). The child answers in plain data (JSON): a WorkloadSpec
(crossover/workload.py), a check's refusal, a size. The driver never imports a user's module (it reads a file's
bytes, to ship it to Ray's workers: crossover.trainables.shipping Shipping.declare) and works
from the spec alone: a workload that calls os._exit, hangs, shuts Ray down or raises KeyboardInterrupt while
it is planned touches neither the driver's process nor its Ray. The workers import the module itself.

Where the child fails:
- importing the module (or the reference is bad): PlanError, one line; the sweep is refused before anything
  runs (exit status 2);
- building the model, its check, or its memory estimate (the process exited, was killed, ran past the limit, or
  the code raised what is no Exception, such as KeyboardInterrupt): the workload is faulted (`fault`). Its trials are
  error rows the driver writes without running them (sweeps/runner.py), the sweep's other workloads are
  measured, and the sweep ends with exit status 2 (sweeps/status.py exit_status). An Exception there is no fault: a
  model that needs its data to be built is not estimated, and its trials run;
- making its data, a misuse of the Workload that only its code shows (make_data returns no Data: Workload.data):
  faulted likewise, in the Workload's own one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from crossover.config import ConfigError, TrialConfig
from crossover.config import WorkloadError
from crossover.workload import Workload, WorkloadSpec

from ..trainables import fingerprint as fingerprints
from ..trainables import fused
from ..trainables.job import locate
from ..trainables.output import keep
from ..trainables.registry import package_path, reference
from ..trainables.registry import Registry, fingerprint
from ..trainables.shipping import Shipping, digest, files
from ..trainables.trial import Trial
from . import killed
from .cli import PLAN_TIMEOUT_S, child_env

NOT_PLANNED = "not built: its planning process failed"  # a faulted workload's shapes, in its fingerprint
LOOK_S = 0.2  # s between two looks at the planning process's memory (sweeps/killed.py: was a SIGKILL for memory?)
# s a child (planning, the probe) may take to import crossover and torch before it is ready for the user's code (5-30 s
# on a loaded 2-core machine), and to exit once it has answered: its time limit counts neither (`wait`); past this,
# its own start-up or exit hangs
START_S = 600


class PlanError(WorkloadError):
    """A workload that cannot be planned at all (its module does not import): one line, the sweep refused."""


class Planner:
    """What a sweep's driver has planned of its users' workloads, each once: their specs, which faulted and why,
    their trials' sizes and their checks' refusals; the modules it ships are its `registry`'s shipping (its own,
    unless given). A sweep script's main() makes one and hands it down: its shipping to sweeps/cluster.py connect,
    which starts Ray with it; the planner to each Space it builds (Space.planner), whose trials sweeps/runner.py asks
    `fault` of and checks against what Ray was started with (check_shipped), and to sweeps/status.py exit_status,
    which asks `faulted` for the exit status. A test makes its own (tests/conftest.py `planner`)."""

    def __init__(self, registry: Registry | None = None):
        self.registry = Registry() if registry is None else registry  # the modules declared (shipped to the workers) and their sources
        self.planned: dict[tuple, tuple] = {}  # (reference, its source's sha256 or None) -> (spec, package folder)
        self.faults: dict[str, str] = {}  # a workload's ref ('module:attr') -> why its planning failed
        self.sizes: dict[str, int | None] = {}  # trial hash -> member_bytes, as the child found it (None: not estimated)
        self.checks: dict[str, tuple[str, str] | None] = {}  # trial hash -> (field, why) where its check refused it, else None

    def spec(self, given: str | Workload, timeout_s: float = PLAN_TIMEOUT_S) -> WorkloadSpec:
        """The WorkloadSpec of the workload `given` names ('path/file.py:attr', 'package.module:attr', or a
        Workload object: crossover.trainables.registry.reference), from a child process that imports it; its module
        shipped to Ray's workers from here on (its registry's `declare`, `ship`), never imported here. Planned once a
        version of its file. Raises PlanError (or WorkloadError for a reference that names no file) where the module
        does not import there."""
        text = (reference(given) if isinstance(given, Workload) else given).strip()
        module, attr, path = self.registry.shipping.declare(text)
        key = (text, digest(path) if path else self.registry.shipping.source(text))
        if key not in self.planned:  # planned again where the file changed since
            load = f"{{{path.parent}}}/{path.name}:{attr}" if path else f"{module}:{attr}"  # {folder}: its copy
            self.planned[key] = self._plan([(text, load)], timeout_s)[0][text]
        found, package = self.planned[key]
        self.registry.shipping.ship(module.split(".")[0], package)
        return found

    def user_grids(self, args, grid: str) -> dict:
        """The --workload references of a sweep script's flags, each with its Workload's grid of that name
        (Workload.grid), each planned first within --plan-timeout (`spec`)."""
        return {ref: self.spec(ref, args.plan_timeout).grid(grid) for ref in args.workload}

    def refusals(self, trials: list[Trial], timeout_s: float = PLAN_TIMEOUT_S) -> dict[str, tuple[str, str]]:
        """{trial hash: (field, why)} for each trial of `trials` whose workload's own check (Workload.check)
        refuses its config, as a ConfigError would say it; each config not checked yet is checked in one child
        process (the whole of crossover.trainables.trial.resolve, with the Workload itself). A workload that has no
        check, or whose check faulted (`fault`: its trials become error rows), refuses nothing."""
        ask = [t for t in trials if isinstance(t.wl, WorkloadSpec) and t.wl.has_check and t.hash not in self.checks
               and not self.fault(t.wl)]
        ask = list({t.hash: t for t in ask}.values())
        if ask:
            _, _, got = self._plan([], timeout_s, checks=[t.cfg.to_dict() for t in ask])
            self.checks.update({t.hash: got.get(i) for i, t in enumerate(ask)})
        return {t.hash: why for t in trials if (why := self.checks.get(t.hash))}

    def fault(self, wl: Workload | WorkloadSpec) -> str | None:
        """Why planning `wl` failed, in one line (module docstring), or None: a built-in's, or a user's planned."""
        return self.faults.get(wl.ref) if wl.ref else None

    def faulted(self) -> bool:
        """Whether planning any workload here failed (sweeps/status.py exit_status: the sweep's exit status 2)."""
        return bool(self.faults)

    def member_sizes(self, trials: list[Trial], timeout_s: float = PLAN_TIMEOUT_S) -> dict[str, int | None]:
        """crossover.trainables.fused.member_bytes of each user's trial of `trials` not estimated yet, in one
        child process (a configuration per size: the seed and learning rate change no shape), by trial hash; None
        where it was not estimated (the model failed on the meta device, or its workload is faulted). The built-ins'
        are not here: their code is crossover's, estimated where they are needed."""
        ask: dict[str, Trial] = {}  # one trial per size
        for t in trials:
            if t.wl.ref and t.hash not in self.sizes and not self.fault(t.wl):
                ask.setdefault(_size_key(t), t)
        if ask:
            _, got, _ = self._plan([], timeout_s, sizes=[t.cfg.to_dict() for t in ask.values()])
            by_key = {k: got.get(i) for i, k in enumerate(ask)}
            for t in trials:
                if t.wl.ref and t.hash not in self.sizes and not self.fault(t.wl):
                    self.sizes[t.hash] = by_key.get(_size_key(t))
        return {t.hash: self.sizes.get(t.hash) for t in trials if t.wl.ref}

    def member_bytes(self, trial: Trial, timeout_s: float = PLAN_TIMEOUT_S) -> int | None:
        """crossover.trainables.fused.member_bytes of `trial`: a user's from a child process (`member_sizes`,
        asked now where it was not before), None where not estimated; a built-in's here (it may raise: a shape past
        int64)."""
        if trial.wl.ref is None:
            return fused.member_bytes(trial)
        return self.member_sizes([trial], timeout_s)[trial.hash]

    def _plan(self, refs: list[tuple[str, str]], timeout_s: float, sizes: Sequence[dict] = (),
              checks: Sequence[dict] = ()) -> tuple[dict, dict, dict]:
        """The child's work: each (reference, what the child registers) of `refs` imported and its spec found,
        each config of `sizes` estimated, and each of `checks` checked: ({reference: (WorkloadSpec, its package's
        folder to ship or None)}, {index in sizes: bytes or None}, {index in checks: (field, why) or None}). Raises
        PlanError where a module does not import. Where the child dies in a workload's code, that workload is
        faulted (its fingerprint of NOT_PLANNED) and the rest is asked of a new child."""
        found: dict[str, tuple[WorkloadSpec, str | None]] = {}
        partial: dict[str, dict] = {}  # reference -> the child's spec event, before its fingerprint
        sized: dict[int, int | None] = {}
        checked: dict[int, tuple | None] = {}
        refs, to_size, to_check = list(refs), list(enumerate(sizes)), list(enumerate(checks))  # what is left to ask
        while refs or to_size or to_check:
            events, how, log, fix = _call(refs, to_size, to_check, timeout_s, self.registry.shipping)
            doing = None
            for event in events:
                if "error" in event:  # the module does not import, or the reference names nothing: the line says it
                    if log:
                        Path(log).unlink()
                    raise PlanError(event["error"])
                if "doing" in event:
                    doing = event
                elif "spec" in event:
                    partial[event["text"]] = event
                elif "fingerprint" in event:
                    found[event["text"]], doing = _found(partial[event["text"]], event["fingerprint"]), None
                elif "bytes" in event:
                    sized[event["config"]], doing = event["bytes"], None
                elif "refused" in event:
                    sized[event["config"]], doing = None, None
                    self._fault(event["ref"],
                                f"{event['ref']}: {event['refused']}; its trials are error rows and do not run")
                elif "check" in event:
                    checked[event["check"]], doing = event["said"] and (event["field"], event["said"]), None
            refs = [r for r in refs if r[0] not in found]
            to_size = [c for c in to_size if c[0] not in sized]
            to_check = [c for c in to_check if c[0] not in checked]
            if how is None:
                if log:
                    Path(log).unlink()
                break
            if doing is None:  # crossover's own start-up failed, before any of the user's code
                raise PlanError(f"the planning process (python -m crossover.sweeps.plan) {how} before it ran your "
                                f"code. {_output(log)}")
            said = f"{doing['doing']}, in a process of its own (planning), {how}"
            if "imports" in doing:
                fix = fix.replace("Fix the workload", f"Fix the module (python {doing['imports']} runs it alone)")
                raise PlanError(f"--workload {doing['text']}: {said}; nothing ran. {_output(log)}. {fix}")
            ref = doing["ref"]
            self._fault(ref, f"{ref}: {said}; its trials are error rows and do not run. {_output(log)}. {fix}")
            found.update({text: _found(partial[text], None) for text, _ in refs if text == doing.get("text")})
            refs = [r for r in refs if r[0] not in found]
            to_size = [c for c in to_size if c[1]["module"] != ref]
            to_check = [c for c in to_check if c[1]["module"] != ref]
        return found, sized, checked

    def _fault(self, ref: str, why: str) -> None:
        """The workload `ref` faulted, `why` said once on stderr (the first reason found is kept: `fault`)."""
        if ref not in self.faults:
            self.faults[ref] = why
            print(f"error: {why}", file=sys.stderr)


def _size_key(trial: Trial) -> str:
    return TrialConfig.from_dict({**trial.cfg.to_dict(), "seed": 0, "lr": None}).config_hash()


def _output(log: str | None) -> str:
    """What a failure says of the child's output: its log file, or that there was none."""
    return f"Its output: {log}" if log else "It printed nothing"


def _found(event: dict, fingerprint: str | None) -> tuple[WorkloadSpec, str | None]:
    """The spec the child's `event` gave, its fingerprint `fingerprint` (None: its model was never built, the
    workload faulted: one of its source and NOT_PLANNED), and its package's folder to ship."""
    if fingerprint is None:
        fingerprint = fingerprints.of(event["source"].encode(), NOT_PLANNED)
    return WorkloadSpec.from_dict({**event["spec"], "fingerprint": fingerprint}), event["ship"]


def _call(refs: list[tuple[str, str]], sizes: list[tuple[int, dict]], checks: list[tuple[int, dict]],
          timeout_s: float, shipping: Shipping) -> tuple[list, str | None, str | None, str]:
    """One run of the child, on copies of the modules `shipping` ships: its events, how it failed (None: it did
    not), its log file's path (None: it printed nothing, and no empty log is left behind), and the fix its
    failure's line names (more --plan-timeout only where that limit stopped it; less memory where the kernel
    killed it for memory: sweeps/killed.py)."""
    with tempfile.TemporaryDirectory(prefix="crossover-plan-") as tmp:
        # the modules declared so far (those of `refs` too: Planner.spec), as a worker has them: each package in
        # copies/, each job's folder (what Ray ships of it) a folder of its own, all on the child's path
        copies = Path(tmp) / "copies"
        folders: dict[Path, Path] = {}  # a job's folder -> its copy
        copies.mkdir()
        for path in shipping.files.values():
            if path.suffix != ".py":
                _copy(path, copies / path.name)
                continue
            if path.parent not in folders:
                folders[path.parent] = Path(tmp) / "jobs" / str(len(folders))
                _copy(path.parent, folders[path.parent])
            copy = folders[path.parent] / path.name
            declared = shipping.imported_text(path)
            if not copy.exists() and declared is not None:  # moved since declared: as then, as Ray has it
                copy.write_bytes(declared)
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.jsonl"
        request.write_text(json.dumps({
            "refs": [{"text": text, "load": _copied(load, folders)} for text, load in refs],
            "sizes": [{"index": i, "config": c} for i, c in sizes],
            "checks": [{"index": i, "config": c} for i, c in checks]}))
        log = tempfile.NamedTemporaryFile(prefix="crossover-plan-", suffix=".log", delete=False)
        watch = killed.Watch()  # the kernel's OOM-kill counts before it starts, its memory while it runs
        # -P: the user's modules import from the copies, never from the current folder (`-m` puts it first)
        process = subprocess.Popen([sys.executable, "-P", "-m", "crossover.sweeps.plan", str(request), str(answer)],
                                   env=child_env(str(copies), *map(str, folders.values())), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        drain = threading.Thread(target=keep, args=(process.stdout, log), daemon=True)
        drain.start()
        stopped = True  # until the wait ends: a stop signal or Ctrl-C raised here leaves no log behind
        fix = "Fix the workload"
        try:
            # the limit counts the user's code alone: from the child's `ready` file to its `done` (main)
            wait(process, timeout_s, (Path(tmp) / "ready").exists, (Path(tmp) / "done").exists,
                 lambda: watch.look(process.pid))
            how = None if process.returncode == 0 else f"exited with status {process.returncode}"
            if process.returncode < 0:
                how, memory = watch.why(process.returncode)
                if memory or process.returncode == -signal.SIGKILL:  # a SIGKILL not told apart: memory's fix, if so
                    fix = killed.MEMORY_FIX if memory else f"If it was memory: {killed.MEMORY_FIX}"
            stopped = False
        except Stalled:  # before or after the user's code: the child's own start-up or exit, said as such
            how = (f"took more than {START_S} s to start (importing crossover and torch) or to exit, and was "
                   "stopped")
            stopped = False
        except subprocess.TimeoutExpired:
            how = (f"ran past its limit of {timeout_s:g} s (--plan-timeout, counted from when it began to run your "
                   "code) and was stopped")
            fix = "Fix the workload, or give --plan-timeout more seconds"
            stopped = False
        finally:  # its group: the child, and whatever it forked and left behind (Ctrl-C and a stop signal here too)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
            drain.join(timeout=5)
            kept = os.path.getsize(log.name) > 0 and not stopped  # where the child said something, and is said of
            if not kept:
                os.unlink(log.name)
        events = [json.loads(line) for line in answer.read_text().splitlines()] if answer.exists() else []
        # what the child said it caught ("raised KeyboardInterrupt") says more than its exit status
        how = next((e["fault"] for e in events if "fault" in e), how)
        return events, how, log.name if kept else None, fix


class Stalled(subprocess.TimeoutExpired):
    """A child whose own start-up (before the user's code) or exit (after it) took START_S (`wait`)."""


def wait(process: subprocess.Popen, timeout_s: float, ready, done, look=lambda: None) -> None:
    """Waits for `process`, a child that runs a user's code, to end, calling `look()` every LOOK_S. The limit
    `timeout_s` counts the user's code alone: from when `ready()` is true (the child has imported crossover and torch
    and is about to run it) until `done()` is (it has answered; its interpreter's exit is its own). Raises
    subprocess.TimeoutExpired where the user's code runs past `timeout_s`, Stalled where the child's start-up or
    exit takes START_S. The probe's child (sweeps/probe.py) is waited for so too."""
    deadline, phase = time.monotonic() + START_S, "start"  # then "user" (the limit's), then "exit"
    while True:
        look()
        if phase == "start" and ready():
            deadline, phase = time.monotonic() + timeout_s, "user"
        if phase == "user" and done():
            deadline, phase = time.monotonic() + START_S, "exit"
        try:
            process.wait(timeout=max(min(LOOK_S, deadline - time.monotonic()), 0))
            return
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise (subprocess.TimeoutExpired if phase == "user" else Stalled)(process.args, timeout_s) from None


def _copy(folder: Path, to: Path) -> None:
    """What Ray ships of `folder` (crossover.trainables.shipping.files) copied to `to`."""
    for path in files(folder):
        (to / path.relative_to(folder)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, to / path.relative_to(folder))
    to.mkdir(parents=True, exist_ok=True)


def _copied(load: str, folders: dict[Path, Path]) -> str:
    """A file reference's `load` ('{folder}/job.py:attr', Planner.spec) with its folder's copy in place of {folder}."""
    for folder, copy in folders.items():
        load = load.replace(f"{{{folder}}}", str(copy))
    return load


# -- the child -----------------------------------------------------------------------------------------------


def main(request_path: str, answer_path: str) -> int:
    """The child: every reference of the request imported and its spec found (its fingerprint's model built),
    every size's config estimated (member_bytes), every check's config resolved with the Workload itself (its
    check), each announced on the answer file (a line of JSON, flushed) before it runs and answered after, so
    that the driver knows what a death interrupted. What is no Exception (KeyboardInterrupt) raised by the
    user's code is a fault, said as such. The files `ready` and `done` beside the answer file bound the user's code
    in time: the driver's --plan-timeout counts from one to the other (`wait`)."""
    request = json.loads(Path(request_path).read_text())
    registry = Registry()  # this child's: what it imports, over the copies of the driver's modules on its path
    with open(answer_path, "a") as answer:
        def say(**event):
            answer.write(json.dumps(event, default=_plain) + "\n")
            answer.flush()

        _warm()
        Path(answer_path).with_name("ready").touch()  # crossover and torch imported and warm: the clock starts
        try:
            for ref in request["refs"]:
                if not _spec(ref["text"], ref["load"], say, registry):
                    return 0
            for item in request["sizes"]:
                _size(item["index"], item["config"], say)
            for item in request["checks"]:
                _check(item["index"], item["config"], say)
        except BaseException as exc:  # KeyboardInterrupt, GeneratorExit: the user's code, never a signal of ours
            say(fault=f"raised {type(exc).__name__}")
            return 1
        finally:  # answered: what is left is the interpreter's exit (seconds, with torch loaded, on a busy machine)
            Path(answer_path).with_name("done").touch()
    return 0


def _warm() -> None:
    """torch's own first use of the meta device, before the child says it is ready: its first ops there import
    sympy, dynamo and torch.distributed (4-5 s on a loaded 2-core machine, 0.03 s for a small model's estimate
    after), time that no workload's limit should count."""
    with torch.device("meta"):
        torch.nn.Linear(2, 2)(torch.empty(1, 2))


def _spec(text: str, load: str, say, registry: Registry) -> bool:
    """The child's import of `load` (the copy of what `text` names), its spec said, then its fingerprint (its
    model built on the meta device); False where it does not import (said as an error)."""
    module, _, path = locate(text)
    say(doing=f"importing {path or module}", text=text, imports=str(path or module))
    try:
        wl = registry.register(load)
    except WorkloadError as exc:  # said as the user named it, not as the copy's path (its folder's, for a module beside it)
        copy = locate(load)[2]
        said = str(exc).replace(load, text)
        say(error=said.replace(str(copy.parent), str(path.parent)) if copy and path else said)
        return False
    assert wl.ref is not None  # register gives the Workload it returns its ref
    name = wl.ref.split(":")[0]
    plain = {k: v for k, v in wl.spec("").to_dict().items() if k != "fingerprint"}
    try:
        json.dumps(plain, default=_plain)
    except (TypeError, ValueError) as exc:
        say(error=f"--workload {text}: Workload {wl.name!r}: its defaults, params and grids must hold plain values "
                  f"(numbers, strings, lists of them), as a sweep's rows and Tune take them: {exc}")
        return False
    file = sys.modules[name].__file__
    if file is None:
        raise ValueError(f"--workload {text}: its module {name} has no file, whose source its fingerprint reads; define "
                         "it in a .py file or a package's module")
    source = hashlib.sha256(Path(file).read_bytes()).hexdigest()
    say(text=text, spec=plain, source=source, ship=None if path else package_path(name))
    say(doing=f"{wl.name}'s make_model at its defaults on the meta device (its fingerprint)", text=text, ref=wl.ref)
    say(text=text, fingerprint=fingerprint(wl))
    return True


def _size(index: int, config: dict, say) -> None:
    """The child's member_bytes of `config`: not checked against the driver's fingerprint (an estimate, of
    whatever the copy holds); a misuse its code showed (make_data's result no Data) refused, faulting it."""
    from ..trainables.trial import resolve

    cfg = TrialConfig.from_dict({**config, "fingerprint": None})
    say(doing=f"{cfg.workload}'s make_data, make_model and forward pass on the meta device at "
              f"batch_size={cfg.batch_size} (its memory estimate)", config=index, ref=cfg.module)
    try:
        size = fused.member_bytes(resolve(cfg))
    except WorkloadError as exc:
        say(config=index, refused=str(exc), ref=cfg.module)
        return
    except (Exception, SystemExit):  # a model built only from its data, say: not estimated, it runs
        size = None
    say(config=index, bytes=size)


def _check(index: int, config: dict, say) -> None:
    """The child's resolve of `config` with the Workload itself: its own check's ConfigError, said as (field,
    why); what else the check raises, said as a refusal of the field 'check'."""
    from ..trainables.trial import resolve

    cfg = TrialConfig.from_dict({**config, "fingerprint": None})
    say(doing=f"{cfg.workload}'s check of {cfg.config_hash()} (Workload.check)", check=index, ref=cfg.module)
    try:
        resolve(cfg)
    except ConfigError as exc:
        say(check=index, field=exc.field, said=str(exc))
        return
    except (Exception, SystemExit) as exc:
        say(check=index, field="check", said=f"workload {cfg.workload!r}: its check raised {type(exc).__name__}: {exc}")
        return
    say(check=index, field=None, said=None)


def _plain(value):
    """A numpy scalar as JSON takes it (its .item()); anything else refused (json's TypeError)."""
    if hasattr(value, "item") and not hasattr(value, "__len__"):
        return value.item()
    raise TypeError(f"{value!r} ({type(value).__name__}) is no plain value")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

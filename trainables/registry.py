"""Loading and shipping a user's workload: a reference on the command line (parsed and checked in trainables/job.py)
imported once in the process that plans it and by name in every Ray worker, its module shipped to the workers.

    registry = Registry()                   # a process's: a sweep's Planner holds the sweep's (sweeps/plan.py)
    wl = registry.register("job.py:workload")   # imported here; job.py's folder in registry.shipping from now on
    wl = Registry().load("job:workload")    # a worker: from the copy of job.py's folder runtime_env put there
    key = fingerprint(wl)                   # its code's, found once a version of its module in this process

A job file imports as `python job.py` would: its own folder first on sys.path, so that the modules and packages
beside it import by name (`from mymodels import net`), here and in every worker. A sweep's driver never imports a
user's module: it declares it (trainables/shipping.py), to ship its folder to every Ray worker through
`runtime_env` (`py_modules`), and a process of its own imports it (sweeps/plan.py) and answers with a WorkloadSpec
(crossover/workload.py), all that the driver knows of it. A worker imports it from its copy of the folder
(`load`), never by the driver's path; `register` imports it in the process that calls it. What a sweep ships is
its Registry's shipping; what a process imports is the process's (sys.modules, and the fingerprints found of it).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path

from crossover.config import WorkloadError
from crossover.workload import Workload, WorkloadSpec

from . import fingerprint as fingerprints
from .job import locate  # a reference, parsed with no torch
from .shipping import Shipping, digest, source_bytes


# This process's fingerprints of the workloads it has imported: a ref (or a built-in's name) -> its fingerprint. The
# one state here that is the process's, because what it caches is: a module is imported once a process (sys.modules;
# a Ray worker imports a job's module for its first trial and keeps it for the trials it runs next), and its
# fingerprint found once a version of it (`fingerprint`); `_exec_file` drops a module's as it imports a new version.
# Not a Registry's: two registries of one process (a sweep's Planner's, a step count's) share sys.modules, so one's
# import of an edited file would leave the other's fingerprint of the old code; and a row's fingerprint
# (trainables/rows.py) is taken where no registry is at hand.
_FINGERPRINTS: dict[str, str] = {}


class Registry:
    """What a process imports of users' workloads, over what it ships of them (`shipping`, its own unless given).
    A sweep's Planner holds the sweep's (sweeps/plan.py), which hands its shipping down; a process that imports a
    workload itself makes its own (a planning child, a step count, a test). What it imports is the process's, as
    sys.modules is: a worker loads a module by name with an empty one (`load`)."""

    def __init__(self, shipping: Shipping | None = None):
        self.shipping = Shipping() if shipping is None else shipping  # the modules shipped, their sources as declared

    def register(self, text: str) -> Workload:
        """The Workload `text` names ('path/file.py:attr' or 'package.module:attr'), imported in this process; its
        module is then shipped to the Ray workers by `runtime_env` (`shipping.shipped`). Raises WorkloadError naming
        what is wrong. A sweep's driver never calls it: its planning process does (sweeps/plan.py), and the driver
        `declare`s."""
        module, attr, path = locate(text)
        if path is not None:
            # imported again where the file changed since (an edit in a notebook): its new code, its new fingerprint
            stale = (module not in sys.modules or getattr(sys.modules[module], "__file__", None) != str(path)
                     or self.shipping.sources.get(module) != digest(path))
            self.shipping.declare(text)
            if stale:
                _exec_file(module, path, text)
        else:
            _import(module, text)
            self.shipping.ship(module.split(".")[0], package_path(module))
        return _resolve_attr(module, attr, text)

    def load(self, ref: str) -> Workload:
        """The workload 'module:attr' in this process, imported once (sys.modules): from the copy of its job's
        folder that `runtime_env` put on a worker (`copied`: a worker's registry declares nothing), or from the file
        `declare`d for it here (a benchmark that times a user's trial in its own process: studies/parity.py), or by
        name (a package's module, or one on the Python path)."""
        module, attr = ref.rsplit(":", 1)
        if module not in sys.modules:
            shipped = self.shipping.files.get(module) or copied(module, self.shipping.origins().get(module))
            if shipped is not None and shipped.is_file():
                _exec_file(module, shipped, ref)
            else:
                _import(module, ref)
        return _resolve_attr(module, attr, ref)


def fingerprint(workload: Workload | WorkloadSpec) -> str:
    """16 hex digits of the workload's source (a job file's: with its folder's .py files) and of its model's
    parameter shapes at its defaults (built on the meta device: no memory, no time), found once a version of its
    module in this process (_FINGERPRINTS): a worker's, or a planning process's (sweeps/plan.py), which a
    WorkloadSpec holds. What changes either measures again."""
    if isinstance(workload, WorkloadSpec):
        return workload.fingerprint
    key = workload.ref or workload.name
    if key not in _FINGERPRINTS:
        module = sys.modules[(workload.ref or "crossover.trainables.workloads:").split(":")[0]]
        # the job's source (its file, and the .py files of its folder: shipping.source_bytes), as the worker's
        # copy from runtime_env has them (not linecache's, which may be stale), read before the model is built (a
        # model that writes its file changes no fingerprint); a package's module, or one installed: its file alone
        if module.__file__ is None:
            raise ValueError(f"workload {key!r}: its module {module.__name__} has no file, whose source its fingerprint "
                             "reads; define it in a .py file or a package's module")
        path = Path(module.__file__)
        alone = module.__spec__ and module.__spec__.parent or _installed(path)
        text = path.read_bytes() if alone else source_bytes(path)
        _FINGERPRINTS[key] = fingerprints.of(text, fingerprints.shapes(workload))
    return _FINGERPRINTS[key]


def reference(workload: Workload) -> str:
    """The reference of a Workload object given in Python (`Space(grids={workload: ...})`): the one it was
    registered by, else its file and the top-level name it is found under (a module in a package: the module's
    name), so that a planning process and the workers import it as a file on the command line would be. Reads
    the module's names, and runs none of its code."""
    if workload.ref:
        return workload.ref
    module = sys.modules.get(getattr(workload.make_model, "__module__", ""), None)
    names = [n for n, v in vars(module).items() if v is workload] if module else []
    path = getattr(module, "__file__", None)
    if module is None or not names or not path:
        raise WorkloadError(f"workload {workload.name!r}: define it at the top level of a module or file (workers import "
                            "it from there), e.g. `workload = Workload(...)` in job.py")
    in_package = "." in module.__name__ and module.__name__ != "__main__"
    return f"{module.__name__}:{names[0]}" if in_package else f"{path}:{names[0]}"


def copied(module: str, origin: str | None) -> Path | None:
    """In a Ray worker, the job file of `module` in the copy of its folder that runtime_env's py_modules unpacked (a
    folder of the driver's folder's name, under an entry of sys.path), found from the driver's path `origin`
    (shipping.origins); None where there is none."""
    if not origin or not origin.endswith(".py"):
        return None
    name = Path(origin).parent.name
    return next((found for entry in sys.path if entry and (found := Path(entry) / name / f"{module}.py").is_file()), None)


def _exec_file(module: str, path: Path, text: str) -> None:
    """The file `path` imported as `module` (in sys.modules from now on), as `python path` would: its folder first on
    sys.path, so that the modules and packages beside it import by name. WorkloadError where it does not import."""
    for ref in [r for r in _FINGERPRINTS if r.split(":")[0] == module]:  # its previous version's
        del _FINGERPRINTS[ref]
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(module, path)
    if spec is None or spec.loader is None:  # a path that is no .py file: no loader knows it
        raise WorkloadError(f"--workload {text!r}: {path} is no Python file to import; name a .py file")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    try:
        spec.loader.exec_module(loaded)
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM: sweeps/status.py stop_signals) while it imports: an interruption
        del sys.modules[module]
        raise
    except WorkloadError as exc:  # a Workload it makes, refused: that line says the field and the fix
        del sys.modules[module]
        raise WorkloadError(f"--workload {text!r}: {exc}") from None
    except BaseException as exc:  # SystemExit too: a user's module is not ours to end the sweep
        del sys.modules[module]
        raise WorkloadError(f"--workload {text!r}: {path} does not import: {cause(exc)}") from None


def _import(module: str, text: str) -> None:
    try:
        importlib.import_module(module)
    except KeyboardInterrupt:
        raise
    except WorkloadError as exc:
        raise WorkloadError(f"workload {text!r}: {exc}") from None
    except BaseException as exc:
        raise WorkloadError(f"workload {text!r}: module {module!r} does not import: {cause(exc)}; give a module on "
                            "the Python path, or the path of its file (path/to/job.py:ATTR)") from None


def cause(exc: BaseException) -> str:
    """Why a module did not import, in one line: the exception as its traceback's last line says it, and where:
    the file and line of the innermost frame of the user's code (not Python's import machinery), or of a
    SyntaxError itself."""
    said = traceback.format_exception_only(type(exc), exc)[-1].strip()
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{said} ({exc.filename}:{exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")
              and "importlib" not in Path(f.filename).parts and Path(f.filename) != Path(__file__)]
    return f"{said} ({frames[-1].filename}:{frames[-1].lineno})" if frames else said


def package_path(module: str) -> str | None:
    """The folder (or file) of an imported module's top-level package, to ship (`ship`); None where it is
    installed (site-packages) or ours."""
    top = sys.modules[module.split(".")[0]]
    path = Path(getattr(top, "__file__", None) or "")
    if not path.name or _installed(path) or top.__name__ == "crossover":
        return None
    return str(path.parent if path.name == "__init__.py" else path)


def _installed(path: Path) -> bool:
    """Whether a module's file is an installed package's (site-packages): on every node already, never shipped."""
    return "site-packages" in path.parts or "dist-packages" in path.parts


def _resolve_attr(module: str, attr: str, text: str) -> Workload:
    try:
        found = getattr(sys.modules[module], attr)
    except AttributeError:
        public = sorted(n for n, v in vars(sys.modules[module]).items() if isinstance(v, Workload))
        raise WorkloadError(f"workload {text!r}: module {module!r} has no attribute {attr!r}"
                            + (f"; its Workloads: {public}" if public else "; define `workload = Workload(...)` there")) from None
    if callable(found) and not isinstance(found, Workload):
        try:
            found = found()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise WorkloadError(f"workload {text!r}: {module}.{attr}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(found, Workload):
        raise WorkloadError(f"workload {text!r}: {module}.{attr} is a {type(found).__name__}, not a "
                            "crossover.Workload (or a function returning one)")
    return dataclasses.replace(found, ref=f"{module}:{attr}") if found.ref is None else found

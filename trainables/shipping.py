"""What a process ships to Ray's workers of its users' workloads: a job file's whole folder (its modules and
packages beside it, as `python job.py` imports them), or a package's folder, with each job's source as it was
declared, so that every worker imports the code the driver planned with.

    shipping = Shipping()                                      # a sweep's, made once (sweeps/plan.py Planner) and handed down
    module, attr, path = shipping.declare("job.py:workload")   # job.py's folder shipped from now on, not imported here
    shipping.shipped()                                         # runtime_env's py_modules (sweeps/cluster.py runtime_env)

What is shipped of a folder is what Ray uploads of it (`files`): every file but SHIP_EXCLUDES and what a .gitignore
or .rayignore there names, at most SHIP_MAX_BYTES in all. Nothing here imports a user's module or torch: a sweep's
driver ships what its planning process imports (sweeps/plan.py), and trainables/registry.py imports.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

from crossover.config import WorkloadError

from .job import locate  # a reference, parsed with no torch

# What a shipped folder leaves out, as Ray's runtime_env `excludes` (gitignore patterns): caches, checkpoints, rows.
SHIP_EXCLUDES = ["__pycache__/", "*.pyc", ".git/", ".ipynb_checkpoints/", "*.pt", "*.pth", "*.ckpt", "*.parquet"]
# Bytes a shipped folder may hold. Ray packs each into a zip in its GCS and refuses one past 512 MiB (gRPC's
# message limit, GCS_STORAGE_MAX_SIZE); a folder past this is refused first, in one line naming it (`check_shippable`):
# data and checkpoints belong on disk, read from a path.
SHIP_MAX_BYTES = 100 * 2**20
# The environment variable that tells a worker, from the driver, where each shipped module came from (`origins`):
# a job file's path (its folder reaches the worker under the folder's name), or a package's folder.
ORIGINS_ENV = "CROSSOVER_SHIPPED"


class Shipping:
    """The modules a sweep ships to Ray's workers, their sources as declared, and what Ray was started with (`sent`).
    A sweep makes one (its Planner's registry holds it: sweeps/plan.py) and hands it down: to sweeps/cluster.py
    runtime_env, which starts Ray with it, and to check_shipped, which refuses a sweep whose modules Ray's workers
    lack. One made empty in a Ray worker declares nothing: its `origins` are then the driver's (ORIGINS_ENV)."""

    def __init__(self) -> None:
        self.files: dict[str, Path] = {}  # module name -> its job file (its folder shipped), or a package's folder
        self.sources: dict[str, str] = {}  # module name -> sha256 of its job's source as declared here (`digest`)
        self.texts: dict[str, bytes] = {}  # a job file's path -> its bytes as declared (`imported_text`)
        # what this process started Ray with (sweeps/cluster.py runtime_env): a job file or package -> its source's sha256
        self.sent: dict[str, str | None] = {}

    def declare(self, text: str) -> tuple[str, str, Path | None]:
        """(module, attribute, file) of the reference `text` (`locate`), a file's folder shipped to the Ray workers
        from now on (`shipped`) without importing it here: what a sweep's driver does (sweeps/plan.py), whose
        planning process imports it. A package's module is shipped once that process has found its folder (`ship`).
        Raises WorkloadError where Ray could not ship the folder (`check_shippable`)."""
        module, attr, path = locate(text)
        if path is not None:
            shipped = self.files.get(module)
            if shipped is not None and shipped != path:
                raise WorkloadError(f"--workload {text!r}: module {module!r} is already {shipped}; two files of one "
                                    "name cannot both reach the workers: rename one")
            check_shippable(path.parent, f"--workload {text!r}: the job's folder")
            self.sources[module], self.texts[str(path)] = digest(path), path.read_bytes()
            self.files[module] = path
        return module, attr, path

    def ship(self, module: str, path: str | None) -> None:
        """The top-level package `module` shipped to the workers from its `path` (`package_path`, as the process
        that imported it found it), unless it is shipped already (that process imported a copy of it); None:
        installed, or crossover's own, which every worker has."""
        if path is not None and module not in self.files:
            found = Path(path)  # a package's folder, or a module's file (its folder shipped, as a job file's)
            check_shippable(found.parent if found.suffix == ".py" else found, f"the module {module!r} of your workload, in")
            self.files[module] = found

    def shipped(self) -> list[str]:
        """What to ship to every worker (runtime_env py_modules): each job file's folder, once, and each package's."""
        return list(dict.fromkeys(str(p.parent if p.suffix == ".py" else p) for p in self.files.values()))

    def import_paths(self) -> list[str]:
        """The folders the shipped modules import from by name, as a child process on this machine has them on its
        path (sweeps/probe.py): each job file's own folder, each package's parent."""
        return list(dict.fromkeys(str(p.parent) for p in self.files.values()))

    def origins(self) -> dict[str, str]:
        """Module name -> the path it was shipped from here (a job file, or a package's folder); in a Ray worker,
        the driver's (ORIGINS_ENV, set by sweeps/cluster.py runtime_env), where this process declared none."""
        declared = {module: str(p) for module, p in self.files.items()}
        return declared or json.loads(os.environ.get(ORIGINS_ENV) or "{}")

    def origin(self, ref: str | None) -> str | None:
        """Where the module of `ref` ('module:attr') was shipped from (`origins`): the job file's path, or the folder
        its package imports from (the package's folder's parent); None: a built-in's, or not shipped."""
        found = self.origins().get((ref or "").split(":")[0].split(".")[0])
        return None if found is None else found if found.endswith(".py") else str(Path(found).parent)

    def shipped_sources(self, modules=None) -> dict[str, str | None]:
        """Each job file and package of `shipped` (or of those named `modules`), by path, with the sha256 of its
        job's source as declared here (None: a package)."""
        return {str(p): self.sources.get(module) for module, p in self.files.items()
                if modules is None or module in modules}

    def imported_text(self, path: str | Path) -> bytes | None:
        """The bytes of the job file `path` as it was declared here (None: not a registered file): what a
        planning process copies where the file has gone since (the workers have it from Ray's runtime_env)."""
        return self.texts.get(str(path))

    def source(self, ref: str) -> str | None:
        """The sha256 of the job of `ref` ('module:attr') as declared here (`digest`); None for a package's, or
        one not registered."""
        return self.sources.get(ref.split(":")[0])



def files(folder: Path, stop_bytes: float = float("inf")) -> list[Path]:
    """The files of `folder` that Ray ships of it (its runtime_env packing, ray/_private/runtime_env/packaging.py
    _dir_travel): every one below it, less SHIP_EXCLUDES and what a .gitignore (unless
    RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1, as Ray reads it) or .rayignore names in its own folder and below, matched
    by Ray's own gitignore patterns; sorted. Stops once they hold `stop_bytes` (a folder too large to ship)."""
    PathSpec = _ray_pathspec().PathSpec  # Ray's matcher: what Ray leaves out, left out here
    ignores = [".rayignore"] + ([".gitignore"] if os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1" else [])
    found, held = [], 0
    todo = [(folder, [(folder, PathSpec.from_lines("gitwildmatch", SHIP_EXCLUDES))])]
    while todo and held < stop_bytes:
        here, specs = todo.pop()
        specs = specs + [(here, PathSpec.from_lines("gitwildmatch", (here / name).read_text().splitlines()))
                         for name in ignores if (here / name).is_file()]
        for path in sorted(here.iterdir()):
            left_out = any(spec.match_file(str(path.relative_to(base)) + ("/" if path.is_dir() else ""))
                           for base, spec in specs)
            if left_out:
                continue
            if path.is_dir():
                todo.append((path, specs))
            elif path.is_file():
                found.append(path)
                held += path.stat().st_size
    return sorted(found)


def _ray_pathspec() -> ModuleType:
    """The gitignore matcher Ray vendors (ray/_private/thirdparty/pathspec), loaded from Ray's folder without importing
    Ray (a second or more, in every planning child and `crossover predict` that imports a job): the same patterns, read
    alike, as Ray's own upload."""
    if _PATHSPEC not in sys.modules:
        ray = importlib.util.find_spec("ray")
        assert ray is not None and ray.origin is not None  # a dependency of the package, installed as a folder
        folder = Path(ray.origin).parent / "_private" / "thirdparty" / "pathspec"
        spec = importlib.util.spec_from_file_location(_PATHSPEC, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])
        assert spec is not None and spec.loader is not None  # a spec from a .py file's path always has its loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[_PATHSPEC] = module
        spec.loader.exec_module(module)
    return sys.modules[_PATHSPEC]


_PATHSPEC = "crossover_ray_pathspec"  # its name in sys.modules


def ray_temp() -> Path:
    """The folder a Ray started on this machine writes its sessions in, as Ray finds it: $RAY_TMPDIR, else $TMPDIR,
    else /tmp; then ray/ (ray._private.utils get_user_temp_dir, get_ray_temp_dir)."""
    return Path(os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp", "ray").resolve()


def check_shippable(folder: Path, what: str) -> None:
    """Refuses, in one line naming it (`what`), a folder to ship (`files`) that Ray could not ship: one holding Ray's
    own session folder (`ray_temp`: Ray would pack its copies of the folder into the folder it packs, without end,
    until the disk is full), or more than SHIP_MAX_BYTES."""
    temp = ray_temp()
    if temp.is_relative_to(folder.resolve()):
        raise WorkloadError(f"{what} {folder} holds Ray's session folder {temp} ($RAY_TMPDIR or $TMPDIR): Ray would "
                            "copy the folder into itself without end; set TMPDIR (or RAY_TMPDIR) to a folder outside "
                            "it, or put the job in a folder of its own")
    held = sum(p.stat().st_size for p in files(folder, SHIP_MAX_BYTES + 1))
    if held > SHIP_MAX_BYTES:
        raise WorkloadError(f"{what} {folder} holds {held / 2**20:,.0f} MiB or more to ship to Ray's workers, past "
                            f"crossover's limit of {SHIP_MAX_BYTES / 2**20:.0f} MiB (Ray's own: 512 MiB): put the job "
                            "and its modules in a folder of their own, or move data and checkpoints out of it (the "
                            "workload reads them from a path), or name them in a .rayignore there")


def source_bytes(path: Path) -> bytes:
    """A job's source: its file's bytes, then each other .py file its folder ships (`files`), named by its path
    below the folder: a module or package beside it, edited, is the job edited (its fingerprint, its digest).
    A job alone in its folder: its file's bytes, as they were before its folder was shipped."""
    folder = path.parent
    others = [p for p in files(folder) if p.suffix == ".py" and p != path]
    return path.read_bytes() + b"".join(b"\0" + str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes()
                                        for p in others)


def digest(path: Path) -> str:
    """The sha256 of a job's source (`source_bytes`): what tells an edited job, or module beside it, from the one
    imported."""
    return hashlib.sha256(source_bytes(path)).hexdigest()

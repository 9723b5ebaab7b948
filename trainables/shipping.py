"""What a process ships to Ray's workers of its users' workloads: their modules (a file, or a package's folder),
with each file's source as it was declared, so that every worker imports the code the driver planned with.

    module, attr, path = declare("job.py:workload")   # job.py shipped from now on, not imported (sweeps/plan.py)
    shipped()                                         # runtime_env's py_modules (sweeps/cluster.py runtime_env)

Nothing here imports a user's module or torch: a sweep's driver ships what its planning process imports
(sweeps/plan.py), and trainables/registry.py imports.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from crossover.trainables.job import WorkloadError, locate  # a reference, parsed with no torch


class Shipping:
    """The modules a process ships to the workers and their sources as declared. State of the process, as
    sys.modules is: one per process, SHIPPING, whose methods are this module's functions of the same names
    (`declare`, `ship`, `shipped`, ...); trainables/registry.py's Registry holds it, and what Ray was started with
    (`sent`: sweeps/cluster.py runtime_env). A test starts from a copy of its dicts (tests/conftest.py `fresh`)."""

    def __init__(self):
        self.files: dict[str, Path] = {}  # module name -> the file or package folder shipped to the workers
        self.sources: dict[str, str] = {}  # module name -> sha256 of its file's bytes as declared here (`declare`)
        self.texts: dict[str, bytes] = {}  # a shipped file's path -> its bytes as declared (`imported_text`)
        # what this process started Ray with (sweeps/cluster.py runtime_env): a shipped path -> its source's sha256
        self.sent: dict[str, str | None] = {}

    def declare(self, text: str) -> tuple[str, str, Path | None]:
        """(module, attribute, file) of the reference `text` (`locate`), a file's module shipped to the Ray workers
        from now on (`shipped`) without importing it here: what a sweep's driver does (sweeps/plan.py), whose
        planning process imports it. A package's module is shipped once that process has found its folder (`ship`)."""
        module, attr, path = locate(text)
        if path is not None:
            shipped = self.files.get(module)
            if shipped is not None and shipped != path:
                raise WorkloadError(f"--workload {text!r}: module {module!r} is already {shipped}; two files of one "
                                    "name cannot both reach the workers: rename one")
            data = path.read_bytes()
            self.sources[module], self.texts[str(path)] = hashlib.sha256(data).hexdigest(), data
            self.files[module] = path
        return module, attr, path

    def ship(self, module: str, path: str | None) -> None:
        """The top-level package `module` shipped to the workers from its `path` (`package_path`, as the process
        that imported it found it), unless it is shipped already (that process imported a copy of it); None:
        installed, or crossover's own, which every worker has."""
        if path is not None and module not in self.files:
            self.files[module] = Path(path)

    def shipped(self) -> list[str]:
        """The user modules to ship to every worker (runtime_env py_modules): files and package folders."""
        return [str(p) for p in self.files.values()]

    def shipped_sources(self, modules=None) -> dict[str, str | None]:
        """Each module of `shipped` (or of those named `modules`), by path, with the sha256 of its file as
        imported here (None: a package)."""
        return {str(p): self.sources.get(module) for module, p in self.files.items()
                if modules is None or module in modules}

    def imported_text(self, path: str | Path) -> bytes | None:
        """The bytes of the shipped file `path` as it was declared here (None: not a registered file): what a
        planning process copies where the file has gone since (the workers have it from Ray's runtime_env)."""
        return self.texts.get(str(path))

    def source(self, ref: str) -> str | None:
        """The sha256 of the file module of `ref` ('module:attr') as declared here; None for a package's, or one
        not registered."""
        return self.sources.get(ref.split(":")[0])


SHIPPING = Shipping()  # this process's
declare, ship, shipped, shipped_sources = SHIPPING.declare, SHIPPING.ship, SHIPPING.shipped, SHIPPING.shipped_sources
imported_text, source = SHIPPING.imported_text, SHIPPING.source


def digest(path: Path) -> str:
    """The sha256 of a file's bytes: what tells an edited module from the one imported."""
    return hashlib.sha256(path.read_bytes()).hexdigest()

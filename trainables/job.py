"""A job named on the command line (`--workload path/to/job.py:ATTR`, `package.module:ATTR`, or an example job's
name), found and checked without running it: no import of the user's module, nor of torch.

    crossover predict --workload job.py:workloda ...   # refused in well under a second, before anything starts
    crossover predict --workload zoo --param arch=resnet50 --epochs 1   # an example job, shipped in the package

An example job (examples/ in a checkout, crossover.examples where installed) is named by its file's name (`named`):
`zoo` is `crossover.examples.zoo:workload`, a module of the package, which a worker imports as any installed one.

`check` is what the `crossover` command runs first (sweeps/command.py): a file that is not there, a module not on
the Python path, or an attribute the file does not define is refused in one line, where importing torch and Ray
and starting the process that imports the job would take 5 to 60 s to say the same. `locate` is the reference's
parse that trainables/registry.py registers and declares by. A name the module could make as it runs (a
`from x import *`, a module `__getattr__`, `globals()`) passes here and is found, or not, when it is imported.
"""

from __future__ import annotations

import ast
import difflib
import importlib.machinery
import importlib.util
import os
import re
from pathlib import Path

from crossover.config import WorkloadError

_REF = re.compile(r"(?P<module>[^:]+):(?P<attr>[A-Za-z_][A-Za-z0-9_]*)")
# calls by which a module can bind a top-level name that no statement of it spells out
_DYNAMIC = {"globals", "vars", "setattr", "exec"}


# The example jobs (examples/*.py, installed as crossover.examples), each named by its file's name: `--workload zoo`
EXAMPLES = ("zoo", "resnet_cifar", "tabular_csv", "realsize", "heldout")
EXAMPLES_PACKAGE = "crossover.examples"


def named(text: str) -> str:
    """The reference `text` stands for: an example job's name ('zoo') as its module's reference
    ('crossover.examples.zoo:workload'); any other text as it is. The commands' --workload parse with it."""
    return f"{EXAMPLES_PACKAGE}.{text.strip()}:workload" if text.strip() in EXAMPLES else text


def example_file(module: str) -> Path | None:
    """The file of an example job's module ('crossover.examples.zoo'), found without running it (the package's
    __init__ alone runs, and imports nothing); None for any other module."""
    package, _, name = module.rpartition(".")
    if package != EXAMPLES_PACKAGE or name not in EXAMPLES:
        return None
    found = importlib.util.find_spec(module)  # through the package's own finder: an editable install maps examples/
    return Path(found.origin) if found is not None and found.origin else None


def is_reference(text: str) -> bool:
    """Whether `text` names a workload by module ('module:attr', 'file.py:attr'), not a built-in's name."""
    return ":" in text


def locate(text: str) -> tuple[str, str, Path | None]:
    """(module, attribute, file) of a reference, without importing it: the file where `text` names one
    ('path/file.py:attr'), else None ('package.module:attr'). Raises WorkloadError naming what is wrong."""
    match = _REF.fullmatch(text.strip())
    if not match:
        raise WorkloadError(f"--workload {text!r}: give MODULE:ATTR or path/to/file.py:ATTR (the attribute a "
                            "Workload, or a function that returns one)")
    module, attr = match["module"], match["attr"]
    if not (module.endswith(".py") or "/" in module or module.startswith(".")):
        return module, attr, None
    path = Path(module).expanduser().resolve()
    if not path.is_file():
        raise WorkloadError(f"--workload {text!r}: no file {path}; give the path of a .py file that defines {attr}")
    if not path.stem.isidentifier():
        raise WorkloadError(f"--workload {text!r}: the file's name {path.name} is no Python module name; rename it "
                            "to letters, digits and '_'")
    return path.stem, attr, path


def check(text: str) -> None:
    """Refuses the reference `text` (WorkloadError, one line) where its file or module is not there or does not
    define its attribute at the top level, read as source (`ast`), never run; a built-in's name passes (the
    built-ins are checked where they are defined, trainables/workloads.py); an example's name is checked as its
    module (`named`)."""
    text = named(text)
    if not is_reference(text) and text.strip().isidentifier():
        return  # a built-in's name; a path or a dotted name without its ':ATTR' is refused by `locate`
    module, attr, source = locate(text)
    source = source or example_file(module)
    if source is None:
        found = _spec(module)
        if found is None:
            raise WorkloadError(f"--workload {text!r}: no module {module!r} on the Python path; give a module that "
                                "imports from here (PYTHONPATH), or the path of its file (path/to/job.py:ATTR)")
        source = Path(found.origin) if found.origin else None
        if source is None or source.suffix != ".py" or not source.is_file():
            return  # a compiled module or a namespace package: its names are known once imported
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except SyntaxError as exc:
        raise WorkloadError(f"--workload {text!r}: {source} does not import: SyntaxError: {exc.msg} "
                            f"({source}:{exc.lineno})") from None
    _imports_found(text, source, tree)
    names = _top_level(tree)
    if names is not None and attr not in names:
        close = difflib.get_close_matches(attr, names, n=1)
        raise WorkloadError(f"--workload {text!r}: {source} defines no {attr!r} at its top level"
                            + (f"; did you mean {close[0]!r}?" if close else
                               f"; define `{attr} = Workload(...)` there, or name the attribute that holds it"))


def _imports_found(text: str, source: Path, tree: ast.Module, seen: set | None = None) -> None:
    """Refuses (WorkloadError) a module whose top level imports, unguarded, a package that is not installed: the
    import a worker would die on, said here before torch and Ray are imported (10 s on 2 cores). Only the
    statements run whatever happens are read (those directly in the module's body, not in a `try`, an `if` or a
    function); a module beside `source` that it imports is read the same way, each once."""
    seen = set() if seen is None else seen
    seen.add(source)
    for node in tree.body:
        if isinstance(node, ast.Import):
            tops = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = [node.module.split(".")[0]]
        else:
            continue
        for top in tops:
            beside = source.parent / f"{top}.py"
            if beside.is_file():  # a module of the job's folder, as `python job.py` imports it
                if beside not in seen:
                    try:
                        _imports_found(text, beside, ast.parse(beside.read_bytes(), filename=str(beside)), seen)
                    except SyntaxError:
                        pass  # said by its import, with its line
                continue
            if (source.parent / top).is_dir() or importlib.util.find_spec(top) is not None or \
                    importlib.machinery.PathFinder.find_spec(top, [os.getcwd()]) is not None:
                continue
            raise WorkloadError(f"--workload {text!r}: {source}:{node.lineno} imports {top!r}, which is not "
                                f"installed here: install it (pip install {top}, or the package that provides "
                                "it) into this Python, or put its module beside the job file")


def _spec(module: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of `module` as an import would find it from here (the Python path, then the current folder, as a
    child process started in it has it), its packages' __init__ never run: each part looked up in its parent's
    folders. None: not found."""
    top, *parts = module.split(".")
    found = importlib.util.find_spec(top) or importlib.machinery.PathFinder.find_spec(top, [os.getcwd()])
    for part in parts:
        if found is None or found.submodule_search_locations is None:
            return None
        found = importlib.machinery.PathFinder.find_spec(part, list(found.submodule_search_locations))
    return found


def _top_level(tree: ast.Module) -> set[str] | None:
    """The names a module's top level binds (assignments, defs, classes, imports, `as`, in its `if`, `try`, `with`
    and loops too); None where it may bind others as it runs (a star import, a module `__getattr__`, a call of
    `_DYNAMIC` anywhere)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) or \
                isinstance(node, ast.Name) and node.id in _DYNAMIC:
            return None
    names: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
            continue  # its body binds its own names, not the module's
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        todo += ast.iter_child_nodes(node)
    return names

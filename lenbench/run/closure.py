"""The import closure of package files: which `lenbench` sources a piece of code can run.

`import_closure(roots, package)` starts from package files (paths relative to the package, such as
"run/cell.py") and follows, transitively, every import of a `lenbench` module found anywhere in a
file's source (module level, inside functions, under `if` / `try`, relative imports), read from
the AST without importing anything. Three rules make it exact rather than a hand list:

- A plain module imported (`import lenbench.x`, `from lenbench.x import y`, `from . import x`)
  is in the closure, and so is `lenbench.x.y` when `y` is itself a module.
- A string constant that is exactly the dotted name of a package module (e.g. a
  `"lenbench.x.y"` handed to `importlib.import_module`) counts as an import of it: dynamic imports
  by a literal name are followed.
- A package's `__init__.py` runs on every import of one of its members, and the packages'
  `__init__`s import every member to register it: following those would make everything depend
  on everything. So an `__init__` is never *followed* into its own package's members; a name
  imported from a package (`from lenbench.encodings import build_encoding`) is followed to the
  module that defines it, through the `__init__`'s own `from ... import` re-exports; the
  `__init__` file itself is in the closure, whenever any module below it is, iff it holds code of
  its own (anything but the docstring, imports and `__all__`: e.g. the top package's
  `__version__`, which rows record). Its imports of modules outside its own package are followed.

Loads by file path (`importlib.util.spec_from_file_location`, `runpy`, `exec`) are not imports and
are not followed: `dynamic_loads` lists them so a test can keep them out of the compute path.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT_PACKAGE = "lenbench"
#: Calls that load code without an import statement the closure can read.
_LOADERS = {"spec_from_file_location", "run_path", "run_module", "exec", "__import__", "import_module",
            "SourceFileLoader"}


@dataclasses.dataclass(frozen=True)
class _Import:
    """One import statement's target: `level` dots, then `module` ("" for `from . import x`);
    `names` the imported names (() for `import module`)."""

    level: int
    module: str
    names: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class _Parsed:
    """What the closure needs from one source text.

    Args:
        imports: every import anywhere in the file, plus string constants naming a package module.
        reexports: top-level `from M import n as a` → {a: (level, M, n)} (used for `__init__`s).
        own_code: whether a top-level statement is more than the docstring, an import or `__all__`.
    """

    imports: tuple[_Import, ...]
    reexports: dict[str, tuple[int, str, str]]
    own_code: bool


@functools.lru_cache(maxsize=64)
def _module_name_pattern(package: str) -> re.Pattern:
    """A string constant that is exactly the dotted name of `package` or one of its modules."""
    return re.compile(rf"{re.escape(package)}(\.[A-Za-z_]\w*)*")


@functools.lru_cache(maxsize=512)
def _parse(source: bytes, package: str = ROOT_PACKAGE) -> _Parsed:
    """Parsed once per distinct source text (an edited file is parsed again); string constants
    naming a module of `package` count as imports."""
    tree = ast.parse(source)
    pattern = _module_name_pattern(package)
    imports: list[_Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            imports.append(_Import(node.level, node.module or "", tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            imports += [_Import(0, a.name, ()) for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.fullmatch(node.value):
            imports.append(_Import(0, node.value, ()))
    reexports = {a.asname or a.name: (node.level, node.module or "", a.name)
                 for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
    return _Parsed(tuple(imports), reexports, any(not _aggregating(i, node) for i, node in enumerate(tree.body)))


def _aggregating(index: int, node: ast.stmt) -> bool:
    """A statement an aggregating `__init__` may hold: docstring, import, `__all__ = [...]`."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return isinstance(node.value.value, str)
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return bool(targets) and all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


class _Package:
    """The files of one package directory (the package `name`), read through `read` (rel path → bytes)."""

    def __init__(self, root: Path, read: Callable[[str], bytes] | None = None, name: str = ROOT_PACKAGE) -> None:
        self.root = root
        self.name = name
        self.read = read or (lambda rel: (root / rel).read_bytes())
        self._parsed: dict[str, _Parsed] = {}  # one closure's view: each file read once
        self._exists: dict[str, bool] = {}
        self._sources: dict[str, bytes] = {}

    def parsed(self, rel: str) -> _Parsed:
        if rel not in self._parsed:
            self._sources[rel] = self.read(rel)
            self._parsed[rel] = _parse(self._sources[rel], self.name)
        return self._parsed[rel]

    def inputs(self) -> _Inputs:
        return _Inputs(dict(self._sources), dict(self._exists), self.name)

    def file_of(self, module: str) -> str | None:
        """'lenbench.encodings.rope' → 'encodings/rope.py' ('lenbench' → '__init__.py'); None if absent."""
        if module != self.name and not module.startswith(self.name + "."):
            return None
        rel = module[len(self.name) + 1:].replace(".", "/")
        for candidate in ((f"{rel}.py", f"{rel}/__init__.py") if rel else ("__init__.py",)):
            if self.exists(candidate):
                return candidate
        return None

    def exists(self, rel: str) -> bool:
        if rel not in self._exists:
            self._exists[rel] = (self.root / rel).is_file()
        return self._exists[rel]

    def package_of(self, rel: str) -> str:
        """The dotted package a file lives in: 'encodings/rope.py' and 'encodings/__init__.py' →
        'lenbench.encodings'."""
        return ".".join([self.name, *Path(rel).parent.parts])

    def absolute(self, rel: str, level: int, module: str) -> str:
        """The absolute module name of an import in file `rel` (resolves `level` leading dots)."""
        if level == 0:
            return module
        parts = self.package_of(rel).split(".")
        base = parts[:len(parts) - (level - 1)] if level - 1 < len(parts) else []
        return ".".join([*base, module] if module else base)

    def targets(self, rel: str, imp: _Import) -> set[str]:
        """The package files one import statement of file `rel` makes run (see the module docstring)."""
        module = self.absolute(rel, imp.level, imp.module)
        if rel.endswith("__init__.py") and (module + ".").startswith(self.package_of(rel) + "."):
            return set()  # an __init__ registering / re-exporting its own members: not followed
        return self.resolve(module, imp.names, frozenset())

    def resolve(self, module: str, names: tuple[str, ...], seen: frozenset[str]) -> set[str]:
        """Files that define `module` (and, for a package, the `names` imported from it)."""
        path = self.file_of(module)
        if path is None or path in seen:
            return set()
        if not path.endswith("__init__.py"):
            return {path}
        found = {path}  # kept by `import_closure` only if it has code of its own
        for name in names:
            if self.file_of(f"{module}.{name}") is not None:
                found |= self.resolve(f"{module}.{name}", (), seen | {path})
            elif name in (reexports := self.parsed(path).reexports):
                level, source, original = reexports[name]
                found |= self.resolve(self.absolute(path, level, source), (original,), seen | {path})
        return found

    def enclosing_inits(self, rel: str) -> list[str]:
        """The `__init__.py` of every package containing `rel` (they run before it)."""
        parents = Path(rel).parents
        inits = [str(p / "__init__.py") if str(p) != "." else "__init__.py" for p in parents]
        return [init for init in inits if self.exists(init)]


def import_closure(roots: Iterable[str], package: Path, read: Callable[[str], bytes] | None = None,
                   name: str = ROOT_PACKAGE) -> list[str]:
    """`roots` and every package file they import, transitively (see the module docstring), sorted.

    Args:
        roots: files relative to `package`, e.g. ["run/cell.py", "encodings/alibi.py"].
        package: the directory of the package to read (`lenbench`'s, or a plugin package's).
        read: rel path → source bytes (default: the file's bytes); lets a caller hash and follow
            only part of a file, or another version of it.
        name: the package's import name (default ``lenbench``); imports of other packages are not
            followed (`imports_outside` lists them).
    """
    roots = tuple(roots)
    key = (str(package), roots, read, name)
    cached = _CLOSURES.get(key)
    if cached is not None and cached[1].still(package, read):
        return list(cached[0])
    pkg = _Package(package, read, name)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        todo += [init for init in pkg.enclosing_inits(rel) if init not in seen]
        for imp in pkg.parsed(rel).imports:
            todo += [t for t in pkg.targets(rel, imp) if t not in seen]
    found = sorted(r for r in seen if not r.endswith("__init__.py") or pkg.parsed(r).own_code)
    _CLOSURES[key] = (tuple(found), pkg.inputs())
    return found


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """Everything one closure was computed from: the bytes read and which files exist.

    Args:
        sources: rel path → the bytes read.
        exists: rel path → whether it was a file (each lookup of a module's file).
    """

    sources: dict[str, bytes]
    exists: dict[str, bool]
    name: str = ROOT_PACKAGE

    def still(self, package: Path, read: Callable[[str], bytes] | None) -> bool:
        """Whether the package still reads the same (every file re-read, every lookup redone)."""
        pkg = _Package(package, read, self.name)
        return all(pkg.exists(rel) == there for rel, there in self.exists.items()) and all(
            pkg.exists(rel) and pkg.read(rel) == data for rel, data in self.sources.items())


#: (package, roots, read, name) → (closure, its inputs): reused only while every input is unchanged.
_CLOSURES: dict[tuple, tuple[tuple[str, ...], _Inputs]] = {}


def dynamic_loads(rel: str, package: Path) -> list[str]:
    """Calls in file `rel` that load code other than by an import statement (`spec_from_file_location`,
    `runpy.run_path`, `exec`, `importlib.import_module`, ...), as "rel:line name", skipping the
    `if __name__ == "__main__":` block (which an import never runs)."""
    tree = ast.parse((package / rel).read_bytes())
    main_blocks = [n for n in tree.body if isinstance(n, ast.If) and _is_main_guard(n.test)]
    in_main = {id(sub) for block in main_blocks for sub in ast.walk(block)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in in_main:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _LOADERS:
                found.append(f"{rel}:{node.lineno} {name}")
    return found


def _is_main_guard(test: ast.expr) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


def imports_outside(files: Iterable[str], package: Path, read: Callable[[str], bytes] | None = None,
                    name: str = ROOT_PACKAGE, target: str = ROOT_PACKAGE) -> list[tuple[str, tuple[str, ...]]]:
    """The imports of package `target` (default ``lenbench``) made by `files` of another package
    `name` (a plugin's), as (absolute module, imported names), in file order without repeats.

    A plugin that subclasses `lenbench.encodings.alibi.ALiBi` runs alibi.py: the fingerprint follows
    these into lenbench's own closure (`resolve_imports`). A top-level single-file plugin is its own
    package of one file (`name` its module name); its relative imports, which Python refuses, are
    ignored.
    """
    pkg = _Package(package, read, name)
    found: dict[tuple[str, tuple[str, ...]], None] = {}
    for rel in files:
        for imp in pkg.parsed(rel).imports:
            module = pkg.absolute(rel, imp.level, imp.module) if imp.level else imp.module
            if module == target or module.startswith(target + "."):
                found[(module, imp.names)] = None
        for text in _string_modules(pkg.read(rel), target):
            found[(text, ())] = None
    return list(found)


def _string_modules(source: bytes, package: str) -> list[str]:
    """String constants naming a module of `package` (dynamic imports by name, as `_parse` counts them)."""
    pattern = _module_name_pattern(package)
    return [node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.fullmatch(node.value)]


def resolve_imports(imports: Iterable[tuple[str, tuple[str, ...]]], package: Path,
                    read: Callable[[str], bytes] | None = None, name: str = ROOT_PACKAGE) -> list[str]:
    """The files of package `name` at `package` that these (module, names) imports run, sorted —
    roots for `import_closure` (a name imported from a subpackage's `__init__` resolves to the
    module defining it, as inside the package)."""
    pkg = _Package(package, read, name)
    files: set[str] = set()
    for module, names in imports:
        files |= pkg.resolve(module, tuple(names), frozenset())
    return sorted(files)

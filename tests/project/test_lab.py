"""The lab stands on public ground: ``research/`` (and ``scripts/``) use pytest-gemm only through its public names.

No private name of ``pytest_gemm`` is imported, no ``obj._name`` is read or written (``getattr`` and ``setattr``
with a private name included), and no class overrides a private method of a pytest-gemm class. A script's own
objects may keep private state: ``self._name`` and ``cls._name`` inside a class that does not subclass one of
pytest-gemm's. Nor does a script set attributes of pytest-gemm's modules, classes or objects (``timer.CuptiClock =
...``, ``backend.timer.flush_bytes = ...``): what the worker does is switched by its requests, not by research.
The entry points research may use are listed in docs/lab.md.
"""

from __future__ import annotations

import ast

import pytest

from support import ROOT

SCRIPTS = sorted([*(ROOT / "research").rglob("*.py"), *(ROOT / "scripts").glob("*.py")])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain or a call starts from: ``a`` for ``a.b.c`` and ``a.b().c``."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _bound_names(target: ast.expr) -> list[str]:
    """The names an assignment to ``target`` binds: ``a`` and ``b`` for ``a, *b = ...``, none for ``a.b = ...``."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    return []


def _ours(module: str) -> bool:
    return module == "pytest_gemm" or module.startswith("pytest_gemm.")


def _imports(tree: ast.AST, found: list[str]) -> set[str]:
    """The names bound to pytest-gemm's modules, classes and functions; private imports go to ``found``."""
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    imported.add((alias.asname or alias.name).split(".")[0])
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and _ours(node.module or ""):
            if any(_private(part) for part in (node.module or "").split(".")):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                imported.add(alias.asname or alias.name)
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
    return imported


def _holders(tree: ast.AST, imported: set[str]) -> set[str]:
    """The names that hold pytest-gemm's objects: what was imported, and what is assigned from them or annotated
    as them (one scope for the whole script: enough for scripts, and it errs towards finding more)."""
    ours = set(imported)
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            bound: list[tuple[ast.expr, ast.expr]] = []
            if isinstance(node, ast.Assign):
                bound = [(target, node.value) for target in node.targets]
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                bound = [(node.target, node.value)]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                bound = [(node.optional_vars, node.context_expr)]
            elif isinstance(node, ast.arg) and node.annotation is not None:
                bound = [(ast.Name(node.arg), node.annotation)]
            for target, value in list(bound):  # a, b = x, y binds a to x and b to y
                pairs = isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                if pairs and len(target.elts) == len(value.elts):
                    bound += zip(target.elts, value.elts, strict=True)
            for target, value in bound:
                names = _bound_names(target)
                if _root(value) in ours and not set(names) <= ours:
                    ours.update(names)
                    changed = True
    return ours


def _state_set(tree: ast.AST, ours: set[str]) -> list[str]:
    """Each attribute of pytest-gemm's modules, classes or objects that the script sets or deletes."""
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            on_ours = bool(node.args) and _root(node.args[0]) in ours
            found += [f"{node.lineno}: {ast.unparse(node)} sets state of pytest-gemm's"] if on_ours else []
        for target in targets:
            for attribute in (n for n in ast.walk(target) if isinstance(n, ast.Attribute)):
                if _root(attribute) in ours and isinstance(attribute.ctx, (ast.Store, ast.Del)):
                    found.append(f"{node.lineno}: {ast.unparse(target)} = ... sets state of pytest-gemm's")
    return found


def _libraries(tree: ast.AST) -> set[str]:
    """The names bound to other libraries' modules by ``import x`` (``import torch``): their private names are theirs to
    document (``torch._scaled_mm``, cuBLASLt's FP8 GEMM in torch), not pytest-gemm's state."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names if not _ours(a.name)}
    return found


def _private_access(tree: ast.AST, imported: set[str]) -> list[str]:
    """Each ``obj._name`` outside the script's own classes (other libraries' modules' names aside), and each private
    method a subclass of one of pytest-gemm's classes overrides."""
    libraries = _libraries(tree) - imported
    subclasses: set[str] = set()  # directly or through another class of the script
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    changed = True
    while changed:
        changed = False
        for cls in classes:
            if cls.name not in subclasses and any(_root(b) in imported | subclasses for b in cls.bases):
                subclasses.add(cls.name)
                changed = True
    found = []

    def visit(node: ast.AST, own_class: bool) -> None:
        if isinstance(node, ast.ClassDef):
            own_class = node.name not in subclasses
            if not own_class:
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name):
                        found.append(f"{item.lineno}: {node.name} overrides {item.name} of a pytest-gemm class")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            on_library = isinstance(node.value, ast.Name) and node.value.id in libraries
            if not (on_self and own_class) and not on_library:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "delattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, own_class)

    visit(tree, False)
    return found


def violations(source: str, filename: str = "<script>") -> list[str]:
    """Each use of pytest-gemm's private ground in ``source``, as ``line: what``."""
    tree = ast.parse(source, filename)
    found: list[str] = []
    imported = _imports(tree, found)
    return found + _state_set(tree, _holders(tree, imported)) + _private_access(tree, imported)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_research_uses_only_public_names_of_pytest_gemm(path):
    assert violations(path.read_text(), str(path)) == []


@pytest.mark.parametrize(
    "source",
    [
        "from pytest_gemm.worker.timer import _Operands",
        "import pytest_gemm.worker._private",
        "from pytest_gemm.worker._private import thing",
        "from pytest_gemm.worker.backend import GpuBackend\nGpuBackend().timer._flush = None",
        "def f(backend):\n    return backend.runner._functions",
        "def f(t):\n    t._handle = 1",
        "from pytest_gemm.worker import cupti_clock\n"
        "class C(cupti_clock.CuptiClock):\n    def _completed(self, rows):\n        self._work = rows",
        "from pytest_gemm.worker.cupti_clock import CuptiClock\n"
        "class C(CuptiClock):\n    pass\nclass D(C):\n    def _completed(self, rows):\n        pass",
        "def f(t):\n    return getattr(t, '_prepare')",
        "class Mine:\n    def f(self, other):\n        return other._secret",
        "from pytest_gemm.worker import timer\ntimer.CuptiClock = object",
        "from pytest_gemm.worker.backend import GpuBackend\nb = GpuBackend()\ncp, t = b.cp, b.timer\nt.sweep_code = 0",
        "from pytest_gemm.worker.backend import GpuBackend\nbackend = GpuBackend()\nbackend.timer.flush_mode = 'read'",
        "from pytest_gemm.worker.backend import GpuBackend\ndef f(backend: GpuBackend):\n    t = backend.timer\n"
        "    t.flush_bytes *= 2",
        "from pytest_gemm.worker.backend import GpuBackend\nwith GpuBackend() as b:\n    setattr(b, 'timer', None)",
    ],
)
def test_the_rule_catches_private_ground(source):
    assert violations(source)


def test_the_rule_lets_a_script_keep_its_own_state():
    source = (
        "from pytest_gemm.worker.backend import GpuBackend\n"
        "class Mine:\n    def __init__(self):\n        self._backend = GpuBackend()\n"
        "    def _run(self):\n        return self._backend.timer.flush_bytes, self.__class__.__name__\n"
        "_CONSTANT = 1\n"
        "def g(backend: GpuBackend):\n    record = {}\n    record['n'] = backend.timer.flush_bytes\n"
        "    mine = Mine()\n    mine.label = 'x'\n"
    )
    assert violations(source) == []


def test_the_rule_leaves_other_libraries_private_names_to_them():
    assert violations("import torch\ntorch._scaled_mm(a, b, s, t)") == []
    assert violations("import torch\nfrom pytest_gemm.worker import timer\ntimer._Operands") != []

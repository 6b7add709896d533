"""The package keeps its shape: one-way data flow, GPU code behind one boundary, small modules, no cycles."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from support import ROOT

PACKAGE = ROOT / "pytest_gemm"
MODULES = sorted(PACKAGE.rglob("*.py"))
GPU_LIBRARIES = {"cupy", "cupy_backends", "pynvml", "cupti", "torch", "triton"}
#: packages that must stay pure: no pytest, no GPU, nothing from the worker or the pytest glue
PURE = ("records", "specs", "compiler", "judge", "runs", "baselines", "report", "isolation")
#: what each package may import from the others: data flows one way (kernel file -> spec -> case -> worker ->
#: outcome -> judged case -> saved run, report, baseline); the pytest glue (plugin) and the command (cli) use it all
LAYERS = {
    "fileio": set(),  # files read bounded and written whole, and why a file operation failed: for any package
    "records": set(),
    "specs": {"records", "fileio"},
    "compiler": {"records", "specs", "fileio"},
    "judge": {"records", "specs"},
    "runs": {"records", "judge", "fileio"},
    "baselines": {"records", "specs", "judge", "fileio"},
    "options": {"records", "specs", "judge"},
    "settings": {"records", "specs", "judge", "options"},  # the options' values, read into one record
    "report": {"records", "specs", "judge", "runs", "options", "fileio"},
    "isolation": {"records", "specs", "worker"},
    "worker": {"records", "specs", "judge", "compiler", "isolation"},
    "cli": {"records", "specs", "judge", "runs", "baselines", "options", "report", "fileio"},
}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once a process (the tests here walk every module many times; none changes a
    tree)."""
    return ast.parse(path.read_text(), str(path))


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code, as absolute names."""
    package = _name(path) if path.name == "__init__.py" else _name(path).rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def _internal(path: Path) -> set[str]:
    names = {_name(m) for m in MODULES}
    return {name for name in _imports(path) if name in names and name != _name(path)}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_400_lines(path):
    assert len(path.read_text().splitlines()) <= 400


def test_only_the_worker_package_imports_cupy_or_nvml():
    users = {
        str(path.relative_to(PACKAGE))
        for path in MODULES
        if {name.split(".")[0] for name in _imports(path)} & GPU_LIBRARIES
    }
    assert users and all(user.startswith("worker/") for user in users), users


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_import_no_pytest_no_gpu_and_nothing_downstream(package):
    for path in (PACKAGE / package).rglob("*.py"):
        roots = {name.split(".")[0] for name in _imports(path)}
        assert not roots & (GPU_LIBRARIES | {"pytest", "_pytest"}), path
        downstream = {n for n in _internal(path) if n.startswith(("pytest_gemm.worker", "pytest_gemm.plugin"))}
        # the protocol module is shared by both sides of the boundary; nothing else crosses it
        assert downstream <= {"pytest_gemm.worker.serve"} or package == "isolation", (path, downstream)


def test_the_pytest_process_side_never_imports_the_gpu_backend():
    for path in MODULES:
        if not _name(path).startswith("pytest_gemm.worker"):
            worker = {n for n in _internal(path) if n.startswith("pytest_gemm.worker")}
            assert worker <= {"pytest_gemm.worker", "pytest_gemm.worker.serve"}, (path, worker)


def test_there_are_no_import_cycles():
    graph = {_name(path): _internal(path) for path in MODULES}
    graph = {m: {d for d in deps if d in graph and not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                pytest.fail("import cycle: " + " -> ".join([*trail[trail.index(dep) :], dep]))
            if dep not in state:
                visit(dep, [*trail, dep])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_no_eval_or_exec_of_text():
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("eval", "exec"), path


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_each_package_imports_only_what_comes_before_it_in_the_flow(package):
    for path in MODULES:
        if _package(_name(path)) != package:
            continue
        used = {_package(name) for name in _internal(path)} - {package, ""}
        assert used <= LAYERS[package], (str(path.relative_to(PACKAGE)), sorted(used - LAYERS[package]))


def test_judgement_imports_nothing_from_the_report_layer():
    """judge/ returns data (a verdict kind and its facts); report/ words it. Never the other way round."""
    for path in (PACKAGE / "judge").rglob("*.py"):
        wording = {n for n in _internal(path) if n.startswith(("pytest_gemm.report", "pytest_gemm.plugin"))}
        assert not wording, (path, wording)


_FAIL_SETTINGS = ("fail_new", "fail_unstable", "fail-new", "fail-unstable")


def _reads_fail_settings_and_verdicts(node: ast.AST) -> bool:
    """Whether a function both names a fail setting and compares with the NEW or UNSTABLE gate verdict."""
    settings = verdicts = False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "GateVerdict":
            verdicts |= sub.attr in ("NEW", "UNSTABLE")
        name = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else None
        text = sub.value if isinstance(sub, ast.Constant) and isinstance(sub.value, str) else name
        settings |= text in _FAIL_SETTINGS
    return settings and verdicts


def test_the_rule_of_which_gate_verdict_fails_a_test_exists_once():
    """judge.gate.GatePolicy decides it; the plugin, merge and the summary read GateResult.fails."""
    deciding = []
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef) and _reads_fail_settings_and_verdicts(node):
                deciding.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert deciding == ["judge/gate.py:fails"]


def test_the_gates_defaults_are_defined_once():
    literals = []
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Constant) and node.value in (0.05, "0.05"):
                literals.append(str(path.relative_to(PACKAGE)))
    assert sorted(set(literals)) == ["judge/gate.py", "worker/rounds.py"]  # the threshold, and a batch's length


#: a fifth under the 400-line cap: the worker's and the plugin's modules, which every family and check touches, keep
#: that much room
ROOM = 320


@pytest.mark.parametrize("path", [p for p in MODULES if p.parent.name in ("worker", "plugin")], ids=str)
def test_the_worker_and_plugin_modules_keep_a_fifth_of_the_cap_free(path):
    assert len(path.read_text().splitlines()) <= ROOM, path


#: an issue's number as the package once cited them: "(#34 item 3)", "#35:", "issue 36" (not a colour, "#222;")
_ISSUE = re.compile(r"(?<![\w&#])#\d{2,3}(?=[\s:),.]|$)|\bissues? #?\d+")


def test_no_issue_number_in_the_package():
    """Code names a rule by what it is and its docs anchor; issue numbers are CHANGELOG.md's."""
    found = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in MODULES
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _ISSUE.search(line)
    ]
    assert not found, found


def _compares(node: ast.AST) -> list[ast.Compare]:
    return [sub for sub in ast.walk(node) if isinstance(sub, ast.Compare)]


def _names_in(node: ast.AST) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.add(repr(sub.value))
    return found


def _deciding(words: set[str]) -> dict[str, int]:
    """Each module with comparisons that mention one of ``words`` (names, attributes or string literals), and how
    many."""
    found: dict[str, int] = {}
    for path in MODULES:
        tree = _tree(path)
        count = sum(bool(_names_in(compare) & words) for compare in _compares(tree))
        if count:
            found[str(path.relative_to(PACKAGE))] = count
    return found


def test_the_kernels_kind_is_told_apart_in_one_place():
    """A kernel's kind answers facts (specs/kinds.py), and the schema says which kinds declare each key
    (specs/header.py); the worker's strategy for a kind is chosen by kernel_strategy, without comparing."""
    assert set(_deciding({"KernelKind", "CU", "PY", "'cu'", "'py'", "arrays"})) <= {"specs/kinds.py", "specs/header.py"}


#: where a family's own code lives: the dtypes and families defined, its header keys read, its rules, its strategies
FAMILY_MODULES = {
    "records/dtypes.py",
    "specs/families.py",
    "specs/header_keys.py",
    "specs/key_readers.py",
    "specs/scaling.py",
    "judge/scaled.py",
    "judge/scale_misread.py",
    "worker/inputs.py",
    "worker/peers.py",
    "worker/fp8_peer.py",
    "worker/grouped_fp8_peer.py",
}


def test_the_input_family_is_told_apart_in_one_place():
    """A dtype is tested against FP8 or INT8 (or a kernel for its scales) only in the family's own modules; the path
    every family takes (the case's expansion, the worker's verification and timing, judgement, the plugin, the report)
    asks the family (specs.families.family_of) and its strategies, never compares."""
    words = {"FP8", "'int8'", "'int32'", "'fp8_e4m3'", "'fp8_e5m2'", "scales", "scaled", "exact"}
    assert set(_deciding(words)) <= FAMILY_MODULES


def _made(classes: set[str]) -> set[str]:
    """The modules that call one of ``classes`` (make an instance of it)."""
    found = set()
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes:
                found.add(str(path.relative_to(PACKAGE)))
    return found


def test_each_strategy_is_made_in_its_one_place():
    assert _made({"CudaKernel", "PythonKernel", "TorchKernel"}) <= {"worker/kinds.py"}
    assert _made({"FloatInputs", "ScaledInputs", "IntegerInputs"}) <= {"worker/inputs.py"}
    assert _made({"CublasPeer", "CublasLtFp8Peer", "TorchGroupedPeer", "TorchEpiloguePeer", "NoPeer"}) <= {
        "worker/peers.py"
    }
    assert _made({"Layout", "GroupedLayout"}) <= {"worker/layouts.py"}
    assert _made({"NoEpilogue", "FusedEpilogue"}) <= {"worker/epilogues.py"}
    from pytest_gemm.worker import epilogues, inputs, kinds, layouts, peers

    assert callable(epilogues.epilogue_strategy)

    assert callable(kinds.kernel_strategy) and callable(inputs.input_strategy) and callable(peers.peer_strategy)
    assert callable(layouts.layout_strategy)


#: where a grouped GEMM's own code lives: its records, its header key, its rules, its layout, its peer, its words
GROUPED_MODULES = {
    "records/groups.py",
    "specs/cases.py",
    "specs/footprint.py",
    "specs/key_readers.py",
    "specs/spec.py",
    "judge/grouped.py",
    "worker/layouts.py",
    "worker/grouped.py",
    "worker/peers.py",
    "worker/grouped_peer.py",
    "worker/grouped_fp8_peer.py",
    "report/grouped.py",
}


def test_a_grouped_case_is_told_apart_in_one_place():
    """A case's groups are asked of its plan only in the grouped layout's own modules: the prepared case,
    verification, diagnosis, timing and the kernels' calls ask the layout strategy (worker/layouts.py) or the pure
    facts of a shape (specs/footprint.py), never ``case.plan``."""
    assert set(_deciding({"plan", "GroupedTruth"})) <= GROUPED_MODULES


#: where a fused epilogue's own code lives: its record, its header key, its truth and misreadings, its strategy, its
#: peer, the kernels' calls that pass its operands, and its words
EPILOGUE_MODULES = {
    "records/epilogue.py",
    "specs/key_readers.py",
    "specs/footprint.py",
    "judge/epilogue.py",
    "worker/epilogues.py",
    "worker/epilogue_peer.py",
    "worker/peers.py",
    "worker/python_calls.py",
    "worker/kinds.py",
    "worker/operands.py",
    "report/epilogue.py",
}


def test_a_fused_epilogue_is_told_apart_in_one_place():
    """Whether a case has an epilogue, and what it is, is asked only in the epilogue's own modules: the prepared case,
    verification, diagnosis and timing ask its strategy (worker/epilogues.py), never ``spec.epilogue``."""
    words = {"epilogue", "EpilogueTruth", "bias", "residual", "aux", "activation"}
    assert set(_deciding(words)) <= EPILOGUE_MODULES

"""Kernel files that are hostile, misread, misplaced or explosive (docs/bad-input.md): each answered clearly, at
collection, naming the file and the problem. Through pytester, on the CPU; runs that a regression could hang
or fill with memory run in a subprocess with a time limit and a memory limit.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path

import pytest

from pytest_gemm.specs import pyfile
from pytest_gemm.specs.bounds import DEFAULT_MAX_VARIANTS
from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.files import is_kernel_file, load_specs

from support import KERNELS, NAIVE_HEADER, TESTS, naive_project, requires_nvrtc, with_keys

#: pytest in a subprocess whose address space is capped (a file read whole from /dev/zero ends in MemoryError,
#: not in a machine out of memory); pytester.run's timeout ends a run that hangs
BOUNDED = (
    "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
    "import pytest; sys.exit(pytest.main(sys.argv[1:]))"
)
LIMIT_S = 60

NAIVE_IDS = [
    "kernels/naive.cu::sgemm_naive[fp32-64x64x64]",
    "kernels/naive.cu::sgemm_naive[fp32-64x64x64-a0.7b1.3]",
    "kernels/naive.cu::sgemm_naive[fp32-64x64x64-a-1.5b0]",
]

PY_KERNEL = """from pytest_gemm import gemm_kernel


@gemm_kernel(dtypes=["fp32"])
def k(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)
"""


@pytest.fixture
def project(pytester, naive_source):
    return naive_project(pytester, naive_source)


def _bounded(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.run(sys.executable, "-c", BOUNDED, "-p", "no:cacheprovider", *args, timeout=LIMIT_S)


def _ids(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and " " not in line]


# -- files that are not regular files, or too large -------------------------------------------------------------


@pytest.mark.parametrize("name", ["fifo.cu", "fifo_kernels.py"])
def test_a_fifo_named_like_a_kernel_file_is_a_collection_error_not_a_hang(project, name):
    """A FIFO named like a kernel file hung the run for ever; with --gemm-kernels it is a collection
    error that says what it is, in a folder and named on the command line, and the other kernels still run."""
    os.mkfifo(project.path / "kernels" / name)
    result = _bounded(project, "--gemm-kernels", "kernels", "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"kernels/{name}: is a FIFO, not a regular file"])
    assert _ids(result) == [i for i in _ids(result) if i.startswith("kernels/naive.cu::")] and NAIVE_IDS[0] in _ids(
        result
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    named = _bounded(project, "--gemm-kernels", f"kernels/{name}", "--collect-only", "-q")
    named.stdout.fnmatch_lines([f"kernels/{name}: is a FIFO, not a regular file"])
    assert "no pytest-gemm header" not in named.stdout.str()
    assert named.ret == pytest.ExitCode.TESTS_FAILED


def test_the_hints_pass_a_fifo_over_without_reading_it(project):
    """Without --gemm-kernels, the hint code (plugin/terminal.py -> specs/files.py) read the FIFO and hung;
    now it counts the real kernel file and passes the FIFO over."""
    os.mkfifo(project.path / "kernels" / "fifo.cu")
    result = _bounded(project, "kernels")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["pytest-gemm: kernels/ holds 1 kernel file; run with --gemm-kernels to collect it"])
    named = _bounded(project, "kernels/fifo.cu")
    assert named.ret == pytest.ExitCode.USAGE_ERROR  # pytest's own 'not found': it collects no FIFO
    assert "pytest-gemm:" not in named.stdout.str()


def test_a_symlink_to_dev_zero_is_refused_unread(project):
    """kernels/zero.cu -> /dev/zero was read whole by the hint code (all memory, then MemoryError); now
    it is a collection error with --gemm-kernels, and passed over by the hints without it."""
    (project.path / "kernels" / "zero.cu").symlink_to("/dev/zero")
    result = _bounded(project, "--gemm-kernels", "kernels", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["kernels/zero.cu: is a symlink to /dev/zero, a character device, not a regular file"])
    assert NAIVE_IDS[0] in _ids(result)
    assert "MemoryError" not in result.stdout.str() + result.stderr.str()
    hints = _bounded(project, "kernels")
    hints.stdout.fnmatch_lines(["pytest-gemm: kernels/ holds 1 kernel file; run with --gemm-kernels to collect it"])
    named = _bounded(project, "--gemm-kernels", "kernels/zero.cu")
    named.stdout.fnmatch_lines(["kernels/zero.cu: is a symlink to /dev/zero, a character device, not a regular file"])
    assert "MemoryError" not in named.stdout.str() + named.stderr.str()


def _sparse(path: Path, size: int, text: str = "", at: int = 0) -> None:
    """A file of ``size`` bytes, zeros but for ``text`` at byte ``at`` (sparse: quick to make, little disk)."""
    with open(path, "wb") as handle:
        handle.truncate(size)
        handle.seek(at)
        handle.write(text.encode())


def test_a_kernel_file_too_large_is_refused_before_it_is_read(project, naive_source):
    """A kernel file past the kernel files' bound (a sparse 2.1 GB file here, its header at the
    top) is a collection error saying its size and the most a kernel file may be."""
    _sparse(project.path / "kernels" / "huge.cu", 2_100_000_000, naive_source)
    result = _bounded(project, "--gemm-kernels", "kernels", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["kernels/huge.cu: is 2.1 GB; a kernel file may be at most 16 MB"])
    assert NAIVE_IDS[0] in _ids(result)


def test_a_large_file_beside_the_kernels_that_is_no_kernel_file_is_passed_over(project):
    """A regular file past 16 MB in a kernel folder that is no kernel file (generated data
    in a .py file, a .cu helper without a header) was a collection error; now it is passed over, while one that
    holds a header's start or a decorator, however deep in it, is still refused saying its size."""
    kernels = project.path / "kernels"
    _sparse(kernels / "table.py", 25_000_000, "TABLE = [\n")
    _sparse(kernels / "helper.cu", 25_000_000, "// a helper, included by the kernels\n")
    result = _bounded(project, "--gemm-kernels", "kernels", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "ERROR" not in result.stdout.str() and "16 MB" not in result.stdout.str()
    assert _ids(result) == ["kernels/naive.cu::compile[sm_80]", "kernels/naive.cu::compile[sm_90]", *NAIVE_IDS]
    _sparse(kernels / "late.py", 20_000_000, PY_KERNEL, at=19_000_000)
    _sparse(kernels / "late.cu", 20_000_000, "/* pytest-gemm\nentry = 'k'\n*/\n", at=(1 << 20) - 7)  # across a MB
    refused = _bounded(project, "--gemm-kernels", "kernels", "--collect-only", "-q")
    refused.stdout.fnmatch_lines_random(
        [
            "kernels/late.cu: is 20 MB; a kernel file may be at most 16 MB",
            "kernels/late.py: is 20 MB; a kernel file may be at most 16 MB",
        ]
    )
    assert "table.py" not in refused.stdout.str() and "helper.cu" not in refused.stdout.str()
    assert refused.ret == pytest.ExitCode.TESTS_FAILED
    named = _bounded(project, "--gemm-kernels", "kernels/late.py", "--collect-only", "-q")  # refused, not imported
    named.stdout.fnmatch_lines(["kernels/late.py: is 20 MB; a kernel file may be at most 16 MB"])


def test_a_large_kernel_file_saved_as_utf16_is_still_seen_to_be_one(tmp_path, naive_source):
    """A file too large to read is searched as it would be decoded (UTF-16 here)."""
    path = tmp_path / "wide.cu"
    path.write_bytes(("// padding\n" * 1_000_000 + naive_source).encode("utf-16"))
    assert is_kernel_file(path, test_module=False)
    path.write_bytes(("// padding\n" * 1_000_000).encode("utf-16"))
    assert not is_kernel_file(path, test_module=False)


READERS = """
import os, sys
from pathlib import Path
from pytest_gemm.records.request import Request
from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.files import declares_kernels, is_kernel_file, load_specs, read_specs
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.cufile import parse_cu_file
from pytest_gemm.worker.kernels import KernelFiles

for name in sys.argv[1:]:
    path = Path(name)
    print(name, "declares", declares_kernels(path, test_module=False), "is", is_kernel_file(path, test_module=False))
    for read in (load_specs, read_specs, lambda p, s: parse_cu_file(p)):
        try:
            read(path, name)
            print(name, "read")
        except KernelFileError as exc:
            print("refused:", exc)
    request = Request(path=str(path), shown=name, kernel="k", params=(), dtype="fp32", shape=Shape(64, 64, 64),
                      alpha=1.0, beta=0.0, seed=0, timing=None)
    try:
        KernelFiles().case(request)
    except KernelFileError as exc:
        print("worker refused:", exc)
"""


def test_every_reader_of_a_kernel_file_refuses_what_is_not_a_regular_file(pytester):
    """The hints, the specs (with the source hash) and the GPU worker's reading of a kernel file read
    regular files only (in a subprocess with a time and memory limit, so that a regression cannot hang the suite)."""
    os.mkfifo(pytester.path / "fifo.cu")
    (pytester.path / "zero.cu").symlink_to("/dev/zero")
    script = pytester.path / "readers.py"
    script.write_text(READERS)
    code = BOUNDED.split("import pytest")[0] + f"exec(open({str(script)!r}).read())"
    result = pytester.run(sys.executable, "-c", code, "fifo.cu", "zero.cu", timeout=LIMIT_S)
    assert result.ret == 0, result.stderr.str()
    out = result.stdout.lines
    assert "fifo.cu declares False is True" in out and "zero.cu declares False is True" in out
    assert out.count("refused: fifo.cu: is a FIFO, not a regular file") == 3
    assert out.count("refused: zero.cu: is a symlink to /dev/zero, a character device, not a regular file") == 3
    assert "worker refused: fifo.cu: is a FIFO, not a regular file" in out
    assert "worker refused: zero.cu: is a symlink to /dev/zero, a character device, not a regular file" in out
    assert not any(line.endswith(" read") for line in out)


# -- misplaced decorators ----------------------------------------------------------------------------------------

_DEF = '@gemm_kernel(dtypes=["fp32"])\ndef k(A, B, C, alpha, beta):\n    pass\n'


def _indented(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())


@pytest.mark.parametrize(
    ("body", "line", "what"),
    [
        (f"class Kernels:\n{_indented(_DEF)}", 5, "on a method of class 'Kernels'"),
        (_DEF.replace("def k", "async def k"), 4, "on an async def"),
        (f"if True:\n{_indented(_DEF)}", 5, "on a function under an if statement (line 4)"),
        (f"try:\n{_indented(_DEF)}except ImportError:\n    pass\n", 5, "on a function under a try statement (line 4)"),
        (f"with open(__file__):\n{_indented(_DEF)}", 5, "on a function under a with statement (line 4)"),
        (f"def make():\n{_indented(_DEF)}    return k\n", 5, "on a function inside function 'make'"),
        ('@gemm_kernel(dtypes=["fp32"])\nclass K:\n    pass\n', 4, "on a class"),
    ],
    ids=["method", "async", "if", "try", "with", "nested", "class"],
)
def test_a_misplaced_decorator_is_a_collection_error_naming_the_line(project, body, line, what):
    """@gemm_kernel on a method, an async def, or a function under if/try/with or inside another declared
    nothing, silently ('no tests collected'); now each is a collection error naming the file and line."""
    (project.path / "kernels" / "misplaced.py").write_text("from pytest_gemm import gemm_kernel\n\n\n" + body)
    result = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"kernels/misplaced.py:{line}: @gemm_kernel {what} declares no kernel: *"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert NAIVE_IDS[0] in _ids(result)  # the other kernel files still collect


def test_a_well_placed_kernel_beside_a_misplaced_one_is_still_an_error(project):
    """One misplaced decorator is an error even when the file declares other kernels correctly."""
    source = PY_KERNEL + "\n\nif True:\n" + _indented(_DEF.replace("def k", "def other"))
    (project.path / "kernels" / "mixed.py").write_text(source)
    result = project.runpytest("--gemm-kernels", "kernels/mixed.py", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["kernels/mixed.py:10: @gemm_kernel on a function under an if statement (line 9)*"])


# -- gemm_kernel named, not used ----------------------------------------------------------------------------------


def test_a_file_that_only_names_gemm_kernel_is_no_kernel_file_and_the_hint_says_so(pytester):
    """A .py file naming gemm_kernel only in a comment or a string gave 'no tests collected' with no hint;
    it is no kernel file (no collection error), and the hint says the folder holds none and names the file."""
    pytester.makeini("[pytest]\ngemm_shapes = 64\n")
    kernels = pytester.mkdir("kernels")
    (kernels / "notes.py").write_text("# TODO: use @gemm_kernel(dtypes=['fp32']) here\nX = 1\n")
    (kernels / "strings.py").write_text('DOC = """@gemm_kernel(dtypes=["fp32"])\ndef k(A, B, C, a, b): ..."""\n')
    result = pytester.runpytest("--gemm-kernels", "kernels")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "ERROR collecting" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "pytest-gemm: kernels/ holds no kernel file (*",
            "pytest-gemm: kernels/notes.py names gemm_kernel but declares no kernel (a kernel is a top-level def "
            "under @gemm_kernel(...), or under an alias the file imports, such as `from pytest_gemm import "
            "gemm_kernel as gk`: the file is read without running it)",
            "pytest-gemm: kernels/strings.py names gemm_kernel but declares no kernel *",
        ]
    )
    named = pytester.runpytest("--gemm-kernels", "kernels/notes.py")
    named.stdout.fnmatch_lines(["pytest-gemm: kernels/notes.py names gemm_kernel but declares no kernel *"])


def test_aliased_kernels_are_collected_and_a_call_that_declares_nothing_is_an_error_beside_other_kernels(project):
    """Beside another kernel file, `@gk(...)` (`from pytest_gemm import gemm_kernel as gk`) and
    `k = gemm_kernel(...)(lambda ...)` were dropped without a word (`2 passed, 9 skipped`, rc 0), and the hint about a
    file that names gemm_kernel came only for a file alone: the aliases are collected, the call is a collection error
    naming its line and what to write, and the hint names the file whatever else the folder holds."""
    kernels = project.path / "kernels"
    (kernels / "alias.py").write_text(
        PY_KERNEL.replace("import gemm_kernel", "import gemm_kernel as gk").replace("@gemm_kernel", "@gk")
    )
    (kernels / "module.py").write_text(
        PY_KERNEL.replace("from pytest_gemm import gemm_kernel", "import pytest_gemm as pg").replace(
            "@gemm_kernel", "@pg.gemm_kernel"
        )
    )
    (kernels / "lam.py").write_text(
        'from pytest_gemm import gemm_kernel\n\nk = gemm_kernel(dtypes=["fp32"])(lambda A, B, C, alpha, beta: None)\n'
    )
    (kernels / "notes.py").write_text(
        "from pytest_gemm import gemm_kernel\n\n\ndef k(A, B, C, alpha, beta):\n    pass\n"
    )
    result = project.runpytest("--gemm-kernels", "kernels", "-m", "gpu", "-q")
    result.stdout.fnmatch_lines(
        [
            "kernels/lam.py:3: gemm_kernel(...) applied to a lambda declares no kernel: the file is read without "
            "running it, so a kernel is a plain def at the top level under the decorator; write "
            "@gemm_kernel(dtypes=['fp32']) on the line above def k(...): instead",
            "pytest-gemm: kernels/notes.py names gemm_kernel but declares no kernel *",
            "9 skipped, 2 deselected, 1 error in *",  # without a device: 3 cases of each of the three kernel files
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    ids = _ids(project.runpytest("--gemm-kernels", "kernels", "--co", "-q"))
    assert {i.split("::")[0] for i in ids} == {"kernels/naive.cu", "kernels/alias.py", "kernels/module.py"}
    assert "kernels/alias.py::k[fp32-64x64x64]" in ids and "kernels/module.py::k[fp32-64x64x64]" in ids


def test_an_alias_bound_with_a_comment_or_an_annotation_is_collected_without_a_hint(project):
    """`gk = gemm_kernel  # alias` and `gk: Any = gemm_kernel` bound an alias the file was not seen to bind: the `@gk`
    kernels were not collected, and the hint said the file declares no kernel. Both are collected, a file named like
    a test module too (which pytest would otherwise import), and no hint is given."""
    kernels = project.path / "kernels"
    (kernels / "annotated.py").write_text(
        PY_KERNEL.replace("\n\n\n@gemm_kernel", "\nfrom typing import Any\n\ngk: Any = gemm_kernel\n\n\n@gk")
    )
    (kernels / "test_commented.py").write_text(
        PY_KERNEL.replace("\n\n\n@gemm_kernel", "\n\ngk = gemm_kernel  # alias\n\n\n@gk")
    )
    result = project.runpytest("--gemm-kernels", "kernels", "--co", "-q")
    ids = _ids(result)
    assert {i.split("::")[0] for i in ids} == {"kernels/naive.cu", "kernels/annotated.py", "kernels/test_commented.py"}
    assert "kernels/annotated.py::k[fp32-64x64x64]" in ids and "kernels/test_commented.py::k[fp32-64x64x64]" in ids
    assert "declares no kernel" not in result.stdout.str()


# -- kernel files outside the rootdir ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "how",
    [[], ["--rootdir=proj"], ["-c", "proj/pytest.ini"]],
    ids=["the ini's folder", "--rootdir", "-c"],
)
def test_a_kernel_file_outside_the_rootdir_is_refused_naming_both(pytester, naive_source, how):
    """A kernel file outside pytest's rootdir had cases whose test ids named no file (`::sgemm_naive[...]`) and whose
    file was its absolute path, which saved runs and baseline files refuse: the run's own saved run and baselines
    could not be read back. It is a collection error naming the file and the rootdir and saying what to do; the
    project's own kernels are collected as ever."""
    (pytester.mkdir("proj") / "pytest.ini").write_text("[pytest]\n")
    (pytester.mkdir("proj/kernels") / "naive.cu").write_text(naive_source)
    (pytester.path / "outside.cu").write_text(naive_source)
    result = pytester.runpytest(
        *how, "--gemm-kernels", "proj/kernels", "outside.cu", "--gemm-shapes", "64", "--co", "-q"
    )
    root, outside = pytester.path / "proj", pytester.path / "outside.cu"
    result.stdout.fnmatch_lines(
        [
            f"{outside}: lies outside the rootdir, {root}: a case's test id, its key in saved runs and baseline files, "
            "names its kernel file by its path in the rootdir; put the file, or a symlink to it, inside the rootdir, "
            "or give --rootdir a folder that holds both (the baseline folder is found relative to it)",
        ]
    )
    ids = [i for i in _ids(result) if "compile[" not in i]
    assert ids == NAIVE_IDS and result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_kernel_file_whose_path_saved_runs_would_read_as_leaving_the_project_is_refused(project, naive_source):
    """`C:k.cu` and `kernels/x\\..\\..\\k.cu` are files inside the project on Linux, but saved runs and baseline files
    read a drive or a backslash as Windows does, and refused the run's own cases: such a file is a collection error
    saying to rename it."""
    (project.path / "C:k.cu").write_text(naive_source)
    (project.path / "kernels" / "x\\..\\..\\k.cu").write_text(naive_source)
    result = project.runpytest("--gemm-kernels", "kernels", "C:k.cu", "--co", "-q")
    said = (
        ": cannot be named in saved runs and baseline files, which would read its path as one that leaves the project "
        "(a name that starts with a drive, such as 'C:', or a backslash, or holds '..' between backslashes): rename it"
    )
    result.stdout.fnmatch_lines_random([f"C:k.cu{said}", f"kernels/x\\..\\..\\k.cu{said}"])
    assert [i for i in _ids(result) if "compile[" not in i] == NAIVE_IDS


def test_a_kernel_file_outside_the_rootdir_is_collected_through_a_symlink_inside_it(
    project, naive_source, tmp_path_factory
):
    """What the refusal says to do: a symlink inside the rootdir to a kernel file outside it is collected under the
    symlink's path."""
    outside = tmp_path_factory.mktemp("elsewhere") / "shared.cu"
    outside.write_text(naive_source)
    (project.path / "kernels" / "shared.cu").symlink_to(outside)
    ids = [i for i in _ids(project.runpytest("--gemm-kernels", "kernels", "--co", "-q")) if "compile[" not in i]
    assert ids == NAIVE_IDS + [i.replace("naive.cu", "shared.cu") for i in NAIVE_IDS]


_BROKEN = "from pytest_gemm import gemm_kernel\n\n\n@gemm_kernel(dtypes=['fp32'])\ndef (:\n"
_WITH_TEST = PY_KERNEL + "\n\ndef test_it():\n    assert k\n"


@pytest.mark.parametrize(
    ("name", "source", "alone", "imported"),
    [
        ("comment.py", "# @gemm_kernel(dtypes=['fp32'])\n", False, False),
        ("string.py", "'''@gemm_kernel(dtypes=['fp32'])'''\n", False, False),
        ("imports.py", "from pytest_gemm import gemm_kernel\n", False, False),
        ("kernel.py", PY_KERNEL, True, True),
        ("misplaced.py", "from pytest_gemm import gemm_kernel\nif True:\n" + _indented(_DEF), True, True),
        ("attribute.py", PY_KERNEL.replace("@gemm_kernel", "@pytest_gemm.gemm_kernel"), True, True),
        ("uncalled.py", PY_KERNEL.replace('@gemm_kernel(dtypes=["fp32"])', "@ pytest_gemm.gemm_kernel"), True, True),
        ("broken.py", _BROKEN, True, False),  # its syntax error is shown: pytest's own, for a module it imports
        ("broken_import.py", "from pytest_gemm import gemm_kernel\ndef (:\n", True, False),  # a test module's is unread
        ("test_kernels.py", PY_KERNEL, True, True),  # a kernel file named like a test module
        ("with_tests.py", _WITH_TEST, True, False),  # a test module, when pytest imports it: whatever its name
        ("with_class.py", PY_KERNEL + "\n\nclass TestK:\n    pass\n", True, False),
        ("test_named.py", PY_KERNEL.replace("def k(", "def test_k("), True, True),  # a kernel, not a test
        ("conftest.py", PY_KERNEL, False, False),
    ],
)
def test_a_py_file_is_a_kernel_file_by_its_syntax_tree(tmp_path, name, source, alone, imported):
    """Whether a .py file is a kernel file is read from its
    syntax tree (a gemm_kernel decorator anywhere), not from the substring; a module pytest imports is one only
    when it declares kernels and no tests (a kernel whose def is named test_* is no test) and is valid Python."""
    path = tmp_path / name
    path.write_text(source)
    assert is_kernel_file(path, test_module=False) is alone
    assert is_kernel_file(path, test_module=True) is imported


# -- a kernel file named test_*.py ------------------------------------------------------------------------------


def _side_effect_kernel(marker: Path) -> str:
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n" + PY_KERNEL


def test_a_kernel_file_named_like_a_test_module_is_collected_as_a_kernel_file(project):
    """kernels/test_mykernel.py was mis-described ('kernels/ holds no kernel file') and imported as a test
    module, running its top level; now it is collected as a kernel file and never imported."""
    marker = project.path / "imported.txt"
    (project.path / "kernels" / "test_mykernel.py").write_text(_side_effect_kernel(marker))
    result = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q")
    assert "kernels/test_mykernel.py::k[fp32-64x64x64]" in _ids(result)
    assert "holds no kernel file" not in result.stdout.str()
    assert not marker.exists()
    named = project.runpytest("--gemm-kernels", "kernels/test_mykernel.py", "--collect-only", "-q")
    assert "kernels/test_mykernel.py::k[fp32-64x64x64]" in _ids(named)
    assert not marker.exists()


def test_a_kernel_file_named_like_a_test_module_is_not_imported_without_the_flag(project):
    """Without --gemm-kernels the file is not imported either, and the hint counts it as a kernel file."""
    marker = project.path / "imported.txt"
    (project.path / "kernels" / "test_mykernel.py").write_text(_side_effect_kernel(marker))
    result = project.runpytest("kernels")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["pytest-gemm: kernels/ holds 2 kernel files; run with --gemm-kernels to collect them"])
    assert not marker.exists()


def test_a_test_module_that_uses_gemm_kernel_stays_a_test_module(project):
    """A test module that imports gemm_kernel, names it in strings, or even declares a kernel beside its
    tests is still a test module, with or without --gemm-kernels."""
    tests = project.mkdir("tests")
    (tests / "test_mentions.py").write_text(
        "from pytest_gemm import gemm_kernel\n\nSOURCE = '@gemm_kernel(dtypes=[\"fp32\"])'\n\n\n"
        "def test_mentions():\n    assert callable(gemm_kernel) and 'gemm_kernel' in SOURCE\n"
    )
    (tests / "test_declares.py").write_text(PY_KERNEL + "\n\ndef test_declares():\n    assert callable(k)\n")
    for args in (["--gemm-kernels", "kernels", "tests", "-m", "not gemm"], ["tests"]):
        result = project.runpytest(*args)
        result.assert_outcomes(passed=2)


@pytest.mark.parametrize("gemm", [[], ["--gemm-kernels", "-m", "not gemm"]], ids=["without", "with"])
def test_a_module_that_declares_a_kernel_and_tests_is_a_test_module_whatever_its_name(project, gemm):
    """mykernels_test.py (pytest's *_test.py) declaring a kernel and a failing test was
    taken as a kernel file and never run ('no tests ran'); a module pytest imports that defines tests is a test
    module whatever its name, with or without --gemm-kernels."""
    (project.path / "mykernels_test.py").write_text(PY_KERNEL + "\n\ndef test_something():\n    assert False\n")
    result = project.runpytest(*gemm, "mykernels_test.py")
    result.assert_outcomes(failed=1)
    walked = project.runpytest(*gemm, ".")
    walked.assert_outcomes(failed=1)


def test_a_custom_python_files_pattern_decides_which_modules_are_test_modules(project):
    """Under python_files = check_*.py, a check_ module with a kernel and tests is a test
    module (its test runs), and one with a kernel alone is a kernel file, collected with --gemm-kernels and never
    imported."""
    project.makeini("[pytest]\ngemm_shapes = 64\npython_files = check_*.py\n")
    (project.path / "check_uses.py").write_text(_WITH_TEST)
    marker = project.path / "imported.txt"
    (project.path / "kernels" / "check_kernel.py").write_text(_side_effect_kernel(marker))
    result = project.runpytest("check_uses.py", "kernels")
    result.assert_outcomes(passed=1)
    assert not marker.exists()
    gemm = project.runpytest("--gemm-kernels", "check_uses.py", "kernels", "--collect-only", "-q")
    assert "check_uses.py::test_it" in _ids(gemm) and "kernels/check_kernel.py::k[fp32-64x64x64]" in _ids(gemm)
    assert not marker.exists()


@pytest.mark.parametrize("gemm", [[], ["--gemm-kernels"]], ids=["without", "with"])
def test_a_test_module_that_is_not_valid_python_is_pytests_to_report(project, gemm):
    """broken_test.py, which uses @gemm_kernel but is not valid Python, was taken as a
    kernel file (silently passed over without --gemm-kernels); pytest reports it, as it does any module."""
    (project.path / "broken_test.py").write_text(_BROKEN)
    result = project.runpytest(*gemm, "broken_test.py")
    result.stdout.fnmatch_lines(["*ERROR collecting broken_test.py*", "*SyntaxError*"])
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if gemm else pytest.ExitCode.INTERRUPTED)


def test_a_large_test_module_is_imported_as_ever(project):
    """A test module past the kernel files' 16 MB (here a long comment) that declares a
    kernel is no kernel file to refuse: pytest imports it and its test runs."""
    source = _WITH_TEST + "\n# " + "x" * 17_000_000 + "\n"
    (project.path / "big_test.py").write_text(source)
    result = project.runpytest("--gemm-kernels", "big_test.py", "-m", "not gemm")
    result.assert_outcomes(passed=1)


def test_a_kernel_whose_def_is_named_test_is_a_kernel_not_a_test(project):
    """A decorated kernel named test_k made its file a test module: imported without
    --gemm-kernels (test_k then asked for fixtures A, B, C ...); it is a kernel file, collected with the flag."""
    marker = project.path / "imported.txt"
    (project.path / "kernels" / "test_tk.py").write_text(_side_effect_kernel(marker).replace("def k(", "def test_k("))
    result = project.runpytest("kernels/test_tk.py")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert not marker.exists() and "fixture" not in result.stdout.str()
    gemm = project.runpytest("--gemm-kernels", "kernels/test_tk.py", "--collect-only", "-q")
    assert "kernels/test_tk.py::test_k[fp32-64x64x64]" in _ids(gemm)
    assert not marker.exists()


def test_a_module_that_only_imports_gemm_kernel_is_not_parsed(monkeypatch):
    """A module that names gemm_kernel only in an import (as test modules do) is not
    parsed to find out whether it declares a kernel; one that may hold the decorator is, misplaced ones included."""
    parsed = []
    real = pyfile.ast.parse
    monkeypatch.setattr(pyfile.ast, "parse", lambda text, *a, **k: parsed.append(text) or real(text, *a, **k))
    imports = "from pytest_gemm import gemm_kernel\n\n\ndef test_it():\n    assert gemm_kernel\n"
    assert not pyfile.py_facts(imports).declares and parsed == []
    misplaced = "from pytest_gemm import gemm_kernel\nif True:\n" + _indented(_DEF)
    assert pyfile.py_facts(misplaced).declares and parsed == [misplaced]


def test_this_projects_own_test_modules_are_not_kernel_files():
    """This project's tests name gemm_kernel in strings and imports; none is a kernel file."""
    modules = sorted(TESTS.rglob("test_*.py"))
    assert [p.name for p in modules if "gemm_kernel" in p.read_text(encoding="utf-8")]  # the case in point
    assert [p.name for p in modules if is_kernel_file(p, test_module=True)] == []


# -- CR-only line ends, UTF-16 ---------------------------------------------------------------------------------

NAIVE = (KERNELS / "01_naive.cu").read_text(encoding="utf-8")
ENCODINGS = {
    "utf16.cu": NAIVE.encode("utf-16"),  # with its byte order mark, little-endian here
    "utf16be.cu": b"\xfe\xff" + NAIVE.encode("utf-16-be"),
    "cr.cu": NAIVE.replace("\n", "\r").encode(),
    "crlf.cu": NAIVE.replace("\n", "\r\n").encode(),
    "bom.cu": b"\xef\xbb\xbf" + NAIVE.encode(),
}


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_a_kernel_file_in_another_encoding_or_line_ends_reads_as_the_same_kernel(tmp_path, name):
    """A kernel file with CR-only line ends, or saved as UTF-16, was said to have no header; it reads as
    the same kernel (header, line, and the very text NVRTC compiles), in the pytest process and the GPU worker."""
    from pytest_gemm.records.request import Request
    from pytest_gemm.records.shapes import Shape
    from pytest_gemm.worker.kernels import KernelFiles

    path = tmp_path / name
    path.write_bytes(ENCODINGS[name])
    (expected,) = load_specs(KERNELS / "01_naive.cu", "k.cu")
    (spec,) = load_specs(path, "k.cu")
    assert (spec.name, spec.line, spec.block, spec.grid) == (
        expected.name,
        expected.line,
        expected.block,
        expected.grid,
    )
    assert spec.source == expected.source  # what NVRTC compiles: one text, whatever the bytes
    request = Request(
        path=str(path),
        shown="k.cu",
        kernel=spec.name,
        params=(),
        dtype="fp32",
        shape=Shape(64, 64, 64),
        alpha=1.0,
        beta=0.0,
        seed=0,
        timing=None,
    )
    assert KernelFiles().case(request).spec.source == expected.source  # what the worker compiles


@requires_nvrtc
def test_compile_tests_pass_for_utf16_and_cr_only_copies_of_a_bundled_kernel(pytester):
    """The compile tests of UTF-16 and CR-only copies of kernels/01_naive.cu pass (NVRTC, no GPU)."""
    pytester.makeini("[pytest]\ngemm_shapes = 64\n")
    kernels = pytester.mkdir("kernels")
    for name in ("utf16.cu", "cr.cu"):
        (kernels / name).write_bytes(ENCODINGS[name])
    result = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--gemm-archs", "sm_80", "-v")
    result.stdout.fnmatch_lines_random(["*kernels/cr.cu::compile[[]sm_80[]] PASSED*", "*kernels/utf16.cu::*PASSED*"])
    result.assert_outcomes(passed=2, deselected=6)
    assert "no pytest-gemm header" not in result.stdout.str()


def test_a_python_kernel_saved_as_utf16_is_a_clear_collection_error(project):
    """Python cannot import a source file saved as UTF-16: a collection error says so, and what to do."""
    (project.path / "kernels" / "wide.py").write_bytes(PY_KERNEL.encode("utf-16"))
    (project.path / "kernels" / "cr.py").write_bytes(PY_KERNEL.replace("\n", "\r").encode())
    result = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "kernels/wide.py: is saved as UTF-16 (it starts with a UTF-16 byte order mark); Python reads source "
            "files as UTF-8 only, so it cannot be imported: save it as UTF-8"
        ]
    )
    assert "kernels/cr.py::k[fp32-64x64x64]" in _ids(result)  # CR-only line ends read right


# -- a param value listed twice -----------------------------------------------------------------------------------


def test_a_param_value_listed_twice_is_a_collection_error(project, naive_source):
    """TILE = [16, 16] gave duplicate test ids (and the summary collapsed them): a collection error naming
    the param and the value, for .cu headers and .py kernels' params=... alike."""
    (project.path / "kernels" / "dup.cu").write_text(
        with_keys(naive_source, name='"dup"', params="{ TILE = [16, 32, 16] }")
    )
    (project.path / "kernels" / "dup.py").write_text(
        PY_KERNEL.replace('dtypes=["fp32"]', 'dtypes=["fp32"], params={"T": [1, 2], "U": [4, 4]}')
    )
    result = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q")
    result.stdout.fnmatch_lines_random(
        [
            "kernels/dup.cu:2: key 'params': TILE: the value 16 is listed twice; *same ids",
            "kernels/dup.py:4: key 'params': U: the value 4 is listed twice; *same ids",
        ]
    )
    assert not any(i.startswith("kernels/dup.") for i in _ids(result))


# -- variant explosions ----------------------------------------------------------------------------------------


def test_ten_thousand_variants_are_refused_saying_how_many_and_how_to_allow_them(project, naive_source):
    """Params giving 10,000 variants were accepted silently (110,000 tests); now one collection error names
    the file, the kernel, the count and the option that raises the limit, and comes at once."""
    values = list(range(1, 101))
    params = f"{{ BX = {values}, BY = {values} }}"
    (project.path / "kernels" / "wide.cu").write_text(with_keys(naive_source, name='"wide"', params=params))
    result = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "kernels/wide.cu:2: key 'params': wide's params give 10,000 variants (100 BX x 100 BY), each compiled and "
            "run at every shape; a kernel may have at most 1,024 (--gemm-max-variants / gemm_max_variants raises the "
            "limit)"
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert len(_ids(result)) == 2 + 3  # naive.cu's compile items and cases only


def test_the_variant_limit_is_an_option_and_an_ini_setting(project, naive_source):
    """The limit is --gemm-max-variants (ini gemm_max_variants), for .cu and .py kernels alike."""
    (project.path / "kernels" / "naive.cu").write_text(
        with_keys(naive_source, params="{ A1 = [1, 2, 3], A2 = [1, 2] }")
    )
    (project.path / "kernels" / "sweep.py").write_text(
        PY_KERNEL.replace('dtypes=["fp32"]', 'dtypes=["fp32"], params={"T": [1, 2, 3, 4, 5, 6, 7]}')
    )
    project.makeini("[pytest]\ngemm_shapes = 64\ngemm_max_variants = 5\n")
    refused = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q")
    refused.stdout.fnmatch_lines_random(
        [
            "kernels/naive.cu:2: key 'params': sgemm_naive's params give 6 variants (3 A1 x 2 A2), * at most 5 *",
            "kernels/sweep.py:4: key 'params': k's params give 7 variants (7 T), * at most 5 *",
        ]
    )
    allowed = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q", "--gemm-max-variants", "7")
    assert allowed.ret == pytest.ExitCode.OK
    assert len([i for i in _ids(allowed) if "::compile[" in i]) == 6 * 2  # 6 variants, 2 architectures
    assert len([i for i in _ids(allowed) if i.startswith("kernels/sweep.py::")]) == 7 * 3  # 3 alpha/beta each
    bad = project.runpytest("--gemm-kernels", "kernels", "--gemm-max-variants", "0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gemm-max-variants / gemm_max_variants: expected an integer from 1 to" in bad.stderr.str()


def test_the_bundled_kernels_lie_far_inside_the_default_variant_limit():
    """The default (1024) is 128 times the bundled kernels' most variants (8): a real sweep fits."""
    counts = [spec.variant_count for path in sorted(KERNELS.glob("*.cu")) for spec in load_specs(path, path.name)]
    assert max(counts) * 128 == DEFAULT_MAX_VARIANTS


# -- symlink loops and files reached twice --------------------------------------------------------------------


def test_a_symlink_loop_in_the_kernel_folder_is_not_descended(project):
    """kernels/loop -> .. made pytest's walk collect the same file 41 times (or run for minutes); with
    --gemm-kernels the loop is not descended, and a line says so."""
    (project.path / "kernels" / "loop").symlink_to("..", target_is_directory=True)
    result = _bounded(project, "--gemm-kernels", "kernels", "--collect-only", "-q")
    assert _ids(result) == ["kernels/naive.cu::compile[sm_80]", "kernels/naive.cu::compile[sm_90]", *NAIVE_IDS]
    result.stdout.fnmatch_lines(
        [f"pytest-gemm: kernels/loop/ is a symlink to {project.path}, a folder that holds it: not descended*"]
    )
    assert result.ret == pytest.ExitCode.OK


def test_a_symlink_loop_is_not_descended_in_a_plain_run_either(project):
    """A plain `pytest kernels/` (no --gemm-kernels) over two symlink loops went round them until
    killed (pytest's own walk, -p no:gemm too); with pytest-gemm installed the loops are passed over and said."""
    (project.path / "kernels" / "loop").symlink_to("..", target_is_directory=True)
    (project.path / "kernels" / "self").symlink_to(".", target_is_directory=True)
    (project.path / "kernels" / "test_ok.py").write_text("def test_ok():\n    pass\n")
    result = _bounded(project, "kernels", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines_random(
        [
            f"pytest-gemm: kernels/loop/ is a symlink to {project.path}, a folder that holds it: not descended*",
            f"pytest-gemm: kernels/self/ is a symlink to {project.path / 'kernels'}, a folder that holds it: *",
            "1 passed*",
        ]
    )


def test_a_kernel_file_reached_through_two_paths_is_collected_once(project):
    """The same kernel file reached again through a symlink (a file link, a linked folder) is collected
    once, and a line names both paths."""
    (project.path / "kernels" / "alias.cu").symlink_to("naive.cu")
    shared = project.mkdir("shared")
    (shared / "tiled.cu").write_text((KERNELS / "02_smem_tiling.cu").read_text())
    (project.path / "kernels" / "more").symlink_to("../shared", target_is_directory=True)
    result = _bounded(project, "--gemm-kernels", "kernels", "shared", "--collect-only", "-q")
    ids = _ids(result)
    assert not any(i.startswith("kernels/alias.cu::") for i in ids)
    assert [i for i in ids if i.startswith("kernels/naive.cu::")] == [
        "kernels/naive.cu::compile[sm_80]",
        "kernels/naive.cu::compile[sm_90]",
        *NAIVE_IDS,
    ]
    tiled = {i.split("::")[0] for i in ids if "tiled.cu" in i}
    assert tiled == {"shared/tiled.cu"}  # by its own path, which the run walks too
    result.stdout.fnmatch_lines_random(
        [
            "pytest-gemm: kernels/alias.cu is kernels/naive.cu (the same file, through a symlink): collected once, "
            "as kernels/naive.cu",
            "pytest-gemm: kernels/more/tiled.cu is shared/tiled.cu (the same file, through a symlink): collected "
            "once, as shared/tiled.cu",
        ]
    )
    alone = _bounded(project, "--gemm-kernels", "kernels", "--collect-only", "-q")
    assert {i.split("::")[0] for i in _ids(alone) if "tiled.cu" in i} == {"kernels/more/tiled.cu"}  # its one way
    (project.path / "linked").symlink_to("kernels", target_is_directory=True)
    via_link = _bounded(project, "--gemm-kernels", "linked", "--collect-only", "-q")  # a linked folder, named
    assert "linked/naive.cu::compile[sm_80]" in _ids(via_link)
    assert "pytest-gemm: linked/naive.cu is" not in via_link.stdout.str()


@pytest.mark.parametrize(("link", "to"), [("self", "."), ("loop", "..")])
def test_a_run_given_a_path_through_a_symlink_collects_the_kernels_there(project, link, to):
    """`pytest --gemm-kernels kernels/self` (self -> .) ran nothing (rc 5), saying the file there "is kernels/naive.cu
    ... collected once, as kernels/naive.cu", a path the run does not collect; the kernel is collected under the path
    the run walks, and no note names a path outside the run."""
    (project.path / "kernels" / link).symlink_to(to, target_is_directory=True)
    result = _bounded(project, "--gemm-kernels", f"kernels/{link}", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    naive = [i for i in _ids(result) if i.split("::")[0].endswith("naive.cu")]
    assert len(naive) == 2 + 3, result.stdout.str()
    assert "(the same file, through a symlink)" not in result.stdout.str()
    if link == "self":  # (through loop, pytest takes the ini file beside kernels/ as its rootdir's)
        assert "kernels/self/ is a symlink" not in result.stdout.str()  # the run's own path is walked, not a loop
    both = _bounded(project, "--gemm-kernels", f"kernels/{link}", "kernels", "--collect-only", "-q")
    assert len([i for i in _ids(both) if i.split("::")[0].endswith("naive.cu")]) == 2 + 3  # once, by one path


def test_the_walks_notes_come_from_xdist_workers_at_the_end(project):
    """Under pytest-xdist only the workers walk, and their notes were lost (the
    controlling process says what it collected); each is said once, at the end of the run."""
    (project.path / "kernels" / "loop").symlink_to("..", target_is_directory=True)
    (project.path / "kernels" / "alias.cu").symlink_to("naive.cu")
    result = project.runpytest("--gemm-kernels", "kernels", "-p", "xdist", "-n", "2", "-m", "not gemm")
    loop = f"pytest-gemm: kernels/loop/ is a symlink to {project.path}, a folder that holds it: not descended*"
    alias = "pytest-gemm: kernels/alias.cu is kernels/naive.cu (the same file, through a symlink): collected once*"
    result.stdout.fnmatch_lines_random([loop, alias])
    assert len(fnmatch.filter(result.stdout.lines, loop)) == 1 and len(fnmatch.filter(result.stdout.lines, alias)) == 1


# -- compiler options that write files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    [
        "--time=t.csv",
        "-time=t.csv",
        "--fdevice-time-trace=trace.json",
        "-fdevice-time-trace=trace.json",
        "--create-pch=k.pch",
        "-create-pch=k.pch",
        "--use-pch=k.pch",
        "-use-pch=k.pch",
        "--pch",
        "-pch",
        "--pch-dir=pch",
        "-pch-dir=pch",
    ],
)
def test_nvrtc_options_that_write_files_are_refused(flag):
    """Every NVRTC option that writes (or reads) a file of its own is refused in the header's checks,
    naming the option and why."""
    source = NAIVE_HEADER.replace("*/", f'options = ["-use_fast_math", "{flag}"]\n*/')
    with pytest.raises(KernelFileError, match=r"^k\.cu:2: key 'options': '" + flag + "': NVRTC would ") as caught:
        parse_cu_source("k.cu", source)
    assert "pytest-gemm refuses compiler options that write or read files of their own" in str(caught.value)


def test_options_that_write_no_file_are_still_taken():
    """The refusal is of the file-writing options only (these write nothing)."""
    source = NAIVE_HEADER.replace("*/", 'options = ["-use_fast_math", "--pch-messages", "-lineinfo", "-G"]\n*/')
    (spec,) = parse_cu_source("k.cu", source)
    assert spec.options == ("-use_fast_math", "--pch-messages", "-lineinfo", "-G")


def test_a_time_option_in_a_header_leaves_the_users_file_alone(project, naive_source):
    """Header options = ["--time=FILE"] made NVRTC append timing lines to any existing file, from the
    pytest process; now it is a collection error naming the file and the option, and FILE is untouched."""
    notes = project.path / "notes.txt"
    notes.write_text("my notes\n")
    (project.path / "kernels" / "naive.cu").write_text(with_keys(naive_source, options=f'["--time={notes}"]'))
    result = project.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--gemm-archs", "sm_80")
    result.stdout.fnmatch_lines(
        [f"kernels/naive.cu:2: key 'options': '--time={notes}': NVRTC would append a CSV of each compile phase's *"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert notes.read_text() == "my notes\n"

"""Options and ini settings as a user writes them, and what a selection leaves (docs/bad-input.md): TOML lists
wherever the command line takes a comma-separated list, a bad ini value named with its setting (exit 4), no empty
architecture list, a selection that leaves no GPU case said (and a usage error under --gemm-require-gpu), an
unwritable project run without the compile cache, and --gemm-kernels described as the switch it is. Through
pytester, on the CPU.
"""

from __future__ import annotations

import os

import pytest

from pytest_gemm.options import OPTIONS

from support import NAIVE_HEADER


def _kernel(name: str, *, dtypes: str = '["fp32"]', requires: str | None = None) -> str:
    """A header-only kernel file (enough to collect) named ``name``."""
    header = NAIVE_HEADER.replace('entry = "sgemm_naive"', f'name = "{name}"\nentry = "sgemm_naive"')
    header = header.replace('dtypes = ["fp32"]', f"dtypes = {dtypes}")
    if requires is not None:
        header = header.replace("*/", f'requires = ["{requires}"]\n*/')
    return header + 'extern "C" __global__ void sgemm_naive() {}\n'


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """Two fp32 kernels (naive, tiled) in kernels/, and no configuration file yet."""
    kernels = pytester.mkdir("kernels")
    (kernels / "naive.cu").write_text(_kernel("naive"))
    (kernels / "tiled.cu").write_text(_kernel("tiled"))
    return pytester


def _ids(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if "::" in line]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _says(text: str, pattern: str) -> bool:
    """Whether ``text`` holds the pieces of ``pattern`` between its ``*`` in order (brackets taken literally)."""
    at = 0
    for piece in pattern.split("*"):
        found = text.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


# -- TOML lists where the command line takes a comma-separated list -----------------------------------------------

LISTS = (
    'gemm_shapes = ["64", "128x96x32"]\ngemm_dtypes = ["fp32"]\ngemm_archs = ["sm_80"]\ngemm_sanitize = ["memcheck"]\n'
)


STRINGS = 'gemm_shapes = "64, 128x96x32"\ngemm_dtypes = "fp32"\ngemm_archs = "sm_80"\ngemm_sanitize = "memcheck"\n'

TOML_TABLES = [
    ("pyproject.toml", "tool.pytest.ini_options"),
    ("pyproject.toml", "tool.pytest"),  # pytest 9's native TOML, as pytest.toml
    ("pytest.toml", "pytest"),
]


@pytest.mark.parametrize(("name", "table"), TOML_TABLES)
@pytest.mark.parametrize("values", [LISTS, STRINGS], ids=["lists", "strings"])
def test_toml_lists_are_read_like_comma_separated_lists(project, name, table, values):
    """gemm_shapes = ["64", "128x96x32"] (and dtypes, archs, sanitize) read as
    the command line's comma-separated lists, and the comma-separated string gemm_shapes = "64, 128x96x32" as well,
    with no warning, in [tool.pytest.ini_options] and in native TOML ([tool.pytest], pytest.toml), which took a
    list setting as a TOML list only."""
    (project.path / name).write_text(f"[{table}]\n{values}")
    result = project.runpytest("--gemm-kernels", "--co", "-q", "-W", "error")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    ids = _ids(result)
    assert "kernels/naive.cu::naive[fp32-64x64x64]" in ids
    assert "kernels/naive.cu::naive[fp32-128x96x32]" in ids
    assert [i for i in ids if "compile[" in i] == [
        "kernels/naive.cu::compile[sm_80]",
        "kernels/tiled.cu::compile[sm_80]",
    ]
    assert "kernels/naive.cu::sanitize[memcheck]" in ids
    assert "warning" not in result.stdout.str().lower()


INI_FILES = {
    "pytest.ini": "[pytest]\n{}",
    "tox.ini": "[pytest]\n{}",
    "setup.cfg": "[tool:pytest]\n{}",
}


@pytest.mark.parametrize("name", sorted(INI_FILES))
@pytest.mark.parametrize("value", ["64,128x96x32", "64, 128x96x32", "\n    64\n    128x96x32"])
def test_comma_separated_strings_still_work_in_ini_files(project, name, value):
    """A plain string (comma-separated, or one value a line) keeps working in pytest.ini, tox.ini and
    setup.cfg."""
    (project.path / name).write_text(INI_FILES[name].format(f"gemm_shapes = {value}\ngemm_archs = sm_80,sm_90\n"))
    result = project.runpytest("--gemm-kernels", "--co", "-q", "-W", "error")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    ids = _ids(result)
    assert {"kernels/naive.cu::naive[fp32-64x64x64]", "kernels/naive.cu::naive[fp32-128x96x32]"} <= set(ids)
    assert {"kernels/naive.cu::compile[sm_80]", "kernels/naive.cu::compile[sm_90]"} <= set(ids)


@pytest.mark.parametrize("name", sorted(INI_FILES))
@pytest.mark.parametrize(
    "value",
    [LISTS, STRINGS, 'gemm_shapes = [\n    "64",\n    "128x96x32",\n  ]\ngemm_archs = ["sm_80"]\n'],
    ids=["lists", "strings", "a list over lines"],
)
def test_toml_lists_and_strings_are_read_in_ini_files_too(project, name, value):
    """pytest.ini's gemm_shapes = ["quick", "edge"] failed ("cannot read shape '[\"quick\"'") though the README says a
    TOML list works in every config file pytest reads; pytest.ini, tox.ini and setup.cfg give it as text, now read
    with tomllib (a list, over one line or several, or a quoted string)."""
    (project.path / name).write_text(INI_FILES[name].format(value))
    result = project.runpytest("--gemm-kernels", "--co", "-q", "-W", "error")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    ids = _ids(result)
    assert {"kernels/naive.cu::naive[fp32-64x64x64]", "kernels/naive.cu::naive[fp32-128x96x32]"} <= set(ids)
    assert [i for i in ids if "compile[" in i] == [
        "kernels/naive.cu::compile[sm_80]",
        "kernels/tiled.cu::compile[sm_80]",
    ]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('["64", "128"', '\'["64", "128"\' is neither a TOML list or string nor a comma-separated string (*)'),
        ('["64", 128]', "expected a list of strings, got 128 in ['64', 128] (write it as '128')"),
        ('"64', "'\"64' is neither a TOML list or string nor a comma-separated string (*)"),
    ],
)
def test_an_ini_files_toml_that_cannot_be_read_names_its_setting(project, value, said):
    project.makeini(f"[pytest]\ngemm_shapes = {value}\n")
    result = project.runpytest("--gemm-kernels", "--co", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _says(result.stderr.str(), f"ERROR: --gemm-shapes / gemm_shapes: {said}"), result.stderr.str()


def test_a_shape_list_past_the_limit_is_a_usage_error_before_any_case_is_built(project):
    """100,000 shapes in an ini file collected 300,002 tests in 47 s (1.87 GB); the run stops at once with the count
    and the option that raises the limit, and the option lets them through."""
    project.makeini("[pytest]\ngemm_shapes = " + ",".join(f"{i}x{i}x8" for i in range(1, 100_001)) + "\n")
    result = project.runpytest("--gemm-kernels", "--co", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.str().strip() == (
        "ERROR: --gemm-shapes / gemm_shapes: 100,000 shapes, each a case of every variant and dtype of every kernel; "
        "a run may have at most 1,024 (--gemm-max-shapes / gemm_max_shapes raises the limit)"
    )
    allowed = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-shapes", "64,96", "--gemm-max-shapes", "2")
    assert allowed.ret == pytest.ExitCode.OK
    refused = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-shapes", "quick", "--gemm-max-shapes", "2")
    assert "3 shapes, each a case" in refused.stderr.str() and refused.ret == pytest.ExitCode.USAGE_ERROR


def test_comma_separated_string_in_pyproject_ini_options(project):
    """In [tool.pytest.ini_options] a string keeps working beside a list."""
    project.makepyprojecttoml('[tool.pytest.ini_options]\ngemm_shapes = "64,128x96x32"\ngemm_dtypes = ["fp32"]\n')
    result = project.runpytest("--gemm-kernels", "--co", "-q", "-W", "error")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    assert "kernels/tiled.cu::tiled[fp32-128x96x32]" in _ids(result)


def test_the_command_line_wins_over_a_toml_list(project):
    """--gemm-shapes replaces the ini file's list."""
    project.makepyprojecttoml('[tool.pytest.ini_options]\ngemm_shapes = ["64", "edge"]\n')
    result = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-shapes", "32")
    shapes = {i.split("-")[1].rstrip("]") for i in _ids(result) if "[fp32-" in i}
    assert shapes == {"32x32x32"}


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            '[tool.pytest.ini_options]\ngemm_shapes = [1024, "edge"]\n',
            "--gemm-shapes / gemm_shapes: expected a list of strings, got 1024 in [1024, 'edge'] (write it as '1024')",
        ),
        ('[tool.pytest.ini_options]\ngemm_shapes = ["quick", "huge"]\n', "--gemm-shapes / gemm_shapes: cannot read"),
        (
            '[tool.pytest]\ngemm_shapes = [1024, "edge"]\n',
            "--gemm-shapes / gemm_shapes: expected a list of strings, got 1024 in [1024, 'edge'] (write it as '1024')",
        ),
        ('[tool.pytest]\ngemm_shapes = "quick,huge"\n', "--gemm-shapes / gemm_shapes: cannot read"),
        (
            "[tool.pytest]\ngemm_shapes = 1024\n",
            "--gemm-shapes / gemm_shapes: expected a comma-separated string or a TOML list of strings, got 1024",
        ),
    ],
)
def test_a_list_that_cannot_be_read_names_its_setting(project, toml, said):
    """A list item that is no string, or no shape, is a usage error naming the setting, in native TOML
    ([tool.pytest]) as in [tool.pytest.ini_options], and a native TOML value that is neither a string nor a list
    says what is expected."""
    project.makepyprojecttoml(toml)
    result = project.runpytest("--gemm-kernels", "--co", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _says(result.stderr.str(), f"ERROR: {said}"), result.stderr.str()
    assert "Traceback" not in result.stderr.str()


# -- a bad ini value names its setting and what is expected ---------------------------------------------------------

FLAGS = [option for option in OPTIONS if option.flag and option.ini]


@pytest.mark.parametrize("table", ["tool.pytest.ini_options", "tool.pytest"])
@pytest.mark.parametrize("option", FLAGS, ids=lambda option: option.name)
def test_a_flag_that_is_neither_true_nor_false_names_its_setting(project, option, table):
    """gemm_hot_cache = "maybe" (and every other flag's ini setting) is a usage error that names the
    setting and says a boolean is expected, not pytest's bare 'invalid truth value'."""
    project.makepyprojecttoml(f'[{table}]\ngemm_{option.key} = "maybe"\n')
    result = project.runpytest("--gemm-kernels", "--co", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str()
    assert f"--gemm-{option.name} / gemm_{option.key}: " in error
    assert "'maybe'" in error
    assert "expected true or false" in error or "expects a bool" in error
    assert "Traceback" not in error


@pytest.mark.parametrize("table", ["tool.pytest.ini_options", "tool.pytest"])
def test_toml_booleans_and_numbers_are_taken(project, table):
    """gemm_hot_cache = true (a TOML boolean) and gemm_timeout = 5, gemm_noise = 0.01 (TOML numbers) work."""
    project.makepyprojecttoml(f'[{table}]\ngemm_shapes = ["64"]\ngemm_hot_cache = true\ngemm_timeout = 5\n')
    result = project.runpytest("--gemm-kernels", "--co", "-q", "-W", "error")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result = project.runpytest("--gemm-kernels", "--co")
    header = next(line for line in result.stdout.lines if line.startswith("pytest-gemm: "))
    assert "5 s per phase" in header and "hot L2" in header


@pytest.mark.parametrize(
    ("table", "value", "said"),
    [
        ("tool.pytest.ini_options", "[1]", "--gemm-timeout / gemm_timeout: expected one value, got a list: [1]"),
        ("tool.pytest", "[1]", "--gemm-timeout / gemm_timeout: *gemm_timeout* got list: [1]"),
        ("tool.pytest.ini_options", '"soon"', "--gemm-timeout / gemm_timeout: expected a number from 0.1 to *"),
        ("tool.pytest", "true", "--gemm-timeout / gemm_timeout: *got bool: True"),
    ],
)
def test_a_value_of_the_wrong_kind_names_its_setting(project, table, value, said):
    """gemm_timeout = [1] (a list where one value is expected), "soon" or true: a usage error naming the
    setting, with no pytest deprecation warning before it."""
    project.makepyprojecttoml(f"[{table}]\ngemm_timeout = {value}\n")
    result = project.runpytest("--gemm-kernels", "--co", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _says(result.stderr.str(), f"ERROR: {said}"), result.stderr.str()
    assert "Warning" not in result.stdout.str() + result.stderr.str()


# -- an empty architecture list -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "options"),
    [
        (None, ["--gemm-archs", ""]),
        (None, ["--gemm-archs", " , "]),
        ("[pytest]\ngemm_archs =\n", []),
        ("[tool.pytest.ini_options]\ngemm_archs = []\n", []),
    ],
)
def test_an_empty_architecture_list_is_a_usage_error(project, config, options):
    """--gemm-archs '' (or an empty gemm_archs) dropped every compile test without a word: now a usage
    error naming the option, which says how compile tests are turned off (-m 'not gemm_compile')."""
    if config is not None:
        name = "pyproject.toml" if config.startswith("[tool") else "pytest.ini"
        (project.path / name).write_text(config)
    result = project.runpytest("--gemm-kernels", "--co", "-q", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --gemm-archs / gemm_archs: expected at least one architecture, such as sm_90*-m 'not gemm_compile'*"]
    )


def test_compile_tests_are_turned_off_by_their_marker(project):
    """The documented way to run no compile test is deselecting their marker, which keeps working."""
    result = project.runpytest("--gemm-kernels", "--co", "-q", "-m", "not gemm_compile", "--gemm-shapes", "64")
    assert result.ret == pytest.ExitCode.OK
    assert _ids(result) and not [i for i in _ids(result) if "compile[" in i]


# -- what a selection leaves ------------------------------------------------------------------------------------------

NONE_LEFT = "pytest-gemm: no GPU case to run: --gemm-dtypes / gemm_dtypes selects fp64, and the 2 kernels declare fp32"


def test_a_dtype_selection_that_leaves_no_gpu_case_is_said(project):
    """--gemm-dtypes fp64 on fp32-only kernels ran the compile tests only ('2 passed') without a word: the
    line after collection and at the end says so, with what the kernels declare."""
    result = project.runpytest("--gemm-kernels", "--gemm-dtypes", "fp64", "--gemm-archs", "sm_80")
    out = result.stdout.lines
    assert out.count(NONE_LEFT) == 2
    collected = next(i for i, line in enumerate(out) if line.startswith("collected"))
    assert out.index(NONE_LEFT) == collected + 1  # before anything runs
    assert not [line for line in out if "::" in line and "[fp" in line]


def test_kernels_left_with_no_case_are_named(project):
    """A selection that leaves some kernels no GPU case names them and what they declare; the others run."""
    (project.path / "kernels" / "half.cu").write_text(_kernel("half", dtypes='["fp16"]'))
    (project.path / "kernels" / "both.cu").write_text(_kernel("both", dtypes='["fp16", "fp32"]'))
    result = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-dtypes", "fp16", "--gemm-shapes", "64")
    assert result.ret == pytest.ExitCode.OK
    line = (
        "pytest-gemm: 2 of 4 kernels have no GPU case: --gemm-dtypes / gemm_dtypes selects fp16, and naive, tiled "
        "declare fp32"
    )
    assert line in result.stdout.lines
    assert "kernels/half.cu::half[fp16-64x64x64]" in _ids(result)


def test_many_kernels_left_with_none_are_counted_not_all_named(project):
    """The line stays short: at most four kernels are named, the rest counted."""
    for i in range(6):
        (project.path / "kernels" / f"k{i}.cu").write_text(_kernel(f"kernel{i}"))
    (project.path / "kernels" / "half.cu").write_text(_kernel("half", dtypes='["fp16"]'))
    result = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-dtypes", "fp16")
    line = next(line for line in result.stdout.lines if line.startswith("pytest-gemm: 8 of 9 kernels"))
    assert line.endswith(", and kernel0, kernel1, kernel2, kernel3 and 4 more declare fp32")


def test_every_shape_skipped_by_a_rule_is_said_like_a_dtype(project):
    """--gemm-shapes whose every shape breaks a kernel's `requires` rule leaves it nothing to run: said too."""
    (project.path / "kernels" / "tiled.cu").write_text(_kernel("tiled", requires="M % 64 == 0"))
    result = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-shapes", "100,200")
    assert result.ret == pytest.ExitCode.OK
    line = (
        "pytest-gemm: 1 of 2 kernels have no GPU case: each of the 2 shapes of --gemm-shapes / gemm_shapes breaks a "
        "rule of tiled (tiled: requires M % 64 == 0)"
    )
    assert line in result.stdout.lines


PAST = "M = 3000000000 is past the kernel's int arguments (at most 2147483647)"


def test_a_shape_past_the_int_arguments_is_said_as_such_not_as_a_rule(project):
    """--gemm-shapes 3000000000x1x1 was said as 'breaks a rule of sgemm_naive
    (sgemm_naive: M = 3000000000 is past the kernel's int arguments)', no `requires` rule, the name twice and the
    limit cut; now said in words of its own, the kernel named once, with the limit, and once under --co."""
    result = project.runpytest("--gemm-kernels", "kernels/naive.cu", "--co", "-q", "--gemm-shapes", "3000000000x1x1")
    assert result.ret == pytest.ExitCode.OK
    line = f"pytest-gemm: no GPU case to run: the shape of --gemm-shapes / gemm_shapes is too large for naive: {PAST}"
    assert result.stdout.lines.count(line) == 1, result.stdout.str()
    assert "rule" not in result.stdout.str()


def test_shapes_past_the_int_arguments_of_every_kernel_are_said_once(project):
    """Several shapes past every kernel's int arguments: one line, the kernels counted,
    the first shape's reason with its limit."""
    (project.path / "kernels" / "other.cu").write_text(_kernel("other"))
    result = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-shapes", "3000000000x1x1,4000000000x1x1")
    line = (
        "pytest-gemm: no GPU case to run: each of the 2 shapes of --gemm-shapes / gemm_shapes is too large for the 3 "
        f"kernels: {PAST}"
    )
    assert result.stdout.lines.count(line) == 1, result.stdout.str()


def test_the_line_is_said_once_under_collect_only(project):
    """Under --co, which runs nothing, the line came after collection and again at the
    end: now once, at the end."""
    result = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-dtypes", "fp64")
    assert result.stdout.lines.count(NONE_LEFT) == 1
    assert result.stdout.lines.index(NONE_LEFT) > max(i for i, line in enumerate(result.stdout.lines) if "::" in line)


def test_a_selection_that_leaves_every_kernel_some_case_says_nothing(project):
    """Nothing is said when every kernel keeps a GPU case (the line cannot be always there)."""
    result = project.runpytest("--gemm-kernels", "--co", "-q", "--gemm-dtypes", "fp32", "--gemm-shapes", "64")
    assert result.ret == pytest.ExitCode.OK
    assert "no GPU case" not in result.stdout.str()


def test_require_gpu_makes_a_selection_with_no_gpu_case_a_usage_error(replay):
    """Under --gemm-require-gpu (with a device), a selection that leaves no GPU case is a usage error, before
    anything runs."""
    result = replay.runpytest("--gemm-kernels", "kernels/", "--gemm-dtypes", "fp64", "--gemm-require-gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --gemm-require-gpu / gemm_require_gpu: no GPU case to run: --gemm-dtypes / gemm_dtypes selects fp64*"]
    )
    assert "passed" not in result.stdout.str()


def test_the_line_comes_from_xdist_workers_at_the_end(project):
    """Under pytest-xdist the workers collect; the line is said once, at the end of the run."""
    result = project.runpytest(
        "--gemm-kernels", "--gemm-dtypes", "fp64", "--gemm-archs", "sm_80", "-n", "2", "-m", "not gemm_compile"
    )
    assert result.stdout.lines.count(NONE_LEFT) == 1


# -- a project that cannot hold the compile cache ---------------------------------------------------------------------


def _cache_cannot_be_made(project: pytest.Pytester, how: str) -> None:
    if how == "read-only folder":
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only folder")
        project.makeini("[pytest]\ngemm_shapes = 64\ngemm_archs = sm_80\n")
        project.path.chmod(0o555)
    else:  # the cache directory's place is taken by a file: mkdir fails whoever runs it
        (project.path / "blocker").write_text("a file, not a folder\n")
        project.makeini("[pytest]\ngemm_shapes = 64\ngemm_archs = sm_80\ncache_dir = blocker/cache\n")


@pytest.mark.parametrize("how", ["read-only folder", "cache_dir under a file"])
def test_no_compile_cache_where_the_project_cannot_hold_one(project, how):
    """A project whose cache folder cannot be made ended in INTERNALERROR from the compile cache's mkdir;
    now a warning, as pytest gives for its own cache, and the run goes on compiling without the cache."""
    _cache_cannot_be_made(project, how)
    try:
        result = project.runpytest("--gemm-kernels", "-m", "gemm_compile")
    finally:
        project.path.chmod(0o755)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 2  # the compile items ran (skip: no NVRTC)
    text = _one_line(result.stdout.str())
    assert "pytest-gemm: could not create the compile cache (" in text
    assert "every kernel is compiled again in this run" in text
    assert "no compile cache (it could not be created)" in text


# -- --gemm-kernels is a switch -------------------------------------------------------------------------------------


def test_help_says_gemm_kernels_is_a_switch_and_where_paths_go(pytester):
    """--gemm-kernels=kernels/ gave argparse's 'ignored explicit argument', and the help read as if the
    option took the paths: it now says it takes no value and that paths are pytest's arguments."""
    result = pytester.runpytest("--help")
    text = _one_line(result.stdout.str())
    assert "--gemm-kernels a switch, taking no value: collect GEMM kernel files" in text
    assert "from the paths given as pytest's arguments (pytest --gemm-kernels kernels/ more/x.cu)" in text
    assert "with none, from the gemm_kernel_paths ini setting" in text


def test_a_value_given_to_gemm_kernels_is_a_usage_error(project):
    """--gemm-kernels=kernels/ stays argparse's usage error (exit 4): pytest parses its command line before
    any plugin hook could say more, and the help says how the paths are given."""
    result = project.runpytest("--gemm-kernels=kernels/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "argument --gemm-kernels: ignored explicit argument 'kernels/'" in result.stderr.str()


def test_require_gpu_under_xdist_makes_a_selection_with_no_gpu_case_a_usage_error(replay):
    """Under pytest-xdist the workers, which collect, run nothing, and the run ends as a usage error (exit 4)
    that says why, with no INTERNALERROR."""
    options = ["--gemm-dtypes", "fp64", "--gemm-require-gpu", "-n", "2"]
    result = replay.runpytest("--gemm-kernels", "kernels/", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    assert "--gemm-require-gpu / gemm_require_gpu: no GPU case to run: --gemm-dtypes / gemm_dtypes selects fp64" in out
    assert "passed" not in out


def test_a_sanitize_test_left_no_dtype_says_so(project):
    """A sanitize test whose kernel --gemm-dtypes left no dtype skips with that reason, not 'its rules
    allow none of the shapes'."""
    result = project.runpytest(
        "--gemm-kernels",
        "kernels/naive.cu",
        "--gemm-dtypes",
        "fp64",
        "--gemm-sanitize",
        "memcheck",
        "-m",
        "gemm_sanitize",
        "-rs",
    )
    result.assert_outcomes(skipped=1)
    assert "naive: --gemm-dtypes / gemm_dtypes selects none of its dtypes (fp64)" in result.stdout.str()

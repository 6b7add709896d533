"""A Python kernel file's decorators, read from its syntax tree without running it: the aliases the file binds to
gemm_kernel are followed, and a gemm_kernel(...) call that decorates no def is an error naming its line and saying what
to write instead (specs/pyfile.py, docs/kernel-files.md#python-kernel-files)."""

from __future__ import annotations

import re

import pytest

from pytest_gemm.specs import pyfile
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.pyfile import parse_py_source, py_facts

_BODY = '@{deco}(dtypes=["fp32"])\ndef k(A, B, C, alpha, beta):\n    pass\n'

DECLARED = {
    "alias": "from pytest_gemm import gemm_kernel as gk\n\n\n" + _BODY.format(deco="gk"),
    "module alias": "import pytest_gemm as pg\n\n\n" + _BODY.format(deco="pg.gemm_kernel"),
    "assigned": "import pytest_gemm as pg\n\ngk = pg.gemm_kernel\n\n\n" + _BODY.format(deco="gk"),
    "assigned alias": "from pytest_gemm import gemm_kernel as g\n\nkernel = g\n\n\n" + _BODY.format(deco="kernel"),
    "assigned, then a comment": "from pytest_gemm import gemm_kernel\n\ngk = gemm_kernel  # alias\n\n\n"
    + _BODY.format(deco="gk"),
    "assigned, then a semicolon": "from pytest_gemm import gemm_kernel\n\ngk = gemm_kernel;\n\n\n"
    + _BODY.format(deco="gk"),
    "annotated": "from typing import Any\n\nfrom pytest_gemm import gemm_kernel\n\ngk: Any = gemm_kernel\n\n\n"
    + _BODY.format(deco="gk"),
    "annotated module attribute": "import pytest_gemm\n\ngk: object = pytest_gemm.gemm_kernel  # the decorator\n\n\n"
    + _BODY.format(deco="gk"),
    "chained": "from pytest_gemm import gemm_kernel\n\ngk = other = gemm_kernel\n\n\n" + _BODY.format(deco="other"),
    "unpacked": "import pytest_gemm as pg\n\nn, gk = 3, pg.gemm_kernel\n\n\n" + _BODY.format(deco="gk"),
    "walrus": "from pytest_gemm import gemm_kernel\n\n(gk := gemm_kernel)\n\n\n" + _BODY.format(deco="gk"),
    "imported in try": (
        "try:\n    from pytest_gemm import gemm_kernel as gk\nexcept ImportError:\n    gk = None\n\n\n"
        + _BODY.format(deco="gk")
    ),
}


@pytest.mark.parametrize("source", DECLARED.values(), ids=DECLARED.keys())
def test_an_aliased_decorator_declares_its_kernel(source):
    """`@gk(...)` after `from pytest_gemm import gemm_kernel as gk` was dropped without a word; aliases the file's
    imports and top-level assignments bind are followed, in the syntax tree, and the kernel is collected."""
    assert py_facts(source).declares and py_facts(source, every_mention=True).declares
    (spec,) = parse_py_source("k.py", source)
    assert (spec.name, spec.attr, spec.dtypes) == ("k", "k", ("fp32",))


def test_an_alias_makes_a_test_module_a_candidate_kernel_file():
    """A module pytest imports is parsed only where its text may hold a decorator: an alias import counts."""
    assert pyfile.DECLARING.search(DECLARED["alias"]) and pyfile.DECLARING.search(DECLARED["assigned"])
    assert not pyfile.DECLARING.search("from pytest_gemm import gemm_kernel\n\n\ndef test_it():\n    pass\n")


def test_an_unrelated_alias_is_no_decorator():
    source = "import functools as gk\n\n\n" + _BODY.format(deco="gk.wraps")
    assert not py_facts(source, every_mention=True).declares and parse_py_source("k.py", source) == []


STRAY = {
    "lambda": (
        'from pytest_gemm import gemm_kernel\n\nk = gemm_kernel(dtypes=["fp32"])(lambda A, B, C, alpha, beta: None)\n',
        "k.py:3: gemm_kernel(...) applied to a lambda declares no kernel: the file is read without running it, so a "
        "kernel is a plain def at the top level under the decorator; write @gemm_kernel(dtypes=['fp32']) on the line "
        "above def k(...): instead",
    ),
    "aliased lambda": (
        'from pytest_gemm import gemm_kernel as gk\n\nk = gk(dtypes=["fp32"])(lambda A, B, C, alpha, beta: None)\n',
        "k.py:3: gk(...) applied to a lambda declares no kernel: *; write @gk(dtypes=['fp32']) on the line above "
        "def k(...): instead",
    ),
    "applied to a def": (
        "from pytest_gemm import gemm_kernel\n\n\ndef f(A, B, C, alpha, beta):\n    pass\n\n\n"
        'g = gemm_kernel(dtypes=["fp32"])(f)\n',
        "k.py:8: gemm_kernel(...) called outside a decorator declares no kernel: *; write "
        "@gemm_kernel(dtypes=['fp32']) on the line above def f(...): instead",
    ),
    "kept in a name": (
        'import pytest_gemm\n\nfp32 = pytest_gemm.gemm_kernel(dtypes=["fp32"])\n\n\n'
        "@fp32\ndef k(A, B, C, alpha, beta):\n    pass\n",
        "k.py:3: pytest_gemm.gemm_kernel(...) kept in 'fp32' (a decorator in a variable is not followed) declares no "
        "kernel: *; write @pytest_gemm.gemm_kernel(dtypes=['fp32']) itself on the line above each kernel's def",
    ),
    "in a function": (
        'from pytest_gemm import gemm_kernel\n\n\ndef make(f):\n    return gemm_kernel(dtypes=["fp32"])(f)\n',
        "k.py:5: gemm_kernel(...) called outside a decorator declares no kernel: *",
    ),
}


@pytest.mark.parametrize(("source", "said"), STRAY.values(), ids=STRAY.keys())
def test_a_call_that_decorates_no_def_is_an_error_saying_what_to_write(source, said):
    """`k = gemm_kernel(...)(lambda ...)` was dropped without a word; it makes the file a kernel file whose collection
    error names the line and the decorator to write instead."""
    assert py_facts(source, every_mention=True).declares
    with pytest.raises(KernelFileError) as caught:
        parse_py_source("k.py", source)
    assert re.fullmatch(".*".join(map(re.escape, said.split("*"))), str(caught.value)), str(caught.value)


def test_the_first_mistake_in_the_file_is_the_one_said():
    source = (
        "from pytest_gemm import gemm_kernel\n\n\nif True:\n"
        '    @gemm_kernel(dtypes=["fp32"])\n    def k(A, B, C, alpha, beta):\n        pass\n\n\n'
        'j = gemm_kernel(dtypes=["fp32"])(lambda A, B, C, alpha, beta: None)\n'
    )
    with pytest.raises(KernelFileError, match=r"^k\.py:5: @gemm_kernel on a function under an if statement"):
        parse_py_source("k.py", source)


def test_a_test_module_that_calls_gemm_kernel_in_its_tests_stays_a_test_module():
    source = (
        "from pytest_gemm import gemm_kernel\n\n\ndef test_marks():\n"
        '    assert gemm_kernel(dtypes=["fp32"])(lambda A, B, C, alpha, beta: None)\n'
    )
    facts = py_facts(source)
    assert facts.declares and facts.test_module  # so pytest imports it: specs/files.py's rule


def test_a_def_under_two_gemm_kernel_decorators_is_one_kernel_said_so():
    """Stacked decorators were refused as "two kernels are named 'k'": there is one def, and the message says so."""
    source = 'from pytest_gemm import gemm_kernel\n\n\n@gemm_kernel(dtypes=["fp32"])\n' + _BODY.format(
        deco="gemm_kernel"
    )
    with pytest.raises(KernelFileError) as raised:
        parse_py_source("k.py", source)
    assert str(raised.value) == "k.py:5: k has @gemm_kernel more than once; a def is one kernel: keep one"

"""The fixtures of the plugin's own tests; their helpers are in tests/support/."""

from __future__ import annotations

import pytest
from filelock import FileLock

from support import KERNELS, NAIVE_BODY, NAIVE_HEADER, RECORDED, REPLAY_CONFTEST, TESTS
from support.shared import GPU_LOCK


def _drawing_imported() -> None:
    """Import what drawing a picture imports, by drawing one, before any test runs. pytester puts ``sys.modules``
    back as it was after each in-process run, so a matplotlib first imported inside one is half imported again after
    it, its classes new: ``set_clip_path`` then refused an axes' own Rectangle in every later drawing of that process
    (under ``pytest -n``, whichever test came first in a worker decided)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PatchCollection
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.ticker import FuncFormatter, MaxNLocator
    from PIL import Image, PngImagePlugin  # noqa: F401 - imported for what it imports

    fig = Figure(figsize=(2, 2), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow([[1.0, 10.0]], norm=LogNorm(vmin=1, vmax=10))
    fig.colorbar(image).ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.add_collection(PatchCollection([Rectangle((0, 0), 1, 1)], hatch="//"))
    ax.plot([0, 1], [0, 1], marker="o", label="x")
    ax.xaxis.set_major_locator(MaxNLocator(3))
    fig.legend(handles=[Patch(label="p")])
    fig.suptitle("t")
    FigureCanvasAgg(fig).draw()


_drawing_imported()


@pytest.fixture(autouse=True)
def _runs_started_here_are_as_in_a_serial_run(monkeypatch):
    """A run a test starts (pytester's, in this process or a subprocess) sees what it would in a serial run of the
    suite, whatever runs the suite (`pytest -n`): no xdist worker's variables (pytest-benchmark reads
    PYTEST_XDIST_WORKER and turns timing off where it is set), and a terminal 120 columns wide (an xdist worker's
    output is no terminal, and tables sized to 80 columns shorten kernel names)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "120")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The GPU tests in one xdist group: under `pytest -n auto --dist loadgroup` (the README's command) they run one
    after the other in one process where xdist can group them (not on pytest 9.2: tests/support/shared.py)."""
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(pytest.mark.xdist_group("gpu"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """A GPU test (tests/gpu) holds the GPU lock from its setup (a module's GPU run included) to its teardown: never
    two at once on a GPU (their timings and false-alarm sweeps share it), whichever xdist worker runs them. A GEMM
    case of a kernel folder under tests/ run by pytest-gemm itself takes none: xdist gives each worker its own GPU."""
    if item.get_closest_marker("gpu") is None or not item.path.resolve().is_relative_to(TESTS / "gpu"):
        return (yield)
    with FileLock(GPU_LOCK):
        return (yield)


@pytest.fixture
def naive_source() -> str:
    return NAIVE_HEADER + NAIVE_BODY


@pytest.fixture
def replay(pytester, monkeypatch):
    """A project whose GPU workers serve the H100 recording: the bundled steps 1 and 2 as its kernels."""
    kernels = pytester.mkdir("kernels")
    for name in ("01_naive.cu", "02_smem_tiling.cu"):
        (kernels / name).write_text((KERNELS / name).read_text())
    pytester.makeconftest(REPLAY_CONFTEST.format(tests=str(TESTS)))
    pytester.makeini("[pytest]\ngemm_shapes = 512,4096\n")
    monkeypatch.setenv("PYTEST_GEMM_REPLAY", str(RECORDED))
    replay_vars = ("REPLAY_SCALE", "REPLAY_GPU", "REPLAY_THROTTLE", "REPLAY_ACT", "REPLAY_DEVICES", "REPLAY_LOG")
    replay_vars += ("REPLAY_STANDBY", "REPLAY_STARTS", "REPLAY_SLEEP", "REPLAY_LOST_FILE", "REPLAY_UUIDS")
    replay_vars += ("REPLAY_UUID", "REPLAY_EXIT")
    for var in (*replay_vars, "GITHUB_STEP_SUMMARY", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    return pytester

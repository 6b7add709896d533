"""Checks of what a report writes (its PNG pictures, a self-contained page), and the error maps and failed cases
it is drawn from."""

from __future__ import annotations

import math
import struct
from html.parser import HTMLParser
from pathlib import Path

from pytest_gemm.records.diagnosis import Diagnosis
from pytest_gemm.records.outcome import ErrorMap
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import Verdict

from support import TESTS

#: a run recorded on an H100
RUN = TESTS / "data" / "h100_run.json"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG file; fails the test if it is not one."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def assert_sensible_png(path: Path) -> None:
    width, height = png_size(path)
    assert 600 <= width <= 3000 and 300 <= height <= 5000, (path, width, height)
    assert path.stat().st_size > 10_000, path  # a blank image compresses to almost nothing


def pixels_near(path: Path, colour: str, tolerance: int = 12, top: float = 1.0) -> int:
    """How many pixels of the PNG are within ``tolerance`` of ``colour`` (#rrggbb) in every channel.

    ``top``: only the upper part of the image, as a fraction of its height (a heatmap's legend is below).
    """
    import numpy as np
    from matplotlib.image import imread

    image = (imread(path)[..., :3] * 255).round()
    image = image[: int(top * image.shape[0])]
    target = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(image - target) <= tolerance).all(axis=-1).sum())


def error_map(rows: int, cols: int, cells: int = 128, tile=(64, 64), marks=None, base: float = 0.2) -> ErrorMap:
    """An error map as the worker makes it: ``marks`` maps (cell row, cell col) -> (ratio, cause word)."""
    cell = (max(1, math.ceil(rows / cells)), max(1, math.ceil(cols / cells)))
    gr, gc = math.ceil(rows / cell[0]), math.ceil(cols / cell[1])
    ratio = [[base] * gc for _ in range(gr)]
    cause = [[""] * gc for _ in range(gr)]
    for (i, j), (value, word) in (marks or {}).items():
        ratio[i][j], cause[i][j] = value, word
    return ErrorMap(rows, cols, cell, tuple(map(tuple, ratio)), tuple(map(tuple, cause)), tile)


def failed(emap: ErrorMap, name: str = "sgemm_bad[fp32-1000x1000x512]", beta: float = 0.0) -> tuple[str, Diagnosis]:
    """A failed case's test id and diagnosis, with this error map."""
    shape = Shape(emap.rows, emap.cols, 512)
    return f"kernels/bad.cu::{name}", Diagnosis(Verdict.WRONG_OUTPUT, "fp32", shape, 1.0, beta, error_map=emap)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        values = dict(attrs)
        if tag == "img":
            self.images.append(values["src"])
        for key in ("href", "src"):
            if values.get(key):
                self.links.append(values[key])


def links(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def assert_self_contained(folder: Path) -> None:
    """The page shows every picture in the folder, and names nothing outside it."""
    found = links(folder / "index.html")
    pictures = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.png"))
    assert pictures and sorted(found.images) == pictures
    for link in found.links:
        assert "://" not in link and not link.startswith(("//", "/")), link
        assert link.startswith("#") or (folder / link).is_file(), link
    assert "script" not in found.tags and "http" not in (folder / "index.html").read_text()

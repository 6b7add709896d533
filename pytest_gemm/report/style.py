"""The look every picture shares: Okabe-Ito colours with markers and line styles, titles, saving.

Colours alone never carry a distinction: each kernel also has its own marker, each variant its
own line style (and hollow markers after the fourth), each dtype its own hatch, so the pictures
read in grey and for colour-blind readers. matplotlib is imported only when a picture is drawn,
through :class:`matplotlib.figure.Figure` (no pyplot, no global state, no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "DTYPE_STYLE",
    "INK",
    "OKABE_ITO",
    "REFERENCE",
    "kernel_base",
    "kernel_styles",
    "new_figure",
    "plain",
    "save",
    "shape_label",
    "title",
]

#: Okabe & Ito's palette for colour-blind readers, with its yellow (faint on white) replaced by Tol's wine
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#882255")
INK = "#222222"
REFERENCE = "#8C8C8C"  # cuBLAS and other references: grey, drawn wide
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")
LINESTYLES = ("-", "--", ":", "-.")
#: each dtype: colour and hatch (bars)
DTYPE_STYLE = {
    "fp32": ("#0072B2", ""),
    "bf16": ("#E69F00", "//"),
    "fp16": ("#009E73", ".."),
    "tf32": ("#CC79A7", "xx"),
    "fp64": ("#D55E00", "\\\\"),
}


def kernel_base(label: str) -> str:
    """A kernel variant's label without its variant: ``sgemm_smem[TILE32]`` -> ``sgemm_smem``,
    ``a/k.cu::sgemm_smem[TILE32]`` -> ``a/k.cu::sgemm_smem``."""
    file, sep, kernel = label.rpartition("::")
    return file + sep + kernel.split("[", 1)[0]


def kernel_styles(kernels: list[str]) -> dict[str, dict[str, Any]]:
    """Line-plot keyword arguments per kernel variant, by its label (:func:`.names.kernel_labels`): colour and
    marker by kernel, line style by variant."""
    bases: list[str] = []
    variants: dict[str, list[str]] = {}
    for kernel in kernels:
        base = kernel_base(kernel)
        if base not in variants:
            bases.append(base)
            variants[base] = []
        if kernel not in variants[base]:
            variants[base].append(kernel)
    styles = {}
    for b, base in enumerate(bases):
        colour = OKABE_ITO[b % len(OKABE_ITO)]
        for v, kernel in enumerate(variants[base]):
            styles[kernel] = {
                "color": colour,
                "marker": MARKERS[b % len(MARKERS)],
                "linestyle": LINESTYLES[v % len(LINESTYLES)],
                "fillstyle": "full" if v < len(LINESTYLES) else "none",
                "markersize": 6,
                "linewidth": 1.6,
            }
    return styles


def plain(text: str) -> str:
    """Text from a run as a picture shows it, literally: ``$`` escaped (never mathtext, which refuses some text) and
    what UTF-8 cannot hold (a lone surrogate) replaced."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("$", r"\$")


def shape_label(shape: object) -> str:
    """``1024x1024x1024`` -> ``1024³``; other shapes as they are (a Shape, or its id)."""
    dims = str(shape).split("x")
    return f"{dims[0]}³" if len(set(dims)) == 1 else str(shape)


def new_figure(width: float, height: float, *, layout: str | None = "constrained") -> Any:
    """A figure on matplotlib's Agg canvas, with the pictures' common settings (``layout=None``: the caller places
    the axes itself, which draws several times faster: the report draws a heatmap per failed case)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout=layout)
    fig.set_facecolor("white")
    return fig


def title(fig: Any, ax: Any, what: str, gpu: str, day: str, detail: str = "", *, wrap: bool = True) -> None:
    """The title names what is shown, the GPU and the date; ``detail`` goes on a smaller line under it (``wrap``:
    a long title wraps within the figure, at some cost in time). Each is shown as :func:`plain` text."""
    fig.suptitle(
        plain(f"{what} — {gpu}" + (f", {day}" if day else "")), x=0.01, ha="left", fontsize=12.5, color=INK, wrap=wrap
    )
    if detail:  # at a fixed height (no ticks above the axes): placing it by the axes' extent drew every tick first
        ax.set_title(plain(detail), loc="left", fontsize=9, color="#444444", y=1.0)


def save(fig: Any, path: Path, *, optimize: bool = True, palette: bool = False) -> Path:
    """Write ``fig`` as PNG (legends outside the axes included) and return ``path``. ``optimize``: the smallest
    file, at about a third more time; ``palette``: 256 colours chosen for the picture (a heatmap: a third of the
    bytes of full colour, for colours within a few levels of the drawn ones)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not palette:
        fig.savefig(
            path,
            format="png",
            facecolor="white",
            metadata={"Software": "pytest-gemm"},
            pil_kwargs={"optimize": optimize},
        )
        return path
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image, PngImagePlugin

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", "pytest-gemm")
    octree = getattr(getattr(Image, "Quantize", None), "FASTOCTREE", 2)  # Pillow before 9.1: the number
    image.convert("RGB").quantize(256, method=octree).save(path, format="PNG", pnginfo=info)
    return path

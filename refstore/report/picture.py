"""The coverage picture: a PNG of chunk states over two spatial dimensions (matplotlib's Agg
canvas, no pyplot state; ``pip install 'refstore[report]'``).

Each cell is painted with the colours of its states mixed by their shares (a cell held on one
day of two is half green, half blue), so a single-step picture has the four pure colours and a
series shows where and how much of it is held, inline or missing. Axes are in coordinate units
where the array has a 1-D coordinate for the dimension, else in element indices. The figure has
a fixed pixel size and a fixed plot box (``Picture.plot_box``), so pixels can be located.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BadInputError
from ._write import PNG_SOFTWARE, png_own, replace_file
from .coverage import STATES

if TYPE_CHECKING:
    from .coverage import Coverage

__all__ = ["COLOURS", "Picture", "parse_size", "render_png", "write_png"]

COLOURS: dict[str, tuple[int, int, int]] = {
    "absent": (217, 217, 217),  # light grey: reads as the fill value
    "referenced": (76, 114, 176),  # blue
    "inline": (221, 132, 82),  # orange
    "held": (85, 168, 104),  # green
}
PLOT = (0.12, 0.16, 0.58, 0.72)  # the plot box: left, bottom, width, height (figure fractions)
DPI = 100


@dataclass(frozen=True, slots=True)
class Picture:
    """A rendered PNG: its bytes, size in pixels and where the plot is: ``plot_box`` =
    ``(left, top, right, bottom)`` pixels from the image's top-left corner, ``xlim``/``ylim`` the
    data values at the box's left/right and bottom/top edges."""

    png: bytes
    width: int
    height: int
    plot_box: tuple[float, float, float, float]
    xlim: tuple[float, float]
    ylim: tuple[float, float]

    def to_json(self) -> dict[str, Any]:
        return {"width": self.width, "height": self.height, "plot_box": list(self.plot_box),
                "xlim": list(self.xlim), "ylim": list(self.ylim)}  # fmt: skip



def _rgb(colour: tuple[int, ...]) -> tuple[float, float, float]:
    """A 0-255 RGB colour as matplotlib's 0-1 floats."""
    r, g, b = (c / 255.0 for c in colour[:3])
    return (r, g, b)

def parse_size(text: str) -> tuple[int, int]:
    """``WIDTHxHEIGHT`` in pixels (each 200..8000)."""
    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or not (200 <= int(w) <= 8000 and 200 <= int(h) <= 8000):
        raise BadInputError(f"--size {text!r}: give WIDTHxHEIGHT in pixels, each 200..8000 (e.g. 960x600)")
    return int(w), int(h)


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise BadInputError("coverage pictures need matplotlib: pip install 'refstore[report]'") from None
    return matplotlib


def cell_colours(shares: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """RGB (0..1) per cell: the state colours mixed by share."""
    rgb = np.array([COLOURS[s] for s in STATES], np.float64) / 255.0
    out: np.ndarray[Any, Any] = np.clip(shares @ rgb, 0.0, 1.0)
    return out


def render_png(cov: Coverage, *, size: tuple[int, int] = (960, 600)) -> Picture:
    """The picture of ``cov`` as PNG bytes."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    width, height = size
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_axes(PLOT)
    xb, yb = cov.x.bounds(), cov.y.bounds()
    ax.pcolormesh(xb, yb, cell_colours(cov.shares), shading="flat", edgecolors="none", antialiased=False)
    if xb.size <= 120 and yb.size <= 120:  # chunk boundaries, while cells are large enough to see
        ax.vlines(xb[1:-1], min(yb[0], yb[-1]), max(yb[0], yb[-1]), colors="white", linewidths=0.6)
        ax.hlines(yb[1:-1], min(xb[0], xb[-1]), max(xb[0], xb[-1]), colors="white", linewidths=0.6)
    xlim = (float(min(xb[0], xb[-1])), float(max(xb[0], xb[-1])))
    ylim = (float(min(yb[0], yb[-1])), float(max(yb[0], yb[-1])))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.ticklabel_format(style="plain", useOffset=False)
    ax.set_xlabel(cov.x.label)
    ax.set_ylabel(cov.y.label)
    ax.set_title(cov.title, fontsize=11, loc="left")
    when = (f"time {cov.time}: " if cov.time else "") + (
        f"share of {cov.steps} steps of the other dimensions per cell" if cov.steps != 1 else "one step per cell"
    )
    fig.text(PLOT[0], 0.015, f"{cov.shares.shape[0]} x {cov.shares.shape[1]} chunk cells; {when}", fontsize=8)
    totals = cov.totals()
    handles = [Patch(facecolor=_rgb(COLOURS[s]), edgecolor="black", linewidth=0.5,
                     label=f"{s}  {100 * totals[s]:.1f}%") for s in STATES]  # fmt: skip
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(PLOT[0] + PLOT[2] + 0.02, PLOT[1] + PLOT[3]),
               title="chunk state", fontsize=9, title_fontsize=9, frameon=False)  # fmt: skip
    if cov.steps > 1:
        fig.text(PLOT[0] + PLOT[2] + 0.02, PLOT[1] + PLOT[3] - 0.3, "mixed colours:\nshares of the steps",
                 fontsize=8, va="top")  # fmt: skip
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": PNG_SOFTWARE})
    left, top = PLOT[0] * width, (1 - PLOT[1] - PLOT[3]) * height
    box = (left, top, left + PLOT[2] * width, top + PLOT[3] * height)
    return Picture(buf.getvalue(), width, height, box, xlim, ylim)


def write_png(pic: Picture, out: str) -> None:
    """Write ``pic`` to ``out`` (a temporary beside it renamed over it: never half a file)."""
    replace_file(out, pic.png, ".png", png_own, "a refstore coverage picture")

"""What one cell of the matrix says, and how values are compared.

A cell is one array read through one path, compared with the oracle (the file's own reader):
``equal``, ``refused`` (refstore declined it by name, with a reason), ``wrong`` (served, but
shape, dtype, dimensions, attributes or values differ), ``missing`` (the oracle lists the array;
the path neither serves nor refuses it) or ``crash`` (an exception that is not a refusal, or a
timeout). Nothing here imports refstore."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["KINDS", "Cell", "compare_raw", "compare_values", "first_line", "windows"]

KINDS = ("equal", "refused", "wrong", "missing", "crash")
FAILING = frozenset({"wrong", "missing", "crash"})

WHOLE_MAX_BYTES = 32 << 20
"""Arrays up to this size are compared whole; larger ones on a window at each corner."""
WINDOW_MAX_BYTES = 4 << 20


@dataclass(frozen=True)
class Cell:
    kind: str
    detail: str = ""

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind

    @property
    def failing(self) -> bool:
        return self.kind in FAILING

    def text(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail and self.kind != "equal" else self.kind

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail} if self.detail else {"kind": self.kind}


EQUAL = Cell("equal")


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def windows(shape: tuple[int, ...], itemsize: int) -> list[tuple[slice, ...]]:
    """The whole array when small, else two corner windows (start and end of every dimension),
    each at most ``WINDOW_MAX_BYTES``."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if n * max(itemsize, 1) <= WHOLE_MAX_BYTES:
        return [tuple(slice(0, None) for _ in shape)]
    budget = WINDOW_MAX_BYTES // max(itemsize, 1)
    side = [1] * len(shape)
    for d in reversed(range(len(shape))):  # fill the last dimensions first (contiguous in C order)
        side[d] = max(1, min(shape[d], budget // max(1, int(np.prod(side[d + 1:], dtype=np.int64)))))
    first = tuple(slice(0, s) for s in side)
    last = tuple(slice(n - s, None) for n, s in zip(shape, side, strict=True))
    return [first, last]


def compare_values(got: Any, want: Any, what: str = "") -> str | None:
    """None when equal (shape, dtype byte order aside, values bit for bit, NaNs where the
    oracle has them); else one line saying how they differ."""
    g = np.asarray(got)
    w = np.asarray(want)
    if g.shape != w.shape:
        return f"{what}shape {g.shape} != {w.shape}"
    if g.dtype.newbyteorder("=") != w.dtype.newbyteorder("=") and not g.dtype.kind == w.dtype.kind == "O":
        return f"{what}dtype {g.dtype} != {w.dtype}"
    if w.dtype.kind in "biufc":
        native = w.dtype.newbyteorder("=")
        a, b = g.astype(native, copy=False), w.astype(native, copy=False)
        if a.tobytes() == b.tobytes():
            return None
        if w.dtype.kind in "fc" and np.array_equal(a, b, equal_nan=True):
            return None  # NaNs of another payload (a masked value is a NaN, whichever)
        bad = np.flatnonzero(~_same(a, b))
        at = np.unravel_index(int(bad[0]), w.shape) if bad.size and w.shape else ()
        return f"{what}values differ at {bad.size} of {w.size} points (first {tuple(int(i) for i in at)}: " \
               f"{a[at] if bad.size else '?'} != {b[at] if bad.size else '?'})"
    if w.dtype.kind == "M" or w.dtype.kind == "m":
        return None if np.array_equal(g, w, equal_nan=True) else f"{what}values differ"
    if w.dtype.kind == "V":
        return None if g.tobytes() == w.tobytes() else f"{what}values differ"
    return None if _obj_equal(g, w) else f"{what}values differ"


def _same(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    eq = np.asarray(a == b)
    if a.dtype.kind in "fc":
        eq |= np.isnan(a) & np.isnan(b)
    return eq.reshape(-1)


def _obj_equal(g: np.ndarray[Any, Any], w: np.ndarray[Any, Any]) -> bool:
    def norm(x: Any) -> Any:
        return x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else x

    if g.dtype.kind in "SUV" and w.dtype.kind in "SUV":
        return bool(np.array_equal(g, w))
    return [norm(x) for x in g.reshape(-1).tolist()] == [norm(x) for x in w.reshape(-1).tolist()]


def compare_raw(arr: Any, shape: tuple[int, ...], dtype: np.dtype[Any], read_oracle: Any) -> Cell:
    """Compare a served array-like (``shape``, ``dtype``, ``[sel]``) with the oracle's raw
    values (``read_oracle(sel)``), on ``windows``."""
    got_shape = tuple(int(n) for n in arr.shape)
    if got_shape != tuple(shape):
        return Cell("wrong", f"shape {got_shape} != {tuple(shape)}")
    for sel in windows(tuple(shape), dtype.itemsize):
        want = read_oracle(sel)
        got = arr[sel] if sel else arr[...]
        why = compare_values(got, want, f"{_show(sel)} " if len(windows(tuple(shape), dtype.itemsize)) > 1 else "")
        if why:
            return Cell("wrong", why)
    return EQUAL


def _show(sel: tuple[slice, ...]) -> str:
    return "[" + ",".join(f"{s.start or 0}:{'' if s.stop is None else s.stop}" for s in sel) + "]"

"""Chunk states of one array over its two spatial dimensions (``refstore coverage``).

Every chunk of a version is in one of four states: ``absent`` (no row: reads as the fill
value), ``referenced`` (a byte range of a source), ``inline`` (bytes in the row: compact
datasets) or ``held`` (bytes copied into the collection by ``hold``). The picture is a grid of
cells over the two spatial dimensions, cut at every chunk boundary of every era along them;
each cell gets the share of the elements of the other dimensions (the time steps of a series,
levels...) whose chunk is in each state. ``--time`` narrows the time axis first.

``states_over_cells`` is pure (chunk boxes in, shares out, columnar with numpy: no object per
chunk); ``coverage`` reads the rows of one snapshot and the coordinate arrays for the axes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS
from ..errors import BadInputError
from ..plan.eras import EraLayout
from ..plan.grid import Grid, slab_lengths

if TYPE_CHECKING:
    from ..scan._types import ArrayMeta
    from ..table.collection import Snapshot

__all__ = ["MAX_CELLS", "STATES", "Coverage", "coverage", "spatial_axes", "states_over_cells"]

STATES = ("absent", "referenced", "inline", "held")
"""State codes are positions in this tuple."""
MAX_CELLS = 16_000_000
"""Most cells a picture is computed for (4 shares of 8 bytes each: 512 MB)."""


@dataclass(frozen=True, slots=True, eq=False)
class Axis:
    """One spatial axis of the picture: the array's dimension ``dim`` (axis ``index``), cell
    boundaries ``edges`` in elements (``0 .. size``), and where the array has a 1-D coordinate
    named by the dimension, its values (``coord``, real units) and ``units``."""

    dim: str
    index: int
    size: int
    edges: np.ndarray[Any, Any]
    coord: np.ndarray[Any, Any] | None = None
    units: str | None = None

    def bounds(self) -> np.ndarray[Any, Any]:
        """Cell edges in axis units: coordinate cell bounds (half-way between centres, half a
        step beyond the ends) where there is a coordinate, else element indices."""
        if self.coord is None or self.coord.size < 2:
            return self.edges.astype(np.float64)
        c = self.coord.astype(np.float64)
        b = np.empty(c.size + 1)
        b[1:-1] = (c[:-1] + c[1:]) / 2
        b[0] = c[0] - (c[1] - c[0]) / 2
        b[-1] = c[-1] + (c[-1] - c[-2]) / 2
        out: np.ndarray[Any, Any] = b[self.edges]
        return out

    @property
    def label(self) -> str:
        """The axis title: the dimension with its units, or ``(index)`` without a coordinate."""
        if self.coord is None:
            return f"{self.dim} (index)"
        return f"{self.dim} ({self.units})" if self.units else self.dim


@dataclass(frozen=True, slots=True, eq=False)
class Coverage:
    """What ``coverage`` found: ``shares[i, j, s]`` = share of the steps of cell (i along
    ``y``, j along ``x``) in state ``STATES[s]`` (rows sum to 1); ``steps`` = elements of the
    other dimensions per spatial element (time steps x levels...), after ``time``."""

    collection: str
    version: int
    tag: str | None
    array: str
    y: Axis
    x: Axis
    shares: np.ndarray[Any, Any]
    steps: int
    time: str | None = None

    @property
    def title(self) -> str:
        name = os.path.basename(self.collection.rstrip("/")) or self.collection
        ver = f"version {self.version}" + (f" ({self.tag})" if self.tag else "")
        return f"{name} · {ver} · {self.array}"

    def totals(self) -> dict[str, float]:
        """Share of the whole (spatial cells weighted by their elements) in each state."""
        h = np.diff(self.y.edges).astype(np.float64)
        w = np.diff(self.x.edges).astype(np.float64)
        area = np.outer(h, w)
        tot = float(area.sum())
        return {s: float((self.shares[..., i] * area).sum() / tot) if tot else 0.0 for i, s in enumerate(STATES)}

    def to_json(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "version": self.version,
            "tag": self.tag,
            "array": self.array,
            "dims": [self.y.dim, self.x.dim],
            "cells": [int(self.shares.shape[0]), int(self.shares.shape[1])],
            "steps": self.steps,
            "time": self.time,
            "shares": {k: round(v, 6) for k, v in self.totals().items()},
        }


# --------------------------------------------------------------------------- pure
def spatial_axes(meta: ArrayMeta, kinds: dict[str, str | None]) -> tuple[int, int]:
    """(y, x) axes of ``meta``: dimensions whose coordinates are lat/y and lon/x (``kinds``:
    dimension -> coordinate kind), else GeoTIFF ``y*``/``x*`` names, else the last two."""
    if len(meta.shape) < 2:
        raise BadInputError(f"{meta.name}: coverage needs an array of two or more dimensions "
                            f"(it has {len(meta.shape)})")  # fmt: skip
    dims = list(meta.dims)

    def find(wanted: tuple[str, ...], prefix: str) -> int | None:
        for i, d in enumerate(dims):
            if kinds.get(d) in wanted:
                return i
        for i, d in enumerate(dims):
            if d.startswith(prefix):
                return i
        return None

    y, x = find(("lat", "y"), "y"), find(("lon", "x"), "x")
    if y is None or x is None or y == x:
        y, x = len(dims) - 2, len(dims) - 1
    return y, x


def states_over_cells(
    lo: np.ndarray[Any, Any],
    hi: np.ndarray[Any, Any],
    state: np.ndarray[Any, Any],
    shape: tuple[int, ...],
    yx: tuple[int, int],
    y_edges: np.ndarray[Any, Any],
    x_edges: np.ndarray[Any, Any],
    window: tuple[tuple[int, int], ...],
) -> tuple[np.ndarray[Any, Any], int]:
    """Shares per cell and state, and the steps per spatial element.

    ``lo``/``hi``: ``(n, ndim)`` element boxes ``[lo, hi)`` of the chunks that have a row,
    ``state``: their state codes (1..3); boxes never overlap. ``y_edges``/``x_edges``: cell
    boundaries along the two spatial axes ``yx`` (every box boundary along them is one).
    ``window``: ``[a, b)`` per axis counted (the spatial axes' are their whole extent)."""
    ay, ax = yx
    others = [i for i in range(len(shape)) if i not in yx]
    steps = int(np.prod([window[i][1] - window[i][0] for i in others], dtype=np.int64)) if others else 1
    counts = np.zeros((y_edges.size - 1, x_edges.size - 1, len(STATES)), np.float64)
    if lo.shape[0] and steps:
        weight = np.ones(lo.shape[0], np.int64)
        for i in others:  # elements of the box inside the window along each other axis
            weight *= np.clip(np.minimum(hi[:, i], window[i][1]) - np.maximum(lo[:, i], window[i][0]), 0, None)
        keep = weight > 0
        lo, hi, state, weight = lo[keep], hi[keep], state[keep], weight[keep]
        iy0, iy1 = np.searchsorted(y_edges, lo[:, ay]), np.searchsorted(y_edges, hi[:, ay])
        ix0, ix1 = np.searchsorted(x_edges, lo[:, ax]), np.searchsorted(x_edges, hi[:, ax])
        ky, kx = iy1 - iy0, ix1 - ix0
        n = ky * kx  # cells each box covers (1 unless eras cut the spatial axes differently)
        row = np.repeat(np.arange(lo.shape[0]), n)
        off = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        cy = iy0[row] + off // kx[row]
        cx = ix0[row] + off % kx[row]
        np.add.at(counts, (cy, cx, state[row]), weight[row])
    if steps:
        counts /= steps
    counts[..., 0] = np.clip(1.0 - counts[..., 1:].sum(axis=-1), 0.0, 1.0)
    return counts, steps


def _edges(size: int, segments: list[tuple[int, tuple[int, ...]]]) -> np.ndarray[Any, Any]:
    """Every chunk boundary along one axis: ``segments`` are ``(start, chunk lengths)`` in
    elements (one per era along the era axis, each from the era's start; one ``(0, lengths)``
    per era elsewhere); lengths regular or rectilinear (``plan.grid``)."""
    cuts = {0, size}
    for a, lengths in segments:
        cuts.update((a + np.cumsum(np.asarray(lengths, np.int64))).tolist())
        cuts.add(a)
    return np.array(sorted(c for c in cuts if 0 <= c <= size), np.int64)


# --------------------------------------------------------------------------- I/O
def _boxes(snap: Snapshot, meta: ArrayMeta) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Element boxes and state codes of the chunk rows of ``meta`` at ``snap``."""
    nd = len(meta.shape)
    t = snap.chunk_rows(meta.name, columns=("offset", "held_at", "era"))
    keys = np.column_stack([pc.cast(t.column(c), "int64").to_numpy() for c in GLOBAL_KEY_COLUMNS[:nd]]) if nd else \
        np.zeros((t.num_rows, 0), np.int64)  # fmt: skip
    held = t.column("held_at").to_numpy(zero_copy_only=False) >= 0
    inline = t.column("offset").to_numpy(zero_copy_only=False) < 0
    state = np.where(held, 3, np.where(inline, 2, 1)).astype(np.int64)
    era = t.column("era").to_numpy(zero_copy_only=False).astype(np.int64)
    layout = EraLayout.of(meta)
    lo = np.zeros_like(keys)
    hi = np.zeros_like(keys)
    if meta.gridless:  # each chunk through its slab (``plan/slabs.py``)
        lo, size = snap.slab_layout(meta.name).rows_boxes(t)
        hi = lo + size
    elif layout is None:  # regular or rectilinear
        origin, size = Grid.of(meta).boxes(keys)
        lo, hi = origin, origin + size
    else:
        for e, (start, _stop) in enumerate(layout.bounds):
            m = era == e
            origin, size = Grid.of_era(meta, e).boxes(keys[m])  # regular or rectilinear, cut at the era's end
            origin[:, layout.axis] += start
            lo[m], hi[m] = origin, origin + size
    return lo, hi, state


def _time_window(snap: Snapshot, meta: ArrayMeta, when: str) -> tuple[int, tuple[int, int]]:
    """(axis, [a, b)) of the time steps ``when`` selects (an ISO date: that day; START/END)."""
    from ..plan.region import date_to_cf, interval_ranges, parse_time_range
    from ..table.hold import _attr, _coord_kind, _unpacked

    arrays = snap.arrays()
    text = when if "/" in when else f"{when}/{when}"
    start, end = parse_time_range(text)
    for i, d in enumerate(meta.dims):
        # the dimension's coordinate, else a 1-D time array along it (``time(tdim)``)
        named = arrays.get(d)
        along = [a for a in arrays.values() if tuple(a.dims) == (d,) and a.name != meta.name]
        c = next((a for a in ([named] if named is not None else []) + along
                  if len(a.shape) == 1 and _coord_kind(a) == "time"), None)  # fmt: skip
        if c is None:
            continue
        units, cal = str(_attr(c, "units")), str(_attr(c, "calendar") or "standard")
        values = _unpacked(c, _read(snap, c))
        found = interval_ranges(values, date_to_cf(start, units, cal), date_to_cf(end, units, cal))
        if not found:
            raise BadInputError(f"--time {when}: no time step of {meta.name} falls there")
        return i, found[0]
    raise BadInputError(f"--time {when}: {meta.name} has no CF time coordinate")


def _affine_axis(meta: ArrayMeta, dim: str, i: int, edges: np.ndarray[Any, Any]) -> Axis:
    """A GeoTIFF ``y*``/``x*`` dimension: pixel centres from its north-up transform
    (``x0, dx, 0, y0, 0, dy``, GDAL order) in the CRS's units; element indices otherwise."""
    from ..table.hold import _attr

    n = meta.shape[i]
    t = _attr(meta, "transform")
    if t is None or len(t) != 6 or dim[:1] not in ("x", "y"):
        return Axis(dim, i, n, edges)
    x0, dx, rx, y0, ry, dy = (float(v) for v in t)
    if rx or ry:
        return Axis(dim, i, n, edges)
    a0, step = (x0, dx) if dim.startswith("x") else (y0, dy)
    crs = _attr(meta, "crs")
    return Axis(dim, i, n, edges, a0 + step * (np.arange(n) + 0.5), None if crs is None else str(crs))


def _read(snap: Snapshot, meta: ArrayMeta) -> np.ndarray[Any, Any]:
    from ..read.array import Array

    return np.asarray(Array(snap, meta)[...])


def _check_cells(name: str, dims: tuple[str, str], cells: int) -> None:
    if cells > MAX_CELLS:
        raise BadInputError(f"{name}: {cells} chunk cells over ({dims[0]}, {dims[1]}) are more than a picture shows "
                            f"(at most {MAX_CELLS})")  # fmt: skip


def coverage(snap: Snapshot, name: str, *, tag: str | None = None, time: str | None = None) -> Coverage:
    """The chunk states of array ``name`` at ``snap`` over its two spatial dimensions."""
    from ..table.hold import _attr, _coord_kind, _unpacked

    meta = snap.array(name)
    if meta.status != "ok":
        raise BadInputError(f"{name}: recorded as {meta.status} ({meta.reason}): no chunk states to show")
    if np.dtype(meta.dtype).kind not in "biufc":
        raise BadInputError(f"{name}: an array of {np.dtype(meta.dtype)} values (strings or records: station names, "
                            "labels) is not a field over space; coverage pictures numeric arrays")  # fmt: skip
    arrays = snap.arrays()
    coords = {d: arrays[d] for d in meta.dims if d in arrays and len(arrays[d].shape) == 1 and d != name}
    ay, ax = spatial_axes(meta, {d: _coord_kind(c) for d, c in coords.items()})
    window = [(0, n) for n in meta.shape]
    if time is not None:
        t_axis, span = _time_window(snap, meta, time)
        if t_axis in (ay, ax):
            raise BadInputError(f"--time: time is a spatial dimension of {name} here")
        window[t_axis] = span
    layout = EraLayout.of(meta)
    if not meta.gridless and layout is None:  # count before listing every chunk edge (2^30 per axis: GBs)
        grid = Grid.of(meta)
        _check_cells(name, (meta.dims[ay], meta.dims[ax]), grid.nchunks(ay) * grid.nchunks(ax))

    def make_axis(i: int) -> Axis:
        d = meta.dims[i]
        n = meta.shape[i]
        if meta.gridless:  # every tile's own chunk edges, of its own chunk shape (``plan/slabs.py``)
            slabs = snap.slab_layout(name)
            spans = zip(slabs.offset[:, i].tolist(), slabs.extent[:, i].tolist(), strict=True)
            segments = [(int(o), tuple(slab_lengths(int(e), slabs.chunks_of(j)[i]))) for j, (o, e) in enumerate(spans)]
        elif layout is None:
            segments = [(0, Grid.of(meta).dim_lengths(i))]
        elif layout.axis == i:  # eras along this axis: each era's grid starts at the era
            segments = [(a, Grid.of_era(meta, e).dim_lengths(i)) for e, (a, _b) in enumerate(layout.bounds)]
        else:
            segments = [(0, Grid.of_era(meta, e).dim_lengths(i)) for e in range(len(layout.bounds))]
        edges = _edges(n, segments)
        c = coords.get(d)
        if c is None:
            return _affine_axis(meta, d, i, edges)
        if np.dtype(c.dtype).kind not in "iuf" or c.shape[0] != meta.shape[i]:
            return Axis(d, i, meta.shape[i], edges)
        units = _attr(c, "units")
        kind = _coord_kind(c)
        values = _unpacked(c, _read(snap, c))
        if kind == "time" or not np.all(np.isfinite(values)):
            return Axis(d, i, meta.shape[i], edges)
        return Axis(d, i, meta.shape[i], edges, values, None if units is None else str(units))

    y, x = make_axis(ay), make_axis(ax)
    _check_cells(name, (y.dim, x.dim), (y.edges.size - 1) * (x.edges.size - 1))
    lo, hi, state = _boxes(snap, meta)
    shares, steps = states_over_cells(lo, hi, state, tuple(meta.shape), (ay, ax), y.edges, x.edges, tuple(window))
    return Coverage(snap.collection.uri, snap.version, tag, name, y, x, shares, steps, time)

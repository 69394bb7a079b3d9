"""Vectorised placement of uncompressed chunks: many small chunks copied into the output with a
few numpy operations instead of one decode and one slice assignment per chunk (the per-chunk
Python cost is most of a read of 1,000 chunks of a few hundred bytes; ``design/scale.md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .decode import ChunkDecoder

__all__ = ["MAX_CHUNK_ITEMS", "place_raw"]

MAX_CHUNK_ITEMS = 1 << 16
"""Chunks up to this many elements go through the vectorised path (larger ones cost a copy
each anyway; their index arrays would cost more than the loop)."""


def place_raw(
    out: np.ndarray[Any, Any],
    items: list[tuple[int, Any]],
    decoder: ChunkDecoder,
    masks: np.ndarray[Any, Any],
    src_lo: Sequence[Sequence[int]],
    src_hi: Sequence[Sequence[int]],
    dst_lo: Sequence[Sequence[int]],
    steps: Sequence[int],
) -> list[tuple[int, Any]]:
    """Place the chunks of ``items`` (row, raw bytes) that need no decoding (no codec, filter
    mask 0, exactly one full chunk of bytes) into ``out``; returns the others, untouched.

    Row ``i`` is cropped to ``src_lo[i]:src_hi[i]:steps`` (chunk-local) and lands at
    ``dst_lo[i]`` in ``out``; chunks with the same crop are placed together."""
    if decoder.steps or decoder.spacepad or decoder.nullterm or decoder.items > MAX_CHUNK_ITEMS or len(items) < 2:
        return items
    plain = [(row, raw) for row, raw in items if len(raw) == decoder.nbytes and not masks[row]]
    if len(plain) < 2:
        return items
    rest = [(row, raw) for row, raw in items if len(raw) != decoder.nbytes or masks[row]]
    stacked = np.frombuffer(b"".join(raw for _, raw in plain), decoder.dtype).reshape(-1, *decoder.shape)
    rows = [row for row, _ in plain]
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, row in enumerate(rows):
        groups.setdefault((*src_lo[row], *src_hi[row]), []).append(k)
    nd = len(decoder.shape)
    for crop_key, ks in groups.items():
        lo, hi = crop_key[:nd], crop_key[nd:]
        part = stacked[np.asarray(ks)] if len(ks) != len(rows) else stacked
        crop = part[(slice(None), *map(slice, lo, hi, steps))]
        if crop.size == 0:
            continue
        starts = np.asarray([dst_lo[rows[k]] for k in ks], np.int64).reshape(len(ks), nd)
        if _stacks_along_axis0(out, crop, starts):  # one slab: a plain copy
            order = np.argsort(starts[:, 0], kind="stable")
            a = int(starts[order[0], 0])
            out[a : a + len(ks) * crop.shape[1]] = crop[order].reshape(-1, *crop.shape[2:])
            continue
        index = []
        for d in range(nd):
            ax = starts[:, d][:, None] + np.arange(crop.shape[d + 1])[None, :]
            index.append(ax.reshape((len(ks), *([1] * d), crop.shape[d + 1], *([1] * (nd - d - 1)))))
        out[tuple(index)] = crop
    return rest


def _stacks_along_axis0(out: np.ndarray[Any, Any], crop: np.ndarray[Any, Any], starts: np.ndarray[Any, Any]) -> bool:
    """Whether the crops (``m`` of shape ``crop.shape[1:]``) tile a slab of ``out`` end to end
    along axis 0: each spans every other axis of ``out`` and their axis-0 starts are consecutive."""
    if crop.ndim < 2 or tuple(crop.shape[2:]) != tuple(out.shape[1:]) or np.any(starts[:, 1:]):
        return False
    s = np.sort(starts[:, 0])
    return bool(np.all(np.diff(s) == crop.shape[1]))

"""A read-only zarr v3 Store over one collection version (``refstore.zarr_store``).

Keys: ``zarr.json`` for the root, every group and every array (metadata from the table through
``zarr_meta``); chunk keys ``NAME/c/i/j...`` (default encoding, ``/`` separator). Chunk bytes
come, in this order, from held bytes (Lance ``read_blobs``), inline bytes, else source byte
ranges read through refstore's ``Fetcher`` after coalescing per source (``plan.coalesce``:
gap 0, 8 MiB cap by default). Every read is a batch: ``get_partial_values``, ``get_many`` and
zarr's ``_get_many`` resolve all their keys at once, and single ``get`` calls that arrive in the
same event-loop turn (zarr fetches the chunks of one selection concurrently) are gathered into
one batch, so adjacent chunks of different keys become one ranged read.

Arrays zarr cannot decode as stored (several eras, a rectilinear grid, a short last TIFF strip, HDF5 chunks whose
filter mask skipped a filter, JPEG or other codecs without a zarr v3 form) are served as
*decoded* chunks: their ``zarr.json`` has a plain ``bytes`` codec and the store decodes each
chunk with refstore's own reader (``Array.read`` of the chunk's box, fill value past the
array's end). Arrays recorded as unsupported (no decoder) are left out.

Eras that differ in what xarray decodes (``refstore._cf``: ``scale_factor``, ``add_offset``,
``_FillValue``, ``missing_value``, ``_Unsigned``...) cannot share one set of attributes over
their raw values, and numbers some sources lack (holes) read as the fill value where
``xr.concat`` of the files gives NaN: such an array is served *unpacked*, each era's part
decoded with its own attributes by xarray's coders (mask and scale, no time decoding), holes
NaN, as floats with NaN for missing values and the packing attributes dropped, as
``xr.concat`` of the decoded files gives it. When the eras also differ in ``units`` or
``calendar`` (no common meaning for the values) the array is left out; ``left_out`` gives the
reason.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype

from .._keys import GLOBAL_KEY_COLUMNS, NO_OFFSET
from ..errors import BadInputError, SourceReadError
from ..plan.coalesce import coalesce
from ..plan.grid import Grid
from ..plan.select import Selection
from .array import Array, ReadOptions
from .fetch import Fetcher
from .fresh import SourceCheck

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence

    from zarr.core.buffer import Buffer, BufferPrototype

    from ..scan._types import ArrayMeta
    from ..table.collection import Snapshot

__all__ = ["RefstoreZarrStore", "coarse_block", "zarr_store"]

META = "zarr.json"
_UNPACK: dict[str, Any] = {"mask_and_scale": True, "decode_times": False, "decode_timedelta": False,
                           "concat_characters": False, "use_cftime": None}  # fmt: skip
"""xarray ``decode_cf_variable`` options for arrays served unpacked: mask and scale only."""
_CONSOLIDATED_EMPTY: dict[str, Any] = {"kind": "inline", "must_understand": False, "metadata": {}}


COARSE_BELOW = 16 * 1024
"""Arrays whose source chunk decodes to fewer bytes than this are served on a coarser grid."""
BLOCK_CHUNKS = 256
"""A coarse zarr chunk grows until it holds this many source chunks ..."""
BLOCK_BYTES = 1024 * 1024
"""... or this many decoded bytes, whichever comes first (along the last axes first)."""


def zarr_store(
    path: str,
    as_of: int | str | None = None,
    *,
    options: ReadOptions | None = None,
    storage_options: dict[str, str] | None = None,
    rectilinear: bool = False,
    source_grid: bool = False,
) -> RefstoreZarrStore:
    """A read-only zarr v3 store over the collection at ``path`` as of a version or tag (latest
    when None, resolved now: the store keeps reading that version). ``rectilinear``: serve an
    array on a rectilinear grid (sources off their chunk boundaries) on that grid, zarr's
    ``rectilinear`` chunk grid (readers set ``zarr.config.set({"array.rectilinear_chunks":
    True})``; xarray does not read it yet); default: on the regular grid of its chunk shape.
    Numeric arrays of small chunks (under ``COARSE_BELOW`` bytes decoded) are served decoded on a
    coarser grid, each zarr chunk a block of whole source chunks (``coarse_block``) read by the
    direct reader in one call: zarr-python's cost per chunk is ~50x the direct reader's.
    ``source_grid``: keep every array on its source chunk grid (stored bytes as they are)."""
    return RefstoreZarrStore(path, as_of, options=options, storage_options=storage_options, rectilinear=rectilinear,
                             source_grid=source_grid)  # fmt: skip


def coarse_block(chunks: Sequence[int], grid: Sequence[int], itemsize: int, *, below: int = COARSE_BELOW,
                 min_chunks: int = BLOCK_CHUNKS, min_bytes: int = BLOCK_BYTES) -> tuple[int, ...] | None:  # fmt: skip
    """Source chunks per axis in one zarr chunk of an array of source ``chunks`` (elements) on a
    ``grid`` (chunks per axis) of ``itemsize``-byte values, or None to keep the source grid (a
    chunk of ``below`` bytes or more, or a grid of one chunk). Pure. The block grows along the
    last axis first (C order: a block is a run of consecutive source chunks, contiguous in a
    file written in order) until it holds ``min_chunks`` source chunks or ``min_bytes`` bytes;
    a factor is never more than the grid along its axis (no block is longer than the array)
    and a source chunk is never split."""
    nbytes = int(np.prod(chunks, dtype=np.int64)) * itemsize
    if nbytes >= below or not chunks or int(np.prod(grid, dtype=np.int64)) <= 1:
        return None
    block = [1] * len(chunks)
    have = 1
    for d in range(len(chunks) - 1, -1, -1):
        want = min(-(-min_chunks // have), -(-min_bytes // (nbytes * have)))
        block[d] = max(1, min(int(grid[d]), want))
        have *= block[d]
        if have >= min_chunks or have * nbytes >= min_bytes:
            break
    return None if have == 1 else tuple(block)


@dataclass(frozen=True, slots=True)
class _Plan:
    """How one array is served: ``decoded`` is the reason its chunks are decoded by the store
    (None: stored bytes as they are); ``chunks``/``grid`` of the zarr array."""

    meta: ArrayMeta
    decoded: str | None
    chunks: tuple[int, ...]
    grid: tuple[int, ...]
    dtype: np.dtype[Any]
    unpack: bool = False  # eras differ in packing or sources lack it: values CF-decoded per era (module doc)
    rgrid: Grid | None = None  # served on its rectilinear grid (``zarr_store(rectilinear=True)``)
    block: tuple[int, ...] | None = None  # source chunks per axis in one zarr chunk (``coarse_block``)

    @property
    def source_grid(self) -> tuple[int, ...]:
        """Source chunks per axis (the grid of the table's keys; the zarr grid without a block)."""
        if self.block is None:
            return self.grid
        src = self.meta.eras[0]["chunks"] if self.meta.eras else self.meta.chunks
        return tuple(-(-int(s) // int(c)) if c else 0 for s, c in zip(self.meta.shape, src, strict=True))

    def box(self, index: Sequence[int]) -> tuple[list[int], list[int], tuple[int, ...]]:
        """Element box ``[lo, hi)`` of zarr chunk ``index`` and the shape its bytes have: the
        full chunk shape (cut by the array's end: padded), on a rectilinear dimension exactly
        the chunk's length."""
        if self.rgrid is None:
            lo = [i * c for i, c in zip(index, self.chunks, strict=True)]
            hi = [min(a + c, s) for a, c, s in zip(lo, self.chunks, self.meta.shape, strict=True)]
            return lo, hi, self.chunks
        origin, size = self.rgrid.boxes(np.asarray([index], np.int64))
        lo, n = origin[0].tolist(), size[0].tolist()
        shape = tuple(n[d] if self.rgrid.rectilinear(d) else c for d, c in enumerate(self.chunks))
        return lo, [a + b for a, b in zip(lo, n, strict=True)], shape

    @property
    def every_cell(self) -> bool:
        """Decoded on every cell of the zarr grid (eras, a rectilinear grid served on a regular
        one, or missing values where sources lack it)."""
        return self.decoded is not None and (
            bool(self.meta.eras) or self.unpack or bool(self.meta.edges) or self.meta.gridless
        )


@dataclass(frozen=True, slots=True)
class _Refs:
    """Chunk rows of one array, columnar, sorted by C-order flat chunk index."""

    flat: np.ndarray[Any, Any]
    source: np.ndarray[Any, Any]  # codes into names
    names: list[str]
    offset: np.ndarray[Any, Any]
    length: np.ndarray[Any, Any]
    held: np.ndarray[Any, Any]  # bool
    rowid: np.ndarray[Any, Any]
    inline: pa.Array


class _State:
    """Everything the store derives from the snapshot (built on first use, not pickled)."""

    def __init__(self, snap: Snapshot, options: ReadOptions, *, rectilinear: bool = False,
                 source_grid: bool = False) -> None:  # fmt: skip
        from ..zarr_meta import (
            attr_values,
            register_codecs,
            v3_array,
            v3_chunk_grid,
            v3_decoded_array,
            v3_group,
            v3_unexpressible,
        )

        register_codecs()
        self.snap = snap
        self.options = options
        self.fetcher = Fetcher()
        self.lock = threading.Lock()
        self.refs: dict[str, _Refs] = {}
        self.cells: dict[str, np.ndarray[Any, Any]] = {}
        self.source_grid = source_grid
        masked = snap.ds.to_table(columns=["array"], filter="kind = 'chunk' AND filter_mask != 0")
        masked_names = set(masked.column("array").unique().to_pylist()) if masked.num_rows else set()
        self.plans: dict[str, _Plan] = {}
        self.meta: dict[str, bytes] = {}
        self.left_out: dict[str, str] = {}
        for name, meta in snap.arrays().items():
            if meta.status != "ok":
                continue
            if _unpacks(meta):
                self._unpacked(meta)
                continue
            reason = v3_unexpressible(meta)
            if reason is None and name in masked_names:
                reason = f"array {name!r}: some chunks skip a filter (HDF5 filter mask)"
            chunks = tuple(int(c) for c in (meta.eras[0]["chunks"] if meta.eras else meta.chunks))
            grid = tuple(-(-int(s) // c) if c else 0 for s, c in zip(meta.shape, chunks, strict=True))
            rgrid = Grid.of(meta) if rectilinear and meta.edges and not meta.eras else None
            block = self._block(meta, chunks, grid) if rgrid is None else None
            if block is not None:
                reason = reason or f"array {name!r}: small chunks served on a coarser grid (source_grid=False)"
                chunks, grid = _blocked(meta, chunks, block)
            if reason is None:
                doc, dtype = v3_array(meta), np.dtype(meta.dtype)
            else:
                dtype = Array(snap, meta).dtype
                dtype = dtype.newbyteorder("<") if dtype.itemsize > 1 and dtype.kind in "biufc" else dtype
                doc = v3_decoded_array(meta, dtype, chunks)
            if rgrid is not None:
                doc["chunk_grid"] = v3_chunk_grid(meta)
                grid = tuple(rgrid.nchunks(d) for d in range(rgrid.ndim))
            self.plans[name] = _Plan(meta, reason, chunks, grid, dtype, rgrid=rgrid, block=block)
            self.meta[f"{name}/{META}"] = _dumps(doc)
        groups = snap.group_attrs()
        paths = {""} | set(groups)
        for name in self.plans:
            parts = name.split("/")[:-1]
            paths.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        self.groups = sorted(p for p in paths if p not in self.plans)
        docs: dict[str, dict[str, Any]] = {}
        for g in self.groups:
            attrs = attr_values(groups.get(g) or {})
            docs[g] = v3_group(attrs)
            if g:
                self.meta[f"{g}/{META}"] = _dumps(docs[g])
        # the root carries every node's metadata (zarr's inline consolidated metadata): one read opens all
        nodes = {g: {**d, "consolidated_metadata": _CONSOLIDATED_EMPTY} for g, d in docs.items() if g}
        nodes |= {name: json.loads(self.meta[f"{name}/{META}"]) for name in self.plans}
        root = {**docs[""], "consolidated_metadata": {**_CONSOLIDATED_EMPTY, "metadata": dict(sorted(nodes.items()))}}
        self.meta[META] = _dumps(root)

    def _unpacked(self, meta: ArrayMeta) -> None:
        """Plan an array whose eras differ in packing: unpacked values, or left out."""
        from ..zarr_meta import plain_attrs, v3_decoded_array
        from .xarray_backend import PACKING, decoded_dtype, era_packing

        packs = [era_packing(e) for e in meta.eras]
        for key in ("units", "calendar"):
            if len({repr(p.get(key)) for p in packs}) > 1:
                self.left_out[meta.name] = (f"array {meta.name!r}: its eras differ in {key!r} "
                                            f"({', '.join(sorted({str(p.get(key)) for p in packs}))})")  # fmt: skip
                return
        dtype = decoded_dtype(meta, _UNPACK)
        if dtype.kind != "f":
            dtype = np.dtype(np.float64)
        dtype = dtype.newbyteorder("<")
        chunks = tuple(int(c) for c in (meta.eras[0]["chunks"] if meta.eras else meta.chunks))
        grid = tuple(-(-int(s) // c) if c else 0 for s, c in zip(meta.shape, chunks, strict=True))
        block = self._block(meta, chunks, grid, dtype)
        if block is not None:
            chunks, grid = _blocked(meta, chunks, block)
        keep = {"units", "calendar"}
        attrs = {k: v for k, v in plain_attrs(meta).items() if k not in PACKING or k in keep}
        reason = (f"array {meta.name!r}: its eras differ in packing or some sources lack it; served unpacked "
                  "(CF-decoded per era)")
        self.plans[meta.name] = _Plan(meta, reason, chunks, grid, dtype, unpack=True, block=block)
        doc = v3_decoded_array(meta, dtype, chunks, attributes=attrs, fill_value=np.nan)
        self.meta[f"{meta.name}/{META}"] = _dumps(doc)

    def _block(self, meta: ArrayMeta, chunks: tuple[int, ...], grid: tuple[int, ...],
               dtype: np.dtype[Any] | None = None) -> tuple[int, ...] | None:  # fmt: skip
        """The coarse block of a numeric array (``coarse_block``), None on the source grid."""
        dt = np.dtype(meta.dtype) if dtype is None else dtype
        if self.source_grid or dt.kind not in "biufc" or not grid or 0 in grid:
            return None
        return coarse_block(chunks, grid, dt.itemsize)

    # ------------------------------------------------------------------ rows
    def array_refs(self, name: str) -> _Refs:
        with self.lock:
            got = self.refs.get(name)
        if got is not None:
            return got
        plan = self.plans[name]
        ndim = len(plan.meta.shape)
        t = self.snap.chunk_rows(name, columns=("source", "offset", "length", "inline", "held_at"),
                                 with_row_id=True, era=0 if plan.meta.eras else None)  # fmt: skip
        if ndim and t.num_rows:
            keys = tuple(t.column(c).to_numpy().astype(np.int64) for c in GLOBAL_KEY_COLUMNS[:ndim])
            flat = np.ravel_multi_index(keys, plan.source_grid).astype(np.int64)
        else:
            flat = np.zeros(t.num_rows, np.int64)
        order = np.argsort(flat, kind="stable")
        src = t.column("source").combine_chunks().dictionary_encode()
        got = _Refs(
            flat=flat[order],
            source=src.indices.to_numpy(zero_copy_only=False)[order],
            names=src.dictionary.to_pylist(),
            offset=t.column("offset").to_numpy()[order],
            length=t.column("length").to_numpy()[order],
            held=(t.column("held_at").to_numpy() >= 0)[order],
            rowid=t.column("_rowid").to_numpy()[order],
            inline=t.column("inline").combine_chunks().take(pa.array(order)),
        )
        with self.lock:
            self.refs[name] = got
        return got

    def array_cells(self, name: str) -> np.ndarray[Any, Any]:
        """Sorted flat indices of the zarr chunks holding at least one source chunk."""
        plan = self.plans[name]
        refs = self.array_refs(name)
        if plan.block is None or not plan.grid:
            return refs.flat
        with self.lock:
            got = self.cells.get(name)
        if got is None:
            idx = np.unravel_index(refs.flat, plan.source_grid)
            coarse = tuple(i // b for i, b in zip(idx, plan.block, strict=True))
            got = np.unique(np.ravel_multi_index(coarse, plan.grid).astype(np.int64))
            with self.lock:
                self.cells[name] = got
        return got

    def source_check(self) -> SourceCheck:
        """The freshness check of one batch: each source fetched from is checked once per batch,
        never once per store (a store kept open refuses a source rewritten meanwhile)."""
        return SourceCheck(self.snap.source_identity(), self.fetcher, checksums=self.snap.source_checksums(),
                           on_stale=self.options.on_stale)  # fmt: skip

    # ------------------------------------------------------------------ keys
    def parse(self, key: str) -> tuple[str, tuple[int, ...]] | None:
        """(array, chunk index) of a chunk key inside the grid, or None."""
        parts = key.split("/")
        for k in range(len(parts) - 1, -1, -1):
            if parts[k] != "c":
                continue
            idx = parts[k + 1 :]
            if not all(p.isdigit() for p in idx):
                return None
            plan = self.plans.get("/".join(parts[:k]))
            if plan is None or len(idx) != len(plan.grid):
                continue
            index = tuple(int(p) for p in idx)
            if any(i >= g for i, g in zip(index, plan.grid, strict=True)):
                return None
            return plan.meta.name, index
        return None

    def chunk_keys(self, name: str) -> list[str]:
        plan = self.plans[name]
        if not plan.grid:
            return [f"{name}/c"] if plan.decoded or len(self.array_refs(name).flat) else []
        if plan.every_cell:  # decoded on the zarr grid: every cell
            flat = np.arange(int(np.prod(plan.grid, dtype=np.int64)), dtype=np.int64)
        else:
            flat = self.array_cells(name)
        idx = np.unravel_index(flat, plan.grid)
        joined = np.char.add(f"{name}/c/", idx[0].astype(str))
        for col in idx[1:]:
            joined = np.char.add(np.char.add(joined, "/"), col.astype(str))
        return joined.tolist()  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ reading
    def read(self, keys: Sequence[str]) -> list[Any]:
        """Bytes (or None when absent) of each key, in order: one batch, one freshness check."""
        out: list[Any] = [None] * len(keys)
        check = self.source_check()
        by_array: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
        for i, key in enumerate(keys):
            if key in self.meta:
                out[i] = self.meta[key]
                continue
            parsed = self.parse(key)
            if parsed is not None:
                by_array.setdefault(parsed[0], []).append((i, parsed[1]))
        fetch: list[tuple[str, int, int, int]] = []  # (source, offset, length, slot)
        held_ids: list[int] = []
        held_slots: list[int] = []
        for name, wanted in by_array.items():
            plan = self.plans[name]
            if plan.every_cell:
                for (slot, _), data in zip(wanted, self._decoded_many(plan, [w[1] for w in wanted], check),
                                      strict=True):  # fmt: skip
                    out[slot] = data
                continue
            idx = np.asarray([w[1] for w in wanted], np.int64).reshape(len(wanted), len(plan.grid))
            flat = np.atleast_1d(np.ravel_multi_index(tuple(idx.T), plan.grid) if plan.grid
                                 else np.zeros(len(wanted), np.int64))  # fmt: skip
            if plan.decoded is not None:  # decoded where a source chunk is: one batch
                cells = self.array_cells(name)
                pos = np.minimum(np.searchsorted(cells, flat), max(len(cells) - 1, 0))
                there = (cells[pos] == flat) if len(cells) else np.zeros(len(flat), bool)
                present = [w for w, t in zip(wanted, there.tolist(), strict=True) if t]
                for (slot, _), data in zip(present, self._decoded_many(plan, [w[1] for w in present], check),
                                           strict=True):  # fmt: skip
                    out[slot] = data
                continue
            refs = self.array_refs(name)
            pos = np.searchsorted(refs.flat, flat)
            flat_list: list[int] = flat.tolist()
            pos_list: list[int] = pos.tolist()
            for (slot, _), f, p in zip(wanted, flat_list, pos_list, strict=True):
                if p >= len(refs.flat) or refs.flat[p] != f:
                    continue  # absent chunk: zarr reads the fill value
                if refs.held[p]:
                    held_ids.append(int(refs.rowid[p]))
                    held_slots.append(slot)
                elif refs.offset[p] == NO_OFFSET:
                    out[slot] = refs.inline[p].as_py()
                else:
                    fetch.append((refs.names[refs.source[p]], int(refs.offset[p]), int(refs.length[p]), slot))
        if held_ids:
            blobs = self.snap.ds.read_blobs("held", ids=pa.array(held_ids, pa.uint64()), preserve_order=True)
            for slot, (_addr, raw) in zip(held_slots, blobs, strict=True):
                if raw is None:
                    raise SourceReadError(f"{keys[slot]}: a held chunk has no bytes (collection damaged?)")
                out[slot] = raw
        if fetch:
            self._fetch(fetch, out, check)
        return out

    def _fetch(self, fetch: list[tuple[str, int, int, int]], out: list[Any], check: SourceCheck) -> None:
        """Group by source, merge adjacent ranges, one ranged read per run, slice back."""
        fetch.sort(key=lambda f: f[0])
        start = 0
        while start < len(fetch):
            src = fetch[start][0]
            stop = start
            while stop < len(fetch) and fetch[stop][0] == src:
                stop += 1
            group = fetch[start:stop]
            start = stop
            check(src)
            offsets = np.asarray([g[1] for g in group], np.int64)
            lengths = np.asarray([g[2] for g in group], np.int64)
            runs = coalesce(offsets, lengths, max_gap=self.options.max_gap, max_bytes=self.options.max_bytes)
            data = self.fetcher.get_ranges(src, runs.start.tolist(), runs.end.tolist())
            for (_, off, n, slot), r in zip(group, runs.run.tolist(), strict=True):
                lo = off - int(runs.start[r])
                out[slot] = data[r][lo : lo + n]

    def _decoded_many(self, plan: _Plan, indices: list[tuple[int, ...]], check: SourceCheck) -> list[bytes]:
        """Chunks of a plan decoded on every cell: the box holding them all read and decoded
        once (one table query, not one per chunk) when it is at most twice their size."""
        if not indices:
            return []
        if len(indices) < 2 or plan.rgrid is not None:
            return [self._decoded(plan, i, check) for i in indices]
        idx = np.asarray(indices, np.int64)
        lo_k, hi_k = idx.min(axis=0), idx.max(axis=0) + 1
        if int(np.prod(hi_k - lo_k)) > 2 * len(indices):
            return [self._decoded(plan, i, check) for i in indices]
        c = np.asarray(plan.chunks, np.int64)
        lo = lo_k * c
        hi = np.minimum(hi_k * c, np.asarray(plan.meta.shape, np.int64))
        box = self._decode_box(plan, lo.tolist(), hi.tolist(), check)
        out = []
        for index in indices:
            a = np.asarray(index, np.int64) * c - lo
            b = np.minimum(a + c, hi - lo)
            out.append(self._full_chunk(plan, box[tuple(map(slice, a.tolist(), b.tolist()))]))
        return out

    def _decode_box(self, plan: _Plan, lo: list[int], hi: list[int], check: SourceCheck) -> np.ndarray[Any, Any]:
        arr = Array(self.snap, plan.meta, fetcher=self.fetcher, options=self.options)
        box = Selection(tuple(lo), tuple(hi), (1,) * len(lo), ())
        if plan.unpack:
            from .xarray_backend import decode_eras

            return decode_eras(arr, box, plan.dtype, _UNPACK)  # checks per era read
        return arr.read(box, check=check)

    def _decoded(self, plan: _Plan, index: tuple[int, ...], check: SourceCheck) -> bytes:
        """One zarr chunk decoded by refstore's reader, full chunk shape (fill past the end)."""
        lo, hi, shape = plan.box(index)
        return self._full_chunk(plan, self._decode_box(plan, lo, hi, check), shape)

    def _full_chunk(self, plan: _Plan, part: np.ndarray[Any, Any], shape: tuple[int, ...] | None = None) -> bytes:
        """A decoded chunk's bytes at the full chunk shape (padded past the array's end), or at
        ``shape`` (a chunk of a rectilinear grid)."""
        shape = plan.chunks if shape is None else shape
        if part.shape != shape:
            fill = np.nan if plan.unpack else Array(self.snap, plan.meta).fill_value
            full = np.full(shape, fill, dtype=plan.dtype)
            full[tuple(slice(0, n) for n in part.shape)] = part
            part = full
        return np.ascontiguousarray(part, dtype=plan.dtype).tobytes()

    def size(self, key: str) -> int | None:
        if key in self.meta:
            return len(self.meta[key])
        parsed = self.parse(key)
        if parsed is None:
            return None
        plan = self.plans[parsed[0]]
        if plan.every_cell:
            return int(np.prod(plan.box(parsed[1])[2], dtype=np.int64)) * plan.dtype.itemsize
        f = int(np.ravel_multi_index(parsed[1], plan.grid)) if plan.grid else 0
        if plan.decoded is not None:
            cells = self.array_cells(parsed[0])
            p = int(np.searchsorted(cells, f))
            if p >= len(cells) or cells[p] != f:
                return None
            return int(np.prod(plan.chunks, dtype=np.int64)) * plan.dtype.itemsize
        refs = self.array_refs(parsed[0])
        p = int(np.searchsorted(refs.flat, f))
        if p >= len(refs.flat) or refs.flat[p] != f:
            return None
        if refs.offset[p] == NO_OFFSET:
            return len(refs.inline[p].as_py())
        return int(refs.length[p])


def _blocked(
    meta: ArrayMeta, chunks: tuple[int, ...], block: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(zarr chunk shape, zarr grid) of source ``chunks`` merged ``block`` at a time."""
    grid = [-(-int(s) // c) for s, c in zip(meta.shape, chunks, strict=True)]
    # a block along the whole grid is cut to the array's extent (no padding past its end)
    coarse = tuple(int(s) if b >= g else c * b for s, c, b, g in zip(meta.shape, chunks, block, grid, strict=True))
    return coarse, tuple(-(-int(s) // c) for s, c in zip(meta.shape, coarse, strict=True))


def _unpacks(meta: ArrayMeta) -> bool:
    """Served unpacked: eras that differ in CF encoding, or numbers some sources lack (missing
    there, as ``xr.concat`` of the files gives; zarr has no missing value for strings)."""
    if not meta.eras and not meta.holes:
        return False
    from .xarray_backend import decodes_here  # xarray loads only for arrays with eras or holes

    return decodes_here(meta) and np.dtype(meta.dtype).kind in "biufc"


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _slice(data: Any, byte_range: ByteRequest | None) -> Any:
    if byte_range is None:
        return data
    n = len(data)
    if isinstance(byte_range, RangeByteRequest):
        return data[byte_range.start : byte_range.end]
    if isinstance(byte_range, OffsetByteRequest):
        return data[byte_range.offset :]
    if isinstance(byte_range, SuffixByteRequest):
        return data[max(0, n - byte_range.suffix) :]
    raise TypeError(f"Unexpected byte_range, got {byte_range}")


class _Batcher:
    """Gathers ``get`` calls made in one event-loop turn into one batch read (in a thread)."""

    def __init__(self, read: Any) -> None:
        self._read = read
        self._pending: dict[int, list[tuple[str, asyncio.Future[Any]]]] = {}

    async def get(self, key: str) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        pending = self._pending.setdefault(id(loop), [])
        pending.append((key, fut))
        if len(pending) == 1:
            loop.call_soon(self._flush, loop)
        return await fut

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._pending.pop(id(loop), [])
        if not batch:
            return
        task = loop.run_in_executor(None, self._read, [k for k, _ in batch])

        def done(t: asyncio.Future[Any]) -> None:
            exc = t.exception()
            values = [exc] * len(batch) if exc is not None else t.result()
            for (_, fut), v in zip(batch, values, strict=True):
                if fut.done():
                    continue
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(v)

        task.add_done_callback(done)


class RefstoreZarrStore(Store):
    """Read-only zarr v3 store over one collection version. Construct with
    :func:`zarr_store`; pickles as (uri, version, options), so dask workers reopen it."""

    supports_writes = False
    supports_deletes = False
    supports_listing = True

    def __init__(
        self,
        uri: str,
        as_of: int | str | None = None,
        *,
        read_only: bool = True,
        options: ReadOptions | None = None,
        storage_options: dict[str, str] | None = None,
        rectilinear: bool = False,
        source_grid: bool = False,
    ) -> None:
        if not read_only:
            raise BadInputError(f"{uri}: a refstore zarr store is read-only")
        super().__init__(read_only=True)
        from ..table.collection import Collection

        col = Collection.open(uri, storage_options=storage_options)
        self.uri = col.uri
        self.version = col.resolve(as_of)
        self.options = options or ReadOptions()
        self.storage_options = storage_options
        self.rectilinear = rectilinear
        self.source_grid = source_grid
        self._state: _State | None = None
        self._state_lock = threading.Lock()
        self._batcher = _Batcher(self._read)

    # ------------------------------------------------------------------ identity
    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self.uri, "version": self.version, "options": self.options,
                "storage_options": self.storage_options, "is_open": self._is_open,
                "rectilinear": self.rectilinear, "source_grid": self.source_grid}  # fmt: skip

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.uri, self.version, self.options = state["uri"], state["version"], state["options"]
        self.storage_options = state["storage_options"]
        self.rectilinear = bool(state.get("rectilinear", False))
        self.source_grid = bool(state.get("source_grid", False))
        self._read_only = True
        self._is_open = state["is_open"]
        self._state = None
        self._state_lock = threading.Lock()
        self._batcher = _Batcher(self._read)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RefstoreZarrStore)
                and (self.uri, self.version, self.options, self.rectilinear, self.source_grid)
                == (other.uri, other.version, other.options, other.rectilinear, other.source_grid))  # fmt: skip

    def __hash__(self) -> int:
        return hash((self.uri, self.version))

    def __repr__(self) -> str:
        return f"RefstoreZarrStore('{self}')"

    def __str__(self) -> str:
        return f"refstore://{self.uri}@v{self.version}"

    @property
    def state(self) -> _State:
        with self._state_lock:
            if self._state is None:
                from ..table.collection import Collection

                snap = Collection.open(self.uri, storage_options=self.storage_options).snapshot(self.version)
                self._state = _State(snap, self.options, rectilinear=self.rectilinear, source_grid=self.source_grid)
            return self._state

    def _read(self, keys: Sequence[str]) -> list[Any]:
        return self.state.read(keys)

    @property
    def left_out(self) -> dict[str, str]:
        """Arrays this store leaves out although the collection can read them, with the reason
        (eras that differ in ``units`` or ``calendar``)."""
        return dict(self.state.left_out)

    @property
    def blocks(self) -> dict[str, tuple[int, ...]]:
        """Arrays served on a coarser grid than their source chunks: source chunks per axis in
        one zarr chunk (``coarse_block``; ``source_grid=True`` serves none)."""
        return {n: p.block for n, p in self.state.plans.items() if p.block is not None}

    @property
    def served_decoded(self) -> dict[str, str]:
        """Arrays whose chunks this store decodes itself, with the reason."""
        return {n: p.decoded for n, p in self.state.plans.items() if p.decoded is not None}

    # ------------------------------------------------------------------ reads
    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None) -> Buffer | None:
        if byte_range is not None and not isinstance(byte_range, RangeByteRequest | OffsetByteRequest
                                                     | SuffixByteRequest):  # fmt: skip
            raise TypeError(f"Unexpected byte_range, got {byte_range}")
        await self._ensure_open()
        data = await self._batcher.get(key)
        return None if data is None else prototype.buffer.from_bytes(_slice(data, byte_range))

    async def get_many(self, keys: Iterable[str], prototype: BufferPrototype | None = None) -> list[Buffer | None]:
        """Whole values of many keys in one batch (grouped by source, adjacent ranges merged)."""
        await self._ensure_open()
        proto = prototype or default_buffer_prototype()
        keys = list(keys)
        values = await asyncio.to_thread(self._read, keys)
        return [None if v is None else proto.buffer.from_bytes(v) for v in values]

    async def _get_many(
        self, requests: Iterable[tuple[str, BufferPrototype, ByteRequest | None]]
    ) -> AsyncGenerator[tuple[str, Buffer | None], None]:
        reqs = list(requests)
        await self._ensure_open()
        values = await asyncio.to_thread(self._read, [r[0] for r in reqs])
        for (key, proto, br), v in zip(reqs, values, strict=True):
            yield key, None if v is None else proto.buffer.from_bytes(_slice(v, br))

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        kr = list(key_ranges)
        await self._ensure_open()
        values = await asyncio.to_thread(self._read, [k for k, _ in kr])
        return [None if v is None else prototype.buffer.from_bytes(_slice(v, br))
                for (_, br), v in zip(kr, values, strict=True)]  # fmt: skip

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self.state.size, key) is not None

    async def getsize(self, key: str) -> int:
        n = await asyncio.to_thread(self.state.size, key)
        if n is None:
            raise FileNotFoundError(key)
        return n

    # ------------------------------------------------------------------ writes (refused)
    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()

    async def delete(self, key: str) -> None:
        self._check_writable()

    # ------------------------------------------------------------------ listing
    def _keys(self, prefix: str = "") -> list[str]:
        """Every key starting with ``prefix``; inside one array, only that array's keys are made."""
        st = self.state
        inside = [n for n in st.plans if prefix.startswith(f"{n}/")]
        names = [max(inside, key=len)] if inside else list(st.plans)
        out = [k for k in sorted(st.meta) if k.startswith(prefix)]
        for name in names:
            if f"{name}/".startswith(prefix) or prefix.startswith(f"{name}/"):
                out += [k for k in st.chunk_keys(name) if k.startswith(prefix)]
        return out

    async def list(self) -> AsyncIterator[str]:
        for k in await asyncio.to_thread(self._keys):
            yield k

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for k in await asyncio.to_thread(self._keys, prefix):
            yield k

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        st = self.state
        p = prefix.rstrip("/")
        if p == "" or p in st.groups:  # a group: its zarr.json and child nodes, never chunk keys
            base = f"{p}/" if p else ""
            seen: set[str] = set()
            for k in sorted(st.meta):
                if k.startswith(base):
                    seen.add(k[len(base) :].split("/")[0])
            for k in sorted(seen):
                yield k
            return
        base = f"{p}/"
        seen = set()
        if p in st.plans:  # an array: its zarr.json, and "c" when it has chunks
            seen.add(META)
            if st.plans[p].every_cell or st.plans[p].meta.eras or len(st.array_refs(p).flat):
                seen.add("c")
        else:
            for k in await asyncio.to_thread(self._keys, base):
                seen.add(k[len(base) :].split("/")[0])
        for k in sorted(seen):
            yield k

"""The direct reader: a global array read through the table.

selection -> chunk rows (pushdown on the global key) -> per source, coalesced byte ranges
(pure planning) -> fetch (obstore) -> decode -> crop into the output; absent chunks stay at
the fill value.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS, NO_OFFSET
from .._values import decode_attr, decode_fill
from ..errors import BadInputError, SourceReadError, UnsupportedArrayError
from ..plan.coalesce import DEFAULT_MAX_BYTES, DEFAULT_MAX_GAP, coalesce
from ..plan.eras import EraLayout
from ..plan.grid import Grid
from ..plan.select import Selection, box_slices, select
from ._place import place_raw
from .decode import make_decoder
from .fetch import Fetcher
from .fresh import SourceCheck, check_policy

if TYPE_CHECKING:
    from ..plan.slabs import SlabLayout
    from ..scan._types import ArrayMeta
    from ..table.collection import Snapshot

__all__ = ["Array", "ReadOptions"]



@dataclass(frozen=True, slots=True)
class ReadOptions:
    """``max_gap``: bytes allowed between two ranges merged into one read (0: only adjacent).
    ``max_bytes``: largest merged read, in bytes (a single larger chunk is still read whole).
    ``on_stale``: what to do when a source changed since it was scanned: ``error`` (raise
    StaleSourceError), ``warn`` (StaleSourceWarning, then read), ``ignore`` (no check). Each read
    checks every source it fetches from once (``read/fresh.py``)."""

    max_gap: int = DEFAULT_MAX_GAP
    max_bytes: int = DEFAULT_MAX_BYTES
    on_stale: str = "error"

    def __post_init__(self) -> None:
        check_policy(self.on_stale)
        if self.max_gap < 0 or self.max_bytes < 1:
            raise BadInputError("max_gap must be >= 0 and max_bytes >= 1")


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
PARALLEL_MIN_CHUNKS = 64
"""Decode in threads (zlib and the other codecs release the GIL) from this many chunks on."""


def _run_parallel(fn: Any, items: list[Any]) -> None:
    """``fn(part)`` over contiguous parts of ``items``, on a small shared thread pool when the
    batch is large and there is more than one core; parts write disjoint output regions."""
    global _POOL
    workers = min(4, os.cpu_count() or 1)
    nested = threading.current_thread().name.startswith("refstore-decode")
    if workers < 2 or len(items) < PARALLEL_MIN_CHUNKS or nested:
        fn(items)
        return
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="refstore-decode")
    step = -(-len(items) // workers)
    for f in [_POOL.submit(fn, items[i : i + step]) for i in range(0, len(items), step)]:
        f.result()


class Array:
    """One global array at one version; slice it like numpy to read stored (raw) values."""

    def __init__(
        self,
        snapshot: Snapshot,
        meta: ArrayMeta,
        *,
        fetcher: Fetcher | None = None,
        options: ReadOptions | None = None,
        era: int | None = None,
    ) -> None:
        self._snap = snapshot
        self.meta = meta
        self._era = era
        self._edges: list[tuple[int, ...]] | None = None
        self._fetcher = fetcher or Fetcher()
        self.options = options or ReadOptions()

    # ---------------------------------------------------------------- metadata
    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.meta.shape)

    @property
    def ndim(self) -> int:
        return len(self.meta.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The stored dtype; across eras of different dtypes, the type that holds them all."""
        if self.meta.eras:
            return np.result_type(*[np.dtype(e["dtype"]) for e in self.meta.eras])
        return np.dtype(self.meta.dtype)

    @property
    def eras(self) -> list[dict[str, Any]]:
        """Eras along the concat dimension (empty when the array has one): each with its index,
        axis, ``start``/``stop`` (elements), dtype, chunks, codecs, fill value, attributes, and
        first/last source. Raw values of different eras may need different scale factors."""
        return [dict(e) for e in self.meta.eras]

    @property
    def chunks(self) -> tuple[int, ...]:
        return tuple(self.meta.chunks)

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(self.meta.dims)

    @cached_property
    def fill_value(self) -> Any:
        return decode_fill(self.meta.fill_value, self.dtype)

    @cached_property
    def attrs(self) -> dict[str, Any]:
        return {k: decode_attr(v) for k, v in self.meta.attrs.items()}

    def __repr__(self) -> str:
        return f"<refstore.Array {self.name!r} {self.shape} {self.dtype} chunks={self.chunks}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        out = self[...]
        return out.astype(dtype) if dtype is not None else out

    # ---------------------------------------------------------------- reading
    def __getitem__(self, key: Any) -> np.ndarray[Any, Any]:
        return self.read(select(key, self.shape))

    def source_check(self) -> SourceCheck:
        """A fresh check of this version's sources under this reader's policy: one operation's worth."""
        return SourceCheck(self._snap.source_identity(), self._fetcher, checksums=self._snap.source_checksums(),
                           on_stale=self.options.on_stale)  # fmt: skip

    def read(self, sel: Selection, *, check: SourceCheck | None = None) -> np.ndarray[Any, Any]:
        """The selection's raw values. Every source fetched from is checked once for this read
        (``check``: the caller's check for a larger operation, e.g. one zarr batch)."""
        if self.meta.status != "ok":
            raise UnsupportedArrayError(f"array {self.name!r} cannot be read: {self.meta.reason}")
        check = check or self.source_check()
        out = self._read_eras(sel, check) if self.meta.eras else self._read_one(sel, check)
        if sel.drop:
            out = out[tuple(0 if i in sel.drop else slice(None) for i in range(out.ndim))]
        return out

    def _result_shape(self, sel: Selection) -> tuple[int, ...]:
        return tuple(max(0, -(-(b - a) // s)) for a, b, s in zip(sel.start, sel.stop, sel.step, strict=True))

    def _read_one(self, sel: Selection, check: SourceCheck) -> np.ndarray[Any, Any]:
        """The selection (steps applied, no axis dropped) from chunks of one grid (one era)."""
        out = np.full(self._result_shape(sel), self.fill_value, dtype=np.dtype(self.meta.dtype))
        if self.meta.gridless:
            return self._read_gridless(out, sel, check)
        ranges = self.grid.chunk_ranges(sel)
        if ranges is None or 0 in out.shape:
            return out
        rows = self._snap.chunk_rows(self.name, ranges, era=self._era, with_row_id=True)
        if rows.num_rows and any(s > 1 for s in sel.step):  # strided: skip chunks holding no selected element
            keep = np.ones(rows.num_rows, bool)
            for i, need in enumerate(self.grid.needed(sel)):
                keep &= np.isin(rows.column(GLOBAL_KEY_COLUMNS[i]).to_numpy(), need)
            rows = rows.filter(pa.array(keep))
        if rows.num_rows:
            self._fill(out, rows, sel, check)
        return out

    def _read_gridless(self, out: np.ndarray[Any, Any], sel: Selection, check: SourceCheck) -> np.ndarray[Any, Any]:
        """No chunk grid (``plan/slabs.py``): the rows whose coarse keys may touch the box, then
        each chunk placed by its slab; the rows that only came with the margin are dropped."""
        ranges = self.slabs.key_ranges(sel.start, sel.stop)
        if ranges is None or 0 in out.shape:
            return out
        rows = self._snap.chunk_rows(self.name, ranges, era=self._era, with_row_id=True)
        if not rows.num_rows:
            return out
        origin, size = self.slabs.rows_boxes(rows)
        keep = self.slabs.touching(origin, size, sel)
        if not keep.all():
            rows = rows.filter(pa.array(keep))
        if rows.num_rows:
            self._fill(out, rows, sel, check)
        return out

    @cached_property
    def slabs(self) -> SlabLayout:
        """The placed slabs of a gridless array (``plan/slabs.py``)."""
        return self._snap.slab_layout(self.name)

    def boxes(self, rows: pa.Table) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """Element boxes (``origin``, ``size``: n x ndim) of chunk rows of this array (of this era):
        on its grid by their global keys, or (gridless) by their slab and key within it."""
        if self.meta.gridless:
            return self.slabs.rows_boxes(rows)
        if self.ndim:
            cols = GLOBAL_KEY_COLUMNS[: self.ndim]
            keys = np.column_stack([rows.column(c).to_numpy().astype(np.int64) for c in cols])
        else:
            keys = np.zeros((rows.num_rows, 0), np.int64)
        return self.grid.boxes(keys)

    @cached_property
    def grid(self) -> Grid:
        """The chunk grid of this array (of this era, for an era's reader): regular or rectilinear."""
        return Grid.of(self.meta)

    @cached_property
    def layout(self) -> EraLayout | None:
        """Eras and holes along the concat axis (``plan.eras``), None when there are none."""
        return EraLayout.of(self.meta)

    def era_array(self, era: int) -> Array:
        """The reader of one era on its own grid (its axis counted from the era's start)."""
        e = self.meta.eras[era]
        return Array(self._snap, self.meta.era_meta(e), fetcher=self._fetcher, options=self.options, era=era)

    def _read_eras(self, sel: Selection, check: SourceCheck) -> np.ndarray[Any, Any]:
        """Across eras: each era reads its part on its own grid, with its own codecs; before the
        first era: fill."""
        out = np.full(self._result_shape(sel), self.fill_value, dtype=self.dtype)
        assert self.layout is not None
        for part in self.layout.parts(sel):
            if part.era is None:
                continue
            dst: list[slice] = [slice(None)] * self.ndim
            dst[self.layout.axis] = part.out
            out[tuple(dst)] = self.era_array(part.era)._read_one(part.local, check)
        return out

    def read_rows(self, era: int, rows: pa.Table, lo: list[int], hi: list[int]) -> np.ndarray[Any, Any]:
        """The box ``[lo, hi)`` (global element coordinates) assembled from the given chunk rows
        of ``era`` only, without querying the table (``verify`` decodes sampled rows this way)."""
        if self.meta.eras:
            assert self.layout is not None
            e_lo, e_hi = next((a, b) for i, a, b in self.layout.local_boxes(lo, hi) if i == era)
            return self.era_array(era).read_rows(era, rows, e_lo, e_hi).astype(self.dtype, copy=False)
        sel = Selection(tuple(lo), tuple(hi), (1,) * self.ndim, ())
        out = np.full(self._result_shape(sel), self.fill_value, dtype=np.dtype(self.meta.dtype))
        if rows.num_rows:
            self._fill(out, rows, sel, self.source_check())
        return out

    def _fill(self, out: np.ndarray[Any, Any], rows: pa.Table, sel: Selection, check: SourceCheck) -> None:
        n = rows.num_rows
        origin, size = self.boxes(rows)
        s_lo, s_hi, d_lo, d_hi = box_slices(origin, size, sel)
        # each chunk's shape where the array's end (or, on a rectilinear grid, the next chunk)
        # cuts it: a TIFF's last strip is stored short; an HDF5 partial chunk decodes padded to
        # the full chunk shape and is cropped by the slices above
        self._edges = [tuple(e) for e in size.tolist()]
        decoder = make_decoder(self.meta.codecs, self.meta.dtype, self.chunks)  # of this era
        decoders = self._slab_decoders(rows)  # tiles of different layouts: each chunk its tile's
        masks = pc.fill_null(rows.column("filter_mask"), 0).to_numpy()

        steps = sel.step
        sl, sh, dl, dh = s_lo.tolist(), s_hi.tolist(), d_lo.tolist(), d_hi.tolist()  # plain ints: no per-chunk numpy

        def place(i: int, chunk: np.ndarray[Any, Any]) -> None:
            src = tuple(map(slice, sl[i], sh[i], steps))
            dst = tuple(map(slice, dl[i], dh[i]))
            out[dst] = chunk[src]

        inline = rows.column("inline")
        is_inline = rows.column("offset").to_numpy() == NO_OFFSET
        for i in np.flatnonzero(is_inline).tolist():
            raw = inline[i].as_py()
            place(i, self._decode(decoders(i) if decoders else decoder, raw, 0, i, rows, inline=True))

        # held bytes first: they are the chunk's bytes as of this version, whatever the source is now
        is_held = np.zeros(n, bool)
        if "held_at" in rows.column_names and "_rowid" in rows.column_names:
            is_held = ~is_inline & (rows.column("held_at").to_numpy() >= 0)
        if is_held.any():
            held_rows = np.flatnonzero(is_held)
            ids = rows.column("_rowid").take(pa.array(held_rows))
            blobs = self._snap.ds.read_blobs("held", ids=ids, preserve_order=True)
            for i, (_addr, raw) in zip(held_rows.tolist(), blobs, strict=True):
                if raw is None:
                    raise SourceReadError(f"{self.name}: a held chunk has no bytes (collection damaged?)")
                place(i, self._decode(decoders(i) if decoders else decoder, raw, int(masks[i]), i, rows))

        referenced = np.flatnonzero(~is_inline & ~is_held)
        if not len(referenced):
            return
        sources = rows.column("source").take(pa.array(referenced)).to_numpy(zero_copy_only=False)
        offsets = rows.column("offset").take(pa.array(referenced)).to_numpy()
        lengths = rows.column("length").take(pa.array(referenced)).to_numpy()
        names, which = np.unique(sources, return_inverse=True)
        order = np.argsort(which, kind="stable")
        bounds = np.searchsorted(which[order], np.arange(len(names) + 1))
        for s_i, src in enumerate(names.tolist()):
            check(src)
            idx = order[bounds[s_i] : bounds[s_i + 1]]
            dec = decoders(int(referenced[idx[0]])) if decoders else decoder  # one tile: one layout
            runs = coalesce(offsets[idx], lengths[idx], max_gap=self.options.max_gap, max_bytes=self.options.max_bytes)
            data = self._fetcher.get_ranges(src, runs.start.tolist(), runs.end.tolist())
            items: list[tuple[int, Any]] = []
            for j, r in zip(idx.tolist(), runs.run.tolist(), strict=True):
                lo = int(offsets[j] - runs.start[r])
                items.append((int(referenced[j]), data[r][lo : lo + int(lengths[j])]))

            def decode_place(part: list[tuple[int, Any]], dec: Any = dec) -> None:
                for row, raw in part:
                    place(row, self._decode(dec, raw, int(masks[row]), row, rows))

            items = place_raw(out, items, dec, masks, sl, sh, dl, steps)  # uncompressed: vectorised
            _run_parallel(decode_place, items)

    def _slab_decoders(self, rows: pa.Table) -> Any:
        """Row -> the decoder of its tile's own layout, for an array whose tiles differ in layout
        (``ArrayMeta.cell``); None otherwise (one decoder for every chunk)."""
        if not self.meta.per_slab or not rows.num_rows:
            return None
        lay = self.slabs
        slab = lay.slab_of(rows.column("source"))

        def at(row: int) -> Any:
            i = int(slab[row])
            return make_decoder(lay.codecs[i], self.meta.dtype, lay.chunks_of(i))

        return at

    def _decode(
        self, decoder: Any, raw: Any, mask: int, row: int, rows: pa.Table, *, inline: bool = False
    ) -> np.ndarray[Any, Any]:
        try:
            if inline and not decoder.steps:  # scanned inline chunks: raw values (their arrays have no codecs)
                return np.frombuffer(raw, dtype=np.dtype(self.meta.dtype)).reshape(decoder.shape)
            return decoder(raw, mask, self._edges[row] if self._edges is not None else None)  # type: ignore[no-any-return]
        except Exception as e:
            where = rows.column("source")[row].as_py()
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            at = f"{rows.column('offset')[row].as_py()}+{rows.column('length')[row].as_py()}"
            raise SourceReadError(f"{where}: chunk of {self.name!r} at bytes {at} does not decode ({why})") from None

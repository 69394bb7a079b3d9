"""The direct reader: a global array read through the table.

selection -> chunk rows (pushdown on the global key) -> per source, coalesced byte ranges
(pure planning) -> fetch (obstore) -> decode -> crop into the output; absent chunks stay at
the fill value.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS, NO_OFFSET
from .._values import decode_attr, decode_fill
from ..errors import BadInputError, SourceReadError, StaleSourceError, StaleSourceWarning, UnsupportedArrayError
from ..plan.coalesce import DEFAULT_MAX_BYTES, DEFAULT_MAX_GAP, coalesce
from ..plan.select import Selection, chunk_slices, select
from .decode import make_decoder
from .fetch import Fetcher

if TYPE_CHECKING:
    from ..scan._types import ArrayMeta
    from ..table.collection import Snapshot

__all__ = ["Array", "ReadOptions"]


STALE_POLICIES = ("error", "warn", "ignore")


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """``max_gap``: bytes allowed between two ranges merged into one read (0: only adjacent).
    ``max_bytes``: largest merged read, in bytes (a single larger chunk is still read whole).
    ``on_stale``: what to do when a source changed since it was scanned: ``error`` (raise
    StaleSourceError), ``warn`` (StaleSourceWarning, then read), ``ignore``."""

    max_gap: int = DEFAULT_MAX_GAP
    max_bytes: int = DEFAULT_MAX_BYTES
    on_stale: str = "error"

    def __post_init__(self) -> None:
        if self.on_stale not in STALE_POLICIES:
            raise BadInputError(f"on_stale must be one of {', '.join(STALE_POLICIES)}, not {self.on_stale!r}")
        if self.max_gap < 0 or self.max_bytes < 1:
            raise BadInputError("max_gap must be >= 0 and max_bytes >= 1")


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

    def read(self, sel: Selection) -> np.ndarray[Any, Any]:
        if self.meta.status != "ok":
            raise UnsupportedArrayError(f"array {self.name!r} cannot be read: {self.meta.reason}")
        out = self._read_box(sel) if self.meta.eras else self._read_era_box(sel)
        step = tuple(slice(None, None, s) for s in sel.step)
        out = out[step]
        if sel.drop:
            out = out[tuple(0 if i in sel.drop else slice(None) for i in range(out.ndim))]
        return out

    def _read_era_box(self, sel: Selection) -> np.ndarray[Any, Any]:
        """The selection's box (no steps) from chunks of one grid (one era)."""
        out = np.full(sel.box_shape, self.fill_value, dtype=np.dtype(self.meta.dtype))
        ranges = sel.chunk_ranges(self.chunks)
        if ranges is not None:
            rows = self._snap.chunk_rows(self.name, ranges, era=self._era)
            if rows.num_rows:
                self._fill(out, rows, sel)
        return out

    def _read_box(self, sel: Selection) -> np.ndarray[Any, Any]:
        """The box across eras: each era reads its part on its own grid, with its own codecs."""
        out = np.full(sel.box_shape, self.fill_value, dtype=self.dtype)  # before the first era: fill
        for era in self.meta.eras:
            axis, e_lo, e_hi = int(era["axis"]), int(era["start"]), int(era["stop"])
            lo, hi = max(sel.start[axis], e_lo), min(sel.stop[axis], e_hi)
            if lo >= hi:
                continue
            start, stop = list(sel.start), list(sel.stop)
            start[axis], stop[axis] = lo - e_lo, hi - e_lo
            sub = Array(self._snap, self.meta.era_meta(era), fetcher=self._fetcher, options=self.options,
                        era=int(era["index"]))  # fmt: skip
            part = sub._read_era_box(Selection(tuple(start), tuple(stop), (1,) * self.ndim, ()))
            dst = [slice(None)] * self.ndim
            dst[axis] = slice(lo - sel.start[axis], hi - sel.start[axis])
            out[tuple(dst)] = part
        return out

    def _fill(self, out: np.ndarray[Any, Any], rows: pa.Table, sel: Selection) -> None:
        ndim = self.ndim
        n = rows.num_rows
        if ndim:
            keys = np.column_stack([rows.column(c).to_numpy().astype(np.int64) for c in GLOBAL_KEY_COLUMNS[:ndim]])
        else:
            keys = np.zeros((n, 0), np.int64)
        s_lo, s_hi, d_lo, d_hi = chunk_slices(keys, self.chunks, self.shape, sel)
        # each chunk's shape where the array's end cuts it (a TIFF's last strip is stored short)
        c = np.asarray(self.chunks, np.int64)
        edges = np.minimum(c, np.asarray(self.shape, np.int64) - keys * c)
        self._edges = [tuple(e) for e in edges.tolist()]
        decoder = make_decoder(self.meta.codecs, self.meta.dtype, self.chunks)  # of this era
        masks = pc.fill_null(rows.column("filter_mask"), 0).to_numpy()

        def place(i: int, chunk: np.ndarray[Any, Any]) -> None:
            src = tuple(slice(int(a), int(b)) for a, b in zip(s_lo[i], s_hi[i], strict=True))
            dst = tuple(slice(int(a), int(b)) for a, b in zip(d_lo[i], d_hi[i], strict=True))
            out[dst] = chunk[src]

        inline = rows.column("inline")
        is_inline = rows.column("offset").to_numpy() == NO_OFFSET
        for i in np.flatnonzero(is_inline).tolist():
            raw = inline[i].as_py()
            place(i, self._decode(decoder, raw, 0, i, rows, inline=True))

        referenced = np.flatnonzero(~is_inline)
        if not len(referenced):
            return
        sources = rows.column("source").take(pa.array(referenced)).to_numpy(zero_copy_only=False)
        offsets = rows.column("offset").take(pa.array(referenced)).to_numpy()
        lengths = rows.column("length").take(pa.array(referenced)).to_numpy()
        names, which = np.unique(sources, return_inverse=True)
        order = np.argsort(which, kind="stable")
        bounds = np.searchsorted(which[order], np.arange(len(names) + 1))
        for s_i, src in enumerate(names.tolist()):
            self._check_fresh(src)
            idx = order[bounds[s_i] : bounds[s_i + 1]]
            runs = coalesce(offsets[idx], lengths[idx], max_gap=self.options.max_gap, max_bytes=self.options.max_bytes)
            data = self._fetcher.get_ranges(src, runs.start.tolist(), runs.end.tolist())
            for j, r in zip(idx.tolist(), runs.run.tolist(), strict=True):
                lo = int(offsets[j] - runs.start[r])
                raw = data[r][lo : lo + int(lengths[j])]
                row = int(referenced[j])
                place(row, self._decode(decoder, raw, int(masks[row]), row, rows))

    def _check_fresh(self, location: str) -> None:
        """One metadata request per source per read: refuse bytes of a source that changed."""
        if self.options.on_stale == "ignore":
            return
        known = self._snap.source_identity().get(location)
        if known is None:
            return
        size, mtime, etag = self._fetcher.head(location)
        k_size, k_mtime, k_etag = known
        why = None
        if size != k_size:
            why = f"size {k_size} -> {size} bytes"
        elif k_etag and etag and k_etag != etag:
            why = f"etag {k_etag} -> {etag}"
        elif not (k_etag and etag) and mtime is not None and k_mtime >= 0 and mtime != k_mtime:
            why = "modification time differs"
        if why is None:
            return
        msg = f"{location}: changed since scan ({why}); rescan it, or read with on_stale='warn' or 'ignore'"
        if self.options.on_stale == "error":
            raise StaleSourceError(msg)
        warnings.warn(msg, StaleSourceWarning, stacklevel=4)

    def _decode(
        self, decoder: Any, raw: Any, mask: int, row: int, rows: pa.Table, *, inline: bool = False
    ) -> np.ndarray[Any, Any]:
        try:
            if inline:
                return np.frombuffer(raw, dtype=np.dtype(self.meta.dtype)).reshape(self.chunks)
            return decoder(raw, mask, self._edges[row] if self._edges is not None else None)  # type: ignore[no-any-return]
        except Exception as e:
            where = rows.column("source")[row].as_py()
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            at = f"{rows.column('offset')[row].as_py()}+{rows.column('length')[row].as_py()}"
            raise SourceReadError(f"{where}: chunk of {self.name!r} at bytes {at} does not decode ({why})") from None

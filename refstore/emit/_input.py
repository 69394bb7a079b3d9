"""What every emitter reads: one collection version, with remap rules applied to locations.

Everything here is frozen by one Lance version (``Snapshot``): array metadata, chunk rows,
sources, remap rules. References stay columnar: ``refs(name)`` is one Arrow table per array,
sorted by chunk key (C order), so every emit of the same version is byte-identical.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS, NO_OFFSET
from .._values import decode_fill, encode_attr
from ..errors import SourceReadError
from ..plan.grid import Grid
from ..plan.remap import RemapRule, apply_remap, remap_one
from ..schema import Kind
from ..table.collection import sql_str

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ..scan._types import ArrayMeta
    from ..table.collection import Snapshot

__all__ = ["EmitReport", "EmitSource", "declare_missing"]


@dataclass(frozen=True, slots=True)
class EmitReport:
    """What an emit wrote: ``arrays`` and ``refs`` (chunk references, inline chunks included)
    written; ``skipped`` arrays the form cannot express, with the reason."""

    format: str
    out: str
    version: int
    tag: str | None
    arrays: int
    refs: int
    skipped: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "out": self.out,
            "version": self.version,
            "tag": self.tag,
            "arrays": self.arrays,
            "refs": self.refs,
            "skipped": dict(self.skipped),
            **self.extra,
        }


def declare_missing(meta: ArrayMeta) -> ArrayMeta:
    """``meta`` with its fill value declared as ``_FillValue`` when some sources lack the array
    (holes), it is numeric and has no ``_FillValue``/``missing_value``: readers that decode (xarray
    over every form, GDAL's NoDataValue) then read those sources as missing, as xarray over the
    files gives them; raw reads still give the fill value. A stored value equal to the fill
    reads missing too, as netCDF4-python's default masking reads it."""
    dtype = np.dtype(meta.dtype)
    if not meta.holes or dtype.kind not in "iufc" or {"_FillValue", "missing_value"} & meta.attrs.keys():
        return meta
    enc = encode_attr(np.asarray(decode_fill(meta.fill_value, dtype), dtype))
    return dataclasses.replace(meta, attrs={**meta.attrs, "_FillValue": enc}) if enc is not None else meta


def _referenced_sources(t: pa.Table) -> list[str]:
    """Distinct ``source`` of the rows of ``t`` that are references (neither inline nor held),
    without copying the strings: one dictionary encoding, a mask over its indices (10M rows:
    0.4 s)."""
    if t.num_rows == 0:
        return []
    ref = (t.column("offset").to_numpy() >= 0) & (t.column("held_at").to_numpy() < 0)
    if ref.all():
        return list(pc.unique(t.column("source")).to_pylist())
    d = pc.dictionary_encode(t.column("source"))  # one dictionary for every chunk
    present = np.zeros(len(d.chunk(d.num_chunks - 1).dictionary), bool)
    start = 0
    for c in d.chunks:
        present[c.indices.to_numpy(zero_copy_only=False)[ref[start : start + len(c)]]] = True
        start += len(c)
    return list(d.chunk(d.num_chunks - 1).dictionary.filter(pa.array(present)).to_pylist())


class EmitSource:
    """A collection version as emitters see it.

    ``tag``: the tag the caller named (None for a version number or latest); forms write only
    this one. ``tags``: every tag pointing at this version *now*, read from the live collection:
    outside reproducibility (creating or deleting a tag changes it), so a form that must be
    byte-identical per version and options never writes it (Icechunk uses it for its own tags).
    ``rules``: the version's remap rules (empty with ``remap=False``), applied to every location
    handed out here. ``on_stale``: what to do when a source the form points at is no longer the
    file the version recorded (``read/fresh.py``; checked by :meth:`refs` and
    :meth:`check_sources`, once per source per emit).
    """

    def __init__(self, snap: Snapshot, *, tag: str | None = None, remap: bool = True, on_stale: str = "error") -> None:
        from ..read.fetch import Fetcher
        from ..read.fresh import SourceCheck
        from ..table.remap import remap_rules

        self.snapshot = snap
        self.version = snap.version
        self.tag = tag
        self.rules: list[RemapRule] = remap_rules(snap) if remap else []
        self._sources: pa.Table | None = None
        self._held: dict[str, tuple[int, int]] | None = None
        self._check = SourceCheck(snap.source_identity(), Fetcher(), checksums=snap.source_checksums(),
                                  on_stale=on_stale, action="emit")  # fmt: skip

    def read_box(self, meta: ArrayMeta, lo: Sequence[int], hi: Sequence[int]) -> np.ndarray[Any, Any]:
        """The raw values of the element box ``[lo, hi)`` of ``meta`` as this version reads them
        (held bytes first; sources checked once per emit), through refstore's reader."""
        from ..plan.select import Selection
        from ..read.array import Array

        sel = Selection(tuple(int(a) for a in lo), tuple(int(b) for b in hi), (1,) * len(lo), ())
        return Array(self.snapshot, meta).read(sel, check=self._check)

    # ------------------------------------------------------------------ metadata
    @property
    def uri(self) -> str:
        return self.snapshot.collection.uri

    @property
    def concat_dim(self) -> str | None:
        return self.snapshot.concat_dim

    @property
    def tags(self) -> list[str]:
        """Every tag naming this version in the live collection (not frozen by the version)."""
        from ..table.versions import list_tags

        return sorted(t["name"] for t in list_tags(self.snapshot.collection) if t["version"] == self.version)

    def arrays(self) -> dict[str, ArrayMeta]:
        """Every global array, sorted by name (unsupported ones included: emitters refuse them),
        with the fill value of numeric arrays some sources lack declared (``declare_missing``)."""
        return {name: declare_missing(meta) for name, meta in self.snapshot.arrays().items()}

    def group_attrs(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Group attributes by group path (``Snapshot.group_attrs``)."""
        return self.snapshot.group_attrs()

    @staticmethod
    def grid(meta: ArrayMeta) -> tuple[int, ...]:
        """Chunks per dimension (on a rectilinear grid, as many as it lists)."""
        if meta.edges:
            g = Grid.of(meta)
            return tuple(g.nchunks(d) for d in range(g.ndim))
        return tuple(math.ceil(s / c) if c else 0 for s, c in zip(meta.shape, meta.chunks, strict=True))

    # ------------------------------------------------------------------ locations
    def published(self, location: str) -> str:
        """A source location as the published form names it (remapped)."""
        return remap_one(location, self.rules)

    def sources(self) -> pa.Table:
        """``location`` (as scanned), ``published``, ``size``, ``mtime_ns``, ``etag``; sorted by
        published location."""
        if self._sources is None:
            t = self.snapshot.rows(Kind.SOURCE, ["source", "size", "mtime_ns", "etag"])
            pub = apply_remap(t.column("source"), self.rules) if t.num_rows else pa.array([], pa.string())
            t = pa.table({
                "location": t.column("source"),
                "published": pc.cast(pub, pa.string()) if t.num_rows else pub,
                "size": t.column("size"),
                "mtime_ns": t.column("mtime_ns"),
                "etag": t.column("etag"),
            })  # fmt: skip
            self._sources = t.take(pc.sort_indices(t, [("published", "ascending")]))
        return self._sources

    # ------------------------------------------------------------------ references
    def check_sources(self, locations: Iterable[str], *, note: str = "") -> None:
        """Check that each source (scanned location) is still the file the version recorded,
        under the emit's ``on_stale`` policy (once per source per emit): a form must read what
        its version reads. ``note`` goes into the message."""
        self._check.all(sorted(set(locations)), note=note)

    def refs(self, name: str, *, era: int | None = None, rows: tuple[int, int] | None = None) -> pa.Table:
        """Chunk rows of one array in the view (``rows``: only those with ``lo <= g0 < hi``),
        sorted by global key (C order):
        ``g0..g{ndim-1}`` (int64; of a gridless array, each chunk's element origin instead),
        ``path`` (published location, dictionary-encoded; inline rows keep their source),
        ``offset`` (-1 for inline rows), ``length``, ``inline`` (bytes, ``b""`` unless inline),
        ``filter_mask``, ``held_at`` (-1 = not held) and ``_rowid``.

        Held chunks come as inline rows (``offset`` -1, their held bytes in ``inline``, decoded
        like fetched bytes): a form carries what its version reads, whatever the source holds
        now. The sources of the remaining references are checked (:meth:`check_sources`)."""
        meta = self.snapshot.array(name)
        ndim = len(meta.shape)
        t = self.snapshot.chunk_rows(
            name, None if rows is None or not ndim else [(rows[0], rows[1] - 1)],
            columns=("source", "offset", "length", "filter_mask", "inline", "held_at"), with_row_id=True, era=era,
        )  # fmt: skip
        keys = [pc.cast(t.column(c), pa.int64()) for c in GLOBAL_KEY_COLUMNS[:ndim]]
        if meta.gridless and t.num_rows:  # no grid: each chunk's element origin (``plan/slabs.py``)
            origin, _ = self.snapshot.slab_layout(name).rows_boxes(t)
            keys = [pa.array(origin[:, i]) for i in range(ndim)]
        path = apply_remap(t.column("source"), self.rules) if t.num_rows else pa.array([], pa.dictionary(
            pa.int32(), pa.string()))  # fmt: skip
        out = pa.table({
            **{GLOBAL_KEY_COLUMNS[i]: keys[i] for i in range(ndim)},
            "path": path,
            "offset": t.column("offset"),
            "length": t.column("length"),
            "inline": t.column("inline"),
            "filter_mask": t.column("filter_mask"),
            "held_at": t.column("held_at"),
            "_rowid": t.column("_rowid"),
        })  # fmt: skip
        self.check_sources(_referenced_sources(t))
        if ndim and out.num_rows:
            out = out.take(pc.sort_indices(out, [(GLOBAL_KEY_COLUMNS[i], "ascending") for i in range(ndim)]))
        return self._held_inline(out, name)

    def _held_inline(self, refs: pa.Table, name: str) -> pa.Table:
        """``refs`` with every held row made an inline row of its held bytes."""
        held = pc.greater_equal(refs.column("held_at"), 0).combine_chunks()
        if not pc.any(held).as_py():
            return refs
        values = pa.array(self._held_bytes(refs, array=name), pa.large_binary())
        at = np.flatnonzero(held.to_numpy(zero_copy_only=False))
        idx = np.full(refs.num_rows, -1, np.int64)
        idx[at] = np.arange(len(at), dtype=np.int64)
        inline = pc.if_else(held, pc.take(values, pa.array(idx, mask=idx < 0)), refs.column("inline"))
        offset = pc.if_else(held, pa.scalar(NO_OFFSET, pa.int64()), refs.column("offset"))
        refs = refs.set_column(refs.schema.get_field_index("inline"), "inline", inline)
        return refs.set_column(refs.schema.get_field_index("offset"), "offset", offset)

    def flat_index(self, meta: ArrayMeta, refs: pa.Table) -> np.ndarray[Any, Any]:
        """C-order flat chunk index of each row of ``refs`` (int64)."""
        ndim = len(meta.shape)
        if ndim == 0:
            return np.zeros(refs.num_rows, np.int64)
        keys = tuple(refs.column(GLOBAL_KEY_COLUMNS[i]).to_numpy() for i in range(ndim))
        flat: np.ndarray[Any, Any] = np.ravel_multi_index(keys, self.grid(meta)).astype(np.int64)
        return flat

    def _held_bytes(self, refs: pa.Table, *, array: str = "") -> list[bytes]:
        """The held bytes of the rows of ``refs`` (of ``array``) with ``held_at >= 0``, in row
        order; a held row without bytes raises ``SourceReadError`` (never an empty chunk)."""
        mask = pc.greater_equal(refs.column("held_at"), 0)
        ids = refs.column("_rowid").filter(mask)
        if len(ids) == 0:
            return []
        blobs = self.snapshot.ds.read_blobs("held", ids=ids.combine_chunks(), preserve_order=True)
        out: list[bytes] = []
        for _addr, raw in blobs:
            if raw is None:
                raise SourceReadError(f"array {array!r}: a held chunk has no bytes (collection damaged?)")
            out.append(bytes(raw))
        return out

    def held_counts(self) -> dict[str, tuple[int, int]]:
        """Arrays with held chunks in the view: name -> (chunks, bytes); one query per emit."""
        if self._held is None:
            t = self.snapshot.rows(Kind.CHUNK, ["array", "length"], "held_at >= 0 AND g0 >= -1")
            g = t.group_by("array").aggregate([("length", "count"), ("length", "sum")]) if t.num_rows else None
            self._held = {} if g is None else {
                a: (int(n), int(b)) for a, n, b in zip(*(g.column(c).to_pylist() for c in (
                    "array", "length_count", "length_sum")), strict=True)}  # fmt: skip
        return self._held

    def masked_chunks(self, name: str) -> int:
        """Chunks whose HDF5 filter mask skips a filter (zarr-shaped forms cannot express them)."""
        return self.snapshot.count(Kind.CHUNK, f"array = {sql_str(name)} AND filter_mask != 0")

"""Values every scanner returns: the physical layer of one source."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from .._cf import encoding_attrs
from .._keys import MAX_DIMS, SOURCE_KEY_COLUMNS
from ..plan.grid import edges_from_json, edges_to_json

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CHUNK_BATCH_SCHEMA", "ArrayMeta", "ChunkColumns", "ScanResult", "Scanner", "SourceInfo", "chunk_table"]

CHUNK_BATCH_SCHEMA = pa.schema(
    [
        pa.field("array", pa.string(), nullable=False),
        *(pa.field(c, pa.int32(), nullable=False) for c in SOURCE_KEY_COLUMNS),
        pa.field("offset", pa.int64()),
        pa.field("length", pa.int64()),
        pa.field("filter_mask", pa.int32()),
        pa.field("inline", pa.large_binary()),
    ]
)
"""Chunk references of one source, columnar: key within the source and byte range (or inline)."""


@dataclass(frozen=True, slots=True, eq=False)
class ChunkColumns:
    """Chunk references of one source as numpy columns: ``CHUNK_BATCH_SCHEMA``'s rows before
    they are an Arrow table. A scanner may hand these over instead of a table: a batch of
    sources then becomes one table (``chunk_table``), not one per source, whose building (a
    dozen Arrow arrays and a schema check, ~0.1 ms) is most of the cost at a few rows a file.

    ``array``: each row's array name; ``keys``: ``(MAX_DIMS, rows)`` int32, ``NO_DIM`` past an
    array's dimensions; ``offset``/``length`` (bytes, int64) and ``filter_mask`` (int32) of each
    row; ``inline``: None when every row is a byte range, else each row's bytes (None: a range).
    """

    array: list[str]
    keys: np.ndarray[Any, Any]
    offset: np.ndarray[Any, Any]
    length: np.ndarray[Any, Any]
    filter_mask: np.ndarray[Any, Any]
    inline: list[bytes | None] | None = None

    def __post_init__(self) -> None:
        n = len(self.array)
        if (
            self.keys.shape != (MAX_DIMS, n) or self.keys.dtype != np.int32
            or any(len(c) != n for c in (self.offset, self.length, self.filter_mask))
            or self.offset.dtype != np.int64 or self.length.dtype != np.int64 or self.filter_mask.dtype != np.int32
            or (self.inline is not None and len(self.inline) != n)
        ):  # fmt: skip
            raise TypeError("chunk columns do not follow CHUNK_BATCH_SCHEMA")

    @property
    def num_rows(self) -> int:
        return len(self.array)

    def __eq__(self, other: object) -> bool:
        """Equal rows (numpy's ``==`` on the columns would be no answer)."""
        if not isinstance(other, ChunkColumns):
            return NotImplemented
        return bool(self.table().equals(other.table()))

    __hash__ = None  # type: ignore[assignment]

    def table(self) -> pa.Table:
        """These rows as a ``CHUNK_BATCH_SCHEMA`` table."""
        return chunk_table([self])

    @staticmethod
    def join(cols: Sequence[ChunkColumns]) -> ChunkColumns:
        """The rows of ``cols`` (one or more sources), in order, as one set of columns."""
        if len(cols) == 1:
            return cols[0]
        inline: list[bytes | None] | None = None
        if any(c.inline is not None for c in cols):
            inline = [x for c in cols for x in (c.inline if c.inline is not None else [None] * c.num_rows)]
        return ChunkColumns(
            [a for c in cols for a in c.array],
            np.concatenate([c.keys for c in cols], axis=1),
            np.concatenate([c.offset for c in cols]),
            np.concatenate([c.length for c in cols]),
            np.concatenate([c.filter_mask for c in cols]),
            inline,
        )


def chunk_table(parts: Sequence[pa.Table | ChunkColumns]) -> pa.Table:
    """The rows of ``parts`` (tables or columns of several sources), in order, as one
    ``CHUNK_BATCH_SCHEMA`` table: columns are joined in numpy and become Arrow arrays once."""
    held = [p for p in parts if p.num_rows]
    if not held:
        return CHUNK_BATCH_SCHEMA.empty_table()
    if not all(isinstance(p, ChunkColumns) for p in held):
        return pa.concat_tables([p if isinstance(p, pa.Table) else p.table() for p in held])
    c = ChunkColumns.join(held)
    n, inline = c.num_rows, c.inline
    missing = None if inline is None else np.fromiter((x is not None for x in inline), bool, n)
    return pa.Table.from_arrays(
        [
            pa.array(c.array, pa.string()),
            *(pa.array(c.keys[i], pa.int32()) for i in range(MAX_DIMS)),
            pa.array(c.offset, pa.int64(), mask=missing),
            pa.array(c.length, pa.int64(), mask=missing),
            pa.array(c.filter_mask, pa.int32()),
            pa.array(inline, pa.large_binary()) if inline is not None else pa.nulls(n, pa.large_binary()),
        ],
        schema=CHUNK_BATCH_SCHEMA,
    )


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A source as found: location verbatim, size in bytes, mtime in ns since epoch, etag, and
    with ``scan --checksum`` a digest of its bytes (``sha256:<hex>``, see ``_checksum``)."""

    location: str
    size: int
    mtime_ns: int
    etag: str | None = None
    checksum: str | None = None


_NO_GRID = ("null", "null")


@dataclass(frozen=True, slots=True)
class ArrayMeta:
    """One array as stored in one source.

    ``chunks`` is in elements per dimension; ``codecs`` is the decode pipeline in HDF5 encode
    order (numcodecs-style configs); ``fill_value`` and ``attrs`` are typed JSON (see _values).
    """

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    fill_value: Any
    codecs: tuple[dict[str, Any], ...] = ()
    attrs: dict[str, dict[str, Any]] = field(default_factory=dict)
    status: str = "ok"
    reason: str | None = None
    eras: tuple[dict[str, Any], ...] = ()
    """Global arrays only: when codecs, chunks, dtype, fill or encoding attributes (``_cf``) change
    along the concat dimension, or the first source holding the array does not start on a chunk
    boundary, one entry per era (``index, axis, start, stop`` in elements, and that era's
    ``dtype, chunks, codecs, fill_value, attrs``, ``first_source``, ``last_source``)."""
    short_edge: bool = False
    """The chunks cut by the array's end are stored short (a TIFF's last strip), not full size:
    refstore's reader handles that; zarr-shaped forms cannot express it."""
    holes: tuple[tuple[int, int], ...] = ()
    """Global arrays only: ``[start, stop)`` ranges along the concat axis ``holes_axis`` that no
    source holds (sources lacking the array); they read as fill, decoded as missing."""
    holes_axis: int = 0
    edges: tuple[tuple[int, ...] | None, ...] = ()
    """Global arrays only: the rectilinear chunk grid (``plan/grid.py``): per dimension None
    (regular at ``chunks``) or every chunk's length in elements; empty: regular everywhere. Set
    where sources are placed off their chunk boundaries (arrays with eras: per era, ``edges``)."""
    gridless: bool = False
    """Global arrays only: no chunk grid expresses the placement (tiles whose chunks cross each
    other's chunk edges: a brick layout). Each chunk sits at its slab's offset (the var row's
    ``d0..``) plus ``k * chunks``, cut by the slab's extent (``plan/slabs.py``); the chunk rows'
    ``g`` keys are coarse: the regular-grid cell of the chunk's origin (``k + d // chunks``)."""
    cell: tuple[int, ...] = ()
    """Gridless arrays whose tiles differ in layout (chunk shape, codecs or strip layout: tiles
    reprocessed over the years): the cell of the coarse keys per dimension, the greatest common
    divisor of the tiles' chunk sizes, so a chunk's key is the cell of its origin, ``(d + k * c) //
    cell``. Each chunk then decodes with its own tile's ``chunks``, ``codecs`` and ``short_edge``
    (its var row); ``chunks`` and ``codecs`` here are the first tile's. Empty: one layout."""

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def per_slab(self) -> bool:
        """Whether each slab's own layout (its var row) decodes its chunks (``cell``)."""
        return bool(self.cell)

    @property
    def np_dtype(self) -> np.dtype[Any]:
        return np.dtype(self.dtype)

    def structure(self) -> tuple[Any, ...]:
        """What must agree between sources for one global array (besides the shape)."""
        return (self.dtype, self.chunks, json.dumps(self.codecs, sort_keys=True), self.dims)

    def era_key(self) -> tuple[Any, ...]:
        """What starts a new era when it changes between sources along the concat dimension."""
        packing = encoding_attrs(self.attrs)
        return (*self.structure(), json.dumps(self.fill_value), json.dumps(packing, sort_keys=True))

    def grid(self) -> tuple[Any, ...]:
        """Georeferencing that must agree between sources placed along a new axis."""
        attrs = self.attrs
        if "transform" not in attrs and "crs" not in attrs:
            return _NO_GRID  # json.dumps(None) each: most arrays (the plan asks per source and array)
        return tuple(json.dumps(attrs.get(k), sort_keys=True) for k in ("transform", "crs"))

    def to_json(self) -> str:
        extra: dict[str, Any] = {"eras": list(self.eras)} if self.eras else {}
        if self.holes:
            extra["holes"] = {"axis": self.holes_axis, "ranges": [list(h) for h in self.holes]}
        if self.short_edge:
            extra["short_edge"] = True
        if self.edges:
            extra["chunk_edges"] = edges_to_json(self.edges)
        if self.gridless:
            extra["gridless"] = True
        if self.cell:
            extra["key_cell"] = list(self.cell)
        return json.dumps(
            {
                **extra,
                "name": self.name,
                "dims": list(self.dims),
                "shape": list(self.shape),
                "chunks": list(self.chunks),
                "dtype": self.dtype,
                "fill_value": self.fill_value,
                "codecs": list(self.codecs),
                "attrs": self.attrs,
                "status": self.status,
                "reason": self.reason,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ArrayMeta:
        """The array of ``to_json``'s text. Equal texts give the same (immutable) instance: the
        var rows of a long series repeat a few texts thousands of times, and the planner skips
        comparing an instance with itself."""
        if cls is ArrayMeta:
            return _meta_from_json(text)
        return cls._parse(text)

    @classmethod
    def _parse(cls, text: str) -> ArrayMeta:
        d = json.loads(text)
        return cls(
            name=d["name"],
            dims=tuple(d["dims"]),
            shape=tuple(d["shape"]),
            chunks=tuple(d["chunks"]),
            dtype=d["dtype"],
            fill_value=d["fill_value"],
            codecs=tuple(d["codecs"]),
            attrs=d["attrs"],
            status=d["status"],
            reason=d["reason"],
            eras=tuple(d.get("eras", ())),
            short_edge=bool(d.get("short_edge", False)),
            holes=tuple((int(a), int(b)) for a, b in d.get("holes", {}).get("ranges", ())),
            holes_axis=int(d.get("holes", {}).get("axis", 0)),
            edges=edges_from_json(d.get("chunk_edges")),
            gridless=bool(d.get("gridless", False)),
            cell=tuple(int(c) for c in d.get("key_cell", ())),
        )

    def with_shape(
        self, shape: tuple[int, ...], eras: tuple[dict[str, Any], ...] = (), holes: tuple[tuple[int, int], ...] = (),
        holes_axis: int = 0, edges: tuple[tuple[int, ...] | None, ...] = (),
    ) -> ArrayMeta:
        return ArrayMeta(
            self.name, self.dims, shape, self.chunks, self.dtype, self.fill_value,
            self.codecs, self.attrs, self.status, self.reason, eras, self.short_edge, holes, holes_axis, edges,
        )  # fmt: skip

    def era_meta(self, era: dict[str, Any]) -> ArrayMeta:
        """The metadata of one era of this global array (its own grid along the concat axis)."""
        shape = list(self.shape)
        shape[int(era["axis"])] = int(era["stop"]) - int(era["start"])
        return ArrayMeta(
            self.name, self.dims, tuple(shape), tuple(era["chunks"]), era["dtype"], era["fill_value"],
            tuple(era["codecs"]), era["attrs"], self.status, self.reason, short_edge=self.short_edge,
            edges=edges_from_json(era.get("edges")),
        )  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _meta_from_json(text: str) -> ArrayMeta:
    return ArrayMeta._parse(text)


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Everything one source contributes: its identity, its arrays, and its chunk rows.

    ``refs``: the chunk rows as a ``CHUNK_BATCH_SCHEMA`` table or as ``ChunkColumns`` (joined
    with other sources' into one table by ``chunk_table``); ``chunks``: them as a table.
    ``sort_value`` is the first coordinate value along the requested concat dimension (CF times
    as seconds since 1970-01-01), ``None`` when the source has no such coordinate.
    """

    source: SourceInfo
    arrays: tuple[ArrayMeta, ...]
    refs: pa.Table | ChunkColumns
    sort_value: float | None = None
    sort_units: str | None = None
    sort_last: float | None = None
    """The last coordinate value along the concat dimension (same units as ``sort_value``)."""
    groups: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    format: str | None = None
    """The source's format: ``hdf5``, ``netcdf3``, ``tiff`` or ``grib`` (``scan.auto.sniff``'s names)."""
    order_keys: dict[str, list[Any]] = field(default_factory=dict)
    """``{array: [first, last, units, is CF time]}`` for the numeric 1-D arrays along the concat
    dimension other than its own coordinate (``_series_facts``): what ``--order-by`` and the
    series order compare when the dimension's coordinate does not tell sources apart."""
    digests: dict[str, str] = field(default_factory=dict)
    """``{array: digest}`` of the arrays taken once (without the concat dimension), compared
    between sources by the plan (``_series_facts``)."""
    layout: dict[str, Any] = field(default_factory=dict)
    """What published forms need to know of the file without opening it again: for a TIFF,
    ``{"ifds": {array name: 0-based IFD number}}`` (the VRT opens IFD n as ``GTIFF_DIR``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.refs, ChunkColumns) and self.refs.schema != CHUNK_BATCH_SCHEMA:
            raise TypeError("chunk table does not follow CHUNK_BATCH_SCHEMA")
        for a in self.arrays:
            if a.ndim > MAX_DIMS and a.status == "ok":
                raise ValueError(f"{a.name}: more than {MAX_DIMS} dimensions")

    @property
    def chunks(self) -> pa.Table:
        """The chunk rows as a ``CHUNK_BATCH_SCHEMA`` table (built from ``ChunkColumns`` on each call:
        batches of sources go through ``chunk_table`` instead)."""
        refs = self.refs
        return refs if isinstance(refs, pa.Table) else refs.table()


class Scanner(Protocol):
    """One signature for every format: options at construction, one call per source."""

    def __call__(self, location: str) -> ScanResult: ...

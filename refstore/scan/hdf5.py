"""netCDF4/HDF5 scanner (h5py): every dataset in every group, as chunk references.

Chunked datasets go through ``chunk_iter`` (one pass over the chunk index); contiguous ones are
one range holding the full shape; compact ones are inlined (their bytes live in the object
header); unwritten chunks get no row. An array whose filters nothing here decodes is recorded
as ``unsupported`` with the reason, and the rest of the file is still scanned.

Local files are mostly read from their bytes: object headers (``_hdf5_header``), attributes
in dense storage (``_hdf5_dense``), a dataset's storage and its v1 chunk B-tree
(``_hdf5_layout``); every form those modules do not know is asked of HDF5, step by step.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import numpy as np

from .._keys import MAX_DIMS, NO_DIM
from .._values import encode_attr, encode_fill
from ..errors import ScanError
from ._cftime import cf_seconds
from ._hdf5_codecs import filters_to_codecs
from ._hdf5_header import AttrCache, HeaderReader
from ._hdf5_layout import CHUNKED, COMPACT, CONTIGUOUS, ChunkIndex, DatasetLayout, Filter, chunk_index, decode_dataset
from ._hdf5_names import NcDataset, netcdf_names
from ._sources import open_source
from ._types import CHUNK_BATCH_SCHEMA, ArrayMeta, ChunkColumns, ScanResult, SourceInfo

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

__all__ = ["HDF5Scanner"]

_HIDDEN_ATTRS = frozenset(
    {
        "CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates",
        "_nc3_strict", "_NCProperties", "_SuperblockVersion", "_IsNetcdf4",
    }
)  # fmt: skip
_NC_DIM_ONLY = b"This is a netCDF dimension but not a netCDF variable"
_INLINE_OVERSIZED_MAX = 1 << 20  # bytes: arrays with chunks larger than their shape are inlined


@dataclass(frozen=True, slots=True)
class HDF5Scanner:
    """Scan one netCDF4/HDF5 file.

    ``concat_dim``: name of the dimension sources will be concatenated along; the scanner reads
    the first value of the root coordinate variable of that name to order sources.
    """

    concat_dim: str | None = None

    def __call__(self, location: str) -> ScanResult:
        with open_source(location) as (fh, info):
            return self.scan_file(fh, info)

    def scan_file(self, fh: Any, info: SourceInfo) -> ScanResult:
        """Scan an opened source: local files by path (HDF5's own driver), remote ones through
        the ranged-read file ``fh`` (HDF5 and the object-header reader both)."""
        import h5py

        from .. import _objstore

        _load_filter_plugins()
        location = info.location
        remote = _objstore.is_remote(location)
        try:
            f = h5py.File(fh if remote else location, "r")
        except OSError as e:
            raise ScanError(location, _open_reason(e)) from None
        try:
            with f, contextlib.ExitStack() as stack:
                return self._scan(f, info, _header_reader(fh.pread if remote else location, stack))
        except ScanError:
            raise
        except (OSError, RuntimeError, KeyError, ValueError) as e:
            raise ScanError(location, f"cannot be read as HDF5: {_first_line(e)}") from None

    # ------------------------------------------------------------------ internals
    def _scan(self, f: Any, info: Any, header: HeaderReader | None = None) -> ScanResult:
        import h5py

        # Low-level walk: h5py's high-level objects cost a lock, a File object and a property
        # cache per dataset and per attribute, about as much as the rest of a small file's scan.
        # With the header reader, objects are not even opened: the walk's own object info
        # (address, attribute count) keys their header bytes, and a dataset whose storage those
        # bytes describe (``_hdf5_layout``) is scanned from them; any other is opened as before.
        datasets: list[_Dataset | _RawDataset] = []
        fid = f.id
        rinfo = h5py.h5o.get_info(fid) if header is not None else None
        root = _Object(fid, b"/", None if rinfo is None else _Info(rinfo.addr, rinfo.rc, rinfo.num_attrs))
        groups: dict[str, dict[str, dict[str, Any]]] = {"": _attrs(root, header)}

        def visit(name: bytes, oinfo: Any = None) -> None:
            path = b"/" + name  # the path it is opened by: H5Iget_name's
            if oinfo is None:
                oid = h5py.h5o.open(fid, name)
                kind = h5py.h5i.get_type(oid)
                if kind == h5py.h5i.DATASET:
                    datasets.append(_Dataset(fid, path, None, oid))
                elif kind == h5py.h5i.GROUP:
                    groups[_text(_decode(name))] = _attrs(_Object(fid, path, None, oid), None)
            elif oinfo.type == h5py.h5o.TYPE_DATASET and header is not None:  # (one ObjInfo, overwritten)
                datasets.append(_dataset(fid, path, _Info(oinfo.addr, oinfo.rc, oinfo.num_attrs), header))
            elif oinfo.type == h5py.h5o.TYPE_GROUP:
                groups[_text(_decode(name))] = _attrs(_Object(fid, path, _Info(oinfo.addr, oinfo.rc, oinfo.num_attrs)),
                                                      header)  # fmt: skip

        if header is None:
            h5py.h5o.visit(fid, visit)
        else:
            h5py.h5o.visit(fid, visit, info=True)

        metas: list[ArrayMeta] = []
        datasets += _linked_datasets(fid, header, datasets, metas, groups)  # soft and further hard links
        scales = {id(ds): _is_scale(ds, header) for ds in datasets}
        dim_only = {id(ds) for ds in datasets if scales[id(ds)] and _is_dimension_only(ds, header)}
        names = _netcdf_names(fid, header, datasets, scales, dim_only, groups)
        parts: list[_Chunks] = []
        coordinate: tuple[ArrayMeta, _Chunks | None] | None = None
        for ds in datasets:
            if id(ds) in dim_only:
                continue
            attrs = _attrs(ds, header)
            meta, chunks = _scan_dataset(ds, attrs, names.get(_text(ds.name).lstrip("/")), header)
            if self.concat_dim is not None and meta.name == self.concat_dim:
                coordinate = (meta, chunks)
            if self.concat_dim is not None and chunks is not None and chunks.whole:
                meta, chunks = _split_along(meta, chunks, self.concat_dim)
            metas.append(meta)
            if chunks is not None and len(chunks.keys):
                parts.append(chunks)

        sort_value, sort_last, sort_units = (None, None, None)
        if self.concat_dim is not None:
            sort_value, sort_last, sort_units = _coordinate_range(f, coordinate)
        table = _chunk_table(parts)
        return ScanResult(
            source=info,
            arrays=tuple(metas),
            refs=table,
            sort_value=sort_value,
            sort_last=sort_last,
            sort_units=sort_units,
            groups=groups,
            format="hdf5",
        )


def _header_reader(source: str | Callable[[int, int], bytes], stack: contextlib.ExitStack) -> HeaderReader | None:
    """The file's object-header reader (``_hdf5_header``) over a local path or a remote file's
    ranged reads, or None when it cannot read what HDF5 just opened: it only spares HDF5
    calls (and reads the chunk index type HDF5 does not tell), so it never fails a scan."""
    try:
        return stack.enter_context(HeaderReader(source))
    except OSError:
        return None


def _load_filter_plugins() -> None:
    """Let h5py itself decode zstd, lz4, blosc... (compact/oversized arrays are read through it)."""
    with contextlib.suppress(ImportError):
        import hdf5plugin  # noqa: F401


def _text(name: str | bytes) -> str:
    """An HDF5 object name as text: h5py gives a name that is not UTF-8 as bytes (replaced here)."""
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _open_reason(e: OSError) -> str:
    msg = str(e)
    if "file signature not found" in msg:
        return "not an HDF5/netCDF4 file (no HDF5 signature)"
    if "truncated file" in msg:
        return "truncated HDF5 file (" + msg.split("truncated file:")[-1].strip(" )") + ")"
    if "No such file" in msg:
        return f"cannot open: {_first_line(e)}"
    return f"cannot open as HDF5: {_first_line(e)}"


def _decode(name: bytes) -> str | bytes:
    """A name as h5py's high-level API gives it: UTF-8 text, else the bytes."""
    try:
        return name.decode("utf8")
    except UnicodeDecodeError:
        return name


class _Info(NamedTuple):
    """The fields of an object's ``h5o.get_info`` the scanner uses (copied: ``h5o.visit``
    passes one ObjInfo it overwrites for every object)."""

    addr: int
    rc: int  # hard links to it
    num_attrs: int


class _Object:
    """An HDF5 object found by the walk: its path, the walk's object info (address, attribute
    count; None without the header reader), and its low-level id, opened when first asked."""

    __slots__ = ("_cpl", "_fid", "_id", "info", "name")

    def __init__(self, fid: Any, path: bytes, info: Any = None, oid: Any = None) -> None:
        self._fid = fid
        self._id = oid
        self._cpl: Any = None
        self.info = info
        self.name: str | bytes = _decode(path)

    @property
    def id(self) -> Any:
        if self._id is None:
            import h5py

            path = self.name.encode() if isinstance(self.name, str) else self.name
            self._id = h5py.h5o.open(self._fid, path)
        return self._id

    @property
    def cpl(self) -> Any:
        """The object's creation property list (read once)."""
        if self._cpl is None:
            self._cpl = self.id.get_create_plist()
        return self._cpl

    def tracked(self, header: HeaderReader | None) -> bool:
        """Whether its attributes' creation order is tracked (h5py then lists them in that
        order): from the header's flags when the header reader parsed it, else HDF5's plist."""
        import h5py

        if header is not None and self.info is not None:
            known = header.tracked(self.info.addr)
            if known is not None:
                return known
        return bool(self.cpl.get_attr_creation_order() & h5py.h5p.CRT_ORDER_TRACKED)


class _Dataset(_Object):
    """A dataset read through h5py's low-level ``DatasetID``, with the few properties of
    ``h5py.Dataset`` the scanner uses, computed the same way."""

    __slots__ = ("dtype", "shape")

    def __init__(self, fid: Any, path: bytes, info: Any = None, oid: Any = None) -> None:
        super().__init__(fid, path, info, oid)
        dsid = self.id
        self.shape: tuple[int, ...] | None = dsid.shape
        self.dtype: np.dtype[Any] = dsid.dtype

    @property
    def fillvalue(self) -> Any:
        arr = np.zeros((1,), dtype=self.dtype)
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # undefined (H5Pset_fill_value NULL): zeros
            self.cpl.get_fill_value(arr)
        return arr[0]

    def layout(self) -> int:
        return int(self.cpl.get_layout())

    def external_count(self) -> int:
        return int(self.cpl.get_external_count())

    def contiguous(self) -> tuple[int | None, int]:
        """(file offset or None when never written, bytes) of a contiguous dataset. Nothing
        stored is never written: after a user block, ``H5Dget_offset`` of unallocated storage is
        the undefined address plus the base address (4095 after 4096 bytes), not None."""
        offset = self.id.get_offset()
        size = int(self.id.get_storage_size())
        return (None, 0) if offset is None or size == 0 else (int(offset), size)

    def chunk_shape(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.cpl.get_chunk())

    def filters(self) -> Any:
        """What ``filters_to_codecs`` reads the pipeline from (``get_nfilters``/``get_filter``)."""
        return self.cpl

    def chunk_index(self) -> ChunkIndex:
        return _hdf5_chunk_index(self.id, len(self.shape or ()))

    def read_bytes(self) -> bytes:
        """Every value, C order, in the dataset's dtype, as h5py reads them."""
        import h5py

        arr = np.asarray(h5py.Dataset(self.id, readonly=True)[()])
        out = np.ascontiguousarray(arr).astype(self.dtype, copy=False)
        if self.dtype == np.longdouble and np.finfo(np.longdouble).nmant == 63 and out.size:
            # x87 80-bit values in 16 bytes: the read leaves the padding as memory held it
            b = out.reshape(-1).view(np.uint8).reshape(-1, self.dtype.itemsize).copy()
            b[:, 10:] = 0
            return b.tobytes()
        return out.tobytes()


def _hdf5_chunk_index(dsid: Any, ndim: int) -> ChunkIndex:
    """A chunked dataset's written chunks through HDF5 (``chunk_iter``: one pass over the index)."""
    n = int(dsid.get_num_chunks())
    elem = np.empty((n, ndim), np.int64)
    offsets = np.empty(n, np.int64)
    lengths = np.empty(n, np.int64)
    masks = np.empty(n, np.int32)
    count = 0

    def take(si: Any) -> None:
        nonlocal count
        elem[count] = si.chunk_offset
        offsets[count] = si.byte_offset
        lengths[count] = si.size
        masks[count] = si.filter_mask
        count += 1  # returning None keeps chunk_iter going

    if n:
        dsid.chunk_iter(take)
    return ChunkIndex(elem[:count], offsets[:count], lengths[:count], masks[:count])


class _Pipeline:
    """A filter pipeline decoded from header bytes, read as ``filters_to_codecs`` reads a plist."""

    __slots__ = ("_filters",)

    def __init__(self, filters: tuple[Filter, ...]) -> None:
        self._filters = filters

    def get_nfilters(self) -> int:
        return len(self._filters)

    def get_filter(self, i: int) -> tuple[int, int, tuple[int, ...], bytes]:
        f = self._filters[i]
        return f.code, f.flags, f.values, f.name


class _RawDataset(_Object):
    """A dataset whose storage its object header bytes describe (``_hdf5_layout``): nothing is
    asked of HDF5 unless a step falls back (a chunk index not walked from the bytes, a read of
    values not held in them, attributes not proven by them)."""

    __slots__ = ("_header", "_raw", "dtype", "shape")

    def __init__(self, fid: Any, path: bytes, info: Any, header: HeaderReader, raw: DatasetLayout) -> None:
        super().__init__(fid, path, info)
        self._header = header
        self._raw = raw
        self.shape: tuple[int, ...] | None = raw.shape
        self.dtype: np.dtype[Any] = raw.dtype

    @property
    def fillvalue(self) -> Any:
        return np.frombuffer(self._raw.fill, self.dtype)[0]

    def layout(self) -> int:
        return self._raw.layout

    def external_count(self) -> int:
        return 0  # an external file list is never decoded (_hdf5_layout)

    @property
    def unlimited(self) -> tuple[bool, ...]:
        return self._raw.unlimited

    def contiguous(self) -> tuple[int | None, int]:
        # never written: (None, 0) as from HDF5 (the layout message keeps the size to allocate)
        return (None, 0) if self._raw.address is None else (self._raw.address, self._raw.size)

    def chunk_shape(self) -> tuple[int, ...]:
        return self._raw.chunks

    def filters(self) -> Any:
        return _Pipeline(self._raw.filters)

    def chunk_index(self) -> ChunkIndex:
        if self._raw.address is None:
            ndim = len(self._raw.shape)
            return ChunkIndex(np.empty((0, ndim), np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
                              np.empty(0, np.int32))  # fmt: skip
        grid = [-(-s // c) for s, c in zip(self._raw.shape, self._raw.chunks, strict=True)]
        got = chunk_index(self._header.read, self._raw.address, len(self._raw.shape), int(np.prod(grid, dtype=object)))
        return got if got is not None else _hdf5_chunk_index(self.id, len(self._raw.shape))

    def read_bytes(self) -> bytes:
        raw, dt = self._raw, self.dtype
        nbytes = int(np.prod(raw.shape, dtype=np.int64)) * dt.itemsize
        if raw.layout == COMPACT and len(raw.compact) == nbytes:
            return raw.compact  # (other compact data: HDF5's refusal, "size ... doesn't match")
        if (raw.layout == CHUNKED and not raw.filters and raw.address is not None
                and all(c >= n for c, n in zip(raw.chunks, raw.shape, strict=True))):  # fmt: skip
            # one unfiltered chunk covering the array (an oversized chunk): its leading block
            index = self.chunk_index()
            size = int(np.prod(raw.chunks, dtype=np.int64)) * dt.itemsize
            if len(index.offsets) == 1 and not index.elem.any() and int(index.lengths[0]) == size:
                block = self._header.read(int(index.offsets[0]), size)
                if len(block) == size:
                    whole = np.frombuffer(block, dt).reshape(raw.chunks)
                    return np.ascontiguousarray(whole[tuple(slice(0, n) for n in raw.shape)]).tobytes()
        return _Dataset(self._fid, b"", self.info, self.id).read_bytes()


def _dataset(fid: Any, path: bytes, info: Any, header: HeaderReader) -> _Dataset | _RawDataset:
    """The dataset at ``path``: from its header bytes when they describe it, else opened."""
    h = header.header(info.addr)
    raw = None
    if h is not None:
        if h.dataset is False:  # derived once per header (a series' files share their headers' parses)
            h.dataset = decode_dataset(h.messages)
        raw = h.dataset
    if raw is not None:
        return _RawDataset(fid, path, info, header, raw)
    return _Dataset(fid, path, info)


_ATTR_CACHE = AttrCache()


def _attrs(obj: _Object, header: HeaderReader | None = None) -> dict[str, dict[str, Any]]:
    """Visible attributes of an object, typed, in h5py's order (creation order when tracked,
    else by name); netCDF/HDF5 bookkeeping attributes are left unread. With the file's
    ``header`` reader, attributes whose messages are byte for byte ones already read (another
    file of the series) are taken from ``_ATTR_CACHE`` (``_hdf5_header``)."""
    tracked = obj.tracked(header)
    if header is not None and obj.info is not None:
        key = header.attribute_key(obj.info.addr, obj.info.num_attrs, _HIDDEN_ATTRS)
        if key is not None:
            return _ATTR_CACHE.get(b"T" + key if tracked else b"N" + key, lambda: _read_attrs_once(obj.id, tracked))
    return _read_attrs(obj.id, tracked)


def _read_attrs_once(oid: Any, tracked: bool) -> tuple[dict[str, dict[str, Any]], bool]:
    """``_read_attrs`` and whether every attribute was read (what the cache may keep)."""
    failed: list[bytes] = []
    return _read_attrs(oid, tracked, failed), not failed


def _read_attrs(oid: Any, tracked: bool, failed: list[bytes] | None = None) -> dict[str, dict[str, Any]]:
    """``failed``: collects the names of attributes whose read raised (left out)."""
    import h5py

    raw_names: list[bytes] = []
    order = h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME
    h5py.h5a.iterate(oid, lambda n, *_: raw_names.append(n), index_type=order)
    out: dict[str, dict[str, Any]] = {}
    for raw in raw_names:
        name = _decode(raw)
        if name in _HIDDEN_ATTRS:
            continue
        try:
            value = _read_attr(oid, raw)
        except (OSError, TypeError, ValueError):
            if failed is not None:
                failed.append(raw)
            continue  # attribute types h5py cannot read (references to regions, ...)
        enc = encode_attr(value) if value is not None else None
        if enc is not None:
            out[_text(name)] = enc
    return out


def _read_attr(oid: Any, name: bytes) -> Any:
    """One attribute's value as ``h5py.AttributeManager.__getitem__`` gives it (None for an
    empty dataspace, which has no recorded form)."""
    import h5py

    attr = h5py.h5a.open(oid, name)
    shape = attr.shape
    if shape is None:
        return None
    dtype = attr.dtype
    htype = _memory_type(dtype)
    if dtype.subdtype is not None:  # a top-level array type: numpy takes it as extra dimensions
        dtype, subshape = dtype.subdtype
        shape = shape + subshape
    arr = np.zeros(shape, dtype=dtype, order="C")
    attr.read(arr, mtype=htype)
    info = h5py.h5t.check_string_dtype(dtype)
    if info is not None and info.length is None:
        arr = np.array([b.decode("utf-8", "surrogateescape") for b in arr.flat], dtype=dtype).reshape(arr.shape)
    return arr[()] if arr.ndim == 0 else arr


_MEMORY_TYPES: dict[str, Any] = {}


def _memory_type(dtype: np.dtype[Any]) -> Any:
    """``h5t.py_create(dtype)``, kept per dtype for plain numbers and fixed-length bytes (the
    type is then a function of ``dtype.str`` alone; types with metadata, vlen or nesting are
    made each time)."""
    import h5py

    if dtype.kind not in "biufcS" or dtype.metadata is not None or dtype.subdtype is not None or dtype.names:
        return h5py.h5t.py_create(dtype)
    htype = _MEMORY_TYPES.get(dtype.str)
    if htype is None:
        htype = _MEMORY_TYPES[dtype.str] = h5py.h5t.py_create(dtype)
    return htype


def _is_scale(ds: _Object, header: HeaderReader | None) -> bool:
    """``H5DSis_scale``: a ``CLASS`` attribute reading ``DIMENSION_SCALE`` (from the header
    bytes when they tell, else through HDF5)."""
    import h5py

    if header is not None and ds.info is not None:
        known = header.is_scale(ds.info.addr, ds.info.num_attrs)
        if known is not None:
            return known
    return bool(h5py.h5ds.is_scale(ds.id))


def _is_dimension_only(ds: _Object, header: HeaderReader | None = None) -> bool:
    """A netCDF4 dimension without a variable (a scale whose NAME says so): not an array."""
    import h5py

    if header is not None and ds.info is not None:
        known = header.name_starts(ds.info.addr, ds.info.num_attrs, _NC_DIM_ONLY)
        if known is not None:
            return known
    try:
        name = _read_attr(ds.id, b"NAME") if h5py.h5a.exists(ds.id, b"NAME") else None
    except (OSError, TypeError, ValueError):
        return False
    if isinstance(name, str):
        name = name.encode()
    return isinstance(name, bytes) and name.startswith(_NC_DIM_ONLY)


def _phony(shape: tuple[int, ...]) -> tuple[str, ...]:
    """Dimension names of a dataset netCDF-C does not name (null dataspace): by position."""
    return tuple(f"phony_dim_{i}" for i in range(len(shape)))


def _unlimited(ds: _Dataset | _RawDataset) -> tuple[bool, ...]:
    """Per dimension, whether its maximum size is unlimited."""
    import h5py

    if isinstance(ds, _RawDataset):
        return ds.unlimited
    space = ds.id.get_space()
    if space.get_simple_extent_type() != h5py.h5s.SIMPLE:
        return ()
    return tuple(m == h5py.h5s.UNLIMITED for m in space.get_simple_extent_dims(True))


def _address(ds: _Object) -> int:
    import h5py

    return int(ds.info.addr) if ds.info is not None else int(h5py.h5o.get_info(ds.id).addr)


def _hidden_ints(ds: _Object, name: bytes) -> tuple[int, ...] | None:
    """A netCDF-4 bookkeeping attribute of integers (``_Netcdf4Dimid``, ``_Netcdf4Coordinates``)."""
    import h5py

    try:
        if not h5py.h5a.exists(ds.id, name):
            return None
        value = np.asarray(_read_attr(ds.id, name))
    except (OSError, TypeError, ValueError, RuntimeError, KeyError):
        return None
    return tuple(int(v) for v in value.reshape(-1)) if value.dtype.kind in "iu" else None


def _last_scales(ds: _Dataset | _RawDataset, header: HeaderReader | None) -> tuple[int | None, ...] | None:
    """Per dimension, the address of the last dimension scale attached (netCDF-C's pick); None
    when the first dimension has none (netCDF-C then gives every dimension a phony one)."""
    import h5py

    ndim = len(ds.shape or ())
    if ndim == 0:
        return None
    got: list[int | None] | None = None
    if header is not None and ds.info is not None:
        got = header.first_scales(ds.info.addr, ds.info.num_attrs, ndim, last=True)
    if got is None:
        got = []
        try:
            if not h5py.h5a.exists(ds.id, b"DIMENSION_LIST"):
                return None
            for i in range(ndim):
                found: list[int] = []
                if h5py.h5ds.get_num_scales(ds.id, i) > 0:
                    h5py.h5ds.iterate(ds.id, i, lambda sid, found=found: found.append(h5py.h5o.get_info(sid).addr))
                got.append(found[-1] if found else None)
        except (RuntimeError, OSError, ValueError, KeyError):
            return None
    return tuple(got) if got and got[0] is not None else None


def _nc_dataset(ds: _Dataset | _RawDataset, header: HeaderReader | None, scale: bool, dim_only: bool) -> NcDataset:
    shape = tuple(int(n) for n in ds.shape or ())
    coords = _hidden_ints(ds, b"_Netcdf4Coordinates") if scale and len(shape) > 1 else None
    dimid = _hidden_ints(ds, b"_Netcdf4Dimid") if scale else None
    return NcDataset(_text(ds.name).lstrip("/"), shape, _unlimited(ds), _address(ds), scale, dim_only,
                     dimid[0] if dimid else None, coords, None if scale else _last_scales(ds, header))  # fmt: skip


def _link_order(fid: Any, group: str) -> list[str]:
    """The link names of a group in netCDF-C's order: creation order when tracked, else by name."""
    import h5py

    gid = h5py.h5g.open(fid, ("/" + group).encode())
    tracked = gid.get_create_plist().get_link_creation_order() & h5py.h5p.CRT_ORDER_TRACKED
    names: list[str] = []
    gid.links.iterate(lambda n: names.append(_text(_decode(n))),
                      idx_type=h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME)  # fmt: skip
    return names


def _netcdf_names(fid: Any, header: HeaderReader | None, datasets: list[_Dataset | _RawDataset],
                  scales: dict[int, bool], dim_only: set[int],
                  groups: dict[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:  # fmt: skip
    """Variable and dimension names of the file's datasets as netCDF-C gives them
    (``_hdf5_names``): groups pre-order and links in netCDF-C's order."""
    by_group: dict[str, list[NcDataset]] = {g: [] for g in groups}
    for ds in datasets:
        if ds.shape is None:
            continue
        nc = _nc_dataset(ds, header, scales[id(ds)], id(ds) in dim_only)
        by_group.setdefault(nc.path.rpartition("/")[0], []).append(nc)
    ordered: list[tuple[str, list[NcDataset]]] = []

    def visit(group: str) -> None:
        try:
            order = {n: i for i, n in enumerate(_link_order(fid, group))}
        except (RuntimeError, OSError, ValueError, KeyError):
            order = {}
        late = len(order)
        members = sorted(by_group.get(group, []), key=lambda d: order.get(d.path.rpartition("/")[2], late))
        ordered.append((group, members))
        prefix = f"{group}/" if group else ""
        children = [g for g in by_group if g.startswith(prefix) and g != group and "/" not in g[len(prefix) :]]
        for child in sorted(children, key=lambda g: order.get(g[len(prefix) :], late)):
            visit(child)

    visit("")
    return netcdf_names(ordered)


def _linked_datasets(fid: Any, header: HeaderReader | None, walked: list[_Dataset | _RawDataset],
                     refused: list[ArrayMeta],
                     groups: dict[str, dict[str, dict[str, Any]]]) -> list[_Dataset | _RawDataset]:  # fmt: skip
    """Datasets the object walk (one path per object) does not reach by their other links, as
    h5py's and netCDF-C's listings show them: a soft link to a dataset and a further hard link
    to one are that dataset under the link's name; a soft link to a group is that group under
    the link's name (its datasets and subgroups, added to ``groups``), unless it leads back to
    one of its own ancestors. A link that reaches no dataset (dangling, to another file,
    user-defined, a cycle, a soft link to a group within such a group) is recorded in
    ``refused`` with its reason."""
    seen = {_text(ds.name).lstrip("/") for ds in walked}
    out: list[_Dataset | _RawDataset] = []
    _follow_links(fid, header, b"", None, seen, out, refused, groups)
    return out


def _follow_links(fid: Any, header: HeaderReader | None, under: bytes, shown: bytes | None, seen: set[str],
                  out: list[_Dataset | _RawDataset], refused: list[ArrayMeta],
                  groups: dict[str, dict[str, dict[str, Any]]]) -> None:  # fmt: skip
    """The links below the group ``under`` ("": the root), shown under ``shown`` (a soft
    link's path; None: its own path, where only links the walk missed are added)."""
    import h5py

    links: list[tuple[bytes, int]] = []
    fid.links.visit(lambda n, info: links.append((n, info.type)), info=True, obj_name=b"/" + under)
    for raw, kind in links:
        full = under + b"/" + raw if under else raw  # the path the object is reached by
        path = _text(_decode(raw if shown is None else shown + b"/" + raw))
        if path in seen and shown is None:
            continue
        oinfo = None
        if kind in (h5py.h5l.TYPE_HARD, h5py.h5l.TYPE_SOFT):
            with contextlib.suppress(KeyError, RuntimeError, OSError, ValueError):
                oinfo = h5py.h5o.get_info(fid, b"/" + full)
        reason = _link_reason(fid, full, kind, oinfo, nested=shown is not None)
        if reason is None and oinfo is not None and oinfo.type == h5py.h5o.TYPE_DATASET:
            info = _Info(oinfo.addr, oinfo.rc, oinfo.num_attrs)
            out.append(_dataset(fid, b"/" + full, info, header) if header is not None else _Dataset(fid, b"/" + full))
            out[-1].name = path  # the name it is shown by
            seen.add(path)
        elif reason is None and oinfo is not None and oinfo.type == h5py.h5o.TYPE_GROUP:
            again = kind == h5py.h5l.TYPE_HARD and shown is None and path not in groups  # a group's 2nd hard link
            if again and _is_ancestor(fid, full, oinfo.addr):
                reason = f"hard link to group {path}'s own ancestor (a cycle)"
            else:
                if kind == h5py.h5l.TYPE_SOFT or shown is not None or again:
                    groups[path] = _attrs(_Object(fid, b"/" + full), None)
                if kind == h5py.h5l.TYPE_SOFT:
                    target = fid.links.get_val(full).lstrip(b"/")
                    _follow_links(fid, header, target, path.encode(), seen, out, refused, groups)
                elif again:  # its datasets under this name too, as netCDF-C and h5py's listing give them
                    _follow_links(fid, header, full, path.encode(), seen, out, refused, groups)
        if reason is not None:
            refused.append(ArrayMeta(name=path, dims=(), shape=(), chunks=(), dtype="|u1", fill_value=None,
                                     status="unsupported", reason=reason))  # fmt: skip


def _is_ancestor(fid: Any, full: bytes, addr: int) -> bool:
    """Whether the group at ``addr`` is the root or a group on the path to ``full``."""
    import h5py

    parts = full.split(b"/")[:-1]
    prefixes = [b"/"] + [b"/" + b"/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(h5py.h5o.get_info(fid, p).addr == addr for p in prefixes)


def _link_reason(fid: Any, full: bytes, kind: int, oinfo: Any, *, nested: bool) -> str | None:
    """Why the link at ``full`` is not followed, or None."""
    import h5py

    if kind == h5py.h5l.TYPE_EXTERNAL:
        file, obj = fid.links.get_val(full)
        return f"external link to {_text(file)}:{_text(obj)} (links to other files are not followed)"
    if kind not in (h5py.h5l.TYPE_HARD, h5py.h5l.TYPE_SOFT):
        return "user-defined link (not followed)"
    if kind == h5py.h5l.TYPE_HARD:
        return None
    target = fid.links.get_val(full)
    if oinfo is None:
        return f"soft link to {_text(target)}, which does not exist"
    if oinfo.type == h5py.h5o.TYPE_GROUP:
        if nested:
            return f"soft link to group {_text(target)} inside a group reached by a soft link (not followed)"
        t = target.rstrip(b"/") + b"/"
        if t == b"/" or (b"/" + full + b"/").startswith(t if t.startswith(b"/") else b"/" + t):
            return f"soft link to group {_text(target)}, one of its own ancestors (a cycle)"
    return None


NULLTERM_CHECK_MAX: Final = 16 << 20
"""Stored bytes of a null-terminated string dataset up to which the scan reads them to see
whether any string holds bytes after its NUL (larger ones take the ``nullterm`` step unread)."""


def _string_pad(ds: Any) -> tuple[dict[str, Any], ...]:
    """The value step of a fixed-length string dataset whose stored bytes h5py (HDF5's
    conversion to null padding) does not read as they are, converted after decoding
    (``read/decode.py``); compact and inlined values come from h5py already converted.
    ``spacepad``: trailing spaces read as NULs. ``nullterm``: null-terminated strings read as
    NULs from their first NUL on; only where some string holds bytes after it (C writers leave
    them NUL), so the usual ones (HDF-EOS metadata...) keep their zarr forms."""
    import h5py

    if ds.dtype.kind != "S":
        return ()
    pad = ds.id.get_type().get_strpad()
    if pad == h5py.h5t.STR_SPACEPAD:
        return ({"id": "spacepad"},)
    if pad != h5py.h5t.STR_NULLTERM or ds.dtype.itemsize < 2 or not _bytes_after_nul(ds):
        return ()
    return ({"id": "nullterm"},)


def _bytes_after_nul(ds: Any) -> bool:
    """Whether a null-terminated string dataset stores a byte other than NUL after some
    string's first NUL (read unconverted, in its file type); True unread past
    ``NULLTERM_CHECK_MAX`` stored bytes."""
    import h5py

    shape = tuple(int(s) for s in ds.shape)
    if int(np.prod(shape, dtype=np.int64)) * ds.dtype.itemsize > NULLTERM_CHECK_MAX:
        return True
    raw = np.zeros(shape, ds.dtype)
    if raw.size:
        try:
            ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=ds.id.get_type())
        except (OSError, RuntimeError):
            return True  # unread: the step keeps what HDF5 would read, were the chunks readable
    b = raw.reshape(-1).view(np.uint8).reshape(-1, ds.dtype.itemsize)
    return bool((b[np.cumsum(b == 0, axis=1) > 0] != 0).any())


def _supported_dtype(dt: np.dtype[Any]) -> str | None:
    import h5py

    if dt.names is not None:
        return "compound dtype is not supported"
    if h5py.check_vlen_dtype(dt) is not None or dt.kind == "O":
        return "variable-length dtype has no fixed byte layout"
    if dt.kind not in "biufcS":
        return f"dtype {dt} is not supported"
    return None


def _unswizzled_index_reason(ds: _Dataset | _RawDataset, header: HeaderReader | None) -> str | None:
    """Why HDF5's chunk iteration cannot be trusted for this dataset, or None. An extensible
    array chunk index (data layout version 4, exactly one unlimited dimension) numbers chunks
    with the unlimited dimension moved first; ``H5Dchunk_iter`` and ``H5Dget_chunk_info`` (HDF5
    2.0.0) report those positions without moving it back, so with the unlimited dimension not
    first, chunk (0, j, 0) is reported at (0, 0, j * chunk): other chunks' bytes under in-grid
    keys. The index type is read from the layout message; without it (no header reader: the
    file's bytes could not be read) any dataset with one unlimited dimension not first is
    refused whatever its index: the superblock version tells nothing, a file of superblock 0
    reopened with libver ``latest`` gets layout version 4 datasets. Version 5 (HDF5 2.0's, for
    a filtered dataset under libver ``latest``) is version 4's bytes up to the index type; a
    later version is refused."""
    if isinstance(ds, _RawDataset):
        return None  # layout version 3: a version 1 B-tree, walked from the bytes
    import h5py

    space = ds.id.get_space()
    maxdims = space.get_simple_extent_dims(True) if space.get_simple_extent_type() == h5py.h5s.SIMPLE else ()
    unlimited = [i for i, m in enumerate(maxdims) if m == h5py.h5s.UNLIMITED]
    if len(unlimited) != 1 or unlimited[0] == 0:
        return None
    messages = header.messages(ds.info.addr) if header is not None and ds.info is not None else None
    layout = next((body for kind, _f, _r, body in messages if kind == 0x08), None) if messages else None
    if layout is not None and len(layout) >= 5:
        if layout[0] < 4:
            return None  # a version 1 B-tree: its keys hold the chunk offsets
        at = 5 + layout[3] * layout[4]  # versions 4, 5: the index type after the chunk dimensions
        if layout[0] in (4, 5) and layout[1] == 2 and len(layout) > at and layout[at] != 4:
            return None  # not an extensible array
        return (f"chunk index is an extensible array over unlimited dimension {unlimited[0]}: HDF5's "
                "chunk iteration reports its chunk offsets wrongly (not swizzled back)")  # fmt: skip
    return (f"unlimited dimension {unlimited[0]} is not the first and the chunk index is unknown without "
            "the object header bytes (HDF5 reports an extensible array's chunk offsets wrongly)")  # fmt: skip


def _stored_type_reason(tid: Any, dt: np.dtype[Any]) -> str | None:
    """Why the stored bytes of a dataset are not ``dt``'s layout, or None when they are. h5py
    gives the nearest numpy dtype of any integer or float type and HDF5 converts on read; the
    bytes referenced are read as ``dt`` without HDF5, so only the standard layouts pass:
    integers and bitfields of 1, 2, 4, 8 bytes with every bit used, IEEE binary16/32/64 floats, the native
    long double, and enums and compounds (complex numbers) of those."""
    from h5py import h5t

    if tid.get_size() != dt.itemsize:
        return f"stored type of {tid.get_size()} bytes is read as {dt} ({dt.itemsize} bytes)"
    cls = tid.get_class()
    if cls == h5t.INTEGER:
        if tid.get_precision() != 8 * tid.get_size() or tid.get_offset() != 0:
            return (f"integer type of {tid.get_precision()} bits at bit {tid.get_offset()} of "
                    f"{tid.get_size()} bytes (HDF5 converts it on read)")  # fmt: skip
        return None
    if cls == h5t.BITFIELD:  # (h5py has no precision getter for them: equal to a standard one)
        if any(tid == getattr(h5t, f"STD_B{8 * tid.get_size()}{order}") for order in ("LE", "BE")
               if tid.get_size() in (1, 2, 4, 8)):  # fmt: skip
            return None
        return f"bitfield of {tid.get_size()} bytes with padding bits (HDF5 cannot convert it)"
    if cls == h5t.FLOAT:
        for n in (16, 32, 64):
            for order in ("LE", "BE"):
                if tid == getattr(h5t, f"IEEE_F{n}{order}"):
                    return None
        if tid == h5t.NATIVE_LDOUBLE:
            return None
        return (f"floating-point type of {tid.get_size()} bytes whose layout is not IEEE 754's "
                "(HDF5 converts it on read)")  # fmt: skip
    if cls == h5t.ENUM:
        return _stored_type_reason(tid.get_super(), dt.base if dt.metadata is None else np.dtype(dt.str))
    if cls == h5t.COMPOUND:  # complex numbers (h5py's reading of a pair of floats)
        for i in range(tid.get_nmembers()):
            member = tid.get_member_type(i)
            reason = _stored_type_reason(member, member.dtype)
            if reason is not None:
                return reason
    return None


@dataclass(frozen=True, slots=True)
class _Chunks:
    """Chunk references of one dataset, as numpy columns (one Arrow table per source at the end).

    ``whole``: one uncompressed chunk covering the array by layout (contiguous, compact or
    inlined), which may be split into slabs along the concat dimension."""

    name: str
    keys: np.ndarray[Any, Any]  # n x ndim, chunk index within the source
    offsets: np.ndarray[Any, Any] | None = None  # bytes
    lengths: np.ndarray[Any, Any] | None = None  # bytes
    masks: np.ndarray[Any, Any] | None = None
    inline: list[bytes] | None = None
    whole: bool = False


def _chunk_table(parts: list[_Chunks]) -> pa.Table | ChunkColumns:
    """One source's chunk references as numpy columns (``ChunkColumns``: Arrow's cost per call
    is most of the time on tables of a few rows, so a batch of sources becomes one table)."""
    if not parts:
        return CHUNK_BATCH_SCHEMA.empty_table()
    counts = [len(p.keys) for p in parts]
    n = sum(counts)
    names: list[str] = []
    keys = np.full((MAX_DIMS, n), NO_DIM, np.int32)  # one contiguous row per key column
    offsets = np.zeros(n, np.int64)
    lengths = np.zeros(n, np.int64)
    masks = np.zeros(n, np.int32)
    inline: list[bytes | None] = [None] * n
    any_inline = False
    at = 0
    for p, c in zip(parts, counts, strict=True):
        if p.keys.size and (int(p.keys.min()) < 0 or int(p.keys.max()) > np.iinfo(np.int32).max):
            raise ValueError(f"chunk index of {p.name!r} out of range ({int(p.keys.min())}..{int(p.keys.max())})")
        names += [p.name] * c
        keys[: p.keys.shape[1], at : at + c] = p.keys.T
        if p.inline is not None:
            inline[at : at + c] = p.inline
            any_inline = True
        else:
            assert p.offsets is not None and p.lengths is not None
            offsets[at : at + c] = p.offsets
            lengths[at : at + c] = p.lengths
            if p.masks is not None:
                masks[at : at + c] = p.masks
        at += c
    return ChunkColumns(names, keys, offsets, lengths, masks, inline if any_inline else None)


def _scan_dataset(ds: _Dataset | _RawDataset, attrs: dict[str, dict[str, Any]],
                  named: tuple[str, tuple[str, ...]] | None,
                  header: HeaderReader | None = None) -> tuple[ArrayMeta, _Chunks | None]:  # fmt: skip
    """``named``: the dataset's variable name and dimension names as netCDF-C gives them."""
    shape = tuple(int(s) for s in ds.shape) if ds.shape is not None else ()
    name, dims = named if named is not None else (_text(ds.name).lstrip("/"), ())
    dt = ds.dtype
    dims = dims if ds.shape is not None and len(dims) == len(shape) else _phony(shape)

    def meta(chunks: tuple[int, ...], codecs: tuple[dict[str, Any], ...] = (), reason: str | None = None) -> ArrayMeta:
        fill = None
        if reason is None or dt.kind in "biufcS":
            try:
                fill = encode_fill(ds.fillvalue, dt)
            except (TypeError, ValueError, RuntimeError):  # HDF5: "fill value is undefined"
                fill = None
        return ArrayMeta(
            name=name, dims=dims, shape=shape, chunks=chunks, dtype=dt.str, fill_value=fill,
            codecs=codecs, attrs=attrs, status="ok" if reason is None else "unsupported", reason=reason,
        )  # fmt: skip

    full = tuple(max(s, 1) for s in shape)
    if ds.shape is None:
        return meta((), reason="null dataspace holds no values"), None
    if _is_vlen_str(dt) and len(shape) <= MAX_DIMS:
        return _vlen_strings(ds, name, dims, shape, attrs)
    reason = _supported_dtype(dt)
    if reason is None and isinstance(ds, _Dataset):  # (the bytes path decodes only numpy's layouts)
        reason = _stored_type_reason(ds.id.get_type(), dt)
    if reason is None and len(shape) > MAX_DIMS:
        reason = f"{len(shape)} dimensions (at most {MAX_DIMS} are supported)"
    if reason is not None:
        return meta(full, reason=reason), None

    layout = ds.layout()
    if layout == COMPACT:
        if 0 in shape:
            return meta(full), None
        keys = np.zeros((1, len(shape)), np.int64)
        return meta(full), _Chunks(name, keys, inline=[ds.read_bytes()], whole=True)

    if layout == CONTIGUOUS:
        if ds.external_count() > 0:
            return meta(full, reason="data stored in external raw files"), None
        offset, nbytes = ds.contiguous()
        if offset is None or 0 in shape:
            return meta(full), None  # never written: everything reads as the fill value
        keys = np.zeros((1, len(shape)), np.int64)
        return meta(full, _string_pad(ds)), _Chunks(name, keys, np.array([offset], np.int64),
                                                   np.array([nbytes], np.int64), whole=True)  # fmt: skip

    if layout != CHUNKED:
        return meta(full, reason="HDF5 virtual dataset (VDS) layout"), None

    chunks = ds.chunk_shape()
    codecs, reason = filters_to_codecs(ds.filters(), dt)
    if reason is not None:
        return meta(chunks, reason=reason), None
    codecs += _string_pad(ds)  # (after the filter check: it may read the values through HDF5)
    if 0 in shape:
        return meta(chunks, codecs), None

    oversized = any(c > s for c, s in zip(chunks, shape, strict=True))
    if oversized and int(np.prod(shape)) * dt.itemsize <= _INLINE_OVERSIZED_MAX:
        # A chunk larger than the array (netCDF4's unlimited 1-D coordinates: chunk 512, shape
        # 1) cannot be placed on a regular grid when concatenated; hold its values inline.
        keys = np.zeros((1, len(shape)), np.int64)
        return meta(full), _Chunks(name, keys, inline=[ds.read_bytes()], whole=True)

    reason = _unswizzled_index_reason(ds, header)
    if reason is not None:
        return meta(chunks, reason=reason), None
    index = ds.chunk_index()
    step = np.asarray(chunks, np.int64)
    if (index.elem % step).any():
        raise ValueError(f"a chunk of {name!r} does not start on the chunk grid")
    keys = index.elem // step
    return meta(chunks, codecs), _Chunks(name, keys, index.offsets, index.lengths, index.masks)


VLEN_INLINE_MAX: Final = 8 << 20
"""Bytes (``vlen-utf8`` encoded) up to which an array of variable-length strings is held inline
in the collection; a larger one is refused by name."""


def _is_vlen_str(dt: np.dtype[Any]) -> bool:
    import h5py

    info = h5py.check_string_dtype(dt)
    return info is not None and info.length is None


def _vlen_strings(ds: _Dataset | _RawDataset, name: str, dims: tuple[str, ...], shape: tuple[int, ...],
                  attrs: dict[str, dict[str, Any]]) -> tuple[ArrayMeta, _Chunks | None]:  # fmt: skip
    """An array of variable-length strings, held inline: its values (read by HDF5, decoded as
    UTF-8 as netCDF-C/netCDF4-python decode them, a byte that is not UTF-8 replaced) as one
    ``vlen-utf8`` chunk (numcodecs' and zarr v2's encoding); refused above ``VLEN_INLINE_MAX``."""
    import h5py
    from numcodecs import VLenUTF8

    full = tuple(max(n, 1) for n in shape)

    def meta(reason: str | None = None) -> ArrayMeta:
        return ArrayMeta(name=name, dims=dims, shape=shape, chunks=full, dtype="|O", fill_value=None,
                         codecs=({"id": "vlen-utf8"},), attrs=attrs,
                         status="ok" if reason is None else "unsupported", reason=reason)  # fmt: skip

    if 0 in shape:
        return meta(), None
    stored = int(ds.id.get_storage_size()) if isinstance(ds, _Dataset) else 0
    if stored > VLEN_INLINE_MAX:
        return meta(f"variable-length strings of {stored} stored bytes (held inline up to {VLEN_INLINE_MAX})"), None
    try:
        raw = np.asarray(h5py.Dataset(ds.id, readonly=True)[()], dtype=object).reshape(shape)
    except (OSError, RuntimeError, ValueError) as e:
        return meta(f"variable-length strings HDF5 cannot read: {_first_line(e)}"), None
    text = np.empty(raw.shape, dtype=object)
    for i, v in enumerate(raw.flat):
        text.flat[i] = v.decode("utf-8", "replace") if isinstance(v, bytes) else ("" if v is None else str(v))
    blob = bytes(VLenUTF8().encode(text))
    if len(blob) > VLEN_INLINE_MAX:
        return meta(f"variable-length strings of {len(blob)} bytes (held inline up to {VLEN_INLINE_MAX})"), None
    keys = np.zeros((1, len(shape)), np.int64)
    return meta(), _Chunks(name, keys, inline=[blob], whole=True)


def _split_along(meta: ArrayMeta, chunks: _Chunks, dim: str) -> tuple[ArrayMeta, _Chunks]:
    """An uncompressed single-chunk array (contiguous or inline) along the concat dimension is
    split into slabs of 1 along it, so sources of any extent place on one chunk grid."""
    if dim not in meta.dims or meta.codecs or len(chunks.keys) != 1 or meta.chunks != meta.shape:
        return meta, chunks
    axis = meta.dims.index(dim)
    n = meta.shape[axis]
    if n <= 1 or int(np.prod(meta.shape[:axis], dtype=np.int64)) != 1:
        return meta, chunks  # one slab already, or slabs would not be contiguous bytes
    row_bytes = int(np.prod(meta.shape, dtype=np.int64)) // n * meta.np_dtype.itemsize
    keys = np.zeros((n, meta.ndim), np.int64)
    keys[:, axis] = np.arange(n)
    new_chunks = tuple(1 if i == axis else c for i, c in enumerate(meta.chunks))
    meta = ArrayMeta(meta.name, meta.dims, meta.shape, new_chunks, meta.dtype, meta.fill_value, meta.codecs,
                     meta.attrs, meta.status, meta.reason)  # fmt: skip
    if chunks.inline is not None:
        raw = chunks.inline[0]
        return meta, _Chunks(meta.name, keys, inline=[raw[i * row_bytes : (i + 1) * row_bytes] for i in range(n)])
    assert chunks.offsets is not None
    offsets = int(chunks.offsets[0]) + np.arange(n, dtype=np.int64) * row_bytes
    return meta, _Chunks(meta.name, keys, offsets, np.full(n, row_bytes, np.int64))


def _coordinate_range(
    f: Any, scanned: tuple[ArrayMeta, _Chunks | None] | None
) -> tuple[float | None, float | None, str | None]:
    """First and last values of the scanned coordinate variable (the dataset named like the
    concat dimension; CF times as Unix seconds) and their units; all None when the file has no
    such 1-D numeric dataset (a netCDF dimension without a variable is never scanned). Inline
    bytes are used when there are some, so nothing is read twice."""
    if scanned is None:
        return None, None, None
    meta, chunks = scanned
    if meta.ndim != 1 or meta.shape[0] == 0 or np.dtype(meta.dtype).kind not in "iuf":
        return None, None, None
    units = meta.attrs.get("units", {}).get("value")
    calendar = meta.attrs.get("calendar", {}).get("value", "standard")
    n = meta.shape[0]
    if chunks is not None and chunks.inline is not None and len(chunks.inline[0]) >= n * meta.np_dtype.itemsize:
        inline = np.frombuffer(chunks.inline[0], dtype=meta.dtype, count=n)
        first, last = float(inline[0]), float(inline[-1])
    else:
        obj = f[meta.name]
        first, last = float(obj[0]), float(obj[-1])
    if isinstance(units, str):
        s0, s1 = cf_seconds(first, units, str(calendar)), cf_seconds(last, units, str(calendar))
        if s0 is not None and s1 is not None:
            return s0, s1, "seconds since 1970-01-01"
        return first, last, units
    return first, last, None

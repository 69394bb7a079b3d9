"""A dataset's storage read from its object header bytes, and its chunk index walked from the
file's bytes (scan speed: no HDF5 call per dataset).

``decode_dataset`` turns the messages of a dataset's object header (``HeaderReader.messages``)
into what the scanner records: dataspace, datatype, fill value, filter pipeline and layout.
Only the forms this module knows exactly are decoded; anything else is None, and the scanner
asks HDF5 as before:

- dataspace versions 1-2, simple or scalar (a null dataspace: None);
- datatypes of class fixed-point or floating-point (versions 1-3) whose bits are the plain
  numpy layout: integers of 1, 2, 4 or 8 bytes without padding or offset, IEEE 754 binary16/
  32/64 floats (the layouts numpy's ``f2``/``f4``/``f8`` are); strings and every other class:
  None (their dtypes carry h5py metadata, their padding needs HDF5's conversion);
- the fill value message of versions 1-3 (0x0005) holding no value (zeros, HDF5's default) or
  exactly one element; an undefined fill value, the old fill value message alone, or a value of
  another size: None;
- filter pipeline versions 1-2 (ids, flags, names, client values, as ``H5Pget_filter`` gives
  them: a name the file does not hold is the one HDF5 registers for its own filters; for any
  other filter, None);
- data layout version 3: compact (the bytes), contiguous (address, size) and chunked (the
  v1 B-tree's address, chunk shape); layout versions 1, 2 and 4 (HDF5 1.10's chunk indexes),
  virtual layouts, external files: None;
- any of these messages stored shared (an address or heap ID in the header): None.

``chunk_index`` walks a version 1 B-tree of raw-data chunks (node type 1: what netCDF-C and
h5py write unless ``libver`` asks for 1.10's indexes) from left to right, as HDF5's
``H5Dchunk_iter`` does: (chunk offsets in elements, file addresses, stored sizes, filter
masks) as numpy columns, or None when a node is not what it must be (signature, type, level,
key size), so the caller asks HDF5. Pure parsing over a ``read(address, size)`` function.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ChunkIndex", "DatasetLayout", "Filter", "chunk_index", "decode_dataset"]

UNDEFINED = (1 << 64) - 1  # an undefined address
COMPACT, CONTIGUOUS, CHUNKED = 0, 1, 2  # H5D_COMPACT, H5D_CONTIGUOUS, H5D_CHUNKED (h5py.h5d)

_DATASPACE, _DATATYPE, _FILL, _EXTERNAL, _LAYOUT, _PIPELINE = 0x01, 0x03, 0x05, 0x07, 0x08, 0x0B
_SHARED = 0x02  # message flag: the body is a reference to a shared message
_MAX_NODES = 1 << 20  # B-tree nodes followed per dataset (a damaged file may loop)
# HDF5's own filters, by the names their classes register (H5Z_class2_t.name)
_FILTER_NAMES = {1: b"deflate", 2: b"shuffle", 3: b"fletcher32", 4: b"szip", 5: b"nbit", 6: b"scaleoffset"}
# IEEE 754 layouts as HDF5 describes them: size -> (precision, exponent location, exponent
# size, mantissa location, mantissa size, exponent bias, sign location)
_IEEE = {
    2: (16, 10, 5, 0, 10, 15, 15),
    4: (32, 23, 8, 0, 23, 127, 31),
    8: (64, 52, 11, 0, 52, 1023, 63),
}


@dataclass(frozen=True, slots=True)
class Filter:
    """One filter of a pipeline, as ``H5Pget_filter`` gives it."""

    code: int
    flags: int
    values: tuple[int, ...]  # client data, unsigned 32-bit
    name: bytes


@dataclass(frozen=True, slots=True)
class DatasetLayout:
    """What a dataset's object header says about its storage (``decode_dataset``).

    ``fill``: the fill value's bytes in the dataset's type (one element; zeros when the file
    holds no value). ``address``: contiguous data or the chunk B-tree (None: never written).
    ``size``: contiguous data in bytes. ``chunks``: chunk shape in elements (chunked only).
    ``compact``: the data of a compact dataset."""

    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fill: bytes
    filters: tuple[Filter, ...]
    layout: int
    address: int | None = None
    size: int = 0
    chunks: tuple[int, ...] = ()
    compact: bytes = b""
    unlimited: tuple[bool, ...] = ()  # per dimension, whether its maximum size is unlimited


@dataclass(frozen=True, slots=True)
class ChunkIndex:
    """Written chunks of a dataset in B-tree order: ``elem`` (n x ndim chunk offsets in
    elements), ``offsets`` (file addresses), ``lengths`` (stored bytes), ``masks`` (filters
    skipped)."""

    elem: np.ndarray[Any, Any]
    offsets: np.ndarray[Any, Any]
    lengths: np.ndarray[Any, Any]
    masks: np.ndarray[Any, Any]


def decode_dataset(messages: list[tuple[int, int, bytes, bytes]]) -> DatasetLayout | None:
    """The storage of a dataset from its header's (type, flags, raw, body) messages, or None
    when a message it needs is missing, shared, or in a form not decoded here (module doc)."""
    found: dict[int, bytes] = {}
    for kind, flags, _raw, body in messages:
        if kind in (_DATASPACE, _DATATYPE, _FILL, _LAYOUT, _PIPELINE):
            if flags & _SHARED or kind in found:
                return None
            found[kind] = body
        elif kind == _EXTERNAL:
            return None
    try:
        space, dtype_body, fill_body, layout = (found.get(k) for k in (_DATASPACE, _DATATYPE, _FILL, _LAYOUT))
        if space is None or dtype_body is None or fill_body is None or layout is None:
            return None
        shape = _shape(space)
        dtype = _dtype(dtype_body)
        if shape is None or dtype is None:
            return None
        fill = _fill(fill_body, dtype.itemsize)
        pipeline = found.get(_PIPELINE)
        filters = _filters(pipeline) if pipeline is not None else ()
        if fill is None or filters is None:
            return None
        out = _layout(layout, shape, dtype, fill, filters)
        return None if out is None else replace(out, unlimited=_unlimited(space))
    except (struct.error, IndexError, ValueError):
        return None


def _unlimited(body: bytes) -> tuple[bool, ...]:
    """Per dimension, whether the dataspace's maximum size is unlimited (flag bit 0: maximum
    sizes follow the current ones; all False without them)."""
    version, rank, flags = body[0], body[1], body[2]
    if not flags & 0x01 or rank == 0:
        return (False,) * rank
    at = (8 if version == 1 else 4) + 8 * rank
    return tuple(m == UNDEFINED for m in struct.unpack_from(f"<{rank}Q", body, at))


def _shape(body: bytes) -> tuple[int, ...] | None:
    """Dimensions of a simple or scalar dataspace (versions 1-2); None for a null one."""
    version, rank = body[0], body[1]
    if version == 1:
        return tuple(struct.unpack_from(f"<{rank}Q", body, 8))
    if version == 2:
        if body[3] == 0 and rank == 0:
            return ()
        if body[3] == 1:
            return tuple(struct.unpack_from(f"<{rank}Q", body, 4))
    return None


def _dtype(body: bytes) -> np.dtype[Any] | None:
    """The numpy dtype h5py gives a fixed-point or IEEE floating-point datatype whose bits are
    numpy's layout; None for anything else."""
    cls, version = body[0] & 0x0F, body[0] >> 4
    bits = body[1] | body[2] << 8 | body[3] << 16
    (size,) = struct.unpack_from("<I", body, 4)
    if version not in (1, 2, 3):
        return None
    order = ">" if bits & 0x01 else "<"
    if cls == 0:  # fixed-point: byte order, padding (2 bits), signed
        offset, precision = struct.unpack_from("<HH", body, 8)
        if size not in (1, 2, 4, 8) or bits & ~0x09 or offset != 0 or precision != 8 * size:
            return None
        return np.dtype(f"{order}{'i' if bits & 0x08 else 'u'}{size}")
    if cls == 1:  # floating-point: byte order (bits 0, 6), padding (1-3), normalization (4-5), sign (8-15)
        layout = _IEEE.get(size)
        if layout is None or bits & 0xFF004E or (bits >> 4) & 0x03 != 2 or (bits >> 8) & 0xFF != layout[6]:
            return None
        offset, precision, e_at, e_size, m_at, m_size, bias = struct.unpack_from("<HHBBBBI", body, 8)
        if offset != 0 or (precision, e_at, e_size, m_at, m_size, bias) != layout[:6]:
            return None
        return np.dtype(f"{order}f{size}")
    return None


def _fill(body: bytes, itemsize: int) -> bytes | None:
    """One element's fill value bytes from a fill value message (versions 1-3): zeros when
    the message holds no value (HDF5's default); None when the value is undefined or not one
    element (``H5Pget_fill_value`` would fail, or convert)."""
    version = body[0]
    if version in (1, 2):
        defined = body[3]
        if not defined:
            return None  # undefined (HDF5 reads no size, no value: H5Pget_fill_value fails)
        (size,) = struct.unpack_from("<i", body, 4)
        value = body[8 : 8 + size] if size > 0 else b""
    elif version == 3:
        flags = body[1]
        if flags & 0xC0 or flags & 0x10:  # unknown bits, or an undefined value
            return None
        if not flags & 0x20:
            return bytes(itemsize)  # default: zeros
        (size,) = struct.unpack_from("<i", body, 2)
        value = body[6 : 6 + size] if size > 0 else b""
    else:
        return None
    if size == 0:
        return bytes(itemsize)
    if size != itemsize or len(value) != itemsize:
        return None
    return bytes(value)


def _filters(body: bytes) -> tuple[Filter, ...] | None:
    """The filters of a filter pipeline message (versions 1-2), in pipeline order."""
    version, n = body[0], body[1]
    if version == 1:
        at = 8
    elif version == 2:
        at = 2
    else:
        return None
    out: list[Filter] = []
    for _ in range(n):
        (code,) = struct.unpack_from("<H", body, at)
        at += 2
        name_len = 0
        if version == 1 or code >= 256:
            (name_len,) = struct.unpack_from("<H", body, at)
            at += 2
        flags, nvalues = struct.unpack_from("<HH", body, at)
        at += 4
        name = body[at : at + name_len]
        if len(name) != name_len:
            return None
        at += (name_len + 7) & ~7 if version == 1 else name_len
        values = struct.unpack_from(f"<{nvalues}I", body, at)
        at += 4 * nvalues
        if version == 1 and nvalues % 2:
            at += 4
        label = name.split(b"\x00", 1)[0]
        if not label:  # H5Pget_filter names it by the filter class HDF5 has registered for the id
            label = _FILTER_NAMES.get(code, b"")
            if not label:
                return None  # a plugin's name, if one is loaded: only HDF5 can tell
        out.append(Filter(code, flags, tuple(values), label))
    return tuple(out)


def _layout(body: bytes, shape: tuple[int, ...], dtype: np.dtype[Any], fill: bytes,
            filters: tuple[Filter, ...]) -> DatasetLayout | None:  # fmt: skip
    """A data layout message of version 3: compact, contiguous or chunked (v1 B-tree)."""
    if body[0] != 3:
        return None
    cls = body[1]
    if cls == COMPACT:
        (size,) = struct.unpack_from("<H", body, 2)
        data = body[4 : 4 + size]
        if len(data) != size:
            return None
        return DatasetLayout(shape, dtype, fill, filters, COMPACT, compact=bytes(data))
    if cls == CONTIGUOUS:
        address, size = struct.unpack_from("<QQ", body, 2)
        return DatasetLayout(shape, dtype, fill, filters, CONTIGUOUS, None if address == UNDEFINED else address, size)
    if cls == CHUNKED:
        ndim = body[2] - 1
        (address,) = struct.unpack_from("<Q", body, 3)
        dims = struct.unpack_from(f"<{ndim + 1}I", body, 11)
        if ndim != len(shape) or dims[-1] != dtype.itemsize or 0 in dims:
            return None
        return DatasetLayout(shape, dtype, fill, filters, CHUNKED, None if address == UNDEFINED else address,
                             chunks=tuple(dims[:-1]))  # fmt: skip
    return None


def chunk_index(read: Callable[[int, int], bytes], root: int, ndim: int, limit: int) -> ChunkIndex | None:
    """Every chunk of the version 1 B-tree (node type 1) at ``root`` of a dataset of ``ndim``
    dimensions, left to right (``H5Dchunk_iter``'s order); None when a node is not a chunk
    B-tree node of the expected level, the tree does not hold together, or it holds more than
    ``limit`` chunks (the chunks the array's grid has: a damaged or hostile tree)."""
    key = 8 + 8 * (ndim + 1)  # chunk size, filter mask, one offset per dimension + the element's
    entry = key + 8
    elem: list[tuple[int, ...]] = []
    addrs: list[int] = []
    sizes: list[int] = []
    masks: list[int] = []
    key_fmt = struct.Struct(f"<II{ndim + 1}Q")
    nodes = 0
    stack: list[tuple[int, int | None]] = [(root, None)]  # (node address, level it must have)
    try:
        while stack:
            at, want = stack.pop()
            nodes += 1
            if nodes > _MAX_NODES:
                return None
            head = read(at, 24)
            if head[:4] != b"TREE" or head[4] != 1:
                return None
            level, used = head[5], struct.unpack_from("<H", head, 6)[0]
            if (want is not None and level != want) or used == 0:
                return None
            body = read(at + 24, used * entry + key)
            if len(body) != used * entry + key:
                return None
            if level == 0:
                if len(addrs) + used > limit:
                    return None
                for i in range(used):
                    size, mask, *offs = key_fmt.unpack_from(body, i * entry)
                    if offs[-1] != 0:
                        return None
                    elem.append(tuple(offs[:-1]))
                    sizes.append(size)
                    masks.append(mask)
                    addrs.append(struct.unpack_from("<Q", body, i * entry + key)[0])
            else:  # children pushed right to left, so the leftmost is walked first
                children = [struct.unpack_from("<Q", body, i * entry + key)[0] for i in range(used)]
                stack.extend((c, level - 1) for c in reversed(children))
    except (struct.error, IndexError, ValueError, OSError):
        return None
    n = len(addrs)
    if n and max(masks) > 0x7FFFFFFF:
        return None  # not a mask of the filters there are
    return ChunkIndex(
        np.array(elem, np.int64).reshape(n, ndim),
        np.array(addrs, np.int64),
        np.array(sizes, np.int64),
        np.array(masks, np.int32),  # HDF5's unsigned mask as h5py's chunk_iter gives it to an int32 column
    )

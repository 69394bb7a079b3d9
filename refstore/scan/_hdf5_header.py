"""A cheap proof that an HDF5 object's attributes equal ones already read (scan speed).

Reading attributes through HDF5 costs ~40 us each (open, dataspace, type, read); the files of a
series mostly repeat them. The attribute messages of an object header hold everything h5py's
reading of an attribute depends on: name, datatype, dataspace and, for fixed-size types, the
value itself. So the raw bytes of an object's visible attribute messages (object header format
version 1 or 2, read with ``os.pread``, or a remote file's ranged reads) are a key to the
attributes decoded from them once (``AttrCache``). Attributes in dense storage are the attribute
messages kept in the object's fractal heap, read from there in its simple forms
(``_hdf5_dense``: per file, since those bytes are outside the header). No key, and the
attributes are read through HDF5 as before, whenever the bytes would not prove the values: dense
storage in any other form, shared attribute messages, an attribute whose datatype or dataspace
is a shared message (a committed datatype, or one kept in the shared-message heap: its bytes are
only an address or heap ID, which another file may reuse for another type or shape), visible
attributes of variable-length, reference or any type other than integers, floats and
fixed-length strings (their bytes point elsewhere), a user block, or any layout this reader does
not parse. The few bookkeeping attributes read from the bytes (``CLASS``, ``NAME``,
``DIMENSION_LIST``) are read only in the exact forms HDF5's dimension-scale API and netCDF-4
write; any other form is left to HDF5. An object header is parsed once per content: a header
whose first block (and continuation blocks) are byte for byte one parsed before, in this file or
another of the series, is that parse (``_HEADERS``), with what was derived from it (its compact
attributes, its dataset's storage: ``_hdf5_layout``). Pure parsing over bytes, apart from the
reads.
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

from ._hdf5_dense import dense_attributes

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["AttrCache", "Header", "HeaderReader"]

_PAGE = 1 << 16
_ATTR = 0x000C
_ATTR_INFO = 0x0015
_UNDEFINED = (1 << 64) - 1  # an undefined address
_CONTINUATION = 0x0010
_SHARED = 0x02  # message flag: the message body is a reference to a shared message
_SHARED_PARTS = 0x03  # attribute message flags (versions 2-3): its datatype / dataspace is shared
_SCALE_CLASS = b"DIMENSION_SCALE\x00"  # H5DSset_scale's CLASS value: NUL-terminated, 16 bytes
_PLAIN_CLASSES = frozenset({0, 1, 3})  # fixed-point, floating-point, fixed-length string
_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_MAX_BLOCK = 1 << 20  # bytes: a larger header block (or a damaged length) proves nothing
_MAX_BLOCKS = 64  # header blocks followed per object (a damaged file may loop)


class _Attr(NamedTuple):
    """One attribute message of an object header."""

    flags: int  # the message's flags in the object header
    raw: bytes  # the message with its header (the cache key's part)
    shared_parts: bool  # its datatype or dataspace is a shared message (bytes elsewhere)
    dtype: bytes  # datatype message
    space: bytes  # dataspace message
    data: bytes  # the value's bytes


class HeaderReader:
    """Raw object-header bytes of one HDF5 file (pages of 64 KiB read once each). ``source``:
    a local file's path (read with ``os.pread``), or a function giving ``n`` bytes at offset
    ``at`` (a remote file's ranged reads, ``RangeFile.pread``: short at the end of the file)."""

    def __init__(self, source: str | Callable[[int, int], bytes]) -> None:
        self._fd: int | None = None
        if callable(source):
            self._pread = source
        else:
            fd = self._fd = os.open(source, os.O_RDONLY)
            self._pread = lambda at, n: os.pread(fd, n, at)
        self._pages: dict[int, bytes] = {}
        self._heaps: dict[int, dict[int, bytes]] = {}
        self._headers: dict[int, Header | None] = {}
        self._dense_at: dict[int, dict[str, _Attr] | None] = {}  # attributes in dense storage, by object
        self.offsets = self.lengths = 0
        try:
            head = self.read(0, 48)
        except OSError:
            self.close()
            raise
        if head[:8] == _SIGNATURE and len(head) == 48:  # superblock at 0: no user block
            version = head[8]
            if version in (0, 1):
                at = 28 if version == 1 else 24  # version 1 has 4 more bytes before the base address
                sizes, base = (head[13], head[14]), head[at : at + 8]
            elif version in (2, 3):
                sizes, base = (head[9], head[10]), head[12:20]
            else:
                sizes, base = (0, 0), b""
            if base == bytes(8):  # base address 0: object addresses are file offsets
                self.offsets, self.lengths = sizes

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> HeaderReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, at: int, n: int) -> bytes:
        first, last = at // _PAGE, (at + n - 1) // _PAGE
        if first != last or n > _PAGE:
            return self._pread(at, n)
        page = self._pages.get(first)
        if page is None:
            page = self._pages[first] = self._pread(first * _PAGE, _PAGE)
        lo = at - first * _PAGE
        return page[lo : lo + n]

    def _attributes(self, addr: int, num_attrs: int) -> dict[str, _Attr] | None:
        """Name -> attribute message of every attribute of the object header at ``addr``
        (derived once per header; attributes in dense storage once per object of this file,
        ``_hdf5_dense``), or None unless all ``num_attrs`` attributes (HDF5's count) were
        found, unshared, in a form this reader parses (a shared attribute message holds only
        a heap ID: not even its name)."""
        h = self.header(addr)
        if h is None:
            return None
        if h.attrs is False:
            got: dict[str, _Attr] | bytes | None = None
            try:
                messages = h.messages
                found = [(flags, raw, body) for kind, flags, raw, body in messages if kind == _ATTR]
                infos = [body for kind, _flags, _raw, body in messages if kind == _ATTR_INFO]
                if any(_dense_heap(body) for body in infos):
                    # HDF5 reads the fractal heap and ignores any attribute message in the header
                    got = infos[0] if len(infos) == 1 and not found else None
                elif not any(flags & _SHARED for flags, _raw, _body in found):
                    got = {}
                    for flags, raw, body in found:
                        name, attr_flags, dtype, space, data = _attribute_parts(body)
                        got[name] = _Attr(flags, raw, bool(attr_flags & _SHARED_PARTS), dtype, space, data)
            except (struct.error, IndexError, ValueError):
                got = None
            h.attrs = got
        attrs = h.attrs
        if isinstance(attrs, bytes):  # dense storage: outside the header, so read per file
            attrs = self._dense_at[addr] if addr in self._dense_at else self._dense(addr, attrs)
        assert attrs is not True
        return attrs if attrs is not None and len(attrs) == num_attrs else None

    def _dense(self, addr: int, info: bytes) -> dict[str, _Attr] | None:
        got: dict[str, _Attr] | None = None
        found = dense_attributes(self.read, info)
        key = b"".join(raw for raw, _body in found) if found is not None else b""
        if found is not None and key in _DENSE:  # the same messages, in the same order: the same parse
            got = _DENSE[key]
        elif found is not None:
            try:
                got = {}
                for raw, body in found:
                    name, attr_flags, dtype, space, data = _attribute_parts(body)
                    if name in got:
                        got = None
                        break
                    got[name] = _Attr(0, raw, bool(attr_flags & _SHARED_PARTS), dtype, space, data)
            except (struct.error, IndexError, ValueError):
                got = None
            if len(_DENSE) >= _HEADERS_MAX:
                _DENSE.clear()
            _DENSE[key] = got
        self._dense_at[addr] = got
        return got

    def attribute_key(self, addr: int, num_attrs: int, hidden: frozenset[str]) -> bytes | None:
        """The visible attribute messages of the object header at ``addr``, as bytes (each
        message with its header, in header order), or None when they prove nothing (module
        doc). ``num_attrs``: HDF5's count of the object's attributes."""
        attrs = self._attributes(addr, num_attrs)
        if attrs is None:
            return None
        parts: list[bytes] = []
        for name, attr in attrs.items():
            if name in hidden:
                continue
            if attr.shared_parts or attr.dtype[0] & 0x0F not in _PLAIN_CLASSES:
                return None
            parts.append(attr.raw)
        return b"".join(parts)

    def is_scale(self, addr: int, num_attrs: int) -> bool | None:
        """``H5DSis_scale`` from the header bytes: False without a ``CLASS`` attribute, True
        for the ``CLASS`` that ``H5DSset_scale`` writes (a scalar NUL-terminated ASCII string
        of 16 bytes reading ``DIMENSION_SCALE``); None (only HDF5 can tell) for any other
        ``CLASS``: HDF5's versions compare other forms differently (padding, size, prefixes)."""
        attrs = self._attributes(addr, num_attrs)
        if attrs is None:
            return None
        attr = attrs.get("CLASS")
        if attr is None:
            return False
        try:
            if (not attr.shared_parts and _space_dims(attr.space) == () and attr.dtype[0] & 0x0F == 3
                    and attr.dtype[1:4] == bytes(3) and struct.unpack_from("<I", attr.dtype, 4)[0] == 16
                    and attr.data[:16] == _SCALE_CLASS):  # fmt: skip
                return True
        except (struct.error, IndexError, ValueError):
            pass
        return None

    def name_starts(self, addr: int, num_attrs: int, prefix: bytes) -> bool | None:
        """Whether a scalar fixed-length string ``NAME`` attribute starts with ``prefix`` (no NUL
        or trailing space in it) as h5py reads it (its conversion to NUL padding only changes
        bytes after the first NUL or trailing spaces); False without a ``NAME``; None when only
        HDF5 can tell (another type or shape, shared parts)."""
        attrs = self._attributes(addr, num_attrs)
        if attrs is None:
            return None
        attr = attrs.get("NAME")
        if attr is None:
            return False
        try:
            if attr.shared_parts or attr.dtype[0] & 0x0F != 3 or _space_dims(attr.space) != ():
                return None
            size = struct.unpack_from("<I", attr.dtype, 4)[0]
        except (struct.error, IndexError, ValueError):
            return None
        return attr.data[:size].startswith(prefix) if len(attr.data) >= size else None

    def first_scales(self, addr: int, num_attrs: int, ndim: int, *, last: bool = False) -> list[int | None] | None:
        """Per dimension, the object address of the first dimension scale attached (``last``:
        the last one, which netCDF-C keeps) (None: no scale), read from the ``DIMENSION_LIST``
        attribute (a variable-length list of object references per dimension, kept in the
        global heap) as ``H5DSiterate_scales`` reads it; None when only HDF5 can tell (any
        other form of ``DIMENSION_LIST``)."""
        attrs = self._attributes(addr, num_attrs)
        if attrs is None:
            return None
        attr = attrs.get("DIMENSION_LIST")
        if attr is None:
            return [None] * ndim
        try:
            dtype, data = attr.dtype, attr.data
            if (attr.shared_parts or not _is_object_ref_list(dtype) or _space_dims(attr.space) != (ndim,)
                    or len(data) < 16 * ndim):  # fmt: skip
                return None
            out: list[int | None] = []
            for i in range(ndim):
                count, heap, index = struct.unpack_from("<IQI", data, 16 * i)
                if count == 0:
                    out.append(None)
                    continue
                obj = self._heap_object(heap, index)
                if obj is None or len(obj) < 8 * count:
                    return None
                out.append(struct.unpack_from("<Q", obj, 8 * (count - 1) if last else 0)[0])
        except (struct.error, IndexError, ValueError, OSError):
            return None
        return out

    def _heap_object(self, addr: int, index: int) -> bytes | None:
        """Object ``index`` of the global heap collection at ``addr``."""
        heap = self._heaps.get(addr)
        if heap is None:
            head = self.read(addr, 16)
            if head[:4] != b"GCOL" or head[4] != 1:
                return None
            size = struct.unpack_from("<Q", head, 8)[0]
            if not 16 < size <= _MAX_BLOCK:
                return None
            blob = self.read(addr, size)
            heap = {}
            at = 16
            while at + 16 <= len(blob):
                idx, _rc, n = struct.unpack_from("<HH4xQ", blob, at)
                if idx == 0:  # free space: the end of the objects
                    break
                heap[idx] = blob[at + 16 : at + 16 + n]
                at += 16 + ((n + 7) & ~7)
            self._heaps[addr] = heap
        return heap.get(index)

    # ------------------------------------------------------------------ object headers
    def messages(self, addr: int) -> list[tuple[int, int, bytes, bytes]] | None:
        """(type, flags, raw message with its header, body) of every message of the object
        header at ``addr``, or None when this reader does not parse it (file addresses not 8
        bytes, a base address, a header version or block it does not know)."""
        h = self.header(addr)
        return None if h is None else h.messages

    def tracked(self, addr: int) -> bool | None:
        """Whether the object's attribute creation order is tracked (``H5Pget_attr_creation_order``
        reads it from the header's flags: version 2 headers only), or None when the header was
        not parsed."""
        h = self.header(addr)
        return None if h is None else h.tracked

    def header(self, addr: int) -> Header | None:
        """The parsed object header at ``addr`` (once per object; a header whose blocks are
        byte for byte one parsed before, in any file, is that parse: ``_HEADERS``)."""
        if addr in self._headers:
            return self._headers[addr]
        got: Header | None = None
        if self.offsets == 8 and self.lengths == 8:
            try:
                head = self.read(addr, 4)
                if head == b"OHDR":
                    got = self._v2(addr)
                elif head[:1] == b"\x01":
                    got = self._v1(addr)
            except (struct.error, IndexError, ValueError, OSError):
                got = None
        self._headers[addr] = got
        return got

    def _known(self, key: bytes) -> Header | None:
        """A header parsed before from a first block equal to ``key``, when its continuation
        blocks (found at the same addresses, as the equal first block says) are equal too."""
        h = _HEADERS.get(key)
        if h is None:
            return None
        for at, n, data in h.continuations:
            if self.read(at, n) != data:
                return None
        return h

    def _v1(self, addr: int) -> Header | None:
        prefix = self.read(addr, 16)
        nmesgs, size = struct.unpack_from("<H", prefix, 2)[0], struct.unpack_from("<I", prefix, 8)[0]
        if not 0 < size <= _MAX_BLOCK:
            return None
        first = self.read(addr + 16, size)
        key = b"1" + prefix[:4] + prefix[8:] + first  # (the link count apart: bytes 4-7 are it)
        known = self._known(key)
        if known is not None:
            return known
        blocks = [(addr + 16, size)]
        out: list[tuple[int, int, bytes, bytes]] = []
        continuations: list[tuple[int, int, bytes]] = []
        seen = 0
        while blocks:
            start, length = blocks.pop(0)
            seen += 1
            if seen > _MAX_BLOCKS or not 0 < length <= _MAX_BLOCK:
                return None
            data = first if seen == 1 else self.read(start, length)
            if seen > 1:
                continuations.append((start, length, data))
            pos = 0
            while pos + 8 <= len(data):
                kind, msize, flags = struct.unpack_from("<HHB", data, pos)
                body = data[pos + 8 : pos + 8 + msize]
                if len(body) != msize:
                    return None
                if kind == _CONTINUATION:
                    off, ln = struct.unpack_from("<QQ", body)
                    blocks.append((off, ln))
                out.append((kind, flags, data[pos : pos + 8 + msize], body))
                pos += 8 + msize
        if len(out) != nmesgs:
            return None
        return _remember(key, Header(out, False, tuple(continuations)))

    def _v2(self, addr: int) -> Header | None:
        prefix = self.read(addr, 64)
        if prefix[4] != 2:
            return None
        flags = prefix[5]
        pos = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 0x03)
        size = int.from_bytes(prefix[pos : pos + width], "little")
        pos += width
        if not 8 < size <= _MAX_BLOCK:
            return None
        first = self.read(addr + pos, size)
        key = b"2" + prefix[:pos] + first
        known = self._known(key)
        if known is not None:
            return known
        crt = 2 if flags & 0x04 else 0
        out: list[tuple[int, int, bytes, bytes]] = []
        continuations: list[tuple[int, int, bytes]] = []
        blocks = [(addr + pos, size)]
        seen = 0
        while blocks:
            start, length = blocks.pop(0)
            seen += 1
            if seen > _MAX_BLOCKS or not 8 < length <= _MAX_BLOCK:
                return None
            if seen == 1:
                data = first
            else:  # a continuation block: "OCHK", messages, checksum
                whole = self.read(start, length)
                if whole[:4] != b"OCHK":
                    return None
                continuations.append((start, length, whole))
                data = whole[4 : length - 4]
            at = 0
            head = 4 + crt
            while at + head <= len(data):
                kind, msize, mflags = data[at], struct.unpack_from("<H", data, at + 1)[0], data[at + 3]
                body = data[at + head : at + head + msize]
                if len(body) != msize:
                    break  # the gap at the end of a chunk
                if kind == _CONTINUATION:
                    off, ln = struct.unpack_from("<QQ", body)
                    blocks.append((off, ln))
                out.append((kind, mflags, data[at : at + head + msize], body))
                at += head + msize
        return _remember(key, Header(out, bool(flags & 0x04), tuple(continuations)))


class Header:
    """One parsed object header: its messages (type, flags, raw message with its header,
    body), whether attribute creation order is tracked (version 2 flags), the continuation
    blocks it was read from (address, length, bytes: what proves another file's header with
    the same first block is the same), and what was derived from the messages (attributes,
    the dataset's storage), each derived once."""

    __slots__ = ("attrs", "continuations", "dataset", "messages", "tracked")

    def __init__(self, messages: list[tuple[int, int, bytes, bytes]], tracked: bool,
                 continuations: tuple[tuple[int, int, bytes], ...]) -> None:  # fmt: skip
        self.messages = messages
        self.tracked = tracked
        self.continuations = continuations
        # False: not derived yet; bytes: the attribute info message of dense storage (read per file)
        self.attrs: dict[str, _Attr] | bytes | bool | None = False
        self.dataset: Any = False  # False: not derived yet (``_hdf5_layout.decode_dataset``'s answer)


_HEADERS: dict[bytes, Header] = {}
_DENSE: dict[bytes, dict[str, _Attr] | None] = {}  # dense attributes by their records and messages
_HEADERS_MAX = 4096


def _remember(key: bytes, h: Header) -> Header:
    """Keep a parsed header under the bytes of its first block (cleared when full)."""
    if len(_HEADERS) >= _HEADERS_MAX:
        _HEADERS.clear()
    _HEADERS[key] = h
    return h


def _attribute_parts(body: bytes) -> tuple[str, int, bytes, bytes, bytes]:
    """(name, flags, datatype, dataspace, data) of an attribute message (versions 1-3; flags
    bits 0-1: the datatype / dataspace is a shared message, 0 in version 1)."""
    version = body[0]
    if version not in (1, 2, 3):
        raise ValueError(f"attribute message version {version}")
    flags = body[1] if version >= 2 else 0
    name_size, dtype_size, space_size = struct.unpack_from("<HHH", body, 2)
    at = 9 if version == 3 else 8
    align = 7 if version == 1 else 0  # version 1 pads each part to 8 bytes
    name = body[at : at + name_size].rstrip(b"\x00").decode("utf-8", "replace")
    at += (name_size + align) & ~align
    dtype = body[at : at + dtype_size]
    at += (dtype_size + align) & ~align
    space = body[at : at + space_size]
    at += (space_size + align) & ~align
    if len(dtype) != dtype_size or len(space) != space_size or dtype_size < 8 or space_size < 4:
        raise ValueError("truncated attribute message")
    return name, flags, dtype, space, body[at:]


def _dense_heap(body: bytes) -> bool:
    """Whether an attribute info message names a fractal heap: then HDF5 reads the attributes
    from it (dense storage) and ignores any attribute message in the header."""
    at = 2 + (2 if body[1] & 0x01 else 0)  # version, flags, maximum creation index
    return bool(struct.unpack_from("<Q", body, at)[0] != _UNDEFINED)


def _space_dims(space: bytes) -> tuple[int, ...] | None:
    """Dimensions of a dataspace message (versions 1-2): () for a scalar, None for a null one."""
    version, rank = space[0], space[1]
    if version == 1:
        return struct.unpack_from(f"<{rank}Q", space, 8)
    if version == 2:
        if space[3] == 2:  # null dataspace
            return None
        if space[3] == 0:
            return ()
        return struct.unpack_from(f"<{rank}Q", space, 4)
    raise ValueError(f"dataspace message version {version}")


def _is_object_ref_list(dtype: bytes) -> bool:
    """A variable-length sequence of (old-style, 8-byte) object references: what
    ``H5DSattach_scale`` writes as ``DIMENSION_LIST``."""
    if dtype[0] & 0x0F != 9 or dtype[1] & 0x0F != 0:  # variable-length, a sequence (not a string)
        return False
    base = dtype[8:]
    return len(base) >= 8 and base[0] & 0x0F == 7 and base[1] & 0x0F == 0 and struct.unpack_from("<I", base, 4)[0] == 8


class AttrCache:
    """Decoded attributes by the key of their messages (``HeaderReader.attribute_key``), a few
    thousand entries at most (cleared when full), so a series reads each array's attributes once.
    Each caller gets its own copy, lists included: a change to one file's recorded attributes
    never reaches another file's."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._got: dict[bytes, dict[str, dict[str, Any]]] = {}

    def get(self, key: bytes, read: Callable[[], tuple[dict[str, dict[str, Any]], bool]]) -> dict[str, dict[str, Any]]:
        """The attributes kept under ``key``, else ``read()``'s: (attributes, whether every
        attribute was read), kept only when every one was (a failed read, an I/O error say,
        is that file's alone, never every later file's of the series)."""
        got = self._got.get(key)
        if got is None:
            got, complete = read()
            if not complete:
                return got
            if len(self._got) >= self._limit:
                self._got.clear()
            self._got[key] = got
        out: dict[str, dict[str, Any]] = {}
        for name, enc in got.items():
            enc = dict(enc)
            for field in ("value", "shape"):
                x = enc.get(field)
                if type(x) is list:  # numbers, or [real, imaginary] pairs (encode_attr)
                    enc[field] = [list(i) for i in x] if x and type(x[0]) is list else x.copy()
            out[name] = enc
        return out

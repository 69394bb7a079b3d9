"""A dataset's storage and chunk index read from bytes (``scan/_hdf5_layout.py``), for the mutation
run (group ``hdf5-bytes``). Over small files h5py writes (``libver`` earliest and latest: dataspace
versions 1 and 2, fill value messages 2 and 3, filter pipelines 1 and 2), each header message the
module reads is edited one field at a time, in memory:

- to another legal spelling of the same storage (a datatype of version 2 or 3, a fill value
  message of version 1, a filter's registered name written out, a scalar dataspace of version
  2...): the reading must still equal h5py's answer for the unedited file (dtype exactly, shape,
  fill value bytes, ``get_filter``, layout, ``get_offset``/``get_storage_size``, chunk shape,
  compact bytes);
- to a form the module does not know exactly or a damaged one (an unknown version, padding
  bits, another float layout, an undefined fill value, a shared or repeated message, a chunk
  shape that does not fit): None, so the scanner asks HDF5 (the module's rule).

The chunk B-tree walk (``chunk_index``) is checked the same way against ``chunk_iter``: its nodes
edited (signature, node type, level, entries, the key's element offset, a filter mask past 31
bits) give None. Fast: two small files, edits in memory."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore.scan._hdf5_header import HeaderReader
from refstore.scan._hdf5_layout import chunk_index, decode_dataset

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

Messages = list[tuple[int, int, bytes, bytes]]
_SPACE, _TYPE, _FILL, _EXTERNAL, _LAYOUT, _PIPELINE = 0x01, 0x03, 0x05, 0x07, 0x08, 0x0B
_UNDEF = (1 << 64) - 1


def _write(path: Path, libver: str) -> None:
    with h5py.File(path, "w", libver=libver) as f:
        f.create_dataset("chunked", data=np.arange(12, dtype=">f4").reshape(3, 4), chunks=(2, 2),
                         compression="gzip", shuffle=True, fletcher32=True, fillvalue=np.float32(1.5))  # fmt: skip
        f.create_dataset("ints", data=np.arange(10, dtype="<i2"), chunks=(4,), fillvalue=np.int16(-3))
        f.create_dataset("u8", data=np.arange(6, dtype=">u8"), chunks=(6,))
        f.create_dataset("half", data=np.arange(4, dtype="<f2"))
        f.create_dataset("f8", data=np.arange(4, dtype="<f8"), fillvalue=np.float64(-0.5))
        f.create_dataset("contig", data=np.arange(5, dtype="<i4"))
        f.create_dataset("unwritten", shape=(4,), dtype="<i8")
        f.create_dataset("scalar", data=np.float64(2.5))
        f.create_dataset("lzf", data=np.arange(8, dtype="<i4"), chunks=(4,), compression="lzf")
        sid = h5py.h5s.create_simple((3,))
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_layout(h5py.h5d.COMPACT)
        h5py.Dataset(h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_U8LE, sid, plist))[...] = np.arange(3, dtype="u1")
        f.create_dataset("many", data=np.arange(200, dtype="<i4"), chunks=(2,))  # a B-tree of two levels
        # 20 client values (even: no padding in version 1), then another filter
        f.create_dataset("scaled", data=np.arange(20, dtype="<i4"), chunks=(5,), scaleoffset=0, compression="gzip")
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)  # fletcher32 first (h5py's order puts it last)
        plist.set_chunk((4,))
        plist.set_fletcher32()
        plist.set_shuffle()
        plist.set_deflate(3)
        ordered = h5py.h5d.create(f.id, b"ordered", h5py.h5t.STD_I32LE, h5py.h5s.create_simple((8,)), plist)
        h5py.Dataset(ordered)[...] = np.arange(8, dtype="<i4")


class _File:
    """One written file: its bytes, every dataset's header messages, h5py's answers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = path.read_bytes()
        self.messages: dict[str, Messages] = {}
        self.want: dict[str, dict[str, Any]] = {}
        self.chunks: dict[str, list[tuple[tuple[int, ...], int, int, int]]] = {}
        with HeaderReader(str(path)) as header, h5py.File(path, "r") as f:
            for name, h in f.items():
                messages = header.messages(h5py.h5o.get_info(h.id).addr)
                assert messages is not None, name
                self.messages[name] = messages
                self.want[name] = _h5py_layout(h)
                self.chunks[name] = _iter(h) if h.chunks is not None else []


def _iter(h: h5py.Dataset) -> list[tuple[tuple[int, ...], int, int, int]]:
    """(chunk offset, address, size, filter mask) of every chunk, from h5py's ``chunk_iter``."""
    got: list[tuple[tuple[int, ...], int, int, int]] = []
    if h.id.get_num_chunks():
        h.id.chunk_iter(lambda si: got.append((tuple(si.chunk_offset), si.byte_offset, si.size, si.filter_mask)))
    return got


def _h5py_layout(h: h5py.Dataset) -> dict[str, Any]:
    """What h5py says about a dataset's storage, in the fields ``DatasetLayout`` has."""
    dcpl = h.id.get_create_plist()
    out: dict[str, Any] = {
        "shape": h.shape,
        "dtype": h.dtype.str,
        "fill": np.array([h.fillvalue], h.dtype).tobytes(),
        "filters": [(c, fl, tuple(int(v) for v in vals), nm)
                    for c, fl, vals, nm in (dcpl.get_filter(i) for i in range(dcpl.get_nfilters()))],
        "layout": dcpl.get_layout(),
    }
    if out["layout"] == h5py.h5d.CONTIGUOUS:
        out["address"] = h.id.get_offset()
        if out["address"] is not None:  # the size of data never written is not compared (HDF5: 0)
            out["size"] = h.id.get_storage_size()
    elif out["layout"] == h5py.h5d.COMPACT:
        out["compact"] = np.ascontiguousarray(h[()]).tobytes()
    else:
        out["chunks"] = h.chunks
    return out


def _ours(messages: Messages) -> dict[str, Any] | None:
    raw = decode_dataset(messages)
    if raw is None:
        return None
    out: dict[str, Any] = {
        "shape": raw.shape,
        "dtype": raw.dtype.str,
        "fill": raw.fill,
        "filters": [(x.code, x.flags, x.values, x.name) for x in raw.filters],
        "layout": raw.layout,
    }
    assert raw.dtype.metadata is None
    if raw.layout == h5py.h5d.CONTIGUOUS:
        out["address"] = raw.address
        if raw.address is not None:
            out["size"] = raw.size
    elif raw.layout == h5py.h5d.COMPACT:
        out["compact"] = raw.compact
    else:
        out["chunks"] = raw.chunks
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, _File]:
    d = tmp_path_factory.mktemp("layout")
    out = {}
    for libver in ("earliest", "latest"):
        _write(d / f"{libver}.h5", libver)
        out[libver] = _File(d / f"{libver}.h5")
    return out


def test_every_dataset_reads_as_h5py_reports(files: dict[str, _File]) -> None:
    """The unedited files: every dataset decodes (but the latest file's chunked ones: data
    layout version 4, left to HDF5) to what h5py reports."""
    for libver, f in files.items():
        for name, messages in f.messages.items():
            got = _ours(messages)
            if libver == "latest" and f.want[name]["layout"] == h5py.h5d.CHUNKED:
                assert got is None, name
            else:
                assert got == f.want[name], (libver, name)


def _body(messages: Messages, kind: int) -> bytes:
    return next(b for k, _fl, _raw, b in messages if k == kind)


def _with(messages: Messages, kind: int, edit: Callable[[bytes], bytes]) -> Messages:
    """The messages with the first message of ``kind``'s body replaced by ``edit(body)``."""
    out, done = [], False
    for k, fl, raw, body in messages:
        if k == kind and not done:
            body, done = edit(body), True
        out.append((k, fl, raw, body))
    assert done, kind
    return out


def _set(fmt: str, at: int, value: int) -> Callable[[bytes], bytes]:
    def edit(b: bytes) -> bytes:
        out = bytearray(b)
        struct.pack_into(fmt, out, at, value)
        return bytes(out)

    return edit


def _or(at: int, bits: int) -> Callable[[bytes], bytes]:
    def edit(b: bytes) -> bytes:
        out = bytearray(b)
        out[at] |= bits
        return bytes(out)

    return edit


def _version(v: int) -> Callable[[bytes], bytes]:
    """A datatype message's version (high nibble of its first byte) set."""

    def edit(b: bytes) -> bytes:
        return bytes([(b[0] & 0x0F) | v << 4]) + b[1:]

    return edit


def _fill_v1(b: bytes) -> bytes:
    """A fill value message of version 3 written as version 2 (file format IV.A.2.f), the
    same value (or none: defined as HDF5's default)."""
    flags = b[1]
    if flags & 0x20:
        (size,) = struct.unpack_from("<i", b, 2)
        return bytes([2, 1, 0, 1]) + struct.pack("<i", size) + b[6 : 6 + size]
    return bytes([2, 1, 0, 1]) + struct.pack("<i", 0)


def _pipeline(version: int, filters: list[tuple[int, int, tuple[int, ...]]]) -> bytes:
    """A filter pipeline message (file format IV.A.2.l) of (id, flags, client values) with no
    filter names stored (HDF5 then names each by the filter class registered for its id)."""
    out = bytearray([version, len(filters)] + ([0] * 6 if version == 1 else []))
    for code, flags, values in filters:
        out += struct.pack("<H", code)
        if version == 1 or code >= 256:
            out += struct.pack("<H", 0)
        out += struct.pack("<HH", flags, len(values)) + struct.pack(f"<{len(values)}I", *values)
        if version == 1 and len(values) % 2:
            out += bytes(4)
    return bytes(out)


def _unnamed(version: int) -> Callable[[bytes], bytes]:
    """The pipeline of the earliest file's ``chunked`` (shuffle, deflate, fletcher32) in
    ``version``'s form without names."""
    return lambda b: _pipeline(version, [(2, 1, (4,)), (1, 1, (4,)), (3, 0, ())])


# (file, dataset, message type, edit): still decodes to what h5py reports for the unedited file
SAME: dict[str, tuple[str, str, int, Callable[[bytes], bytes]]] = {
    "datatype version 2 (float)": ("earliest", "chunked", _TYPE, _version(2)),
    "datatype version 3 (float)": ("earliest", "f8", _TYPE, _version(3)),
    "datatype version 2 (integer)": ("earliest", "ints", _TYPE, _version(2)),
    "datatype version 3 (integer)": ("earliest", "u8", _TYPE, _version(3)),
    "fill value message version 1": ("earliest", "ints", _FILL, _set("B", 0, 1)),
    "fill value version 2 of a version 3 value": ("latest", "f8", _FILL, _fill_v1),
    "fill value version 2 of a version 3 default": ("latest", "contig", _FILL, _fill_v1),
    "pipeline version 1 without names": ("earliest", "chunked", _PIPELINE, _unnamed(1)),
    "pipeline version 2": ("earliest", "chunked", _PIPELINE, _unnamed(2)),
}


@pytest.mark.parametrize("case", sorted(SAME))
def test_another_spelling_of_the_same_storage_reads_as_h5py_reports(files: dict[str, _File], case: str) -> None:
    libver, name, kind, edit = SAME[case]
    f = files[libver]
    assert _ours(_with(f.messages[name], kind, edit)) == f.want[name]


# (file, dataset, message type, edit): a form not decoded, or damaged: None
OTHER: dict[str, tuple[str, str, int, Callable[[bytes], bytes]]] = {
    # dataspace
    "dataspace version 3": ("earliest", "contig", _SPACE, _set("B", 0, 3)),
    "dataspace version 0": ("earliest", "contig", _SPACE, _set("B", 0, 0)),
    "null dataspace (v2)": ("latest", "contig", _SPACE, _set("B", 3, 2)),
    "scalar type with a rank (v2)": ("latest", "contig", _SPACE, _set("B", 3, 0)),
    # datatype
    "datatype version 0": ("earliest", "contig", _TYPE, _version(0)),
    "datatype version 4": ("earliest", "chunked", _TYPE, _version(4)),
    "integer of 3 bytes": ("earliest", "contig", _TYPE, lambda b: _set("<I", 4, 3)(_set("<H", 10, 24)(b))),
    "integer with low padding": ("earliest", "contig", _TYPE, _or(1, 0x02)),
    "integer with high padding": ("earliest", "contig", _TYPE, _or(1, 0x04)),
    "integer with an offset": ("earliest", "contig", _TYPE, _set("<H", 8, 1)),
    "integer of fewer bits": ("earliest", "contig", _TYPE, _set("<H", 10, 31)),
    "string class": ("earliest", "contig", _TYPE, lambda b: bytes([(b[0] & 0xF0) | 3]) + b[1:]),
    "float of 3 bytes": ("earliest", "f8", _TYPE, _set("<I", 4, 3)),
    "float with low padding": ("earliest", "f8", _TYPE, _or(1, 0x02)),
    "float with high padding": ("earliest", "f8", _TYPE, _or(1, 0x04)),
    "float with internal padding": ("earliest", "f8", _TYPE, _or(1, 0x08)),
    "float in VAX order": ("earliest", "f8", _TYPE, _or(1, 0x40)),
    "float with reserved bits": ("earliest", "f8", _TYPE, _or(3, 0x01)),
    "float not normalized": ("earliest", "f8", _TYPE, lambda b: bytes([b[0], b[1] & ~0x30]) + b[2:]),
    "float with an implied bit set": ("earliest", "f8", _TYPE, _or(1, 0x10)),
    "float sign elsewhere": ("earliest", "f8", _TYPE, _set("B", 2, 62)),
    "float with an offset": ("earliest", "f8", _TYPE, _set("<H", 8, 1)),
    "float of fewer bits": ("earliest", "f8", _TYPE, _set("<H", 10, 63)),
    "float exponent elsewhere": ("earliest", "f8", _TYPE, _set("B", 12, 51)),
    "float exponent of other size": ("earliest", "f8", _TYPE, _set("B", 13, 10)),
    "float mantissa elsewhere": ("earliest", "f8", _TYPE, _set("B", 14, 1)),
    "float mantissa of other size": ("earliest", "f8", _TYPE, _set("B", 15, 51)),
    "float of another bias": ("earliest", "f8", _TYPE, _set("<I", 16, 1022)),
    "half float of another bias": ("earliest", "half", _TYPE, _set("<I", 16, 16)),
    # fill value
    "fill value undefined (v2)": ("earliest", "ints", _FILL, _set("B", 3, 0)),
    "fill value version 4": ("earliest", "ints", _FILL, _set("B", 0, 4)),
    "fill value version 0": ("earliest", "ints", _FILL, _set("B", 0, 0)),
    "fill value of another size (v2)": ("earliest", "ints", _FILL, _set("<i", 4, 4)),
    "fill value cut short (v2)": ("earliest", "ints", _FILL, lambda b: b[: 8 + 1]),
    "fill value undefined (v3)": ("latest", "contig", _FILL, _or(1, 0x10)),
    "fill value flags unknown (v3)": ("latest", "contig", _FILL, _or(1, 0x40)),
    "fill value flags unknown high (v3)": ("latest", "contig", _FILL, _or(1, 0x80)),
    "fill value of another size (v3)": ("latest", "f8", _FILL, _set("<i", 2, 4)),
    "fill value cut short (v3)": ("latest", "f8", _FILL, lambda b: b[: 6 + 7]),
    # filter pipeline
    "pipeline version 3": ("earliest", "chunked", _PIPELINE, _set("B", 0, 3)),
    "pipeline version 0": ("earliest", "chunked", _PIPELINE, _set("B", 0, 0)),
    "pipeline of one filter more": ("earliest", "chunked", _PIPELINE, lambda b: bytes([b[0], b[1] + 1]) + b[2:]),
    "unnamed filter 300 (v1)": ("earliest", "chunked", _PIPELINE, lambda b: _pipeline(1, [(300, 0, ())])),
    "unnamed filter 300 (v2)": ("earliest", "chunked", _PIPELINE, lambda b: _pipeline(2, [(300, 0, ())])),
    "filter 7, of no class HDF5 names (v2)": ("earliest", "chunked", _PIPELINE, lambda b: _pipeline(2, [(7, 0, ())])),
    "filter name past the message (v1)": ("earliest", "chunked", _PIPELINE, _set("<H", 10, 200)),
    # layout
    "layout version 2": ("earliest", "contig", _LAYOUT, _set("B", 0, 2)),
    "layout version 4": ("earliest", "contig", _LAYOUT, _set("B", 0, 4)),
    "virtual layout": ("earliest", "contig", _LAYOUT, _set("B", 1, 3)),
    "compact data cut short": ("earliest", "compact", _LAYOUT, _set("<H", 2, 1000)),
    "chunked of another rank": ("earliest", "chunked", _LAYOUT, _set("B", 2, 2)),
    "chunked of another element size": ("earliest", "chunked", _LAYOUT, _set("<I", 19, 8)),
    "chunked with a chunk of 0": ("earliest", "chunked", _LAYOUT, _set("<I", 11, 0)),
    "chunked with a last chunk of 0": ("earliest", "chunked", _LAYOUT, _set("<I", 15, 0)),
}


@pytest.mark.parametrize("case", sorted(OTHER))
def test_another_or_damaged_form_is_none(files: dict[str, _File], case: str) -> None:
    libver, name, kind, edit = OTHER[case]
    f = files[libver]
    assert _ours(f.messages[name]) is not None
    assert _ours(_with(f.messages[name], kind, edit)) is None


@pytest.mark.parametrize("kind", [_SPACE, _TYPE, _FILL, _LAYOUT, _PIPELINE])
def test_a_shared_or_repeated_message_is_none(files: dict[str, _File], kind: int) -> None:
    messages = files["earliest"].messages["chunked"]
    shared = [(k, fl | (0x02 if k == kind else 0), raw, b) for k, fl, raw, b in messages]
    assert decode_dataset(shared) is None
    twice = [*messages, next(m for m in messages if m[0] == kind)]
    assert decode_dataset(twice) is None


@pytest.mark.parametrize("kind", [_SPACE, _TYPE, _FILL, _LAYOUT])
def test_a_missing_message_is_none(files: dict[str, _File], kind: int) -> None:
    assert decode_dataset([m for m in files["earliest"].messages["contig"] if m[0] != kind]) is None


def test_an_external_file_list_is_none(files: dict[str, _File]) -> None:
    messages = files["earliest"].messages["contig"]
    assert decode_dataset([*messages, (_EXTERNAL, 0, b"", b"\x01")]) is None
    assert decode_dataset([(_EXTERNAL, 0, b"", b"\x01"), *messages]) is None


@pytest.mark.parametrize("name", ["chunked", "lzf", "ordered"])
def test_a_version_2_pipeline_reads_as_h5py_reports(files: dict[str, _File], name: str) -> None:
    """The latest file's pipeline (version 2: names only for filters of id 256 and up, not
    padded) in the earliest file's header: what h5py reports for the earliest file."""
    early, late = files["earliest"], files["latest"]
    assert _body(early.messages[name], _PIPELINE)[0] == 1 and _body(late.messages[name], _PIPELINE)[0] == 2
    body = _body(late.messages[name], _PIPELINE)
    assert _ours(_with(early.messages[name], _PIPELINE, lambda b: body)) == early.want[name]


def _tree(f: _File, name: str) -> int:
    """The chunk B-tree's address in a dataset's layout message (version 3, file format IV.A.2.i)."""
    body = _body(f.messages[name], _LAYOUT)
    assert body[:2] == b"\x03\x02"
    return int.from_bytes(body[3:11], "little")


def _index(data: bytes | bytearray, f: _File, name: str, limit: int = 10**6) -> Any:
    blob = bytes(data)
    return chunk_index(lambda a, n: blob[a : a + n], _tree(f, name), len(f.want[name]["shape"]), limit)


def _rows(index: Any) -> list[tuple[tuple[int, ...], int, int, int]]:
    return [(tuple(int(v) for v in e), int(o), int(s), int(m)) for e, o, s, m in
            zip(index.elem, index.offsets, index.lengths, index.masks, strict=True)]  # fmt: skip


@pytest.mark.parametrize("name", ["chunked", "ints", "many"])
def test_the_chunk_index_is_h5pys(files: dict[str, _File], name: str) -> None:
    f = files["earliest"]
    got = _index(f.data, f, name)
    assert got is not None and _rows(got) == f.chunks[name]
    assert got.elem.dtype == np.int64 and got.offsets.dtype == np.int64 and got.masks.dtype == np.int32
    assert got.elem.shape == (len(f.chunks[name]), len(f.want[name]["shape"]))


def test_the_many_chunks_tree_has_two_levels(files: dict[str, _File]) -> None:
    f = files["earliest"]
    root = _tree(f, "many")
    assert f.data[root : root + 5] == b"TREE\x01" and f.data[root + 5] == 1


def _node_edit(name: str, rel: int, fmt: str, value: int, child: bool = False) -> Callable[[bytearray, _File], None]:
    """A field of the dataset's root node (or of its first child) set, ``rel`` bytes from the
    node's start (file format III.A.1: signature, type, level, entries used, siblings, then
    keys and children)."""

    def edit(b: bytearray, f: _File) -> None:
        at = _tree(f, name)
        if child:
            ndim = len(f.want[name]["shape"])
            at = int.from_bytes(b[at + 24 + 8 + 8 * (ndim + 1) : at + 24 + 16 + 8 * (ndim + 1)], "little")
        struct.pack_into(fmt, b, at + rel, value)

    return edit


_KEY = 24  # the first key of a node (chunk size, filter mask, offsets)
BAD_TREES: dict[str, tuple[str, Callable[[bytearray, _File], None]]] = {
    "root signature": ("chunked", _node_edit("chunked", 0, "B", ord("X"))),
    "root of group nodes (type 0)": ("chunked", _node_edit("chunked", 4, "B", 0)),
    "root with no entries": ("chunked", _node_edit("chunked", 6, "<H", 0)),
    "root entries past the file": ("chunked", _node_edit("chunked", 6, "<H", 60000)),
    "a child of the wrong level": ("many", _node_edit("many", 5, "B", 1, child=True)),
    "a child of group nodes": ("many", _node_edit("many", 4, "B", 0, child=True)),
    "a child with no entries": ("many", _node_edit("many", 6, "<H", 0, child=True)),
    "a key's element offset not 0": ("chunked", _node_edit("chunked", _KEY + 8 + 16, "<Q", 4)),
    "a filter mask past 31 bits": ("chunked", _node_edit("chunked", _KEY + 4, "<I", 0x80000000)),
}


@pytest.mark.parametrize("case", sorted(BAD_TREES))
def test_a_chunk_tree_that_does_not_hold_together_is_none(files: dict[str, _File], case: str) -> None:
    name, edit = BAD_TREES[case]
    f = files["earliest"]
    buf = bytearray(f.data)
    edit(buf, f)
    assert _index(f.data, f, name) is not None
    assert _index(buf, f, name) is None


def test_the_limit_is_the_chunk_count(files: dict[str, _File]) -> None:
    """Exactly as many chunks as h5py lists are walked; one fewer allowed: None."""
    f = files["earliest"]
    for name in ("chunked", "many"):
        n = len(f.chunks[name])
        assert _index(f.data, f, name, n) is not None
        assert _index(f.data, f, name, n - 1) is None


def test_the_largest_filter_mask_is_kept_as_h5py_reads_it(files: dict[str, _File], tmp_path: Path) -> None:
    """A chunk whose filter mask is 0x7FFFFFFF (every filter skipped; v1 B-tree nodes carry no
    checksum, so the edited file is still a file h5py reads): the walk equals ``chunk_iter``
    over the edited file."""
    f = files["earliest"]
    buf = bytearray(f.data)
    _node_edit("chunked", _KEY + 4, "<I", 0x7FFFFFFF)(buf, f)
    path = tmp_path / "mask.h5"
    path.write_bytes(bytes(buf))
    with h5py.File(path, "r") as h:
        want = _iter(h["chunked"])
    got = _index(buf, f, "chunked")
    assert want[0][3] == 0x7FFFFFFF and got is not None and _rows(got) == want


def test_the_node_bound_counts_every_node_walked(files: dict[str, _File], monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk stops (None) past ``_MAX_NODES`` nodes: the two-level tree of ``many`` is its
    root and one node per root entry (counted from the root's header here), walked whole
    under a bound of exactly that many nodes, refused under one fewer."""
    from refstore.scan import _hdf5_layout

    f = files["earliest"]
    root = _tree(f, "many")
    assert f.data[root + 5] == 1
    (entries,) = struct.unpack_from("<H", f.data, root + 6)
    monkeypatch.setattr(_hdf5_layout, "_MAX_NODES", 1 + entries)
    got = _index(f.data, f, "many")
    assert got is not None and _rows(got) == f.chunks["many"]
    monkeypatch.setattr(_hdf5_layout, "_MAX_NODES", entries)
    assert _index(f.data, f, "many") is None

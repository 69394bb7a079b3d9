"""Oracle tests for the header reader's attribute parsing (``scan/_hdf5_header.py``: attribute
messages of versions 1-3, dataspace messages, ``is_scale`` / ``name_starts`` / ``first_scales``):
what it reads from the bytes equals what h5py's own API reports (``h5py.h5a``: names, shapes,
``get_type().encode()``: the datatype message HDF5 writes, the value's bytes; ``h5py.h5ds``;
``h5o.get_info``), and where HDF5 itself refuses an edited message the reader answers None
(only HDF5 can tell). Files are small, written by h5py (libver earliest: object header v1,
attribute messages v1, v2 with a committed or shared datatype, v3 with a UTF-8 name), some bytes
edited by hand. Written for the mutation run (issue 12, design/mutation.md)."""

from __future__ import annotations

import ctypes
import struct
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore.fixtures import hdf5_headers
from refstore.scan._hdf5_header import HeaderReader, _attribute_parts, _space_dims

from ._netcdf_names import netcdf_dims

if TYPE_CHECKING:
    from pathlib import Path

NC_DIM_ONLY = hdf5_headers.NC_DIM_ONLY
LONG = "n" * 33000  # an attribute name longer than 32767 bytes (sizes are unsigned 16-bit)


def _attr_messages(path: Path, obj: str) -> tuple[int, dict[str, bytes]]:
    """The object header's address (h5py's) and name -> raw attribute message (header included)
    of the object, by the header reader's message walk (the message bytes only: where to edit;
    every value is h5py's)."""
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        info = h5py.h5o.get_info(f[obj].id)
        header = h.header(info.addr)
        assert header is not None
        return info.addr, {_attribute_parts(body)[0]: raw for kind, _fl, raw, body in header.messages if kind == 0x0C}


def _edited(src: Path, dst: Path, obj: str, name: str, edits: dict[int, int]) -> Path:
    """A copy of ``src`` with bytes of attribute ``name``'s message body (offset -> byte) changed."""
    data = bytearray(src.read_bytes())
    addr, raws = _attr_messages(src, obj)
    at = bytes(data).find(raws[name], addr)
    assert 0 < at < addr + 4096
    for off, val in edits.items():
        data[at + 8 + off] = val  # v1 object header: 8 bytes of message header, then the body
    dst.write_bytes(bytes(data))
    return dst


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("hdr")
    early = tmp / "early.h5"
    with h5py.File(early, "w", libver="earliest") as f:
        f["t"] = np.dtype("<i4")  # a committed datatype: attribute message version 2, flags 1
        d = f.create_dataset("v2attr", data=np.arange(3.0))
        d.attrs.create("c", np.int32(5), dtype=f["t"])
        d.make_scale("v2attr")
        d = f.create_dataset("badname", data=np.arange(3.0))
        d.attrs[b"\xffbad"] = np.int16(2)  # a name that is not UTF-8
        d.make_scale("badname")
        d = f.create_dataset("namex", data=np.arange(3.0))
        d.attrs["NAMEX"] = np.bytes_(NC_DIM_ONLY)  # ends in X; no NAME
        d.attrs["plainX"] = np.float32(1.5)
        d = f.create_dataset("long", data=np.arange(3.0))
        d.attrs[LONG] = np.bytes_(b"value")
        d.attrs["arr"] = np.arange(6, dtype=">i4").reshape(2, 3)
        d.attrs["empty"] = h5py.Empty("<f8")
        d = f.create_dataset("damaged", data=np.arange(3.0))
        d.attrs["a"] = np.bytes_(b"abcdefg")  # before CLASS: HDF5 decodes it looking for CLASS
        d.make_scale("damaged")
        x = f.create_dataset("x", data=np.arange(2.0))
        x.make_scale("x")
        v = f.create_dataset("v", data=np.zeros((2, 3)))
        v.dims[0].attach_scale(x)
        n = f.create_dataset("nullname", data=np.arange(3.0))
        utf8 = _utf8_attr(n, "NAME", None, 1, h5py.h5s.create(h5py.h5s.NULL))
    out = {"early": early}
    if utf8:
        out["utf8"] = early
    # attribute message version 1: its reserved byte (the flags of versions 2-3) set
    out["reserved"] = _edited(early, tmp / "reserved.h5", "damaged", "CLASS", {1: 0x03})
    # dataspace of DIMENSION_LIST without the "maximum dimensions present" flag (v1: 8-byte parts)
    out["nomax"] = _edited(early, tmp / "nomax.h5", "v", "DIMENSION_LIST", {8 + 16 + 16 + 2: 0})
    # a datatype size of 4 (a datatype message is at least 8 bytes); a dataspace past the message
    out["dtype4"] = _edited(early, tmp / "dtype4.h5", "damaged", "a", {4: 4})
    out["space_long"] = _edited(early, tmp / "space_long.h5", "damaged", "a", {6: 0xFF})
    fcpl = hdf5_headers.shared_messages_fcpl(hdf5_headers.SHARE_DTYPE | hdf5_headers.SHARE_SDSPACE)
    if fcpl is not None:  # every datatype and dataspace in the shared-message heap
        sohm = tmp / "sohm.h5"
        with hdf5_headers._create(sohm, fcpl, "earliest") as f:
            d = f.create_dataset("d", data=np.arange(3.0))
            d.attrs["x"] = np.arange(4, dtype="<i8")
            d.attrs["y"] = np.bytes_(b"abc")
        out["sohm"] = sohm
    return out


def _info(f: h5py.File, obj: str) -> Any:
    return h5py.h5o.get_info(f[obj].id)


def _h5py_attrs(obj: Any) -> dict[str, tuple[tuple[int, ...] | None, bytes | None, bytes | None]]:
    """Per attribute, as h5py's low-level API reads it: (shape, None for a null dataspace;
    the datatype message (``H5Tencode`` minus its 2-byte prefix), None for a committed one;
    the value's bytes in the file's type, None for a null dataspace or references and
    variable-length values)."""
    out = {}
    for i in range(h5py.h5o.get_info(obj.id).num_attrs):
        aid = h5py.h5a.open(obj.id, index=i)
        name = aid.name.decode("utf-8", "replace")
        ftype = aid.get_type()
        space = aid.get_space()
        null = space.get_simple_extent_type() == h5py.h5s.NULL
        shape = None if null else aid.shape
        dtype = None if ftype.committed() else ftype.encode()[2:]
        data = None
        if not null and not aid.dtype.hasobject:  # references, variable lengths: bytes elsewhere
            arr = np.empty(aid.shape, dtype=aid.dtype)
            aid.read(arr, mtype=ftype)
            data = arr.tobytes()
        out[name] = (shape, dtype, data)
    return out


@pytest.mark.parametrize("obj", ["v2attr", "badname", "namex", "long", "damaged", "x", "v", "nullname"])
def test_attribute_parts_equal_h5py(files: dict[str, Path], obj: str) -> None:
    """Every attribute message of versions 1-3 (committed datatype, a name that is not UTF-8,
    names ending in X, a 33,000-byte name, a null dataspace, a UTF-8 name) reads as h5py does:
    the same names, shapes, datatype bytes and value bytes; only the committed datatype is
    marked shared."""
    path = files["early"]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        info = _info(f, obj)
        attrs = h._attributes(info.addr, info.num_attrs)
        want = _h5py_attrs(f[obj])
        assert attrs is not None, obj
        assert sorted(attrs) == sorted(want), obj
        for name, (shape, dtype, data) in want.items():
            a = attrs[name]
            assert _space_dims(a.space) == shape, (obj, name[:20])
            assert a.shared_parts is (dtype is None), (obj, name[:20])
            if dtype is not None:
                assert a.dtype == dtype, (obj, name[:20])
            if data is not None:
                assert a.data[: len(data)] == data, (obj, name[:20])


def test_is_scale_equals_h5ds(files: dict[str, Path]) -> None:
    """``H5DSis_scale`` from the bytes: objects with attribute messages of versions 1 and 2 and
    a name that is not UTF-8 are scales; a version 1 message with its reserved byte set reads
    as HDF5 reads it (the byte is unused before version 2)."""
    for case, obj in (("early", "v2attr"), ("early", "badname"), ("early", "damaged"), ("reserved", "damaged"),
                      ("early", "namex"), ("early", "long"), ("early", "v")):  # fmt: skip
        path = files[case]
        with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
            info = _info(f, obj)
            assert h.is_scale(info.addr, info.num_attrs) is bool(h5py.h5ds.is_scale(f[obj].id)), (case, obj)


def test_name_starts_equals_h5py(files: dict[str, Path]) -> None:
    """No ``NAME`` (an attribute ``NAMEX`` holding the prefix is another attribute): False; a
    ``NAME`` h5py reads as ``Empty`` (null dataspace, bytes after it in the message) never
    starts with anything, not even b"" (None: left to HDF5, or False)."""
    path = files["early"]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        assert "NAME" not in f["namex"].attrs
        info = _info(f, "namex")
        assert h.name_starts(info.addr, info.num_attrs, NC_DIM_ONLY) is False
        assert h.name_starts(info.addr, info.num_attrs, b"") is False
        for obj in ("badname", "damaged"):  # H5DSset_scale's NAME: the scale's name
            info = _info(f, obj)
            name = f[obj].attrs["NAME"]
            assert h.name_starts(info.addr, info.num_attrs, obj.encode()) is name.startswith(obj.encode())
            assert h.name_starts(info.addr, info.num_attrs, b"zz") is name.startswith(b"zz")
    if "utf8" not in files:
        pytest.skip("HDF5's low-level calls are not reachable here (fixtures/hdf5_headers.py)")
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        assert isinstance(f["nullname"].attrs["NAME"], h5py.Empty)
        info = _info(f, "nullname")
        attrs = h._attributes(info.addr, info.num_attrs)
        assert attrs is not None and attrs["NAME"].raw[8] == 3 and len(attrs["NAME"].data) > 0  # what it is made for
        for prefix in (b"", NC_DIM_ONLY):
            assert h.name_starts(info.addr, info.num_attrs, prefix) in (None, False), prefix


def test_first_scales_without_maximum_dimensions(files: dict[str, Path]) -> None:
    """A ``DIMENSION_LIST`` whose dataspace leaves out the maximum dimensions (its flags 0) is
    read as HDF5 reads it: the scale attached to each dimension."""
    for case in ("early", "nomax"):
        path = files[case]
        with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
            v = f["v"]
            want = [h5py.h5o.get_info(v.dims[i][0].id).addr if len(v.dims[i]) else None for i in range(v.ndim)]
            assert want[0] is not None and want[1] is None
            info = _info(f, "v")
            assert h.first_scales(info.addr, info.num_attrs, v.ndim) == want, case
            space = h._attributes(info.addr, info.num_attrs)["DIMENSION_LIST"].space  # type: ignore[index]
            assert space[2] == (1 if case == "early" else 0)  # what it is made for


@pytest.mark.parametrize("case", ["dtype4", "space_long"])
def test_a_message_hdf5_cannot_decode_is_left_to_hdf5(files: dict[str, Path], case: str) -> None:
    """An attribute message whose datatype size is below a datatype message's 8 bytes, or whose
    dataspace runs past the message: HDF5 refuses the object's attributes (even ``CLASS``, the
    message after it), so the reader tells nothing from them."""
    path = files[case]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        d = f["damaged"]
        with pytest.raises((RuntimeError, OSError, ValueError, KeyError, TypeError)):
            h5py.h5ds.is_scale(d.id)
        with pytest.raises((RuntimeError, OSError, ValueError, KeyError, TypeError)):
            list(d.attrs.items())
        info = _info(f, "damaged")
        assert h.is_scale(info.addr, info.num_attrs) is None
        assert h.name_starts(info.addr, info.num_attrs, b"d") is None
        assert h.attribute_key(info.addr, info.num_attrs, frozenset()) is None


def test_shared_message_heap_parts_prove_nothing(files: dict[str, Path]) -> None:
    """Attribute messages of version 2 whose datatype and dataspace are in the shared-message heap
    (their bytes a heap ID): every attribute is found, as h5py lists them, and none gives a key."""
    if "sohm" not in files:
        pytest.skip("HDF5's low-level calls are not reachable here (fixtures/hdf5_headers.py)")
    path = files["sohm"]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        info = _info(f, "d")
        attrs = h._attributes(info.addr, info.num_attrs)
        assert attrs is not None and sorted(attrs) == sorted(f["d"].attrs)
        assert {a.raw[8] for a in attrs.values()} == {2}  # what it is made for: version 2 messages
        assert all(a.shared_parts for a in attrs.values())
        assert h.attribute_key(info.addr, info.num_attrs, frozenset()) is None
        assert h.is_scale(info.addr, info.num_attrs) is bool(h5py.h5ds.is_scale(f["d"].id))


def test_attribute_message_versions_and_sizes() -> None:
    """Unknown message versions and parts too short for their messages are refused."""
    body = bytes([1, 0]) + struct.pack("<HHH", 2, 8, 8) + b"a\0" + bytes(6) + bytes(16)
    assert _attribute_parts(body)[0] == "a"
    for version in (0, 4):
        with pytest.raises(ValueError):
            _attribute_parts(bytes([version]) + body[1:])
    with pytest.raises(ValueError):
        _space_dims(bytes([3, 0, 0, 0]))


# ---------------------------------------------------------------- the reader itself
def _sized(path: Path, sizes: tuple[int, int], libver: str) -> Path:
    """A file of ``sizes`` (address, length) bytes: a chunked array with a scale, a contiguous one."""
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_sizes(*sizes)
    with hdf5_headers._create(path, fcpl, libver) as f:
        f.create_dataset("c", data=np.arange(40, dtype="<i4").reshape(4, 10), chunks=(2, 5))
        f.create_dataset("k", data=np.arange(7, dtype="<f8"))
        t = f.create_dataset("t", data=np.arange(4.0))
        t.make_scale("t")
        f["c"].dims[0].attach_scale(t)
    return path


@pytest.fixture(scope="module")
def reader_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("reader")
    out = {f"sizes{a}{b}_{lv}": _sized(tmp / f"sizes{a}{b}_{lv}.h5", (a, b), lv)
           for a, b in ((4, 8), (8, 4)) for lv in ("earliest", "latest")}  # fmt: skip
    big = tmp / "big.h5"  # object headers and values past the first 64 KiB pages
    with h5py.File(big, "w", libver="earliest") as f:
        for i in range(6):
            f.create_dataset(f"pad{i}", data=np.full(20000, i, "<i4"))
            d = f.create_dataset(f"s{i}", data=np.arange(3.0))
            d.make_scale(f"s{i}")
            d.attrs["NAME"] = np.bytes_(NC_DIM_ONLY + b"%d" % i)
    out["big"] = big
    latest = tmp / "latest.h5"  # attribute messages v3 in v2 headers: no padding after a value
    with h5py.File(latest, "w", libver="latest") as f:
        d = f.create_dataset("d", data=np.arange(3.0))
        d.make_scale("dname")
        n = f.create_dataset("intname", data=np.arange(3.0))
        n.attrs["NAME"] = np.int32(0x41414141)  # b"AAAA" as bytes: not a string
    out["latest"] = latest
    early = tmp / "early.h5"
    with h5py.File(early, "w", libver="earliest") as f:
        d = f.create_dataset("cls", data=np.arange(3.0))
        d.attrs["x"] = np.int8(1)
        u = f.create_dataset("utf8class", data=np.arange(3.0))
        utf8 = _utf8_attr(u, "CLASS", b"DIMENSION_SCALE", 16, h5py.h5s.create(h5py.h5s.SCALAR))
        nm = f.create_dataset("named", data=np.arange(3.0))
        nm.attrs["NAME"] = np.bytes_(b"abcdefgh")
    out["early"] = early
    if utf8:
        out["utf8class"] = early
    # NAME's string size edited from 8 to 200 (past its message): HDF5 cannot read it
    out["name_long"] = _edited(early, tmp / "name_long.h5", "named", "NAME", {8 + 8 + 4: 200})
    out["name_huge"] = _edited(early, tmp / "name_huge.h5", "named", "NAME", {8 + 8 + 7: 0x80})  # 2^31 + 8
    lists = tmp / "lists.h5"  # DIMENSION_LIST attributes H5DSattach_scale never writes
    with h5py.File(lists, "w", libver="earliest") as f:
        x = f.create_dataset("x", data=np.arange(2.0))
        x.make_scale("x")
        d = f.create_dataset("vint", data=np.arange(2.0))  # a list of integers, not references
        ints = np.empty(1, dtype=object)
        ints[0] = np.array([5], "<i8")
        d.attrs.create("DIMENSION_LIST", ints, dtype=h5py.vlen_dtype(np.dtype("<i8")))
        w = f.create_dataset("wide", data=np.zeros((2, 2)))  # three lists for two dimensions
        refs = np.empty(3, dtype=object)
        for i in range(3):
            refs[i] = np.array([x.ref], dtype=h5py.ref_dtype)
        w.attrs.create("DIMENSION_LIST", refs, dtype=h5py.vlen_dtype(h5py.ref_dtype))
    out["lists"] = lists
    # the first dimension's list says 2 references where its heap object holds 1 (8 bytes)
    out["count1"] = _one_scale(tmp / "count1.h5")
    out["count2"] = _edited(out["count1"], tmp / "count2.h5", "v", "DIMENSION_LIST", {8 + 16 + 16 + 24: 2})
    # a superblock version HDF5 does not know
    data = bytearray(early.read_bytes())
    data[8] = 7
    (tmp / "sb7.h5").write_bytes(bytes(data))
    out["sb7"] = tmp / "sb7.h5"
    return out


def _one_scale(path: Path) -> Path:
    """A 2-d array whose first dimension has one scale attached (v1 headers, v1 messages)."""
    with h5py.File(path, "w", libver="earliest") as f:
        x = f.create_dataset("x", data=np.arange(2.0))
        x.make_scale("x")
        v = f.create_dataset("v", data=np.zeros((2, 3)))
        v.dims[0].attach_scale(x)
    return path


def _utf8_attr(obj: Any, name: str, value: bytes | None, size: int, space: Any) -> bool:
    """A fixed-length string attribute whose name is UTF-8 (message version 3: unpadded parts,
    so a v1 object header's 8-byte alignment leaves bytes after it), through HDF5 itself (h5py
    has no binding for the attribute's character set), holding ``value`` (None: unwritten, as
    for a null dataspace); False where it cannot."""
    lib = hdf5_headers._hdf5_lib()
    if lib is None:
        return False
    try:
        cls = ctypes.c_int64.in_dll(lib, "H5P_CLS_ATTRIBUTE_CREATE_ID_g").value
    except ValueError:
        return False
    lib.H5Pcreate.restype = ctypes.c_int64
    lib.H5Acreate2.restype = ctypes.c_int64
    acpl = lib.H5Pcreate(ctypes.c_int64(cls))
    if acpl < 0:
        return False
    t = h5py.h5t.C_S1.copy()
    t.set_size(size)
    try:
        if lib.H5Pset_char_encoding(ctypes.c_int64(acpl), ctypes.c_int(1)) < 0:
            return False
        aid = lib.H5Acreate2(ctypes.c_int64(obj.id.id), name.encode(), ctypes.c_int64(t.id), ctypes.c_int64(space.id),
                             ctypes.c_int64(acpl), ctypes.c_int64(0))  # fmt: skip
        if aid < 0:
            return False
        if value is not None:
            h5py.h5a.open(obj.id, name.encode()).write(np.array(value, f"S{size}"), mtype=t)
        lib.H5Aclose(ctypes.c_int64(aid))
    finally:
        lib.H5Pclose(ctypes.c_int64(acpl))
    return True


@pytest.mark.parametrize("case", ["sizes48_earliest", "sizes48_latest", "sizes84_earliest", "sizes84_latest"])
def test_files_of_other_address_and_length_sizes_scan_as_h5py(reader_files: dict[str, Path], case: str) -> None:
    """Files of 4-byte addresses or lengths (the header reader parses 8-byte ones only) scan to
    the shapes, dimensions and chunk offsets h5py reports."""
    from refstore.scan.hdf5 import HDF5Scanner

    path = reader_files[case]
    res = HDF5Scanner()(str(path))
    metas = {m.name: m for m in res.arrays}
    rows = res.chunks.to_pylist()
    nc_dims = netcdf_dims(path)  # netCDF-C's names, where it opens the file
    with h5py.File(path, "r") as f:
        assert sorted(metas) == ["c", "k", "t"]
        for name, m in metas.items():
            ds = f[name]
            assert m.shape == ds.shape and np.dtype(m.dtype) == ds.dtype, (case, name)
            if nc_dims is not None:
                assert m.dims == nc_dims[name], (case, name)
            assert all(d == ds.dims[i][0].name.rsplit("/", 1)[-1] for i, d in enumerate(m.dims)
                       if len(ds.dims[i])) or name == "t", (case, name)  # fmt: skip
            got = sorted((r["offset"], r["length"]) for r in rows if r["array"] == name)
            if ds.chunks:
                want = sorted((ds.id.get_chunk_info(i).byte_offset, ds.id.get_chunk_info(i).size)
                              for i in range(ds.id.get_num_chunks()))  # fmt: skip
            else:
                want = [(ds.id.get_offset(), ds.id.get_storage_size())]
            assert got == want, (case, name)
        with HeaderReader(str(path)) as h:
            info = _info(f, "t")
            assert h.is_scale(info.addr, info.num_attrs) in (None, True)


def test_reads_across_pages_equal_the_file(reader_files: dict[str, Path]) -> None:
    """``read`` gives the file's bytes (Python's own read of it) for ranges within one 64 KiB page,
    ending on or just past a page boundary, spanning pages, a page or more long, past the file's end."""
    path = reader_files["big"]
    blob = path.read_bytes()
    assert len(blob) > 3 * 65536
    page = 65536
    spots = [0, 1, 100, page - 9, page - 8, page - 1, page, page + 1, 2 * page - 3, 2 * page + 5, len(blob) - 4]
    with HeaderReader(str(path)) as h:
        for at in spots:
            for n in (1, 2, 8, 9, 16, 100, page - 1, page, page + 1):
                for _ in range(2):  # the page read once, then from memory
                    assert h.read(at, n) == blob[at : at + n], (at, n)


def test_objects_past_the_first_pages(reader_files: dict[str, Path]) -> None:
    """Scales and their NAMEs whose headers lie past the first 64 KiB pages read as h5py reads them."""
    path = reader_files["big"]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        assert max(_info(f, f"s{i}").addr for i in range(6)) > 3 * 65536
        for i in range(6):
            d = f[f"s{i}"]
            info = _info(f, f"s{i}")
            assert h.is_scale(info.addr, info.num_attrs) is bool(h5py.h5ds.is_scale(d.id)) is True
            name = d.attrs["NAME"]
            for prefix in (NC_DIM_ONLY, NC_DIM_ONLY + b"%d" % i, NC_DIM_ONLY + b"%d" % (i + 1)):
                assert h.name_starts(info.addr, info.num_attrs, prefix) is name.startswith(prefix)


def test_name_starts_reads_values_as_h5py(reader_files: dict[str, Path]) -> None:
    """A v3 NAME of exactly its string size (no padding after it) is read; a NAME that is no
    string (an int32) never starts with anything, not even b""."""
    path = reader_files["latest"]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        info = _info(f, "d")
        name = f["d"].attrs["NAME"]
        attrs = h._attributes(info.addr, info.num_attrs)
        assert attrs is not None and attrs["NAME"].raw[0] == 0x0C and attrs["NAME"].raw[4 + 0] == 3  # v3, in v2 header
        assert len(attrs["NAME"].data) == f["d"].attrs.get_id("NAME").get_storage_size()  # what it is made for
        for prefix in (b"dname", b"dn", b"dnamex", b"x"):
            assert h.name_starts(info.addr, info.num_attrs, prefix) is name.startswith(prefix)
        info = _info(f, "intname")
        assert not isinstance(f["intname"].attrs["NAME"], (bytes, str))
        for prefix in (b"", b"AAAA"):
            assert h.name_starts(info.addr, info.num_attrs, prefix) in (None, False)


@pytest.mark.parametrize("case", ["name_long", "name_huge"])
def test_name_hdf5_cannot_read_is_left_to_hdf5(reader_files: dict[str, Path], case: str) -> None:
    """A NAME whose string size runs past its message (200 bytes; 2^31 + 8): HDF5 refuses it;
    the reader tells nothing."""
    path = reader_files[case]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        with pytest.raises((RuntimeError, OSError, ValueError, KeyError, TypeError, MemoryError)):
            f["named"].attrs["NAME"]
        info = _info(f, "named")
        for prefix in (b"", b"abc"):
            assert h.name_starts(info.addr, info.num_attrs, prefix) is None


def test_a_list_longer_than_its_heap_object_is_left_to_hdf5(reader_files: dict[str, Path]) -> None:
    """A DIMENSION_LIST count of 2 over a global heap object of one reference: HDF5 refuses the
    dimension's scales; the reader reads none (the unedited file: the scale h5py gives)."""
    for case in ("count1", "count2"):
        path = reader_files[case]
        with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
            v = f["v"]
            info = _info(f, "v")
            got = h.first_scales(info.addr, info.num_attrs, 2)
            if case == "count1":
                assert got == [h5py.h5o.get_info(v.dims[0][0].id).addr, None]
                continue
            with pytest.raises((RuntimeError, OSError, ValueError, KeyError, TypeError)):
                len(v.dims[0])
            assert got is None


def test_dimension_lists_h5ds_never_writes_are_left_to_hdf5(reader_files: dict[str, Path]) -> None:
    """A DIMENSION_LIST of integer lists (H5DSiterate_scales fails on it) and one of three
    reference lists on a two-dimensional array (H5DS writes one per dimension): no scales are
    read from the bytes."""
    path = reader_files["lists"]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        with pytest.raises((RuntimeError, OSError, ValueError, KeyError, TypeError)):
            f["vint"].dims[0][0]
        info = _info(f, "vint")
        assert h.first_scales(info.addr, info.num_attrs, 1) is None
        w = f["wide"]
        assert w.attrs["DIMENSION_LIST"].shape == (3,) and w.ndim == 2
        info = _info(f, "wide")
        assert h.first_scales(info.addr, info.num_attrs, 2) is None


def test_utf8_named_class_is_a_scale(reader_files: dict[str, Path]) -> None:
    """A CLASS whose name is UTF-8 (attribute message v3 in a v1 header: a padding byte after the
    16-byte value) reading DIMENSION_SCALE: H5DSis_scale says yes, and so does the reader."""
    if "utf8class" not in reader_files:
        pytest.skip("HDF5's low-level calls are not reachable here (fixtures/hdf5_headers.py)")
    path = reader_files["utf8class"]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        info = _info(f, "utf8class")
        attrs = h._attributes(info.addr, info.num_attrs)
        assert attrs is not None and attrs["CLASS"].raw[8] == 3 and len(attrs["CLASS"].data) > 16  # made for
        assert h.is_scale(info.addr, info.num_attrs) is bool(h5py.h5ds.is_scale(f["utf8class"].id)) is True
        info = _info(f, "cls")
        assert h.is_scale(info.addr, info.num_attrs) is bool(h5py.h5ds.is_scale(f["cls"].id)) is False


def test_a_reader_on_what_hdf5_cannot_open(reader_files: dict[str, Path], tmp_path: Path) -> None:
    """A folder: the reader raises OSError (what the scan catches) and keeps no descriptor open.
    A superblock version HDF5 does not know: HDF5 refuses the file; the reader opens and parses
    nothing."""
    import os

    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    with pytest.raises(OSError):
        HeaderReader(str(tmp_path))
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before
    path = reader_files["sb7"]
    with pytest.raises(OSError):
        h5py.File(path, "r")
    with h5py.File(reader_files["early"], "r") as f:
        info = _info(f, "named")
    with HeaderReader(str(path)) as h:
        assert (h.offsets, h.lengths) == (0, 0)
        assert h.header(info.addr) is None and h.is_scale(info.addr, info.num_attrs) is None


def test_attribute_cache_holds_at_most_its_limit() -> None:
    """``AttrCache(limit=n)`` keeps at most n keys (cleared when full), each read once while kept."""
    from refstore.scan._hdf5_header import AttrCache

    cache = AttrCache(limit=2)
    reads: list[bytes] = []

    def reader(key: bytes) -> Any:
        def read() -> tuple[dict[str, dict[str, Any]], bool]:
            reads.append(key)
            return {"a": {"type": "<i4", "value": [1], "shape": [1]}}, True

        return read

    for key in (b"a", b"b", b"a", b"c", b"d"):
        assert cache.get(key, reader(key)) == {"a": {"type": "<i4", "value": [1], "shape": [1]}}
        assert len(cache._got) <= 2
    assert reads == [b"a", b"b", b"c", b"d"]

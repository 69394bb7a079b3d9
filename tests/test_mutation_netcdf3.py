"""The netCDF3 header parser and scanner on the layouts test_mutation_scan does not reach: one
record variable (unpadded record size), no records, streaming record counts, coordinates along
the concat dimension, damaged headers. Expected values: netCDF4-python's reads, Python's date
arithmetic, the byte layout of the netCDF classic format specification. In-process, fast.
"""

from __future__ import annotations

import io
import struct
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from refstore._keys import MAX_DIMS
from refstore._values import decode_fill
from refstore.errors import ScanError
from refstore.scan.netcdf3 import NC3_TYPES, NetCDF3Scanner, _fill_value, read_header

from . import _oracle

if TYPE_CHECKING:
    from pathlib import Path

    from refstore.scan._types import ScanResult


def _nc() -> Any:
    netCDF4 = _oracle._netcdf4()  # leaves no HDF5_PLUGIN_PATH behind for h5py

    return netCDF4


def _assert_refs_equal_netcdf4(path: Path, res: ScanResult) -> None:
    """Every reference of ``res`` read from the bytes equals netCDF4-python's read of its region."""
    blob = path.read_bytes()
    metas = {m.name: m for m in res.arrays}
    rows = res.chunks.to_pylist()
    with _nc().Dataset(path) as nc:
        nc.set_auto_maskandscale(False)
        assert sorted(metas) == sorted(nc.variables)
        for name, var in nc.variables.items():
            m = metas[name]
            want = np.dtype(var.dtype)
            want = want.newbyteorder(">") if want.itemsize > 1 else want
            assert m.shape == var.shape and m.dims == var.dimensions, name
            exp = np.asarray(var[...]).astype(want)
            mine = [r for r in rows if r["array"] == name]
            if exp.size == 0:
                assert mine == [], name
                continue
            out = np.zeros(var.shape, want)
            for r in mine:
                key = [r[f"k{i}"] for i in range(len(m.shape))]
                region = tuple(slice(k * c, k * c + c) for k, c in zip(key, m.chunks, strict=True))
                assert r["length"] == want.itemsize * int(np.prod(m.chunks)), name
                out[region] = np.frombuffer(blob[r["offset"] : r["offset"] + r["length"]], want).reshape(m.chunks)
            assert out.tobytes() == exp.tobytes(), name


@pytest.fixture(scope="module")
def nc3(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("nc3")
    netCDF4 = _nc()
    out: dict[str, Path] = {}
    # one record variable of 6 bytes a record (padded vsize 8): records are 6 bytes apart
    p = out["one_rec"] = d / "one_rec.nc"
    with netCDF4.Dataset(p, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        t = nc.createVariable("time", "i2", ("time", "x"))
        t[0:4] = np.arange(12, dtype="i2").reshape(4, 3)
        nc.createVariable("fixed", "f8", ("x",))[:] = [1.5, 2.5, 3.5]
    # two record variables, a record coordinate with CF units, fixed coordinate
    p = out["two_rec"] = d / "two_rec.nc"
    with netCDF4.Dataset(p, "w", format="NETCDF3_64BIT_OFFSET") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 2)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "hours since 2000-01-02 03:00:00"
        t[0:3] = [1.0, 2.0, 26.0]
        v = nc.createVariable("v", "i1", ("time", "lat"))
        v[0:3] = np.array([[1, 2], [3, 4], [5, 6]], "i1")
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat[:] = [10.0, 20.0]
        lat.units = "degrees_north"
        lab = nc.createVariable("label", "S1", ("lat",))
        lab[:] = np.array([b"a", b"b"])
        nc.comment = "two record variables"
    # no records yet, no global attributes
    p = out["no_rec"] = d / "no_rec.nc"
    with netCDF4.Dataset(p, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("time", None)
        nc.createVariable("time", "f4", ("time",)).units = "days since 2000-01-01"
        nc.createVariable("w", "i4", ("time",))
    # nothing at all
    p = out["empty"] = d / "empty.nc"
    with netCDF4.Dataset(p, "w", format="NETCDF3_CLASSIC"):
        pass
    # a non-standard calendar, a fixed time coordinate, a wrongly typed _FillValue-free variable
    p = out["noleap"] = d / "noleap.nc"
    with netCDF4.Dataset(p, "w", format="NETCDF3_64BIT_DATA") as nc:
        nc.createDimension("time", 3)
        t = nc.createVariable("time", "i8", ("time",))
        t.units = "days since 2000-01-01"
        t.calendar = "noleap"
        t[:] = [5, 6, 9]
        s = nc.createVariable("stamp", "i4", ("time",))
        s.units = "seconds since 2000-01-01T00:00:00Z"
        s.calendar = "proleptic_gregorian"
        s[:] = [60, 120, 180]
        r = nc.createVariable("raw", "u2", ("time",))
        r.units = "furlongs"
        r[:] = [7, 8, 9]
        nc.createVariable("nounits", "f4", ("time",))[:] = [0.5, 1.5, 2.5]
    return out


def test_one_record_variable_records_are_unpadded(nc3: dict[str, Path]) -> None:
    path = nc3["one_rec"]
    res = NetCDF3Scanner()(str(path))
    _assert_refs_equal_netcdf4(path, res)
    hdr = _header(path)
    assert hdr.numrecs == 4 and hdr.recsize == 6 and hdr.version == 1
    rows = [r for r in res.chunks.to_pylist() if r["array"] == "time"]
    assert [r["offset"] - rows[0]["offset"] for r in rows] == [0, 6, 12, 18]
    metas = {m.name: m for m in res.arrays}
    assert metas["time"].chunks == (1, 3) and metas["fixed"].chunks == (3,)
    assert res.groups == {"": {}} and res.format == "netcdf3"


def test_two_record_variables_and_the_time_coordinate(nc3: dict[str, Path]) -> None:
    path = nc3["two_rec"]
    res = NetCDF3Scanner(concat_dim="time")(str(path))
    _assert_refs_equal_netcdf4(path, res)
    hdr = _header(path)
    vs = {v.name: v for v in hdr.variables}
    assert hdr.recsize == vs["time"].vsize + vs["v"].vsize == 8 + 4
    start = datetime(2000, 1, 2, 3, tzinfo=UTC).timestamp()
    assert (res.sort_value, res.sort_last, res.sort_units) == (
        start + 3600, start + 26 * 3600, "seconds since 1970-01-01")  # fmt: skip
    r = NetCDF3Scanner(concat_dim="lat")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (10.0, 20.0, "degrees_north")
    for dim in ("label", "v", "nope"):  # char, 2-d, absent: no coordinate
        r = NetCDF3Scanner(concat_dim=dim)(str(path))
        assert (r.sort_value, r.sort_last, r.sort_units) == (None, None, None), dim
    assert NetCDF3Scanner()(str(path)).sort_value is None
    from refstore._values import decode_attr

    assert decode_attr(res.groups[""]["comment"]) == "two record variables"


def test_calendars_and_units_of_a_fixed_coordinate(nc3: dict[str, Path]) -> None:
    path = nc3["noleap"]
    _assert_refs_equal_netcdf4(path, NetCDF3Scanner()(str(path)))
    r = NetCDF3Scanner(concat_dim="time")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (5.0, 9.0, "days since 2000-01-01")  # noleap: raw
    r = NetCDF3Scanner(concat_dim="stamp")(str(path))
    t0 = datetime(2000, 1, 1, tzinfo=UTC).timestamp()
    assert (r.sort_value, r.sort_last, r.sort_units) == (t0 + 60, t0 + 180, "seconds since 1970-01-01")
    r = NetCDF3Scanner(concat_dim="raw")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (7.0, 9.0, "furlongs")
    r = NetCDF3Scanner(concat_dim="nounits")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (0.5, 2.5, None)


def test_no_records_and_an_empty_file(nc3: dict[str, Path]) -> None:
    res = NetCDF3Scanner(concat_dim="time")(str(nc3["no_rec"]))
    assert res.chunks.num_rows == 0
    assert (res.sort_value, res.sort_last, res.sort_units) == (None, None, None)
    metas = {m.name: m for m in res.arrays}
    assert metas["w"].shape == (0,) and metas["w"].chunks == (1,) and metas["w"].dims == ("time",)
    assert decode_fill(metas["w"].fill_value, np.dtype(">i4")) == _nc().default_fillvals["i4"]
    res = NetCDF3Scanner()(str(nc3["empty"]))
    assert res.arrays == () and res.chunks.num_rows == 0 and res.groups == {"": {}}


def test_streaming_record_count_is_taken_from_the_file_size(nc3: dict[str, Path], tmp_path: Path) -> None:
    """numrecs = 0xFFFFFFFF (streaming): the records the file holds (spec: count them)."""
    for key, at in (("one_rec", 4), ("two_rec", 4)):
        blob = bytearray(nc3[key].read_bytes())
        assert struct.unpack(">I", blob[at : at + 4])[0] == (4 if key == "one_rec" else 3)
        blob[at : at + 4] = b"\xff\xff\xff\xff"
        p = tmp_path / f"{key}.nc"
        p.write_bytes(bytes(blob))
        want = NetCDF3Scanner()(str(nc3[key]))
        got = NetCDF3Scanner()(str(p))
        assert got.chunks.to_pylist() == want.chunks.to_pylist(), key
        assert [m.shape for m in got.arrays] == [m.shape for m in want.arrays], key
    # streaming with no record variable: no records
    p = tmp_path / "fixed.nc"
    fixed = _classic([("x", 1)], [("v", [0], 4, 4, 0)])
    p.write_bytes(_classic([("x", 1)], [("v", [0], 4, 4, len(fixed))], numrecs=0xFFFFFFFF, tail=b"\0\0\0\1"))
    assert _header(p).numrecs == 0
    assert NetCDF3Scanner()(str(p)).chunks.to_pylist()[0]["length"] == 4


def _header(path: Path) -> Any:
    with path.open("rb") as fh:
        return read_header(fh, path.stat().st_size)


def _classic(dims: list[tuple[str, int]], variables: list[tuple[str, list[int], int, int, int]],
             numrecs: int = 0, tail: bytes = b"", version: int = 1) -> bytes:  # fmt: skip
    """A netCDF classic header by the specification's grammar (name, dimids, type, vsize, begin)."""

    def name(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">I", len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4)

    off = ">q" if version == 2 else ">I"
    out = b"CDF" + bytes([version]) + struct.pack(">I", numrecs)
    out += (struct.pack(">II", 0x0A, len(dims)) + b"".join(name(n) + struct.pack(">I", s) for n, s in dims)
            if dims else b"\0" * 8)  # fmt: skip
    out += b"\0" * 8
    if variables:
        out += struct.pack(">II", 0x0B, len(variables))
        for n, ids, t, vsize, begin in variables:
            out += name(n) + struct.pack(">I", len(ids)) + b"".join(struct.pack(">I", i) for i in ids)
            out += b"\0" * 8 + struct.pack(">II", t, vsize) + struct.pack(off, begin)
    else:
        out += b"\0" * 8
    return out + tail


def test_damaged_headers_are_refused_naming_the_problem(tmp_path: Path) -> None:
    def scan(data: bytes) -> str:
        p = tmp_path / "bad.nc"
        p.write_bytes(data)
        with pytest.raises(ScanError) as e:
            NetCDF3Scanner()(str(p))
        assert str(e.value).startswith(f"{p}: "), str(e.value)  # the file is named
        return str(e.value)

    good = _classic([("x", 2)], [("v", [0], 4, 8, 0)])
    begin = len(good)
    good = _classic([("x", 2)], [("v", [0], 4, 8, begin)], tail=b"\0\0\0\1\0\0\0\2")
    res = NetCDF3Scanner()(str(tmp_path / "g.nc")) if (tmp_path / "g.nc").write_bytes(good) else None
    assert res is not None and res.chunks.to_pylist()[0]["offset"] == begin
    assert scan(good[:begin] + b"\0\0\0\1").endswith("variable 'v' extends past the end of the file (truncated?)")
    assert scan(good[:10]).endswith("not a readable netCDF3 file: header ends early (truncated file?)")
    assert scan(b"CDF\x03" + good[4:]).endswith("not a readable netCDF3 file: not a netCDF3 file")
    assert scan(b"CD").endswith("not a netCDF3 file")
    assert scan(b"HDF\x01" + good[4:]).endswith("not a readable netCDF3 file: not a netCDF3 file")
    # ABSENT (tag 0) with a count, for each list: refused, never read as empty
    absent = good[:8] + b"\0\0\0\0" + good[12:]
    assert scan(absent).endswith("expected a dimension list, found tag 0x0")
    no_dims = _classic([], [("v", [], 4, 4, 0)])
    no_dims = _classic([], [("v", [], 4, 4, len(no_dims))], tail=b"\0\0\0\7")
    at = no_dims.index(struct.pack(">II", 0x0B, 1))
    assert scan(no_dims[:at] + struct.pack(">II", 0, 1) + no_dims[at + 8 :]).endswith(
        "expected a variable list, found tag 0x0")  # fmt: skip
    assert scan(no_dims[:16] + struct.pack(">II", 0, 1) + no_dims[24:]).endswith(
        "expected an attribute list, found tag 0x0")  # fmt: skip
    p = tmp_path / "nodims.nc"
    p.write_bytes(no_dims)
    hdr = _header(p)
    assert hdr.dims == [] and hdr.attrs == {} and [v.name for v in hdr.variables] == ["v"]
    # an empty dimension list written with its tag: the same as ABSENT
    tagged = no_dims[:8] + struct.pack(">II", 0x0A, 0) + no_dims[16:]
    p.write_bytes(tagged)
    assert _header(p).dims == []
    bad_tag = good[:8] + struct.pack(">I", 0x0B) + good[12:]
    assert scan(bad_tag).endswith("expected a dimension list, found tag 0xb")
    bad_type = _classic([("x", 2)], [("v", [0], 12, 8, begin)], tail=b"\0" * 8)
    assert scan(bad_type).endswith("variable 'v' has unknown type 12")
    bad_dim = _classic([("x", 2)], [("v", [1], 4, 8, begin)], tail=b"\0" * 8)
    assert scan(bad_dim).endswith("variable v refers to dimension 1, which does not exist")
    no_var_tag = _classic([("x", 2)], [])
    assert scan(no_var_tag[:-8] + struct.pack(">II", 0x0C, 1)).endswith("expected a variable list, found tag 0xc")
    gatt = _classic([("x", 2)], [])
    gatt = gatt[: len(gatt) - 16] + struct.pack(">II", 0x0A, 1) + gatt[-8:]
    assert scan(gatt).endswith("expected an attribute list, found tag 0xa")
    # records that do not fit: 5 records of 4 bytes from `begin`, file holds one
    rec = _classic([("t", 0)], [("r", [0], 4, 4, 0)], numrecs=5)
    rec = _classic([("t", 0)], [("r", [0], 4, 4, len(rec))], numrecs=5, tail=b"\0\0\0\1")
    assert scan(rec).endswith(f"5 records do not fit in a file of {len(rec)} bytes (truncated?)")
    fits = _classic([("t", 0)], [("r", [0], 4, 4, len(rec) - 4)], numrecs=2, tail=b"\0\0\0\1\0\0\0\2")
    p = tmp_path / "fits.nc"
    p.write_bytes(fits)
    assert [r["offset"] for r in NetCDF3Scanner()(str(p)).chunks.to_pylist()] == [len(fits) - 8, len(fits) - 4]


def test_attribute_values_by_the_specification(tmp_path: Path) -> None:
    """A hand-written attribute list: text with NUL padding, one value (a scalar), several (an
    array), 64-bit offsets (CDF-2); unknown attribute types refused."""

    def att(name: str, t: int, raw: bytes, n: int) -> bytes:
        b = name.encode()
        pad = b"\0" * ((4 - len(raw) % 4) % 4)
        return struct.pack(">I", len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4) + struct.pack(">II", t, n) + raw + pad

    attrs = [att("title", 2, b"hi", 2), att("one", 3, struct.pack(">h", -5), 1),
             att("two", 6, struct.pack(">dd", 1.5, -2.0), 2), att("u", 1, b"\x80\x7f\x01", 3)]  # fmt: skip
    head = b"CDF\x02" + struct.pack(">I", 0) + b"\0" * 8 + struct.pack(">II", 0x0C, len(attrs)) + b"".join(attrs)
    p = tmp_path / "a.nc"
    p.write_bytes(head + b"\0" * 8)
    hdr = _header(p)
    assert hdr.attrs["title"] == "hi" and hdr.version == 2
    assert hdr.attrs["one"] == -5 and np.asarray(hdr.attrs["one"]).dtype == np.dtype("int16")
    assert hdr.attrs["two"].tolist() == [1.5, -2.0] and hdr.attrs["two"].dtype == np.dtype("float64")
    assert hdr.attrs["u"].tolist() == [-128, 127, 1] and hdr.attrs["u"].dtype == np.dtype("int8")
    bad = b"CDF\x01" + struct.pack(">I", 0) + b"\0" * 8 + struct.pack(">II", 0x0C, 1) + att("x", 13, b"\0" * 4, 1)
    p.write_bytes(bad + b"\0" * 8)
    with pytest.raises(ValueError, match=r"^unknown nc_type 13$"):
        _header(p)


def test_fill_value_rule() -> None:
    """``_FillValue`` is taken when it is one value castable to the variable's type; otherwise
    the netCDF default for the type (netCDF4-python's ``default_fillvals``)."""
    dflt = _nc().default_fillvals
    for code, (dts, default) in NC3_TYPES.items():
        dt = np.dtype(dts)
        key = "S1" if dt.kind == "S" else dt.str[1:]
        assert np.asarray(default).astype(dt).tobytes() == np.asarray(dflt[key]).astype(dt).tobytes(), code
    f4 = np.dtype(">f4")
    assert _fill_value(None, 9.0, f4) == 9.0
    assert _fill_value(np.float64(-1.0), 9.0, f4) == -1.0 and _fill_value(np.float64(-1.0), 9.0, f4).dtype == np.dtype(
        "f4"
    )
    assert _fill_value(np.array([1.0, 2.0]), 9.0, f4) == 9.0
    assert _fill_value("text", 9.0, f4) == 9.0
    assert _fill_value(np.array(b"7"), 9.0, f4) == 9.0  # bytes that would cast: still text
    assert _fill_value("7", 9.0, f4) == 9.0 and _fill_value(np.array(["7"]), 9.0, f4) == 9.0
    one = _fill_value(np.array([3.0]), 9.0, f4)
    assert np.ndim(one) == 0 and one == 3.0  # one value, as a scalar
    assert _fill_value(np.array([b"x"]), b"\0", np.dtype("S1")) == b"x"
    assert _fill_value(np.array(["a"], object), 7, np.dtype(">i1")) == 7


def test_too_many_dimensions_are_recorded_unsupported(tmp_path: Path) -> None:
    n = MAX_DIMS + 1
    data = _classic([(f"d{i}", 1) for i in range(n)], [("v", list(range(n)), 1, 4, 0)])
    data = _classic([(f"d{i}", 1) for i in range(n)], [("v", list(range(n)), 1, 4, len(data))], tail=b"\1\0\0\0")
    p = tmp_path / "many.nc"
    p.write_bytes(data)
    res = NetCDF3Scanner()(str(p))
    (m,) = res.arrays
    assert m.status == "unsupported" and m.reason == f"{n} dimensions (at most {MAX_DIMS} are supported)"
    assert res.chunks.num_rows == 0 and m.chunks == (1,) * n


def test_text_attributes_by_the_specification(tmp_path: Path) -> None:
    """Text attributes: trailing NULs dropped (leading ones kept), other bytes kept, bytes
    that are no UTF-8 replaced (U+FFFD), never refused."""

    def att(name: str | bytes, raw: bytes) -> bytes:
        b = name.encode() if isinstance(name, str) else name
        pad = b"\0" * ((4 - len(raw) % 4) % 4)
        return (
            struct.pack(">I", len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4) + struct.pack(">II", 2, len(raw)) + raw + pad
        )

    texts: dict[str | bytes, bytes] = {"nul": b"hi\0", "lead": b"\0hi", "spaces": b"a b  ", "x": b"boX",
                                       "bad": b"caf\xe9!", b"n\xff": b"v"}  # fmt: skip
    attrs = b"".join(att(k, v) for k, v in texts.items())
    p = tmp_path / "t.nc"
    p.write_bytes(
        b"CDF\x01" + struct.pack(">I", 0) + b"\0" * 8 + struct.pack(">II", 0x0C, len(texts)) + attrs + b"\0" * 8
    )
    hdr = _header(p)
    assert hdr.attrs == {
        "nul": "hi",
        "lead": "\0hi",
        "spaces": "a b  ",
        "x": "boX",
        "bad": "caf\ufffd!",
        "n\ufffd": "v",
    }


def test_read_errors_and_dimension_limits(tmp_path: Path, nc3: dict[str, Path]) -> None:
    """An I/O error while reading the header is one line naming the file; a variable with
    exactly MAX_DIMS dimensions is supported; 64-bit _FillValue is exact."""
    from refstore.scan._types import SourceInfo

    class Broken(io.BytesIO):
        def read(self, *_a: Any) -> bytes:
            raise OSError(5, "Input/output error")

    with pytest.raises(ScanError, match=r"^where\.nc: cannot read: Input/output error$"):
        NetCDF3Scanner().scan_file(Broken(b""), SourceInfo("where.nc", 10, 0))

    class Bare(io.BytesIO):
        def read(self, *_a: Any) -> bytes:
            raise OSError("no errno")

    with pytest.raises(ScanError, match=r"^where\.nc: cannot read: no errno$"):
        NetCDF3Scanner().scan_file(Bare(b""), SourceInfo("where.nc", 10, 0))
    n = MAX_DIMS
    data = _classic([(f"d{i}", 1) for i in range(n)], [("v", list(range(n)), 1, 4, 0)])
    data = _classic([(f"d{i}", 1) for i in range(n)], [("v", list(range(n)), 1, 4, len(data))], tail=b"\1\0\0\0")
    p = tmp_path / "max.nc"
    p.write_bytes(data)
    (m,) = NetCDF3Scanner()(str(p)).arrays
    assert m.status == "ok" and m.reason is None and m.shape == (1,) * n
    netCDF4 = _oracle._netcdf4()
    big = tmp_path / "big.nc"
    with netCDF4.Dataset(big, "w", format="NETCDF3_64BIT_DATA") as nc:
        nc.createDimension("x", 2)
        v = nc.createVariable("v", "i8", ("x",), fill_value=np.int64(2**62 + 1))
        v[0] = 5
        u = nc.createVariable("u", "u8", ("x",), fill_value=np.uint64(2**64 - 3))
        u[1] = 6
    metas = {m.name: m for m in NetCDF3Scanner()(str(big)).arrays}
    with netCDF4.Dataset(big) as nc:
        for name in ("v", "u"):
            want = nc[name].getncattr("_FillValue")
            dt = np.dtype(">i8" if name == "v" else ">u8")
            got = decode_fill(metas[name].fill_value, dt)
            assert np.asarray(got, dt).tobytes() == np.asarray(want).astype(dt).tobytes(), name


@pytest.mark.parametrize("fill", [b"x", b"\0", None])
def test_char_fill_value_is_the_variables_fill(tmp_path: Path, fill: bytes | None) -> None:
    """A char variable's ``_FillValue`` (a char attribute, which the header reader gives as
    text) is its fill value, as netCDF4-python's ``getncattr`` gives it; none: NUL (netCDF's
    default for char)."""
    netCDF4 = _oracle._netcdf4()
    p = tmp_path / "c.nc"
    with netCDF4.Dataset(p, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("t", None)
        nc.createDimension("n", 2)
        v = nc.createVariable("c", "S1", ("t", "n"), **({} if fill is None else {"fill_value": fill}))
        v[0] = np.array([b"a", b"b"], "S1")
    (m,) = NetCDF3Scanner()(str(p)).arrays
    with netCDF4.Dataset(p) as nc:
        v = nc["c"]
        want = v.getncattr("_FillValue") if "_FillValue" in v.ncattrs() else netCDF4.default_fillvals["S1"]
    got = decode_fill(m.fill_value, np.dtype("S1"))
    assert np.asarray(got, "S1").tobytes() == np.asarray(want, "S1").tobytes()
    assert _fill_value("xy", b"\0", np.dtype("S1")) == b"\0"  # two chars are no one value: the default
    assert _fill_value("\xe9", b"\0", np.dtype("S1")) == b"\0"  # two bytes in UTF-8


def test_scalar_and_empty_fixed_variables(tmp_path: Path) -> None:
    """A 1-byte scalar is one 1-byte reference; a fixed variable of no elements has none (here an
    unlimited dimension in second place with no records, which only a hand-made header holds)."""
    body = _classic([("x", 2), ("t", 0)], [("s", [], 1, 4, 0), ("e", [0, 1], 4, 0, 0)])
    data = _classic([("x", 2), ("t", 0)], [("s", [], 1, 4, len(body)), ("e", [0, 1], 4, 0, len(body) + 4)],
                    tail=b"\x05\0\0\0")  # fmt: skip
    p = tmp_path / "scalar.nc"
    p.write_bytes(data)
    res = NetCDF3Scanner()(str(p))
    metas = {m.name: m for m in res.arrays}
    assert metas["s"].shape == () and metas["e"].shape == (2, 0)
    rows = res.chunks.to_pylist()
    assert [(r["array"], r["offset"], r["length"]) for r in rows] == [("s", len(body), 1)]
    assert data[rows[0]["offset"]] == 5


def test_a_calendar_that_is_not_text_is_the_standard_one(tmp_path: Path) -> None:
    """A numeric ``calendar`` attribute is no calendar name: the default (standard) applies, as
    for a missing one."""

    def att(name: str, t: int, raw: bytes, n: int) -> bytes:
        b = name.encode()
        pad = b"\0" * ((4 - len(raw) % 4) % 4)
        return struct.pack(">I", len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4) + struct.pack(">II", t, n) + raw + pad

    units = b"days since 2000-01-01"
    attrs = struct.pack(">II", 0x0C, 2) + att("units", 2, units, len(units)) + att("calendar", 4, b"\0\0\0\1", 1)

    def header(begin: int) -> bytes:
        out = b"CDF\x01" + struct.pack(">I", 0) + struct.pack(">II", 0x0A, 1) + struct.pack(">I", 4) + b"time"
        out += struct.pack(">I", 2) + b"\0" * 8 + struct.pack(">II", 0x0B, 1) + struct.pack(">I", 4) + b"time"
        return out + struct.pack(">II", 1, 0) + attrs + struct.pack(">III", 6, 16, begin)

    begin = len(header(0))
    p = tmp_path / "cal.nc"
    p.write_bytes(header(begin) + struct.pack(">dd", 1.0, 3.0))
    res = NetCDF3Scanner(concat_dim="time")(str(p))
    t0 = datetime(2000, 1, 1, tzinfo=UTC).timestamp()
    assert (res.sort_value, res.sort_last, res.sort_units) == (t0 + 86400, t0 + 3 * 86400, "seconds since 1970-01-01")


def test_record_edge_cases(tmp_path: Path) -> None:
    """Streaming record count with records of no bytes: none; records that end exactly one
    record short of the file: the variable that lacks its bytes is named."""
    dims = [("t", 0), ("x", 2)]
    head = _classic(dims, [("a", [0, 1], 1, 0, 0), ("b", [0, 1], 1, 0, 0)], numrecs=0xFFFFFFFF)
    data = _classic(dims, [("a", [0, 1], 1, 0, len(head)), ("b", [0, 1], 1, 0, len(head))], numrecs=0xFFFFFFFF,
                    tail=b"\0" * 8)  # fmt: skip
    p = tmp_path / "zero.nc"
    p.write_bytes(data)
    assert _header(p).numrecs == 0
    assert [m.shape for m in NetCDF3Scanner()(str(p)).arrays] == [(0, 2), (0, 2)]
    # one record variable of 4 bytes, 3 records claimed, 2 present: begin + 3*4 == size + 4
    head = _classic([("t", 0)], [("r", [0], 4, 4, 0)], numrecs=3)
    data = _classic([("t", 0)], [("r", [0], 4, 4, len(head))], numrecs=3, tail=b"\0\0\0\1\0\0\0\2")
    p.write_bytes(data)
    with pytest.raises(ScanError, match=r"variable 'r' extends past the end of the file \(truncated\?\)$"):
        NetCDF3Scanner()(str(p))

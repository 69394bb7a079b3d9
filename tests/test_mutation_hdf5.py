"""The HDF5/netCDF4 scanner against h5py and netCDF4-python, reference by reference, in-process
(no collection, no Lance: milliseconds a test, for the mutation run ``./dev mutate hdf5``).

Expected values: h5py's own chunk index (``get_chunk_info_by_coord``), storage offsets and sizes,
filter pipeline, fill value and values; netCDF4-python's dimension names; Python's date
arithmetic for CF times; the phony-dimension rule the README documents.
"""

from __future__ import annotations

import re
import zlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore._keys import MAX_DIMS, NO_DIM, SOURCE_KEY_COLUMNS
from refstore._values import decode_attr, decode_fill
from refstore.errors import ScanError
from refstore.fixtures.edge import write_edge_file, write_plugin_file
from refstore.scan.hdf5 import HDF5Scanner

from . import _oracle
from ._netcdf_names import netcdf_dims

if TYPE_CHECKING:
    from pathlib import Path

    from refstore.scan._types import ScanResult


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("h5")
    out = {"edge": write_edge_file(d / "edge.h5"), "plugin": write_plugin_file(d / "plugin.h5")}
    out["more"] = _write_more(d / "more.h5")
    out["nc"] = _write_nc4(d / "f.nc")
    out["nc_noleap"] = _write_nc4(d / "g.nc", calendar="noleap", units="days since 2000-01-01")
    out["nc_contig"] = _write_nc4_contiguous_time(d / "c.nc")
    return out


def _write_more(path: Path) -> Path:
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        f.create_dataset("pad", data=np.array([b"ab", b"cde"], "S4"))  # null-padded: no spacepad
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(5)
        tid.set_strpad(h5py.h5t.STR_SPACEPAD)
        sp = h5py.Dataset(h5py.h5d.create(f.id, b"spaced", tid, h5py.h5s.create_simple((3,))))
        sp[...] = np.array([b"ab   ", b"abcde", b"x    "], "S5")
        ch = h5py.h5t.C_S1.copy()
        ch.set_size(3)
        ch.set_strpad(h5py.h5t.STR_SPACEPAD)
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_chunk((2,))
        spc = h5py.Dataset(h5py.h5d.create(f.id, b"spaced_chunked", ch, h5py.h5s.create_simple((4,)), plist))
        spc[...] = np.array([b"a  ", b"bb ", b"ccc", b"d  "], "S3")
        f.create_dataset("same_size", data=np.zeros((4, 4, 3), "<i2"))  # phony_dim_4, phony_dim_4_1
        f.create_dataset("compound", data=np.zeros(3, [("a", "<i4"), ("b", "<f8")]))
        f.create_dataset("vlen", data=["a", "bb"], dtype=h5py.string_dtype())
        f.create_dataset("enum_like_bool", data=np.array([True, False, True]))
        f.create_dataset("complex", data=(np.arange(4) + 1j).astype("<c16"))
        f.create_dataset("ref", data=np.array([f.ref], h5py.ref_dtype))
        f.create_dataset("null", data=h5py.Empty("<f4"))
        f.create_dataset("opaque", data=np.zeros(2, "V4"))
        f.create_dataset("dims9", shape=(1,) * (MAX_DIMS + 1), dtype="<i1", fillvalue=5)
        f.create_dataset("dims_max", data=np.full((1,) * MAX_DIMS, 3, "<i1"))
        f.create_dataset("Xray", data=np.arange(2, dtype="<i1"))  # a name starting with X
        for cname, cshape in ((b"compact_1", (1, 3)), (b"compact_0", (0,))):
            cpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            cpl.set_layout(h5py.h5d.COMPACT)
            cds = h5py.Dataset(h5py.h5d.create(f.id, cname, h5py.h5t.STD_I32LE, h5py.h5s.create_simple(cshape), cpl))
            if cds.size:
                cds[...] = np.array([[7, 8, 9]], "<i4")
        f.create_dataset("dims9s", shape=(1,) * (MAX_DIMS + 1), dtype="S2", fillvalue=b"zz")
        layout = h5py.VirtualLayout(shape=(3,), dtype="<i4")
        layout[:] = h5py.VirtualSource(".", "src", shape=(3,))
        f.create_dataset("src", data=np.arange(3, dtype="<i4"))
        f.create_virtual_dataset("vds", layout, fillvalue=-1)
        f.create_dataset("oversized", data=np.arange(3, dtype="<i4"), chunks=(8,), maxshape=(None,))
        big = np.arange(300_000, dtype="<f8")
        f.create_dataset("oversized_big", data=big, chunks=(400_000,), maxshape=(None,))  # 2.4 MB: not inlined
        f.create_dataset("chunked_unwritten_part", shape=(6, 6), chunks=(4, 4), dtype=">i8", fillvalue=3)
        f["chunked_unwritten_part"][4:6, 0:2] = 9
        f.create_dataset("contig_empty", shape=(0,), dtype="<f4")
        f.create_dataset("chunked_empty", shape=(0, 3), chunks=(2, 3), dtype="<f4", maxshape=(None, 3),
                         compression="gzip", compression_opts=3)  # fmt: skip
        mib = np.arange((1 << 20) // 8, dtype="<f8")  # 1 MiB exactly: the most held inline
        f.create_dataset("oversized_1mib", data=mib, chunks=(len(mib) + 1,), maxshape=(None,))
        e = f.create_dataset("external", shape=(4,), dtype="<i4", external=[("ext.bin", 0, 16)])
        del e
        f.create_dataset("deflated9", data=rng.integers(0, 9, 64).astype("<i4"), chunks=(16,), compression=9)
        f.create_dataset("shuffled_f8", data=rng.normal(size=20), chunks=(7,), shuffle=True)
        g = f.create_group("g")
        g.attrs["text"] = "héllo"
        g.attrs["nums"] = np.array([1.5, 2.5], ">f4")
        g.attrs["refattr"] = f.ref  # h5py reads it; it has no JSON form: left out
        aid = h5py.h5a.create(f.id, b"raw\xffname", h5py.h5t.STD_I32LE, h5py.h5s.create(h5py.h5s.SCALAR))
        aid.write(np.array(1, "<i4"))  # a name that is not valid UTF-8
        # dimension scales: a scale and an array attached along both axes
        x = f.create_dataset("x", data=np.arange(5, dtype="<f4"))
        x.make_scale("x")
        y = f.create_dataset("y", data=np.arange(2, dtype="<i4"))
        y.make_scale("y")
        a = f.create_dataset("a", data=np.ones((2, 5), "<f4"))
        a.dims[0].attach_scale(y)
        a.dims[1].attach_scale(x)
    return path


def _write_nc4(path: Path, *, calendar: str = "standard", units: str = "hours since 2020-01-01 06:00") -> Path:
    netCDF4 = _oracle._netcdf4()  # leaves no HDF5_PLUGIN_PATH behind for h5py

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 3)
        nc.createDimension("nv", 2)  # a dimension without a variable
        t = nc.createVariable("time", "f8", ("time",))
        t.units = units
        t.calendar = calendar
        t[:] = [12.0, 36.0]
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat[:] = [1, 2, 3]
        v = nc.createVariable("sst", "i2", ("time", "lat"), zlib=True, complevel=2, fill_value=np.int16(-999))
        v[:] = np.array([[1, 2, 3], [4, 5, 6]], "i2")
        v.scale_factor = np.float32(0.01)
        b = nc.createVariable("bnds", "f4", ("lat", "nv"))
        b[:] = np.arange(6, dtype="f4").reshape(3, 2)
        nc.createGroup("sub").createVariable("q", "u1", ("lat",))[:] = [7, 8, 9]
    return path


def _write_nc4_contiguous_time(path: Path) -> Path:
    netCDF4 = _oracle._netcdf4()  # leaves no HDF5_PLUGIN_PATH behind for h5py

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", 3)
        nc.createDimension("x", 4)
        t = nc.createVariable("time", "i4", ("time",), contiguous=True)
        t.units = "days since 1999-12-31T00:00:00Z"
        t[:] = [10, 11, 12]
        v = nc.createVariable("v", "<f8", ("time", "x"), contiguous=True)
        v[:] = np.arange(12, dtype="f8").reshape(3, 4)
        v.long_name = "vee"
        w = nc.createVariable("w", "<f4", ("x", "time"), contiguous=True)  # time not first: not split
        w[:] = np.arange(12, dtype="f4").reshape(4, 3)
        s = nc.createVariable("one", "<f4", ("x",), contiguous=True)
        s[:] = 1
    return path


def _codecs_h5py(ds: Any) -> list[dict[str, Any]]:
    """The filter pipeline as h5py reports it, in refstore's codec spelling (README: pipeline order)."""
    plist = ds.id.get_create_plist()
    out: list[dict[str, Any]] = []
    for i in range(plist.get_nfilters()):
        code, _f, cd, _n = plist.get_filter(i)
        if code == h5py.h5z.FILTER_DEFLATE:
            out.append({"id": "zlib", "level": ds.compression_opts if ds.compression == "gzip" else int(cd[0])})
        elif code == h5py.h5z.FILTER_SHUFFLE:
            out.append({"id": "shuffle", "elementsize": ds.dtype.itemsize})
        elif code == h5py.h5z.FILTER_FLETCHER32:
            out.append({"id": "fletcher32"})
        elif code == h5py.h5z.FILTER_SZIP:
            keys = ("mask", "pixels_per_block", "bits_per_pixel", "pixels_per_scanline")
            out.append({"id": "szip", **{k: int(v) for k, v in zip(keys, cd[:4], strict=True)}})
    return out


def _same_attr(a: Any, b: Any) -> bool:
    """Equal values and type (byte order aside: attributes are values, not stored layouts)."""
    da, db = np.asarray(a).dtype, np.asarray(b).dtype
    return bool(np.array_equal(a, b)) and (da.kind, da.itemsize) == (db.kind, db.itemsize)


def _rows(res: ScanResult, name: str) -> list[dict[str, Any]]:
    return [r for r in res.chunks.to_pylist() if r["array"] == name]


def _check_file(path: Path, res: ScanResult, *, nc_dims: dict[str, tuple[str, ...]] | None = None) -> set[str]:
    """Every array of ``res`` against h5py; returns the names checked as ``ok``."""
    blob = path.read_bytes()
    metas = {m.name: m for m in res.arrays}
    ok: set[str] = set()
    assert res.source.size == len(blob) and res.format == "hdf5"
    for r in res.chunks.to_pylist():  # keys past an array's dimensions are NO_DIM
        nd = metas[r["array"]].ndim
        assert all(r[c] == NO_DIM for c in SOURCE_KEY_COLUMNS[nd:]), r
    with h5py.File(path, "r") as f:
        for name, m in metas.items():
            ds = f[name]
            if m.status != "ok":
                continue
            ok.add(name)
            if m.codecs == ({"id": "vlen-utf8"},):  # variable-length strings, held inline (test_vlen_strings)
                from numcodecs import VLenUTF8

                (row,) = _rows(res, name)
                got = np.asarray(VLenUTF8().decode(row["inline"]), dtype=object).reshape(ds.shape)
                assert np.array_equal(got, np.asarray(ds.asstr()[()], dtype=object)), name
                continue
            dt = ds.dtype
            assert m.dtype == dt.str and m.np_dtype == dt, name
            assert m.shape == ds.shape, name
            if nc_dims is not None and name in nc_dims:
                assert m.dims == nc_dims[name], name
            fill = decode_fill(m.fill_value, dt)
            assert np.asarray(fill, dt).tobytes() == np.asarray(ds.fillvalue, dt).tobytes(), name
            rows = _rows(res, name)
            layout = ds.id.get_create_plist().get_layout()
            expected = np.asarray(ds[()])
            if rows and rows[0]["inline"] is not None:  # compact or small oversized: values as h5py reads them
                full = tuple(max(s, 1) for s in ds.shape)
                assert m.chunks == full or m.chunks[0] == 1, name
                assert all(r["offset"] is None and r["length"] is None for r in rows), name
                assert b"".join(r["inline"] for r in rows) == expected.tobytes(), name
            elif layout == h5py.h5d.CHUNKED:
                assert m.chunks == ds.chunks, name
                pads = [{"id": "spacepad"}] if dt.kind == "S" and ds.id.get_type().get_strpad() == 2 else []
                assert list(m.codecs) == _codecs_h5py(ds) + pads, name
                assert len(rows) == ds.id.get_num_chunks(), name
                for r in rows:
                    key = tuple(r[c] for c in SOURCE_KEY_COLUMNS[: len(ds.shape)])
                    info = ds.id.get_chunk_info_by_coord(tuple(k * c for k, c in zip(key, ds.chunks, strict=True)))
                    assert (r["offset"], r["length"], r["filter_mask"]) == (
                        info.byte_offset, info.size, info.filter_mask), (name, key)  # fmt: skip
                    assert r["inline"] is None, name
                    if not m.codecs:
                        region = tuple(slice(k * c, (k + 1) * c) for k, c in zip(key, ds.chunks, strict=True))
                        want = np.full(ds.chunks, ds.fillvalue, dt)  # HDF5 pads edge chunks with the fill
                        part = expected[region]
                        want[tuple(slice(0, s) for s in part.shape)] = part
                        if r["length"] != want.nbytes:  # a chunk larger than the array
                            continue
                        assert blob[r["offset"] : r["offset"] + r["length"]] == want.tobytes(), (name, key)
            elif layout == h5py.h5d.CONTIGUOUS and ds.id.get_offset() is not None and ds.size and not rows[0]["inline"]:
                assert m.chunks == ds.shape or m.chunks[0] == 1, name
                if m.chunks == ds.shape:
                    assert len(rows) == 1 and rows[0]["offset"] == ds.id.get_offset(), name
                    assert rows[0]["length"] == ds.id.get_storage_size() == expected.nbytes, name
                off = [r["offset"] for r in rows]
                raw = b"".join(blob[o : o + r["length"]] for o, r in zip(off, rows, strict=True))
                if m.codecs == ({"id": "spacepad"},):  # HDF5 reads trailing spaces as NULs
                    assert b" " in raw, name
                    raw = np.array([x.rstrip(b" ") for x in np.frombuffer(raw, dt)], dt).tobytes()
                else:
                    assert m.codecs == (), name
                assert raw == expected.tobytes(), name
            else:  # nothing written
                assert ds.size == 0 or ds.id.get_offset() is None or ds.id.get_num_chunks() == 0, name
                assert m.chunks == (ds.chunks or tuple(max(s, 1) for s in ds.shape)), name
    return ok


def test_edge_file_against_h5py(files: dict[str, Path]) -> None:
    path = files["edge"]
    res = HDF5Scanner()(str(path))
    ok = _check_file(path, res)
    metas = {m.name: m for m in res.arrays}
    with h5py.File(path) as f:
        names: list[str] = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        assert sorted(metas) == sorted(names)
        assert set(res.groups) == {"", "grp1", "grp1/sub"}
        for k in f.attrs:
            assert _same_attr(decode_attr(res.groups[""][k]), f.attrs[k]), k
        t = f["grp1/sub/T"]
        for k in t.attrs:
            assert _same_attr(decode_attr(metas["grp1/sub/T"].attrs[k]), t.attrs[k]), k
        assert decode_attr(metas["plain_square"].attrs["comment"]) in (b"bytes attribute", "bytes attribute")
        nc_dims = netcdf_dims(path)
        assert nc_dims is not None and all(metas[k].dims == v for k, v in nc_dims.items())  # netCDF-C's names
        assert metas["grp1/sub/T"].dims == ("phony_dim_0", "phony_dim_1", "phony_dim_2")  # (nested group first)
        assert metas["scalar"].shape == () and metas["scalar"].chunks == () and metas["scalar"].dims == ()
        so = f["scaleoffset"].id.get_create_plist().get_filter(0)[3].decode()
        assert metas["scaleoffset"].reason == f"HDF5 filter {so} (id 6) has no decoder (numcodecs/imagecodecs)"
        assert metas["scaleoffset"].status == "unsupported" and metas["scaleoffset"].chunks == (5, 5)
        assert decode_fill(metas["scaleoffset"].fill_value, np.dtype("<i4")) == f["scaleoffset"].fillvalue
        sz = f["szip"].id.get_create_plist().get_filter(0)[2]
        assert metas["szip"].codecs == ({"id": "szip", "mask": sz[0], "pixels_per_block": sz[1],
                                         "bits_per_pixel": sz[2], "pixels_per_scanline": sz[3]},)  # fmt: skip
        fm = [r for r in _rows(res, "filter_mask") if r["k0"] == 1]
        assert fm[0]["filter_mask"] == 1
    assert {"partial", "never_written", "compact", "contig_be", "fixed_strings", "grp1/sub/T"} <= ok
    assert _rows(res, "never_written") == [] and _rows(res, "contig_unwritten") == []
    assert metas["empty"].shape == (0, 4) and metas["empty"].chunks == (10, 4) and metas["empty"].status == "ok"
    assert metas["contig_unwritten"].chunks == (5, 5)
    assert res.sort_value is None and res.sort_last is None and res.sort_units is None


def test_plugin_filters_against_h5py(files: dict[str, Path]) -> None:
    import hdf5plugin

    path = files["plugin"]
    res = HDF5Scanner()(str(path))
    metas = {m.name: m for m in res.arrays}
    with h5py.File(path) as f:
        zcd = f["zstd"].id.get_create_plist().get_filter(0)[2]
        assert zcd[0] == 3
        assert metas["zstd"].codecs == ({"id": "zstd", "level": 3},)
        assert metas["lz4"].codecs == ({"id": "lz4h5"},)
        assert metas["blosc"].codecs == ({"id": "blosc"},) == metas["blosc_zstd"].codecs
        assert metas["bitshuffle"].status == "unsupported"
        bs = f["bitshuffle"].id.get_create_plist().get_filter(0)
        label = bs[3].decode().split(";")[0].strip()
        assert bs[0] == hdf5plugin.BSHUF_ID
        assert metas["bitshuffle"].reason == f"HDF5 filter {label or 'unknown'} (id {bs[0]}) has no decoder here"
        for name in ("zstd", "lz4", "blosc", "blosc_zstd"):
            ds = f[name]
            rows = _rows(res, name)
            assert len(rows) == ds.id.get_num_chunks()
            for r in rows:
                info = ds.id.get_chunk_info_by_coord((r["k0"] * 16, r["k1"] * 25))
                assert (r["offset"], r["length"]) == (info.byte_offset, info.size)


def test_more_layouts_and_types_against_h5py(files: dict[str, Path]) -> None:
    path = files["more"]
    res = HDF5Scanner()(str(path))
    ok = _check_file(path, res)
    metas = {m.name: m for m in res.arrays}
    assert {"pad", "spaced", "spaced_chunked", "same_size", "enum_like_bool", "complex", "oversized",
            "oversized_big", "chunked_unwritten_part", "deflated9", "shuffled_f8", "a", "x", "y"} <= ok  # fmt: skip
    assert metas["spaced"].codecs == ({"id": "spacepad"},) and metas["pad"].codecs == ()
    assert metas["spaced_chunked"].codecs == ({"id": "spacepad"},)
    d0, d1, d2 = metas["same_size"].dims  # (netCDF-C cannot open this file: its rules, not its word)
    assert d0 != d1 and d2 == "phony_dim_3" and all(d.startswith("phony_dim_") for d in (d0, d1))
    assert metas["a"].dims == ("y", "x") and metas["x"].dims == ("x",) and metas["y"].dims == ("y",)
    assert metas["compound"].reason == "compound dtype is not supported"
    assert metas["vlen"].status == "ok" and metas["vlen"].dtype == "|O"  # held inline
    assert metas["ref"].reason == "variable-length dtype has no fixed byte layout"  # object references
    assert metas["opaque"].reason == "dtype |V4 is not supported" and metas["opaque"].fill_value is None
    assert metas["null"].reason == "null dataspace holds no values" and metas["null"].shape == ()
    assert metas["null"].chunks == () and metas["external"].chunks == (4,)
    assert metas["dims_max"].status == "ok" and len(_rows(res, "dims_max")) == 1 and "Xray" in metas
    assert metas["compact_1"].chunks == (1, 3) and _rows(res, "compact_1")[0]["inline"] == np.array(
        [[7, 8, 9]], "<i4").tobytes()  # fmt: skip
    assert metas["compact_0"].chunks == (1,) and metas["compact_0"].shape == (0,) and _rows(res, "compact_0") == []
    assert metas["dims9"].reason == f"{MAX_DIMS + 1} dimensions (at most {MAX_DIMS} are supported)"
    assert metas["dims9"].chunks == (1,) * (MAX_DIMS + 1)
    assert metas["dims9s"].status == "unsupported" and decode_fill(metas["dims9s"].fill_value, np.dtype("S2")) == b"zz"
    assert (metas["vds"].status, metas["vds"].reason, metas["vds"].chunks) == (
        "unsupported", "HDF5 virtual dataset (VDS) layout", (3,))  # fmt: skip
    assert decode_fill(metas["vds"].fill_value, np.dtype("<i4")) == -1 and _rows(res, "vds") == []
    assert metas["external"].reason == "data stored in external raw files"
    for name in ("compound", "ref", "opaque", "null", "dims9", "external"):
        assert metas[name].status == "unsupported" and _rows(res, name) == [], name
    with h5py.File(path) as f:
        assert decode_fill(metas["dims9"].fill_value, np.dtype("<i1")) == f["dims9"].fillvalue
        assert decode_fill(metas["external"].fill_value, np.dtype("<i4")) == f["external"].fillvalue
    assert metas["compound"].fill_value is None and metas["vlen"].fill_value is None
    assert "vlen" in ok
    # oversized chunks: small arrays held inline with the whole shape as one chunk; big ones referenced
    assert metas["oversized"].chunks == (3,) and _rows(res, "oversized")[0]["inline"] is not None
    assert metas["oversized_big"].chunks == (400_000,) and _rows(res, "oversized_big")[0]["inline"] is None
    assert [(r["k0"], r["k1"]) for r in _rows(res, "chunked_unwritten_part")] == [(1, 0)]
    for name in ("contig_empty", "chunked_empty"):
        assert metas[name].status == "ok" and _rows(res, name) == [], name
    assert metas["chunked_empty"].chunks == (2, 3) and metas["contig_empty"].chunks == (1,)
    assert metas["chunked_empty"].codecs == ({"id": "zlib", "level": 3},)
    assert _rows(res, "oversized_1mib")[0]["inline"] is not None and metas["oversized_1mib"].chunks == (1 << 17,)
    g = res.groups["g"]
    assert decode_attr(g["text"]) == "héllo" and "refattr" not in g
    nums = decode_attr(g["nums"])
    assert _same_attr(nums, np.array([1.5, 2.5], ">f4"))
    with h5py.File(path) as f:
        (raw_name,) = list(f.attrs)
        assert raw_name == b"raw\xffname"  # h5py hands it over as bytes
    assert list(res.groups[""]) == ["raw\ufffdname"] and decode_attr(res.groups[""]["raw\ufffdname"]) == 1


def _nc_dims(path: Path) -> dict[str, tuple[str, ...]]:
    netCDF4 = _oracle._netcdf4()  # leaves no HDF5_PLUGIN_PATH behind for h5py

    out: dict[str, tuple[str, ...]] = {}
    with netCDF4.Dataset(path) as nc:

        def walk(g: Any, prefix: str) -> None:
            for n, v in g.variables.items():
                out[prefix + n] = tuple(v.dimensions)
            for n, sub in g.groups.items():
                walk(sub, prefix + n + "/")

        walk(nc, "")
    return out


def test_netcdf4_dims_coordinates_and_time(files: dict[str, Path]) -> None:
    path = files["nc"]
    dims = _nc_dims(path)
    res = HDF5Scanner(concat_dim="time")(str(path))
    _check_file(path, res, nc_dims=dims)
    metas = {m.name: m for m in res.arrays}
    assert sorted(metas) == sorted(dims)  # "nv" (a dimension without a variable) is no array
    assert "_Netcdf4Dimid" not in metas["lat"].attrs and "DIMENSION_LIST" not in metas["sst"].attrs
    assert "_NCProperties" not in res.groups[""]
    # the unlimited time coordinate (chunks of 512 > its 2 values) is held inline, in slabs along time
    assert metas["time"].chunks == (1,) and metas["time"].shape == (2,)
    times = sorted(_rows(res, "time"), key=lambda r: r["k0"])
    assert [np.frombuffer(r["inline"], "<f8")[0] for r in times] == [12.0, 36.0]
    start = datetime(2020, 1, 1, 6, tzinfo=UTC).timestamp()
    assert (res.sort_value, res.sort_last, res.sort_units) == (
        start + 12 * 3600, start + 36 * 3600, "seconds since 1970-01-01")  # fmt: skip
    assert HDF5Scanner(concat_dim="lat")(str(path)).sort_value == 1.0
    assert HDF5Scanner(concat_dim="lat")(str(path)).sort_last == 3.0
    r = HDF5Scanner(concat_dim="nv")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (None, None, None)
    r = HDF5Scanner(concat_dim="bnds")(str(path))  # 2-d: no coordinate
    assert (r.sort_value, r.sort_last, r.sort_units) == (None, None, None)
    # a calendar cf_seconds does not decode: raw values and their units
    r = HDF5Scanner(concat_dim="time")(str(files["nc_noleap"]))
    assert (r.sort_value, r.sort_last, r.sort_units) == (12.0, 36.0, "days since 2000-01-01")


def test_contiguous_along_concat_dim_is_split_into_slabs(files: dict[str, Path]) -> None:
    path = files["nc_contig"]
    plain = {m.name: m for m in HDF5Scanner()(str(path)).arrays}
    res = HDF5Scanner(concat_dim="time")(str(path))
    _check_file(path, res, nc_dims=_nc_dims(path))
    metas = {m.name: m for m in res.arrays}
    blob = path.read_bytes()
    with h5py.File(path) as f:
        for name in ("time", "v"):
            ds = f[name]
            assert plain[name].chunks == ds.shape
            same = ("name", "dims", "shape", "dtype", "fill_value", "codecs", "attrs", "status", "reason")
            assert all(getattr(metas[name], k) == getattr(plain[name], k) for k in same), name
            assert metas[name].status == "ok" and metas[name].attrs
            assert metas[name].chunks == (1, *ds.shape[1:]), name
            rows = sorted(_rows(res, name), key=lambda r: r["k0"])
            assert [r["k0"] for r in rows] == list(range(ds.shape[0]))
            for i, r in enumerate(rows):
                assert blob[r["offset"] : r["offset"] + r["length"]] == np.asarray(ds[i]).tobytes(), (name, i)
        for name in ("w", "one"):
            assert metas[name].chunks == f[name].shape and len(_rows(res, name)) == 1, name
    start = datetime(1999, 12, 31, tzinfo=UTC).timestamp()
    assert (res.sort_value, res.sort_last) == (start + 10 * 86400, start + 12 * 86400)


def test_compact_time_coordinate_is_split_and_ordered(tmp_path: Path) -> None:
    """A compact (inline) coordinate along the concat dimension: slabs of its own bytes, and the
    first/last values read from them."""
    path = tmp_path / "compact.h5"
    with h5py.File(path, "w") as f:
        space = h5py.h5s.create_simple((4,))
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_layout(h5py.h5d.COMPACT)
        t = h5py.Dataset(h5py.h5d.create(f.id, b"time", h5py.h5t.IEEE_F64LE, space, plist))
        t[...] = np.array([5.0, 6.0, 7.5, 9.0])
        t.make_scale("time")
        t.attrs["units"] = b"minutes since 2001-02-03 04:05:06"
        t.attrs["calendar"] = b"gregorian"
    res = HDF5Scanner(concat_dim="time")(str(path))
    (m,) = res.arrays
    assert m.chunks == (1,)
    rows = sorted(_rows(res, "time"), key=lambda r: r["k0"])
    assert [np.frombuffer(r["inline"], "<f8")[0] for r in rows] == [5.0, 6.0, 7.5, 9.0]
    start = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC).timestamp()
    assert (res.sort_value, res.sort_last, res.sort_units) == (start + 300, start + 540, "seconds since 1970-01-01")


def test_time_without_units_and_string_coordinates(tmp_path: Path) -> None:
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("time", data=np.array([3, 8], "<i8"), chunks=(1,))  # chunked: read through h5py
        f.create_dataset("label", data=np.array([b"a", b"b"]))
        f.create_dataset("empty", shape=(0,), dtype="<f8")
    r = HDF5Scanner(concat_dim="time")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (3.0, 8.0, None)
    for dim in ("label", "empty", "absent"):
        r = HDF5Scanner(concat_dim=dim)(str(path))
        assert (r.sort_value, r.sort_last, r.sort_units) == (None, None, None), dim


def test_a_chunk_off_the_grid_and_open_errors(tmp_path: Path) -> None:
    bad = tmp_path / "not.h5"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 8)
    with pytest.raises(ScanError, match=r"^.*not\.h5: truncated HDF5 file \(|cannot open as HDF5: "):
        HDF5Scanner()(str(bad))
    plain = tmp_path / "text.h5"
    plain.write_bytes(b"hello world" * 100)
    with pytest.raises(ScanError, match=r"text\.h5: not an HDF5/netCDF4 file \(no HDF5 signature\)$"):
        HDF5Scanner()(str(plain))
    good = tmp_path / "g.h5"
    with h5py.File(good, "w") as f:
        f.create_dataset("d", data=np.arange(10, dtype="<i4"), chunks=(4,))
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 2])
    with pytest.raises(ScanError, match=r"g\.h5: truncated HDF5 file \("):
        HDF5Scanner()(str(good))


@pytest.mark.parametrize("edit", ["signature", "off_grid"])
def test_a_read_error_after_opening_names_the_file_and_hdf5s_reason(tmp_path: Path, edit: str) -> None:
    """A chunk B-tree damaged by hand (HDF5 spec, version 1 B-tree node: "TREE", node type 1 for
    raw data chunks, level, entries used, siblings, then key / child pairs; a 1-D chunk key is
    size(4) filter mask(4) offsets(2 x 8)): its signature, or a key's offset moved off the chunk
    grid (4 -> 5 elements). The file opens; its chunks cannot be listed (h5py's own error says
    why). The scan refuses the file in one line naming it and carrying HDF5's reason."""
    path = tmp_path / f"{edit}.h5"
    with h5py.File(path, "w", libver="earliest") as f:
        f.create_dataset("d", data=np.arange(10, dtype="<i4"), chunks=(4,))
    data = bytearray(path.read_bytes())
    trees = [m.start() for m in re.finditer(b"TREE", bytes(data)) if data[m.start() + 4] == 1]
    assert len(trees) == 1 and int.from_bytes(data[trees[0] + 6 : trees[0] + 8], "little") == 3
    node = trees[0]
    if edit == "signature":
        data[node : node + 4] = b"TREX"
    else:
        key1 = node + 24 + 24 + 8  # node header, key 0, child 0
        assert int.from_bytes(data[key1 + 8 : key1 + 16], "little") == 4
        data[key1 + 8 : key1 + 16] = (5).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    with h5py.File(path, "r") as f, pytest.raises((OSError, RuntimeError)) as h5err:
        f["d"].id.get_num_chunks()
    reason = re.search(r"\([^()]*\)$", str(h5err.value))
    assert reason is not None, str(h5err.value)
    with pytest.raises(ScanError) as err:
        HDF5Scanner()(str(path))
    text = str(err.value)
    assert text.startswith(f"{path}: cannot be read as HDF5: ") and text.endswith(reason.group(0)), text
    assert "\n" not in text


def test_filter_table_fallbacks_from_a_raw_pipeline(tmp_path: Path) -> None:
    """Filters set through HDF5's low-level API with the client data HDF5 itself stores
    (h5py's view of the pipeline is the oracle)."""
    path = tmp_path / "raw.h5"
    with h5py.File(path, "w") as f:
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_chunk((4,))
        plist.set_shuffle()
        plist.set_deflate(1)
        plist.set_fletcher32()
        d = h5py.Dataset(h5py.h5d.create(f.id, b"d", h5py.h5t.STD_I16BE, h5py.h5s.create_simple((10,)), plist))
        d[...] = np.arange(10)
    from refstore.scan._hdf5_codecs import filters_to_codecs

    with h5py.File(path) as f:
        pl = f["d"].id.get_create_plist()
        cd = [pl.get_filter(i)[2] for i in range(pl.get_nfilters())]
        assert filters_to_codecs(pl, f["d"].dtype) == (
            ({"id": "shuffle", "elementsize": cd[0][0]}, {"id": "zlib", "level": cd[1][0]}, {"id": "fletcher32"}),
            None)  # fmt: skip
        assert cd[0][0] == 2 and cd[1][0] == 1
    rows = _rows(HDF5Scanner()(str(path)), "d")
    blob = path.read_bytes()
    with h5py.File(path) as f:
        for r in rows:
            payload = blob[r["offset"] : r["offset"] + r["length"] - 4]  # fletcher32 adds 4 bytes
            raw = np.frombuffer(zlib.decompress(payload), "u1").reshape(2, 4).T.tobytes()  # unshuffle
            want = np.zeros(4, ">i2")
            part = f["d"][r["k0"] * 4 : r["k0"] * 4 + 4]
            want[: len(part)] = part
            assert raw == want.tobytes()


def test_open_reasons_from_h5pys_own_errors(tmp_path: Path) -> None:
    """The one-line reasons, built from the OSError h5py raises (its text is the oracle)."""
    from refstore.scan.hdf5 import _first_line, _open_reason

    assert _first_line(ValueError("first\nsecond")) == "first"
    assert _first_line(ValueError("  \n")) == "ValueError" and _first_line(KeyError()) == "KeyError"
    full = tmp_path / "full.h5"
    with h5py.File(full, "w") as f:
        f.create_dataset("d", data=np.arange(1000))
    cut = tmp_path / "cut.h5"
    cut.write_bytes(full.read_bytes()[:3000])
    with pytest.raises(OSError) as e:
        h5py.File(cut, "r")
    text = str(e.value)
    inner = text.split("truncated file:")[1].strip(" )")
    assert "eof = 3000" in inner
    assert _open_reason(e.value) == f"truncated HDF5 file ({inner})"
    with pytest.raises(ScanError, match=rf"cut\.h5: truncated HDF5 file \({re.escape(inner)}\)$"):
        HDF5Scanner()(str(cut))
    with pytest.raises(OSError) as e:
        h5py.File(tmp_path / "missing.h5", "r")
    assert "No such file" in str(e.value)
    assert _open_reason(e.value) == f"cannot open: {str(e.value).splitlines()[0]}"
    assert _open_reason(OSError("odd\nmore")) == "cannot open as HDF5: odd"
    assert _open_reason(OSError()) == "cannot open as HDF5: OSError"


def test_what_is_split_along_the_concat_dim(tmp_path: Path) -> None:
    """Slabs of 1 along the concat dimension for uncompressed whole arrays of more than one
    step; a space-padded string array (a codec) and a 2-step array: as documented."""
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        t = f.create_dataset("time", data=np.array([1.0, 2.0]))
        t.make_scale("time")
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(3)
        tid.set_strpad(h5py.h5t.STR_SPACEPAD)
        sp = h5py.Dataset(h5py.h5d.create(f.id, b"label", tid, h5py.h5s.create_simple((2,))))
        sp[...] = np.array([b"a  ", b"bb "], "S3")
        sp.dims[0].attach_scale(t)
        one = f.create_dataset("one", data=np.array([4.0]))
        one.make_scale("one")
    res = HDF5Scanner(concat_dim="time")(str(path))
    metas = {m.name: m for m in res.arrays}
    blob = path.read_bytes()
    assert metas["time"].chunks == (1,)
    rows = sorted(_rows(res, "time"), key=lambda r: r["k0"])
    assert [blob[r["offset"] : r["offset"] + r["length"]] for r in rows] == [
        np.float64(1.0).tobytes(), np.float64(2.0).tobytes()]  # fmt: skip
    assert metas["label"].chunks == (2,) and metas["label"].codecs == ({"id": "spacepad"},)
    assert len(_rows(res, "label")) == 1
    res = HDF5Scanner(concat_dim="one")(str(path))
    assert {m.name: m for m in res.arrays}["one"].chunks == (1,) and len(_rows(res, "one")) == 1


def test_coordinates_scales_and_attributes_at_the_edges(tmp_path: Path) -> None:
    """One-value and unwritten time coordinates (values as h5py reads them), a compact int32
    coordinate, a scale in a nested group named by its own name, a dimension-only scale whose
    NAME is variable-length text, and an attribute h5py cannot read between two it can."""
    path = tmp_path / "e.h5"
    with h5py.File(path, "w") as f:
        one = f.create_dataset("one", data=np.array([6.0]))
        one.make_scale("one")
        one.attrs["units"] = "hours since 2000-01-01"
        gone = f.create_dataset("gone", shape=(3,), dtype="<f4", fillvalue=np.float32(2.5))
        gone.make_scale("gone")
        space = h5py.h5s.create_simple((3,))
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_layout(h5py.h5d.COMPACT)
        ci = h5py.Dataset(h5py.h5d.create(f.id, b"ci", h5py.h5t.STD_I32LE, space, plist))
        ci[...] = np.array([-3, 0, 70000], "<i4")
        ci.make_scale("ci")
        g = f.create_group("g/sub")
        x = g.create_dataset("x", data=np.arange(4, dtype="<f4"))
        x.make_scale("x")
        dim_only = f.create_dataset("d", shape=(2,), dtype="<f4")
        dim_only.make_scale("d")
        dim_only.attrs["NAME"] = "This is a netCDF dimension but not a netCDF variable.         2"
        a = f.create_dataset("a", data=np.arange(3, dtype="<i2"))
        a.attrs["first"] = 1
        h5py.h5a.create(a.id, b"m_time", h5py.h5t.UNIX_D32LE, h5py.h5s.create(h5py.h5s.SCALAR))
        a.attrs["z_last"] = 2
    with h5py.File(path) as f:
        assert isinstance(f["d"].attrs["NAME"], str)
        with pytest.raises(TypeError):
            f["a"].attrs["m_time"]
        gone_values = (float(f["gone"][0]), float(f["gone"][-1]))
    res = HDF5Scanner(concat_dim="one")(str(path))
    metas = {m.name: m for m in res.arrays}
    t0 = datetime(2000, 1, 1, tzinfo=UTC).timestamp()
    assert (res.sort_value, res.sort_last, res.sort_units) == (t0 + 6 * 3600, t0 + 6 * 3600, "seconds since 1970-01-01")
    assert "d" not in metas and metas["g/sub/x"].dims == ("x",)
    assert sorted(metas["a"].attrs) == ["first", "z_last"]
    r = HDF5Scanner(concat_dim="gone")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (*gone_values, None) and gone_values == (2.5, 2.5)
    r = HDF5Scanner(concat_dim="ci")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (-3.0, 70000.0, None)
    r = HDF5Scanner(concat_dim="d")(str(path))
    assert (r.sort_value, r.sort_last, r.sort_units) == (None, None, None)


def test_dimension_names_of_nested_and_odd_scales(tmp_path: Path) -> None:
    """A dimension is named by its scale's own name (the last part of its path), whatever group
    the scale sits in; bytes that are no UTF-8 are replaced, never refused."""
    path = tmp_path / "n.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("g/sub")
        x = g.create_dataset("x", data=np.arange(4, dtype="<f4"))
        x.make_scale("x")
        odd = h5py.Dataset(h5py.h5d.create(f.id, b"t\xff", h5py.h5t.IEEE_F64LE, h5py.h5s.create_simple((2,))))
        odd.make_scale("t")
        v = f.create_dataset("v", data=np.zeros((2, 4), "<i2"))
        v.dims[0].attach_scale(odd)
        v.dims[1].attach_scale(x)
        grp = h5py.Group(h5py.h5g.create(f.id, b"gr\xff"))
        grp.attrs["a"] = 1
        grp.create_dataset("w", data=np.arange(3, dtype="<u1"))
    res = HDF5Scanner()(str(path))  # a name that is no UTF-8 failed with a TypeError traceback before
    metas = {m.name: m for m in res.arrays}
    assert metas["v"].dims == ("t\ufffd", "x")
    assert metas["t\ufffd"].dims == ("t\ufffd",) and "gr\ufffd/w" in metas
    assert "gr\ufffd" in res.groups


def test_chunk_index_guard() -> None:
    """Chunk indices are int32 columns: one past their range is refused naming the array."""
    from refstore.scan._types import chunk_table
    from refstore.scan.hdf5 import _chunk_table, _Chunks

    top = np.iinfo(np.int32).max
    ok = chunk_table([_chunk_table([_Chunks("a", np.array([[top, 0]], np.int64), np.array([1]), np.array([2]))])])
    assert ok.column("k0").to_pylist() == [top] and ok.column("k1").to_pylist() == [0]
    for bad, lo, hi in (([[top + 1, 0]], 0, top + 1), ([[3, -1]], -1, 3)):
        with pytest.raises(ValueError, match=rf"^chunk index of 'b' out of range \({lo}\.\.{hi}\)$"):
            _chunk_table([_Chunks("b", np.array(bad, np.int64), np.array([1]), np.array([2]))])


# ---------------------------------------------------------------- header bytes (_hdf5_header)
# What the object-header reader answers directly, against h5py's high-level API; a form it does
# not parse (bytes edited by hand) gives None, never another answer (the scan then asks HDF5,
# so only these direct answers tell a wrong parse from a fallback).


def _write_scales(path: Path, libver: str) -> Path:
    with h5py.File(path, "w", libver=libver) as f:
        scales = {}
        for name, n in (("x", 5), ("y", 2), ("z", 3)):
            s = f.create_dataset(name, data=np.arange(n, dtype="<f4"))
            s.make_scale(name)
            scales[name] = s
        for name, shape, dims in (("a", (2, 5), "yx"), ("b", (2, 3, 5), "y.x"), ("c", (3,), "z"),
                                  ("d", (5, 2), "xy"), ("e", (2, 5), "..")):  # fmt: skip
            ds = f.create_dataset(name, data=np.zeros(shape, "<i2"))
            ds.attrs["units"] = "m"
            for i, d in enumerate(dims):
                if d != ".":
                    ds.dims[i].attach_scale(scales[d])
    return path


@pytest.fixture(scope="module")
def scale_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("scales")
    return {lv: _write_scales(d / f"{lv}.h5", lv) for lv in ("earliest", "latest")}


def _first_scales_h5py(path: Path) -> dict[str, tuple[int, int, int, list[int | None]]]:
    """name -> (header address, attribute count, ndim, per dimension the address of the first
    scale h5py's ``dims`` lists, or None)."""
    out = {}
    with h5py.File(path, "r") as f:
        for name in ("a", "b", "c", "d", "e"):
            ds = f[name]
            info = h5py.h5o.get_info(ds.id)
            want = [h5py.h5o.get_info(ds.dims[i][0].id).addr if len(ds.dims[i]) else None for i in range(ds.ndim)]
            out[name] = (info.addr, info.num_attrs, ds.ndim, want)
    return out


def _gcol(data: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """The global heap collection of a file (HDF5 spec, "Global Heap"): its address and its
    objects (index, start of the object's header, end of its padded data)."""
    at = data.index(b"GCOL")
    size = int.from_bytes(data[at + 8 : at + 16], "little")
    objs, pos = [], at + 16
    while pos + 16 <= at + size:
        idx, n = int.from_bytes(data[pos : pos + 2], "little"), int.from_bytes(data[pos + 8 : pos + 16], "little")
        if idx == 0:
            break
        objs.append((idx, pos, pos + 16 + ((n + 7) // 8) * 8))
        pos = objs[-1][2]
    return at, objs


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_first_scales_from_the_bytes_equal_h5py(scale_files: dict[str, Path], libver: str) -> None:
    from refstore.scan._hdf5_header import HeaderReader

    path = scale_files[libver]
    want = _first_scales_h5py(path)
    _at, objs = _gcol(path.read_bytes())
    assert len(objs) >= 6  # one object per attached dimension: lookups past the first
    with HeaderReader(str(path)) as h:
        for name, (addr, num_attrs, ndim, scales) in want.items():
            assert h.first_scales(addr, num_attrs, ndim) == scales, name
            assert h.first_scales(addr, num_attrs, ndim) == scales, name  # the heap parsed once, read again


def _edited(src: Path, dst: Path, at: int, new: bytes) -> Path:
    data = bytearray(src.read_bytes())
    data[at : at + len(new)] = new
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_a_global_heap_in_another_form_gives_no_scales(scale_files: dict[str, Path], libver: str,
                                                      tmp_path: Path) -> None:  # fmt: skip
    """The collection's signature, version and size are checked: any other gives None (HDF5
    then reads the list); a size up to 1 MiB, or ending right after the last object (no free
    space entry), still reads every object."""
    from refstore.scan._hdf5_header import HeaderReader

    src = scale_files[libver]
    want = _first_scales_h5py(src)
    at, objs = _gcol(src.read_bytes())
    end = objs[-1][2]

    def le(v: int) -> bytes:
        return v.to_bytes(8, "little")

    cases = {
        "version2": (at + 4, b"\x02", False),
        "version0": (at + 4, b"\x00", False),
        "signature": (at, b"GCOX", False),
        "size_mib": (at + 8, le(1 << 20), True),
        "size_past_mib": (at + 8, le((1 << 20) + 1), False),
        "size_16": (at + 8, le(16), False),
        "size_to_last_object": (at + 8, le(end - at), True),
    }
    for case, (where, new, same) in cases.items():
        path = _edited(src, tmp_path / f"{case}.h5", where, new)
        with HeaderReader(str(path)) as h:
            for name, (addr, num_attrs, ndim, scales) in want.items():
                got = h.first_scales(addr, num_attrs, ndim)
                if scales == [None] * ndim:  # no DIMENSION_LIST: the heap is never read
                    assert got == scales, (case, name)
                else:
                    assert got == (scales if same else None), (case, name)


def _ref_list_dtype(path: Path) -> bytes:
    """The datatype message bytes of a DIMENSION_LIST (what H5DSattach_scale writes), found in
    the file: a variable-length sequence (class 9, version 1) of 8-byte object references."""
    from refstore.scan._hdf5_header import HeaderReader

    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        info = h5py.h5o.get_info(f["a"].id)
        attrs = h._attributes(info.addr, info.num_attrs)
        assert attrs is not None
        return attrs["DIMENSION_LIST"].dtype


def test_object_reference_list_type_bytes(scale_files: dict[str, Path]) -> None:
    """``_is_object_ref_list`` against the HDF5 spec's datatype layout (bytes edited by hand):
    only a variable-length sequence (class 9, type 0) of object references (class 7, type 0,
    8 bytes) is one."""
    from refstore.scan._hdf5_header import _is_object_ref_list

    real = _ref_list_dtype(scale_files["latest"])
    # class 9 version 1, sequence, size 16 (a vlen's in-file size), then the base type
    assert real[0] == 0x19 and real[1] & 0x0F == 0 and int.from_bytes(real[4:8], "little") == 16
    base = real[8:]
    assert base[0] == 0x17 and base[1] & 0x0F == 0 and int.from_bytes(base[4:8], "little") == 8
    assert _is_object_ref_list(real)

    def edit(b: bytes, at: int, value: int) -> bytes:
        return b[:at] + bytes([value]) + b[at + 1 :]

    assert not _is_object_ref_list(edit(real, 1, real[1] | 0x01))  # a variable-length string
    assert not _is_object_ref_list(edit(real, 1, real[1] | 0x0F))
    assert not _is_object_ref_list(edit(real, 0, 0x17))  # a reference, not a sequence of them (with a ref "base")
    assert not _is_object_ref_list(edit(real, 0, 0x1A))  # an array type over the same bytes
    assert not _is_object_ref_list(edit(edit(real, 0, 0x17), 2, 0))
    assert not _is_object_ref_list(edit(real, 9, base[1] | 0x01))  # region references
    assert not _is_object_ref_list(edit(real, 9, base[1] | 0x0F))
    assert not _is_object_ref_list(edit(real, 8, 0x10))  # base: fixed-point, 8 bytes
    assert not _is_object_ref_list(edit(real, 8, 0x11))  # base: floating-point
    assert not _is_object_ref_list(real[:8] + base[:4] + (4).to_bytes(4, "little") + base[8:])  # 4-byte refs
    assert not _is_object_ref_list(real[:8] + base[:7])  # a base type cut short
    assert _is_object_ref_list(edit(real, 2, 0x0F))  # bits 8-15 (padding, character set) are not looked at
    assert _is_object_ref_list(edit(real, 10, 0xFF))


def test_a_v1_header_parse_is_shared_across_link_counts_never_message_counts(tmp_path: Path) -> None:
    """Object header version 1 (HDF5 spec: version, reserved, message count at bytes 2-3, link
    count at 4-7, block size at 8-11): a header whose first block equals one parsed before is
    that parse whatever its link count, but a message count that disagrees with the block is
    refused (None), even after the genuine one was parsed."""
    from refstore.scan import _hdf5_header
    from refstore.scan._hdf5_header import HeaderReader

    src = tmp_path / "v1.h5"
    with h5py.File(src, "w", libver="earliest") as f:
        d = f.create_dataset("d", data=np.arange(3, dtype="<i4"))
        d.attrs["units"] = "m"
        info = h5py.h5o.get_info(d.id)
        addr, nmesgs, rc = info.addr, info.hdr.nmesgs, info.rc
        assert info.hdr.version == 1 and info.hdr.nchunks == 1
    data = src.read_bytes()
    assert data[addr] == 1 and int.from_bytes(data[addr + 2 : addr + 4], "little") == nmesgs
    assert int.from_bytes(data[addr + 4 : addr + 8], "little") == rc == 1
    linked = _edited(src, tmp_path / "rc.h5", addr + 4, (2).to_bytes(4, "little"))
    more = _edited(src, tmp_path / "more.h5", addr + 2, (nmesgs + 1).to_bytes(2, "little"))
    fewer = _edited(src, tmp_path / "fewer.h5", addr + 2, (nmesgs - 1).to_bytes(2, "little"))
    _hdf5_header._HEADERS.clear()
    try:
        with HeaderReader(str(src)) as h, h5py.File(src, "r") as f:
            first = h.header(addr)
            assert first is not None and len(first.messages) == nmesgs
            order = f["d"].id.get_create_plist().get_attr_creation_order()
            assert h.tracked(addr) is bool(order & h5py.h5p.CRT_ORDER_TRACKED) is False  # v1: never tracked
        with HeaderReader(str(linked)) as h:
            assert h.header(addr) is first
        for path in (more, fewer):
            with HeaderReader(str(path)) as h:
                assert h.header(addr) is None, path.name
    finally:
        _hdf5_header._HEADERS.clear()


def test_a_v1_continuation_loop_is_refused(tmp_path: Path) -> None:
    """A v1 header whose continuation message points back at its own first block (bytes edited
    by hand, HDF5 spec layout: 16-byte prefix, messages of type(2) size(2) flags(1) reserved(3)
    and body; a continuation's body is offset(8) length(8)) is refused after the block limit,
    not followed forever; the genuine file's header lists every message h5py counts."""
    from refstore.scan import _hdf5_header
    from refstore.scan._hdf5_header import HeaderReader

    src = tmp_path / "cont.h5"
    with h5py.File(src, "w", libver="earliest") as f:
        d = f.create_dataset("d", data=np.arange(3, dtype="<i4"))
        for i in range(40):
            d.attrs[f"a{i:02d}"] = np.arange(4, dtype="<f8") + i
        info = h5py.h5o.get_info(d.id)
        addr, nmesgs = info.addr, info.hdr.nmesgs
        assert info.hdr.version == 1 and info.hdr.nchunks > 1
    data = src.read_bytes()
    size = int.from_bytes(data[addr + 8 : addr + 12], "little")
    pos, cont = addr + 16, None
    while pos + 8 <= addr + 16 + size:
        kind, msize = int.from_bytes(data[pos : pos + 2], "little"), int.from_bytes(data[pos + 2 : pos + 4], "little")
        if kind == 0x10:
            cont = pos + 8
            break
        pos += 8 + msize
    assert cont is not None
    loop = (addr + 16).to_bytes(8, "little") + size.to_bytes(8, "little")
    looped = _edited(src, tmp_path / "loop.h5", cont, loop)
    _hdf5_header._HEADERS.clear()
    try:
        with HeaderReader(str(src)) as h:
            got = h.header(addr)
            assert got is not None and len(got.messages) == nmesgs and got.continuations
        with HeaderReader(str(looped)) as h:
            assert h.header(addr) is None
    finally:
        _hdf5_header._HEADERS.clear()


def test_dense_attributes_of_equal_heaps_are_one_parse(tmp_path: Path) -> None:
    """Attributes in dense storage (a fractal heap: 20 attributes, h5py's latest format) are read
    per file but parsed once per content: two files holding the same messages share the parse,
    and the names are h5py's."""
    import shutil

    from refstore.scan._hdf5_header import HeaderReader

    a = tmp_path / "a.h5"
    with h5py.File(a, "w", libver="latest") as f:
        d = f.create_dataset("d", data=np.arange(3, dtype="<i4"))
        for i in range(20):
            d.attrs[f"a{i:02d}"] = np.float64(i)
    b = tmp_path / "b.h5"
    shutil.copyfile(a, b)
    with h5py.File(a, "r") as f:
        info = h5py.h5o.get_info(f["d"].id)
        names = sorted(f["d"].attrs)
        assert f["d"].id.get_create_plist().get_attr_phase_change()[0] < 20  # past compact storage
    with HeaderReader(str(a)) as ha, HeaderReader(str(b)) as hb:
        got_a = ha._attributes(info.addr, info.num_attrs)
        got_b = hb._attributes(info.addr, info.num_attrs)
        assert got_a is not None and sorted(got_a) == names
        assert got_b is got_a


@pytest.mark.parametrize("share", ["dtype", "space"])
def test_dense_attributes_with_shared_parts_prove_nothing(tmp_path: Path, share: str) -> None:
    """An attribute in dense storage whose datatype or dataspace is kept in the shared-message
    heap (HDF5's ``H5Pset_shared_mesg_index``) holds only a heap ID for it: no key is made of
    its bytes (a key would collide between files whose shared messages differ), while the
    same file without shared messages is keyed; h5py lists the attributes either way."""
    from refstore.fixtures import hdf5_headers
    from refstore.scan._hdf5_header import HeaderReader

    flag = {"dtype": hdf5_headers.SHARE_DTYPE, "space": hdf5_headers.SHARE_SDSPACE}[share]
    if hdf5_headers.shared_messages_fcpl(flag) is None:
        pytest.skip("HDF5's shared-message calls are not reachable here")
    data = np.arange(6, dtype="<i4").reshape(2, 3)
    for flags, keyed in ((flag, False), (0, True)):
        path = tmp_path / f"{share}{flags}.h5"
        hdf5_headers._pair_file(path, flags | hdf5_headers.DENSE, data)
        with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
            info = h5py.h5o.get_info(f["d"].id)
            assert len(f["d"].attrs) == info.num_attrs == 12
            attrs = h._attributes(info.addr, info.num_attrs)
            assert attrs is not None and sorted(attrs) == sorted(f["d"].attrs)
            assert (h.attribute_key(info.addr, info.num_attrs, frozenset()) is not None) is keyed


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_tracked_order_and_storage_read_from_the_header(tmp_path: Path, libver: str) -> None:
    """``tracked`` is the header's creation-order flag, equal to h5py's plist (version 1
    headers: never tracked), and a dataset the header bytes describe is scanned from them
    (``_RawDataset``: nothing asked of HDF5) with h5py's shape, dtype, layout and storage."""
    from refstore.scan import hdf5 as scanner
    from refstore.scan._hdf5_header import HeaderReader

    path = tmp_path / "t.h5"
    with h5py.File(path, "w", libver=libver) as f:
        for name, order in (("plain", False), ("ordered", True)):
            d = f.create_dataset(name, data=np.arange(6, dtype="<i2").reshape(2, 3), track_order=order)
            d.attrs["b"], d.attrs["a"] = 1, 2
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        for name in ("plain", "ordered"):
            ds = f[name]
            info = h5py.h5o.get_info(ds.id)
            want = bool(ds.id.get_create_plist().get_attr_creation_order() & h5py.h5p.CRT_ORDER_TRACKED)
            assert h.tracked(info.addr) is want, name
            assert want is (name == "ordered")  # (HDF5 writes a version 2 header for it, whatever libver)
            raw = scanner._dataset(f.id, f"/{name}".encode(), scanner._Info(info.addr, info.rc, info.num_attrs), h)
            assert isinstance(raw, scanner._RawDataset), name
            assert raw.shape == ds.shape and raw.dtype == ds.dtype
            assert raw.layout() == ds.id.get_create_plist().get_layout() == h5py.h5d.CONTIGUOUS
            assert raw.contiguous() == (ds.id.get_offset(), ds.id.get_storage_size())


def test_v2_headers_equal_in_bytes_share_one_parse_and_messages_past_32_kib_read(tmp_path: Path) -> None:
    """Object header version 2 (HDF5 spec: "OHDR", a message's size an unsigned 16-bit field):
    a header holding a 40,000-byte compact attribute message parses into as many messages as
    HDF5 counts, and a second file whose header is byte for byte the same is that one parse."""
    from refstore.scan import _hdf5_header
    from refstore.scan._hdf5_header import HeaderReader

    def write(p: Path) -> tuple[int, int]:
        with h5py.File(p, "w", libver="latest") as f:
            d = f.create_dataset("d", data=np.arange(3, dtype="<i4"))
            d.attrs["big"] = np.arange(10_000, dtype="<i4")  # 40,000 bytes: compact (< 64 KiB)
            info = h5py.h5o.get_info(d.id)
            assert info.hdr.version == 2
            return int(info.addr), int(info.hdr.nmesgs)

    (a_addr, nmesgs), (b_addr, _) = write(tmp_path / "a.h5"), write(tmp_path / "b.h5")
    a, b = (tmp_path / "a.h5").read_bytes(), (tmp_path / "b.h5").read_bytes()
    assert a_addr == b_addr and a == b  # (h5py records no times by default)
    _hdf5_header._HEADERS.clear()
    try:
        with HeaderReader(str(tmp_path / "a.h5")) as h:
            first = h.header(a_addr)
        assert first is not None and len(first.messages) == nmesgs
        assert max(len(body) for *_, body in first.messages) > 32_767
        with HeaderReader(str(tmp_path / "b.h5")) as h:
            assert h.header(b_addr) is first
    finally:
        _hdf5_header._HEADERS.clear()

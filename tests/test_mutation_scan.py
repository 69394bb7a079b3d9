"""Scanners against the format libraries, reference by reference: every netCDF3 type in the
three formats (netCDF4-python writes them) and HDF5 filter pipelines (h5py). Each array's dtype,
fill value and attributes must be what netCDF4-python / h5py report, and the bytes each
reference points at must be that region as they read it. Written for the mutation run
(``./dev mutate scan``); fast (no collection, no Lance).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from refstore._values import decode_attr, decode_fill
from refstore.scan.netcdf3 import NetCDF3Scanner

from . import _oracle

if TYPE_CHECKING:
    from pathlib import Path

_TYPES = ["i1", "S1", "i2", "i4", "f4", "f8", "u1", "u2", "u4", "i8", "u8"]


def _write_nc3(path: Path, fmt: str) -> None:
    netCDF4 = _oracle._netcdf4()  # leaves no HDF5_PLUGIN_PATH behind for h5py

    rng = np.random.default_rng(3)
    types = _TYPES if fmt == "NETCDF3_64BIT_DATA" else _TYPES[:6]
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("rec", None)
        nc.createDimension("x", 3)
        nc.createDimension("s", 2)
        nc.title = "nc3 types"
        for t in types:
            dt = np.dtype(t)
            dims = ("x", "s") if t == "S1" else ("x",)
            fixed = nc.createVariable(f"fixed_{t}", dt, dims)
            rec = nc.createVariable(f"rec_{t}", dt, ("rec", *dims))
            filled = nc.createVariable(f"filled_{t}", dt, ("rec", *dims), fill_value=dt.type(7) if t != "S1" else b"z")
            if t == "S1":
                data = np.array([[b"a", b"b"], [b"c", b"d"], [b"e", b"f"]], "S1")
                fixed[:] = data
                rec[0] = data
                rec[2] = data
                filled[1] = data
            else:
                info = np.iinfo(dt) if dt.kind in "iu" else None
                data = (rng.integers(info.min // 2 + 1, info.max // 2, 3) if info is not None
                        else rng.standard_normal(3) * 1e3).astype(dt)  # fmt: skip
                fixed[:] = data
                rec[0] = data
                rec[2] = data[::-1]
                filled[1] = data
                fixed.setncattr("valid_max", dt.type(100))
                fixed.setncattr("pair", np.array([1, 2], dt))
            rec.units = "m"


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"])
def test_every_netcdf3_reference_is_netcdf4_pythons_region(tmp_path: Path, fmt: str) -> None:
    netCDF4 = _oracle._netcdf4()  # leaves no HDF5_PLUGIN_PATH behind for h5py

    path = tmp_path / "f.nc"
    _write_nc3(path, fmt)
    res = NetCDF3Scanner()(str(path))
    metas = {m.name: m for m in res.arrays}
    rows = res.chunks.to_pylist()
    blob = path.read_bytes()
    assert res.source.size == len(blob)
    with netCDF4.Dataset(path) as nc:
        nc.set_auto_maskandscale(False)
        assert sorted(metas) == sorted(nc.variables)
        assert decode_attr(res.groups[""]["title"]) == nc.getncattr("title")
        for name, var in nc.variables.items():
            m = metas[name]
            want = np.dtype(var.dtype)
            want = want.newbyteorder(">") if want.itemsize > 1 else want
            assert np.dtype(m.dtype) == want, name
            assert m.dims == var.dimensions and m.shape == var.shape, name
            expected = var[...]
            fill = var.getncattr("_FillValue") if "_FillValue" in var.ncattrs() else netCDF4.default_fillvals[
                want.str[1:] if want.kind != "S" else "S1"]  # fmt: skip
            got_fill = decode_fill(m.fill_value, want)
            if want.kind != "S":  # a char _FillValue is read as text and not taken (design/mutation.md)
                assert np.asarray(got_fill).astype(want).tobytes() == np.asarray(fill).astype(want).tobytes(), name
            for k in var.ncattrs():
                a = decode_attr(m.attrs[k])
                b = var.getncattr(k)
                b = b.decode() if isinstance(b, bytes) else b  # a char _FillValue comes back as bytes
                assert np.array_equal(np.asarray(a), np.asarray(b)) and np.asarray(a).dtype == np.asarray(b).dtype, (
                    name, k)  # fmt: skip
            mine = [r for r in rows if r["array"] == name]
            out = np.full(var.shape, np.asarray(fill).astype(want), dtype=want)
            for r in mine:
                key = [r[f"k{i}"] for i in range(len(m.shape))]
                region = tuple(slice(k * c, k * c + c) for k, c in zip(key, m.chunks, strict=True))
                raw = blob[r["offset"] : r["offset"] + r["length"]]
                assert r["length"] == want.itemsize * int(np.prod(m.chunks)), name
                out[region] = np.frombuffer(raw, want).reshape(m.chunks)
            assert out.tobytes() == np.asarray(expected).astype(want).tobytes(), name
            if var.dimensions and var.dimensions[0] == "rec":
                assert len(mine) == len(nc.dimensions["rec"]) and m.chunks[0] == 1, name
            else:
                assert len(mine) == 1 and m.chunks == var.shape, name


def test_hdf5_filter_table_against_h5py(tmp_path: Path) -> None:
    """Codec configs carry what h5py reports of each filter (deflate level, shuffle element
    size); a filter without a decoder is named by HDF5's own filter name."""
    import h5py

    from refstore.scan._hdf5_codecs import filters_to_codecs

    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("g", data=np.arange(40, dtype="<i8"), chunks=(8,), compression="gzip", compression_opts=4,
                         shuffle=True, fletcher32=True)  # fmt: skip
        f.create_dataset("so", data=np.arange(100, dtype="<i4").reshape(10, 10), chunks=(5, 5), scaleoffset=0)
        zstd: dict[str, object] = {}
        try:
            import hdf5plugin

            zstd = dict(hdf5plugin.Zstd(clevel=7))
            f.create_dataset("z", data=np.arange(40, dtype="<i2"), chunks=(8,), **zstd)  # type: ignore[arg-type]
        except ImportError:
            pass
    with h5py.File(path) as f:
        if zstd:
            plist = f["z"].id.get_create_plist()
            assert filters_to_codecs(plist, f["z"].dtype) == (
                ({"id": "zstd", "level": zstd["compression_opts"][0]},), None)  # type: ignore[index]
        g = f["g"]
        codecs, reason = filters_to_codecs(g.id.get_create_plist(), g.dtype)
        assert reason is None
        assert codecs == ({"id": "shuffle", "elementsize": g.dtype.itemsize},
                          {"id": "zlib", "level": g.compression_opts}, {"id": "fletcher32"})  # fmt: skip
        plist = f["so"].id.get_create_plist()
        name = plist.get_filter(0)[3].decode()
        assert filters_to_codecs(plist, f["so"].dtype) == (
            (), f"HDF5 filter {name} (id {h5py.h5z.FILTER_SCALEOFFSET}) has no decoder (numcodecs/imagecodecs)")

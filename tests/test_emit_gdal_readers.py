"""The forms as GDAL's own wheels read them, each in its own process (``tests/readers/gdal.py``),
compared with the files' own readers (``tests/_oracle.py``: h5py, netCDF4-python, tifffile):

- kerchunk JSON through rasterio 1.5.2's GDAL 3.12 (Zarr driver, ``/vsikerchunk_json_ref/``):
  every array the form expresses opens and reads equal, dtype included, unless it is one
  ``GDAL_ZARR_LACKS`` names (then GDAL must refuse it: the rule is exact);
- the multidimensional VRT through gdal-wheel 3.13.3 (``gdal.OF_MULTIDIM_RASTER``): every array
  it expresses reads equal with the same data type (int8 stays int8), attributes typed as
  netCDF4-python gives them;
- the SQLite form as OGR layers through pyogrio 0.13: its tables listed, the reference rows read.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.errors import BadInputError
from refstore.zarr_meta import V2_COMPRESSORS

from ._emit_cases import assert_same
from .readers import gdal as gdal_reader

GDAL_ZARR_CODECS = V2_COMPRESSORS | {"shuffle"}
"""numcodecs ids GDAL 3.12's Zarr driver decodes (as filters or compressors)."""


def gdal_zarr_lacks(meta: Any, zarray: dict[str, Any]) -> str | None:
    """Why GDAL's classic (2-D) Zarr API cannot read an array the kerchunk form writes, or None:
    a scalar (a raster has two dimensions), a zero-size array, strings, or a codec GDAL has no
    decoder for."""
    if not meta.shape:
        return "0-d"
    if 0 in meta.shape:
        return "zero-size"
    dt = np.dtype(meta.dtype)
    if dt.kind not in "iufc":
        return f"dtype {dt}"
    ids = [c["id"] for c in [*(zarray["filters"] or []), *([zarray["compressor"]] if zarray["compressor"] else [])]]
    if set(ids) - GDAL_ZARR_CODECS:
        return f"codecs {sorted(set(ids) - GDAL_ZARR_CODECS)}"
    return None


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:2])


def _as_array_shape(data: np.ndarray[Any, Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """rasterio's (bands, rows, cols) as the array's shape: bands run over the leading
    dimensions in C order, a 1-d array is one row."""
    assert data.size == math.prod(shape), (data.shape, shape)
    return data.reshape(shape)


def test_kerchunk_json_through_rasterio_gdal_312(emit_cases: list[Any], tmp_path: Path) -> None:
    if not gdal_reader.available("rasterio-zarr"):
        pytest.skip("rasterio is not installed (pip install rasterio==1.5.2)")
    read = refused = 0
    for i, case in enumerate(emit_cases):
        col = refstore.Collection.open(case.uri)
        out = tmp_path / f"{i}.json"
        try:
            rep = emit(col, "kerchunk-json", str(out), skip_unexpressible=True)
        except BadInputError:
            continue  # nothing the form expresses (test_emit_roundtrip checks why)
        refs = json.loads(out.read_text())["refs"]
        metas = case.dataset().snapshot.arrays()
        names = [n for n in metas if n not in rep.skipped]
        small = [n for n in names if math.prod(metas[n].shape) * np.dtype(metas[n].dtype).itemsize <= 64 << 20]
        answer = gdal_reader.run("rasterio-zarr", {"path": str(out), "arrays": small}, tmp_path / f"{i}")
        assert _release(answer["gdal"]) >= (3, 12), answer["gdal"]  # kerchunk JSON since 3.11
        for name in small:
            why = gdal_zarr_lacks(metas[name], json.loads(refs[f"{name}/.zarray"]))
            got = answer["arrays"][name]
            if why is not None:
                assert "error" in got, f"{case.id}:{name} ({why}) opened through GDAL; update gdal_zarr_lacks"
                refused += 1
                continue
            data = gdal_reader.load(answer, name, tmp_path / f"{i}")
            expected = case.expected(name, tuple(slice(0, None) for _ in metas[name].shape))
            assert data.dtype == np.dtype(metas[name].dtype).newbyteorder("="), (case.id, name, data.dtype)
            assert_same(_as_array_shape(data, tuple(metas[name].shape)), expected, f"rasterio {case.id}:{name}")
            read += 1
    assert read > 0 and refused > 0, (read, refused)


def _gdal_mdim_dtype(stored: np.dtype[Any], attrs: dict[str, Any]) -> np.dtype[Any]:
    """The data type GDAL gives an array: its own, except bool (GDAL has no Bool: Byte, 0/1) and
    a signed integer with CF ``_Unsigned = "true"`` (GDAL's netCDF driver: the unsigned type of
    the same size, the same bits)."""
    if stored.kind == "b":
        return np.dtype("u1")
    unsigned = attrs.get("_Unsigned")
    if stored.kind == "i" and unsigned is not None and str(unsigned.get("value", "")).lower() == "true":
        return np.dtype(f"u{stored.itemsize}")
    return stored


def test_vrt_through_gdal_wheel_313(emit_cases: list[Any], tmp_path: Path) -> None:
    """Every array the VRT expresses opens in GDAL 3.13's multidimensional API and reads equal to
    the oracle with the same dtype (int8 included: GDAL >= 3.7 has Int8)."""
    if not gdal_reader.available("gdal-mdim"):
        pytest.skip("gdal-wheel is not installed (pip install gdal-wheel==3.13.3)")
    read = typed = 0
    kinds: set[str] = set()
    for i, case in enumerate(emit_cases):
        col = refstore.Collection.open(case.uri)
        out = tmp_path / f"{i}.vrt"
        try:
            rep = emit(col, "vrt", str(out), skip_unexpressible=True)
        except BadInputError:
            continue
        metas = case.dataset().snapshot.arrays()
        names = [n for n in metas if n not in rep.skipped]
        small = [n for n in names if math.prod(metas[n].shape) * np.dtype(metas[n].dtype).itemsize <= 64 << 20]
        answer = gdal_reader.run("gdal-mdim", {"path": str(out), "arrays": small}, tmp_path / f"{i}")
        assert _release(answer["gdal"]) >= (3, 13), answer["gdal"]
        for name in small:
            data = gdal_reader.load(answer, name, tmp_path / f"{i}")
            stored = np.dtype(metas[name].dtype).newbyteorder("=")
            want = _gdal_mdim_dtype(stored, metas[name].attrs)
            assert data.dtype == want, (case.id, name, data.dtype, want)
            expected = case.expected(name, tuple(slice(0, None) for _ in metas[name].shape))
            if stored.kind == "b":
                expected = expected.astype(want)
            elif want != stored:  # _Unsigned: the same bits
                expected = expected.astype(stored).view(want)
            assert_same(data.reshape(metas[name].shape), expected, f"gdal-mdim {case.id}:{name}")
            kinds.add(stored.str)
            typed += _check_attr_types(metas[name].attrs, answer["arrays"][name]["attrs"], f"{case.id}:{name}")
            read += 1
    assert read > 0 and typed > 0
    assert "|i1" in kinds, f"no int8 array among the VRT cases: {sorted(kinds)}"


_GDAL_NUMPY = {"Int8": "i1", "Byte": "u1", "Int16": "i2", "UInt16": "u2", "Int32": "i4", "UInt32": "u4",
               "Int64": "i8", "UInt64": "u8", "Float32": "f4", "Float64": "f8"}  # fmt: skip


def _check_attr_types(recorded: dict[str, Any], got: dict[str, Any], what: str) -> int:
    """Every numeric attribute GDAL reports has the recorded (netCDF4-python's) type and values."""
    n = 0
    for k, enc in recorded.items():
        if enc["type"] in ("str", "bytes", "bool") or np.dtype(enc["type"]).kind == "c" or k not in got:
            continue
        want = np.dtype(enc["type"])
        assert got[k]["type"] in _GDAL_NUMPY, (what, k, got[k])
        assert np.dtype(_GDAL_NUMPY[got[k]["type"]]) == want.newbyteorder("="), (what, k, got[k]["type"], want)
        values = np.atleast_1d(np.asarray(enc["value"], dtype=np.float64 if want.kind == "f" else None))
        assert np.array_equal(np.asarray(got[k]["value"], values.dtype), values.ravel(), equal_nan=want.kind == "f"), (
            what, k)
        n += 1
    return n


def test_sqlite_as_ogr_layers_through_pyogrio(emit_cases: list[Any], tmp_path: Path) -> None:
    """pyogrio (GDAL 3.12's SQLite driver) lists the form's tables and views and reads every
    reference row as sqlite3 reads it."""
    if not gdal_reader.available("ogr"):
        pytest.skip("pyogrio is not installed (pip install pyogrio==0.13.0)")
    case = next(c for c in emit_cases if c.source is not None and c.source.endswith((".nc", ".h5")))
    out = tmp_path / "refs.sqlite"
    emit(refstore.Collection.open(case.uri), "sqlite", str(out), skip_unexpressible=True)
    with sqlite3.connect(out) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
        want = {n: [dict(zip([d[0] for d in cur.description], row, strict=True)) for row in cur.fetchall()]
                for n in names if (cur := db.execute(f'SELECT * FROM "{n}"')) is not None}  # fmt: skip
    answer = gdal_reader.run("ogr", {"path": str(out), "layers": names}, tmp_path / "ogr")
    assert _release(answer["gdal"]) >= (3, 12), answer["gdal"]
    assert set(answer["layers"]) == set(names)
    refs = [n for n in names if n.startswith("refs_")]
    assert refs and sum(len(want[n]) for n in refs) > 0
    with sqlite3.connect(out) as db:  # an INTEGER PRIMARY KEY is the OGR feature id (OGC_FID)
        fid = {n: [r[1] for r in db.execute(f'PRAGMA table_info("{n}")') if r[5] == 1 and r[2].upper() == "INTEGER"]
               for n in names}  # fmt: skip
    for n in names:
        rename = {"OGC_FID": fid[n][0]} if len(fid[n]) == 1 else {}
        cols = list(want[n][0]) if want[n] else []
        got = [{c: v for c, v in ({rename.get(k, k): v for k, v in row.items()}).items() if c in cols}
               for row in answer["rows"][n]]  # fmt: skip
        assert got == [{k: _plain(v) for k, v in row.items()} for row in want[n]], n
        assert not want[n] or set(got[0]) == set(cols), (n, cols)


def _plain(v: Any) -> Any:
    return v.hex() if isinstance(v, bytes) else v

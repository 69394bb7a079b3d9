"""kerchunk forms beyond the round trip: the Parquet layout row by row against h5py's chunk index,
both forms opened by xarray (CF decoding) equal to xarray on the source files, the JSON document
against the fsspec reference spec, and a golden JSON document.

The golden file is written only by ``./dev golden`` (``tests/_golden.py``), after a deliberate
change of the form; a test never writes it."""

from __future__ import annotations

import base64
import json
import math
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest

import refstore
from refstore.emit import emit
from refstore.emit.kerchunk_parquet import SCHEMA

from ._golden import check
from ._oracle import assert_same
from .readers import kerchunk_json as json_reader
from .readers import kerchunk_parquet as parquet_reader

GOLDEN = Path(__file__).parent / "golden" / "kerchunk_edge.json"


def _case(cases: list[Any], cid: str) -> Any:
    for c in cases:
        if c.id == cid:
            return c
    pytest.skip(f"no case {cid}")


def _h5_chunk(d: h5py.Dataset, idx: tuple[int, ...]) -> tuple[int, int] | None:
    """(byte offset, size) of one chunk as h5py reports it; None when unwritten."""
    info = d.id.get_chunk_info_by_coord(tuple(i * c for i, c in zip(idx, d.chunks, strict=True)))
    return None if info.byte_offset is None else (int(info.byte_offset), int(info.size))


def _reads_as_fill(raw: bytes | None, zarray: dict[str, Any], d: h5py.Dataset) -> bool:
    """An unwritten chunk of ``d`` as the form stores it: absent (``raw`` None), reading as the
    ``.zarray`` fill value (null: zero), or inline bytes decoding (numcodecs, the ``.zarray``
    filters in reverse) to a chunk of h5py's fill value."""
    import numcodecs

    want = np.full(zarray["chunks"], d.fillvalue, d.dtype)
    if raw is None:
        fv = zarray["fill_value"]
        return bool(want.tobytes() == np.full_like(want, 0 if fv is None else fv).tobytes())
    data: Any = raw
    if zarray["compressor"] is not None:  # decoded first, then the filters in reverse
        data = numcodecs.get_codec(dict(zarray["compressor"])).decode(data)
    for cfg in reversed(zarray["filters"] or []):
        data = numcodecs.get_codec(dict(cfg)).decode(data)
    return bool(np.frombuffer(bytes(data), d.dtype).tobytes() == want.tobytes())


@pytest.mark.parametrize("streamed", [False, True])
def test_parquet_layout_rows_are_h5py_chunks(emit_cases: list[Any], tmp_path: Path, monkeypatch: Any,
                                             streamed: bool) -> None:  # fmt: skip
    if streamed:  # record files of 3 rows written one batch at a time (axis-0 rows cut across files)
        from refstore.emit import kerchunk_parquet

        monkeypatch.setattr(kerchunk_parquet, "MAX_RECORD_SIZE", 3)
        monkeypatch.setattr(kerchunk_parquet, "STREAM_REFS", 2)
    case = _case(emit_cases, "edge")
    out = tmp_path / "edge.parq"
    rep = emit(refstore.Collection.open(case.uri), "kerchunk-parquet", str(out), skip_unexpressible=True)
    zmeta = json.loads((out / ".zmetadata").read_text())
    rs = zmeta["record_size"]
    assert rep.extra["record_size"] == rs and zmeta["zarr_consolidated_format"] == 1
    assert isinstance(zmeta["metadata"]["partial/.zarray"], dict)  # objects, not strings
    url = "file://" + case.source
    with h5py.File(case.source) as f:
        for key, zarray in zmeta["metadata"].items():
            if not key.endswith("/.zarray"):
                continue
            name = key[: -len("/.zarray")]
            grid = [math.ceil(s / c) for s, c in zip(zarray["shape"], zarray["chunks"], strict=True)] or [1]
            n = math.prod(grid)
            files = sorted((out / name).glob("refs.*.parq"))
            assert len(files) == math.ceil(n / rs), name
            rows = []
            for k in range(len(files)):
                pf = pq.ParquetFile(out / name / f"refs.{k}.parq")
                assert pf.schema_arrow == SCHEMA and pf.metadata.num_rows == rs, name
                rows += pf.read().to_pylist()
            assert all(r["path"] is None and r["raw"] is None for r in rows[n:]), f"{name}: padding"
            d = f[name]
            for flat in range(n):
                r = rows[flat]
                if d.chunks is None:  # contiguous or compact: one chunk
                    if d.id.get_offset() is None:  # compact (inline), or never written: the fill inline
                        assert r["raw"] == d[()].tobytes() and r["path"] is None, name
                        if not d.id.get_storage_size():
                            assert zarray["fill_value"] is None, name
                    else:
                        assert (r["path"], r["offset"], r["size"]) == (url, d.id.get_offset(), d.id.get_storage_size())
                    continue
                ref = _h5_chunk(d, tuple(int(i) for i in np.unravel_index(flat, grid)))
                if ref is None:  # unwritten: absent, or the fill chunk inline
                    assert r["path"] is None and _reads_as_fill(r["raw"], zarray, d), f"{name}[{flat}]"
                else:
                    assert (r["path"], r["offset"], r["size"], r["raw"]) == (url, *ref, None), f"{name}[{flat}]"
        assert _h5_chunk(f["partial"], (1, 1)) is None  # absent chunks ...
    # ... which both engines read as the fill value
    arrays = parquet_reader.open_form(str(out), case)
    got = arrays["partial"][...]
    assert (got[16:32] == 7).all()
    assert_same(got, case.expected("partial", (slice(0, 50), slice(0, 37))), "partial")


def _xarray_on_sources(case: Any) -> Any:
    import xarray as xr

    src = refstore.Collection.open(case.uri).snapshot().rows("source", ["source"]).column("source").to_pylist()
    parts = [xr.open_dataset(p, engine="netcdf4") for p in sorted(src)]
    return xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", compat="equals", join="exact")


def _xarray_on_form(out: Path) -> Any:
    import xarray as xr

    with warnings.catch_warnings():  # pandas >= 3.1 deprecates fastparquet, fsspec's default engine
        warnings.filterwarnings("ignore", "The 'fastparquet' engine is deprecated", DeprecationWarning)
        ds = xr.open_dataset("reference://", engine="zarr", storage_options={"fo": str(out),
                             "remote_protocol": "file"})  # fmt: skip
        return ds.load()


def _assert_like(got: Any, expected: Any, what: str) -> None:
    """Every variable of ``expected`` (xarray on the sources) in ``got`` (xarray on the form), with
    its dims, values (NaN where masked) and main attributes."""
    for name, var in expected.variables.items():
        g = got[name]
        assert g.dims == var.dims, f"{what}: {name}"
        if var.dtype.kind in "mM":
            np.testing.assert_array_equal(g.values, var.values, err_msg=f"{what}: {name}")
        elif {"scale_factor", "add_offset"} & set(var.encoding):
            # zarr attributes are JSON: a float32 scale_factor comes back as a float, and xarray
            # unpacks to float64 instead of float32 (kerchunk's own output does the same)
            assert g.dtype.kind == "f", f"{what}: {name}"
            scale = float(np.nanmax(np.abs(var.values), initial=0.0)) if var.size else 0.0
            np.testing.assert_allclose(g.values, var.values, rtol=1e-6, atol=1e-6 * scale, err_msg=f"{what}: {name}")
        else:
            np.testing.assert_array_equal(g.values, var.values, err_msg=f"{what}: {name}", strict=True)
        for attr in ("units", "long_name", "calendar", "grid_mapping"):
            if attr in var.attrs:
                assert g.attrs.get(attr) == var.attrs[attr], f"{what}: {name}.{attr}"


@pytest.mark.filterwarnings("ignore:Duplicate dimension names present")  # netCDF3 fixture's grid(station, station)
@pytest.mark.parametrize("fmt", ["kerchunk-json", "kerchunk-parquet"])
@pytest.mark.parametrize("cid", ["oisst-series", "netcdf3-series"])
def test_xarray_opens_form_like_the_sources(emit_cases: list[Any], tmp_path: Path, fmt: str, cid: str) -> None:
    """xarray with its defaults (consolidated metadata, CF decoding of times, masks, scales)
    on the form equals xarray on the netCDF sources."""
    case = _case(emit_cases, cid)
    out = tmp_path / f"out.{fmt}"
    emit(refstore.Collection.open(case.uri), fmt, str(out))
    got = _xarray_on_form(out)
    expected = _xarray_on_sources(case)
    assert sorted(got.data_vars) == sorted(expected.data_vars)
    _assert_like(got, expected, cid)
    assert dict(got.attrs) | dict(expected.attrs) == dict(got.attrs)  # group attributes from the first source


def test_xarray_on_every_shared_netcdf_file(emit_cases: list[Any], tmp_path: Path) -> None:
    """Every file of ../shared/data that xarray's netCDF4 engine opens: both forms open in xarray
    and equal it (attribute-only scalars such as grid_mapping variables included)."""
    import xarray as xr

    from refstore.zarr_meta import register_codecs

    register_codecs()
    checked = 0
    for case in emit_cases:
        if case.source is None or "/generated/" in case.source or not case.source.endswith((".nc", ".cdf")):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the files' own CF oddities
            expected = xr.open_dataset(case.source, engine="netcdf4").load()
        for fmt in ("kerchunk-json", "kerchunk-parquet"):
            out = tmp_path / f"{checked}.{fmt}"
            rep = emit(refstore.Collection.open(case.uri), fmt, str(out), skip_unexpressible=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = _xarray_on_form(out)
            assert not rep.skipped, f"{case.id}: {rep.skipped}"
            assert set(got.variables) == set(expected.variables), case.id
            _assert_like(got, expected, f"{fmt} {case.id}")
            checked += 1
    if not checked:
        pytest.skip("../shared/data has no netCDF files")


def test_json_document_follows_the_reference_spec(emit_cases: list[Any], tmp_path: Path) -> None:
    """Version 1 as GDAL's /vsikerchunk_json_ref/ reads it: ``version`` first, no ``templates``
    nor ``gen``, every reference [URL, offset, length] equal to h5py's chunk index; metadata as
    JSON strings, inline chunks as base64, consolidated metadata equal to the per-key documents."""
    case = _case(emit_cases, "edge")
    out = tmp_path / "edge.json"
    emit(refstore.Collection.open(case.uri), "kerchunk-json", str(out), skip_unexpressible=True)
    doc = json.loads(out.read_text())
    assert doc["version"] == 1 and set(doc) == {"version", "generator", "refs"}
    assert next(iter(doc)) == "version"  # GDAL finds "refs" only after a leading "version"
    assert doc["generator"] == "refstore"  # the mark that lets a later emit replace this file (and no other)
    url = "file://" + case.source
    refs = doc["refs"]
    zmeta = json.loads(refs[".zmetadata"])
    assert zmeta["zarr_consolidated_format"] == 1
    assert zmeta["metadata"] == {k: json.loads(v) for k, v in refs.items() if k.rsplit("/", 1)[-1].startswith(".z")
                                 and k != ".zmetadata"}  # fmt: skip
    with h5py.File(case.source) as f:
        d = f["partial"]
        grid = [math.ceil(s / c) for s, c in zip(d.shape, d.chunks, strict=True)]
        for idx in np.ndindex(*grid):
            ref = _h5_chunk(d, idx)
            key = "partial/" + ".".join(map(str, idx))
            if ref is None:  # unwritten: absent, or the fill chunk inline
                got = refs.get(key)
                raw = None if got is None else base64.b64decode(got.removeprefix("base64:"))
                assert _reads_as_fill(raw, json.loads(refs["partial/.zarray"]), d), key
            else:
                assert refs.get(key) == [url, *ref], key
        assert refs["compact/0.0"] == "base64:" + base64.b64encode(f["compact"][()].tobytes()).decode()
        assert refs["scalar/0"] == [url, f["scalar"].id.get_offset(), 8]


def _file_range(url: str, offset: int, size: int) -> bytes:
    with open(url.removeprefix("file://"), "rb") as f:
        f.seek(offset)
        return f.read(size)


@pytest.mark.parametrize("fmt", ["kerchunk-json", "kerchunk-parquet"])
def test_held_chunks_are_carried_as_their_bytes(tmp_path: Path, series, fmt: str) -> None:
    """A form reads what its version reads: each held chunk is written as its bytes (JSON
    ``"base64:..."``, Parquet ``raw``), equal to the range it referenced; nothing else changes."""
    from refstore.table.hold import HoldSelection, hold

    from .test_emit_remap import _tree

    files = series(2)
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in files], concat_dim="time")
    before, after = tmp_path / "before", tmp_path / "after"
    emit(refstore.Collection.open(col), fmt, str(before))
    rep = hold(refstore.Collection.open(col), HoldSelection(arrays=("sst",)))
    assert rep.chunks > 0
    emit(refstore.Collection.open(col), fmt, str(after))
    if fmt == "kerchunk-json":
        doc_b, doc_a = json.loads(before.read_text()), json.loads(after.read_text())
        held = [k for k in doc_b["refs"] if k.startswith("sst/") and isinstance(doc_b["refs"][k], list)]
        assert len(held) == rep.chunks
        for k, v in doc_b["refs"].items():
            if k not in held:
                assert doc_a["refs"][k] == v, k
                continue
            url, off, size = v
            assert doc_a["refs"][k] == "base64:" + base64.b64encode(_file_range(url, off, size)).decode(), k
        assert doc_a["refs"].keys() == doc_b["refs"].keys()
        return
    tb, ta = _tree(before), _tree(after)
    assert {k: v for k, v in ta.items() if not k.startswith("sst/")} == {
        k: v for k, v in tb.items() if not k.startswith("sst/")}  # fmt: skip
    rb, ra = pq.read_table(before / "sst" / "refs.0.parq"), pq.read_table(after / "sst" / "refs.0.parq")
    carried = 0
    for b, a in zip(rb.to_pylist(), ra.to_pylist(), strict=True):
        if b["path"] is None:
            assert a == b
            continue
        assert a["path"] is None and a["raw"] == _file_range(b["path"], b["offset"], b["size"])
        carried += 1
    assert carried == rep.chunks


def golden_text(tmp_path: Path) -> str:
    """The kerchunk JSON of the generated edge-case file remapped to a fixed URL, indented."""
    from refstore.fixtures.edge import write_edge_file
    from refstore.table.remap import add_rule

    path = write_edge_file(tmp_path / "edge.h5")
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(path)])
    add_rule(refstore.Collection.open(col), str(path), "https://example.org/golden/edge.h5")
    out = tmp_path / "edge.json"
    emit(refstore.Collection.open(col), "kerchunk-json", str(out), skip_unexpressible=True)
    return json.dumps(json.loads(out.read_text()), indent=1) + "\n"


def test_golden_json(tmp_path: Path) -> None:
    """The generated edge-case file, remapped to a fixed URL, emits exactly the golden document
    (compared indented, so a change reads as a diff)."""
    check(GOLDEN, golden_text(tmp_path))


# --------------------------------------------------------------------------- absent chunks
def _sparse_h5(path: Path, dtype: str, fill: Any, cf: Any, codecs: dict[str, Any]) -> None:
    """(4, 4) in (2, 2) chunks, only chunk (0, 0) written (it holds a 0, the fill value and the
    _FillValue); the other three chunks are never written (absent)."""
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(4, 4), chunks=(2, 2), dtype=dtype, fillvalue=fill, **codecs)
        d[0:2, 0:2] = np.array([[0, 1], [fill, 2 if cf is None else cf]], dtype)
        if cf is not None:
            d.attrs["_FillValue"] = np.array(cf, dtype)


FILL_CASES = {
    # (dtype, stored HDF5 fill, _FillValue attribute or None, HDF5 filters)
    "zero-fill-no-attr": ("f4", 0, None, {}),
    "zero-fill-other-attr": ("i2", 0, -999, {}),
    "fill-no-attr": ("f4", 7.5, None, {"compression": "gzip", "shuffle": True}),
    "fill-no-attr-raw": ("i4", -5, None, {}),
    "fill-other-attr": ("i2", 3, -999, {"compression": "gzip"}),
    "fill-equals-attr": ("f8", -1.0, -1.0, {"compression": "gzip"}),
}


@pytest.mark.parametrize("fmt", ["kerchunk-json", "kerchunk-parquet"])
@pytest.mark.parametrize("cid", sorted(FILL_CASES))
def test_absent_chunks_read_as_the_stored_fill_and_xarray_masks_only_fillvalue(
    tmp_path: Path, fmt: str, cid: str
) -> None:
    """Absent chunks read as the stored fill value (h5py: raw values through zarr), and xarray on
    the form masks exactly what xarray's netCDF4 engine masks on the file (the _FillValue, and
    nothing without one): a real 0 stays 0, a fill value different from _FillValue stays."""
    import xarray as xr

    dtype, fill, cf, codecs = FILL_CASES[cid]
    h5 = tmp_path / "sparse.h5"
    _sparse_h5(h5, dtype, fill, cf, codecs)
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(h5)])
    out = tmp_path / f"out.{fmt}"
    emit(refstore.Collection.open(col), fmt, str(out))
    with h5py.File(h5) as f:
        raw = f["x"][...]
        assert f["x"].id.get_num_chunks() == 1
    reader = json_reader if fmt == "kerchunk-json" else parquet_reader
    np.testing.assert_array_equal(np.asarray(reader.open_form(str(out), None)["x"][...]), raw, strict=True)
    got = _xarray_on_form(out)["x"]
    expected = xr.open_dataset(h5, engine="netcdf4")["x"].load()
    np.testing.assert_array_equal(got.values, expected.values, err_msg=cid, strict=True)


@pytest.mark.parametrize("fmt", ["kerchunk-json", "kerchunk-parquet"])
def test_inline_fill_chunks_over_the_cap_are_refused_before_writing(
    tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above MAX_FILL_BYTES of inline fill chunks the array is refused by name (nothing written),
    or left out with --skip-unexpressible; under it the same array is expressed."""
    from refstore.emit import kerchunk_json
    from refstore.errors import UnexpressibleError

    h5 = tmp_path / "sparse.h5"
    _sparse_h5(h5, "i4", -5, None, {})  # uncompressed: each inline fill chunk is 16 bytes
    with h5py.File(h5, "a") as f:
        f.create_dataset("y", data=np.arange(4, dtype="i4"))
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(h5)])
    out = tmp_path / f"out.{fmt}"
    monkeypatch.setattr(kerchunk_json, "MAX_FILL_BYTES", 3 * 16 - 1)
    with pytest.raises(UnexpressibleError, match=r"array 'x'.*3 absent chunks"):
        emit(refstore.Collection.open(col), fmt, str(out))
    assert not out.exists()
    rep = emit(refstore.Collection.open(col), fmt, str(out), skip_unexpressible=True)
    assert set(rep.skipped) == {"x"}
    monkeypatch.setattr(kerchunk_json, "MAX_FILL_BYTES", 3 * 16)
    emit(refstore.Collection.open(col), fmt, str(out))
    reader = parquet_reader if fmt == "kerchunk-parquet" else json_reader
    with h5py.File(h5) as f:
        assert_same(reader.open_form(str(out), None)["x"][...], f["x"][...], f"{fmt} x")


COMPLEX_CASES = {
    # (dtype, stored HDF5 fill, _FillValue attribute)
    "zero-fill-other-attr": ("c8", np.complex64(0), -9 + 2j),
    "fill-equals-attr": ("c8", -9 + 2j, -9 + 2j),
    "fill-other-attr": ("c16", np.complex128(1 - 1j), -9 + 2j),
}


@pytest.mark.parametrize("cid", sorted(COMPLEX_CASES))
def test_complex_fillvalue_is_masked_by_xarray_on_every_zarr_form(tmp_path: Path, cid: str) -> None:
    """A complex ``_FillValue``: xarray over the kerchunk forms (zarr v2), the Icechunk form and
    the zarr store (zarr v3) masks exactly what xarray's CF decoding masks over h5py's values and
    attributes of the file (the netCDF4 engine cannot read an HDF5 complex attribute), and the raw
    values (absent chunks: the stored fill) are h5py's."""
    import xarray as xr

    from .readers.icechunk import open_repo

    dtype, fill, cf = COMPLEX_CASES[cid]
    h5 = tmp_path / "sparse.h5"
    _sparse_h5(h5, dtype, fill, cf, {})
    with h5py.File(h5) as f:
        raw = f["x"][...]
        attrs = dict(f["x"].attrs)
    assert isinstance(attrs["_FillValue"], np.complexfloating)
    expected = xr.decode_cf(xr.Dataset({"x": (("a", "b"), raw, attrs)}))["x"].values
    assert np.isnan(expected).sum() == (1 if fill != cf else 14)  # the oracle masks something
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(h5)])
    got: dict[str, Any] = {}
    for fmt in ("kerchunk-json", "kerchunk-parquet", "icechunk"):
        out = tmp_path / f"out.{fmt}"
        emit(refstore.Collection.open(col), fmt, str(out))
        if fmt == "icechunk":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                store = open_repo(str(out)).readonly_session(branch="main").store
                got[fmt] = xr.open_zarr(store, consolidated=False, zarr_format=3)["x"].values
        else:
            reader = json_reader if fmt == "kerchunk-json" else parquet_reader
            np.testing.assert_array_equal(np.asarray(reader.open_form(str(out), None)["x"][...]), raw, strict=True)
            got[fmt] = _xarray_on_form(out)["x"].values
    got["zarr store"] = xr.open_zarr(refstore.zarr_store(col))["x"].values
    for form, values in got.items():
        np.testing.assert_array_equal(values, expected, err_msg=f"{cid} {form}", strict=True)

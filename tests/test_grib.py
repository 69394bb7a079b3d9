"""GRIB1/GRIB2: every message read through refstore equals ecCodes' values of that message (bit for
bit, as cfgrib casts and masks them); xarray over the collection equals cfgrib over the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import refstore
from refstore.errors import UnexpressibleError
from refstore.read.verify import verify

from .conftest import SHARED_DATA

eccodes = pytest.importorskip("eccodes")
xr = pytest.importorskip("xarray")
from refstore.fixtures.grib import write_grib, write_grib_series  # noqa: E402

GRIBS = sorted((SHARED_DATA / "gh-cfgrib").glob("*.grib")) if SHARED_DATA.is_dir() else []
CORRUPTED = "era5-levels-corrupted.grib"
MISSING = float(np.finfo(np.float32).max)


def _messages(path: Path) -> list[tuple[int, int, np.ndarray]]:
    """(offset, length, values) of every message, by ecCodes alone: values as cfgrib gives them
    (float64 -> float32, bitmap-missing points NaN)."""
    out = []
    with open(path, "rb") as f:
        while (h := eccodes.codes_grib_new_from_file(f)) is not None:
            try:
                eccodes.codes_set(h, "missingValue", MISSING)
                raw = eccodes.codes_get_values(h)
                vals = raw.astype("<f4")
                if eccodes.codes_get(h, "bitmapPresent"):
                    vals[raw == MISSING] = np.nan
                out.append((int(eccodes.codes_get(h, "offset")), int(eccodes.codes_get(h, "totalLength")), vals))
            finally:
                eccodes.codes_release(h)
    return out


def _check_messages(col: str, path: Path) -> int:
    """Each message is exactly one chunk row, and refstore's read of that chunk equals ecCodes."""
    ds = refstore.open(col)
    rows = ds.snapshot.rows("chunk", ["array", "offset", "length", "g0", "g1", "g2", "g3", "g4"],
                            f"source = '{path}' AND offset >= 0").to_pylist()  # fmt: skip
    by_offset = {r["offset"]: r for r in rows}
    msgs = _messages(path)
    assert len(rows) == len(msgs) and set(by_offset) == {o for o, _, _ in msgs}
    for offset, length, want in msgs:
        r = by_offset[offset]
        assert r["length"] == length
        arr = ds[r["array"]]
        assert arr.dtype == np.dtype("<f4")
        sel = tuple(slice(r[f"g{i}"] * c, r[f"g{i}"] * c + c) for i, c in enumerate(arr.meta.chunks))
        got = np.asarray(arr[sel])
        assert got.dtype == want.dtype
        assert got.tobytes() == want.tobytes(), (path.name, r["array"], offset)
    return len(msgs)


def _same_as_cfgrib(ds: xr.Dataset, ex: xr.Dataset) -> None:
    assert sorted(ds.data_vars) == sorted(ex.data_vars)
    assert sorted(ds.variables) == sorted(ex.variables)
    for v in ex.variables:
        a, b = ds[v], ex[v]
        assert a.dims == b.dims, v
        assert a.dtype == b.dtype, v
        assert np.array_equal(a.values, b.values, equal_nan=a.dtype.kind == "f"), v
    for v in ex.data_vars:
        for k in ("GRIB_paramId", "GRIB_shortName", "GRIB_typeOfLevel", "units", "long_name"):
            if k in ex[v].attrs:
                assert ds[v].attrs[k] == ex[v].attrs[k], (v, k)


def _cfgrib(path: Path) -> xr.Dataset:
    return xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": ""}, decode_timedelta=True)


# ---------------------------------------------------------------------------- ../shared/data
@pytest.mark.parametrize("path", [p for p in GRIBS if p.name != CORRUPTED], ids=lambda p: p.name)
def test_shared_grib_conforms(path: Path, new_collection, shared_data) -> None:
    col = new_collection()
    report = refstore.scan(col, [str(path)])
    assert report.failed == () and report.unsupported == ()
    assert _check_messages(col, path) > 0
    _same_as_cfgrib(xr.open_dataset(col, engine="refstore"), _cfgrib(path))
    rep = verify(refstore.open(col).snapshot)
    assert rep.mismatched == 0 and rep.checked > 0


def test_damaged_file_fails_alone(tmp_path: Path, new_collection, shared_data) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in (CORRUPTED, "regular_ll_sfc.grib"):
        shutil.copy(shared_data / "gh-cfgrib" / name, folder / name)
    col = new_collection()
    report = refstore.scan(col, [str(folder)])
    assert report.committed and report.new == 1
    [(where, why)] = report.failed
    assert where.endswith(CORRUPTED)
    assert "wrong message length" in why and "\n" not in why
    assert "skt" in refstore.open(col).arrays


# ---------------------------------------------------------------------------- generated files
def test_generated_grib2(tmp_path: Path, new_collection) -> None:
    path = write_grib(tmp_path / "a.grib2", skip=(("u", 6, 500),))
    col = new_collection()
    assert refstore.scan(col, [str(tmp_path)]).new == 1  # .grib2 found in a folder walk
    assert _check_messages(col, path) == 7
    ds = xr.open_dataset(col, engine="refstore")
    _same_as_cfgrib(ds, _cfgrib(path))
    assert np.isnan(ds["u"].values[1, 1]).all()  # the combination no message holds
    assert np.isnan(ds["t"].values).sum() == 3 * 4  # the bitmap: three missing points a message
    assert ds["t"].attrs["GRIB_shortName"] == "t" and ds["t"].attrs["units"] == "K"
    assert verify(refstore.open(col).snapshot).mismatched == 0


def test_sniffed_by_signature_not_name(tmp_path: Path, new_collection) -> None:
    path = write_grib(tmp_path / "a.grib2")
    odd = tmp_path / "odd.nc"
    odd.write_bytes(path.read_bytes())
    assert refstore.scan(new_collection(), [str(odd)]).new == 1
    junk = tmp_path / "junk.grib"
    junk.write_bytes(b"GRIB\x00\x00\x00\x02" + (1000).to_bytes(8, "big") + b"\x00" * 40)
    report = refstore.scan(new_collection("c2"), [str(junk)])
    assert not report.committed and "at byte 0" in report.failed[0][1]


def test_series_along_time(tmp_path: Path, new_collection) -> None:
    files = write_grib_series(tmp_path / "s", 3)
    col = new_collection()
    report = refstore.scan(col, [str(tmp_path / "s")], concat_dim="time")
    assert report.new == 3 and report.failed == ()
    ds = xr.open_dataset(col, engine="refstore")
    ex = xr.concat([_cfgrib(p).expand_dims("time") for p in files], dim="time", data_vars="all",
                   coords="different", compat="equals", join="outer")  # fmt: skip
    for v in ("t", "u"):
        assert ds[v].dims == ex[v].dims and ds[v].dtype == ex[v].dtype
        assert np.array_equal(ds[v].values, ex[v].values, equal_nan=True)
    assert np.array_equal(ds["time"].values, ex["time"].values)
    for f in files:
        _check_messages(col, f)
    assert verify(refstore.open(col).snapshot).mismatched == 0


def test_zarr_store_and_forms(tmp_path: Path, new_collection) -> None:
    import zarr

    from refstore.emit import emit

    def emit_to(fmt: str, out: Path) -> None:
        emit(refstore.open(col).snapshot.collection, fmt, str(out))

    path = write_grib(tmp_path / "a.grib2")
    col = new_collection()
    refstore.scan(col, [str(path)])
    want = _cfgrib(path)["t"].values
    g = zarr.open_group(refstore.zarr_store(col), mode="r")
    assert g["t"][:].tobytes() == want.tobytes()
    out = tmp_path / "refs.json"
    emit_to("kerchunk-json", out)
    meta = json.loads(json.loads(out.read_text())["refs"]["t/.zarray"])
    assert meta["filters"] == [{"id": "refstore.grib", "dtype": "<f4"}]
    from .readers.kerchunk_json import open_form

    assert np.asarray(open_form(str(out), None)["t"][:]).tobytes() == want.tobytes()
    from .readers import icechunk as ice
    from .readers import kerchunk_parquet as kp

    emit_to("kerchunk-parquet", tmp_path / "refs.parq")
    assert np.asarray(kp.open_form(str(tmp_path / "refs.parq"), None)["t"][:]).tobytes() == want.tobytes()

    emit_to("icechunk", tmp_path / "repo")
    arrays = ice.open_form(str(tmp_path / "repo"), None)
    assert np.asarray(arrays["t"][:]).tobytes() == want.tobytes()
    with pytest.raises(UnexpressibleError, match="GRIB"):
        emit_to("sqlite", tmp_path / "refs.sqlite")
    with pytest.raises(UnexpressibleError, match="GRIB"):
        emit_to("vrt", tmp_path / "refs.vrt")


def test_one_parameter_on_two_level_types_and_level_sets(tmp_path: Path, new_collection) -> None:
    path = write_grib(tmp_path / "a.grib2", params=("t",), levels=(850, 500), steps=(0,))
    write_grib(path, params=("t",), levels=(1, 2, 3), steps=(0,), level_type="hybrid", mode="ab", seed=1)
    write_grib(path, params=("u",), levels=(1000, 850, 500), steps=(0,), mode="ab", seed=2)
    col = new_collection()
    assert refstore.scan(col, [str(path)]).failed == ()
    ds = xr.open_dataset(col, engine="refstore")
    assert sorted(ds.data_vars) == ["t_hybrid", "t_isobaricInhPa", "u"]
    assert ds["t_hybrid"].dims == ("hybrid", "latitude", "longitude")
    assert ds["t_isobaricInhPa"].dims == ("isobaricInhPa", "latitude", "longitude")
    assert ds["u"].dims == ("isobaricInhPa_1", "latitude", "longitude")  # other pressure levels: another dim
    assert ds["isobaricInhPa_1"].values.tolist() == [1000.0, 850.0, 500.0]
    for name, keys in (("t_hybrid", {"typeOfLevel": "hybrid"}), ("t_isobaricInhPa", {"shortName": "t",
                                                                                      "typeOfLevel": "isobaricInhPa"})):
        ex = xr.open_dataset(path, engine="cfgrib", decode_timedelta=True,
                             backend_kwargs={"indexpath": "", "filter_by_keys": keys})  # fmt: skip
        assert ds[name].dtype == ex["t"].dtype
        assert ds[name].values.tobytes() == ex["t"].values.tobytes()
    assert _check_messages(col, path) == 8


def test_series_along_step(tmp_path: Path, new_collection) -> None:
    files = [write_grib(tmp_path / "s" / f"step{s:02d}.grib2", steps=(s,), seed=s) for s in (0, 6, 12)]
    col = new_collection()
    assert refstore.scan(col, [str(tmp_path / "s")], concat_dim="step").new == 3
    ds = xr.open_dataset(col, engine="refstore")
    assert ds["t"].dims == ("step", "isobaricInhPa", "latitude", "longitude")
    assert (ds["step"].values / np.timedelta64(1, "h")).tolist() == [0.0, 6.0, 12.0]
    ex = xr.concat([_cfgrib(p).expand_dims("step") for p in files], dim="step", data_vars="all",
                   coords="different", compat="equals", join="outer")  # fmt: skip
    assert ds["t"].values.tobytes() == ex["t"].values.tobytes()
    assert verify(refstore.open(col).snapshot).mismatched == 0


def test_grib_on_s3(tmp_path: Path, new_collection, s3) -> None:
    files = write_grib_series(tmp_path / "s", 2)
    s3.upload(tmp_path / "s", "grib")
    remote, local = new_collection("remote"), new_collection("local")
    rep = refstore.scan(remote, [s3.url("grib/")], concat_dim="time")
    assert (rep.new, rep.failed) == (2, ())
    refstore.scan(local, [str(tmp_path / "s")], concat_dim="time")
    a, b = refstore.open(remote), refstore.open(local)
    for name in ("t", "u", "time", "valid_time"):
        assert a[name][...].tobytes() == b[name][...].tobytes()
    assert refstore.verify(refstore.Collection.open(remote).snapshot()).mismatched == 0
    assert len(files) == 2


@pytest.mark.parametrize("path", [p for p in GRIBS if p.name != CORRUPTED], ids=lambda p: p.name)
def test_grouping_keys_equal_eccodes_per_message(path: Path, shared_data) -> None:
    """The scan reads ecCodes' concepts once per message identity (reference and forecast time
    blanked): every message's group still has that message's own paramId, level type, ..."""
    from refstore.scan.grib import message_index

    keys = ("paramId", "typeOfLevel", "stepType", "dataType", "gridType", "md5GridSection", "numberOfPoints")
    with open(path, "rb") as f:
        groups, _glob = message_index(f, str(path), path.stat().st_size)
        for g in groups:
            for m in g.messages:
                f.seek(m.offset)
                h = eccodes.codes_new_from_message(f.read(m.length))
                try:
                    own = tuple(eccodes.codes_get(h, k) if eccodes.codes_is_defined(h, k) else None for k in keys)
                finally:
                    eccodes.codes_release(h)
                own = tuple(None if v in ("undef", "unknown") else v for v in own)
                assert tuple(str(v) for v in g.key) == tuple(str(v) for v in own), m.offset


def test_without_eccodes_one_clear_line(tmp_path: Path, new_collection, monkeypatch) -> None:
    import sys

    path = write_grib(tmp_path / "a.grib2")
    col = new_collection()
    refstore.scan(col, [str(path)])
    monkeypatch.setitem(sys.modules, "eccodes", None)  # as if the package were not installed
    # in this process (no worker): the missing package is simulated here only
    report = refstore.scan(new_collection("c2"), [str(path)], timeout=None)
    assert "install the 'eccodes' package" in report.failed[0][1]
    from refstore.errors import RefstoreError

    with pytest.raises(RefstoreError, match="pip install 'refstore\\[grib\\]'"):
        refstore.open(col)["t"][...]


def test_multi_field_message_refused(tmp_path: Path, new_collection) -> None:
    """A GRIB2 message holding two fields (sections 4-7 repeated) fails its file with one line:
    a chunk decodes one field, and the second would be lost silently."""
    msg = write_grib(tmp_path / "one.grib2", params=("t",), levels=(850,), steps=(0,)).read_bytes()
    pos, sections = 16, []
    while pos < len(msg) - 4:
        n = int.from_bytes(msg[pos : pos + 4], "big")
        sections.append((msg[pos + 4], msg[pos : pos + n]))
        pos += n
    body = b"".join(b for _, b in sections) + b"".join(b for k, b in sections if k >= 4)
    two = msg[:8] + (16 + len(body) + 4).to_bytes(8, "big") + body + b"7777"
    (tmp_path / "two.grib2").write_bytes(two)
    report = refstore.scan(new_collection(), [str(tmp_path / "two.grib2")])
    assert "holds 2 fields" in report.failed[0][1] and not report.committed

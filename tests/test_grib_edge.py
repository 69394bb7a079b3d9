"""GRIB as real archives write it, against ecCodes and cfgrib over the same bytes: missing values
of complex packing, grids scanned column-major, with alternating rows or east to west, messages
after bulletin headers, names and coordinates as cfgrib gives them, and hostile grid sizes
refused in bounded memory with one line (no ecCodes log lines)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import refstore
from refstore.read.verify import verify

from .conftest import SHARED_DATA

eccodes = pytest.importorskip("eccodes")
xr = pytest.importorskip("xarray")
from refstore.fixtures.grib import write_grib  # noqa: E402

FLT_MAX = float(np.finfo(np.float32).max)
ZOO = SHARED_DATA / "zoo"


def _zoo_gribs() -> list[str]:
    manifest = ZOO / "MANIFEST.md"
    if not manifest.is_file():
        return []
    return [line.split("|")[1].strip().strip("`") for line in manifest.read_text().splitlines()
            if "| GRIB1" in line or "| GRIB2" in line]  # fmt: skip


def _cfgrib(path: Path, **kw: object) -> xr.Dataset:
    return xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": ""}, decode_timedelta=True, **kw)


def _scan(new_collection, *paths: Path) -> xr.Dataset:
    col = new_collection()
    report = refstore.scan(col, [str(p) for p in paths])
    assert report.failed == () and report.unsupported == (), (report.failed, report.unsupported)
    assert verify(refstore.open(col).snapshot).mismatched == 0
    return xr.open_dataset(col, engine="refstore")


KEYS = ("offset", "totalLength", "gridType", "numberOfPoints", "jPointsAreConsecutive", "alternativeRowScanning",
        "iScansNegatively", "missingValue", "Nx", "Ny")


def _ecc_messages(path: Path, coords: bool = True, only: set[int] | None = None) -> list[dict[str, object]]:
    """Every message by ecCodes alone (it skips headers itself): offset, keys, values with its
    own missingValue (the default one) and NaN at the points it reports missing; ``coords``:
    its per-point latitudes and longitudes; ``only``: the offsets of the messages to decode."""
    out = []
    with open(path, "rb") as f:
        while (h := eccodes.codes_grib_new_from_file(f)) is not None:
            try:
                keys = {k: eccodes.codes_get(h, k) if eccodes.codes_is_defined(h, k) else None for k in KEYS}
                if only is not None and keys["offset"] not in only:
                    out.append(keys)
                    continue
                raw = eccodes.codes_get_values(h)
                missing = raw == keys["missingValue"]
                keys["values"] = np.where(missing, np.nan, raw).astype("<f4")
                keys["missing"] = int(missing.sum())
                if coords and eccodes.codes_is_defined(h, "latitudes"):
                    keys["lats"] = eccodes.codes_get_array(h, "latitudes")
                    keys["lons"] = eccodes.codes_get_array(h, "longitudes")
            finally:
                eccodes.codes_release(h)
            out.append(keys)
    return out


# ---------------------------------------------------------------------------- 1. missing values
@pytest.mark.parametrize("packing", ["grid_complex", "grid_complex_spatial_differencing"])
def test_complex_packing_missing_values_are_nan(tmp_path: Path, new_collection, packing: str) -> None:
    """No bitmap: the packing marks missing points (``missingValueManagementUsed``). ecCodes gives
    its ``missingValue`` there, cfgrib NaN; refstore NaN, as for bitmaps (the array's fill)."""
    path = tmp_path / f"{packing}.grib2"
    h = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        for key, value in (("Ni", 12), ("Nj", 7), ("latitudeOfFirstGridPointInDegrees", 90.0),
                           ("latitudeOfLastGridPointInDegrees", -90.0), ("longitudeOfFirstGridPointInDegrees", 0.0),
                           ("longitudeOfLastGridPointInDegrees", 330.0), ("iDirectionIncrementInDegrees", 30.0),
                           ("jDirectionIncrementInDegrees", 30.0), ("packingType", packing),
                           ("missingValueManagementUsed", 1), ("bitmapPresent", 0), ("missingValue", 9999.0)):
            eccodes.codes_set(h, key, value)  # fmt: skip
        values = 250 + np.arange(84.0) / 3
        values[[0, 3, 10, 50, 83]] = 9999.0
        eccodes.codes_set_values(h, values)
        assert eccodes.codes_get(h, "bitmapPresent") == 0 and eccodes.codes_get(h, "packingType") == packing
        path.write_bytes(eccodes.codes_get_message(h))
    finally:
        eccodes.codes_release(h)
    [msg] = _ecc_messages(path)
    assert msg["missing"] == 5  # ecCodes gives its missingValue at those points
    ds = _scan(new_collection, path)
    ex = _cfgrib(path)
    assert ds["t"].dtype == ex["t"].dtype == np.float32
    assert np.array_equal(ds["t"].values, ex["t"].values, equal_nan=True)
    assert np.array_equal(ds["t"].values.ravel(), msg["values"], equal_nan=True)
    assert np.isnan(ds["t"].values).sum() == 5 and np.nanmax(ds["t"].values) < 300


# ---------------------------------------------------------------------------- 2. scanning modes
def _grid_file(path: Path, i_neg: int, j_pos: int, j_cons: int, alt: int, nx: int = 5, ny: int = 4) -> Path:
    """A regular_ll message whose points are stored as WMO code table 3.4 says for these flags;
    each point's value is 100 * (rank of its latitude) + (rank of its longitude)."""
    lats = [10.0 * j for j in range(ny)] if j_pos else [10.0 * (ny - 1 - j) for j in range(ny)]
    lons = [10.0 * (nx - 1 - i) for i in range(nx)] if i_neg else [10.0 * i for i in range(nx)]
    lines = [[(j, i) for i in range(nx)] for j in range(ny)] if not j_cons else \
        [[(j, i) for j in range(ny)] for i in range(nx)]  # fmt: skip
    stored = []
    for n, line in enumerate(lines):
        for j, i in reversed(line) if alt and n % 2 else line:
            stored.append(100.0 * (lats[j] / 10) + lons[i] / 10)
    h = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        for key, value in (("Ni", nx), ("Nj", ny), ("iScansNegatively", i_neg), ("jScansPositively", j_pos),
                           ("jPointsAreConsecutive", j_cons), ("alternativeRowScanning", alt),
                           ("latitudeOfFirstGridPointInDegrees", lats[0]),
                           ("latitudeOfLastGridPointInDegrees", lats[-1]),
                           ("longitudeOfFirstGridPointInDegrees", lons[0]),
                           ("longitudeOfLastGridPointInDegrees", lons[-1]),
                           ("iDirectionIncrementInDegrees", 10.0), ("jDirectionIncrementInDegrees", 10.0)):
            eccodes.codes_set(h, key, value)  # fmt: skip
        eccodes.codes_set_values(h, np.array(stored))
        path.write_bytes(eccodes.codes_get_message(h))
    finally:
        eccodes.codes_release(h)
    return path


FLAGS = [(1, 0, 0, 0), (0, 1, 1, 0), (0, 0, 0, 1), (0, 0, 1, 1), (1, 1, 1, 1)]


@pytest.mark.parametrize("flags", FLAGS, ids=lambda f: "iNeg{}-jPos{}-jCons{}-alt{}".format(*f))
def test_scanning_modes_put_values_where_ecCodes_says(tmp_path: Path, new_collection, flags: tuple[int, ...]) -> None:
    """Every value at its own latitude and longitude: ecCodes' per-point coordinates (which run
    every row one way), the values as WMO stores them. cfgrib agrees on row-major grids' values,
    but labels rows stored east to west with ascending longitudes and leaves column-major
    values in stored order; refstore is right there."""
    i_neg, _j_pos, j_cons, alt = flags
    path = _grid_file(tmp_path / "g.grib2", *flags)
    [msg] = _ecc_messages(path)
    ds = _scan(new_collection, path)
    t, lat, lon = ds["t"].values, ds["latitude"].values, ds["longitude"].values
    assert t.dtype == np.float32 and t.shape == (4, 5)
    assert sorted(lat) == sorted(set(msg["lats"])) and sorted(lon) == sorted(set(msg["lons"]))
    want = 100.0 * (lat[:, None] / 10) + lon[None, :] / 10  # the value written at each (lat, lon)
    assert np.array_equal(t, want.astype("<f4"))
    if not alt:  # ecCodes' own (lat, lon, value) triples agree point for point
        for la, lo, v in zip(msg["lats"], msg["lons"], msg["values"], strict=True):
            assert t[list(lat).index(la), list(lon).index(lo)] == v
    first = msg["lons"][:: 4 if j_cons else 1][:5]  # ecCodes' longitudes along the first stored row
    assert lon.tolist() == list(first)
    ex = _cfgrib(path)
    assert lat.tolist() == ex["latitude"].values.tolist()
    if not j_cons:
        assert np.array_equal(t, ex["t"].values)
    if i_neg:  # cfgrib: ascending longitudes over values stored east to west
        assert ex["longitude"].values.tolist() == sorted(lon) != lon.tolist()


def test_zoo_column_major_files_against_ecCodes_points(shared_data, new_collection) -> None:
    """pygrib's scanning-mode samples (column-major, one with a bitmap): each value at the
    latitude and longitude ecCodes gives it (cfgrib leaves them in stored order)."""
    for name in ("scanning_mode.grib2", "scanning_mode_with_bitmap.grib2"):
        path = ZOO / "pypi-pygrib" / name
        [msg] = _ecc_messages(path)
        col = new_collection(f"col_{name}")
        assert refstore.scan(col, [str(path)]).failed == ()
        ds = xr.open_dataset(col, engine="refstore")
        t, lat, lon = ds["t"].values, ds["latitude"].values.tolist(), ds["longitude"].values.tolist()
        for la, lo, v in zip(msg["lats"], msg["lons"], msg["values"], strict=True):
            got = t[lat.index(la), lon.index(lo)]
            assert got == v or (np.isnan(got) and np.isnan(v)), (name, la, lo)
        assert np.isnan(t).sum() == msg["missing"]
        assert not np.array_equal(t, _cfgrib(path)["t"].values, equal_nan=True)


# ---------------------------------------------------------------------------- 3. headers
def test_messages_after_headers_scan(tmp_path: Path, new_collection) -> None:
    """A WMO bulletin (heading before each message, trailer after), an EBCDIC header of 41
    bytes, one of 6,148 bytes: every message scans, each chunk where ecCodes finds it."""
    one = write_grib(tmp_path / "one.grib2", params=("t",), levels=(850, 500), steps=(0,))
    msgs = _split(one.read_bytes())
    heading = b"\x01\r\r\n001\r\r\nHTXE85 ECMF 010000\r\r\n"
    files = {
        "bulletin.grib2": b"".join(heading + m + b"\r\r\n\x03" for m in msgs),
        "ebcdic41.grib2": bytes(range(0x40, 0x69)) + b"".join(msgs),
        "ebcdic6148.bin": (b"\xc7\xd9\xc9\xc2" * 1537) + b"".join(msgs),  # 'GRIB' in EBCDIC, never ASCII
    }
    ex = _cfgrib(one)
    for name, data in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert data.index(b"GRIB") > 0
        col = new_collection(f"col_{name}")
        report = refstore.scan(col, [str(path)])
        assert report.failed == (), report.failed
        ds = xr.open_dataset(col, engine="refstore")
        assert np.array_equal(ds["t"].values, ex["t"].values, equal_nan=True)
        assert np.array_equal(ds["t"].values, _cfgrib(path)["t"].values, equal_nan=True)
        rows = refstore.open(col).snapshot.rows("chunk", ["offset", "length"], "offset >= 0").to_pylist()
        want = {(int(m["offset"]), int(m["totalLength"])) for m in _ecc_messages(path)}
        assert {(r["offset"], r["length"]) for r in rows} == want
        assert verify(refstore.open(col).snapshot).mismatched == 0


def _split(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        n = int.from_bytes(data[pos + 8 : pos + 16], "big")
        out.append(data[pos : pos + n])
        pos += n
    return out


# ---------------------------------------------------------------------------- 4. names, coordinates
def test_time_step_valid_time_are_coordinates(tmp_path: Path, new_collection) -> None:
    """cfgrib's coordinates stay coordinates even where no data variable is opened."""
    path = write_grib(tmp_path / "a.grib2")
    col = new_collection()
    refstore.scan(col, [str(path)])
    ex = _cfgrib(path)
    ds = xr.open_dataset(col, engine="refstore", drop_variables=["t", "u"])
    assert sorted(ds.coords) == sorted(ex.coords) and list(ds.data_vars) == []
    assert {"time", "step", "valid_time"} <= set(ds.coords)
    full = xr.open_dataset(col, engine="refstore")
    assert sorted(full.coords) == sorted(ex.coords) and sorted(full.data_vars) == sorted(ex.data_vars)


def test_unknown_parameter_named_as_cfgrib(shared_data, new_collection) -> None:
    path = ZOO / "pypi-pygrib" / "no-radius-shapeOfEarth-7.grb2"
    ds, ex = _scan(new_collection, path), _cfgrib(path)
    assert list(ds.data_vars) == list(ex.data_vars) == ["unknown"]
    skip = {"GRIB_stepUnits"}  # cfgrib reads it after setting it to hours (design/formats.md)
    assert {k: v for k, v in ds["unknown"].attrs.items() if k not in skip} == \
        {k: v for k, v in ex["unknown"].attrs.items() if k not in skip}  # fmt: skip
    assert np.array_equal(ds["unknown"].values, ex["unknown"].values, equal_nan=True)


# ---------------------------------------------------------------------------- 5. hostile sizes
_DRIVER = textwrap.dedent("""
    import json, resource, subprocess, sys
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    out = []
    for args in json.loads(sys.argv[1]):
        p = subprocess.run([sys.executable, "-c", "from refstore.cli.app import main; main()", *args],
                           capture_output=True, text=True,
                           preexec_fn=limit, timeout=120)
        out.append([p.returncode, p.stderr])
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"runs": out, "peak_kb": rss}))
""")


def _grib1_one_point(path: Path, patch: dict[int, bytes]) -> Path:
    """ecCodes' GRIB1 regular_ll sample cut to one point, then GDS octets overwritten."""
    h = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib1")
    try:
        for key, value in (("Ni", 1), ("Nj", 1), ("latitudeOfFirstGridPointInDegrees", 10.0),
                           ("latitudeOfLastGridPointInDegrees", 10.0), ("longitudeOfFirstGridPointInDegrees", 10.0),
                           ("longitudeOfLastGridPointInDegrees", 10.0)):
            eccodes.codes_set(h, key, value)  # fmt: skip
        eccodes.codes_set_values(h, np.array([280.0]))
        msg = bytearray(eccodes.codes_get_message(h))
    finally:
        eccodes.codes_release(h)
    gds = 8 + int.from_bytes(msg[8:11], "big")
    for at, data in patch.items():
        msg[gds + at : gds + at + len(data)] = data
    path.write_bytes(bytes(msg))
    return path


def _lambert_constant(path: Path, n: int) -> Path:
    """A constant (0 bits a value) Lambert field of n x n points: a few hundred bytes."""
    h = eccodes.codes_grib_new_from_samples("GRIB2")
    try:
        eccodes.codes_set(h, "gridType", "lambert")
        for key, value in (("Nx", n), ("Ny", n), ("DxInMetres", 1000.0), ("DyInMetres", 1000.0),
                           ("LaDInDegrees", 45.0), ("LoVInDegrees", 10.0), ("Latin1InDegrees", 45.0),
                           ("Latin2InDegrees", 45.0), ("latitudeOfFirstGridPointInDegrees", 30.0),
                           ("longitudeOfFirstGridPointInDegrees", 0.0)):
            eccodes.codes_set(h, key, value)  # fmt: skip
        eccodes.codes_set_values(h, np.full(n * n, 7.0))
        path.write_bytes(eccodes.codes_get_message(h))
    finally:
        eccodes.codes_release(h)
    return path


def test_hostile_grid_sizes_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 1-point GRIB1 file whose Ni is 0xFFFF (ecCodes: 2^31-1 points, 16 GB of longitudes), one
    whose Nj is 0xFFFF (ecCodes logs errors), a 4,100 x 4,100 constant Lambert field of a few
    hundred bytes (per-point coordinates: gigabytes): each refused by name in one line, exit 2
    with --strict, no ecCodes log line, under 1 GB (peak RSS of the CLI and its worker)."""
    ni = _grib1_one_point(tmp_path / "ni.grib1", {6: b"\xff\xff"})
    nj = _grib1_one_point(tmp_path / "nj.grib1", {8: b"\xff\xff"})
    big = _lambert_constant(tmp_path / "big.grib2", 4100)
    assert big.stat().st_size < 1000
    col = str(tmp_path / "col")
    refstore.init(col)
    runs = [["-C", col, "scan", "--strict", str(ni)], ["-C", col, "scan", str(nj), str(big)]]
    p = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(runs)], capture_output=True, text=True,
                       timeout=600, check=True)  # fmt: skip
    got = json.loads(p.stdout)
    (rc1, err1), (rc2, err2) = got["runs"]
    assert rc1 == 2 and err1.count("\n") == 1 and "ECCODES" not in err1, err1
    assert str(ni) in err1 and "declares 2147483647 grid points" in err1
    lines = err2.splitlines()
    assert rc2 == 0 and len(lines) == 2 and "ECCODES" not in err2, err2
    assert str(nj) in lines[0] and "ecCodes reads no grid" in lines[0]
    assert str(big) in lines[1] and "grid of 16810000 points is more than" in lines[1]
    assert got["peak_kb"] < 1 << 20, got["peak_kb"]


# ---------------------------------------------------------------------------- the zoo
REFUSED = ("holds 2 fields (multi-field messages are not supported",)
"""The documented refusals among the zoo's GRIB files (cfgrib refuses those files too)."""


@pytest.mark.parametrize("name", _zoo_gribs())
def test_zoo_grib_reads_as_ecCodes(name: str, shared_data, new_collection) -> None:
    """Every zoo GRIB file scans or is refused by name; every message read through refstore
    equals ecCodes' values (missing points NaN) placed as WMO's scanning flags say (files over
    2 MB: the first message of each array, to keep the test fast); xarray over the collection
    equals cfgrib over the file where cfgrib places values right."""
    path = ZOO / name
    col = new_collection()
    report = refstore.scan(col, [str(path)])
    if report.failed:
        [(_where, why)] = report.failed
        assert any(r in why for r in REFUSED) and "\n" not in why, why
        return
    assert report.unsupported == ()
    ds = refstore.open(col)
    rows = ds.snapshot.rows("chunk", ["array", "offset", "length", "g0", "g1", "g2", "g3", "g4"],
                            "offset >= 0").to_pylist()  # fmt: skip
    by_offset = {r["offset"]: r for r in rows}
    big = path.stat().st_size > 2 << 20
    if big:
        firsts = {r["array"]: r for r in sorted(rows, key=lambda r: r["offset"], reverse=True)}
        by_offset = {r["offset"]: r for r in firsts.values()}
    msgs = _ecc_messages(path, coords=False, only=set(by_offset))
    assert set(by_offset) <= {m["offset"] for m in msgs}
    for m in msgs:
        r = by_offset.get(m["offset"])
        if r is None:  # a later message on one combination (cfgrib reads the first), or not sampled
            continue
        arr = ds[r["array"]]
        sel = tuple(slice(r[f"g{i}"] * c, r[f"g{i}"] * c + c) for i, c in enumerate(arr.meta.chunks))
        got = np.asarray(arr[sel]).reshape(-1)
        assert np.array_equal(got, _wmo_order(m), equal_nan=True), (name, m["offset"])
    flagged = any(m["jPointsAreConsecutive"] or m["iScansNegatively"] or
                  (m["alternativeRowScanning"] and m["gridType"] not in GRIDS_2D) for m in msgs)  # fmt: skip
    try:
        ex = _cfgrib(path) if not big else None
    except Exception:  # cfgrib cannot build one dataset of this file
        return
    if ex is None:
        return
    mine = xr.open_dataset(col, engine="refstore")
    for v in ex.data_vars if not flagged else ():
        assert np.array_equal(mine[v].values, ex[v].values, equal_nan=True), v
        for c in ex[v].coords:
            assert np.array_equal(mine[c].values, ex[c].values), (v, c)


GRIDS_2D = {"regular_ll", "regular_gg", "rotated_ll", "rotated_gg", "lambert", "lambert_azimuthal_equal_area",
            "albers", "polar_stereographic"}  # fmt: skip


def _wmo_order(m: dict[str, object]) -> np.ndarray:
    """ecCodes' values as WMO's flags lay them out: row-major for grids of rows and columns
    (cfgrib's), alternate rows turned to the first one's direction."""
    values = np.asarray(m["values"])
    nx, ny = m["Nx"], m["Ny"]
    if not nx or not ny or nx * ny != m["numberOfPoints"] or not (m["jPointsAreConsecutive"] or
                                                                   m["alternativeRowScanning"]):
        return values
    lines = values.reshape((nx, ny) if m["jPointsAreConsecutive"] else (ny, nx)).copy()
    if m["alternativeRowScanning"]:
        lines[1::2] = lines[1::2, ::-1]
    if m["jPointsAreConsecutive"] and m["gridType"] in GRIDS_2D:
        lines = lines.T
    return lines.reshape(-1)

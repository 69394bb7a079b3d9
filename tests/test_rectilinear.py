"""Sources placed off their chunk boundaries (issue 14): monthly netCDF4 files of daily data,
2023-2024 (a leap year), chunked 10 along time, zlib + shuffle. The concatenation gets a
rectilinear grid along time; every reader and every form that expresses it must equal the
oracle, and the forms that cannot must refuse by name.

Oracle: h5py reads of each file (raw stored values), concatenated by numpy; xarray over the
files (netCDF4 engine) for the decoded paths; GDAL (``gdalmdimtranslate``) reads the VRT.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.errors import UnexpressibleError
from refstore.fixtures.monthly import write_monthly
from refstore.plan import parse_window
from refstore.read.verify import verify
from refstore.table.hold import HoldSelection, hold

from ._cli import run
from ._oracle import assert_same

if TYPE_CHECKING:
    from pathlib import Path

NAMES = ("tas", "flag", "time")
WINDOWS = [(slice(25, 95),), (slice(0, 731, 7),), (slice(55, 61), slice(1, 2)), (slice(720, 731),)]


def oracle(files: list[Path], name: str) -> np.ndarray[Any, Any]:
    parts = []
    for p in files:
        with h5py.File(p, "r") as f:
            parts.append(f[name][...])
    return np.concatenate(parts)


@pytest.fixture(scope="module")
def monthly(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Path]]:
    root = tmp_path_factory.mktemp("monthly")
    files = write_monthly(root / "data", ny=2, nx=3)
    uri = str(root / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(root / "data")], concat_dim="time", timeout=None)
    return uri, files


def test_misaligned_months_are_accepted_with_a_rectilinear_grid(monthly: tuple[str, list[Path]]) -> None:
    uri, files = monthly
    tas = refstore.open(uri)["tas"]
    assert tas.shape == (731, 2, 3)
    lengths = tas.grid.dim_lengths(0)
    # the union of each month's chunk edges: [10, 10, 10, 1] for January, [10, 10, 8] for February...
    month_days = [oracle([p], "time").size for p in files]
    want = [n for days in month_days for n in [10] * (days // 10) + ([days % 10] if days % 10 else [])]
    assert list(lengths) == want and month_days[13] == 29
    assert not tas.grid.rectilinear(1) and not tas.grid.rectilinear(2)


@pytest.mark.parametrize("name", NAMES)
def test_direct_reads_equal_h5py_concatenation(monthly: tuple[str, list[Path]], name: str) -> None:
    uri, files = monthly
    want = oracle(files, name)
    arr = refstore.open(uri)[name]
    assert_same(arr[...], want, name)
    for w in WINDOWS:
        key = w[: want.ndim]
        assert_same(arr[key], want[key], f"{name}{key}")
    assert_same(arr[59], want[59], f"{name}[59]")  # 2023-03-01: the first day of a chunk after a short one


def test_xarray_engine_equals_xarray_over_the_files(monthly: tuple[str, list[Path]]) -> None:
    import xarray as xr

    uri, files = monthly
    got = xr.open_dataset(uri, engine="refstore")
    want = xr.concat([xr.open_dataset(p, engine="netcdf4") for p in files], dim="time", data_vars="minimal",
                     coords="minimal", compat="override")  # fmt: skip
    xr.testing.assert_identical(got.load(), want.load())
    assert got["tas"].dtype == np.float32 and got["flag"].dtype == want["flag"].dtype


def test_zarr_store_serves_it_decoded(monthly: tuple[str, list[Path]]) -> None:
    import zarr

    uri, files = monthly
    store = refstore.zarr_store(uri)
    assert set(store.blocks) >= {"tas", "flag"}  # small chunks: blocks of the regular grid
    g = zarr.open_group(store, mode="r")
    for name in NAMES:
        want = oracle(files, name)
        assert_same(g[name][...], want, name)
        assert_same(g[name][25:95], want[25:95], name)


def test_zarr_store_serves_its_rectilinear_grid_on_request(monthly: tuple[str, list[Path]]) -> None:
    import zarr

    uri, files = monthly
    with zarr.config.set({"array.rectilinear_chunks": True}):
        g = zarr.open_group(refstore.zarr_store(uri, rectilinear=True), mode="r")
        tas = g["tas"]
        assert type(tas.metadata.chunk_grid).__name__.startswith("Rectilinear")
        assert tas.metadata.chunk_grid.chunk_shapes[0][:4] == (10, 10, 10, 1)  # January: its 31st day alone
        for name in NAMES:
            want = oracle(files, name)
            assert_same(g[name][...], want, name)
            assert_same(g[name][25:95], want[25:95], name)


def test_verify_hold_and_read_held_chunks(tmp_path: Path, monthly: tuple[str, list[Path]]) -> None:
    import shutil

    uri0, files = monthly
    uri = str(tmp_path / "col")
    shutil.copytree(uri0, uri)
    rep = verify(refstore.Collection.open(uri).snapshot())
    assert rep.checked > 0 and not rep.mismatches
    # days 25..40: January's chunks [20, 30) and [30, 31) (short: padded in the file) and February's first
    held = hold(refstore.Collection.open(uri), HoldSelection(arrays=("tas",), window=parse_window("25:40")))
    assert held.chunks == 3
    assert_same(refstore.open(uri)["tas"][...], oracle(files, "tas"), "held")
    rep = verify(refstore.Collection.open(uri).snapshot())
    assert rep.checked > 0 and not rep.mismatches


def test_info_shows_the_grid_per_dimension(monthly: tuple[str, list[Path]]) -> None:
    from typer.testing import CliRunner

    from refstore.cli.app import app

    uri, _ = monthly
    res = CliRunner().invoke(app, ["-C", uri, "info", "--json"])
    assert res.exit_code == 0, res.output
    grid = json.loads(res.stdout)["arrays"]["tas"]["chunk_grid"]
    assert [g["kind"] for g in grid] == ["rectilinear", "regular", "regular"]
    assert grid[0]["count"] == 86 and grid[0]["chunks"][:4] == [[10, 3], 1, [10, 2], 8]
    assert grid[1] == {"dim": "lat", "kind": "regular", "chunk": 2}
    text = CliRunner().invoke(app, ["-C", uri, "info"], terminal_width=200)
    assert "tas: rectilinear along time, 86 chunks: 10*3,1,10*2,8," in text.stdout


def test_kerchunk_refuses_naming_the_array(tmp_path: Path, monthly: tuple[str, list[Path]]) -> None:
    uri, _ = monthly
    out = tmp_path / "out.json"
    res = run("-C", uri, "emit", "kerchunk-json", str(out))
    assert res.returncode == 2 and not out.exists()
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "array 'flag' has a rectilinear chunk grid along 'time'" in lines[0]


@pytest.mark.parametrize("fmt", ["kerchunk-json", "kerchunk-parquet"])
def test_regular_grid_forms_refuse_or_skip_it(tmp_path: Path, monthly: tuple[str, list[Path]], fmt: str) -> None:
    uri, _ = monthly
    out = str(tmp_path / "out")
    col = refstore.Collection.open(uri)
    with pytest.raises(UnexpressibleError, match=r"array 'flag' has a rectilinear chunk grid along 'time'"):
        emit(col, fmt, out)
    rep = emit(col, fmt, out, skip_unexpressible=True)
    assert set(rep.skipped) == {"tas", "flag"}


def test_icechunk_is_a_rectilinear_zarr_array(tmp_path: Path, monthly: tuple[str, list[Path]]) -> None:
    import zarr

    from .readers.icechunk import open_form

    uri, files = monthly
    out = str(tmp_path / "ice")
    emit(refstore.Collection.open(uri), "icechunk", out)
    with zarr.config.set({"array.rectilinear_chunks": True}):
        arrays = open_form(out, None)
        for name in NAMES:
            assert_same(arrays[name][...], oracle(files, name), name)
            assert_same(arrays[name][25:95], oracle(files, name)[25:95], name)



def test_sqlite_expresses_the_grid_in_its_chunk_edges_table(tmp_path: Path, monthly: tuple[str, list[Path]]) -> None:
    """mdim-refs/0.3, read by sqlite3 + numcodecs as documented (``tests/readers/sqlite.py``)."""
    import sqlite3
    from contextlib import closing

    from .readers.sqlite import open_form

    uri, files = monthly
    out = str(tmp_path / "refs.sqlite")
    emit(refstore.Collection.open(uri), "sqlite", out)
    month_days = [oracle([p], "time").size for p in files]
    want = [n for days in month_days for n in [10] * (days // 10) + ([days % 10] if days % 10 else [])]
    with closing(sqlite3.connect(out)) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone() == ("mdim-refs/0.3",)
        rows = con.execute("SELECT chunk, start, size FROM chunk_edges WHERE array = 'tas' AND dim = 0 "
                           "ORDER BY chunk").fetchall()  # fmt: skip
        assert con.execute("SELECT count(*) FROM chunk_edges WHERE array = 'tas' AND dim > 0").fetchone() == (0,)
    assert [n for _, _, n in rows] == want and [a for _, a, _ in rows] == np.cumsum([0, *want[:-1]]).tolist()
    arrays = open_form(out, None)
    for name in NAMES:
        w = oracle(files, name)
        assert_same(arrays[name][...], w, name)
        for key in WINDOWS:
            full = key[: w.ndim] + tuple(slice(0, n) for n in w.shape[len(key) :])
            if all(k.step in (None, 1) for k in full):
                assert_same(arrays[name][full], w[full], f"{name}{full}")


def test_flat_parquet_expresses_the_grid(tmp_path: Path, monthly: tuple[str, list[Path]]) -> None:
    import pyarrow.parquet as pq

    from .readers.parquet import open_form

    uri, files = monthly
    out = str(tmp_path / "refs.parquet")
    emit(refstore.Collection.open(uri), "parquet", out)
    doc = json.loads(pq.read_metadata(out).metadata[b"refstore"])
    assert doc["format"] == "refstore-flat-parquet/2"
    assert doc["arrays"]["tas"]["eras"][0]["chunk_edges"][0][:2] == [[10, 3], 1]
    arrays = open_form(out, None)
    for name in NAMES:
        want = oracle(files, name)
        assert_same(arrays[name][...], want, name)
        key = (slice(25, 95),) + (slice(None),) * (want.ndim - 1)
        assert_same(arrays[name][key], want[25:95], name)


def test_vrt_read_by_gdal(tmp_path: Path, monthly: tuple[str, list[Path]]) -> None:
    from refstore._netcdf4 import import_netcdf4

    from .readers.vrt import translate

    uri, files = monthly
    vrt = str(tmp_path / "m.vrt")
    emit(refstore.Collection.open(uri), "vrt", vrt)
    nc = str(tmp_path / "m.nc")
    translate(vrt, nc)
    netCDF4 = import_netcdf4()
    with netCDF4.Dataset(nc) as ds:
        for name in ("tas", "flag"):
            v = ds[name]
            v.set_auto_maskandscale(False)
            assert_same(v[...], oracle(files, name), name)


def test_rescan_with_months_landing_in_the_middle_rekeys_later_ones(tmp_path: Path) -> None:
    files = write_monthly(tmp_path / "d", years=(2024,), months=(1, 2, 3, 6), ny=1, nx=2)
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(tmp_path / "d")], concat_dim="time", timeout=None)
    files += write_monthly(tmp_path / "d", years=(2024,), months=(4, 5), ny=1, nx=2)
    files = sorted(files)
    rep = refstore.scan(uri, [str(tmp_path / "d")], concat_dim="time", timeout=None)
    assert rep.inserted > 0 and rep.updated > 0  # June's rows moved
    for name in NAMES:
        assert_same(refstore.open(uri)[name][...], oracle(files, name), name)

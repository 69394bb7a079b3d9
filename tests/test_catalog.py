"""``refstore catalog``: a STAC Collection per version, checked against xarray/tifffile over the
original files (extents) and opened through each asset as its xarray keys say (values, dtypes).

Validation is offline: jsonschema against the STAC 1.1.0 core and extension (datacube, version,
xarray-assets) schemas vendored in tests/stac_schemas (no schema is fetched: the machine has no
network), and the extension fields read back through pystac's typed extension classes.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.fixtures.oisst import write_series
from tests._cli import invoke as run  # in this process: the commands are under test, not the process

pystac = pytest.importorskip("pystac")
xr = pytest.importorskip("xarray")


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def oisst(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Path], Path]:
    root = tmp_path_factory.mktemp("stac-oisst")
    files = write_series(root / "data", 3)
    uri = str(root / "oisst")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in files], concat_dim="time")
    from refstore.table import create_tag

    create_tag(refstore.Collection.open(uri), "release-1", None)
    return uri, files, root


def _cogs(folder: Path) -> list[Path]:
    import tifffile

    from refstore.fixtures.tiff import geotags

    folder.mkdir(parents=True)
    rng = np.random.default_rng(11)
    out = []
    for day in (1, 2, 3):
        p = folder / f"sst_D202401{day:02d}.tif"
        img = rng.normal(15, 4, (256, 384)).astype("f4")
        with tifffile.TiffWriter(p) as w:
            opts: dict[str, Any] = {"tile": (128, 128), "compression": "zlib", "metadata": None}
            w.write(img, extratags=geotags(x0=-30.0, y0=60.0), **opts)
            w.write(img[::2, ::2], subfiletype=1, **opts)
        out.append(p)
    return out


@pytest.fixture(scope="module")
def cogs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Path], Path]:
    root = tmp_path_factory.mktemp("stac-cog")
    files = _cogs(root / "cogs")
    uri = str(root / "cog")
    refstore.init(uri)
    refstore.scan(uri, [str(root / "cogs")], concat_dim="time", time_from_name="D%Y%m%d")
    return uri, files, root


def _netcdf4(files: list[Path]) -> Any:
    parts = [xr.open_dataset(p, engine="netcdf4") for p in files]
    return xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", compat="override", join="exact")


def _emit_forms(uri: str, root: Path, as_of: str | None = None) -> dict[str, str]:
    col = refstore.Collection.open(uri)
    forms = {"kerchunk-json": str(root / "refs.json"), "kerchunk-parquet": str(root / "refs.parq"),
             "icechunk": str(root / "repo.icechunk")}  # fmt: skip
    for fmt, out in forms.items():
        emit(col, fmt, out, as_of=as_of)
    return forms


def _catalog(uri: str, out: Path, *args: str) -> dict[str, Any]:
    r = run("-C", uri, "catalog", str(out), "--json", *args)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["out"] == str(out)
    return dict(json.loads(out.read_text()))


def _schema_check(d: dict[str, Any]) -> None:
    """Validate against the vendored STAC 1.1.0 core and extension schemas (no network)."""
    from tests._stac_schema import validate

    validate(d)


def _validate(path: Path) -> Any:
    """Validate offline, then open in pystac."""
    _schema_check(json.loads(path.read_text()))
    return pystac.Collection.from_file(str(path))


# --------------------------------------------------------------------------- readers (as the asset says)
def _open_asset(asset: Any) -> Any:
    """``xr.open_dataset`` through one asset, the way its media type and xarray keys say."""
    kwargs = dict(asset.extra_fields["xarray:open_kwargs"])
    if asset.media_type == "application/vnd.zarr+icechunk":
        from refstore.zarr_meta import register_codecs
        from tests.readers.icechunk import open_repo

        register_codecs()
        session = open_repo(asset.href).readonly_session(tag=asset.extra_fields["version"])
        return xr.open_dataset(session.store, **kwargs)
    storage = {"fo": asset.href, **asset.extra_fields.get("xarray:storage_options", {})}
    return xr.open_dataset("reference://", storage_options=storage, **kwargs)


def _assert_equal(got: Any, want: Any, what: str) -> int:
    """Every variable of ``want`` (xarray over the netCDF files) in ``got`` with its dims, dtype and
    values (NaN where masked). Packed variables (scale_factor/add_offset) are the one exception to
    exact dtypes: zarr attributes are JSON, so a float32 scale_factor comes back a Python float
    and xarray unpacks to float64 (a property of every zarr form, kerchunk's own output included);
    their values are compared at float32 precision."""
    assert sorted(got.data_vars) == sorted(want.data_vars), what
    for name, var in want.variables.items():
        g = got[name]
        assert g.dims == var.dims, f"{what}: {name}"
        if {"scale_factor", "add_offset"} & set(var.encoding):
            assert (g.dtype, var.dtype) == (np.dtype("f8"), np.dtype("f4")), f"{what}: {name}"
            np.testing.assert_allclose(g.values, var.values, rtol=1e-6, err_msg=f"{what}: {name}")
            assert np.array_equal(np.isnan(g.values), np.isnan(var.values)), f"{what}: {name}"
        else:
            assert g.dtype == var.dtype.newbyteorder("="), f"{what}: {name} {g.dtype} != {var.dtype}"
            np.testing.assert_array_equal(g.values, var.values, err_msg=f"{what}: {name}", strict=True)
    return len(want.variables)


def _half_steps(v: np.ndarray[Any, Any]) -> tuple[float, float]:
    v = v.astype("f8")
    a, b = v[0] - (v[1] - v[0]) / 2, v[-1] + (v[-1] - v[-2]) / 2
    return float(min(a, b)), float(max(a, b))


def _edges_bbox(lat: np.ndarray[Any, Any], lon: np.ndarray[Any, Any]) -> list[float]:
    """The oracle for a regular grid read by xarray/netCDF4: cell edges half a step beyond the
    centres, latitudes clamped, a 360-degree span -180..180, else west/east folded as they are."""
    (s, n), (w, e) = _half_steps(lat), _half_steps(lon)
    if e - w >= 360.0:
        return [-180.0, max(s, -90.0), 180.0, min(n, 90.0)]
    fold = lambda x: ((x + 180.0) % 360.0) - 180.0
    return [fold(w), max(s, -90.0), fold(e) if fold(e) != -180.0 else 180.0, min(n, 90.0)]


# --------------------------------------------------------------------------- tests
def test_oisst_collection_extents_datacube_and_assets(oisst: tuple[str, list[Path], Path]) -> None:
    uri, files, root = oisst
    forms = _emit_forms(uri, root, "release-1")
    out = root / "oisst.stac.json"
    d = _catalog(uri, out, "--as-of", "release-1", *[f"--asset={k}={v}" for k, v in forms.items()])
    coll = _validate(out)
    want = _netcdf4(files)
    lat, lon = want["lat"].values, want["lon"].values
    t = want["time"].values

    # extents: cell edges (half a step beyond xarray's first/last centres); a global grid is -180..180
    assert coll.extent.spatial.bboxes == [_edges_bbox(lat, lon)]
    iso = [str(np.datetime_as_string(x, unit="s")) + "Z" for x in (t.min(), t.max())]
    assert d["extent"]["temporal"]["interval"] == [iso]

    from pystac.extensions.datacube import DatacubeExtension
    from pystac.extensions.version import VersionExtension

    cube = DatacubeExtension.ext(coll)
    dims = cube.dimensions
    assert dims["lat"].dim_type == "spatial" and dims["lat"].to_dict()["axis"] == "y"
    assert dims["lat"].to_dict()["extent"] == [float(lat.min()), float(lat.max())]
    assert dims["lon"].to_dict()["extent"] == [float(lon.min()), float(lon.max())]
    assert dims["time"].dim_type == "temporal" and dims["time"].to_dict()["extent"] == iso
    assert dims["zlev"].to_dict()["unit"] == "meters"
    variables = cube.variables
    assert variables is not None
    raw = xr.open_dataset(files[0], engine="netcdf4", mask_and_scale=False)
    for name in ("sst", "anom", "err"):
        v = variables[name].to_dict()
        assert v["dimensions"] == list(raw[name].dims)
        assert v["data_type"] == np.dtype(raw[name].dtype).newbyteorder("=").name
        if "units" in raw[name].attrs:
            assert v["unit"] == raw[name].attrs["units"]
    assert variables["sst"].to_dict()["nodata"] == int(raw["sst"].attrs["_FillValue"])
    assert VersionExtension.ext(coll).version == "release-1"
    assert d["refstore:tag"] == "release-1" and d["refstore:version"] == refstore.Collection.open(uri).snapshot(
        "release-1").version  # fmt: skip
    assert d["assets"]["sources"]["href"] == str(files[0].parent) + "/"

    # every asset opens in xarray as its keys say and equals xarray over the netCDF files
    from pystac.extensions.xarray_assets import XarrayAssetsExtension

    assert set(coll.assets) == {*forms, "sources"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs names outside the zarr v3 spec; fsspec notes
        for form, href in forms.items():
            asset = coll.assets[form]
            assert asset.href == href
            assert XarrayAssetsExtension.ext(asset).open_kwargs == d["assets"][form]["xarray:open_kwargs"]
            got = _open_asset(asset)
            assert _assert_equal(got, want, form) == 9  # time zlev lat lon sst anom err ice mask


def test_cog_series_extent_from_the_transform(cogs: tuple[str, list[Path], Path]) -> None:
    import tifffile

    uri, files, root = cogs
    forms = _emit_forms(uri, root)
    out = root / "cog.stac.json"
    d = _catalog(uri, out, *[f"--asset={k}={v}" for k, v in forms.items()])
    coll = _validate(out)
    with tifffile.TiffFile(files[0]) as tf:  # the oracle: the GeoTIFF's own tags
        page = tf.pages[0]
        dx, dy, _ = page.tags["ModelPixelScaleTag"].value
        x0, y0 = page.tags["ModelTiepointTag"].value[3:5]
        h, w = page.shape
        stack = np.stack([tifffile.imread(p) for p in files])
    assert coll.extent.spatial.bboxes == [[x0, y0 - h * dy, x0 + w * dx, y0]]
    assert d["extent"]["temporal"]["interval"] == [["2024-01-01T00:00:00Z", "2024-01-03T00:00:00Z"]]
    cube = d["cube:dimensions"]
    assert cube["x"]["extent"] == [x0 + dx / 2, x0 + (w - 0.5) * dx] and cube["x"]["reference_system"] == 4326
    assert cube["y"]["extent"] == [y0 - (h - 0.5) * dy, y0 - dy / 2]
    assert d["cube:variables"]["image"]["data_type"] == "float32"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for form in forms:
            got = _open_asset(coll.assets[form])
            assert got["image"].dtype == stack.dtype, form
            np.testing.assert_array_equal(got["image"].values, stack, err_msg=form)
            assert [str(x)[:10] for x in got["time"].values] == ["2024-01-01", "2024-01-02", "2024-01-03"]


def test_same_ref_same_bytes_and_remapped_protocol(oisst: tuple[str, list[Path], Path], tmp_path: Path) -> None:
    uri, files, _ = oisst
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    args = ("--as-of", "release-1", "--asset", "kerchunk-json=https://example.org/pub/oisst.json",
            "--asset", "icechunk=s3://bucket/oisst.icechunk")  # fmt: skip
    _catalog(uri, a, *args)
    refstore.scan(uri, [str(files[0].parent)], concat_dim="time")  # later versions change nothing of the tag's
    from refstore.table.remap import add_rule

    d = _catalog(uri, b, *args)
    assert a.read_bytes() == b.read_bytes()
    add_rule(refstore.Collection.open(uri), str(files[0].parent) + "/", "https://example.org/oisst/")
    d = _catalog(uri, b, "--asset", "kerchunk-json=https://example.org/pub/oisst.json")  # latest: remapped
    assert d["assets"]["kerchunk-json"]["xarray:storage_options"] == {"remote_protocol": "https",
                                                                      "remote_options": {"asynchronous": True}}
    assert d["assets"]["sources"]["href"] == "https://example.org/oisst/"
    assert d["version"] == str(d["refstore:version"]) and d["refstore:tag"] is None
    _validate(b)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--asset", "zarr=https://x/y"), "unknown form 'zarr'"),
        (("--asset", "kerchunk-json"), "give FORM=URL"),
        (("--asset", "vrt=a", "--asset", "vrt=b"), "vrt given twice"),
        (("--as-of", "no-such-tag"), "no-such-tag"),
    ],
)
def test_bad_input_is_one_line_exit_2(oisst: tuple[str, list[Path], Path], tmp_path: Path, args: tuple[str, ...],
                                      needle: str) -> None:  # fmt: skip
    uri, _, _ = oisst
    r = run("-C", uri, "catalog", str(tmp_path / "c.json"), *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "c.json").exists()


def test_the_offline_validator_rejects_a_broken_collection(oisst: tuple[str, list[Path], Path],
                                                          tmp_path: Path) -> None:  # fmt: skip
    """The schemas are really applied (a Collection without its license or extent fails)."""
    out = tmp_path / "c.json"
    d = _catalog(oisst[0], out)
    import jsonschema

    _schema_check(d)
    for key in ("license", "extent"):
        with pytest.raises(jsonschema.ValidationError):
            _schema_check({k: v for k, v in d.items() if k != key})
    bad_dim = {**d, "cube:dimensions": {**d["cube:dimensions"], "lat": {"type": "spatial", "axis": "w"}}}
    with pytest.raises(jsonschema.ValidationError):  # the datacube extension schema is applied
        _schema_check(bad_dim)
    with pytest.raises(jsonschema.ValidationError):  # the version extension schema too
        _schema_check({**d, "version": 3})
    with pytest.raises(jsonschema.ValidationError):  # an open interval end, but not a date
        _schema_check({**d, "extent": {**d["extent"], "temporal": {"interval": [["0000-01-01", None]]}}})


def test_replaces_only_a_catalog_it_wrote(oisst: tuple[str, list[Path], Path], tmp_path: Path) -> None:
    uri = oisst[0]
    out = tmp_path / "c.json"
    out.write_text('{"type": "Collection", "id": "mine"}')  # someone else's STAC file
    r = run("-C", uri, "catalog", str(out))
    assert r.returncode == 2 and "never overwritten" in r.stderr, r.stderr
    assert out.read_text() == '{"type": "Collection", "id": "mine"}'
    out.unlink()
    _catalog(uri, out)
    _catalog(uri, out, "--asset", "vrt=https://example.org/oisst.vrt")  # its own output: replaced
    kj = tmp_path / "refs.json"
    emit(refstore.Collection.open(uri), "kerchunk-json", str(kj))
    r = run("-C", uri, "catalog", str(kj))  # a form's output is not a catalog
    assert r.returncode == 2 and "never overwritten" in r.stderr, r.stderr
    from refstore.errors import BadInputError

    with pytest.raises(BadInputError, match="never overwritten"):
        emit(refstore.Collection.open(uri), "kerchunk-json", str(out))  # nor the reverse


def test_no_coordinates_for_an_extent_is_exit_2(tmp_path: Path) -> None:
    import h5py

    src = tmp_path / "plain.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=np.arange(12.0).reshape(3, 4), chunks=(3, 2))
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(src)])
    r = run("-C", uri, "catalog", str(tmp_path / "c.json"))
    assert r.returncode == 2
    assert "no coordinates for a spatial extent" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c.json").exists()


def test_vrt_asset_reads_through_gdal(oisst: tuple[str, list[Path], Path], tmp_path: Path) -> None:
    """The VRT asset (no xarray keys: GDAL reads it) translated by GDAL equals the netCDF files."""
    import shutil

    if shutil.which("gdalmdimtranslate") is None:
        pytest.skip("gdal-bin is not installed")
    uri, files, _ = oisst
    vrt = tmp_path / "oisst.vrt"
    emit(refstore.Collection.open(uri), "vrt", str(vrt), as_of="release-1")
    d = _catalog(uri, tmp_path / "c.json", "--as-of", "release-1", f"--asset=vrt={vrt}")
    asset = d["assets"]["vrt"]
    assert (asset["type"], asset["roles"], asset["href"]) == ("application/xml", ["data", "virtual"], str(vrt))
    assert "xarray:open_kwargs" not in asset
    from tests.readers.vrt import translate

    nc = tmp_path / "out.nc"
    translate(asset["href"], str(nc))  # the whole dataset: GDAL 3.6's -array on a VRT of files hangs
    got = xr.open_dataset(nc, engine="netcdf4", mask_and_scale=False)
    parts = [xr.open_dataset(p, engine="netcdf4", mask_and_scale=False) for p in files]
    want = xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", compat="override", join="exact")
    for name in ("sst", "anom", "err"):
        assert got[name].dtype == want[name].dtype.newbyteorder("="), name
        np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


def test_antimeridian_and_projected_grids(tmp_path: Path) -> None:
    """Longitudes across the antimeridian give W > E; a projected GeoTIFF CRS is refused (no pyproj)."""
    import h5py

    src = tmp_path / "pacific.nc"
    lon = np.array([170.0, 175.0, 180.0, 185.0, 190.0], "f4")
    with h5py.File(src, "w") as f:
        for name, vals, units in (("lat", np.array([-5.0, 5.0], "f4"), "degrees_north"), ("lon", lon, "degrees_east")):
            ds = f.create_dataset(name, data=vals)
            ds.attrs["units"] = units
            ds.make_scale(name)
        v = f.create_dataset("v", data=np.zeros((2, 5), "f4"))
        v.dims[0].attach_scale(f["lat"])
        v.dims[1].attach_scale(f["lon"])
    uri = str(tmp_path / "pacific")
    refstore.init(uri)
    refstore.scan(uri, [str(src)])
    d = _catalog(uri, tmp_path / "p.json")
    assert d["extent"]["spatial"]["bbox"] == [[167.5, -10.0, -167.5, 10.0]]  # edges: half a step beyond
    assert d["extent"]["temporal"]["interval"] == [[None, None]]
    _validate(tmp_path / "p.json")

    curv = tmp_path / "curvilinear.h5"  # 2-D lat/lon (auxiliary coordinates) on y/x dimensions
    with h5py.File(curv, "w") as f:
        lat2, lon2 = np.meshgrid(np.array([10.0, 11.0, 12.5], "f4"), np.array([-3.0, -1.0], "f4"), indexing="ij")
        for name, vals, units in (("nav_lat", lat2, "degrees_north"), ("nav_lon", lon2, "degrees_east")):
            f.create_dataset(name, data=vals).attrs["units"] = units
        f.create_dataset("t2m", data=np.zeros((3, 2), "f4"))
    uri = str(tmp_path / "curv")
    refstore.init(uri)
    refstore.scan(uri, [str(curv)])
    d = _catalog(uri, tmp_path / "curv.json")
    with h5py.File(curv) as f:
        la, lo = f["nav_lat"][...], f["nav_lon"][...]
    assert d["extent"]["spatial"]["bbox"] == [[float(lo.min()), float(la.min()), float(lo.max()), float(la.max())]]

    import tifffile

    from refstore.fixtures.tiff import geotags

    tif = tmp_path / "merc" / "m.tif"
    tif.parent.mkdir()
    tifffile.imwrite(tif, np.zeros((64, 64), "u1"), extratags=geotags(epsg=3857, x0=-2.0e6, y0=7.0e6, dx=5.0e4,
                                                                        dy=5.0e4), metadata=None)  # fmt: skip
    col = str(tmp_path / "merc-col")
    refstore.init(col)
    refstore.scan(col, [str(tif)])
    d = _catalog(col, tmp_path / "m.json")  # reprojected with pyproj (the catalog extra)
    rasterio = pytest.importorskip("rasterio")
    from rasterio.warp import transform_bounds

    with rasterio.open(tif) as r:
        want = transform_bounds(r.crs, "EPSG:4326", *r.bounds)
    np.testing.assert_allclose(d["extent"]["spatial"]["bbox"][0], want, rtol=0, atol=1e-9)
    _validate(tmp_path / "m.json")


# --------------------------------------------------------------------------- extents against netCDF4/rasterio
def _one_file_catalog(tmp_path: Path, src: Path, name: str = "c") -> tuple[dict[str, Any], Any]:
    uri = str(tmp_path / f"{name}-col")
    refstore.init(uri)
    refstore.scan(uri, [str(src)])
    out = tmp_path / f"{name}.json"
    r = run("-C", uri, "catalog", str(out), "--json")
    assert r.returncode == 0, r.stderr
    _validate(out)
    return dict(json.loads(out.read_text())), r


def _grid_nc(path: Path, lat: np.ndarray[Any, Any], lon: np.ndarray[Any, Any], *, bounds: bool = False,
             time: tuple[str, str, list[float]] | None = None) -> Path:  # fmt: skip
    import netCDF4

    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("bnds", 2)
        for name, vals, units in (("lat", lat, "degrees_north"), ("lon", lon, "degrees_east")):
            ds.createDimension(name, len(vals))
            v = ds.createVariable(name, "f8", (name,))
            v[:] = vals
            v.units = units
            if bounds:
                step = np.gradient(vals) if len(vals) > 1 else np.ones(1)
                b = ds.createVariable(f"{name}_bnds", "f8", (name, "bnds"))
                b[:] = np.stack([vals - step / 3, vals + step / 4], axis=1)  # deliberately not half steps
                v.bounds = f"{name}_bnds"
        dims: tuple[str, ...] = ("lat", "lon")
        if time is not None:
            units, cal, vals = time
            ds.createDimension("time", len(vals))
            t = ds.createVariable("time", "f8", ("time",))
            t[:] = vals
            t.units, t.calendar = units, cal
            dims = ("time", *dims)
        ds.createVariable("v", "f4", dims)[:] = 0.0
    return path


@pytest.mark.parametrize(
    ("lat", "lon", "want"),
    [
        (np.arange(-89.875, 90, 0.25), np.arange(0.125, 360, 0.25), [-180.0, -90.0, 180.0, 90.0]),  # 0..360
        (np.arange(-75.0, 90, 30), np.arange(-180.0, 180, 30), [-180.0, -90.0, 180.0, 90.0]),  # 30 deg centres
        (np.arange(89.5, -90, -1.0), np.arange(0.5, 180, 1.0), [0.0, -90.0, 180.0, 90.0]),  # north first; east half
        (np.arange(-10.0, 11, 5), np.arange(340.0, 371, 10), [-25.0, -12.5, 15.0, 12.5]),  # across Greenwich
        (np.arange(0.0, 21, 10), np.arange(170.0, 201, 10), [165.0, -5.0, -155.0, 25.0]),  # across the antimeridian
    ],
)
def test_bbox_is_cell_edges(tmp_path: Path, lat: Any, lon: Any, want: list[float]) -> None:
    import netCDF4

    src = _grid_nc(tmp_path / "g.nc", lat, lon)
    with netCDF4.Dataset(src) as ds:  # the oracle: netCDF4's coordinates
        got_lat, got_lon = ds["lat"][:].data, ds["lon"][:].data
    assert _edges_bbox(got_lat, got_lon) == want
    d, _ = _one_file_catalog(tmp_path, src)
    assert d["extent"]["spatial"]["bbox"] == [want]


def test_bbox_uses_cf_bounds(tmp_path: Path) -> None:
    import netCDF4

    src = _grid_nc(tmp_path / "b.nc", np.array([30.0, 40.0, 50.0]), np.array([-20.0, -10.0, 0.0, 10.0]), bounds=True)
    d, _ = _one_file_catalog(tmp_path, src)
    with netCDF4.Dataset(src) as ds:
        lb, ob = ds["lat_bnds"][:].data, ds["lon_bnds"][:].data
    assert d["extent"]["spatial"]["bbox"] == [[float(ob.min()), float(lb.min()), float(ob.max()), float(lb.max())]]


def test_zoo_extents_match_netcdf4(shared_data: Path, tmp_path: Path) -> None:
    """CMIP6 (lat_bnds/lon_bnds) and Ferret's 20.5..379.5 grid (no bounds: global)."""
    import netCDF4

    zoo = shared_data / "zoo"
    cmip = zoo / "pypi-esmvaltool-sample-data" / "ta_Amon_AWI-CM-1-1-MR_historical_r1i1p1f1_gn_195001-195012.nc"
    levitus = zoo / "debian-ferret-extra" / "levitus_climatology.cdf"
    for f in (cmip, levitus):
        if not f.exists():
            pytest.skip(f"{f} is not in the zoo")
    d, _ = _one_file_catalog(tmp_path, cmip, "cmip")
    with netCDF4.Dataset(cmip) as ds:
        lb, ob = ds["lat_bnds"][:].data, ds["lon_bnds"][:].data
        tv = ds["time"][:].data
        t = netCDF4.num2date([tv.min(), tv.max()], ds["time"].units, ds["time"].calendar)
    w, e = float(ob.min()), float(ob.max())
    assert d["extent"]["spatial"]["bbox"] == [[w, float(lb.min()), e, float(lb.max())]]
    assert d["extent"]["temporal"]["interval"] == [[t[0].isoformat() + "Z", t[1].isoformat() + "Z"]]
    d, _ = _one_file_catalog(tmp_path, levitus, "levitus")
    with netCDF4.Dataset(levitus) as ds:
        want = _edges_bbox(ds["YAXLEVITR"][:].data, ds["XAXLEVITR"][:].data)
    assert want == [-180.0, -90.0, 180.0, 90.0]
    assert d["extent"]["spatial"]["bbox"] == [want]


@pytest.mark.parametrize("name", ["pypi-geoutils/LE71400412000304SGS00_B4_crop.TIF", "debian-rgdal/SP27GTIF.TIF",
                                  "debian-terra/elev.tif"])  # fmt: skip
def test_zoo_geotiff_extents_match_rasterio(shared_data: Path, tmp_path: Path, name: str) -> None:
    """UTM, US State Plane (NAD27, feet) and EPSG:4326 rasters: edges reprojected as GDAL does."""
    rasterio = pytest.importorskip("rasterio")
    from rasterio.warp import transform_bounds

    f = shared_data / "zoo" / name
    if not f.exists():
        pytest.skip(f"{f} is not in the zoo")
    d, _ = _one_file_catalog(tmp_path, f)
    with rasterio.open(f) as r:
        want = transform_bounds(r.crs, "EPSG:4326", *r.bounds)
    np.testing.assert_allclose(d["extent"]["spatial"]["bbox"][0], want, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("units", "calendar", "want"),
    [
        ("hours since 0000-01-01", "standard", [None, None]),  # no year 0 in the Gregorian calendar
        ("hours since 0000-01-01", "360_day", [None, None]),  # year 0 exists, but no Python datetime holds it
        ("days since 0001-01-01", "noleap", ["0001-01-16T12:00:00Z", "0001-12-12T12:00:00Z"]),
    ],
)
def test_climatology_times_open_or_in_their_calendar(tmp_path: Path, units: str, calendar: str,
                                                     want: list[str | None]) -> None:  # fmt: skip
    import cftime

    vals = [15.5 + 30.0 * i for i in range(12)] if units.startswith("days") else [372.0 + 730.0 * i for i in range(12)]
    src = _grid_nc(tmp_path / "clim.nc", np.array([0.0, 1.0]), np.array([0.0, 1.0]), time=(units, calendar, vals))
    d, r = _one_file_catalog(tmp_path, src)
    assert d["extent"]["temporal"]["interval"] == [want]
    notes = json.loads(r.stdout)["notes"]
    if want[0] is None:
        assert notes and "left open" in notes[0] and units in notes[0], notes
        assert "warning" in r.stderr and "left open" in r.stderr, r.stderr
    else:
        assert notes == []
        ends = cftime.num2date([min(vals), max(vals)], units, calendar)  # the oracle: cftime in the calendar
        assert want == [f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:00:00Z" for d in ends]

"""The demo's publishing step: emit every form of the demo collection, reopen each with its own
reader (fsspec + zarr, icechunk + zarr, pyarrow, sqlite3, GDAL), compare a window of ``sst``
with the direct reader, then show remap rules and the collection opened by xarray (``engine="refstore"``)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["publish_demo"]

_WINDOW = (slice(None), 0, slice(5, 40), slice(10, 70))


def _zarr_v2_sst(fo: Any) -> np.ndarray[Any, Any]:
    import fsspec
    import zarr

    fs = fsspec.filesystem("reference", fo=fo, remote_protocol="file", asynchronous=True)
    group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True, path=""), mode="r", zarr_format=2)
    sst: Any = group["sst"]
    return np.asarray(sst[_WINDOW])


def _kerchunk_parquet_sst(out: str) -> np.ndarray[Any, Any]:
    import fsspec
    from fsspec.implementations.reference import LazyReferenceMapper

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # pandas 3.1 deprecates fastparquet
        return _zarr_v2_sst(LazyReferenceMapper(out, fs=fsspec.filesystem("file")))


def _icechunk_sst(out: str) -> np.ndarray[Any, Any]:
    import icechunk as ic
    import zarr

    from .emit.icechunk import credentials, quiet_local_logs

    with warnings.catch_warnings(), quiet_local_logs():  # refstore's own repository, read here
        warnings.simplefilter("ignore")  # local storage and numcodecs-name warnings
        storage = ic.local_filesystem_storage(out)
        config = ic.Repository.fetch_config(storage)
        prefixes = sorted(((config.virtual_chunk_containers if config else None) or {}).keys())
        repo = ic.Repository.open(storage, authorize_virtual_chunk_access=credentials(prefixes))
        group = zarr.open_group(repo.readonly_session(branch="main").store, mode="r", zarr_format=3)
        sst: Any = group["sst"]
        return np.asarray(sst[_WINDOW])


def _parquet_refs(out: str) -> int:
    import pyarrow.parquet as pq

    t = pq.read_table(out, filters=[("array_name", "=", "sst")], columns=["array_name", "offset", "size"])
    meta = pq.read_metadata(out).metadata or {}
    return t.num_rows if b"refstore" in meta else -1


def _sqlite_refs(out: str) -> int:
    with sqlite3.connect(f"file:{out}?mode=ro", uri=True) as con:
        (version,) = con.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
        (n,) = con.execute("SELECT count(*) FROM refs_sst WHERE present").fetchone()
    return int(n) if version == "mdim-refs/0.2" else -1


def _vrt_sst(out: str) -> np.ndarray[Any, Any] | None:
    """sst of the VRT as GDAL >= 3.7 reads it (the VRT declares int8 arrays Int8): gdal-wheel's
    ``osgeo.gdal`` in a child process (its libgdal apart from h5py's libhdf5), else
    ``gdalmdimtranslate`` to netCDF read with h5py; None without either."""
    code = ("import sys, numpy as np; from osgeo import gdal; gdal.UseExceptions(); "
            "a = gdal.OpenEx(sys.argv[1], gdal.OF_MULTIDIM_RASTER).GetRootGroup().OpenMDArrayFromFullname('/sst'); "
            "np.save(sys.argv[2], a.ReadAsArray())")  # fmt: skip
    tool = shutil.which("gdalmdimtranslate")
    with tempfile.TemporaryDirectory() as tmp:
        npy = str(Path(tmp) / "sst.npy")
        res = subprocess.run([sys.executable, "-c", code, out, npy], capture_output=True, check=False)
        if res.returncode == 0:
            got: np.ndarray[Any, Any] = np.load(npy)[_WINDOW]
            return got
        if tool is None or _gdal_release(tool) < (3, 7):
            return None
        import h5py

        nc = str(Path(tmp) / "sst.nc")
        subprocess.run([tool, "-q", out, nc], check=True, capture_output=True)
        with h5py.File(nc, "r") as f:
            name = next(k for k in f if k.endswith("sst"))
            return np.asarray(f[name][_WINDOW])


def _gdal_release(tool: str) -> tuple[int, ...]:
    """``(3, 6, 2)`` from ``gdalmdimtranslate --version`` ("GDAL 3.6.2, released ...")."""
    text = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False).stdout
    digits = text.split()[1].rstrip(",").split(".") if len(text.split()) > 1 else []
    return tuple(int(d) for d in digits if d.isdigit())


def publish_demo(coll: Path, root: Path, tell: Callable[[str], Any]) -> bool:
    """Step 9 of the demo; True when every reopened form equals the direct reader."""
    from . import open
    from .emit import FORMATS, emit
    from .table.collection import Collection
    from .table.remap import add_rule

    col = Collection.open(str(coll))
    expected = open(str(coll))["sst"][_WINDOW]
    refs = col.snapshot().count("chunk", "array = 'sst' AND g0 >= -1")
    pub = root / "published"
    pub.mkdir()
    names = {"kerchunk-json": "refs.json", "kerchunk-parquet": "refs.parq", "icechunk": "repo.icechunk",
             "parquet": "refs.parquet", "sqlite": "refs.sqlite", "vrt": "oisst.vrt"}  # fmt: skip
    ok = True
    results: list[str] = []
    for fmt in FORMATS:
        out = str(pub / names.get(fmt, fmt))
        emit(col, fmt, out)
        same: bool | None
        if fmt == "kerchunk-json":
            same = np.array_equal(_zarr_v2_sst(out), expected)
        elif fmt == "kerchunk-parquet":
            same = np.array_equal(_kerchunk_parquet_sst(out), expected)
        elif fmt == "icechunk":
            same = np.array_equal(_icechunk_sst(out), expected)
        elif fmt == "parquet":
            same = _parquet_refs(out) == refs
        elif fmt == "sqlite":
            same = _sqlite_refs(out) == refs
        elif fmt == "vrt":
            got = _vrt_sst(out)
            same = None if got is None else np.array_equal(got, expected)
        else:
            same = None
        verdict = "reopened, equal" if same else ("written (GDAL not installed)" if same is None else "DIFFERS")
        results.append(f"{fmt}: {verdict}")
        ok = ok and same is not False
    tell(f"9. published every form to {pub}: " + "; ".join(results))

    data = sorted(Path(p) for p in {s for s in col.snapshot().sources().column("source").to_pylist()})[0].parent
    add_rule(col, str(data), "https://example.org/oisst")
    emit(col, "kerchunk-json", str(pub / "public-refs.json"))
    public = (pub / "public-refs.json").read_text()
    remapped = "https://example.org/oisst/" in public and str(data) not in public
    tell(f"   remap {data} -> https://example.org/oisst (a new version): public-refs.json names only "
         f"https URLs: {remapped}")  # fmt: skip
    import xarray as xr

    with xr.open_dataset(str(coll), engine="refstore") as xds:
        sst_c = float(xds["sst"].isel(time=-1).mean())
        tell("10. xarray (engine='refstore', lazy, CF-decoded by xarray):\n" + str(xds))
        tell(f"   mean sst of the last day: {sst_c:.3f} {xds['sst'].attrs.get('units', '')}")
    return ok and remapped and bool(np.isfinite(sst_c))

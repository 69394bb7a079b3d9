"""Emit, import, compare: refstore's own kerchunk and Icechunk forms come back with the same
dtypes, fill values and attributes (typed: a float32 ``scale_factor`` stays float32, an int8
scalar stays int8, a one-element array keeps its shape), and the same references.

The kerchunk forms carry the types as NCZarr does (``_nczarr_attr`` in ``.zattrs``, hidden by
xarray) and the stored fill value where ``fill_value`` says another; the Icechunk form keeps them
in its snapshot's metadata (zarr v3 attributes are plain JSON, and xarray shows all of them).
On a generated file whose every chunk is written and whose uint8 array's stored fill value
(255) is not its ``_FillValue`` (it has none), and on the zoo's netCDF/HDF5 files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.errors import BadInputError
from refstore.imports import import_icechunk, import_kerchunk
from refstore.table.versions import diff

from .conftest import SHARED_DATA

FORMS = ("kerchunk-json", "kerchunk-parquet", "icechunk")


def _typed_file(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f.attrs["count"] = np.int16(7)
        f.attrs["ratio"] = np.array([0.5], np.float32)
        f.attrs["names"] = np.array([b"a", b"b"], dtype="S1")
        u = f.create_dataset("u", data=np.arange(24, dtype="u1").reshape(4, 6), chunks=(2, 3), fillvalue=255,
                             compression="gzip")  # fmt: skip
        u.attrs["flag_values"] = np.array([0, 1, 2], np.int32)
        u.attrs["one"] = np.array([3], np.int32)
        u.attrs["tiny"] = np.int8(-2)
        p = f.create_dataset("packed", data=np.arange(12, dtype="<i2").reshape(3, 4), chunks=(3, 2), fillvalue=-1)
        p.attrs["scale_factor"] = np.float32(0.01)
        p.attrs["add_offset"] = np.float32(273.15)
        p.attrs["_FillValue"] = np.int16(-1)
        p.attrs["valid_range"] = np.array([0, 1000], np.int16)
        p.attrs["long_name"] = "packed values"
    return path


def _metas(col: refstore.Collection, version: int | None = None) -> dict[str, Any]:
    snap = col.snapshot(version) if version is not None else col.snapshot()
    return {n: json.loads(m.to_json()) for n, m in snap.arrays().items()}


def _refs(col: refstore.Collection) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    cols = ["array", "g0", "g1", "g2", "g3", "source", "offset", "length"]
    t = col.snapshot().rows("chunk", cols, "offset >= 0")
    return {(r["array"], r["g0"], r["g1"], r["g2"], r["g3"]): (r["source"], r["offset"], r["length"])
            for r in t.to_pylist()}  # fmt: skip


def _round_trip(path: Path, form: str, tmp: Path) -> tuple[refstore.Collection, refstore.Collection, set[str]]:
    scanned = tmp / "scanned"
    refstore.init(str(scanned))
    refstore.scan(str(scanned), [str(path)], workers=1)
    a = refstore.Collection.open(str(scanned))
    out = tmp / f"out.{form}"
    rep = emit(a, form, str(out), skip_unexpressible=True)
    back = tmp / "back"
    refstore.init(str(back))
    b = refstore.Collection.open(str(back))
    allow = [str(path.parent) + "/"]  # the sources' folder (a store reads its own folder unless allowed)
    (import_icechunk if form == "icechunk" else import_kerchunk)(b, str(out), allow=allow)
    return a, refstore.Collection.open(str(back)), set(rep.skipped)


NOT_IMPORTED = frozenset({"vlen-utf8"})
"""Codecs the forms write but ``import`` does not map back yet (variable-length strings held
inline, newer than the importer): such arrays are left out of the comparison, by name."""


def _assert_same(a: refstore.Collection, b: refstore.Collection, skipped: set[str], what: str) -> None:
    ma, mb = _metas(a), _metas(b)
    skipped = skipped | {n for n, m in ma.items() if {c["id"] for c in m["codecs"]} & NOT_IMPORTED}
    assert set(mb) - skipped == set(ma) - skipped, what
    for name in set(mb) - skipped:
        for key in ma[name]:
            got = mb[name].get(key)
            assert ma[name][key] == got, f"{what} {name}: {key} {ma[name][key]!r} -> {got!r}"
    assert a.snapshot().group_attrs() == b.snapshot().group_attrs(), what
    ra = {k: v for k, v in _refs(a).items() if k[0] not in skipped}
    assert ra == _refs(b), what


@pytest.mark.parametrize("form", FORMS)
def test_generated_file_round_trips_exactly(tmp_path: Path, form: str) -> None:
    a, b, skipped = _round_trip(_typed_file(tmp_path / "typed.h5"), form, tmp_path)
    assert not skipped
    _assert_same(a, b, skipped, form)
    meta = b.snapshot().arrays()
    assert meta["u"].fill_value == 255 and meta["u"].attrs["tiny"] == {"type": "|i1", "value": -2}
    assert meta["u"].attrs["one"] == {"type": "<i4", "value": [3], "shape": [1]}
    assert meta["packed"].attrs["scale_factor"]["type"] == "<f4"
    assert b.snapshot().group_attrs()[""]["count"] == {"type": "<i2", "value": 7}


@pytest.mark.parametrize("form", FORMS)
def test_import_into_the_same_collection_changes_no_metadata(tmp_path: Path, form: str) -> None:
    """``diff`` after importing a collection's own form: no array's metadata changed."""
    a, _b, _s = _round_trip(_typed_file(tmp_path / "typed.h5"), form, tmp_path)
    before = a.latest_version
    (import_icechunk if form == "icechunk" else import_kerchunk)(a, str(tmp_path / f"out.{form}"))
    rep = diff(refstore.Collection.open(a.uri), before)
    assert {n for n, d in rep.arrays.items() if d["metadata_changed"] or d["added"] or d["removed"]} == set()


def _zoo() -> list[Path]:
    """netCDF-4/HDF5 and netCDF-3 files of the zoo, by their first bytes."""
    zoo = SHARED_DATA / "zoo"
    files = []
    for p in sorted(zoo.rglob("*")) if zoo.is_dir() else []:
        if p.is_file() and p.suffix.lower() in (".nc", ".h5", ".hdf5", ".he5", ".nc4", ".cdf"):
            with open(p, "rb") as fh:
                head = fh.read(8)
            if head == b"\x89HDF\r\n\x1a\n" or (head[:3] == b"CDF" and head[3:4] in (b"\x01", b"\x02", b"\x05")):
                files.append(p)
    return files[::7]  # a sample across origins (the whole zoo takes minutes per form)


@pytest.mark.parametrize("form", ["kerchunk-json", "icechunk"])
def test_zoo_files_round_trip_exactly(shared_data: Path, tmp_path: Path, form: str) -> None:
    files = _zoo()
    if not files:
        pytest.skip("no netCDF/HDF5 files in ../shared/data/zoo")
    checked = 0
    for i, path in enumerate(files):
        try:
            a, b, skipped = _round_trip(path, form, tmp_path / str(i))
        except BadInputError as e:
            if "nothing to emit" in str(e):
                continue  # the form expresses none of its arrays (test_emit_roundtrip checks why)
            scanned = refstore.Collection.open(str(tmp_path / str(i) / "scanned")).snapshot().arrays()
            if any({c["id"] for c in m.codecs} & NOT_IMPORTED for m in scanned.values()):
                continue  # the known gap above: the import refuses the store
            raise
        _assert_same(a, b, skipped, f"{form} {path.relative_to(shared_data)}")
        checked += 1
    assert checked > 0

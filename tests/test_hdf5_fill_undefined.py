"""HDF5 datasets whose fill value is undefined (``H5Pset_fill_value(..., NULL)``, as old PyTables
wrote them): h5py reads them, so the scan records them (fill: zeros) instead of failing the file."""

from __future__ import annotations

from pathlib import Path

import h5py
import pytest

import refstore

from ._oracle import assert_same

FILES = ("debian-pytables/attr-u16.h5", "debian-pytables/ex-noattr.h5")


@pytest.mark.parametrize("name", FILES)
def test_undefined_fill_value_scans(name: str, shared_data: Path, new_collection) -> None:
    path = shared_data / "zoo" / name
    if not path.is_file():
        pytest.skip(f"{name} is not in the zoo")
    col = new_collection()
    rep = refstore.scan(col, [str(path)])
    assert rep.failed == ()
    ds = refstore.open(col)
    served = [n for n in ds.arrays if ds[n].meta.status == "ok"]
    assert served
    with h5py.File(path, "r") as f:
        for n in served:
            assert_same(ds[n][...], f[n][()], n)

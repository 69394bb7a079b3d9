"""Stale sources: one check, one policy, on every path that fetches source bytes.

A source rewritten after its scan (another size, or the same size with a new modification time)
is refused by a zarr store, a dataset and an xarray dataset all opened *before* the rewrite: a
check's result is trusted for one read (one zarr batch), never for the life of a store.
Expected values come from h5py over the file, before and after the rewrite.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.read import ReadOptions

OLD = np.arange(64, dtype="<f4").reshape(8, 8)


def _write(path: Path, values: np.ndarray[Any, Any]) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=values, chunks=(4, 4))  # uncompressed: a rewrite keeps the size


def _h5(path: Path) -> np.ndarray[Any, Any]:
    with h5py.File(path, "r") as f:
        return np.asarray(f["v"][()])


@pytest.fixture
def scanned(tmp_path: Path) -> tuple[str, Path, np.ndarray[Any, Any]]:
    path = tmp_path / "v.h5"
    _write(path, OLD)
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(path)])
    return uri, path, _h5(path)


def _rewrite(path: Path, change: str) -> np.ndarray[Any, Any]:
    """Other values at the same offsets; ``size``: bytes appended, ``mtime``: same size, a new
    modification time. Returns h5py's read of the new file."""
    st = os.stat(path)
    _write(path, OLD[::-1] + 100)
    if change == "size":
        with open(path, "ab") as f:
            f.write(b"\0" * 16)
    else:
        assert os.stat(path).st_size == st.st_size
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    return _h5(path)


@pytest.mark.parametrize("change", ["size", "mtime"])
def test_opened_before_a_rewrite_refuses_it_on_every_path(scanned: Any, change: str) -> None:
    import xarray as xr
    import zarr

    uri, path, old = scanned
    store = refstore.zarr_store(uri)
    arr = zarr.open_array(store, path="v", mode="r")
    ds = refstore.open(uri)
    xds = xr.open_dataset(uri, engine="refstore", cache=False)  # xarray itself keeps no copy
    for got in (arr[...], ds["v"][...], xds["v"].values):  # each read checks, and finds the source fresh
        assert got.dtype == old.dtype and got.tobytes() == old.tobytes()
    new = _rewrite(path, change)
    assert new.tobytes() != old.tobytes()
    stale = re.escape(str(path)) + r": changed since scan"
    with pytest.raises(refstore.StaleSourceError, match=stale):
        arr[...]
    with pytest.raises(refstore.StaleSourceError, match=stale):
        zarr.core.sync.sync(store.get_many(["v/c/0/0", "v/c/1/1"]))
    with pytest.raises(refstore.StaleSourceError, match=stale):
        ds["v"][0:4, 0:4]
    with pytest.raises(refstore.StaleSourceError, match=stale):
        xds["v"].values  # noqa: B018


@pytest.mark.parametrize("policy", ["warn", "ignore"])
def test_warn_and_ignore_read_the_source_as_it_is(scanned: Any, policy: str) -> None:
    """``warn``: a StaleSourceWarning naming the source on every read, then its bytes as they
    are now; ``ignore``: no check, no warning."""
    import zarr

    uri, path, old = scanned
    opts = ReadOptions(on_stale=policy)
    arr = zarr.open_array(refstore.zarr_store(uri, options=opts), path="v", mode="r")
    ds = refstore.open(uri, options=opts)
    assert arr[...].tobytes() == old.tobytes()
    new = _rewrite(path, "mtime")
    for read in (lambda: arr[...], lambda: ds["v"][...], lambda: arr[...]):
        if policy == "warn":
            with pytest.warns(refstore.StaleSourceWarning, match=re.escape(str(path))):
                got = read()
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got = read()
        assert got.dtype == new.dtype and got.tobytes() == new.tobytes()


def test_bad_policy_refused(scanned: Any) -> None:
    with pytest.raises(refstore.BadInputError, match="on_stale"):
        ReadOptions(on_stale="sometimes")

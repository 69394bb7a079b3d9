"""Attributes through every reader and zarr form equal netCDF4-python's ``getncattr`` over the
original file (one-element string and numeric HDF5 arrays as scalars, types compared)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.emit import emit

from .readers import icechunk as icechunk_form
from .readers import kerchunk_parquet as kerchunk_parquet_form

ATTRS: dict[str, Any] = {
    "title_vlen_1": np.array(["C"], dtype=h5py.string_dtype()),
    "units_fixed_1": np.array([b"K"], dtype="S1"),
    "fixed_scalar": np.bytes_(b"abc"),
    "vlen_scalar": "vlen scalar",
    "names": np.array(["a", "bb"], dtype=h5py.string_dtype()),
    "one_f4": np.array([1.5], dtype="f4"),
    "one_i4": np.array([7], dtype="i4"),
    "two_i2": np.array([1, 2], dtype="i2"),
    "scalar_u1": np.uint8(3),
}


def _write(path: Path) -> None:
    with h5py.File(path, "w") as f:
        for k, v in ATTRS.items():
            f.attrs[k] = v
        g = f.create_group("grp")
        d = g.create_dataset("T", data=np.arange(6, dtype="f4").reshape(2, 3), chunks=(1, 3))
        for k, v in ATTRS.items():
            d.attrs[k] = v
            g.attrs[k] = v


def _oracle(path: Path) -> dict[str, dict[str, Any]]:
    """netCDF4-python's attributes: root group, ``grp`` and ``grp/T``."""
    import netCDF4

    with netCDF4.Dataset(path) as nc:
        g, v = nc.groups["grp"], nc.groups["grp"].variables["T"]
        return {node: {k: obj.getncattr(k) for k in ATTRS} for node, obj in (("", nc), ("grp", g), ("grp/T", v))}


def _same_typed(got: Any, exp: Any, what: str) -> None:
    """Python/numpy value: same type (numpy scalars: same dtype), same value."""
    if isinstance(exp, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == exp.dtype, f"{what}: {got!r} != {exp!r}"
        np.testing.assert_array_equal(got.ravel(), exp.ravel(), err_msg=what)
        return
    assert type(got) is type(exp), f"{what}: {type(got).__name__} {got!r} != {type(exp).__name__} {exp!r}"
    assert got == exp, f"{what}: {got!r} != {exp!r}"


def _as_json(exp: Any) -> Any:
    """What netCDF4-python's value is in JSON (zarr attributes): numbers as int/float, arrays as lists."""
    if isinstance(exp, np.ndarray):
        return [_as_json(x) for x in exp.ravel()]
    if isinstance(exp, np.integer):
        return int(exp)
    if isinstance(exp, np.floating):
        return float(exp)
    return exp


def _same_json(got: Any, exp: Any, what: str) -> None:
    want = _as_json(exp)
    assert type(got) is type(want) and got == want, f"{what}: {got!r} != {want!r}"


@pytest.fixture
def attr_collection(tmp_path: Path, new_collection: Any) -> tuple[str, dict[str, dict[str, Any]]]:
    path = tmp_path / "attrs.h5"
    _write(path)
    col = new_collection()
    refstore.scan(col, [str(path)])
    return col, _oracle(path)


def test_xarray_backend_attributes_equal_netcdf4(attr_collection: tuple[str, dict[str, dict[str, Any]]]) -> None:
    import xarray as xr

    col, oracle = attr_collection
    for group in ("", "grp"):
        with xr.open_dataset(col, engine="refstore", group=group or None) as ds:
            for k, exp in oracle[group].items():
                _same_typed(ds.attrs[k], exp, f"group {group!r} {k}")
            if group:
                for k, exp in oracle["grp/T"].items():
                    _same_typed(ds["T"].attrs[k], exp, f"T {k}")


@pytest.mark.parametrize("form", ["kerchunk-json", "kerchunk-parquet", "icechunk", "zarr_store"])
def test_zarr_form_attributes_equal_netcdf4(
    form: str, tmp_path: Path, attr_collection: tuple[str, dict[str, dict[str, Any]]]
) -> None:
    import fsspec
    import zarr

    col, oracle = attr_collection
    out = str(tmp_path / "out")
    if form == "zarr_store":
        root = zarr.open_group(refstore.zarr_store(col), mode="r")
    else:
        emit(refstore.Collection.open(col), form, out)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if form == "kerchunk-json":
                fs = fsspec.filesystem("reference", fo=out, remote_protocol="file", asynchronous=True)
                root = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True, path=""), mode="r", zarr_format=2)
            elif form == "kerchunk-parquet":
                root = kerchunk_parquet_form.open_group(out)
            else:
                root = zarr.open_group(icechunk_form.open_repo(out).readonly_session(branch="main").store, mode="r")
    nodes = {"": root.attrs, "grp": root["grp"].attrs, "grp/T": root["grp/T"].attrs}
    for node, attrs in nodes.items():
        for k, exp in oracle[node].items():
            _same_json(attrs[k], exp, f"{form} {node!r} {k}")

"""Fixed-length strings of an HDF-EOS5-like file (``|S1``, ``|S32``, ``|S32000``, compact and
contiguous, null- and space-padded) read as h5py reads them, dtype and itemsize included,
through every reader: the direct reader, ``engine="refstore"`` (eager and dask), the zarr store
and the zarr forms (a 0-d zarr read is a numpy scalar, as h5py's ``d[()]``).

Space-padded strings hold trailing spaces in the file; h5py (HDF5's conversion to null padding)
gives NULs there, so ``b"ab      "`` reads as ``b"ab"``: a scalar of itemsize 2, not 8. The zarr
forms cannot express that conversion and leave such arrays out (``--skip-unexpressible``)."""

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

GROUP = "HDFEOS INFORMATION"
STRINGS: dict[str, tuple[int, int, bool, bytes]] = {
    # name: (size, HDF5 padding in the file, compact layout, value)
    "S1": (1, h5py.h5t.STR_NULLTERM, False, b"C"),
    "S32": (32, h5py.h5t.STR_NULLTERM, False, b"abc"),
    "S7_full": (7, h5py.h5t.STR_NULLPAD, False, b"abcdefg"),
    "S32_compact": (32, h5py.h5t.STR_NULLTERM, True, b"ab"),
    "S8_spacepad": (8, h5py.h5t.STR_SPACEPAD, False, b"ab"),
    "S8_spacepad_compact": (8, h5py.h5t.STR_SPACEPAD, True, b"a b"),
    "StructMetadata.0": (32000, h5py.h5t.STR_NULLTERM, False, b"GROUP=SwathStructure\nEND_GROUP=SwathStructure\nEND\n"),
}
SPACEPAD = ("S8_spacepad", "S5_spacepad_array")


def _write(path: Path) -> None:
    with h5py.File(path, "w") as f:
        g = f.create_group(GROUP)
        f.create_group("HDFEOS/ADDITIONAL/FILE_ATTRIBUTES").attrs["InstrumentName"] = np.bytes_(b"OMI")
        space = h5py.h5s.create(h5py.h5s.SCALAR)
        for name, (size, pad, compact, value) in STRINGS.items():
            t = h5py.h5t.C_S1.copy()
            t.set_size(size)
            t.set_strpad(pad)
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            if compact:
                dcpl.set_layout(h5py.h5d.COMPACT)
            ds = h5py.h5d.create(g.id, name.encode(), t, space, dcpl=dcpl)
            ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array(value, dtype=f"S{size}"))  # HDF5 pads as the file says
        g.create_dataset("S5_array", data=np.array([b"ab", b"cdefg"], dtype="S5"))
        t = h5py.h5t.C_S1.copy()
        t.set_size(5)
        t.set_strpad(h5py.h5t.STR_SPACEPAD)
        ds = h5py.h5d.create(g.id, b"S5_spacepad_array", t, h5py.h5s.create_simple((3, 2)),
                             dcpl=_chunked((2, 2)))  # fmt: skip
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([[b"a", b" b"], [b"cdefg", b""], [b"x y", b"z"]], dtype="S5"))


def _chunked(chunks: tuple[int, ...]) -> Any:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    dcpl.set_deflate(4)
    return dcpl


@pytest.fixture
def eos(tmp_path: Path, new_collection: Any) -> tuple[str, Path]:
    path = tmp_path / "eos.he5"
    _write(path)
    col = new_collection()
    refstore.scan(col, [str(path)])
    return col, path


def _names() -> list[str]:
    return [*STRINGS, "S5_array", "S5_spacepad_array"]


def test_space_padded_strings_are_stored_with_spaces(eos: tuple[str, Path]) -> None:
    """The fixture is what it claims: the file holds the padding spaces h5py does not show."""
    _col, path = eos
    raw = path.read_bytes()
    assert b"ab      " in raw
    with h5py.File(path) as f:
        assert f[f"{GROUP}/S8_spacepad"][()] == b"ab"


def test_direct_reader_and_xarray_give_h5py_dtype(eos: tuple[str, Path]) -> None:
    import xarray as xr

    col, path = eos
    ds = refstore.open(col)
    with h5py.File(path) as f:
        for name in _names():
            want = f[f"{GROUP}/{name}"][...]  # h5py: an array of the dataset's dtype
            got = ds[f"{GROUP}/{name}"][...]
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
        for chunks in (None, {}):
            with xr.open_dataset(col, engine="refstore", group=GROUP, chunks=chunks) as x:
                for name in _names():
                    want = f[f"{GROUP}/{name}"][...]
                    assert x[name].dtype == want.dtype, (name, chunks)
                    values = x[name].values
                    assert values.dtype == want.dtype and values.tobytes() == want.tobytes(), (name, chunks)


@pytest.mark.parametrize("form", ["kerchunk-json", "kerchunk-parquet", "icechunk", "zarr_store"])
def test_zarr_forms_give_h5py_dtype(form: str, tmp_path: Path, eos: tuple[str, Path]) -> None:
    import fsspec
    import zarr

    col, path = eos
    out = str(tmp_path / "out")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # null_terminated_bytes is outside the zarr v3 spec
        if form == "zarr_store":
            root = zarr.open_group(refstore.zarr_store(col), mode="r")
        else:
            rep = emit(refstore.Collection.open(col), form, out, skip_unexpressible=True)
            assert sorted(n.rsplit("/", 1)[-1] for n in rep.skipped) == sorted(SPACEPAD)
            if form == "kerchunk-json":
                fs = fsspec.filesystem("reference", fo=out, remote_protocol="file", asynchronous=True)
                root = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True, path=""), mode="r", zarr_format=2)
            elif form == "kerchunk-parquet":
                root = kerchunk_parquet_form.open_group(out)
            else:
                root = zarr.open_group(icechunk_form.open_repo(out).readonly_session(branch="main").store, mode="r")
        with h5py.File(path) as f:
            for name in _names():
                if name in SPACEPAD and form != "zarr_store":
                    continue
                d = f[f"{GROUP}/{name}"]
                a = root[f"{GROUP}/{name}"]
                assert a.dtype == d.dtype, (form, name)
                got, want = a[...], d[()]  # 0-d: both a numpy scalar
                assert type(got) is type(want) and np.asarray(got).tobytes() == np.asarray(want).tobytes(), name

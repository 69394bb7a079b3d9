"""kerchunk Parquet opened by fsspec's LazyReferenceMapper + ReferenceFileSystem + zarr (format 2),
with BOTH of fsspec's Parquet engines: every read goes through fastparquet (fsspec's default) and
through pyarrow, and the two must give identical bytes (the round-trip suite then compares the
result with the oracle).

pyarrow under pandas 3 reads a null ``path`` as NaN, which fsspec takes for a URL: reads through
that engine run with ``pandas.option_context("future.infer_string", False)``, the documented
workaround."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

ENGINES = ("fastparquet", "pyarrow")


def open_group(out: str, engine: str = "fastparquet") -> Any:
    import fsspec
    import zarr
    from fsspec.implementations.reference import LazyReferenceMapper, ReferenceFileSystem

    from . import register_codecs

    register_codecs()
    lazy = LazyReferenceMapper(out, fs=fsspec.filesystem("file"), engine=engine)
    fs = ReferenceFileSystem(lazy, remote_protocol="file", asynchronous=True)
    return zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True, path=""), mode="r", zarr_format=2)


def _arrays(group: Any) -> dict[str, Any]:
    out = dict(group.arrays())
    for g, sub in group.groups():
        out.update({f"{g}/{n}": a for n, a in _arrays(sub).items()})
    return out


def read(array: Any, sel: Any, engine: str) -> np.ndarray[Any, Any]:
    """``array[sel]`` with the engine's workaround. pandas 3.1 deprecates (``Pandas4Warning``)
    both its fastparquet engine, fsspec's default, and the ``future.infer_string`` option, the
    only way pyarrow-read references keep null paths as None."""
    import pandas as pd

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The 'fastparquet' engine is deprecated", DeprecationWarning)
        warnings.filterwarnings("ignore", "The 'future.infer_string' option is deprecated", DeprecationWarning)
        if engine == "fastparquet":
            return np.asarray(array[sel])
        with pd.option_context("future.infer_string", False):
            return np.asarray(array[sel])


class BothEngines:
    """One array opened through each engine; indexing reads both and requires equal bytes."""

    def __init__(self, name: str, arrays: dict[str, Any]) -> None:
        self.name = name
        self.arrays = arrays

    def __getitem__(self, sel: Any) -> np.ndarray[Any, Any]:
        got = {e: read(a, sel, e) for e, a in self.arrays.items()}
        first = got[ENGINES[0]]
        for e, v in got.items():
            assert v.shape == first.shape and v.tobytes() == first.tobytes(), f"{self.name}: {e} differs"
        return first


def open_form(out: str, case: Any) -> dict[str, Any]:
    by_engine = {e: _arrays(open_group(out, e)) for e in ENGINES}
    names = by_engine[ENGINES[0]].keys()
    assert all(by_engine[e].keys() == names for e in ENGINES)
    return {n: BothEngines(n, {e: by_engine[e][n] for e in ENGINES}) for n in names}

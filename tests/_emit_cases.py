"""Collections every emitted form is checked on, built once per test session, and their oracle.

A case is one collection: each netCDF4/HDF5, netCDF3 and TIFF file of ``../shared/data`` on its
own, the generated TIFF cases one by one, the HDF5 edge-case and plugin files, and the
generated series (OISST-like netCDF4 along time, netCDF3 records of different counts, a COG
series). The oracle of a single-source case is the format's own library (h5py,
netCDF4-python, tifffile: ``read.verify._Oracle``); of a series, the direct reader, which
``test_series``/``test_netcdf3``/``test_tiff`` prove equal to numpy concatenations of those
libraries' reads.

Use: ``emit_cases`` (session fixture) -> list of ``Case``; ``case.expected(name)`` and
``assert_same(got, expected)``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .conftest import SHARED_DATA, hdf5_files_in_shared, netcdf3_files_in_shared

__all__ = ["Case", "assert_same", "build_cases", "case_ids"]

MAX_WHOLE_BYTES = 64 << 20
"""Arrays larger than this are compared on a window (their first chunks), not whole."""


def tiff_files_in_shared() -> list[Path]:
    if not SHARED_DATA.is_dir():
        return []
    return sorted(p for p in SHARED_DATA.rglob("*") if p.is_file() and p.suffix.lower() in (".tif", ".tiff")
                  and "seaflux-series" not in str(p))  # fmt: skip


@dataclass
class Case:
    id: str
    uri: str
    source: str | None = None  # the single source, when the case has one
    _cache: dict[str, Any] = field(default_factory=dict)

    def dataset(self) -> Any:
        import refstore

        return refstore.open(self.uri)

    def window(self, name: str) -> tuple[slice, ...]:
        """The whole array, or its first chunks when it is large."""
        a = self.dataset()[name]
        nbytes = int(np.prod(a.shape, dtype=np.int64)) * a.dtype.itemsize
        if nbytes <= MAX_WHOLE_BYTES:
            return tuple(slice(0, n) for n in a.shape)
        return tuple(slice(0, min(n, 2 * c)) for n, c in zip(a.shape, a.chunks, strict=True))

    def expected(self, name: str, sel: tuple[slice, ...] | None = None) -> np.ndarray[Any, Any]:
        """Raw stored values of ``sel`` (default ``window(name)``) read by the oracle."""
        sel = self.window(name) if sel is None else sel
        key = f"{name}{sel}"
        if key not in self._cache:
            got: np.ndarray[Any, Any] | None = None
            if self.source is not None:
                from refstore.read.verify import _Oracle

                with _Oracle(self.source) as o:
                    got = o.read(name, sel)
            if got is None:
                got = self.dataset()[name][sel]
            self._cache[key] = np.asarray(got)
        return self._cache[key]  # type: ignore[no-any-return]


def assert_same(got: Any, expected: np.ndarray[Any, Any], what: str = "") -> None:
    """Equal shape and values bit for bit (byte order may differ; NaNs must be NaN in the same
    places)."""
    got = np.asarray(got)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if expected.dtype.kind in "biufc":
        native = expected.dtype.newbyteorder("=")
        same_type = got.dtype.newbyteorder("=") == native or got.dtype == native
        assert same_type, f"{what}: dtype {got.dtype} != {expected.dtype}"
        a = got.astype(native, copy=False)
        b = expected.astype(native, copy=False)
        assert a.tobytes() == b.tobytes(), f"{what}: values differ"
    else:
        assert np.array_equal(got, expected), f"{what}: values differ"


def _scan(uri: str, sources: list[str], **kw: Any) -> None:
    import refstore

    refstore.init(uri)
    rep = refstore.scan(uri, sources, **kw)
    assert not rep.failed, rep.failed


def build_cases(root: Path) -> list[Case]:
    """Every case, scanned into collections under ``root``."""
    from refstore.fixtures.edge import write_edge_file, write_plugin_file
    from refstore.fixtures.netcdf3 import write_obs_series
    from refstore.fixtures.oisst import write_series
    from refstore.fixtures.tiff import write_cases

    cases: list[Case] = []
    gen = root / "generated"

    days = write_series(gen / "oisst", 4)
    uri = str(root / "c-oisst-series")
    _scan(uri, [str(p) for p in days], concat_dim="time")
    cases.append(Case("oisst-series", uri))

    obs = gen / "obs"
    write_obs_series(obs, [3, 5, 2])
    uri = str(root / "c-netcdf3-series")
    _scan(uri, [str(obs)], concat_dim="time")
    cases.append(Case("netcdf3-series", uri))

    singles: list[tuple[str, Path]] = [("edge", write_edge_file(gen / "edge.h5"))]
    with contextlib.suppress(ImportError):
        singles.append(("plugins", write_plugin_file(gen / "plugins.h5")))
    for name, path in sorted(write_cases(gen / "tiff").items()):
        singles.append((f"tiff-{name}", Path(path)))
    for p in [*hdf5_files_in_shared(), *netcdf3_files_in_shared(), *tiff_files_in_shared()]:
        singles.append((f"{p.parent.name}/{p.name}", p))
    for i, (cid, path) in enumerate(singles):
        uri = str(root / f"c-{i:03d}")
        _scan(uri, [str(path)])
        cases.append(Case(cid, uri, os.path.abspath(path)))

    seaflux = sorted((SHARED_DATA / "gh-noaa-cdr-seaflux-series").glob("*.tif")) if SHARED_DATA.is_dir() else []
    if seaflux:
        uri = str(root / "c-seaflux-series")
        _scan(uri, [str(p) for p in seaflux[:4]], concat_dim="time", time_from_name="D%Y%m%d")
        cases.append(Case("seaflux-series", uri))
    return cases


def case_ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]

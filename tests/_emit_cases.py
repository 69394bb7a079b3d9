"""Collections every emitted form is checked on, built once per test session, and their oracle.

A case is one collection: each netCDF4/HDF5, netCDF3 and TIFF file of ``../shared/data`` on its
own, the generated TIFF cases one by one, the HDF5 edge-case and plugin files, and the
generated series (OISST-like netCDF4 along time, netCDF3 records of different counts, a COG
series, HDF5 series of two eras, striped TIFF series: ``STRIP_SERIES``). Every case's oracle is
``tests/_oracle.py``, never refstore: the format's own library (h5py, netCDF4-python,
tifffile) for a single source, numpy concatenations of those reads for a series, tifffile's
pages stacked along time (and the dates in the file names) for a TIFF series.

Each rule of ``tests/test_emit_roundtrip.py`` is exercised by a generated case (``onebit``: a
1-bit mask, a codec no zarr form has), so the suite means the same without ../shared/data.

Use: ``emit_cases`` (session fixture) -> list of ``Case``; ``case.windows(name)``,
``case.expected(name, sel)`` and ``assert_same(got, expected)``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from . import _oracle
from ._oracle import assert_same
from .conftest import SHARED_DATA, hdf5_files_in_shared, netcdf3_files_in_shared, shared_files

__all__ = ["STRIP_SERIES", "Case", "assert_same", "build_cases", "case_ids", "write_era_series", "write_onebit_tiff",
           "write_strip_series"]

MAX_WHOLE_BYTES = 64 << 20
"""Arrays larger than this are compared on two windows (their first and their last chunks,
the edge chunks included), not whole."""

STRIP_SERIES: dict[str, tuple[tuple[int, ...], int, dict[str, Any], bool]] = {
    # name: (page shape, RowsPerStrip, tifffile options, last strip stored short)
    "gray-even": ((8, 6), 4, {}, False),
    "gray-short": ((10, 6), 4, {"compression": "zlib"}, True),
    "rgb-short": ((10, 8, 3), 4, {"photometric": "rgb"}, True),
    "rgb-even": ((8, 6, 3), 4, {"photometric": "rgb", "compression": "lzw"}, False),
    "planar-short": ((3, 10, 7), 4, {"photometric": "rgb", "planarconfig": "separate"}, True),
}
"""Striped TIFF series along ``time`` (two dated files each): the short-strip flag must come
from the y axis, not from the time axis or the width the series adds in front."""


def write_era_series(folder: Path, scales: tuple[float, float]) -> list[Path]:
    """Two HDF5 files along ``time`` whose ``x`` changes codecs and chunks (and its CF
    ``scale_factor`` when ``scales`` differ) from one file to the next: two eras."""
    import h5py

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, (comp, chunks) in enumerate((("gzip", (1, 12)), (None, (2, 5)))):
        path = folder / f"f{i}.h5"
        with h5py.File(path, "w") as f:
            t = f.create_dataset("time", data=np.arange(2, dtype="f8") + 2 * i, maxshape=(None,), chunks=(2,))
            t.attrs["units"] = "days since 2000-01-01"
            t.make_scale("time")
            x = f.create_dataset("x", data=(np.arange(24).reshape(2, 12) + 100 * i).astype("<i2"), chunks=chunks,
                                 compression=comp, shuffle=comp is not None)  # fmt: skip
            x.attrs["scale_factor"] = np.float32(scales[i])
            x.dims[0].attach_scale(t)
        out.append(path)
    return out


def write_strip_series(folder: Path, *, seed: int = 7) -> dict[str, list[Path]]:
    """``STRIP_SERIES`` written under ``folder/<name>/<name>_2020010<d>.tif`` (uint16)."""
    from refstore.fixtures.tiff import write_tiff

    rng = np.random.default_rng(seed)
    out: dict[str, list[Path]] = {}
    for name, (shape, rows, kw, _short) in STRIP_SERIES.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        out[name] = [
            write_tiff(folder / name / f"{name}_2020010{d}.tif", rng.integers(0, 60000, shape).astype("u2"),
                       rowsperstrip=rows, **kw)
            for d in (1, 2)
        ]  # fmt: skip
    return out


def tiff_files_in_shared() -> list[Path]:
    return [p for p in shared_files() if p.suffix.lower() in (".tif", ".tiff") and "seaflux-series" not in str(p)]


@dataclass
class Case:
    id: str
    uri: str
    source: str | None = None  # the single source, when the case has one
    series: tuple[str, ...] = ()  # netCDF/HDF5 sources concatenated along ``concat_dim``, in order
    concat_dim: str = "time"
    tiff_series: tuple[str, ...] = ()  # a series of TIFFs along a new first axis, in order
    times: tuple[int, ...] = ()  # the TIFF series' dates (seconds since 1970), from the file names
    _cache: dict[str, Any] = field(default_factory=dict)

    def dataset(self) -> Any:
        import refstore

        return refstore.open(self.uri)

    def window(self, name: str) -> tuple[slice, ...]:
        """The whole array, or its first chunks when it is large."""
        return self.windows(name)[0]

    def windows(self, name: str) -> list[tuple[slice, ...]]:
        """What to compare: the whole array, or, when it is large, its first two chunks and
        its last two chunks along every dimension (the last one cut by the array's end). Windows
        reaching an end are open (``stop=None``): each side reads to its own end, so a shape
        refstore gets wrong shows as a shape mismatch rather than a narrower comparison."""
        a = self.dataset()[name]
        nbytes = int(np.prod(a.shape, dtype=np.int64)) * a.dtype.itemsize
        if nbytes <= MAX_WHOLE_BYTES:
            return [tuple(slice(0, None) for _ in a.shape)]
        first = tuple(slice(0, min(n, 2 * c)) for n, c in zip(a.shape, a.chunks, strict=True))
        last = tuple(slice(max(0, (-(-n // c) - 2) * c), None) for n, c in zip(a.shape, a.chunks, strict=True))
        return [first, last]

    def expected(self, name: str, sel: tuple[slice, ...] | None = None) -> np.ndarray[Any, Any]:
        """Raw stored values of ``sel`` (default ``window(name)``) read by the oracle
        (``tests/_oracle.py``), never by refstore."""
        sel = self.window(name) if sel is None else sel
        key = f"{name}{sel}"
        if key not in self._cache:
            got: np.ndarray[Any, Any] | None
            if self.source is not None:
                got = _oracle.read(self.source, name, sel)
            elif self.tiff_series:
                got = _oracle.tiff_series_read(list(self.tiff_series), list(self.times), name, sel)
            elif self.series:
                got = _oracle.series_read(list(self.series), name, self.concat_dim, sel)
            else:
                raise AssertionError(f"{self.id}: a case needs its sources for an oracle")
            if got is None:
                raise AssertionError(f"{self.id}: the oracle has no array {name}")
            self._cache[key] = np.asarray(got)
        return self._cache[key]  # type: ignore[no-any-return]


def write_onebit_tiff(path: Path, *, seed: int = 5) -> Path:
    """A tiled uint8 image with an internal 1-bit mask IFD (``mask``, bit-packed: the
    ``bitunpack`` codec, which neither zarr form can express), its 1-bit overview, and a 4-bit
    overview of the image (``overview_1``: samples refstore records as unsupported, which no
    form, not even GDAL's VRT of the file, may carry)."""
    import tifffile

    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (70, 90)).astype("u1")
    mask = rng.random((70, 90)) > 0.3
    path.parent.mkdir(parents=True, exist_ok=True)
    with tifffile.TiffWriter(path) as w:
        w.write(img, tile=(32, 32), compression="zlib", metadata=None)
        w.write(mask, tile=(32, 32), compression="zlib", subfiletype=4, metadata=None)
        w.write(mask[::2, ::2], tile=(32, 32), subfiletype=5, metadata=None)
        w.write(img[::2, ::2] % 16, bitspersample=4, subfiletype=1, metadata=None)
    return path


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
    cases.append(Case("oisst-series", uri, series=tuple(os.path.abspath(p) for p in days)))

    obs = gen / "obs"
    obs_files = write_obs_series(obs, [3, 5, 2])
    uri = str(root / "c-netcdf3-series")
    _scan(uri, [str(obs)], concat_dim="time")
    cases.append(Case("netcdf3-series", uri, series=tuple(os.path.abspath(p) for p in obs_files)))

    singles: list[tuple[str, Path]] = [("edge", write_edge_file(gen / "edge.h5"))]
    with contextlib.suppress(ImportError):
        singles.append(("plugins", write_plugin_file(gen / "plugins.h5")))
    for name, path in sorted(write_cases(gen / "tiff").items()):
        singles.append((f"tiff-{name}", Path(path)))
    singles.append(("tiff-onebit", write_onebit_tiff(gen / "tiff-onebit" / "onebit.tif")))
    for p in [*hdf5_files_in_shared(), *netcdf3_files_in_shared(), *tiff_files_in_shared()]:
        singles.append((f"{p.parent.name}/{p.name}", p))
    for i, (cid, path) in enumerate(singles):
        uri = str(root / f"c-{i:03d}")
        _scan(uri, [str(path)])
        cases.append(Case(cid, uri, os.path.abspath(path)))

    for name, scales in (("codecs", (0.1, 0.1)), ("packing", (0.1, 0.01))):
        uri = str(root / f"c-eras-{name}")
        era_files = write_era_series(gen / f"eras-{name}", scales)
        _scan(uri, [str(p) for p in era_files], concat_dim="time")
        cases.append(Case(f"eras-{name}", uri, series=tuple(os.path.abspath(p) for p in era_files)))

    for name, files in write_strip_series(gen / "strips").items():
        uri = str(root / f"c-strips-{name}")
        _scan(uri, [str(p) for p in files], concat_dim="time", time_from_name="%Y%m%d")
        cases.append(Case(f"strip-series-{name}", uri, tiff_series=tuple(os.path.abspath(p) for p in files),
                          times=tuple(_oracle.unix_seconds(datetime(2020, 1, d)) for d in (1, 2))))  # fmt: skip

    seaflux = sorted((SHARED_DATA / "gh-noaa-cdr-seaflux-series").glob("*.tif")) if SHARED_DATA.is_dir() else []
    if seaflux:
        # the names date the 3-hourly steps by day only (the same time four times: refused), so the
        # copies carry the hour of their step (-0- is 00Z, -1- 03Z...) in their names
        steps = gen / "seaflux"
        steps.mkdir()
        for i, p in enumerate(seaflux[:4]):
            shutil.copyfile(p, steps / f"seaflux_sst_20210831{3 * i:02d}.tif")
        uri = str(root / "c-seaflux-series")
        _scan(uri, [str(steps)], concat_dim="time", time_from_name="sst_%Y%m%d%H")
        copies = sorted(steps.glob("*.tif"))
        dates = [datetime.strptime(re.search(r"_(\d{10})\.tif$", p.name).group(1), "%Y%m%d%H") for p in copies]  # type: ignore[union-attr]
        cases.append(Case("seaflux-series", uri, tiff_series=tuple(os.path.abspath(p) for p in copies),
                          times=tuple(_oracle.unix_seconds(d) for d in dates)))  # fmt: skip
    return cases


def case_ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]

"""A scan in worker processes (what ``refstore scan`` runs, and ``refstore.scan`` with a
``timeout``) records exactly what a scan in this process records, for every format: the scanner
travels to the worker and its results come back pickled. The other tests scan in their own
process (``conftest._scans_in_this_process``) and check those results against the formats' own
libraries; this test is what ties the two paths together."""

from __future__ import annotations

import importlib.util
from datetime import date
from pathlib import Path

from refstore.fixtures.netcdf3 import write_obs_file
from refstore.fixtures.oisst import write_day
from refstore.fixtures.tiff import write_cases
from refstore.scan import AutoScanner, ScanResult, scan_many
from refstore.scan._parallel import DEFAULT_TIMEOUT, scan_one


def _files(folder: Path) -> list[Path]:
    files = [
        write_day(folder / "oisst.20240101.nc", date(2024, 1, 1)),
        write_obs_file(folder / "obs3.nc", start_hour=0, records=3),
        write_obs_file(folder / "obs64.nc", start_hour=0, records=2, fmt="NETCDF3_64BIT_OFFSET"),
        *sorted(write_cases(folder / "tiff").values()),
    ]
    if importlib.util.find_spec("eccodes") is not None:  # the optional extra (GRIB)
        from refstore.fixtures.grib import write_grib

        files.append(write_grib(folder / "t.grib2"))
    return files


def _same(a: ScanResult, b: ScanResult) -> None:
    assert a.source == b.source
    assert [m.to_json() for m in a.arrays] == [m.to_json() for m in b.arrays]  # NaN fills compare as text
    assert a.chunks.equals(b.chunks)
    assert (a.sort_value, a.sort_units, a.sort_last) == (b.sort_value, b.sort_units, b.sort_last)
    assert (a.groups, a.format, a.layout) == (b.groups, b.format, b.layout)


def test_every_format_scans_the_same_in_worker_processes(tmp_path: Path) -> None:
    locs = [str(p) for p in _files(tmp_path)]
    scanner = AutoScanner()
    here = {loc: scan_one(scanner, loc) for loc in locs}
    there = dict(scan_many(scanner, locs, workers=2, timeout=DEFAULT_TIMEOUT))
    batched = dict(scan_many(scanner, locs, workers=1, timeout=None))  # in this process, checked as one batch
    assert list(there) == locs and list(batched) == locs
    formats = set()
    for loc in locs:
        assert isinstance(here[loc], ScanResult), here[loc]
        assert isinstance(there[loc], ScanResult), there[loc]
        _same(there[loc], here[loc])  # type: ignore[arg-type]
        _same(batched[loc], here[loc])  # type: ignore[arg-type]
        formats.add(here[loc].format)  # type: ignore[union-attr]
    assert formats >= {"hdf5", "netcdf3", "tiff"}

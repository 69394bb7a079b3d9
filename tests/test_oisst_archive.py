"""The OISST-like archive of ``bench/oisst.py``: one netCDF4 day written by netCDF4-python, the
other days its bytes with only ``time`` patched in place. The patched files are what the bench
scans, so they must be valid: the oracle (h5py over each file, numpy concatenation) reads the
days' own time values and the template's fields, and a scan reads the same through the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import refstore
from bench.oisst import day_number, generate

from ._oracle import assert_same, series_read


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("oisst") / "files"
    return [str(p) for p in generate(folder, 4, ny=24, nx=48)]


def test_patched_days_hold_their_own_time_and_the_template_fields(archive: list[str]) -> None:
    times = series_read(archive, "time", "time")
    assert times.dtype == np.dtype("<f4")
    assert times.tolist() == [float(day_number(i)) for i in range(4)]
    sst = series_read(archive, "sst", "time")
    assert sst.shape == (4, 1, 24, 48) and sst.dtype == np.dtype("<i2")
    assert all(np.array_equal(sst[i], sst[0]) for i in range(4)) and len(np.unique(sst[0])) > 1


def test_scan_of_the_archive_reads_what_the_oracle_reads(archive: list[str], tmp_path: Path) -> None:
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, archive, concat_dim="time", workers=1, timeout=None)
    ds = refstore.open(col)
    for name in ("time", "sst", "anom", "err", "ice", "lat", "lon"):
        assert_same(ds[name][...], series_read(archive, name, "time"), name)

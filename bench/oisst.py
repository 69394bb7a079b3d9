"""Benchmark: the seed's OISST archive at full size: 16,387 daily netCDF4 files of 720 x 1440
grids (``sst``, ``anom``, ``err``, ``ice`` int16 on time/zlev/lat/lon, as NOAA writes them),
scanned with the command line (``refstore scan DIR --concat-dim time``, default workers), then a
rescan with one new day (an upsert) and ``verify --sample 1000``; wall time and the peak RSS of
the whole process tree (workers included) against the targets (< 3 min on 2 cores, < 2 GB).

The files are made cheaply: one day is written with netCDF4-python (fields constant along each
latitude row, so zlib makes each 2 MB chunk a few hundred bytes); every other day is that file's
bytes with only the ``time`` value patched at its offset in the file (its chunk is stored raw).
Days 0, the middle one and the last are checked with netCDF4-python: the time values differ, the
rest reads equal. The folder is kept under ``--dir`` and reused.

    python -m bench.oisst [--dir /work/bench-data/oisst] [--days 16387] [--json] [--profile N]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench._proc import run_tree

DAYS = 16_387
START = date(1981, 9, 1)  # OISST v2.1's first day
EPOCH = date(1978, 1, 1)
NAME = "oisst-avhrr-v02r01.{:%Y%m%d}.nc"
VARS = {  # name: (long_name, units, scale_factor, valid range)
    "sst": ("Daily sea surface temperature", "Celsius", 0.01, (-300, 4500)),
    "anom": ("Daily sea surface temperature anomalies", "Celsius", 0.01, (-1200, 1200)),
    "err": ("Estimated error standard deviation of analysed_sst", "Celsius", 0.01, (0, 1000)),
    "ice": ("Sea ice concentration", "%", 0.01, (0, 100)),
}


def write_template(path: Path, ny: int = 720, nx: int = 1440) -> None:
    """One OISST-like day written by netCDF4-python (netCDF-C's layout): ``time`` unlimited in
    raw chunks of 1 (so its value can be patched in place), the four variables in one
    shuffle+zlib chunk per day, the global and variable attributes NOAA's files carry."""
    import netCDF4

    lat = np.linspace(-89.875, 89.875, ny, dtype="f4")
    lon = np.linspace(0.125, 359.875, nx, dtype="f4")
    with netCDF4.Dataset(path, "w", format="NETCDF4") as f:
        f.setncatts({
            "Conventions": "CF-1.6, ACDD-1.3", "title": "NOAA/NCEI 1/4 Degree Daily Optimum Interpolation Sea "
            "Surface Temperature (OISST) Analysis, Version 2.1 - Final", "references": "Reynolds, et al.(2007)",
            "institution": "NOAA/National Centers for Environmental Information", "source": "ICOADS, NCEP_GTS, "
            "GSFC_ICE, NCEP_ICE, Pathfinder_AVHRR, Navy_AVHRR", "id": "oisst-avhrr-v02r01", "naming_authority":
            "gov.noaa.ncei", "summary": "NOAAs 1/4-degree Daily Optimum Interpolation Sea Surface Temperature",
            "cdm_data_type": "Grid", "history": "Final file created using preliminary as first guess",
            "date_created": "2020-05-08T19:05:13Z", "date_modified": "2020-05-08T19:05:13Z",
            "product_version": "Version v02r01", "processing_level": "NOAA Level 4", "creator_name":
            "Richard W. Reynolds", "creator_url": "https://www.ncei.noaa.gov/", "creator_email":
            "oisst-help@noaa.gov", "keywords": "Earth Science > Oceans > Ocean Temperature > Sea Surface Temperature",
            "keywords_vocabulary": "Global Change Master Directory (GCMD) Earth Science Keywords",
            "platform": "Ships, buoys, Argo floats, MetOp-A, MetOp-B", "geospatial_lat_min": np.float32(-90),
            "geospatial_lat_max": np.float32(90), "geospatial_lon_min": np.float32(0),
            "geospatial_lon_max": np.float32(360), "time_coverage_start": "1981-09-01T00:00:00Z",
            "time_coverage_end": "1981-09-01T23:59:59Z", "metadata_link": "https://doi.org/10.25921/RE9P-PT57",
            "sensor": "Thermometer, AVHRR", "standard_name_vocabulary": "CF Standard Name Table (v40)",
        })  # fmt: skip
        f.createDimension("time", None)
        f.createDimension("zlev", 1)
        f.createDimension("lat", ny)
        f.createDimension("lon", nx)
        t = f.createVariable("time", "f4", ("time",), chunksizes=(1,))
        t.setncatts({"long_name": "Center time of the day", "units": "days since 1978-01-01 12:00:00"})
        t[0] = 0.0
        z = f.createVariable("zlev", "f4", ("zlev",))
        z.setncatts({"long_name": "Sea surface height", "units": "meters", "positive": "down"})
        z[:] = 0.0
        la = f.createVariable("lat", "f4", ("lat",))
        la.setncatts({"long_name": "Latitude", "units": "degrees_north", "grids": "Uniform grid from -89.875 to "
                      "89.875 by 0.25"})  # fmt: skip
        la[:] = lat
        lo = f.createVariable("lon", "f4", ("lon",))
        lo.setncatts({"long_name": "Longitude", "units": "degrees_east", "grids": "Uniform grid from 0.125 to "
                      "359.875 by 0.25"})  # fmt: skip
        lo[:] = lon
        row = np.cos(np.deg2rad(lat))[:, None] * np.ones((1, nx), "f4")  # constant along each row
        for i, (name, (long_name, units, scale, (vmin, vmax))) in enumerate(VARS.items()):
            v = f.createVariable(name, "i2", ("time", "zlev", "lat", "lon"), zlib=True, complevel=4, shuffle=True,
                                 chunksizes=(1, 1, ny, nx), fill_value=np.int16(-999))  # fmt: skip
            v.setncatts({"long_name": long_name, "units": units, "add_offset": np.float32(0),
                         "scale_factor": np.float32(scale), "valid_min": np.int16(vmin),
                         "valid_max": np.int16(vmax)})  # fmt: skip
            v.set_auto_maskandscale(False)
            v[0, 0] = (vmin + (vmax - vmin) * (0.5 + 0.4 * row * (i + 1) / 4)).astype("i2")


def time_offset(path: Path) -> int:
    """Byte offset in ``path`` of the raw float32 ``time`` value (h5py's chunk index)."""
    import h5py

    with h5py.File(path, "r") as f:
        d = f["time"]
        if d.compression or d.shuffle or d.fletcher32 or d.dtype != np.dtype("<f4"):
            raise RuntimeError(f"{path}: time is not stored raw little-endian float32")
        return int(d.id.get_chunk_info(0).byte_offset)


def day_bytes(template: bytes, at: int, day: int) -> bytes:
    """The template's bytes with ``time`` = ``day`` (days since 1978-01-01)."""
    return template[:at] + np.array([day], "<f4").tobytes() + template[at + 4 :]


def day_number(i: int) -> int:
    return (START + timedelta(days=i) - EPOCH).days


def generate(folder: Path, days: int, ny: int = 720, nx: int = 1440) -> list[Path]:
    """The ``days`` files of the archive in ``folder`` (written once; kept), checked."""
    folder.mkdir(parents=True, exist_ok=True)
    tmpl_path = folder.parent / f"template-{ny}x{nx}.nc"
    if not tmpl_path.exists():
        write_template(tmpl_path, ny, nx)
    tmpl = tmpl_path.read_bytes()
    at = time_offset(tmpl_path)
    paths = [folder / NAME.format(START + timedelta(days=i)) for i in range(days)]
    for p in set(folder.iterdir()) - set(paths):  # a longer archive generated before, or leftovers
        p.unlink()
    for i, p in enumerate(paths):
        if not p.exists() or p.stat().st_size != len(tmpl):
            tmp = p.with_suffix(".tmp")
            tmp.write_bytes(day_bytes(tmpl, at, day_number(i)))
            os.replace(tmp, p)
    check(tmpl_path, [(i, paths[i]) for i in sorted({0, days // 2, days - 1})])
    return paths


def check(template: Path, days: list[tuple[int, Path]]) -> None:
    """netCDF4-python (the oracle) reads the day's time as the day number and every other
    variable equal to the template's."""
    import netCDF4

    with netCDF4.Dataset(template) as t:
        want = {n: t[n][...] for n in t.variables if n != "time"}
    for i, p in days:
        with netCDF4.Dataset(p) as f:
            if float(f["time"][0]) != day_number(i):
                raise RuntimeError(f"{p}: time {f['time'][0]} != {day_number(i)}")
            for n, v in want.items():
                if not np.array_equal(f[n][...], v):
                    raise RuntimeError(f"{p}: {n} differs from the template")


def _cli(col: Path, *args: str) -> dict[str, Any]:
    r = run_tree([sys.executable, "-m", "refstore.cli.app", "-C", str(col), *args])
    if r["rc"] not in (0, 1):
        raise RuntimeError(f"refstore {args[0]} failed (exit {r['rc']}): {r['stderr'].strip()[-400:]}")
    out = r.pop("stdout")
    r.pop("stderr")
    r["json"] = json.loads(out) if out.strip().startswith("{") else None
    return r


def profile(folder: Path, n: int) -> str:
    """cProfile of an in-process scan (one worker, no watchdog) of the first ``n`` files."""
    import refstore

    files = sorted(folder.glob("*.nc"))[:n]
    with tempfile.TemporaryDirectory(prefix="refstore-oisst-prof-") as tmp:
        col = str(Path(tmp) / "col")
        refstore.init(col)
        pr = cProfile.Profile()
        t0 = time.perf_counter()
        pr.runcall(refstore.scan, col, [str(p) for p in files], concat_dim="time", workers=1, timeout=None)
        took = time.perf_counter() - t0
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
    return f"{n} files in-process: {took:.2f} s ({1000 * took / n:.2f} ms/file)\n{s.getvalue()}"


def run(work: Path, days: int) -> dict[str, Any]:
    folder = work / "files"
    t0 = time.perf_counter()
    paths = generate(folder, days)
    res: dict[str, Any] = {"days": days, "generate_s": time.perf_counter() - t0,
                           "archive_bytes": sum(p.stat().st_size for p in paths)}  # fmt: skip
    col = work / "col"
    shutil.rmtree(col, ignore_errors=True)
    extra = folder / NAME.format(START + timedelta(days=days))
    extra.unlink(missing_ok=True)
    _cli(col, "init")
    res["scan"] = _cli(col, "scan", str(folder), "--concat-dim", "time", "--json")
    # one new day: the next file of the archive, then a rescan of the folder
    extra.write_bytes(day_bytes((work / "template-720x1440.nc").read_bytes(),
                                time_offset(work / "template-720x1440.nc"), day_number(days)))  # fmt: skip
    try:
        res["rescan"] = _cli(col, "scan", str(folder), "--concat-dim", "time", "--json")
        res["verify"] = _cli(col, "verify", "--sample", "1000", "--json")
    finally:
        extra.unlink()  # the cached folder stays the archive of ``days`` files
    res["collection_bytes"] = sum(p.stat().st_size for p in col.rglob("*") if p.is_file())
    return res


def _report(res: dict[str, Any]) -> None:
    s, r, v = res["scan"], res["rescan"], res["verify"]
    sj = s["json"] or {}
    print(f"archive: {res['days']:,} files, {res['archive_bytes'] / 1e9:.2f} GB (generated/checked in "
          f"{res['generate_s']:.1f} s); collection {res['collection_bytes'] / 1e6:.1f} MB")  # fmt: skip
    cpu = s.get("cpu_s", float("nan"))
    print(f"scan (CLI, default workers): {s['wall_s']:.1f} s ({s['wall_s'] / 180:.2f}x the 3 min limit; CPU "
          f"{cpu:.0f} s, over 2 cores {cpu / 2 / 180:.2f}x), peak RSS of "
          f"the process tree {s['peak_tree_mb']:.0f} MB ({s['peak_tree_mb'] / 2048:.2f}x the 2 GB limit); "
          f"{sj.get('sources', {}).get('new', '?')} sources, "
          f"{sj.get('refs', {}).get('inserted', '?')} refs")  # fmt: skip
    rj = r["json"] or {}
    print(f"rescan with one new day: {r['wall_s']:.1f} s (CPU {r.get('cpu_s', float('nan')):.1f} s), "
          f"peak RSS {r['peak_tree_mb']:.0f} MB; sources "
          f"{rj.get('sources')}, refs {rj.get('refs')}")  # fmt: skip
    vj = v["json"] or {}
    print(f"verify --sample 1000: {v['wall_s']:.1f} s ({v['wall_s'] / 30:.2f}x 30 s; CPU "
          f"{v.get('cpu_s', float('nan')):.1f} s), peak RSS "
          f"{v['peak_tree_mb']:.0f} MB; checked {vj.get('checked')}, mismatched {vj.get('mismatched')}")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/work/bench-data/oisst"), help="kept: the archive is reused")
    ap.add_argument("--days", type=int, default=DAYS)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--profile", type=int, default=0, help="also profile an in-process scan of N files")
    a = ap.parse_args(argv)
    a.dir.mkdir(parents=True, exist_ok=True)
    res = run(a.dir, a.days)
    if a.profile:
        res["profile"] = profile(a.dir / "files", a.profile)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        _report(res)
        if a.profile:
            print(res["profile"])


if __name__ == "__main__":
    main()

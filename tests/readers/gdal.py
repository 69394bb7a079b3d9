"""GDAL's readers as tests use them: each in its own process (``gdal_child.py``), as their
wheels each bundle a libgdal (rasterio 1.5.2: GDAL 3.12, gdal-wheel 3.13.3, pyogrio 0.13:
GDAL 3.12) that must not meet another one, nor h5py's libhdf5, in one process.

``run(mode, job, out)`` skips the test, naming the package, when the reader is not installed
(``pip install 'refstore[test]'`` installs all three)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

PACKAGES = {"rasterio-zarr": ("rasterio", "rasterio==1.5.2"), "gdal-mdim": ("osgeo", "gdal-wheel==3.13.3"),
            "ogr": ("pyogrio", "pyogrio==0.13.0"), "gdal-cli": ("osgeo", "gdal-wheel==3.13.3")}  # fmt: skip
"""Per mode: the module it imports and the release tested (the README names them; the test
extras ask for these or newer)."""

CHILD = Path(__file__).with_name("gdal_child.py")


def reader_env() -> dict[str, str]:
    """The environment of a reader: hdf5plugin's filters (zstd, lz4, blosc, bitshuffle) for
    GDAL's libhdf5. Set, not defaulted: importing netCDF4 points HDF5_PLUGIN_PATH at its own
    plugins, which lack lz4 (GDAL then reads fill values)."""
    out = dict(os.environ)
    try:
        import hdf5plugin

        out["HDF5_PLUGIN_PATH"] = hdf5plugin.PLUGIN_PATH
    except ImportError:
        pass
    return out


def available(mode: str) -> bool:
    return importlib.util.find_spec(PACKAGES[mode][0]) is not None


def mdim_tool(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """``gdalmdiminfo``/``gdalmdimtranslate`` ``argv`` as GDAL 3.13 runs it (gdal-wheel's functions,
    in their own process; relative paths from ``cwd``): what the program prints. VRTs with int8
    arrays need GDAL >= 3.7 (Debian's gdal-bin is 3.6)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        answer = run("gdal-cli", {"argv": argv}, Path(tmp), env=env, cwd=cwd)
    out: str = answer["stdout"]
    return out


def run(mode: str, job: dict[str, Any], out: Path, *, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """The child's answer to ``job`` (``out``: a folder for its arrays); ``load`` reads them."""
    module, release = PACKAGES[mode]
    if not available(mode):
        pytest.skip(f"{mode}: {module} is not installed (pip install {release})")
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(CHILD), mode], input=json.dumps({**job, "out": str(out)}),
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**reader_env(), **(env or {})}, cwd=cwd)  # fmt: skip
    assert proc.returncode == 0, f"{mode} reader failed: {proc.stderr[-2000:]}"
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def load(answer: dict[str, Any], name: str, out: Path) -> np.ndarray[Any, Any]:
    got = answer["arrays"][name]
    assert "file" in got, f"{name}: {got.get('error')}"
    data: np.ndarray[Any, Any] = np.load(out / got["file"])
    return data

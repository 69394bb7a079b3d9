"""GDAL multidimensional VRT, read by GDAL itself: ``gdalmdimtranslate out.vrt out.nc`` (the
whole dataset at once when it is small, else ``-array name=...,view=[...]`` per window), the
netCDF result read with netCDF4-python as stored (no masking or scaling).

GDAL 3.6 has no Int8 or Bool type: its drivers read int8 as Int16 and a TIFF mask as Byte, and
the VRT declares the same. Those two are narrowed back to the catalogued dtype here, and only
when that is exact (values in range), so a wrong value still fails the comparison.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np

__all__ = ["GdalArray", "open_form", "translate"]

WHOLE_MAX_BYTES = 64 << 20
"""Datasets up to this size are translated once, whole; larger ones per requested window."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    try:
        import hdf5plugin

        env.setdefault("HDF5_PLUGIN_PATH", hdf5plugin.PLUGIN_PATH)  # zstd, lz4, blosc for GDAL's libhdf5
    except ImportError:
        pass
    return env


def translate(vrt: str, out: str, *args: str) -> None:
    """``gdalmdimtranslate [args] vrt out`` (netCDF output); raises with GDAL's message."""
    tool = shutil.which("gdalmdimtranslate")
    if tool is None:
        import pytest

        pytest.skip("gdalmdimtranslate (gdal-bin) is not installed")
    res = subprocess.run([tool, "-q", "-of", "netCDF", *args, vrt, out], capture_output=True, text=True,
                         env=_env(), check=False)  # fmt: skip
    if res.returncode != 0 or not os.path.exists(out):
        raise AssertionError(f"gdalmdimtranslate {' '.join(args)} {vrt} failed: {res.stderr.strip()}")


def _read_nc(path: str, name: str | None) -> np.ndarray[Any, Any]:
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        if name is None:  # the one variable of a single-array translation
            var = next(iter(ds.variables.values()))
        else:
            group, _, leaf = name.rpartition("/")
            g = ds[group] if group else ds
            var = g.variables[leaf]
        var.set_auto_maskandscale(False)
        var.set_always_mask(False)
        return np.asarray(var[...])


def _narrow(a: np.ndarray[Any, Any], want: np.dtype[Any], name: str) -> np.ndarray[Any, Any]:
    if a.dtype.newbyteorder("=") == want.newbyteorder("=") or a.dtype == want:
        return a
    if want.kind == "b" and a.dtype.kind == "u":
        assert np.isin(a, (0, 1)).all(), f"{name}: a mask read with values other than 0/1"
        return a.astype(bool)
    if want.kind == "i" and want.itemsize == 1 and a.dtype.kind == "i":
        assert (a >= -128).all() and (a <= 127).all(), f"{name}: int8 values out of range"
        return a.astype(want)
    return a


class _Form:
    """One VRT: its arrays' shapes (from the XML) and the translations already made."""

    def __init__(self, vrt: str, dtypes: dict[str, np.dtype[Any]]) -> None:
        self.vrt = vrt
        self.dtypes = dtypes
        self.tmp = tempfile.mkdtemp(prefix="vrt-read-")
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.itemsize: dict[str, int] = {}
        self._whole: str | None = None
        self._parse()

    def _parse(self) -> None:
        root = ET.parse(self.vrt).getroot()
        sizes: dict[str, int] = {}

        def walk(group: ET.Element, path: str) -> None:
            for d in group.findall("Dimension"):
                sizes[(path + "/" + d.get("name", "")) if path else "/" + d.get("name", "")] = int(d.get("size", "0"))
            for a in group.findall("Array"):
                name = (path + "/" if path else "") + a.get("name", "")
                shape = []
                for ref in a.findall("DimensionRef"):
                    r = ref.get("ref", "")
                    shape.append(sizes[r if r.startswith("/") else (path + "/" + r if path else "/" + r)])
                self.shapes[name] = tuple(shape)
                self.itemsize[name] = self.dtypes[name].itemsize if name in self.dtypes else 8
            for g in group.findall("Group"):
                walk(g, (path + "/" if path else "") + g.get("name", ""))

        top = root.find("Group")
        assert top is not None and top.get("name") == "/", "VRTDataset must hold the root Group '/'"
        walk(top, "")

    def nbytes(self) -> int:
        return sum(int(np.prod(s, dtype=np.int64)) * self.itemsize[n] for n, s in self.shapes.items())

    def whole(self) -> str:
        if self._whole is None:
            out = os.path.join(self.tmp, "whole.nc")
            translate(self.vrt, out)
            self._whole = out
        return self._whole

    def read(self, name: str, sel: tuple[slice, ...]) -> np.ndarray[Any, Any]:
        shape = self.shapes[name]
        full = all(s.start in (None, 0) and s.stop in (None, n) and s.step in (None, 1)
                   for s, n in zip(sel, shape, strict=True))  # fmt: skip
        if full and self.nbytes() <= WHOLE_MAX_BYTES:
            got = _read_nc(self.whole(), name)
        else:
            view = ",".join(f"{s.start or 0}:{n if s.stop is None else s.stop}" for s, n in zip(sel, shape, strict=True))
            out = os.path.join(self.tmp, f"part-{len(os.listdir(self.tmp))}.nc")
            spec = f"name=/{name}" + (f",view=[{view}]" if shape else "")
            translate(self.vrt, out, "-array", spec)
            got = _read_nc(out, None)
        return _narrow(got, self.dtypes.get(name, got.dtype), name)


class GdalArray:
    """An array of the VRT as GDAL reads it; indexing with slices runs gdalmdimtranslate."""

    def __init__(self, form: _Form, name: str) -> None:
        self.form = form
        self.name = name
        self.shape = form.shapes[name]

    def __getitem__(self, key: Any) -> np.ndarray[Any, Any]:
        if key is Ellipsis or key == ():
            key = tuple(slice(0, n) for n in self.shape)
        if not isinstance(key, tuple):
            key = (key,)
        return self.form.read(self.name, key)


def open_form(out: str, case: Any) -> dict[str, GdalArray]:
    ds = case.dataset()
    dtypes = {name: ds[name].dtype for name in ds.arrays}
    form = _Form(out, dtypes)
    return {name: GdalArray(form, name) for name in form.shapes}

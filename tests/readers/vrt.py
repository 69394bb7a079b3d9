"""GDAL multidimensional VRT, read by GDAL itself: ``gdalmdimtranslate out.vrt out.nc`` (the
whole dataset at once, when it is small), the netCDF result read with netCDF4-python as stored
(no masking or scaling). An array of a large dataset is translated from a copy of the VRT
that holds only that array (its XML unchanged); a window of a large array is read with
``gdalmdiminfo -detailed -limit N -array NAME`` (GDAL prints the first and last N/2 values
along each dimension as JSON, so a window at the start or at the end of each dimension is cut
from them):
GDAL 3.6.2's ``gdalmdimtranslate -array/-subset`` on a multidimensional VRT whose sources are
files hangs (a VRT opened inside a VRT deadlocks on close), so it cannot read windows.

GDAL 3.6 has no Int8 or Bool type: its drivers read int8 as Int16 and a TIFF mask as Byte, and
the VRT declares the same. Those two are narrowed back to the catalogued dtype here, and only
when that is exact (values in range), so a wrong value still fails the comparison. A signed
array with CF ``_Unsigned = "true"`` is read by GDAL's netCDF driver as unsigned (the same
bits); it is viewed back as the stored signed type.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import weakref
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np

__all__ = ["GdalArray", "open_form", "translate"]

WHOLE_MAX_BYTES = 64 << 20
"""Datasets up to this size are translated once, whole; in larger ones, arrays up to this size
are translated one by one, larger arrays read by window."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    try:
        import hdf5plugin

        # zstd, lz4, blosc, bitshuffle for GDAL's libhdf5. Set, not defaulted: importing netCDF4
        # points HDF5_PLUGIN_PATH at its own plugins, which lack lz4 (GDAL then reads fill values)
        env["HDF5_PLUGIN_PATH"] = hdf5plugin.PLUGIN_PATH
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


def _narrow(a: np.ndarray[Any, Any], want: np.dtype[Any], name: str, unsigned: bool) -> np.ndarray[Any, Any]:
    if a.dtype.newbyteorder("=") == want.newbyteorder("=") or a.dtype == want:
        return a
    if want.kind == "b" and a.dtype.kind == "u":
        assert np.isin(a, (0, 1)).all(), f"{name}: a mask read with values other than 0/1"
        return a.astype(bool)
    if unsigned and want.kind == "i" and a.dtype.kind == "u" and a.dtype.itemsize == want.itemsize:
        return a.view(want)  # CF _Unsigned: GDAL reads the same bits as unsigned
    if want.kind == "i" and want.itemsize == 1 and a.dtype.kind == "i":
        assert (a >= -128).all() and (a <= 127).all(), f"{name}: int8 values out of range"
        return a.astype(want)
    return a


_GDAL_NP = {"Byte": "u1", "UInt16": "u2", "Int16": "i2", "UInt32": "u4", "Int32": "i4", "UInt64": "u8",
            "Int64": "i8", "Float32": "f4", "Float64": "f8"}  # fmt: skip


class _Form:
    """One VRT: its arrays' shapes (from the XML) and the translations already made."""

    def __init__(self, vrt: str, dtypes: dict[str, np.dtype[Any]], unsigned: set[str]) -> None:
        self.vrt = vrt
        self.dtypes = dtypes
        self.unsigned = unsigned
        self.tmp = tempfile.mkdtemp(prefix="vrt-read-")
        weakref.finalize(self, shutil.rmtree, self.tmp, True)  # translations go with the form
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
        elif full and int(np.prod(shape, dtype=np.int64)) * self.itemsize[name] <= WHOLE_MAX_BYTES:
            got = _read_nc(self._only(name), name)
        else:
            bounds = tuple(
                (s.start or 0, n if s.stop is None else min(s.stop, n)) for s, n in zip(sel, shape, strict=True)
            )
            assert all(s.step in (None, 1) for s in sel), "windows have step 1"
            assert all(a == 0 or b == n for (a, b), n in zip(bounds, shape, strict=True)), "windows touch an end"
            got = self._info_window(name, bounds)
        return _narrow(got, self.dtypes.get(name, got.dtype), name, name in self.unsigned)

    def _only(self, name: str) -> str:
        """``name`` translated from a copy of the VRT without the other arrays."""
        tree = ET.parse(self.vrt)

        def prune(group: ET.Element, path: str) -> None:
            for a in group.findall("Array"):
                if (path + "/" if path else "") + a.get("name", "") != name:
                    group.remove(a)
            for g in group.findall("Group"):
                prune(g, (path + "/" if path else "") + g.get("name", ""))

        top = tree.getroot().find("Group")
        assert top is not None
        prune(top, "")
        base = os.path.join(self.tmp, f"only-{len(os.listdir(self.tmp))}")
        tree.write(base + ".vrt", encoding="unicode")
        translate(base + ".vrt", base + ".nc")
        return base + ".nc"

    def _info_window(self, name: str, bounds: tuple[tuple[int, int], ...]) -> np.ndarray[Any, Any]:
        """Values ``[start, stop)`` along each dimension, each window at the start or at the end
        of its dimension, from ``gdalmdiminfo -detailed -limit L`` (which prints the first and
        the last L/2 values of every dimension)."""
        import json

        tool = shutil.which("gdalmdiminfo")
        assert tool is not None
        widths = [b - a for a, b in bounds]
        limit = 2 * max(widths)
        res = subprocess.run([tool, "-detailed", "-limit", str(limit), "-array", "/" + name, self.vrt],
                             capture_output=True, text=True, env=_env(), check=False)  # fmt: skip
        assert res.returncode == 0, f"gdalmdiminfo -array {name} {self.vrt} failed: {res.stderr.strip()}"
        doc = json.loads(res.stdout)
        dtype = np.dtype(_GDAL_NP[doc["datatype"]])

        def crop(v: Any, depth: int) -> Any:
            if depth == len(bounds):
                return float(v.replace("Infinity", "inf")) if isinstance(v, str) else v  # "NaN"
            items = [x for x in v if not (isinstance(x, str) and x == "[...]")]
            w = widths[depth]
            items = items[:w] if bounds[depth][0] == 0 else items[len(items) - w :]
            return [crop(x, depth + 1) for x in items]

        values = crop(doc["values"], 0)
        return np.array(values, dtype=np.float64 if dtype.kind == "f" else dtype).astype(dtype)


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
    unsigned = {name for name in ds.arrays if str(ds[name].attrs.get("_Unsigned", "")).lower() == "true"}
    form = _Form(out, dtypes, unsigned)
    return {name: GdalArray(form, name) for name in form.shapes}

"""GDAL multidimensional VRT, read by GDAL 3.13 itself (gdal-wheel's ``osgeo.gdal``, in its own
process: ``tests/readers/gdal.py``): ``gdal.OpenEx(vrt, gdal.OF_MULTIDIM_RASTER)``, each array
by ``ReadAsArray`` (the small ones of a form at once, in one process; a window of a large array
by ``array_start_idx``/``count``). The dtype GDAL gives is the VRT's ``DataType`` (int8 is Int8).

A TIFF mask is Byte in GDAL (no Bool type) and a signed array with CF ``_Unsigned = "true"`` is
read by GDAL's netCDF driver as unsigned (the same bits): those two are viewed back as the
catalogued dtype here, and only when that is exact, so a wrong value still fails the comparison.
``translate`` is ``gdalmdimtranslate`` as GDAL 3.13 runs it (gdal-wheel's ``MultiDimTranslate``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GdalArray", "open_form", "translate"]

WHOLE_MAX_BYTES = 64 << 20
"""Datasets up to this size are translated once, whole; in larger ones, arrays up to this size
are translated one by one, larger arrays read by window."""


def translate(vrt: str, out: str, *args: str) -> None:
    """``gdalmdimtranslate [args] vrt out`` (netCDF output) as GDAL 3.13 runs it (gdal-wheel: the
    VRT declares int8 arrays Int8, which Debian's gdal-bin 3.6 cannot open); raises with GDAL's
    message."""
    from . import gdal

    gdal.mdim_tool(["gdalmdimtranslate", "-of", "netCDF", *args, vrt, out])
    if not os.path.exists(out):
        raise AssertionError(f"gdalmdimtranslate {' '.join(args)} {vrt} wrote nothing")


def _narrow(a: np.ndarray[Any, Any], want: np.dtype[Any], name: str, unsigned: bool) -> np.ndarray[Any, Any]:
    if a.dtype.newbyteorder("=") == want.newbyteorder("=") or a.dtype == want:
        return a
    if want.kind == "b" and a.dtype.kind == "u":
        assert np.isin(a, (0, 1)).all(), f"{name}: a mask read with values other than 0/1"
        return a.astype(bool)
    if unsigned and want.kind == "i" and a.dtype.kind == "u" and a.dtype.itemsize == want.itemsize:
        return a.view(want)  # CF _Unsigned: GDAL reads the same bits as unsigned
    return a


class _Form:
    """One VRT: its arrays' shapes (from the XML) and what GDAL read already."""

    def __init__(self, vrt: str, dtypes: dict[str, np.dtype[Any]], unsigned: set[str]) -> None:
        self.vrt = vrt
        self.dtypes = dtypes
        self.unsigned = unsigned
        self.tmp = tempfile.mkdtemp(prefix="vrt-read-")
        weakref.finalize(self, shutil.rmtree, self.tmp, True)  # reads go with the form
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.itemsize: dict[str, int] = {}
        self._whole: dict[str, np.ndarray[Any, Any]] | None = None
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

    def _small(self, name: str) -> bool:
        return int(np.prod(self.shapes[name], dtype=np.int64)) * self.itemsize[name] <= WHOLE_MAX_BYTES

    def _gdal(self, arrays: list[str], windows: dict[str, Any] | None = None) -> dict[str, np.ndarray[Any, Any]]:
        from . import gdal

        out = Path(tempfile.mkdtemp(dir=self.tmp))
        answer = gdal.run("gdal-mdim", {"path": self.vrt, "arrays": arrays, "windows": windows or {}}, out)
        return {n: gdal.load(answer, n, out) for n in arrays}

    def read(self, name: str, sel: tuple[slice, ...]) -> np.ndarray[Any, Any]:
        shape = self.shapes[name]
        full = all(s.start in (None, 0) and s.stop in (None, n) and s.step in (None, 1)
                   for s, n in zip(sel, shape, strict=True))  # fmt: skip
        if full and self._small(name):
            if self._whole is None:  # every small array of the form, in one process
                self._whole = self._gdal([n for n in self.shapes if self._small(n)])
            got = self._whole[name]
        else:
            assert all(s.step in (None, 1) for s in sel), "windows have step 1"
            start = [s.start or 0 for s in sel]
            count = [(n if s.stop is None else min(s.stop, n)) - a for s, n, a in zip(sel, shape, start, strict=True)]
            got = self._gdal([name], {name: [start, count]})[name]
        return _narrow(got.reshape(shape) if full else got, self.dtypes.get(name, got.dtype), name,
                       name in self.unsigned)  # fmt: skip


class GdalArray:
    """An array of the VRT as GDAL reads it; indexing with slices reads through GDAL 3.13."""

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

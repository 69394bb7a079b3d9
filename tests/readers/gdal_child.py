"""Runs one GDAL reader over one emitted form, alone in its process (``tests/readers/gdal.py``
starts it): rasterio's wheel, gdal-wheel's ``osgeo`` and pyogrio each bundle their own libgdal,
so no two of them (nor h5py's libhdf5) share a process.

``python gdal_child.py MODE`` reads a JSON job on stdin and writes a JSON answer on stdout;
arrays go to ``.npy`` files under the job's ``out`` folder. Modes:

- ``rasterio-zarr``: kerchunk JSON through GDAL's Zarr driver and ``/vsikerchunk_json_ref/``
  (rasterio's classic 2-D API: an N-D array is bands over its leading dimensions);
- ``gdal-mdim``: a multidimensional VRT through ``gdal.OF_MULTIDIM_RASTER`` (values, data types
  and typed attributes; ``windows``: ``{name: [start, count]}`` reads those instead of all);
- ``ogr``: an OGR data source (the SQLite form) through pyogrio: its layers and their rows;
- ``gdal-cli``: ``argv`` of ``gdalmdiminfo``/``gdalmdimtranslate`` run by gdal-wheel's functions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _rasterio_zarr(job: dict[str, Any]) -> dict[str, Any]:
    import rasterio

    out: dict[str, Any] = {"gdal": rasterio.__gdal_version__, "reader": f"rasterio {rasterio.__version__}"}
    arrays: dict[str, Any] = {}
    for i, name in enumerate(job["arrays"]):
        path = f'ZARR:"/vsikerchunk_json_ref/{{{job["path"]}}}":/{name}'
        try:
            with rasterio.open(path) as r:
                data = r.read()
                dtype = r.dtypes[0]
        except Exception as e:  # the answer says what failed; the test decides whether it may
            arrays[name] = {"error": f"{type(e).__name__}: {e}: {e.__cause__ or ''}"}
            continue
        np.save(Path(job["out"]) / f"{i}.npy", data)
        arrays[name] = {"file": f"{i}.npy", "dtype": dtype}
    out["arrays"] = arrays
    return out


def _attr(a: Any) -> dict[str, Any]:
    from osgeo import gdal

    dt = a.GetDataType()
    if dt.GetClass() == gdal.GEDTC_STRING:
        return {"type": "str", "value": a.Read()}
    value = a.ReadAsRaw()
    np_type = gdal.GetDataTypeName(dt.GetNumericDataType())
    return {"type": np_type, "value": list(np.frombuffer(value, _GDAL_NUMPY[np_type]).tolist())}


_GDAL_NUMPY = {"Byte": "u1", "Int8": "i1", "UInt16": "u2", "Int16": "i2", "UInt32": "u4", "Int32": "i4",
               "UInt64": "u8", "Int64": "i8", "Float16": "f2", "Float32": "f4", "Float64": "f8", "CFloat32": "c8",
               "CFloat64": "c16"}  # fmt: skip


def _gdal_mdim(job: dict[str, Any]) -> dict[str, Any]:
    from osgeo import gdal

    gdal.UseExceptions()
    ds = gdal.OpenEx(job["path"], gdal.OF_MULTIDIM_RASTER)
    root = ds.GetRootGroup()
    arrays: dict[str, Any] = {}
    for i, name in enumerate(job["arrays"]):
        window = job.get("windows", {}).get(name)
        try:
            a = root.OpenMDArrayFromFullname("/" + name)
            if window is not None:
                data = a.ReadAsArray(array_start_idx=window[0], count=window[1])
            else:
                data = a.ReadAsArray()
            if data is None:  # a 0-d array: one element through ReadAsRaw
                dt = a.GetDataType().GetNumericDataType()
                data = np.frombuffer(a.Read(), _GDAL_NUMPY[gdal.GetDataTypeName(dt)]).reshape(())
        except Exception as e:
            arrays[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        np.save(Path(job["out"]) / f"{i}.npy", np.asarray(data))
        arrays[name] = {"file": f"{i}.npy", "dtype": str(np.asarray(data).dtype),
                        "attrs": {at.GetName(): _attr(at) for at in a.GetAttributes()}}  # fmt: skip
    return {"gdal": gdal.__version__, "reader": f"gdal-wheel {gdal.__version__}", "arrays": arrays}


def _ogr(job: dict[str, Any]) -> dict[str, Any]:
    import pyogrio

    layers = [str(n) for n, _g in pyogrio.list_layers(job["path"])]
    rows: dict[str, Any] = {}
    for name in job["layers"]:
        _meta, table = pyogrio.read_arrow(job["path"], layer=name, return_fids=True)
        rows[name] = [{k: v.hex() if isinstance(v, bytes) else v for k, v in r.items()} for r in table.to_pylist()]
    return {"gdal": pyogrio.__gdal_version_string__, "reader": f"pyogrio {pyogrio.__version__}", "layers": layers,
            "rows": rows}  # fmt: skip


def _gdal_cli(job: dict[str, Any]) -> dict[str, Any]:
    """``gdalmdiminfo ARGS`` or ``gdalmdimtranslate ARGS`` done by gdal-wheel's Python functions
    (the same library calls the programs make; the wheel ships no programs): ``stdout`` as the
    program prints it."""
    from osgeo import gdal

    gdal.UseExceptions()
    tool, *args = job["argv"]
    options = [a for a in args if a != "-q"]
    if tool == "gdalmdiminfo":
        *opts, path = options
        info = gdal.MultiDimInfo(path, options=opts)
        return {"gdal": gdal.__version__, "stdout": json.dumps(info) if not isinstance(info, str) else info}
    if tool == "gdalmdimtranslate":
        *opts, src, dst = options
        gdal.MultiDimTranslate(dst, src, options=opts)
        return {"gdal": gdal.__version__, "stdout": ""}
    raise SystemExit(f"not a multidimensional GDAL program: {tool}")


MODES = {"rasterio-zarr": _rasterio_zarr, "gdal-mdim": _gdal_mdim, "ogr": _ogr, "gdal-cli": _gdal_cli}


def main() -> None:
    job = json.loads(sys.stdin.read())
    json.dump(MODES[sys.argv[1]](job), sys.stdout, default=str)


if __name__ == "__main__":
    main()

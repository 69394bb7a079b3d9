"""Importing netCDF4-python without disturbing h5py.

netCDF4-python sets ``HDF5_PLUGIN_PATH`` to its own bundled filter plugins when imported. Those
plugins are built against netCDF4's copy of libhdf5; if h5py's libhdf5 later finds them there (a
blosc filter, say), it loads them instead of hdf5plugin's and filters fail. The variable is put
back as it was right after the import.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["import_netcdf4"]


def import_netcdf4() -> Any:
    before = os.environ.get("HDF5_PLUGIN_PATH")
    import netCDF4

    if before is None:
        os.environ.pop("HDF5_PLUGIN_PATH", None)
    else:
        os.environ["HDF5_PLUGIN_PATH"] = before
    return netCDF4

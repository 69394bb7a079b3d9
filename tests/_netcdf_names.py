"""netCDF-C's view of an HDF5 file (through netCDF4-python): every variable's path and
dimension names, the oracle for the names refstore gives HDF5 datasets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refstore._netcdf4 import import_netcdf4

if TYPE_CHECKING:
    from pathlib import Path


def netcdf_dims(path: Path | str) -> dict[str, tuple[str, ...]] | None:
    """``{"group/var": dims}`` as netCDF-C opens ``path``; None when it cannot open it."""
    netCDF4 = import_netcdf4()
    out: dict[str, tuple[str, ...]] = {}

    def walk(g: Any, prefix: str) -> None:
        for name, v in g.variables.items():
            out[prefix + name] = tuple(v.dimensions)
        for name, sub in g.groups.items():
            walk(sub, f"{prefix}{name}/")

    try:
        with netCDF4.Dataset(path) as nc:
            walk(nc, "")
    except (OSError, RuntimeError, KeyError, ValueError, AttributeError):  # (netCDF4-python's own failures)
        return None
    return out

"""The attributes that change what a variable's stored values mean: one list, used by the
scanner's era key, the readers and every emitter.

Decided from the decoders users read with: xarray's coders (``coding/variables.py``:
``_FillValue``, ``missing_value`` (CFMaskCoder), ``scale_factor``, ``add_offset``
(CFScaleOffsetCoder), ``_Unsigned``, ``dtype`` = "bool" (BooleanCoder); ``coding/times.py``:
``units``, ``calendar``; ``coding/strings.py``: ``_Encoding``) and netCDF4-python's automatic
masking, which also masks outside ``valid_min``/``valid_max``/``valid_range``. A change of any of
them along the concat dimension starts an era. Scan-time only knowledge: no imports.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DECODED_BY_XARRAY", "ENCODING_ATTRS", "MASKED_BY_NETCDF4", "encoding_attrs"]

DECODED_BY_XARRAY = ("_FillValue", "missing_value", "scale_factor", "add_offset", "_Unsigned", "units", "calendar",
                     "dtype", "_Encoding")  # fmt: skip
"""Consumed by xarray's CF decoding (moved from ``attrs`` to ``encoding``): eras that differ in
one of them are decoded per era by the xarray backend and the zarr store."""

MASKED_BY_NETCDF4 = ("valid_min", "valid_max", "valid_range")
"""Applied by netCDF4-python's auto-masking (not by xarray): kept as attributes, but one value of
each per era, so a reader that masks with them never masks one file's values by another's."""

ENCODING_ATTRS = DECODED_BY_XARRAY + MASKED_BY_NETCDF4
"""Every attribute whose change starts an era."""


def encoding_attrs(attrs: dict[str, Any], names: tuple[str, ...] = ENCODING_ATTRS) -> dict[str, Any]:
    """The ``names`` present in ``attrs`` (any attribute mapping), in the order of ``names``."""
    return {k: attrs[k] for k in names if k in attrs}

"""The documented refusals: every ``refused`` cell's reason must match one of these (the table
in ``design/conformance.md`` gives, per reason, the reader that does read such arrays: the
roadmap). A reason matching none is flagged ``undocumented`` and fails the run."""

from __future__ import annotations

import re

__all__ = ["REASONS", "classify"]

REASONS: dict[str, str] = {
    # key: regex over the reason refstore gives (the ``array 'NAME': `` prefix removed)
    "filter without a decoder": r"HDF5 filter .* has no decoder",
    "variable-length dtype": r"variable-length dtype has no fixed byte layout",
    "compound dtype": r"compound dtype is not supported",
    "short last TIFF strip (zarr forms)": r"last chunk \(a TIFF strip\) is stored short",
    "GRIB codec (mdim-refs readers)": r"GRIB messages decode only with refstore's codec",
    "GRIB not mapped to GDAL (VRT)": r"GRIB messages are not mapped to GDAL",
    "no GDAL data type (VRT)": r"GDAL has no data type",
    "not a source format": r"unrecognised signature|folder holds no files ending in"
                           r"|not scanned; .*refstore import zarr",
    "codec without a zarr form": r"codec '\w+' has no zarr v2 \(numcodecs\) form|JPEG tiles with shared tables have no "
                                 r"zarr v3 form",
    "subarray dtype": r"dtype \('[<>|]?\w+', \([\d, ]+\)\) is not supported",
    "TIFF complex integer samples": r"complex integer samples \(TIFF SampleFormat 5",
    "empty dimension (VRT)": r"a GDAL VRT dimension cannot have size 0",
    "external link": r"links to other files are not followed",
    "GRIB2 multi-field message": r"multi-field messages are not supported",
    "damaged file": r"wrong message length|no '7777' end marker",
}

_COMPILED = [(k, re.compile(v)) for k, v in REASONS.items()]
_PREFIX = re.compile(r"^(\w+: )?array '[^']*': ")


def classify(reason: str) -> str | None:
    """The documented key of ``reason``, None when it is none of them."""
    text = _PREFIX.sub("", reason)
    for key, pattern in _COMPILED:
        if pattern.search(text):
            return key
    return None

"""HDF5 filter pipeline -> codec configs (numcodecs-style), in HDF5 (encode) order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["filters_to_codecs"]

# HDF5 registered filter ids
DEFLATE, SHUFFLE, FLETCHER32, SZIP, NBIT, SCALEOFFSET = 1, 2, 3, 4, 5, 6
BLOSC, LZ4, BITSHUFFLE, ZSTD = 32001, 32004, 32008, 32015


def filters_to_codecs(dcpl: Any, dtype: np.dtype[Any]) -> tuple[tuple[dict[str, Any], ...], str | None]:
    """Return (codecs, None), or ((), reason) when some filter has no decoder here."""
    codecs: list[dict[str, Any]] = []
    for i in range(dcpl.get_nfilters()):
        code, _flags, cd, name = dcpl.get_filter(i)
        cd = tuple(int(x) for x in cd)
        label = (name.decode("ascii", "replace") if isinstance(name, bytes) else str(name)).split(";")[0].strip()
        if code == DEFLATE:
            codecs.append({"id": "zlib", "level": cd[0] if cd else 6})
        elif code == SHUFFLE:
            codecs.append({"id": "shuffle", "elementsize": cd[0] if cd else dtype.itemsize})
        elif code == FLETCHER32:
            codecs.append({"id": "fletcher32"})
        elif code == SZIP:
            if len(cd) < 4:
                return (), f"szip filter with unexpected parameters {cd}"
            codecs.append(
                {
                    "id": "szip",
                    "mask": cd[0],
                    "pixels_per_block": cd[1],
                    "bits_per_pixel": cd[2],
                    "pixels_per_scanline": cd[3],
                }
            )
        elif code == ZSTD:
            codecs.append({"id": "zstd", "level": cd[0] if cd else 0})
        elif code == BLOSC:
            codecs.append({"id": "blosc"})
        elif code == LZ4:
            codecs.append({"id": "lz4h5"})
        elif code in (NBIT, SCALEOFFSET):
            return (), f"HDF5 filter {label or code} (id {code}) has no decoder (numcodecs/imagecodecs)"
        else:
            return (), f"HDF5 filter {label or 'unknown'} (id {code}) has no decoder here"
    return tuple(codecs), None

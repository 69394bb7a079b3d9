"""Decoding one GRIB message (a chunk) through ecCodes, and the codec that does it for numcodecs
(zarr v2) and zarr v3 under the stable id ``refstore.grib``.

A chunk is one whole GRIB1/GRIB2 message, byte for byte as in the file. Decoding gives its
values as cfgrib gives them: ecCodes' ``values`` (float64) cast to the array's dtype (float32 by
default), every point ecCodes reports missing as NaN, whether a bitmap marks it or the packing
does (complex packing's ``missingValueManagementUsed``): ecCodes is told ``missingValue`` = the
float32 maximum, which is then masked, as cfgrib does. A grid stored column-major
(``jPointsAreConsecutive``) or with alternating rows (``alternativeRowScanning``) is put in
row-major order, every row in the first row's direction (``to_grid_order``), so a chunk is laid
out as its array's (rows, columns), or (1-D grids) as ecCodes' per-point coordinates run.
ecCodes is imported when a chunk is decoded, so a missing ``eccodes`` package only affects GRIB
arrays (``pip install 'refstore[grib]'``); its own log lines are sent to /dev/null
(``silence_eccodes``): refstore reports each problem in one line.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Self

import numpy as np
from numcodecs.abc import Codec

from .errors import UnsupportedArrayError

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer

__all__ = ["CODEC_ID", "GRID_2D", "MISSING", "GribCodec", "decode_message", "grid_order", "import_eccodes",
           "silence_eccodes", "to_grid_order"]

CODEC_ID = "refstore.grib"
"""The codec's id in refstore's pipelines, numcodecs' registry and zarr v3 metadata."""

MISSING = float(np.finfo(np.float32).max)
"""The value ecCodes is told to give missing points (cfgrib's ``MISSING_VAUE_INDICATOR``)."""

GRID_2D = frozenset({"regular_ll", "regular_gg", "rotated_ll", "rotated_gg", "lambert", "lambert_azimuthal_equal_area",
                     "albers", "polar_stereographic"})  # fmt: skip
"""Grid types laid out as (rows, columns) (cfgrib's dimension and 2-D coordinate grids)."""

_SILENCED: list[bool] = []


def import_eccodes() -> Any:
    """The ``eccodes`` module, or a clear error saying what to install."""
    try:
        import eccodes
    except (ImportError, RuntimeError) as e:  # RuntimeError: the bindings found no ecCodes library
        raise UnsupportedArrayError(
            f"GRIB messages decode through ecCodes: install the 'eccodes' package (pip install 'refstore[grib]'): {e}"
        ) from None
    if not _SILENCED:
        _SILENCED.append(silence_eccodes())
    return eccodes


def silence_eccodes() -> bool:
    """Send ecCodes' log lines (``ECCODES ERROR : ...``) to /dev/null for this process, through
    its ``grib_context_set_logging_file``; False where that cannot be done (logs stay on stderr)."""
    try:
        import cffi
        from gribapi.bindings import ffi, lib

        c = cffi.FFI()
        c.cdef("void *fopen(const char *, const char *);")
        stream = c.dlopen(None).fopen(b"/dev/null", b"w")
        if stream == c.NULL:
            return False
        lib.grib_context_set_logging_file(lib.grib_context_get_default(),
                                          ffi.cast("FILE *", int(c.cast("uintptr_t", stream))))  # fmt: skip
    except Exception:  # another build of the bindings: keep ecCodes' default logging
        return False
    return True


def grid_order(ec: Any, h: Any) -> tuple[int, int, bool, bool, bool] | None:
    """``(rows, columns, column_major, alternating, as_grid)`` of a message of ``Nx * Ny`` points
    whose values need reordering, None for the others: grids laid out as rows and columns
    (``GRID_2D``: ``as_grid``) stored column-major (``jPointsAreConsecutive``) or with
    alternating rows (``alternativeRowScanning``), and any other grid of ``Nx`` x ``Ny`` points
    with alternating rows (its 1-D values follow ecCodes' per-point coordinates, which run every
    row one way)."""

    def get(key: str) -> int:
        return int(ec.codes_get_long(h, key)) if ec.codes_is_defined(h, key) else 0

    jcons, alt = get("jPointsAreConsecutive"), get("alternativeRowScanning")
    if not (jcons or alt):
        return None
    as_grid = ec.codes_get_string(h, "gridType") in GRID_2D
    if not (alt or as_grid):
        return None
    ny, nx = get("Ny"), get("Nx")
    if ny <= 0 or nx <= 0 or ny * nx != get("numberOfPoints"):
        return None
    return ny, nx, bool(jcons), bool(alt), as_grid


def to_grid_order(values: np.ndarray[Any, Any], ny: int, nx: int, column_major: bool, alternating: bool,
                  as_grid: bool = True) -> np.ndarray[Any, Any]:  # fmt: skip
    """``values`` in stored order -> row-major ``(ny, nx)`` order (flat). Column-major: the first
    ``ny`` values are the first column (``as_grid`` False: kept column by column, as ecCodes'
    per-point coordinates run); alternating: every second row (column-major: column) runs the
    other way (WMO code table 3.4, flag 4), turned to the first one's direction."""
    lines = values.reshape((nx, ny) if column_major else (ny, nx)).copy()
    if alternating:
        lines[1::2] = lines[1::2, ::-1]
    return (lines.T if column_major and as_grid else lines).reshape(-1)


def decode_message(data: Any, dtype: Any = "<f4") -> np.ndarray[Any, Any]:
    """The values of one GRIB message (bytes-like) as a flat array of ``dtype`` in row-major
    grid order, every point ecCodes reports missing as NaN."""
    ec = import_eccodes()
    buf = bytes(data) if not isinstance(data, bytes) else data
    h = ec.codes_new_from_message(buf)
    try:
        ec.codes_set(h, "missingValue", MISSING)
        values = np.asarray(ec.codes_get_values(h))
        order = grid_order(ec, h)
    finally:
        ec.codes_release(h)
    out = values.astype(np.dtype(dtype))
    with np.errstate(over="ignore"):  # as cfgrib: the float32 field equal to the indicator is missing
        out[values.astype(np.float32) == np.float32(MISSING)] = np.nan
    return out if order is None else to_grid_order(out, *order)


class GribCodec(Codec):  # type: ignore[misc]
    """numcodecs codec: a GRIB message -> its values (decode only)."""

    codec_id = CODEC_ID

    def __init__(self, dtype: str = "<f4") -> None:
        self.dtype = str(np.dtype(dtype).str)

    def decode(self, buf: Any, out: Any = None) -> Any:
        values = decode_message(memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf, self.dtype)
        if out is not None:
            np.copyto(np.asarray(out).reshape(-1).view(values.dtype), values)
            return out
        return values

    def encode(self, buf: Any) -> Any:
        raise NotImplementedError("refstore.grib decodes GRIB messages; it does not encode")

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "dtype": self.dtype}


def zarr_codec() -> type[Any]:
    """The zarr v3 array->bytes codec class (made on first use: zarr's ABCs are imported then)."""
    global _ZARR_CODEC
    if _ZARR_CODEC is not None:
        return _ZARR_CODEC
    from zarr.abc.codec import ArrayBytesCodec

    @dataclasses.dataclass(frozen=True)
    class GribZarrCodec(ArrayBytesCodec):
        """zarr v3 ``refstore.grib``: a chunk's bytes are one GRIB message; decoding gives the
        chunk's values (float, NaN where missing). Decode only."""

        is_fixed_size = False

        @classmethod
        def from_dict(cls, data: dict[str, Any]) -> Self:
            return cls()

        def to_dict(self) -> dict[str, Any]:
            return {"name": CODEC_ID, "configuration": {}}

        async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
            dtype = chunk_spec.dtype.to_native_dtype()
            values = decode_message(chunk_bytes.as_numpy_array(), dtype).reshape(chunk_spec.shape)
            return chunk_spec.prototype.nd_buffer.from_numpy_array(values)

        async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
            raise NotImplementedError("refstore.grib decodes GRIB messages; it does not encode")

        def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
            raise NotImplementedError("a GRIB message's size is not known before it is written")

    _ZARR_CODEC = GribZarrCodec
    return GribZarrCodec


_ZARR_CODEC: type[Any] | None = None

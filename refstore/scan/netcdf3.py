"""netCDF3 scanner (classic CDF-1, 64-bit offset CDF-2, 64-bit data CDF-5), header parsed here.

Fixed-size variables are one contiguous range (one chunk of the full shape). Record variables
are one chunk of shape (1, ...) per record: records of all record variables interleave, so
record ``r`` of a variable starts at ``begin + r * recsize`` (``recsize`` = the sum of the
padded sizes of all record variables, or the unpadded size when there is only one).
Data are big-endian.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from .._keys import MAX_DIMS, NO_DIM, SOURCE_KEY_COLUMNS
from .._values import encode_attr, encode_fill
from ..errors import ScanError
from ._cftime import cf_seconds
from ._sources import open_source
from ._types import CHUNK_BATCH_SCHEMA, ArrayMeta, ScanResult, SourceInfo

__all__ = ["NC3_TYPES", "NetCDF3Scanner", "read_header"]

# nc_type -> numpy dtype (big-endian) and default fill value
NC3_TYPES: dict[int, tuple[str, Any]] = {
    1: (">i1", -127),
    2: ("S1", b"\x00"),
    3: (">i2", -32767),
    4: (">i4", -2147483647),
    5: (">f4", 9.9692099683868690e36),
    6: (">f8", 9.9692099683868690e36),
    7: (">u1", 255),
    8: (">u2", 65535),
    9: (">u4", 4294967295),
    10: (">i8", -9223372036854775806),
    11: (">u8", 18446744073709551614),
}
_DIMENSION, _VARIABLE, _ATTRIBUTE = 0x0A, 0x0B, 0x0C
_STREAMING = 0xFFFFFFFF


@dataclass
class Nc3Var:
    name: str
    dimids: list[int]
    attrs: dict[str, Any]
    nc_type: int
    vsize: int
    begin: int
    shape: tuple[int, ...] = ()
    is_record: bool = False


@dataclass
class Nc3Header:
    version: int
    numrecs: int
    dims: list[tuple[str, int]]
    attrs: dict[str, Any]
    variables: list[Nc3Var] = field(default_factory=list)
    recsize: int = 0


class _Reader:
    def __init__(self, fh: BinaryIO, version: int) -> None:
        self.fh = fh
        self.wide = version == 5  # CDF-5: 64-bit counts

    def read(self, n: int) -> bytes:
        b = self.fh.read(n)
        if len(b) != n:
            raise ValueError("header ends early (truncated file?)")
        return b

    def int32(self) -> int:
        return int(struct.unpack(">i", self.read(4))[0])

    def count(self) -> int:
        return int(struct.unpack(">q", self.read(8))[0]) if self.wide else int(struct.unpack(">I", self.read(4))[0])

    def offset(self, version: int) -> int:
        return (
            int(struct.unpack(">q", self.read(8))[0])
            if version in (2, 5)
            else int(struct.unpack(">I", self.read(4))[0])
        )

    def name(self) -> str:
        n = self.count()
        raw = self.read(n)
        self.read((4 - n % 4) % 4)
        return raw.decode("utf-8", "replace")

    def values(self, nc_type: int, n: int) -> Any:
        if nc_type not in NC3_TYPES:
            raise ValueError(f"unknown nc_type {nc_type}")
        dt = np.dtype(NC3_TYPES[nc_type][0])
        nbytes = n * dt.itemsize
        raw = self.read(nbytes)
        self.read((4 - nbytes % 4) % 4)
        if nc_type == 2:
            return raw.rstrip(b"\x00").decode("utf-8", "replace")
        arr = np.frombuffer(raw, dtype=dt)
        arr = arr.astype(dt.newbyteorder("="))
        return arr[0] if n == 1 else arr

    def attr_list(self) -> dict[str, Any]:
        tag = self.int32()
        n = self.count()
        if tag == 0 and n == 0:
            return {}
        if tag != _ATTRIBUTE:
            raise ValueError(f"expected an attribute list, found tag {tag:#x}")
        out: dict[str, Any] = {}
        for _ in range(n):
            name = self.name()
            nc_type = self.int32()
            out[name] = self.values(nc_type, self.count())
        return out


def read_header(fh: BinaryIO, file_size: int) -> Nc3Header:
    magic = fh.read(4)
    if len(magic) < 4 or magic[:3] != b"CDF" or magic[3] not in (1, 2, 5):
        raise ValueError("not a netCDF3 file")
    version = magic[3]
    r = _Reader(fh, version)
    numrecs = r.count()
    # dimensions
    tag, n = r.int32(), r.count()
    dims: list[tuple[str, int]] = []
    if not (tag == 0 and n == 0):
        if tag != _DIMENSION:
            raise ValueError(f"expected a dimension list, found tag {tag:#x}")
        dims = [(r.name(), r.count()) for _ in range(n)]
    gattrs = r.attr_list()
    tag, n = r.int32(), r.count()
    variables: list[Nc3Var] = []
    if not (tag == 0 and n == 0):
        if tag != _VARIABLE:
            raise ValueError(f"expected a variable list, found tag {tag:#x}")
        for _ in range(n):
            name = r.name()
            ndims = r.count()
            dimids = [r.count() for _ in range(ndims)]
            vattrs = r.attr_list()
            nc_type = r.int32()
            if nc_type not in NC3_TYPES:
                raise ValueError(f"variable {name!r} has unknown type {nc_type}")
            vsize = r.count()
            begin = r.offset(version)
            variables.append(Nc3Var(name, dimids, vattrs, nc_type, vsize, begin))
    record_vars = []
    for v in variables:
        for d in v.dimids:
            if d >= len(dims):
                raise ValueError(f"variable {v.name} refers to dimension {d}, which does not exist")
        v.is_record = bool(v.dimids) and dims[v.dimids[0]][1] == 0
        if v.is_record:
            record_vars.append(v)
    if len(record_vars) == 1:
        v = record_vars[0]
        recsize = (
            int(np.prod([dims[d][1] for d in v.dimids[1:]], dtype=np.int64))
            * np.dtype(NC3_TYPES[v.nc_type][0]).itemsize
        )
    else:
        recsize = sum(v.vsize for v in record_vars)
    if numrecs == _STREAMING and record_vars:
        first = min(v.begin for v in record_vars)
        numrecs = (file_size - first) // recsize if recsize else 0
    elif numrecs == _STREAMING:
        numrecs = 0
    if record_vars and numrecs and min(v.begin for v in record_vars) + numrecs * recsize > file_size + recsize:
        raise ValueError(f"{numrecs} records do not fit in a file of {file_size} bytes (truncated?)")
    for v in variables:
        v.shape = tuple(numrecs if (i == 0 and v.is_record) else dims[d][1] for i, d in enumerate(v.dimids))
    return Nc3Header(version, numrecs, dims, gattrs, variables, recsize)


def _fill_value(attr: Any, default: Any, dt: np.dtype[Any]) -> Any:
    """``_FillValue`` when it is one value of the variable's type, else the netCDF default."""
    if attr is None:
        return default
    if isinstance(attr, str) and dt.kind == "S":
        # a char attribute is read as text (trailing NULs stripped): its one byte, as netCDF4-python
        # gives it ("" is a NUL fill, the default)
        raw = attr.encode("utf-8")
        return np.asarray(raw, dt)[()] if len(raw) == 1 else default
    arr = np.asarray(attr)
    if arr.size != 1 or arr.dtype.kind in "OU" or (arr.dtype.kind == "S" and dt.kind != "S"):
        return default
    try:
        return arr.reshape(()).astype(dt)[()]
    except (TypeError, ValueError):
        return default


def _typed_attrs(attrs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for k, v in attrs.items():
        enc = encode_attr(v)
        if enc is not None:
            out[k] = enc
    return out


@dataclass(frozen=True, slots=True)
class NetCDF3Scanner:
    """Scan one netCDF3 file. ``concat_dim``: the dimension sources will be concatenated along
    (usually the unlimited one); its coordinate's first value orders the sources."""

    concat_dim: str | None = None

    def __call__(self, location: str) -> ScanResult:
        with open_source(location) as (fh, info):
            return self.scan_file(fh, info)

    def scan_file(self, fh: BinaryIO, info: SourceInfo) -> ScanResult:
        """Scan an opened source (a local file or a ranged-read file over a URL)."""
        location = info.location
        try:
            fh.seek(0)
            hdr = read_header(fh, info.size)
            sort_value, sort_last, sort_units = self._coordinate_range(fh, hdr)
        except (ValueError, struct.error) as e:
            raise ScanError(location, f"not a readable netCDF3 file: {e}") from None
        except OSError as e:
            raise ScanError(location, f"cannot read: {e.strerror or e}") from None
        metas: list[ArrayMeta] = []
        names: list[str] = []
        keys: list[np.ndarray[Any, Any]] = []
        offsets: list[np.ndarray[Any, Any]] = []
        lengths: list[np.ndarray[Any, Any]] = []
        for v in hdr.variables:
            dtype_str, default_fill = NC3_TYPES[v.nc_type]
            dt = np.dtype(dtype_str)
            dims = tuple(hdr.dims[d][0] for d in v.dimids)
            attrs = _typed_attrs(v.attrs)
            fill = _fill_value(v.attrs.get("_FillValue"), default_fill, dt)
            reason = (
                f"{len(v.shape)} dimensions (at most {MAX_DIMS} are supported)" if len(v.shape) > MAX_DIMS else None
            )
            if v.is_record:
                chunks = (1, *v.shape[1:])
                n = v.shape[0]
                k = np.zeros((n, len(v.shape)), np.int64)
                k[:, 0] = np.arange(n)
                rec_bytes = int(np.prod(v.shape[1:], dtype=np.int64)) * dt.itemsize
                off = v.begin + np.arange(n, dtype=np.int64) * hdr.recsize
                ln = np.full(n, rec_bytes, np.int64)
            else:
                chunks = tuple(max(s, 1) for s in v.shape)
                nbytes = int(np.prod(v.shape, dtype=np.int64)) * dt.itemsize
                n = 1 if nbytes > 0 else 0
                k = np.zeros((n, len(v.shape)), np.int64)
                off = np.full(n, v.begin, np.int64)
                ln = np.full(n, nbytes, np.int64)
            if n and reason is None:
                if int((off + ln).max()) > info.size:
                    raise ScanError(location, f"variable {v.name!r} extends past the end of the file (truncated?)")
                names.append(v.name)
                keys.append(k)
                offsets.append(off)
                lengths.append(ln)
            metas.append(
                ArrayMeta(
                    name=v.name,
                    dims=dims,
                    shape=v.shape,
                    chunks=chunks,
                    dtype=dt.str,
                    fill_value=encode_fill(fill, dt),
                    attrs=attrs,
                    status="ok" if reason is None else "unsupported",
                    reason=reason,
                )
            )
        return ScanResult(
            source=info,
            arrays=tuple(metas),
            refs=_table(names, keys, offsets, lengths),
            sort_value=sort_value,
            sort_last=sort_last,
            sort_units=sort_units,
            groups={"": _typed_attrs(hdr.attrs)},
            format="netcdf3",
        )

    def _coordinate_range(self, fh: BinaryIO, hdr: Nc3Header) -> tuple[float | None, float | None, str | None]:
        """First and last values of the coordinate variable ``concat_dim`` (CF times as Unix
        seconds) and their units."""
        if self.concat_dim is None:
            return None, None, None
        v = next((x for x in hdr.variables if x.name == self.concat_dim and len(x.shape) == 1), None)
        if v is None or not v.shape[0] or v.nc_type == 2:
            return None, None, None
        dt = np.dtype(NC3_TYPES[v.nc_type][0])
        step = hdr.recsize if v.is_record else dt.itemsize
        found: list[float] = []
        for at in (v.begin, v.begin + (v.shape[0] - 1) * step):
            fh.seek(at)
            raw = fh.read(dt.itemsize)
            if len(raw) != dt.itemsize:
                return None, None, None
            found.append(float(np.frombuffer(raw, dt)[0]))
        first, last = found
        units = v.attrs.get("units")
        if isinstance(units, str):
            cal = v.attrs.get("calendar", "standard")
            cal = cal if isinstance(cal, str) else "standard"
            s0, s1 = cf_seconds(first, units, cal), cf_seconds(last, units, cal)
            if s0 is not None and s1 is not None:
                return s0, s1, "seconds since 1970-01-01"
            return first, last, units
        return first, last, None


def _table(
    names: list[str],
    keys: list[np.ndarray[Any, Any]],
    offsets: list[np.ndarray[Any, Any]],
    lengths: list[np.ndarray[Any, Any]],
) -> pa.Table:
    if not names:
        return CHUNK_BATCH_SCHEMA.empty_table()
    counts = np.array([len(k) for k in keys], np.int64)
    n = int(counts.sum())
    all_keys = np.full((n, MAX_DIMS), NO_DIM, np.int32)
    at = 0
    for k in keys:
        all_keys[at : at + len(k), : k.shape[1]] = k
        at += len(k)
    cols: dict[str, Any] = {
        "array": pa.array(names, pa.string()).take(pa.array(np.repeat(np.arange(len(names)), counts)))
    }
    for i, c in enumerate(SOURCE_KEY_COLUMNS):
        cols[c] = pa.array(all_keys[:, i])
    cols["offset"] = pa.array(np.concatenate(offsets), pa.int64())
    cols["length"] = pa.array(np.concatenate(lengths), pa.int64())
    cols["filter_mask"] = pa.array(np.zeros(n, np.int32))
    cols["inline"] = pa.nulls(n, pa.large_binary())
    return pa.table(cols, schema=CHUNK_BATCH_SCHEMA)

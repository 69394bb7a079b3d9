"""GRIB1 / GRIB2 scanner: every message is one chunk (its byte range in the file), grouped into
arrays the way cfgrib groups them (see ``design/formats.md``, "GRIB").

Messages are framed here from their section 0 (``GRIB``, edition, total length) and must end in
``7777``; ecCodes reads each message's keys (nothing is decoded but the grid's coordinates).
An array is the messages of one parameter (``paramId``) on one level type, step type, data type
and grid; its dimensions are cfgrib's: ``number``, ``time``, ``step``, the level (named by its
``typeOfLevel``), each only when it has several values (else a scalar coordinate), then the
grid's ``latitude``/``longitude`` (regular_ll, regular_gg), ``y``/``x`` (lambert and other
projected grids, with 2-D latitude/longitude) or ``values`` (reduced Gaussian, spherical
harmonics: the 1-D values ecCodes gives). A combination no message holds is an absent chunk
(NaN). Values are float32 as cfgrib gives them, missing points NaN.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from .._grib import CODEC_ID, GRID_2D, MISSING, grid_order, import_eccodes, to_grid_order
from .._values import encode_attr, encode_fill
from ..errors import ScanError, UnsupportedArrayError
from ._sources import GRIB_EXTENSIONS, open_source
from ._types import ArrayMeta, ScanResult, SourceInfo

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["GRIB_EXTENSIONS", "GribScanner", "frame_messages", "message_index"]

_DTYPE = np.dtype("<f4")
_EPOCH = dt.datetime(1970, 1, 1)
_STEP_UNIT_SECONDS = {0: 60, 1: 3600, 2: 86400, 10: 10800, 11: 21600, 12: 43200, 13: 1, 14: 900, 15: 1800}
"""ecCodes' stepUnits code -> seconds (cfgrib's table)."""

_DIM_GRIDS = frozenset({"regular_ll", "regular_gg"})
"""Grids with 1-D ``latitude``/``longitude`` dimensions; the others of ``GRID_2D`` have ``y``/``x``."""
_DECREASING = frozenset({"isobaricInhPa", "isobaricInPa"})

_VAR_KEYS = ("paramId", "dataType", "numberOfPoints", "typeOfLevel", "stepUnits", "stepType", "gridType",
             "uvRelativeToGrid")  # fmt: skip
"""Keys cfgrib requires unique per variable (``GRIB_`` attributes)."""
_EXTRA_KEYS = ("shortName", "units", "name", "cfName", "cfVarName", "totalNumber", "numberOfDirections",
               "numberOfFrequencies", "NV", "gridDefinitionDescription")  # fmt: skip
_GRID_KEYS: dict[str, tuple[str, ...]] = {
    "regular_ll": ("Nx", "iDirectionIncrementInDegrees", "iScansNegatively", "longitudeOfFirstGridPointInDegrees",
                   "longitudeOfLastGridPointInDegrees", "Ny", "jDirectionIncrementInDegrees", "jPointsAreConsecutive",
                   "jScansPositively", "latitudeOfFirstGridPointInDegrees", "latitudeOfLastGridPointInDegrees"),
    "regular_gg": ("N", "Ni", "Nj", "iDirectionIncrementInDegrees", "iScansNegatively", "jScansPositively",
                   "jPointsAreConsecutive", "longitudeOfFirstGridPointInDegrees", "longitudeOfLastGridPointInDegrees",
                   "latitudeOfFirstGridPointInDegrees", "latitudeOfLastGridPointInDegrees"),
    "lambert": ("LaDInDegrees", "LoVInDegrees", "iScansNegatively", "jPointsAreConsecutive", "jScansPositively",
                "latitudeOfFirstGridPointInDegrees", "latitudeOfSouthernPoleInDegrees",
                "longitudeOfFirstGridPointInDegrees", "longitudeOfSouthernPoleInDegrees", "DyInMetres", "DxInMetres",
                "Latin2InDegrees", "Latin1InDegrees", "Ny", "Nx"),
    "reduced_gg": ("N",),
    "sh": ("M", "K", "J"),
}  # fmt: skip
"""cfgrib's grid keys kept as ``GRIB_`` attributes (long arrays such as ``pl`` left out)."""
_GLOBAL_KEYS = ("edition", "centre", "centreDescription", "subCentre")

_COORD_ATTRS: dict[str, dict[str, str]] = {
    "latitude": {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude"},
    "longitude": {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude"},
    "number": {"units": "1", "standard_name": "realization", "long_name": "ensemble member numerical id"},
    "time": {"units": "seconds since 1970-01-01T00:00:00", "calendar": "proleptic_gregorian",
             "standard_name": "forecast_reference_time", "long_name": "initial time of forecast"},
    "step": {"units": "hours", "standard_name": "forecast_period", "long_name": "time since forecast_reference_time",
             "dtype": "timedelta64[ns]"},
    "valid_time": {"units": "seconds since 1970-01-01T00:00:00", "calendar": "proleptic_gregorian",
                   "standard_name": "time", "long_name": "time"},
    "isobaricInhPa": {"units": "hPa", "positive": "down", "stored_direction": "decreasing",
                      "standard_name": "air_pressure", "long_name": "pressure"},
    "isobaricInPa": {"units": "Pa", "positive": "down", "stored_direction": "decreasing",
                     "standard_name": "air_pressure", "long_name": "pressure"},
    "hybrid": {"units": "1", "positive": "down", "long_name": "hybrid level",
               "standard_name": "atmosphere_hybrid_sigma_pressure_coordinate"},
    "heightAboveGround": {"units": "m", "positive": "up", "long_name": "height above the surface",
                          "standard_name": "height"},
    "depthBelowLand": {"units": "m", "positive": "down", "long_name": "soil depth", "standard_name": "depth"},
    "depthBelowLandLayer": {"units": "m", "positive": "down", "long_name": "soil depth", "standard_name": "depth"},
    "isobaricLayer": {"units": "Pa", "positive": "down", "standard_name": "air_pressure", "long_name": "pressure"},
}  # fmt: skip
"""Coordinate attributes as cfgrib writes them (CF)."""


# ---------------------------------------------------------------------------- framing
def frame_messages(fh: BinaryIO, location: str, size: int) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of every GRIB message in the file, in order. Bytes before the first and
    between messages (a WMO bulletin or EBCDIC header, padding) are skipped, as ecCodes skips
    them: a message starts at ``GRIB`` followed by edition 1 or 2. A message whose length runs
    past the file or does not end in ``7777`` raises ``ScanError`` naming its offset."""
    pos = 0
    n = 0
    while pos < size:
        pos = find_message(fh, pos, size)
        if pos < 0:
            break
        fh.seek(pos)
        head = fh.read(16)
        if len(head) < 8:
            raise ScanError(location, f"GRIB message at byte {pos} is truncated (section 0 incomplete)")
        edition = head[7]
        if edition == 1:
            length = int.from_bytes(head[4:7], "big")
            if length & 0x800000:
                raise ScanError(location, f"GRIB1 message at byte {pos}: large-message lengths are not supported")
        elif edition == 2:
            if len(head) < 16:
                raise ScanError(location, f"GRIB2 message at byte {pos} is truncated (section 0 incomplete)")
            length = int.from_bytes(head[8:16], "big")
        end = pos + length
        if length < 16 or end > size:
            raise ScanError(location, f"GRIB message {n} at byte {pos}: wrong message length {length} "
                                      f"(past the end of the {size}-byte file)")  # fmt: skip
        fh.seek(pos)
        msg = fh.read(length)
        if len(msg) != length or msg[-4:] != b"7777":
            raise ScanError(location, f"GRIB message {n} at byte {pos}: wrong message length {length} "
                                      "(no '7777' end marker there)")  # fmt: skip
        if edition == 2 and (fields := _grib2_fields(msg)) != 1:
            raise ScanError(location, f"GRIB2 message {n} at byte {pos}: " + (
                f"holds {fields} fields (multi-field messages are not supported: one chunk decodes one field)"
                if fields > 1 else "its sections do not add up to its length"))  # fmt: skip
        yield pos, msg
        n += 1
        pos = end
    if n == 0:
        raise ScanError(location, "holds no GRIB message")


def _grib2_fields(msg: bytes) -> int:
    """How many fields (data sections 7) a GRIB2 message holds; 0 when its sections do not
    add up to its length."""
    pos, end, fields = 16, len(msg) - 4, 0
    while pos + 5 <= end:
        n = int.from_bytes(msg[pos : pos + 4], "big")
        if n < 5:
            return 0
        fields += msg[pos + 4] == 7
        pos += n
    return fields if pos == end else 0


HEADER_LIMIT = 1 << 20
"""How far into a file sniffing looks for its first GRIB message (headers before it: a WMO
bulletin heading of some 20-40 bytes, EBCDIC tape headers of a few kB)."""


def find_message(fh: BinaryIO, pos: int, size: int, block: int = 1 << 16) -> int:
    """Offset of the next GRIB message start (``GRIB``, then edition 1 or 2 at its 8th byte) at
    or after ``pos`` and before ``size``, -1 if none; a ``GRIB`` in the file's last 7 bytes is one
    too (a truncated message, named by the framing). Reads ``block`` bytes at a time."""
    while pos < size:
        fh.seek(pos)
        want = min(block, size - pos) + 7
        buf = fh.read(want)
        at_end = len(buf) < want
        i = buf.find(b"GRIB")
        while i >= 0:
            if i + 8 > len(buf):
                if at_end:
                    return pos + i
                break
            if buf[i + 7] in (1, 2):
                return pos + i
            i = buf.find(b"GRIB", i + 1)
        if at_end or len(buf) <= 7:
            return -1
        pos += len(buf) - 7
    return -1


# ---------------------------------------------------------------------------- keys
@dataclass(slots=True)
class _Msg:
    offset: int
    length: int
    header: dict[str, Any]  # number, time, step, level (None = undefined)


def _get(ec: Any, h: Any, key: str, ktype: Any = None) -> Any:
    """A scalar key's value (``ktype``: int, float or str; None: its native type); None when the
    message does not define it, or ecCodes says ``undef``/``unknown``."""
    try:
        if ktype is int:
            v: Any = ec.codes_get_long(h, key)
        elif ktype is float:
            v = ec.codes_get_double(h, key)
        elif ktype is str:
            v = ec.codes_get_string(h, key)
        else:
            if ec.codes_get_size(h, key) > 1:
                return None
            v = ec.codes_get(h, key)
    except ec.GribInternalError:  # KeyValueNotFoundError and the other ecCodes errors
        return None
    return None if isinstance(v, str) and v in ("undef", "unknown") else v


def _get_raw(ec: Any, h: Any, key: str) -> Any:
    """A scalar key's native value as cfgrib's ``read_data_var_attrs`` reads it (``unknown``
    kept); None when undefined or an array."""
    try:
        if ec.codes_get_size(h, key) > 1:
            return None
        return ec.codes_get(h, key)
    except ec.GribInternalError:
        return None


def _seconds(date: int, time: int, location: str, offset: int) -> int:
    """Seconds since 1970 of a message's reference time (``dataDate`` YYYYMMDD, ``dataTime``
    hhmm); a date that is none (a damaged message: year 0, month 13...) is a ``ScanError``."""
    try:
        when = dt.datetime(date // 10000, date // 100 % 100, date % 100, time // 100, time % 100)
    except ValueError:
        raise ScanError(location, f"GRIB message at byte {offset}: its reference time is no date "
                                  f"(dataDate {date}, dataTime {time})") from None  # fmt: skip
    return int((when - _EPOCH).total_seconds())


def _step_hours(ec: Any, h: Any) -> float | None:
    unit = _get(ec, h, "stepUnits", int)
    end = _get(ec, h, "endStep", int)
    if unit is None or end is None or unit not in _STEP_UNIT_SECONDS:
        return None
    return int(end) * _STEP_UNIT_SECONDS[int(unit)] / 3600.0


@dataclass(slots=True)
class _Group:
    key: tuple[Any, ...]
    attrs: dict[str, Any]
    grid: dict[str, Any]
    messages: list[_Msg] = field(default_factory=list)


def _identity(msg: bytes) -> bytes | None:
    """The bytes a message's group key depends on: everything ecCodes' concepts (paramId,
    typeOfLevel, stepType, dataType) and the grid read, with the reference time (and in GRIB2
    the forecast time of product templates 4.0-4.15) blanked. Messages of one parameter at other
    times or steps share it, so ecCodes evaluates those concepts once. None: not sure (the
    message's keys are read from ecCodes)."""
    if msg[7] == 1:
        n1 = int.from_bytes(msg[8:11], "big")
        pds = bytearray(msg[8 : 8 + n1])
        if n1 < 28 or len(pds) != n1:
            return None
        pds[12:17] = bytes(5)  # octets 13-17: year of century, month, day, hour, minute
        pds[24] = 0  # octet 25: century
        gds = b""
        if pds[7] & 0x80:
            at = 8 + n1
            gds = msg[at : at + int.from_bytes(msg[at : at + 3], "big")]
        return b"1" + bytes(pds) + gds
    if msg[7] != 2:
        return None
    out = [b"2", msg[6:7]]  # discipline
    pos, end = 16, len(msg) - 4
    while pos + 5 <= end:
        n, sec = int.from_bytes(msg[pos : pos + 4], "big"), msg[pos + 4]
        if n < 5:
            return None
        part = bytearray(msg[pos : pos + n])
        if sec == 1 and n >= 19:
            part[12:19] = bytes(7)  # octets 13-19: reference time
        elif sec == 4:
            if n < 22 or int.from_bytes(part[7:9], "big") > 15:
                return None
            part[17:22] = bytes(5)  # octets 18-22: unit and forecast time
        if sec in (1, 2, 3, 4):
            out.append(bytes(part))
        if sec == 4:
            return b"".join(out)
        pos += n
    return None


_GROUP_KEYS = (("paramId", int), ("typeOfLevel", str), ("stepType", str), ("dataType", str), ("gridType", str),
               ("md5GridSection", str), ("numberOfPoints", int))  # fmt: skip
"""The keys that make a message's group (``_KEY_FIELDS`` first, then the grid's)."""


def _handle(ec: Any, msg: bytes, offset: int, location: str, *, headers_only: bool) -> Any:
    """An ecCodes handle on a message; ``headers_only``: ecCodes' partial message, which parses
    the sections but not the data (it lacks some computed keys, such as GRIB1's gridType)."""
    try:
        if headers_only:
            from gribapi import grib_new_from_message

            return grib_new_from_message(msg, partial=True)
        return ec.codes_new_from_message(msg)
    except Exception as e:  # ecCodes raises its own error classes
        raise ScanError(location, f"GRIB message at byte {offset}: ecCodes cannot read it ({e})") from None


def message_index(fh: BinaryIO, location: str, size: int) -> tuple[list[_Group], dict[str, Any]]:
    """The file's messages grouped into arrays (before naming), and its global attributes
    (cfgrib's, when every array agrees on them)."""
    ec = import_eccodes()
    groups: dict[tuple[Any, ...], _Group] = {}
    known: dict[bytes, tuple[Any, ...]] = {}  # a message's identity -> its group key
    grids: dict[tuple[Any, ...], dict[str, Any]] = {}  # (gridType, md5GridSection, numberOfPoints) -> grid
    global_values: dict[str, set[Any]] = {k: set() for k in _GLOBAL_KEYS}
    for offset, msg in frame_messages(fh, location, size):
        h = _handle(ec, msg, offset, location, headers_only=True)
        try:  # the values along the header dimensions: cheap keys, read for every message
            date, time = _get(ec, h, "dataDate", int), _get(ec, h, "dataTime", int)
            header = {
                "number": _get(ec, h, "number", int),
                "time": _seconds(int(date), int(time), location, offset)
                if date is not None and time is not None
                else None,
                "step": _step_hours(ec, h),
                "level": _get(ec, h, "level", float),
            }
        finally:
            ec.codes_release(h)
        ident = _identity(msg)
        key = known.get(ident) if ident is not None else None
        g = groups.get(key) if key is not None else None
        if g is None:  # ecCodes' concepts (paramId, typeOfLevel...) cost ~0.5 ms: once per identity
            full = _handle(ec, msg, offset, location, headers_only=False)
            try:
                key = tuple(_get(ec, full, k, t) for k, t in _GROUP_KEYS)
                if key[-1] is None:  # numberOfPoints: sections 3-7 missing or damaged
                    raise ScanError(location, f"GRIB message at byte {offset}: ecCodes reads no grid in it")
                _check_grid(ec, full, int(key[-1]), location, offset)
                if ident is not None:
                    known[ident] = key
                g = groups.get(key)
                if g is None:  # the first message of an array: its attributes and grid
                    grid = grids.get(key[len(_KEY_FIELDS):])  # one grid, many parameters: coordinates once
                    attrs, grid = _var_attrs(ec, full, _Where(location, offset, len(msg)), grid)
                    g = groups[key] = _Group(key, attrs, grids.setdefault(key[len(_KEY_FIELDS):], grid))
                    for k in _GLOBAL_KEYS:
                        global_values[k].add(_get(ec, full, k))
            finally:
                ec.codes_release(full)
        g.messages.append(_Msg(offset, len(msg), header))
    glob: dict[str, Any] = {}
    for k in _GLOBAL_KEYS:
        vals = global_values[k] - {None}
        if len(vals) == 1 and len(global_values[k]) == 1:
            glob[f"GRIB_{k}"] = next(iter(vals))
    glob["Conventions"] = "CF-1.7"
    if "GRIB_centreDescription" in glob:
        glob["institution"] = glob["GRIB_centreDescription"]
    return list(groups.values()), glob


MAX_POINTS = 1 << 28
"""The most grid points one message may declare (decoding it takes 12 bytes a point)."""
COORD_POINTS = 1 << 24
"""Per-point coordinates (and distinct ones) are computed at scan time for up to this many
points, or as many as the message has bits: past that a tiny message could make the scan
allocate gigabytes for a grid it cannot hold (a constant field still can: it is refused)."""


def _check_grid(ec: Any, h: Any, points: int, location: str, offset: int) -> None:
    """Refuse a message whose declared grid no message could hold (a damaged or hostile
    header: ``Ni`` = 0xFFFF, the GRIB1 "missing"), before anything is allocated for it."""
    where = f"GRIB message at byte {offset}"
    if points <= 0 or points > MAX_POINTS:
        raise ScanError(location, f"{where} declares {points} grid points (refstore reads 1 to {MAX_POINTS})")
    gtype = _get(ec, h, "gridType", str)
    ny, nx = _get(ec, h, "Ny", int), _get(ec, h, "Nx", int)
    if gtype in GRID_2D and ny is not None and nx is not None and ny * nx != points:
        raise ScanError(location, f"{where}: its {gtype} grid of {nx} x {ny} points does not have the "
                                  f"{points} points it declares")  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Where:
    location: str
    offset: int
    length: int


def _budget(count: int, where: _Where) -> None:
    """Refuse computing ``count`` coordinates for a message of ``where.length`` bytes (``COORD_POINTS``)."""
    if count > max(COORD_POINTS, 8 * where.length):
        raise ScanError(where.location, f"GRIB message at byte {where.offset}: its grid of {count} points is more "
                        f"than its {where.length} bytes can hold (refstore computes coordinates for at most "
                        f"{COORD_POINTS} points, or one a bit of the message)")  # fmt: skip


def _var_attrs(ec: Any, h: Any, where: _Where, grid: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The data variable's attributes (cfgrib's) and its grid description from the first message
    (``grid``: the one already made for the same grid section)."""
    var = {k: _get(ec, h, k) for k in _VAR_KEYS}
    attrs: dict[str, Any] = {f"GRIB_{k}": v for k, v in var.items() if v is not None}
    grid_type = var["gridType"]
    for k in sorted((*_EXTRA_KEYS, *_GRID_KEYS.get(grid_type, ()))):
        v = _get_raw(ec, h, k)
        if v is not None:
            attrs[f"GRIB_{k}"] = v
    attrs["GRIB_missingValue"] = MISSING
    if "GRIB_stepUnits" in attrs:  # cfgrib's computed stepUnits: "we always index steps in hours"
        attrs["GRIB_stepUnits"] = 1
    attrs["long_name"] = attrs.get("GRIB_name", f"original GRIB paramId: {var['paramId']}")
    attrs["units"] = attrs.get("GRIB_units", "1")
    if "GRIB_cfName" in attrs:
        attrs["standard_name"] = attrs["GRIB_cfName"]
    return attrs, grid if grid is not None else _grid(ec, h, grid_type, int(var["numberOfPoints"]), where)


def _grid(ec: Any, h: Any, grid_type: str, points: int, where: _Where) -> dict[str, Any]:
    """The grid of a message: its type and points; ``ny``, ``nx`` for grids of rows and columns,
    with 1-D ``lat``/``lon`` (regular grids) or 2-D ``lat2``/``lon2``; 1-D ``lat2``/``lon2`` for
    the others where ecCodes gives them. Coordinates are in the decoded values' order
    (``_grib.to_grid_order``): ecCodes' own per-point ones, arranged as the values are (its
    per-point coordinates ignore ``alternativeRowScanning``: every row is labelled as the first)."""
    grid: dict[str, Any] = {"type": grid_type, "points": points}
    ny, nx = _get(ec, h, "Ny", int), _get(ec, h, "Nx", int)
    if grid_type == "sh":
        return grid
    if grid_type not in GRID_2D or not ny or not nx:
        _budget(points, where)
        coords = _per_point(ec, h)
        if coords is not None and coords[0].size == points:
            grid["lat2"], grid["lon2"] = coords
        return grid
    grid["ny"], grid["nx"] = ny, nx
    order = grid_order(ec, h)
    if grid_type in _DIM_GRIDS and order is None and not _get(ec, h, "iScansNegatively", int):
        _budget(ny + nx, where)  # rows in one direction, west to east: cfgrib's distinct coordinates
        grid["lat"] = np.asarray(ec.codes_get_array(h, "distinctLatitudes"), "<f8")
        grid["lon"] = np.asarray(ec.codes_get_array(h, "distinctLongitudes"), "<f8")
        return grid
    _budget(points, where)
    coords = _per_point(ec, h)
    if coords is None or coords[0].size != points:  # (y, x) without coordinates, as cfgrib gives it
        if grid_type in _DIM_GRIDS:
            grid["irregular"] = "ecCodes gives no per-point coordinates for this grid"
        return grid
    lat, lon = coords
    if order is not None:  # ecCodes' per-point coordinates run in the stored order, every row one way
        lat, lon = (to_grid_order(a, ny, nx, order[2], False) for a in (lat, lon))
    lat, lon = lat.reshape(ny, nx), lon.reshape(ny, nx)
    if grid_type not in _DIM_GRIDS:
        grid["lat2"], grid["lon2"] = lat, lon
    elif (lat == lat[:, :1]).all() and (lon == lon[:1, :]).all():
        grid["lat"], grid["lon"] = lat[:, 0].copy(), lon[0].copy()
    else:
        grid["irregular"] = "ecCodes' per-point coordinates of this grid are not rows and columns"
    return grid


def _per_point(ec: Any, h: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """ecCodes' latitude and longitude of every point (stored order); None without a geoiterator."""
    try:
        return (np.asarray(ec.codes_get_array(h, "latitudes"), "<f8"),
                np.asarray(ec.codes_get_array(h, "longitudes"), "<f8"))  # fmt: skip
    except Exception:  # no geoiterator for this grid: no coordinates
        return None


# ---------------------------------------------------------------------------- arrays
@dataclass(frozen=True, slots=True)
class _Coord:
    name: str
    dims: tuple[str, ...]
    values: np.ndarray[Any, Any]
    attrs: dict[str, Any]


class _Coords:
    """Coordinates of the file by content: the same name with other values gets ``_1``, ``_2``..."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[_Coord]] = {}

    def add(self, base: str, dims: tuple[str, ...] | None, values: np.ndarray[Any, Any], attrs: dict[str, Any]) -> str:
        """The name of the coordinate ``base`` with these values, added if new; ``dims`` None: it
        is its own dimension (named as it is: ``isobaricInhPa_1`` along ``isobaricInhPa_1``)."""
        found = self.by_name.setdefault(base, [])
        for c in found:
            same = c.values.dtype == values.dtype and c.values.shape == values.shape
            if same and np.array_equal(c.values, values) and (dims is None or c.dims == dims):
                return c.name
        name = base if not found else f"{base}_{len(found)}"
        found.append(_Coord(name, (name,) if dims is None else dims, values, attrs))
        return name

    def all(self) -> list[_Coord]:
        return [c for cs in self.by_name.values() for c in cs]


_KEY_FIELDS = ("paramId", "typeOfLevel", "stepType", "dataType")
"""The first fields of a group's key (``message_index``); the rest describe its grid."""


def _names(groups: list[_Group]) -> list[str]:
    """cfgrib's variable names (cfVarName unless ``unknown``, else shortName, ``unknown`` included,
    else ``paramId_N``, also when the name is a coordinate's); when several groups
    share one, each gets the key fields that tell them apart as suffixes (``t_hybrid``,
    ``t_isobaricInhPa``; ``_grid0``, ``_grid1`` when only the grids differ)."""
    taken = {"number", "time", "step", "valid_time", "latitude", "longitude", "values", "y", "x"}
    taken |= {str(g.key[1]) for g in groups}  # level coordinates are named by their type
    base = []
    for g in groups:
        a = g.attrs
        cf_name = a.get("GRIB_cfVarName")
        name = str(cf_name if cf_name not in (None, "", "unknown", "undef") else a.get("GRIB_shortName") or "")
        base.append(name if name and name not in taken else f"paramId_{a.get('GRIB_paramId')}")
    out = list(base)
    for name in dict.fromkeys(base):  # in order of appearance
        idx = [i for i, b in enumerate(base) if b == name]
        if len(idx) < 2:
            continue
        differ = [j for j in range(len(_KEY_FIELDS)) if len({groups[i].key[j] for i in idx}) > 1]
        grids = sorted({groups[i].key[len(_KEY_FIELDS):] for i in idx}, key=str)
        for i in idx:
            parts = [str(groups[i].key[j]) for j in differ]
            if len(grids) > 1:
                parts.append(f"grid{grids.index(groups[i].key[len(_KEY_FIELDS):])}")
            out[i] = "_".join([name, *parts])
    return out


@dataclass(frozen=True, slots=True)
class GribScanner:
    """Scan one GRIB1/GRIB2 file (see the module docstring).

    ``concat_dim``: a header dimension (``time``, ``step``, ``number`` or a level type such as
    ``isobaricInhPa``) that every array holding it keeps as a dimension even with one value, so
    a series of files concatenates along it; the source's sort value is its first value.
    """

    concat_dim: str | None = None

    def __call__(self, location: str) -> ScanResult:
        with open_source(location) as (fh, info):
            return self.scan_file(fh, info)

    def scan_file(self, fh: BinaryIO, info: SourceInfo) -> ScanResult:
        from .hdf5 import _chunk_table, _Chunks

        try:
            groups, glob = message_index(fh, info.location, info.size)
        except UnsupportedArrayError as e:
            raise ScanError(info.location, str(e)) from None
        except OSError as e:
            raise ScanError(info.location, f"cannot read: {e.strerror or e}") from None
        coords = _Coords()
        metas: list[ArrayMeta] = []
        parts: list[_Chunks] = []
        sort: list[float] = []
        for name, g in zip(_names(groups), groups, strict=True):
            meta, chunks, first = self._array(name, g, coords)
            metas.append(meta)
            if chunks is not None:
                parts.append(chunks)
            if first is not None:
                sort.append(first)
        for c in coords.all():
            chunk = tuple(1 if d == self.concat_dim else n for d, n in zip(c.dims, c.values.shape, strict=True))
            meta = ArrayMeta(
                name=c.name, dims=c.dims, shape=tuple(int(s) for s in c.values.shape), chunks=chunk,
                dtype=c.values.dtype.str, fill_value=None,
                attrs={k: enc for k, v in c.attrs.items() if (enc := encode_attr(v)) is not None},
            )  # fmt: skip
            metas.append(meta)
            grid = [-(-s // k) for s, k in zip(c.values.shape, chunk, strict=True)]
            keys = (np.stack(np.unravel_index(np.arange(int(np.prod(grid))), grid), axis=1).astype(np.int64)
                    if grid else np.zeros((1, 0), np.int64))  # fmt: skip
            blobs = [c.values[tuple(slice(k * n, (k + 1) * n) for k, n in zip(key, chunk, strict=True))].tobytes()
                     for key in keys.tolist()]  # fmt: skip  # 0-d: the one key () gives values[()]
            parts.append(_Chunks(c.name, keys, inline=blobs))
        glob["coordinates"] = " ".join(c.name for c in coords.all())  # coordinates even where no array names them
        units = {"time": "seconds since 1970-01-01", "step": "hours"}.get(self.concat_dim or "")
        return ScanResult(
            source=info,
            arrays=tuple(metas),
            refs=_chunk_table(parts),
            sort_value=min(sort) if sort else None,
            sort_last=max(sort) if sort else None,
            sort_units=units if sort else None,
            groups={"": {k: enc for k, v in glob.items() if (enc := encode_attr(v)) is not None}},
            format="grib",
        )

    def _array(self, name: str, g: _Group, coords: _Coords) -> tuple[ArrayMeta, Any, float | None]:
        from .hdf5 import _Chunks

        level_type = str(g.attrs.get("GRIB_typeOfLevel", "level"))
        header_dims: list[str] = []
        header_values: list[np.ndarray[Any, Any]] = []
        header_keys: list[str] = []
        coord_names: list[str] = []
        scalars: dict[str, Any] = {}
        first: float | None = None
        for key in ("number", "time", "step", "level"):
            vals = [m.header[key] for m in g.messages]
            if any(v is None for v in vals):
                continue
            dim = level_type if key == "level" else key
            dtype = np.dtype("<i8") if key in ("number", "time") else np.dtype("<f8")
            uniq = np.array(sorted(set(vals), reverse=dim in _DECREASING), dtype)
            attrs = {"long_name": f"original GRIB coordinate for key: {key}({dim})", "units": "1",
                     **_COORD_ATTRS.get(dim, {})}  # fmt: skip
            if dim == self.concat_dim:
                first = float(uniq.min())
            if len(uniq) > 1 or dim == self.concat_dim:
                cname = coords.add(dim, None, uniq, attrs)
                header_dims.append(cname)
                header_values.append(uniq)
                header_keys.append(key)
            else:
                cname = coords.add(dim, (), uniq.reshape(()), attrs)
                scalars[key] = uniq[0]
            coord_names.append(cname)
        grid = g.grid
        gtype = grid["type"]
        reason: str | None = None
        lat_lon: list[str] = []
        if "ny" in grid:
            ny, nx = int(grid["ny"]), int(grid["nx"])
            geo_shape: tuple[int, ...] = (ny, nx)
            reason = grid.get("irregular")
            if gtype in _DIM_GRIDS and reason is None:
                lat = coords.add("latitude", None, grid["lat"], _lat_attrs(grid["lat"]))
                lon = coords.add("longitude", None, grid["lon"], _COORD_ATTRS["longitude"])
                geo_dims: tuple[str, ...] = (lat, lon)
                lat_lon = [lat, lon]
            elif gtype in _DIM_GRIDS:
                geo_dims = ("latitude", "longitude")
            else:
                geo_dims = ("y", "x")
                if "lat2" in grid and grid["lat2"].size == ny * nx:
                    lat_lon = [
                        coords.add("latitude", geo_dims, grid["lat2"].reshape(ny, nx), _COORD_ATTRS["latitude"]),
                        coords.add("longitude", geo_dims, grid["lon2"].reshape(ny, nx), _COORD_ATTRS["longitude"]),
                    ]  # fmt: skip
        else:
            geo_shape = (int(grid["points"]),)
            geo_dims = ("values",)
            if "lat2" in grid and grid["lat2"].size == geo_shape[0]:
                lat_lon = [
                    coords.add("latitude", geo_dims, grid["lat2"], _COORD_ATTRS["latitude"]),
                    coords.add("longitude", geo_dims, grid["lon2"], _COORD_ATTRS["longitude"]),
                ]
        if all(k in scalars or k in header_keys for k in ("time", "step")):  # as cfgrib: both known
            coord_names.append(self._valid_time(header_keys, header_dims, header_values, scalars, coords))
        attrs = dict(g.attrs)
        attrs["coordinates"] = " ".join([*coord_names, *lat_lon])
        shape = (*(len(v) for v in header_values), *geo_shape)  # 6 dimensions at most: fits MAX_DIMS (8)
        chunks = (*(1 for _ in header_values), *geo_shape)
        dims = (*header_dims, *geo_dims)
        meta = ArrayMeta(
            name=name, dims=dims, shape=shape, chunks=chunks, dtype=_DTYPE.str,
            fill_value=encode_fill(np.float32(np.nan), _DTYPE), codecs=({"id": CODEC_ID},),
            attrs={k: enc for k, v in attrs.items() if (enc := encode_attr(v)) is not None},
            status="ok" if reason is None else "unsupported", reason=reason,
        )  # fmt: skip
        if reason is not None:
            return meta, None, first
        index = [{v: i for i, v in enumerate(vals.tolist())} for vals in header_values]
        seen: set[tuple[int, ...]] = set()
        keys: list[tuple[int, ...]] = []
        offsets: list[int] = []
        lengths: list[int] = []
        for m in g.messages:  # the first message of a combination wins, as in cfgrib
            k = tuple(ix[m.header[key]] for ix, key in zip(index, header_keys, strict=True))
            if k in seen:
                continue
            seen.add(k)
            keys.append((*k, *(0 for _ in geo_shape)))
            offsets.append(m.offset)
            lengths.append(m.length)
        karr = np.asarray(keys, np.int64).reshape(len(keys), len(shape))
        order = np.lexsort(karr.T[::-1])  # a group has one message at least
        return meta, _Chunks(name, karr[order], np.asarray(offsets, np.int64)[order],
                             np.asarray(lengths, np.int64)[order]), first  # fmt: skip

    @staticmethod
    def _valid_time(header_keys: list[str], header_dims: list[str], header_values: list[np.ndarray[Any, Any]],
                    scalars: dict[str, Any], coords: _Coords) -> str:  # fmt: skip
        """cfgrib's ``valid_time``: time + step (both known), over whichever of the two are dimensions."""
        def part(key: str) -> tuple[np.ndarray[Any, Any], str | None]:
            if key in header_keys:
                i = header_keys.index(key)
                return header_values[i].astype("<f8"), header_dims[i]
            return np.asarray(float(scalars[key]), "<f8"), None

        t, tdim = part("time")
        s, sdim = part("step")
        s = s * 3600
        dims: tuple[str, ...] = tuple(d for d in (tdim, sdim) if d)
        values = t[:, None] + s[None, :] if tdim and sdim else t + s
        return coords.add("valid_time", dims, values, _COORD_ATTRS["valid_time"])


def _lat_attrs(lat: np.ndarray[Any, Any]) -> dict[str, str]:
    attrs = dict(_COORD_ATTRS["latitude"])
    if lat.size > 1 and lat[0] > lat[-1]:
        attrs["stored_direction"] = "decreasing"
    return attrs

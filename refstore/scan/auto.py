"""Pick the scanner for a source from its first bytes (not its file name)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from .._checksum import file_checksum
from ..errors import ScanError
from ._parallel import heartbeat
from ._series_facts import with_series_facts
from ._sources import open_source
from .grib import HEADER_LIMIT, GribScanner, find_message
from .hdf5 import HDF5Scanner
from .netcdf3 import NetCDF3Scanner
from .tiff import TiffScanner

if TYPE_CHECKING:
    from ._types import ScanResult, SourceInfo

__all__ = ["AutoScanner", "sniff", "sniff_file"]

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")


def sniff(location: str) -> str:
    """``"netcdf3"``, ``"hdf5"``, ``"tiff"``, ``"grib"``, ``"zip"`` or ``"unknown"`` from the file's signature."""
    with open_source(location) as (fh, _info):
        return sniff_file(fh, location)


def sniff_file(fh: BinaryIO, location: str) -> str:
    """``sniff`` on an opened source (reads at most a few small ranges)."""
    try:
        fh.seek(0)
        head = fh.read(8)
        if head[:4] in _TIFF_MAGIC:
            return "tiff"
        if head[:3] == b"CDF" and len(head) >= 4 and head[3] in (1, 2, 5):
            return "netcdf3"
        if head == _HDF5_MAGIC:
            return "hdf5"
        if head[:4] == b"GRIB" and len(head) >= 8 and head[7] in (1, 2):  # edition 1 or 2
            return "grib"
        for at in (512, 1024, 2048, 4096, 8192):  # HDF5 files may start after a user block
            fh.seek(at)
            if fh.read(8) == _HDF5_MAGIC:
                return "hdf5"
        if find_message(fh, 0, HEADER_LIMIT) >= 0:  # GRIB after a header (WMO bulletin, EBCDIC)
            return "grib"
    except OSError as e:
        raise ScanError(location, f"cannot read: {e.strerror or e}") from None
    return "zip" if head[:4] == b"PK\x03\x04" else "unknown"  # a zip (of a Zarr store, perhaps): refused by name


@dataclass(frozen=True, slots=True)
class AutoScanner:
    """Scans netCDF3, netCDF4/HDF5, TIFF/GeoTIFF and GRIB1/GRIB2 files with the right scanner. A source is
    opened once (one HEAD and a block cache shared by sniffing and scanning when remote).
    ``checksum``: record a digest of each local file's bytes (``_checksum``)."""

    concat_dim: str | None = None
    time_pattern: str | None = None
    checksum: bool = False

    def __call__(self, location: str) -> ScanResult:
        res = self._scan(location)
        if not self.checksum:
            return res
        try:
            digest = file_checksum(location, progress=heartbeat)
        except OSError as e:
            raise ScanError(location, f"cannot read for --checksum: {e.strerror or e}") from None
        return dataclasses.replace(res, source=dataclasses.replace(res.source, checksum=digest))

    def _scan(self, location: str) -> ScanResult:
        with open_source(location) as (fh, info):
            return with_series_facts(self._scan_file(fh, info, location), fh, self.concat_dim)

    def _scan_file(self, fh: BinaryIO, info: SourceInfo, location: str) -> ScanResult:
        kind = sniff_file(fh, location)
        if kind == "netcdf3":
            return NetCDF3Scanner(concat_dim=self.concat_dim).scan_file(fh, info)
        if kind == "hdf5":
            return HDF5Scanner(concat_dim=self.concat_dim).scan_file(fh, info)
        if kind == "tiff":
            return TiffScanner(concat_dim=self.concat_dim, time_pattern=self.time_pattern).scan_file(fh, info)
        if kind == "grib":
            return GribScanner(concat_dim=self.concat_dim).scan_file(fh, info)
        if kind == "zip":
            raise ScanError(
                location, "a zip file: not scanned; a zipped Zarr store is brought in by `refstore import zarr`"
            )
        raise ScanError(location, "not a netCDF3, netCDF4/HDF5, TIFF or GRIB file (unrecognised signature)")

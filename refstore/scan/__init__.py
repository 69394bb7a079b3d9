"""Physical layer: one scanner per format, one signature (options at construction, one call
per source returning columnar chunk rows)."""

from ._parallel import ScanOutcome, scan_many
from ._sources import expand_sources, local_source_info, normalize_location
from ._types import CHUNK_BATCH_SCHEMA, ArrayMeta, ChunkColumns, Scanner, ScanResult, SourceInfo, chunk_table
from .auto import AutoScanner, sniff
from .grib import GribScanner
from .hdf5 import HDF5Scanner
from .netcdf3 import NetCDF3Scanner

__all__ = [
    "CHUNK_BATCH_SCHEMA",
    "ArrayMeta",
    "AutoScanner",
    "ChunkColumns",
    "GribScanner",
    "HDF5Scanner",
    "NetCDF3Scanner",
    "ScanOutcome",
    "ScanResult",
    "Scanner",
    "SourceInfo",
    "chunk_table",
    "expand_sources",
    "local_source_info",
    "normalize_location",
    "scan_many",
    "sniff",
]

"""refstore: archival arrays (netCDF4/HDF5) published as virtual datasets from one versioned
Lance table of byte references."""

from ._api import Dataset, init, open, scan
from .errors import (
    BadInputError,
    CollectionNotFoundError,
    ConflictError,
    NotACollectionError,
    NotFoundError,
    PlanError,
    RefstoreError,
    ScanError,
    SourceReadError,
    StorageError,
    UnsupportedArrayError,
)
from .read import Array, ReadOptions, VerifyReport, verify
from .table import Collection, ScanReport, Snapshot, log_entries

__version__ = "0.1.0"

__all__ = [
    "Array",
    "BadInputError",
    "Collection",
    "CollectionNotFoundError",
    "ConflictError",
    "Dataset",
    "NotACollectionError",
    "NotFoundError",
    "PlanError",
    "ReadOptions",
    "RefstoreError",
    "ScanError",
    "ScanReport",
    "Snapshot",
    "SourceReadError",
    "StorageError",
    "UnsupportedArrayError",
    "VerifyReport",
    "__version__",
    "init",
    "log_entries",
    "open",
    "scan",
    "verify",
]

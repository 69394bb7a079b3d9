"""refstore: archival arrays (netCDF4/HDF5) published as virtual datasets from one versioned
Lance table of byte references."""

from typing import TYPE_CHECKING, Any

from . import scan as _scan_subpackage  # noqa: F401  (bound first; the function ``scan`` takes the name)
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
    SourceMissingError,
    SourceReadError,
    StaleSourceError,
    StaleSourceWarning,
    StorageError,
    UnexpressibleError,
    UnsupportedArrayError,
)
from .read import Array, ReadOptions, VerifyReport, verify

if TYPE_CHECKING:
    from .read.zarr_store import RefstoreZarrStore, zarr_store
    from .table import Collection, ScanReport, Snapshot, log_entries

# Lazy: ``import refstore`` (and scan worker processes) must not pay for importing Lance.
_LAZY = {"Collection": ".table", "ScanReport": ".table", "Snapshot": ".table", "log_entries": ".table",
         "zarr_store": ".read.zarr_store", "RefstoreZarrStore": ".read.zarr_store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'refstore' has no attribute {name!r}")


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
    "RefstoreZarrStore",
    "ScanError",
    "ScanReport",
    "Snapshot",
    "SourceMissingError",
    "SourceReadError",
    "StaleSourceError",
    "StaleSourceWarning",
    "StorageError",
    "UnexpressibleError",
    "UnsupportedArrayError",
    "VerifyReport",
    "__version__",
    "init",
    "log_entries",
    "open",
    "scan",
    "verify",
    "zarr_store",
]

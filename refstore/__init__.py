"""refstore: archival arrays (netCDF4/HDF5) published as virtual datasets from one versioned
Lance table of byte references."""

from typing import TYPE_CHECKING, Any

from . import scan as _scan_subpackage  # noqa: F401  (bound first; the function ``scan`` takes the name)
from ._api import Dataset, init, open, scan
from ._results import (
    Commit,
    CompactReport,
    CoverageReport,
    GcReport,
    Info,
    PageReport,
    RepairReport,
    Tag,
    TagDeleted,
)
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
    from ._collection import Collection, PathLike, Progress
    from .emit import EmitReport
    from .emit.stac import CatalogReport
    from .imports import ImportReport
    from .plan.remap import RemapRule
    from .read.zarr_store import RefstoreZarrStore, zarr_store
    from .table import DiffReport, HoldReport, LogEntry, ScanReport, Snapshot, log_entries

    Diff = DiffReport

# Lazy: ``import refstore`` (and scan worker processes) must not pay for importing Lance.
_LAZY = {"Collection": "._collection", "PathLike": "._collection", "Progress": "._collection",
         "ScanReport": ".table", "Snapshot": ".table", "log_entries": ".table", "DiffReport": ".table",
         "HoldReport": ".table", "LogEntry": ".table", "EmitReport": ".emit", "CatalogReport": ".emit.stac",
         "ImportReport": ".imports", "RemapRule": ".plan.remap",
         "zarr_store": ".read.zarr_store", "RefstoreZarrStore": ".read.zarr_store"}
_ALIASES = {"Diff": "DiffReport"}


def __getattr__(name: str) -> Any:
    target = _ALIASES.get(name, name)
    if target in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[target], __name__), target)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'refstore' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "Array",
    "BadInputError",
    "CatalogReport",
    "Collection",
    "CollectionNotFoundError",
    "Commit",
    "CompactReport",
    "ConflictError",
    "CoverageReport",
    "Dataset",
    "Diff",
    "DiffReport",
    "EmitReport",
    "GcReport",
    "HoldReport",
    "ImportReport",
    "Info",
    "LogEntry",
    "NotACollectionError",
    "NotFoundError",
    "PageReport",
    "PathLike",
    "PlanError",
    "Progress",
    "ReadOptions",
    "RefstoreError",
    "RefstoreZarrStore",
    "RemapRule",
    "RepairReport",
    "ScanError",
    "ScanReport",
    "Snapshot",
    "SourceMissingError",
    "SourceReadError",
    "StaleSourceError",
    "StaleSourceWarning",
    "StorageError",
    "Tag",
    "TagDeleted",
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

"""One exception tree for refstore.

Grouped by what a handler would do; each class is also the matching builtin, so callers that
catch ``ValueError`` or ``FileNotFoundError`` keep working. The CLI maps every ``RefstoreError``
to exit code 2 and one line on stderr.
"""

from __future__ import annotations

__all__ = [
    "BadInputError",
    "CatalogWarning",
    "CollectionNotFoundError",
    "ConflictError",
    "NotACollectionError",
    "NotFoundError",
    "PlanError",
    "RefstoreError",
    "ScanError",
    "SourceMissingError",
    "SourceReadError",
    "StaleSourceError",
    "StaleSourceWarning",
    "StorageError",
    "UnexpressibleError",
    "UnsupportedArrayError",
]


class RefstoreError(Exception):
    """Root of every error refstore raises on purpose."""


class BadInputError(RefstoreError, ValueError):
    """The caller gave something refstore cannot use (argument, file, window...)."""


class ScanError(BadInputError):
    """A source could not be scanned at all (truncated, not HDF5, unreadable)."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"{location}: {reason}")
        self.location = location
        self.reason = reason

    def __reduce__(self) -> tuple[type[ScanError], tuple[str, str]]:  # picklable: results of Dask tasks
        return (type(self), (self.location, self.reason))


class PlanError(BadInputError):
    """Sources cannot be placed into one regular global array (misaligned, disagreeing)."""


class UnsupportedArrayError(BadInputError):
    """The array was scanned but nothing can decode it (e.g. an HDF5 scaleoffset filter)."""


class UnexpressibleError(BadInputError):
    """A published form cannot express an array (an era boundary, a short last strip, a codec the
    form's readers lack): refused, naming the array, rather than writing a store that reads wrong."""


class NotFoundError(RefstoreError, KeyError):
    """A named thing (array, tag, version) does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class CollectionNotFoundError(RefstoreError, FileNotFoundError):
    """No collection at the given location."""


class NotACollectionError(BadInputError):
    """The location holds something that is not a refstore collection."""


class ConflictError(RefstoreError, RuntimeError):
    """A concurrent writer won, and retrying did not settle it."""


class SourceReadError(RefstoreError, OSError):
    """Bytes could not be fetched from a source (missing, truncated, changed)."""


class SourceMissingError(SourceReadError, FileNotFoundError):
    """A source is not there any more (deleted, moved): nothing can be read from it."""


class StaleSourceError(SourceReadError):
    """A source changed (size, mtime or etag) since it was scanned: its references may point at
    bytes that are no longer there."""


class StaleSourceWarning(UserWarning):
    """Issued instead of StaleSourceError when reading with ``on_stale="warn"``."""


class CatalogWarning(UserWarning):
    """Part of a STAC catalog left open (the message says what and why); the catalog is written."""


class StorageError(RefstoreError, OSError):
    """The collection's storage failed (transient or permanent)."""

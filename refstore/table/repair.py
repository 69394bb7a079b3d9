"""Repair: make the newest readable version latest again, in a new version.

A version is readable when every data and deletion file it needs is present. The latest can be
unreadable when a gc whose grace period was shorter than a write removed that write's files
before its manifest was linked (the writer then fails naming this command; ``gc`` refuses to run
until it is repaired: it would remove the older versions that still read). Repair commits Lance's
``Restore`` of the newest readable version: a new version with exactly its rows, logged as
``repair``; the unreadable versions stay listed (and refused by every reading command) until gc
removes them. See ``design/versions.md``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import StorageError
from ._commit import MAX_ATTEMPTS, is_conflict
from ._files import needed_files, present_files

if TYPE_CHECKING:
    from .collection import Collection

__all__ = ["newest_readable", "repair"]


def _unreadable(col: Collection, version: int, present: set[str]) -> bool:
    try:
        return any(p not in present for p in needed_files(col._dataset(version)))
    except (OSError, ValueError):  # its manifest names what Lance cannot open
        return True


def newest_readable(col: Collection) -> tuple[int | None, list[int]]:
    """The newest version whose files are all present (None if none) and the newer ones that are not."""
    ds = col._dataset()
    present = set(present_files(ds))
    broken: list[int] = []
    for v in sorted((int(x["version"]) for x in ds.versions()), reverse=True):
        if not _unreadable(col, v, present):
            return v, sorted(broken)
        broken.append(v)
    return None, sorted(broken)


def repair(col: Collection) -> dict[str, Any]:
    """Restore the newest readable version as the latest (one new version); nothing to do when
    the latest is readable. ``StorageError`` when no version can be read."""
    import lance
    from lance.commit import CommitConflictError

    for _ in range(MAX_ATTEMPTS):
        latest = col.latest_version
        good, broken = newest_readable(col)
        if not broken:
            return {"version": latest, "restored": None, "unreadable": []}
        if good is None:
            raise StorageError(f"{col.uri}: no version can be read: every one misses files")
        record = {"restored": good, "unreadable": broken}
        txn = lance.Transaction(
            read_version=latest,
            operation=lance.LanceOperation.Restore(good),
            transaction_properties={
                "__lance_commit_message": f"repair: version {good} restored (versions {broken} cannot be read)",
                "refstore.operation": "repair",
                "refstore.record": json.dumps(record, sort_keys=True),
            },
        )
        try:
            ds = lance.LanceDataset.commit(col.uri, txn, storage_options=col.storage_options)
        except CommitConflictError:
            continue
        except OSError as e:
            if is_conflict(e):
                continue
            raise StorageError(f"{col.uri}: repair failed: {str(e).splitlines()[0]}") from None
        return {"version": int(ds.version), **record}
    raise StorageError(f"{col.uri}: repair gave up: other writers kept committing")

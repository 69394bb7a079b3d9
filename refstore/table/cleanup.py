"""Garbage collection: old untagged versions and the files only they need, and files no version
ever needed (left by failed commits), after a grace period.

Lance decides what may go (``explain_cleanup_old_versions``: its version policy, tags kept, files
still needed kept); refstore deletes it in an order that survives a kill at any point: manifests
first, so a listed version always has its files (Lance's own cleanup deletes data files first).
The grace period keeps what a writer in flight may still need: versions younger than it (their
numbers, see ``_commit.py``) and files no version references yet (an uncommitted write's).
See ``design/versions.md``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError, StorageError
from ._files import base_path, delete_files, present_files, unfinished_uploads, unlinked_manifests

if TYPE_CHECKING:
    from .collection import Collection

__all__ = ["DEFAULT_GRACE", "gc"]

DEFAULT_GRACE = timedelta(hours=1)
"""How long a version or an unreferenced file is kept whatever ``keep_last`` says."""

_MAX_FILES = 1 << 31


def _candidates(ds: Any, keep_last: int, grace: timedelta, *, unverified: bool) -> list[Any]:
    try:
        plan = ds.explain_cleanup_old_versions(
            older_than=grace, retain_versions=keep_last, error_if_tagged_old_versions=False,
            delete_unverified=unverified, include_files=True, max_files=_MAX_FILES,
        )  # fmt: skip
    except (OSError, ValueError) as e:
        raise StorageError(f"{ds.uri}: cleanup failed: {str(e).splitlines()[0]}") from None
    if plan.candidate_files_truncated:  # pragma: no cover - more than 2**31 files
        raise StorageError(f"{ds.uri}: too many files to clean up at once")
    return list(plan.candidate_files)


def gc(col: Collection, *, keep_last: int = 1, grace: timedelta = DEFAULT_GRACE) -> dict[str, Any]:
    """Remove old untagged versions, keeping the newest ``keep_last`` and every version younger
    than ``grace``; tagged versions stay. Files no version references (a failed commit's, a
    killed write's) are removed once older than ``grace``. ``grace=timedelta(0)`` only when no
    other process writes the collection."""
    if keep_last < 1:
        raise BadInputError("--keep-last must be at least 1")
    if grace < timedelta(0):
        raise BadInputError("--grace must not be negative")
    ds = col._dataset()
    before = sorted(int(v["version"]) for v in ds.versions())
    now = datetime.now(UTC)
    # files of removed versions are "verified" (a manifest named them): they go whatever their age
    verified = {c.path for c in _candidates(ds, keep_last, grace, unverified=False) if not c.unverified}
    present = present_files(ds)
    base = base_path(col.uri) + "/"
    chosen: list[tuple[str, str]] = []
    removed_bytes = 0
    for c in _candidates(ds, keep_last, grace, unverified=True):
        rel = c.path[len(base) :] if c.path.startswith(base) else None
        if rel is None or rel.startswith("_refs/"):
            continue
        if c.path not in verified:  # no version ever needed it: a failed commit's, or one in flight
            modified = present.get(rel)
            if modified is None or now - modified < grace:
                continue
        chosen.append((str(c.kind), rel))
        removed_bytes += int(c.size_bytes)
    delete_files(col, chosen)
    unlinked = unlinked_manifests(col, grace.total_seconds())  # after: a freed name is not taken
    delete_files(col, [("unlinked manifest", rel) for rel in unlinked])
    unfinished = unfinished_uploads(col, grace.total_seconds())  # a killed write's, never referenced
    delete_files(col, [("data", rel) for rel, _ in unfinished])
    removed_bytes += sum(size for _, size in unfinished)
    after = sorted(int(v["version"]) for v in col._dataset().versions())
    return {
        "versions_removed": sorted(set(before) - set(after)),
        "versions_kept": after,
        "files_removed": len(chosen) + len(unlinked) + len(unfinished),
        "bytes_removed": removed_bytes,
        "grace_seconds": grace.total_seconds(),
    }

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
from ._files import base_path, delete_files, needed_files, present_files, unfinished_uploads, unlinked_manifests

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


def _refuse_unreadable_latest(col: Collection, ds: Any, present: dict[str, Any]) -> None:
    """gc keeps the newest ``keep_last`` versions, so with an unreadable latest it would remove
    the versions that still read (the newest readable one among them): refused, naming repair."""
    gone = [p for p in needed_files(ds) if p not in present]
    if gone:
        raise BadInputError(
            f"{col.uri}: the latest version {int(ds.version)} cannot be read ({len(gone)} files missing, "
            f"{gone[0]}); gc would remove the versions that still read: run 'refstore repair' first"
        )


def _new_versions_need(col: Collection, seen: int) -> set[str]:
    """Files needed by versions committed since gc listed them (newer than ``seen``): a writer
    whose manifest was linked meanwhile references what gc took for a failed commit's files."""
    ds = col._dataset()
    out: set[str] = set()
    for v in (int(x["version"]) for x in ds.versions()):
        if v > seen:
            out.update(needed_files(col._dataset(v)))
    return out


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
    present = present_files(ds)
    _refuse_unreadable_latest(col, ds, present)
    now = datetime.now(UTC)
    # files of removed versions are "verified" (a manifest named them): they go whatever their age
    verified = {c.path for c in _candidates(ds, keep_last, grace, unverified=False) if not c.unverified}
    base = base_path(col.uri) + "/"
    chosen: list[tuple[str, str, int]] = []
    for c in _candidates(ds, keep_last, grace, unverified=True):
        rel = c.path[len(base) :] if c.path.startswith(base) else None
        if rel is None or rel.startswith("_refs/"):
            continue
        if c.path not in verified:  # no version ever needed it: a failed commit's, or one in flight
            modified = present.get(rel)
            if modified is None or now - modified < grace:
                continue
        chosen.append((str(c.kind), rel, int(c.size_bytes)))
    linked = _new_versions_need(col, before[-1])
    chosen = [c for c in chosen if c[1] not in linked]
    delete_files(col, [(kind, rel) for kind, rel, _ in chosen])
    removed_bytes = sum(size for _, _, size in chosen)
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

"""What every writing operation shares: the collection row that makes concurrent writers
conflict, the commit of an uncommitted Lance transaction (rows replaced by
deletion files and new fragments, `_replace.py`) with refstore's record, and the retry from
the winner's version."""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import TYPE_CHECKING, Any

import lance

from ..errors import ConflictError, NotFoundError, RefstoreError, StorageError
from ..schema import FORMAT_VERSION, Kind
from ._rows import rows

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from .collection import Collection, Snapshot

__all__ = [
    "MAX_ATTEMPTS", "LostCommit", "check_complete", "commit", "head_row", "is_conflict", "retry_on_conflict",
]  # fmt: skip

MAX_ATTEMPTS = 8


def head_row(snap: Snapshot, overrides: dict[str, Any] | None = None) -> pa.Table:
    """The collection row with the settings of ``snap`` (and ``overrides``) and a new head id:
    every commit rewrites it, so two racing writers always conflict in Lance."""
    cfg = {k: v for k, v in snap.config().items() if k not in ("head", "format_version")}
    meta = {**cfg, **(overrides or {}), "format_version": FORMAT_VERSION, "head": uuid.uuid4().hex}
    return rows(Kind.COLLECTION, 1, meta=[json.dumps(meta, sort_keys=True)])


class LostCommit(Exception):
    """The commit took a version number a concurrent gc had freed: the version exists, but the
    latest version does not descend from it. Retried like a conflict."""


def _head(ds: lance.LanceDataset) -> str | None:
    t = ds.to_table(columns=["meta"], filter=f"kind = '{Kind.COLLECTION}'")
    return str(json.loads(t.column("meta")[0].as_py()).get("head")) if t.num_rows else None


def _check_landed(col: Collection, ds: lance.LanceDataset) -> None:
    """Raise ``LostCommit`` unless the latest version descends from ``ds``'s (just committed).

    Every refstore commit rewrites the collection row with a new ``head`` and records the head it
    was computed from as ``refstore.parent``; Lance's own commits (compaction, indices) keep the
    row. So the next version after ours descends from ours iff its parent (or, for Lance's
    commits, its head) is our head. Later versions are the next one's writers' concern."""
    version = int(ds.version)
    if int(ds.latest_version) <= version:
        return
    later = sorted(v for v in (int(x["version"]) for x in ds.versions()) if v > version)
    try:  # unreadable: gc removed what it needs too, so it is not what the latest builds on
        mine = _head(ds)
        txn = ds.read_transaction(later[0])
        props = dict(txn.transaction_properties or {}) if txn is not None else {}
        nxt = props.get("refstore.parent") or _head(col._dataset(later[0]))
    except (OSError, ValueError, NotFoundError, StorageError):
        mine, nxt = None, None
    if mine is None or nxt != mine:
        raise LostCommit(f"{col.uri}: version {version} was committed into a number gc had freed; "
                         f"version {later[-1]} does not contain it")  # fmt: skip


def check_complete(col: Collection, ds: lance.LanceDataset, before: lance.LanceDataset | list[str]) -> None:
    """Raise ``StorageError`` (naming ``refstore repair``) if a file version ``ds`` (just
    committed) added over ``before`` is gone: a gc whose grace period was shorter than this
    write took removed them as unreferenced before the manifest was linked. The version is
    listed and latest, but nothing can read it; repair makes the newest readable version latest again."""
    from ._files import absent_files, needed_files

    had = before if isinstance(before, list) else needed_files(before)
    gone = absent_files(col, set(needed_files(ds)) - set(had))
    if gone:
        raise StorageError(
            f"{col.uri}: version {int(ds.version)} was committed, but {len(gone)} of its files are gone "
            f"({gone[0]}): a gc with a grace period shorter than this write removed them, so it "
            "cannot be read; run 'refstore repair' to make the newest readable version latest again"
        )


def commit(col: Collection, txn: Any, op: str, message: str, record: dict[str, Any], *, parent: Snapshot) -> int:
    """Commit an uncommitted Lance transaction (computed from ``parent``) with refstore's log
    record; the new version, which the latest version descends from (else ``LostCommit``)."""
    txn.transaction_properties = {
        "__lance_commit_message": message,
        "refstore.operation": op,
        "refstore.record": json.dumps(record, sort_keys=True),
        "refstore.parent": str(parent.config().get("head", "")),
    }
    ds = lance.LanceDataset.commit(col.uri, txn, storage_options=col.storage_options)
    _check_landed(col, ds)  # first: a version in a freed number is retried, not repaired
    check_complete(col, ds, parent.ds)
    return int(ds.version)


def is_conflict(e: OSError) -> bool:
    """Whether Lance refused a commit because another writer committed first (Lance raises
    some conflicts as plain ``OSError``)."""
    return "conflict" in str(e).lower() or "concurrent" in str(e).lower()


def retry_on_conflict[T](col: Collection, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` (which recomputes from the latest version and commits) until no other
    writer gets in between, with jittered backoff. A collection of an older format is upgraded
    first (``_upgrade.py``): every write goes through here."""
    from lance.commit import CommitConflictError

    from ._upgrade import upgrade

    upgrade(col)

    for k in range(MAX_ATTEMPTS):
        try:
            return attempt()
        except (CommitConflictError, LostCommit):
            time.sleep(random.uniform(0.01, 0.05) * (k + 1))
        except OSError as e:
            if isinstance(e, RefstoreError):  # refstore's own (a source, a version's files): as it is
                raise
            if is_conflict(e):
                time.sleep(random.uniform(0.01, 0.05) * (k + 1))
                continue
            raise StorageError(f"{col.uri}: commit failed: {str(e).splitlines()[0]}") from None
    raise ConflictError(f"{col.uri}: gave up after {MAX_ATTEMPTS} attempts: other writers kept committing")

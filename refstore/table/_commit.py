"""What every writing operation shares: the collection row that makes concurrent writers
conflict, the commit of a merge_insert transaction with refstore's record, and the retry from
the winner's version."""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import TYPE_CHECKING, Any

import lance

from ..errors import ConflictError, SourceReadError, StorageError
from ..schema import FORMAT_VERSION, Kind
from ._rows import rows

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from .collection import Collection, Snapshot

__all__ = ["MAX_ATTEMPTS", "commit", "head_row", "retry_on_conflict"]

MAX_ATTEMPTS = 8


def head_row(snap: Snapshot, overrides: dict[str, Any] | None = None) -> pa.Table:
    """The collection row with the settings of ``snap`` (and ``overrides``) and a new head id:
    every commit rewrites it, so two racing writers always conflict in Lance."""
    cfg = {k: v for k, v in snap.config().items() if k not in ("head", "format_version")}
    meta = {**cfg, **(overrides or {}), "format_version": FORMAT_VERSION, "head": uuid.uuid4().hex}
    return rows(Kind.COLLECTION, 1, meta=[json.dumps(meta, sort_keys=True)])


def commit(col: Collection, txn: Any, op: str, message: str, record: dict[str, Any]) -> int:
    """Commit an uncommitted Lance transaction with refstore's log record; the new version."""
    txn.transaction_properties = {
        "__lance_commit_message": message,
        "refstore.operation": op,
        "refstore.record": json.dumps(record, sort_keys=True),
    }
    return int(lance.LanceDataset.commit(col.uri, txn, storage_options=col.storage_options).version)


def retry_on_conflict[T](col: Collection, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` (which recomputes from the latest version and commits) until no other
    writer gets in between, with jittered backoff."""
    from lance.commit import CommitConflictError

    for k in range(MAX_ATTEMPTS):
        try:
            return attempt()
        except CommitConflictError:
            time.sleep(random.uniform(0.01, 0.05) * (k + 1))
        except OSError as e:
            if isinstance(e, SourceReadError):
                raise
            if "conflict" in str(e).lower() or "concurrent" in str(e).lower():
                time.sleep(random.uniform(0.01, 0.05) * (k + 1))
                continue
            raise StorageError(f"{col.uri}: commit failed: {str(e).splitlines()[0]}") from None
    raise ConflictError(f"{col.uri}: gave up after {MAX_ATTEMPTS} attempts: other writers kept committing")

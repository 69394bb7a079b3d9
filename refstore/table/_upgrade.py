"""The upgrade of a collection written by an older refstore to the current format
(``schema.FORMAT_VERSION``), made by the first writer that meets it, before it writes anything.

Format 1 -> 2: the column ``held_sha256`` is renamed ``held_digest`` (its values, bare SHA-256
hex digests, stay valid: ``_held_digest.matches``), and the schema's format number becomes 2.
That is one Lance ``Project`` commit: the schema only, by field id, no data file written.
Versions before it (and their tags) keep format 1 and stay readable; ``Snapshot.digest_column``
names the column in each. A refstore of format 1 refuses the upgraded collection
(``Collection.open``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import StorageError
from ..schema import FORMAT_VERSION
from ._commit import MAX_ATTEMPTS, is_conflict

if TYPE_CHECKING:
    from collections.abc import Iterator

    from lance.dataset import Transaction

    from .collection import Collection

__all__ = ["upgrade"]

_RENAMED = {"held_sha256": "held_digest"}
"""Format 1's column names that format 2 renamed."""


def _ids(schema: Any) -> list[tuple[str, int]]:
    """(name, field id) of every field of a Lance schema, nested ones included, in order."""

    def walk(fields: Any) -> Iterator[tuple[str, int]]:
        for f in fields:
            yield f.name(), int(f.id())
            yield from walk(f.children())

    return list(walk(schema.fields()))


def upgrade(col: Collection) -> int | None:
    """Bring the latest version of ``col`` to the current format; the version committed, or
    None when it already was current (or a concurrent writer upgraded it first)."""
    from lance import LanceOperation
    from lance.commit import CommitConflictError
    from lance.dataset import Transaction
    from lance.schema import LanceSchema

    for _ in range(MAX_ATTEMPTS):
        ds = col._dataset()
        old = ds.schema
        if not any(n in old.names for n in _RENAMED):
            return None
        fields = [old.field(i) for i in range(len(old))]
        renamed = [f.with_name(_RENAMED.get(f.name, f.name)) for f in fields]
        meta = {**(old.metadata or {}), b"refstore.format_version": str(FORMAT_VERSION).encode()}
        new = LanceSchema.from_pyarrow(pa.schema(renamed, metadata=meta))
        want = [(_RENAMED.get(n, n), i) for n, i in _ids(ds.lance_schema)]
        if _ids(new) != want:  # a Project keeps data by field id: ids must not move
            raise StorageError(f"{col.uri}: cannot upgrade from format 1: its field ids are not the expected ones")
        txn = Transaction(
            read_version=int(ds.version),
            operation=LanceOperation.Project(new),
            transaction_properties={
                "__lance_commit_message": f"upgrade: format 1 -> {FORMAT_VERSION} (held_sha256 named held_digest)",
                "refstore.operation": "upgrade",
                "refstore.record": json.dumps({"from_format": 1, "to_format": FORMAT_VERSION}),
            },
        )
        try:
            return _commit(col, txn)
        except CommitConflictError:
            continue  # another writer committed first: look again
    raise StorageError(f"{col.uri}: cannot upgrade from format 1: other writers kept committing first")


def _commit(col: Collection, txn: Transaction) -> int:
    """Commit ``txn``; a lost race as ``CommitConflictError``, any other failure as ``StorageError``."""
    import lance

    try:
        ds = lance.LanceDataset.commit(col.uri, txn, storage_options=col.storage_options)
    except OSError as e:
        if is_conflict(e):
            from lance.commit import CommitConflictError

            raise CommitConflictError(str(e)) from None
        raise StorageError(f"{col.uri}: cannot upgrade: {str(e).splitlines()[0]}") from None
    return int(ds.version)

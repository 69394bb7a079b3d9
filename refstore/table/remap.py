"""Remap rules stored in the collection: ``remap`` rows (``source`` = canonical prefix, ``meta`` =
``{"replacement": ...}``), so they are versioned with everything else and frozen by a tag."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import NotFoundError
from ..plan.remap import RemapRule, canonical_prefix, check_replacement
from ..schema import Kind
from ._commit import commit, head_row, retry_on_conflict
from ._replace import replace_rows
from ._rows import rows
from .collection import sql_str

if TYPE_CHECKING:
    from .collection import Collection, Snapshot

__all__ = ["add_rule", "remap_rules", "remove_rule"]


def remap_rules(snap: Snapshot) -> list[RemapRule]:
    """The rules of one version, sorted by prefix."""
    t = snap.rows(Kind.REMAP, ["source", "meta"])
    out = [RemapRule(p, json.loads(m)["replacement"]) for p, m in zip(
        t.column("source").to_pylist(), t.column("meta").to_pylist(), strict=True)]  # fmt: skip
    return sorted(out, key=lambda r: r.prefix)


def _rule_rows(prefix: str) -> str:
    """The filter for the row of the rule for ``prefix``; a commit replaces it (and the collection
    row) through deletion files and a new fragment (``_replace.py``), never a merge_insert,
    whose join reads the key of every row of the table."""
    return f"kind = '{Kind.REMAP}' AND source = {sql_str(prefix)}"


def add_rule(col: Collection, prefix: str, replacement: str) -> int:
    """Add (or replace) the rule for ``prefix``: one new version; unchanged rules commit nothing."""
    key = canonical_prefix(prefix)
    check_replacement(replacement)

    def attempt() -> int:
        snap = col.snapshot()
        old = {r.prefix: r.replacement for r in remap_rules(snap)}
        if old.get(key) == replacement:
            return snap.version
        row = rows(Kind.REMAP, 1, source=[key], meta=[json.dumps({"replacement": replacement}, sort_keys=True)])
        table = pa.concat_tables([head_row(snap), row])
        txn = replace_rows(snap, table, f"kind = 'collection' OR ({_rule_rows(key)})")
        record = {"prefix": key, "replacement": replacement, "replaced": old.get(key)}
        return commit(col, txn, "remap add", f"remap add {key} -> {replacement}", record, parent=snap)

    return retry_on_conflict(col, attempt)


def remove_rule(col: Collection, prefix: str) -> int:
    """Remove the rule for ``prefix`` (either spelling of a local prefix): one new version."""
    key = canonical_prefix(prefix)

    def attempt() -> int:
        snap = col.snapshot()
        if key not in {r.prefix for r in remap_rules(snap)}:
            raise NotFoundError(f"{col.uri}: no remap rule for prefix {key!r}")
        txn = replace_rows(snap, head_row(snap), f"kind = 'collection' OR ({_rule_rows(key)})")
        return commit(col, txn, "remap remove", f"remap remove {key}", {"prefix": key}, parent=snap)

    return retry_on_conflict(col, attempt)

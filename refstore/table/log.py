"""The version log: what each commit did, read from Lance's own transaction records."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .collection import Collection

__all__ = ["LogEntry", "log_entries"]


@dataclass(frozen=True, slots=True)
class LogEntry:
    version: int
    timestamp: str  # ISO 8601, UTC
    operation: str  # "init", "scan", ... or Lance's own operation name for foreign commits
    message: str
    record: dict[str, Any]
    tags: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": self.timestamp,
            "operation": self.operation,
            "message": self.message,
            "record": self.record,
            "tags": list(self.tags),
        }


def log_entries(col: Collection) -> list[LogEntry]:
    """Every version, newest first."""
    from .versions import _tags

    ds = col._dataset()
    tags: dict[int, list[str]] = {}
    for name, t in _tags(col).items():
        tags.setdefault(int(t["version"]), []).append(name)
    out: list[LogEntry] = []
    for v in sorted(ds.versions(), key=lambda x: -int(x["version"])):
        n = int(v["version"])
        ts = v["timestamp"]
        if isinstance(ts, datetime):
            ts = ts.astimezone(UTC) if ts.tzinfo else ts.astimezone().astimezone(UTC)
            stamp = ts.isoformat(timespec="seconds").replace("+00:00", "Z")
        else:
            stamp = str(ts)
        props: dict[str, str] = {}
        op_name = ""
        try:
            txn = ds.read_transaction(n)
            if txn is not None:
                props = dict(txn.transaction_properties or {})
                op_name = type(txn.operation).__name__.lower()
        except (ValueError, OSError):
            pass
        record: dict[str, Any] = {}
        if "refstore.record" in props:
            try:
                record = json.loads(props["refstore.record"])
            except ValueError:
                record = {}
        out.append(
            LogEntry(
                version=n,
                timestamp=stamp,
                operation=props.get("refstore.operation", op_name or "unknown"),
                message=props.get("__lance_commit_message", ""),
                record=record,
                tags=tuple(sorted(tags.get(n, []))),
            )
        )
    return out

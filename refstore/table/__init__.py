"""The Lance collection: open/as-of, scan upserts, log."""

from .collection import Collection, Snapshot, sql_str
from .log import LogEntry, log_entries
from .upsert import ScanReport, commit_scan, diff_counts
from .versions import DiffReport, compact, create_tag, delete_tag, diff, gc, list_tags

__all__ = [
    "Collection",
    "DiffReport",
    "LogEntry",
    "ScanReport",
    "Snapshot",
    "commit_scan",
    "compact",
    "create_tag",
    "delete_tag",
    "diff",
    "diff_counts",
    "gc",
    "list_tags",
    "log_entries",
    "sql_str",
]

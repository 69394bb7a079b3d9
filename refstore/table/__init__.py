"""The Lance collection: open/as-of, scan upserts, log."""

from .cleanup import DEFAULT_GRACE, gc
from .collection import Collection, Snapshot, sql_str
from .hold import HoldReport, HoldSelection, hold, release
from .log import LogEntry, log_entries
from .repair import repair
from .upsert import ScanReport, commit_scan, diff_counts
from .versions import DiffReport, compact, create_tag, delete_tag, diff, list_tags

__all__ = [
    "DEFAULT_GRACE",
    "Collection",
    "DiffReport",
    "HoldReport",
    "HoldSelection",
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
    "hold",
    "list_tags",
    "log_entries",
    "release",
    "repair",
    "sql_str",
]

"""The Lance collection: open/as-of, scan upserts, log."""

from .collection import Collection, Snapshot, sql_str
from .log import LogEntry, log_entries
from .upsert import ScanReport, commit_scan, diff_counts

__all__ = ["Collection", "LogEntry", "ScanReport", "Snapshot", "commit_scan", "diff_counts", "log_entries", "sql_str"]

"""Fetching byte ranges through obstore: local files now, object stores and HTTP by URL."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from .. import _objstore
from ..errors import SourceReadError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Fetcher", "change_since_scan"]


def change_since_scan(known: tuple[int, int, str], now: tuple[int, int | None, str | None]) -> str | None:
    """How a source differs from what its scan recorded (size, mtime ns, etag), or None.

    Size always counts; etags are compared when both sides have one, else modification times."""
    k_size, k_mtime, k_etag = known
    size, mtime, etag = now
    if size != k_size:
        return f"size {k_size} -> {size} bytes"
    if k_etag and etag:
        return f"etag {k_etag} -> {etag}" if k_etag != etag else None
    if mtime is not None and k_mtime >= 0 and mtime != k_mtime:
        return "modification time differs"
    return None


class Fetcher:
    """Executes planned reads: ``get_ranges(location, starts, ends)`` -> bytes per range.

    Ranges arrive already coalesced by ``plan.coalesce``, so obstore's own merging is turned off
    (``coalesce=0``). Local files are read through obstore's LocalStore (one per folder);
    object stores and HTTP(S) through the process's shared stores (``refstore._objstore``),
    configured from the standard environment.
    """

    def __init__(self) -> None:
        self._stores: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _local_store(self, location: str) -> tuple[Any, str]:
        path = location[len("file://") :] if location.startswith("file://") else location
        prefix, name = os.path.split(os.path.abspath(path))
        with self._lock:
            store = self._stores.get(prefix)
            if store is None:
                from obstore.store import LocalStore

                store = self._stores[prefix] = LocalStore(prefix=prefix)
        return store, name

    def head(self, location: str) -> tuple[int, int | None, str | None]:
        """(size in bytes, mtime in ns or None, etag or None): one metadata request."""
        if _objstore.is_remote(location):
            return _objstore.head(location)
        path = location[len("file://") :] if location.startswith("file://") else location
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise SourceReadError(f"{location}: source not found") from None
        except OSError as e:
            raise SourceReadError(f"{location}: cannot stat: {e.strerror or e}") from None
        return int(st.st_size), int(st.st_mtime_ns), None

    def get_ranges(self, location: str, starts: Sequence[int], ends: Sequence[int]) -> list[memoryview]:
        if _objstore.is_remote(location):
            out = _objstore.get_ranges(location, list(starts), list(ends))
        else:
            import obstore

            store, path = self._local_store(location)
            try:
                got = obstore.get_ranges(store, path, starts=list(starts), ends=list(ends), coalesce=0)
            except FileNotFoundError:
                raise SourceReadError(f"{location}: source not found") from None
            except Exception as e:  # obstore raises its own error classes
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                if "not found" in msg.lower() or "NotFound" in type(e).__name__:
                    raise SourceReadError(f"{location}: source not found") from None
                raise SourceReadError(f"{location}: cannot read bytes: {msg}") from None
            out = [memoryview(g) for g in got]
        for lo, hi, b in zip(starts, ends, out, strict=True):
            if len(b) != hi - lo:
                raise SourceReadError(f"{location}: short read at bytes {lo}-{hi} (file truncated or changed?)")
        return out

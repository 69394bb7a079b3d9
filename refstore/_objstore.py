"""Object stores (obstore) shared by scanning and reading: ``s3://``, ``gs://``, ``az://``,
``http(s)://`` locations.

Stores are configured the way their users already configure them: obstore's ``from_url`` reads
the standard environment (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_ALLOW_HTTP``, ...). Credentials stay in
the store objects of this process; nothing here returns or records them. One store per bucket
(per base URL for HTTP) and process, reused by every scan and read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import SourceMissingError, SourceReadError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["IO_STATS", "IOStats", "head", "is_remote", "list_objects", "store_for"]

_LISTABLE = ("s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://")


@dataclass(slots=True)
class IOStats:
    """Requests made to object stores by this process (byte ranges and metadata), for tests and
    benchmarks: real counts of real requests."""

    gets: int = 0
    ranges: int = 0
    bytes: int = 0
    heads: int = 0

    def reset(self) -> None:
        self.gets = self.ranges = self.bytes = self.heads = 0


IO_STATS = IOStats()
_stores: dict[str, Any] = {}
_lock = threading.Lock()


def is_remote(location: str) -> bool:
    return "://" in location and not location.startswith("file://")


def _root(location: str) -> tuple[str, str]:
    """(store root URL, path within it): the bucket for object stores, the folder for HTTP."""
    scheme, _, rest = location.partition("://")
    if location.startswith(("http://", "https://")):
        base, _, name = location.rpartition("/")
        return base, name
    bucket, _, path = rest.partition("/")
    return f"{scheme}://{bucket}", path


def store_for(location: str) -> tuple[Any, str]:
    """(obstore store, path within it) for a remote location; the store is made once."""
    root, path = _root(location)
    with _lock:
        store = _stores.get(root)
        if store is None:
            from obstore.store import from_url

            kwargs: dict[str, Any] = {}
            if root.startswith("http://"):
                kwargs["client_options"] = {"allow_http": True}  # the URL itself asks for plain HTTP
            try:
                store = from_url(root, **kwargs)
            except Exception as e:
                raise SourceReadError(f"{location}: cannot configure object store: {_first_line(e)}") from None
            _stores[root] = store
    return store, path


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _not_found(e: BaseException) -> bool:
    return isinstance(e, FileNotFoundError) or "not found" in str(e).lower() or "NotFound" in type(e).__name__


def head(location: str) -> tuple[int, int | None, str | None]:
    """(size in bytes, modification time in ns or None, etag or None): one metadata request."""
    import obstore

    store, path = store_for(location)
    IO_STATS.heads += 1
    try:
        meta = obstore.head(store, path)
    except Exception as e:
        if _not_found(e):
            raise SourceMissingError(f"{location}: source not found") from None
        raise SourceReadError(f"{location}: cannot read metadata: {_first_line(e)}") from None
    lm = meta.get("last_modified")
    mtime = int(lm.timestamp()) * 1_000_000_000 + lm.microsecond * 1000 if lm is not None else None
    etag = meta.get("e_tag")
    return int(meta["size"]), mtime, str(etag) if etag else None


def get_ranges(location: str, starts: list[int], ends: list[int]) -> list[memoryview]:
    """The bytes ``[start, end)`` of each range, in order (one request per range: obstore's own
    merging is off, callers plan their reads)."""
    import obstore

    store, path = store_for(location)
    IO_STATS.gets += 1
    IO_STATS.ranges += len(starts)
    try:
        got = obstore.get_ranges(store, path, starts=starts, ends=ends, coalesce=0)
    except Exception as e:
        if _not_found(e):
            raise SourceMissingError(f"{location}: source not found") from None
        raise SourceReadError(f"{location}: cannot read bytes: {_first_line(e)}") from None
    out = [memoryview(g) for g in got]
    IO_STATS.bytes += sum(len(b) for b in out)
    return out


def list_objects(prefix: str) -> Iterator[tuple[str, int, int | None, str | None]]:
    """(URL, size, mtime ns, etag) of every object under ``prefix`` (a folder-like URL), sorted
    by URL. HTTP has no listing."""
    import obstore

    if not prefix.startswith(_LISTABLE):
        raise SourceReadError(f"{prefix}: cannot list an HTTP location; give the URLs of the files")
    root, path = _root(prefix)
    store, _ = store_for(prefix)
    if path and not path.endswith("/"):
        path += "/"
    try:
        found = [m for batch in obstore.list(store, prefix=path or None) for m in batch]
    except Exception as e:
        raise SourceReadError(f"{prefix}: cannot list: {_first_line(e)}") from None
    rows = []
    for m in found:
        lm = m.get("last_modified")
        mtime = int(lm.timestamp()) * 1_000_000_000 + lm.microsecond * 1000 if lm is not None else None
        etag = m.get("e_tag")
        rows.append((f"{root}/{m['path']}", int(m["size"]), mtime, str(etag) if etag else None))
    yield from sorted(rows)

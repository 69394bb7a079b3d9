"""The public Python surface: init, scan, open."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from . import _objstore
from ._checksum import current_checksum
from ._gc import young_only
from .errors import ScanError
from .plan.series_order import parse_order, parse_prefer
from .read.array import Array, ReadOptions
from .read.fetch import Fetcher, change_since_scan
from .scan import AutoScanner, ScanResult, SourceInfo, scan_many
from .scan._gone import gone_named, gone_under
from .scan._parallel import DEFAULT_TIMEOUT, cool_down, warm_up
from .scan._sources import find_sources, normalize_location, source_info

if TYPE_CHECKING:  # the table layer imports Lance: loaded on first use only
    from ._collection import Collection
    from .table.collection import Snapshot
    from .table.upsert import ScanReport

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["Dataset", "init", "open", "scan"]

_YOUNG_EVERY = 64
"""sources between two young collections during a scan (``_gc``)."""


class Dataset:
    """A collection at one version: ``ds["sst"][0:30, 0, 100:200]`` reads through the table."""

    def __init__(self, snapshot: Snapshot, *, options: ReadOptions | None = None) -> None:
        self.snapshot = snapshot
        self._fetcher = Fetcher()
        self._options = options

    @property
    def version(self) -> int:
        return self.snapshot.version

    @property
    def arrays(self) -> list[str]:
        return list(self.snapshot.arrays())

    def __getitem__(self, name: str) -> Array:
        return Array(self.snapshot, self.snapshot.array(name), fetcher=self._fetcher, options=self._options)

    def __contains__(self, name: object) -> bool:
        return name in self.snapshot.arrays()

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __repr__(self) -> str:
        return f"<refstore.Dataset {self.snapshot.collection.uri} v{self.version}: {len(self.arrays)} arrays>"


def init(uri: str | os.PathLike[str], *, storage_options: dict[str, str] | None = None) -> Collection:
    """Create an empty collection at ``uri`` (a folder, empty or not there yet, or an
    object-store URL) and return it (:class:`refstore.Collection`).

    >>> col = refstore.init("oisst.refstore")  # doctest: +SKIP
    """
    from ._collection import Collection

    return Collection.create(uri, storage_options=storage_options)


def open(
    uri: str,
    as_of: int | str | None = None,
    *,
    storage_options: dict[str, str] | None = None,
    options: ReadOptions | None = None,
) -> Dataset:
    """Open a collection for reading at version/tag ``as_of`` (latest when None)."""
    from .table.collection import Collection

    return Dataset(Collection.open(uri, storage_options=storage_options).snapshot(as_of), options=options)


def scan(
    uri: str,
    sources: Sequence[str],
    *,
    concat_dim: str | None = None,
    time_from_name: str | None = None,
    prefer: Sequence[str] | None = None,
    order: str | None = None,
    order_by: str | None = None,
    prune: bool = False,
    mosaic: bool = False,
    workers: int | None = None,
    strict: bool = False,
    progress: Callable[[int, int], None] | None = None,
    storage_options: dict[str, str] | None = None,
    client: Any = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    checksum: bool | None = None,
    follow_links: bool = False,
) -> ScanReport:
    """Scan files/folders into the collection: at most one new version.

    ``sources``: local files or folders, object-store URLs (``s3://bucket/key.nc``) or prefixes
    (``s3://bucket/prefix/``, listed by extension like a folder), HTTP(S) file URLs; stores are
    configured from the standard environment (``AWS_ENDPOINT_URL``, ``AWS_REGION``...).
    Unchanged sources (same size, and same etag or else mtime) are skipped; changed ones have their rows replaced.
    ``workers``: scanning processes; None picks one per core for 64 files or more.
    ``time_from_name``: strptime-style pattern (``D%Y%m%d``) dating TIFF sources by file name
    when they are concatenated along a new time axis; kept for later rescans.
    ``prefer``: rules choosing which of several sources with the same coordinate along the
    concat dimension is placed (the others are set aside), tried in order: ``"newest"`` (latest
    mtime), a file-name glob (``"*_final.nc"``) or its negation (``"!*_preliminary*"``);
    ``["none"]`` clears them. Without rules such duplicates are refused. Kept for later rescans
    (None keeps the recorded rules).
    ``order``/``order_by``: how the series is ordered along the concat dimension: ``order_by``
    names a variable along it whose values order the files; ``order`` is ``"name"`` (by file
    name), ``"given"`` (as given) or ``"coordinate"`` (the default: the dimension's coordinate,
    or a CF time along it where that does not tell the files apart). Kept for later rescans
    (None keeps the recorded order).
    ``mosaic``: place GeoTIFF tiles on their common pixel grid by their transforms (one
    ``image``, ``overview_N``... over the whole grid; with ``concat_dim``, a mosaic per date
    stacked along it); ``prefer`` rules then choose between overlapping tiles when one lies
    inside the other. Kept for later rescans (``design/mosaic.md``).
    ``prune``: remove, in the same version, recorded sources under the scanned folders/prefixes
    (or named directly) that no longer exist; without it they are kept and reported as missing.
    Sources that cannot be scanned are reported and counted as failed; the rest commit, unless
    ``strict``, in which case nothing is committed.
    ``client``: a ``dask.distributed.Client``: the sources are scanned on its cluster, workers
    write the chunk rows of new sources as Lance fragments, and one commit publishes them with
    the rest (``design/scale.md``); ``workers`` is then ignored.
    ``timeout``: seconds one source may take (in a worker process) before it is given up and
    fails alone; None scans in this process without a deadline.
    ``checksum``: record a SHA-256 of each local file's bytes, and from then on compare it (not
    only size and mtime) to decide whether a source changed, at rescan and at read; kept for
    later scans of the collection (None: as before). With it, sources recorded without a
    checksum are rescanned once to get one.
    ``follow_links``: in a folder, follow symbolic links whose target lies outside it (and
    linked folders); without it such a link is reported as a failed source, not read.
    """
    if timeout and client is None:
        warm_up(1)  # its interpreter starts while this one opens the collection and lists sources
    try:
        return _scan(uri, sources, concat_dim=concat_dim, time_from_name=time_from_name, prefer=prefer, prune=prune,
                     order=order, order_by=order_by,
                     mosaic=mosaic, workers=workers, strict=strict, progress=progress, storage_options=storage_options,
                     client=client, timeout=timeout, checksum=checksum, follow_links=follow_links)  # fmt: skip
    finally:
        cool_down()


def _scan(
    uri: str,
    sources: Sequence[str],
    *,
    concat_dim: str | None,
    time_from_name: str | None,
    prefer: Sequence[str] | None,
    order: str | None,
    order_by: str | None,
    prune: bool,
    mosaic: bool,
    workers: int | None,
    strict: bool,
    progress: Callable[[int, int], None] | None,
    storage_options: dict[str, str] | None,
    client: Any,
    timeout: float | None,
    checksum: bool | None,
    follow_links: bool = False,
) -> ScanReport:
    from .table.collection import Collection
    from .table.upsert import commit_scan

    col = Collection.open(uri, storage_options=storage_options)
    failed: list[tuple[str, str]] = []
    snap = col.snapshot()
    known = {r["source"]: r for r in snap.sources().to_pylist()}
    rules = None if prefer is None else [str(r) for r in parse_prefer(list(prefer))]
    order_rule = parse_order(order, order_by)
    named = gone_named(sources, known) if prune else []
    rest = [x for x in sources if normalize_location(x) not in named]
    found = find_sources(rest, failed=failed, follow_links=follow_links) if rest else []
    gone = sorted({*named, *gone_under(rest, {loc for loc, _ in found}, known)})
    dim = concat_dim if concat_dim is not None else snap.concat_dim
    pattern = time_from_name if time_from_name is not None else snap.config().get("time_from_name")
    if pattern is not None:
        from .scan.tiff import time_from_name as _check_pattern

        _check_pattern(pattern, "")  # a pattern without a date code is refused before any scanning

    use_checksum = bool(checksum) if checksum is not None else bool(snap.config().get("checksum"))
    to_scan: list[str] = []
    unchanged = 0
    for loc, listed in found:
        try:
            info = listed or source_info(loc)
        except ScanError as e:
            failed.append((loc, e.reason))
            continue
        old = known.get(loc)
        if old is not None and not _changed(loc, old, info, use_checksum):
            unchanged += 1
        else:
            to_scan.append(loc)

    total = len(to_scan)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    scanner = AutoScanner(concat_dim=dim, time_pattern=pattern, checksum=use_checksum)
    settings: dict[str, Any] = {"time_from_name": pattern, "checksum": use_checksum or None, "prefer": rules,
                                "mosaic": True if mosaic else None,
                                "order": None if order_rule is None else str(order_rule)}  # fmt: skip
    if client is not None:
        from .table.distributed import scan_on_dask

        return scan_on_dask(
            col, to_scan, client=client, scanner=scanner, concat_dim=concat_dim, unchanged=unchanged,
            failed=failed, strict=strict, settings=settings, known=frozenset(known), progress=tick,
            prune=gone if prune else (), missing=() if prune else gone,
        )  # fmt: skip
    if workers is None:
        workers = min(os.cpu_count() or 1, 8) if len(to_scan) >= 64 else 1
    results: list[ScanResult] = []
    with young_only() as young:  # the results live until the commit: no full collections meanwhile (_gc)
        for i, (loc, res) in enumerate(scan_many(scanner, to_scan, workers=workers, timeout=timeout, progress=tick)):
            if isinstance(res, ScanError):
                failed.append((loc, res.reason))
            else:
                results.append(res)
            if i % _YOUNG_EVERY == _YOUNG_EVERY - 1:
                young()
        if strict and failed:
            loc, reason = failed[0]
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            raise ScanError(loc, f"{reason}{more}; --strict: nothing committed")
        young()
        return commit_scan(
            col, results, concat_dim=concat_dim, unchanged=unchanged, failed=failed, settings=settings,
            prune=gone if prune else (), missing=() if prune else gone,
        )  # fmt: skip


def _changed(loc: str, old: dict[str, Any], info: SourceInfo, use_checksum: bool) -> bool:
    """Whether a recorded source must be scanned again: size, etag or mtime differ, or its bytes
    differ from the checksum its scan recorded (with checksums on, a source recorded without
    one is scanned again to get one)."""
    recorded = (int(old["size"]), int(old["mtime_ns"]), str(old["etag"] or ""))
    if change_since_scan(recorded, (info.size, info.mtime_ns, info.etag)) is not None:
        return True
    known = json.loads(old["meta"]).get("checksum") if old["meta"] else None
    if known is None:
        return use_checksum and not _objstore.is_remote(loc)
    try:
        return bool(current_checksum(loc) != known)
    except OSError:
        return True  # its scan will say why

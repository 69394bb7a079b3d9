"""A scan on a Dask cluster: workers scan sources and write the chunk rows of new sources as Lance
fragments; the client commits them with everything else in ONE transaction (see
``design/scale.md``).

1. Map: each task scans a batch of sources (``scan._parallel.scan_batch``); its results stay in
   the worker's memory. Only summaries (identity, array metadata, sort value: no chunk rows)
   travel to the client.
2. Plan: the client computes placements from the summaries and the latest version, exactly as a
   local scan does (``table/upsert.py``).
3. Fragments: each task turns its batch's NEW sources into chunk rows placed by the plan and
   writes them with ``lance.fragment.write_fragments`` into the collection (files no version
   references yet). Changed sources, whose rows must replace older rows, are gathered to the
   client and are committed like in a local scan.
4. Commit: the transaction replacing the small rows (collection, sources, vars, arrays,
   changed and moved chunk rows) gets the workers' fragments added to its new fragments and is
   committed once with ``LanceDataset.commit``: one version, all or nothing.

Any task failure (a worker that dies, storage the workers cannot write, a ``strict`` scan
error) raises before the commit: the version does not change. Fragment files written before the
failure are referenced by no version (``refstore gc`` leaves them; Lance's
``cleanup_old_versions(delete_unverified=True)`` removes such files after 7 days).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..errors import ScanError, StorageError
from ..scan._parallel import ScanOutcome, scan_batch
from ..scan._types import CHUNK_BATCH_SCHEMA, ScanResult
from .upsert import ScanReport, SourcesNoLongerNew, Steps, View, commit_scan

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..scan._types import Scanner
    from .collection import Collection

__all__ = ["MAX_ROWS_PER_FRAGMENT", "LocalFragments", "scan_on_dask"]

MAX_ROWS_PER_FRAGMENT = 4_000_000
"""rows per fragment file written by a worker (a batch's new sources; ~1-2 bytes per row)."""


class _WorkerFailed(RuntimeError):
    pass


# --------------------------------------------------------------------------- worker side
def _summaries(outcomes: list[ScanOutcome]) -> list[ScanOutcome]:
    """The batch's results without chunk rows (what the plan needs), errors as they are."""
    empty = CHUNK_BATCH_SCHEMA.empty_table()
    return [o if isinstance(o, ScanError) else dataclasses.replace(o, refs=empty) for o in outcomes]


def _full(outcomes: list[ScanOutcome], locations: frozenset[str]) -> list[ScanResult]:
    return [o for o in outcomes if isinstance(o, ScanResult) and o.source.location in locations]


def _write_fragments(
    outcomes: list[ScanOutcome], locations: frozenset[str], view: View, uri: str,
    storage_options: dict[str, str] | None, steps: Steps | None = None,
) -> tuple[list[Any], int]:  # fmt: skip
    """Chunk rows of the batch's new sources, placed by ``view`` (and ``steps``: ``Plan.steps``),
    as fragments of ``uri``."""
    from lance.fragment import write_fragments

    from ..schema import DATA_STORAGE_VERSION
    from .upsert import _chunk_rows, _global_keys, _with_source

    results = _full(outcomes, locations)
    scanned = _with_source(results)
    if scanned.num_rows == 0:
        return [], 0
    metas = {(r.source.location, a.name): a for r in results for a in r.arrays}
    table = _chunk_rows(scanned, _global_keys(scanned, view, metas, steps))
    frags = write_fragments(
        table, uri, mode="append", max_rows_per_file=MAX_ROWS_PER_FRAGMENT,
        data_storage_version=DATA_STORAGE_VERSION, storage_options=storage_options,
    )  # fmt: skip
    return list(frags), table.num_rows


# --------------------------------------------------------------------------- client side
class LocalFragments:
    """``PrewrittenChunks`` for results held in this process (bulk loads of new sources): pass
    ``summaries`` (no chunk rows) to ``commit_scan`` with this as ``prewritten``."""

    def __init__(self, col: Collection, results: Sequence[ScanResult]) -> None:
        self.col = col
        self.results: list[ScanOutcome] = list(results)
        self.locations = frozenset(r.source.location for r in results)
        self.summaries = [r for r in _summaries(self.results) if isinstance(r, ScanResult)]

    def fragments(self, view: View, steps: Steps | None = None) -> tuple[list[Any], int]:
        return _write_fragments(self.results, self.locations, view, self.col.uri, self.col.storage_options, steps)


class _DaskChunks:
    """``PrewrittenChunks`` for the new sources of each batch held by the workers."""

    def __init__(self, client: Any, col: Collection, batches: list[tuple[Any, frozenset[str]]]) -> None:
        self.client = client
        self.col = col
        self.batches = [(f, locs) for f, locs in batches if locs]
        self.locations = frozenset(loc for _, locs in self.batches for loc in locs)
        self._done: tuple[frozenset[Any], list[Any], int] | None = None

    def fragments(self, view: View, steps: Steps | None = None) -> tuple[list[Any], int]:
        key = frozenset([*view.items(), *(steps or {}).items()])
        if self._done is not None and self._done[0] == key:
            return self._done[1], self._done[2]  # a retry after a conflict, same placements
        uri, options = self.col.uri, self.col.storage_options
        futures = []
        for fut, locs in self.batches:
            part = {k: v for k, v in view.items() if k[0] in locs}
            own = {k: v for k, v in (steps or {}).items() if k[0] in locs}
            futures.append(self.client.submit(_write_fragments, fut, locs, part, uri, options, own, pure=False))
        try:
            written = self.client.gather(futures)
        except Exception as e:
            raise _WorkerFailed(f"writing fragments: {_why(e)}") from e
        frags = [f for fs, _ in written for f in fs]
        rows = sum(n for _, n in written)
        self._done = (key, frags, rows)
        return frags, rows


def _why(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0]}" if msg else type(e).__name__


def scan_on_dask(
    col: Collection,
    locations: Sequence[str],
    *,
    client: Any,
    scanner: Scanner,
    concat_dim: str | None,
    unchanged: int,
    failed: list[tuple[str, str]],
    strict: bool,
    settings: dict[str, Any],
    known: frozenset[str],
    batch: int | None = None,
    progress: Callable[[int], None] | None = None,
    prune: Sequence[str] = (),
    missing: Sequence[str] = (),
) -> ScanReport:
    """Scan ``locations`` on the cluster of ``client`` and commit once (see the module doc).
    ``known``: sources the latest version already records (their rows are upserted);
    ``prune``/``missing``: as for ``commit_scan``."""
    from distributed import as_completed

    if not locations:
        return commit_scan(col, [], concat_dim=concat_dim, unchanged=unchanged, failed=failed, settings=settings,
                           prune=prune, missing=missing)  # fmt: skip
    n_workers = max(1, len(client.scheduler_info().get("workers", {})) or 1)
    if batch is None:
        batch = max(1, min(256, len(locations) // (n_workers * 4) or 1))
    groups = [list(locations[i : i + batch]) for i in range(0, len(locations), batch)]
    scans = client.map(scan_batch, [scanner] * len(groups), groups, pure=False)
    summaries = client.map(_summaries, scans, pure=False)
    try:
        by_future = {}
        for fut in as_completed(summaries):  # type: ignore[no-untyped-call]
            by_future[fut.key] = fut.result()
            if progress is not None:
                progress(len(by_future[fut.key]))
        outcomes = [by_future[f.key] for f in summaries]
    except Exception as e:
        raise StorageError(f"{col.uri}: a Dask worker failed while scanning ({_why(e)}); nothing committed") from None

    order = {loc: i for i, loc in enumerate(locations)}
    results: list[ScanResult] = []
    batches: list[tuple[Any, frozenset[str]]] = []
    changed_futures = []
    for fut, group, outs in zip(scans, groups, outcomes, strict=True):
        new: set[str] = set()
        old: set[str] = set()
        for loc, o in zip(group, outs, strict=True):
            if isinstance(o, ScanError):
                failed.append((loc, o.reason))
            elif loc in known:
                old.add(loc)
            else:
                new.add(loc)
                results.append(o)
        batches.append((fut, frozenset(new)))
        if old:
            changed_futures.append(client.submit(_full, fut, frozenset(old), pure=False))
    if strict and failed:
        loc, reason = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise ScanError(loc, f"{reason}{more}; --strict: nothing committed")
    try:
        try:
            results += [r for rs in client.gather(changed_futures) for r in rs]
        except Exception as e:
            raise _WorkerFailed(f"returning results: {_why(e)}") from e
        results.sort(key=lambda r: order[r.source.location])  # the order a local scan commits in
        chunks = _DaskChunks(client, col, batches)
        try:
            return commit_scan(col, results, concat_dim=concat_dim, unchanged=unchanged, failed=failed,
                               settings=settings, prewritten=chunks, prune=prune, missing=missing)  # fmt: skip
        except SourcesNoLongerNew:
            # a concurrent writer recorded some of these sources: everything goes through the upsert
            try:
                full = client.gather([client.submit(_full, f, locs, pure=False) for f, locs in chunks.batches])
            except Exception as e:
                raise _WorkerFailed(f"returning results: {_why(e)}") from e
            news = {r.source.location: r for rs in full for r in rs}
            merged = [news.get(r.source.location, r) for r in results]
            return commit_scan(col, merged, concat_dim=concat_dim, unchanged=unchanged, failed=failed,
                               settings=settings, prune=prune, missing=missing)  # fmt: skip
    except _WorkerFailed as e:
        raise StorageError(f"{col.uri}: a Dask worker failed {e}; nothing committed") from None
    finally:
        client.cancel([*scans, *summaries])

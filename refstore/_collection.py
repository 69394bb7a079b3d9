"""The public Python API: :class:`Collection`, one object whose methods are the commands.

Every ``refstore`` command is one call here (the CLI parses its options, calls the method and
prints the result, ``result.to_json()`` with ``--json``); the methods call the layers below
(scan → table ← plan; read, emit, imports, report). Errors are the :mod:`refstore.errors`
tree. Long calls take ``progress(done, total)``; every call blocks its thread and may run in a
worker thread (each opens its own view of the table), and the ``a*`` variants (``ascan``,
``ahold``, ``aemit``...) run them in one with :func:`asyncio.to_thread` for event loops.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Concatenate, Protocol, overload

from . import _api
from ._duration import parse_duration
from ._ref import LATEST, tag_name
from ._results import (
    Commit,
    CompactReport,
    CoverageReport,
    GcReport,
    Info,
    PageReport,
    RepairReport,
    Tag,
    TagDeleted,
)
from .errors import BadInputError
from .read.array import ReadOptions
from .scan._parallel import DEFAULT_TIMEOUT
from .table import collection as _table

if TYPE_CHECKING:
    import numpy as np

    from ._api import Dataset
    from .emit import EmitReport
    from .emit.stac import CatalogReport
    from .imports import ImportReport
    from .plan.remap import RemapRule
    from .read.verify import VerifyReport
    from .table import DiffReport, HoldReport, HoldSelection, LogEntry, ScanReport, Snapshot

__all__ = ["Collection", "PathLike", "Progress"]

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called as a long call advances (from the thread doing the work)."""
PathLike = str | os.PathLike[str]
"""A local path (``str`` or ``pathlib.Path``) or an object-store URL (``s3://bucket/prefix``)."""
Ref = int | str | None
"""A version: its number, a tag name, ``"latest"``, or None (latest)."""
TimeBound = str | date | datetime


def _in_thread[**P, R](
    method: Callable[Concatenate[Collection, P], R],
) -> Callable[Concatenate[Collection, P], Awaitable[R]]:
    """``method`` run in a worker thread (:func:`asyncio.to_thread`): awaiting it leaves the
    event loop free. ``progress`` callbacks run in that thread."""

    async def run(self: Collection, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    run.__name__ = run.__qualname__ = f"a{method.__name__}"
    run.__doc__ = (f"Awaitable :meth:`{method.__name__}` (same arguments and result), run in a worker thread "
                   f"with :func:`asyncio.to_thread` so the event loop is not blocked.\n\n"
                   f">>> report = await col.a{method.__name__}(...)  # doctest: +SKIP\n")  # fmt: skip
    return run


class _OpenCollection(Protocol):
    def __call__(self, uri: PathLike, *, storage_options: dict[str, str] | None = None) -> Collection: ...


class _OpenDataset(Protocol):
    def __call__(self, as_of: Ref = None, *, options: ReadOptions | None = None) -> Dataset: ...


class _Open:
    """``Collection.open(path)`` opens a collection; ``col.open(as_of=None)`` opens a version of
    it for reading (a :class:`refstore.Dataset`)."""

    @overload
    def __get__(self, obj: None, owner: type[Collection]) -> _OpenCollection: ...
    @overload
    def __get__(self, obj: Collection, owner: type[Collection] | None = None) -> _OpenDataset: ...
    def __get__(self, obj: Collection | None, owner: type[Collection] | None = None) -> Any:
        if obj is None:
            assert owner is not None
            return owner._open_collection
        return obj._open_dataset


class Collection(_table.Collection):
    """A refstore collection: chunk references of archival files in one versioned table.

    Create one with :func:`refstore.init` or open one with ``Collection.open(path)`` (a local
    folder or an object-store URL); each method is the command of the same name.

    >>> import refstore
    >>> col = refstore.init("oisst.refstore")            # doctest: +SKIP
    >>> col.scan(["data/"], concat_dim="time").version   # doctest: +SKIP
    2
    >>> col.tag("release-1"); col.open()["sst"][0, 0, :2, :2]  # doctest: +SKIP
    """

    __slots__ = ()

    open = _Open()  # type: ignore[assignment]  # a class: open a collection; an instance: open a version

    @classmethod
    def _open_collection(cls, uri: PathLike, *, storage_options: dict[str, str] | None = None) -> Collection:
        """The collection at ``uri`` (``CollectionNotFoundError`` / ``NotACollectionError``).

        >>> col = refstore.Collection.open("oisst.refstore")  # doctest: +SKIP
        """
        col = _table.Collection.open.__func__(cls, os.fspath(uri), storage_options=storage_options)  # type: ignore[attr-defined]
        assert isinstance(col, Collection)
        return col

    @classmethod
    def create(cls, uri: PathLike, *, storage_options: dict[str, str] | None = None) -> Collection:
        """An empty collection at ``uri``; a non-empty folder that is not one is refused.

        >>> col = refstore.Collection.create("new.refstore")  # doctest: +SKIP
        """
        col = super().create(os.fspath(uri), storage_options=storage_options)
        assert isinstance(col, Collection)
        return col

    def _open_dataset(self, as_of: Ref = None, *, options: ReadOptions | None = None) -> Dataset:
        """Version ``as_of`` for reading: ``ds["sst"][0:10]`` reads through the table.

        >>> ds = col.open("release-1")      # doctest: +SKIP
        >>> ds["sst"][0, 0, 100:102, 200:202]  # doctest: +SKIP
        """
        from ._api import Dataset

        return Dataset(self.snapshot(as_of), options=options)

    # ------------------------------------------------------------------ scanning
    def scan(
        self,
        sources: PathLike | Sequence[PathLike],
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
        timeout: float | None = DEFAULT_TIMEOUT,
        checksum: bool | None = None,
        follow_links: bool = False,
        client: Any = None,
        progress: Progress | None = None,
    ) -> ScanReport:
        """Scan files, folders (by extension, recursively) or URLs: at most one new version.
        Options as :func:`refstore.scan` (``timeout`` in seconds per source, None: no deadline;
        ``client``: a ``dask.distributed.Client``; ``follow_links``: follow symbolic links that
        lead out of a scanned folder).

        >>> rep = col.scan(["data/"], concat_dim="time")  # doctest: +SKIP
        >>> rep.to_json()["sources"]                       # doctest: +SKIP
        {'new': 30, 'changed': 0, 'unchanged': 0, 'failed': 0}
        """
        items = [sources] if isinstance(sources, str | os.PathLike) else list(sources)
        return _api.scan(self.uri, [os.fspath(s) for s in items], concat_dim=concat_dim,
                         time_from_name=time_from_name, prefer=prefer, order=order, order_by=order_by, prune=prune,
                         mosaic=mosaic, workers=workers,
                         strict=strict, progress=progress, storage_options=self.storage_options, client=client,
                         timeout=timeout, checksum=checksum, follow_links=follow_links)  # fmt: skip

    def import_kerchunk(self, refs: PathLike, *, allow: Sequence[str] = (),
                        progress: Progress | None = None) -> ImportReport:  # fmt: skip
        """Import kerchunk references (JSON, spec 0 or 1, or a Parquet reference folder): one version.
        Locations must lie in the store's own folder or bucket or under an ``allow`` prefix.

        >>> col.import_kerchunk("refs.json").version  # doctest: +SKIP
        2
        """
        from .imports import import_kerchunk

        return import_kerchunk(self, os.fspath(refs), allow=allow, progress=progress)

    def import_zarr(self, store: PathLike, *, progress: Progress | None = None) -> ImportReport:
        """Import a Zarr v2 or v3 store (a local folder): one version, each chunk object a source.

        >>> col.import_zarr("store.zarr").version  # doctest: +SKIP
        2
        """
        from .imports import import_zarr

        return import_zarr(self, os.fspath(store), progress=progress)

    def import_icechunk(self, repo: PathLike, *, branch: str | None = None, tag: str | None = None,
                        snapshot: str | None = None, allow: Sequence[str] = (),
                        progress: Progress | None = None) -> ImportReport:  # fmt: skip
        """Import one snapshot of an Icechunk repository (``branch``, default main, ``tag`` or
        ``snapshot`` id): one version. Virtual chunk locations must lie under an ``allow``
        prefix or the repository's own folder or bucket.

        >>> col.import_icechunk("repo.icechunk", tag="v1").arrays  # doctest: +SKIP
        3
        """
        from .imports import import_icechunk

        return import_icechunk(self, os.fspath(repo), branch=branch, tag=tag, snapshot=snapshot, allow=allow,
                               progress=progress)  # fmt: skip

    # ------------------------------------------------------------------ looking
    def info(self, as_of: Ref = None) -> Info:
        """Arrays (dims, shape, chunks, dtype, fill value, codecs, attributes) and counts of one version.

        >>> col.info().arrays["sst"]["dtype"]  # doctest: +SKIP
        '<i2'
        """
        from ._report import info_report

        return Info.of(info_report(self.snapshot(as_of)))

    def read(self, array: str, window: str | tuple[Any, ...] | None = None, *, as_of: Ref = None,
             options: ReadOptions | None = None) -> np.ndarray[Any, Any]:  # fmt: skip
        """The stored values (no scale/offset/mask) of ``window`` (numpy-style text such as
        ``"0:10,:,5"`` or a tuple of slices and ints; None: all) of ``array``; absent chunks
        read as the fill value. A window that selects no element of a non-empty array is
        refused (``BadInputError``).

        >>> col.read("sst", "0:2,0,100:102,200:202").shape  # doctest: +SKIP
        (2, 2, 2)
        """
        from .plan import parse_window

        key = parse_window(window) if window is None or isinstance(window, str) else window
        arr = self.open(as_of, options=options)[array]
        data = arr[key]
        if data.size == 0 and all(arr.shape):
            raise BadInputError(f"{array}: window {_window_text(window)} selects no element of its shape "
                                f"{'x'.join(map(str, arr.shape))}")  # fmt: skip
        return data

    def verify(self, as_of: Ref = None, *, array: str | Sequence[str] | None = None, sample: int | None = None,
               seed: int = 0, on_stale: str = "error", progress: Progress | None = None) -> VerifyReport:  # fmt: skip
        """Compare chunks read through the table with the format's own reader (held chunks also
        with their checksum); ``sample``: that many chunks chosen with ``seed``. ``exit_code``:
        1 on a mismatch, 2 when a source is gone.

        >>> rep = col.verify(sample=100)   # doctest: +SKIP
        >>> rep.mismatched, rep.exit_code  # doctest: +SKIP
        (0, 0)
        """
        from .read.verify import verify

        arrays = [array] if isinstance(array, str) else (list(array) if array is not None else None)
        return verify(self.snapshot(as_of), arrays=arrays, sample=sample, seed=seed,
                      options=ReadOptions(on_stale=on_stale), progress=progress)  # fmt: skip

    # ------------------------------------------------------------------ versions
    def log(self) -> list[LogEntry]:
        """Every version, newest first: number, timestamp, operation, message, tags.

        >>> [(e.version, e.operation) for e in col.log()]  # doctest: +SKIP
        [(2, 'scan'), (1, 'init')]
        """
        from .table import log_entries

        return log_entries(self)

    def tag(self, name: str, as_of: Ref = None) -> Tag:
        """Name version ``as_of`` (default latest); tags are immutable.

        >>> col.tag("release-2026-10")  # doctest: +SKIP
        Tag(name='release-2026-10', version=7)
        """
        from .table import create_tag

        return Tag(name, create_tag(self, name, as_of))

    def delete_tag(self, name: str) -> TagDeleted:
        """Remove tag ``name`` (the version stays until ``gc``).

        >>> col.delete_tag("release-2026-10").version  # doctest: +SKIP
        7
        """
        from .table import delete_tag

        return TagDeleted(name, delete_tag(self, name))

    def tags(self) -> list[Tag]:
        """Every tag, oldest version first.

        >>> [t.name for t in col.tags()]  # doctest: +SKIP
        ['release-2026-09', 'release-2026-10']
        """
        from .table import list_tags

        return [Tag(str(t["name"]), int(t["version"])) for t in list_tags(self)]

    def diff(self, a: int | str, b: int | str = LATEST) -> DiffReport:
        """What changed from ``a`` to ``b``: chunks added/removed/changed and held per array,
        metadata, sources, remap rules. ``.changed``: whether a form emitted from ``b`` would
        differ from one emitted from ``a``.

        >>> d = col.diff("release-1")  # doctest: +SKIP
        >>> d.changed, d.sources_added  # doctest: +SKIP
        (True, ['/data/day31.nc'])
        """
        from .table import diff

        return diff(self, a, b)

    def compact(self) -> CompactReport:
        """Merge small fragments, materialise deletions and refresh the indices.

        >>> col.compact().fragments_removed  # doctest: +SKIP
        12
        """
        from .table import compact

        return CompactReport.of(compact(self))

    def gc(self, *, keep_last: int | None = None, grace: timedelta | str | None = None) -> GcReport:
        """Remove old untagged versions, keeping the newest ``keep_last`` (default 1), every
        tagged one and every one younger than ``grace`` (a timedelta or ``"90s"``, ``"10m"``,
        ``"1h"``, ``"7d"``; default 1 hour; 0 only when nothing else writes the collection).

        >>> col.gc(keep_last=2, grace="0").versions_removed  # doctest: +SKIP
        (1, 2, 3)
        """
        from .table import DEFAULT_GRACE, gc

        keep = 1 if keep_last is None else keep_last
        period = DEFAULT_GRACE if grace is None else parse_duration(grace) if isinstance(grace, str) else grace
        rep = gc(self, keep_last=keep, grace=period)
        tagged = {t.version for t in self.tags()}
        kept = sorted(int(v) for v in rep["versions_kept"])
        newest = set(kept[-keep:])
        by_grace = tuple(v for v in kept if v not in tagged and v not in newest)
        return GcReport.of(rep, by_grace)

    def repair(self) -> RepairReport:
        """Make the newest readable version latest again (one new version) when the latest one
        misses files; nothing to do when it reads (``restored`` None).

        >>> col.repair().restored  # doctest: +SKIP
        9
        """
        from .table.repair import repair

        return RepairReport.of(repair(self))

    # ------------------------------------------------------------------ held bytes
    def hold(self, *, array: str | Sequence[str] | None = None,
             bbox: str | Sequence[float] | None = None, time: str | tuple[TimeBound, TimeBound] | None = None,
             window: str | tuple[Any, ...] | None = None, progress: Progress | None = None) -> HoldReport:  # fmt: skip
        """Copy the bytes of the selected chunks into the collection (one version): ``array``
        names, ``bbox`` W,S,E,N in the array's own horizontal coordinates, ``time`` (start,
        end) inclusive, ``window`` numpy-style. A selection meeting no chunk is refused
        (``BadInputError``); chunks already held are not counted again.

        >>> col.hold(array="sst", bbox=(-10, 35, 5, 45)).chunks  # doctest: +SKIP
        24
        """
        from .table import hold

        sel = _selection(array, bbox, time, window)
        _refuse_if_empty(self, sel)
        return hold(self, sel, progress=progress)

    def release(self, *, array: str | Sequence[str] | None = None,
                bbox: str | Sequence[float] | None = None, time: str | tuple[TimeBound, TimeBound] | None = None,
                window: str | tuple[Any, ...] | None = None) -> HoldReport:  # fmt: skip
        """Drop the held bytes of the selected chunks (one version; older versions keep them);
        selectors as :meth:`hold`.

        >>> col.release(array="sst").bytes  # doctest: +SKIP
        1048576
        """
        from .table import release

        sel = _selection(array, bbox, time, window)
        _refuse_if_empty(self, sel)
        return release(self, sel)

    # ------------------------------------------------------------------ remap rules
    def remap_add(self, prefix: str, replacement: str) -> Commit:
        """Publish locations under ``prefix`` (as scanned) as ``replacement`` (one version).

        >>> col.remap_add("/data/oisst/", "https://host/oisst/")  # doctest: +SKIP
        Commit(version=5)
        """
        from .table.remap import add_rule

        return Commit(add_rule(self, prefix, replacement))

    def remap_remove(self, prefix: str) -> Commit:
        """Remove the rule for ``prefix`` (one version).

        >>> col.remap_remove("/data/oisst/")  # doctest: +SKIP
        Commit(version=6)
        """
        from .table.remap import remove_rule

        return Commit(remove_rule(self, prefix))

    def remap_list(self, as_of: Ref = None) -> list[RemapRule]:
        """The rules of one version, by prefix.

        >>> [r.replacement for r in col.remap_list()]  # doctest: +SKIP
        ['https://host/oisst/']
        """
        from .table.remap import remap_rules

        return remap_rules(self.snapshot(as_of))

    # ------------------------------------------------------------------ publishing
    def emit(self, form: str, out: PathLike, as_of: Ref = None, *, remap: bool = True,
             skip_unexpressible: bool = False, on_stale: str = "error",
             progress: Progress | None = None) -> EmitReport:  # fmt: skip
        """Write published form ``form`` (``kerchunk-json``, ``kerchunk-parquet``, ``icechunk``,
        ``parquet``, ``sqlite``, ``vrt``) of version ``as_of`` to ``out``; byte-identical for the
        same version and options.

        >>> col.emit("kerchunk-json", "oisst.json", "release-1").refs  # doctest: +SKIP
        4320
        """
        from .emit import emit

        return emit(self, form, os.fspath(out), as_of=as_of, remap=remap, skip_unexpressible=skip_unexpressible,
                    on_stale=on_stale, progress=progress)  # fmt: skip

    def catalog(self, out: PathLike, as_of: Ref = None, *, assets: Mapping[str, str] | Sequence[str] | None = None,
                remap: bool = True, progress: Progress | None = None) -> CatalogReport:  # fmt: skip
        """Write a STAC Collection of version ``as_of`` to ``out``; ``assets``: form -> URL where
        that form is published (or ``"FORM=URL"`` strings).

        >>> col.catalog("stac.json", assets={"kerchunk-json": "https://host/oisst.json"}).bbox  # doctest: +SKIP
        (-180.0, -90.0, 180.0, 90.0)
        """
        from .emit.stac import catalog, parse_assets

        if assets is None or isinstance(assets, Mapping):
            chosen = dict(assets or {})
        else:
            chosen = parse_assets([assets] if isinstance(assets, str) else list(assets))
        return catalog(self, os.fspath(out), as_of=as_of, assets=chosen, remap=remap, progress=progress)

    def coverage(self, array: str, out: PathLike, *, as_of: Ref = None, time: str | None = None,
                 size: str | tuple[int, int] = (960, 600)) -> CoverageReport:  # fmt: skip
        """Write a PNG of the chunk states (absent / referenced / inline / held) of ``array``
        over its two spatial dimensions to ``out``; ``time``: an ISO date or START/END;
        ``size``: pixels (width, height) or ``"WIDTHxHEIGHT"``.

        >>> col.coverage("sst", "sst.png").coverage.totals()  # doctest: +SKIP
        {'absent': 0.0, 'referenced': 0.9, 'inline': 0.0, 'held': 0.1}
        """
        from .report.coverage import coverage
        from .report.picture import parse_size, render_png, write_png

        dims = parse_size(size) if isinstance(size, str) else parse_size(f"{size[0]}x{size[1]}")
        path = os.fspath(out)
        if os.path.isdir(path) or not os.path.isdir(os.path.dirname(os.path.abspath(path))):  # before the work
            raise BadInputError(f"{path}: cannot write: {'is a folder' if os.path.isdir(path) else 'no such folder'}")
        from .report._write import check_replaceable, png_own

        check_replaceable(path, png_own, "a refstore coverage picture")  # only refstore's own picture is replaced
        cov = coverage(self.snapshot(as_of), array, tag=tag_name(as_of), time=time)
        pic = render_png(cov, size=dims)
        write_png(pic, path)
        return CoverageReport(path, cov, pic)

    def report(self, out: PathLike, as_of: Ref = None, *, progress: Progress | None = None) -> PageReport:
        """Write one self-contained HTML page about version ``as_of`` to ``out``: arrays,
        sources, versions and tags, a diff, coverage pictures.

        >>> col.report("report.html").pictures  # doctest: +SKIP
        2
        """
        from .report.html import write_report

        return PageReport.of(write_report(self, os.fspath(out), as_of=as_of, progress=progress))

    # ------------------------------------------------------------------ from async code
    ascan = _in_thread(scan)
    aimport_kerchunk = _in_thread(import_kerchunk)
    aimport_zarr = _in_thread(import_zarr)
    aimport_icechunk = _in_thread(import_icechunk)
    ainfo = _in_thread(info)
    aread = _in_thread(read)
    averify = _in_thread(verify)
    adiff = _in_thread(diff)
    acompact = _in_thread(compact)
    agc = _in_thread(gc)
    ahold = _in_thread(hold)
    arelease = _in_thread(release)
    aemit = _in_thread(emit)
    acatalog = _in_thread(catalog)
    acoverage = _in_thread(coverage)
    areport = _in_thread(report)

    def __repr__(self) -> str:
        return f"<refstore.Collection {self.uri}>"


def _window_text(window: str | tuple[Any, ...] | None) -> str:
    return repr(window) if not isinstance(window, str) else window


def _selection(array: str | Sequence[str] | None, bbox: str | Sequence[float] | None,
               time: str | tuple[TimeBound, TimeBound] | None,
               window: str | tuple[Any, ...] | None) -> HoldSelection:  # fmt: skip
    """The chunks ``hold``/``release`` act on; at least one selector is required."""
    from .plan import parse_window
    from .plan.region import parse_bbox, parse_time_range
    from .table import HoldSelection

    arrays = (array,) if isinstance(array, str) else tuple(array or ())
    if not (arrays or bbox is not None or time is not None or window is not None):
        raise BadInputError("select chunks with array, bbox, time and/or window")
    if bbox is not None and not isinstance(bbox, str):
        bbox = ",".join(repr(float(x)) for x in bbox)
    if time is not None and not isinstance(time, str):
        time = "/".join(t if isinstance(t, str) else t.isoformat() for t in time)
    return HoldSelection(
        arrays=arrays,
        bbox=parse_bbox(bbox) if bbox is not None else None,
        time=parse_time_range(time) if time is not None else None,
        window=(parse_window(window) if isinstance(window, str) else tuple(window)) if window is not None else None,
    )


def _refuse_if_empty(col: Collection, sel: HoldSelection) -> None:
    """``BadInputError`` when ``sel`` meets no element of any array it applies to at the latest
    version (a bbox or time range outside the coordinates, a window past the shape, a time range
    and no array with a time coordinate): refused before anything is done."""
    snap = col.snapshot()
    if not _selects_nothing(snap, sel):
        return
    said = [f"arrays {', '.join(sel.arrays)}" if sel.arrays else "",
            f"bbox {','.join(f'{x:g}' for x in sel.bbox)}" if sel.bbox else "",
            f"time {sel.time[0].date()}/{sel.time[1].date()}" if sel.time else "",
            "window" if sel.window is not None else ""]  # fmt: skip
    raise BadInputError(f"the selection ({'; '.join(s for s in said if s)}) meets no element of any array "
                        f"at version {snap.version}: nothing to do")  # fmt: skip


def _selects_nothing(snap: Snapshot, sel: HoldSelection) -> bool:
    """Whether ``sel`` selects an empty box of every array it applies to (``table.hold``'s
    selection, without its row queries). A named array the selection cannot apply to is left
    to ``hold``/``release``, which name the reason."""
    from .read.array import Array
    from .table.hold import _axis_ranges

    arrays = snap.arrays()
    names = list(sel.arrays) or [n for n, m in arrays.items() if m.status == "ok"]
    cache: dict[str, Any] = {}

    def read(name: str) -> Any:
        if name not in cache:
            cache[name] = Array(snap, snap.array(name))[...]
        return cache[name]

    axes = sum(1 for k in (sel.window or ()) if k is not Ellipsis)
    for name in names:
        meta = snap.array(name)
        named = name in sel.arrays
        if meta.status != "ok":
            if named:
                return False
            continue
        if sel.window is not None and not named and axes > len(meta.shape):
            continue
        per_axis = _axis_ranges(snap, meta, sel, read, set())
        if per_axis is None:
            if named:
                return False
            continue
        if all(any(b > a for a, b in r) for r in per_axis):
            return False
    return True

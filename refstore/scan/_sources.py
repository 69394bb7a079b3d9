"""Finding sources and describing them (size, mtime, etag) before any scan; opening them as
files (local files directly, object-store and HTTP(S) URLs through ranged reads)."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from typing import TYPE_CHECKING, BinaryIO

from .. import _objstore
from ..errors import BadInputError, ScanError, SourceReadError
from ._types import SourceInfo

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = [
    "GRIB_EXTENSIONS",
    "HDF5_EXTENSIONS",
    "SOURCE_EXTENSIONS",
    "expand_sources",
    "find_sources",
    "local_source_info",
    "normalize_location",
    "open_source",
    "source_info",
]

HDF5_EXTENSIONS = (".nc", ".nc4", ".h5", ".hdf5", ".he5", ".hdf", ".cdf", ".netcdf")
GRIB_EXTENSIONS = (".grib", ".grib1", ".grib2", ".grb", ".grb1", ".grb2")
SOURCE_EXTENSIONS = (*HDF5_EXTENSIONS, ".nc3", ".tif", ".tiff", ".gtiff", ".cog", *GRIB_EXTENSIONS)


def normalize_location(location: str) -> str:
    """Locations are kept as scanned; local paths are made absolute so reads work anywhere."""
    if "://" in location:
        if location.startswith("file://"):
            return os.path.abspath(location[len("file://") :])
        return location
    return os.path.abspath(location)


_CONTROL = re.compile("[\x00-\x1f\x7f]")
"""A control character (C0 or DEL) in a file name."""

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder"}  # fmt: skip


def local_source_info(location: str) -> SourceInfo:
    """Size and mtime of a local file; anything but a regular file is refused (opening a FIFO
    would block until someone writes to it)."""
    try:
        st = os.stat(location)
    except OSError as e:
        raise ScanError(location, f"cannot read: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "a special file")
        raise ScanError(location, f"not a regular file ({kind}); not scanned")
    return SourceInfo(location=location, size=int(st.st_size), mtime_ns=int(st.st_mtime_ns), etag=None)


def source_info(location: str) -> SourceInfo:
    """Size, mtime and etag of a source now: ``os.stat`` locally, one HEAD request remotely."""
    if not _objstore.is_remote(location):
        return local_source_info(location)
    try:
        size, mtime, etag = _objstore.head(location)
    except SourceReadError as e:
        raise ScanError(location, str(e).removeprefix(f"{location}: ")) from None
    return SourceInfo(location=location, size=size, mtime_ns=-1 if mtime is None else mtime, etag=etag)


@contextlib.contextmanager
def open_source(location: str) -> Iterator[tuple[BinaryIO, SourceInfo]]:
    """The source as a binary file and its identity. Remote sources are read through ranged
    requests with a block cache (``RangeFile``), never downloaded whole."""
    info = source_info(location)
    if _objstore.is_remote(location):
        from ._rangefile import RangeFile

        fh: BinaryIO = RangeFile(location, info.size)  # type: ignore[assignment]
    else:
        try:
            fh = open(location, "rb")  # noqa: SIM115  (closed below)
        except OSError as e:
            raise ScanError(location, f"cannot read: {e.strerror or e}") from None
    try:
        yield fh, info
    finally:
        fh.close()


def find_sources(
    inputs: Iterable[str],
    *,
    extensions: tuple[str, ...] = SOURCE_EXTENSIONS,
    failed: list[tuple[str, str]] | None = None,
    follow_links: bool = False,
) -> list[tuple[str, SourceInfo | None]]:
    """Like ``expand_sources``, with the identity of objects found by listing (None where it
    is not known yet): a bucket listing already says size, mtime and etag."""
    out: list[tuple[str, SourceInfo | None]] = []
    seen: set[str] = set()
    for item in inputs:
        loc = normalize_location(item)
        if _objstore.is_remote(loc):
            found: list[tuple[str, SourceInfo | None]] = [
                (i.location, i) for i in _remote_sources(item, loc, extensions)
            ]
        else:
            problems: list[tuple[str, str]] = []
            found = [(x, None) for x in expand_sources([item], extensions=extensions, failed=problems,
                                                       follow_links=follow_links)]  # fmt: skip
            for where, why in problems:  # each once, whether found or also given
                if where not in seen:
                    seen.add(where)
                    if failed is None:
                        raise BadInputError(f"{where}: {why}")
                    failed.append((where, why))
        for x, info in found:
            if x not in seen:
                seen.add(x)
                out.append((x, info))
    return out


def _remote_sources(item: str, loc: str, extensions: tuple[str, ...]) -> list[SourceInfo]:
    """An object URL as given, or every object under a prefix URL with a known extension."""
    name = loc.rstrip("/").rsplit("/", 1)[-1]
    if not loc.endswith("/") and name.lower().endswith(extensions):
        return [source_info(loc)]
    if loc.startswith(("http://", "https://")):
        raise BadInputError(f"{item}: HTTP has no folder listing; give the URLs of the files")
    try:
        listed = list(_objstore.list_objects(loc))
    except SourceReadError as e:
        raise BadInputError(str(e)) from None
    found = [
        SourceInfo(location=u, size=size, mtime_ns=-1 if mtime is None else mtime, etag=etag)
        for u, size, mtime, etag in listed
        if u.rsplit("/", 1)[-1].lower().endswith(extensions) and not u.rsplit("/", 1)[-1].startswith(".")
    ]
    if not found:
        raise BadInputError(f"{item}: no objects ending in {', '.join(extensions)} under this prefix")
    return found


def expand_sources(
    inputs: Iterable[str],
    *,
    extensions: tuple[str, ...] = SOURCE_EXTENSIONS,
    failed: list[tuple[str, str]] | None = None,
    follow_links: bool = False,
) -> list[str]:
    """Files as given, folders walked recursively (sorted) for files with a known extension;
    object-store URLs as given, prefixes listed (sorted) for objects with a known extension.

    ``failed``: where ``(location, reason)`` goes for what was found but cannot be scanned: a
    subfolder that cannot be listed, an entry that is not a regular file, a name with control
    characters, a symbolic link out of the folder (unless ``follow_links``). Without it the
    first of them raises ``BadInputError``."""
    problems: list[tuple[str, str]] = []
    out: list[str] = []
    seen: set[str] = set()
    for item in inputs:
        loc = normalize_location(item)
        if _objstore.is_remote(loc):
            for info in _remote_sources(item, loc, extensions):
                if info.location not in seen:
                    seen.add(info.location)
                    out.append(info.location)
            continue
        if os.path.isdir(loc) and _is_zarr_store(loc):
            problems.append((loc, ZARR_STORE_HINT))
            continue
        if os.path.isdir(loc):
            found, walk_problems = _walk(loc, extensions, follow_links)
            for where, why in walk_problems:  # each once, whether found or also given
                if where not in seen:
                    seen.add(where)
                    problems.append((where, why))
            if not found and not walk_problems:
                raise BadInputError(f"{item}: folder holds no files ending in {', '.join(extensions)}")
            candidates = found
        elif os.path.exists(loc):
            candidates = [loc]
        else:
            raise BadInputError(f"{item}: no such file or folder")
        for c in candidates:
            if _CONTROL.search(c):
                why = "a name with control characters cannot be addressed for reading; rename it"
                problems.append((repr(c)[1:-1], why))
            elif c not in seen:
                seen.add(c)
                out.append(c)
    if problems and failed is None:
        raise BadInputError(f"{problems[0][0]}: {problems[0][1]}")
    if failed is not None:
        failed += problems
    return out


ZARR_STORE_HINT = "a Zarr store: not scanned; `refstore import zarr` brings it in (each chunk object a reference)"


def _is_zarr_store(path: str) -> bool:
    from ..imports.zarr_store import is_zarr_store

    return is_zarr_store(path)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _walk(
    folder: str, extensions: tuple[str, ...], follow_links: bool = False
) -> tuple[list[str], list[tuple[str, str]]]:
    """Files under ``folder`` with a known extension (sorted, hidden ones left out), and the
    subfolders that could not be listed and entries that are not regular files. A symbolic link
    whose target lies outside ``folder`` is reported, not followed, unless ``follow_links`` (which
    also descends into linked folders, each real folder once)."""
    found: list[str] = []
    problems: list[tuple[str, str]] = []
    real_root = os.path.realpath(folder)
    visited: set[str] = set()

    def unlisted(e: OSError) -> None:
        problems.append((str(e.filename), f"folder cannot be listed ({e.strerror or e}); its files were not scanned"))

    for root, dirs, files in os.walk(folder, onerror=unlisted, followlinks=follow_links):
        if follow_links:  # a link back up would loop: each real folder once
            here = os.path.realpath(root)
            dirs[:] = [] if here in visited else dirs
            visited.add(here)
        dirs.sort()
        for name in sorted(files):
            if not name.lower().endswith(extensions) or name.startswith("."):
                continue
            path = os.path.join(root, name)
            real = os.path.realpath(path)
            if not follow_links and not _inside(real, real_root):
                problems.append((path, f"a symbolic link out of the scanned folder (to {real}); not followed "
                                       "(scan --follow-links follows it)"))  # fmt: skip
                continue
            try:
                mode = os.stat(path).st_mode
            except OSError:
                mode = stat.S_IFREG  # a dangling link: its scan says why
            if stat.S_ISREG(mode):
                found.append(path)
            else:
                kind = _KINDS.get(stat.S_IFMT(mode), "a special file")
                problems.append((path, f"not a regular file ({kind}); not scanned"))
    return found, problems

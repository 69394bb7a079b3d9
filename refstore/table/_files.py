"""The collection's files as Lance lists them: which a version needs, which are present, and
deleting some (manifests first, so an interrupted deletion never leaves a listed version whose
files are gone). Paths are relative to the collection's folder (``data/x.lance``)."""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ..errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    import lance

    from .collection import Collection

__all__ = [
    "absent_files", "base_path", "delete_files", "missing_files", "needed_files", "present_files", "unfinished_uploads",
    "unlinked_manifests",
]  # fmt: skip

_KIND_ORDER = {"manifest": 0, "unlinked manifest": 0, "transaction": 1, "deletion": 2, "index": 3, "data": 4}
"""Deletion order: a version stops being listed before any file it needs goes."""


def _local(uri: str) -> bool:
    return "://" not in uri or uri.startswith("file://")


def _root(uri: str) -> str:
    """A local collection's folder, symlinks resolved."""
    return os.path.realpath(uri.removeprefix("file://"))


def base_path(uri: str) -> str:
    """The collection's folder as Lance's object store spells paths (no scheme, no leading '/';
    for object stores, no bucket)."""
    if _local(uri):
        return _root(uri).strip("/")
    return urlparse(uri).path.strip("/")


def present_files(ds: lance.LanceDataset) -> dict[str, datetime]:
    """Every file in the collection's folder -> its last modification (UTC)."""
    try:
        t = ds.all_files().read_all()
    except (OSError, ValueError) as e:
        raise StorageError(f"{ds.uri}: cannot list files: {str(e).splitlines()[0]}") from None
    return dict(zip(t.column("path").to_pylist(), t.column("last_modified").to_pylist(), strict=True))


def needed_files(ds: lance.LanceDataset) -> list[str]:
    """The data and deletion files the version ``ds`` is checked out at reads."""
    out: list[str] = []
    for frag in ds.get_fragments():
        meta = frag.metadata
        out += [f"data/{f.path}" for f in meta.files if getattr(f, "base_id", None) is None]
        if meta.deletion_file is not None and getattr(meta.deletion_file, "base_id", None) is None:
            out.append(str(meta.deletion_file.path(meta.id)))
    return out


def missing_files(ds: lance.LanceDataset) -> list[str]:
    """The files version ``ds`` needs that are gone (a gc interrupted by an older refstore)."""
    present = present_files(ds)
    return sorted(p for p in needed_files(ds) if p not in present)


def absent_files(col: Collection, paths: Iterable[str]) -> list[str]:
    """Those of ``paths`` (relative to the collection) that do not exist: one ``stat`` (or
    ``HEAD``) each, for the few files a commit just added."""
    wanted = sorted(set(paths))
    if _local(col.uri):
        root = _root(col.uri)
        return [p for p in wanted if not os.path.exists(os.path.join(root, p))]
    import obstore

    from .._objstore import store_for

    store, prefix = store_for(col.uri.rstrip("/") + "/")
    out: list[str] = []
    for p in wanted:
        try:
            obstore.head(store, prefix + p)
        except FileNotFoundError:
            out.append(p)
        except Exception as e:
            raise StorageError(f"{col.uri}: cannot check {p}: {str(e).splitlines()[0]}") from None
    return out


def unlinked_manifests(col: Collection, grace_s: float) -> list[str]:
    """Manifests a failed commit wrote to a temporary name (``<name>#<n>``, local disk only:
    object stores commit by a conditional put) and can no longer link, since ``<name>`` is
    taken; older than ``grace_s`` seconds. Lance's listing hides such names. (One whose name is
    free may belong to a writer still in flight, which would link it: kept.)"""
    if not _local(col.uri):
        return []
    folder = os.path.join(_root(col.uri), "_versions")
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    names = {e.name for e in entries}
    return sorted(f"_versions/{e.name}" for e in entries
                  if "#" in e.name and e.name.split("#", 1)[0] in names and e.is_file()
                  and now - e.stat().st_mtime >= grace_s)  # fmt: skip


_TEMPORARY_NAME = re.compile(r".+#[0-9]+")


def unfinished_uploads(col: Collection, grace_s: float) -> list[tuple[str, int]]:
    """Data files a killed write left under their temporary name (``<name>#<n>``: new fragments
    are written through object_store's local file system, ``_replace.fragment_uri``, which
    renames a file once it is complete), older than ``grace_s`` seconds, with their sizes.
    Lance's listing hides such names. Local disk only: an object store's unfinished multipart
    upload is no object."""
    if not _local(col.uri):
        return []
    root = _root(col.uri)
    now = time.time()
    out: list[tuple[str, int]] = []
    for folder, _, names in os.walk(os.path.join(root, "data")):
        for name in names:
            if not _TEMPORARY_NAME.fullmatch(name):
                continue
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if now - st.st_mtime >= grace_s:
                out.append((os.path.relpath(path, root), st.st_size))
    return sorted(out)


def delete_files(col: Collection, paths: Iterable[tuple[str, str]]) -> None:
    """Delete ``(kind, path)`` files (kinds as Lance's cleanup names them), manifests first, then
    transactions, deletion files, indices and data files; each one at a time, in that order."""
    ordered = sorted(paths, key=lambda kp: (_KIND_ORDER.get(kp[0], len(_KIND_ORDER)), kp[1]))
    if _local(col.uri):
        root = _root(col.uri)
        for _, rel in ordered:
            try:
                os.unlink(os.path.join(root, rel))
            except FileNotFoundError:
                pass
            except OSError as e:
                raise StorageError(f"{col.uri}: cannot delete {rel}: {e.strerror}") from None
        return
    import obstore

    from .._objstore import store_for

    store, prefix = store_for(col.uri.rstrip("/") + "/")
    for _, rel in ordered:
        try:
            obstore.delete(store, prefix + rel)
        except FileNotFoundError:
            pass
        except Exception as e:
            raise StorageError(f"{col.uri}: cannot delete {rel}: {str(e).splitlines()[0]}") from None

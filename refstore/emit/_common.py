"""Helpers every form shares: a safe, atomic OUT, and the checks of zarr-shaped forms.

OUT is written beside itself and renamed over the old OUT only on success. What may be
replaced (``check_out`` before any work, ``atomic_output`` again at the swap):

- nothing, an empty folder (folder forms);
- a regular file only when it is a previous output of refstore, recognised by its mark
  (``FILE_FORMS``): kerchunk JSON opens with ``{"version":1,"generator":"refstore"``, a VRT
  holds the comment ``<!--generator: refstore-->``, flat Parquet has the key-value metadata key
  ``refstore``, SQLite has ``generator = refstore`` in its ``meta`` table, a STAC catalog is
  a JSON ``Collection`` with ``refstore:version``. A user's file of the
  same name (``notes.txt``, a netCDF file, another tool's kerchunk JSON) is never overwritten;
- a non-empty folder only when it is a previous output of the same form, recognised by its
  content (``FOLDER_FORMS``): a kerchunk-parquet folder holds a ``.zmetadata`` JSON object with
  ``record_size`` and ``metadata`` and no files but ``refs.<k>.parq``; an Icechunk repository
  has its layout (``snapshots/`` and ``repo``), and the form then commits into it.

Everything else is refused (``BadInputError``, one line naming OUT) before anything is
written: a folder where a file goes or a file where a folder goes, a symbolic link, a FIFO,
socket or device, OUT inside the collection's folder (or holding it), OUT equal to a source of
the version. OS errors creating, writing or renaming are ``StorageError`` naming OUT.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import stat
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadInputError, RefstoreError, StorageError, UnexpressibleError
from ..zarr_meta import v2_filters, v3_codecs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = [
    "FILE_FORMS",
    "FOLDER_FORMS",
    "JSON_MARK",
    "VRT_MARK",
    "atomic_output",
    "check_out",
    "check_zarr",
    "is_icechunk_repo",
    "is_kerchunk_parquet",
]

_REFS_FILE = re.compile(r"^refs\.\d+\.parq$")

JSON_MARK = '{"version":1,"generator":"refstore"'
"""How a kerchunk JSON refstore wrote begins (fsspec and kerchunk ignore the extra key)."""
VRT_MARK = "generator: refstore"
"""The text of the XML comment a VRT refstore wrote holds."""
_HEAD = 4096


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(_HEAD)
    except OSError:
        return b""


def is_kerchunk_json(path: str) -> bool:
    """A kerchunk JSON refstore wrote: it begins with ``JSON_MARK``."""
    return _head(path).startswith(JSON_MARK.encode("ascii"))


def is_vrt(path: str) -> bool:
    """A VRT refstore wrote: a ``VRTDataset`` whose first lines hold the ``VRT_MARK`` comment."""
    head = _head(path)
    return head.lstrip().startswith(b"<VRTDataset") and f"<!--{VRT_MARK}-->".encode("ascii") in head


def is_stac_catalog(path: str) -> bool:
    """A STAC Collection ``refstore catalog`` wrote: a JSON object (at most 64 MiB) of type
    ``Collection`` with the key ``refstore:version``."""
    try:
        if os.path.getsize(path) > 64 << 20 or not _head(path).lstrip().startswith(b"{"):
            return False
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("type") == "Collection" and "refstore:version" in doc


def is_flat_parquet(path: str) -> bool:
    """A flat Parquet file refstore wrote: key-value metadata ``refstore`` in its footer."""
    import pyarrow.parquet as pq

    if _head(path)[:4] != b"PAR1":
        return False
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException):
        return False
    return b"refstore" in meta


def is_sqlite(path: str) -> bool:
    """An SQLite file refstore wrote: ``generator = refstore`` in its ``meta`` table."""
    import sqlite3

    if not _head(path).startswith(b"SQLite format 3\x00"):
        return False
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'generator'").fetchone()
    except sqlite3.Error:
        return False
    finally:
        con.close()
    return row is not None and row[0] == "refstore"


def is_kerchunk_parquet(path: str) -> bool:
    """A folder refstore's kerchunk-parquet form wrote: ``.zmetadata`` (a JSON object with
    ``record_size`` and ``metadata``) and, in sub-folders, only ``refs.<k>.parq`` files."""
    try:
        with open(os.path.join(path, ".zmetadata"), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return False
    if not (
        isinstance(doc, dict) and isinstance(doc.get("record_size"), int) and isinstance(doc.get("metadata"), dict)
    ):
        return False
    for folder, dirs, files in os.walk(path, followlinks=False):
        for d in dirs:
            if os.path.islink(os.path.join(folder, d)):
                return False
        for name in files:
            top = folder == path and name == ".zmetadata"
            if not top and (not _REFS_FILE.match(name) or folder == path):
                return False
    return True


def is_icechunk_repo(path: str) -> bool:
    """A local Icechunk repository by its layout (``snapshots/`` beside Icechunk 2's ``repo``
    file or Icechunk 1's ``refs/``); the icechunk form then opens it and commits into it."""
    top = os.path.join(path, "snapshots")
    return os.path.isdir(top) and (
        os.path.isfile(os.path.join(path, "repo")) or os.path.isdir(os.path.join(path, "refs"))
    )


FOLDER_FORMS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "kerchunk-parquet": ("a kerchunk-parquet output", is_kerchunk_parquet),
    "icechunk": ("an Icechunk repository", is_icechunk_repo),
}
"""Forms whose OUT is a folder -> (what a previous output is called, how to recognise it)."""


FILE_FORMS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "kerchunk-json": ("a kerchunk JSON refstore wrote", is_kerchunk_json),
    "parquet": ("a flat Parquet file refstore wrote", is_flat_parquet),
    "sqlite": ("an SQLite file refstore wrote", is_sqlite),
    "vrt": ("a VRT refstore wrote", is_vrt),
    "catalog": ("a STAC catalog refstore wrote", is_stac_catalog),
}
"""Forms whose OUT is a file -> (what a previous output is called, how to recognise it)."""


def _any_folder_form(path: str) -> bool:
    return any(recognise(path) for _, recognise in FOLDER_FORMS.values())


def _any_file_form(path: str) -> bool:
    return any(recognise(path) for _, recognise in FILE_FORMS.values())


def _refuse_existing(
    out: str, *, directory: bool, previous: tuple[str, Callable[[str], bool]] | None, what: str
) -> None:
    """Raise ``BadInputError`` unless what is at ``out`` (absolute) may be replaced by ``what``
    (a form's name); ``previous`` names and recognises a folder that may be replaced."""
    try:
        st = os.lstat(out)
    except (FileNotFoundError, NotADirectoryError):  # nothing there (creating its folder may fail)
        return
    except OSError as e:
        raise StorageError(f"{out}: cannot inspect it: {e.strerror or e}") from None
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        raise BadInputError(f"{out}: is a symbolic link; give the path it points to or a new name")
    if stat.S_ISDIR(mode):
        if not directory:
            raise BadInputError(f"{out}: is a folder; {what} writes a file here, give a file name")
        try:
            empty = not os.listdir(out)
        except OSError as e:
            raise StorageError(f"{out}: cannot list it: {e.strerror or e}") from None
        called, recognise = previous or ("a previous refstore output", _any_folder_form)
        if not empty and not recognise(out):
            raise BadInputError(f"{out}: is a folder holding other files, not {called}; give a new or empty folder")
        return
    if not stat.S_ISREG(mode):
        raise BadInputError(f"{out}: is not a regular file (a FIFO, socket or device); give another name")
    if directory:
        raise BadInputError(f"{out}: is a file; {what} writes a folder here, give a folder name")
    called, recognise = previous or ("a previous refstore output", _any_file_form)
    if not recognise(out):
        raise BadInputError(f"{out}: is a file refstore did not write (not {called}); it is never "
                            "overwritten: give a new name, or remove it first")  # fmt: skip


def _local(location: str) -> str | None:
    if location.startswith("file://"):
        return location[len("file://") :]
    return None if "://" in location else location


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_out(src: EmitSource, fmt: str, out: str) -> None:
    """Refuse an OUT that ``fmt`` must not write (see the module docstring), before any work:
    what is there now, the collection's folder, and the version's sources."""
    target = os.path.abspath(out)
    real = os.path.realpath(target)
    col = _local(src.uri)
    if col is not None:
        col_real = os.path.realpath(col)
        if _inside(real, col_real):
            raise BadInputError(f"{target}: is inside the collection folder {col}; write the {fmt} elsewhere")
        if _inside(col_real, real):
            raise BadInputError(f"{target}: holds the collection {col}; write the {fmt} elsewhere")
    locations = src.sources().column("location")
    if len(locations):
        if pc.any(pc.is_in(locations, pa.array([target, real, "file://" + target, "file://" + real]))).as_py():
            raise BadInputError(f"{target}: is a source of version {src.version}; write the {fmt} elsewhere")
        if os.path.isfile(real):  # the same file under another name (a symlinked folder)
            same = locations.filter(pc.ends_with(locations, os.sep + os.path.basename(real)))
            for loc in same.to_pylist():
                path = _local(loc)
                with contextlib.suppress(OSError):
                    if path is not None and os.path.samefile(path, real):
                        raise BadInputError(f"{target}: is the source {loc} of version {src.version}; "
                                            f"write the {fmt} elsewhere")  # fmt: skip
    directory = fmt in FOLDER_FORMS
    _refuse_existing(target, directory=directory, previous=FOLDER_FORMS.get(fmt) or FILE_FORMS.get(fmt), what=fmt)


@contextlib.contextmanager
def atomic_output(out: str, *, directory: bool = False, previous: Callable[[str], bool] | None = None) -> Iterator[str]:
    """A temporary path beside ``out`` to write to (a file path, or an existing empty folder
    with ``directory``); on success it replaces ``out``, on failure it is removed and ``out`` is
    left as it was. ``previous`` recognises a folder this output may replace (default: a
    previous output of any of ``FOLDER_FORMS``); anything else that is not replaceable (see
    the module docstring) is refused with ``BadInputError`` before the body runs."""
    out = os.path.abspath(out)
    what = "refstore"
    prev = None if previous is None else ("a previous output of this form", previous)
    _refuse_existing(out, directory=directory, previous=prev, what=what)
    parent = os.path.dirname(out)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise StorageError(f"{out}: cannot create its folder: {e.strerror or e}") from None
    _clean_leftovers(out)
    try:
        tmp = _beside(out, directory=directory)
    except OSError as e:
        raise StorageError(f"{out}: cannot write beside it: {e.strerror or e}") from None
    try:
        try:
            yield tmp
            _refuse_existing(out, directory=directory, previous=prev, what=what)  # again: it may have changed
            _swap(tmp, out, directory=directory)
        except RefstoreError:
            raise
        except OSError as e:
            raise StorageError(f"{out}: cannot write it: {e.strerror or e}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            if os.path.isdir(tmp) and not os.path.islink(tmp):
                shutil.rmtree(tmp)
            elif os.path.lexists(tmp):
                os.unlink(tmp)
        raise


def _beside(out: str, *, directory: bool) -> str:
    """A new empty file or folder ``.<name>.<random>.tmp`` beside ``out``, created exclusively
    with the umask's permissions (``tempfile``'s 0600/0700 would carry over to OUT)."""
    parent, base = os.path.split(out)
    for _ in range(100):
        tmp = os.path.join(parent, f".{base[:100]}.{os.getpid()}-{secrets.token_hex(6)}.tmp")  # legal for any OUT
        try:
            if directory:
                os.mkdir(tmp, 0o777)
            else:
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", parent)


def _leftover(name: str, base: str) -> int | None:
    """The process id in a temporary name ``_beside`` made for ``base`` (None: not one)."""
    m = re.fullmatch(r"\.(.*)\.([0-9]+)-[0-9a-f]{12}\.tmp(?:\.old)?", name)
    return int(m.group(2)) if m is not None and m.group(1) == base[:100] else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def _clean_leftovers(out: str) -> None:
    """Remove the temporary outputs beside ``out`` that a killed emit left (``.<name>.<pid>-<hex>.tmp``
    and ``.tmp.old``, their process gone); those of an emit still running stay."""
    parent, base = os.path.split(out)
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            pid = _leftover(entry.name, base)
            if pid is None or _alive(pid):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)


_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
    """Swap ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where
    the system or the file system cannot."""
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def _swap(tmp: str, out: str, *, directory: bool) -> None:
    """Rename ``tmp`` over ``out``. A folder is exchanged with ``out`` in one step where the
    system can (a kill never leaves ``out`` missing; the old one, now at ``tmp``, is removed
    after, or by the next emit), else moved aside first and back if that fails."""
    if not directory:
        os.replace(tmp, out)
        return
    if not os.path.isdir(out):
        os.rename(tmp, out)
        return
    if _exchange(tmp, out):
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = tmp + ".old"
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def check_zarr(src: EmitSource, meta: ArrayMeta, *, zarr_format: int, rectilinear: bool = False) -> None:
    """Refuse what a zarr array cannot express: unsupported arrays, eras, short last strips,
    codecs without a zarr form, HDF5 chunks whose filter mask skipped a filter, and (unless
    ``rectilinear``: zarr v3's rectilinear extension) a rectilinear chunk grid."""
    if zarr_format == 2:
        v2_filters(meta, rectilinear=rectilinear)
    else:
        v3_codecs(meta, rectilinear=rectilinear)
    n = src.masked_chunks(meta.name)
    if n:
        raise UnexpressibleError(
            f"array {meta.name!r}: {n} chunks skip a filter of the pipeline (HDF5 filter mask); "
            "a zarr array has one pipeline for every chunk"
        )

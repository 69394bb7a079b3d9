"""A Zarr v2 or v3 store (a local folder) read as references: every chunk object is one
reference to the whole object (its path, offset 0, length = its size), metadata parsed by the
same code as a kerchunk store's (``kerchunk._read_json``: ``.zarray``/``.zattrs``/``.zgroup``,
``.zmetadata`` when present, v3 ``zarr.json`` per node, ``_zarr.v2_meta``/``v3_meta``).

Each chunk object becomes a source of the collection (the store's own files, trusted as the
store's folder), so a store is imported like a kerchunk store whose references are whole
objects (``design/formats.md``, "Zarr stores"). Chunk objects that do not exist are absent
chunks (read as the fill value). Sharded v3 arrays are refused by name (``sharding_indexed``
has no decoder in refstore).
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct
import zipfile
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._quote import quote
from ..errors import BadInputError

if TYPE_CHECKING:
    from ._model import ParsedStore

__all__ = ["MAX_METADATA_BYTES", "is_zarr_store", "read_zarr_store", "root_array_name"]

_V2_META = (".zarray", ".zgroup", ".zattrs", ".zmetadata")
_V3_META = "zarr.json"
MAX_METADATA_BYTES = 64 * 1024 * 1024
"""A metadata document larger than this is refused (bounded memory on hostile stores)."""


def is_zarr_store(path: str) -> bool:
    """Whether ``path`` is a local folder whose root is a Zarr node (v2 ``.zgroup``/``.zarray``/
    ``.zmetadata`` or v3 ``zarr.json``)."""
    return os.path.isdir(path) and any(os.path.isfile(os.path.join(path, n)) for n in (*_V2_META, _V3_META))


def _load(location: str, path: str, key: str) -> dict[str, Any]:
    try:
        if os.path.getsize(path) > MAX_METADATA_BYTES:
            raise BadInputError(f"{location}: {quote(key)} is larger than {MAX_METADATA_BYTES:,} bytes")
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise BadInputError(f"{location}: {quote(key)} cannot be read ({e.strerror or e})") from None
    return _parse(location, key, raw)


def _objects(location: str, root: str) -> tuple[dict[str, Any], list[tuple[str, str, int]]]:
    """Metadata documents by key, and every other regular file as (key, path, size), sorted.
    Symbolic links out of the store are refused (a store's chunks are its own files)."""
    meta: dict[str, Any] = {}
    files: list[tuple[str, str, int]] = []
    real_root = os.path.realpath(root)
    for here, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(here, name)
            key = os.path.relpath(path, root).replace(os.sep, "/")
            real = os.path.realpath(path)
            if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
                raise BadInputError(f"{location}: {quote(key)} is a symbolic link out of the store; not followed")
            try:
                st = os.stat(path)
            except OSError as e:
                raise BadInputError(f"{location}: {quote(key)} cannot be read ({e.strerror or e})") from None
            if not stat.S_ISREG(st.st_mode):
                raise BadInputError(f"{location}: {quote(key)} is not a regular file")
            if name in _V2_META or name == _V3_META:
                meta[key] = _load(location, path, key)
            else:
                files.append((key, path, int(st.st_size)))
    return meta, files


def _key_pattern(doc: dict[str, Any]) -> re.Pattern[str]:
    """The chunk keys (below the array's folder) of one array's metadata, as zarr-python forms
    them: v2 ``i.j`` (or ``i/j`` with ``dimension_separator`` ``/``), v3 ``c/i/j`` (default
    encoding) or ``i.j`` (v2 encoding), each with its separator."""
    if doc.get("zarr_format") == 3:
        enc = doc.get("chunk_key_encoding") or {}
        v2 = enc.get("name") == "v2"
        sep = str((enc.get("configuration") or {}).get("separator", "." if v2 else "/"))
        body = rf"[0-9]+(?:{re.escape(sep)}[0-9]+)*"
        return re.compile(body if v2 else rf"c(?:{re.escape(sep)}{body})?")
    sep = str(doc.get("dimension_separator") or ".")
    return re.compile(rf"[0-9]+(?:{re.escape(sep)}[0-9]+)*")


def _array_patterns(meta: dict[str, Any]) -> dict[str, re.Pattern[str]]:
    """The folders holding an array's metadata (``""``: the root), longest first, each with the
    pattern of its chunk keys."""
    found: dict[str, re.Pattern[str]] = {}
    for key, value in meta.items():
        name = key.rsplit("/", 1)[-1]
        folder = key[: -len(name)].rstrip("/")
        if name == ".zarray" or (name == _V3_META and value.get("node_type") == "array"):
            found[folder] = _key_pattern(value)
        if name == ".zmetadata":
            for k, doc in (value.get("metadata") or {}).items():
                if isinstance(k, str) and k.endswith(".zarray") and isinstance(doc, dict):
                    found.setdefault((folder + "/" + k.removesuffix(".zarray")).strip("/"), _key_pattern(doc))
    return dict(sorted(found.items(), key=lambda kv: len(kv[0]), reverse=True))


def _array_of(key: str, arrays: dict[str, re.Pattern[str]]) -> str | None:
    """The array whose chunk ``key`` names (None: no array's chunk key, e.g. a nested key in a
    store with ``.`` keys, which zarr-python does not read either)."""
    for a, pattern in arrays.items():
        rest = key if a == "" else key.removeprefix(a + "/") if key.startswith(a + "/") else None
        if rest is not None:
            return a if pattern.fullmatch(rest) else None
    return None


def root_array_name(root: str) -> str:
    """The name of the one array of a store whose root is an array: its folder's (or zip's) name
    without ``.zip`` and ``.zarr`` suffixes, as zarr-python names nothing."""
    return os.path.basename(os.path.abspath(root).rstrip("/")).removesuffix(".zip").removesuffix(".zarr") or "data"


def _as_named(root: str, refs: dict[str, Any]) -> dict[str, Any]:
    """The references of a store whose root is an array, that array (``root_array_name``) in a
    root group."""
    name = root_array_name(root)
    out = {f"{name}/{k}": v for k, v in refs.items() if k != ".zmetadata"}
    if _V3_META in refs:
        out[_V3_META] = {"zarr_format": 3, "node_type": "group", "attributes": {}}
    else:
        out[".zgroup"] = {"zarr_format": 2}
    return out


_LOCAL_HEADER = struct.Struct("<4s5H3I2H")
"""A zip entry's local file header: signature ... name length, extra length (30 bytes)."""


def _zip_objects(location: str, path: str) -> tuple[dict[str, Any], list[tuple[str, int, int]]]:
    """Metadata documents by key, and every other entry as (key, data offset, size), of a zip of
    a store. Entries must be stored (zarr-python's ``ZipStore`` writes them so): a compressed
    entry is no byte range of the file, and is refused naming it."""
    meta: dict[str, Any] = {}
    entries: list[tuple[str, int, int]] = []
    try:
        with zipfile.ZipFile(path) as zf, open(path, "rb") as fh:
            for info in sorted(zf.infolist(), key=lambda i: i.filename):
                key = info.filename
                if key.endswith("/"):
                    continue
                name = key.rsplit("/", 1)[-1]
                if name in _V2_META or name == _V3_META:
                    if info.file_size > MAX_METADATA_BYTES:
                        raise BadInputError(f"{location}: {quote(key)} is larger than {MAX_METADATA_BYTES:,} bytes")
                    meta[key] = _parse(location, key, zf.read(info))
                    continue
                if info.compress_type != zipfile.ZIP_STORED:
                    why = f"is compressed in the zip (method {info.compress_type}); only stored entries are byte ranges"
                    raise BadInputError(f"{location}: entry {quote(key)} {why}")
                fh.seek(info.header_offset)
                head = fh.read(_LOCAL_HEADER.size)
                if len(head) != _LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
                    raise BadInputError(f"{location}: entry {quote(key)} has no local header where the zip says")
                fields = _LOCAL_HEADER.unpack(head)
                entries.append((key, info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1], info.file_size))
    except (zipfile.BadZipFile, OSError) as e:
        raise BadInputError(f"{location}: not a readable zip ({quote(e)})") from None
    return meta, entries


def _parse(location: str, key: str, raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise BadInputError(f"{location}: {quote(key)} is not JSON ({quote(e)})") from None
    except RecursionError:
        raise BadInputError(f"{location}: {quote(key)} is JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise BadInputError(f"{location}: {quote(key)} is not a JSON object")
    return value


def read_zarr_store(location: str) -> ParsedStore:
    """The store at ``location`` (a local folder) as references: ``BadInputError`` naming it when
    it is not a Zarr store or its metadata cannot be read. Files that are no array's chunk key
    (notes beside the metadata, keys of another separator) are left out, as zarr-python never
    reads them."""
    from .kerchunk import _read_json

    root = os.path.abspath(location.removeprefix("file://"))
    zipped = os.path.isfile(root) and zipfile.is_zipfile(root)
    if zipped:
        meta, entries = _zip_objects(location, root)
        found = [(key, [root, offset, size]) for key, offset, size in entries]
    elif is_zarr_store(root):
        meta, files = _objects(location, root)
        found = [(key, [path, 0, size]) for key, path, size in files]
    else:
        raise BadInputError(f"{location}: not a Zarr store (no .zgroup, .zarray, .zmetadata or zarr.json at its "
                            "root, nor a zip of one)")  # fmt: skip
    if not any(k.rsplit("/", 1)[-1] in (*_V2_META, _V3_META) and "/" not in k for k in meta):
        raise BadInputError(f"{location}: not a Zarr store (no .zgroup, .zarray, .zmetadata or zarr.json at its root)")
    arrays = _array_patterns(meta)
    refs: dict[str, Any] = dict(meta)
    for key, ref in found:
        if _array_of(key, arrays) is not None:
            refs[key] = ref
    if "" in arrays:  # a store that is one array: named after its folder, in a root group
        refs = _as_named(root, refs)
    if any(k == _V3_META or k.endswith("/" + _V3_META) for k in meta) and ".zmetadata" in meta:
        del refs[".zmetadata"]  # a v3 store read by its zarr.json documents
    parsed = _read_json(location, refs)
    zarr_format = 3 if parsed.detail.get("zarr_format") == 3 else 2
    return replace(parsed, form="zarr", location=root, detail={"zarr_format": zarr_format, "zip": zipped})

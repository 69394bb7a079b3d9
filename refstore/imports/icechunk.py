"""An Icechunk repository snapshot as a store to import: zarr v3 metadata through Icechunk's
own session (``zarr.json`` of every node, as the repository has it), chunk references from the
snapshot's manifest files (Icechunk's Python API returns no virtual reference, so the manifests
are read as the published format describes them: ``_flatbuf``).

Virtual chunks become references, inline chunks inline rows. Native chunks (bytes written into
the repository) are refused naming the array: refstore records references, and copies bytes in
only through ``hold`` (``design/import.md``).
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadInputError
from ..zarr_meta import NCZARR_ATTR
from ._flatbuf import Table, manifest_payload
from ._model import ParsedStore, RefColumns, check_grid
from ._zarr import group_attrs, nczarr_types, v3_meta

if TYPE_CHECKING:
    from ..scan._types import ArrayMeta

__all__ = ["MAX_NATIVE_BYTES", "read_icechunk"]

MAX_NATIVE_BYTES = 64 << 20
"""Native chunks (bytes written into the repository, as refstore's own Icechunk form writes held
and inline chunks) are imported as inline rows up to this many bytes in all; beyond it the import
is refused naming the array with most: a collection records references, not a copy of the data."""

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _node_id(raw: bytes) -> str:
    """An 8-byte node id as Icechunk spells it (Crockford base32, 13 characters)."""
    n = int.from_bytes(raw, "big") << 1
    return "".join(_CROCKFORD[(n >> (5 * (12 - i))) & 31] for i in range(13))


def _storage(repo: str) -> tuple[Any, str]:
    """Icechunk storage for a local folder or ``s3://bucket/prefix`` (configured from the
    standard AWS environment), and where its files are for ``_objstore``/``open``."""
    import icechunk as ic

    if repo.startswith("s3://"):
        bucket, _, prefix = repo[len("s3://") :].partition("/")
        endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
        storage = ic.s3_storage(
            bucket=bucket, prefix=prefix.rstrip("/") or None, from_env=True, endpoint_url=endpoint,
            allow_http=os.environ.get("AWS_ALLOW_HTTP", "").lower() in ("1", "true"),
            region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
            force_path_style=bool(endpoint),
        )  # fmt: skip
        return storage, repo.rstrip("/")
    if "://" in repo and not repo.startswith("file://"):
        raise BadInputError(f"{repo}: Icechunk repositories are imported from a local folder or s3://")
    path = os.path.abspath(repo.removeprefix("file://"))
    if not os.path.isdir(path):
        raise BadInputError(f"{repo}: no such folder")
    return ic.local_filesystem_storage(path), path


def _read_file(root: str, rel: str) -> bytes:
    where = f"{root}/{rel}"
    if not where.startswith("s3://"):
        try:
            with open(where, "rb") as fh:
                return fh.read()
        except OSError as e:
            raise BadInputError(f"{where}: cannot read: {e.strerror or e}") from None
    import obstore

    from .. import _objstore

    store, key = _objstore.store_for(where)
    try:
        return bytes(obstore.get(store, key).bytes())
    except Exception as e:
        raise BadInputError(f"{where}: cannot read: {_objstore._first_line(e)}") from None


def _session(repo: str, branch: str | None, tag: str | None, snapshot: str | None) -> tuple[Any, str]:
    import icechunk as ic

    if sum(x is not None for x in (branch, tag, snapshot)) > 1:
        raise BadInputError("give one of --branch, --tag, --snapshot")
    storage, root = _storage(repo)
    try:
        r = ic.Repository.open(storage)
    except ic.IcechunkError as e:
        raise BadInputError(f"{repo}: not an Icechunk repository ({str(e).strip().splitlines()[0]})") from None
    try:
        if tag is not None:
            s = r.readonly_session(tag=tag)
        elif snapshot is not None:
            s = r.readonly_session(snapshot_id=snapshot)
        else:
            s = r.readonly_session(branch=branch or "main")
    except (ic.IcechunkError, ValueError) as e:
        what = f"tag {tag!r}" if tag else f"snapshot {snapshot!r}" if snapshot else f"branch {branch or 'main'!r}"
        raise BadInputError(f"{repo}: no {what} ({str(e).strip().splitlines()[0]})") from None
    return (r, s), root


def _metadata(store: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every node's ``zarr.json`` (parsed), by path without the leading ``/`` (``""``: root),
    and every other key the snapshot lists (its chunk keys, as Icechunk itself lists them)."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    async def read_all() -> tuple[dict[str, dict[str, Any]], list[str]]:
        listed = [k async for k in store.list()]
        keys = [k for k in listed if k == "zarr.json" or k.endswith("/zarr.json")]
        out: dict[str, dict[str, Any]] = {}
        for k in sorted(keys):
            buf = await store.get(k, prototype=default_buffer_prototype())
            out[k.removesuffix("zarr.json").rstrip("/")] = json.loads(buf.to_bytes()) if buf is not None else {}
        return out, [k for k in listed if not (k == "zarr.json" or k.endswith("/zarr.json"))]

    return sync(read_all())


def _check_counts(repo: str, refs: pa.Table, arrays: dict[str, ArrayMeta], chunk_keys: list[str]) -> None:
    """The chunks parsed from the manifests, per array, are the chunks Icechunk lists for it:
    a manifest entry whose array was not recognised (skipped as another snapshot's) would
    otherwise read as fill without a word."""
    listed: dict[str, int] = dict.fromkeys(arrays, 0)
    for k in chunk_keys:
        path, sep, _ = k.rpartition("/c/") if "/c/" in k else ("", "", "")
        if not sep and k.endswith("/c"):  # a 0-d array's one chunk
            path, sep = k[:-2], "/c"
        if sep and path in listed:
            listed[path] += 1
    counts = pc.value_counts(refs.column("array").combine_chunks())
    parsed = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))
    for name in sorted(arrays):
        if parsed.get(name, 0) != listed[name]:
            raise BadInputError(f"{repo}: array {name!r}: {parsed.get(name, 0)} chunk references read from its "
                                f"manifests, the snapshot lists {listed[name]} chunks")  # fmt: skip


def read_icechunk(repo: str, *, branch: str | None = None, tag: str | None = None,
                  snapshot: str | None = None) -> ParsedStore:  # fmt: skip
    """Read one snapshot of the repository at ``repo``; ``BadInputError`` naming it when it is
    not a repository, holds native chunks, or no virtual chunk at all."""
    import icechunk as ic

    if "ICECHUNK_LOG" not in os.environ:  # its warnings about local repositories are not the user's concern here
        ic.set_logs_filter("warn,icechunk_arrow_object_store=error,icechunk_storage::readback=error")
    try:
        return _read(repo, branch, tag, snapshot)
    except ic.IcechunkError as e:  # a damaged repository: Icechunk's own reader fails on it
        raise BadInputError(f"{repo}: cannot be read ({_first_line(str(e))})") from None
    finally:
        if "ICECHUNK_LOG" not in os.environ:
            ic.set_logs_filter(None)


def _read(repo: str, branch: str | None, tag: str | None, snapshot: str | None) -> ParsedStore:
    (r, s), root = _session(repo, branch, tag, snapshot)
    nodes, chunk_keys = _metadata(s.store)
    ours = _refstore_info(r, s.snapshot_id)
    types = _attr_types(ours)
    arrays: dict[str, ArrayMeta] = {}
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    ids: dict[str, str] = {}
    for path, meta in nodes.items():
        typed = {NCZARR_ATTR: types[path]} if isinstance(types.get(path), dict) else {}
        if meta.get("node_type") == "group":
            groups[path] = nczarr_types(group_attrs(dict(meta.get("attributes") or {})), typed)
        elif meta.get("node_type") == "array":
            if not path:
                raise BadInputError(f"{repo}: the root is an array; refstore needs named arrays in a group")
            try:
                arrays[path] = v3_meta(path, meta)
            except (ValueError, KeyError, TypeError) as e:
                raise BadInputError(f"{repo}: array {path!r}: {e}") from None
            arrays[path] = replace(arrays[path], attrs=nczarr_types(arrays[path].attrs, typed))
            ids[s.get_node_id("/" + path)] = path
    groups.setdefault("", {})
    cols = RefColumns()
    native: list[tuple[str, tuple[int, ...], int]] = []
    before: dict[str, int] = {}
    etags: dict[str, str] = {}
    virtual = 0
    for info in r.list_manifest_files(s.snapshot_id):
        where = f"manifests/{info.id}"
        try:
            m = Table.root(manifest_payload(_read_file(root, where), what=f"{repo}/{where}"))
            seen, n_virtual = _manifest_refs(repo, m, ids, cols, native, before, etags)
        except (ValueError, IndexError, struct.error) as e:
            raise BadInputError(f"{repo}: manifest {info.id} cannot be read ({e})") from None
        if seen != info.num_chunk_refs:
            raise BadInputError(f"{repo}: manifest {info.id} cannot be read ({seen} chunk references found, "
                                f"the snapshot lists {info.num_chunk_refs})")  # fmt: skip
        virtual += n_virtual
    if not virtual and ours is None:  # refstore's own emit may hold inline or held chunks only
        raise BadInputError(f"{repo}: no virtual chunks in this snapshot; nothing refers to source files")
    _native_as_inline(repo, s.store, nodes, native, cols)
    refs = _resolve_named(repo, r, cols.table())
    check_grid(repo, refs, arrays)
    _check_counts(repo, refs, arrays, chunk_keys)
    detail = {"snapshot": s.snapshot_id, **({"branch": branch or "main"} if not (tag or snapshot) else {}),
              **({"tag": tag} if tag else {})}  # fmt: skip
    resolved = _resolve_named(repo, r, pa.table({"path": pa.array(sorted(before), pa.string())}))
    stamps = dict(zip(resolved.column("path").to_pylist(), (before[k] for k in sorted(before)), strict=True))
    tagged = _resolve_named(repo, r, pa.table({"path": pa.array(sorted(etags), pa.string())}))
    etag_of = dict(zip(tagged.column("path").to_pylist(), (etags[k] for k in sorted(etags)), strict=True))
    return ParsedStore("icechunk", repo, arrays, dict(sorted(groups.items())), refs, detail, stamps, etag_of)


def _refstore_info(r: Any, snapshot_id: str) -> dict[str, Any] | None:
    """The metadata refstore's Icechunk emit gives its snapshot (``refstore``: the collection,
    version, ``attr_types``...), or None for a snapshot refstore did not write."""
    try:
        meta = r.lookup_snapshot(snapshot_id).metadata or {}
    except Exception:  # a snapshot without readable metadata
        return None
    info = meta.get("refstore")
    return info if isinstance(info, dict) else None


def _attr_types(info: dict[str, Any] | None) -> dict[str, Any]:
    """The attribute types of refstore's snapshot metadata (per node, as ``zarr_meta.attr_types``)."""
    found = (info or {}).get("attr_types")
    return found if isinstance(found, dict) else {}


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no detail")


def _manifest_refs(repo: str, m: Table, ids: dict[str, str], cols: RefColumns,
                   native: list[tuple[str, tuple[int, ...], int]], before: dict[str, int],
                   etags: dict[str, str]) -> tuple[int, int]:  # fmt: skip
    """The references of one manifest into ``cols`` (native ones into ``native``), recorded
    checksums into ``before``/``etags``: (references in the manifest, of them virtual)."""
    codec_dict = m.bytes(2)
    seen = virtual = 0
    for am in m.tables(1):
        raw_id = am.inline_bytes(0, 8)
        name = ids.get(_node_id(raw_id)) if raw_id is not None else None
        refs = am.tables(1)
        seen += len(refs)
        if name is None:
            continue  # an array of another snapshot sharing the manifest
        for ref in refs:
            key = ref.uints(0)
            data = ref.bytes(1)
            if data is not None:
                cols.add(name, key, None, -1, len(data), bytes(data))
                continue
            location = ref.string(5)
            if location is None and ref.bytes(8) is not None:
                location = _decompress_location(repo, bytes(ref.bytes(8) or b""), codec_dict)
            if location is not None:
                cols.add(name, key, location, ref.scalar(2, "Q"), ref.scalar(3, "Q"), b"")
                stamp = ref.scalar(7, "I")
                if stamp:
                    before[location] = min(before.get(location, stamp), stamp)
                etag = ref.string(6)
                if etag and etags.setdefault(location, etag) != etag:
                    raise BadInputError(f"{repo}: its references into {location} record two etags "
                                        f"({etags[location]} and {etag}); one of them is stale")  # fmt: skip
                virtual += 1
            else:
                native.append((name, key, ref.scalar(3, "Q")))
    return seen, virtual


def _decompress_location(repo: str, data: bytes, dictionary: bytes | None) -> str:
    """A location compressed with the manifest's zstd dictionary (Icechunk spec 2)."""
    try:
        import zstandard
    except ImportError:
        raise BadInputError(f"{repo}: its manifests compress chunk locations with a zstd dictionary; reading them "
                            "needs the 'zstandard' package") from None  # fmt: skip
    try:
        d = zstandard.ZstdCompressionDict(dictionary or b"")
        return str(zstandard.ZstdDecompressor(dict_data=d).decompress(data).decode("utf-8"))
    except (zstandard.ZstdError, UnicodeDecodeError) as e:
        raise BadInputError(f"{repo}: a compressed chunk location cannot be read ({e})") from None



def _resolve_named(repo: str, r: Any, refs: pa.Table) -> pa.Table:
    """``vcc://NAME/path`` locations (a named virtual chunk container) as the container's URL
    prefix + path, from the repository's configuration."""
    paths = refs.column("path")
    named = pc.starts_with(pc.fill_null(paths, ""), "vcc://")
    if not pc.any(named).as_py():
        return refs
    prefixes = {c.name: c.url_prefix for c in (r.config.virtual_chunk_containers or {}).values() if c.name}
    d = paths.combine_chunks().dictionary_encode()
    resolved = []
    for loc in d.dictionary.to_pylist():
        if loc.startswith("vcc://"):
            name, _, rest = loc[len("vcc://") :].partition("/")
            if name not in prefixes:
                raise BadInputError(f"{repo}: chunk location {loc} names a virtual chunk container {name!r} the "
                                    "repository does not configure")  # fmt: skip
            loc = prefixes[name].rstrip("/") + "/" + rest
        resolved.append(loc)
    new = pa.array(resolved, pa.string()).take(d.indices)
    return refs.set_column(refs.schema.get_field_index("path"), refs.schema.field("path"), new)


def _chunk_key(meta: dict[str, Any], key: tuple[int, ...]) -> str:
    enc = meta.get("chunk_key_encoding") or {}
    default = "/" if enc.get("name", "default") == "default" else "."
    sep = str((enc.get("configuration") or {}).get("separator", default))
    if enc.get("name", "default") == "v2":
        return sep.join(map(str, key)) if key else "0"
    return sep.join(["c", *map(str, key)])


def _native_as_inline(repo: str, store: Any, nodes: dict[str, dict[str, Any]],
                      native: list[tuple[str, tuple[int, ...], int]], cols: RefColumns) -> None:  # fmt: skip
    """Native chunks read from the repository as inline rows (``MAX_NATIVE_BYTES`` in all)."""
    if not native:
        return
    total = sum(n for _a, _k, n in native)
    if total > MAX_NATIVE_BYTES:
        per: dict[str, int] = {}
        for a, _k, n in native:
            per[a] = per.get(a, 0) + n
        name, most = max(per.items(), key=lambda x: x[1])
        raise BadInputError(
            f"{repo}: {total} bytes of native chunks (written into the repository, not references; array {name!r} "
            f"holds {most}), over the {MAX_NATIVE_BYTES >> 20} MiB refstore copies in as inline chunks"
        )
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    async def read_all() -> list[bytes | None]:
        out: list[bytes | None] = []
        for name, key, _n in native:
            buf = await store.get(f"{name}/{_chunk_key(nodes[name], key)}", prototype=default_buffer_prototype())
            out.append(None if buf is None else buf.to_bytes())
        return out

    for (name, key, _n), data in zip(native, sync(read_all()), strict=True):
        if data is None:
            raise BadInputError(f"{repo}: a native chunk {key} of {name!r} cannot be read")
        cols.add(name, key, None, -1, len(data), data)

"""Icechunk (2.x): a local Icechunk repository of virtual references to the (remapped) sources.

``emit(col, "icechunk", "repo/")`` creates the repository (``local_filesystem_storage``) or, when
it exists, commits to its ``main`` branch only what changed since what it holds. Layout:

- one virtual chunk container per scheme and authority of the published locations (one for
  local files, one per bucket or host), prefix = their longest common folder, cut back before
  the first folder whose name needs percent-encoding; local paths as ``file://`` URLs encoded
  the way Icechunk decodes them (``chunk_url``); the container config (prefix, store, an S3
  region/endpoint) is persisted, credentials never are (readers authorize each prefix at open);
- zarr v3 metadata from ``zarr_meta.v3_array`` serialized by zarr-python, groups with the
  collection's group attributes;
- references in bulk (``set_virtual_refs_arr``: one call per checksum and block of the chunk
  grid, C-order flat arrays, ``""`` = no chunk); inline and held chunks as native chunks;
- checksums: the etag, else the scan's mtime rounded up to whole seconds (unremapped sources);
- split manifests along axis 0 for arrays over ``SPLIT_REFS`` chunks; such arrays are read and
  set range by range; an emit with one (or with more than ``CHECKPOINT_REFS`` grid cells in
  all) is committed in parts (plain commits of ~``CHECKPOINT_REFS`` references) on a staging
  branch, then ``main`` moves once to the emit's snapshot after its parts (``_Sessions``);
- commit message ``refstore <uri> version N``, metadata ``{"refstore": {...}}``, and Icechunk
  tags ``refstore-vN`` plus every refstore tag naming the version;
- an update of an existing repository writes its snapshot off any branch (``flush``, or the
  staging branch), tags it, and only then moves ``main`` (each an Icechunk update of its own): a
  failure leaves ``main`` as it was, never without its tag; the next emit of that version moves
  ``main`` to the tagged snapshot.

See ``design/emit.md`` (Icechunk).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS
from ..errors import BadInputError, StorageError
from ..plan.grid import Grid
from ..zarr_meta import attr_types, attr_values, register_codecs, v3_array
from ._common import atomic_output, check_zarr
from ._icechunk_plan import (
    NATIVE,
    VIRTUAL,
    ChunkState,
    boxes,
    checksum_token,
    chunk_url,
    container_prefixes,
    diff_states,
    split_rows,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = ["BRANCH", "check", "credentials", "quiet_local_logs", "write"]

BRANCH = "main"
_STRUCTURAL = ("node_type", "data_type", "chunk_grid", "chunk_key_encoding", "codecs")
"""zarr.json keys whose change invalidates an array's chunks (others update in place)."""


_LOGS = "warn,icechunk_arrow_object_store=error,icechunk_storage::readback=error,icechunk::asset_manager=error"
"""Icechunk's log filter during one emit (unless ``ICECHUNK_LOG`` is set; see ``quiet_local_logs``):
its two warnings on every local repository (not safe for concurrent commits; readback metadata)
say nothing about an emit, which commits from one process holding the output; nor its advice to
grow the caches a staged emit turns off (``_Sessions``). Every other warning still shows."""


@contextlib.contextmanager
def quiet_local_logs() -> Iterator[None]:
    """``_LOGS`` for the duration of one emit (or refstore's own read of what it emitted, the
    demo), then Icechunk's filter from ``ICECHUNK_LOG`` (its default when unset) again: the
    user's own repositories still warn."""
    import icechunk as ic

    if "ICECHUNK_LOG" in os.environ:  # the user's own filter wins
        yield
        return
    ic.set_logs_filter(_LOGS)
    try:
        yield
    finally:
        ic.set_logs_filter(None)


def check(src: EmitSource, meta: ArrayMeta) -> None:
    check_zarr(src, meta, zarr_format=3, rectilinear=True)
    v3_array(meta, rectilinear=True)  # dtypes and fill values without a zarr v3 form


def credentials(prefixes: list[str]) -> dict[str, Any]:
    """Default credentials for container prefixes: local files and HTTP need none; S3 and GCS
    from the environment. Never stored in the repository."""
    import icechunk as ic
    from icechunk.credentials import HttpAccess, LocalFileSystemAccess

    creds: dict[str, Any] = {}
    for p in prefixes:
        if p.startswith("file://"):
            creds[p] = LocalFileSystemAccess
        elif p.startswith(("http://", "https://")):
            creds[p] = HttpAccess
        elif p.startswith("s3://"):
            creds[p] = ic.s3_from_env_credentials()
        elif p.startswith("gs://"):
            creds[p] = ic.gcs_from_env_credentials()
    return ic.containers_credentials(creds)


def _container(prefix: str) -> Any:
    import icechunk as ic

    store: Any
    if prefix.startswith("file://"):
        store = ic.local_filesystem_store(prefix[len("file://") :])
    elif prefix.startswith(("http://", "https://")):
        store = ic.http_store()
    elif prefix.startswith("s3://"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if endpoint:
            store = ic.s3_store(region=region or "us-east-1", endpoint_url=endpoint, s3_compatible=True,
                                allow_http=endpoint.startswith("http://"), force_path_style=True)  # fmt: skip
        else:
            store = ic.s3_store(region=region)
    elif prefix.startswith("gs://"):
        store = ic.gcs_store()
    else:
        raise BadInputError(f"{prefix}: Icechunk has no virtual chunk container for this scheme")
    return ic.VirtualChunkContainer(prefix, store)


# --------------------------------------------------------------------------- what to hold
@dataclass
class _Locations:
    """Published URLs (sorted) and checksum tokens of every source of the version."""

    urls: list[str]
    tokens: dict[str, str]  # url -> token ("" = no check)
    by_location: dict[str, str] = field(default_factory=dict)  # published location -> url

    @staticmethod
    def of(src: EmitSource) -> _Locations:
        t = src.sources()
        by_loc: dict[str, str] = {}
        tokens: dict[str, str] = {}
        cols = [t.column(c).to_pylist() for c in ("location", "published", "mtime_ns", "etag")]
        for loc, pub, mt, etag in zip(*cols, strict=True):
            url = chunk_url(pub)
            by_loc[pub] = url
            tokens[url] = checksum_token(loc, pub, mt, etag)
        return _Locations(sorted(tokens), tokens, by_loc)


def _vocab(tokens: list[str]) -> dict[str, int]:
    return {t: i for i, t in enumerate(sorted(set(tokens) - {""}))}


@dataclass
class _Wanted:
    state: ChunkState
    coords: np.ndarray[Any, np.dtype[np.int64]]  # (n, ndim)
    native: dict[int, bytes]  # row -> bytes of native rows
    grid: tuple[int, ...]


def _wanted(src: EmitSource, meta: ArrayMeta, locs: _Locations, url_index: dict[str, int],
            token_index: dict[str, int], g0: tuple[int, int] | None = None) -> _Wanted:  # fmt: skip
    t = src.refs(meta.name, rows=g0)
    ndim = len(meta.shape)
    n = t.num_rows
    flat = src.flat_index(meta, t)
    coords = (np.stack([t.column(GLOBAL_KEY_COLUMNS[i]).to_numpy() for i in range(ndim)], axis=1)
              if ndim else np.zeros((n, 0), np.int64)).astype(np.int64)  # fmt: skip
    offset = t.column("offset").to_numpy()
    native = offset < 0  # inline chunks, held ones included (EmitSource.refs gives them as inline rows)
    trim = _trimmed(meta, coords)
    inline_rows = np.nonzero(native & ~trim)[0]
    native = native | trim
    path = t.column("path").combine_chunks() if n else pa.array([], pa.dictionary(pa.int32(), pa.string()))
    if not pa.types.is_dictionary(path.type):
        path = pc.dictionary_encode(path)
    dict_urls = [locs.by_location.get(p) or chunk_url(p) for p in path.dictionary.to_pylist()]
    code = np.array([url_index.get(u, -1) for u in dict_urls], np.int64)
    tok = np.array([token_index.get(locs.tokens.get(u, ""), -1) for u in dict_urls], np.int64)
    idx = path.indices.to_numpy(zero_copy_only=False).astype(np.int64) if n else np.zeros(0, np.int64)
    loc = np.where(native, -1, code[idx] if len(code) else idx)
    token = np.where(native, -1, tok[idx] if len(tok) else idx)
    if np.any(loc[~native] < 0):
        raise StorageError(f"array {meta.name!r}: a chunk's source is missing from the version's sources")
    rows: dict[int, bytes] = {}
    if len(inline_rows):
        inl = t.column("inline").take(pa.array(inline_rows)).to_pylist()
        rows.update(zip(inline_rows.tolist(), inl, strict=True))
    if trim.any():
        rows.update(zip(np.flatnonzero(trim).tolist(), _exact_chunks(src, meta, coords[trim]), strict=True))
    state = ChunkState(
        flat=flat.astype(np.int64),
        kind=np.where(native, NATIVE, VIRTUAL).astype(np.uint8),
        loc=loc.astype(np.int64),
        offset=np.where(native, 0, offset).astype(np.uint64),
        length=np.where(native, 0, t.column("length").to_numpy()).astype(np.uint64),
        token=token.astype(np.int64),
    )
    return _Wanted(state, coords, rows, src.grid(meta))


def _trimmed(meta: ArrayMeta, coords: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Rows whose chunk is shorter than the codec's chunk along a rectilinear dimension (an HDF5
    partial chunk mid-array, stored padded): a rectilinear zarr chunk decodes to exactly its
    length, so these cannot be virtual references."""
    rect = [d for d, ls in enumerate(meta.edges) if ls is not None]
    if not rect or not len(coords):
        return np.zeros(len(coords), bool)
    _, size = Grid.of(meta).boxes(coords)
    return np.any(size[:, rect] < np.asarray(meta.chunks, np.int64)[rect], axis=1)


def _exact_chunks(src: EmitSource, meta: ArrayMeta, coords: np.ndarray[Any, Any]) -> list[bytes]:
    """The chunks ``coords`` of a rectilinear array encoded by zarr with the array's own codecs
    at exactly their shape (native chunks): values read through refstore, written to an
    in-memory zarr array of the same metadata, whose stored bytes are taken."""
    import zarr
    from zarr.core.buffer import default_buffer_prototype

    origin, size = Grid.of(meta).boxes(coords)
    store = zarr.storage.MemoryStore()
    proto = default_buffer_prototype()
    # write_empty_chunks: a chunk equal to the fill value is still a chunk (held or referenced)
    with zarr.config.set({"array.rectilinear_chunks": True, "array.write_empty_chunks": True}):
        _run(store.set("zarr.json", proto.buffer.from_bytes(_array_doc(meta))))
        arr = zarr.open_array(store, mode="r+")
        out = []
        for o, n, key in zip(origin.tolist(), size.tolist(), coords.tolist(), strict=True):
            hi = [a + b for a, b in zip(o, n, strict=True)]
            arr[tuple(map(slice, o, hi))] = src.read_box(meta, o, hi)
            got = _run(store.get(_key("", key)[1:], proto))
            if got is None:
                raise StorageError(f"array {meta.name!r}: zarr wrote no chunk {key} (rectilinear native chunk)")
            out.append(got.to_bytes())
    return out


# --------------------------------------------------------------------------- metadata
def _array_doc(meta: ArrayMeta) -> bytes:
    import zarr
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.metadata.v3 import ArrayV3Metadata

    with warnings.catch_warnings(), zarr.config.set({"array.rectilinear_chunks": True}):
        warnings.simplefilter("ignore")
        doc = v3_array(meta, rectilinear=True)
        doc["attributes"] = _finite(doc.get("attributes") or {})
        md = ArrayV3Metadata.from_dict(doc)
        return md.to_buffer_dict(default_buffer_prototype())["zarr.json"].to_bytes()


def _finite(value: Any) -> Any:
    """JSON without NaN/Infinity literals (Icechunk's JSON parser refuses them): non-finite
    floats as the strings zarr v3 uses for fill values."""
    if isinstance(value, float) and not np.isfinite(value):
        return "NaN" if np.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _group_doc(attrs: dict[str, Any]) -> bytes:
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.group import GroupMetadata

    plain = _finite(attr_values(attrs))
    return GroupMetadata(attributes=plain, zarr_format=3).to_buffer_dict(
        default_buffer_prototype())["zarr.json"].to_bytes()  # fmt: skip


def _groups(src: EmitSource, arrays: list[ArrayMeta]) -> dict[str, bytes]:
    attrs = src.group_attrs()
    paths = {""}
    for m in arrays:
        parts = m.name.split("/")[:-1]
        paths.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return {g: _group_doc(attrs.get(g) or {}) for g in sorted(paths)}


def _key(name: str, coords: Any) -> str:
    return f"{name}/c/" + "/".join(str(int(c)) for c in coords) if len(coords) else f"{name}/c"


def _structural(doc: bytes) -> tuple[str, ...]:
    d = json.loads(doc)
    return tuple(json.dumps(d.get(k), sort_keys=True) for k in _STRUCTURAL)


# --------------------------------------------------------------------------- the repository
def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _nodes(store: Any) -> dict[str, str]:
    """Every node (path without leading ``/``, ``""`` = root) -> node_type, from zarr.json keys."""
    out: dict[str, str] = {}

    async def walk(prefix: str) -> None:
        raw = await _get(store, f"{prefix}zarr.json")
        if raw is None:
            return
        kind = json.loads(raw)["node_type"]
        out[prefix.rstrip("/")] = kind
        if kind == "group":
            async for child in store.list_dir(prefix):
                if child != "zarr.json":
                    await walk(f"{prefix}{child}/")

    await walk("")
    return out


async def _get(store: Any, key: str) -> bytes | None:
    from zarr.core.buffer import default_buffer_prototype

    buf = await store.get(key, default_buffer_prototype())
    return None if buf is None else bytes(buf.to_bytes())


async def _set(store: Any, key: str, value: bytes) -> None:
    from zarr.core.buffer import default_buffer_prototype

    await store.set(key, default_buffer_prototype().buffer.from_bytes(value))


@dataclass
class _Held:
    """What the repository holds for one array: ``state`` (chunks inside the wanted grid, flat
    indices in that grid) and ``outside`` (coordinates past it: the array shrank; deleted)."""

    state: ChunkState
    outside: np.ndarray[Any, np.dtype[np.int64]]  # (n, ndim)


async def _have(store: Any, name: str, ndim: int, grid: tuple[int, ...], url_index: dict[str, int],
                token_index: dict[str, int], old_tokens: dict[str, str], *, known: bool) -> _Held:  # fmt: skip
    """The chunk references the repository holds for one array, in the wanted vocabulary
    (locations it does not know get -2). Checksum tokens come from the previous commit's
    metadata (``known``: written by refstore; a URL missing there had none); without it every
    token counts as unknown, so every reference is rewritten. Columnar per batch: the batch's
    locations go to Arrow and are dictionary-encoded (work per distinct URL, not per chunk)."""
    cols: dict[str, list[np.ndarray[Any, Any]]] = {k: [] for k in ("flat", "kind", "loc", "off", "len", "tok")}
    outside: list[np.ndarray[Any, Any]] = []
    limit = np.array(grid, np.int64)
    async for coords, kinds, paths, offs, lens, _inline in store.array_chunk_iterator(name, 262_144):
        virtual = np.asarray(kinds) == 2
        loc = np.full(len(virtual), -1, np.int64)
        tok = np.full(len(virtual), -1, np.int64)
        if virtual.any():
            urls = pa.array(paths, pa.string()).filter(pa.array(virtual)).dictionary_encode()
            uniq = urls.dictionary.to_pylist()
            code = np.array([url_index.get(u, -2) for u in uniq], np.int64)
            tcode = np.array([token_index.get(t, -2) if (t := old_tokens.get(u, "" if known else "?")) else -1
                              for u in uniq], np.int64)  # fmt: skip
            idx = urls.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            loc[virtual] = code[idx]
            tok[virtual] = tcode[idx]
        del paths
        # flat indices per batch: the (n, ndim) coordinates are never held for the whole array
        c = np.asarray(coords, np.int64).reshape(len(virtual), ndim)
        inside = np.all(c < limit, axis=1)
        batch: dict[str, np.ndarray[Any, Any]] = {
            "kind": np.where(virtual, VIRTUAL, NATIVE).astype(np.uint8),
            "loc": loc,
            "tok": tok,
            "off": np.where(virtual, offs, 0).astype(np.uint64),
            "len": np.where(virtual, lens, 0).astype(np.uint64),
        }
        if not inside.all():  # past a shrunken grid
            outside.append(c[~inside])
            c = c[inside]
            batch = {k: v[inside] for k, v in batch.items()}
        flat = np.ravel_multi_index(tuple(c.T), grid) if ndim else np.zeros(len(c), np.int64)
        del c
        cols["flat"].append(np.asarray(flat, np.int64))
        for k, v in batch.items():
            cols[k].append(v)
    gone = np.concatenate(outside) if outside else np.zeros((0, ndim), np.int64)
    if not cols["kind"]:
        return _Held(ChunkState.empty(), gone)
    col = {k: np.concatenate(cols.pop(k)) for k in list(cols)}
    state = ChunkState(flat=col["flat"], kind=col["kind"], loc=col["loc"], offset=col["off"], length=col["len"],
                       token=col["tok"])  # fmt: skip
    return _Held(state.sorted(), gone)


def _held_rows(held: _Held, grid: tuple[int, ...], rows: tuple[int, int] | None, *, first: bool) -> _Held:
    """The part of ``held`` with axis-0 index in ``rows`` (a flat range: C order); chunks past
    a shrunken grid go with the ``first`` range only."""
    if rows is None:
        return held
    per_row = int(np.prod(grid[1:]))
    st = held.state
    a, z = np.searchsorted(st.flat, [rows[0] * per_row, rows[1] * per_row])
    part = ChunkState(st.flat[a:z], st.kind[a:z], st.loc[a:z], st.offset[a:z], st.length[a:z], st.token[a:z])
    return _Held(part, held.outside if first else held.outside[:0])


def _row_ranges(grid: tuple[int, ...], split: int | None, rows: np.ndarray[Any, Any] | None = None
                ) -> list[tuple[int, int] | None]:  # fmt: skip
    """Axis-0 ranges of one manifest split each (``[None]``: the whole array at once). With
    ``rows`` (the axis-0 chunk indices that hold a reference, now or in the repository), only
    the first range and those holding one of them: a sparse array of 2^20 ranges costs what its
    references cost."""
    if split is None or not grid:
        return [None]
    starts: range | list[int] = range(0, grid[0], split)
    if rows is not None:
        starts = sorted({0, *(np.unique(rows // split) * split).tolist()})
    return [(a, min(a + split, grid[0])) for a in starts if a < grid[0]]


def _rows_in_use(src: EmitSource, meta: ArrayMeta, have: _Held, grid: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """Axis-0 chunk indices of ``meta``'s references in the version and in the repository."""
    t = src.snapshot.chunk_rows(meta.name, None, columns=())
    now = pc.cast(t.column(GLOBAL_KEY_COLUMNS[0]), pa.int64()).to_numpy() if t.num_rows else np.zeros(0, np.int64)
    per_row = math.prod(grid[1:])
    before = have.state.flat // per_row if per_row else np.zeros(0, np.int64)
    return np.concatenate([now.astype(np.int64), before.astype(np.int64)])


CHECKPOINT_REFS = 500_000
"""References set before a staged emit commits a part (after the manifest range that reaches
it; split ranges hold up to ``SPLIT_REFS``, so a big array commits every range). Icechunk's
commit needs ~0.9 KB per pending reference at its peak (change set, manifest, transaction log);
each part costs a commit and a snapshot in ``main``'s history."""


def _trim() -> None:
    """Hand freed heap back to the system (Arrow's pool; glibc keeps what Icechunk's threads freed)."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


TMP_BRANCH = "refstore-emit"
"""The branch a staged emit commits to part by part before ``main`` is moved to its last
commit; deleted afterwards."""


class _Sessions:
    """Writable sessions of one emit. Unstaged (no split array, grids of at most
    ``CHECKPOINT_REFS`` cells in all): one session on ``main`` (an update ends in ``flush``: a
    snapshot off the branch, tagged, then ``main`` moved). Staged: on ``TMP_BRANCH`` (created
    at ``main``'s tip), a **part** is committed after a manifest range (or an unsplit array)
    once ``CHECKPOINT_REFS`` references are pending, so that Icechunk holds only those
    uncommitted changes; ``finish`` commits the rest as the emit's snapshot (message and
    metadata of the emit, ``parts`` = how many parts precede it), tags it and moves ``main``
    there (refusing if ``main`` moved meanwhile). ``main`` moves once; its history gets the
    parts (``(part i)`` messages, metadata ``part``) before the emit's snapshot.

    Parts are plain commits, not amends: an amend merges the amended commit's transaction log
    into its own (every chunk index of the emit so far, in memory), so the k-th amend costs
    memory and time in proportion to k parts (``design/scale.md``)."""

    def __init__(self, repo: Any, message: str, info: dict[str, Any], *, staged: bool, update: bool,
                 storage: Any = None, prefixes: list[str] | None = None) -> None:  # fmt: skip
        import icechunk as ic

        self.update = update
        self.message = message
        self.info = info
        self.pending = 0
        self.repo = repo
        self.base = repo.lookup_branch(BRANCH)
        self.branch = BRANCH
        self.checkpoints = 0
        if staged:
            self.branch = TMP_BRANCH
            if TMP_BRANCH in repo.list_branches():  # left by an interrupted emit
                repo.delete_branch(TMP_BRANCH)
            repo.create_branch(TMP_BRANCH, self.base)
            # Icechunk's caches would keep every range written: off for this writer (its config,
            # never saved: ``repo`` saves the repository's)
            cfg = repo.config
            cfg.caching = ic.CachingConfig(num_chunk_refs=0, num_snapshot_nodes=0, num_transaction_changes=0)
            with _quiet():
                creds = credentials(prefixes or [])
                self.writer = ic.Repository.open(storage, config=cfg, authorize_virtual_chunk_access=creds)
        else:
            self.writer = repo
        self.session = self.writer.writable_session(self.branch)

    @property
    def store(self) -> Any:
        return self.session.store

    @property
    def metadata(self) -> dict[str, Any]:
        """The emit's snapshot's metadata."""
        return {"refstore": {**self.info, **({"parts": self.checkpoints} if self.checkpoints else {})}}

    def checkpoint(self, refs: int) -> None:
        """Commit a part once ``CHECKPOINT_REFS`` references are pending (staged emits only)."""
        self.pending += refs
        if self.branch == BRANCH or self.pending < CHECKPOINT_REFS or not self.session.has_uncommitted_changes:
            return
        self.pending = 0
        self.checkpoints += 1
        _trim()  # what the range's planning freed, before Icechunk's commit peaks
        part = {"uri": self.info["uri"], "version": self.info["version"], "part": self.checkpoints}
        self.session.commit(f"{self.message} (part {self.checkpoints})", metadata={"refstore": part})
        self.session = self.writer.writable_session(self.branch)
        _trim()

    def abandon(self) -> None:
        """After a failure: ``main`` untouched, the staging branch gone."""
        if self.branch != BRANCH and TMP_BRANCH in self.repo.list_branches():
            self.repo.delete_branch(TMP_BRANCH)

    def finish(self, *, force: bool, tags: list[str]) -> tuple[str, bool]:
        """The emit's snapshot and whether it is new (``force``: commit even without changes).
        An update (or a staged emit) tags the snapshot before ``main`` moves to it: a failure in
        between leaves ``main`` as it was, and a tagged snapshot the next emit moves it to."""
        s = self.session
        committed = bool(self.checkpoints) or s.has_uncommitted_changes or force
        if not committed:
            snap = self.base
        elif self.checkpoints and not s.has_uncommitted_changes:
            # the last part becomes the emit's snapshot (the amend merges one part's log)
            self.checkpoints -= 1
            snap = s.amend(self.message, metadata=self.metadata, allow_empty=True)
        elif self.checkpoints:
            snap = s.commit(self.message, metadata=self.metadata)
        elif self.update:  # a snapshot on main's tip; main moves below
            snap = s.flush(self.message, metadata=self.metadata)
        else:
            snap = s.commit(self.message, metadata=self.metadata, allow_empty=True)
        _tag(self.repo, tags, snap)
        if committed and (self.update or self.branch != BRANCH):
            self.repo.reset_branch(BRANCH, snap, from_snapshot_id=self.base)
        if self.branch != BRANCH:
            self.repo.delete_branch(TMP_BRANCH)
        return snap, committed


def _tag(repo: Any, names: list[str], snapshot: str) -> None:
    existing = set(repo.list_tags())
    for name in names:
        if name not in existing:
            repo.create_tag(name, snapshot_id=snapshot)


def _interrupted(repo: Any, version: int) -> str | None:
    """The snapshot an interrupted emit of ``version`` tagged but did not move ``main`` to
    (its parent is ``main``'s tip), if any."""
    name = f"refstore-v{version}"
    if name not in set(repo.list_tags()):
        return None
    snap, tip = repo.lookup_tag(name), repo.lookup_branch(BRANCH)
    if snap == tip:
        return None
    parent = repo.lookup_snapshot(snap).parent_id
    while parent is not None and parent != tip:  # the emit's parts lie between
        part = _info(repo.lookup_snapshot(parent))
        if "part" not in part or part.get("version") != version:
            return None
        parent = repo.lookup_snapshot(parent).parent_id
    return str(snap) if parent == tip else None


def _checksum(token: str) -> datetime | str | None:
    if token.startswith("etag:"):
        return token[len("etag:") :]
    if token.startswith("mtime:"):
        return datetime.fromtimestamp(int(token[len("mtime:") :]), UTC)
    return None


@dataclass
class _Counts:
    written: int = 0
    native: int = 0
    deleted: int = 0


def _write_array(store: Any, meta: ArrayMeta, want: _Wanted, held: _Held, urls: list[str],
                 tokens: list[str], counts: _Counts, *, meta_doc: bytes | None) -> None:  # fmt: skip
    """Make the array's chunks in the session equal ``want``; ``meta_doc``: its new zarr.json,
    written after the deletes (a shape may shrink) and before the writes (or grow)."""
    name = meta.name
    grid = want.grid
    have = held.state
    d = diff_states(want.state, have)
    # native chunks held by both: rewrite only when their bytes differ
    keys_h = [_key(name, np.unravel_index(int(have.flat[h]), grid) if grid else ()) for _w, h in d.compare_native]

    async def native_io() -> list[int]:
        old = await asyncio.gather(*(_get(store, k) for k in keys_h))
        redo = [int(w) for (w, _h), o in zip(d.compare_native, old, strict=True) if o != want.native[int(w)]]
        deletes = [_key(name, np.unravel_index(int(f), grid) if grid else ()) for f in d.delete]
        deletes += [_key(name, c) for c in held.outside]  # past a shrunken grid: before the new zarr.json
        for k in deletes:
            await store.delete(k)
        return redo

    redo = _run(native_io())
    if meta_doc is not None:
        _run(_set(store, f"{name}/zarr.json", meta_doc))
    counts.deleted += len(d.delete) + len(held.outside)
    rows = np.sort(np.concatenate([d.write, np.array(redo, np.int64)])) if redo else d.write
    st = want.state
    virt = rows[st.kind[rows] == VIRTUAL]
    nat = rows[st.kind[rows] == NATIVE]
    url_arr = np.array([*urls, ""], dtype=object)
    if len(virt) and not grid:
        r = int(virt[0])
        store.set_virtual_ref(f"{name}/c", urls[st.loc[r]], offset=int(st.offset[r]), length=int(st.length[r]),
                              checksum=_checksum(tokens[st.token[r]]) if st.token[r] >= 0 else None)  # fmt: skip
    elif len(virt):
        tok = st.token[virt]
        order = np.argsort(tok, kind="stable")
        cuts = np.concatenate([[0], np.nonzero(np.diff(tok[order]))[0] + 1, [len(order)]])
        for a, z in pairwise(cuts):
            group = np.sort(virt[order[a:z]])
            t = int(tok[order[a]])
            checksum = _checksum(tokens[int(t)]) if t >= 0 else None
            for b in boxes(want.coords, group):
                size = int(np.prod(b.shape))
                off = np.zeros(size, np.uint64)
                off[b.cells] = st.offset[b.rows]
                ln = np.zeros(size, np.uint64)
                ln[b.cells] = st.length[b.rows]
                failed = store.set_virtual_refs_arr(name, b.shape, _box_urls(url_arr, st.loc[b.rows], b.cells, size),
                                                    off, ln, arr_offset=b.origin, checksum=checksum)  # fmt: skip
                if failed:
                    raise StorageError(f"array {name!r}: {len(failed)} references outside every container")
    counts.written += len(virt)

    async def native_set() -> None:
        for r in nat.tolist():
            await _set(store, _key(name, want.coords[r]), want.native[r])

    _run(native_set())
    counts.native += len(nat)


def _box_urls(url_arr: np.ndarray[Any, Any], loc: np.ndarray[Any, Any], cells: np.ndarray[Any, Any],
              size: int) -> list[str]:  # fmt: skip
    """The location list of one box for ``set_virtual_refs_arr`` (which takes only a ``list``):
    references to the few URL strings, never a string per cell; ``""`` = no chunk here. A box
    filled from one source (a file's block of a series) is ``[url] * size``."""
    if len(cells) == size and len(loc) and int(loc.min()) == int(loc.max()):
        return [url_arr[int(loc[0])]] * size
    full = np.full(size, len(url_arr) - 1, np.int64)
    full[cells] = loc
    out: list[str] = url_arr[full].tolist()
    return out


def _splits(arrays: list[ArrayMeta], grids: dict[str, tuple[int, ...]]) -> dict[str, int]:
    from . import _icechunk_plan

    out = {}
    for m in arrays:
        rows = split_rows(grids[m.name], _icechunk_plan.SPLIT_REFS)
        if rows is not None:
            out[m.name] = rows
    return out


def _rx_escape(name: str) -> str:
    """A literal for Icechunk's (Rust) regex: only its meta characters escaped."""
    return "".join("\\" + ch if ch in "\\.+*?()|[]{}^$#&-~" else ch for ch in name)


def _splitting_config(splits: dict[str, int]) -> Any:
    import icechunk as ic

    if not splits:
        return None
    return ic.ManifestSplittingConfig.from_dict({
        ic.ManifestSplitCondition.path_matches(f"^/{_rx_escape(name)}$"): {ic.ManifestSplitDimCondition.Axis(0): rows}
        for name, rows in sorted(splits.items())
    })  # fmt: skip


def _info(snapshot: Any) -> dict[str, Any]:
    md = snapshot.metadata or {}
    info = md.get("refstore")
    return info if isinstance(info, dict) else {}


def _check_tags(repo: Any, path: str, src: EmitSource, tag_names: list[str]) -> None:
    """Icechunk tags are immutable: refuse (before anything changes) a tag naming another state."""
    existing = set(repo.list_tags())
    for name in tag_names:
        if name in existing:
            held = _info(repo.lookup_snapshot(repo.lookup_tag(name)))
            if held.get("version") != src.version or held.get("uri") != src.uri:
                raise BadInputError(
                    f"{path}: Icechunk tag {name!r} already names another state (refstore version "
                    f"{held.get('version')}); tags are immutable"
                )


def write(
    src: EmitSource, arrays: list[ArrayMeta], out: str, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    import icechunk as ic

    register_codecs()
    out = os.path.abspath(out)
    try:
        with quiet_local_logs():
            exists = os.path.isdir(out) and bool(os.listdir(out))
            if exists and not ic.Repository.exists(ic.local_filesystem_storage(out)):
                raise BadInputError(f"{out}: exists and is not an Icechunk repository; give a new or empty folder")
            if os.path.exists(out) and not os.path.isdir(out):
                raise BadInputError(f"{out}: is a file; give a folder for the Icechunk repository")
            if exists:
                return _emit(src, arrays, out, progress, fresh=False)
            with atomic_output(out, directory=True) as tmp:
                return _emit(src, arrays, tmp, progress, fresh=True)
    except ic.IcechunkError as e:  # one line for the CLI, not Icechunk's report
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise StorageError(f"{out}: Icechunk: {first}") from e


def _attr_types(src: EmitSource, arrays: list[ArrayMeta]) -> dict[str, Any]:
    """Per node (``""`` for the root group), the attribute types and shapes their JSON values
    lose (``zarr_meta.attr_types``), for the snapshot's metadata: zarr v3 attributes are plain
    JSON and xarray shows every one, so the types go beside them, where ``import icechunk``
    finds them."""
    groups = src.group_attrs()
    nodes = {g: groups.get(g) or {} for g in _groups(src, arrays)} | {m.name: m.attrs for m in arrays}
    return {k: t for k, attrs in sorted(nodes.items()) if (t := attr_types(attrs)) is not None}


def _emit(src: EmitSource, arrays: list[ArrayMeta], path: str, progress: Callable[[int, int], None] | None,
          *, fresh: bool) -> dict[str, Any]:  # fmt: skip
    import icechunk as ic

    storage = ic.local_filesystem_storage(path)
    locs = _Locations.of(src)
    grids = {m.name: src.grid(m) for m in arrays}
    splits = _splits(arrays, grids)
    if fresh:
        prefixes = container_prefixes(locs.urls)
        cfg = ic.RepositoryConfig.default()
        for p in prefixes:
            cfg.set_virtual_chunk_container(_container(p))
        if splits:
            cfg.manifest = ic.ManifestConfig(splitting=_splitting_config(splits))
        with _quiet():
            repo = ic.Repository.create(storage, config=cfg, authorize_virtual_chunk_access=credentials(prefixes))
        old: dict[str, Any] = {}
        new: list[str] = []
    else:
        cfg = ic.Repository.fetch_config(storage) or ic.RepositoryConfig.default()
        have_prefixes = sorted((cfg.virtual_chunk_containers or {}).keys())
        new = container_prefixes(locs.urls, have_prefixes)
        with _quiet():
            repo = ic.Repository.open(storage, authorize_virtual_chunk_access=credentials(have_prefixes))
        old = _info(repo.lookup_snapshot(repo.lookup_branch(BRANCH)))
        if old and old.get("uri") != src.uri:
            raise BadInputError(f"{path}: holds collection {old.get('uri')}, not {src.uri}; emit into a new folder")
        prefixes = sorted({*have_prefixes, *new})
    tag_names = sorted({*src.tags, *([src.tag] if src.tag else []), f"refstore-v{src.version}"})
    _check_tags(repo, path, src, tag_names)
    pending = None if fresh else _interrupted(repo, src.version)
    if pending is not None:  # finish it: the snapshot holds this version already
        tip = repo.lookup_branch(BRANCH)
        _tag(repo, tag_names, pending)
        repo.reset_branch(BRANCH, pending, from_snapshot_id=tip)
        return {"refs": 0, "written": 0, "native": 0, "deleted": 0, "snapshot": pending, "committed": True,
                "containers": prefixes, "tags": tag_names, "repaired": True}  # fmt: skip
    save_config = not fresh and bool(new or old.get("splits", {}) != splits)
    if save_config:  # new containers or splits: in this session now, saved just before the commit
        for p in new:
            cfg.set_virtual_chunk_container(_container(p))
        cfg.manifest = ic.ManifestConfig(splitting=_splitting_config(splits))
        with _quiet():
            repo = ic.Repository.open(storage, config=cfg, authorize_virtual_chunk_access=credentials(prefixes))
    old_tokens: dict[str, str] = old.get("checksums", {}) if old else {}
    token_list = sorted({t for t in [*locs.tokens.values(), *old_tokens.values()] if t})
    token_index = _vocab(token_list)
    url_index = {u: i for i, u in enumerate(locs.urls)}

    message = f"refstore {src.uri} version {src.version}" + (f" ({src.tag})" if src.tag else "")
    info = {
        "uri": src.uri,
        "version": src.version,
        "tag": src.tag,
        "tags": tag_names,
        "checksums": {u: t for u, t in sorted(locs.tokens.items()) if t},
        "splits": splits,
        "attr_types": _attr_types(src, arrays),
    }
    # staged (committed in parts) when an array is split or the arrays' grids together could hold
    # more than a part: many unsplit arrays would otherwise all be pending in one session
    cells = sum(math.prod(grids[m.name]) for m in arrays)
    staged = bool(splits) or cells > CHECKPOINT_REFS
    sessions = _Sessions(repo, message, info, staged=staged, update=not fresh, storage=storage,
                         prefixes=prefixes)  # fmt: skip
    try:
        store = sessions.store
        counts = _Counts()
        groups = _groups(src, arrays)
        wanted_nodes = {**{g: "group" for g in groups}, **{m.name: "array" for m in arrays}}
        held_nodes: dict[str, str] = _run(_nodes(store)) if not fresh else {}

        async def structure() -> None:
            for p in sorted(held_nodes, key=len, reverse=True):
                if p and (wanted_nodes.get(p) != held_nodes[p]):
                    if any(p.startswith(q + "/") for q in held_nodes if q and held_nodes[q] != wanted_nodes.get(q)):
                        continue  # inside a node being removed
                    await store.delete_dir(p)
            for g, doc in groups.items():
                key = f"{g}/zarr.json" if g else "zarr.json"
                if await _get(store, key) != doc:
                    await _set(store, key, doc)

        _run(structure())
        held_nodes = {p: k for p, k in held_nodes.items() if wanted_nodes.get(p) == k}
        n_refs = 0
        for i, meta in enumerate(arrays):
            doc = _array_doc(meta)
            key = f"{meta.name}/zarr.json"
            before: bytes | None = _run(_get(store, key)) if meta.name in held_nodes else None
            if before is not None and _structural(before) != _structural(doc):
                _run(store.delete_dir(meta.name))
                before = None
            if before is None:
                have = _Held(ChunkState.empty(), np.zeros((0, len(meta.shape)), np.int64))
            else:
                have = _run(_have(store, meta.name, len(meta.shape), grids[meta.name], url_index, token_index,
                                  old_tokens, known=bool(old)))  # fmt: skip
                _trim()  # the batches it was gathered from
            meta_doc = doc if before != doc else None
            split = splits.get(meta.name)
            ranges = _row_ranges(grids[meta.name], split, None if split is None else
                                 _rows_in_use(src, meta, have, grids[meta.name]))  # fmt: skip
            for j, rows in enumerate(ranges):
                want = _wanted(src, meta, locs, url_index, token_index, rows)
                n_want = len(want.state.flat)
                n_refs += n_want
                _write_array(store, meta, want, _held_rows(have, grids[meta.name], rows, first=j == 0), locs.urls,
                             token_list, counts, meta_doc=meta_doc if j == 0 else None)  # fmt: skip
                del want  # not alive while Icechunk commits
                if i + 1 < len(arrays) or j + 1 < len(ranges):  # the last is committed by ``finish``
                    sessions.checkpoint(n_want)  # after a manifest range or a whole unsplit array
                store = sessions.store
            if progress is not None:
                progress(i + 1, len(arrays))

        if save_config:  # after every chunk was planned and set: a refused emit changes nothing
            repo.save_config()
        snapshot, committed = sessions.finish(force=old.get("version") != src.version, tags=tag_names)
    except BaseException:
        sessions.abandon()
        raise
    return {
        "refs": n_refs,
        "written": counts.written,
        "native": counts.native,
        "deleted": counts.deleted,
        "snapshot": snapshot,
        "committed": committed,
        "containers": prefixes,
        "tags": tag_names,
    }


class _quiet(warnings.catch_warnings):
    """Icechunk and zarr warnings that say nothing about this emit (local storage, numcodecs
    names outside the v3 spec)."""

    def __enter__(self) -> None:
        super().__enter__()
        warnings.simplefilter("ignore")

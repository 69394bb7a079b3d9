"""Pure planning for the Icechunk form: container prefixes, checksums, manifest splits, the
diff of wanted against held chunk references, and the boxes handed to ``set_virtual_refs_arr``.

No Icechunk, no I/O: numpy arrays in, numpy arrays out (see ``design/emit.md``).
"""

from __future__ import annotations

import math
import os
import string
from dataclasses import dataclass
from itertools import pairwise
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np

from ..errors import BadInputError

__all__ = [
    "SPLIT_REFS",
    "Box",
    "ChunkState",
    "boxes",
    "checksum_token",
    "chunk_url",
    "container_prefixes",
    "diff_states",
    "split_rows",
    "stable_prefix",
]

SPLIT_REFS = 1_000_000
"""Arrays with more chunks than this get split manifests along axis 0, each holding at most
this many references."""

MISSING, NATIVE, VIRTUAL = 0, 1, 2
"""Kinds of a chunk (Icechunk's ``ChunkType`` values; missing = no chunk)."""


_PCHAR = "/!$&'()*+,;=:@"
"""Characters a ``file://`` URL keeps verbatim in its path besides letters, digits and ``-._~``
(RFC 3986 path characters): Icechunk's URL parser neither encodes nor interprets them."""

_STABLE = frozenset(string.ascii_letters + string.digits + "-._~" + _PCHAR)
"""Characters a container prefix may hold after its ``scheme://authority/``: they read the same
in a chunk URL as written and percent-decoded, the two forms Icechunk matches prefixes against
(the location as given when a reference is set, the decoded location when a chunk is read)."""


def chunk_url(location: str) -> str:
    """The URL Icechunk gets for a published location. A local path (or a ``file://`` URL, whose
    remainder refstore reads as a path) becomes a ``file://`` URL with its path percent-encoded
    as UTF-8 except letters, digits, ``-._~`` and ``_PCHAR`` (Icechunk percent-decodes the path
    to find the file). Object-store URLs (``s3://``, ``gs://``, ``az://``...: keys named
    literally, as refstore and GDAL read them) get their key encoded the same way, since
    Icechunk percent-decodes it too. HTTP(S) URLs are already encoded (remap): verbatim."""
    if location.startswith(("http://", "https://")):
        return location
    if "://" in location and not location.startswith("file://"):
        scheme, _, rest = location.partition("://")
        bucket, _, key = rest.partition("/")
        return f"{scheme}://{bucket}/" + quote(key.encode("utf-8"), safe=_PCHAR)
    path = location[len("file://") :] if location.startswith("file://") else location
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise BadInputError(f"{path}: Icechunk cannot reference a local path with control characters")
    return "file://" + quote(os.fsencode(path), safe=_PCHAR)


def _root(url: str) -> str:
    """``scheme://authority/`` of a URL (``file:///`` for local files)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"


def _stable_folder(url: str) -> str:
    """The longest folder (ending in ``/``) of ``url`` with only ``_STABLE`` characters after its
    root; at least the root."""
    root = _root(url)
    rest = url[len(root) :]
    cut = next((i for i, c in enumerate(rest) if c not in _STABLE), len(rest))
    return root + rest[: rest.rfind("/", 0, cut) + 1]


def stable_prefix(prefix: str) -> bool:
    """Whether a container prefix matches its chunk URLs both as given and percent-decoded."""
    return _stable_folder(prefix) == prefix


def container_prefixes(urls: list[str], existing: list[str] | None = None) -> list[str]:
    """One virtual chunk container per scheme and authority (bucket, host; one for local files):
    the longest common folder of its locations, cut back before the first segment holding a
    character outside ``_STABLE`` (``%``, space, ``#``, non-ASCII...). URLs already under a stable
    ``existing`` prefix need no new container (a new prefix may enclose an existing one: Icechunk
    resolves nested prefixes, longest first). Sorted, each ending in ``/``."""
    usable = [p for p in existing or [] if stable_prefix(p)]
    todo = sorted({u for u in urls if not any(u.startswith(p) for p in usable)})
    groups: dict[str, list[str]] = {}
    for u in todo:
        groups.setdefault(_root(u), []).append(u)
    out: list[str] = []
    for root, members in sorted(groups.items()):
        out += _common_folders(root, sorted({_stable_folder(m) for m in members}))
    return sorted(out)


def _common_folders(root: str, folders: list[str]) -> list[str]:
    """The longest common folder of ``folders`` (all under ``root``); for local files, whose
    container Icechunk refuses at ``file:///``, one per top-level folder instead."""
    common = os.path.commonprefix(folders)  # noqa: RUF071 (cut back to a "/" next)
    common = common[: common.rindex("/") + 1]
    if len(common) > len(root) or root != "file:///":
        return [max(common, root, key=len)]
    tops: dict[str, list[str]] = {}
    for f in folders:
        top = f[len(root) :].split("/", 1)[0]
        if not top:
            raise BadInputError(f"{f}: Icechunk has no container for local files directly under / or under a "
                                "top-level folder whose name needs escaping; remap them")  # fmt: skip
        tops.setdefault(top, []).append(f)
    return [p for group in tops.values() for p in _common_folders(root, group)]


def checksum_token(location: str, published: str, mtime_ns: int | None, etag: str | None) -> str:
    """What Icechunk checks before reading a source's chunks, as a string stored in commit
    metadata: ``etag:<etag>``, ``mtime:<whole seconds, rounded up>``, or ``""`` (no check).

    Only unremapped sources get one: a remapped location names another object (a copy, an
    upload) whose mtime and etag refstore never recorded."""
    if published != location:
        return ""
    if etag:
        return f"etag:{etag}"
    if mtime_ns is not None and mtime_ns >= 0:
        return f"mtime:{-(-int(mtime_ns) // 1_000_000_000)}"
    return ""


@dataclass(frozen=True, slots=True)
class ChunkState:
    """Chunk references of one array, one row per present chunk, sorted by ``flat`` (C-order
    flat chunk index): ``kind`` (NATIVE or VIRTUAL), ``loc`` (index into a location list; -1
    for native chunks), ``offset``/``length`` (bytes), ``token`` (index into a checksum-token
    list; -1 = none)."""

    flat: np.ndarray[Any, np.dtype[np.int64]]
    kind: np.ndarray[Any, np.dtype[np.uint8]]
    loc: np.ndarray[Any, np.dtype[np.int64]]
    offset: np.ndarray[Any, np.dtype[np.uint64]]
    length: np.ndarray[Any, np.dtype[np.uint64]]
    token: np.ndarray[Any, np.dtype[np.int64]]

    @staticmethod
    def empty() -> ChunkState:
        i = np.zeros(0, np.int64)
        u = np.zeros(0, np.uint64)
        return ChunkState(i, np.zeros(0, np.uint8), i, u, u, i)

    def sorted(self) -> ChunkState:
        if len(self.flat) < 2 or bool(np.all(self.flat[1:] > self.flat[:-1])):
            return self
        order = np.argsort(self.flat, kind="stable")
        return ChunkState(self.flat[order], self.kind[order], self.loc[order], self.offset[order],
                          self.length[order], self.token[order])  # fmt: skip


@dataclass(frozen=True, slots=True)
class Diff:
    """Rows of the wanted state to write (``write``: indices into wanted) and flat indices held
    now but not wanted (``delete``); ``compare_native``: (wanted row, held row) pairs both native,
    whose bytes the caller compares."""

    write: np.ndarray[Any, np.dtype[np.int64]]
    delete: np.ndarray[Any, np.dtype[np.int64]]
    compare_native: np.ndarray[Any, np.dtype[np.int64]]


def diff_states(want: ChunkState, have: ChunkState) -> Diff:
    """What to write and delete so that ``have`` becomes ``want``. Both index the same location
    and token lists; a virtual reference is rewritten when its location, range or checksum
    token differs (a changed token means the bytes behind an equal range are new)."""
    pos = np.searchsorted(have.flat, want.flat)
    pos_c = np.minimum(pos, max(len(have.flat) - 1, 0))
    matched = (pos < len(have.flat)) & (have.flat[pos_c] == want.flat) if len(have.flat) else np.zeros(
        len(want.flat), bool)  # fmt: skip
    hp = pos_c[matched]
    wi = np.nonzero(matched)[0]
    same_kind = want.kind[wi] == have.kind[hp]
    virt = same_kind & (want.kind[wi] == VIRTUAL)
    same_ref = (
        (want.loc[wi] == have.loc[hp])
        & (want.offset[wi] == have.offset[hp])
        & (want.length[wi] == have.length[hp])
        & (want.token[wi] == have.token[hp])
    )
    unchanged = virt & same_ref
    native_pairs = same_kind & (want.kind[wi] == NATIVE)
    write = np.sort(np.concatenate([np.nonzero(~matched)[0], wi[~unchanged & ~native_pairs]]))
    keep = np.zeros(len(have.flat), bool)
    keep[hp] = True
    delete = have.flat[~keep]
    pairs = np.stack([wi[native_pairs], hp[native_pairs]], axis=1) if len(wi) else np.zeros((0, 2), np.int64)
    return Diff(write.astype(np.int64), delete.astype(np.int64), pairs.astype(np.int64))


@dataclass(frozen=True, slots=True)
class Box:
    """A block of the chunk grid for one ``set_virtual_refs_arr`` call: ``origin`` and ``shape``
    in chunks, ``cells`` (C-order flat index inside the box of each row) and ``rows`` (indices
    into the caller's rows)."""

    origin: tuple[int, ...]
    shape: tuple[int, ...]
    cells: np.ndarray[Any, np.dtype[np.int64]]
    rows: np.ndarray[Any, np.dtype[np.int64]]


def boxes(coords: np.ndarray[Any, np.dtype[np.int64]], rows: np.ndarray[Any, np.dtype[np.int64]],
          *, slack: int = 4, floor: int = 65_536) -> list[Box]:  # fmt: skip
    """Cover ``rows`` (chunk coordinates ``coords[rows]``, shape (n, ndim)) with boxes whose
    cells number at most ``slack * rows + floor`` in all: the bounding box, else one box per
    distinct axis-0 index (recursively). Work is proportional to the rows, not the grid."""
    if len(rows) == 0:
        return []
    c = coords[rows]
    lo = c.min(axis=0)
    hi = c.max(axis=0) + 1
    shape = tuple(int(x) for x in hi - lo)
    cells = math.prod(shape)
    if cells <= slack * len(rows) + floor:
        flat = np.ravel_multi_index(tuple((c - lo).T), shape)
        return [Box(tuple(int(x) for x in lo), shape, flat.astype(np.int64), rows)]
    if c.shape[1] == 1:  # sparse 1-D: one box per run without a gap wider than ``floor``
        order = np.argsort(c[:, 0], kind="stable")
        g = c[order, 0]
        cuts = np.concatenate([[0], np.nonzero(np.diff(g) > floor)[0] + 1, [len(g)]])
        runs = [(int(a), int(z)) for a, z in pairwise(cuts)]
        return [b for a, z in runs
                for b in boxes(coords, rows[order[a:z]], slack=slack, floor=max(floor, int(g[z - 1] - g[a]) + 1))]
    if shape[0] == 1:  # one hyper-row: split along the next axis
        sub = boxes(coords[:, 1:], rows, slack=slack, floor=floor)
        return [Box((int(lo[0]), *b.origin), (1, *b.shape), b.cells, b.rows) for b in sub]
    out: list[Box] = []
    order = np.argsort(c[:, 0], kind="stable")
    g0 = c[order, 0]
    starts = np.concatenate([[0], np.nonzero(np.diff(g0))[0] + 1, [len(g0)]])
    for a, b in pairwise(starts):
        out += boxes(coords, rows[order[a:b]], slack=slack, floor=floor)
    return out


MAX_SPLITS = 1024
"""Manifest splits of one array at most: Icechunk's commit visits every split of the grid, so a
sparse grid of 2^20 rows split one row each took minutes for two references."""


def split_rows(grid: tuple[int, ...], limit: int = SPLIT_REFS) -> int | None:
    """Axis-0 rows per manifest for an array of ``grid`` chunks (None: no split needed), at most
    ``MAX_SPLITS`` splits (a manifest of a sparse grid holds fewer references than its cells)."""
    n = math.prod(grid)
    if len(grid) == 0 or n <= limit:
        return None
    per_row = math.prod(grid[1:])
    return max(1, limit // per_row, -(-grid[0] // MAX_SPLITS))

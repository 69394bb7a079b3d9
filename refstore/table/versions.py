"""Versions: tags (Lance tags), diffs between two versions, compaction and garbage collection."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS
from .._ref import LATEST
from ..errors import BadInputError, NotFoundError, StorageError
from ..schema import Kind
from ._rows import values_equal

if TYPE_CHECKING:
    from .collection import Collection, Snapshot

__all__ = ["DiffReport", "compact", "create_tag", "delete_tag", "diff", "list_tags"]


# --------------------------------------------------------------------------- tags
_TAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""A tag name: never read as a version number (all digits) nor as an option (a leading '-')."""


def _tags(col: Collection) -> dict[str, Any]:
    try:
        return dict(col._dataset().tags.list())
    except (ValueError, OSError) as e:
        raise StorageError(f"{col.uri}: cannot list tags: {str(e).splitlines()[0]}") from None


def list_tags(col: Collection) -> list[dict[str, Any]]:
    """Tags, oldest version first: ``[{"name", "version"}]``."""
    tags = _tags(col)
    out = [{"name": name, "version": int(t["version"])} for name, t in tags.items()]
    return sorted(out, key=lambda t: (t["version"], t["name"]))


def create_tag(col: Collection, name: str, as_of: int | str | None = None) -> int:
    """Name a version (default latest). Tags are immutable: an existing name is refused."""
    if not _TAG_NAME.fullmatch(name) or name.isdigit():
        raise BadInputError(
            f"tag {name!r}: use letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(not only digits: that is a version number; not '-': that is an option)"
        )
    if name == LATEST:
        raise BadInputError(f"tag {name!r}: that name is taken: it names the newest version wherever a version is")
    ds = col._dataset()
    if name in _tags(col):
        raise BadInputError(f"tag {name!r} already exists (version {ds.tags.get_version(name)}); tags are immutable")
    version = col.resolve(as_of)
    col.readable(version)
    try:
        ds.tags.create(name, version)
    except (ValueError, OSError) as e:
        if "already exists" in str(e):
            raise BadInputError(f"tag {name!r} already exists; tags are immutable") from None
        raise StorageError(f"{col.uri}: cannot create tag {name!r}: {str(e).splitlines()[0]}") from None
    return version


def delete_tag(col: Collection, name: str) -> int:
    ds = col._dataset()
    tags = _tags(col)
    if name not in tags:
        raise NotFoundError(f"no tag named {name!r} in {col.uri}")
    version = int(tags[name]["version"])
    ds.tags.delete(name)
    return version


# --------------------------------------------------------------------------- diff
@dataclass(frozen=True, slots=True)
class DiffReport:
    """What changed from version ``a`` to ``b``. Per array, references (global keys of the view)
    added, removed and changed; sources by location; whether remap rules changed."""

    a: int
    b: int
    arrays: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources_added: list[str] = field(default_factory=list)
    sources_removed: list[str] = field(default_factory=list)
    sources_changed: list[str] = field(default_factory=list)
    remap_changed: bool = False
    held: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per array: chunks whose bytes became held (``added``) or were released (``removed``), and
    the bytes of those chunks (``bytes``); held bytes go into published forms as bytes."""

    @property
    def differs(self) -> bool:
        """Whether anything a published form carries differs (references, metadata, sources,
        remap rules, held bytes)."""
        return bool(
            self.sources_added
            or self.sources_removed
            or self.sources_changed
            or self.remap_changed
            or any(a["added"] or a["removed"] or a["changed"] or a["metadata_changed"] for a in self.arrays.values())
            or any(h["added"] or h["removed"] for h in self.held.values())
        )

    @property
    def changed(self) -> bool:
        """Same as ``differs``: a form emitted from ``b`` would differ from one emitted from ``a``."""
        return self.differs

    def to_json(self) -> dict[str, Any]:
        no_held = {"added": 0, "removed": 0, "bytes": 0}
        return {
            "from": {"version": self.a},
            "to": {"version": self.b},
            "arrays": {n: {**d, "held": self.held.get(n, no_held)} for n, d in self.arrays.items()},
            "sources": {"added": self.sources_added, "removed": self.sources_removed, "changed": self.sources_changed},
            "remap_changed": self.remap_changed,
            "differs": self.differs,
        }


_VIEW = "kind = 'chunk' AND g0 >= -1"
_REF_COLS = ["source", "offset", "length", "filter_mask", "inline"]
"""What a reference is: a chunk whose row differs in one of these ``changed``."""
_VALUE_COLS = [*_REF_COLS, "held_at"]
"""The columns compared: the reference, and whether its bytes are held (``DiffReport.held``)."""


def _touched(sa: Snapshot, sb: Snapshot, changed: list[str], key: list[str]) -> tuple[pa.Table, pa.Table]:
    """The view rows that can differ between ``sa`` (older) and ``sb``: rows of ``sb`` written
    after ``sa`` (Lance's change feed, exact with stable row ids) or belonging to a changed
    source, and the rows of ``sa`` they replaced or that left the view.

    Lance's ``delta`` reads the per-fragment row versions and deletion files, so the cost is that
    of the change: reading every row id of both versions (the way before) took seconds at 10M
    rows (``design/scale.md``)."""
    cols = [*key, *_VALUE_COLS]
    meta = ["_rowid", "_row_created_at_version"]
    d = sb.ds.delta(begin_version=sa.version, end_version=sb.version)
    names = [*cols, "kind", *meta]
    written = [_columns(r, names) for r in (d.get_inserted_rows(), d.get_updated_rows())]
    if changed:  # every row of a changed source, rewritten or not
        # ``source IN`` alone (the view is tested below): ANDed with ``kind``/``g0`` Lance took
        # ~20 s for it at 100M rows, alone milliseconds (``Snapshot.rows_of_sources``)
        flt = "source IN (" + ", ".join("'" + c.replace("'", "''") + "'" for c in changed) + ")"
        t = sb.ds.to_table(columns=[*cols, "kind", "_row_created_at_version"], filter=flt, with_row_id=True)
        written.append(t.select(names))
    tb = pa.concat_tables(written)
    if tb.num_rows:
        _, first = np.unique(tb.column("_rowid").to_numpy(), return_index=True)
        tb = tb.take(pa.array(np.sort(first)))
    created = tb.column("_row_created_at_version").to_numpy()
    kept = tb.column("_rowid").filter(pa.array(created <= sa.version))  # in ``sa``: rewritten in place
    deleted = d.get_deleted_row_ids().read_all().column("_rowid")
    old_ids = pa.concat_arrays([kept.combine_chunks().cast(pa.uint64()), deleted.combine_chunks().cast(pa.uint64())])
    in_view = pc.and_(pc.equal(tb.column("kind"), "chunk"), pc.greater_equal(tb.column("g0"), -1))
    tb = tb.filter(in_view).select(cols)
    if not len(old_ids):
        return tb.slice(0, 0), tb
    ta = sa.ds._take_rows(old_ids, columns=[*cols, "kind"])
    ta = ta.filter(pc.and_(pc.equal(ta.column("kind"), "chunk"), pc.greater_equal(ta.column("g0"), -1)))
    return ta.select(cols), tb


def _columns(reader: pa.RecordBatchReader, names: list[str]) -> pa.Table:
    """``names`` of every batch of ``reader`` (the change feed carries every column: keep only
    these per batch, so a large change is not held whole with its blobs and metadata)."""
    return pa.Table.from_batches(
        [b.select(names) for b in reader], schema=pa.schema([reader.schema.field(n) for n in names])
    )


def _full(sa: Snapshot, sb: Snapshot, key: list[str]) -> tuple[pa.Table, pa.Table]:
    cols = [*key, *_VALUE_COLS]
    return sa.ds.to_table(columns=cols, filter=_VIEW), sb.ds.to_table(columns=cols, filter=_VIEW)


def diff(col: Collection, a: int | str, b: int | str | None = None, *, exhaustive: bool = False) -> DiffReport:
    """Chunk-level diff between two versions (``b`` defaults to latest).

    Only rows Lance records as written after the older version (plus rows of changed sources)
    are compared; ``exhaustive=True`` joins every reference of both versions instead (the
    check the fast path is tested against).
    """
    sa, sb = col.snapshot(a), col.snapshot(b)
    if sa.version > sb.version:
        back = diff(col, sb.version, sa.version, exhaustive=exhaustive)
        flipped = {n: {**d, "added": d["removed"], "removed": d["added"]} for n, d in back.arrays.items()}
        return DiffReport(
            a=sa.version, b=sb.version, arrays=flipped, sources_added=back.sources_removed,
            sources_removed=back.sources_added, sources_changed=back.sources_changed,
            remap_changed=back.remap_changed,
            held={n: {**h, "added": h["removed"], "removed": h["added"]} for n, h in back.held.items()},
        )  # fmt: skip
    # sources
    src_a = {r["source"]: r for r in sa.sources().to_pylist()}
    src_b = {r["source"]: r for r in sb.sources().to_pylist()}
    added = sorted(set(src_b) - set(src_a))
    removed = sorted(set(src_a) - set(src_b))
    changed = sorted(
        s
        for s in set(src_a) & set(src_b)
        if (src_a[s]["size"], src_a[s]["mtime_ns"], src_a[s]["etag"])
        != (src_b[s]["size"], src_b[s]["mtime_ns"], src_b[s]["etag"])
    )
    arrays_a, arrays_b = sa.arrays(), sb.arrays()
    ndim = max([len(m.shape) for m in (*arrays_a.values(), *arrays_b.values())] or [1])
    key = ["array", "era", *GLOBAL_KEY_COLUMNS[: max(ndim, 1)]]

    if exhaustive or sa.version == sb.version:
        va, vb = _full(sa, sb, key)
    else:
        try:
            va, vb = _touched(sa, sb, changed, key)
        except (AttributeError, TypeError, ValueError, OSError):  # no row-version tracking here
            va, vb = _full(sa, sb, key)

    # join the candidate rows on the global key
    ja = va.select(key).append_column("__a", pa.array(np.arange(va.num_rows)))
    jb = vb.select(key).append_column("__b", pa.array(np.arange(vb.num_rows)))
    j = ja.join(jb, keys=key, join_type="full outer")
    ia, ib = j.column("__a"), j.column("__b")
    only_b = pc.is_null(ia).to_numpy(zero_copy_only=False)
    only_a = pc.is_null(ib).to_numpy(zero_copy_only=False)
    both = ~only_a & ~only_b
    names = j.column("array").to_numpy(zero_copy_only=False)
    jb_both = j.filter(pa.array(both))
    pa_idx, pb_idx = jb_both.column("__a"), jb_both.column("__b")
    same = np.ones(jb_both.num_rows, bool)
    for c in _REF_COLS:
        same &= values_equal(va.column(c).take(pa_idx), vb.column(c).take(pb_idx))
    if changed:  # the bytes behind every reference of a changed source are new
        in_changed = pc.is_in(vb.column("source").take(pb_idx), pa.array(changed, pa.string()))
        same &= ~in_changed.to_numpy(zero_copy_only=False)
    changed_names = jb_both.column("array").to_numpy(zero_copy_only=False)[~same]
    held = _held_changes(va, vb, j, only_a, only_b)

    out: dict[str, dict[str, Any]] = {}
    out_held: dict[str, dict[str, int]] = {}
    for name in sorted(set(arrays_a) | set(arrays_b)):
        ma, mb = arrays_a.get(name), arrays_b.get(name)
        out[name] = {
            "added": int(np.count_nonzero(names[only_b] == name)),
            "removed": int(np.count_nonzero(names[only_a] == name)),
            "changed": int(np.count_nonzero(changed_names == name)),
            "metadata_changed": (ma is None) != (mb is None)
            or (ma is not None and mb is not None and ma.to_json() != mb.to_json()),
        }
        if name in held:
            out_held[name] = held[name]
    remap_a = sa.rows(Kind.REMAP, ["source", "meta"]).to_pylist()
    remap_b = sb.rows(Kind.REMAP, ["source", "meta"]).to_pylist()
    return DiffReport(
        a=sa.version,
        b=sb.version,
        arrays=out,
        sources_added=added,
        sources_removed=removed,
        sources_changed=changed,
        remap_changed=sorted(json.dumps(r, sort_keys=True) for r in remap_a)
        != sorted(json.dumps(r, sort_keys=True) for r in remap_b),
        held=out_held,
    )


def _held_changes(va: pa.Table, vb: pa.Table, j: pa.Table, only_a: np.ndarray[Any, Any],
                  only_b: np.ndarray[Any, Any]) -> dict[str, dict[str, int]]:  # fmt: skip
    """Per array, chunks held in ``vb`` and not in ``va`` (or new and held), the reverse, and
    the bytes of both, from the full outer join ``j`` of the two versions' candidate rows."""
    held_a, length_a = _held_of(va, j.column("__a"), ~only_b)
    held_b, length_b = _held_of(vb, j.column("__b"), ~only_a)
    added, removed = held_b & ~held_a, held_a & ~held_b
    names = j.column("array").to_numpy(zero_copy_only=False)
    out: dict[str, dict[str, int]] = {}
    for name in np.unique(names[added | removed]).tolist():
        on = names == name
        out[str(name)] = {
            "added": int(np.count_nonzero(added & on)),
            "removed": int(np.count_nonzero(removed & on)),
            "bytes": int(length_b[added & on].sum() + length_a[removed & on].sum()),
        }
    return out


def _held_of(t: pa.Table, idx: pa.ChunkedArray, present: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    """Whether each joined row is held on the side ``t`` (False where absent) and its length."""
    n = len(present)
    if t.num_rows == 0:
        return np.zeros(n, bool), np.zeros(n, np.int64)
    rows = pc.fill_null(idx, 0)
    held = pc.greater_equal(t.column("held_at").take(rows), 0).to_numpy(zero_copy_only=False) & present
    return held, t.column("length").take(rows).to_numpy(zero_copy_only=False).astype(np.int64)


# --------------------------------------------------------------------------- hygiene
def compact(col: Collection) -> dict[str, Any]:
    """Merge small fragments and materialise deletions (Lance ``take`` is much slower until then),
    then build or refresh the scalar indices (``indices.py``)."""
    from ._commit import check_complete
    from ._files import needed_files

    ds = col._dataset()
    before = int(ds.version)
    had = needed_files(ds)  # compact_files moves ``ds`` to the version it commits
    try:
        m = ds.optimize.compact_files(materialize_deletions_threshold=0.0)
    except (OSError, ValueError) as e:
        raise StorageError(f"{col.uri}: compaction failed: {str(e).splitlines()[0]}") from None
    from .indices import build_indices

    check_complete(col, col._dataset(), had)  # a gc may have removed the new files before the link
    indexed = build_indices(col)
    after = int(col._dataset().version)
    return {
        "version": after,
        "versions_added": after - before,
        "fragments_removed": int(m.fragments_removed),
        "fragments_added": int(m.fragments_added),
        "indices": indexed["indices"],
    }

"""The scan commit of sources appended after the end of a series, without planning the series.

``upsert._attempt`` plans every recorded source on each commit (their var rows read, parsed
and rewritten, the series ordered): at 4,360 daily files that is ~1-2 s of Python for a new
day whose rows take 0.2 s to commit. When the new sources are all new, sort after every
recorded source and continue the last era (``plan/append.extend_plan``), this commit reads only
the collection, array and source rows and the last placed source's var rows, and writes what
the full commit would write except the recorded var rows, which it leaves in place (their
content would be rewritten unchanged): the new sources' source, var and chunk rows, every array
row and the collection row. Anything else returns None and the series is planned whole.
``tests/test_append_plan.py`` compares the tables both ways commit.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..plan.append import SeriesEnd, extend_plan
from ..plan.concat import SourceSlab
from ..plan.series_order import OrderRule, parse_prefer
from ..scan._intern import MetaTexts
from ..scan._types import ArrayMeta
from ..schema import GLOBAL_KEY_COLUMNS, SOURCE_KEY_COLUMNS, Kind
from ._commit import commit, head_row
from ._replace import replace_rows, replace_rows_at
from .collection import sql_str

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..scan._types import ScanResult
    from .collection import Collection, Snapshot
    from .upsert import PrewrittenChunks, ScanReport

__all__ = ["ENABLED", "STATS", "append_commit", "rescan_commit"]

ENABLED = True
"""False: every scan commit plans the whole series (the tests compare both ways)."""

STATS = {"appended": 0, "replaced": 0, "planned": 0}
"""How many scan commits appended, replaced sources in place, or planned the whole series (tests)."""

_ORDER = r'^\{.*"order": (?P<order>-?[0-9]+)[,}]'


def _orders(meta: pa.ChunkedArray) -> np.ndarray[Any, Any]:
    """Each source row's ``order`` (``upsert._source_meta``: ``json.dumps(sort_keys=True)``),
    read by a pattern where it matches and by ``json.loads`` where it does not (other writers)."""
    found = pc.extract_regex(pc.fill_null(meta, "{}"), _ORDER)
    valid = pc.is_valid(found).to_numpy(zero_copy_only=False)
    out = np.zeros(len(meta), np.int64)
    if valid.any():
        out[valid] = pc.cast(pc.struct_field(found.filter(pa.array(valid)), "order"), pa.int64()).to_numpy()
    texts = meta.to_pylist() if not valid.all() else []
    for i in np.flatnonzero(~valid).tolist():
        out[i] = int(json.loads(texts[i] or "{}").get("order", 0))
    return out


def _series_end(snap: Snapshot, known: set[str], cfg: dict[str, Any]) -> tuple[SeriesEnd, int] | None:
    """The recorded end of the series and the next source order, or None (some of ``known`` is
    recorded, or the series is not ordered by coordinates)."""
    src = snap.rows(Kind.SOURCE, ["source", "sort_value", "mtime_ns", "meta"])
    if not src.num_rows or pc.any(pc.is_in(src.column("source"), pa.array(sorted(known), pa.string()))).as_py():
        return None
    sort = src.column("sort_value").to_numpy()
    if np.isnan(sort).any():
        return None
    next_order = 1 + int(_orders(src.column("meta")).max())
    placed = ~pc.is_in(src.column("source"), pa.array(sorted(cfg["set_aside"]), pa.string())).to_numpy(
        zero_copy_only=False
    )
    if not placed.any():
        return None
    i = int(np.flatnonzero(placed)[np.argmax(sort[placed])])
    loc = src.column("source")[i].as_py()
    meta = json.loads(src.column("meta")[i].as_py() or "{}")
    var = snap.rows_of_sources(Kind.VAR, [loc], ["array", "meta"])
    arrays = {a: ArrayMeta.from_json(m) for a, m in zip(var.column("array").to_pylist(),
                                                         var.column("meta").to_pylist(), strict=True)}  # fmt: skip
    last = SourceSlab(loc, int(meta.get("order", 0)), arrays, float(sort[i]), meta.get("sort_units"),
                      meta.get("sort_last"), int(src.column("mtime_ns")[i].as_py()),
                      digests=meta.get("digests", {}))  # fmt: skip
    return SeriesEnd(snap.arrays(), last), next_order


def append_commit(
    col: Collection,
    snap: Snapshot,
    results: Sequence[ScanResult],
    concat_dim: str | None,
    counts: dict[str, Any],
    settings: dict[str, Any],
    prewritten: PrewrittenChunks | None,
    prune: Sequence[str],
) -> ScanReport | None:
    """Commit ``results`` as sources appended after the end of the series (one version, as
    ``upsert._attempt`` would commit it), or None when the series must be planned whole."""
    from .upsert import (
        ScanReport,
        _array_rows,
        _chunk_rows,
        _global_keys,
        _source_rows,
        _var_rows,
        _with_fragments,
        _with_source,
    )

    if not ENABLED:
        return None
    cfg = snap.config()
    dim = cfg.get("concat_dim")
    prefer = settings.get("prefer")
    if (
        not results or dim is None or cfg.get("mosaic") or settings.get("mosaic") or "set_aside" not in cfg
        or (concat_dim is not None and concat_dim != dim)
        or (prefer is not None and list(prefer) != cfg.get("prefer", []))
        or OrderRule.parse(settings.get("order") or cfg.get("order")) != OrderRule()
    ):  # fmt: skip
        return None  # another order than by coordinate: the whole series is planned
    found = _series_end(snap, {*(r.source.location for r in results), *prune}, cfg)
    if found is None:
        return None
    end, next_order = found
    orders = {r.source.location: next_order + i for i, r in enumerate(results)}
    texts = MetaTexts()  # one instance per content: the plan compares by identity, var rows reuse the JSON
    slabs = [SourceSlab(r.source.location, orders[r.source.location], {a.name: texts.canon(a) for a in r.arrays},
                        r.sort_value, r.sort_units, r.sort_last, r.source.mtime_ns, digests=r.digests)
             for r in results]  # fmt: skip
    plan = extend_plan(end, slabs, str(dim))
    if plan is None:
        return None
    STATS["appended"] += 1

    extra_fragments: list[Any] = []
    extra_rows = 0
    if prewritten is not None:
        extra_fragments, extra_rows = prewritten.fragments(
            {k: v for k, v in plan.keys.items() if k[0] in prewritten.locations}
        )
    metas = {(r.source.location, a.name): a for r in results for a in r.arrays}
    scanned = _with_source(results)
    new_chunk = _chunk_rows(scanned, _global_keys(scanned, plan.keys, metas))
    ins = new_chunk.num_rows + extra_rows
    source_rows = _source_rows(results, [orders[r.source.location] for r in results])
    head = head_row(snap, {**{k: v for k, v in settings.items() if v is not None}, "concat_dim": dim,
                           "set_aside": dict(sorted(cfg["set_aside"].items()))})  # fmt: skip
    upsert = pa.concat_tables([head, source_rows, _var_rows(plan, sorted(slabs, key=lambda s: s.order), texts),
                               _array_rows(plan, texts), new_chunk])  # fmt: skip
    rules = parse_prefer(prefer if prefer is not None else cfg.get("prefer", []))
    record: dict[str, Any] = {
        "sources": {
            "new": len(results),
            "changed": 0,
            "unchanged": counts["unchanged"],
            "failed": len(counts["failed"]),
        },
        "refs": {"inserted": ins, "updated": 0, "deleted": 0},
        "failed": [{"source": s, "reason": r} for s, r in counts["failed"]],
        "removed": [],
        "set_aside": [],
        "prefer": [str(r) for r in rules],
        "order": str(OrderRule.parse(settings.get("order") or cfg.get("order"))),
        "ordered_by": plan.ordered_by,
    }
    txn = replace_rows(snap, upsert, "kind IN ('collection', 'array')")
    if extra_fragments:
        txn = _with_fragments(txn, extra_fragments)
    message = (
        f"scan: {len(results)} new, 0 changed, {counts['unchanged']} unchanged, {len(counts['failed'])} failed "
        f"sources; refs +{ins} ~0 -0"
    )
    unsupported = tuple(
        (r.source.location, a.name, a.reason or "") for r in results for a in r.arrays if a.status != "ok"
    )
    return ScanReport(
        version=commit(col, txn, "scan", message, record, parent=snap),
        committed=True,
        new=len(results),
        unchanged=counts["unchanged"],
        failed=tuple(counts["failed"]),
        inserted=ins,
        unsupported=unsupported,
        missing=tuple(counts.get("missing", ())),
        ordered_by=plan.ordered_by,
        concat_dim=str(dim),
    )


def _recorded(snap: Snapshot, locations: list[str]) -> pa.Table:
    """The source rows of ``locations`` as recorded (empty when none is)."""
    return snap.rows_of_sources(Kind.SOURCE, locations, ["source", "size", "mtime_ns", "etag", "sort_value", "meta"])


def _order(row: dict[str, Any]) -> int:
    return int(json.loads(row["meta"] or "{}").get("order", 0))


def _same_place(old: dict[str, Any], r: ScanResult, var: dict[str, str]) -> bool:
    """Whether a reprocessed source would be placed exactly as recorded: the same coordinates
    along the concat dimension and the same arrays with the same recorded metadata texts."""
    meta = json.loads(old["meta"] or "{}")
    sv = old["sort_value"]
    if (None if sv is None or math.isnan(sv) else sv) != r.sort_value:
        return False
    if (meta.get("sort_units"), meta.get("sort_last")) != (r.sort_units, r.sort_last):
        return False
    if (meta.get("digests", {}), meta.get("order_keys", {})) != (r.digests, r.order_keys):
        return False  # arrays taken once or the values ordering the series changed: planned again
    return {a.name: a.to_json() for a in r.arrays} == var and all(a.status == "ok" for a in r.arrays)


def rescan_commit(
    col: Collection,
    snap: Snapshot,
    results: Sequence[ScanResult],
    concat_dim: str | None,
    counts: dict[str, Any],
    settings: dict[str, Any],
    prune: Sequence[str],
) -> ScanReport | None:
    """Commit ``results`` as recorded sources rewritten in place (a reprocessed file: new bytes,
    the same arrays, metadata and coordinates), or None when the series must be planned whole.
    Nothing else can move, so the commit replaces the sources' source and chunk rows (their chunk
    rows keyed from their recorded var rows) and the collection row; the recorded var and array
    rows would be rewritten unchanged and are left in place."""
    from ..read.fetch import change_since_scan
    from ..schema import DEST_COLUMNS, NOT_PLACED
    from .upsert import ScanReport, _base, _chunk_rows, _global_keys, _source_rows, _with_source, diff_counts

    if not ENABLED or not results:
        return None
    cfg = snap.config()
    dim = cfg.get("concat_dim")
    prefer = settings.get("prefer")
    if (
        cfg.get("mosaic") or settings.get("mosaic") or "set_aside" not in cfg
        or (concat_dim is not None and concat_dim != dim)
        or (prefer is not None and list(prefer) != cfg.get("prefer", []))
        or OrderRule.parse(settings.get("order") or cfg.get("order")) != OrderRule()
    ):  # fmt: skip
        return None
    locs = [r.source.location for r in results]
    aside = {*cfg["set_aside"], *cfg["set_aside"].values()}
    if len(set(locs)) != len(locs) or aside & set(locs):
        return None  # a duplicate's choice may depend on the new file (--prefer newest)
    old = {r["source"]: r for r in _recorded(snap, [*locs, *prune]).to_pylist()}
    if set(prune) & old.keys() or set(locs) - old.keys():
        return None
    var = snap.rows_of_sources(Kind.VAR, locs, ["array", "source", "meta", "era", *DEST_COLUMNS])
    texts: dict[str, dict[str, str]] = {loc: {} for loc in locs}
    for a, s, m in zip(*(var.column(c).to_pylist() for c in ("array", "source", "meta")), strict=True):
        texts[s][a] = m
    for r in results:
        o = old[r.source.location]
        if change_since_scan((int(o["size"]), int(o["mtime_ns"]), str(o["etag"] or "")),
                             (r.source.size, r.source.mtime_ns, r.source.etag)) is None:  # fmt: skip
            return None  # recorded as it is (a concurrent scan): the full commit says so
        if not _same_place(o, r, texts[r.source.location]):
            return None
    arrays = snap.arrays()
    keys: dict[tuple[str, str], tuple[int, tuple[int, ...]]] = {}
    for row in var.to_pylist():
        g = arrays.get(row["array"])
        if row["d0"] == NOT_PLACED or g is None:
            continue
        if g.holes and g.holes[0][0] == 0 and not g.eras:
            return None  # keyed from its first holder by refstore before issue 12: the full plan re-keys
        d = [int(row[c]) for c in DEST_COLUMNS[: g.ndim]]
        era = int(row["era"])
        if g.eras:
            d[int(g.eras[0]["axis"])] -= int(g.eras[era]["start"])
        keys[(row["source"], row["array"])] = (era, _base(g, era, tuple(d)))
    STATS["replaced"] += 1

    metas = {(r.source.location, a.name): a for r in results for a in r.arrays}
    scanned = _with_source(results)
    new_chunk = _chunk_rows(scanned, _global_keys(scanned, keys, metas))
    old_cols = ["array", "source", *SOURCE_KEY_COLUMNS, *GLOBAL_KEY_COLUMNS, "era", "offset", "length",
                "filter_mask", "inline"]  # fmt: skip
    old_chunk = snap.rows_of_sources(Kind.CHUNK, sorted(locs), old_cols)
    key = ["array", "source", *SOURCE_KEY_COLUMNS]
    ins, upd, dele = diff_counts(old_chunk, new_chunk.select(old_cols), key, old_cols[len(key) :])
    source_rows = _source_rows(results, [_order(old[r.source.location]) for r in results])
    head = head_row(snap, {**{k: v for k, v in settings.items() if v is not None}, "concat_dim": dim,
                           "set_aside": dict(sorted(cfg["set_aside"].items()))})  # fmt: skip
    sort = snap.rows(Kind.SOURCE, ["sort_value"]).column("sort_value").to_numpy()
    ordered_by = None if dim is None else ("given" if np.isnan(sort).all() else "coordinate")
    rules = parse_prefer(prefer if prefer is not None else cfg.get("prefer", []))
    record: dict[str, Any] = {
        "sources": {
            "new": 0,
            "changed": len(results),
            "unchanged": counts["unchanged"],
            "failed": len(counts["failed"]),
        },
        "refs": {"inserted": ins, "updated": upd, "deleted": dele},
        "failed": [{"source": s, "reason": r} for s, r in counts["failed"]],
        "removed": [],
        "set_aside": [],
        "prefer": [str(r) for r in rules],
        "order": str(OrderRule.parse(settings.get("order") or cfg.get("order"))),
        "ordered_by": ordered_by,
    }
    # the rows replaced, by address: Lance plans an OR of an indexed selection with another as a
    # scan of the whole table (_replace.replace_rows_at)
    found = snap.ds.to_table(columns=["kind"], filter="source IN (" + ", ".join(sql_str(s) for s in locs) + ")",
                             with_row_address=True)  # fmt: skip
    found = found.filter(pc.is_in(found.column("kind"), pa.array([Kind.CHUNK, Kind.SOURCE], pa.string())))
    addrs = np.append(found.column("_rowaddr").to_numpy(), np.uint64(snap.head_address()))
    txn = replace_rows_at(snap, pa.concat_tables([head, source_rows, new_chunk]), addrs)
    message = (
        f"scan: 0 new, {len(results)} changed, {counts['unchanged']} unchanged, {len(counts['failed'])} failed "
        f"sources; refs +{ins} ~{upd} -{dele}"
    )
    return ScanReport(
        version=commit(col, txn, "scan", message, record, parent=snap),
        committed=True,
        changed=len(results),
        unchanged=counts["unchanged"],
        failed=tuple(counts["failed"]),
        inserted=ins,
        updated=upd,
        deleted=dele,
        missing=tuple(counts.get("missing", ())),
        ordered_by=ordered_by,
        concat_dim=None if dim is None else str(dim),
    )

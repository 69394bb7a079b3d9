"""Report shapes shared by the CLI and scripts (``info --json``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._values import plain_attr
from .plan.grid import Grid
from .schema import Kind

if TYPE_CHECKING:
    from .scan._types import ArrayMeta
    from .table.collection import Snapshot

__all__ = ["info_report"]


def _held(snap: Snapshot) -> dict[str, dict[str, int]]:
    """Held chunks and bytes per array."""
    t = snap.rows(Kind.CHUNK, ["array", "length"], "held_at >= 0")
    out: dict[str, dict[str, int]] = {}
    for a, n in zip(t.column("array").to_pylist(), t.column("length").to_pylist(), strict=True):
        d = out.setdefault(a, {"chunks": 0, "bytes": 0})
        d["chunks"] += 1
        d["bytes"] += int(n)
    return out


def _chunk_grid(m: ArrayMeta) -> list[dict[str, Any]]:
    """Per dimension, the global chunk grid: ``{"dim", "kind": "regular", "chunk"}`` or
    ``{"dim", "kind": "rectilinear", "count", "chunks": run-length lengths}`` (``plan/grid.py``),
    or ``{"dim", "kind": "none", "chunk"}`` for a gridless array (chunks placed by their slab:
    ``plan/slabs.py``; ``"per_tile": true`` with the first tile's chunk when its tiles differ in
    layout)."""
    if m.status != "ok":
        return []
    if m.gridless:
        own = {"per_tile": True} if m.cell else {}
        return [{"dim": d, "kind": "none", "chunk": int(c), **own} for d, c in zip(m.dims, m.chunks, strict=True)]
    try:
        desc = Grid.whole(m).describe()
    except ValueError:
        return []
    return [{"dim": d, **g} for d, g in zip(m.dims, desc, strict=True)]


def info_report(snap: Snapshot) -> dict[str, Any]:
    arrays: dict[str, Any] = {}
    holders: dict[str, set[str]] = {}
    for r in snap.vars().select(["array", "source"]).to_pylist():
        holders.setdefault(r["array"], set()).add(r["source"])
    all_sources = sorted(snap.sources().column("source").to_pylist())
    dim = snap.concat_dim
    held = _held(snap)
    for name, m in snap.arrays().items():
        arrays[name] = {
            "dims": list(m.dims),
            "shape": list(m.shape),
            "chunks": list(m.chunks),
            "chunk_grid": _chunk_grid(m),
            "dtype": m.dtype,
            "fill_value": m.fill_value,
            "codecs": list(m.codecs),
            "attrs": {k: plain_attr(v) for k, v in m.attrs.items()},
            "attr_types": {k: v["type"] for k, v in m.attrs.items()},
            "status": m.status,
            "reason": m.reason,
            "refs": snap.count(Kind.CHUNK, f"array = '{name.replace(chr(39), chr(39) * 2)}' AND g0 >= -1"),
            # sources of a concatenated series that lack this array: it reads as fill over their slabs
            "eras": [
                {
                    k: e[k]
                    for k in (
                        "index",
                        "start",
                        "stop",
                        "first_source",
                        "last_source",
                        "dtype",
                        "chunks",
                        "codecs",
                        "fill_value",
                    )
                }
                | {"attrs": {k: plain_attr(v) for k, v in e["attrs"].items()}}
                for e in m.eras
            ],
            "held": held.get(name, {"chunks": 0, "bytes": 0}),
            "absent_in": [s for s in all_sources if s not in holders.get(name, set())]
            if dim is not None and dim in m.dims
            else [],
        }
    return {
        "version": snap.version,
        "concat_dim": snap.concat_dim,
        "mosaic": bool(snap.config().get("mosaic")),
        "arrays": arrays,
        "sources": snap.count(Kind.SOURCE),
        "refs": snap.count(Kind.CHUNK),
        "held": {"chunks": sum(h["chunks"] for h in held.values()), "bytes": sum(h["bytes"] for h in held.values())},
        "unsupported": [{"array": n, "reason": a["reason"]} for n, a in arrays.items() if a["status"] != "ok"],
        # recorded sources not placed: another with the same coordinate was preferred (--prefer)
        "set_aside": [{"source": s, "for": k} for s, k in sorted(snap.config().get("set_aside", {}).items())],
    }

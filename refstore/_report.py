"""Report shapes shared by the CLI and scripts (``info --json``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._values import plain_attr
from .schema import Kind

if TYPE_CHECKING:
    from .table.collection import Snapshot

__all__ = ["info_report"]


def _held_bytes(snap: Snapshot) -> int:
    t = snap.rows(Kind.CHUNK, ["length"], "held IS NOT NULL")
    return int(sum(v or 0 for v in t.column("length").to_pylist()))


def info_report(snap: Snapshot) -> dict[str, Any]:
    arrays: dict[str, Any] = {}
    holders: dict[str, set[str]] = {}
    for r in snap.vars().select(["array", "source"]).to_pylist():
        holders.setdefault(r["array"], set()).add(r["source"])
    all_sources = sorted(snap.sources().column("source").to_pylist())
    dim = snap.concat_dim
    for name, m in snap.arrays().items():
        arrays[name] = {
            "dims": list(m.dims),
            "shape": list(m.shape),
            "chunks": list(m.chunks),
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
            "absent_in": [s for s in all_sources if s not in holders.get(name, set())]
            if dim is not None and dim in m.dims
            else [],
        }
    held_chunks = snap.count(Kind.CHUNK, "held IS NOT NULL")
    return {
        "version": snap.version,
        "concat_dim": snap.concat_dim,
        "arrays": arrays,
        "sources": snap.count(Kind.SOURCE),
        "refs": snap.count(Kind.CHUNK),
        "held": {"chunks": held_chunks, "bytes": _held_bytes(snap) if held_chunks else 0},
        "unsupported": [{"array": n, "reason": a["reason"]} for n, a in arrays.items() if a["status"] != "ok"],
    }

"""Flat Parquet read with pyarrow alone: the ``refstore`` key-value metadata gives every array
and era, a filtered read gives the chunk rows of a window, plain byte-range reads give the
chunk bytes. The stored codec configs are refstore's pipeline vocabulary, so chunks decode with
``refstore.read.decode.make_decoder`` (numcodecs/imagecodecs underneath); nothing else of
refstore is used."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from refstore.read.decode import make_decoder


def _fill(value: Any, dtype: np.dtype[Any]) -> Any:
    if value is None:
        return np.zeros((), dtype)[()]
    if dtype.kind in "SV":
        return np.frombuffer(base64.b64decode(value), dtype)[0]
    if dtype.kind == "c":
        return complex(_fill(value[0], np.dtype("f8")), _fill(value[1], np.dtype("f8")))
    if isinstance(value, str):
        return float(value.replace("Infinity", "inf"))
    return value


def _read(path: str, offset: int, size: int) -> bytes:
    assert path.startswith("file://"), path
    with open(path[len("file://") :], "rb") as f:
        f.seek(offset)
        return f.read(size)


class _Array:
    def __init__(self, out: str, name: str, doc: dict[str, Any]) -> None:
        self.out, self.name, self.doc = out, name, doc
        self.shape = tuple(doc["shape"])
        self.dtype = np.dtype(doc["dtype"])

    def __getitem__(self, sel: Any) -> np.ndarray[Any, Any]:
        if sel is Ellipsis:
            sel = tuple(slice(0, n) for n in self.shape)
        lo = [s.start or 0 for s in sel]
        hi = [n if s.stop is None else s.stop for s, n in zip(sel, self.shape, strict=True)]
        out = np.full([b - a for a, b in zip(lo, hi, strict=True)], _fill(self.doc["fill_value"], self.dtype),
                      self.dtype)  # fmt: skip
        for era in self.doc["eras"]:
            self._era(era, lo, hi, out)
        return out

    def _era(self, era: dict[str, Any], lo: list[int], hi: list[int], out: np.ndarray[Any, Any]) -> None:
        import pyarrow.dataset as ds

        start = [0] * len(lo)
        if era["axis"] is not None:
            start[era["axis"]] = era["start"]
        eshape, chunks = era["shape"], era["chunks"]
        # the window in the era's own coordinates, clipped to the era
        elo = [max(a - s, 0) for a, s in zip(lo, start, strict=True)]
        ehi = [min(b - s, n) for b, s, n in zip(hi, start, eshape, strict=True)]
        if any(b <= a for a, b in zip(elo, ehi, strict=True)):
            return
        flt = (ds.field("array_name") == self.name) & (ds.field("era") == era["index"])
        for i, (a, b, c) in enumerate(zip(elo, ehi, chunks, strict=True)):
            flt &= (ds.field(f"dim_{i}") >= a // c) & (ds.field(f"dim_{i}") <= (b - 1) // c)
        cols = [f"dim_{i}" for i in range(len(lo))] + ["path", "offset", "size", "inline", "filter_mask"]
        rows = ds.dataset(self.out, format="parquet").to_table(columns=cols, filter=flt).to_pylist()
        decode = make_decoder(era["codecs"], era["dtype"], tuple(chunks))
        for r in rows:
            key = [r[f"dim_{i}"] for i in range(len(lo))]
            raw = r["inline"] if r["path"] is None else _read(r["path"], r["offset"], r["size"])
            c0 = [k * c for k, c in zip(key, chunks, strict=True)]
            edge = tuple(min(c, n - k) for c, n, k in zip(chunks, eshape, c0, strict=True))
            block = decode(raw, r["filter_mask"], edge if self.doc["short_edge"] else None)
            src, dst = [], []
            for d in range(len(lo)):
                a, b = max(c0[d], elo[d]), min(c0[d] + edge[d], ehi[d])
                src.append(slice(a - c0[d], b - c0[d]))
                dst.append(slice(a + start[d] - lo[d], b + start[d] - lo[d]))
            out[tuple(dst)] = block[tuple(src)]


def open_form(out: str, case: Any) -> dict[str, Any]:
    import pyarrow.parquet as pq

    doc = json.loads(pq.read_metadata(out).metadata[b"refstore"])
    assert doc["format"] == "refstore-flat-parquet/1", doc["format"]
    return {name: _Array(out, name, a) for name, a in doc["arrays"].items()}

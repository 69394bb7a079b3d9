"""mdim-refs/0.2 SQLite read the way hypertidy/zaro's ``mdimrefs://`` backend does, with the
standard library's sqlite3: array metadata from ``arrays``, chunk rows from the ``refs_<array>``
views, plain byte-range reads of ``path``, and decoding by the zarr v2 ``codec`` column through
numcodecs ids alone (``numcodecs.get_codec``; imagecodecs registers its ``imagecodecs_*`` ids).
mdim-refs/0.3 as documented (``refstore/emit/sqlite.py``): along a dimension with rows in
``chunk_edges``, chunk ``dim_i`` starts at its ``start`` and contributes ``size`` elements of
its decoded (full ``chunks``) buffer. Nothing of refstore is used."""

from __future__ import annotations

import base64
import json
import sqlite3
from contextlib import closing
from typing import Any

import numpy as np


def _fill(text: str | None, dtype: np.dtype[Any]) -> Any:
    if text is None:
        return np.zeros((), dtype)[()]
    if dtype.kind in "SV":
        return np.frombuffer(base64.b64decode(text), dtype)[0]
    if dtype.kind == "c":
        re_, im = (float(v.replace("Infinity", "inf")) for v in json.loads(text))
        return complex(re_, im)
    if dtype.kind in "iub":
        return int(text)
    return float(text.replace("Infinity", "inf"))


def _read(path: str, offset: int, size: int) -> bytes:
    with open(path.removeprefix("file://"), "rb") as f:
        f.seek(offset)
        return f.read(size)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _Array:
    def __init__(self, out: str, row: tuple[Any, ...], edges: dict[int, list[tuple[int, int]]]) -> None:
        import numcodecs

        self.edges = edges  # rectilinear dimension -> (start, size) of each chunk along it

        name, dims, shape, chunks, dtype, fill, codec = row
        self.out, self.name = out, name
        self.dims, self.shape, self.chunks = json.loads(dims), tuple(json.loads(shape)), tuple(json.loads(chunks))
        self.dtype = np.dtype(dtype)
        self.fill = _fill(fill, self.dtype)
        c = json.loads(codec)
        self.compressor = numcodecs.get_codec(c["compressor"]) if c["compressor"] else None
        self.filters = [numcodecs.get_codec(f) for f in c["filters"] or []]

    def _decode(self, raw: bytes) -> np.ndarray[Any, Any]:
        buf: Any = raw
        if self.compressor is not None:
            buf = self.compressor.decode(buf)
        for f in reversed(self.filters):
            buf = f.decode(buf)
        if isinstance(buf, np.ndarray) and buf.dtype == self.dtype:
            return buf.reshape(self.chunks)
        return np.frombuffer(bytes(np.asarray(buf).tobytes()) if not isinstance(buf, bytes) else buf,
                             self.dtype).reshape(self.chunks)  # fmt: skip

    def _index(self, d: int, pos: int) -> int:
        """The chunk along dimension ``d`` holding element ``pos``."""
        if d not in self.edges:
            return pos // self.chunks[d]
        return next(k for k, (a, n) in enumerate(self.edges[d]) if a <= pos < a + n)

    def __getitem__(self, sel: Any) -> np.ndarray[Any, Any]:
        if sel is Ellipsis:
            sel = tuple(slice(0, n) for n in self.shape)
        lo = [s.start or 0 for s in sel]
        hi = [n if s.stop is None else s.stop for s, n in zip(sel, self.shape, strict=True)]
        out = np.full([b - a for a, b in zip(lo, hi, strict=True)], self.fill, self.dtype)
        if any(b <= a for a, b in zip(lo, hi, strict=True)):
            return out
        ndim = len(self.shape)
        where = " AND ".join(f"dim_{i} BETWEEN ? AND ?" for i in range(ndim)) or "1"
        args = [v for d, (a, b) in enumerate(zip(lo, hi, strict=True))
                for v in (self._index(d, a), self._index(d, b - 1))]
        keys = "".join(f"dim_{i}, " for i in range(ndim))
        sql = f'SELECT {keys}present, path, "offset", size, data FROM {_quote("refs_" + self.name)} WHERE {where}'
        with closing(sqlite3.connect(f"file:{self.out}?mode=ro", uri=True)) as con:
            rows = con.execute(sql, args).fetchall()
        for r in rows:
            key, (present, path, offset, size, data) = r[:ndim], r[ndim:]
            if not present:
                continue
            block = self._decode(data if path is None else _read(path, offset, size))
            src, dst = [], []
            for d in range(ndim):
                c0, n = self.edges[d][key[d]] if d in self.edges else (key[d] * self.chunks[d], self.chunks[d])
                a, b = max(c0, lo[d]), min(c0 + n, hi[d])
                src.append(slice(a - c0, b - c0))
                dst.append(slice(a - lo[d], b - lo[d]))
            out[tuple(dst)] = block[tuple(src)]
        return out


def open_form(out: str, case: Any) -> dict[str, Any]:
    import imagecodecs.numcodecs

    imagecodecs.numcodecs.register_codecs(verbose=False)
    with closing(sqlite3.connect(f"file:{out}?mode=ro", uri=True)) as con:
        (fmt,) = con.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
        assert fmt in ("mdim-refs/0.2", "mdim-refs/0.3"), fmt
        rows = con.execute("SELECT array, dims, shape, chunks, dtype, fill, codec FROM arrays "
                           "WHERE storage = 'referenced'").fetchall()  # fmt: skip
        edges: dict[str, dict[int, list[tuple[int, int]]]] = {}
        if fmt == "mdim-refs/0.3":
            for name, dim, _k, start, size in con.execute("SELECT * FROM chunk_edges ORDER BY array, dim, chunk"):
                edges.setdefault(name, {}).setdefault(dim, []).append((start, size))
    return {r[0]: _Array(out, r, edges.get(r[0], {})) for r in rows}

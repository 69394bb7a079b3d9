"""Flat Parquet read with pyarrow alone: the ``refstore`` key-value metadata gives every array
and era, a filtered read gives the chunk rows of a window, plain byte-range reads give the
chunk bytes. Chunks are decoded here with numcodecs and imagecodecs from the codec vocabulary
``design/formats.md`` and ``design/emit.md`` document (encode order; masked codecs skipped; a
short last strip stored at its cut shape): nothing of refstore is imported."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

_BYTES = ("zlib", "shuffle", "fletcher32", "zstd", "blosc", "lz4h5", "szip", "lzw", "packbits")


def _bytes_codec(c: dict[str, Any]) -> Any:
    """bytes -> bytes decode function of one codec config."""
    import imagecodecs
    import numcodecs

    cid = c["id"]
    if cid == "zlib":
        return numcodecs.Zlib().decode
    if cid == "shuffle":
        return numcodecs.Shuffle(elementsize=int(c["elementsize"])).decode
    if cid == "fletcher32":
        return numcodecs.Fletcher32().decode
    if cid == "zstd":
        return numcodecs.Zstd().decode
    if cid == "blosc":
        return numcodecs.Blosc().decode
    if cid == "szip":
        args = (int(c["mask"]), int(c["pixels_per_block"]), int(c["bits_per_pixel"]), int(c["pixels_per_scanline"]))
        return lambda b: imagecodecs.szip_decode(b, *args, header=True)
    return {"lz4h5": imagecodecs.lz4h5_decode, "lzw": imagecodecs.lzw_decode,
            "packbits": imagecodecs.packbits_decode}[cid]  # fmt: skip


def _nbytes(buf: Any) -> int:
    return int(buf.nbytes) if isinstance(buf, np.ndarray) else len(memoryview(buf).cast("B"))


def decode_chunk(codecs: list[dict[str, Any]], raw: bytes, dtype: np.dtype[Any], full: tuple[int, ...],
                 edge: tuple[int, ...] | None, filter_mask: int) -> np.ndarray[Any, Any]:  # fmt: skip
    """One chunk's values: the pipeline undone in reverse, codec i skipped when bit i of
    ``filter_mask`` is set; stored at ``edge`` shape when its bytes say so (a short strip)."""
    import imagecodecs

    def shape_of(buf: Any) -> tuple[int, ...]:
        n = _nbytes(buf)
        if edge is not None and n == int(np.prod(edge)) * dtype.itemsize and n != int(np.prod(full)) * dtype.itemsize:
            return edge
        return full

    def as_array(buf: Any) -> np.ndarray[Any, Any]:
        if isinstance(buf, np.ndarray) and buf.dtype != np.uint8:
            return buf.reshape(shape_of(buf)).astype(dtype, copy=False)
        return np.frombuffer(bytes(memoryview(buf).cast("B")), dtype).reshape(shape_of(buf))

    buf: Any = raw
    for i in reversed(range(len(codecs))):
        if (filter_mask >> i) & 1:
            continue
        c = codecs[i]
        cid = c["id"]
        if cid in _BYTES:
            buf = _bytes_codec(c)(buf)
        elif cid == "jpeg":
            tables = base64.b64decode(c["tables"]) if c.get("tables") else None
            buf = imagecodecs.jpeg_decode(bytes(buf), tables=tables, colorspace=c.get("colorspace"),
                                          outcolorspace=c.get("outcolorspace"))  # fmt: skip
            buf = buf.reshape(full if buf.size == int(np.prod(full)) else edge)
        elif cid == "lerc":
            buf = np.asarray(imagecodecs.lerc_decode(bytes(buf)))
        elif cid == "vlen-utf8":  # variable-length strings, numcodecs' VLenUTF8 encoding
            import numcodecs

            buf = np.asarray(numcodecs.VLenUTF8().decode(bytes(buf)), dtype=object).reshape(full)
        elif cid == "bitunpack":  # 1-bit rows, each padded to a byte
            packed = np.frombuffer(bytes(buf), np.uint8)
            rows_cols = [(s[-2], s[-1]) for s in (full, edge) if s is not None]
            rows, cols = next(((r, k) for r, k in rows_cols if packed.size == r * -(-k // 8)), rows_cols[0])
            bits = np.unpackbits(packed[: rows * -(-cols // 8)].reshape(rows, -1), axis=-1)[:, :cols]
            buf = bits.astype(bool).reshape(full if rows == full[-2] else edge)
        elif cid == "delta":  # TIFF predictor 2 along ``axis`` of the chunk
            arr = as_array(buf)
            buf = imagecodecs.delta_decode(arr.astype(dtype.newbyteorder("=")), axis=int(c["axis"])).astype(dtype)
        elif cid == "floatpred":  # TIFF predictor 3: imagecodecs wants (rows, width, samples)
            arr = as_array(buf).copy()
            shape = arr.shape
            chunky = int(c["axis"]) == -2
            rows_width = arr if chunky else arr.reshape(*shape, 1)
            buf = np.asarray(imagecodecs.floatpred_decode(rows_width, axis=-2)).astype(dtype).reshape(shape)
        elif cid == "refstore.grib":  # one GRIB message: its values by ecCodes, as cfgrib gives them
            buf = _grib_values(bytes(buf)).reshape(full)
        else:
            raise AssertionError(f"codec {cid!r} is not in the documented vocabulary")
    return as_array(buf)


def _grib_values(message: bytes) -> np.ndarray[Any, Any]:
    """ecCodes' values of one message as float32, every point it reports missing NaN, in the
    order design/formats.md gives the codec: grids of rows and columns row-major, alternating
    rows (or columns) turned to the first one's direction."""
    import eccodes

    missing = float(np.finfo(np.float32).max)
    h = eccodes.codes_new_from_message(message)
    try:
        eccodes.codes_set(h, "missingValue", missing)
        vals = eccodes.codes_get_values(h).astype("<f4")
        key = {k: int(eccodes.codes_get(h, k)) if eccodes.codes_is_defined(h, k) else 0
               for k in ("Nx", "Ny", "numberOfPoints", "jPointsAreConsecutive", "alternativeRowScanning")}  # fmt: skip
        grid2d = eccodes.codes_get(h, "gridType") in _GRIB_2D
    finally:
        eccodes.codes_release(h)
    vals[vals == np.float32(missing)] = np.nan
    ny, nx, jcons, alt = key["Ny"], key["Nx"], key["jPointsAreConsecutive"], key["alternativeRowScanning"]
    if ny * nx != key["numberOfPoints"] or not (alt or (jcons and grid2d)):
        return vals
    lines = vals.reshape((nx, ny) if jcons else (ny, nx)).copy()
    if alt:
        lines[1::2] = lines[1::2, ::-1]
    return (lines.T if jcons and grid2d else lines).reshape(-1)


_GRIB_2D = {"regular_ll", "regular_gg", "rotated_ll", "rotated_gg", "lambert", "lambert_azimuthal_equal_area",
            "albers", "polar_stereographic"}  # fmt: skip


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
        # chunk start positions per dimension: rectilinear ones from their run-length lengths
        starts = []
        for d in range(len(chunks)):
            runs = (era.get("chunk_edges") or [None] * len(chunks))[d]
            if runs is None:
                starts.append(None)
                continue
            ls = [n for r in runs for n in ([r[0]] * r[1] if isinstance(r, list) else [r])]
            starts.append(np.concatenate([[0], np.cumsum(ls)]))
        # the window in the era's own coordinates, clipped to the era
        elo = [max(a - s, 0) for a, s in zip(lo, start, strict=True)]
        ehi = [min(b - s, n) for b, s, n in zip(hi, start, eshape, strict=True)]
        if any(b <= a for a, b in zip(elo, ehi, strict=True)):
            return
        flt = (ds.field("array_name") == self.name) & (ds.field("era") == era["index"])
        if era.get("grid") == "none":
            self._gridless(era, elo, ehi, flt, out, lo)
            return
        for i, (a, b, c) in enumerate(zip(elo, ehi, chunks, strict=True)):
            s = starts[i]
            k0, k1 = (a // c, (b - 1) // c) if s is None else (int(np.searchsorted(s, a, "right")) - 1,
                                                                int(np.searchsorted(s, b - 1, "right")) - 1)
            flt &= (ds.field(f"dim_{i}") >= k0) & (ds.field(f"dim_{i}") <= k1)
        cols = [f"dim_{i}" for i in range(len(lo))] + ["path", "offset", "size", "inline", "filter_mask"]
        rows = ds.dataset(self.out, format="parquet").to_table(columns=cols, filter=flt).to_pylist()
        dtype = np.dtype(era["dtype"])
        for r in rows:
            key = [r[f"dim_{i}"] for i in range(len(lo))]
            raw = r["inline"] if r["path"] is None else _read(r["path"], r["offset"], r["size"])
            c0 = [k * c if s is None else int(s[k]) for k, c, s in zip(key, chunks, starts, strict=True)]
            edge = tuple(min(c, n - k0) if s is None else int(s[k + 1] - s[k])
                         for c, n, k0, k, s in zip(chunks, eshape, c0, key, starts, strict=True))
            block = decode_chunk(era["codecs"], raw, dtype, tuple(chunks), edge if self.doc["short_edge"] else None,
                                 r["filter_mask"])  # fmt: skip
            src, dst = [], []
            for d in range(len(lo)):
                a, b = max(c0[d], elo[d]), min(c0[d] + edge[d], ehi[d])
                src.append(slice(a - c0[d], b - c0[d]))
                dst.append(slice(a + start[d] - lo[d], b + start[d] - lo[d]))
            out[tuple(dst)] = block[tuple(src)]


    def _gridless(self, era: dict[str, Any], lo: list[int], hi: list[int], flt: Any, out: np.ndarray[Any, Any],
                  at: list[int]) -> None:  # fmt: skip
        """No chunk grid (format /3): ``dim_i`` is each chunk's element origin; its size is cut by
        the slab holding that origin (``design/emit.md``)."""
        import pyarrow.dataset as ds

        chunks = era["chunks"]
        for i, (a, b, c) in enumerate(zip(lo, hi, chunks, strict=True)):
            flt &= (ds.field(f"dim_{i}") > a - c) & (ds.field(f"dim_{i}") < b)
        cols = [f"dim_{i}" for i in range(len(lo))] + ["path", "offset", "size", "inline", "filter_mask"]
        rows = ds.dataset(self.out, format="parquet").to_table(columns=cols, filter=flt).to_pylist()
        slabs = era["slabs"]
        for r in rows:
            o = [r[f"dim_{i}"] for i in range(len(lo))]
            (slab,) = [s for s in slabs
                       if all(a <= x < a + n for x, a, n in zip(o, s["offset"], s["shape"], strict=True))]
            edge = [min(c, a + n - x) for c, x, a, n in zip(chunks, o, slab["offset"], slab["shape"], strict=True)]
            raw = r["inline"] if r["path"] is None else _read(r["path"], r["offset"], r["size"])
            block = decode_chunk(era["codecs"], raw, np.dtype(era["dtype"]), tuple(chunks), None, r["filter_mask"])
            src, dst = [], []
            for d in range(len(lo)):
                a, b = max(o[d], lo[d]), min(o[d] + edge[d], hi[d])
                if b <= a:
                    break
                src.append(slice(a - o[d], b - o[d]))
                dst.append(slice(a - at[d], b - at[d]))
            else:
                out[tuple(dst)] = block[tuple(src)]


def open_form(out: str, case: Any) -> dict[str, Any]:
    import pyarrow.parquet as pq

    doc = json.loads(pq.read_metadata(out).metadata[b"refstore"])
    assert doc["format"] in ("refstore-flat-parquet/1", "refstore-flat-parquet/2", "refstore-flat-parquet/3"), \
        doc["format"]
    return {name: _Array(out, name, a) for name, a in doc["arrays"].items()}

""""Chunks touching this box" at 10M+ rows, three ways a table can record placements (issue 14).

A mosaic of ``tiles x tiles`` tiles of ``blocks x blocks`` chunks each (default 50 x 50 tiles of
64 x 64 chunks: 10.24M chunk rows), rows written in scan order (tile by tile), as a Lance 2.2
dataset with the collection's encodings (zstd on the integer columns) and scalar indices:

- ``global``: one global chunk per source chunk (``g0, g1`` on the global, possibly rectilinear,
  grid; what refstore keys today): ``array = ? AND g0 BETWEEN .. AND g1 BETWEEN ..``.
- ``per-slab``: placements only in the slab rows (``d0, d1``), chunk rows keyed within their
  source (``k0, k1``): the slabs meeting the box are found first (a few thousand var rows), then
  ``array = ? AND ((source = s AND k0 BETWEEN .. AND k1 BETWEEN ..) OR ...)``.
- ``slab-in``: the same slabs as one ``source IN (...)`` (BITMAP index) and the union of their
  key ranges, each slab's own ranges then applied to the rows returned.
- ``origins``: each chunk row carries its element origin in the global array (``o0, o1`` int64):
  ``array = ? AND o0 BETWEEN lo0 - c0 + 1 AND hi0 - 1 AND o1 BETWEEN ..`` (chunk shape fixed per array).
- ``coarse``: what refstore builds for placements no grid expresses (``plan/slabs.py``): the key
  columns hold the regular-grid cell of each chunk's origin (``h = k + d // c``, here ``h0, h1``
  int32 so the other designs keep ``g``): ``array = ? AND h0 BETWEEN lo0 // c - 1 AND (hi0 - 1)
  // c AND h1 ..``, then ``SlabLayout`` places the rows returned (source, k) and keeps those
  touching the box.

Tiles are offset by a misalignment (``--shift``, elements) so the per-slab and origins designs
handle arbitrary offsets; ``global`` assumes keys exist. Prints median times over repeats and the
bytes per row of each extra column set. Run: ``python -m bench.placement_query [--tiles 50]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa


def _table(t: int, b: int, tile_px: int, chunk: int, shift: int) -> pa.Table:
    n_tile = b * b
    per_tile = b + (1 if shift else 0)  # the rectilinear grid: a tile's chunks, then one gap chunk
    tiles = np.arange(t * t)
    ty, tx = np.divmod(tiles, t)
    k0, k1 = np.divmod(np.arange(n_tile), b)
    rows_ty = np.repeat(ty, n_tile)
    rows_tx = np.repeat(tx, n_tile)
    rk0 = np.tile(k0, t * t)
    rk1 = np.tile(k1, t * t)
    d0 = rows_ty * (tile_px + shift)
    d1 = rows_tx * (tile_px + shift)
    names = np.array([f"/data/rema/tile_{i:05d}.tif" for i in range(t * t)])
    zstd = {"lance-encoding:compression": "zstd"}
    cols = {
        "kind": pa.array(np.full(len(rk0), "chunk")),
        "array": pa.array(np.full(len(rk0), "image")),
        "source": pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(tiles, n_tile).astype(np.int32)), pa.array(names)
        ).cast(pa.string()),
        "k0": pa.array(rk0.astype(np.int32)),
        "k1": pa.array(rk1.astype(np.int32)),
        "g0": pa.array((rows_ty * per_tile + rk0).astype(np.int32)),
        "g1": pa.array((rows_tx * per_tile + rk1).astype(np.int32)),
        "o0": pa.array((d0 + rk0 * chunk).astype(np.int64)),
        "o1": pa.array((d1 + rk1 * chunk).astype(np.int64)),
        "h0": pa.array((d0 // chunk + rk0).astype(np.int32)),
        "h1": pa.array((d1 // chunk + rk1).astype(np.int32)),
        "offset": pa.array((rk0 * b + rk1).astype(np.int64) * 5000),
        "length": pa.array(np.full(len(rk0), 4000, np.int64)),
    }
    fields = [pa.field(k, v.type, metadata=zstd if k not in ("kind", "array", "source") else None)
              for k, v in cols.items()]  # fmt: skip
    return pa.Table.from_arrays(list(cols.values()), schema=pa.schema(fields))


def _median(fn: Any, repeat: int) -> tuple[float, int]:
    times, n = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), n


def main() -> None:
    import lance

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tiles", type=int, default=50)
    p.add_argument("--blocks", type=int, default=64)
    p.add_argument("--chunk", type=int, default=256)
    p.add_argument("--shift", type=int, default=37)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    t, b, c = a.tiles, a.blocks, a.chunk
    tile_px = b * c
    table = _table(t, b, tile_px, c, a.shift)
    root = Path(tempfile.mkdtemp(prefix="placement-q-"))
    try:
        t0 = time.perf_counter()
        ds = lance.write_dataset(table, str(root / "t.lance"), data_storage_version="2.2",
                                 max_rows_per_file=1 << 21)  # fmt: skip
        write_s = time.perf_counter() - t0
        for col, kind in (("kind", "BITMAP"), ("source", "BITMAP"), ("array", "BITMAP"), ("g0", "ZONEMAP"),
                          ("o0", "ZONEMAP"), ("h0", "ZONEMAP")):  # fmt: skip
            ds.create_scalar_index(col, kind, name=f"{col}_idx")
            ds = lance.dataset(str(root / "t.lance"))
        sizes: dict[str, int] = {}
        for f in ds.get_fragments():
            for df in f.data_files():
                sizes[df.path] = (root / "t.lance" / "data" / df.path).stat().st_size
        print(f"{table.num_rows:,} rows written in {write_s:.1f} s, {sum(sizes.values()) / table.num_rows:.2f} B/row")

        # a 4 x 4-block box in the middle of the mosaic, straddling a tile corner
        step = tile_px + a.shift
        lo = np.array([(t // 2) * step - 2 * c, (t // 2) * step - 2 * c])
        hi = lo + 4 * c
        # global keys: on the rectilinear grid (tile chunks + one gap chunk per shift), the box's key range
        per_tile = b + (1 if a.shift else 0)
        g_lo = [(int(x) // step) * per_tile + min((int(x) % step) // c, per_tile - 1) for x in lo]
        g_hi = [(int(x - 1) // step) * per_tile + min((int(x - 1) % step) // c, per_tile - 1) for x in hi]
        f_global = (f"kind = 'chunk' AND array = 'image' AND g0 BETWEEN {g_lo[0]} AND {g_hi[0]} "
                    f"AND g1 BETWEEN {g_lo[1]} AND {g_hi[1]}")  # fmt: skip
        f_orig = (f"kind = 'chunk' AND array = 'image' AND o0 BETWEEN {lo[0] - c + 1} AND {hi[0] - 1} "
                  f"AND o1 BETWEEN {lo[1] - c + 1} AND {hi[1] - 1}")  # fmt: skip

        def slab_terms() -> list[tuple[str, int, int, int, int]]:
            step_ = step
            ty = np.arange(t)
            starts = ty * step_
            rows = ty[(starts < hi[0]) & (starts + tile_px > lo[0])]
            cols = ty[(starts < hi[1]) & (starts + tile_px > lo[1])]
            out = []
            for r in rows.tolist():
                for q in cols.tolist():
                    out.append((f"/data/rema/tile_{r * t + q:05d}.tif",
                                max(0, (int(lo[0]) - r * step_) // c), min(b - 1, (int(hi[0]) - 1 - r * step_) // c),
                                max(0, (int(lo[1]) - q * step_) // c), min(b - 1, (int(hi[1]) - 1 - q * step_) // c)))
            return out

        def per_slab_in() -> int:
            # one IN on the BITMAP-indexed source column plus the union of the key ranges, then
            # each slab's own ranges applied to the few rows that come back (numpy)
            terms = slab_terms()
            srcs = ", ".join(f"'{s}'" for s, *_ in terms)
            k0a, k0b = min(x[1] for x in terms), max(x[2] for x in terms)
            k1a, k1b = min(x[3] for x in terms), max(x[4] for x in terms)
            flt = (f"kind = 'chunk' AND array = 'image' AND source IN ({srcs}) AND k0 BETWEEN {k0a} AND {k0b} "
                   f"AND k1 BETWEEN {k1a} AND {k1b}")  # fmt: skip
            got = ds.to_table(columns=["source", "k0", "k1", "offset", "length"], filter=flt)
            src = np.asarray(got.column("source").to_pylist())
            k0, k1 = got.column("k0").to_numpy(), got.column("k1").to_numpy()
            keep = np.zeros(got.num_rows, bool)
            for s_, a0, b0, a1, b1 in terms:
                keep |= (src == s_) & (k0 >= a0) & (k0 <= b0) & (k1 >= a1) & (k1 <= b1)
            return int(keep.sum())

        def per_slab() -> int:
            # slabs meeting the box: from their placements (in refstore: the var rows, d0/d1 + shape)
            ty = np.arange(t)
            y0, x0 = ty * step, ty * step
            rows = ty[(y0 < hi[0]) & (y0 + tile_px > lo[0])]
            cols = ty[(x0 < hi[1]) & (x0 + tile_px > lo[1])]
            terms = []
            for r in rows.tolist():
                for q in cols.tolist():
                    a0 = max(0, (int(lo[0]) - r * step) // c)
                    b0 = min(b - 1, (int(hi[0]) - 1 - r * step) // c)
                    a1 = max(0, (int(lo[1]) - q * step) // c)
                    b1 = min(b - 1, (int(hi[1]) - 1 - q * step) // c)
                    terms.append(f"(source = '/data/rema/tile_{r * t + q:05d}.tif' AND k0 BETWEEN {a0} AND {b0} "
                                 f"AND k1 BETWEEN {a1} AND {b1})")  # fmt: skip
            flt = "kind = 'chunk' AND array = 'image' AND (" + " OR ".join(terms) + ")"
            return ds.to_table(columns=["source", "offset", "length"], filter=flt).num_rows

        from refstore.plan.select import Selection
        from refstore.plan.slabs import SlabLayout

        names = [f"/data/rema/tile_{i:05d}.tif" for i in range(t * t)]
        layout = SlabLayout.of((t * step, t * step), (c, c),
                               [(names[i], (i // t * step, i % t * step), (tile_px, tile_px)) for i in range(t * t)])
        box = Selection(tuple(int(x) for x in lo), tuple(int(x) for x in hi), (1, 1), ())
        ranges = layout.key_ranges(box.start, box.stop)
        assert ranges is not None
        f_coarse = (f"kind = 'chunk' AND array = 'image' AND h0 BETWEEN {ranges[0][0]} AND {ranges[0][1]} "
                    f"AND h1 BETWEEN {ranges[1][0]} AND {ranges[1][1]}")  # fmt: skip

        def coarse() -> int:
            got = ds.to_table(columns=["source", "k0", "k1", "offset", "length"], filter=f_coarse)
            origin, size = layout.rows_boxes(got)
            return int(SlabLayout.touching(origin, size, box).sum())

        def run(flt: str) -> Any:
            return lambda: ds.to_table(columns=["source", "offset", "length"], filter=flt).num_rows

        for name, fn in (("global", run(f_global)), ("per-slab", per_slab), ("slab-in", per_slab_in),
                         ("origins", run(f_orig)), ("coarse", coarse)):  # fmt: skip
            s, n = _median(fn, a.repeat)
            print(f"{name:9s} {s * 1000:8.1f} ms  {n} chunks")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

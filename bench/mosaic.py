"""Benchmark: ``scan --mosaic`` of >= 1,000 small tiled COGs (issue 14's REMA-like pilot, scaled
down): scan files/s, bytes per reference, "chunks under a bbox" query time (through the mosaic's
transform; before and after ``compact`` builds the scalar indices), and a 4 x 4-block window read
across tile corners. Three layouts of the same number of tiles, so the cost of misalignment is a
ratio: aligned (128-pixel tiles on the 32-pixel block grid: a regular grid), misaligned
(120-pixel tiles, origins off the block grid but lined up in rows and columns: a rectilinear
grid) and staggered (128-pixel tiles, every other row shifted by 48 pixels, a brick layout whose
blocks cross each other's block edges: no chunk grid, ``plan/slabs.py``).

Tiles are written with tifffile (uint16, deflate + predictor 2, one overview, ModelPixelScale /
ModelTiepoint / EPSG:3031 GeoKeys), mostly constant so that generating them is cheap.

``python -m bench.mosaic [--tiles N] [--quick] [--json]`` (``./dev bench mosaic``).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TILE = 128
BLOCK = 32
MISALIGNED_TILE = 120  # origins at multiples of 120: off the 32-pixel block grid
STAGGER = 48  # odd rows shifted by 1.5 blocks: their blocks straddle the block edges of the rows around them
PIXEL = 32.0
X0, Y0 = -2_500_000.0, 2_500_000.0


def write_tiles(folder: Path, n: int, size: int, *, seed: int = 0, shift: int = 0) -> list[Path]:
    """``n`` tiles of ``size`` x ``size`` pixels on a square-ish grid, one COG each; odd rows
    shifted east by ``shift`` pixels (a brick layout)."""
    import tifffile

    from refstore.fixtures.mosaic import projected_geotags

    folder.mkdir(parents=True, exist_ok=True)
    side = math.ceil(math.sqrt(n))
    rng = np.random.default_rng(seed)
    base = (rng.integers(0, 4, (size, size)) + 1000).astype("<u2")  # mostly flat: cheap to write
    out = []
    for k in range(n):
        i, j = divmod(k, side)
        data = base + np.uint16(k % 100)
        tags = [*projected_geotags(X0 + (j * size + shift * (i % 2)) * PIXEL, Y0 - i * size * PIXEL, PIXEL, 3031),
                (42113, "s", 0, "0", True)]  # fmt: skip
        p = folder / f"tile_{i:03d}_{j:03d}.tif"
        with tifffile.TiffWriter(p) as w:
            w.write(data, tile=(BLOCK, BLOCK), compression="zlib", predictor=2, extratags=tags, metadata=None)
            w.write(data[::2, ::2], tile=(BLOCK, BLOCK), compression="zlib", predictor=2, subfiletype=1,
                    metadata=None)  # fmt: skip
        out.append(p)
    return out


def painted(n: int, size: int, shift: int, window: tuple[slice, slice]) -> np.ndarray[Any, Any]:
    """The window of the mosaic ``write_tiles`` makes, painted with numpy from what each tile
    holds (gaps: nodata 0): what the window read must return."""
    side = math.ceil(math.sqrt(n))
    base = (np.random.default_rng(0).integers(0, 4, (size, size)) + 1000).astype("<u2")
    r0, r1, c0, c1 = window[0].start, window[0].stop, window[1].start, window[1].stop
    out = np.zeros((r1 - r0, c1 - c0), "<u2")
    for k in range(n):
        i, j = divmod(k, side)
        y, x = i * size, j * size + shift * (i % 2)
        a, b, c, d = max(y, r0), min(y + size, r1), max(x, c0), min(x + size, c1)
        if a < b and c < d:
            out[a - r0 : b - r0, c - c0 : d - c0] = (base + np.uint16(k % 100))[a - y : b - y, c - x : d - x]
    return out


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _median_ms(f: Any, n: int = 15) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times))


def measure(work: Path, n: int, size: int, label: str, shift: int = 0) -> dict[str, Any]:
    import refstore
    from refstore.errors import PlanError
    from refstore.table import compact
    from refstore.table.hold import HoldSelection, _selected_rows

    t0 = time.perf_counter()
    files = write_tiles(work / f"{label}-tiles", n, size, shift=shift)
    res: dict[str, Any] = {"tiles": len(files), "tile_pixels": size, "generate_s": time.perf_counter() - t0}
    col = str(work / f"{label}-col")
    refstore.init(col)
    t0 = time.perf_counter()
    try:
        rep = refstore.scan(col, [str(work / f"{label}-tiles")], mosaic=True)
    except PlanError as e:
        res["refused"] = str(e)
        return res
    res["scan_s"] = time.perf_counter() - t0
    res["files_per_s"] = len(files) / res["scan_s"]
    res["mosaic"] = rep.mosaic
    ds = refstore.open(col)
    snap = ds.snapshot
    meta = snap.array("image")
    res["grid"] = "none" if meta.gridless else "rectilinear" if meta.edges else "regular"
    res["refs"] = snap.count("chunk")
    res["bytes"] = _du(Path(col))
    res["bytes_per_ref"] = res["bytes"] / res["refs"]

    img = ds["image"]
    transform = [float(v) for v in img.attrs["transform"]]
    h, w = img.shape
    # a box of ~10 x 10 tiles in the middle, in the mosaic's CRS
    cx, cy = transform[0] + transform[1] * w / 2, transform[3] + transform[5] * h / 2
    half = 5 * size * PIXEL
    bbox = (cx - half, cy - half, cx + half, cy + half)

    def query() -> int:
        # what hold --bbox runs: bbox -> pixels through the transform -> chunk keys on the array's
        # grid (regular or rectilinear) -> pushdown filter on the typed key columns
        sel = HoldSelection(arrays=("image",), bbox=bbox)
        return _selected_rows(snap, sel, held=False).num_rows

    t0 = time.perf_counter()
    res["bbox_chunks"] = query()  # a gridless array's slab layout (its var rows) is read once per snapshot here
    res["bbox_first_ms"] = 1000 * (time.perf_counter() - t0)
    res["bbox_ms"] = _median_ms(query)
    r0, c0 = (h // 2) // BLOCK * BLOCK - 2 * BLOCK + 5, (w // 2) // BLOCK * BLOCK - 2 * BLOCK + 7
    window = (slice(r0, r0 + 4 * BLOCK), slice(c0, c0 + 4 * BLOCK))  # 4 x 4 blocks' worth, across tile corners
    if not np.array_equal(img[window], painted(n, size, shift, window)):
        raise AssertionError(f"{label}: the window read differs from the painted tiles")
    res["window_read_ms"] = _median_ms(lambda: img[window])

    t0 = time.perf_counter()
    compact(refstore.Collection.open(col))
    res["compact_s"] = time.perf_counter() - t0
    snap = refstore.open(col).snapshot
    assert query() == res["bbox_chunks"]
    res["bbox_indexed_ms"] = _median_ms(query)
    return res


LAYOUTS = ("aligned", "misaligned", "staggered")


def run(n: int, work: Path) -> dict[str, Any]:
    out = {"aligned": measure(work, n, TILE, "aligned")}
    out["misaligned"] = measure(work, n, MISALIGNED_TILE, "misaligned")
    out["staggered"] = measure(work, n, TILE, "staggered", shift=STAGGER)
    a = out["aligned"]
    for label in LAYOUTS[1:]:
        m = out[label]
        if "refused" not in m and "refused" not in a:
            out[f"{label}_over_aligned"] = {k: m[k] / a[k] for k in ("scan_s", "bytes_per_ref", "bbox_ms",
                                                                    "bbox_indexed_ms", "window_read_ms")}  # fmt: skip
    return out


def _report(res: dict[str, Any]) -> None:
    for label in LAYOUTS:
        r = res[label]
        if "refused" in r:
            print(f"{label}: {r['tiles']} tiles of {r['tile_pixels']} px: refused ({r['refused']})")
            continue
        m = r["mosaic"]
        print(f"{label}: {r['tiles']} tiles of {r['tile_pixels']} px -> image {m['shape'][0]} x {m['shape'][1]}, "
              f"{r['refs']:,} references, chunk grid {r['grid']}")  # fmt: skip
        print(f"  scan {r['scan_s']:.1f} s = {r['files_per_s']:.0f} files/s; {r['bytes_per_ref']:.1f} bytes per "
              f"reference (whole collection, {r['bytes']:,} B)")  # fmt: skip
        print(f"  chunks under a bbox of ~10 x 10 tiles ({r['bbox_chunks']} chunks): {r['bbox_ms']:.1f} ms "
              f"(first {r['bbox_first_ms']:.0f} ms), {r['bbox_indexed_ms']:.1f} ms after compact "
              "(target < 50)")  # fmt: skip
        print(f"  4 x 4-block window read across tile corners: {r['window_read_ms']:.1f} ms")
    for label in LAYOUTS[1:]:
        if f"{label}_over_aligned" in res:
            q = res[f"{label}_over_aligned"]
            print(f"{label} / aligned: " + ", ".join(f"{k} {v:.2f}x" for k, v in q.items()))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="100 tiles")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    a = ap.parse_args(argv)
    n = 100 if a.quick else a.tiles
    work = a.dir or Path(tempfile.mkdtemp(prefix="refstore-mosaic-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        res = run(n, work)
    finally:
        if a.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        _report(res)


if __name__ == "__main__":
    main()

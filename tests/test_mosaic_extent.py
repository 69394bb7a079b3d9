"""A mosaic's extent is judged before anything per pixel or per chunk is built (issue 29 §3): a
tile moved 2^31 pixels away is refused in one line, exit 2, in bounded time and memory (peak RSS
measured in a subprocess); tiles spread absurdly far apart for what they hold are refused by the
spread rule (``plan/mosaic.extent_problem``); a legitimately sparse mosaic stays cheap and reads
as tifffile reads its tiles."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile

import refstore
from refstore.errors import PlanError
from refstore.fixtures.mosaic import projected_geotags
from refstore.plan.concat import SourceSlab
from refstore.plan.mosaic import MAX_SPREAD, SPREAD_FLOOR, make_mosaic_plan
from refstore.scan._types import ArrayMeta

from ._oracle import assert_same

PIXEL, X0, Y0 = 30.0, 500000.0, 4650000.0
TILE, BLOCK = 64, 32
LIMIT_KB = 1 << 20  # 1 GB
LIMIT_S = 60.0

_PEAK = """
import resource, subprocess, sys, json
p = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]))
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": p.returncode, "stderr": p.stderr, "stdout": p.stdout, "peak_kb": peak}))
"""


def _tile(path: Path, row: int, col: int, seed: int) -> Path:
    tags = projected_geotags(X0 + col * PIXEL, Y0 - row * PIXEL, PIXEL, 32633)
    data = np.random.default_rng(seed).integers(0, 60000, (TILE, TILE)).astype("<u2")
    tifffile.imwrite(path, data, tile=(BLOCK, BLOCK), compression="zlib", extratags=tags, metadata=None)
    return path


def _scan(col: str, folder: Path) -> tuple[dict[str, Any], float]:
    """``refstore scan FOLDER --mosaic --json`` in a subprocess; its result and peak RSS (of
    every process it ran), and the wall time."""
    exe = str(Path(sys.executable).with_name("refstore"))
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", _PEAK, str(LIMIT_S), exe, "-C", col, "scan", str(folder), "--mosaic",
                          "--json"],
                         capture_output=True, text=True, timeout=LIMIT_S + 30)  # fmt: skip
    return json.loads(out.stdout), time.monotonic() - t0


@pytest.mark.parametrize("n", [3, 12])
def test_a_tile_moved_2_31_pixels_away_is_refused_in_bounded_time_and_memory(tmp_path: Path, n: int) -> None:
    folder = tmp_path / "tiles"
    folder.mkdir()
    for i in range(n - 1):  # a row of neighbours, then one moved 2^31 pixels east (and off the block grid)
        _tile(folder / f"t{i:02d}.tif", 0, i * TILE, i)
    far = _tile(folder / "far.tif", 0, (1 << 31) + 7, 99)
    col = str(tmp_path / "col")
    refstore.init(col)
    res, took = _scan(col, folder)
    assert res["rc"] == 2 and "Traceback" not in res["stderr"], res["stderr"]
    assert len(res["stderr"].strip().splitlines()) == 1, res["stderr"]
    assert str(far) in res["stderr"] and "is its georeferencing right?" in res["stderr"]
    assert res["peak_kb"] < LIMIT_KB and took <= LIMIT_S, (res["peak_kb"], took)
    assert refstore.Collection.open(col).snapshot().count("source") == 0  # nothing committed


def _slab(loc: str, row: int, col: int, order: int, size: int = TILE) -> SourceSlab:
    t = [X0 + col * PIXEL, PIXEL, 0.0, Y0 - row * PIXEL, 0.0, -PIXEL]
    attrs: dict[str, dict[str, Any]] = {"transform": {"type": "<f8", "value": t, "shape": [6]},
                                        "crs": {"type": "str", "value": "EPSG:32633"}}  # fmt: skip
    meta = ArrayMeta("image", ("y", "x"), (size, size), (BLOCK, BLOCK), "<u2", 0, ({"id": "zlib"},), attrs)
    return SourceSlab(loc, order, {"image": meta})


@pytest.mark.parametrize("size", [64, 256])
def test_the_spread_rule_counts_grid_chunks_per_chunk_held(size: int) -> None:
    """Three tiles of 4 (or 64) blocks each: a grid of more than ``max(SPREAD_FLOOR, MAX_SPREAD *
    held)`` chunks (the floor, or the ratio) is refused naming the tile far from the others; up
    to that it is placed."""
    held = 3 * (size // BLOCK) ** 2
    limit = max(SPREAD_FLOOR, MAX_SPREAD * held)
    assert (limit == SPREAD_FLOOR) == (size == 64)
    side = int(np.sqrt(limit))  # a square grid of ``side`` x ``side`` chunks
    near = [_slab("a.tif", 0, 0, 0, size), _slab("b.tif", 0, size, 1, size)]
    ok = side * BLOCK - size  # the far tile's corner: the grid is side x side chunks
    mp = make_mosaic_plan([*near, _slab("far.tif", ok, ok, 2, size)])
    assert mp.plan.arrays["image"].shape == (side * BLOCK, side * BLOCK)
    bad = ok + BLOCK
    with pytest.raises(PlanError) as e:
        make_mosaic_plan([*near, _slab("far.tif", bad, bad, 2, size)])
    msg = str(e.value)
    assert msg.startswith("far.tif: 'image' would spread the mosaic over ")
    assert f"{(side + 1) ** 2} chunks for the {held} its 3 tiles hold" in msg and "\n" not in msg


def test_a_sparse_mosaic_stays_cheap_and_reads_as_its_tiles(tmp_path: Path) -> None:
    """One tile 2^20 + 7 pixels east of two neighbours (a rectilinear grid with a gap of 32,768
    blocks): scanned in bounded memory, the far tile reads as tifffile reads it, the gap as fill."""
    folder = tmp_path / "tiles"
    folder.mkdir()
    a = _tile(folder / "a.tif", 0, 0, 1)
    b = _tile(folder / "b.tif", 0, TILE, 2)
    off = (1 << 20) + 7
    far = _tile(folder / "far.tif", 0, off, 3)
    col = str(tmp_path / "col")
    refstore.init(col)
    res, took = _scan(col, folder)
    assert res["rc"] == 0, res["stderr"]
    assert res["peak_kb"] < LIMIT_KB and took <= LIMIT_S, (res["peak_kb"], took)
    m = json.loads(res["stdout"])["mosaic"]
    assert m["shape"] == [TILE, off + TILE] and m["gap_pixels"] == TILE * (off - 2 * TILE)
    img = refstore.open(col)["image"]
    assert_same(img[:, off - 5 : off + TILE], np.hstack([np.zeros((TILE, 5), "<u2"), tifffile.imread(far)]), "far")
    assert_same(img[:, : 2 * TILE + 3], np.hstack([tifffile.imread(a), tifffile.imread(b), np.zeros((TILE, 3), "<u2")]),
                "near tiles")  # fmt: skip

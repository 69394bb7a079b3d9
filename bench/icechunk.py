"""Benchmark: emit 1M references as an Icechunk repository (issue budget: < 10 s).

``python -m bench.icechunk [--quick] [--json] [--refs N]``. Measures a fresh emit, a second
emit of the same version (commits nothing), and an emit after one source changed (rewrites
only that source's references), against Icechunk's own floor: one ``set_virtual_refs_arr``
call per file and a commit of the same references, written directly.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

BUDGET_S = 10.0
"""The issue's budget for emitting 1M references as Icechunk (scaled by refs / 1M)."""


def _floor(work: Path, col: str) -> float:
    """Icechunk alone: the same references through ``set_virtual_refs_arr`` + commit."""
    import icechunk as ic

    import refstore

    ds = refstore.open(col)
    t = ds.snapshot.chunk_rows("x", columns=("source", "offset", "length"))
    meta = ds.snapshot.array("x")
    grid = tuple(math.ceil(s / c) for s, c in zip(meta.shape, meta.chunks, strict=True))
    g0 = t.column("g0").to_numpy()
    locs = np.array(["file://" + s for s in t.column("source").to_pylist()], dtype=object)
    prefix = "file://" + os.path.commonpath([str(p) for p in (work / "many").iterdir()]) + "/"
    cfg = ic.RepositoryConfig.default()
    cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(prefix[7:])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        repo = ic.Repository.create(ic.local_filesystem_storage(str(work / "floor.icechunk")), config=cfg)
        import zarr
        from zarr.codecs import BytesCodec

        t0 = time.perf_counter()
        s = repo.writable_session("main")
        zarr.create_array(s.store, name="x", shape=meta.shape, chunks=meta.chunks, dtype=meta.dtype,
                          serializer=BytesCodec(endian="little"), fill_value=0)  # fmt: skip
        order = np.argsort(g0, kind="stable")
        flat = g0[order]
        url = locs[order]
        off = t.column("offset").to_numpy()[order].astype(np.uint64)
        ln = t.column("length").to_numpy()[order].astype(np.uint64)
        assert len(flat) == math.prod(grid)
        s.store.set_virtual_refs_arr("x", grid, url.tolist(), off, ln, validate_containers=False)
        s.commit("floor")
    return time.perf_counter() - t0


def run(n_refs: int) -> dict[str, Any]:
    import icechunk  # noqa: F401  (imports are not part of the emit)
    import zarr  # noqa: F401

    import refstore
    from refstore.emit import emit

    from .__main__ import make_many_chunk_files

    with tempfile.TemporaryDirectory(prefix="bench-icechunk-") as tmp:
        work = Path(tmp)
        files = make_many_chunk_files(work / "many", n_refs, per_file=min(100_000, n_refs))
        col = str(work / "c.col")
        refstore.init(col)
        refstore.scan(col, [str(work / "many")], concat_dim="time", workers=2)
        refs = refstore.open(col).snapshot.count("chunk")
        out = str(work / "out.icechunk")
        t0 = time.perf_counter()
        rep = emit(refstore.Collection.open(col), "icechunk", out)
        fresh = time.perf_counter() - t0
        t0 = time.perf_counter()
        same = emit(refstore.Collection.open(col), "icechunk", out)
        again = time.perf_counter() - t0
        st = files[0].stat()
        os.utime(files[0], ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
        refstore.scan(col, [str(work / "many")], workers=1)
        t0 = time.perf_counter()
        upd = emit(refstore.Collection.open(col), "icechunk", out)
        update = time.perf_counter() - t0
        floor = _floor(work, col)
        manifests = sum(1 for _ in (Path(out) / "manifests").iterdir())
    budget = BUDGET_S * refs / 1_000_000
    return {
        "refs": refs,
        "emit_s": fresh,
        "refs_per_s": refs / fresh,
        "budget_s": budget,
        "ratio_to_budget": fresh / budget,
        "icechunk_floor_s": floor,
        "ratio_to_floor": fresh / floor,
        "same_version_s": again,
        "same_version_committed": same.extra["committed"],
        "one_source_changed_s": update,
        "one_source_changed_written": upd.extra["written"],
        "fresh_written": rep.extra["written"],
        "manifest_files": manifests,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="100k references instead of 1M")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--refs", type=int, default=None)
    a = ap.parse_args()
    res = run(a.refs or (100_000 if a.quick else 1_000_000))
    if a.json:
        print(json.dumps(res, indent=2))
        return
    print(f"icechunk emit of {res['refs']:,} refs: {res['emit_s']:.2f} s ({res['refs_per_s']:,.0f} refs/s); "
          f"{res['ratio_to_budget']:.2f}x the {res['budget_s']:.1f} s budget; "
          f"{res['ratio_to_floor']:.2f}x icechunk alone ({res['icechunk_floor_s']:.2f} s)")  # fmt: skip
    print(f"same version again: {res['same_version_s']:.2f} s (committed: {res['same_version_committed']}); "
          f"one source changed: {res['one_source_changed_s']:.2f} s, {res['one_source_changed_written']:,} refs "
          f"rewritten; {res['manifest_files']} manifest files")  # fmt: skip


if __name__ == "__main__":
    main()

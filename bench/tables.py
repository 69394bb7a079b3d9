"""Benchmark: emitting the table forms (flat Parquet, SQLite mdim-refs/0.2) at 1M references,
against kerchunk JSON emitted from the same version; and one-chunk lookups in each form.

    python -m bench.tables [--refs 1000000] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

FORMS = ("parquet", "sqlite", "kerchunk-json")


def _best(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(work: Path, n_refs: int) -> dict[str, Any]:
    import pyarrow.dataset as pads

    import refstore
    from refstore.emit import emit

    from .__main__ import make_many_chunk_files

    files = make_many_chunk_files(work / "data", n_refs, per_file=min(100_000, n_refs))
    uri = str(work / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in files], concat_dim="time")
    col = refstore.Collection.open(uri)
    res: dict[str, Any] = {"refs": None, "forms": {}}
    for fmt in FORMS:
        out = work / f"out.{fmt}"
        t0 = time.perf_counter()
        rep = emit(col, fmt, str(out))
        dt = time.perf_counter() - t0
        res["refs"] = rep.refs
        res["forms"][fmt] = {"seconds": dt, "bytes": out.stat().st_size, "bytes_per_ref": out.stat().st_size / rep.refs}
    base = res["forms"]["kerchunk-json"]["seconds"]
    for fmt in ("parquet", "sqlite"):
        res["forms"][fmt]["speed_vs_kerchunk_json"] = base / res["forms"][fmt]["seconds"]
    # one chunk by key: pyarrow with row-group pruning, and SQLite through the refs_x view
    key = (n_refs // 2, 0)
    pq_out = str(work / "out.parquet")
    flt = (pads.field("array_name") == "x") & (pads.field("dim_0") == key[0]) & (pads.field("dim_1") == key[1])

    def pq_lookup() -> None:
        t = pads.dataset(pq_out, format="parquet").to_table(columns=["path", "offset", "size"], filter=flt)
        assert t.num_rows == 1

    sq_out = str(work / "out.sqlite")

    def sq_lookup() -> None:
        with closing(sqlite3.connect(f"file:{sq_out}?mode=ro", uri=True)) as con:
            rows = con.execute('SELECT path, "offset", size FROM refs_x WHERE dim_0 = ? AND dim_1 = ?', key).fetchall()
        assert len(rows) == 1

    res["lookup_ms"] = {"parquet_pyarrow": 1e3 * _best(pq_lookup, 5), "sqlite": 1e3 * _best(sq_lookup, 5)}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refs", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100k references")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    n = 100_000 if a.quick else a.refs
    work = Path(tempfile.mkdtemp(prefix="refstore-bench-tables-"))
    try:
        res = run(work, n)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        json.dump(res, sys.stdout, indent=2)
        print()
        return
    print(f"emit of {res['refs']:,} references (one version, remapped paths, files as written):")
    for fmt, r in res["forms"].items():
        ratio = f"   {r['speed_vs_kerchunk_json']:.2f}x kerchunk-json speed" if "speed_vs_kerchunk_json" in r else ""
        print(f"  {fmt:<14} {r['seconds']:6.2f} s  {r['bytes']:>12,} bytes ({r['bytes_per_ref']:.1f} B/ref){ratio}")
    lk = res["lookup_ms"]
    print(f"one chunk by key: parquet (pyarrow, pruned) {lk['parquet_pyarrow']:.1f} ms, sqlite {lk['sqlite']:.2f} ms")


if __name__ == "__main__":
    main()

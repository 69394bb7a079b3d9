"""Benchmark: emit ~1M references in every published form (targets: kerchunk-parquet < 5 s,
icechunk < 10 s; json, parquet, sqlite and vrt are reported).

    python -m bench.emit [--refs 1000000] [--quick] [--json] [--keep DIR]

The collection is the one ``python -m bench`` measures its size on: HDF5 files of 100,000
one-row chunks each, concatenated along time, with one remap rule (to an https URL) so every
form applies remap. A form whose module does not import yet is reported "not available".
``--keep DIR`` keeps (and on the next run reuses) the files and the collection.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGETS_S = {"kerchunk-parquet": 5.0, "icechunk": 10.0}
SUFFIX = {"kerchunk-json": ".json", "kerchunk-parquet": ".parq", "icechunk": ".icechunk", "parquet": ".parquet",
          "sqlite": ".sqlite", "vrt": ".vrt"}  # fmt: skip


def _bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build(work: Path, n_refs: int) -> str:
    """A collection of ~``n_refs`` chunk references (reused when ``work`` already holds it)."""
    import refstore
    from refstore.table.remap import add_rule

    from .__main__ import make_many_chunk_files

    col = work / f"emit-{n_refs}.col"
    if col.exists():
        return str(col)
    files = make_many_chunk_files(work / f"emit-{n_refs}", n_refs, per_file=min(100_000, n_refs))
    tmp = work / f"emit-{n_refs}.col.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    refstore.init(str(tmp))
    refstore.scan(str(tmp), [str(p) for p in files], concat_dim="time", workers=2)
    add_rule(refstore.Collection.open(str(tmp)), str(files[0].parent) + "/", "https://example.org/bench/")
    tmp.rename(col)
    return str(col)


def bench_emit(uri: str, out_dir: Path) -> dict[str, Any]:
    import refstore
    from refstore.emit import FORMATS, emit

    col = refstore.Collection.open(uri)
    res: dict[str, Any] = {"refs": refstore.open(uri).snapshot.count("chunk"), "forms": {}}
    for fmt, module in FORMATS.items():
        try:
            importlib.import_module(module, "refstore.emit")
        except ImportError as e:  # another helper's form, not merged yet
            res["forms"][fmt] = {"available": False, "why": str(e)}
            continue
        out = out_dir / f"out{SUFFIX.get(fmt, '')}"
        t0 = time.perf_counter()
        rep = emit(col, fmt, str(out), skip_unexpressible=True)
        dt = time.perf_counter() - t0
        res["forms"][fmt] = {
            "available": True, "seconds": dt, "refs": rep.refs, "refs_per_s": rep.refs / dt, "bytes": _bytes(out),
            "bytes_per_ref": _bytes(out) / max(rep.refs, 1), "skipped": sorted(rep.skipped),
        }  # fmt: skip
        shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refs", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100k refs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", help="work folder to keep and reuse (default: a temporary one)")
    a = ap.parse_args()
    if a.quick:
        a.refs = 100_000
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="refstore-bench-emit-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        uri = build(work, a.refs)
        build_s = time.perf_counter() - t0
        out_dir = work / "out"
        out_dir.mkdir(exist_ok=True)
        res = bench_emit(uri, out_dir)
        res["build_s"] = build_s
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        json.dump(res, sys.stdout, indent=2)
        print()
        return
    print(f"emit of {res['refs']:,} references (collection built in {res['build_s']:.1f} s):")
    for fmt, r in res["forms"].items():
        if not r["available"]:
            print(f"  {fmt:<17} not available")
            continue
        target = TARGETS_S.get(fmt)
        verdict = ""
        if target is not None:
            verdict = f"   target < {target:g} s: {'met' if r['seconds'] < target else 'MISSED'}"
        print(f"  {fmt:<17} {r['seconds']:6.2f} s  {r['refs_per_s'] / 1e6:5.2f} M refs/s  "
              f"{r['bytes']:>12,} bytes ({r['bytes_per_ref']:.2f} B/ref){verdict}")  # fmt: skip


if __name__ == "__main__":
    main()

"""Scale benchmark: a synthetic BRAN-like collection (4-D, ~23k chunks per daily file) of 10M
references (``--refs 100000000``: ~4,360 daily files), bulk-built in batches through the scan
commit (workers' fragment path), then: bytes per reference, upsert of one new day and of one
reprocessed day, chunks under a bbox+time box (with and without Lance scalar indices), diff of
two versions, hold / release / remap commits, emit times, memory sampled throughout every phase
(peak and a timeline), and remote reads of a 5x5 tile box from a loopback S3 server, coalesced vs
one request per chunk. The sources are synthetic (no bytes): ``verify`` is not measured here.

    python -m bench.scale [--refs 10000000] [--quick] [--json] [--dir DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

DEPTHS, NY, NX = 51, 1500, 3600  # BRAN2020-like ocean grid (st_ocean, yt_ocean, xt_ocean)
CHUNK = (1, 1, 100, 120)
PER_DAY = DEPTHS * (NY // CHUNK[2]) * (NX // CHUNK[3])  # 22,950 chunk references per daily file
DAY_S = 86_400.0
EPOCH_2010 = 1_262_304_000.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class RssSampler:
    """This process's resident memory every ``every`` seconds, in a thread: ``peak_mb`` and a
    timeline of (seconds, MB) pairs kept to ~``keep`` points."""

    def __init__(self, every: float = 0.5, keep: int = 60) -> None:
        import threading

        self.every, self.keep = every, keep
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.perf_counter()

    def _rss_mb(self) -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append((time.perf_counter() - self._t0, self._rss_mb()))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def report(self) -> dict[str, Any]:
        s = self.samples or [(0.0, self._rss_mb())]
        step = max(1, len(s) // self.keep)
        timeline = [(round(t, 1), round(m)) for t, m in s[::step]]
        return {"sampled_peak_mb": max(m for _, m in s), "rss_timeline": timeline}


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _day_result(root: str, day: int, *, seed: int = 0) -> Any:
    """One synthetic daily file as a scanner returns it: temp (4-D, shuffle+zlib chunks with
    compressed lengths 20-60 kB laid out back to back) and its coordinates."""
    import pyarrow as pa

    from refstore._keys import MAX_DIMS, NO_DIM, SOURCE_KEY_COLUMNS
    from refstore.scan._types import CHUNK_BATCH_SCHEMA, ArrayMeta, ScanResult, SourceInfo

    rng = np.random.default_rng(seed * 1_000_003 + day)
    gy, gx = NY // CHUNK[2], NX // CHUNK[3]
    n = PER_DAY
    lengths = rng.integers(20_000, 60_000, n, dtype=np.int64)
    offsets = 4096 + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    z, y, x = np.unravel_index(np.arange(n), (DEPTHS, gy, gx))
    keys = np.full((n + 1, MAX_DIMS), NO_DIM, np.int32)
    keys[:n, 0] = 0
    keys[:n, 1], keys[:n, 2], keys[:n, 3] = z, y, x
    keys[n, 0] = 0
    cols: dict[str, Any] = {"array": pa.array(["temp"] * n + ["Time"], pa.string())}
    for i, c in enumerate(SOURCE_KEY_COLUMNS):
        cols[c] = pa.array(keys[:, i])
    cols["offset"] = pa.array([*offsets.tolist(), None], pa.int64())
    cols["length"] = pa.array([*lengths.tolist(), None], pa.int64())
    cols["filter_mask"] = pa.array(np.zeros(n + 1, np.int32))
    t_value = np.array([float(day)], "<f8").tobytes()
    cols["inline"] = pa.array([None] * n + [t_value], pa.large_binary())
    table = pa.table(cols, schema=CHUNK_BATCH_SCHEMA)
    size = int(offsets[-1] + lengths[-1])
    loc = f"{root}/ocean_temp_{day:05d}.nc"
    units = {"type": "str", "value": "days since 2010-01-01 00:00:00"}
    temp = ArrayMeta(
        name="temp", dims=("Time", "st_ocean", "yt_ocean", "xt_ocean"), shape=(1, DEPTHS, NY, NX), chunks=CHUNK,
        dtype="<i2", fill_value=-32768, codecs=({"id": "shuffle", "elementsize": 2}, {"id": "zlib", "level": 4}),
        attrs={"scale_factor": {"type": "<f4", "value": 0.001}, "units": {"type": "str", "value": "degC"}},
    )  # fmt: skip
    time_a = ArrayMeta(name="Time", dims=("Time",), shape=(1,), chunks=(1,), dtype="<f8", fill_value=None,
                       attrs={"units": units, "calendar": {"type": "str", "value": "gregorian"}})  # fmt: skip
    return ScanResult(
        source=SourceInfo(location=loc, size=size, mtime_ns=1_700_000_000_000_000_000 + day * 10**9 + seed, etag=None),
        arrays=(temp, time_a), chunks=table, sort_value=EPOCH_2010 + day * DAY_S,
        sort_units="seconds since 1970-01-01", groups={"": {}},
    )  # fmt: skip


def _commit_days(col: Any, days: list[int], root: str, *, seed: int = 0, bulk: bool = True) -> Any:
    from refstore.table.distributed import LocalFragments
    from refstore.table.upsert import commit_scan

    results = [_day_result(root, d, seed=seed) for d in days]
    if not bulk:
        return commit_scan(col, results, concat_dim="Time", unchanged=0, failed=[])
    frag = LocalFragments(col, results)
    return commit_scan(col, frag.summaries, concat_dim="Time", unchanged=0, failed=[], prewritten=frag)


# --------------------------------------------------------------------------- phases (child processes)
def phase_build(out: Path, refs: int) -> dict[str, Any]:
    import refstore

    col = refstore.init(str(out))
    n_days = max(2, -(-refs // PER_DAY))
    per_batch = 20 if n_days <= 1000 else 100  # a batch's rows are in memory until its commit
    t0 = time.perf_counter()
    commits: list[float] = []
    with RssSampler(every=1.0) as rss:
        for start in range(0, n_days, per_batch):
            t1 = time.perf_counter()
            _commit_days(col, list(range(start, min(n_days, start + per_batch))), "s3://archive/bran2020/daily")
            commits.append(time.perf_counter() - t1)
    return {"days": n_days, "build_s": time.perf_counter() - t0, "peak_rss_mb": _peak_mb(), "batch_days": per_batch,
            "first_commit_s": commits[0], "last_commit_s": commits[-1], **rss.report()}  # fmt: skip


def phase_emit(out: Path, fmt: str, dest: Path) -> dict[str, Any]:
    import refstore
    from refstore.emit import emit

    col = refstore.Collection.open(str(out))
    t0 = time.perf_counter()
    with RssSampler() as rss:
        rep = emit(col, fmt, str(dest), on_stale="ignore")  # the sources are synthetic
    took = time.perf_counter() - t0
    size = _du(dest) if dest.is_dir() else dest.stat().st_size
    return {"emit_s": took, "refs": rep.refs, "bytes": size, "peak_rss_mb": _peak_mb(), **rss.report()}


def _child(*args: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-m", "bench.scale", *args], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"bench child {args[:2]} failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- measurements
def _median(f: Any, n: int = 7) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure_table(out: Path, n_days: int) -> dict[str, Any]:
    import refstore
    from refstore.table import compact, diff, gc

    col = refstore.Collection.open(str(out))
    snap = col.snapshot()
    n_refs = snap.count("chunk")
    res: dict[str, Any] = {"refs": n_refs}
    size = _du(out)
    res["bytes"] = size
    res["bytes_per_ref"] = size / n_refs

    # chunks under a bbox+time box: 30 days x surface x 5x5 tiles, and x all depths
    t_lo = max(0, n_days // 2 - 15)
    surface = [(t_lo, t_lo + 29), (0, 0), (6, 10), (12, 16)]
    column = [(t_lo, t_lo + 29), (0, DEPTHS - 1), (6, 10), (12, 16)]
    cols = ("source", "offset", "length")

    def box(s: Any, ranges: list[tuple[int, int]], **kw: Any) -> Any:
        return s.ds.to_table(columns=list(cols), filter=s.view_filter("temp", ranges), **kw)

    res["box_rows"] = box(snap, surface).num_rows
    res["box_column_rows"] = box(snap, column).num_rows
    res["box_surface_noindex_ms"] = 1000 * _median(lambda: box(snap, surface))
    res["box_column_noindex_ms"] = 1000 * _median(lambda: box(snap, column))

    # compact: merge fragments, build the scalar indices (its own versions, as documented);
    # gc drops the pre-compaction files, so the size is that of one version with its indices
    t0 = time.perf_counter()
    compact(col)
    res["compact_s"] = time.perf_counter() - t0
    gc(col, keep_last=1, grace=timedelta(0))  # nothing else writes this collection
    res["bytes_with_indices"] = _du(out)
    snap = col.snapshot()
    assert box(snap, surface).num_rows == res["box_rows"]
    # the Lance query itself (Snapshot.chunk_rows would answer from its in-memory chunk index
    # for grids up to table/_index.MAX_ROWS cells)
    res["box_surface_ms"] = 1000 * _median(lambda: box(snap, surface, late_materialization=True))
    res["box_column_ms"] = 1000 * _median(lambda: box(snap, column, late_materialization=True))

    # upsert of one day: the file of a day in the middle is reprocessed (new byte ranges)
    day = n_days // 2
    before_v, before_size = snap.version, _du(out)
    t0 = time.perf_counter()
    rep = _commit_days(col, [day], "s3://archive/bran2020/daily", seed=1, bulk=False)
    res["upsert_day_s"] = time.perf_counter() - t0
    res["upsert_day_rows"] = rep.updated + rep.inserted
    res["upsert_growth_bytes"] = _du(out) - before_size
    res["upsert_growth_per_row"] = res["upsert_growth_bytes"] / max(1, res["upsert_day_rows"])

    # upsert of one new day (the next file of the archive)
    before_size = _du(out)
    t0 = time.perf_counter()
    rep = _commit_days(col, [n_days], "s3://archive/bran2020/daily", bulk=False)
    res["new_day_s"] = time.perf_counter() - t0
    res["new_day_rows"] = rep.inserted
    res["new_day_growth_per_row"] = (_du(out) - before_size) / max(1, rep.inserted)

    # diff of the two versions (fast path through Lance's per-row versions)
    t0 = time.perf_counter()
    d = diff(col, before_v)
    res["diff_s"] = time.perf_counter() - t0
    res["diff_changed"] = d.arrays["temp"]["changed"]
    res.update(measure_commits(col, t_lo))
    res["versions"] = col.latest_version
    return res


class _SyntheticFetcher:
    """The sources of the synthetic archive do not exist: hold reads stand-in bytes (a pattern)
    through this fetcher, so the hold timed is refstore's own code from selection to commit."""

    def __init__(self, identity: dict[str, tuple[int, int, str]]) -> None:
        self.identity = identity

    def head(self, location: str) -> tuple[int, int | None, str | None]:
        size, mtime, etag = self.identity[location]
        return size, mtime, etag or None

    def read_into(self, location: str, starts: list[int], views: list[memoryview]) -> None:
        for v in views:
            v[:] = b"\x5a" * len(v)


def measure_commits(col: Any, t_lo: int) -> dict[str, Any]:
    """hold / release of a 30-day x surface x 5x5-tile box (750 chunks), remap add / remove:
    each one version whose commit cost should be that of the change, not of the table."""
    from refstore.table import HoldSelection, hold, release
    from refstore.table.remap import add_rule, remove_rule

    snap = col.snapshot()
    fetcher = _SyntheticFetcher(snap.source_identity())
    sel = HoldSelection(arrays=("temp",), window=(slice(t_lo, t_lo + 30), 0, slice(600, 1100), slice(1440, 2040)))
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    rep = hold(col, sel, fetcher=fetcher)  # type: ignore[arg-type]
    out["hold_s"], out["hold_chunks"], out["hold_bytes"] = time.perf_counter() - t0, rep.chunks, rep.bytes
    t0 = time.perf_counter()
    out["release_chunks"] = release(col, sel).chunks
    out["release_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    add_rule(col, "s3://archive/bran2020/", "https://example.org/bran2020/")
    out["remap_add_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    remove_rule(col, "s3://archive/bran2020/")
    out["remap_remove_s"] = time.perf_counter() - t0
    return out


def measure_remote(work: Path) -> dict[str, Any]:
    """A real HDF5 file on the loopback S3 server; read a 5x5 tile box through refstore."""
    import h5py

    from refstore.fixtures.s3server import create_bucket, moto_s3, s3_env

    with moto_s3() as endpoint:
        if endpoint is None:
            return {"remote": "not available (moto_server did not start)"}
        os.environ.update(s3_env(endpoint, access_key="bench", secret_key="bench-secret"))
        create_bucket(endpoint, "bench")
        import obstore
        from obstore.store import from_url

        import refstore
        from refstore import _objstore
        from refstore.read import ReadOptions

        path = work / "tile.h5"
        rng = np.random.default_rng(0)
        data = rng.normal(15, 3, (1, 2, 1200, 1800)).astype("<f4")
        with h5py.File(path, "w") as f:
            f.create_dataset("temp", data=data, chunks=(1, 1, 120, 120), compression="gzip", shuffle=True)
        obstore.put(from_url("s3://bench"), "bran/tile.h5", path.read_bytes())
        col = str(work / "remote-col")
        refstore.init(col)
        refstore.scan(col, ["s3://bench/bran/tile.h5"], workers=1)
        box = (0, 0, slice(240, 840), slice(360, 960))  # 5 x 5 tiles of 120 x 120
        expected = data[box]
        out: dict[str, Any] = {}
        for label, opts in (
            ("per_chunk", ReadOptions(max_bytes=1)),
            ("coalesced", ReadOptions()),
            ("coalesced_gap_1MiB", ReadOptions(max_gap=1 << 20)),
        ):
            ds = refstore.open(col, options=opts)
            arr = ds["temp"]
            assert arr[box].tobytes() == expected.tobytes()
            _objstore.IO_STATS.reset()
            arr[box]
            requests = _objstore.IO_STATS.ranges
            out[label] = {"requests": requests, "ms": 1000 * _median(lambda a=arr: a[box], n=5)}
        return out


# --------------------------------------------------------------------------- main
def _peer(fmt: str) -> bool:
    from refstore.emit import FORMATS

    mod = FORMATS.get(fmt)
    return mod is not None and importlib.util.find_spec("refstore.emit" + mod) is not None


def run(refs: int, work: Path, *, formats: tuple[str, ...] = ("kerchunk-parquet", "icechunk", "parquet"),
        remote: bool = True) -> dict[str, Any]:  # fmt: skip
    out = work / "bran"
    build = _child("--phase", "build", "--out", str(out), "--refs", str(refs))
    res: dict[str, Any] = {"target_refs": refs, "build": build}
    with RssSampler() as rss:
        res["table"] = measure_table(out, int(build["days"]))
    res["table"].update(rss.report())
    emits: dict[str, Any] = {}
    for fmt in formats:
        if not _peer(fmt):
            emits[fmt] = "not available"
            continue
        dest = work / f"emit-{fmt}"
        try:
            r = _child("--phase", "emit", "--out", str(out), "--format", fmt, "--dest", str(dest))
        except RuntimeError as e:
            emits[fmt] = f"failed: {e}"
            continue
        r["bytes_per_ref"] = r["bytes"] / max(1, r["refs"])
        emits[fmt] = r
        shutil.rmtree(dest, ignore_errors=True) if dest.is_dir() else dest.unlink(missing_ok=True)
    res["emit"] = emits
    res["remote"] = measure_remote(work) if remote else {"remote": "not measured (--no-remote)"}
    return res


def _report(res: dict[str, Any]) -> None:
    t, b = res["table"], res["build"]
    print(f"measurements after the build: peak RSS sampled {t['sampled_peak_mb']:.0f} MB")
    print(f"collection: {t['refs']:,} references, {b['days']} daily files, built in {b['build_s']:.1f} s "
          f"({b['build_s'] / 600:.2f}x the 10 min limit; peak RSS {b['peak_rss_mb']:.0f} MB, "
          f"{b['peak_rss_mb'] / 4096:.2f}x the 4 GB limit; commits of {b['batch_days']} days: first "
          f"{b['first_commit_s']:.1f} s, last {b['last_commit_s']:.1f} s)")  # fmt: skip
    print(f"bytes per reference: {t['bytes_per_ref']:.2f} ({t['bytes_per_ref'] / 6:.2f}x the 6 B limit); after "
          f"compact + gc, with scalar indices "
          f"{t['bytes_with_indices'] / t['refs']:.2f} (compact + index build {t['compact_s']:.1f} s)")  # fmt: skip
    for fmt, e in res["emit"].items():
        if isinstance(e, dict):
            limit = 1536 if fmt == "icechunk" else 2048  # issue 16: Icechunk < 1.5 GB at 10M, the rest < 2 GB
            print(f"  {fmt}: {e['bytes_per_ref']:.2f} B/ref ({e['bytes_per_ref'] / t['bytes_per_ref']:.2f}x refstore), "
                  f"emit {e['emit_s']:.1f} s, peak RSS {e['peak_rss_mb']:.0f} MB "
                  f"({e['peak_rss_mb'] / limit:.2f}x the {limit / 1024:g} GB limit)")  # fmt: skip
        else:
            print(f"  {fmt}: {e}")
    print(f"bbox+time box (30 days x surface x 5x5 tiles, {t['box_rows']} chunks): {t['box_surface_ms']:.1f} ms "
          f"with scalar indices ({t['box_surface_ms'] / 50:.2f}x the 50 ms limit), "
          f"{t['box_surface_noindex_ms']:.1f} ms without")  # fmt: skip
    print(f"  x all {DEPTHS} depths ({t['box_column_rows']:,} chunks): {t['box_column_ms']:.1f} ms, "
          f"{t['box_column_noindex_ms']:.1f} ms without")  # fmt: skip
    print(f"upsert of one reprocessed day: {t['upsert_day_s']:.2f} s ({t['upsert_day_s']:.2f}x the 1 s limit) for "
          f"{t['upsert_day_rows']:,} rows; disk +{t['upsert_growth_bytes']:,} bytes "
          f"({t['upsert_growth_per_row']:.2f} B per changed row)")  # fmt: skip
    print(f"upsert of one new day: {t['new_day_s']:.2f} s ({t['new_day_s']:.2f}x the 1 s limit) for "
          f"{t['new_day_rows']:,} rows; {t['new_day_growth_per_row']:.2f} B per new row")  # fmt: skip
    print(f"diff of the two versions: {t['diff_s']:.2f} s ({t['diff_s'] / 2:.2f}x the 2 s limit), "
          f"{t['diff_changed']:,} changed")  # fmt: skip
    print(f"hold of {t['hold_chunks']} chunks ({t['hold_bytes'] / 1e6:.0f} MB, stand-in bytes): {t['hold_s']:.2f} s "
          f"({t['hold_s'] / 0.5:.2f}x the 0.5 s limit); release {t['release_s']:.2f} s ({t['release_s'] / 0.5:.2f}x); "
          f"remap add {t['remap_add_s']:.2f} s ({t['remap_add_s'] / 0.5:.2f}x), remove {t['remap_remove_s']:.2f} s "
          f"({t['remap_remove_s'] / 0.5:.2f}x)")  # fmt: skip
    r = res["remote"]
    if "per_chunk" in r:
        pc, co, gap = r["per_chunk"], r["coalesced"], r["coalesced_gap_1MiB"]
        print(f"remote 5x5 tile box (loopback S3): one request per chunk {pc['requests']} requests "
              f"{pc['ms']:.1f} ms; coalesced {co['requests']} requests {co['ms']:.1f} ms "
              f"({pc['ms'] / co['ms']:.2f}x); gap 1 MiB {gap['requests']} requests {gap['ms']:.1f} ms")  # fmt: skip
    else:
        print(f"remote: {r['remote']}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refs", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="~230k references (10 days)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--emit", default="kerchunk-parquet,icechunk,parquet", help="forms to emit ('' for none)")
    ap.add_argument("--no-remote", action="store_true", help="skip the loopback S3 reads")
    ap.add_argument("--phase", choices=("build", "emit"), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--format", help=argparse.SUPPRESS)
    ap.add_argument("--dest", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.phase == "build":
        print(json.dumps(phase_build(a.out, a.refs)))
        return
    if a.phase == "emit":
        print(json.dumps(phase_emit(a.out, a.format, a.dest)))
        return
    refs = 10 * PER_DAY if a.quick else a.refs
    work = a.dir or Path(tempfile.mkdtemp(prefix="refstore-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        res = run(refs, work, formats=tuple(f for f in a.emit.split(",") if f), remote=not a.no_remote)
    finally:
        if a.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        _report(res)


if __name__ == "__main__":
    main()

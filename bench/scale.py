"""Scale benchmark: a synthetic BRAN-like collection (4-D, ~23k chunks per daily file) of 10M
references (``--refs 100000000``: ~4,360 daily files), bulk-built in batches through the scan
commit (workers' fragment path), then: bytes per reference, upsert of one new day and of one
reprocessed day, chunks under a bbox+time box (with and without Lance scalar indices), diff of
two versions, hold / release / remap commits, emit times, memory sampled throughout every phase
(peak and a timeline), and remote reads of a 5x5 tile box from a loopback S3 server, coalesced vs
one request per chunk, and ``verify --sample 1000`` (CLI). The rows are synthetic but their sources
are real: one HDF5 template per distinct layout (a 4-D int16 ``temp`` with the rows' chunk grid,
shuffle+zlib, noise of varying amplitude so compressed lengths vary), hard-linked once per day,
and every row's offset/length is the template's own chunk (read from h5py's chunk index), so
verify's oracle (h5py) reads what the table references. The template is cached in ``--dir``.

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


TEMPLATE_TIME = 0.0
"""The ``Time`` value every template holds: the days of the series are hard links of one file,
so their ``Time`` is the template's (the series is ordered by each day's sort value)."""


def write_template(path: Path, seed: int) -> None:
    """A real HDF5 file with the synthetic rows' layout: ``temp`` (1, 51, 1500, 3600) int16 in
    (1, 1, 100, 120) chunks, shuffle + zlib 4, values noise whose amplitude varies per tile (so
    compressed lengths vary as in real data, ~1-20 kB), and ``Time`` (1,) float64."""
    import h5py

    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    with h5py.File(tmp, "w") as f:
        t = f.create_dataset("Time", data=np.array([TEMPLATE_TIME], "<f8"), chunks=(1,), maxshape=(None,))
        t.attrs["units"] = "days since 2010-01-01 00:00:00"
        d = f.create_dataset("temp", shape=(1, DEPTHS, NY, NX), dtype="<i2", chunks=CHUNK, shuffle=True,
                             compression="gzip", compression_opts=4, fillvalue=-32768)  # fmt: skip
        gy, gx = NY // CHUNK[2], NX // CHUNK[3]
        for z in range(DEPTHS):
            amp = rng.integers(2, 4000, (gy, gx))  # per tile
            amp = np.repeat(np.repeat(amp, CHUNK[2], 0), CHUNK[3], 1)
            d[0, z] = (rng.random((NY, NX)) * amp).astype("<i2")
    os.replace(tmp, path)


_LAYOUTS: dict[Path, tuple[np.ndarray[Any, Any], ...]] = {}


def _layout(path: Path) -> tuple[np.ndarray[Any, Any], ...]:
    """The template's chunks from h5py's chunk index: (z, y, x keys, offsets, lengths, filter
    masks) in file order."""
    if path not in _LAYOUTS:
        import h5py

        rows: list[tuple[int, ...]] = []
        with h5py.File(path, "r") as f:
            f["temp"].id.chunk_iter(lambda c: rows.append((*c.chunk_offset, c.byte_offset, c.size, c.filter_mask)))
        a = np.array(rows, np.int64)
        if len(a) != PER_DAY:
            raise RuntimeError(f"{path}: {len(a)} chunks, expected {PER_DAY}")
        _LAYOUTS[path] = (a[:, 1] // CHUNK[1], a[:, 2] // CHUNK[2], a[:, 3] // CHUNK[3], a[:, 4], a[:, 5], a[:, 6])
    return _LAYOUTS[path]


def template(work: Path, seed: int) -> Path:
    """The cached template of layout ``seed`` under ``work`` (written once)."""
    path = work / f"template-{seed}.h5"
    if not path.exists():
        write_template(path, seed)
    return path


def link_day(root: Path, day: int, tmpl: Path) -> Path:
    """The day's source: a hard link of ``tmpl`` (replacing what was there)."""
    loc = root / f"ocean_temp_{day:05d}.nc"
    tmp = loc.with_suffix(".lnk")
    tmp.unlink(missing_ok=True)
    os.link(tmpl, tmp)
    os.replace(tmp, loc)
    return loc


def _day_result(root: str, day: int, *, seed: int = 0) -> Any:
    """One daily file as a scanner returns it: temp (4-D, shuffle+zlib chunks at the template's
    offsets and lengths) and its Time coordinate (inline). ``root/ocean_temp_DDDDD.nc`` must be a
    link of template ``seed`` (``link_day``)."""
    import pyarrow as pa

    from refstore._keys import MAX_DIMS, NO_DIM, SOURCE_KEY_COLUMNS
    from refstore.scan._types import CHUNK_BATCH_SCHEMA, ArrayMeta, ScanResult, SourceInfo

    loc = f"{root}/ocean_temp_{day:05d}.nc"
    st = os.stat(loc)
    z, y, x, offsets, lengths, masks = _layout(Path(root).parent / f"template-{seed}.h5")
    n = PER_DAY
    keys = np.full((n + 1, MAX_DIMS), NO_DIM, np.int32)
    keys[:n, 0] = 0
    keys[:n, 1], keys[:n, 2], keys[:n, 3] = z, y, x
    keys[n, 0] = 0
    cols: dict[str, Any] = {"array": pa.array(["temp"] * n + ["Time"], pa.string())}
    for i, c in enumerate(SOURCE_KEY_COLUMNS):
        cols[c] = pa.array(keys[:, i])
    cols["offset"] = pa.array([*offsets.tolist(), None], pa.int64())
    cols["length"] = pa.array([*lengths.tolist(), None], pa.int64())
    cols["filter_mask"] = pa.array(np.concatenate([masks, [0]]).astype(np.int32))
    t_value = np.array([TEMPLATE_TIME], "<f8").tobytes()
    cols["inline"] = pa.array([None] * n + [t_value], pa.large_binary())
    table = pa.table(cols, schema=CHUNK_BATCH_SCHEMA)
    units = {"type": "str", "value": "days since 2010-01-01 00:00:00"}
    temp = ArrayMeta(
        name="temp", dims=("Time", "st_ocean", "yt_ocean", "xt_ocean"), shape=(1, DEPTHS, NY, NX), chunks=CHUNK,
        dtype="<i2", fill_value=-32768, codecs=({"id": "shuffle", "elementsize": 2}, {"id": "zlib", "level": 4}),
        attrs={},
    )  # fmt: skip
    time_a = ArrayMeta(name="Time", dims=("Time",), shape=(1,), chunks=(1,), dtype="<f8", fill_value=None,
                       attrs={"units": units})  # fmt: skip
    return ScanResult(
        source=SourceInfo(location=loc, size=st.st_size, mtime_ns=st.st_mtime_ns, etag=None),
        arrays=(temp, time_a), refs=table, sort_value=EPOCH_2010 + day * DAY_S,
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
def _root(out: Path) -> Path:
    """The daily sources of the collection at ``out``: hard links in ``out/../days``."""
    return out.parent / "days"


def phase_build(out: Path, refs: int) -> dict[str, Any]:
    import refstore

    root = _root(out)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    tmpl = template(out.parent, 0)
    template(out.parent, 1)  # the reprocessed day's layout, written before anything is timed
    col = refstore.init(str(out))
    n_days = max(2, -(-refs // PER_DAY))
    per_batch = 20 if n_days <= 1000 else 100  # a batch's rows are in memory until its commit
    t0 = time.perf_counter()
    commits: list[float] = []
    with RssSampler(every=1.0) as rss:
        for start in range(0, n_days, per_batch):
            t1 = time.perf_counter()
            days = list(range(start, min(n_days, start + per_batch)))
            for d in days:
                link_day(root, d, tmpl)
            _commit_days(col, days, str(root))
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


def _child(*args: str, timeout: float | None = None) -> dict[str, Any]:
    try:
        r = subprocess.run([sys.executable, "-m", "bench.scale", *args], capture_output=True, text=True, check=False,
                           timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"stopped at the time cap of {timeout:.0f} s") from None
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
    root = _root(out)
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
    res.update(measure_box(col, surface, column))

    # upsert of one day: the file of a day in the middle is reprocessed (new byte ranges)
    for seed in (0, 1):  # the bench's own rows from the templates' chunk index: not timed
        _layout(template(out.parent, seed))
    day = n_days // 2
    before_v, before_size = snap.version, _du(out)
    t0 = time.perf_counter()
    link_day(root, day, template(out.parent, 1))  # the file is replaced by its reprocessed version
    rep = _commit_days(col, [day], str(root), seed=1, bulk=False)
    res["upsert_day_s"] = time.perf_counter() - t0
    res["upsert_day_rows"] = rep.updated + rep.inserted
    res["upsert_growth_bytes"] = _du(out) - before_size
    res["upsert_growth_per_row"] = res["upsert_growth_bytes"] / max(1, res["upsert_day_rows"])

    # upsert of one new day (the next file of the archive)
    before_size = _du(out)
    t0 = time.perf_counter()
    link_day(root, n_days, template(out.parent, 0))
    rep = _commit_days(col, [n_days], str(root), bulk=False)
    res["new_day_s"] = time.perf_counter() - t0
    res["new_day_rows"] = rep.inserted
    res["new_day_growth_per_row"] = (_du(out) - before_size) / max(1, rep.inserted)

    # diff of the two versions (fast path through Lance's per-row versions)
    t0 = time.perf_counter()
    d = diff(col, before_v)
    res["diff_s"] = time.perf_counter() - t0
    res["diff_changed"] = d.arrays["temp"]["changed"]
    res.update(measure_commits(col, t_lo, str(root)))
    res["versions"] = col.latest_version
    return res


def _brute_box(ds: Any, ranges: list[tuple[int, int]]) -> set[tuple[Any, ...]]:
    """The chunk rows of ``temp`` in the box by a numpy filter over every row of the table, read
    batch by batch (memory bounded by a batch): the oracle of the box queries."""
    keys = [f"g{i}" for i in range(len(ranges))]
    out: set[tuple[Any, ...]] = set()
    for b in ds.to_batches(columns=["kind", "array", "source", "offset", "length", *keys], batch_size=1 << 20):
        keep = (b.column("kind").to_numpy(zero_copy_only=False) == "chunk") & (
            b.column("array").to_numpy(zero_copy_only=False) == "temp"
        )
        for k, (lo, hi) in zip(keys, ranges, strict=True):
            g = b.column(k).to_numpy()
            keep &= (g >= lo) & (g <= hi)
        if keep.any():
            t = b.filter(keep)
            out |= set(zip(*(t.column(c).to_pylist() for c in ("source", "offset", "length")), strict=True))
    return out


def measure_box(col: Any, surface: list[tuple[int, int]], column: list[tuple[int, int]]) -> dict[str, Any]:
    """The box through ``Snapshot.chunk_rows`` (asked by the sources whose slabs meet it,
    ``table/_spans.py``): its first call on a snapshot (which reads the var rows) and the median
    after, each answer checked against a brute-force numpy filter of the whole table."""
    cols = ("source", "offset", "length")
    out: dict[str, Any] = {}
    for label, ranges in (("surface", surface), ("column", column)):
        snap = col.snapshot()
        t0 = time.perf_counter()
        got = snap.chunk_rows("temp", ranges, cols)
        out[f"box_{label}_spans_first_ms"] = 1000 * (time.perf_counter() - t0)
        out[f"box_{label}_spans_ms"] = 1000 * _median(lambda s=snap, r=ranges: s.chunk_rows("temp", r, cols))
        rows = set(zip(*(got.column(c).to_pylist() for c in cols), strict=True))
        out[f"box_{label}_spans_same"] = rows == _brute_box(snap.ds, ranges) and len(rows) == got.num_rows
    return out


def measure_commits(col: Any, t_lo: int, root: str) -> dict[str, Any]:
    """hold / release of a 30-day x surface x 5x5-tile box (750 chunks), remap add / remove:
    each one version whose commit cost should be that of the change, not of the table."""
    from refstore.table import HoldSelection, hold, release
    from refstore.table.remap import add_rule, remove_rule

    sel = HoldSelection(arrays=("temp",), window=(slice(t_lo, t_lo + 30), 0, slice(600, 1100), slice(1440, 2040)))
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    rep = hold(col, sel)  # the templates' real bytes
    out["hold_s"], out["hold_chunks"], out["hold_bytes"] = time.perf_counter() - t0, rep.chunks, rep.bytes
    t0 = time.perf_counter()
    out["release_chunks"] = release(col, sel).chunks
    out["release_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    add_rule(col, root + "/", "https://example.org/bran2020/")
    out["remap_add_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    remove_rule(col, root + "/")
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


def measure_verify(out: Path, sample: int = 1000) -> dict[str, Any]:
    """``refstore verify --sample N --json`` on the command line (h5py reads the templates),
    the RSS of its process sampled."""
    from bench._proc import run_tree

    cmd = [sys.executable, "-m", "refstore.cli.app", "-C", str(out), "verify", "--sample", str(sample), "--json"]
    r = run_tree(cmd)
    if r["rc"] not in (0, 1):
        return {"verify": f"failed: {r['stderr'].strip().splitlines()[-1:]}"}
    rep = json.loads(r["stdout"])
    return {"verify_s": r["wall_s"], "verify_peak_mb": r["peak_tree_mb"], "checked": rep["checked"],
            "mismatched": rep["mismatched"], "rc": r["rc"]}  # fmt: skip


def again(work: Path) -> dict[str, Any]:
    """The commits, diff and verify measured again on the collection a full run left in
    ``work`` (after a change to the code; no rebuild): one new day after the last, one day in
    the middle reprocessed (its link switched to the other template), the diff of the two
    versions, ``verify --sample 1000``."""
    import refstore
    from refstore.table import diff

    out, root = work / "bran", _root(work / "bran")
    col = refstore.Collection.open(str(out))
    days = sorted(int(p.stem.rsplit("_", 1)[1]) for p in root.glob("ocean_temp_*.nc"))
    res: dict[str, Any] = {"refs": col.snapshot().count("chunk"), "sources": len(days)}
    before = col.latest_version
    for s in (0, 1):  # the bench's own rows from the templates' chunk index: not timed
        _layout(template(work, s))
    new_day = days[-1] + 1
    size = _du(out)
    t0 = time.perf_counter()
    link_day(root, new_day, template(work, 0))
    rep = _commit_days(col, [new_day], str(root), bulk=False)
    res["new_day_s"], res["new_day_rows"] = time.perf_counter() - t0, rep.inserted
    res["new_day_growth_per_row"], size = (_du(out) - size) / max(1, rep.inserted), _du(out)
    mid = days[len(days) // 3]
    seed = 0 if os.stat(root / f"ocean_temp_{mid:05d}.nc").st_ino == os.stat(template(work, 1)).st_ino else 1
    t0 = time.perf_counter()
    link_day(root, mid, template(work, seed))
    rep = _commit_days(col, [mid], str(root), seed=seed, bulk=False)
    res["upsert_day_s"], res["upsert_day_rows"] = time.perf_counter() - t0, rep.updated + rep.inserted
    res["upsert_growth_per_row"] = (_du(out) - size) / max(1, res["upsert_day_rows"])
    t0 = time.perf_counter()
    d = diff(col, before)
    res["diff_s"], res["diff_changed"] = time.perf_counter() - t0, d.arrays["temp"]["changed"]
    t_lo = max(0, len(days) // 2 - 15)
    res.update(measure_box(col, [(t_lo, t_lo + 29), (0, 0), (6, 10), (12, 16)],
                           [(t_lo, t_lo + 29), (0, DEPTHS - 1), (6, 10), (12, 16)]))  # fmt: skip
    res.update(measure_verify(out))
    return res


# --------------------------------------------------------------------------- main
def _peer(fmt: str) -> bool:
    from refstore.emit import FORMATS

    mod = FORMATS.get(fmt)
    return mod is not None and importlib.util.find_spec("refstore.emit" + mod) is not None


def run(refs: int, work: Path, *, formats: tuple[str, ...] = ("kerchunk-parquet", "parquet", "icechunk"),
        remote: bool = True, cap: float | None = None) -> dict[str, Any]:  # fmt: skip
    out = work / "bran"
    shutil.rmtree(out, ignore_errors=True)
    build = _child("--phase", "build", "--out", str(out), "--refs", str(refs))
    _log(f"build: {build}")
    res: dict[str, Any] = {"target_refs": refs, "build": build}
    with RssSampler() as rss:
        res["table"] = measure_table(out, int(build["days"]))
    res["table"].update(rss.report())
    _log(f"table: {res['table']}")
    res["verify"] = measure_verify(out)
    _log(f"verify: {res['verify']}")
    emits: dict[str, Any] = {}
    for fmt in formats:
        if not _peer(fmt):
            emits[fmt] = "not available"
            continue
        dest = work / f"emit-{fmt}"
        try:
            r = _child("--phase", "emit", "--out", str(out), "--format", fmt, "--dest", str(dest), timeout=cap)
        except RuntimeError as e:
            emits[fmt] = f"failed: {e}"
            _log(f"emit {fmt}: {emits[fmt]}")
            shutil.rmtree(dest, ignore_errors=True) if dest.is_dir() else dest.unlink(missing_ok=True)
            continue
        r["bytes_per_ref"] = r["bytes"] / max(1, r["refs"])
        emits[fmt] = r
        _log(f"emit {fmt}: {r}")
        shutil.rmtree(dest, ignore_errors=True) if dest.is_dir() else dest.unlink(missing_ok=True)
    res["emit"] = emits
    res["remote"] = measure_remote(work) if remote else {"remote": "not measured (--no-remote)"}
    return res


def _log(msg: str) -> None:
    """Progress of a long run on stderr (the report goes to stdout at the end)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _print_verify(v: dict[str, Any]) -> None:
    """The ``verify --sample 1000`` line of a full run or of ``--again``."""
    if "verify_s" in v:
        print(f"verify --sample 1000: {v['verify_s']:.1f} s ({v['verify_s'] / 30:.2f}x the 30 s limit), "
              f"{v['checked']} checked, {v['mismatched']} mismatched, "
              f"peak RSS {v['verify_peak_mb']:.0f} MB")  # fmt: skip
    else:
        print(f"verify: {v['verify']}")


def _print_box(t: dict[str, Any]) -> None:
    for label in ("surface", "column"):
        same = "the same rows as a numpy filter of the table" if t[f"box_{label}_spans_same"] else "ROWS DIFFER"
        print(f"  {label} box asked by its sources (Snapshot.chunk_rows): {t[f'box_{label}_spans_ms']:.1f} ms "
              f"({t[f'box_{label}_spans_ms'] / 50:.2f}x the 50 ms limit; first call on a snapshot "
              f"{t[f'box_{label}_spans_first_ms']:.1f} ms); {same}")  # fmt: skip


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
                  f"emit {e['emit_s']:.1f} s, peak RSS {e['sampled_peak_mb']:.0f} MB sampled "
                  f"({e['sampled_peak_mb'] / limit:.2f}x the {limit / 1024:g} GB limit; the child's "
                  f"ru_maxrss {e['peak_rss_mb']:.0f} MB keeps the forking parent's)")  # fmt: skip
        else:
            print(f"  {fmt}: {e}")
    print(f"bbox+time box (30 days x surface x 5x5 tiles, {t['box_rows']} chunks): {t['box_surface_ms']:.1f} ms "
          f"with scalar indices ({t['box_surface_ms'] / 50:.2f}x the 50 ms limit), "
          f"{t['box_surface_noindex_ms']:.1f} ms without")  # fmt: skip
    print(f"  x all {DEPTHS} depths ({t['box_column_rows']:,} chunks): {t['box_column_ms']:.1f} ms, "
          f"{t['box_column_noindex_ms']:.1f} ms without")  # fmt: skip
    _print_box(t)
    print(f"upsert of one reprocessed day: {t['upsert_day_s']:.2f} s ({t['upsert_day_s']:.2f}x the 1 s limit) for "
          f"{t['upsert_day_rows']:,} rows; disk +{t['upsert_growth_bytes']:,} bytes "
          f"({t['upsert_growth_per_row']:.2f} B per changed row)")  # fmt: skip
    print(f"upsert of one new day: {t['new_day_s']:.2f} s ({t['new_day_s']:.2f}x the 1 s limit) for "
          f"{t['new_day_rows']:,} rows; {t['new_day_growth_per_row']:.2f} B per new row")  # fmt: skip
    print(f"diff of the two versions: {t['diff_s']:.2f} s ({t['diff_s'] / 2:.2f}x the 2 s limit), "
          f"{t['diff_changed']:,} changed")  # fmt: skip
    print(f"hold of {t['hold_chunks']} chunks ({t['hold_bytes'] / 1e6:.0f} MB read from the sources): "
          f"{t['hold_s']:.2f} s "
          f"({t['hold_s'] / 0.5:.2f}x the 0.5 s limit); release {t['release_s']:.2f} s ({t['release_s'] / 0.5:.2f}x); "
          f"remap add {t['remap_add_s']:.2f} s ({t['remap_add_s'] / 0.5:.2f}x), remove {t['remap_remove_s']:.2f} s "
          f"({t['remap_remove_s'] / 0.5:.2f}x)")  # fmt: skip
    _print_verify(res["verify"])
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
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="work folder, kept (the templates are reused); default: a temporary one, removed",
    )
    ap.add_argument("--emit", default="kerchunk-parquet,parquet,icechunk", help="forms to emit ('' for none)")
    ap.add_argument("--emit-cap", type=float, default=None, help="seconds after which an emit is stopped")
    ap.add_argument("--no-remote", action="store_true", help="skip the loopback S3 reads")
    ap.add_argument(
        "--again",
        action="store_true",
        help="measure commits, diff and verify again on the collection left in --dir (no rebuild)",
    )
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
    if a.again:
        if a.dir is None:
            ap.error("--again needs the --dir of an earlier run")
        r = again(a.dir)
        if a.json:
            print(json.dumps(r, indent=2))
            return
        print(f"{r['refs']:,} references, {r['sources']:,} daily files")
        print(f"upsert of one new day: {r['new_day_s']:.2f} s ({r['new_day_s']:.2f}x the 1 s limit), "
              f"{r['new_day_rows']:,} rows, {r['new_day_growth_per_row']:.1f} B per row on disk; one reprocessed "
              f"day: {r['upsert_day_s']:.2f} s ({r['upsert_day_s']:.2f}x), {r['upsert_day_rows']:,} rows, "
              f"{r['upsert_growth_per_row']:.1f} B per row")  # fmt: skip
        print(f"diff of the versions before and after: {r['diff_s']:.2f} s ({r['diff_s'] / 2:.2f}x the 2 s limit), "
              f"{r['diff_changed']:,} changed")  # fmt: skip
        _print_box(r)
        _print_verify(r)
        return
    refs = 10 * PER_DAY if a.quick else a.refs
    work = a.dir or Path(tempfile.mkdtemp(prefix="refstore-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        res = run(refs, work, formats=tuple(f for f in a.emit.split(",") if f), remote=not a.no_remote, cap=a.emit_cap)
    finally:
        if a.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        _report(res)


if __name__ == "__main__":
    main()

"""Adversarial campaign for the incremental scan commit (``plan/append.py``, ``table/_append.py``).

Random small netCDF4 / netCDF3 series (1-4 variables along ``time``, some without it; 1-3
records per file; chunk lengths 1-4 along time that need not divide a file's length; packing
changing at a random file; a variable missing from some files or appearing late; ``_FillValue``
or not; files reprocessed in place; ``--prefer`` duplicates; ``--prune`` of a deleted file) are
committed in random batches. After every commit:

(a) the collection scanned step by step with the append path equals, row for row, the same steps
    with the append path off, and a fresh scan of the same files into a new collection (every
    row of every kind; only versions, row ids, the head id and the sources' arrival ``order``
    ignored);
(b) ``refstore.open`` reads every array equal to numpy concatenations of netCDF4-python's raw
    reads of the placed files (dtype exact; sources lacking an array read as its fill value).

    python -m bench.appendfuzz --n 200 --seed 0 [--keep DIR] [--json]
    python -m bench.appendfuzz --plan --n 100000 --seed 0   # extend_plan vs make_plan alone, in memory

Not in CI (``tests/test_append_fuzz.py`` runs a few fixed seeds). A failure prints the seed, the
step and the difference; ``--seed S --n 1`` replays it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa

import refstore
from refstore._netcdf4 import import_netcdf4
from refstore.table import _append

DIM = "time"
SLOT = 5  # time steps between file starts: a rewrite may grow a file to 5 records without overlap
PRELIM = "_preliminary"
DTYPES = ("<i2", "<i4", "<f4", "<f8", "<u1")


@dataclass
class Var:
    """One array of the series: its dtype, trailing shape, chunk length along time (netCDF4),
    compression, fill and where its packing changes, and which files lack it."""

    name: str
    dtype: str
    tail: tuple[int, ...]
    chunk: int
    zlib: bool
    fill: float | None
    scale_at: int | None  # the slot from which scale_factor changes (an era); None: no packing
    packed: bool
    missing: frozenset[int]  # slots lacking it
    since: int  # first slot having it (a variable appearing late)
    contiguous: bool = False  # netCDF4 with a fixed time dimension: not chunked


@dataclass
class Series:
    fmt: str
    unlimited: bool
    vars: list[Var]
    static: bool
    slots: int
    prefer: list[str] | None
    units_at: int | None = None  # the time slot from which time is in hours (an era of ``time``)
    chunk_at: int | None = None  # the time slot from which chunk lengths along time grow by one (an era)
    appendy: bool = False  # mostly appends of single files (the append path's arithmetic, again and again)


@dataclass
class FileState:
    slot: int
    length: int
    seed: int
    chunk_shift: int = 0  # a reprocessed layout: chunk lengths along time + this
    prelim: bool = False
    at: int | None = None  # a reprocessed file moved to another time slot

    @property
    def when(self) -> int:
        """The time slot of its steps."""
        return self.slot if self.at is None else self.at


@dataclass
class Result:
    series: int = 0
    commits: int = 0
    refused: int = 0
    decoded: int = 0  # commits whose decoded values were compared with xarray's
    paths: dict[str, int] = field(default_factory=lambda: {"appended": 0, "replaced": 0, "planned": 0})
    failures: list[dict[str, Any]] = field(default_factory=list)


def random_series(rng: np.random.Generator) -> Series:
    fmt = str(rng.choice(["NETCDF4", "NETCDF4", "NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET"]))
    appendy = bool(rng.random() < 0.3)
    slots = int(rng.integers(4, 9)) + (6 if appendy else 0)
    nvars = int(rng.integers(1, 5))
    rate = float(rng.choice([0.0, 0.5, 1.0]))  # how adversarial: plain series reach the append path
    out = []
    for i in range(nvars):
        dtype = str(rng.choice(DTYPES))
        if fmt != "NETCDF4" and dtype == "<u1":
            dtype = "<i2"  # netCDF3 classic has no unsigned bytes
        tail = [(3,), (2, 2), ()][int(rng.integers(0, 3))]
        kind = rng.random() / rate if rate else 1.0
        missing: set[int] = set()
        since = 0
        if kind < 0.08:
            missing = set(range(int(rng.integers(1, 3))))  # a hole at the start
        elif kind < 0.16:
            a = int(rng.integers(1, slots - 1))
            missing = set(range(a, min(slots, a + int(rng.integers(1, 3)))))  # in the middle / at the end
        elif kind < 0.22:
            since = int(rng.integers(1, slots))  # appears late
        out.append(
            Var(
                name=f"v{i}",
                dtype=dtype,
                tail=tail,
                chunk=int(rng.integers(1, 5)),
                zlib=bool(rng.random() < 0.5),
                fill=None if rng.random() < 0.5 else float(rng.integers(-9, 0) if dtype[1] != "u" else 255),
                packed=bool(rng.random() < 0.4),
                scale_at=int(rng.integers(1, slots)) if rng.random() < 0.25 * rate else None,
                missing=frozenset(missing),
                since=since,
                contiguous=bool(rng.random() < 0.3),
            )
        )
    prefer = None
    r = rng.random()
    if r < 0.3:
        prefer = [f"!*{PRELIM}*"]
    elif r < 0.4:
        prefer = ["newest"]
    units_at = int(rng.integers(1, slots)) if rng.random() < 0.15 * rate else None
    chunk_at = int(rng.integers(1, slots)) if rng.random() < 0.15 * rate else None
    unlimited, static = bool(rng.random() < 0.75), bool(rng.random() < 0.5)
    return Series(fmt, unlimited, out, static, slots, prefer, units_at, chunk_at, appendy)


def _values(v: Var, t0: int, n: int, seed: int) -> np.ndarray[Any, Any]:
    shape = (n, *v.tail)
    size = int(np.prod(shape))
    base = (np.arange(size).reshape(shape) % 50) + 3 * (t0 % 17) + 7 * seed + int(v.name[1:])
    return base.astype(v.dtype)


def write_file(path: Path, s: Series, f: FileState, mtime: int) -> None:
    """The file of ``f`` (its slot's time steps, its seed's values), its mtime set to ``mtime``."""
    nc4 = import_netcdf4()
    t0 = f.when * SLOT
    hours = s.units_at is not None and f.when >= s.units_at
    path.unlink(missing_ok=True)
    with nc4.Dataset(path, "w", format=s.fmt) as ds:
        ds.createDimension(DIM, None if s.unlimited else f.length)
        ds.createDimension("x", 3)
        ds.createDimension("y", 2)
        ds.createDimension("z", 2)
        t = ds.createVariable(DIM, "f8", (DIM,))
        t.units = "hours since 2000-01-01" if hours else "days since 2000-01-01"
        t[:] = np.arange(t0, t0 + f.length, dtype="f8") * (24 if hours else 1)
        if s.static:
            lat = ds.createVariable("x", "f4", ("x",))
            lat[:] = np.array([1.5, 2.5, 3.5], "f4")
        for v in s.vars:
            if f.when in v.missing or f.when < v.since:
                continue
            dims = (DIM, *{(3,): ("x",), (2, 2): ("y", "z"), (): ()}[v.tail])
            kw: dict[str, Any] = {}
            if s.fmt == "NETCDF4" and v.contiguous and not s.unlimited:
                kw["contiguous"] = True
            elif s.fmt == "NETCDF4":
                c = max(1, v.chunk + f.chunk_shift + int(s.chunk_at is not None and f.when >= s.chunk_at))
                kw["chunksizes"] = (c if s.unlimited else min(c, f.length), *v.tail)
                kw["zlib"] = v.zlib
            fill = None if v.fill is None else np.array(v.fill).astype(v.dtype)
            var = ds.createVariable(v.name, np.dtype(v.dtype), dims, fill_value=fill, **kw)
            var.set_auto_maskandscale(False)
            if v.packed:
                var.scale_factor = np.float32(0.25 if v.scale_at is not None and f.when >= v.scale_at else 0.5)
                var.add_offset = np.float32(1.0)
            var[:] = _values(v, t0, f.length, f.seed)
    os.utime(path, ns=(mtime, mtime))


def oracle_fill(paths: list[Path], name: str, dtype: np.dtype[Any]) -> Any:
    """The fill value a source lacking ``name`` reads as: the ``_FillValue`` netCDF4-python gives
    the variable in the files having it, else netCDF's default fill for its type."""
    nc4 = import_netcdf4()
    for p in paths:
        with nc4.Dataset(p) as ds:
            if name in ds.variables:
                v = ds.variables[name]
                if "_FillValue" in v.ncattrs():
                    return v.getncattr("_FillValue")
    return nc4.default_fillvals[dtype.str[1:]]


def oracle_read(paths: list[Path], name: str) -> np.ndarray[Any, Any] | None:
    """netCDF4-python's raw reads of ``name`` concatenated along time over ``paths`` (in time
    order), or taken once from the first file having it; files lacking it give its fill value."""
    nc4 = import_netcdf4()
    parts: list[np.ndarray[Any, Any] | int] = []
    dtype = None
    for p in paths:
        with nc4.Dataset(p) as ds:
            ds.set_auto_maskandscale(False)
            ds.set_always_mask(False)
            n = ds.dimensions[DIM].size
            if name not in ds.variables:
                parts.append(n)
                continue
            v = ds.variables[name]
            a = np.asarray(v[...])
            if DIM not in v.dimensions:
                return a
            dtype = a.dtype
            parts.append(a)
    if dtype is None:
        return None
    shape = next(p.shape[1:] for p in parts if isinstance(p, np.ndarray))
    fill = np.array(oracle_fill(paths, name, dtype)).astype(dtype)
    return np.concatenate([p if isinstance(p, np.ndarray) else np.full((p, *shape), fill, dtype) for p in parts])


def table_rows(uri: str, *, drop_order: bool) -> pa.Table:
    """Every row of the latest version but the held bytes, canonically sorted; the collection
    row without its head id; ``drop_order``: the sources' arrival ``order`` left out (a fresh
    scan numbers them by name, an incremental one by arrival)."""
    ds = lance.dataset(uri)
    t = ds.to_table(columns=[f.name for f in ds.schema if f.name != "held"])
    meta = t.column("meta").to_pylist()
    for i, k in enumerate(t.column("kind").to_pylist()):
        if k == "collection":
            m = json.loads(meta[i])
            m.pop("head")
            meta[i] = json.dumps(m, sort_keys=True)
        elif k == "source" and drop_order:
            m = json.loads(meta[i] or "{}")
            m.pop("order", None)
            meta[i] = json.dumps(m, sort_keys=True)
    t = t.set_column(t.schema.get_field_index("meta"), "meta", pa.array(meta, pa.string()))
    keys = ["kind", "array", "source", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"]
    return t.sort_by([(k, "ascending") for k in keys])


def diff_rows(a: pa.Table, b: pa.Table) -> str | None:
    """None when equal, else the first difference in words."""
    if a.num_rows != b.num_rows:
        ka = {(r["kind"], r["array"], r["source"]) for r in a.select(["kind", "array", "source"]).to_pylist()}
        kb = {(r["kind"], r["array"], r["source"]) for r in b.select(["kind", "array", "source"]).to_pylist()}
        return f"rows {a.num_rows} != {b.num_rows}; only in first {sorted(ka - kb)[:4]}, second {sorted(kb - ka)[:4]}"
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        same = (
            np.array_equal(x.to_numpy(), y.to_numpy(), equal_nan=True) if pa.types.is_floating(x.type) else x.equals(y)
        )
        if not same:
            xs, ys = x.to_pylist(), y.to_pylist()
            i = next(i for i in range(len(xs)) if xs[i] != ys[i] and not (xs[i] != xs[i] and ys[i] != ys[i]))
            row = {c: a.column(c)[i].as_py() for c in ("kind", "array", "source", "k0", "k1")}
            return f"column {name} at {row}: {xs[i]!r} != {ys[i]!r}"
    return None


def _scan(uri: str, folder: Path, *, enabled: bool, **kw: Any) -> tuple[Any, str | None, dict[str, int]]:
    before = dict(_append.STATS)
    old = _append.ENABLED
    _append.ENABLED = enabled
    try:
        rep = refstore.scan(uri, [str(folder)], **{"concat_dim": DIM, "workers": 1, "timeout": None, **kw})
        err = None
    except refstore.RefstoreError as e:
        rep, err = None, f"{type(e).__name__}: {e}"
    finally:
        _append.ENABLED = old
    return rep, err, {k: _append.STATS[k] - before[k] for k in before}


class Run:
    """One series: its files on disk, the fast (append path) and full (append path off)
    collections scanned step by step, and the checks after each step."""

    def __init__(self, seed: int, root: Path, *, decoded: bool = True) -> None:
        self.seed = seed
        self.decoded = decoded
        self.options = np.random.default_rng(seed + 10**9)  # the scans' options (apart: seeds keep their series)
        self.rng = np.random.default_rng(seed)
        self.s = random_series(self.rng)
        self.root = root
        self.folder = root / "data"
        self.folder.mkdir(parents=True)
        self.files: dict[str, FileState] = {}
        self.clock = 1_700_000_000 * 10**9
        self.fast, self.full = str(root / "fast"), str(root / "full")
        refstore.init(self.fast)
        refstore.init(self.full)
        self.step = 0
        self.log: list[str] = []
        self.prefer_given = False

    def path(self, f: FileState) -> Path:
        return self.folder / f"f{f.slot:03d}{PRELIM if f.prelim else ''}.nc"

    def write(self, f: FileState) -> None:
        self.clock += 10**9
        write_file(self.path(f), self.s, f, self.clock)
        self.files[self.path(f).name] = f

    def new_file(self, slot: int, prelim: bool = False) -> FileState:
        f = FileState(slot, int(self.rng.integers(1, 4)), int(self.rng.integers(0, 5)), prelim=prelim)
        self.write(f)
        return f

    def placed(self) -> list[Path]:
        """The files the series places, in time order (the preferred one of each duplicate)."""
        by: dict[int, list[FileState]] = {}
        for f in self.files.values():
            by.setdefault(f.when, []).append(f)
        out = []
        for slot in sorted(by):
            fs = by[slot]
            if len(fs) > 1:
                rule = (self.s.prefer or [""])[0]
                if rule == "newest":
                    fs = [max(fs, key=lambda f: self.path(f).stat().st_mtime_ns)]
                else:
                    fs = [f for f in fs if not f.prelim]
            out.append(self.path(fs[0]))
        return out

    def commit(self, what: str, **kw: Any) -> str | None:
        """Scan both collections and a fresh one; the difference found, or None."""
        self.step += 1
        self.log.append(what)
        if self.s.prefer is not None and (not self.prefer_given or self.options.random() < 0.2):
            kw["prefer"] = self.s.prefer  # the recorded rules given again: still the append path
            self.prefer_given = True
        if self.step > 1 and self.options.random() < 0.3:
            kw["concat_dim"] = None  # the recorded one, as `refstore scan FOLDER` on the next day
        fast, ferr, took = _scan(self.fast, self.folder, enabled=True, **kw)
        full, uerr, _ = _scan(self.full, self.folder, enabled=False, **kw)
        for k, n in took.items():
            RESULT.paths[k] += n
        if (ferr is None) != (uerr is None) or (ferr and ferr != uerr):
            return f"errors differ: fast {ferr!r}, full {uerr!r}"
        if ferr is not None:
            RESULT.refused += 1
            return None
        RESULT.commits += 1
        assert fast is not None and full is not None
        if fast.to_json() != {**full.to_json(), "version": fast.version}:
            return f"reports differ: {fast.to_json()} != {full.to_json()}"
        d = diff_rows(table_rows(self.fast, drop_order=False), table_rows(self.full, drop_order=False))
        if d:
            return f"append path != full plan: {d} (path {took})"
        fresh = str(self.root / f"fresh{self.step}")
        refstore.init(fresh)
        _, err, _ = _scan(fresh, self.folder, enabled=False, prefer=self.s.prefer)
        if err is not None:
            return f"a fresh scan of the same files refuses them: {err}"
        d = diff_rows(table_rows(self.fast, drop_order=True), table_rows(fresh, drop_order=True))
        if d:
            return f"append path != fresh scan: {d} (path {took})"
        shutil.rmtree(fresh)
        return self.check_values()

    def check_values(self) -> str | None:
        ds = refstore.open(self.fast)
        paths = self.placed()
        names = [DIM, *(v.name for v in self.s.vars), *(["x"] if self.s.static else [])]
        for name in names:
            want = oracle_read(paths, name)
            if want is None:
                if name in ds:
                    return f"{name}: in the collection, in no placed file"
                continue
            got = np.asarray(ds[name][...])
            native = want.dtype.newbyteorder("=")
            if got.dtype.newbyteorder("=") != native:  # byte order aside (netCDF3 is big-endian)
                return f"{name}: dtype {got.dtype} != {want.dtype}"
            if got.shape != want.shape or got.astype(native).tobytes() != want.astype(native).tobytes():
                return f"{name}: values differ from netCDF4-python ({got.shape} vs {want.shape})"
        return self.check_decoded(paths)

    def check_decoded(self, paths: list[Path]) -> str | None:
        """Where every placed file has every variable: ``engine="refstore"`` equals xarray's
        ``open_mfdataset(..., combine="nested", concat_dim="time")`` over the files (decoded:
        masked, unpacked, times as dates)."""
        import xarray as xr

        from tests._oracle import assert_same_dataset

        if not self.decoded:
            return None
        names = {v.name for v in self.s.vars}
        nc4 = import_netcdf4()
        for p in paths:
            with nc4.Dataset(p) as ds:
                if not names <= set(ds.variables):
                    return None
        want = xr.open_mfdataset([str(p) for p in paths], combine="nested", concat_dim=DIM, data_vars="minimal",
                                 coords="minimal", compat="override", engine="netcdf4", parallel=False)  # fmt: skip
        try:
            with xr.open_dataset(self.fast, engine="refstore") as got:
                assert_same_dataset(got.load(), want.load(), "engine=refstore")
            RESULT.decoded += 1
        except AssertionError as e:
            return f"decoded values differ from xarray over the files: {str(e)[:300]}"
        finally:
            want.close()
        return None

    def play(self, steps: int) -> str | None:
        """The series' scans: a first scan of a few slots, then random appends, rewrites,
        inserts, duplicates and prunes; the first difference found, or None."""
        rng = self.rng
        slots = list(range(self.s.slots))
        held: set[int] = set()
        if rng.random() < 0.5:  # slots kept back, to be inserted in the middle later
            held = {int(x) for x in rng.choice(slots[1:-1], size=min(2, len(slots) - 2), replace=False)}
        queue = [s for s in slots if s not in held]
        k = int(rng.integers(1, 4))
        for slot in queue[:k]:
            self.new_file(slot)
        queue = queue[k:]
        d = self.commit(f"first scan of {k}")
        for _ in range(steps):
            if d:
                return d
            r = rng.random()
            if self.s.appendy and rng.random() < 0.6:
                r = 0.0
            present = sorted({f.slot for f in self.files.values() if f.at is None})
            if (r < 0.5 and queue) or not present:
                if not queue:
                    return None
                n = 1 if self.s.appendy and rng.random() < 0.7 else int(rng.integers(1, 4))
                for slot in queue[:n]:
                    self.new_file(slot, prelim=bool(self.s.prefer and rng.random() < 0.2))
                queue = queue[n:]
                d = self.commit(f"append {n}")
            elif r < 0.55 and held:
                slot = held.pop()
                self.new_file(slot)
                d = self.commit(f"insert slot {slot}")
            elif r < 0.8:
                name = str(rng.choice(sorted(self.files)))
                f = self.files[name]
                how = int(rng.integers(0, 5))
                if how == 1:
                    f.seed += 1  # other values
                elif how == 2 and self.s.fmt == "NETCDF4":
                    f.chunk_shift = int(rng.integers(-1, 2))  # another layout
                elif how == 3:
                    f.length = int(rng.integers(1, SLOT))  # another size
                elif how == 4 and not f.prelim:
                    f.at = 20 + self.step  # another date, after every slot
                self.write(f)
                d = self.commit(f"rewrite {name} how {how}")
            elif r < 0.9 and self.s.prefer is not None:
                slot = int(rng.choice(present))
                if any(f.slot == slot and f.prelim for f in self.files.values()):
                    continue
                self.new_file(slot, prelim=True)
                self.files[f"f{slot:03d}{PRELIM}.nc"].length = next(
                    f.length for f in self.files.values() if f.slot == slot and not f.prelim
                )
                self.write(self.files[f"f{slot:03d}{PRELIM}.nc"])
                d = self.commit(f"duplicate of slot {slot}")
            elif len(self.files) > 1:
                name = str(rng.choice(sorted(self.files)))
                (self.folder / name).unlink()
                del self.files[name]
                also = ""
                if queue and self.options.random() < 0.4:  # and a new day in the same scan
                    f = FileState(queue.pop(0), int(self.options.integers(1, 4)), int(self.options.integers(0, 5)))
                    self.write(f)
                    also = f" and append slot {f.slot}"
                d = self.commit(f"prune {name}{also}", prune=True)
        return d


RESULT = Result()


def run(
    n: int, seed: int, *, steps: int = 8, keep: Path | None = None, every: int = 10, out: Any = sys.stdout
) -> Result:
    """``n`` series from ``seed`` on; failures are collected in the result (and printed)."""
    for i in range(n):
        s = seed + i
        root = Path(tempfile.mkdtemp(prefix=f"appendfuzz-{s}-", dir=keep))
        r = Run(s, root)
        try:
            d = r.play(steps)
        except Exception:  # a crash is a finding too
            d = "crash: " + traceback.format_exc(limit=6)
        RESULT.series += 1
        if d:
            RESULT.failures.append({"seed": s, "step": r.step, "steps": r.log, "series": repr(r.s), "difference": d})
            print(f"seed {s} step {r.step} {r.log}: {d}", file=out, flush=True)
        elif keep is None:
            shutil.rmtree(root, ignore_errors=True)
        if (i + 1) % every == 0:
            print(f"[{i + 1}/{n}] commits {RESULT.commits} refused {RESULT.refused} decoded {RESULT.decoded} "
                  f"paths {RESULT.paths} "
                  f"failures {len(RESULT.failures)}", file=out, flush=True)
        if keep is None and d:
            print(f"  (kept {root})", file=out, flush=True)
    return RESULT


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--keep", type=Path, default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--every", type=int, default=10, help="a progress line every N series")
    p.add_argument("--plan", action="store_true", help="extend_plan against make_plan alone (no files, no tables)")
    a = p.parse_args(argv)
    t = time.perf_counter()
    if a.plan:
        got = plan_campaign(a.n, a.seed)
        summary = {k: v for k, v in got.items() if k != "failures"}
        summary.update(failures=len(got["failures"]), seconds=round(time.perf_counter() - t, 1))
        print(json.dumps({**summary, "found": got["failures"]} if a.json else summary))
        for f in got["failures"][:20]:
            print(f, file=sys.stderr)
        return 1 if got["failures"] else 0
    res = run(a.n, a.seed, steps=a.steps, keep=a.keep, every=a.every)
    summary = {
        "series": res.series,
        "commits": res.commits,
        "refused": res.refused,
        "decoded": res.decoded,
        "paths": res.paths,
        "failures": len(res.failures),
        "seconds": round(time.perf_counter() - t, 1),
    }
    print(json.dumps({**summary, "found": res.failures} if a.json else summary))
    return 1 if res.failures else 0



def _plan_source(rng: np.random.Generator, i: int, t0: int, n: int, spec: list[dict[str, Any]]) -> Any:
    """A SourceSlab of ``n`` steps from ``t0`` as the table records it (metadata through JSON)."""
    from refstore.plan.concat import SourceSlab
    from refstore.scan._types import ArrayMeta

    arrays = {}
    time = ArrayMeta("time", ("time",), (n,), (1,), "<f8", None)
    arrays["time"] = time
    for a in spec:
        if i in a["missing"] or i < a["since"]:
            continue
        era = sum(1 for e in a["eras"] if i >= e)
        chunk = a["chunk"] + (era if a["era_kind"] == "chunk" else 0)
        scale = {"type": "<f4", "value": [0.5 / (1 + era)], "shape": [1]}
        attrs = {"scale_factor": scale} if a["era_kind"] == "scale" else {}
        bad = i == a["unsupported"]
        dims, shape, chunks = (("time", "x"), (n, 3), (chunk, 3))
        if a["last"]:  # time as the last dimension
            dims, shape, chunks = (("x", "time"), (3, n), (3, chunk))
        arrays[a["name"]] = ArrayMeta(a["name"], dims, shape, chunks, "<i4", 0, attrs=attrs,
                                      status="unsupported" if bad else "ok", reason="nbit" if bad else None)
    lat = 4 if i == spec[0]["lat_differs"] else 3
    arrays["lat"] = ArrayMeta("lat", ("x",), (lat,), (lat,), "<f4", None)
    arrays = {k: ArrayMeta.from_json(m.to_json()) for k, m in arrays.items()}
    return SourceSlab(f"s{i:03d}", i, arrays, float(t0), "days", float(t0 + n - 1), i)


def plan_campaign(n: int, seed: int) -> dict[str, Any]:
    """``extend_plan`` against ``make_plan`` directly (pure, thousands of series a minute):
    random series of sources (chunk lengths 1-4 along time, 1-3 steps each, arrays missing from
    some sources, eras by packing or chunk length), split into recorded and new; where
    ``extend_plan`` answers, its arrays and the new sources' placements, views and keys must be
    ``make_plan``'s over all the sources (and ``make_plan`` must not refuse them)."""
    from refstore.errors import PlanError
    from refstore.plan.append import SeriesEnd, extend_plan
    from refstore.plan.concat import make_plan
    from refstore.plan.series_order import parse_prefer
    from refstore.scan._types import ArrayMeta

    newest = parse_prefer(["newest"])  # duplicates (the same start) set aside: the later source placed
    out: dict[str, Any] = {"series": 0, "answered": 0, "fallback": 0, "refused": 0, "failures": []}
    for k in range(n):
        rng = np.random.default_rng(seed + k)
        count = int(rng.integers(2, 9))
        spec = []
        for j in range(int(rng.integers(1, 4))):
            missing = set()
            if rng.random() < 0.4:
                a = int(rng.integers(0, count))
                missing = set(range(a, min(count, a + int(rng.integers(1, 3)))))
            spec.append({"name": f"v{j}", "chunk": int(rng.integers(1, 5)), "missing": missing,
                         "eras": sorted({int(x) for x in rng.integers(1, count, size=int(rng.integers(0, 3)))}),
                         "era_kind": str(rng.choice(["scale", "chunk"])),
                         "since": int(rng.integers(1, count)) if rng.random() < 0.1 else 0,
                         "unsupported": int(rng.integers(0, count)) if rng.random() < 0.05 else -1,
                         "lat_differs": int(rng.integers(1, count)) if rng.random() < 0.05 else -1,
                         "last": bool(rng.random() < 0.1)})  # fmt: skip
        t = 0
        slabs = []
        for i in range(count):
            length = int(rng.integers(1, 4))
            slabs.append(_plan_source(rng, i, t, length, spec))
            gap = int(rng.choice([0, 1, 2, -1], p=[0.7, 0.15, 0.12, 0.03]))  # -1: an overlap
            t += length + (gap if rng.random() < 0.98 else -length)  # -length: the same start (a duplicate)
        cut = int(rng.integers(1, count))
        out["series"] += 1
        try:
            end_plan = make_plan(slabs[:cut], "time", prefer=newest)
        except PlanError:
            continue
        arrays = {a: ArrayMeta.from_json(m.to_json()) for a, m in end_plan.arrays.items()}
        last = next(s for s in slabs if s.location == end_plan.order[-1])
        ext = extend_plan(SeriesEnd(arrays, last), slabs[cut:], "time")
        try:
            full = make_plan(slabs, "time", prefer=newest)
        except PlanError as e:
            out["refused"] += 1
            if ext is not None:
                out["failures"].append({"seed": seed + k, "difference": f"extend_plan answers, make_plan refuses: {e}"})
            continue
        if ext is None:
            out["fallback"] += 1
            continue
        out["answered"] += 1
        diff = None
        if sorted(ext.arrays) != sorted(full.arrays):
            diff = f"arrays {sorted(ext.arrays)} != {sorted(full.arrays)}"
        for name in sorted(full.arrays):
            if diff is None and ext.arrays[name].to_json() != full.arrays[name].to_json():
                diff = f"{name}: {ext.arrays[name].to_json()} != {full.arrays[name].to_json()}"
        for s in slabs[cut:]:
            for what in ("placements", "view", "keys"):
                mine = {k: v for k, v in getattr(ext, what).items() if k[0] == s.location}
                theirs = {k: v for k, v in getattr(full, what).items() if k[0] == s.location}
                if diff is None and mine != theirs:
                    diff = f"{s.location} {what}: {mine} != {theirs}"
        if diff:
            out["failures"].append({"seed": seed + k, "cut": cut, "difference": diff})
    return out


if __name__ == "__main__":
    sys.exit(main())

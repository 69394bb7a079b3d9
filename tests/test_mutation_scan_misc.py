"""The scan package's small modules, each against an independent model: format sniffing against
the format signatures (tests/_oracle.sniff and the GRIB/HDF5 specifications), CF time units
against Python's datetime arithmetic, the result check against a row-by-row model of its rule,
``ArrayMeta``'s JSON form against a round trip and its documented fields, the ranged-read file
against the file's own bytes. In-process and fast: the mutation run's list for ``scan-misc``.
"""

from __future__ import annotations

import hashlib
import io
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pytest

from refstore._keys import MAX_DIMS, NO_DIM, SOURCE_KEY_COLUMNS
from refstore.errors import ScanError
from refstore.scan._cftime import cf_seconds
from refstore.scan._check import check_result, check_results
from refstore.scan._rangefile import RangeFile
from refstore.scan._types import CHUNK_BATCH_SCHEMA, ArrayMeta, ChunkColumns, ScanResult, SourceInfo, chunk_table
from refstore.scan.auto import AutoScanner, sniff, sniff_file

from . import _oracle

if TYPE_CHECKING:
    from pathlib import Path

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- _cftime
@pytest.mark.parametrize(
    ("units", "ref", "scale"),
    [
        ("days since 2000-01-01", datetime(2000, 1, 1, tzinfo=UTC), 86400),
        ("Days Since 2000-1-2", datetime(2000, 1, 2, tzinfo=UTC), 86400),
        ("hours since 1990-06-15 12:30", datetime(1990, 6, 15, 12, 30, tzinfo=UTC), 3600),
        ("hours since 1990-06-15T12:30:45", datetime(1990, 6, 15, 12, 30, 45, tzinfo=UTC), 3600),
        ("minutes since 2020-02-29 23:59:59.5", datetime(2020, 2, 29, 23, 59, 59, 500000, tzinfo=UTC), 60),
        ("seconds since 1970-01-01 00:00:00 UTC", _EPOCH, 1),
        ("s since 1970-01-01Z", _EPOCH, 1),
        ("sec since 1970-01-01 GMT", _EPOCH, 1),
        ("secs since 1970-01-01", _EPOCH, 1),
        ("msec since 1970-01-01", None, 0),
        (
            "milliseconds since 2001-01-01 +05:30",
            datetime(2001, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
            1e-3,
        ),
        ("ms since 2001-01-01 -0800", datetime(2001, 1, 1, tzinfo=timezone(timedelta(hours=-8))), 1e-3),
        ("millisecond since 2001-01-01 +3", datetime(2001, 1, 1, tzinfo=timezone(timedelta(hours=3))), 1e-3),
        ("s since 2001-01-01 +05", datetime(2001, 1, 1, tzinfo=timezone(timedelta(hours=5))), 1),
        ("s since 2001-01-01 +530", datetime(2001, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))), 1),
        ("s since 2001-01-01 -1230", datetime(2001, 1, 1, tzinfo=timezone(-timedelta(hours=12, minutes=30))), 1),
        (
            "microseconds since 2001-01-01 -12:45",
            datetime(2001, 1, 1, tzinfo=timezone(-timedelta(hours=12, minutes=45))),
            1e-6,
        ),
        ("us since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 1e-6),
        ("microsecond since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 1e-6),
        ("min since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 60),
        ("mins since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 60),
        ("minute since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 60),
        ("hr since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 3600),
        ("hrs since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 3600),
        ("h since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 3600),
        ("hour since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 3600),
        ("d since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 86400),
        ("day since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 86400),
        ("week since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 604800),
        ("weeks since 2001-01-01", datetime(2001, 1, 1, tzinfo=UTC), 604800),
        ("second since 0001-01-01", datetime(1, 1, 1, tzinfo=UTC), 1),
        ("  days   since   1850-01-01   ", datetime(1850, 1, 1, tzinfo=UTC), 86400),
        ("fortnights since 2000-01-01", None, 0),
        ("days after 2000-01-01", None, 0),
        ("days since 2000-13-01", None, 0),
        ("days since 2000-01-01 25:00", None, 0),
        ("days since -0001-01-01", None, 0),
        ("days since 2000-01-01 xyz", None, 0),
    ],
)
def test_cf_seconds_against_datetime(units: str, ref: datetime | None, scale: float) -> None:
    for value in (0.0, 1.5, -2.0, 1e4):
        got = cf_seconds(value, units)
        if ref is None:
            assert got is None, units
        else:
            assert got == pytest.approx((ref - _EPOCH).total_seconds() + value * scale, abs=1e-6), (units, value)


def test_cf_seconds_calendars() -> None:
    want = (datetime(2000, 3, 1, tzinfo=UTC) - _EPOCH).total_seconds() + 86400
    for cal in ("standard", "gregorian", "proleptic_gregorian", "", " Standard ", "GREGORIAN"):
        assert cf_seconds(1, "days since 2000-03-01", cal) == want, cal
    assert cf_seconds(1, "days since 2000-03-01") == want
    for cal in ("noleap", "365_day", "360_day", "julian", "all_leap", "none"):
        assert cf_seconds(1, "days since 2000-03-01", cal) is None, cal


# --------------------------------------------------------------------------- sniffing
def _heads() -> list[tuple[bytes, str]]:
    h5 = b"\x89HDF\r\n\x1a\n"
    out = [(h5 + b"\0" * 100, "hdf5"), (b"CDF\x01" + b"\0" * 8, "netcdf3"), (b"CDF\x02", "netcdf3"),
           (b"CDF\x02" + b"\0" * 8, "netcdf3"),
           (b"CDF\x05" + b"\0" * 8, "netcdf3"), (b"CDF\x03" + b"\0" * 8, "unknown"), (b"CDF", "unknown"),
           (b"II*\x00" + b"\0" * 8, "tiff"), (b"MM\x00*" + b"\0" * 8, "tiff"), (b"II+\x00" + b"\0" * 12, "tiff"),
           (b"MM\x00+" + b"\0" * 12, "tiff"), (b"II*\x01" + b"\0" * 8, "unknown"),
           (b"GRIB\0\0\0\x01" + b"\0" * 8, "grib"), (b"GRIB\0\0\0\x02" + b"\0" * 8, "grib"),
           (b"GRIB\0\0\0\x03" + b"\0" * 8, "unknown"), (b"GRIB\0\0\0", "unknown"), (b"", "unknown"),
           (b"\0" * 9000, "unknown")]  # fmt: skip
    for at in (512, 1024, 2048, 4096, 8192):  # a user block before the HDF5 superblock
        out.append((b"\0" * at + h5 + b"\0" * 16, "hdf5"))
    out += [(b"\0" * 513 + h5 + b"\0" * 16, "unknown"), (b"\0" * 16384 + h5, "unknown"),
            (b"\0" * 512 + h5[:7], "unknown")]  # fmt: skip
    return out


def test_sniff_by_the_signatures(tmp_path: Path) -> None:
    for i, (head, want) in enumerate(_heads()):
        assert sniff_file(io.BytesIO(head), "x") == want, (i, head[:10], want)
        p = tmp_path / f"f{i}"
        p.write_bytes(head)
        assert sniff(str(p)) == want, i
        if want in ("hdf5", "netcdf3", "tiff") and len(head) >= 8 and head[:1] != b"\0":
            assert _oracle.sniff(p) == want

    class Broken(io.BytesIO):
        def read(self, *_a: Any) -> bytes:
            raise OSError(5, "Input/output error")

    with pytest.raises(ScanError, match=r"^where: cannot read: Input/output error$"):
        sniff_file(Broken(b""), "where")


def test_auto_scanner_dispatches_by_signature_and_checksums(tmp_path: Path) -> None:
    import h5py

    netCDF4 = _oracle._netcdf4()  # leaves no HDF5_PLUGIN_PATH behind for h5py
    import tifffile

    h5 = tmp_path / "a.tif"  # names lie: the first bytes decide
    with h5py.File(h5, "w") as f:
        t = f.create_dataset("time", data=np.array([5.0]))
        t.make_scale("time")
        f.create_dataset("v", data=np.arange(3))
    nc = tmp_path / "b.h5"
    with netCDF4.Dataset(nc, "w", format="NETCDF3_CLASSIC") as d:
        d.createDimension("time", 1)
        d.createVariable("time", "f8", ("time",))[:] = [7.0]
    tif = tmp_path / "c.nc"
    tifffile.imwrite(tif, np.zeros((4, 4), "u1"), datetime="2020:01:02 00:00:00", metadata=None)
    cases = [(h5, "hdf5", 5.0), (nc, "netcdf3", 7.0), (tif, "tiff", 1577923200.0)]
    try:
        import eccodes  # noqa: F401

        from refstore.fixtures.grib import write_grib

        grib = write_grib(tmp_path / "d.h5", params=("t",), levels=(500,), steps=(0,), ny=3, nx=4)
        cases.append((grib, "grib", 1704067200.0))  # 2024-01-01, the fixture's date
    except ImportError:
        pass
    for path, fmt, sort in cases:
        res = AutoScanner(concat_dim="time")(str(path))
        assert res.format == fmt and res.sort_value == sort, fmt
        assert res.source.checksum is None
        res = AutoScanner(checksum=True)(str(path))
        assert res.source.checksum == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
        assert res.sort_value is None
    named = tmp_path / "x_20210304.tif"
    named.write_bytes(tif.read_bytes())
    assert AutoScanner(concat_dim="t", time_pattern="x_%Y%m%d")(str(named)).sort_value == 1614816000.0
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"hello")
    with pytest.raises(ScanError, match=r"junk\.nc: not a netCDF3, netCDF4/HDF5, TIFF or GRIB file "
                                        r"\(unrecognised signature\)$"):  # fmt: skip
        AutoScanner()(str(junk))


# --------------------------------------------------------------------------- _check
def _result(metas: list[ArrayMeta], rows: list[tuple[str, list[int], int | None, int | None]],
            size: int) -> ScanResult:  # fmt: skip
    cols: dict[str, Any] = {"array": pa.array([r[0] for r in rows], pa.string())}
    for i, c in enumerate(SOURCE_KEY_COLUMNS):
        cols[c] = pa.array([r[1][i] if i < len(r[1]) else NO_DIM for r in rows], pa.int32())
    cols["offset"] = pa.array([r[2] for r in rows], pa.int64())
    cols["length"] = pa.array([r[3] for r in rows], pa.int64())
    cols["filter_mask"] = pa.array([0] * len(rows), pa.int32())
    cols["inline"] = pa.array([None if r[2] is not None else b"x" for r in rows], pa.large_binary())
    return ScanResult(SourceInfo("src", size, 0), tuple(metas), pa.table(cols, schema=CHUNK_BATCH_SCHEMA))


def _model(res: ScanResult) -> list[str]:
    """Row by row: the problems the documented rule names (offset/length inside the file, key
    inside ``ceil(shape/chunks)`` per dimension, NO_DIM past the array's dimensions)."""
    metas = {m.name: m for m in res.arrays}
    bad = []
    for r in res.chunks.to_pylist():
        if r["array"] not in metas:
            bad.append("unknown")
            continue
        if r["offset"] is not None and (
            r["offset"] < 0 or r["length"] < 0 or r["offset"] + r["length"] > res.source.size
        ):
            bad.append("range")
        m = metas[r["array"]]
        for i, c in enumerate(SOURCE_KEY_COLUMNS):
            k = r[c]
            if i < m.ndim:
                n = -(-m.shape[i] // max(m.chunks[i], 1)) if m.shape[i] else 1
                if not 0 <= k < n:
                    bad.append("key")
                    break
            elif k != NO_DIM:
                bad.append("key")
                break
    return bad


def test_check_result_against_a_row_model() -> None:
    a = ArrayMeta("a", ("y", "x"), (10, 7), (4, 3), "<f4", None)
    z = ArrayMeta("z", ("t",), (0,), (5,), "<f4", None)
    s = ArrayMeta("s", (), (), (), "<f4", None)
    rng = random.Random(4)
    for trial in range(300):
        rows: list[tuple[str, list[int], int | None, int | None]] = []
        for _ in range(rng.randint(1, 4)):
            which = rng.choice("azs")
            nd = {"a": 2, "z": 1, "s": 0}[which]
            key = [rng.randint(-1, 3) for _ in range(nd)] + (
                [rng.choice([NO_DIM, NO_DIM, NO_DIM, 0])] if nd < 3 else []
            )
            inline = rng.random() < 0.2
            off = None if inline else rng.randint(-2, 100)
            ln = None if inline else rng.randint(-1, 30)
            rows.append((which, key, off, ln))
        res = _result([a, z, s], rows, 100)
        bad = _model(res)
        if bad:
            with pytest.raises(ScanError) as e:
                check_result(res)
            text = str(e.value)
            assert text.startswith("src: damaged: "), text
            first = "range" if "range" in bad else "key"
            assert ("points at" in text) == (first == "range"), (trial, text, bad)
            n = bad.count(first)
            assert (f"(and {n - 1} more)" in text) == (n > 1), (trial, text, bad)
        else:
            check_result(res)
    check_result(_result([a], [], 100))


def test_check_result_messages() -> None:
    a = ArrayMeta("a", ("y", "x"), (10, 7), (4, 3), "<f4", None)
    res = _result([a], [("a", [0, 0], 90, 11), ("a", [1, 1], 0, 4)], 100)
    with pytest.raises(
        ScanError, match=r"^src: damaged: a chunk of 'a' points at bytes 90-101, past the end \(100 bytes\)$"
    ):
        check_result(res)
    res = _result([a], [("a", [0, 0], -1, 4), ("a", [0, 1], 5, -1)], 100)
    with pytest.raises(
        ScanError, match=r"^src: damaged: a chunk of 'a' points at a negative offset or length \(and 1 more\)$"
    ):
        check_result(res)
    res = _result([a], [("a", [0, 0], 0, 4), ("a", [2, 3], 0, 4)], 100)
    grid = r"^src: damaged: chunk \[2, 3\] of 'a' lies outside its grid of \[3, 3\] chunks \(shape \[10, 7\]\)$"
    with pytest.raises(ScanError, match=grid):
        check_result(res)
    res = _result([a], [("b", [0, 0], 0, 4)], 100)
    with pytest.raises(ScanError, match=r"^src: damaged: chunks recorded for 'b', which is not an array of the file$"):
        check_result(res)
    inline_only = _result([a], [("a", [0, 0], None, None), ("a", [2, 2], None, None)], 0)
    check_result(inline_only)
    # the first bad row is named, wherever it is; a range from byte 0 or of no bytes past the end
    res = _result([a], [("a", [0, 0], 0, 4), ("a", [1, 1], 0, 200)], 100)
    with pytest.raises(ScanError, match=r"points at bytes 0-200, past the end \(100 bytes\)$"):
        check_result(res)
    res = _result([a], [("a", [0, 0], 0, 4), ("a", [1, 1], 101, 0)], 100)
    with pytest.raises(ScanError, match=r"points at bytes 101-101, past the end \(100 bytes\)$"):
        check_result(res)
    ones = ArrayMeta("o", ("x",), (4,), (1,), "<f4", None)  # chunks of one element: a grid of 4
    check_result(_result([ones], [("o", [3], 0, 4)], 100))


def _as_columns(t: pa.Table) -> ChunkColumns:
    rows = t.to_pylist()
    keys = np.array([[r[c] for r in rows] for c in SOURCE_KEY_COLUMNS], np.int32).reshape(MAX_DIMS, len(rows))
    inline = [r["inline"] for r in rows]
    return ChunkColumns([r["array"] for r in rows], keys, np.array([r["offset"] or 0 for r in rows], np.int64),
                        np.array([r["length"] or 0 for r in rows], np.int64),
                        np.array([r["filter_mask"] for r in rows], np.int32),
                        inline if any(x is not None for x in inline) else None)  # fmt: skip


def test_check_results_judges_each_source_of_a_batch_alone() -> None:
    """A batch is checked in one pass, yet each source gets what the row model says of it
    alone: its own first problem, named with its own location and counted within it."""
    a = ArrayMeta("a", ("y", "x"), (10, 7), (4, 3), "<f4", None)
    z = ArrayMeta("z", ("t",), (0,), (5,), "<f4", None)
    b = ArrayMeta("a", ("t",), (9,), (2,), "<f4", None)  # another source's 'a': another grid
    rng = random.Random(7)
    for trial in range(60):
        batch: list[ScanResult] = []
        for n in range(rng.randint(1, 6)):
            metas = rng.choice([[a, z], [b], [a]])
            rows: list[tuple[str, list[int], int | None, int | None]] = []
            for _ in range(rng.choice([0, 1, 3, 5])):
                m = rng.choice([*metas, ArrayMeta("q", ("x",), (3,), (1,), "<f4", None)] if rng.random() < 0.1
                               else metas)  # fmt: skip
                key = [rng.randint(-1, 5) if rng.random() < 0.1 else rng.randint(0, 1) for _ in range(m.ndim)]
                inline = rng.random() < 0.2
                off = None if inline else rng.choice([0, 10, 60, 99, -1])
                ln = None if inline else rng.choice([1, 4, 40, -1])
                rows.append((m.name, key, off, ln))
            r = _result(metas, rows, 100)
            batch.append(ScanResult(SourceInfo(f"src{n}", 100, 0), r.arrays, r.chunks))
        got = check_results(batch)
        assert len(got) == len(batch)
        # the same rows as numpy columns (what the HDF5 scanner hands over), alone and mixed with tables
        as_columns = [ScanResult(r.source, r.arrays, _as_columns(r.chunks)) for r in batch]
        mixed = [c if k % 2 else r for k, (r, c) in enumerate(zip(batch, as_columns, strict=True))]
        for other in (check_results(as_columns), check_results(mixed)):
            assert [(type(e), str(e)) for e in other] == [(type(e), str(e)) for e in got], trial
        for r, e in zip(batch, got, strict=True):
            # ranges are checked first on every row, even one of an array not in the file
            ranges = ["range" for x in r.chunks.to_pylist() if x["offset"] is not None and (
                x["offset"] < 0 or x["length"] < 0 or x["offset"] + x["length"] > r.source.size)]  # fmt: skip
            bad = ranges or [x for x in _model(r) if x != "range"]
            if not bad:
                assert e is None, (trial, e)
                continue
            assert isinstance(e, ScanError) and str(e).startswith(f"{r.source.location}: damaged: "), (trial, e)
            first = "range" if ranges else ("unknown" if "unknown" in bad else "key")
            assert ("points at" in str(e)) == (first == "range"), (trial, e, bad)
            assert ("not an array of the file" in str(e)) == (first == "unknown"), (trial, e, bad)
            if first != "unknown":
                n_bad = bad.count(first)
                assert (f"(and {n_bad - 1} more)" in str(e)) == (n_bad > 1), (trial, e, bad)
    assert check_results([]) == []


def test_check_results_leaves_a_malformed_array_to_its_own_source() -> None:
    """An ``ArrayMeta`` whose shape and chunks disagree in length fails its source as it did
    alone (the error ``zip(strict=True)`` raises), not the batch."""
    a = ArrayMeta("a", ("y", "x"), (10, 7), (4, 3), "<f4", None)
    odd = ArrayMeta("a", ("y", "x"), (10, 7), (4,), "<f4", None)
    good = _result([a], [("a", [0, 0], 0, 4)], 100)
    broken = _result([odd], [("a", [0, 0], 0, 4)], 100)
    got = check_results([good, broken, good])
    assert got[0] is None and got[2] is None
    assert isinstance(got[1], ValueError) and "zip()" in str(got[1])
    with pytest.raises(ValueError, match=r"zip\(\)"):
        check_result(broken)


def test_scan_many_in_process_checks_in_batches_and_keeps_each_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process sources are checked in batches (of 2 here, and when the rows pass the
    limit): results come in the order given, a damaged source fails alone with its own line,
    and a scanner's own failure passes through."""
    from refstore.scan import _parallel

    a = ArrayMeta("a", ("x",), (8,), (2,), "<f4", None)
    made = {
        "ok1": _result([a], [("a", [0], 0, 4)], 100),
        "far": _result([a], [("a", [1], 98, 4)], 100),
        "ok2": _result([a], [("a", [k], 4 * k, 4) for k in range(4)], 100),
        "key": _result([a], [("a", [9], 0, 4), ("a", [0], 0, 4)], 100),
        "ok3": _result([a], [], 100),
    }

    def scanner(location: str) -> ScanResult:
        if location == "boom":
            raise RuntimeError("the format library says no\nsecond line")
        r = made[location]
        return ScanResult(SourceInfo(location, 100, 0), r.arrays, r.chunks)

    monkeypatch.setattr(_parallel, "_CHECK_SOURCES", 2)
    monkeypatch.setattr(_parallel, "_CHECK_ROWS", 4)
    locs = ["ok1", "far", "boom", "ok2", "key", "ok3"]
    ticks: list[int] = []
    got = list(_parallel.scan_many(scanner, locs, workers=1, timeout=None, progress=ticks.append))
    assert [loc for loc, _ in got] == locs and ticks == [1] * len(locs)
    by = dict(got)
    assert all(isinstance(by[k], ScanResult) for k in ("ok1", "ok2", "ok3"))
    assert str(by["far"]) == "far: damaged: a chunk of 'a' points at bytes 98-102, past the end (100 bytes)"
    assert str(by["boom"]) == "boom: damaged: its structure is inconsistent (the format library says no)"
    assert str(by["key"]) == "key: damaged: chunk [9] of 'a' lies outside its grid of [4] chunks (shape [8])"
    # one by one (what a worker process does) gives the same verdicts
    for loc in locs:
        alone = _parallel.scan_one(scanner, loc)
        assert type(alone) is type(by[loc]) and (isinstance(alone, ScanResult) or str(alone) == str(by[loc]))


# --------------------------------------------------------------------------- _types
def test_a_batch_check_that_fails_as_a_whole_checks_each_source_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the one pass over a batch fail (out of memory), each source is checked alone: the
    good one is kept, the damaged one fails with its own line, one that fails alone says why."""
    from refstore.scan import _parallel

    a = ArrayMeta("a", ("x",), (8,), (2,), "<f4", None)
    made = {"ok": _result([a], [("a", [0], 0, 4)], 100), "far": _result([a], [("a", [1], 98, 4)], 100)}
    real = check_results
    calls: list[int] = []

    def short_of_memory(results: list[ScanResult]) -> list[Exception | None]:
        calls.append(len(results))
        if len(results) > 1 or results[0].source.location == "huge":
            raise MemoryError
        return real(results)

    def scanner(location: str) -> ScanResult:
        r = made.get(location, made["ok"])
        return ScanResult(SourceInfo(location, 100, 0), r.arrays, r.chunks)

    monkeypatch.setattr(_parallel, "check_results", short_of_memory)
    got = _parallel.scan_batch(scanner, ["ok", "far", "huge"])
    assert calls == [3, 1, 1, 1]
    assert isinstance(got[0], ScanResult)
    assert str(got[1]) == "far: damaged: a chunk of 'a' points at bytes 98-102, past the end (100 bytes)"
    assert str(got[2]) == "huge: damaged or hostile: describing it needs more memory than there is"


def _columns(rows: list[tuple[str, list[int], int | None, int | None, int, bytes | None]]) -> ChunkColumns:
    n = len(rows)
    keys = np.full((MAX_DIMS, n), NO_DIM, np.int32)
    for i, r in enumerate(rows):
        keys[: len(r[1]), i] = r[1]
    inline = [r[5] for r in rows]
    return ChunkColumns([r[0] for r in rows], keys, np.array([r[2] or 0 for r in rows], np.int64),
                        np.array([r[3] or 0 for r in rows], np.int64), np.array([r[4] for r in rows], np.int32),
                        inline if any(x is not None for x in inline) else None)  # fmt: skip


def _expected(rows: list[tuple[str, list[int], int | None, int | None, int, bytes | None]]) -> pa.Table:
    """The rows as CHUNK_BATCH_SCHEMA says, written out by hand: a null range where bytes are inline."""
    return pa.table(
        {
            "array": [r[0] for r in rows],
            **{c: [r[1][i] if i < len(r[1]) else NO_DIM for r in rows] for i, c in enumerate(SOURCE_KEY_COLUMNS)},
            "offset": [None if r[5] is not None else r[2] for r in rows],
            "length": [None if r[5] is not None else r[3] for r in rows],
            "filter_mask": [r[4] for r in rows],
            "inline": [r[5] for r in rows],
        },
        schema=CHUNK_BATCH_SCHEMA,
    )


def test_chunk_columns_of_a_batch_become_the_rows_of_each_source_in_order() -> None:
    Row = tuple[str, list[int], int | None, int | None, int, bytes | None]
    a: list[Row] = [("t", [0, 1], 10, 4, 0, None), ("t", [1, 1], 14, 4, 2, None)]
    b: list[Row] = [("c", [0], None, None, 0, b"\x01\x02"), ("t", [3, 0, 7], 40, 8, 0, None)]
    c: list[Row] = []
    d: list[Row] = [("x", [5], 99, 1, 1, None)]
    got = chunk_table([_columns(a), _columns(b), _columns(c), _columns(d)])
    assert got.equals(_expected(a + b + d)) and got.schema == CHUNK_BATCH_SCHEMA
    assert _columns(b).table().equals(_expected(b)) and _columns(a).table().column("offset").null_count == 0
    # with sources given as tables (other scanners) the rows are the same
    mixed = chunk_table([_expected(a), _columns(b), CHUNK_BATCH_SCHEMA.empty_table(), _columns(d)])
    assert mixed.equals(_expected(a + b + d))
    assert chunk_table([]).equals(CHUNK_BATCH_SCHEMA.empty_table())
    # a result keeps what it was given; .chunks is always the table
    r = ScanResult(SourceInfo("s", 100, 0), (), _columns(b))
    assert isinstance(r.refs, ChunkColumns) and r.chunks.equals(_expected(b))
    same, other = (ScanResult(SourceInfo("s", 100, 0), (), _columns(x)) for x in (b, a))
    assert r == same and r != other
    with pytest.raises(TypeError, match="CHUNK_BATCH_SCHEMA"):
        ChunkColumns(["a"], np.zeros((MAX_DIMS, 2), np.int32), np.zeros(1, np.int64), np.zeros(1, np.int64),
                     np.zeros(1, np.int32))  # fmt: skip
    with pytest.raises(TypeError, match="CHUNK_BATCH_SCHEMA"):
        ChunkColumns(["a"], np.zeros((MAX_DIMS, 1), np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64),
                     np.zeros(1, np.int32))  # fmt: skip
    # offsets and lengths int64, filter masks int32 (float offsets lose bytes past 2**53)
    good = (np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int32))
    ChunkColumns(["a"], np.zeros((MAX_DIMS, 1), np.int32), *good)
    for i, wrong in ((0, np.float64), (1, np.float64), (2, np.int64), (0, np.int32), (1, np.uint64)):
        cols = [*good]
        cols[i] = cols[i].astype(wrong)
        with pytest.raises(TypeError, match="CHUNK_BATCH_SCHEMA"):
            ChunkColumns(["a"], np.zeros((MAX_DIMS, 1), np.int32), *cols)


def test_array_meta_json_round_trip_and_keys() -> None:
    m = ArrayMeta("v", ("t", "y"), (4, 3), (2, 3), "<i2", 7, ({"id": "zlib", "level": 1},),
                  {"units": {"type": "str", "value": "K"}, "scale_factor": {"type": "<f4", "value": 0.5}},
                  eras=({"index": 0, "axis": 0, "start": 0, "stop": 2, "dtype": "<i4", "chunks": [1, 3], "codecs": [],
                         "fill_value": 3, "attrs": {}},),
                  short_edge=True, holes=((2, 3),), holes_axis=1)  # fmt: skip
    assert ArrayMeta.from_json(m.to_json()) == m
    d = __import__("json").loads(m.to_json())
    assert d["holes"] == {"axis": 1, "ranges": [[2, 3]]} and d["short_edge"] is True and len(d["eras"]) == 1
    plain = ArrayMeta("p", ("x",), (3,), (3,), "<f8", None)
    d = __import__("json").loads(plain.to_json())
    assert "eras" not in d and "holes" not in d and "short_edge" not in d and d["status"] == "ok"
    assert ArrayMeta.from_json(plain.to_json()) == plain
    assert m.ndim == 2 and m.np_dtype == np.dtype("<i2")
    assert m.structure() == ("<i2", (2, 3), '[{"id": "zlib", "level": 1}]', ("t", "y"))
    assert m.era_key()[:4] == m.structure()  # then the fill and the CF encoding attributes, sorted
    assert m.era_key()[4:] == (
        "7",
        '{"scale_factor": {"type": "<f4", "value": 0.5}, "units": {"type": "str", "value": "K"}}',
    )
    assert m.grid() == ("null", "null")
    w = m.with_shape((9, 3), holes=((1, 2),), holes_axis=0)
    assert (w.shape, w.eras, w.holes, w.short_edge, w.codecs) == ((9, 3), (), ((1, 2),), True, m.codecs)
    e = m.era_meta(m.eras[0])
    assert (e.shape, e.chunks, e.dtype, e.fill_value, e.codecs, e.short_edge) == ((2, 3), (1, 3), "<i4", 3, (), True)
    with pytest.raises(TypeError, match=r"^chunk table does not follow CHUNK_BATCH_SCHEMA$"):
        ScanResult(SourceInfo("s", 0, 0), (), pa.table({"a": [1]}))
    deep = ArrayMeta(
        "d", tuple("abcdefghij"[: MAX_DIMS + 1]), (1,) * (MAX_DIMS + 1), (1,) * (MAX_DIMS + 1), "<f4", None
    )
    with pytest.raises(ValueError, match=rf"^d: more than {MAX_DIMS} dimensions$"):
        ScanResult(SourceInfo("s", 0, 0), (deep,), CHUNK_BATCH_SCHEMA.empty_table())
    at_max = ArrayMeta("m", tuple("abcdefghij"[:MAX_DIMS]), (1,) * MAX_DIMS, (1,) * MAX_DIMS, "<f4", None)
    assert ScanResult(SourceInfo("s", 0, 0), (at_max,), CHUNK_BATCH_SCHEMA.empty_table()).arrays == (at_max,)
    ScanResult(SourceInfo("s", 0, 0), (ArrayMeta(**{**_fields(deep), "status": "unsupported"}),),
               CHUNK_BATCH_SCHEMA.empty_table())  # fmt: skip


def _fields(m: ArrayMeta) -> dict[str, Any]:
    return {f: getattr(m, f) for f in ArrayMeta.__slots__}


# --------------------------------------------------------------------------- _rangefile
def test_range_file_reads_equal_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = np.random.default_rng(2).integers(0, 256, 50_000, dtype=np.uint8).tobytes()
    p = tmp_path / "blob.bin"
    p.write_bytes(data)
    url = p.resolve().as_uri()
    rf = RangeFile(url, len(data), block_size=1000, max_blocks=4)
    assert rf.readable() and rf.seekable() and rf.tell() == 0
    rng = random.Random(1)
    for _ in range(200):
        off = rng.randint(-10, len(data) + 10)
        n = rng.randint(0, 5000)
        assert rf.pread(off if off >= 0 else 0, n) == data[max(off, 0) : max(off, 0) + n]
        assert len(rf._blocks) <= max(4, n // 1000 + 2)
    # sequential reads through the io protocol
    rf.seek(0)
    assert rf.read(10) == data[:10] and rf.tell() == 10
    assert rf.seek(5, io.SEEK_CUR) == 15 and rf.read(3) == data[15:18]
    assert rf.seek(-4, io.SEEK_END) == len(data) - 4 and rf.read(100) == data[-4:] and rf.read(5) == b""
    with pytest.raises(OSError, match="negative seek position"):
        rf.seek(-1)
    with pytest.raises(ValueError, match=r"^invalid whence 7$"):
        rf.seek(0, 7)
    buf = io.BufferedReader(RangeFile(url, len(data), block_size=777))
    assert buf.read() == data
    # requests: one per run of missing adjacent blocks; the cache keeps the last max_blocks
    rf = RangeFile(url, len(data), block_size=1000, max_blocks=3)
    rf.pread(0, 2500)
    assert (rf.requests, rf.bytes_fetched) == (1, 3000)
    rf.pread(500, 100)
    assert rf.requests == 1
    rf.pread(10_000, 10)
    assert (rf.requests, sorted(rf._blocks)) == (2, [0, 2, 10])  # block 1 was least recently used
    rf.pread(0, 4000)  # blocks 0 and 3 missing: two runs
    assert rf.requests == 4 and sorted(rf._blocks) == [0, 1, 2, 3]
    rf.pread(49_990, 100)
    assert rf.bytes_fetched == 3000 + 1000 + 1000 + 1000 + 1000 and rf.pread(60_000, 10) == b""
    # an object that shrank since its HEAD: the store returns fewer bytes than asked
    from refstore import _objstore

    real = _objstore.get_ranges
    monkeypatch.setattr(_objstore, "get_ranges", lambda loc, s, e: [bytes(x)[:-1] for x in real(loc, s, e)])
    with pytest.raises(OSError, match=r"blob\.bin: short read at bytes 2000-3000 \(object changed\?\)$"):
        RangeFile(url, len(data), block_size=1000).pread(2500, 2)


def test_array_meta_fields_json_text_and_keys() -> None:
    """Every field survives ``with_shape``/``era_meta``/JSON as documented; the JSON text is
    sorted and compact; structure, era and grid keys are sorted JSON, so key order never makes
    two equal arrays differ."""
    import json

    m = ArrayMeta("v", ("t", "y"), (4, 3), (2, 3), "<i2", 7, ({"level": 1, "id": "zlib"},),
                  {"units": {"type": "str", "value": "K"}, "crs": {"value": "EPSG:4326", "type": "str"},
                   "transform": {"value": [1.0, 2.0], "type": "<f8"}},
                  status="unsupported", reason="why", short_edge=True, holes=((2, 3),), holes_axis=1,
                  edges=(None, (1, 2)))  # fmt: skip
    back = ArrayMeta.from_json(m.to_json())
    assert back == m and back.reason == "why" and back.status == "unsupported" and back.edges == (None, (1, 2))
    d = json.loads(m.to_json())
    assert m.to_json() == json.dumps(d, sort_keys=True, separators=(",", ":"))
    assert "chunk_edges" in d and ArrayMeta.from_json(json.dumps({**d, "chunk_edges": None})).edges == ()
    w = m.with_shape((9, 3), eras=({"a": 1},), holes=((1, 2),), holes_axis=0, edges=((4, 5), None))
    for f in ArrayMeta.__slots__:
        want = {"shape": (9, 3), "eras": ({"a": 1},), "holes": ((1, 2),), "holes_axis": 0, "edges": ((4, 5), None)}
        assert getattr(w, f) == want.get(f, getattr(m, f)), f
    plain = m.with_shape((4, 3))
    assert (plain.holes_axis, plain.edges, plain.eras, plain.holes) == (0, (), (), ())
    era = {"index": 0, "axis": 0, "start": 1, "stop": 3, "dtype": "<i4", "chunks": [1, 3], "codecs": [{"id": "x"}],
           "fill_value": 3, "attrs": {"a": {"type": "str", "value": "b"}}}  # fmt: skip
    from refstore.plan.grid import edges_to_json

    e2 = m.era_meta({**era, "edges": edges_to_json(((1, 1), None))})
    assert e2.edges == ((1, 1), None)
    e = m.era_meta(era)
    assert (e.name, e.dims, e.shape, e.chunks, e.dtype, e.fill_value, e.codecs, e.attrs, e.status, e.reason,
            e.short_edge, e.edges) == ("v", ("t", "y"), (2, 3), (1, 3), "<i4", 3, ({"id": "x"},), era["attrs"],
                                       "unsupported", "why", True, ())  # fmt: skip
    swapped = ArrayMeta("v", ("t", "y"), (4, 3), (2, 3), "<i2", 7, ({"id": "zlib", "level": 1},),
                        {"transform": {"type": "<f8", "value": [1.0, 2.0]},
                         "crs": {"type": "str", "value": "EPSG:4326"},
                         "units": {"value": "K", "type": "str"}})  # fmt: skip
    assert swapped.structure() == m.structure() and swapped.era_key() == m.era_key() and swapped.grid() == m.grid()
    assert m.structure()[2] == '[{"id": "zlib", "level": 1}]'
    assert m.grid() == ('{"type": "<f8", "value": [1.0, 2.0]}', '{"type": "str", "value": "EPSG:4326"}')
    assert m.era_key()[-1] == '{"units": {"type": "str", "value": "K"}}'


def test_range_file_boundaries(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    p = tmp_path / "b.bin"
    p.write_bytes(data)
    url = p.resolve().as_uri()
    for off, n in ((0, 1001), (999, 2), (0, 1000), (1000, 1), (2000, 1001), (10, 0), (len(data), 5)):
        rf = RangeFile(url, len(data), block_size=1000)
        assert rf.pread(off, n) == data[off : off + n], (off, n)
    rf = RangeFile(url, len(data), block_size=1000)
    buf = bytearray(1)
    assert rf.readinto(buf) == 1 and bytes(buf) == data[:1] and rf.tell() == 1
    rf.seek(len(data))
    assert rf.readinto(buf) == 0
    with pytest.raises(OSError) as e:
        rf.seek(-5, io.SEEK_SET)
    assert (e.value.errno, e.value.strerror) == (22, "negative seek position")
    whole = RangeFile(url, len(data), block_size=1024)  # the object ends on a block boundary
    assert whole.pread(len(data), 5) == b"" and whole.pread(len(data) - 1, 5) == data[-1:]
    small = RangeFile(url, len(data), block_size=1)  # the default cache keeps the last 128 blocks
    for i in range(200):
        small.pread(i, 1)
    assert len(small._blocks) == 128 and sorted(small._blocks) == list(range(72, 200))

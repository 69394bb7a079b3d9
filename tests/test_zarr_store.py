"""The zarr Store over the table: zarr's own store test kit (read-only), the batch path, and
every emit case read through zarr against its oracle.

``zarr.testing.store.StoreTests`` assumes a writable store: its ``set`` helper puts arbitrary
keys into the backing storage. A collection version is immutable, so the kit's read tests are
run here on the real keys of a real collection (the helper ``get`` reads the bytes behind a
key independently: the source file at the table's offset, or the metadata document), and its
write tests check the refusal instead. Inherited unchanged: type, equality, context manager,
read-only refusal of set/delete, ``with_read_only``, partial writes, ``getsize`` of a missing
key; delete and sync tests skip themselves (no deletes, no sync surface).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, cpu, default_buffer_prototype
from zarr.core.sync import _collect_aiterator
from zarr.testing.store import StoreTests

import refstore
from refstore.errors import BadInputError
from refstore.read.zarr_store import RefstoreZarrStore

from ._oracle import assert_same, hdf5_read, series_read

READ_ONLY = "store was opened in read-only mode and does not support writing"


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> str:
    from refstore.fixtures.oisst import write_series

    root = tmp_path_factory.mktemp("zarr-store")
    days = write_series(root / "data", 2)
    uri = str(root / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in days], concat_dim="time")
    return uri


def _chunk_keys(uri: str, name: str) -> list[str]:
    snap = refstore.Collection.open(uri).snapshot()
    return [f"{name}/c/" + "/".join(str(int(i)) for i in k) for k in snap.chunk_keys(name)]


def _expected_keys(uri: str) -> list[str]:
    snap = refstore.Collection.open(uri).snapshot()
    keys = ["zarr.json", "meta/zarr.json"]
    for name in snap.arrays():
        keys.append(f"{name}/zarr.json")
        keys += _chunk_keys(uri, name)
    return sorted(keys)


class TestRefstoreZarrStore(StoreTests[RefstoreZarrStore, cpu.Buffer]):
    store_cls = RefstoreZarrStore
    buffer_cls = cpu.Buffer

    @pytest.fixture
    def store_kwargs(self, collection: str) -> dict[str, Any]:
        return {"uri": collection, "as_of": None, "read_only": True, "source_grid": True}  # stored bytes

    async def get(self, store: RefstoreZarrStore, key: str) -> Buffer:
        """The bytes behind ``key`` without the store: the metadata document, inline bytes, or
        the source file read at the table's offset and length."""
        from refstore.zarr_meta import v3_array

        snap = refstore.Collection.open(store.uri).snapshot(store.version)
        if key.endswith("zarr.json") and key != "zarr.json" and key[: -len("/zarr.json")] in snap.arrays():
            doc = v3_array(snap.array(key[: -len("/zarr.json")]))
            return cpu.Buffer.from_bytes(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
        name, _, idx = key.partition("/c/")
        index = [int(i) for i in idx.split("/")]
        rows = snap.chunk_rows(name, [(i, i) for i in index])
        assert rows.num_rows == 1, key
        r = rows.to_pylist()[0]
        if r["offset"] < 0:
            return cpu.Buffer.from_bytes(r["inline"])
        with open(r["source"], "rb") as f:
            f.seek(r["offset"])
            return cpu.Buffer.from_bytes(f.read(r["length"]))

    async def set(self, store: RefstoreZarrStore, key: str, value: Buffer) -> None:
        raise NotImplementedError("a collection version is immutable: no key can be put behind the store")

    def test_store_repr(self, store: RefstoreZarrStore) -> None:
        assert str(store) == f"refstore://{store.uri}@v{store.version}"

    def test_store_supports_writes(self, store: RefstoreZarrStore) -> None:
        assert not store.supports_writes

    def test_store_supports_listing(self, store: RefstoreZarrStore) -> None:
        assert store.supports_listing

    def test_store_read_only(self, store: RefstoreZarrStore) -> None:
        assert store.read_only
        with pytest.raises(AttributeError):
            store.read_only = False  # type: ignore[misc]

    @pytest.mark.parametrize("read_only", [True, False])
    async def test_store_open_read_only(self, open_kwargs: dict[str, Any], read_only: bool) -> None:
        if not read_only:
            with pytest.raises(BadInputError, match="read-only"):
                await self.store_cls.open(**{**open_kwargs, "read_only": False})
            return
        store = await self.store_cls.open(**open_kwargs)
        assert store._is_open
        assert store.read_only

    async def test_serializable_store(self, store: RefstoreZarrStore) -> None:
        new_store: RefstoreZarrStore = pickle.loads(pickle.dumps(store))
        assert new_store == store
        assert new_store.read_only == store.read_only
        key = _chunk_keys(store.uri, "sst")[0]
        got = await new_store.get(key, prototype=default_buffer_prototype())
        assert got is not None
        assert got.to_bytes() == (await self.get(store, key)).to_bytes()

    # zlib+shuffle, fletcher32, contiguous, inline, compact
    @pytest.mark.parametrize("which", ["sst", "anom", "err", "time", "ice"])
    @pytest.mark.parametrize(
        "byte_range", [None, RangeByteRequest(1, 4), OffsetByteRequest(1), SuffixByteRequest(1), RangeByteRequest(0, 0)]
    )
    async def test_get(self, store: RefstoreZarrStore, which: str, byte_range: Any) -> None:  # type: ignore[override]
        for key in (f"{which}/zarr.json", _chunk_keys(store.uri, which)[-1]):
            data = (await self.get(store, key)).to_bytes()
            observed = await store.get(key, prototype=default_buffer_prototype(), byte_range=byte_range)
            assert observed is not None
            n = len(data)
            if byte_range is None:
                expected = data
            elif isinstance(byte_range, RangeByteRequest):
                expected = data[byte_range.start : byte_range.end]
            elif isinstance(byte_range, OffsetByteRequest):
                expected = data[byte_range.offset :]
            else:
                expected = data[n - byte_range.suffix :]
            assert observed.to_bytes() == expected, key

    async def test_get_not_open(self, store_not_open: RefstoreZarrStore) -> None:
        assert not store_not_open._is_open
        key = _chunk_keys(store_not_open.uri, "sst")[0]
        observed = await store_not_open.get(key, prototype=default_buffer_prototype())
        assert observed is not None
        assert observed.to_bytes() == (await self.get(store_not_open, key)).to_bytes()

    async def test_get_raises(self, store: RefstoreZarrStore) -> None:
        with pytest.raises((ValueError, TypeError), match=r"Unexpected byte_range, got.*"):
            await store.get("zarr.json", prototype=default_buffer_prototype(), byte_range=(0, 2))  # type: ignore[arg-type]

    async def test_get_missing(self, store: RefstoreZarrStore) -> None:
        proto = default_buffer_prototype()
        for key in ("foo", "sst/c/99/0/0/0", "sst/c/0/0/0", "nope/zarr.json", "sst/c/x/0/0/0"):
            assert await store.get(key, prototype=proto) is None, key

    async def test_get_many(self, store: RefstoreZarrStore) -> None:
        keys = [*_chunk_keys(store.uri, "sst"), "zarr.json", "absent"]
        proto = default_buffer_prototype()
        observed = await _collect_aiterator(store._get_many(zip(keys, [proto] * len(keys), [None] * len(keys),
                                                                strict=True)))  # fmt: skip
        got = {k: (b.to_bytes() if b is not None else None) for k, b in observed}
        assert got["absent"] is None
        for k in keys[:-2]:
            assert got[k] == (await self.get(store, k)).to_bytes(), k
        many = await store.get_many(keys)
        assert [b.to_bytes() if b is not None else None for b in many] == [got[k] for k in keys]

    @pytest.mark.parametrize("which", ["sst", "time", "ice"])
    async def test_getsize(self, store: RefstoreZarrStore, which: str) -> None:  # type: ignore[override]
        for key in (f"{which}/zarr.json", _chunk_keys(store.uri, which)[0]):
            assert await store.getsize(key) == len((await self.get(store, key)).to_bytes())

    async def test_getsize_prefix(self, store: RefstoreZarrStore) -> None:
        keys = [k for k in _expected_keys(store.uri) if k.startswith("sst/")]
        expected = sum([len((await self.get(store, k)).to_bytes()) for k in keys])
        assert await store.getsize_prefix("sst") == expected
        assert await store.getsize_prefix("ss") == 0  # a string prefix is not a directory

    @pytest.mark.parametrize("key", ["zarr.json", "c/0", "foo/c/0.0", "sst/c/0/0/0/0"])
    @pytest.mark.parametrize("data", [b"\x01\x02\x03\x04", b""])
    async def test_set(self, store: RefstoreZarrStore, key: str, data: bytes) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store.set(key, self.buffer_cls.from_bytes(data))

    async def test_set_not_open(self, store_not_open: RefstoreZarrStore) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store_not_open.set("c/0", self.buffer_cls.from_bytes(b"\x01"))

    async def test_set_many(self, store: RefstoreZarrStore) -> None:
        with pytest.raises(ValueError, match=READ_ONLY):
            await store._set_many([("zarr.json", self.buffer_cls.from_bytes(b"{}"))])

    async def test_set_if_not_exists(self, store: RefstoreZarrStore) -> None:
        before = await store.get("zarr.json", default_buffer_prototype())
        await store.set_if_not_exists("zarr.json", self.buffer_cls.from_bytes(b"1111"))  # exists: no-op
        assert await store.get("zarr.json", default_buffer_prototype()) == before
        with pytest.raises(ValueError, match=READ_ONLY):
            await store.set_if_not_exists("k2", self.buffer_cls.from_bytes(b"1111"))

    @pytest.mark.parametrize(
        "key_ranges",
        [
            [],
            [("zarr.json", RangeByteRequest(0, 2))],
            [("sst/c/0/0/0/0", RangeByteRequest(0, 2)), ("zarr.json", None)],
            [
                ("sst/c/0/0/0/0", RangeByteRequest(0, 2)),
                ("sst/c/0/0/0/1", SuffixByteRequest(2)),
                ("sst/c/1/0/1/1", OffsetByteRequest(2)),
                ("ice/c/0/0/0/0", None),
                ("absent/c/0", None),
            ],
        ],
    )
    async def test_get_partial_values(self, store: RefstoreZarrStore, key_ranges: list[tuple[str, Any]]) -> None:
        observed = await store.get_partial_values(prototype=default_buffer_prototype(),
                                                  key_ranges=(kr for kr in key_ranges))  # fmt: skip
        assert len(observed) == len(key_ranges)
        for (key, br), obs in zip(key_ranges, observed, strict=True):
            exp = await store.get(key, prototype=default_buffer_prototype(), byte_range=br)
            assert (obs is None) == (exp is None), key
            if obs is not None and exp is not None:
                assert obs.to_bytes() == exp.to_bytes()

    async def test_exists(self, store: RefstoreZarrStore) -> None:
        assert not await store.exists("foo")
        assert await store.exists("zarr.json")
        assert await store.exists("meta/zarr.json")
        assert await store.exists(_chunk_keys(store.uri, "sst")[0])
        assert not await store.exists("sst/c/0/0/0/0/0")

    async def test_is_empty(self, store: RefstoreZarrStore) -> None:
        assert not await store.is_empty("")
        assert not await store.is_empty("sst")
        assert not await store.is_empty("meta/")
        assert await store.is_empty("ss")
        assert await store.is_empty("spam/")

    async def test_clear(self, store: RefstoreZarrStore) -> None:
        with pytest.raises(NotImplementedError):
            await store.clear()
        assert not await store.is_empty("")

    async def test_list(self, store: RefstoreZarrStore) -> None:
        assert sorted(await _collect_aiterator(store.list())) == _expected_keys(store.uri)

    async def test_list_prefix(self, store: RefstoreZarrStore) -> None:
        for prefix in ("", "meta/", "sst/", "sst/c/1/", "meta/quality/"):
            observed = sorted(await _collect_aiterator(store.list_prefix(prefix)))
            assert observed == [k for k in _expected_keys(store.uri) if k.startswith(prefix)], prefix

    async def test_list_empty_path(self, store: RefstoreZarrStore) -> None:
        assert sorted(await _collect_aiterator(store.list_prefix(""))) == sorted(
            await _collect_aiterator(store.list()))  # fmt: skip

    async def test_list_dir(self, store: RefstoreZarrStore) -> None:
        expected = _expected_keys(store.uri)
        for root in ("", "meta", "sst", "sst/c", "sst/c/1/0", "meta/quality"):
            base = f"{root}/" if root else ""
            want = sorted({k[len(base) :].split("/")[0] for k in expected if k.startswith(base)})
            assert sorted(await _collect_aiterator(store.list_dir(root))) == want, root
            if root:
                assert sorted(await _collect_aiterator(store.list_dir(base))) == want, root
        assert await _collect_aiterator(store.list_dir("spam")) == ()


# --------------------------------------------------------------------------- zarr reading
def _walk(group: Any, prefix: str = "") -> dict[str, Any]:
    out = {f"{prefix}{n}": a for n, a in group.arrays()}
    for g, sub in group.groups():
        out |= _walk(sub, f"{prefix}{g}/")
    return out


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
def test_every_case_through_zarr(emit_cases: list[Any]) -> None:
    """Every array of every case, opened by zarr over the store, equals the oracle; arrays zarr
    cannot decode as stored are served decoded (and say why)."""
    import zarr

    decoded = 0
    for case in emit_cases:
        store = refstore.zarr_store(case.uri)
        arrays = _walk(zarr.open_group(store, mode="r"))
        ds = case.dataset()
        for name in ds.arrays:
            meta = ds.snapshot.array(name)
            if meta.status != "ok" or name in store.left_out:
                assert name not in arrays
                continue
            sel = case.window(name)
            got = arrays[name][sel] if sel else arrays[name][...]
            if "served unpacked" in store.served_decoded.get(name, ""):
                # eras packed differently are served CF-decoded: xarray over the source files decodes
                # each file with its own attributes
                assert case.series, f"{case.id}: only a series has eras"
                want = _cf_decoded_concat(case.series, name)[sel]
                assert_same(got, want, f"zarr {case.id}:{name} unpacked")
                continue
            assert_same(got, case.expected(name, sel), f"zarr {case.id}:{name}")
        decoded += len(store.served_decoded)
    assert decoded > 0  # the cases include eras, short strips, filter masks, JPEG


def test_batch_coalesces_adjacent_chunks(tmp_path: Path) -> None:
    """One zarr read of many adjacent chunks: one ranged read per contiguous run per source."""
    import h5py
    import zarr

    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(64 * 64, dtype="<f4").reshape(64, 64), chunks=(8, 8))
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(path)])
    store = refstore.zarr_store(uri, source_grid=True)  # stored bytes on the source grid
    calls: list[int] = []
    fetcher = store.state.fetcher
    real = fetcher.get_ranges

    def counting(loc: str, starts: Any, ends: Any) -> Any:
        calls.append(len(starts))
        return real(loc, starts, ends)

    fetcher.get_ranges = counting  # type: ignore[method-assign]
    keys = [f"v/c/{i}/{j}" for i in range(8) for j in range(8)]
    got = zarr.core.sync.sync(store.get_many(keys))
    rows = refstore.Collection.open(uri).snapshot().chunk_rows("v")
    offs = np.sort(rows.column("offset").to_numpy())
    runs = 1 + int(np.count_nonzero(offs[1:] != offs[:-1] + rows.column("length").to_numpy()[0]))
    assert sum(calls) == runs  # h5py wrote the chunks back to back: few runs, never 64 reads
    assert all(b is not None for b in got)
    arr = zarr.open_array(store, path="v", mode="r")
    assert_same(arr[...], hdf5_read(path, "v"), "v")


def test_held_bytes_without_sources_and_stale_refused(tmp_path: Path) -> None:
    """Held chunks are served from the collection (sources moved away), through zarr and
    xarray; a source changed since its scan is refused, not read."""
    import os
    import shutil
    from datetime import date

    import xarray as xr
    import zarr

    from refstore.fixtures.oisst import write_day, write_series
    from refstore.table import HoldSelection, hold

    days = write_series(tmp_path / "data", 2)
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in days], concat_dim="time")
    raw = series_read([str(p) for p in days], "sst", "time")  # h5py over the files
    decoded = _netcdf4_concat(days, "sst", "time").values  # xarray over the files
    names = tuple(refstore.open(uri).arrays)
    hold(refstore.Collection.open(uri), HoldSelection(arrays=names))
    shutil.move(str(tmp_path / "data"), str(tmp_path / "away"))
    store = refstore.zarr_store(uri)
    assert "sst" in store.blocks  # small chunks: served in blocks, decoded from the held bytes
    assert_same(zarr.open_array(store, path="sst", mode="r")[...], raw, "held sst via zarr")
    assert_same(xr.open_dataset(uri, engine="refstore")["sst"].values, decoded, "held sst via xarray")

    shutil.move(str(tmp_path / "away"), str(tmp_path / "data"))
    from refstore.table import release

    release(refstore.Collection.open(uri), HoldSelection(arrays=names))
    write_day(days[1], date(2024, 1, 2))  # rewritten: same bytes, new modification time
    os.utime(days[1], ns=(1, 1))
    with pytest.raises(refstore.StaleSourceError, match="changed since scan"):
        zarr.open_array(refstore.zarr_store(uri), path="sst", mode="r")[...]
    from refstore.read import ReadOptions

    for source_grid in (False, True):  # in blocks (decoded) and as stored bytes
        with pytest.raises(refstore.StaleSourceError, match="changed since scan"):
            zarr.open_array(refstore.zarr_store(uri, source_grid=source_grid), path="sst", mode="r")[...]
        warned = refstore.zarr_store(uri, options=ReadOptions(on_stale="warn"), source_grid=source_grid)
        with pytest.warns(refstore.StaleSourceWarning, match="changed since scan"):
            assert_same(zarr.open_array(warned, path="sst", mode="r")[...], raw, "sst read despite staleness")


def _cf_decoded_concat(files: tuple[str, ...], name: str) -> np.ndarray[Any, Any]:
    """xarray's CF decoding (``decode_cf_variable``) of each file's raw h5py values with that file's
    own attributes, concatenated along the first axis (files netCDF-C cannot open, too)."""
    import h5py
    import xarray as xr

    parts = []
    for p in files:
        with h5py.File(p, "r") as f:
            d = f[name]
            attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in d.attrs.items()
                     if k not in ("DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME")}  # fmt: skip
            var = xr.Variable([f"d{i}" for i in range(d.ndim)], hdf5_read(p, name), attrs)
        parts.append(np.asarray(xr.conventions.decode_cf_variable(name, var).values))
    return np.concatenate(parts)


def _netcdf4_concat(files: list[Path], name: str, dim: str) -> Any:
    import xarray as xr

    return xr.concat([xr.open_dataset(p, engine="netcdf4")[name] for p in files], dim=dim)


def test_eras_of_other_packing_served_unpacked(packing_era_series: tuple[str, list[Path]]) -> None:
    """A series whose packing changes (day 3: another scale_factor) is one zarr array of
    CF-decoded values, packing attributes dropped: xarray over the store equals xarray over the
    netCDF files (each decoded with its own attributes); every cell of the grid is a key."""
    import xarray as xr
    import zarr

    uri, days = packing_era_series
    assert len(refstore.open(uri)["sst"].eras) == 2
    store = refstore.zarr_store(uri)
    assert "sst" in store.blocks
    want = _netcdf4_concat(days, "sst", "time")
    got = xr.open_zarr(store)["sst"]
    assert_same(got[2].values, want[2].values, "the day of the other scale_factor")
    assert "unpacked" in store.served_decoded["sst"]
    assert not {"scale_factor", "add_offset", "_FillValue", "missing_value"} & (set(got.attrs) | set(got.encoding))
    assert got.dtype == want.dtype and got.attrs["units"] == want.attrs["units"]
    assert_same(got.values, want.values, "unpacked eras via xarray over zarr")
    assert_same(got[1:3, 0, 5:40:3, 7].values, want[1:3, 0, 5:40:3, 7].values, "strided")
    arr = zarr.open_array(store, path="sst", mode="r")
    keys = zarr.core.sync.sync(_collect_aiterator(store.list_prefix("sst/c/")))
    assert len(keys) == int(np.prod([-(-s // c) for s, c in zip(arr.shape, arr.chunks, strict=True)]))


def test_eras_of_other_units_left_out_with_reason(tmp_path: Path) -> None:
    """Eras whose values mean different things (units differ) have no one zarr array: left out."""
    import zarr

    from .test_series import _era_file

    d = tmp_path / "data"
    d.mkdir()
    files = [_era_file(d / f"f{i}.h5", i, comp=None, chunks=(1, 12), dtype="<i2", scale=0.1) for i in range(2)]
    import h5py

    for f, units in zip(files, ["K", "degC"], strict=True):
        with h5py.File(f, "r+") as h:
            h["x"].attrs["units"] = units
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(d)], concat_dim="time")
    store = refstore.zarr_store(uri)
    assert store.left_out == {"x": "array 'x': its eras differ in 'units' (K, degC)"}
    assert "x" not in zarr.open_group(store, mode="r")


def test_eras_of_other_chunks_dtype_codecs(tmp_path: Path) -> None:
    """Eras that change codecs, chunks and dtype (same packing): served decoded on the first
    era's grid, in the dtype that holds both, equal to numpy's concatenation of h5py's reads,
    the packing attributes kept."""
    import zarr

    from .test_series import _era_file

    d = tmp_path / "data"
    d.mkdir()
    files = [_era_file(d / f"f{i}.h5", i, comp=comp, chunks=chunks, dtype=dt, scale=0.1)
             for i, (comp, chunks, dt) in enumerate([("gzip", (1, 12), "<i2"), ("gzip", (1, 12), "<i2"),
                                                     (None, (2, 5), "<i4"), (None, (2, 5), "<i4")])]  # fmt: skip
    expected = np.concatenate([hdf5_read(p, "x") for p in files])  # numpy's promotion: <i4
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(d)], concat_dim="time")
    assert len(refstore.open(uri)["x"].eras) == 2
    # 24-byte source chunks: by default one coarse zarr chunk holds all 8 rows (8 < 256 chunks)
    for source_grid, chunks in ((True, (1, 12)), (False, (8, 12))):
        store = refstore.zarr_store(uri, source_grid=source_grid)
        assert "eras" in store.served_decoded["x"]
        arr = zarr.open_array(store, path="x", mode="r")
        assert arr.dtype == np.dtype("<i4") and arr.chunks == chunks
        assert_same(arr[...], expected, "eras via zarr")
        assert_same(arr[3:6, 4:11], expected[3:6, 4:11], "across the boundary")
        assert arr.attrs["scale_factor"] == np.float32(0.1)


def test_codecs_registered_without_user_action(tmp_path: Path) -> None:
    """A fresh interpreter opens a predictor TIFF (imagecodecs codecs) through zarr and xarray
    with nothing but ``import refstore``."""
    import subprocess
    import sys

    from refstore.fixtures.tiff import write_cases

    tif = write_cases(tmp_path / "tiff")["int16_nodata"]
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(tif)])
    code = f"""
import numpy as np, tifffile, xarray as xr, zarr, refstore
expected = tifffile.imread({str(tif)!r})
a = zarr.open_group(refstore.zarr_store({uri!r}), mode="r")["image"][...]
assert a.dtype == expected.dtype and np.array_equal(a, expected)
ds = xr.open_dataset({uri!r}, engine="refstore", mask_and_scale=False)
assert np.array_equal(ds["image"].values, expected)
print("ok")
"""
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]

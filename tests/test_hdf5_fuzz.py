"""The HDF5 scan against h5py on random files (``bench/h5fuzz.py``, a fixed-seed subset), and
the cases the campaign found, each as a small file: no array may be recorded with references
that decode to other values than h5py's read (the oracle), or with a dtype whose bytes are not
the file's.

- HDF5's ``H5Dchunk_iter``/``H5Dget_chunk_info`` (2.0.0 here) report the chunk offsets of an
  extensible array index (``libver`` 1.10+, exactly one unlimited dimension) unswizzled: with
  the unlimited dimension not first, chunk (0, j, 0) is reported at (0, 0, j * chunk).
- Integers with padding or offset bits (precision < 8 x size) and floats whose layout is not
  IEEE's: h5py gives the nearest numpy dtype and HDF5 converts on read; the stored bytes are
  not that dtype's.
- A contiguous dataset never written in a file with a user block: ``H5Dget_offset`` gives the
  undefined address plus the base address (4095 for a 4096-byte user block).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from bench import h5fuzz
from refstore.read.decode import make_decoder

if TYPE_CHECKING:
    from pathlib import Path


def _scan(path: Path, *, bytes_path: bool = True) -> Any:
    return h5fuzz._scan(path, bytes_path=bytes_path)


def _rows(result: Any, name: str) -> list[tuple[tuple[int, ...], int, int, int]]:
    t = result.chunks.to_pydict()
    meta = next(m for m in result.arrays if m.name == name)
    return [(tuple(t[f"k{d}"][i] for d in range(len(meta.shape))), t["offset"][i], t["length"][i],
             t["filter_mask"][i]) for i, a in enumerate(t["array"]) if a == name]  # fmt: skip


def _assert_rows_read_as_h5py(path: Path, result: Any, name: str) -> None:
    """Every reference of an ok array decodes to h5py's read of its region."""
    meta = next(m for m in result.arrays if m.name == name)
    if meta.status != "ok":
        return
    dec = make_decoder(meta.codecs, meta.dtype, meta.chunks)
    with h5py.File(path, "r") as f, open(path, "rb") as fh:
        h = f[name]
        want = h[...]
        assert np.dtype(meta.dtype) == h.dtype
        for key, off, length, mask in _rows(result, name):
            sl = tuple(slice(k * c, min((k + 1) * c, s)) for k, c, s in zip(key, meta.chunks, h.shape, strict=True))
            assert all(x.start < x.stop for x in sl), (name, key, "key past the array")
            got = dec(os.pread(fh.fileno(), length, off), mask)[tuple(slice(0, x.stop - x.start) for x in sl)]
            assert got.tobytes() == np.ascontiguousarray(want[sl]).tobytes(), (name, key)


@pytest.mark.parametrize("bytes_path", [True, False])
@pytest.mark.parametrize("maxshape", [(4, None, 3), (None, 5, 3), (4, 5, None)])
def test_extensible_array_chunks_are_placed_right_or_refused(tmp_path: Path, maxshape: tuple[Any, ...],
                                                              bytes_path: bool) -> None:  # fmt: skip
    path = tmp_path / "ea.h5"
    data = np.arange(4 * 5 * 3, dtype="<i4").reshape(4, 5, 3)
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("full", data=data, maxshape=maxshape, chunks=(1, 2, 2))
        d = f.create_dataset("sparse", shape=data.shape, dtype="<i4", maxshape=maxshape, chunks=(2, 2, 2))
        d[0:2, 2:4, 0:2] = 7  # one chunk, (0, 1, 0): reported at (0, 0, 2) when unswizzled
    result = _scan(path, bytes_path=bytes_path)
    for name in ("full", "sparse"):
        _assert_rows_read_as_h5py(path, result, name)
    if maxshape[0] is None:  # the unlimited dimension first: nothing to swizzle, still scanned
        assert all(m.status == "ok" for m in result.arrays)


@pytest.mark.parametrize("bytes_path", [True, False])
def test_integers_with_padding_bits_are_not_read_as_plain_integers(tmp_path: Path, bytes_path: bool) -> None:
    from h5py import h5d, h5p, h5s, h5t

    path = tmp_path / "pad.h5"
    with h5py.File(path, "w") as f:
        for name, base, prec, off in (("p12", h5t.STD_I16LE, 12, 0), ("o3", h5t.STD_U32BE, 20, 3),
                                      ("p30", h5t.STD_I64LE, 30, 0)):  # fmt: skip
            tid = base.copy()
            tid.set_precision(prec)
            if off:
                tid.set_offset(off)
            dcpl = h5p.create(h5p.DATASET_CREATE)
            if name == "p30":
                dcpl.set_chunk((4,))
            try:
                ds = h5py.Dataset(h5d.create(f.id, name.encode(), tid, h5s.create_simple((10,)), dcpl=dcpl))
            except ValueError:
                continue
            ds[...] = np.arange(-5, 5) if name != "o3" else np.arange(10) * 1000
        for name, base in (("bias", h5t.IEEE_F32LE), ("norm", h5t.IEEE_F64BE)):
            tid = base.copy()
            tid.set_ebias(tid.get_ebias() + 1) if name == "bias" else tid.set_norm(h5t.NORM_NONE)
            try:  # HDF5 2.0 refuses some unusual types unless told to relax its checks
                ds = h5py.Dataset(h5d.create(f.id, name.encode(), tid, h5s.create_simple((6,))))
            except ValueError:
                continue
            ds[...] = np.linspace(-2, 2, 6)
    result = _scan(path, bytes_path=bytes_path)
    assert {"p12", "o3", "bias"} <= {m.name for m in result.arrays}
    with h5py.File(path, "r") as f, open(path, "rb") as fh:
        for meta in result.arrays:
            if meta.status != "ok":
                continue
            want = f[meta.name][...]
            rows = _rows(result, meta.name)
            assert len(rows) == 1 and np.dtype(meta.dtype).itemsize == f[meta.name].id.get_type().get_size()
            _assert_rows_read_as_h5py(path, result, meta.name)
            fh.seek(rows[0][1])
            assert np.frombuffer(fh.read(rows[0][2]), meta.dtype).tobytes() == want.tobytes()


@pytest.mark.parametrize("bytes_path", [True, False])
def test_unwritten_contiguous_dataset_after_a_user_block_has_no_reference(tmp_path: Path, bytes_path: bool) -> None:
    path = tmp_path / "ub.h5"
    with h5py.File(path, "w", userblock_size=4096) as f:
        f.create_dataset("never", shape=(3,), dtype="<i2", fillvalue=-22)
        f.create_dataset("scalar", shape=(), dtype="i1", fillvalue=5)
        f.create_dataset("written", data=np.arange(6, dtype=">f8"))
    result = _scan(path, bytes_path=bytes_path)
    assert _rows(result, "never") == [] and _rows(result, "scalar") == []
    with h5py.File(path, "r") as f:
        assert _rows(result, "written") == [((0,), f["written"].id.get_offset(), 48, 0)]
    _assert_rows_read_as_h5py(path, result, "written")


SEEDS = range(1000, 1024)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_files_scan_as_h5py_reads_them(tmp_path: Path, seed: int) -> None:
    """Random files (``bench/h5fuzz.py``'s generator, fixed seeds): the scan through the bytes
    path equals the scan through HDF5, and both equal h5py (dtype, shape, chunks, fill value,
    filters, every chunk's offset/size/mask, attributes; every chunk decoded)."""
    path = tmp_path / "f.h5"
    try:
        h5fuzz.generate(path, seed)
    except Exception as e:  # a combination HDF5 refuses to write: nothing to compare
        pytest.skip(f"not written: {e}")
    problems, counts = h5fuzz.check(path, max_chunks=16)
    assert not problems, problems
    with h5py.File(path, "r") as f:
        found: list[str] = []
        f.visititems(lambda name, obj: found.append(name) if isinstance(obj, h5py.Dataset) else None)
    assert counts["datasets"] == len(found)



def test_shuffle_after_deflate_keeps_the_bytes_left_over(tmp_path: Path) -> None:
    """Shuffle after deflate in the pipeline (legal, found by the campaign): the compressed
    chunk is rarely a whole number of elements; HDF5's shuffle leaves the bytes left over in
    place, and refstore's decoder must too."""
    from h5py import h5d, h5p, h5s, h5t

    path = tmp_path / "ds.h5"
    with h5py.File(path, "w") as f:
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_chunk((20, 7))
        dcpl.set_deflate(9)
        dcpl.set_shuffle()
        ds = h5py.Dataset(h5d.create(f.id, b"v", h5t.STD_I32BE, h5s.create_simple((27, 15)), dcpl=dcpl))
        ds[...] = np.random.default_rng(3).integers(-1000, 1000, size=(27, 15))
    result = _scan(path)
    meta = next(m for m in result.arrays if m.name == "v")
    assert meta.status == "ok" and [c["id"] for c in meta.codecs] == ["zlib", "shuffle"]
    rows = _rows(result, "v")
    assert len(rows) == 6 and any(length % 4 for _k, _o, length, _m in rows)
    _assert_rows_read_as_h5py(path, result, "v")


@pytest.mark.parametrize("bytes_path", [True, False])
def test_oversized_chunk_not_covering_every_dimension_is_read_whole(tmp_path: Path, bytes_path: bool) -> None:
    """A chunk larger than the array along one dimension but shorter along another (found by
    the campaign): the array is held inline, every value as h5py reads it (the chunk not
    written reads as the fill value), not the one chunk's block cut short."""
    path = tmp_path / "over.h5"
    with h5py.File(path, "w", libver="earliest") as f:
        d = f.create_dataset("v", shape=(10, 12, 1), dtype="u1", chunks=(10, 9, 4), maxshape=(10, None, None),
                             fillvalue=231)  # fmt: skip
        d[:, 0:9, :] = np.arange(90, dtype="u1").reshape(10, 9, 1)
        assert d.id.get_num_chunks() == 1
    result = _scan(path, bytes_path=bytes_path)
    t = result.chunks.to_pydict()
    inline = [t["inline"][i] for i, a in enumerate(t["array"]) if a == "v"]
    with h5py.File(path, "r") as f:
        assert inline == [np.ascontiguousarray(f["v"][...]).tobytes()]


@pytest.mark.parametrize("fault", ["offset", "mask", "byteorder", "fill", "chunks"])
def test_the_check_sees_a_wrong_bytes_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """The campaign's check is not blind: a bytes path that is wrong in one field (a chunk's
    offset or mask, the byte order, the fill value, the chunk shape) is reported."""
    import dataclasses

    from refstore.scan import _hdf5_header
    from refstore.scan import hdf5 as scanner
    from refstore.scan._hdf5_layout import ChunkIndex, chunk_index, decode_dataset

    monkeypatch.setattr(_hdf5_header, "_HEADERS", {})  # parses kept by content: this test's own
    path = tmp_path / "f.h5"
    with h5py.File(path, "w", libver="earliest") as f:
        f.create_dataset("v", data=np.arange(60, dtype="<i4").reshape(6, 10), chunks=(4, 3), fillvalue=-1,
                         compression="gzip")  # fmt: skip
    assert h5fuzz.check(path)[0] == []

    def bad_index(*a: Any) -> ChunkIndex | None:
        got = chunk_index(*a)
        assert got is not None
        if fault == "offset":
            return dataclasses.replace(got, offsets=got.offsets + 1)
        return dataclasses.replace(got, masks=got.masks | 1) if fault == "mask" else got

    def bad_layout(messages: Any) -> Any:
        got = decode_dataset(messages)
        assert got is not None
        if fault == "byteorder":
            return dataclasses.replace(got, dtype=got.dtype.newbyteorder(">"))
        if fault == "fill":
            return dataclasses.replace(got, fill=bytes(4))
        return dataclasses.replace(got, chunks=(3, 4)) if fault == "chunks" else got

    monkeypatch.setattr(_hdf5_header, "_HEADERS", {})
    monkeypatch.setattr(scanner, "chunk_index", bad_index)
    monkeypatch.setattr(scanner, "decode_dataset", bad_layout)
    problems, _ = h5fuzz.check(path)
    if fault == "chunks":  # chunk offsets off the wrong grid: the scan itself refuses the file
        assert problems == [p for p in problems if p.startswith("bytes path failed where HDF5 path did not")] != []
        return
    assert any("bytes vs hdf5 path" in p for p in problems), problems
    assert any(p.startswith("v:") for p in problems), problems


@pytest.mark.skipif(np.finfo(np.longdouble).nmant != 63, reason="x87 80-bit long double only")
def test_inline_long_doubles_have_no_memory_in_their_padding(tmp_path: Path) -> None:
    """x86 long doubles held inline (compact, oversized chunk): h5py's read leaves their 6 bytes
    of padding as memory held them, so two scans of one file differed (found by the campaign);
    the padding is zero, the values h5py's."""
    path = tmp_path / "ld.h5"
    values = np.array([1.5, -2.25, np.pi], np.longdouble)
    with h5py.File(path, "w") as f:
        f.create_dataset("c", data=values[0], dtype=np.longdouble)  # compact-sized scalar, contiguous
        f.create_dataset("k", data=values, dtype=np.longdouble, chunks=(4,), maxshape=(None,))
        from h5py import h5d, h5p, h5s, h5t

        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_layout(h5d.COMPACT)
        ds = h5py.Dataset(h5d.create(f.id, b"s", h5t.NATIVE_LDOUBLE, h5s.create_simple((3,)), dcpl=dcpl))
        ds[...] = values
    result = _scan(path)
    t = result.chunks.to_pydict()
    for name in ("k", "s"):
        raw = next(t["inline"][i] for i, a in enumerate(t["array"]) if a == name)
        got = np.frombuffer(raw, np.longdouble)
        assert np.array_equal(got, values)
        assert not np.frombuffer(raw, np.uint8).reshape(-1, 16)[:, 10:].any(), name


def test_bitfields_with_padding_are_unsupported(tmp_path: Path) -> None:
    """A bitfield whose precision or offset leaves padding bits: HDF5 itself has no conversion
    for it (h5py cannot read it); refstore recorded it as plain ``<u2``. Only the standard
    bitfields (every bit used) are read as unsigned integers."""
    import ctypes

    from h5py import h5d, h5s, h5t

    from refstore.fixtures.hdf5_headers import _hdf5_lib

    lib = _hdf5_lib()
    if lib is None:
        pytest.skip("HDF5's H5Tset_precision is not reachable here")
    path = tmp_path / "bf.h5"
    with h5py.File(path, "w") as f:
        for name, prec, off in (("b16", 16, 0), ("b12", 12, 0), ("b10at3", 10, 3)):
            tid = h5t.STD_B16LE.copy()
            if prec != 16:
                assert lib.H5Tset_precision(ctypes.c_int64(tid.id), ctypes.c_size_t(prec)) >= 0
            if off:
                assert lib.H5Tset_offset(ctypes.c_int64(tid.id), ctypes.c_size_t(off)) >= 0
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_alloc_time(h5d.ALLOC_TIME_EARLY)
            h5d.create(f.id, name.encode(), tid, h5s.create_simple((6,)), dcpl=dcpl)
        f["b16"][...] = np.array([1, 2, 300, 4095, 65535, 7], "<u2")
    for bytes_path in (True, False):
        result = _scan(path, bytes_path=bytes_path)
        status = {m.name: m.status for m in result.arrays}
        assert status == {"b16": "ok", "b12": "unsupported", "b10at3": "unsupported"}, (bytes_path, status)
        _assert_rows_read_as_h5py(path, result, "b16")

"""Where the HDF5 scanner takes a dataset's storage from, against h5py, both ways it reads it:
from the object header bytes (``_RawDataset``: what ``_hdf5_layout`` decodes, libver earliest)
and through HDF5 (``_Dataset``: any other dataset, and every dataset when the header reader is
off, as for a remote file). In-process, no collection (``./dev mutate hdf5``).

Expected values from h5py only: ``ds[()]`` in the dataset's own dtype (an x87 long double's six
padding bytes zeroed, the scanner's documented normal form), ``get_chunk_info``,
``get_offset``/``get_storage_size``, the layout and filter count of the creation plist, and the
errors h5py raises; dtypes compared exactly. Which datasets the header bytes hold is the rule
``_hdf5_layout``'s module doc states (layout v3; integers and IEEE floats): such a dataset whose
values the bytes hold (compact, or one unfiltered chunk of the chunk's full size covering the
array) is read without asking HDF5, any other through it.
"""

from __future__ import annotations

import contextlib
import re
import struct
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore.errors import ScanError
from refstore.scan import hdf5

from ._hdf5_paths import scan

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


PATHS = ("bytes", "hdf5")
X87 = np.finfo(np.longdouble).nmant == 63 and np.dtype(np.longdouble).itemsize == 16


def _compact(f: h5py.File, name: str, data: Any) -> None:
    data = np.ascontiguousarray(data)
    cpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    cpl.set_layout(h5py.h5d.COMPACT)
    tid = h5py.h5t.py_create(data.dtype, logical=False)
    sid = h5py.h5s.create_simple(data.shape) if data.shape else h5py.h5s.create(h5py.h5s.SCALAR)
    dsid = h5py.h5d.create(f.id, name.encode(), tid, sid, cpl)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data)


def _long_doubles() -> np.ndarray[Any, Any]:
    """Three long doubles whose padding bytes (10..15 of x87's 16) are not zero: HDF5 stores and
    reads the 16 bytes as they are, so only the scanner's normal form zeroes them."""
    v = np.array([1.5, -2.25, 3e300], np.longdouble)
    if not X87:
        return v
    b = v.view(np.uint8).reshape(-1, 16).copy()
    b[:, 10:] = np.arange(0xA0, 0xA6, dtype=np.uint8)
    return b.view(np.longdouble).reshape(-1)


def _write_early(path: Path) -> Path:
    """libver earliest: layout v3 and v1 B-trees (what the header bytes decode)."""
    with h5py.File(path, "w", libver="earliest") as f:
        _compact(f, "c_i1", np.array([1, -2, 3], "i1"))
        _compact(f, "c_u2_2d", np.arange(6, dtype="<u2").reshape(2, 3) * 257)
        _compact(f, "c_be", np.array([1.5, 2.5, -3.0], ">f8"))
        _compact(f, "c_f2", np.array([0.5, -1.0], "<f2"))
        _compact(f, "c_scalar", np.array(2.5, "<f4"))
        _compact(f, "c_s", np.array([[b"abcdefghijkl", b"x"], [b"mnopqrstuvwx", b"yz"]], "S12"))
        _compact(f, "c_bool", np.array([True, False, True]))
        _compact(f, "c_c16", np.array([1 + 2j, 3 - 4j], "<c16"))
        _compact(f, "c_ld", _long_doubles())
        # one chunk larger than the array: held inline
        f.create_dataset("coord", data=np.array([1.0, 2.0, 3.0]), chunks=(512,), maxshape=(None,))
        f.create_dataset("part2d", data=np.arange(15, dtype="<i4").reshape(3, 5), chunks=(4, 8),
                         maxshape=(None, None))  # fmt: skip
        f.create_dataset("eqdim", data=np.arange(15, dtype="<i4").reshape(3, 5), chunks=(3, 8), maxshape=(None, None))
        f.create_dataset("shuf", data=np.array([1, 256, 65536], "<i4"), chunks=(8,), maxshape=(None,), shuffle=True)
        f.create_dataset("gz", data=np.array([1, 256, 65536], "<i4"), chunks=(8,), maxshape=(None,),
                         compression="gzip")  # fmt: skip
        f.create_dataset("ld_chunk", data=_long_doubles(), chunks=(8,), maxshape=(None,))
        f.create_dataset("unwritten", shape=(3,), chunks=(8,), maxshape=(None,), dtype="<i2", fillvalue=7)
        shrunk = f.create_dataset("shrunk", shape=(10,), chunks=(4,), maxshape=(None,), dtype="<i2", fillvalue=5)
        shrunk[6] = 1
        shrunk.resize((3,))  # its one chunk pruned: an index with no chunk left
        longer = f.create_dataset("longer", shape=(3,), chunks=(4,), maxshape=(None,), dtype="<i2", fillvalue=5)
        longer.id.write_direct_chunk((0,), np.array([1, 2, 3, 4, 9, 9], "<i2").tobytes())  # 12 bytes stored, 8 a chunk
        # chunked on a grid
        m = f.create_dataset("masked", shape=(10,), chunks=(4,), dtype="<i4", compression="gzip", fillvalue=-1)
        m[0:4] = np.arange(4)
        m.id.write_direct_chunk((4,), np.array([4, 5, 6, 7], "<i4").tobytes(), filter_mask=1)  # deflate skipped
        part = f.create_dataset("partial", shape=(6, 6), chunks=(4, 4), dtype=">i8", fillvalue=3)
        part[4:6, 0:2] = 9
        part[0:2, 4:6] = 8
        f.create_dataset("several", data=np.arange(40, dtype="<f4").reshape(8, 5), chunks=(3, 2))
        f.create_dataset("chunk_unwritten", shape=(10, 2), chunks=(4, 2), dtype="<i4")
        vast = f.create_dataset("vast", shape=(1 << 31, 1 << 32), chunks=(1, 1), dtype="<i1")  # 2**63 chunks a grid
        vast.id.write_direct_chunk((1, 2), b"\x05")
        f.create_dataset("contig", data=np.arange(4, dtype="<i4"))
        f.create_dataset("contig_unwritten", shape=(4,), dtype="<i4")
    return path


def _write_latest(path: Path) -> Path:
    """libver latest: layout v4's chunk indexes (read through HDF5)."""
    with h5py.File(path, "w", libver="latest") as f:
        fixed = f.create_dataset("fixed", shape=(6, 6), chunks=(4, 4), dtype="<i4", fillvalue=-1)
        fixed[0:4, 0:4] = 1
        fixed[4:6, 4:6] = 2
        ext = f.create_dataset("extensible", shape=(10,), chunks=(4,), maxshape=(None,), dtype="<f8")
        ext[4:10] = 1.5
        f.create_dataset("btree2", data=np.arange(30, dtype="<i2").reshape(5, 6), chunks=(2, 4), maxshape=(None, None))
        f.create_dataset("single", data=np.arange(12, dtype="<i4").reshape(3, 4), chunks=(3, 4))
        single_gz = f.create_dataset("single_gz", shape=(3, 4), chunks=(3, 4), dtype="<i4", compression="gzip")
        single_gz.id.write_direct_chunk((0, 0), np.arange(12, dtype="<i4").tobytes(), filter_mask=1)
        f.create_dataset("oversized", data=np.array([4, 5, 6], "<i8"), chunks=(8,), maxshape=(None,))
        f.create_dataset("unwritten", shape=(8,), chunks=(4,), maxshape=(None,), dtype="<i4")
        _compact(f, "c_i4", np.array([7, 8, 9], "<i4"))
    return path


def _write_userblock(path: Path) -> Path:
    with h5py.File(path, "w", libver="earliest", userblock_size=512) as f:
        f.create_dataset("contig", data=np.arange(5, dtype="<i2"))
        f.create_dataset("contig_unwritten", shape=(4,), dtype="<i4")
        f.create_dataset("chunked", data=np.arange(6, dtype="<i4"), chunks=(4,))
    return path


def _write_bad_compact(path: Path) -> Path:
    """A compact dataset whose dataspace says 3 elements while the layout holds 4 (16 bytes):
    HDF5 refuses to open it."""
    with h5py.File(path, "w", libver="earliest") as f:
        _compact(f, "c", np.array([11, 22, 33, 44], "<i4"))
    blob = bytearray(path.read_bytes())
    space = bytes([1, 1, 1, 0, 0, 0, 0, 0]) + struct.pack("<QQ", 4, 4)  # v1, rank 1, max dims present
    assert blob.count(space) == 1
    at = blob.find(space)
    blob[at + 8 : at + 24] = struct.pack("<QQ", 3, 3)
    path.write_bytes(bytes(blob))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("h5storage")
    return {
        "early": _write_early(d / "early.h5"),
        "latest": _write_latest(d / "latest.h5"),
        "userblock": _write_userblock(d / "userblock.h5"),
        "bad_compact": _write_bad_compact(d / "bad_compact.h5"),
    }


# ------------------------------------------------------------------ the oracle (h5py only)


def _values(ds: h5py.Dataset) -> bytes:
    """Every value as h5py reads it, C order, in the dataset's dtype; an x87 long double's
    padding bytes zeroed."""
    a = np.ascontiguousarray(np.asarray(ds[()]), ds.dtype)
    assert a.dtype == ds.dtype
    if ds.dtype == np.longdouble and X87 and a.size:
        b = a.reshape(-1).view(np.uint8).reshape(a.size, 16).copy()
        b[:, 10:] = 0
        return b.tobytes()
    return a.tobytes()


def _datasets(f: h5py.File) -> dict[str, h5py.Dataset]:
    out: dict[str, h5py.Dataset] = {}
    f.visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset) else None)
    return out


def _inline_expected(ds: h5py.Dataset) -> bool:
    """Held inline (README): compact, or chunked with a chunk larger than the array (at most 1 MiB)."""
    layout = ds.id.get_create_plist().get_layout()
    if ds.size == 0:
        return False
    if layout == h5py.h5d.COMPACT:
        return True
    return (layout == h5py.h5d.CHUNKED and any(c > s for c, s in zip(ds.chunks, ds.shape, strict=True))
            and ds.size * ds.dtype.itemsize <= 1 << 20)  # fmt: skip


def _bytes_decoded(which: str, ds: h5py.Dataset) -> bool:
    """Whether ``_hdf5_layout`` decodes the dataset (its module doc): the early file's layout
    messages are v3 (libver earliest; the latest file's are v4, and the header reader reads no
    file with a user block), and a type of integers or IEEE binary16/32/64 (not bool: an enum)."""
    dt = ds.dtype
    return which == "early" and (dt.kind in "iu" or (dt.kind == "f" and dt.itemsize in (2, 4, 8)))


def _held_by_the_bytes(ds: h5py.Dataset) -> bool:
    """Whether the values are in the bytes as they are: compact, or one unfiltered chunk, written
    at the chunk's full size, covering the array."""
    plist = ds.id.get_create_plist()
    if plist.get_layout() == h5py.h5d.COMPACT:
        return True
    covers = all(c >= s for c, s in zip(ds.chunks, ds.shape, strict=True))
    if plist.get_nfilters() or ds.id.get_num_chunks() != 1 or not covers:
        return False
    info = ds.id.get_chunk_info(0)
    return bool(info.size == int(np.prod(ds.chunks)) * ds.dtype.itemsize and not any(info.chunk_offset))


# ------------------------------------------------------------------ both paths


@contextlib.contextmanager
def _objects(path: Path, kind: str) -> Iterator[dict[str, hdf5._Dataset | hdf5._RawDataset]]:
    """The scanner's storage object of every dataset, as its walk makes them (``bytes``: from the
    header bytes where they describe it) or through HDF5 alone (``hdf5``)."""
    with h5py.File(path, "r") as f, contextlib.ExitStack() as stack:
        header = hdf5._header_reader(str(path), stack) if kind == "bytes" else None
        out: dict[str, hdf5._Dataset | hdf5._RawDataset] = {}
        for name in _datasets(f):
            p = b"/" + name.encode()
            if header is None:
                out[name] = hdf5._Dataset(f.id, p)
            else:
                oi = h5py.h5o.get_info(h5py.h5o.open(f.id, name.encode()))
                out[name] = hdf5._dataset(f.id, p, hdf5._Info(oi.addr, oi.rc, oi.num_attrs), header)
        yield out


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("which", ["early", "latest", "userblock"])
def test_inline_values_are_h5pys(files: dict[str, Path], which: str, kind: str) -> None:  # fmt: skip
    """Compact arrays and arrays inside one oversized chunk are held inline: exactly h5py's
    values in the dataset's dtype (long doubles with their padding zeroed)."""
    res = scan(files[which], kind)
    metas = {m.name: m for m in res.arrays}
    rows: dict[str, list[dict[str, Any]]] = {}
    for r in res.chunks.to_pylist():
        rows.setdefault(r["array"], []).append(r)
    with h5py.File(files[which], "r") as f:
        want = {n for n, ds in _datasets(f).items() if _inline_expected(ds)}
        got = {n for n, rs in rows.items() if any(r["inline"] is not None for r in rs)}
        assert got == want
        for name in sorted(want):
            ds = f[name]
            m = metas[name]
            assert (m.status, m.dtype, m.shape) == ("ok", ds.dtype.str, ds.shape), name
            assert m.np_dtype == ds.dtype, name
            assert m.chunks == tuple(max(s, 1) for s in ds.shape), name
            (r,) = rows[name]
            assert (r["offset"], r["length"]) == (None, None), name
            assert r["inline"] == _values(ds), name


def test_x87_padding_is_zeroed_not_h5pys_memory(files: dict[str, Path]) -> None:
    """The files' long doubles carry padding h5py reads back as stored (so the zeroing is seen)."""
    if not X87:
        pytest.skip("long double is not x87's 80 bits in 16 bytes here")
    with h5py.File(files["early"], "r") as f:
        for name in ("c_ld", "ld_chunk"):
            raw = np.asarray(f[name][()]).view(np.uint8).reshape(-1, 16)
            assert (raw[:, 10:] == np.arange(0xA0, 0xA6)).all(), name


def test_values_the_header_bytes_hold_are_read_without_hdf5(files: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A dataset decoded from its header bytes reads compact values and one full-size unfiltered
    chunk covering the array from the bytes; any other (filtered, never written, a chunk not
    covering the array or stored at another size, an index left empty) through HDF5, once."""
    asked: list[str] = []
    read: dict[str, int] = {}
    raw_read, h5_read = hdf5._RawDataset.read_bytes, hdf5._Dataset.read_bytes

    def spy_raw(self: hdf5._RawDataset) -> bytes:
        before = len(asked)
        out = raw_read(self)
        read[hdf5._text(self.name).lstrip("/")] = len(asked) - before
        return out

    def spy_h5(self: hdf5._Dataset) -> bytes:
        asked.append(hdf5._text(self.name))
        return h5_read(self)

    monkeypatch.setattr(hdf5._RawDataset, "read_bytes", spy_raw)
    monkeypatch.setattr(hdf5._Dataset, "read_bytes", spy_h5)
    hdf5.HDF5Scanner()(str(files["early"]))
    with h5py.File(files["early"], "r") as f:
        dsets = _datasets(f)
        inline = {n for n, ds in dsets.items() if _inline_expected(ds)}
        decoded = {n for n in inline if _bytes_decoded("early", dsets[n])}
        assert set(read) == decoded
        assert {n for n, k in read.items() if k == 0} == {n for n in decoded if _held_by_the_bytes(dsets[n])}
        assert {n for n, k in read.items() if k} == {"shuf", "gz", "unwritten", "shrunk", "longer"}
        assert all(k in (0, 1) for k in read.values())
        assert len(asked) == len(inline) - len(decoded) + sum(read.values())  # the others: once each
        assert "eqdim" in decoded and "coord" in decoded and "c_be" in decoded  # the bytes path was taken


# ------------------------------------------------------------------ chunk index, contiguous storage


def _h5py_chunks(ds: h5py.Dataset) -> list[tuple[tuple[int, ...], int, int, int]]:
    infos = [ds.id.get_chunk_info(i) for i in range(ds.id.get_num_chunks())]
    return sorted((tuple(i.chunk_offset), i.byte_offset, i.size, i.filter_mask) for i in infos)


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("which", ["early", "latest", "userblock"])
def test_chunk_index_is_h5pys(files: dict[str, Path], which: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chunked dataset's index: h5py's chunks (element offsets, addresses, stored sizes,
    filter masks), none for one never written; int64 columns and an int32 mask, (n, ndim). A
    v1 B-tree the header bytes lead to is walked from the bytes (its grid's 2**63 chunks no
    limit), HDF5 not asked; only one with no entry left (its chunk pruned by a shrink), which
    the walk refuses, is HDF5's."""
    walks: list[int] = []
    h5_walk = hdf5._hdf5_chunk_index

    def spy(dsid: Any, ndim: int) -> Any:
        walks.append(ndim)
        return h5_walk(dsid, ndim)

    monkeypatch.setattr(hdf5, "_hdf5_chunk_index", spy)
    with h5py.File(files[which], "r") as f, _objects(files[which], kind) as objs:
        chunked = {n: ds for n, ds in _datasets(f).items() if ds.chunks is not None}
        assert len(chunked) >= (1 if which == "userblock" else 6)
        for name, ds in chunked.items():
            obj = objs[name]
            raw = kind == "bytes" and _bytes_decoded(which, ds)
            assert isinstance(obj, hdf5._RawDataset) == raw, name
            before = len(walks)
            idx = obj.chunk_index()
            assert len(walks) - before == (name == "shrunk" if raw else 1), name
            n, nd = ds.id.get_num_chunks(), len(ds.shape)
            assert (idx.elem.dtype, idx.offsets.dtype, idx.lengths.dtype, idx.masks.dtype) == (
                np.dtype(np.int64), np.dtype(np.int64), np.dtype(np.int64), np.dtype(np.int32)), name  # fmt: skip
            assert (idx.elem.shape, idx.offsets.shape, idx.lengths.shape, idx.masks.shape) == (
                (n, nd), (n,), (n,), (n,)), name  # fmt: skip
            got = sorted(zip(map(tuple, idx.elem.tolist()), idx.offsets.tolist(), idx.lengths.tolist(),
                             idx.masks.tolist(), strict=True))  # fmt: skip
            assert got == _h5py_chunks(ds), name


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("which", ["early", "userblock"])
def test_contiguous_storage_is_h5pys(files: dict[str, Path], which: str, kind: str) -> None:  # fmt: skip
    """A contiguous dataset's (offset, bytes): h5py's ``get_offset``/``get_storage_size``, and
    (None, 0) when nothing is stored (after a user block HDF5's offset of that is not None); its
    one reference is that range, none when never written."""
    res = scan(files[which], kind)
    rows: dict[str, list[tuple[int, int]]] = {}
    for r in res.chunks.to_pylist():
        rows.setdefault(r["array"], []).append((r["offset"], r["length"]))
    with h5py.File(files[which], "r") as f, _objects(files[which], kind) as objs:
        layouts = {n: ds.id.get_create_plist().get_layout() for n, ds in _datasets(f).items()}
        contiguous = {n: f[n] for n, lay in layouts.items() if lay == h5py.h5d.CONTIGUOUS}
        assert {"contig", "contig_unwritten"} <= set(contiguous)
        for name, ds in contiguous.items():
            size = ds.id.get_storage_size()
            want = (ds.id.get_offset(), size) if size else (None, 0)
            assert objs[name].contiguous() == want, name
            assert rows.get(name, []) == ([want] if size else []), name
        if which == "userblock":
            assert f["contig_unwritten"].id.get_offset() is not None  # the case the scanner must not take for data


@pytest.mark.parametrize("kind", PATHS)
def test_compact_data_of_another_size_fails_as_in_hdf5(files: dict[str, Path], kind: str) -> None:  # fmt: skip
    """16 bytes of compact data for 3 elements of 4 bytes: h5py refuses the dataset, and the scan
    fails with HDF5's reason, one line naming the file (never the 16 bytes as 3 values)."""
    path = files["bad_compact"]
    with h5py.File(path, "r") as f, pytest.raises((OSError, KeyError)) as h5err:
        f["c"][()]
    reason = re.search(r"\((.*)\)", str(h5err.value))
    assert reason is not None
    with pytest.raises(ScanError) as err:
        scan(path, kind)
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)
    assert reason.group(1) in str(err.value)

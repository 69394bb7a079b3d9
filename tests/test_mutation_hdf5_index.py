"""The guard against HDF5's unswizzled extensible-array chunk offsets (``_unswizzled_index_reason``),
against HDF5's own files, both ways the scanner reads a dataset: with the object header bytes
(a local file) and without them (the header reader off, as for a remote file). In-process, no
collection (``./dev mutate hdf5``).

HDF5 (2.0.0) reports the chunk offsets of an extensible array index (data layout message
version 4, type 4: exactly one unlimited dimension) with the unlimited dimension still moved
first; with it not first they are other chunks' offsets. Which index HDF5 built is read here
from the dataset's layout message by this file's own parser of the object header (HDF5 gives
the header's address); a file may mix layout versions: one written with libver ``earliest`` or
``v108`` and reopened with ``latest`` gets layout v4 datasets under a superblock 0 or 2, one
written with ``latest`` and reopened with ``earliest`` layout v3 ones under a superblock 3.

Expected: with the header bytes, a dataset is refused exactly when its layout is v4 (or HDF5
2.0's v5, written for filtered datasets) with an extensible array index over one unlimited
dimension that is not the first (a v2 B-tree over one, edited in, is kept); without them,
exactly when it has one unlimited dimension that is not the first (the index type is then
unknown: any superblock can hold a layout v4 dataset). Every other dataset is kept, and each
of its references is the chunk HDF5 reads at the key's element offset: ``read_direct_chunk``'s
bytes equal the file's bytes at the reference (values distinct per element, so a chunk under
another key differs), with h5py's chunk count, filter mask and dtype, compared exactly.
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore.errors import ScanError
from refstore.scan import hdf5

from ._hdf5_paths import scan, scan_path

if TYPE_CHECKING:
    from pathlib import Path

    from refstore.scan._types import ScanResult

PATHS = ("bytes", "hdf5")
EA_REASON = ("chunk index is an extensible array over unlimited dimension {}: HDF5's chunk iteration "
             "reports its chunk offsets wrongly (not swizzled back)")  # fmt: skip
UNKNOWN_REASON = ("unlimited dimension {} is not the first and the chunk index is unknown without the "
                  "object header bytes (HDF5 reports an extensible array's chunk offsets wrongly)")  # fmt: skip
LAYOUT, DATASPACE = 0x08, 0x01

# name -> (shape, maxshape, chunks); values are arange (distinct per element)
SHAPES: dict[str, tuple[tuple[int, ...], tuple[int | None, ...], tuple[int, ...]]] = {
    "last": ((6, 10), (6, None), (3, 3)),  # the unlimited dimension last: extensible array in v4
    "middle": ((4, 5, 6), (4, None, 6), (2, 3, 5)),
    "last3": ((4, 5, 6), (4, 5, None), (2, 3, 5)),
    "first": ((10, 6), (None, 6), (3, 3)),  # first: nothing to swizzle
    "two": ((6, 10), (None, None), (3, 3)),  # two unlimited: a v2 B-tree in v4
    "fixed": ((6, 10), (6, 10), (3, 3)),  # none: a fixed array in v4
    "single": ((6, 10), (6, 10), (6, 10)),  # one chunk, no unlimited: single chunk in v4
    "sparse": ((6, 10), (6, None), (3, 3)),  # only chunk (0, 1) written
}

GZ = ("last", "two", "fixed", "single")


def _create(f: h5py.File, prefix: str) -> None:
    for name, (shape, maxshape, chunks) in SHAPES.items():
        data = np.arange(int(np.prod(shape)), dtype="<i4").reshape(shape)
        if name == "sparse":
            d = f.create_dataset(prefix + name, shape=shape, maxshape=maxshape, chunks=chunks, dtype="<i4")
            d[0:3, 3:6] = data[0:3, 3:6]
        else:
            f.create_dataset(prefix + name, data=data, maxshape=maxshape, chunks=chunks)
    for name in GZ:  # (HDF5 2.0 writes layout v5 for these under the upper bound latest)
        shape, maxshape, chunks = SHAPES[name]
        f.create_dataset(prefix + name + "_gz", data=np.arange(int(np.prod(shape)), dtype="<f8").reshape(shape),
                         maxshape=maxshape, chunks=chunks, compression="gzip")  # fmt: skip


def _write(path: Path, libver: str) -> Path:
    """Datasets ``a_*`` written with ``libver``, ``b_*`` after reopening with the other end of the
    bounds (``latest`` for earliest/v108, ``earliest`` for v110/latest)."""
    with h5py.File(path, "w", libver=libver) as f:
        _create(f, "a_")
    with h5py.File(path, "a", libver="latest" if libver in ("earliest", "v108") else "earliest") as f:
        _create(f, "b_")
    return path


# ------------------------------------------------------------------ the oracle: layout bytes


def _lookup3(data: bytes) -> int:
    """Bob Jenkins' lookup3 ``hashlittle`` with initial value 0 (HDF5's metadata checksum)."""
    mask = 0xFFFFFFFF

    def rot(x: int, k: int) -> int:
        return ((x << k) | (x >> (32 - k))) & mask

    n = len(data)
    v = [(0xDEADBEEF + n) & mask] * 3  # a, b, c
    words = data + bytes(-n % 12)
    i = 0
    while True:
        last = n - i <= 12
        if last and n - i == 0:
            return v[2]
        for j in range(3):
            v[j] = (v[j] + int.from_bytes(words[i + 4 * j : i + 4 * j + 4], "little")) & mask
        i += 12
        if last:
            break
        for x, z, y, k in ((0, 2, 1, 4), (1, 0, 2, 6), (2, 1, 0, 8), (0, 2, 1, 16), (1, 0, 2, 19), (2, 1, 0, 4)):
            v[x] = ((v[x] - v[z]) & mask) ^ rot(v[z], k)  # x -= z; x ^= rot(z, k); z += y
            v[z] = (v[z] + v[y]) & mask
    for x, y, k in ((2, 1, 14), (0, 2, 11), (1, 0, 25), (2, 1, 16), (0, 2, 4), (1, 0, 14), (2, 1, 24)):
        v[x] = ((v[x] ^ v[y]) - rot(v[y], k)) & mask  # x ^= y; x -= rot(y, k)
    return v[2]


def _messages(blob: bytes, addr: int) -> tuple[int, int, list[tuple[int, int, int]]]:
    """(header version, end of the first block (version 2: its checksum included), [(type, body
    start, body size)]) of the object header at ``addr``, first block only (enough here)."""
    if blob[addr : addr + 4] == b"OHDR":
        flags = blob[addr + 5]
        p = addr + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        size = int.from_bytes(blob[p : p + width], "little")
        p += width
        end = p + size
        out = []
        while p + 4 <= end:  # (a gap shorter than a message header may end the block)
            kind, body = blob[p], int.from_bytes(blob[p + 1 : p + 3], "little")
            p += 4 + (2 if flags & 0x04 else 0)
            out.append((kind, p, body))
            p += body
        return 2, end + 4, out  # the checksum after the block
    assert blob[addr] == 1, "object header version 1 or 2"
    size = int.from_bytes(blob[addr + 8 : addr + 12], "little")
    p, end, out = addr + 16, addr + 16 + size, []
    while p + 8 <= end:
        kind, body = struct.unpack_from("<HH", blob, p)
        out.append((kind, p + 8, body))
        p += 8 + body
    return 1, end, out


def _layout(path: Path, name: str) -> bytes:
    with h5py.File(path, "r") as f:
        addr = h5py.h5o.get_info(h5py.h5o.open(f.id, name.encode())).addr
    blob = path.read_bytes()
    _v, _end, msgs = _messages(blob, addr)
    (body,) = [blob[at : at + n] for kind, at, n in msgs if kind == LAYOUT]
    return body


def _index_type(layout: bytes) -> tuple[int, int | None]:
    """(layout message version, chunk index type or None before version 4). HDF5 2.0 writes
    version 5 for a filtered dataset under the upper bound ``latest``: version 4's bytes up to
    the index type (``test_the_files_hold_the_indexes_described`` checks the types it finds)."""
    assert layout[1] == 2, "chunked"
    if layout[0] < 4:
        return layout[0], None
    return layout[0], layout[5 + layout[3] * layout[4]]


def _bt2_one_unlimited(path: Path) -> Path:
    """v2 B-trees (two unlimited dimensions; layout v4, and v5 gzipped) whose dataspaces are then
    edited to one unlimited dimension, the second: HDF5 only builds that index for two or more,
    and reads these (its records keep the chunk offsets, nothing to swizzle). Checksums redone."""
    data = np.arange(60, dtype="<i4").reshape(6, 10)
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("bt2", data=data, maxshape=(None, None), chunks=(3, 3))
        f.create_dataset("bt2_gz", data=data, maxshape=(None, None), chunks=(3, 3), compression="gzip")
        addrs = [h5py.h5o.get_info(h5py.h5o.open(f.id, n)).addr for n in (b"bt2", b"bt2_gz")]
    blob = bytearray(path.read_bytes())
    for addr in addrs:
        version, end, msgs = _messages(bytes(blob), addr)
        assert version == 2
        (at, n) = next((a, m) for kind, a, m in msgs if kind == DATASPACE)
        space = bytes(blob[at : at + n])
        assert space[:4] == bytes([2, 2, 1, 1]) and space[4:] == struct.pack("<QQqq", 6, 10, -1, -1)
        blob[at + 20 : at + 28] = struct.pack("<Q", 6)
        blob[end - 4 : end] = struct.pack("<I", _lookup3(bytes(blob[addr : end - 4])))
    path.write_bytes(bytes(blob))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("h5index")
    out = {lib: _write(d / f"{lib}.h5", lib) for lib in ("earliest", "v108", "v110", "latest")}
    out["bt2edit"] = _bt2_one_unlimited(d / "bt2edit.h5")
    return out


def test_the_files_hold_the_indexes_described(files: dict[str, Path]) -> None:
    """What the cases rest on, from the bytes and HDF5: superblock versions 0, 2, 3, 3; layout v3
    (v1 B-tree) for datasets written under a low bound before v110, v4 after it; in v4 one
    unlimited dimension gives an extensible array (4), two a v2 B-tree (5), none a fixed array
    (3) or, one chunk, a single chunk (1); the edited file's B-tree over one unlimited dimension;
    and HDF5's iteration wrong for an extensible array over a later dimension (what the guard is
    for): the chunk it reports at (0, 3) is not the one it reads there."""
    sbs = {}
    for lib in ("earliest", "v108", "v110", "latest"):
        with h5py.File(files[lib], "r") as f:
            sbs[lib] = f.id.get_create_plist().get_version()[0]
            for name in f:
                version, index = _index_type(_layout(files[lib], name))
                v4 = (lib in ("v110", "latest")) == name.startswith("a_")
                v5 = v4 and name.endswith("gz") and lib != "v110"  # HDF5 2.0's filtered, upper bound latest
                assert version == (5 if v5 else 4 if v4 else 3), (lib, name)
                unlimited = sum(m is None for m in f[name].maxshape)
                single = f[name].chunks == f[name].shape and unlimited == 0
                assert index == ((1 if single else {0: 3, 1: 4}.get(unlimited, 5)) if v4 else None), (lib, name)
    assert sbs == {"earliest": 0, "v108": 2, "v110": 3, "latest": 3}
    assert _index_type(_layout(files["bt2edit"], "bt2")) == (4, 5)
    assert _index_type(_layout(files["bt2edit"], "bt2_gz")) == (5, 5)
    with h5py.File(files["bt2edit"], "r") as f:
        for name in ("bt2", "bt2_gz"):
            assert f[name].maxshape == (6, None)
            assert f[name][...].tobytes() == np.arange(60, dtype="<i4").reshape(6, 10).tobytes()
    with h5py.File(files["latest"], "r") as f:
        ds = f["a_last"]
        reported: dict[tuple[int, ...], int] = {}
        ds.id.chunk_iter(lambda si: reported.__setitem__(tuple(si.chunk_offset), si.byte_offset))
        _mask, want = ds.id.read_direct_chunk((0, 3))
        with open(files["latest"], "rb") as fh:
            assert os.pread(fh.fileno(), len(want), reported[(0, 3)]) != want


# ------------------------------------------------------------------ the scan


def _expected_reason(path: Path, name: str, maxshape: tuple[int | None, ...], kind: str) -> str | None:
    unlimited = [i for i, m in enumerate(maxshape) if m is None]
    if len(unlimited) != 1 or unlimited[0] == 0:
        return None
    if kind == "hdf5":
        return UNKNOWN_REASON.format(unlimited[0])
    return None if _index_type(_layout(path, name))[1] != 4 else EA_REASON.format(unlimited[0])


def _check(path: Path, res: ScanResult, kind: str) -> tuple[int, int]:
    """Every dataset refused or kept as expected; a kept one's references are HDF5's chunks.
    (kept, refused) counts."""
    metas = {m.name: m for m in res.arrays}
    table = res.chunks.to_pydict()
    counts = [0, 0]
    with h5py.File(path, "r") as f, open(path, "rb") as fh:
        assert set(metas) == set(f)
        for name in f:
            ds, meta = f[name], metas[name]
            reason = _expected_reason(path, name, ds.maxshape, kind)
            rows = [i for i, a in enumerate(table["array"]) if a == name]
            assert (meta.status, meta.reason) == (("ok", None) if reason is None else ("unsupported", reason)), name
            assert np.dtype(meta.dtype) == ds.dtype and meta.np_dtype == ds.dtype, name
            assert (meta.shape, meta.chunks) == (ds.shape, ds.chunks), name
            counts[reason is not None] += 1
            if reason is not None:
                assert rows == [], name
                continue
            assert len(rows) == ds.id.get_num_chunks() > 0, name
            keys = set()
            for i in rows:
                key = tuple(table[f"k{d}"][i] for d in range(ds.ndim))
                keys.add(key)
                mask, want = ds.id.read_direct_chunk(tuple(k * c for k, c in zip(key, ds.chunks, strict=True)))
                assert (table["filter_mask"][i], table["length"][i]) == (mask, len(want)), (name, key)
                assert os.pread(fh.fileno(), len(want), table["offset"][i]) == want, (name, key)
            assert len(keys) == len(rows), name
    return counts[0], counts[1]


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("lib", ["earliest", "v108", "v110", "latest"])
def test_extensible_array_over_a_later_dimension_is_refused_every_other_kept_right(
    files: dict[str, Path], lib: str, kind: str
) -> None:
    res = scan(files[lib], kind)
    kept, refused = _check(files[lib], res, kind)
    # layout v4/v5 datasets with one unlimited dimension not first: last, middle, last3, sparse, last_gz
    assert refused == (10 if kind == "hdf5" else 5), (lib, kind)
    assert kept + refused == 2 * (len(SHAPES) + len(GZ))


@pytest.mark.parametrize("kind", PATHS)
def test_a_v2_btree_over_one_unlimited_dimension_is_kept_with_the_header(files: dict[str, Path], kind: str) -> None:
    """Only the index type tells it from an extensible array: kept with the header bytes (its
    references HDF5's chunks), refused without them."""
    res = scan(files["bt2edit"], kind)
    assert _check(files["bt2edit"], res, kind) == ((2, 0) if kind == "bytes" else (0, 2))


def _damaged_layout(path: Path, how: str) -> Path:
    """An extensible array over its second dimension whose layout message is cut to 5 bytes
    (``short``), cut before the index type (``no_index``: 8 bytes here) or made a NIL message
    (``none``); the rest of the block a NIL message, the checksum redone."""
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("d", data=np.arange(60, dtype="<i4").reshape(6, 10), maxshape=(6, None), chunks=(3, 3))
        addr = h5py.h5o.get_info(h5py.h5o.open(f.id, b"d")).addr
    blob = bytearray(path.read_bytes())
    _v, end, msgs = _messages(bytes(blob), addr)
    (at, n) = next((a, m) for kind, a, m in msgs if kind == LAYOUT)
    assert _index_type(bytes(blob[at : at + n])) == (4, 4) and 5 + 3 * 1 == 8 < n
    if how == "none":
        blob[at - 4] = 0
    else:
        keep = 5 if how == "short" else 8
        blob[at - 3 : at - 1] = struct.pack("<H", keep)
        blob[at + keep : at + keep + 4] = bytes([0]) + struct.pack("<H", n - keep - 4) + bytes([0])
    blob[end - 4 : end] = struct.pack("<I", _lookup3(bytes(blob[addr : end - 4])))
    path.write_bytes(bytes(blob))
    return path


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("how", ["short", "no_index", "none"])
def test_a_layout_message_without_an_index_type_is_not_opened(tmp_path: Path, how: str, kind: str) -> None:  # fmt: skip
    """HDF5 opens no dataset whose layout message stops before its index type or is missing, so
    the guard never sees one (its length tests are for such bytes only): the scan fails with
    HDF5's reason in one line, as h5py's open does."""
    path = _damaged_layout(tmp_path / f"{how}.h5", how)
    with h5py.File(path, "r") as f, pytest.raises((KeyError, OSError)) as opened:
        f["d"]
    reason = str(opened.value).strip("'").split("(")[-1].rstrip(")")
    with pytest.raises(ScanError) as scanned:
        scan(path, kind)
    assert "\n" not in str(scanned.value) and str(path) in str(scanned.value), str(scanned.value)
    assert reason in str(scanned.value), (reason, str(scanned.value))


# ------------------------------------------------------------------ the concat coordinate's range


@pytest.fixture(scope="module")
def coord_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A coordinate ``time`` held inline (netCDF4's unlimited 1-D coordinate: chunk 512, shape 3,
    and a compact one) and one read through HDF5 (contiguous)."""
    d = tmp_path_factory.mktemp("h5coord")
    values = np.array([3.5, 4.0, 9.25], "<f8")
    out = {}
    for how in ("oversized", "compact", "contiguous"):
        out[how] = d / f"{how}.h5"
        with h5py.File(out[how], "w", libver="earliest") as f:
            if how == "oversized":
                f.create_dataset("time", data=values, chunks=(512,), maxshape=(None,))
            elif how == "compact":
                cpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                cpl.set_layout(h5py.h5d.COMPACT)
                tid = h5py.h5t.py_create(values.dtype, logical=False)
                h5py.h5d.create(f.id, b"time", tid, h5py.h5s.create_simple(values.shape), cpl).write(
                    h5py.h5s.ALL, h5py.h5s.ALL, values)  # fmt: skip
            else:
                f.create_dataset("time", data=values)
            f.create_dataset("v", data=np.arange(6, dtype="<i2").reshape(3, 2))
    return out


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("how", ["oversized", "compact", "contiguous"])
def test_an_inline_coordinate_is_not_read_again(coord_files: dict[str, Path], how: str, kind: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The concat coordinate's first and last values are h5py's; one held inline is taken from
    the inline bytes (HDF5 not asked for it again), any other read through HDF5 once."""
    looked_up: list[str] = []
    getitem = h5py.Group.__getitem__

    def spy(self: h5py.Group, name: Any) -> Any:
        looked_up.append(name if isinstance(name, str) else repr(name))
        return getitem(self, name)

    with scan_path(kind):
        monkeypatch.setattr(h5py.Group, "__getitem__", spy)
        res = hdf5.HDF5Scanner(concat_dim="time")(str(coord_files[how]))
        monkeypatch.undo()
    with h5py.File(coord_files[how], "r") as f:
        t = f["time"]
        want = (float(t[0]), float(t[-1]))
        inline = t.id.get_create_plist().get_layout() != h5py.h5d.CONTIGUOUS
    assert (res.sort_value, res.sort_last, res.sort_units) == (*want, None)
    assert looked_up.count("time") == (0 if inline else 1), looked_up
    assert inline == (how != "contiguous")

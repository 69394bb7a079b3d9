"""Dense attribute storage read from bytes (``scan/_hdf5_dense.py``), for the mutation run (group
``hdf5-bytes``): over files h5py writes (9 attributes: a name index of one leaf and a heap of one direct
block; 20: a heap whose root is an indirect block; 40: a name index of two levels; 300: an
indirect root of four rows), every
attribute h5py lists is found once, named as h5py names it; every header, node and block field
the module checks, changed one at a time in the bytes it reads, makes it answer None (the
caller then reads the attributes through HDF5: the module's rule for any other form or a
damaged one). Fast: three small files, byte edits in memory."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest

from refstore.scan._hdf5_dense import dense_attributes

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_UNDEF = (1 << 64) - 1


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[bytes, set[str]]]:
    """{attribute count: (file bytes, h5py's attribute names of /d)}."""
    d = tmp_path_factory.mktemp("dense")
    out = {}
    for n in (9, 20, 40, 300):
        p: Path = d / f"a{n}.h5"
        with h5py.File(p, "w", libver="latest") as f:
            ds = f.create_dataset("d", data=np.arange(3))
            for i in range(n):
                ds.attrs[f"attribute_{i:03d}"] = np.float32(i)
        with h5py.File(p) as f:
            names = set(f["d"].attrs.keys())
        out[n] = (p.read_bytes(), names)
    return out


def _one(buf: bytes, sig: bytes) -> int:
    at = [i for i in range(len(buf)) if buf.startswith(sig, i)]
    assert len(at) == 1, (sig, at)
    return at[0]


def _call(
    buf: bytes | bytearray, *, order_index: bool = False, version: int = 0, heap: int | None = None,
    tree: int | None = None,
) -> list[tuple[bytes, bytes]] | None:  # fmt: skip
    """dense_attributes over ``buf`` for an attribute info message naming its heap and name
    index (``order_index``: with the flag and the maximum creation index before them)."""
    heap = _one(bytes(buf), b"FRHP") if heap is None else heap
    tree = _one(bytes(buf), b"BTHD") if tree is None else tree
    info = bytes([version, 1]) + struct.pack("<H", 7) if order_index else bytes([version, 0])
    info += struct.pack("<QQ", heap, tree)
    data = bytes(buf)
    return dense_attributes(lambda a, n: data[a : a + n], info)


def _name(body: bytes) -> str:
    """The name in an attribute message body (versions 1-3, HDF5 file format 4.3.13)."""
    (size,) = struct.unpack_from("<H", body, 2)
    at = 9 if body[0] == 3 else 8
    return body[at : at + size].rstrip(b"\0").decode()


@pytest.mark.parametrize("n", [9, 20, 40, 300])
def test_every_attribute_h5py_lists(files: dict[int, tuple[bytes, set[str]]], n: int) -> None:
    buf, names = files[n]
    got = _call(buf)
    assert got is not None
    assert sorted(_name(body) for _, body in got) == sorted(names)
    # the key part: marker, the record's message flags (none) and creation order, the message
    assert all(key[:3] == b"\xffD\0" and len(key) == 7 + len(body) and key.endswith(body) for key, body in got)
    assert len({key for key, _ in got}) == n
    assert _call(buf, order_index=True) == got


def _put(fmt: str, rel: int, value: int, sig: bytes, nth: int = 0) -> Callable[[bytearray], None]:
    def edit(b: bytearray) -> None:
        at = [i for i in range(len(b)) if b.startswith(sig, i)][nth]
        struct.pack_into(fmt, b, at + rel, value)

    return edit


def _add(fmt: str, rel: int, delta: int, sig: bytes) -> Callable[[bytearray], None]:
    def edit(b: bytearray) -> None:
        at = bytes(b).find(sig)
        (v,) = struct.unpack_from(fmt, b, at + rel)
        struct.pack_into(fmt, b, at + rel, v + delta)

    return edit


@pytest.mark.parametrize("info", [{"version": 1}, {"heap": _UNDEF}, {"tree": _UNDEF}])
def test_another_info_message_is_none(files: dict[int, tuple[bytes, set[str]]], info: dict[str, int]) -> None:
    assert _call(files[9][0], version=info.get("version", 0), heap=info.get("heap"), tree=info.get("tree")) is None


def _record(flags: int = -1, kind: int = -1, offset: int = -1, length: int = -1) -> Callable[[bytearray], None]:
    """The first name record's message flags, heap ID type byte, object offset or length set."""

    def edit(b: bytearray) -> None:
        h = bytes(b).find(b"FRHP")
        (id_len,) = struct.unpack_from("<H", b, h + 5)
        max_heap_bits, max_direct = struct.unpack_from("<H", b, h + 128)[0], struct.unpack_from("<Q", b, h + 120)[0]
        off_size = (max_heap_bits + 7) // 8
        (max_managed,) = struct.unpack_from("<I", b, h + 10)
        len_size = min((max_direct.bit_length() - 1 + 7) // 8, (max_managed.bit_length() - 1) // 8 + 1)
        rec = bytes(b).find(b"BTLF") + 6
        if flags >= 0:
            b[rec + id_len] = flags
        if kind >= 0:
            b[rec] = kind
        if offset >= 0:
            b[rec + 1 : rec + 1 + off_size] = offset.to_bytes(off_size, "little")
        if length >= 0:
            b[rec + 1 + off_size : rec + 1 + off_size + len_size] = length.to_bytes(len_size, "little")

    return edit


def _node_size(extra: int | None) -> Callable[[bytearray], None]:
    """The name index's node size set to what its root's records take (plus ``extra`` bytes;
    None: exactly 1 MiB, the largest read)."""

    def edit(b: bytearray) -> None:
        at = bytes(b).find(b"BTHD")
        (rec,) = struct.unpack_from("<H", b, at + 10)
        (n,) = struct.unpack_from("<H", b, at + 24)
        struct.pack_into("<I", b, at + 6, 1 << 20 if extra is None else 10 + n * rec + extra)

    return edit


@pytest.mark.parametrize("extra", [0, None])
def test_a_name_index_node_of_any_size_holding_its_records(
    files: dict[int, tuple[bytes, set[str]]], extra: int | None
) -> None:
    """A leaf node just large enough for its records, or of 1 MiB: still read, as h5py lists them."""
    buf = bytearray(files[20][0])
    _node_size(extra)(buf)
    got = _call(buf)
    assert got is not None and sorted(_name(body) for _, body in got) == sorted(files[20][1])


def _limits(direct: int, managed: int) -> Callable[[bytearray], None]:
    """The heap's largest direct block size and largest managed object size set: together
    they give the heap ID's length bytes (H5HF_hdr.c: min(bytes of log2(largest direct
    block), bytes encoding the largest object size))."""

    def edit(b: bytearray) -> None:
        at = bytes(b).find(_HEAP)
        struct.pack_into("<I", b, at + 10, managed)
        struct.pack_into("<Q", b, at + 120, direct)

    return edit


def _relaid_heap(width: int, rows: int) -> Callable[[bytearray], None]:
    """The heap's root indirect block laid out again for a doubling table of ``width`` blocks a
    row and ``rows`` rows (file format III.G: a row's blocks are the starting size, twice it
    from the third row on, each at the heap offset the blocks before it end): the same direct
    blocks at the same heap offsets, every other entry undefined; appended at the file's end,
    the header's width, rows and root set."""

    def edit(b: bytearray) -> None:
        h = bytes(b).find(_HEAP)
        old_width, start = struct.unpack_from("<HQ", b, h + 110)
        root, old_rows = struct.unpack_from("<QH", b, h + 132)

        def offsets(w: int, r: int) -> list[int]:
            sizes = [start if i < 2 else start << (i - 1) for i in range(r)]
            out, at = [], 0
            for size in sizes:
                for _ in range(w):
                    out.append(at)
                    at += size
            return out

        old = offsets(old_width, old_rows)
        addrs = dict(zip(old, struct.unpack_from(f"<{len(old)}Q", b, root + 13 + 5), strict=True))
        defined = {o: a for o, a in addrs.items() if a != _UNDEF}
        new = offsets(width, rows)
        assert set(defined) <= set(new)
        block = b"FHIB\0" + struct.pack("<Q", h) + bytes(5)  # heap offset 0 in 40 bits
        block += b"".join(struct.pack("<Q", defined.get(o, _UNDEF)) for o in new) + bytes(4)
        new_root = len(b)
        b += block
        struct.pack_into("<H", b, h + 110, width)
        struct.pack_into("<QH", b, h + 132, new_root, rows)

    return edit


def _heap_bits(bits: int) -> Callable[[bytearray], None]:
    """The heap's maximum size set to 2^``bits`` bytes, and every name record's heap ID written
    again for it (file format III.G: the offset takes ceil(bits / 8) bytes, then the length's
    bytes, the rest zero): the same objects. For the one-leaf index of a heap of one direct
    block (whose offset field is 0 in any width)."""

    def edit(b: bytearray) -> None:
        h = bytes(b).find(_HEAP)
        (id_len,) = struct.unpack_from("<H", b, h + 5)
        (old_bits,) = struct.unpack_from("<H", b, h + 128)
        old_off, new_off = (old_bits + 7) // 8, (bits + 7) // 8
        struct.pack_into("<H", b, h + 128, bits)
        t = bytes(b).find(_TREE)
        (n,) = struct.unpack_from("<H", b, t + 24)
        leaf = bytes(b).find(b"BTLF") + 6
        for i in range(n):
            at = leaf + i * (id_len + 9)
            heap_id = bytes(b[at : at + id_len])
            offset = int.from_bytes(heap_id[1 : 1 + old_off], "little")
            length = int.from_bytes(heap_id[1 + old_off : 1 + old_off + 2], "little")  # 2 length bytes here
            new = bytes([heap_id[0]]) + offset.to_bytes(new_off, "little") + length.to_bytes(2, "little")
            b[at : at + id_len] = new.ljust(id_len, b"\0")

    return edit


def _both(*edits: Callable[[bytearray], None]) -> Callable[[bytearray], None]:
    def edit(b: bytearray) -> None:
        for e in edits:
            e(b)

    return edit


_HEAP = b"FRHP"
_TREE = b"BTHD"
_BROKEN = {
    # the name index's header: version, record type, depth, record size, node size, root, counts
    "tree version": (20, _put("B", 4, 1, _TREE)),
    "tree type": (20, _put("B", 5, 9, _TREE)),
    "tree depth 2": (40, _put("<H", 12, 2, _TREE)),
    "tree record size": (20, _add("<H", 10, 1, _TREE)),
    "tree node size 10": (20, _put("<I", 6, 10, _TREE)),
    "tree node size 1 MiB + 1": (20, _put("<I", 6, (1 << 20) + 1, _TREE)),
    "tree root undefined": (20, _put("<Q", 16, _UNDEF, _TREE)),
    "tree root records 0": (20, _put("<H", 24, 0, _TREE)),
    "tree total + 1 (leaf)": (20, _add("<Q", 26, 1, _TREE)),
    "tree total + 1 (two levels)": (40, _add("<Q", 26, 1, _TREE)),
    "tree root records past its node": (20, _put("<H", 24, 4000, _TREE)),
    "tree node one byte short of its records": (20, _node_size(-1)),
    "leaf signature": (20, _put("B", 0, ord("X"), b"BTLF")),
    "internal node signature": (40, _put("B", 0, ord("X"), b"BTIN")),
    "leaf version": (20, _put("B", 4, 1, b"BTLF")),
    "leaf type": (20, _put("B", 5, 9, b"BTLF")),
    "internal node type": (40, _put("B", 5, 9, b"BTIN")),
    # the fractal heap's header
    "heap version": (20, _put("B", 4, 1, _HEAP)),
    "heap I/O filters": (20, _put("<H", 7, 1, _HEAP)),
    "heap huge tree": (20, _put("<Q", 22, 0, _HEAP)),
    "heap huge size": (20, _put("<Q", 78, 1, _HEAP)),
    "heap huge objects": (20, _put("<Q", 86, 1, _HEAP)),
    "heap tiny size": (20, _put("<Q", 94, 1, _HEAP)),
    "heap tiny objects": (20, _put("<Q", 102, 1, _HEAP)),
    "heap no managed objects": (20, _put("<Q", 70, 0, _HEAP)),
    "heap managed space": (9, _add("<Q", 46, 1, _HEAP)),
    "heap allocated space": (9, _add("<Q", 54, 1, _HEAP)),
    "heap managed space past 64 MiB": (300, _put("<Q", 46, 64 * (1 << 20) + 1, _HEAP)),
    "heap width 0": (20, _put("<H", 110, 0, _HEAP)),
    "heap start block 0": (20, _put("<Q", 112, 0, _HEAP)),
    "heap max direct below start": (20, _put("<Q", 120, 256, _HEAP)),
    "heap max direct past 1 MiB": (20, _put("<Q", 120, 1 << 21, _HEAP)),
    "heap root undefined": (20, _put("<Q", 132, _UNDEF, _HEAP)),
    "heap rows 65": (300, _put("<H", 140, 65, _HEAP)),
    "heap id length": (20, _put("<H", 5, 2, _HEAP)),
    # heap IDs of 8 bytes cannot hold 1 + 5 offset + 3 length bytes: min(3, 3), min(3, 4)
    "heap ID too short for 3 length bytes (objects of 64 KiB)": (9, _limits(1 << 17, 1 << 16)),
    "heap ID too short for 3 length bytes (objects of 16 MiB)": (9, _limits(1 << 17, 1 << 24)),
    "table of 4097 blocks a row": (20, _relaid_heap(4097, 1)),
    "a third row's blocks past the largest direct block": (20, _both(_relaid_heap(4, 3),
                                                                     _put("<Q", 120, 1024, _HEAP))),
    # name records
    "record of a shared message": (9, _record(flags=2)),
    "record of a huge object": (9, _record(kind=0x10)),
    "record past every block": (9, _record(offset=60000)),
    "record of 4 bytes past every block": (9, _record(offset=60000, length=4)),
    "record of length 0": (9, _record(length=0)),
    "record past its block's end": (9, _record(length=1000)),
    # blocks
    "direct block signature": (9, _put("B", 0, ord("X"), b"FHDB")),
    "direct block version": (20, _put("B", 4, 1, b"FHDB")),
    "direct block heap address": (9, _add("<Q", 5, 1, b"FHDB")),
    "direct block offset": (20, _put("B", 13, 1, b"FHDB")),
    "second direct block offset": (300, _put("B", 13, 7, b"FHDB", 1)),
    "indirect block signature": (300, _put("B", 0, ord("X"), b"FHIB")),
    "indirect block version": (300, _put("B", 4, 1, b"FHIB")),
    "indirect block heap address": (300, _add("<Q", 5, 1, b"FHIB")),
    "indirect block offset": (300, _put("B", 13, 1, b"FHIB")),
}


@pytest.mark.parametrize("case", sorted(_BROKEN))
def test_any_other_or_damaged_form_is_none(files: dict[int, tuple[bytes, set[str]]], case: str) -> None:
    n, edit = _BROKEN[case]
    buf = bytearray(files[n][0])
    edit(buf)
    assert _call(buf) is None


def _names(got: list[tuple[bytes, bytes]] | None) -> list[str]:
    assert got is not None
    return sorted(_name(body) for _, body in got)


def _heap_field(fmt: str, rel: int, value: Callable[[bytes, int], int]) -> Callable[[bytearray], None]:
    """The fractal heap header's field at ``rel`` set to ``value(file, header offset)``."""

    def edit(b: bytearray) -> None:
        at = bytes(b).find(_HEAP)
        struct.pack_into(fmt, b, at + rel, value(bytes(b), at))

    return edit


_SAME = {
    # a heap whose root is one direct block reads no doubling-table row: its width is not used
    "table width 1 (direct root)": (9, _heap_field("<H", 110, lambda b, h: 1)),
    # heap IDs of other offset widths: 3 bytes (17 bits), 2 bytes (16 bits)
    "heap of 17 bits": (9, _heap_bits(17)),
    "heap of 16 bits": (9, _heap_bits(16)),
    "largest direct block 1 MiB": (9, _heap_field("<Q", 120, lambda b, h: 1 << 20)),
    # the heap ID's length bytes: min(2, 2), min(3, 2), min(3, 2), min(2, 4), min(2, 1) (no
    # object here is 256 bytes long: one byte holds every length)
    "largest direct block 128 KiB": (9, _limits(1 << 17, 4096)),
    "largest direct block 128 KiB, objects of 16 KiB": (9, _limits(1 << 17, 1 << 14)),
    "largest direct block 64 KiB, objects of 64 KiB - 1": (9, _limits(1 << 16, (1 << 16) - 1)),
    "largest objects 16 MiB": (9, _limits(1 << 16, 1 << 24)),
    "largest objects 255 bytes": (9, _limits(1 << 16, 255)),
    # the managed space's bound is inclusive
    "managed space 64 MiB (indirect root)": (20, _heap_field("<Q", 46, lambda b, h: 64 << 20)),
    # the same blocks in a doubling table of another width or more rows
    "table of 4096 blocks a row": (20, _relaid_heap(4096, 1)),
    "table of 2 rows": (20, _relaid_heap(4, 2)),
    "table of 1 block a row, 2 rows": (20, _relaid_heap(1, 2)),
    # the largest direct block as large as the starting one (both 1 KiB): the root block is
    # read, and the heap ID's length bytes stay two (min of 10 bits and the 4 KiB objects)
    "largest direct block = starting block (direct root)": (9, _heap_field("<Q", 120, lambda b, h: 1024)),
    "largest direct block = starting block (indirect root of one row)": (20, _heap_field("<Q", 120, lambda b, h: 1024)),
}


@pytest.mark.parametrize("case", sorted(_SAME))
def test_a_heap_of_another_legal_shape_reads_as_h5py_lists(files: dict[int, tuple[bytes, set[str]]], case: str) -> None:
    """Doubling-table fields edited to other legal values for the same blocks: every attribute
    h5py lists in the unedited file is still found (the fields only bound what is read)."""
    n, edit = _SAME[case]
    buf = bytearray(files[n][0])
    edit(buf)
    assert _names(_call(buf)) == sorted(files[n][1])


def _records(buf: bytes) -> list[bytes]:
    """Every record of the file's two-level name index (h5py writes one-byte child counts:
    leaves of 512 bytes hold 29 records), in key order: leaf, root record, leaf, ..."""
    t = buf.find(_TREE)
    (rec,) = struct.unpack_from("<H", buf, t + 10)
    root, n_root = struct.unpack_from("<QH", buf, t + 16)
    assert buf[root : root + 6] == b"BTIN\0\x08"
    at = root + 6 + n_root * rec
    out: list[bytes] = []
    for i in range(n_root + 1):
        (child,) = struct.unpack_from("<Q", buf, at + 9 * i)
        count = buf[at + 9 * i + 8]
        assert buf[child : child + 6] == b"BTLF\0\x08"
        out += [buf[child + 6 + k * rec : child + 6 + (k + 1) * rec] for k in range(count)]
        if i < n_root:
            out.append(buf[root + 6 + i * rec : root + 6 + (i + 1) * rec])
    return out


def _child_counts(buf: bytes) -> list[int]:
    """The record counts of the root's children in h5py's two-level index (one byte each)."""
    t = buf.find(_TREE)
    root, n_root = struct.unpack_from("<QH", buf, t + 16)
    at = root + 6 + n_root * 17
    return [buf[at + 9 * i + 8] for i in range(n_root + 1)]


def _relaid_index(buf: bytearray, node_size: int, counts: list[int] | None = None, width: int | None = None) -> int:
    """Lay the file's two-level name index out again, as HDF5 would for nodes of ``node_size``
    bytes: the same records in the same key order, in leaves of ``counts`` records (default: the
    file's) with one root record between neighbours, each leaf and the internal root appended
    at the file's end one byte apart (odd addresses), the header's node size, root and root
    record count set. A child's record count takes as many bytes as the largest count a leaf of
    that size holds needs (file format 4.3.3, "Number of Records for Child Node": the leaf
    capacity is (node size - 10) / record size, the 10 being signature, version, type and
    checksum), or ``width`` bytes. Returns that width."""
    t = bytes(buf).find(_TREE)
    records = _records(bytes(buf))
    counts = _child_counts(bytes(buf)) if counts is None else counts
    assert sum(counts) + len(counts) - 1 == len(records)
    capacity = (node_size - 10) // 17
    if width is None:
        width = (capacity.bit_length() + 7) // 8  # bytes holding any count up to the capacity
    leaves, between, at = [], [], 0
    for i, count in enumerate(counts):
        buf += b"\0"
        leaves.append((len(buf), count))
        buf += b"BTLF\0\x08" + b"".join(records[at : at + count]) + bytes(4)  # records, a checksum's place
        at += count
        if i < len(counts) - 1:
            between.append(records[at])
            at += 1
    buf += b"\0"
    root = len(buf)
    buf += b"BTIN\0\x08" + b"".join(between)
    buf += b"".join(struct.pack("<Q", addr) + count.to_bytes(width, "little") for addr, count in leaves) + bytes(4)
    struct.pack_into("<I", buf, t + 6, node_size)
    struct.pack_into("<QH", buf, t + 16, root, len(between))
    return width


@pytest.mark.parametrize(
    ("leaf_capacity", "pad", "width"),
    [
        (29, 2, 1),  # h5py's 512-byte nodes, as written
        (0, 0, 1),  # 0: a capacity of exactly the fullest leaf (a node of 10 + its records)
        (100, 0, 1),  # capacity of 7 bits
        (255, 8, 1),  # the largest one-byte capacity, the node 8 bytes past its 255 records
        (256, 0, 2),  # the smallest two-byte capacity, the node exactly 256 records long
    ],
)
def test_a_two_level_index_of_larger_nodes_reads_as_h5py_lists(
    files: dict[int, tuple[bytes, set[str]]], leaf_capacity: int, pad: int, width: int
) -> None:
    """The child counts of an internal node are as wide as the leaf capacity needs: the 40- and
    300-attribute files' name index laid out again for nodes of other sizes still lists every
    attribute h5py lists, once; read with the count one byte narrower or wider, the children
    misparse (None)."""
    for n in (40, 300):
        size = 10 + 17 * (leaf_capacity or max(_child_counts(files[n][0]))) + pad
        buf = bytearray(files[n][0])
        assert _relaid_index(buf, size) == width
        got = _call(buf)
        assert _names(got) == sorted(files[n][1]) and len(got or []) == n
        for wrong in (width - 1, width + 1):
            if wrong:
                buf = bytearray(files[n][0])
                _relaid_index(buf, size, width=wrong)
                assert _call(buf) is None, wrong


@pytest.mark.parametrize(("counts", "capacity", "same"), [
    ([1, 38], 38, True),  # a leaf of one record
    ([38, 1], 38, True),
    ([0, 39], 39, False),  # an empty leaf: HDF5 never leaves one
    ([19, 20], 19, False),  # a leaf of more records than its node holds
])  # fmt: skip
def test_leaves_of_other_counts(files: dict[int, tuple[bytes, set[str]]], counts: list[int], capacity: int,
                                same: bool) -> None:  # fmt: skip
    """The 40 records of the two-level index split otherwise between two leaves (and the root
    record between them): every attribute h5py lists, or None for a leaf that is empty or over
    its node's capacity."""
    buf = bytearray(files[40][0])
    _relaid_index(buf, 10 + 17 * capacity, counts)
    got = _call(buf)
    if same:
        assert _names(got) == sorted(files[40][1])
    else:
        assert got is None

"""Attribute messages kept in dense storage (an object with more attributes than its header
holds compactly: netCDF-4 variables with a dozen attributes), read from the file's bytes.

HDF5 keeps them as objects of a fractal heap, indexed by name in a version 2 B-tree (record
type 8: heap ID, message flags, creation order, name hash) named by the object's attribute info
message. Only the simple forms are read: a heap without I/O filters holding only managed
objects whose root is one direct block, or an indirect block whose rows are all direct
blocks, and a name index of one or two levels (a leaf, or an internal root over leaves).
Anything else (nested indirect blocks, huge or tiny objects, shared attribute messages, a
B-tree of three levels or more, a size or signature that does not hold together) is None: the
caller then reads the attributes through HDF5. Pure parsing over a ``read(address, size)`` function.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["dense_attributes"]

_UNDEFINED = (1 << 64) - 1
_MAX_BLOCK = 1 << 20  # bytes: a larger root block (or a damaged size) is left to HDF5
_SHARED = 0x02  # message flag: a shared attribute message (only a heap ID in the record)


def dense_attributes(read: Callable[[int, int], bytes], info: bytes) -> list[tuple[bytes, bytes]] | None:
    """(key part, attribute message body) of every attribute of the dense storage named by
    the attribute info message ``info``, in the name index's order; the key part is the
    record's message flags and creation order and the message itself, so equal key parts
    mean equal attributes (order included). None when the storage is not in the simple form
    this module reads (module doc)."""
    try:
        flags = info[1]
        at = 2 + (2 if flags & 0x01 else 0)
        heap, names = struct.unpack_from("<QQ", info, at)
        if info[0] != 0 or heap == _UNDEFINED or names == _UNDEFINED:
            return None
        found = _heap_blocks(read, heap)
        if found is None:
            return None
        blocks, id_len, off_size, len_size = found
        records = _leaf_records(read, names, id_len + 9)
        if records is None:
            return None
        out: list[tuple[bytes, bytes]] = []
        for rec in records:
            heap_id, mflags = rec[:id_len], rec[id_len]
            if mflags & _SHARED or heap_id[0] != 0:  # shared message, or not a managed object (version 0)
                return None
            offset = int.from_bytes(heap_id[1 : 1 + off_size], "little")
            length = int.from_bytes(heap_id[1 + off_size : 1 + off_size + len_size], "little")
            body = b""
            for start, data in blocks:
                if start <= offset < start + len(data):
                    body = data[offset - start : offset - start + length]
                    break
            if length == 0 or len(body) != length:
                return None
            out.append((b"\xffD" + rec[id_len : id_len + 5] + body, body))
        return out
    except (struct.error, IndexError, ValueError, OSError):
        return None


def _heap_blocks(read: Callable[[int, int], bytes], heap: int) -> tuple[list[tuple[int, bytes]], int, int, int] | None:
    """(direct blocks as (heap offset, bytes from the block's start), heap ID length, heap ID
    offset bytes, heap ID length bytes) of an unfiltered fractal heap of managed objects only
    whose root is a direct block, or an indirect block all of whose rows are direct blocks;
    None otherwise."""
    h = read(heap, 160)
    if h[:4] != b"FRHP" or h[4] != 0:
        return None
    id_len, filter_len = struct.unpack_from("<HH", h, 5)
    (max_managed,) = struct.unpack_from("<I", h, 10)
    # next huge ID, huge B-tree, free space, free-space manager, managed space, allocated
    # managed space, allocation iterator, managed / huge size / huge / tiny size / tiny objects
    (_next_huge, huge_tree, _free, _fsm, managed, allocated, _iter, n_managed, huge_size, n_huge, tiny_size,
     n_tiny) = struct.unpack_from("<12Q", h, 14)  # fmt: skip
    width, start_size, max_direct, max_heap_bits, _start_rows, root, rows = struct.unpack_from("<HQQHHQH", h, 110)
    if filter_len or n_huge or huge_size or n_tiny or tiny_size or huge_tree != _UNDEFINED or root == _UNDEFINED:
        return None
    if width == 0 or n_managed == 0 or not 0 < start_size <= max_direct <= _MAX_BLOCK or managed > 64 * _MAX_BLOCK:
        return None
    if width * rows > 4096 or rows > 64:
        return None  # more blocks than attributes ever need (or a damaged header)
    off_size = (max_heap_bits + 7) // 8
    direct_bits = max_direct.bit_length() - 1  # log2 of a power of two
    len_size = min((direct_bits + 7) // 8, (max_managed.bit_length() - 1) // 8 + 1)  # H5HF_hdr's heap_len_size
    if id_len < 1 + off_size + len_size:
        return None
    places: list[tuple[int, int, int]] = []  # (address, heap offset, size)
    if rows == 0:  # the root is one direct block
        if managed != start_size or allocated != start_size:
            return None
        places.append((root, 0, start_size))
    else:
        sizes = [start_size if r < 2 else start_size << (r - 1) for r in range(rows)]
        if sizes[-1] > max_direct:
            return None  # rows of indirect blocks
        ib = read(root, 5 + 8 + off_size + 8 * width * rows)
        if ib[:4] != b"FHIB" or ib[4] != 0 or struct.unpack_from("<Q", ib, 5)[0] != heap:
            return None
        if int.from_bytes(ib[13 : 13 + off_size], "little") != 0:
            return None
        at, offset = 13 + off_size, 0
        for size in sizes:
            for _ in range(width):
                (addr,) = struct.unpack_from("<Q", ib, at)
                if addr != _UNDEFINED:
                    places.append((addr, offset, size))
                at += 8
                offset += size
    blocks: list[tuple[int, bytes]] = []
    for addr, offset, size in places:
        data = read(addr, size)
        if len(data) != size or data[:4] != b"FHDB" or data[4] != 0 or struct.unpack_from("<Q", data, 5)[0] != heap:
            return None
        if int.from_bytes(data[13 : 13 + off_size], "little") != offset:
            return None
        blocks.append((offset, data))
    return blocks, id_len, off_size, len_size


def _leaf_records(read: Callable[[int, int], bytes], tree: int, record_size: int) -> list[bytes] | None:
    """The records of a version 2 B-tree of attribute names (type 8) of depth 0 (a leaf) or 1
    (an internal root over leaves), in key order."""
    h = read(tree, 38)
    if h[:4] != b"BTHD" or h[4] != 0 or h[5] != 8:
        return None
    node_size, rec_size, depth = struct.unpack_from("<IHH", h, 6)
    root, n_root, total = struct.unpack_from("<QHQ", h, 16)
    if depth > 1 or rec_size != record_size or root == _UNDEFINED or n_root == 0 or not 10 < node_size <= _MAX_BLOCK:
        return None
    if 10 + n_root * rec_size > node_size:
        return None  # more records than its node holds: damaged
    if depth == 0:
        leaf = _node(read, root, b"BTLF", n_root * rec_size)
        if leaf is None or n_root != total:
            return None
        return [leaf[i * rec_size : (i + 1) * rec_size] for i in range(n_root)]
    max_leaf = (node_size - 10) // rec_size  # records a leaf holds: 4 signature, 2 version/type, 4 checksum
    count_size = (max_leaf.bit_length() - 1) // 8 + 1  # H5VM_limit_enc_size
    node = _node(read, root, b"BTIN", n_root * rec_size + (n_root + 1) * (8 + count_size))
    if node is None:
        return None
    out: list[bytes] = []
    at = n_root * rec_size
    for i in range(n_root + 1):
        (child,) = struct.unpack_from("<Q", node, at)
        count = int.from_bytes(node[at + 8 : at + 8 + count_size], "little")
        at += 8 + count_size
        leaf = _node(read, child, b"BTLF", count * rec_size) if 0 < count <= max_leaf else None
        if leaf is None:
            return None
        out.extend(leaf[k * rec_size : (k + 1) * rec_size] for k in range(count))
        if i < n_root:
            out.append(node[i * rec_size : (i + 1) * rec_size])
    return out if len(out) == total else None


def _node(read: Callable[[int, int], bytes], addr: int, signature: bytes, size: int) -> bytes | None:
    """The ``size`` bytes after the prefix (signature, version 0, type 8) of a B-tree node."""
    data = read(addr, 6 + size)
    if len(data) != 6 + size or data[:4] != signature or data[4] != 0 or data[5] != 8:
        return None
    return data[6:]

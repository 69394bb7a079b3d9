"""A dataset's storage read from its header bytes and its chunk B-tree walked from the file's
bytes (``scan/_hdf5_layout.py``) must equal what h5py reports, field by field: dtype (exactly),
shape, chunk shape, fill value bytes, filters (id, flags, client values, name), layout,
contiguous address and size, compact bytes, and every chunk of the index (offset in elements,
file address, stored size, filter mask, in ``chunk_iter``'s order) against h5py's
``get_chunk_info`` and ``chunk_iter``; on every HDF5 file in ../shared/data, the header-case
files (``fixtures/hdf5_headers.py``) and the chunk-index files (``fixtures/hdf5_chunks.py``).
Where the bytes path declines (None), the scanner asks HDF5: those cases are counted and the
ones it must decode are asserted decoded. A whole scan through the bytes path equals the same
scan with the bytes path switched off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore.fixtures import hdf5_chunks, hdf5_headers
from refstore.scan._hdf5_header import HeaderReader
from refstore.scan._hdf5_layout import CHUNKED, COMPACT, CONTIGUOUS, chunk_index, decode_dataset

from .conftest import hdf5_files_in_shared

if TYPE_CHECKING:
    from pathlib import Path

FILES = hdf5_files_in_shared()


def _h5py_chunks(h: h5py.Dataset) -> list[tuple[tuple[int, ...], int, int, int]]:
    """(chunk offset, address, size, filter mask) per chunk from ``chunk_iter`` (whose order
    the scanner keeps), checked against ``get_chunk_info`` at up to 100 indices spread over the
    index (HDF5 walks the index from its start for each: all of them would be quadratic)."""
    n = h.id.get_num_chunks()
    by_iter: list[tuple[tuple[int, ...], int, int, int]] = []
    if n:
        h.id.chunk_iter(lambda si: by_iter.append((tuple(si.chunk_offset), si.byte_offset, si.size, si.filter_mask)))
    assert len(by_iter) == n
    for i in sorted({*np.linspace(0, n - 1, min(n, 100)).astype(int).tolist()}) if n else []:
        si = h.id.get_chunk_info(i)
        assert by_iter[i] == (tuple(si.chunk_offset), si.byte_offset, si.size, si.filter_mask)
    return by_iter


def check_file(path: Path) -> dict[str, str]:
    """Compare every dataset's bytes-path reading with h5py; name -> "decoded" / "declined"
    (and "index declined" when the storage was decoded but the chunk B-tree was not walked)."""
    out: dict[str, str] = {}
    with HeaderReader(str(path)) as header, h5py.File(path, "r") as f:
        found: list[tuple[str, int]] = []
        h5py.h5o.visit(f.id, lambda n, i: found.append((n.decode(), i.addr)) if i.type == h5py.h5o.TYPE_DATASET
                       else None, info=True)  # fmt: skip
        for name, addr in found:
            messages = header.messages(addr)
            raw = decode_dataset(messages) if messages is not None else None
            if raw is None:
                out[name] = "declined"
                continue
            h = f[name]
            what = f"{path.name}:{name}"
            dcpl = h.id.get_create_plist()
            assert raw.dtype == h.dtype and raw.dtype.str == h.dtype.str, what
            assert raw.dtype.metadata == h.dtype.metadata, what
            assert raw.shape == h.shape, what
            assert raw.fill == np.array([h.fillvalue], h.dtype).tobytes(), what
            assert raw.layout == dcpl.get_layout(), what
            filters = [dcpl.get_filter(i) for i in range(dcpl.get_nfilters())]
            assert [(x.code, x.flags, x.values, x.name) for x in raw.filters] == [
                (c, fl, tuple(int(v) for v in vals), nm) for c, fl, vals, nm in filters
            ], what
            assert dcpl.get_external_count() == 0, what
            if raw.layout == CONTIGUOUS:
                offset = h.id.get_offset()
                assert raw.address == offset, what
                if offset is not None:
                    assert raw.size == h.id.get_storage_size(), what
            elif raw.layout == COMPACT:
                assert raw.compact == np.ascontiguousarray(h[()]).tobytes(), what
            else:
                assert raw.layout == CHUNKED and raw.chunks == h.chunks, what
                expected = _h5py_chunks(h)
                if raw.address is None:
                    assert expected == [], what
                else:
                    grid = [-(-s // c) for s, c in zip(raw.shape, raw.chunks, strict=True)]
                    index = chunk_index(header.read, raw.address, len(raw.shape), int(np.prod(grid, dtype=object)))
                    if index is None:
                        out[name] = "index declined"
                        continue
                    got = [(tuple(int(v) for v in e), int(o), int(s), int(m)) for e, o, s, m in
                           zip(index.elem, index.offsets, index.lengths, index.masks, strict=True)]  # fmt: skip
                    assert got == expected, what
                    assert index.elem.dtype == np.int64 and index.masks.dtype == np.int32, what
            out[name] = "decoded"
    return out


def _btree_levels(path: Path, name: str) -> int:
    """The root level of a dataset's chunk B-tree, from the layout message (test's own parse)."""
    with HeaderReader(str(path)) as header, h5py.File(path, "r") as f:
        addr = h5py.h5o.get_info(f[name].id).addr
        messages = header.messages(addr)
        assert messages is not None
        body = next(b for kind, _fl, _raw, b in messages if kind == 0x08)
        root = int.from_bytes(body[3:11], "little")
        return header.read(root, 8)[5]


@pytest.fixture(scope="module")
def chunk_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return hdf5_chunks.write_all(tmp_path_factory.mktemp("chunks"))


@pytest.fixture(scope="module")
def header_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return hdf5_headers.write_all(tmp_path_factory.mktemp("headers"))


# what the bytes path must decode (not decline) in the generated files
MUST_DECODE = {
    "many_1d_earliest": {"x", "z"},
    "many_2d": {"y"},
    "deep": {"deep"},
    "dims": {"d1", "d2", "d3", "d4", "one"},
    "masks": {"m", "s"},
    "netcdf4": {"time", "lat", "lon", "sst", "flat", "part"},
    "h5netcdf": {"v", "x"},
    "layouts_earliest": {
        "compact", "contig", "unwritten", "unwritten_chunked", "empty", "scalar", "resized", "scaleoffset",
        "oversized", "oversized_2d", "fill_never",
    },
}
# what it must leave to HDF5 (a form it does not know exactly)
MUST_DECLINE = {
    "many_1d_latest": {"x", "z"},  # data layout version 4 (HDF5 1.10's chunk indexes)
    "dtypes_earliest": {"fixed", "vlen", "enum", "compound", "bool", "longdouble"},
    "layouts_earliest": {"external"},
}


@pytest.mark.parametrize("case", list(hdf5_chunks.CASES))
def test_chunk_index_files_equal_h5py(chunk_files: dict[str, Path], case: str) -> None:
    got = check_file(chunk_files[case])
    assert got, case
    decoded = {n for n, v in got.items() if v == "decoded"}
    declined = {n for n, v in got.items() if v != "decoded"}
    assert MUST_DECODE.get(case, set()) <= decoded, (case, got)
    assert MUST_DECLINE.get(case, set()) & set(got) <= declined, (case, got)
    if case == "dtypes_earliest":  # every integer and IEEE float dtype, both byte orders, chunked and not
        assert {n for n in got if n.startswith(("c_", "t_"))} <= decoded and len(decoded) >= 44, got


def test_btrees_of_several_levels_are_walked(chunk_files: dict[str, Path]) -> None:
    """The generated files do hold B-trees of two and three levels (root levels 1 and 2)."""
    assert _btree_levels(chunk_files["many_1d_earliest"], "x") >= 1
    assert _btree_levels(chunk_files["many_2d"], "y") >= 1
    assert _btree_levels(chunk_files["deep"], "deep") == 2


@pytest.mark.parametrize("case", [*hdf5_headers.CASES, *hdf5_headers.NETCDF_CASES])
def test_header_case_files_equal_h5py(header_files: dict[str, Path], case: str) -> None:
    if case not in header_files:
        pytest.skip("HDF5's low-level calls are not reachable here (fixtures/hdf5_headers.py)")
    check_file(header_files[case])


@pytest.mark.skipif(not FILES, reason="../shared/data is not present")
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_files_equal_h5py(path: Path) -> None:
    check_file(path)


def test_shared_files_are_mostly_decoded() -> None:
    """The bytes path is the common path on the shared files (not declined everywhere)."""
    if not FILES:
        pytest.skip("../shared/data is not present")
    states = [v for p in FILES for v in check_file(p).values()]
    assert states.count("decoded") >= len(states) // 2, states


def _scan(path: Path, monkeypatch: pytest.MonkeyPatch | None) -> Any:
    from refstore.scan import _hdf5_header
    from refstore.scan import hdf5 as scanner

    scanner._ATTR_CACHE._got.clear()
    _hdf5_header._HEADERS.clear()  # parses are kept by content across files: start afresh
    if monkeypatch is not None:
        monkeypatch.setattr(scanner, "decode_dataset", lambda messages: None)
        monkeypatch.setattr(scanner, "chunk_index", lambda *a: None)
    return scanner.HDF5Scanner(concat_dim="time")(str(path))


@pytest.mark.parametrize("case", ["netcdf4", "h5netcdf", "dims", "masks", "layouts_earliest", "dtypes_earliest",
                                  "many_2d"])  # fmt: skip
def test_scan_through_bytes_equals_scan_through_hdf5(chunk_files: dict[str, Path], case: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    fast = _scan(chunk_files[case], None)
    with monkeypatch.context() as m:
        slow = _scan(chunk_files[case], m)
    assert fast.arrays == slow.arrays and fast.groups == slow.groups
    assert fast.chunks.equals(slow.chunks)
    assert (fast.sort_value, fast.sort_last, fast.sort_units) == (slow.sort_value, slow.sort_last, slow.sort_units)


def test_a_tree_holding_more_chunks_than_the_grid_is_left_to_hdf5(chunk_files: dict[str, Path]) -> None:
    """A B-tree with more chunks than the array's grid has (damaged, or a hostile loop of
    children) is not walked to its end: None, and the scanner asks HDF5."""
    path = chunk_files["many_2d"]
    with HeaderReader(str(path)) as header, h5py.File(path, "r") as f:
        messages = header.messages(h5py.h5o.get_info(f["y"].id).addr)
        assert messages is not None
        raw = decode_dataset(messages)
        assert raw is not None and raw.address is not None
        n = f["y"].id.get_num_chunks()
        assert chunk_index(header.read, raw.address, 2, n - 1) is None
        got = chunk_index(header.read, raw.address, 2, n)
        assert got is not None and len(got.offsets) == n


def _continued(path: Path, libver: str, mark: bytes) -> Path:
    """A dataset whose attributes, added after its creation, grow its header a continuation
    block; the last one is ``mark``."""
    with h5py.File(path, "w", libver=libver) as f:
        d = f.create_dataset("d", data=np.arange(4, dtype="<i4"), chunks=(2,))
        for i in range(6):
            d.attrs[f"a{i}"] = np.float64(i)
        d.attrs["mark"] = np.bytes_(mark)
    return path


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_a_header_parse_is_reused_only_when_its_continuation_blocks_are_equal(tmp_path: Path, libver: str) -> None:
    """Two files whose dataset header has the same first block but a continuation block that
    differs (an attribute value of the same length): the second file's parse is its own, and
    each file's recorded attributes equal h5py's reading of it."""
    from refstore.scan import _hdf5_header
    from refstore.scan import hdf5 as scanner

    a = _continued(tmp_path / "a.h5", libver, b"VALUE_A")
    b = _continued(tmp_path / "b.h5", libver, b"VALUE_B")
    _hdf5_header._HEADERS.clear()
    with HeaderReader(str(a)) as ha, HeaderReader(str(b)) as hb, h5py.File(a, "r") as f:
        addr = h5py.h5o.get_info(f["d"].id).addr
        first = ha.header(addr)
        kept = len(_hdf5_header._HEADERS)
        second = hb.header(addr)
        assert first is not None and second is not None and first.continuations  # a continuation block
        assert len(_hdf5_header._HEADERS) == kept  # the same first block: the same key, looked up and refused
        assert first is not second and first.messages != second.messages
    _hdf5_header._HEADERS.clear()
    scanner._ATTR_CACHE._got.clear()
    for path, want in ((a, "VALUE_A"), (b, "VALUE_B"), (a, "VALUE_A")):
        with h5py.File(path, "r") as f:
            assert f["d"].attrs["mark"] == want.encode()
        got = {m.name: m for m in scanner.HDF5Scanner()(str(path)).arrays}
        assert got["d"].attrs["mark"]["value"] == want

"""Chunk decoding (``read/decode.py``) against the format libraries, chunk by chunk.

Every stored chunk of files h5py and tifffile write is fetched raw (h5py ``read_direct_chunk``,
the TIFF segment's bytes) and decoded by refstore's ``ChunkDecoder``; the result must equal what
h5py reads for that chunk's region, or tifffile's ``page.asarray()`` there, with the stored dtype
(byte order included). Written for the mutation run (``./dev mutate decode``): each case pins a
branch of the decoder (fast path, filter mask, short last strip, predictors, byte order).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore.read.decode import ChunkDecoder, make_decoder
from refstore.scan._hdf5_codecs import filters_to_codecs

if TYPE_CHECKING:
    from pathlib import Path

RNG = np.random.default_rng(12)


def _data(dtype: str, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (RNG.standard_normal(shape) * 1000).astype(dt)
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max, shape, endpoint=True, dtype=dt.newbyteorder("=")).astype(dt)


def _hdf5_filters() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("none", {}),
        ("gzip", {"compression": "gzip", "compression_opts": 4}),
        ("shuffle", {"shuffle": True}),
        ("shuffle-gzip", {"compression": "gzip", "shuffle": True}),
        ("fletcher32", {"fletcher32": True}),
        ("shuffle-gzip-fletcher32", {"compression": "gzip", "shuffle": True, "fletcher32": True}),
    ]
    if h5py.h5z.filter_avail(h5py.h5z.FILTER_SZIP):
        cases.append(("szip", {"compression": "szip", "compression_opts": ("nn", 8)}))
    try:
        import hdf5plugin
    except ImportError:
        return cases
    cases += [
        ("zstd", dict(hdf5plugin.Zstd(clevel=3))),
        ("lz4", dict(hdf5plugin.LZ4())),
        ("blosc", dict(hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=1))),
    ]
    return cases


def _h5_chunks(ds: h5py.Dataset) -> list[tuple[tuple[int, ...], int, bytes]]:
    out = []
    for i in range(ds.id.get_num_chunks()):
        offset = ds.id.get_chunk_info(i).chunk_offset
        mask, raw = ds.id.read_direct_chunk(offset)
        out.append((tuple(int(o) for o in offset), int(mask), bytes(raw)))
    return out


def _assert_chunk(got: np.ndarray[Any, Any], exp: np.ndarray[Any, Any], what: object) -> None:
    assert got.dtype == exp.dtype, (what, got.dtype, exp.dtype)
    region = got[tuple(slice(0, n) for n in exp.shape)]
    assert region.tobytes() == exp.tobytes(), what


@pytest.mark.parametrize(("label", "kw"), _hdf5_filters(), ids=[c[0] for c in _hdf5_filters()])
@pytest.mark.parametrize("dtype", ["<i2", ">f8", ">u4", "<f4", "u1"])
def test_every_hdf5_chunk_decodes_to_h5py(tmp_path: Path, label: str, kw: dict[str, Any], dtype: str) -> None:
    if label == "szip" and np.dtype(dtype).kind == "f":
        pytest.skip("szip is for integers here")
    shape, chunks = (7, 10), (3, 4)  # edge chunks cut on both axes (stored full size)
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=_data(dtype, shape), chunks=chunks, **kw)
    with h5py.File(path, "r") as f:
        ds = f["v"]
        codecs, reason = filters_to_codecs(ds.id.get_create_plist(), ds.dtype)
        assert reason is None
        decode = make_decoder(codecs, ds.dtype.str, chunks)
        seen = 0
        for offset, mask, raw in _h5_chunks(ds):
            # (szip without its encoder, blosc on small chunks: HDF5 stores chunks unfiltered, mask set)
            exp = ds[tuple(slice(o, o + c) for o, c in zip(offset, chunks, strict=True))]
            got = decode(raw, mask)
            assert got.shape == chunks
            _assert_chunk(got, exp, (label, dtype, offset))
            # the edge a reader passes never changes a chunk HDF5 stores full size
            edge = tuple(min(c, n - o) for o, c, n in zip(offset, chunks, shape, strict=True))
            _assert_chunk(ChunkDecoder(codecs, ds.dtype.str, chunks)(raw, mask, edge), exp, (label, "edge"))
            seen += 1
        assert seen == math.prod(math.ceil(n / c) for n, c in zip(shape, chunks, strict=True))


@pytest.mark.parametrize("skipped", [1, 2])
@pytest.mark.parametrize("fletcher32", [False, True])
@pytest.mark.parametrize("dtype", ["<i4", ">i4"])
def test_chunk_written_without_a_filter_decodes_by_its_mask(
    tmp_path: Path, dtype: str, fletcher32: bool, skipped: int
) -> None:
    """HDF5 chunks whose filter mask skips a filter (bit 0: shuffle, bit 1: deflate) decode as
    h5py reads them; the other chunks of the array keep the whole pipeline."""
    import zlib

    import numcodecs

    data = _data(dtype, (8, 8))
    path = tmp_path / "m.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("v", data=data, chunks=(4, 8), shuffle=True, compression="gzip", fletcher32=fletcher32)
        raw = data[4:].tobytes()
        if skipped != 1:
            raw = bytes(numcodecs.Shuffle(elementsize=data.dtype.itemsize).encode(raw))
        if skipped != 2:
            raw = zlib.compress(raw)
        if fletcher32:
            raw = bytes(numcodecs.Fletcher32().encode(raw))
        ds.id.write_direct_chunk((4, 0), raw, filter_mask=skipped)
    with h5py.File(path, "r") as f:
        ds = f["v"]
        codecs, _ = filters_to_codecs(ds.id.get_create_plist(), ds.dtype)
        decode = make_decoder(codecs, ds.dtype.str, (4, 8))
        masks = []
        for offset, mask, raw in _h5_chunks(ds):
            masks.append(mask)
            _assert_chunk(decode(raw, mask), ds[offset[0] : offset[0] + 4], (offset, mask))
        assert masks == [0, skipped]
        assert np.array_equal(ds[()], data)


def test_a_short_chunk_is_an_error_not_a_wrong_shape() -> None:
    """A chunk decoding to fewer bytes than the chunk (and not to the edge it was told) is
    refused with the sizes, never reshaped into something else."""
    import zlib

    decode = ChunkDecoder([{"id": "zlib", "level": 1}], "<i4", (4, 4))
    with pytest.raises(ValueError, match=r"holds 60 bytes, expected 64"):
        decode(zlib.compress(np.arange(15, dtype="<i4").tobytes()))
    with pytest.raises(ValueError, match=r"holds 60 bytes, expected 64"):
        decode(zlib.compress(np.arange(15, dtype="<i4").tobytes()), 0, (2, 4))
    got = decode(zlib.compress(np.arange(8, dtype="<i4").tobytes()), 0, (2, 4))
    assert got.shape == (2, 4) and got.dtype == np.dtype("<i4")
    assert got.tobytes() == np.arange(8, dtype="<i4").tobytes()


def test_unknown_codec_is_unsupported() -> None:
    from refstore.errors import UnsupportedArrayError

    with pytest.raises(UnsupportedArrayError, match="no decoder for codec 'nope'"):
        ChunkDecoder([{"id": "nope"}], "<i4", (2,))


def test_decoders_are_cached_per_pipeline_dtype_and_shape() -> None:
    a = make_decoder([{"id": "zlib", "level": 1}], "<i4", (2, 2))
    assert make_decoder([{"level": 1, "id": "zlib"}], "<i4", (2, 2)) is a
    assert make_decoder([{"id": "zlib", "level": 1}], ">i4", (2, 2)) is not a
    assert make_decoder([{"id": "zlib", "level": 1}], "<i4", (2, 3)) is not a


# --------------------------------------------------------------------------- TIFF
_TIFF_CASES: list[tuple[str, str, dict[str, Any], tuple[int, ...]]] = [
    # (id, dtype, imwrite options, image shape)
    ("strips-raw", "<u2", {"rowsperstrip": 3}, (10, 7)),
    ("strips-zlib-be", ">i2", {"rowsperstrip": 4, "compression": "zlib", "byteorder": ">"}, (10, 7)),
    ("strips-delta", "<u2", {"rowsperstrip": 3, "compression": "zlib", "predictor": 2}, (10, 7)),
    ("strips-delta-be", ">i4", {"rowsperstrip": 3, "compression": "zlib", "predictor": 2, "byteorder": ">"},
     (10, 7)),
    ("strips-lzw", "u1", {"rowsperstrip": 4, "compression": "lzw"}, (9, 11)),
    ("strips-packbits", "u1", {"rowsperstrip": 4, "compression": "packbits"}, (9, 11)),
    ("tiles-floatpred", "<f4", {"tile": (16, 16), "compression": "zlib", "predictor": 3}, (20, 35)),
    ("tiles-floatpred-be", ">f8", {"tile": (16, 16), "compression": "zlib", "predictor": 3, "byteorder": ">"},
     (20, 35)),
    ("tiles-delta-rgb", "<u2", {"tile": (16, 16), "compression": "zlib", "predictor": 2, "photometric": "rgb"},
     (20, 35, 3)),
    ("strips-delta-rgb", "u1", {"rowsperstrip": 5, "compression": "zlib", "predictor": 2, "photometric": "rgb"},
     (12, 9, 3)),
    ("strips-floatpred-rgb", "<f4", {"rowsperstrip": 5, "compression": "zlib", "predictor": 3,
                                     "photometric": "rgb"}, (12, 9, 3)),
    ("tiles-separate-delta", "<u2", {"tile": (16, 16), "compression": "zlib", "predictor": 2,
                                     "photometric": "rgb", "planarconfig": "separate"}, (3, 20, 35)),
    ("tiles-separate-floatpred", "<f4", {"tile": (16, 16), "compression": "zlib", "predictor": 3,
                                         "photometric": "rgb", "planarconfig": "separate"}, (3, 20, 35)),
    ("tiles-zstd", "<i4", {"tile": (16, 16), "compression": "zstd"}, (20, 35)),
    ("tiles-lerc", "<f4", {"tile": (16, 16), "compression": "lerc"}, (20, 35)),
    ("strips-lzw", "<u2", {"rowsperstrip": 4, "compression": "lzw"}, (10, 13)),
    ("tiles-jpeg", "u1", {"tile": (16, 16), "compression": "jpeg"}, (20, 35)),
    ("strips-jpeg-rgb", "u1", {"rowsperstrip": 8, "compression": "jpeg", "photometric": "rgb"}, (20, 17, 3)),
    ("strips-bilevel", "bool", {"rowsperstrip": 3}, (10, 13)),
    ("strips-bilevel-wide", "bool", {"rowsperstrip": 4}, (10, 70)),  # 9 bytes a row
    ("tiles-bilevel", "bool", {"tile": (16, 16), "compression": "packbits"}, (20, 35)),
]  # fmt: skip


@pytest.mark.parametrize(("label", "dtype", "kw", "shape"), _TIFF_CASES, ids=[c[0] for c in _TIFF_CASES])
def test_every_tiff_segment_decodes_to_tifffile(tmp_path: Path, label: str, dtype: str, kw: dict[str, Any],
                                                 shape: tuple[int, ...]) -> None:  # fmt: skip
    import tifffile

    data = RNG.integers(0, 2, shape).astype(bool) if dtype == "bool" else _data(dtype, shape)
    if kw.get("compression") == "jpeg":
        data = np.clip(np.cumsum(data.astype(np.int64) % 7, axis=1), 0, 255).astype("u1")  # smooth: jpeg works
    path = tmp_path / "t.tif"
    tifffile.imwrite(path, data, **kw)
    _check_segments(path, label)


@pytest.mark.parametrize("ycbcr", [False, True])
def test_gdal_jpeg_tiles_with_shared_tables_decode_to_tifffile(tmp_path: Path, ycbcr: bool) -> None:
    """GDAL writes JPEG tiles whose quantisation/Huffman tables sit once in JPEGTables (and RGB
    as YCbCr on request): the decoder must use both."""
    import shutil
    import subprocess

    import tifffile

    if shutil.which("gdal_translate") is None:
        pytest.skip("GDAL's gdal_translate is not installed")
    data = np.clip(np.cumsum(RNG.integers(0, 7, (40, 50, 3)), axis=1), 0, 255).astype("u1")
    src, path = tmp_path / "src.tif", tmp_path / "jpeg.tif"
    tifffile.imwrite(src, data, photometric="rgb")
    opts = ["-co", "COMPRESS=JPEG", "-co", "TILED=YES", "-co", "BLOCKXSIZE=16", "-co", "BLOCKYSIZE=16"]
    if ycbcr:
        opts += ["-co", "PHOTOMETRIC=YCBCR"]
    subprocess.run(["gdal_translate", "-q", *opts, str(src), str(path)], check=True, capture_output=True)
    with tifffile.TiffFile(path) as tif:
        assert tif.pages[0].jpegtables
    _check_segments(path, f"gdal-jpeg-{ycbcr}")


def _check_segments(path: Path, label: str) -> None:
    import tifffile

    from refstore.scan.tiff import _codecs

    blob = path.read_bytes()
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        expected = page.asarray()
        stored = np.dtype(page.dtype)
        stored = stored.newbyteorder(tif.byteorder) if stored.itemsize > 1 else stored
        separate = int(page.planarconfig) == 2
        rows = int(page.tilelength) if page.is_tiled else int(page.rowsperstrip)
        cols = int(page.tilewidth) if page.is_tiled else int(page.imagewidth)
        chunk = (1, rows, cols) if separate else (
            (rows, cols, expected.shape[2]) if expected.ndim == 3 else (rows, cols))  # fmt: skip
        codecs, reason = _codecs(page, chunk)
        segments = [blob[o : o + n] for o, n in zip(page.dataoffsets, page.databytecounts, strict=True)]
    assert reason is None
    grid = [math.ceil(n / c) for n, c in zip(expected.shape, chunk, strict=True)]
    decode = make_decoder(codecs, stored.str, chunk)
    # a predictor config without "axis" means the last axis (-1), as numcodecs/imagecodecs do
    bare = [{k: v for k, v in c.items() if not (k == "axis" and v == -1)} for c in codecs]
    decode_bare = make_decoder(bare, stored.str, chunk)
    assert len(segments) == math.prod(grid)
    for i, raw in enumerate(segments):
        key = np.unravel_index(i, grid)
        lo = [int(k) * c for k, c in zip(key, chunk, strict=True)]
        edge = tuple(min(c, n - a) for a, c, n in zip(lo, chunk, expected.shape, strict=True))
        exp = expected[tuple(slice(a, a + e) for a, e in zip(lo, edge, strict=True))]
        got = decode(raw, 0, edge)
        assert decode_bare(raw, 0, edge).tobytes() == got.tobytes(), (label, i)
        if any(c["id"] == "bitunpack" for c in codecs):  # a series adds a leading axis of 1
            lead = make_decoder(codecs, stored.str, (1, *chunk))(raw, 0, (1, *edge))
            assert lead.shape == (1, *got.shape) and lead.tobytes() == got.tobytes(), (label, i)
        assert got.dtype == stored and got.dtype.newbyteorder("=") == exp.dtype.newbyteorder("="), (label, i)
        assert got.shape in (chunk, edge), (label, i, got.shape)
        region = got[tuple(slice(0, e) for e in edge)]
        assert np.array_equal(region, exp), (label, i)
        assert region.astype(exp.dtype).tobytes() == exp.tobytes(), (label, i)


def test_bilevel_strips_with_a_short_last_strip_read_as_tifffile(tmp_path: Path, new_collection) -> None:
    """A 1-bit striped TIFF whose height is not a multiple of RowsPerStrip: its last strip is
    stored short (packed bits); the whole image reads as tifffile gives it."""
    import tifffile

    import refstore

    data = RNG.integers(0, 2, (10, 13)).astype(bool)
    path = tmp_path / "b.tif"
    tifffile.imwrite(path, data, rowsperstrip=3)
    col = new_collection()
    refstore.scan(col, [str(path)])
    expected = tifffile.imread(path)
    got = refstore.open(col)["image"][...]
    assert got.dtype == expected.dtype == np.dtype(bool)
    assert np.array_equal(got, expected)


def _spacepad_file(path: Path, values: list[bytes], n: int, chunks: tuple[int, ...], **kw: Any) -> None:
    """A fixed-length, space-padded string dataset (HDF5's H5T_STR_SPACEPAD; h5py's high-level
    API writes null padding only)."""
    with h5py.File(path, "w") as f:
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(n)
        tid.set_strpad(h5py.h5t.STR_SPACEPAD)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk(chunks)
        if kw.get("gzip"):
            dcpl.set_shuffle()
            dcpl.set_deflate(4)
        space = h5py.h5s.create_simple((len(values),))
        dsid = h5py.h5d.create(f.id, b"s", tid, space, dcpl=dcpl)
        raw = np.array([v.ljust(n, b" ") for v in values], dtype=f"S{n}")
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=tid)


@pytest.mark.parametrize("gzip", [False, True])
def test_space_padded_strings_decode_as_h5py_converts_them(tmp_path: Path, gzip: bool) -> None:
    """HDF5 converts space padding to null padding on read: trailing spaces become NULs, inner
    spaces stay (h5py reads the values, the chunks are fetched raw)."""
    values = [b"ab", b"a b", b"", b"  x", b"full5", b"x  y ", b" ", b"q"]
    path = tmp_path / "s.h5"
    _spacepad_file(path, values, 5, (3,), gzip=gzip)
    with h5py.File(path, "r") as f:
        ds = f["s"]
        assert ds.id.get_type().get_strpad() == h5py.h5t.STR_SPACEPAD
        codecs, reason = filters_to_codecs(ds.id.get_create_plist(), ds.dtype)
        assert reason is None
        codecs = [*codecs, {"id": "spacepad"}]
        decode = make_decoder(codecs, ds.dtype.str, (3,))
        seen = []
        for offset, mask, raw in _h5_chunks(ds):
            exp = ds[offset[0] : offset[0] + 3]
            if not gzip:  # the stored bytes are space padded
                assert raw == b"".join(v.ljust(5, b" ") for v in values[offset[0] : offset[0] + 3]).ljust(15, b"\0")
            got = decode(raw, mask)
            assert got.shape == (3,)
            _assert_chunk(got, exp, offset)
            seen.append(offset[0])
        assert seen == [0, 3, 6]
        assert list(ds[()]) == [v.rstrip(b" ") for v in values]  # h5py's conversion, as the oracle


@pytest.mark.parametrize(("dtype", "mask"), [("<f8", 0), (">i4", 0), ("<i2", 0), ("<f8", 0b10)])
def test_shuffle_after_fletcher32_leaves_the_checksum_bytes_as_hdf5_does(tmp_path: Path, dtype: str,
                                                                         mask: int) -> None:  # fmt: skip
    """Fletcher32 before shuffle (encode order): shuffle sees the values plus 4 checksum bytes,
    not a whole number of elements, and HDF5 leaves the bytes past the last whole element as
    they are. Every chunk decodes as h5py reads it; ``mask`` 0b10 writes one chunk by hand with
    shuffle skipped (its bytes are then fletcher32's output as is)."""
    path = tmp_path / "fs.h5"
    values = (np.arange(30) * 7 - 40).astype(dtype)
    with h5py.File(path, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((10,))
        dcpl.set_fletcher32()
        dcpl.set_shuffle()
        dsid = h5py.h5d.create(f.id, b"v", h5py.h5t.py_create(np.dtype(dtype)), h5py.h5s.create_simple((30,)), dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, values)
        if mask:  # chunk 1 with shuffle skipped: the values and their fletcher32 checksum, unshuffled
            data = values[10:20].tobytes()
            plain = h5py.h5d.create(f.id, b"plain", h5py.h5t.py_create(np.dtype(dtype)),
                                    h5py.h5s.create_simple((10,)), _fletcher_plist())  # fmt: skip
            plain.write(h5py.h5s.ALL, h5py.h5s.ALL, np.frombuffer(data, dtype))
            _m, checked = plain.read_direct_chunk((0,))
            dsid.write_direct_chunk((10,), bytes(checked), filter_mask=mask)
    with h5py.File(path, "r") as f:
        ds = f["v"]
        codecs, reason = filters_to_codecs(ds.id.get_create_plist(), ds.dtype)
        assert reason is None
        assert [c["id"] for c in codecs] == ["fletcher32", "shuffle"]
        decode = make_decoder(codecs, ds.dtype.str, (10,))
        chunks = _h5_chunks(ds)
        assert len(chunks) == 3 and all(len(raw) == 10 * ds.dtype.itemsize + 4 for _o, _m, raw in chunks)
        assert [m for _o, m, _r in chunks] == [0, mask, 0]
        for offset, m, raw in chunks:
            _assert_chunk(decode(raw, m), ds[offset[0] : offset[0] + 10], offset)
        assert ds[()].tobytes() == values.tobytes()


def _fletcher_plist() -> Any:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((10,))
    dcpl.set_fletcher32()
    return dcpl


@pytest.mark.parametrize("spacepad", [False, True])
def test_null_terminated_strings_decode_as_h5py_converts_them(tmp_path: Path, spacepad: bool) -> None:
    """HDF5 converts null termination to null padding on read: every byte from a string's first
    NUL on reads as NUL; a string without a NUL keeps every byte (h5py reads the values, the
    chunks are fetched raw). With a ``spacepad`` step before it, both conversions apply."""
    values = np.array([b"ab\0cd", b"abcde", b"\0\0q", b"a\0\0\0e", b"", b"x y\0z", b"\0abcd"], "S5")
    path = tmp_path / "n.h5"
    with h5py.File(path, "w") as f:
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(5)
        tid.set_strpad(h5py.h5t.STR_NULLTERM)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((3,))
        dsid = h5py.h5d.create(f.id, b"s", tid, h5py.h5s.create_simple((len(values),)), dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, values, mtype=tid)
    with h5py.File(path, "r") as f:
        ds = f["s"]
        steps = [{"id": "spacepad"}, {"id": "nullterm"}] if spacepad else [{"id": "nullterm"}]
        decode = make_decoder(steps, ds.dtype.str, (3,))
        seen = []
        for offset, mask, raw in _h5_chunks(ds):
            exp = ds[offset[0] : offset[0] + 3]
            assert raw[: 5 * len(exp)] == values[offset[0] : offset[0] + 3].tobytes()  # stored as written
            got = decode(raw, mask)
            assert got.shape == (3,)
            _assert_chunk(got, exp, offset)
            seen.append(offset[0])
        assert seen == [0, 3, 6]
        assert ds[()].tolist() == [b"ab", b"abcde", b"", b"a", b"", b"x y", b""]  # h5py's conversion


@pytest.mark.parametrize("dtype", ["<i4", ">u2"])
def test_masked_chunks_run_the_general_shuffle_and_fletcher32_steps(tmp_path: Path, dtype: str) -> None:
    """A chunk whose mask skips deflate undoes shuffle and fletcher32 one step at a time (not the
    fast path); a fresh decoder per case (make_decoder caches one per pipeline, dtype and shape)."""
    import zlib

    import numcodecs

    data = _data(dtype, (6, 8))
    path = tmp_path / "m.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("v", data=data, chunks=(3, 8), shuffle=True, compression="gzip", fletcher32=True)
        raw = bytes(numcodecs.Shuffle(elementsize=data.dtype.itemsize).encode(data[3:].tobytes()))
        ds.id.write_direct_chunk((3, 0), bytes(numcodecs.Fletcher32().encode(raw)), filter_mask=2)
        raw0 = zlib.compress(data[:3].tobytes())  # shuffle skipped, deflate kept
        ds.id.write_direct_chunk((0, 0), bytes(numcodecs.Fletcher32().encode(raw0)), filter_mask=1)
    with h5py.File(path, "r") as f:
        ds = f["v"]
        codecs, _ = filters_to_codecs(ds.id.get_create_plist(), ds.dtype)
        decode = ChunkDecoder(codecs, ds.dtype.str, (3, 8))
        got = {offset[0]: (mask, decode(raw, mask)) for offset, mask, raw in _h5_chunks(ds)}
        assert {k: m for k, (m, _) in got.items()} == {0: 1, 3: 2}
        for start, (_, arr) in got.items():
            _assert_chunk(arr, ds[start : start + 3], start)
        bad = bytearray(_h5_chunks(ds)[1][2])
        bad[0] ^= 0xFF
    with pytest.raises(RuntimeError):  # numcodecs' Fletcher32 checks the checksum
        decode(bytes(bad), 2)


@pytest.mark.parametrize("dtype", ["<f4", "<f8"])
def test_a_grib_message_decodes_to_eccodes_values(dtype: str) -> None:
    """A whole GRIB message (the ``refstore.grib`` step) gives the values ecCodes decodes from
    it, in the chunk's shape (Nj, Ni) and dtype."""
    eccodes = pytest.importorskip("eccodes")
    h = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        ni, nj = eccodes.codes_get(h, "Ni"), eccodes.codes_get(h, "Nj")
        eccodes.codes_set_values(h, (np.arange(ni * nj, dtype="f8") % 97) * 0.5 + 200.0)
        msg = bytes(eccodes.codes_get_message(h))
    finally:
        eccodes.codes_release(h)
    h = eccodes.codes_new_from_message(msg)
    try:
        exp = eccodes.codes_get_values(h).reshape(nj, ni).astype(dtype)
    finally:
        eccodes.codes_release(h)
    got = ChunkDecoder([{"id": "refstore.grib"}], dtype, (nj, ni))(msg)
    assert got.shape == (nj, ni) and got.dtype == np.dtype(dtype)
    assert got.tobytes() == exp.tobytes()

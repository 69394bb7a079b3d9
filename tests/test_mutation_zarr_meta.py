"""The codec and fill logic every zarr-shaped form shares (``zarr_meta.py``, ``_values.py``),
against the real readers: the metadata refstore writes, over the file's own chunk bytes, is
opened by zarr-python (v2 and v3) and must read what h5py reads, with absent chunks as HDF5's
fill value; ``_FillValue`` as xarray's zarr backend encodes it; typed attribute JSON against
numpy. Written for the mutation run (``./dev mutate emit``); fast (no collection, no Lance).
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore._values import decode_attr, decode_fill, encode_attr, encode_fill
from refstore.errors import UnexpressibleError
from refstore.scan import ArrayMeta
from refstore.scan.hdf5 import HDF5Scanner
from refstore.zarr_meta import (
    plain_value,
    register_codecs,
    v2_array,
    v2_attrs,
    v2_filters,
    v3_array,
    v3_codecs,
    v3_decoded_array,
    v3_unexpressible,
)

if TYPE_CHECKING:
    from pathlib import Path

RNG = np.random.default_rng(5)


def _filters() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("none", {}),
        ("gzip", {"compression": "gzip", "compression_opts": 3}),
        ("shuffle-gzip", {"compression": "gzip", "shuffle": True}),
        ("fletcher32", {"fletcher32": True, "shuffle": True}),
    ]
    try:
        import hdf5plugin
    except ImportError:
        return cases
    # (not blosc: on incompressible chunks HDF5 stores them unfiltered, a mask zarr refuses)
    return [*cases, ("zstd", dict(hdf5plugin.Zstd(clevel=2))), ("lz4", dict(hdf5plugin.LZ4()))]


_DTYPES: list[tuple[str, Any]] = [
    ("<i2", -99),
    (">f8", np.nan),
    (">u4", 7),
    ("<f4", -1.5),
    ("u1", 0),
    ("<c8", None),
    ("bool", True),
    ("|S3", b"ab"),
    ("<f4", -np.inf),
]


def _values(dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    if dtype.kind == "b":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.kind == "S":
        return np.array([b"xyz"[: 1 + i % 3] for i in range(math.prod(shape))], dtype).reshape(shape)
    if dtype.kind == "c":
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)
    if dtype.kind == "f":
        return (RNG.standard_normal(shape) * 100).astype(dtype)
    return RNG.integers(0, 200, shape).astype(dtype)


def _write_store(folder: Path, name: str, meta_files: dict[str, Any], chunks: dict[str, bytes]) -> None:
    base = folder / name
    base.mkdir(parents=True, exist_ok=True)
    for key, doc in meta_files.items():
        (base / key).write_text(json.dumps(doc, allow_nan=True))
    for key, raw in chunks.items():
        p = base / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(raw)


@pytest.mark.parametrize(("label", "kw"), _filters(), ids=[f[0] for f in _filters()])
@pytest.mark.parametrize(("dtype", "fill"), _DTYPES, ids=[f"{d}-{f}" for d, f in _DTYPES])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_reads_the_metadata_over_the_file_chunks_as_h5py(
    tmp_path: Path, label: str, kw: dict[str, Any], dtype: str, fill: Any, zarr_format: int
) -> None:
    import zarr

    register_codecs()
    dt = np.dtype(dtype)
    shape, chunks = (7, 150), (3, 64)  # chunks big enough for blosc to filter them (mask 0)
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        opts = {} if fill is None else {"fillvalue": np.asarray(fill).astype(dt)}
        ds = f.create_dataset("v", shape=shape, dtype=dt, chunks=chunks, **opts, **kw)
        ds[:6, :64] = _values(dt, (6, 64))  # the other chunks stay unwritten: fill
        ds[6:, 128:] = _values(dt, (1, 22))
    res = HDF5Scanner()(str(path))
    (meta,) = [a for a in res.arrays if a.name == "v"]
    assert meta.status == "ok", meta.reason
    rows = res.chunks.to_pylist()
    blob = path.read_bytes()
    raw = {(r["k0"], r["k1"]): blob[r["offset"] : r["offset"] + r["length"]] for r in rows}
    assert len(raw) == 3 and all(not r["filter_mask"] for r in rows)
    if zarr_format == 2:
        docs = {".zarray": v2_array(meta), ".zattrs": v2_attrs(meta)}
        keyed = {f"{a}.{b}": v for (a, b), v in raw.items()}
    else:
        if dt.kind == "S":
            pytest.skip("fixed-size bytes in zarr v3 are an extension this zarr reads differently")
        docs = {"zarr.json": v3_array(meta)}
        keyed = {f"c/{a}/{b}": v for (a, b), v in raw.items()}
        assert v3_unexpressible(meta) is None
    _write_store(tmp_path / "store", "v", docs, keyed)
    got = zarr.open_array(str(tmp_path / "store" / "v"), mode="r", zarr_format=zarr_format)[...]
    with h5py.File(path) as f:
        expected = f["v"][()]
        h5_fill = f["v"].fillvalue
    assert got.dtype.newbyteorder("=") == expected.dtype.newbyteorder("=")
    assert got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=dt.kind in "fc"), (label, dtype)
    absent = np.asarray(got[3:6, 64:128])
    assert np.array_equal(absent, np.full((3, 64), h5_fill, dt), equal_nan=dt.kind in "fc")


def _meta(**kw: Any) -> ArrayMeta:
    base: dict[str, Any] = {"name": "v", "dims": ("t", "y"), "shape": (4, 3), "chunks": (2, 3), "dtype": "<f4",
                            "fill_value": None}  # fmt: skip
    return ArrayMeta(**{**base, **kw})


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (_meta(status="unsupported", reason="no decoder for X"), "array 'v': no decoder for X"),
        (_meta(eras=({"start": 3, "axis": 0, "first_source": "a.nc"},)),
         "one era starting at element 3 along axis 0, off its chunk grid .*a.nc"),
        (_meta(eras=({"start": 0, "axis": 0}, {"start": 2, "axis": 0, "first_source": "b.nc"})),
         "2 eras .*change at b.nc"),
        (_meta(short_edge=True), "last chunk .* is stored short"),
        (_meta(dtype="<M8[s]"), "dtype <M8\\[s\\] has no zarr form"),
        (_meta(codecs=({"id": "jpeg"},)), "JPEG tiles"),
        (_meta(codecs=({"id": "bitunpack"},)), "codec 'bitunpack' has no zarr v2"),
        (_meta(codecs=({"id": "lerc"}, {"id": "delta", "axis": -1})), "predictor after compression"),
    ],
)  # fmt: skip
def test_what_zarr_cannot_express_is_refused_naming_the_array(meta: ArrayMeta, message: str) -> None:
    with pytest.raises(UnexpressibleError, match=message) as e:
        v3_codecs(meta)
    assert v3_unexpressible(meta) == str(e.value)


def test_v3_codec_chain_for_tiff_predictors_and_byte_order() -> None:
    delta = v3_codecs(_meta(dtype=">u2", codecs=({"id": "delta", "axis": -2}, {"id": "zlib", "level": 4})))
    assert delta == [{"name": "imagecodecs_delta", "configuration": {"axis": -2, "dist": 1}},
                     {"name": "bytes", "configuration": {"endian": "big"}},
                     {"name": "numcodecs.zlib", "configuration": {"level": 4}}]  # fmt: skip
    fp = v3_codecs(_meta(codecs=({"id": "floatpred"}, {"id": "lzw"})))
    assert fp == [{"name": "imagecodecs_floatpred", "configuration": {"axis": -1, "dist": 1}},
                  {"name": "imagecodecs_lzw", "configuration": {}}]  # fmt: skip
    assert v3_codecs(_meta(dtype="u1")) == [{"name": "bytes"}]
    lerc = v3_codecs(_meta(dtype="<i2", codecs=({"id": "lerc"},)))
    assert lerc == [{"name": "imagecodecs_lerc", "configuration": {}}]
    szip = {"id": "szip", "mask": 141, "pixels_per_block": 32, "bits_per_pixel": 16, "pixels_per_scanline": 8}
    assert v3_codecs(_meta(dtype="<i2", codecs=(szip,)))[-1] == {"name": "imagecodecs_szip", "configuration": {
        "options_mask": 141, "pixels_per_block": 32, "bits_per_pixel": 16, "pixels_per_scanline": 8, "header": True}}
    v2 = v2_array(_meta(dtype=">i2", codecs=({"id": "delta"}, {"id": "zstd", "level": 3})))
    assert v2["filters"] == [{"id": "imagecodecs_delta", "axis": -1, "dist": 1, "dtype": ">i2", "shape": [2, 3]}]
    assert v2["compressor"] == {"id": "zstd", "level": 3}  # last, a compressor: GDAL decodes it as one
    lz = v2_array(_meta(dtype="<i2", codecs=({"id": "zlib", "level": 4}, {"id": "shuffle", "elementsize": 2})))
    assert lz["compressor"] is None and [c["id"] for c in lz["filters"]] == ["zlib", "shuffle"]  # order kept
    assert v2_array(_meta(codecs=({"id": "floatpred", "axis": -2},)))["filters"] == [
        {"id": "imagecodecs_floatpred", "axis": -2, "dist": 1, "dtype": "<f4", "shape": [2, 3]}]  # fmt: skip
    assert v2_array(_meta())["filters"] is None
    assert v2_array(_meta(dtype="bool"))["dtype"] == "|b1"


@pytest.mark.parametrize(
    ("dtype", "value"),
    [("<f4", -9999.0), ("<f8", np.nan), (">f4", np.inf), ("<i2", -99), ("<u1", 255), ("bool", True),
     ("<i8", -(2**62) - 1), ("|S2", b"ab"), ("<c8", -9 + 2j), ("<c16", complex(np.nan, -np.inf))],
)  # fmt: skip
def test_fillvalue_attribute_is_xarrays_encoding(tmp_path: Path, dtype: str, value: Any) -> None:
    from xarray.backends.zarr import FillValueCoder

    dt = np.dtype(dtype)
    attrs = {"_FillValue": encode_attr(np.asarray(value).astype(dt)), "units": encode_attr("K")}
    meta = _meta(dtype=dtype, attrs=attrs)
    doc = v3_array(meta)
    assert doc["attributes"]["_FillValue"] == FillValueCoder.encode(np.asarray(value).astype(dt)[()], dt)
    assert doc["attributes"]["units"] == "K"
    little = dt.newbyteorder("<") if dt.itemsize > 1 else dt
    dec = v3_decoded_array(meta, dt, (2, 3))
    assert dec["attributes"]["_FillValue"] == FillValueCoder.encode(np.asarray(value).astype(little)[()], little)
    assert v2_array(meta)["fill_value"] == _zarr_fill_json(tmp_path, dt, np.asarray(value).astype(dt)[()], 2)
    assert "_FillValue" not in v2_attrs(meta) and v2_attrs(meta)["_ARRAY_DIMENSIONS"] == ["t", "y"]


def _zarr_fill_json(folder: Path, dt: np.dtype[Any], value: Any, zarr_format: int) -> Any:
    """The ``fill_value`` zarr-python writes in the metadata of an array of ``dt`` filled with
    ``value`` (``.zarray`` for v2, ``zarr.json`` for v3)."""
    import zarr

    path = folder / f"oracle-{zarr_format}"
    zarr.create_array(str(path), shape=(1,), dtype=dt, fill_value=value, zarr_format=zarr_format, overwrite=True,
                      compressors=None)  # fmt: skip
    doc = json.loads((path / (".zarray" if zarr_format == 2 else "zarr.json")).read_text())
    return doc["fill_value"]


def _zarr_json(v: Any) -> Any:
    """zarr v2's JSON spelling of a fill value (numbers, NaN/Infinity as strings, bools)."""
    if isinstance(v, bytes):
        import base64

        return base64.b64encode(v).decode("ascii")
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    f = float(v)
    return "NaN" if f != f else ("Infinity" if f == np.inf else ("-Infinity" if f == -np.inf else f))


def test_decoded_array_metadata_is_little_endian_with_the_fill() -> None:
    meta = _meta(dtype=">i4", fill_value=encode_fill(-7, np.dtype(">i4")))
    doc = v3_decoded_array(meta, np.dtype(">i4"), (4, 3))
    assert doc["data_type"] == "int32" and doc["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
    assert doc["fill_value"] == -7 and doc["chunk_grid"]["configuration"]["chunk_shape"] == [4, 3]
    assert doc["shape"] == [4, 3] and doc["dimension_names"] == ["t", "y"]
    assert v3_decoded_array(meta, np.dtype("u1"), (4, 3), fill_value=3)["codecs"] == [{"name": "bytes"}]
    assert v3_decoded_array(meta, np.dtype("<f8"), (4, 3), fill_value=np.nan)["fill_value"] == "NaN"
    with pytest.raises(UnexpressibleError, match="array 'v': gone"):
        v3_decoded_array(_meta(status="failed", reason="gone"), np.dtype("<f4"), (2, 3))
    assert v3_array(_meta(dtype="|S4"))["data_type"] == {"name": "null_terminated_bytes",
                                                          "configuration": {"length_bytes": 4}}  # fmt: skip
    assert v3_array(_meta(dtype="<c16", fill_value=[1.0, "-Infinity"]))["fill_value"] == [1.0, "-Infinity"]


# --------------------------------------------------------------------------- typed JSON
_ATTRS = [
    np.float32(0.01),
    np.array([1.5, np.nan, -np.inf, np.inf], ">f8"),
    np.int16(-3),
    np.array([[1, 2], [3, 4]], "<u8"),
    np.bool_(True),
    np.array([True, False]),
    np.complex64(1 - 2j),
    np.array(7, "<i1"),
    np.array([2**63 + 5], "<u8"),
]


@pytest.mark.parametrize("value", _ATTRS, ids=[f"{np.asarray(v).dtype}-{np.ndim(v)}" for v in _ATTRS])
def test_numeric_attributes_roundtrip_with_their_type(value: Any) -> None:
    enc = encode_attr(value)
    assert enc is not None
    assert json.loads(json.dumps(enc)) == enc  # plain JSON, no NaN literals
    back = decode_attr(json.loads(json.dumps(enc)))
    arr = np.asarray(value)
    assert np.asarray(back).dtype == arr.dtype.newbyteorder("=")
    assert np.asarray(back).shape == arr.shape
    assert np.array_equal(np.asarray(back), arr, equal_nan=arr.dtype.kind in "fc")
    plain = plain_value(back)
    expected = arr.tolist()
    if arr.dtype.kind == "c":
        expected = [expected.real, expected.imag]
    if arr.dtype.kind == "f":
        assert np.array_equal(np.asarray(plain, float), arr.astype(float), equal_nan=True)
    else:
        assert plain == expected and type(plain) is type(expected)


def test_text_and_other_attributes() -> None:
    assert encode_attr("K") == {"type": "str", "value": "K"}
    assert decode_attr(encode_attr(b"caf\xc3\xa9")) == "café"  # type: ignore[arg-type]
    raw = b"\xff\x00"
    assert decode_attr(encode_attr(raw)) == raw  # type: ignore[arg-type]
    assert plain_value(raw) == "/wA="
    assert plain_value(np.array(2.5, "<f4")) == 2.5 and plain_value(np.array([[1], [2]], "<i2")) == [[1], [2]]
    strings = np.array([b"a", b"bc"], dtype="S2")
    enc = encode_attr(strings)
    assert enc == {"type": "str", "value": ["a", "bc"], "shape": [2]}
    assert encode_attr(np.array("x", dtype=object)) == {"type": "str", "value": "x", "shape": []}
    assert encode_attr(np.array([1, "x"], dtype=object)) is None
    assert encode_attr(np.array([b"\xff", b"a"], "S1")) == {"type": "str", "value": ["\ufffd", "a"], "shape": [2]}
    empty = decode_attr(encode_attr(np.array([], "<i2")))  # type: ignore[arg-type]
    assert empty.dtype == np.dtype("<i2") and empty.shape == (0,)
    assert encode_attr(np.zeros(2, [("a", "<i4")])) is None
    assert encode_attr(np.datetime64("2024-01-01")) is None
    def one(v: Any) -> Any:  # a length-1 numeric attribute is a scalar, as netCDF4-python reads it
        return v2_attrs(_meta(attrs={"a": encode_attr(v)}))["a"]  # type: ignore[dict-item]

    assert one(np.array([2.5], "<f4")) == 2.5 and type(one(np.array([2], "<i2"))) is int
    assert one(np.array([1, 2], "<i2")) == [1, 2]
    assert v2_attrs(_meta(attrs={"scale_factor": encode_attr(np.array([0.5], "<f4")),  # type: ignore[dict-item]
                                 "_FillValue": encode_attr(np.float32(1))}))["scale_factor"] == 0.5  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("dtype", "value"),
    [("<f4", np.nan), (">f8", -np.inf), ("<i8", -(2**62)), ("<u2", 65535), ("|S3", b"ab"), ("|V2", b"\x01\x02"),
     ("<c8", 1 + 2j), ("bool", True)],
)  # fmt: skip
def test_fill_values_roundtrip_exactly(dtype: str, value: Any) -> None:
    dt = np.dtype(dtype)
    want = np.asarray(value).astype(dt) if dt.kind != "V" else np.frombuffer(value, dt)[0]
    enc = encode_fill(want, dt)
    back = decode_fill(json.loads(json.dumps(enc)), dt)
    # numpy scalars are native-endian (and bytes scalars drop trailing NULs): the type and the
    # bytes in the stored dtype are what must survive
    native = dt.newbyteorder("=") if dt.kind not in "SV" else dt
    assert np.asarray(back).dtype == native or (dt.kind == "S" and np.asarray(back).dtype.kind == "S")
    assert np.asarray(back).astype(dt).tobytes() == np.asarray(want).astype(dt).tobytes()
    zero = decode_fill(None, dt)
    assert np.asarray(zero).astype(dt).tobytes() == bytes(dt.itemsize)
    assert np.asarray(zero).dtype == native or (dt.kind == "S" and np.asarray(zero).dtype.kind == "S")
    assert encode_fill(None, dt) is None


def test_group_metadata_and_plain_attributes_read_back_in_zarr(tmp_path: Path) -> None:
    import zarr

    from refstore._values import plain_attr
    from refstore.zarr_meta import v3_group

    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "zarr.json").write_text(json.dumps(v3_group({"title": "t", "n": 2})))
    group = zarr.open_group(str(tmp_path / "g"), mode="r")
    assert dict(group.attrs) == {"title": "t", "n": 2}
    assert plain_attr({"type": "<f4", "value": 0.5}) == 0.5


@pytest.mark.parametrize(("dtype", "fill"), [(">i4", -7), ("u1", 9), (">f8", np.nan), ("bool", True), ("<c8", None)])
def test_decoded_array_metadata_reads_in_zarr(tmp_path: Path, dtype: str, fill: Any) -> None:
    """The zarr store's metadata for decoded chunks: zarr-python reads little-endian C-order
    chunk bytes through it as the values, and an absent chunk as the array's fill value."""
    import zarr

    from refstore._values import encode_fill

    dt = np.dtype(dtype)
    meta = _meta(dtype=dtype, shape=(5, 3), chunks=(2, 3), fill_value=None if fill is None else encode_fill(fill, dt))
    doc = v3_decoded_array(meta, dt, (2, 3))
    values = _values(dt, (5, 3))
    little = dt.newbyteorder("<") if dt.itemsize > 1 else dt
    chunks = {f"c/{k}/0": np.ascontiguousarray(values[2 * k : 2 * k + 2]).astype(little).tobytes() for k in (0, 2)}
    chunks["c/2/0"] = np.concatenate([values[4:], np.zeros((1, 3), dt)]).astype(little).tobytes()  # edge: full size
    _write_store(tmp_path, "d", {"zarr.json": doc}, chunks)
    got = zarr.open_array(str(tmp_path / "d"), mode="r", zarr_format=3)[...]
    want = values.copy()
    want[2:4] = decode_fill(meta.fill_value, dt)
    assert got.dtype.newbyteorder("=") == dt.newbyteorder("=") and got.shape == (5, 3)
    assert np.array_equal(got, want, equal_nan=dt.kind in "fc")


# --------------------------------------------------------------------------- rectilinear grids
_RECT = [
    # (shape, chunks, edges, chunk_shapes as the zarr rectilinear extension spells them, by hand)
    ((7, 5), (3, 2), ((3, 3, 1), None), [[[3, 2], 1], [[2, 3]]]),
    ((7, 6), (3, 2), ((3, 3, 1),), [[[3, 2], 1], [[2, 3]]]),
    ((4, 9), (2, 4), (None, (4, 1, 4)), [[[2, 2]], [4, 1, 4]]),
    ((4, 9), (3, 4), (None, (2, 2, 4, 1)), [[[3, 2]], [[2, 2], 4, 1]]),
    ((5, 2), (4, 2), ((4, 1), None), [[4, 1], [2]]),
    ((3, 1), (1, 2), ((1, 1, 1), None), [[[1, 3]], [2]]),
    ((3, 0), (1, 2), ((1, 1, 1), None), [[[1, 3]], [2]]),  # no elements: still one chunk
    ((3, 0), (1, 0), ((1, 1, 1), None), [[[1, 3]], [1]]),  # of at least one element
]


@pytest.mark.parametrize(("shape", "chunks", "edges", "spec"), _RECT, ids=[str(r[2]) for r in _RECT])
def test_rectilinear_chunk_grid_reads_in_zarr(
    tmp_path: Path, shape: tuple[int, ...], chunks: tuple[int, ...], edges: Any, spec: list[Any]
) -> None:
    """``zarr.json`` of an array with a rectilinear grid: ``chunk_shapes`` as the extension's
    run-length form (written by hand), and zarr-python (rectilinear chunks enabled) reads chunks
    cut on that grid back as the array (a regular dimension's last chunk overhangs, padded)."""
    import zarr

    meta = _meta(dtype="<i2", shape=shape, chunks=chunks, edges=edges)
    doc = v3_array(meta, rectilinear=True)
    assert doc["chunk_grid"] == {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": spec}}
    lengths = [None if e is None else list(e) for e in [*edges, None][: len(shape)]]
    rect = ", ".join(repr(("t", "y")[d]) for d, e in enumerate(lengths) if e is not None)
    with pytest.raises(UnexpressibleError, match=re.escape(f"array 'v' has a rectilinear chunk grid along {rect} (")):
        v3_array(meta)
    values = np.arange(math.prod(shape), dtype="<i2").reshape(shape) + 100
    per_dim: list[list[tuple[int, int, int]]] = []  # (start, stored length, valid length)
    for d, n in enumerate(shape):
        if lengths[d] is None:
            c = max(1, chunks[d])
            per_dim.append([(k * c, c, min(c, n - k * c)) for k in range(-(-n // c))])
        else:
            starts = np.concatenate([[0], np.cumsum(lengths[d])]).tolist()
            per_dim.append([(starts[k], ln, ln) for k, ln in enumerate(lengths[d])])
    files = {}
    for key in np.ndindex(*[len(p) for p in per_dim]):
        buf = np.zeros([per_dim[d][k][1] for d, k in enumerate(key)], "<i2")
        src = tuple(slice(per_dim[d][k][0], per_dim[d][k][0] + per_dim[d][k][2]) for d, k in enumerate(key))
        buf[tuple(slice(0, per_dim[d][k][2]) for d, k in enumerate(key))] = values[src]
        files["c/" + "/".join(map(str, key))] = buf.tobytes()
    _write_store(tmp_path, "r", {"zarr.json": doc}, files)
    with zarr.config.set({"array.rectilinear_chunks": True}):
        got = zarr.open_array(str(tmp_path / "r"), mode="r", zarr_format=3)[...]
    np.testing.assert_array_equal(got, values, strict=True)


# --------------------------------------------------------------------------- codecs against their libraries
def _shuffle(raw: bytes, size: int) -> bytes:
    """HDF5's shuffle filter by hand: byte ``i`` of every element, then byte ``i + 1``..."""
    return np.frombuffer(raw, "u1").reshape(-1, size).T.tobytes()


def _grib_message(nj: int, ni: int) -> bytes:
    eccodes = pytest.importorskip("eccodes")
    h = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        eccodes.codes_set_long(h, "Ni", ni)
        eccodes.codes_set_long(h, "Nj", nj)
        eccodes.codes_set_values(h, (np.arange(ni * nj, dtype="f8") % 7) * 0.5 + 200.0)
        return bytes(eccodes.codes_get_message(h))
    finally:
        eccodes.codes_release(h)


def _codec_cases() -> list[tuple[str, str, tuple[dict[str, Any], ...], Any]]:
    """(id, dtype, codecs as the scanners record them, encoder: chunk -> bytes by the codec's
    own library: zlib, imagecodecs, numcodecs' Blosc, numpy for HDF5's shuffle)."""
    import zlib

    import imagecodecs
    import numcodecs

    return [
        ("zlib-tiff", "<i2", ({"id": "zlib"},), lambda a: zlib.compress(a.tobytes())),
        ("zlib-1", ">f8", ({"id": "zlib", "level": 1},), lambda a: zlib.compress(a.tobytes(), 1)),
        ("shuffle-zlib", "<i4", ({"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 9}),
         lambda a: zlib.compress(_shuffle(a.tobytes(), 4), 9)),
        ("zstd-tiff", "<u2", ({"id": "zstd"},), lambda a: imagecodecs.zstd_encode(a.tobytes())),
        ("zstd-5", "<f4", ({"id": "zstd", "level": 5},), lambda a: imagecodecs.zstd_encode(a.tobytes(), level=5)),
        ("blosc", "<f8", ({"id": "blosc"},), lambda a: numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE).encode(a)),
        ("lz4h5", "<i8", ({"id": "lz4h5"},), lambda a: imagecodecs.lz4h5_encode(a.tobytes())),
        ("lzw", "u1", ({"id": "lzw"},), lambda a: imagecodecs.lzw_encode(a.tobytes())),
        ("packbits", ">i2", ({"id": "packbits"},), lambda a: imagecodecs.packbits_encode(a.tobytes())),
        ("lerc", "<f4", ({"id": "lerc"},), lambda a: imagecodecs.lerc_encode(a, level=0.0)),
        ("delta-lzw", "<u2", ({"id": "delta", "axis": -1}, {"id": "lzw"}),
         lambda a: imagecodecs.lzw_encode(imagecodecs.delta_encode(a, axis=-1).tobytes())),
        ("delta-rows", ">i4", ({"id": "delta", "axis": -2}, {"id": "zlib"}),
         lambda a: zlib.compress(imagecodecs.delta_encode(a, axis=-2).tobytes())),
        ("delta-default", "<i2", ({"id": "delta"},), lambda a: imagecodecs.delta_encode(a, axis=-1).tobytes()),
        ("floatpred-zlib", "<f4", ({"id": "floatpred", "axis": -1}, {"id": "zlib", "level": 4}),
         lambda a: zlib.compress(imagecodecs.floatpred_encode(a, axis=-1).tobytes(), 4)),
        ("floatpred-be", ">f8", ({"id": "floatpred"},), lambda a: imagecodecs.floatpred_encode(a, axis=-1).tobytes()),
        ("floatpred-rows", "<f4", ({"id": "floatpred", "axis": -2},),
         lambda a: imagecodecs.floatpred_encode(a, axis=-2).tobytes()),
        ("floatpred-3d", "<f4", ({"id": "floatpred"},), lambda a: imagecodecs.floatpred_encode(a, axis=-1).tobytes()),
        ("delta-3d", "<i2", ({"id": "delta"},), lambda a: imagecodecs.delta_encode(a, axis=-1).tobytes()),
        ("szip", "<i2", ({"id": "szip", "mask": 141, "pixels_per_block": 8, "bits_per_pixel": 16,
                           "pixels_per_scanline": 8},),
         lambda a: imagecodecs.szip_encode(a.tobytes(), 141, 8, 16, 8, header=True)),
        ("grib", "<f4", ({"id": "refstore.grib"},), lambda a: _grib_message(*a.shape)),
    ]  # fmt: skip


_CODECS = _codec_cases()


@pytest.mark.parametrize(("cid", "dtype", "codecs", "encode"), _CODECS, ids=[c[0] for c in _CODECS])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_codec_chain_decodes_what_the_codec_library_encoded(
    tmp_path: Path, cid: str, dtype: str, codecs: tuple[dict[str, Any], ...], encode: Any, zarr_format: int
) -> None:
    """One chunk encoded by the codec's own library, behind the metadata refstore writes for the
    recorded pipeline, read by zarr-python (v2: numcodecs filters; v3: the codec chain) as the
    chunk's values; a GRIB chunk as ecCodes decodes it. For v2 the filters are also applied by
    numcodecs directly, in reverse: an encode with the configured codecs decodes back too."""
    import numcodecs
    import zarr

    register_codecs()
    dt = np.dtype(dtype)
    shape: tuple[int, ...] = (2, 6, 8) if cid.endswith("-3d") else (6, 8)  # 3-d: a TIFF's planar bands
    values = (RNG.standard_normal(shape) * 50).astype(dt) if dt.kind == "f" else RNG.integers(0, 90, shape).astype(dt)
    raw = bytes(encode(values))
    if cid == "grib":
        eccodes = pytest.importorskip("eccodes")
        h = eccodes.codes_new_from_message(raw)
        try:
            values = eccodes.codes_get_values(h).reshape(shape).astype(dt)
        finally:
            eccodes.codes_release(h)
    meta = _meta(dtype=dtype, shape=shape, chunks=shape, codecs=codecs, dims=("b", "t", "y")[-len(shape) :])
    if zarr_format == 2:
        doc = {".zarray": v2_array(meta), ".zattrs": v2_attrs(meta)}
        key = ".".join("0" * len(shape))
        data: Any = raw
        pipeline = [*(doc[".zarray"]["filters"] or []), *filter(None, [doc[".zarray"]["compressor"]])]
        for cfg in reversed(pipeline):
            data = numcodecs.get_codec(dict(cfg)).decode(data)
        assert np.frombuffer(bytes(np.ascontiguousarray(data)), dt).tobytes() == values.tobytes(), cid
        if cid.startswith(("zlib", "zstd")):  # the level: the one recorded, else the library's default
            (cfg,) = pipeline
            assert bytes(numcodecs.get_codec(dict(cfg)).encode(values)) == raw, cid
    else:
        doc = {"zarr.json": v3_array(meta)}
        key = "c/" + "/".join("0" * len(shape))
        assert v3_unexpressible(meta) is None
    _write_store(tmp_path, "a", doc, {key: raw})
    got = zarr.open_array(str(tmp_path / "a"), mode="r", zarr_format=zarr_format)[...]
    assert got.dtype.newbyteorder("=") == dt.newbyteorder("=") and got.shape == shape
    assert np.array_equal(got, values), cid


# --------------------------------------------------------------------------- attributes as netCDF4-python gives them
def _same_attr(got: Any, want: Any) -> bool:
    if isinstance(want, (str, list)):
        return type(got) is type(want) and got == want
    w = np.asarray(want)
    g = np.asarray(got)
    return (
        type(got) is type(want)
        and g.dtype == w.dtype
        and g.shape == w.shape
        and np.array_equal(g, w, equal_nan=w.dtype.kind in "fc")
    )


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_64BIT_OFFSET"])
def test_nc_attr_is_what_netcdf4_python_gives(tmp_path: Path, fmt: str) -> None:
    """Every attribute, scanned, recorded as typed JSON (``encode_attr``, through JSON) and
    given back by ``nc_attr``, is what netCDF4-python's ``getncattr`` gives: one-element values
    as scalars of their type, more numbers as arrays, more strings as a list of ``str``; and
    the zarr forms' ``attr_value`` is that value as plain JSON."""
    from refstore._netcdf4 import import_netcdf4
    from refstore._values import nc_attr
    from refstore.scan.auto import AutoScanner
    from refstore.zarr_meta import attr_value

    netCDF4 = import_netcdf4()
    p = tmp_path / "a.nc"
    with netCDF4.Dataset(p, "w", format=fmt) as nc:
        nc.createDimension("x", 2)
        v = nc.createVariable("v", "f4", ("x",))
        v.units = "K"
        v.one_f = np.array([2.5], "f4")
        v.two_i = np.array([1, -2], "i2")
        v.scalar = np.float64(-3.25)
        v.nan = np.array([np.nan, np.inf], "f8")
        v.one_b = np.array([-7], "i1")
        v.empty = ""
        v.setncattr("bad", b"\xffab")  # no UTF-8: netCDF4-python gives it with a replacement character
        if fmt == "NETCDF4":
            v.setncattr_string("strs", ["a", "bc"])
            v.setncattr_string("one_str", ["x"])
            v.big = np.uint64(2**63 + 1)
            v.u2 = np.array([1, 65535], "u2")
        v[:] = 1.0
    res = AutoScanner()(str(p))
    (meta,) = [a for a in res.arrays if a.name == "v"]
    with netCDF4.Dataset(p) as nc:
        want = {k: nc["v"].getncattr(k) for k in nc["v"].ncattrs()}
    assert set(meta.attrs) == set(want)
    for k, w in want.items():
        enc = json.loads(json.dumps(meta.attrs[k]))
        got = nc_attr(enc)
        assert _same_attr(got, w), (k, got, w)
        plain = attr_value(enc)
        expected = w.tolist() if isinstance(w, (np.ndarray, np.generic)) else w
        if isinstance(w, np.ndarray) and w.dtype.kind == "f":
            assert np.array_equal(np.asarray(plain, float), w.astype(float), equal_nan=True), k
        else:
            assert plain == expected and type(plain) is type(expected), (k, plain, expected)


# --------------------------------------------------------------------------- metadata as zarr-python writes it
_ZARR_SAME = [("<f4", 0.1), (">i2", -7), ("bool", True), ("<c8", 1 - 2j), ("u1", 3), ("<f8", np.nan),
              (">f8", -np.inf), ("<u8", 2**64 - 1), ("<i8", None), ("|S3", b"ab"),
              (">c16", complex(np.nan, 2.5))]  # fmt: skip


def _zarr_python_doc(folder: Path, dt: np.dtype[Any], fill: Any, zarr_format: int, *, endian: str = "little",
                     shape: tuple[int, ...] = (5, 3), chunks: tuple[int, ...] = (2, 3)) -> dict[str, Any]:  # fmt: skip
    import warnings

    import zarr
    from zarr.codecs import BytesCodec

    kw: dict[str, Any] = {"compressors": None, "fill_value": fill if fill is not None else 0}
    if zarr_format == 3:
        kw["dimension_names"] = ("t", "y")
        if dt.itemsize > 1 and dt.kind != "S":
            kw["serializer"] = BytesCodec(endian=endian)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fixed-size bytes in v3: zarr-python's unstable-dtype warning
        zarr.create_array(str(folder), shape=shape, chunks=chunks, zarr_format=zarr_format, overwrite=True,
                          dtype=dt if zarr_format == 2 else dt.newbyteorder("<"), **kw)  # fmt: skip
    doc: dict[str, Any] = json.loads((folder / (".zarray" if zarr_format == 2 else "zarr.json")).read_text())
    return doc


def _same_fill(got: Any, want: Any, dt: np.dtype[Any]) -> bool:
    if dt.kind == "S":  # zarr-python drops trailing NULs of the value; either spelling is the same value
        import base64

        pad = [base64.b64decode(v).ljust(dt.itemsize, b"\0") for v in (got, want)]
        return pad[0] == pad[1]
    return bool(got == want)


@pytest.mark.parametrize(("dtype", "fill"), _ZARR_SAME, ids=[f"{d}-{f}" for d, f in _ZARR_SAME])
def test_array_metadata_is_what_zarr_python_writes(tmp_path: Path, dtype: str, fill: Any) -> None:
    """``.zarray`` and ``zarr.json`` (of stored and of decoded chunks) equal, key by key, what
    zarr-python writes for an array of that shape, chunks, dtype, byte order and fill value with
    no codec but ``bytes``; a group's ``zarr.json`` too."""
    from refstore.zarr_meta import v3_group

    dt = np.dtype(dtype)
    meta = _meta(dtype=dtype, shape=(5, 3), chunks=(2, 3), fill_value=None if fill is None else encode_fill(fill, dt))
    want2 = _zarr_python_doc(tmp_path / "z2", dt, fill, 2)
    got2 = v2_array(meta)
    assert set(got2) == set(want2)
    for k in want2:
        assert _same_fill(got2[k], want2[k], dt) if k == "fill_value" else got2[k] == want2[k], k
    endian = "big" if dt.byteorder == ">" else "little"
    want3 = _zarr_python_doc(tmp_path / "z3", dt, fill, 3, endian=endian)
    got3 = v3_array(meta)
    dec3 = v3_decoded_array(meta, dt, (2, 3))
    little = _zarr_python_doc(tmp_path / "z3l", dt, fill, 3)
    assert set(got3) == set(want3) - {"storage_transformers"} == set(dec3)
    for k in set(got3) - {"attributes"}:
        assert _same_fill(got3[k], want3[k], dt) if k == "fill_value" else got3[k] == want3[k], k
        assert _same_fill(dec3[k], little[k], dt) if k == "fill_value" else dec3[k] == little[k], k
    if dt.kind != "S":  # a fill value given to the decoded array's metadata: taken in the array's dtype
        other = {"i": -5, "u": 5, "b": False}.get(dt.kind, 0.3)
        want = _zarr_python_doc(tmp_path / "z3o", dt, other, 3, shape=(5, 3), chunks=(4, 3))
        dec = v3_decoded_array(meta, dt, (4, 3), fill_value=other)
        assert dec["fill_value"] == want["fill_value"] and dec["chunk_grid"] == want["chunk_grid"]
    (tmp_path / "g").mkdir()
    import zarr

    zarr.open_group(str(tmp_path / "g"), mode="w", zarr_format=3, attributes={"a": 1})
    assert v3_group({"a": 1}) == json.loads((tmp_path / "g" / "zarr.json").read_text())


def test_decoded_array_metadata_of_another_dtype_and_its_refusal() -> None:
    """The store may serve decoded values of a dtype other than the stored one (its data_type is
    the served dtype's); a dtype zarr v3 has no name for is refused naming the array."""
    meta = _meta(dtype=">i2", fill_value=encode_fill(-3, np.dtype(">i2")))
    doc = v3_decoded_array(meta, np.dtype("<f8"), (4, 3))
    assert doc["data_type"] == "float64" and doc["fill_value"] == -3.0
    assert doc["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
    with pytest.raises(UnexpressibleError, match=r"^array 'v': dtype datetime64\[s\] has no zarr v3 form here$"):
        v3_decoded_array(meta, np.dtype("<M8[s]"), (4, 3))
    rect = _meta(edges=((1, 1, 2), None))
    assert v3_unexpressible(rect) is not None and "rectilinear chunk grid along 't'" in str(v3_unexpressible(rect))
    with pytest.raises(UnexpressibleError, match="rectilinear chunk grid"):
        v3_codecs(rect)
    assert v3_codecs(rect, rectilinear=True) == [{"name": "bytes", "configuration": {"endian": "little"}}]


# --------------------------------------------------------------------------- spellings, refusals, registration
def test_non_finite_values_and_fill_values_are_spelled_as_documented() -> None:
    """``_values``' typed JSON spells non-finite floats "NaN", "Infinity", "-Infinity" (its
    documented form: plain JSON, no NaN literals); a fill value is taken in the array's dtype,
    as zarr-python writes it (a float32 0.1 is 0.10000000149011612; True in an int16 is 1)."""
    enc = encode_attr(np.array([np.nan, np.inf, -np.inf, 1.5], "<f8"))
    assert enc == {"type": "<f8", "value": ["NaN", "Infinity", "-Infinity", 1.5], "shape": [4]}
    assert encode_attr(np.complex64(complex(-np.inf, np.nan))) == {"type": "<c8", "value": ["-Infinity", "NaN"]}
    assert encode_fill(np.inf, np.dtype(">f4")) == "Infinity" and encode_fill(-np.inf, np.dtype("<f8")) == "-Infinity"
    assert encode_fill(0.1, np.dtype("<f4")) == float(np.float32(0.1)) == 0.10000000149011612
    one = encode_fill(True, np.dtype("<i2"))
    assert one == 1 and type(one) is int
    with pytest.raises(TypeError, match=r"^not a numeric scalar: datetime64$"):
        encode_fill(np.datetime64(1, "s"), np.dtype("<M8[s]"))
    for text in ("NaN", "Infinity", "-Infinity"):
        assert np.asarray(decode_fill(text, np.dtype("<f4"))).tobytes() == np.float32(text).tobytes()


def test_refusal_messages_are_whole_lines_naming_the_array() -> None:
    one = _meta(eras=({"start": 3, "axis": 0, "first_source": "a.nc"},))
    with pytest.raises(UnexpressibleError) as e:
        v2_array(one)
    assert str(e.value) == (
        "array 'v' has one era starting at element 3 along axis 0, off its chunk grid (its first source a.nc does "
        "not start on a chunk boundary); a zarr array's grid starts at 0"
    )
    with pytest.raises(UnexpressibleError) as e:
        v3_codecs(_meta(gridless=True))
    assert str(e.value) == ("array 'v' has no chunk grid: its sources' chunks cross each other's chunk edges (tiles "
                            "placed at arbitrary offsets); a zarr array's chunks lie on one grid")  # fmt: skip
    both = _meta(edges=((1, 1, 2), (2, 1)))
    for call in (v2_array, v3_codecs, lambda m: v2_filters(m)):
        with pytest.raises(UnexpressibleError) as e:
            call(both)
        assert str(e.value) == ("array 'v' has a rectilinear chunk grid along 't', 'y' (sources placed off their "
                                "chunk boundaries); a regular zarr grid cannot express it")  # fmt: skip
    assert v2_filters(both, rectilinear=True) == [] and v2_filters(_meta(codecs=({"id": "zlib"},)), rectilinear=True)
    with pytest.raises(UnexpressibleError) as e:
        v2_array(_meta(dtype="|S4", codecs=({"id": "spacepad"},)))
    assert str(e.value) == ("array 'v': space-padded HDF5 strings (read with NULs for the trailing spaces) have no "
                            "zarr form")  # fmt: skip
    with pytest.raises(UnexpressibleError) as e:
        v2_array(_meta(dtype="|S4", codecs=({"id": "nullterm"},)))
    assert str(e.value) == ("array 'v': null-terminated HDF5 strings holding bytes after their NUL (read as NULs) "
                            "have no zarr form")  # fmt: skip


def test_codec_registration_is_quiet_and_idempotent(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                    caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """``register_codecs`` registers every codec named here without a word (imagecodecs logs
    "already registered" warnings for each when asked to be verbose), any number of times."""
    import logging

    import numcodecs

    from refstore import zarr_meta

    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(zarr_meta, "_registered", False)
    register_codecs()
    register_codecs()
    monkeypatch.setattr(zarr_meta, "_registered", False)
    register_codecs()
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert zarr_meta._registered is True
    assert numcodecs.get_codec({"id": "refstore.grib", "dtype": "<f4"}).codec_id == "refstore.grib"
    assert numcodecs.get_codec({"id": "imagecodecs_lzw"}).codec_id == "imagecodecs_lzw"

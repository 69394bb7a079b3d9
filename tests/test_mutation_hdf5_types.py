"""Which HDF5 stored types the scanner references as numpy reads them, against h5py/HDF5, in-process
(no collection, no Lance: the mutation run's ``./dev mutate hdf5``).

The scanner references a dataset's stored bytes and reads them later as the dtype h5py gives it,
without HDF5. h5py gives the nearest numpy dtype of any integer, bitfield or float type, and HDF5
converts the stored bits on read; so the scanner must refuse every stored type whose bits numpy's
dtype would misread (``_stored_type_reason``) and accept the standard ones.

Expected values come from h5py and HDF5 only: the dtype h5py gives (``ds.dtype``), the type's
properties (``ds.id.get_type()``: size, precision, offset), the storage (``get_offset``,
``get_storage_size``) and what HDF5 reads: ``ds[()]``, or, where h5py has no conversion to its
own memory type (bitfields), HDF5's reading into the standard bitfield of that size
(``DatasetID.read`` with that memory type: ``H5T__conv_b_b``). An accepted type: the referenced
bytes, as the recorded dtype, are HDF5's values bit for bit. A refused type: the same bytes, as
h5py's dtype, are not HDF5's values (or not even that dtype's size).

Every dataset is scanned twice: through the header bytes (``_hdf5_layout`` describes only plain
integers and IEEE floats, so every other type is opened through HDF5) and with no header reader
(every dataset through HDF5's ``DatasetID``).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest
from h5py import h5d, h5p, h5s, h5t

from refstore.fixtures.hdf5_headers import _hdf5_lib
from refstore.scan import hdf5 as scanner

from ._hdf5_paths import scan

if TYPE_CHECKING:
    from pathlib import Path

    from refstore.scan._types import ScanResult

_N = 6
_INTS = np.array([1, -2, 300, -2048, 0, 2047])
_FLOATS = np.array([1.0, -2.5, 0.0, 3.25e-3, 1e4, -0.125])


def _padded_int(base: Any, precision: int, offset: int) -> Any:
    tid = base.copy()
    tid.set_precision(precision)
    tid.set_offset(offset)
    return tid


def _float(base: Any, **changes: Any) -> Any:
    tid = base.copy()
    if "ebias" in changes:
        tid.set_ebias(tid.get_ebias() + changes["ebias"])
    if "norm" in changes:
        tid.set_norm(changes["norm"])
    if "size" in changes:
        tid.set_size(changes["size"])
    return tid


def _complex_pair(member: Any) -> Any:
    """A compound ``{r, i}`` of two ``member`` floats: h5py reads it as a complex dtype."""
    size = member.get_size()
    tid = h5t.create(h5t.COMPOUND, 2 * size)
    tid.insert(b"r", 0, member)
    tid.insert(b"i", size, member)
    return tid


def _enum(base: Any, members: dict[bytes, int]) -> Any:
    tid = h5t.enum_create(base)
    for name, value in members.items():
        tid.enum_insert(name, value)
    return tid


def _bitfield(lib: Any, n: int, precision: int, offset: int) -> Any:
    """A little-endian bitfield of ``n`` bytes with padding bits (h5py has no setter for them)."""
    tid = getattr(h5t, f"STD_B{8 * n}LE").copy()
    assert lib.H5Tset_precision(ctypes.c_int64(tid.id), ctypes.c_size_t(precision)) >= 0
    assert lib.H5Tset_offset(ctypes.c_int64(tid.id), ctypes.c_size_t(offset)) >= 0
    return tid


def _native_complex(lib: Any, base: Any) -> Any:
    """HDF5 2.0's complex type class over ``base`` (``H5Tcomplex_create``)."""
    lib.H5Tcomplex_create.restype = ctypes.c_int64
    return h5t.typewrap(lib.H5Tcomplex_create(ctypes.c_int64(base.id)))


def _create(f: Any, name: str, tid: Any) -> Any:
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5d.ALLOC_TIME_EARLY)  # contiguous storage with an offset, written or not
    return h5py.Dataset(h5d.create(f.id, name.encode(), tid, h5s.create_simple((_N,)), dcpl=dcpl))


def _write_converted(f: Any, name: str, tid: Any, values: np.ndarray[Any, Any]) -> None:
    """Values HDF5 converts into the stored type (the file holds its bits for them)."""
    _create(f, name, tid)[...] = values


def _write_stored(f: Any, name: str, tid: Any, bits: np.ndarray[Any, Any]) -> None:
    """Bytes written as the stored type itself (no conversion: the file holds exactly them)."""
    assert bits.dtype.itemsize == tid.get_size()
    _create(f, name, tid).id.write(h5s.ALL, h5s.ALL, np.ascontiguousarray(bits), mtype=tid)


def _write_types(path: Path, lib: Any) -> dict[str, str | None]:
    """The file's datasets -> the exact reason each is refused with (spelled from h5py's type
    properties), None for the ones accepted."""
    expected: dict[str, str | None] = {}
    rng = np.random.default_rng(16)
    with h5py.File(path, "w") as f:
        # integers: every standard one, and ones whose precision or offset leaves padding bits
        for size in (1, 2, 4, 8):
            for order in ("LE", "BE"):
                for sign in ("I", "U"):
                    name = f"std_{sign}{8 * size}{order}"
                    info = np.iinfo(f"{sign.lower()}{size}")
                    _write_converted(f, name, getattr(h5t, f"STD_{sign}{8 * size}{order}"),
                                     np.clip(_INTS, info.min, info.max))  # fmt: skip
                    expected[name] = None
        for name, base, prec, off in (("int12", h5t.STD_I16LE, 12, 0), ("int12_at_4", h5t.STD_I16BE, 12, 4),
                                      ("uint20_at_3", h5t.STD_U32LE, 20, 3), ("int7", h5t.STD_I8LE, 7, 0),
                                      ("int40_at_8", h5t.STD_I64BE, 40, 8)):  # fmt: skip
            tid = _padded_int(base, prec, off)
            _write_converted(f, name, tid, _INTS if base.get_sign() else np.abs(_INTS) % 1000)
            expected[name] = (f"integer type of {prec} bits at bit {off} of {tid.get_size()} bytes "
                              "(HDF5 converts it on read)")  # fmt: skip
        # enumerations: numpy reads them as their base integer (bool: h5py's FALSE/TRUE enum)
        _write_converted(f, "enum_i16be", _enum(h5t.STD_I16BE, {b"a": 1, b"b": -300, b"c": 2047}),
                         np.array([1, -300, 2047, 1, 1, -300]))  # fmt: skip
        _write_converted(f, "enum_u8", _enum(h5t.STD_U8LE, {b"x": 0, b"y": 200}), np.array([200, 0, 0, 200, 0, 200]))
        _write_converted(f, "enum_i32le", _enum(h5t.STD_I32LE, {b"p": -70000, b"q": 5}),
                         np.array([5, -70000, 5, 5, -70000, 5]))  # fmt: skip
        f.create_dataset("enum_bool", data=np.array([True, False, True, True, False, False]))
        for name in ("enum_i16be", "enum_u8", "enum_i32le", "enum_bool"):
            expected[name] = None
        padded = _padded_int(h5t.STD_I16LE, 12, 4)
        _write_converted(f, "enum_over_int12_at_4", _enum(padded, {b"lo": -5, b"hi": 1000}),
                         np.array([-5, 1000, 1000, -5, -5, 1000]))  # fmt: skip
        expected["enum_over_int12_at_4"] = "integer type of 12 bits at bit 4 of 2 bytes (HDF5 converts it on read)"
        # bitfields: the standard ones of every size and order; HDF5 converts none to an integer
        for size in (1, 2, 4, 8):
            for order in ("LE", "BE"):
                name = f"bits{8 * size}{order}"
                dt = np.dtype(f"{'<' if order == 'LE' else '>'}u{size}")
                _write_stored(f, name, getattr(h5t, f"STD_B{8 * size}{order}"),
                              rng.integers(0, 1 << (8 * size - 1), _N, dtype=np.int64).astype(dt))  # fmt: skip
                expected[name] = None
        if lib is not None:
            for name, size, prec, off in (("bits10_at_3", 2, 10, 3), ("bits12", 2, 12, 0), ("bits7", 1, 7, 0),
                                          ("bits30_at_2", 4, 30, 2)):  # fmt: skip
                _write_stored(f, name, _bitfield(lib, size, prec, off),
                              rng.integers(0, 1 << (8 * size), _N).astype(f"<u{size}") | 1)  # fmt: skip
                expected[name] = f"bitfield of {size} bytes with padding bits (HDF5 cannot convert it)"
        # floats: IEEE binary16/32/64 in both orders and the native long double are numpy's layouts
        for bits in (16, 32, 64):
            for order in ("LE", "BE"):
                name = f"ieee_f{bits}{order}"
                _write_converted(f, name, getattr(h5t, f"IEEE_F{bits}{order}"), _FLOATS)
                expected[name] = None
        _write_converted(f, "long_double", h5t.NATIVE_LDOUBLE, _FLOATS)
        expected["long_double"] = None
        for name, tid in (("f32_unnormalized", _float(h5t.IEEE_F32LE, norm=h5t.NORM_NONE)),
                          ("f64be_unnormalized", _float(h5t.IEEE_F64BE, norm=h5t.NORM_NONE)),
                          ("f16_unnormalized", _float(h5t.IEEE_F16LE, norm=h5t.NORM_NONE)),
                          ("f64_in_16_bytes", _float(h5t.IEEE_F64LE, size=16))):  # fmt: skip
            _write_converted(f, name, tid, _FLOATS)
            expected[name] = (f"floating-point type of {tid.get_size()} bytes whose layout is not IEEE 754's "
                              "(HDF5 converts it on read)")  # fmt: skip
        biased = _float(h5t.IEEE_F32LE, ebias=1)  # h5py widens it: float64
        _write_converted(f, "f32_biased", biased, _FLOATS)
        expected["f32_biased"] = "stored type of 4 bytes is read as float64 (8 bytes)"
        # complex numbers as a compound {r, i} of two floats
        _write_converted(f, "pair_f32", _complex_pair(h5t.IEEE_F32LE), _FLOATS + 1j * _FLOATS[::-1])
        _write_converted(f, "pair_f64be", _complex_pair(h5t.IEEE_F64BE), _FLOATS - 2j)
        expected["pair_f32"] = expected["pair_f64be"] = None
        unnorm = _float(h5t.IEEE_F32LE, norm=h5t.NORM_NONE)
        _write_converted(f, "pair_unnormalized", _complex_pair(unnorm), _FLOATS + 1j * _FLOATS[::-1])
        expected["pair_unnormalized"] = ("floating-point type of 4 bytes whose layout is not IEEE 754's "
                                         "(HDF5 converts it on read)")  # fmt: skip
        _write_converted(f, "pair_biased", _complex_pair(biased), _FLOATS + 1j)
        expected["pair_biased"] = "stored type of 8 bytes is read as complex128 (16 bytes)"
        if lib is not None and hasattr(h5t, "COMPLEX"):  # HDF5 2.0's own complex class
            _write_stored(f, "complex_f32be", h5t.COMPLEX_IEEE_F32BE, (_FLOATS + 2j).astype(">c8"))
            expected["complex_f32be"] = None
            # over a float whose exponent bias is not IEEE's: HDF5 2.0.0 reads it into h5py's
            # complex64 without converting the parts (h5py's values are numpy's reading of the
            # bytes, though HDF5's own float conversion of a part gives half of it); the scanner
            # agrees with h5py, which this keeps checking
            _write_stored(f, "complex_over_biased_f32", _native_complex(lib, biased), (_FLOATS + 2j).astype("<c8"))
            expected["complex_over_biased_f32"] = None
    return expected


def _scan(path: Path, *, bytes_path: bool) -> ScanResult:
    """Called by each test itself (milliseconds): the mutation run gives a mutant only the tests
    that called the mutated function, and a scan in a shared fixture is its first test's only."""
    return scan(path, "bytes" if bytes_path else "hdf5")


@pytest.fixture(scope="module")
def types_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str | None]]:
    path = tmp_path_factory.mktemp("h5types") / "types.h5"
    return path, _write_types(path, _hdf5_lib())


def _hdf5_values(ds: Any) -> np.ndarray[Any, Any]:
    """HDF5's reading of the dataset: h5py's, or for a bitfield (no conversion to h5py's integer
    memory type) into the standard bitfield of its size and order h5py's dtype has."""
    if ds.id.get_type().get_class() != h5t.BITFIELD:
        return np.asarray(ds[()])
    dt = ds.dtype
    out = np.zeros(ds.shape, dt)
    order = "BE" if dt.byteorder == ">" else "LE"
    ds.id.read(h5s.ALL, h5s.ALL, out, mtype=getattr(h5t, f"STD_B{8 * dt.itemsize}{order}"))
    return out


def _stored(path: Path, ds: Any) -> bytes:
    off, size = ds.id.get_offset(), ds.id.get_storage_size()
    assert off is not None and size == ds.id.get_type().get_size() * _N
    with open(path, "rb") as fh:
        fh.seek(off)
        return fh.read(size)


def _same_values(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> bool:
    """Bit for bit; x87 long doubles on the 10 bytes of their value (HDF5's precision 80: the
    6 padding bytes are whatever memory held)."""
    if got.dtype.kind in "fc" and got.dtype.itemsize // (2 if got.dtype.kind == "c" else 1) == 16:
        bits = h5t.NATIVE_LDOUBLE.get_precision() // 8
        g = got.view(np.uint8).reshape(-1, 16)[:, :bits]
        w = np.ascontiguousarray(want).view(np.uint8).reshape(-1, 16)[:, :bits]
        return bool(np.array_equal(g, w))
    return got.tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize("bytes_path", [True, False], ids=["header-bytes", "hdf5"])
def test_accepted_types_read_as_hdf5_reads_them(types_file: tuple[Path, dict[str, str | None]],
                                                bytes_path: bool) -> None:  # fmt: skip
    path, expected = types_file
    res = _scan(path, bytes_path=bytes_path)
    metas = {m.name: m for m in res.arrays}
    assert set(metas) == set(expected)
    rows = {r["array"]: r for r in res.chunks.to_pylist()}
    accepted = [n for n, why in expected.items() if why is None]
    with h5py.File(path, "r") as f:
        for name in accepted:
            ds, meta = f[name], metas[name]
            assert (meta.status, meta.reason) == ("ok", None), name
            assert np.dtype(meta.dtype) == ds.dtype and meta.dtype == ds.dtype.str, name
            r = rows[name]
            assert (r["offset"], r["length"]) == (ds.id.get_offset(), ds.id.get_storage_size()), name
            got = np.frombuffer(_stored(path, ds), np.dtype(meta.dtype))
            assert _same_values(got, _hdf5_values(ds)), name


@pytest.mark.parametrize("bytes_path", [True, False], ids=["header-bytes", "hdf5"])
def test_types_numpy_would_misread_are_refused(types_file: tuple[Path, dict[str, str | None]],
                                               bytes_path: bool) -> None:  # fmt: skip
    path, expected = types_file
    res = _scan(path, bytes_path=bytes_path)
    metas = {m.name: m for m in res.arrays}
    referenced = {r["array"] for r in res.chunks.to_pylist()}
    refused = {n: why for n, why in expected.items() if why is not None}
    assert {"int12", "f32_unnormalized", "pair_unnormalized", "enum_over_int12_at_4"} <= set(refused)
    with h5py.File(path, "r") as f:
        for name, why in refused.items():
            ds, meta = f[name], metas[name]
            assert (meta.status, meta.reason) == ("unsupported", why), name
            assert name not in referenced, name
            # the refusal is needed: the stored bytes, read as h5py's dtype, are not HDF5's values
            raw = _stored(path, ds)
            if len(raw) != ds.dtype.itemsize * _N:
                continue
            assert not _same_values(np.frombuffer(raw, ds.dtype), _hdf5_values(ds)), name


def test_types_made_through_the_hdf5_library_are_in_the_file(types_file: tuple[Path, dict[str, str | None]]) -> None:
    """The bitfields with padding bits and HDF5 2.0's complex types exist here (the HDF5 library
    h5py loaded reached): without them the tests above check none. The complex over a biased
    float is what its comment says: h5py reads numpy's values, HDF5's conversion of a part half."""
    if _hdf5_lib() is None:
        pytest.skip("HDF5's H5Tset_precision is not reachable here (the HDF5 library h5py loaded)")
    path, expected = types_file
    made = {"bits10_at_3", "bits12", "bits7", "bits30_at_2", "complex_f32be", "complex_over_biased_f32"}
    assert made <= set(expected)
    with h5py.File(path, "r") as f:
        tid = f["bits10_at_3"].id.get_type()
        assert tid.get_class() == h5t.BITFIELD and f["bits10_at_3"].dtype == np.dtype("<u2")
        assert _hdf5_lib().H5Tget_precision(ctypes.c_int64(tid.id)) == 10
        ds = f["complex_over_biased_f32"]
        assert ds.id.get_type().get_class() == h5t.COMPLEX and ds.dtype == np.dtype("<c8")
        stored = np.frombuffer(_stored(path, ds), "<f4")
        assert ds[()].view("<f4").tobytes() == stored.tobytes()
        parts = np.zeros(2 * _N, "<f8")
        parts.view("<f4")[: 2 * _N] = stored
        h5t.convert(ds.id.get_type().get_super(), h5t.IEEE_F64LE, 2 * _N, parts)
        assert np.array_equal(parts, stored.astype("<f8") / 2)


def test_values_held_inline_through_hdf5_are_h5pys(tmp_path: Path) -> None:
    """A filtered chunk larger than its array is held inline (its values); the header bytes
    describe its storage but not its values, so they are read through HDF5 on the dataset the
    header path already opened (``_Dataset`` given that id: the path it is built with there is
    empty)."""
    path = tmp_path / "held.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("gz", data=np.arange(5, dtype=">i2") * 300, chunks=(8,), maxshape=(None,), compression="gzip")
        f.create_dataset("gz2d", data=_FLOATS.reshape(2, 3), chunks=(4, 3), maxshape=(None, 3), shuffle=True,
                         compression="gzip")  # fmt: skip
    for bytes_path in (True, False):
        res = _scan(path, bytes_path=bytes_path)
        metas = {m.name: m for m in res.arrays}
        rows = {r["array"]: r for r in res.chunks.to_pylist()}
        with h5py.File(path, "r") as f:
            for name in ("gz", "gz2d"):
                ds = f[name]
                assert (metas[name].status, metas[name].chunks) == ("ok", ds.shape), (name, bytes_path)
                assert metas[name].codecs == () and rows[name]["offset"] is None, (name, bytes_path)
                assert rows[name]["inline"] == ds[()].tobytes(), (name, bytes_path)


# ---------------------------------------------------------------- chunk indexes HDF5 reports wrongly
_GRID = (4, 5, 3)
_EA_REASON = ("chunk index is an extensible array over unlimited dimension {}: HDF5's chunk iteration reports "
              "its chunk offsets wrongly (not swizzled back)")  # fmt: skip
_UNKNOWN_REASON = ("unlimited dimension {} is not the first and the chunk index is unknown without the object "
                   "header bytes (HDF5 reports an extensible array's chunk offsets wrongly)")  # fmt: skip
_CHUNK = (2, 2, 2)


def _write_unlimited(path: Path, libver: str, lib: Any) -> dict[str, tuple[int, ...]]:
    """Chunked datasets of shape ``_GRID`` with some dimensions unlimited (name -> maxshape
    with -1 for unlimited), every chunk written with distinct values. ``conv*``: turned into
    a version 1 B-tree index (``H5Dformat_convert``) in a file whose superblock stays 3.
    ``*_enum``: an enumeration type, which the header bytes do not describe (the dataset is then
    opened through HDF5 even with them)."""
    out: dict[str, tuple[int, ...]] = {}
    fapl = h5p.create(h5p.FILE_ACCESS)
    low = h5py.h5f.LIBVER_EARLIEST if libver == "earliest" else h5py.h5f.LIBVER_LATEST
    fapl.set_libver_bounds(low, h5py.h5f.LIBVER_LATEST)
    fcpl = h5p.create(h5p.FILE_CREATE)
    if libver == "latest_sizes4":  # 4-byte addresses: the header reader parses no header of it
        fcpl.set_sizes(4, 8)  # (4-byte lengths: HDF5 2.0.0 misreads its own unlimited dimensions)
    with h5py.File(h5py.h5f.create(str(path).encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)) as f:
        for name, maxshape, is_enum in (("ea0", (None, 5, 3), False), ("ea1", (4, None, 3), False),
                                        ("ea2", (4, 5, None), False), ("bt2", (None, None, 3), False),
                                        ("bt2_12", (4, None, None), False), ("fixed", (4, 5, 3), False),
                                        ("ea1_enum", (4, None, 3), True), ("conv", (4, None, 3), False),
                                        ("conv_enum", (4, None, 3), True)):  # fmt: skip
            if name.startswith("conv") and (libver == "earliest" or lib is None):
                continue
            dt = h5py.enum_dtype({"zero": 0, "seven": 7}, basetype="<i2") if is_enum else "<i2"
            d = f.create_dataset(name, shape=_GRID, dtype=dt, maxshape=maxshape, chunks=_CHUNK)
            d[...] = np.arange(np.prod(_GRID)).reshape(_GRID)
            if name.startswith("conv"):
                assert lib.H5Dformat_convert(ctypes.c_int64(d.id.id)) >= 0
            out[name] = tuple(-1 if m is None else m for m in maxshape)
    return out


@pytest.fixture(scope="module")
def unlimited_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, tuple[int, ...]]]]:
    d = tmp_path_factory.mktemp("h5unlimited")
    lib = _hdf5_lib()
    return {libver: (d / f"{libver}.h5", _write_unlimited(d / f"{libver}.h5", libver, lib))
            for libver in ("latest", "earliest", "latest_sizes4")}  # fmt: skip


def _iterated_chunks(path: Path, ds: Any) -> dict[tuple[int, ...], tuple[int, int, bool]]:
    """Every chunk ``H5Dchunk_iter`` reports: its key (first element // chunk shape) -> (byte
    offset, size, whether its stored values are h5py's read of the region at that key)."""
    reported: list[tuple[tuple[int, ...], int, int]] = []
    ds.id.chunk_iter(lambda si: reported.append((tuple(si.chunk_offset), si.byte_offset, si.size)))
    values = ds[()]
    out: dict[tuple[int, ...], tuple[int, int, bool]] = {}
    with open(path, "rb") as fh:
        for at, offset, size in reported:
            fh.seek(offset)
            chunk = np.frombuffer(fh.read(size), ds.dtype).reshape(ds.chunks)
            region = values[tuple(slice(a, a + c) for a, c in zip(at, ds.chunks, strict=True))]
            same = chunk[tuple(slice(0, n) for n in region.shape)].tobytes() == region.tobytes()
            out[tuple(a // c for a, c in zip(at, ds.chunks, strict=True))] = (offset, size, same)
    return out


@pytest.mark.parametrize("bytes_path", [True, False], ids=["header-bytes", "hdf5"])
@pytest.mark.parametrize("libver", ["latest", "earliest", "latest_sizes4"])
def test_chunk_indexes_hdf5_misreports_are_refused(unlimited_files: dict[str, tuple[Path, dict[str, tuple[int, ...]]]],
                                                   libver: str, bytes_path: bool) -> None:  # fmt: skip
    """An extensible array index (superblock 3, exactly one unlimited dimension) over a dimension
    that is not the first: ``H5Dchunk_iter`` reports its chunks elsewhere, so it is refused; with
    the header bytes the index type is read from the layout message, without them any dataset
    with one unlimited dimension not first is refused, whatever its superblock (and so with a
    header reader that parses none of the file's headers: 4-byte addresses). Every other dataset
    is referenced as ``H5Dchunk_iter`` reports it, each chunk holding h5py's values of its region
    (``H5Dget_chunk_info_by_coord`` is wrong for the extensible array too: not the oracle)."""
    path, maxshapes = unlimited_files[libver]
    res = _scan(path, bytes_path=bytes_path)
    metas = {m.name: m for m in res.arrays}
    rows = res.chunks.to_pylist()
    assert set(metas) == set(maxshapes)
    with h5py.File(path, "r") as f:
        superblock = f.id.get_create_plist().get_version()[0]
        assert (superblock >= 3) == (libver != "earliest")
        header_parsed = bytes_path and libver != "latest_sizes4"
        for name, maxshape in maxshapes.items():
            ds, meta = f[name], metas[name]
            unlimited = [i for i, m in enumerate(maxshape) if m == -1]
            iterated = _iterated_chunks(path, ds)
            assert len(iterated) == ds.id.get_num_chunks() == 12, name
            one_inner = len(unlimited) == 1 and unlimited[0] != 0
            misreported = not all(same for _o, _s, same in iterated.values())
            assert misreported == (one_inner and superblock >= 3 and not name.startswith("conv")), name
            refused = one_inner and (misreported or not header_parsed)
            if refused:
                assert meta.status == "unsupported", name
                assert meta.reason == (_EA_REASON if header_parsed else _UNKNOWN_REASON).format(unlimited[0]), name
                assert not [r for r in rows if r["array"] == name], name
                continue
            assert (meta.status, meta.reason, meta.chunks) == ("ok", None, _CHUNK), name
            got = {(r["k0"], r["k1"], r["k2"]): (r["offset"], r["length"]) for r in rows if r["array"] == name}
            assert got == {k: (o, n) for k, (o, n, _same) in iterated.items()}, name


def _one_unlimited_bt2(path: Path, lib: Any) -> None:
    """A version 2 B-tree chunk index with exactly one unlimited dimension, the second: HDF5
    gives such a dataset an extensible array, so a file with two unlimited dimensions (a v2
    B-tree) has the last one's maximum set to its size in the dataspace message, and the
    object header's checksum computed again (``H5_checksum_metadata``). HDF5 reads it."""
    with h5py.File(path, "w", libver="latest") as f:
        d = f.create_dataset("bt2_one", shape=_GRID, dtype="<i2", maxshape=(4, None, None), chunks=_CHUNK)
        d[...] = np.arange(np.prod(_GRID)).reshape(_GRID)
    buf = bytearray(path.read_bytes())
    unlimited = b"\xff" * 8
    space = bytes([2, 3, 1, 1]) + np.array(_GRID, "<u8").tobytes() + np.array([4], "<u8").tobytes() + unlimited * 2
    at = buf.find(space)
    assert at > 0 and buf.find(space, at + 1) < 0
    buf[at + len(space) - 8 : at + len(space)] = np.array([_GRID[2]], "<u8").tobytes()
    start = buf.rfind(b"OHDR", 0, at)
    flags = buf[start + 5]
    size_at = start + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
    width = 1 << (flags & 0x03)
    end = size_at + width + int.from_bytes(buf[size_at : size_at + width], "little")
    assert start < at < end
    lib.H5_checksum_metadata.restype = ctypes.c_uint32
    data = bytes(buf[start:end])
    checksum = lib.H5_checksum_metadata(data, ctypes.c_size_t(len(data)), ctypes.c_uint32(0))
    buf[end : end + 4] = int(checksum).to_bytes(4, "little")
    path.write_bytes(bytes(buf))


def test_a_b_tree_index_over_one_inner_unlimited_dimension(tmp_path: Path) -> None:
    """The layout message says which index a dataset has: a v2 B-tree (chunk coordinates in its
    records, nothing to swizzle) over one unlimited inner dimension is referenced through the
    header bytes as HDF5 iterates it; without them, refused as any such dataset of the file."""
    lib = _hdf5_lib()
    if lib is None:
        pytest.skip("HDF5's H5_checksum_metadata is not reachable here (the HDF5 library h5py loaded)")
    path = tmp_path / "bt2_one.h5"
    _one_unlimited_bt2(path, lib)
    with h5py.File(path, "r") as f:
        ds = f["bt2_one"]
        assert ds.maxshape == (4, None, 3)
        assert np.array_equal(ds[()], np.arange(np.prod(_GRID)).reshape(_GRID))
        iterated = _iterated_chunks(path, ds)
        assert len(iterated) == 12 and all(same for _o, _s, same in iterated.values())
    for bytes_path in (True, False):
        res = _scan(path, bytes_path=bytes_path)
        meta = res.arrays[0]
        if not bytes_path:
            assert (meta.status, meta.reason) == ("unsupported", _UNKNOWN_REASON.format(1))
            continue
        assert (meta.status, meta.reason, meta.chunks) == ("ok", None, _CHUNK)
        got = {(r["k0"], r["k1"], r["k2"]): (r["offset"], r["length"]) for r in res.chunks.to_pylist()}
        assert got == {k: (o, n) for k, (o, n, _same) in iterated.items()}


# ---------------------------------------------------------------- attribute types
def _same_attr(got: Any, want: Any) -> bool:
    """h5py's value: fixed-length strings as the text refstore records (UTF-8 or ASCII)."""
    want = np.asarray(want)
    if want.dtype.kind == "S":
        return bool(np.array_equal(np.asarray(got), np.char.decode(want, "utf-8")))
    got = np.asarray(got)
    return bool(np.array_equal(got, want)) and (got.dtype.kind, got.dtype.itemsize) == (
        want.dtype.kind, want.dtype.itemsize)  # fmt: skip


def test_attributes_of_types_sharing_a_numpy_dtype_read_as_h5py(tmp_path: Path) -> None:
    """Attributes whose numpy dtypes are one ``dtype.str`` but whose HDF5 memory types differ
    (a UTF-8 and an ASCII fixed-length string of one size, an enumeration and its base integer,
    each read first), on one object in creation order: every one as h5py reads it."""
    from refstore._values import decode_attr

    path = tmp_path / "attrs.h5"
    with h5py.File(path, "w", track_order=True) as f:
        for name, order in (("utf8_first", ("s_utf8", "s_ascii", "e", "i")),
                            ("ascii_first", ("s_ascii", "s_utf8", "i", "e"))):  # fmt: skip
            g = f.create_group(name, track_order=True)
            for a in order:
                if a == "s_utf8":
                    g.attrs.create(a, np.array([b"caf\xc3\xa9", b"de"], "S5"), dtype=h5py.string_dtype("utf-8", 5))
                elif a == "s_ascii":
                    g.attrs.create(a, np.array([b"xyz"], "S5"), dtype=h5py.string_dtype("ascii", 5))
                elif a == "e":
                    g.attrs.create(a, np.array([1, -300], "<i2"), dtype=h5py.enum_dtype({"a": 1, "b": -300}, "<i2"))
                else:
                    g.attrs[a] = np.array([5, -6], "<i2")
    for bytes_path in (True, False):
        res = _scan(path, bytes_path=bytes_path)
        with h5py.File(path, "r") as f:
            for name in ("utf8_first", "ascii_first"):
                want = f[name].attrs
                got = {k: decode_attr(v) for k, v in res.groups[name].items()}
                assert list(got) == list(want), (name, bytes_path)
                for k in want:
                    assert _same_attr(got[k], want[k]), (name, k, bytes_path)


# ---------------------------------------------------------------- dimension scales
_NOT_A_VARIABLE = b"This is a netCDF dimension but not a netCDF variable"


def _write_scales(path: Path, lib: Any) -> None:
    """Dimension scales with every form of ``NAME``: a plain name, netCDF's dimension-only text
    (fixed-length, as netCDF-C writes it, and variable-length), none (a ``CLASS`` attribute
    alone), and one of a type HDF5 cannot convert to h5py's (a bitfield with padding bits)."""
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(3, dtype="<f4")).make_scale("x")
        f.create_dataset("nv", shape=(4,), dtype="<f4").make_scale(_NOT_A_VARIABLE.decode() + "         4")
        vn = f.create_dataset("vlen_name", shape=(6,), dtype="<f4")
        vn.make_scale("q")
        del vn.attrs["NAME"]
        vn.attrs["NAME"] = _NOT_A_VARIABLE.decode() + "         6"  # h5py: a variable-length string
        nn = f.create_dataset("no_name", data=np.arange(2, dtype="<i2"))
        ct = h5t.C_S1.copy()
        ct.set_size(16)
        ct.set_strpad(h5t.STR_NULLTERM)
        h5py.h5a.create(nn.id, b"CLASS", ct, h5s.create(h5s.SCALAR)).write(
            np.array(b"DIMENSION_SCALE", "S16"), mtype=ct
        )
        if lib is not None:
            on = f.create_dataset("odd_name", data=np.arange(5, dtype="<i2"))
            on.make_scale("z")
            del on.attrs["NAME"]
            bt = _bitfield(lib, 2, 10, 3)
            h5py.h5a.create(on.id, b"NAME", bt, h5s.create(h5s.SCALAR)).write(np.array(0x1234, "<u2"), mtype=bt)


def test_dimension_only_scales_are_left_out_as_their_name_says(tmp_path: Path) -> None:
    """A dimension scale is a netCDF dimension without a variable (no array) when h5py reads its
    ``NAME`` as text starting with netCDF's words; a scale without ``NAME``, or whose ``NAME``
    h5py cannot read, is an array like any other. With the header bytes, a fixed-length
    ``NAME`` and the ``CLASS`` are read from them: HDF5 is not asked for either."""
    lib = _hdf5_lib()
    path = tmp_path / "scales.h5"
    _write_scales(path, lib)
    with h5py.File(path, "r") as f:
        want: dict[str, bytes] = {}
        for name, ds in f.items():
            assert h5py.h5ds.is_scale(ds.id), name
            try:
                text = ds.attrs["NAME"]
            except (KeyError, OSError):
                text = None
            text = text.encode() if isinstance(text, str) else text
            if not (isinstance(text, bytes) and text.startswith(_NOT_A_VARIABLE)):
                want[name] = ds[()].tobytes()
    assert {"x", "no_name"} <= set(want) and "nv" not in want and "vlen_name" not in want
    asked: list[str] = []
    read_attr = scanner._read_attr

    def spy(oid: Any, name: bytes) -> Any:
        if name == b"NAME":
            asked.append(h5py.h5i.get_name(oid).decode())
        return read_attr(oid, name)

    scale_asked: list[str] = []
    is_scale = h5py.h5ds.is_scale

    def scale_spy(oid: Any) -> Any:
        scale_asked.append(h5py.h5i.get_name(oid).decode())
        return is_scale(oid)

    scanner._read_attr = spy
    h5py.h5ds.is_scale = scale_spy
    try:
        for bytes_path in (True, False):
            asked.clear()
            scale_asked.clear()
            res = _scan(path, bytes_path=bytes_path)
            metas = {m.name: m for m in res.arrays}
            assert set(metas) == set(want), bytes_path
            inline = {r["array"]: r for r in res.chunks.to_pylist()}
            for name, values in want.items():
                assert metas[name].status == "ok", (name, bytes_path)
                r = inline[name]
                with open(path, "rb") as fh:
                    fh.seek(r["offset"])
                    assert fh.read(r["length"]) == values, (name, bytes_path)
            if bytes_path:  # what the header bytes tell (CLASS, a fixed-length NAME) is not asked
                assert "/nv" not in asked and "/x" not in asked, asked
                assert "/nv" not in scale_asked and "/x" not in scale_asked, scale_asked
            else:
                assert {"/nv", "/vlen_name", "/no_name"} - set(asked) == {"/no_name"}, asked
                assert set(scale_asked) == {f"/{n}" for n in (*want, "nv", "vlen_name")}, scale_asked
    finally:
        scanner._read_attr = read_attr
        h5py.h5ds.is_scale = is_scale


@pytest.mark.parametrize("kind", ["bytes", "hdf5"])
def test_variable_length_string_attributes_read_as_h5pys(tmp_path: Path, kind: str) -> None:  # fmt: skip
    """Variable-length UTF-8 string attributes (scalar, array, bytes that are no UTF-8) are
    recorded as the ``str`` values h5py gives (it decodes with surrogate escapes), both ways."""
    from refstore._values import decode_attr

    path = tmp_path / "vs.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("d", data=np.arange(3.0))
        d.attrs["arr"] = np.array(["a", "héllo", ""], dtype=h5py.string_dtype())
        d.attrs.create("bad", np.array([b"ok", b"\xff\xfebad"], dtype=object), dtype=h5py.string_dtype("utf-8"))
        d.attrs["one"] = "x"
    meta = {m.name: m for m in scan(path, kind).arrays}["d"]
    with h5py.File(path) as f:
        want = dict(f["d"].attrs.items())
    assert sorted(meta.attrs) == sorted(want) == ["arr", "bad", "one"]
    for k, w in want.items():
        got = decode_attr(meta.attrs[k])
        expect = w.tolist() if isinstance(w, np.ndarray) else w
        assert got == expect, k
        assert all(type(v) is str for v in (got if isinstance(got, list) else [got])), k


# ---------------------------------------------------------------- null-terminated strings
def _nullterm(f: h5py.File, name: str, values: np.ndarray[Any, Any], *, pad: int = h5t.STR_NULLTERM,
              chunks: tuple[int, ...] | None = None, gzip: bool = False, compact: bool = False) -> None:  # fmt: skip
    """``values`` stored byte for byte (written in the file type) as fixed-length C strings."""
    t = h5t.C_S1.copy()
    t.set_size(values.dtype.itemsize)
    t.set_strpad(pad)
    plist = h5p.create(h5p.DATASET_CREATE)
    if chunks:
        plist.set_chunk(chunks)
        if gzip:
            plist.set_deflate(4)
    if compact:
        plist.set_layout(h5d.COMPACT)
    maxshape = tuple(h5s.UNLIMITED for _ in values.shape) if chunks else None
    ds = h5d.create(f.id, name.encode(), t, h5s.create_simple(values.shape, maxshape), plist)
    if values.size:
        ds.write(h5s.ALL, h5s.ALL, values, mtype=t)


def _after_nul(values: np.ndarray[Any, Any]) -> bool:
    """Whether some string of ``values`` holds a byte other than NUL after its first NUL (its
    stored bytes, item by item)."""
    raw, n = values.tobytes(), values.dtype.itemsize
    return any(
        b"\0" in s and s.split(b"\0", 1)[1].strip(b"\0") != b"" for s in (raw[i : i + n] for i in range(0, len(raw), n))
    )


# stored bytes: dirty (a byte after a NUL), or clean in the ways a wrong test of dirt would not be
STRINGS = {
    "dirty": np.array([[b"ab\0cd", b"xyz", b"\0\0q"], [b"abcde", b"a\0\0\0e", b""]], "S5"),
    "dirty_last": np.array([[b"abcde", b"x", b"y"], [b"z", b"w", b"v\0\0\0w"]], "S5"),  # in the last string only
    "clean": np.array([[b"ab", b"xyz", b""], [b"abcde", b"a", b"q"]], "S5"),  # strings using every byte too
    "clean_columns": np.array([b"a\0\0", b"abc", b"\0\0\0", b"xyz"], "S3"),  # a NUL above each later byte
    "dirty_two": np.array([b"ab", b"\0a"], "S2"),  # the shortest that can be dirty
    "one_byte": np.array([b"a", b"\0", b"b"], "S1"),
    "empty": np.zeros((0, 3), "S4"),
}


@pytest.mark.parametrize("kind", ["bytes", "hdf5"])
def test_nullterm_step_only_where_a_stored_string_holds_bytes_after_its_nul(tmp_path: Path, kind: str) -> None:
    """The ``nullterm`` value step is recorded exactly for the null-terminated string datasets
    whose stored bytes hold a byte after some string's NUL (h5py then reads them otherwise:
    asserted), contiguous or chunked (gzip, edge chunks), never for null-padded ones or compact
    ones (whose values the scan takes from h5py, converted)."""
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        for name, values in STRINGS.items():
            if values.size:
                _nullterm(f, f"{name}_contiguous", values)
                _nullterm(f, f"{name}_compact", values, compact=True)
                _nullterm(f, f"{name}_nullpad", values, pad=h5t.STR_NULLPAD)
            _nullterm(f, f"{name}_chunked", values, chunks=(1,) * (values.ndim - 1) + (2,), gzip=True)
    metas = {m.name: m for m in scan(path, kind).arrays}
    with h5py.File(path) as f:
        assert set(metas) == set(f)
        for name, values in STRINGS.items():
            dirty = _after_nul(values)
            assert dirty is (name.startswith("dirty")), name
            for layout in ("contiguous", "chunked", "compact", "nullpad"):
                key = f"{name}_{layout}"
                if key not in f:
                    continue
                meta, ds = metas[key], f[key]
                assert meta.status == "ok", key
                steps = [c for c in meta.codecs if c.get("id") == "nullterm"]
                assert steps == ([{"id": "nullterm"}] if dirty and layout in ("contiguous", "chunked") else []), key
                if values.size and layout != "nullpad":  # h5py reads otherwise exactly when dirty
                    assert (ds[()].tobytes() != values.tobytes()) is dirty, key


def test_nullterm_strings_past_the_read_limit_or_unreadable_keep_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored bytes over ``NULLTERM_CHECK_MAX`` are not read: the step is kept (even clean); up to
    it they are read. A dataset whose chunks HDF5 cannot read keeps the step and the scan goes on."""
    clean = STRINGS["clean"]  # 6 strings of 5 bytes: 30 stored bytes
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        _nullterm(f, "clean", clean)
        _nullterm(f, "bad", clean, chunks=(1, 3), gzip=True)
        f.create_dataset("v", data=np.arange(4, dtype="<i2"))
        offset = f["bad"].id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as fh:  # the first chunk's deflate stream made garbage
        fh.seek(offset)
        fh.write(b"\xff" * 8)
    with h5py.File(path) as f, pytest.raises(OSError):
        f["bad"][()]
    for limit, kept in ((30, False), (29, True)):
        monkeypatch.setattr(scanner, "NULLTERM_CHECK_MAX", limit)
        metas = {m.name: m for m in scan(path, "bytes").arrays}
        assert ({"id": "nullterm"} in metas["clean"].codecs) is kept, limit
        assert metas["bad"].codecs[-1] == {"id": "nullterm"} and metas["bad"].status == "ok", limit
        assert metas["v"].status == "ok"

"""The HDF5 scanner reads names, dimensions, attributes, fill values and chunk shapes through
h5py's low-level API (scan speed); every value it records must equal what h5py's high-level
API (``File.visititems``, ``Dataset.attrs``, ``.dims``, ``.fillvalue``, ``.chunks``) gives, on
every HDF5 file in ../shared/data and on a generated file with the awkward cases."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore._values import decode_attr, decode_fill, encode_attr
from refstore.scan._hdf5_names import var_name
from refstore.scan.hdf5 import HDF5Scanner

from ._netcdf_names import netcdf_dims
from .conftest import hdf5_files_in_shared

if TYPE_CHECKING:
    from pathlib import Path

FILES = hdf5_files_in_shared()
# bookkeeping attributes netCDF4/HDF5 write for themselves, never recorded as attributes
HIDDEN = {"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates",
          "_nc3_strict", "_NCProperties", "_SuperblockVersion", "_IsNetcdf4"}  # fmt: skip
DIM_ONLY = b"This is a netCDF dimension but not a netCDF variable"


def _text(name: str | bytes) -> str:
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


def _hl_attrs(obj: Any) -> dict[str, Any]:
    """Attributes as h5py's AttributeManager reads them, in its order, minus the unreadable."""
    out: dict[str, Any] = {}
    for name in obj.attrs:
        if name in HIDDEN:
            continue
        try:
            value = obj.attrs[name]
        except (OSError, TypeError, ValueError):
            continue
        if isinstance(value, h5py.Empty):
            continue
        out[_text(name)] = value
    return out


def _same_attrs(recorded: dict[str, dict[str, Any]], hl: dict[str, Any], what: str) -> None:
    expected = {k: e for k, v in hl.items() if (e := encode_attr(v)) is not None}
    assert list(recorded) == list(expected), what  # same names, same order
    assert recorded == expected, what
    for k, enc in recorded.items():  # and the decoded values equal h5py's, dtype included
        v = hl[k]
        got = decode_attr(enc)
        if isinstance(v, (str, bytes)) or (isinstance(v, np.ndarray) and v.dtype.kind in "OSU"):
            continue  # text: compared through its encoding above
        want = np.asarray(v)
        assert np.asarray(got).dtype == want.dtype.newbyteorder("=") or np.asarray(got).dtype == want.dtype, (what, k)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{what} {k}")


def _other_links(f: h5py.File, datasets: dict[str, h5py.Dataset]) -> list[str]:
    """Adds to ``datasets`` the datasets reached by a soft link or a further hard link, as
    h5py lists them; returns the external links (refused by name)."""
    links: list[str] = []
    f.visit_links(lambda n: links.append(_text(n)))
    external = []
    for name in links:
        if name in datasets:
            continue
        if isinstance(f.get(name, getlink=True), h5py.ExternalLink):
            external.append(name)
        elif isinstance(obj := f.get(name), h5py.Dataset):
            datasets[name] = obj
    return external


def _check_file(path: Path, *, names: bool = True) -> int:
    """``names``: dimension names compared with netCDF-C's (netCDF4-python in this process)."""
    result = HDF5Scanner()(str(path))
    metas = {m.name: m for m in result.arrays}
    nc_dims = netcdf_dims(path) if names else None  # netCDF-C's names (None: not compared)
    checked = 0
    with h5py.File(path, "r") as f:
        hl_groups: dict[str, dict[str, Any]] = {"": _hl_attrs(f)}
        hl_datasets: dict[str, h5py.Dataset] = {}

        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Group):
                hl_groups[_text(name)] = _hl_attrs(obj)
            elif isinstance(obj, h5py.Dataset):
                hl_datasets[_text(obj.name).lstrip("/")] = obj

        f.visititems(visit)
        refused = _other_links(f, hl_datasets)  # links h5py lists beyond one path per object
        for name in refused:
            assert metas[name].status == "unsupported" and "external link" in str(metas[name].reason), name
        assert list(result.groups) == list(hl_groups)
        for g, attrs in hl_groups.items():
            _same_attrs(result.groups[g], attrs, f"{path.name}:/{g}")
        expected_names = []
        for name, h in hl_datasets.items():
            label = h.attrs.get("NAME") if "NAME" in h.attrs else None
            label = label.encode() if isinstance(label, str) else label
            if h.is_scale and isinstance(label, bytes) and label.startswith(DIM_ONLY):
                continue
            expected_names.append(name)
        assert sorted(metas) == sorted([var_name(n) for n in expected_names] + refused), path.name
        if nc_dims is not None and set(nc_dims) != {var_name(n) for n in expected_names}:
            nc_dims = None  # netCDF-C's HDF5 reads some CLASS/NAME form otherwise than h5py's
        for name in expected_names:
            h, m = hl_datasets[name], metas[var_name(name)]
            what = f"{path.name}:{name}"
            if h.shape is None:
                assert m.shape == () and m.status == "unsupported", what
                continue
            assert m.shape == h.shape and m.dtype == h.dtype.str, what
            if nc_dims is not None:
                assert m.dims == nc_dims[var_name(name)], what
            else:
                assert len(m.dims) == h.ndim, what
            _same_attrs(m.attrs, _hl_attrs(h), what)
            full = tuple(max(s, 1) for s in h.shape)
            assert m.chunks in ((h.chunks,) if h.chunks is not None and m.status != "ok" else (h.chunks, full)), what
            if h.chunks is None:
                assert m.chunks == full, what
            if m.fill_value is not None:
                got = np.asarray(decode_fill(m.fill_value, h.dtype), h.dtype)
                assert got.tobytes() == np.asarray(h.fillvalue, h.dtype).tobytes(), what
            else:
                assert m.status != "ok" or h.dtype.kind not in "biufcS", what
            checked += 1
    return checked


@pytest.mark.skipif(not FILES, reason="../shared/data is not present")
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_file_metadata_equals_h5py(path: Path) -> None:
    assert _check_file(path, names=False) > 0  # (names: tests/test_hdf5_names.py)


@pytest.fixture(scope="module")
def awkward(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Attributes of every kind h5py reads (and some it cannot), tracked creation order, scales
    attached and not, nested groups, a non-UTF-8 attribute name, contiguous and chunked layouts."""
    path = tmp_path_factory.mktemp("meta") / "awkward.h5"
    with h5py.File(path, "w", track_order=True) as f:
        f.attrs["zz_first"] = np.int16(-3)
        f.attrs["aa_second"] = "text"
        f.attrs["vlen_list"] = np.array(["a", "bé"], dtype=h5py.string_dtype())
        f.attrs["fixed"] = np.bytes_(b"fixed  ")
        f.attrs["fixed_arr"] = np.array([b"ab", b"c"], dtype="S2")
        f.attrs["big"] = np.array([1.5, -2.0], dtype=">f8")
        f.attrs["cplx"] = np.complex64(1 + 2j)
        f.attrs["flag"] = np.bool_(True)
        f.attrs["empty"] = h5py.Empty("f4")
        f.attrs.create("arrtype", np.array([[1, 2, 3], [4, 5, 6]], "<i4"), dtype=np.dtype(("<i4", (3,))))
        f.attrs["nan"] = np.float32(np.nan)
        x = f.create_dataset("x", data=np.arange(6, dtype="f8"))
        x.make_scale("x")
        x.attrs["units"] = "m"
        y = f.create_dataset("y", data=np.arange(4, dtype="<i2"))
        y.make_scale("y")
        v = f.create_dataset("v", data=np.ones((4, 6), ">f4"), chunks=(2, 3), compression="gzip", fillvalue=-9.5)
        v.dims[0].attach_scale(y)
        v.dims[1].attach_scale(x)
        v.attrs["scale_factor"] = np.float32(0.25)
        v.attrs["ref"] = x.ref  # an object reference: not recorded
        v.attrs.create(b"caf\xe9", np.int8(1))  # a name that is not UTF-8
        f.create_dataset("phony", data=np.zeros((3, 3), "u1"))  # no scales: phony dims of one length
        g = f.create_group("grp", track_order=False)
        g.attrs["b"] = np.uint64(2**63)
        g.attrs["a"] = np.array([1, 2], "u2")
        sub = g.create_group("sub")
        sub.attrs["s"] = "deep"
        c = sub.create_dataset("plain", data=np.arange(5, dtype="i8"))
        c.attrs["long_name"] = np.array(["one string"], dtype=h5py.string_dtype())
        f.create_dataset("strings", data=np.array([b"abc", b"de"], "S3"))
        f.create_dataset("null", data=h5py.Empty("f4"))
    return path


def test_generated_file_metadata_equals_h5py(awkward: Path) -> None:
    assert _check_file(awkward) == 6
    result = HDF5Scanner()(str(awkward))
    metas = {m.name: m for m in result.arrays}
    # the cases the file is made for really are in it
    # (netCDF-C cannot open this file: its numbering is checked in tests/test_hdf5_names.py)
    assert metas["v"].dims == ("y", "x") and metas["phony"].dims == ("phony_dim_3", "phony_dim_4")
    assert list(result.groups[""])[:2] == ["zz_first", "aa_second"]  # creation order kept
    assert list(result.groups["grp"]) == ["a", "b"]  # by name when not tracked
    assert "ref" not in metas["v"].attrs and "empty" not in result.groups[""]
    assert "caf\ufffd" in metas["v"].attrs
    assert result.groups[""]["arrtype"]["shape"] == [2, 3]


def _series_file(path: Path, i: int, libver: str, *, n_attrs: int = 3, stamp: str = "2024-01-01",
                 vlen: str = "abc") -> Path:  # fmt: skip
    """One file of a series: attributes that repeat, one fixed string that changes with the
    same length (``stamp``), a variable-length one (``vlen``: its bytes live in a heap)."""
    with h5py.File(path, "w", libver=libver) as f:
        f.attrs["title"] = np.bytes_(b"series")
        f.attrs["date_created"] = np.bytes_(stamp.encode())
        t = f.create_dataset("t", data=np.array([float(i)]), maxshape=(None,), chunks=(1,))
        t.make_scale("t")
        t.attrs["units"] = np.bytes_(b"days since 2000-01-01")
        v = f.create_dataset("v", data=np.full((1, 4), i, "<f4"), chunks=(1, 2))
        v.dims[0].attach_scale(t)
        for k in range(n_attrs):
            v.attrs[f"a{k}"] = np.float32(k + 0.5)
        v.attrs["valid"] = np.array([i, i + 1], "<i2")
        v.attrs["comment"] = vlen
        g = f.create_group("g", track_order=True)
        g.attrs["z"] = np.int8(1)
        g.attrs["a"] = np.int8(2)
    return path


@pytest.mark.parametrize("libver", ["earliest", "latest"])  # object headers version 1 and 2
def test_attributes_read_once_per_series_equal_h5py(tmp_path: Path, libver: str) -> None:
    """Files whose attribute messages repeat are read through the cache of ``_hdf5_header``;
    every file's recorded attributes still equal h5py's reading of that file: a changed value
    of the same length, a variable-length string (bytes elsewhere, never a key), dense storage
    (20 attributes: a fractal heap under libver latest), tracked creation order."""
    from refstore.scan import hdf5 as scanner
    from refstore.scan._hdf5_header import HeaderReader

    files = [
        _series_file(tmp_path / "a.h5", 0, libver),
        _series_file(tmp_path / "b.h5", 0, libver),  # the same attributes
        _series_file(tmp_path / "c.h5", 1, libver, stamp="2024-01-02", vlen="abd"),
        _series_file(tmp_path / "d.h5", 2, libver, n_attrs=20),
        _series_file(tmp_path / "e.h5", 0, libver, vlen="abd"),  # only the variable-length value differs
    ]
    scanner._ATTR_CACHE._got.clear()
    for p in files:
        _check_file(p)
    keys = {}
    for p in files:
        with h5py.File(p, "r") as f, HeaderReader(str(p)) as h:
            for name in ("/", "v", "t", "g"):
                oid = h5py.h5o.open(f.id, name.encode())
                info = h5py.h5o.get_info(oid)
                keys[p.name, name] = h.attribute_key(info.addr, info.num_attrs, scanner._HIDDEN_ATTRS)
            v, t = (h5py.h5o.get_info(h5py.h5o.open(f.id, n)) for n in (b"v", b"t"))
            # dimension names and the scale's NAME come from the header bytes (the global heap for the list)
            # (d.h5 under libver latest: from dense storage, the fractal heap: ``_hdf5_dense``)
            assert h.first_scales(v.addr, v.num_attrs, 2) == [t.addr, None]
            assert h.name_starts(t.addr, t.num_attrs, b"t") is True  # the scale's NAME
            assert h.name_starts(t.addr, t.num_attrs, b"This is") is False
            assert h.is_scale(t.addr, t.num_attrs) is True  # H5DSis_scale
            assert h.is_scale(v.addr, v.num_attrs) is False
    assert keys["a.h5", "t"] is not None and keys["a.h5", "t"] == keys["b.h5", "t"]  # a proof, reused
    assert keys["a.h5", "/"] is not None and keys["a.h5", "/"] != keys["c.h5", "/"]  # same size, other value
    assert keys["a.h5", "v"] is None  # a variable-length string is never proved by its bytes
    assert keys["a.h5", "g"] is not None
    if libver == "latest":
        assert keys["d.h5", "v"] is None  # dense storage, read from the heap: its vlen string proves nothing
    assert len(scanner._ATTR_CACHE._got) >= 3


# ---------------------------------------------------------------- awkward object headers
# (fixtures/hdf5_headers.py: every header version, shared messages, CLASS/NAME forms H5DS never
# writes, links, user blocks, netCDF-4 writers; pairs of series files a byte-keyed cache could
# confuse). Written once per module; each check is a scan and an h5py read of a small file.
from refstore.fixtures import hdf5_headers  # noqa: E402


@pytest.fixture(scope="module")
def headers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return hdf5_headers.write_all(tmp_path_factory.mktemp("headers"))


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    return hdf5_headers.write_pairs(tmp_path_factory.mktemp("pairs"))


@pytest.mark.parametrize("case", [*hdf5_headers.CASES, *hdf5_headers.NETCDF_CASES])
def test_awkward_header_metadata_equals_h5py(headers: dict[str, Path], case: str) -> None:
    """Names, dimension names, attributes (names, order, values, dtypes), fill values and chunks
    equal h5py's high-level API, read through HDF5 (an empty attribute cache) and again from
    the cache where the header bytes prove the attributes."""
    from refstore.scan import hdf5 as scanner

    if case not in headers:
        pytest.skip("HDF5's low-level calls are not reachable here (fixtures/hdf5_headers.py)")
    scanner._ATTR_CACHE._got.clear()
    assert _check_file(headers[case]) > 0
    assert _check_file(headers[case]) > 0


def test_awkward_headers_through_one_cache(headers: dict[str, Path]) -> None:
    """Every file scanned after all the others (in both orders) through one attribute cache,
    as a scan of a mixed folder would: each file's attributes are its own."""
    from refstore.scan import hdf5 as scanner

    files = [headers[c] for c in hdf5_headers.CASES if c in headers]
    scanner._ATTR_CACHE._got.clear()
    for path in files:
        HDF5Scanner()(str(path))
    for path in files[::-1]:
        _check_file(path)
    assert len(scanner._ATTR_CACHE._got) > 10  # the cache was used, not bypassed


def _nc_walk(group: Any, prefix: str = "") -> Any:
    for name, var in group.variables.items():
        yield prefix + name, var
    for name, sub in group.groups.items():
        yield from _nc_walk(sub, f"{prefix}{name}/")


def _check_netcdf(path: Path) -> None:
    """Every netCDF variable recorded with netCDF4-python's dimension names and attributes
    (names, order, values and dtypes as ``getncattr`` gives them); nothing else recorded."""
    import netCDF4

    from refstore._values import nc_attr

    metas = {m.name: m for m in HDF5Scanner()(str(path)).arrays}
    with netCDF4.Dataset(path) as ds:
        variables = dict(_nc_walk(ds))
        assert set(metas) == set(variables), path.name
        for name, var in variables.items():
            m, what = metas[name], f"{path.name}:{name}"
            assert m.dims == var.dimensions, what
            want = {k: var.getncattr(k) for k in var.ncattrs()}
            got = {k: nc_attr(e) for k, e in m.attrs.items()}
            assert list(got) == list(want), what
            for k, v in want.items():
                g = got[k]
                if isinstance(v, str):
                    assert g == v, (what, k)
                    continue
                assert np.asarray(g).dtype == np.asarray(v).dtype, (what, k)
                np.testing.assert_array_equal(np.asarray(g), np.asarray(v), err_msg=f"{what} {k}")


@pytest.mark.parametrize("case", list(hdf5_headers.NETCDF_CASES))
def test_netcdf4_files_equal_netcdf4_python(headers: dict[str, Path], case: str) -> None:
    """netCDF-4 files from netCDF4-python (NETCDF4, NETCDF4_CLASSIC) and h5netcdf: dimensions
    shared across groups, dimensions without a variable, variable-length string attributes."""
    from refstore.scan import hdf5 as scanner

    scanner._ATTR_CACHE._got.clear()
    _check_netcdf(headers[case])
    _check_netcdf(headers[case])  # the second scan through the cache


NC_FILES = [p for p in FILES if p.suffix.lower() in (".nc", ".nc4")]  # netCDF-4 (plain HDF5 names dims otherwise)


@pytest.mark.skipif(not NC_FILES, reason="../shared/data is not present")
@pytest.mark.parametrize("path", NC_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_netcdf4_files_equal_netcdf4_python(path: Path) -> None:
    from refstore.scan import hdf5 as scanner

    scanner._ATTR_CACHE._got.clear()
    _check_netcdf(path)
    _check_netcdf(path)


@pytest.mark.parametrize("pair", list(hdf5_headers.PAIRS))
def test_series_files_differing_in_one_attribute(pairs: dict[str, tuple[Path, Path]], pair: str) -> None:
    """Two files of a series, the second differing from the first in one attribute whose bytes
    in the object header can be the same (a datatype or dataspace kept in the shared-message
    heap under the same heap ID): each file's recorded attributes are its own, in either order."""
    from refstore.scan import hdf5 as scanner

    if pair not in pairs:
        pytest.skip("HDF5's low-level calls are not reachable here (fixtures/hdf5_headers.py)")
    a, b = pairs[pair]
    for first, second in ((a, b), (b, a)):
        scanner._ATTR_CACHE._got.clear()
        _check_file(first)
        _check_file(second)
        with h5py.File(first, "r") as f, h5py.File(second, "r") as g:
            x, y = f["d"].attrs["x"], g["d"].attrs["x"]
            assert x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y)  # they do differ


def test_dense_pairs_are_keyed_from_the_heap(pairs: dict[str, tuple[Path, Path]]) -> None:
    """The dense pairs above are read from the fractal heap (not left to HDF5), and the two
    files' keys differ: what made the previous test pass is the key, not a fallback."""
    from refstore.scan import hdf5 as scanner
    from refstore.scan._hdf5_header import HeaderReader

    for pair in ("dense_same_length_value", "dense_same_size_type"):
        keys = []
        for path in pairs[pair]:
            with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
                info = h5py.h5o.get_info(f["d"].id)
                assert info.num_attrs == 12
                keys.append(h.attribute_key(info.addr, info.num_attrs, scanner._HIDDEN_ATTRS))
        assert keys[0] is not None and keys[1] is not None and keys[0][:2] == b"\xffD", pair
        assert keys[0] != keys[1], pair


def test_shared_parts_prove_nothing(pairs: dict[str, tuple[Path, Path]], headers: dict[str, Path]) -> None:
    """The pairs are what they are made for: the shared datatype / dataspace messages are the same
    bytes in both files (a key made of them would collide), and the header reader makes no key
    of them, nor reads CLASS, NAME or DIMENSION_LIST through them."""
    from refstore.scan import hdf5 as scanner
    from refstore.scan._hdf5_header import HeaderReader

    def attr_raws(path: Path) -> list[bytes]:
        with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
            info = h5py.h5o.get_info(f["d"].id)
            attrs = h._attributes(info.addr, info.num_attrs)
            assert attrs is not None
            assert h.attribute_key(info.addr, info.num_attrs, scanner._HIDDEN_ATTRS) is None
            return [attrs[n].raw for n in ("x", "units")]

    for pair in ("shared_dtype_sign", "shared_space_shape", "shared_both"):
        a, b = pairs[pair]
        assert attr_raws(a) == attr_raws(b), pair
    path = headers["shared_dtype_latest"]
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        t, v = h5py.h5o.get_info(f["time"].id), h5py.h5o.get_info(f["v"].id)
        assert h.is_scale(t.addr, t.num_attrs) is None and f["time"].is_scale
        assert h.first_scales(v.addr, v.num_attrs, 2) is None
        assert h.name_starts(t.addr, t.num_attrs, b"t") is None


def test_only_the_class_h5ds_writes_is_read_from_the_bytes(headers: dict[str, Path]) -> None:
    """HDF5 versions compare other CLASS forms differently: those are left to HDF5 (None)."""
    from refstore.scan._hdf5_header import HeaderReader

    for lv in hdf5_headers.LIBVERS:
        path = headers[f"class_name_{lv}"]
        with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
            known = {}
            for name in f:
                info = h5py.h5o.get_info(f[name].id)
                known[name] = h.is_scale(info.addr, info.num_attrs)
            assert known["name_dim_only"] is True and f["name_dim_only"].is_scale
            assert known["name_array1"] is True and known["name_spacepad"] is True
            assert {k for k, v in known.items() if v is None} == {k for k in known if k.startswith("cls_")}, lv
            nd = h5py.h5o.get_info(f["name_array1"].id)
            assert h.name_starts(nd.addr, nd.num_attrs, hdf5_headers.NC_DIM_ONLY) is None  # an array: HDF5 reads it


def test_attribute_cache_hands_out_copies() -> None:
    """A caller changing the attributes it got (lists included) changes nothing for the next
    file whose attributes come from the same cache entry."""
    from refstore._values import encode_attr
    from refstore.scan._hdf5_header import AttrCache

    cache = AttrCache()
    reads: list[int] = []

    def read() -> tuple[dict[str, dict[str, Any]], bool]:
        reads.append(1)
        return {"v": encode_attr(np.array([1.0, 2.0], "<f4")), "c": encode_attr(np.array([1 + 2j], "<c8"))}, True  # type: ignore[dict-item]

    first = cache.get(b"k", read)
    first["v"]["value"].append(3.0)
    first["v"]["shape"][0] = 3
    first["c"]["value"][0][0] = 9.0
    first["v"]["type"] = "<f8"
    again = cache.get(b"k", read)
    assert len(reads) == 1
    assert again == {"v": encode_attr(np.array([1.0, 2.0], "<f4")), "c": encode_attr(np.array([1 + 2j], "<c8"))}


def test_header_cases_are_what_they_are_made_for(headers: dict[str, Path]) -> None:
    """Dense storage in the simple form (a fractal heap of one direct block, a name index of one
    leaf: by count, by phase change) gives a key read from the heap (``_hdf5_dense``), a huge
    value in it none; a header back
    to compact storage (its attribute info message kept, without a heap) and re-added
    attributes (null messages left behind) give one; a user block and 4-byte addresses turn
    the header reader off; superblocks 0-3 are all there."""
    from refstore.scan import hdf5 as scanner
    from refstore.scan._hdf5_header import HeaderReader

    def key(case: str, obj: str) -> bytes | None:
        path = headers[case]
        with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
            info = h5py.h5o.get_info(f[obj].id)
            return h.attribute_key(info.addr, info.num_attrs, scanner._HIDDEN_ATTRS)

    for lv in ("v108", "v110", "latest"):
        assert (key(f"phase_change_{lv}", "dense") or b"")[:2] == b"\xffD"
        assert key(f"phase_change_{lv}", "compact_again") is not None
        assert key(f"huge_{lv}", "d") is None
        assert (key(f"attrs20_{lv}", "d") or b"")[:2] == b"\xffD" and key(f"attrs8_{lv}", "d") is not None
        assert (key(f"attrs40_{lv}", "d") or b"")[:2] == b"\xffD"  # a name index of two levels
        assert (key(f"attrs300_{lv}", "d") or b"")[:2] == b"\xffD"  # and a heap of several rows
    for lv in hdf5_headers.LIBVERS:
        assert key(f"readd_{lv}", "d") is not None and key(f"readd_tracked_{lv}", "d") is not None
        assert key(f"userblock_{lv}", "x") is None
    assert key("sizes4", "x") is None and key("superblock1", "x") is not None
    versions = {headers[c].read_bytes()[8] for c in ("plain_earliest", "superblock1", "plain_v108", "plain_latest")}
    assert versions == {0, 1, 2, 3}


def test_header_reader_that_cannot_open_never_fails_a_scan(
    headers: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header reader only spares HDF5 calls: when it cannot open the file HDF5 opened (out
    of descriptors, say), the scan reads everything through HDF5 and records the same."""
    from refstore.scan import _hdf5_header
    from refstore.scan import hdf5 as scanner

    path = headers["plain_v110"]
    want = HDF5Scanner()(str(path))

    def refuse(self: Any, path: str) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(_hdf5_header.HeaderReader, "__init__", refuse)
    scanner._ATTR_CACHE._got.clear()
    got = HDF5Scanner()(str(path))
    assert got.arrays == want.arrays and got.groups == want.groups


def test_a_failed_attribute_read_is_not_kept_for_the_series(pairs: dict[str, tuple[Path, Path]],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """An attribute read that fails in one file (an I/O error, say) leaves it out of that scan's
    record only: the next file with the same header bytes (here the same file again) reads its
    own, not a cached record without it."""
    from refstore.scan import hdf5 as scanner

    a = pairs["same_length_value"][0]
    with h5py.File(a, "r") as f:
        units = f["d"].attrs["units"]
    real = scanner._read_attr
    calls = {"n": 0}

    def flaky(oid: Any, name: bytes) -> Any:
        if name == b"units" and calls["n"] == 0:
            calls["n"] += 1
            raise OSError("Can't synchronously read data (transient)")
        return real(oid, name)

    monkeypatch.setattr(scanner, "_read_attr", flaky)
    scanner._ATTR_CACHE._got.clear()
    first = {m.name: m for m in HDF5Scanner()(str(a)).arrays}
    assert "units" not in first["d"].attrs and calls["n"] == 1  # the failure happened, in file a
    again = {m.name: m for m in HDF5Scanner()(str(a)).arrays}  # the same bytes, read again
    assert decode_attr(again["d"].attrs["units"]) == units.decode()


# ---------------------------------------------------------------- attribute counts and forms (issue 12)
# Object header version 1 (HDF5 spec: 16-byte prefix, message count at bytes 2-3, block size at
# 8-11; messages of type(2) size(2) flags(1) reserved(3) and body, 8-byte aligned): HDF5 counts
# every attribute message (``H5Oget_info``'s num_attrs) and reads no attribute info message in a
# version 1 header (``H5A__get_ainfo`` is for version 2 headers only), so bytes edited by hand can
# put there what HDF5 ignores and what a byte-keyed cache could take for a proof.


def _v1_messages(data: bytes, addr: int) -> list[tuple[int, int, int]]:
    """(position, type, body size) of every message of the first block of a v1 header."""
    size = int.from_bytes(data[addr + 8 : addr + 12], "little")
    pos, out = addr + 16, []
    while pos + 8 <= addr + 16 + size:
        kind, msize = int.from_bytes(data[pos : pos + 2], "little"), int.from_bytes(data[pos + 2 : pos + 4], "little")
        out.append((pos, kind, msize))
        pos += 8 + msize
    return out


@pytest.fixture(scope="module")
def odd_counts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One file: ``src`` (a version 2 header, 10 attributes in dense storage), ``d`` (version 1,
    10 other compact attributes; the null message a deleted attribute left retyped as an
    attribute info message naming ``src``'s heap and name index), ``e`` (version 1, no
    attribute; its null message split into an empty attribute info message and a null one);
    another: ``d`` holding two attribute messages named ``ab`` (1.0, then 2.0: the second's
    name edited from ``ac``) and ``x`` holding one, ``ab`` = 2.0, byte for byte ``d``'s second."""
    d = tmp_path_factory.mktemp("counts")
    src = d / "ainfo_src.h5"
    with h5py.File(src, "w", libver="latest") as f:
        s = f.create_dataset("src", data=np.arange(3, dtype="<i4"))
        for i in range(10):
            s.attrs[f"a{i}"] = np.float64(i)
    with h5py.File(src, "r+", libver="earliest") as f:
        v = f.create_dataset("d", data=np.arange(3, dtype="<i4"))
        for i in range(11):
            v.attrs[f"a{i}"] = np.float64(100 + i)
        del v.attrs["a10"]  # leaves a null message of an attribute's size
        f.create_dataset("e", data=np.arange(3, dtype="<i4"))
        addrs = {n: h5py.h5o.get_info(f[n].id).addr for n in ("src", "d", "e")}
        versions = {n: h5py.h5o.get_info(f[n].id).hdr.version for n in ("src", "d", "e")}
    assert versions == {"src": 2, "d": 1, "e": 1}
    data = bytearray(src.read_bytes())
    # src's attribute info message (version 2 header: "OHDR", version, flags, [times], [phase
    # change], chunk #0 size (1 << (flags & 3) bytes), then messages type(1) size(2) flags(1))
    at, flags = addrs["src"], data[addrs["src"] + 5]
    pos = at + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
    width = 1 << (flags & 0x03)
    end = pos + width + int.from_bytes(data[pos : pos + width], "little")
    pos += width
    ainfo = b""
    while pos + 4 <= end:
        kind, msize = data[pos], int.from_bytes(data[pos + 1 : pos + 3], "little")
        pos += 4 + (2 if flags & 0x04 else 0)
        if kind == 0x15:
            ainfo = bytes(data[pos : pos + msize])
        pos += msize
    assert ainfo[:2] == b"\x00\x00" and len(ainfo) == 18  # version 0, no creation order: heap, name index
    assert int.from_bytes(ainfo[2:10], "little") != (1 << 64) - 1  # dense storage
    pos, _kind, msize = next(m for m in _v1_messages(bytes(data), addrs["d"]) if m[1] == 0)
    assert msize >= len(ainfo)
    data[pos : pos + 2] = (0x15).to_bytes(2, "little")
    data[pos + 8 : pos + 8 + msize] = ainfo + bytes(msize - len(ainfo))
    e = addrs["e"]
    pos, _kind, msize = next(m for m in _v1_messages(bytes(data), e) if m[1] == 0)
    data[pos : pos + 8] = (0x15).to_bytes(2, "little") + bytes(6)  # an attribute info message of 0 bytes
    data[pos + 8 : pos + 16] = (0).to_bytes(2, "little") + (msize - 8).to_bytes(2, "little") + bytes(4)
    data[e + 2 : e + 4] = (int.from_bytes(data[e + 2 : e + 4], "little") + 1).to_bytes(2, "little")
    ainfo_path = d / "ainfo.h5"
    ainfo_path.write_bytes(bytes(data))

    dup = d / "dup_src.h5"
    with h5py.File(dup, "w", libver="earliest") as f:
        v = f.create_dataset("d", data=np.arange(3, dtype="<i4"))
        v.attrs["ab"], v.attrs["ac"] = np.float64(1.0), np.float64(2.0)
        x = f.create_dataset("x", data=np.arange(3, dtype="<i4"))
        x.attrs["ab"] = np.float64(2.0)
        daddr, xaddr = h5py.h5o.get_info(v.id).addr, h5py.h5o.get_info(x.id).addr
    data = bytearray(dup.read_bytes())
    # v1 attribute message: version, reserved, name size(2), datatype size(2), dataspace size(2), name
    names = {bytes(data[p + 16 : p + 19]): p for p, kind, _ in _v1_messages(bytes(data), daddr) if kind == 0x0C}
    data[names[b"ac\x00"] + 17] = ord("b")
    raw_d = [bytes(data[p : p + 8 + n]) for p, kind, n in _v1_messages(bytes(data), daddr) if kind == 0x0C]
    raw_x = [bytes(data[p : p + 8 + n]) for p, kind, n in _v1_messages(bytes(data), xaddr) if kind == 0x0C]
    assert len(raw_d) == 2 and raw_d[0] != raw_d[1] and raw_x == [raw_d[1]]
    dup_path = d / "dup.h5"
    dup_path.write_bytes(bytes(data))
    return {"ainfo": ainfo_path, "dup": dup_path}


def test_an_attribute_info_message_in_a_v1_header_is_ignored_as_hdf5_ignores_it(odd_counts: dict[str, Any]) -> None:
    """HDF5 reads ``d``'s compact attributes and none for ``e`` (its attribute info messages are
    in version 1 headers); the scan records what h5py reads for each object (values, dtypes,
    order), through an empty attribute cache and again through the filled one; ``d``'s header is
    not taken as dense storage (that would make ``src``'s heap its attributes' proof)."""
    from refstore.scan import _hdf5_header
    from refstore.scan import hdf5 as scanner
    from refstore.scan._hdf5_header import HeaderReader

    path = odd_counts["ainfo"]
    with h5py.File(path, "r") as f:
        assert dict(f["d"].attrs) == {f"a{i}": 100.0 + i for i in range(10)}
        assert dict(f["src"].attrs) == {f"a{i}": float(i) for i in range(10)}
        assert len(f["e"].attrs) == 0 and h5py.h5o.get_info(f["e"].id).num_attrs == 0
        infos = {n: h5py.h5o.get_info(f[n].id) for n in ("d", "e", "src")}
    _hdf5_header._HEADERS.clear()
    _hdf5_header._DENSE.clear()
    try:
        with HeaderReader(str(path)) as h:  # the edits are what the reader sees
            for n in ("d", "e"):
                kinds = [kind for kind, *_ in h.messages(infos[n].addr) or []]
                assert kinds.count(0x15) == 1 and kinds.count(0x0C) == infos[n].num_attrs, n
        scanner._ATTR_CACHE._got.clear()
        assert _check_file(path) == 3
        assert _check_file(path) == 3
    finally:
        _hdf5_header._HEADERS.clear()
        _hdf5_header._DENSE.clear()


def test_attribute_messages_of_one_name_are_no_proof(odd_counts: dict[str, Any]) -> None:
    """Two attribute messages named alike (HDF5 counts both, h5py reads the first by that name):
    the second one's bytes, equal to ``x``'s only attribute message, never stand for ``d``'s
    attributes, so each object records what h5py reads for it (through an empty cache, then the
    filled one)."""
    from refstore.scan import hdf5 as scanner

    path = odd_counts["dup"]
    with h5py.File(path, "r") as f:
        assert list(f["d"].attrs) == ["ab", "ab"] and h5py.h5o.get_info(f["d"].id).num_attrs == 2
        assert f["d"].attrs["ab"] == 1.0 and f["x"].attrs["ab"] == 2.0
    scanner._ATTR_CACHE._got.clear()
    assert _check_file(path) == 2
    assert _check_file(path) == 2


def test_dense_attributes_are_read_once_per_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attributes in dense storage are read from the heap once per object of a file (the module
    doc): the attribute key, the scale test, the NAME test and the scale list of one object
    read it once, and agree with h5py (no CLASS, no NAME, no scale attached)."""
    from refstore.scan import _hdf5_header
    from refstore.scan._hdf5_dense import dense_attributes as real
    from refstore.scan._hdf5_header import HeaderReader

    path = tmp_path / "dense.h5"
    with h5py.File(path, "w", libver="latest") as f:
        v = f.create_dataset("v", data=np.arange(3, dtype="<i4"))
        for i in range(12):
            v.attrs[f"a{i:02d}"] = np.int16(i)
    reads: list[bytes] = []

    def counted(read: Any, info: bytes) -> Any:
        reads.append(info)
        return real(read, info)

    monkeypatch.setattr(_hdf5_header, "dense_attributes", counted)
    with h5py.File(path, "r") as f, HeaderReader(str(path)) as h:
        ds = f["v"]
        info = h5py.h5o.get_info(ds.id)
        assert ds.id.get_create_plist().get_attr_phase_change()[0] < info.num_attrs == 12  # dense
        attrs = h._attributes(info.addr, info.num_attrs)
        assert attrs is not None and sorted(attrs) == sorted(ds.attrs)
        assert h.attribute_key(info.addr, info.num_attrs, frozenset()) is not None
        assert h.is_scale(info.addr, info.num_attrs) is ds.is_scale is False
        assert h.name_starts(info.addr, info.num_attrs, b"v") is False and "NAME" not in ds.attrs
        assert h.first_scales(info.addr, info.num_attrs, 1) == [None] and len(ds.dims[0]) == 0
        assert h._attributes(info.addr, info.num_attrs) is attrs
        assert len(reads) == 1

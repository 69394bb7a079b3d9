"""The HDF5 scanner's walk of a file (``HDF5Scanner._scan``), against h5py, in-process (no
collection, no Lance: the mutation run's ``./dev mutate hdf5``).

The walk has two ways through a file (``tests/_hdf5_paths.py``): with the header reader (a local
file) it keys every object's header bytes by the walk's own object info and takes what those bytes
prove (group and dataset attributes byte for byte as another file of the series had them,
dimension names from ``DIMENSION_LIST``) without asking HDF5; with no header reader (a remote
file) it asks HDF5, opening each object once. Both must give h5py's values; these tests also
check that each way does what it is for (the header way asks HDF5 nothing it already proved, the
HDF5 way opens nothing twice), since either doing the other's work still gives the same values.

Expected values come from h5py: ``f[path].attrs`` (compared as ``test_hdf5_metadata`` does) and ``ds.dims[i][0].name``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest

from refstore.scan import hdf5 as scanner

from ._hdf5_paths import scan
from ._netcdf_names import netcdf_dims
from .test_hdf5_metadata import _hl_attrs, _same_attrs

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _spy(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, what: Callable[[tuple[Any, ...]], Any]) -> list[Any]:
    """``owner.name`` patched to record ``what(args)`` of every call (the calls' list) and call through."""
    calls: list[Any] = []
    real = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(what(args))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


def _series_file(path: Path, token: str) -> Path:
    """Nested groups and datasets whose attributes are all plain (numbers and fixed-length
    strings: every one keyable from its header bytes), carrying ``token`` so no other test's
    file shares the attribute cache."""
    with h5py.File(path, "w") as f:
        f.attrs["title"] = np.bytes_(f"root {token}")
        f.attrs["version"] = np.int32(3)
        g = f.create_group("g")
        g.attrs["kind"] = np.bytes_(f"group {token}")
        g.attrs["scale"] = np.float64(0.5)
        h = g.create_group("h")
        h.attrs["depth"] = np.int16(2)
        h.attrs["tag"] = np.bytes_(token)
        d = h.create_dataset("d", data=np.arange(6, dtype="<i4").reshape(2, 3))
        d.attrs["units"] = np.bytes_(f"m {token}")
        e = f.create_dataset("e", data=np.linspace(0, 1, 4, dtype="<f8"))
        e.attrs["long_name"] = np.bytes_(token)
    return path


def test_group_attributes_of_a_series_come_from_the_header_bytes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Two files written alike: the second one's root, group and dataset attributes are h5py's
    and are taken from the first one's read (the same attribute message bytes), HDF5 reading
    no attribute of it; with no header reader every object's attributes are read from HDF5."""
    token = uuid.uuid4().hex
    first = _series_file(tmp_path / "a.h5", token)
    second = _series_file(tmp_path / "b.h5", token)
    scan(first, "bytes")
    reads = _spy(monkeypatch, scanner, "_read_attrs", lambda args: h5py.h5i.get_name(args[0]))
    for kind, read in (("bytes", []), ("hdf5", [b"/", b"/e", b"/g", b"/g/h", b"/g/h/d"])):
        reads.clear()
        got = scan(second, kind)
        assert sorted(reads) == read, kind
        with h5py.File(second, "r") as f:
            _same_attrs(got.groups[""], _hl_attrs(f), f"{kind} /")
            _same_attrs(got.groups["g"], _hl_attrs(f["g"]), f"{kind} /g")
            _same_attrs(got.groups["g/h"], _hl_attrs(f["g/h"]), f"{kind} /g/h")
            assert set(got.groups) == {"", "g", "g/h"}, kind
            arrays = {a.name: a for a in got.arrays}
            _same_attrs(arrays["g/h/d"].attrs, _hl_attrs(f["g/h/d"]), f"{kind} d")
            _same_attrs(arrays["e"].attrs, _hl_attrs(f["e"]), f"{kind} e")


def test_the_hdf5_walk_opens_each_object_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no header reader the walk opens every group and dataset once (the id it opened is
    the one read from) and the values are h5py's."""
    src = _series_file(tmp_path / "a.h5", uuid.uuid4().hex)
    opened = _spy(monkeypatch, h5py.h5o, "open", lambda args: args[1])
    got = scan(src, "hdf5")
    monkeypatch.undo()
    assert sorted(opened) == [b"/", b"e", b"g", b"g/h", b"g/h/d"]
    with h5py.File(src, "r") as f:
        arrays = {a.name: a for a in got.arrays}
        for name in ("e", "g/h/d"):
            assert arrays[name].shape == f[name].shape
            assert np.dtype(arrays[name].dtype) == f[name].dtype
        _same_attrs(got.groups["g/h"], _hl_attrs(f["g/h"]), "/g/h")


def _scaled_file(path: Path, *, second_link: bool = False) -> Path:
    """``v(time, lat)`` with dimension scales ``time`` and ``lat``, and ``w(lat, x)`` whose
    second dimension has none; ``second_link``: ``lat`` also hard-linked as ``/alias/lat``."""
    with h5py.File(path, "w") as f:
        t = f.create_dataset("time", data=np.arange(4, dtype="<f8"))
        lat = f.create_dataset("lat", data=np.arange(3, dtype="<f4"))
        t.make_scale("time")
        lat.make_scale("lat")
        v = f.create_dataset("v", data=np.zeros((4, 3), dtype="<i2"))
        v.dims[0].attach_scale(t)
        v.dims[1].attach_scale(lat)
        w = f.create_dataset("w", data=np.zeros((3, 5), dtype="<i2"))
        w.dims[0].attach_scale(lat)
        if second_link:
            f.create_group("alias")["lat"] = lat
    return path


def _nc_dims(path: Path) -> dict[str, tuple[str, ...]]:
    """netCDF-C's dimension names of every variable (the oracle for refstore's names)."""
    got = netcdf_dims(path)
    assert got is not None
    return got


def test_dimension_names_come_from_the_header_bytes_when_each_dataset_has_one_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scales attached come from the ``DIMENSION_LIST`` bytes (object addresses, matched
    to the scales' own), HDF5's ``H5DSiterate_scales`` never called, also with a scale linked
    twice; the names are h5py's scales' names. ``w``'s second dimension has no scale while its
    first has one: netCDF-C cannot open such a file (netCDF4-python fails on it); it gets a
    phony dimension as netCDF-C gives one where no scale is attached (the next number)."""
    calls = _spy(monkeypatch, h5py.h5ds, "iterate", lambda args: args[1])
    for second_link in (False, True):
        src = _scaled_file(tmp_path / f"s{second_link}.h5", second_link=second_link)
        calls.clear()
        got = {a.name: a for a in scan(src, "bytes").arrays}
        assert not calls, second_link
        with h5py.File(src, "r") as f:
            scales = [f["v"].dims[i][0].name.rsplit("/", 1)[-1] for i in range(2)]
            assert got["v"].dims == tuple(scales), second_link
            phony = f"phony_dim_{3 if second_link else 2}"  # (/alias/lat is a dimension of its group too)
            assert got["w"].dims == (f["w"].dims[0][0].name.rsplit("/", 1)[-1], phony), second_link


def test_the_header_reader_reads_through_a_ranged_read_function_as_through_the_path(tmp_path: Path) -> None:
    """``HeaderReader`` over a function giving ``n`` bytes at ``at`` (a remote file's
    ``RangeFile.pread``; here the file's bytes in memory) reads what it reads through the
    path: the superblock's sizes, every object's header messages and attribute key; closing it
    closes no file, and a function that fails on the superblock fails the reader."""
    from refstore.scan._hdf5_header import HeaderReader

    src = _scaled_file(tmp_path / "s.h5")
    data = src.read_bytes()
    asked: list[tuple[int, int]] = []

    def pread(at: int, n: int) -> bytes:
        asked.append((at, n))
        return data[at : at + n]

    with h5py.File(src, "r") as f:
        infos = {name: h5py.h5o.get_info(f[name].id) for name in ("time", "lat", "v", "w")}
    with HeaderReader(str(src)) as by_path, HeaderReader(pread) as by_reads:
        assert (by_reads.offsets, by_reads.lengths) == (by_path.offsets, by_path.lengths) == (8, 8)
        for name, info in infos.items():
            assert by_reads.messages(info.addr) == by_path.messages(info.addr) is not None, name
            key = by_reads.attribute_key(info.addr, info.num_attrs, scanner._HIDDEN_ATTRS)
            assert key == by_path.attribute_key(info.addr, info.num_attrs, scanner._HIDDEN_ATTRS), name
    assert asked and all(0 <= at < len(data) and n > 0 for at, n in asked)
    by_reads.close()  # again: nothing to close

    def failing(at: int, n: int) -> bytes:
        raise OSError("gone")

    with pytest.raises(OSError, match="gone"):
        HeaderReader(failing)


@pytest.mark.parametrize("kind", ["bytes", "hdf5"])
def test_a_scale_whose_name_is_not_utf8_names_its_dimension_as_its_array(tmp_path: Path, kind: str) -> None:
    """h5py gives a name that is not UTF-8 as bytes; the scanner names arrays with it decoded,
    bytes that are not UTF-8 replaced, and a dimension attached to such a scale by the same
    text, whether found from the header bytes or by ``H5DSiterate_scales``."""
    src = tmp_path / "n.h5"
    with h5py.File(src, "w") as f:
        s = f.create_dataset(b"\xffx", data=np.arange(3.0))
        s.make_scale("q")
        v = f.create_dataset("v", data=np.zeros((3, 2)))
        v.dims[0].attach_scale(s)
    with h5py.File(src, "r") as f:
        scale = f["v"].dims[0][0].name
        assert scale == b"/\xffx"
        want = scale.rsplit(b"/", 1)[-1].decode("utf-8", "replace")
    got = {a.name: a for a in scan(src, kind).arrays}
    assert set(got) == {"v", want}
    assert got["v"].dims == (want, "phony_dim_1")


@pytest.mark.parametrize("kind", ["bytes", "hdf5"])
def test_dimensions_without_scales_are_named_as_netcdf_c_names_them_both_ways(tmp_path: Path, kind: str) -> None:
    """Dimensions without a scale (or an array without one on its first axis) get netCDF-C's
    phony dimensions, from the header bytes and from HDF5 alike: a dimension of the group of
    that length and unlimitedness not yet used by the array (a scale's too), else a new
    ``phony_dim_<n>``, ``n`` the file's next dimension number."""
    src = tmp_path / "p.h5"
    with h5py.File(src, "w") as f:
        s = f.create_dataset("s", data=np.arange(3.0))
        s.make_scale("s")
        f.create_dataset("same", data=np.zeros((4, 4, 3, 4), "<i2"))
        m = f.create_dataset("mixed", data=np.zeros((3, 3, 3, 2, 3), "<i2"))
        m.dims[1].attach_scale(s)
        f.create_dataset("grown", data=np.zeros((4, 3), "<i2"), maxshape=(None, 3))
    got = {a.name: a.dims for a in scan(src, kind).arrays}
    want = _nc_dims(src)
    assert got == want
    # (the oracle's own words: a phony dimension is reused by another array, never twice by one)
    assert want["same"] == ("phony_dim_6", "phony_dim_7", "s", "phony_dim_8")
    assert want["grown"][0] not in want["same"]  # an unlimited dimension is another one


@pytest.mark.parametrize("userblock", [0, 512])
def test_attribute_order_is_h5pys_from_the_header_flags_else_hdf5s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   userblock: int) -> None:  # fmt: skip
    """Attributes are listed in h5py's order: creation order where tracked, else by name. With
    the header bytes read (no user block) whether it is tracked comes from the header's flags,
    no object's creation property list asked; with a user block the header reader reads nothing
    and HDF5 is asked, the order the same."""
    src = tmp_path / "o.h5"
    with h5py.File(src, "w", track_order=True, userblock_size=userblock) as f:
        f.attrs["zz"], f.attrs["aa"] = np.int32(1), np.int32(2)
        g = f.create_group("g", track_order=True)
        g.attrs["yy"], g.attrs["bb"] = np.int32(3), np.int32(4)
        h = f.create_group("h", track_order=False)
        h.attrs["xx"], h.attrs["cc"] = np.int32(5), np.int32(6)
        d = f.create_dataset("d", data=np.arange(4, dtype="<i4"), track_order=True)
        d.attrs["ww"], d.attrs["dd"] = np.int32(7), np.int32(8)
    asked: list[Any] = []
    cpl = scanner._Object.cpl
    monkeypatch.setattr(scanner._Object, "cpl", property(lambda self: (asked.append(self.name), cpl.fget(self))[1]))
    got = scan(src, "bytes")
    with h5py.File(src, "r") as f:
        assert list(got.groups[""]) == list(f.attrs) == ["zz", "aa"]
        assert list(got.groups["g"]) == list(f["g"].attrs) == ["yy", "bb"]
        assert list(got.groups["h"]) == list(f["h"].attrs) == ["cc", "xx"]
        assert list({a.name: a for a in got.arrays}["d"].attrs) == list(f["d"].attrs) == ["ww", "dd"]
    assert (asked == []) is (userblock == 0), asked


def test_a_header_the_reader_cannot_parse_is_none_and_a_path_reader_closes_once(tmp_path: Path) -> None:
    """A version 2 object header whose continuation message is too short for its address and
    length (HDF5 spec: 8 + 8 bytes) is no parse (None: HDF5 is asked), not an error; a path
    reader closed twice closes its file once."""
    from refstore.scan._hdf5_header import HeaderReader

    superblock = b"\x89HDF\r\n\x1a\n" + bytes([2, 8, 8, 0]) + bytes(8) + bytes(28)
    block = bytes([0x10, 4, 0, 0]) + bytes(4) + bytes(4)  # a continuation message of 4 bytes, a gap
    data = superblock + b"OHDR" + bytes([2, 0, len(block)]) + block + bytes(64)
    with HeaderReader(lambda at, n: data[at : at + n]) as h:
        assert (h.offsets, h.lengths) == (8, 8)
        assert h.header(48) is None
        assert h.messages(48) is None
    path = tmp_path / "x.h5"
    path.write_bytes(data)
    reader = HeaderReader(str(path))
    reader.close()
    reader.close()


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_offsets_of_four_bytes_are_told_from_lengths_of_eight(tmp_path: Path, libver: str) -> None:
    """A file of 4-byte offsets (8-byte lengths) is not parsed from the bytes (the reader reads
    8-byte offsets only: its base address, read as 8 bytes, is then not zero), and its scan is
    h5py's."""
    from refstore.scan._hdf5_header import HeaderReader

    src = tmp_path / "o4.h5"
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_sizes(4, 8)
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(
        *(2 * [h5py.h5f.LIBVER_LATEST] if libver == "latest" else [h5py.h5f.LIBVER_EARLIEST, h5py.h5f.LIBVER_LATEST])
    )
    fid = h5py.h5f.create(str(src).encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)
    with h5py.File(fid) as f:
        d = f.create_dataset("d", data=np.arange(6, dtype="<i4"))
        d.attrs["units"] = np.bytes_(b"m")
    with HeaderReader(str(src)) as h:
        assert (h.offsets, h.lengths) == (0, 0), libver
    got = {a.name: a for a in scan(src, "bytes").arrays}
    with h5py.File(src, "r") as f:
        assert got["d"].shape == f["d"].shape and np.dtype(got["d"].dtype) == f["d"].dtype
        assert got["d"].attrs["units"]["value"] == "m"

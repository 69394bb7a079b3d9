"""The GRIB scanner against cfgrib (variable names, dimensions, coordinates and their attributes,
``GRIB_`` attributes) and ecCodes (each chunk's message decodes to cfgrib's values at that key),
in-process and without a collection: the mutation run's fast list for ``scan/grib.py``
(``./dev mutate grib``). Files are written with ecCodes from its own samples: GRIB2 and GRIB1
regular lat/lon, reduced Gaussian, polar stereographic, spherical harmonics.
"""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from refstore._keys import MAX_DIMS, NO_DIM
from refstore._values import decode_attr, decode_fill
from refstore.errors import ScanError, UnsupportedArrayError
from refstore.scan._types import SourceInfo

from ._oracle import cached

eccodes = pytest.importorskip("eccodes")
xr = pytest.importorskip("xarray")
pytest.importorskip("cfgrib")

from refstore.fixtures.grib import write_grib  # noqa: E402
from refstore.scan.grib import GribScanner, _identity, frame_messages  # noqa: E402

if TYPE_CHECKING:
    from pathlib import Path

    from refstore.scan._types import ScanResult


def _warm_eccodes() -> None:
    """ecCodes parses its definition files on first use (~1.5 s a process): done here, at import,
    on messages of its samples (the grids and editions the tests use), so the mutation run's mutants (forked from a
    process that imported this module) start warm, and a mutant costs a fraction of a second."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        for sample in (
            "regular_ll_sfc_grib1",
            "reduced_gg_sfc_grib2",
            "polar_stereographic_sfc_grib2",
            "sh_sfc_grib2",
            "regular_ll_pl_grib2",
        ):
            p = _from_sample(Path(d) / f"{sample}.grib", sample, [{}], mode="wb")
            GribScanner()(str(p))


def _from_sample(path: Path, sample: str, sets: list[dict[str, Any]], mode: str = "ab") -> Path:
    with open(path, mode) as f:
        for i, keys in enumerate(sets):
            h = eccodes.codes_grib_new_from_samples(sample)
            try:
                for k, v in keys.items():
                    eccodes.codes_set(h, k, v)
                n = keys["Ni"] * keys["Nj"] if "Ni" in keys else keys["Nx"] * keys["Ny"] if "Nx" in keys else (
                    eccodes.codes_get(h, "numberOfValues"))  # fmt: skip
                eccodes.codes_set_values(h, 200.0 + np.arange(n, dtype="f8") % 17 + keys.get("level", 0) + i)
                eccodes.codes_write(h, f)
            finally:
                eccodes.codes_release(h)
    return path


_warm_eccodes()


@pytest.fixture(scope="module")
def gribs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("grib")
    out: dict[str, Path] = {}
    out["main"] = write_grib(d / "main.grib2", skip=(("u", 6, 500),), ny=5, nx=8)
    p = out["mixed"] = write_grib(d / "mixed.grib2", params=("t",), levels=(850, 500), steps=(0,), ny=3, nx=4)
    write_grib(p, params=("t",), levels=(1, 2, 3), steps=(0,), level_type="hybrid", mode="ab", seed=1, ny=3, nx=4)
    write_grib(p, params=("u",), levels=(1000, 850, 500), steps=(0,), mode="ab", seed=2, ny=3, nx=4)
    out["grib1"] = _from_sample(d / "g1.grib1", "regular_ll_sfc_grib1", [
        {"dataDate": 20200102, "dataTime": 1200, "stepUnits": 1, "endStep": 3},
        {"dataDate": 20200103, "dataTime": 0, "stepUnits": 1, "endStep": 3}], mode="wb")  # fmt: skip
    out["reduced"] = _from_sample(d / "rgg.grib2", "reduced_gg_sfc_grib2", [{"dataDate": 20210101}], mode="wb")
    out["polar"] = _from_sample(d / "ps.grib2", "polar_stereographic_sfc_grib2", [
        {"dataDate": 20210101, "stepUnits": 0, "endStep": 30}, {"dataDate": 20210101, "stepUnits": 0, "endStep": 90}],
        mode="wb")  # fmt: skip
    out["sh"] = _from_sample(d / "sh.grib2", "sh_sfc_grib2", [{"dataDate": 20210101}], mode="wb")
    # two latitudes (north to south), and a grid scanned south to north
    out["two_rows"] = write_grib(d / "two_rows.grib2", params=("t",), levels=(850,), steps=(0,), ny=2, nx=3)
    out["south_up"] = _from_sample(d / "south_up.grib2", "regular_ll_sfc_grib2", [
        {"dataDate": 20210101, "jScansPositively": 1, "latitudeOfFirstGridPointInDegrees": -90.0,
         "latitudeOfLastGridPointInDegrees": 90.0}], mode="wb")  # fmt: skip
    # a reference time with minutes; a step in months (ecCodes gives cfgrib hours)
    out["minutes"] = _from_sample(d / "minutes.grib2", "regular_ll_sfc_grib2",
                                  [{"dataDate": 20210101, "dataTime": 1230}], mode="wb")  # fmt: skip
    out["monthly"] = _from_sample(d / "monthly.grib2", "regular_ll_sfc_grib2",
                                  [{"dataDate": 20210101, "stepUnits": 3, "endStep": 1}], mode="wb")  # fmt: skip
    padded = d / "padded.grib2"
    msgs = out["grib1"].read_bytes()
    padded.write_bytes(b"junk before " + msgs[: len(msgs) // 2] + b"\0" * 13 + msgs[len(msgs) // 2 :] + b"tail")
    out["padded"] = padded
    return out


def _regular(ny: int, nx: int, step: float = 10.0) -> dict[str, Any]:
    """ecCodes keys of a regular lat/lon grid of ``ny`` x ``nx`` points from (10 * (ny - 1), 0)."""
    return {
        "Ni": nx, "Nj": ny, "iDirectionIncrementInDegrees": step, "jDirectionIncrementInDegrees": step,
        "latitudeOfFirstGridPointInDegrees": step * (ny - 1), "latitudeOfLastGridPointInDegrees": 0.0,
        "longitudeOfFirstGridPointInDegrees": 0.0, "longitudeOfLastGridPointInDegrees": step * (nx - 1),
    }  # fmt: skip


_ENS = {"productDefinitionTemplateNumber": 1, "numberOfForecastsInEnsemble": 10, "dataDate": 20210101, "stepUnits": 1}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Files whose arrays take cfgrib's other shapes: an ensemble over steps written out of order
    (and one combination twice: the first wins), one parameter on two grids, a level type
    ecCodes has no name for."""
    d = tmp_path_factory.mktemp("grib-shapes")
    out: dict[str, Path] = {}
    sets = [{**_regular(2, 3), **_ENS, "perturbationNumber": n, "endStep": s} for s in (12, 0, 6) for n in (2, 0, 1)]
    out["ens"] = _from_sample(d / "ens.grib2", "regular_ll_sfc_grib2", [*sets[:4], sets[0], *sets[4:]], mode="wb")
    out["grids"] = _from_sample(d / "grids.grib2", "regular_ll_sfc_grib2", [
        {**_regular(3, 4), "dataDate": 20210101}, {**_regular(2, 5), "dataDate": 20210101},
        {**_regular(2, 5), "dataDate": 20210101, "shortName": "u"}], mode="wb")  # fmt: skip
    out["level"] = _from_sample(d / "level.grib2", "regular_ll_sfc_grib2", [
        {**_regular(2, 3), "dataDate": 20210101, "typeOfFirstFixedSurface": 190, "scaledValueOfFirstFixedSurface": v}
        for v in (3, 1)], mode="wb")  # fmt: skip
    grid = {**_regular(2, 3), "dataDate": 20210101}
    out["names"] = _from_sample(d / "names.grib2", "regular_ll_sfc_grib2", [
        {**grid, "shortName": "u"}, {**grid, "paramId": 167},  # 2t: cfVarName t2m
        {**grid, "typeOfLevel": "isobaricInhPa", "level": 850}, {**grid, "typeOfLevel": "hybrid", "level": 1}, grid,
        {**grid, "parameterNumber": 250},  # no parameter ecCodes knows: paramId 0
        # sd (snow depth), named like the step type of std_t (a standard deviation: stepType "sd")
        {**grid, "paramId": 141},
        {**grid, "productDefinitionTemplateNumber": 8, "typeOfStatisticalProcessing": 6, "lengthOfTimeRange": 6},
    ], mode="wb")  # fmt: skip
    # product template 4.31 (satellite): no step, no level
    out["no_step"] = _from_sample(d / "no_step.grib2", "regular_ll_sfc_grib2",
                                  [{**grid, "productDefinitionTemplateNumber": 31}], mode="wb")  # fmt: skip
    # an Albers grid (template 3.31): ecCodes has no geoiterator for it, cfgrib gives y/x without latitude/longitude
    albers = {"gridDefinitionTemplateNumber": 31, "Nx": 3, "Ny": 2, "dataDate": 20210101}
    out["albers"] = _from_sample(d / "albers.grib2", "regular_ll_sfc_grib2", [albers], mode="wb")
    return out


class _Var:
    """A cfgrib variable as plain values (cached across sessions: cfgrib's open is the slow part)."""

    def __init__(self, da: Any) -> None:
        self.dtype = da.dtype
        self.dims: tuple[str, ...] = tuple(da.dims)
        self.shape: tuple[int, ...] = tuple(da.shape)
        self.attrs: dict[str, Any] = dict(da.attrs)
        self.values = np.asarray(da.values)
        self.coords: dict[str, tuple[np.ndarray[Any, Any], dict[str, Any]]] = {
            c: (_cf_values(da[c]), dict(da[c].attrs)) for c in da.coords
        }
        self.coord_dims: dict[str, tuple[str, ...]] = {c: tuple(da[c].dims) for c in da.coords}
        # what cfgrib stores before xarray's CF decoding (time int64 seconds, step float64 hours...)
        self.encoded: dict[str, tuple[np.dtype[Any], str | None]] = {
            c: (np.dtype(da[c].encoding["dtype"]), da[c].encoding.get("units")) for c in da.coords
        }


class _Dataset:
    def __init__(self, ds: Any) -> None:
        self.attrs: dict[str, Any] = dict(ds.attrs)
        self.data_vars: dict[str, _Var] = {str(v): _Var(ds[v]) for v in ds.data_vars}
        self.coords: dict[str, np.ndarray[Any, Any]] = {str(c): _cf_values(ds[c]) for c in ds.coords}


def _cfgrib(path: Path, **keys: Any) -> _Dataset:
    """cfgrib's dataset of ``path`` (``filter_by_keys``: ``keys``) as plain values, once per file
    content and filter (tests/_oracle.cached)."""

    def read() -> _Dataset:
        kw: dict[str, Any] = {"indexpath": ""}
        if keys:
            kw["filter_by_keys"] = keys
        with xr.open_dataset(path, engine="cfgrib", decode_timedelta=True, backend_kwargs=kw) as ds:
            return _Dataset(ds.load())

    return cached("cfgrib" + "".join(f"-{k}={v}" for k, v in sorted(keys.items())), path, read)


def _coord_values(res: ScanResult, name: str) -> np.ndarray[Any, Any]:
    m = {a.name: a for a in res.arrays}[name]
    rows = sorted((r for r in res.chunks.to_pylist() if r["array"] == name),
                  key=lambda r: tuple(r[f"k{i}"] for i in range(m.ndim)))  # fmt: skip
    out = np.empty(m.shape, m.np_dtype)
    for r in rows:
        key = tuple(r[f"k{i}"] for i in range(m.ndim))
        region = tuple(slice(k * c, (k + 1) * c) for k, c in zip(key, m.chunks, strict=True))
        out[region] = np.frombuffer(r["inline"], m.np_dtype).reshape([c for c in m.chunks])
    return out


def _cf_values(c: Any) -> np.ndarray[Any, Any]:
    v = np.asarray(c.values)
    if v.dtype.kind == "M":
        return v.astype("datetime64[s]").astype("<i8")
    if v.dtype.kind == "m":
        return v.astype("timedelta64[s]").astype("<f8") / 3600.0
    return v


def _compare(path: Path, res: ScanResult, ex: _Dataset, names: dict[str, str] | None = None) -> None:
    """Each data variable of cfgrib's ``ex`` (renamed by ``names``) against ``res``."""
    metas = {m.name: m for m in res.arrays}
    blob = path.read_bytes()
    rows = res.chunks.to_pylist()
    for v, da in ex.data_vars.items():
        name = (names or {}).get(v, v)
        m = metas[name]
        assert m.status == "ok" and m.dtype == "<f4" == da.dtype.newbyteorder("<").str, name
        assert m.shape == da.shape, (name, m.shape, da.shape)
        attrs = {k: decode_attr(a) for k, a in m.attrs.items()}
        for k, want in da.attrs.items():
            # left out on purpose (design/formats.md): long arrays (GRIB_pl); cfgrib reads
            # stepUnits after setting it to hours
            if k in ("GRIB_pl", "GRIB_stepUnits"):
                continue
            assert k in attrs, (name, k)
            got = attrs[k]
            assert np.array_equal(np.asarray(got), np.asarray(want)), (name, k, got, want)
        coords = set(attrs["coordinates"].split())
        assert len(coords) == len(da.coords), (name, coords, list(da.coords))
        rename = dict(zip(da.dims, m.dims, strict=True))
        for c, (c_values, c_attrs) in da.coords.items():
            mine = rename.get(c, c) if c in da.dims else next(
                (x for x in coords if x == c or x.rsplit("_", 1)[0] == c), c)  # fmt: skip
            assert mine in coords or mine in m.dims, (name, c)
            got = _coord_values(res, mine)
            assert np.array_equal(got, c_values), (name, c)
            cm = metas[mine]
            assert cm.dims == tuple(rename[d] for d in da.coord_dims[c]), (name, c, cm.dims)
            enc_dtype, enc_units = da.encoded[c]
            assert got.dtype == enc_dtype, (name, c, got.dtype, enc_dtype)  # cfgrib's stored dtype
            if enc_units is not None:  # time, step, valid_time: their units before decoding
                assert decode_attr(cm.attrs["units"]) == enc_units, (name, c)
            for k in ("units", "standard_name", "long_name", "positive", "stored_direction"):
                # cfgrib decodes time, step and valid_time: their units are in the values
                if k in c_attrs and not (k == "units" and c in ("time", "step", "valid_time")):
                    assert decode_attr(cm.attrs[k]) == c_attrs[k], (name, c, k)
            for k in ("positive", "stored_direction"):  # and none that cfgrib does not give
                assert (k in cm.attrs) == (k in c_attrs), (name, c, k)
        mine_rows = [r for r in rows if r["array"] == name]
        keys = [tuple(r[f"k{i}"] for i in range(m.ndim)) for r in mine_rows]
        assert keys == sorted(set(keys)), name  # references in key order, one per key
        nhead = len([d for d in da.dims if d not in ("latitude", "longitude", "y", "x", "values")])
        values = da.values
        seen = np.zeros(values.shape[:nhead], bool)
        for r in mine_rows:
            key = tuple(r[f"k{i}"] for i in range(nhead))
            assert all(r[f"k{i}"] == 0 for i in range(nhead, m.ndim)), name
            h = eccodes.codes_new_from_message(blob[r["offset"] : r["offset"] + r["length"]])
            try:
                got = np.asarray(eccodes.codes_get_values(h), "f8")
                if eccodes.codes_get(h, "bitmapPresent"):
                    got[got == eccodes.codes_get(h, "missingValue")] = np.nan
            finally:
                eccodes.codes_release(h)
            assert got.astype("f4").reshape(values.shape[nhead:]).tobytes() == values[key].tobytes(), (name, key)
            seen[key] = True
        assert np.isnan(values[~seen]).all(), name  # absent combinations: NaN in cfgrib too


def test_regular_grib2_against_cfgrib(gribs: dict[str, Path]) -> None:
    path = gribs["main"]
    res = GribScanner()(str(path))
    ex = _cfgrib(path)
    _compare(path, res, ex)
    glob = {k: decode_attr(v) for k, v in res.groups[""].items()}
    for k, v in ex.attrs.items():
        if k != "history":
            assert glob[k] == v, k
    assert (res.sort_value, res.sort_last, res.sort_units) == (None, None, None)
    metas = {m.name: m for m in res.arrays}
    assert metas["t"].chunks == (1, 1, 5, 8) and metas["t"].codecs[0]["id"]
    assert metas["latitude"].chunks == (5,) and metas["time"].shape == () and metas["time"].chunks == ()
    assert res.format == "grib" and res.source.location == str(path) and res.source.size == path.stat().st_size
    for name in ex.data_vars:  # NaN fill (cfgrib's missing values); references in key order
        m = metas[name]
        assert m.status == "ok" and m.reason is None and np.isnan(decode_fill(m.fill_value, np.dtype("<f4")))
        keys = [tuple(r[f"k{i}"] for i in range(m.ndim)) for r in res.chunks.to_pylist() if r["array"] == name]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), name
    # one coordinate array per cfgrib coordinate (t and u share them: no "time_1")
    assert set(metas) - set(ex.data_vars) == set(ex.coords)


def test_level_types_and_names_against_cfgrib(gribs: dict[str, Path]) -> None:
    path = gribs["mixed"]
    res = GribScanner()(str(path))
    metas = {m.name: m for m in res.arrays}
    assert {"t_hybrid", "t_isobaricInhPa", "u"} <= set(metas)
    assert metas["u"].dims == ("isobaricInhPa_1", "latitude", "longitude")
    assert metas["isobaricInhPa_1"].dims == ("isobaricInhPa_1",) and metas["isobaricInhPa"].dims == ("isobaricInhPa",)
    assert _coord_values(res, "isobaricInhPa_1").tolist() == [1000.0, 850.0, 500.0]
    _compare(path, res, _cfgrib(path, typeOfLevel="hybrid"), {"t": "t_hybrid"})
    _compare(path, res, _cfgrib(path, shortName="t", typeOfLevel="isobaricInhPa"), {"t": "t_isobaricInhPa"})


@pytest.mark.parametrize(
    "key", ["grib1", "reduced", "polar", "sh", "padded", "two_rows", "south_up", "minutes", "monthly"]
)
def test_other_grids_and_editions_against_cfgrib(gribs: dict[str, Path], key: str) -> None:
    path = gribs[key]
    res = GribScanner()(str(path))
    ex = _cfgrib(path)
    _compare(path, res, ex)
    metas = {m.name: m for m in res.arrays}
    (v,) = list(ex.data_vars)
    dims = metas[v].dims
    assert dims[-len(ex.data_vars[v].dims) :] == ex.data_vars[v].dims or key == "padded"
    if key == "sh":
        assert "latitude" not in metas and dims == ("values",)


def test_concat_dim_keeps_a_single_value_as_a_dimension(gribs: dict[str, Path]) -> None:
    path = gribs["main"]
    res = GribScanner(concat_dim="time")(str(path))
    metas = {m.name: m for m in res.arrays}
    ex = _cfgrib(path)
    t = int(ex.coords["time"])
    assert metas["t"].dims[0] == "time" and metas["t"].shape[0] == 1 and metas["time"].chunks == (1,)
    assert (res.sort_value, res.sort_last, res.sort_units) == (t, t, "seconds since 1970-01-01")
    assert metas["valid_time"].dims == ("time", "step")
    want = ex.coords["valid_time"]
    assert _coord_values(res, "valid_time").reshape(-1).tolist() == want.reshape(-1).tolist()
    res = GribScanner(concat_dim="step")(str(path))
    assert (res.sort_value, res.sort_last, res.sort_units) == (0.0, 0.0, "hours")
    assert {m.name: m for m in res.arrays}["step"].chunks == (1,)
    res = GribScanner(concat_dim="isobaricInhPa")(str(path))
    assert (res.sort_value, res.sort_last, res.sort_units) == (500.0, 500.0, None)


def test_grib1_identity_blanks_only_the_reference_time(gribs: dict[str, Path]) -> None:
    blob = gribs["grib1"].read_bytes()
    msgs = list(frame_messages(io.BytesIO(blob), "g1", len(blob)))
    assert len(msgs) == 2 and msgs[1][0] == len(msgs[0][1])
    a, b = _identity(msgs[0][1]), _identity(msgs[1][1])
    assert a is not None and a == b  # other reference times, one identity
    m2 = list(frame_messages(io.BytesIO(gribs["main"].read_bytes()), "m", gribs["main"].stat().st_size))
    ids = {_identity(m) for _o, m in m2}
    assert len(ids) == 4  # t and u on two levels: steps and times blanked


def test_framing_errors_name_the_message(tmp_path: Path, gribs: dict[str, Path]) -> None:
    one = gribs["main"].read_bytes()
    size = int.from_bytes(one[8:16], "big")
    first = one[:size]

    def scan(data: bytes) -> str:
        with pytest.raises(ScanError) as e:
            list(frame_messages(io.BytesIO(data), "f", len(data)))
        assert str(e.value).startswith("f: ") and e.value.location == "f"  # the file is named
        return str(e.value)

    assert scan(b"nothing here").endswith("holds no GRIB message")
    assert scan(first[:-1]).endswith(f"GRIB message 0 at byte 0: wrong message length {size} "
                                     f"(past the end of the {size - 1}-byte file)")  # fmt: skip
    assert scan(first[:-1] + b"8").endswith(f"wrong message length {size} (no '7777' end marker there)")
    # not a message start (edition 3): skipped as ecCodes skips it, as any bytes between messages
    assert [o for o, _ in frame_messages(io.BytesIO(first + b"GRIB\0\0\0\3" + bytes(8)), "f", size + 16)] == [0]
    assert scan(first + b"GRIB\0\0\0\2").endswith(f"GRIB2 message at byte {size} is truncated (section 0 incomplete)")
    assert scan(first + b"GRIB\0").endswith(f"GRIB message at byte {size} is truncated (section 0 incomplete)")
    assert scan(b"GRIB\x80\0\0\1" + bytes(20)).endswith(
        "GRIB1 message at byte 0: large-message lengths are not supported"
    )
    third = f"GRIB message 2 at byte {2 * size}: wrong message length {size} (past the end of the "
    assert scan(first + first + first[:-1]).endswith(third + f"{3 * size - 1}-byte file)")
    sixteen = b"GRIB\0\0\0\2" + (16).to_bytes(8, "big") + b"7777"  # 16 bytes claimed: section 0 alone
    assert scan(sixteen).endswith("GRIB message 0 at byte 0: wrong message length 16 (no '7777' end marker there)")
    short = b"GRIB\0\0\0\2" + (15).to_bytes(8, "big") + b"7777"
    assert scan(short).endswith("wrong message length 15 (past the end of the 20-byte file)")
    # GRIB2 sections: walk them to find section 7, then add a second one, or bytes that are no section
    pos, sec7 = 16, b""
    while pos < size - 4:
        n = int.from_bytes(first[pos : pos + 4], "big")
        if first[pos + 4] == 7:
            sec7 = first[pos : pos + n]
        pos += n
    two = first[:8] + (size + len(sec7)).to_bytes(8, "big") + first[16:-4] + sec7 + b"7777"
    assert scan(two).endswith("GRIB2 message 0 at byte 0: holds 2 fields (multi-field messages are not supported: "
                              "one chunk decodes one field)")  # fmt: skip
    odd = first[:8] + (size + 8).to_bytes(8, "big") + first[16:-4] + bytes(8) + b"7777"
    assert scan(odd).endswith("GRIB2 message 0 at byte 0: its sections do not add up to its length")
    # a last section of exactly 5 bytes adds up; one running past the end does not
    five = first[:8] + (size + 5).to_bytes(8, "big") + first[16:-4] + (5).to_bytes(4, "big") + b"\x09" + b"7777"
    assert [m for _o, m in frame_messages(io.BytesIO(five), "f", len(five))] == [five]
    over = first[:8] + (size + 5).to_bytes(8, "big") + first[16:-4] + (50).to_bytes(4, "big") + b"\x09" + b"7777"
    assert scan(over).endswith("GRIB2 message 0 at byte 0: its sections do not add up to its length")
    # the search for the next message reads blocks of 64 KiB that overlap by 3 bytes
    for gap in (65_533, 65_535, 65_536, 65_537):
        data = first + bytes(gap) + first
        msgs = list(frame_messages(io.BytesIO(data), "f", len(data)))
        assert [o for o, _m in msgs] == [0, size + gap], gap
    # a file shorter than its stated size (cut while scanned): the search ends at its end
    data = first + b"x" * 10
    assert [o for o, _m in frame_messages(io.BytesIO(data), "f", len(data) + 100_000)] == [0]
    # padding between messages is skipped, and the file may end in junk
    msgs = list(frame_messages(io.BytesIO(first + bytes(70_000) + first + b"xx"), "f", 2 * size + 70_002))
    assert [o for o, _m in msgs] == [0, size + 70_000] and all(m == first for _o, m in msgs)


def test_damaged_messages_are_scan_errors(tmp_path: Path) -> None:
    """GRIB2 messages framed correctly (section 0, sections adding up, 7777) whose content is
    no message ecCodes can use: one line naming the file and the byte, no traceback."""
    ident = (21).to_bytes(4, "big") + b"\x01" + bytes([0, 98, 0, 0, 0, 0, 0, 0, 0x07, 0xE5, 1, 1, 0, 0, 0, 0])
    cases = {  # a product section of junk: ecCodes reads the date as 92901 (no month 29)
        "baddate": (ident + (9).to_bytes(4, "big") + b"\x04" + b"\xff" * 4 + (5).to_bytes(4, "big") + b"\x07",
                    r"GRIB message at byte 0: its reference time is no date \(dataDate \d+, dataTime \d+\)$"),
        "nogrid": ((5).to_bytes(4, "big") + b"\x07", r"GRIB message at byte 0: ecCodes reads no grid in it$"),
    }  # fmt: skip
    for name, (body, why) in cases.items():
        p = tmp_path / f"{name}.grib2"
        p.write_bytes(b"GRIB\0\0\0\x02" + (16 + len(body) + 4).to_bytes(8, "big") + body + b"7777")
        with pytest.raises(ScanError, match=rf"^{p}: {why}"):
            GribScanner()(str(p))
    p = tmp_path / "junk.grib2"
    p.write_bytes(b"no message here")
    with pytest.raises(ScanError, match=rf"^{p}: holds no GRIB message$"):
        GribScanner()(str(p))


def test_levels_of_one_count_but_other_values_are_other_coordinates(tmp_path: Path) -> None:
    p = write_grib(tmp_path / "lv.grib2", params=("t",), levels=(850, 500), steps=(0,), ny=3, nx=4)
    write_grib(p, params=("u",), levels=(700, 300), steps=(0,), ny=3, nx=4, mode="ab", seed=1)
    res = GribScanner()(str(p))
    metas = {m.name: m for m in res.arrays}
    assert metas["t"].dims[0] == "isobaricInhPa" and metas["u"].dims[0] == "isobaricInhPa_1"
    for var in ("t", "u"):
        want = _cfgrib(p, shortName=var).data_vars[var].coords["isobaricInhPa"][0]
        assert _coord_values(res, metas[var].dims[0]).tolist() == want.tolist(), var


def _keys_of(res: ScanResult, name: str) -> list[tuple[int, ...]]:
    ndim = {m.name: m.ndim for m in res.arrays}[name]
    return [tuple(r[f"k{i}"] for i in range(ndim)) for r in res.chunks.to_pylist() if r["array"] == name]


def test_an_ensemble_over_steps_in_any_order_against_cfgrib(shapes: dict[str, Path]) -> None:
    """Messages written step 12, 0, 6 and members 2, 0, 1, with (2, 12) again as the fifth
    message, other values: cfgrib's (number, step) array, the first message of a combination
    winning (and the ones after the repeat kept)."""
    path = shapes["ens"]
    res = GribScanner()(str(path))
    ex = _cfgrib(path)
    _compare(path, res, ex)
    metas = {m.name: m for m in res.arrays}
    assert metas["t"].dims == ("number", "step", "latitude", "longitude") == ex.data_vars["t"].dims
    blob = path.read_bytes()
    msgs = list(frame_messages(io.BytesIO(blob), "f", len(blob)))
    rows = {r["offset"] for r in res.chunks.to_pylist() if r["array"] == "t"}
    assert rows == {o for i, (o, _m) in enumerate(msgs) if i != 4}  # the repeat (5th message): the first wins


def test_concat_dim_chunks_its_coordinates_one_value_a_chunk(shapes: dict[str, Path]) -> None:
    """Along the concat dimension every coordinate (the dimension's own and valid_time over
    it) is one value a chunk, so a series of files appends chunks; other dimensions stay whole."""
    path = shapes["ens"]
    ex = _cfgrib(path)
    res = GribScanner(concat_dim="step")(str(path))
    _compare(path, res, ex)
    metas = {m.name: m for m in res.arrays}
    assert (metas["step"].chunks, metas["number"].chunks, metas["time"].chunks) == ((1,), (3,), ())
    assert metas["valid_time"].dims == ("step",) and metas["valid_time"].chunks == (1,)
    assert sorted(_keys_of(res, "valid_time")) == [(0,), (1,), (2,)] and _keys_of(res, "time") == [()]
    assert _keys_of(res, "number") == [(0,)] and _keys_of(res, "latitude") == [(0,)]
    assert (res.sort_value, res.sort_last, res.sort_units) == (0.0, 0.0, "hours")
    res = GribScanner(concat_dim="number")(str(path))
    _compare(path, res, ex)
    metas = {m.name: m for m in res.arrays}
    assert (metas["number"].chunks, metas["step"].chunks, metas["valid_time"].chunks) == ((1,), (3,), (3,))
    assert sorted(_keys_of(res, "number")) == [(0,), (1,), (2,)]
    assert (res.sort_value, res.sort_last, res.sort_units) == (0.0, 0.0, None)
    res = GribScanner(concat_dim="time")(str(path))  # valid_time over (time, step): one chunk a time
    metas = {m.name: m for m in res.arrays}
    want = ex.coords["valid_time"]
    assert _coord_values(res, "valid_time").tolist() == [want.tolist()]
    assert metas["valid_time"].dims == ("time", "step") and metas["valid_time"].chunks == (1, 3)
    assert _keys_of(res, "valid_time") == [(0, 0)] and _keys_of(res, "step") == [(0,)]
    # a 0-d coordinate is one row whose key columns all say "no dimension"; a 1-d one uses k0 only
    rows = {r["array"]: r for r in res.chunks.to_pylist()}
    assert [rows["surface"][f"k{i}"] for i in range(MAX_DIMS)] == [NO_DIM] * MAX_DIMS
    assert [rows["step"][f"k{i}"] for i in range(MAX_DIMS)] == [0] + [NO_DIM] * (MAX_DIMS - 1)


def test_one_parameter_on_two_grids_is_two_arrays_named_by_grid(shapes: dict[str, Path]) -> None:
    """cfgrib opens such a file only filtered by grid; refstore keeps both, suffixed ``_grid0``,
    ``_grid1`` in the order of their (gridType, md5GridSection, numberOfPoints) as ecCodes reads
    them; ``u``, on one grid, keeps its name."""
    path = shapes["grids"]
    res = GribScanner()(str(path))
    grids = []
    with open(path, "rb") as f:
        for _ in range(2):
            h = eccodes.codes_grib_new_from_file(f)
            grids.append(tuple(eccodes.codes_get(h, k) for k in ("gridType", "md5GridSection", "numberOfPoints")))
            eccodes.codes_release(h)
    order = sorted(grids, key=str)
    for g in grids:
        name = f"t_grid{order.index(g)}"
        _compare(path, res, _cfgrib(path, shortName="t", numberOfPoints=g[2]), {"t": name})
    _compare(path, res, _cfgrib(path, shortName="u"))
    assert {m.name for m in res.arrays if m.attrs.get("GRIB_paramId")} == {"t_grid0", "t_grid1", "u"}


def test_a_level_type_without_a_name_is_level(shapes: dict[str, Path]) -> None:
    """typeOfFirstFixedSurface 190 (reserved): ecCodes' typeOfLevel is 'unknown', cfgrib's
    dimension 'level'."""
    path = shapes["level"]
    res = GribScanner()(str(path))
    ex = _cfgrib(path)
    _compare(path, res, ex)
    assert {m.name: m for m in res.arrays}["t"].dims[0] == "level" == ex.data_vars["t"].dims[0]


def test_names_are_cfgribs_and_groups_sharing_one_are_told_apart(shapes: dict[str, Path]) -> None:
    """cfgrib's names (cfVarName: ``t2m`` for shortName ``2t``) over each of its filtered
    datasets; ``t`` on three level types is suffixed by them; a parameter ecCodes does not know
    (paramId 0: every name 'unknown') is named as cfgrib names it: ``unknown`` (its shortName), with
    ecCodes' 'unknown' names as attributes."""
    path = shapes["names"]
    res = GribScanner()(str(path))
    names = [m.name for m in res.arrays if "GRIB_paramId" in m.attrs]
    assert names == ["u", "t2m", "t_isobaricInhPa", "t_hybrid", "t_surface", "unknown", "sd", "std_t"]
    for param in ({"shortName": "u"}, {"paramId": 167}, {"paramId": 141}, {"stepType": "sd"}):
        _compare(path, res, _cfgrib(path, **param))
    for level in ("isobaricInhPa", "hybrid", "surface"):
        _compare(path, res, _cfgrib(path, shortName="t", typeOfLevel=level), {"t": f"t_{level}"})
    ex = _cfgrib(path, paramId=0)
    (var,) = ex.data_vars.values()
    assert var.attrs["GRIB_paramId"] == 0 and var.attrs["GRIB_shortName"] == "unknown"
    _compare(path, res, ex)


class _FailingFile(io.BytesIO):
    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def read(self, n: int | None = -1, /) -> bytes:
        raise self.error


def test_a_read_failure_or_no_eccodes_is_one_line_naming_the_file(
    gribs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read error (with and without its errno text) and a missing ecCodes (``import_eccodes``'
    error) are a ScanError naming the file, its reason whole."""
    info = SourceInfo(location="x.grib2", size=100, mtime_ns=0)
    for error, why in ((OSError(5, "Input/output error"), "cannot read: Input/output error"),
                       (OSError("connection reset"), "cannot read: connection reset")):  # fmt: skip
        with pytest.raises(ScanError) as e:
            GribScanner().scan_file(_FailingFile(error), info)
        assert (e.value.location, e.value.reason, str(e.value)) == ("x.grib2", why, f"x.grib2: {why}")

    def no_eccodes() -> None:
        raise UnsupportedArrayError("GRIB messages decode through ecCodes: install it")

    monkeypatch.setattr(sys.modules[GribScanner.__module__], "import_eccodes", no_eccodes)
    with open(gribs["grib1"], "rb") as fh, pytest.raises(ScanError) as e:
        GribScanner().scan_file(fh, info)
    assert str(e.value) == "x.grib2: GRIB messages decode through ecCodes: install it"
    assert e.value.location == "x.grib2"


def test_a_message_without_a_step_has_no_valid_time(shapes: dict[str, Path]) -> None:
    """Product template 4.31 (satellite) has no forecast time and no level: cfgrib gives a
    ``time`` coordinate only, and ``valid_time`` only where both time and step are known."""
    path = shapes["no_step"]
    res = GribScanner()(str(path))
    ex = _cfgrib(path)
    assert set(ex.coords) == {"time", "latitude", "longitude"}
    _compare(path, res, ex)
    assert {m.name for m in res.arrays} == {"t", "time", "latitude", "longitude"}
    res = GribScanner(concat_dim="step")(str(path))  # no array along it: no sort value, nor its units
    assert (res.sort_value, res.sort_last, res.sort_units) == (None, None, None)


def test_a_projected_grid_without_ecCodes_coordinates_is_y_x_alone(shapes: dict[str, Path]) -> None:
    """Albers (template 3.31): ecCodes gives no latitudes/longitudes; cfgrib's (y, x) array
    without them."""
    path = shapes["albers"]
    res = GribScanner()(str(path))
    ex = _cfgrib(path)
    assert ex.data_vars["t"].dims == ("y", "x") and "latitude" not in ex.coords
    _compare(path, res, ex)
    assert {m.name for m in res.arrays} == {"t", "time", "step", "surface", "valid_time"}

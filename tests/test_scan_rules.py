"""Which sources a series holds: duplicates along the concat dim (refused, or chosen by
``--prefer``), overlapping ranges (refused), sources gone from the scanned paths (reported, or
removed by ``--prune``), and the words a scan says about its order and its dimension.

Expected values come from xarray (netCDF4 engine) over the files that should be placed."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from datetime import date
from typing import TYPE_CHECKING

import h5py
import lance
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import refstore
from refstore.errors import PlanError
from refstore.fixtures.netcdf3 import write_obs_file
from refstore.fixtures.oisst import write_day, write_series
from refstore.plan import SourceSlab

from ._cli import invoke as run  # in this process: the commands are under test, not the process

if TYPE_CHECKING:
    from pathlib import Path

    from ._s3 import S3

SERIES_VARS = ("sst", "anom", "err", "ice", "time")


def _oracle(files: list[Path]) -> xr.Dataset:
    parts = [xr.open_dataset(p, engine="netcdf4", mask_and_scale=False, decode_times=False) for p in files]
    return xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", compat="override", join="exact")


def assert_series_is(col: str, files: list[Path], as_of: int | str | None = None) -> None:
    """The collection reads exactly the series of ``files`` (in this order), directly and through xarray."""
    want = _oracle(files)
    ds = refstore.open(col, as_of)
    got = xr.open_dataset(col, engine="refstore", as_of=as_of, mask_and_scale=False, decode_times=False)
    for name in SERIES_VARS:
        raw = ds[name][...]
        assert raw.dtype.newbyteorder("=") == want[name].dtype.newbyteorder("="), name
        np.testing.assert_array_equal(raw, want[name].values, err_msg=name)
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


def _log(col: str) -> list[dict[str, object]]:
    r = run("-C", col, "log", "--json")
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout))


def _one_line_exit_2(r: object, *names: str) -> None:
    rc, err = r.returncode, r.stderr  # type: ignore[attr-defined]
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for n in names:
        assert n in err, (n, err)


# --------------------------------------------------------------------------- duplicates
def _with_preliminary(tmp_path: Path) -> tuple[Path, list[Path], Path]:
    d = tmp_path / "data"
    files = write_series(d, 3)
    pre = write_day(d / "oisst-avhrr-v02r01.20240102_preliminary.nc", date(2024, 1, 2), seed=7)
    return d, files, pre


def test_same_coordinate_twice_is_refused_naming_both(tmp_path: Path) -> None:
    d, files, pre = _with_preliminary(tmp_path)
    col = str(tmp_path / "col")
    assert run("-C", col, "init").returncode == 0
    r = run("-C", col, "scan", str(d), "--concat-dim", "time")
    _one_line_exit_2(r, files[1].name, pre.name, "--prefer")
    assert [e["operation"] for e in _log(col)] == ["init"]  # nothing committed
    with pytest.raises(PlanError, match="same 'time' coordinate"):
        refstore.scan(col, [str(d)], concat_dim="time")


def test_prefer_the_file_without_preliminary_and_rescans_apply_it_again(tmp_path: Path) -> None:
    d = tmp_path / "data"
    files = write_series(d, 2)
    pre3 = write_day(d / "oisst-avhrr-v02r01.20240103_preliminary.nc", date(2024, 1, 3), seed=7)
    col = str(tmp_path / "col")
    assert run("-C", col, "init").returncode == 0
    r = run("-C", col, "scan", str(d), "--concat-dim", "time", "--prefer", "!*_preliminary*", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["set_aside"] == []  # only a preliminary file for day 3 so far: it is placed
    assert_series_is(col, [*files, pre3])
    v_pre = refstore.open(col).version
    # two weeks later the final file for day 3 arrives beside its preliminary one: the rule, recorded
    # in the version, is applied again without being given
    final3 = write_day(d / "oisst-avhrr-v02r01.20240103.nc", date(2024, 1, 3), seed=0)
    r = run("-C", col, "scan", str(d), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["set_aside"] == [{"source": str(pre3), "for": str(final3), "rule": "!*_preliminary*"}]
    assert rep["sources"]["new"] == 1
    assert_series_is(col, [*files, final3])
    assert refstore.verify(refstore.open(col).snapshot).mismatched == 0
    info = json.loads(run("-C", col, "info", "--json").stdout)
    assert info["set_aside"] == [{"source": str(pre3), "for": str(final3)}] and info["sources"] == 4
    assert_series_is(col, [*files, pre3], as_of=v_pre)  # the earlier version still reads the preliminary day
    top = _log(col)[0]
    assert f"set aside {pre3}" in str(top["message"]) and str(final3) in str(top["message"])
    # the text report says it too; a further rescan changes nothing and says nothing new
    r = run("-C", col, "scan", str(d))
    assert r.returncode == 0 and "no change" in r.stdout and "set aside" not in r.stdout
    # the same rule is kept, and --prefer none makes the duplicate a refusal again
    r = run("-C", col, "scan", str(d), "--prefer", "none")
    _one_line_exit_2(r, pre3.name, final3.name)
    assert refstore.open(col).snapshot.config()["prefer"] == ["!*_preliminary*"]
    # other rules alone (no file changed) commit a version that records them
    v = lance.dataset(col).version
    rep2 = refstore.scan(col, [str(d)], prefer=["newest"])
    assert rep2.committed and rep2.version == v + 1 and rep2.set_aside == ()  # the same file wins
    assert refstore.open(col).snapshot.config()["prefer"] == ["newest"]
    assert_series_is(col, [*files, final3])


def test_prefer_newest_by_mtime_and_a_rule_that_does_not_decide(tmp_path: Path) -> None:
    d, files, pre = _with_preliminary(tmp_path)
    old, new = 1_700_000_000, 1_800_000_000
    os.utime(files[1], (new, new))
    os.utime(pre, (old, old))
    col = str(tmp_path / "col")
    refstore.init(col)
    with pytest.raises(PlanError, match="does not choose"):  # both names end in .nc: no decision
        refstore.scan(col, [str(d)], concat_dim="time", prefer=["*.nc"])
    rep = refstore.scan(col, [str(d)], concat_dim="time", prefer=["*.nc", "newest"])
    assert [(s, k, r) for s, k, r in rep.set_aside] == [(str(pre), str(files[1]), "newest")]
    assert_series_is(col, files)
    # a newer preliminary file wins by mtime: the rescan re-places it, the final one is set aside
    os.utime(pre, (new + 10, new + 10))
    rep = refstore.scan(col, [str(d)])
    assert rep.changed == 1 and [(s, k) for s, k, _ in rep.set_aside] == [(str(files[1]), str(pre))]
    assert_series_is(col, [files[0], pre, files[2]])


def test_a_positive_glob_prefers_the_matching_file(tmp_path: Path) -> None:
    d, files, pre = _with_preliminary(tmp_path)
    col = str(tmp_path / "col")
    refstore.init(col)
    rep = refstore.scan(col, [str(d)], concat_dim="time", prefer=["*_preliminary.nc"])
    assert [(s, k) for s, k, _ in rep.set_aside] == [(str(files[1]), str(pre))]
    assert_series_is(col, [files[0], pre, files[2]])


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4", "NETCDF4_CLASSIC"])
def test_overlapping_ranges_are_refused_naming_both(tmp_path: Path, fmt: str) -> None:
    d = tmp_path / "obs"
    d.mkdir()
    a = write_obs_file(d / "a.nc", start_hour=0, records=3, fmt=fmt)  # hours 0-2
    b = write_obs_file(d / "b.nc", start_hour=2, records=3, fmt=fmt)  # hours 2-4
    col = str(tmp_path / "col")
    assert run("-C", col, "init").returncode == 0
    r = run("-C", col, "scan", str(d), "--concat-dim", "time")
    _one_line_exit_2(r, "a.nc", "b.nc", "overlap")
    assert [e["operation"] for e in _log(col)] == ["init"]
    # a rule for duplicates does not make an overlap acceptable
    r = run("-C", col, "scan", str(d), "--concat-dim", "time", "--prefer", "newest")
    _one_line_exit_2(r, "a.nc", "b.nc", "overlap")
    # back to back, the same files concatenate; the oracle is netCDF4-python over them
    b.unlink()
    c = write_obs_file(d / "c.nc", start_hour=3, records=2, fmt=fmt)
    refstore.scan(col, [str(d)], concat_dim="time")
    from refstore._netcdf4 import import_netcdf4

    netCDF4 = import_netcdf4()
    for name in ("time", "temp", "count"):
        parts = []
        for p in (a, c):
            with netCDF4.Dataset(p) as nc:
                nc.set_auto_maskandscale(False)
                parts.append(nc[name][...])
        want = np.concatenate(parts)
        got = refstore.open(col)[name][...]
        assert got.dtype.newbyteorder("=") == want.dtype.newbyteorder("=")
        np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- order and dimension
def _no_coordinate(path: Path, n: int, value: float) -> Path:
    from refstore._netcdf4 import import_netcdf4

    netCDF4 = import_netcdf4()
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 4)
        v = nc.createVariable("v", "f4", ("time", "x"), chunksizes=(1, 4))
        v[:] = np.full((n, 4), value, "f4")
    return path


def test_without_a_coordinate_the_report_says_the_order_is_as_given(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    files = [_no_coordinate(d / f"part{i}.nc", 2, float(i)) for i in range(3)]
    col = str(tmp_path / "col")
    assert run("-C", col, "init").returncode == 0
    r = run("-C", col, "scan", str(d), "--concat-dim", "time")
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stderr.split())  # rich wraps long lines
    assert "placed in the order given" in said and "coordinate variable 'time'" in said
    rep = refstore.scan(col, [str(d)])  # nothing new: no plan, nothing said
    assert rep.ordered_by is None and not rep.committed
    with h5py.File(files[0]) as f:
        assert "time" in f  # the dimension is there, without values
    want = xr.concat([xr.open_dataset(p, engine="netcdf4") for p in files], dim="time")["v"].values
    np.testing.assert_array_equal(refstore.open(col)["v"][...], want)
    _no_coordinate(d / "part3.nc", 1, 3.0)
    r = run("-C", col, "scan", str(d), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ordered_by"] == "given"


def test_a_series_with_coordinates_says_it_is_ordered_by_them(series, new_collection) -> None:
    files = series(2)
    rep = refstore.scan(new_collection(), [str(files[0].parent)], concat_dim="time")
    assert rep.ordered_by == "coordinate" and rep.to_json()["ordered_by"] == "coordinate"


def test_a_concat_dim_no_file_has_is_refused_as_such(tmp_path: Path, series) -> None:
    files = series(2)
    col = str(tmp_path / "col")
    assert run("-C", col, "init").returncode == 0
    r = run("-C", col, "scan", str(files[0].parent), "--concat-dim", "depth")
    _one_line_exit_2(r, "'depth'", files[0].name)
    assert "dimension" in r.stderr
    assert [e["operation"] for e in _log(col)] == ["init"]


# --------------------------------------------------------------------------- gone sources
def test_prune_removes_a_deleted_source_in_one_version(tmp_path: Path, series) -> None:
    files = series(4)
    d = files[0].parent
    col = str(tmp_path / "col")
    assert run("-C", col, "init").returncode == 0
    assert run("-C", col, "scan", str(d), "--concat-dim", "time").returncode == 0
    assert run("-C", col, "tag", "all-four").returncode == 0
    kept = tmp_path / "kept.nc"
    shutil.copy(files[1], kept)  # the oracle for the old version, after the file is gone
    files[1].unlink()
    v = lance.dataset(col).version
    # without --prune: nothing committed, the report says a source is missing and how to remove it
    r = run("-C", col, "scan", str(d), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["missing"] == [str(files[1])] and not rep["committed"]
    r = run("-C", col, "scan", str(d))
    said = " ".join(r.stderr.split())
    assert "scan with --prune" in said and "1 recorded source under the scanned paths no longer exists" in said
    assert lance.dataset(col).version == v
    # with --prune: one new version, later sources move earlier
    r = run("-C", col, "scan", str(d), "--prune", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["removed"] == [str(files[1])] and rep["missing"] == []
    assert rep["version"] == v + 1 and lance.dataset(col).version == v + 1
    remaining = [files[0], files[2], files[3]]
    assert_series_is(col, remaining)
    assert refstore.verify(refstore.open(col).snapshot).mismatched == 0
    assert str(files[1]) not in refstore.open(col).snapshot.sources().column("source").to_pylist()
    # diff and log name it
    r = run("-C", col, "diff", "all-four", "--json")
    assert json.loads(r.stdout)["sources"]["removed"] == [str(files[1])]
    top = _log(col)[0]
    assert str(files[1]) in str(top["message"]) and top["record"]["removed"] == [str(files[1])]  # type: ignore[index]
    # the older tag refuses clearly where it needs the gone file, and reads the rest
    r = run("-C", col, "read", "sst", "--as-of", "all-four", "--out", str(tmp_path / "x.npy"))
    _one_line_exit_2(r, files[1].name)
    r = run("-C", col, "read", "sst", "--as-of", "all-four", "--window", "2:4", "--out", str(tmp_path / "y.npy"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), _oracle(files[2:])["sst"].values)
    # a rescan after pruning commits nothing
    again = refstore.scan(col, [str(d)], prune=True)
    assert not again.committed and again.removed == ()
    del kept


def test_older_tags_read_held_bytes_of_a_pruned_source(tmp_path: Path, series) -> None:
    files = series(3)
    d = files[0].parent
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(d)], concat_dim="time")
    want = _oracle(files)  # read before the file goes
    want.load()
    from refstore.table.hold import HoldSelection, hold
    from refstore.table.versions import create_tag

    hold(refstore.Collection.open(col), HoldSelection(arrays=SERIES_VARS))
    create_tag(refstore.Collection.open(col), "held")
    files[2].unlink()
    rep = refstore.scan(col, [str(d)], prune=True)
    assert rep.removed == (str(files[2]),)
    ds = refstore.open(col, "held")
    for name in SERIES_VARS:
        np.testing.assert_array_equal(ds[name][...], want[name].values, err_msg=name)
    assert_series_is(col, files[:2])


def test_prune_of_a_named_file_and_refusal_of_a_gone_folder(tmp_path: Path, series) -> None:
    files = series(3)
    d = files[0].parent
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(d)], concat_dim="time")
    files[2].unlink()
    rep = refstore.scan(col, [str(files[2])], prune=True)
    assert rep.removed == (str(files[2]),) and rep.committed
    assert_series_is(col, files[:2])
    # a folder that is gone as a whole (an unmounted disk?) is refused, never read as "all deleted"
    moved = tmp_path / "elsewhere"
    d.rename(moved)
    assert run("-C", col, "init").returncode == 2  # (already a collection)
    r = run("-C", col, "scan", str(d), "--prune")
    _one_line_exit_2(r, str(d))
    assert len(refstore.open(col).snapshot.sources()) == 2


def test_prune_under_an_s3_prefix(s3: S3, series, new_collection) -> None:
    files = series(3)
    urls = s3.upload(files[0].parent, "oisst/v2")
    col = new_collection()
    refstore.scan(col, [s3.url("oisst/v2/")], concat_dim="time", workers=1)
    import obstore

    obstore.delete(s3.store(), "oisst/v2/" + files[0].name)  # type: ignore[arg-type]
    rep = refstore.scan(col, [s3.url("oisst/v2/")], workers=1)
    assert rep.missing == (urls[0],) and not rep.committed
    rep = refstore.scan(col, [s3.url("oisst/v2")], workers=1, prune=True)
    assert rep.removed == (urls[0],) and rep.committed
    assert_series_is(col, files[1:])
    # an object named directly
    obstore.delete(s3.store(), "oisst/v2/" + files[2].name)  # type: ignore[arg-type]
    rep = refstore.scan(col, [urls[2]], workers=1, prune=True)
    assert rep.removed == (urls[2],) and rep.committed
    assert_series_is(col, files[1:2])


# --------------------------------------------------------------------------- the pure rule, by properties
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.integers(1, 3), st.booleans(), st.integers(0, 3)), min_size=1,
             max_size=8),
    st.sampled_from([(), ("newest",), ("!*_pre*",), ("*_pre*", "newest")]),
)  # fmt: skip
def test_order_sources_places_disjoint_ranges_and_sets_aside_only_true_duplicates(specs, rules) -> None:
    from refstore.plan.series_order import order_sources, parse_prefer
    from refstore.scan._types import ArrayMeta

    slabs = []
    for i, (first, n, pre, age) in enumerate(specs):
        t = ArrayMeta("time", ("time",), (n,), (1,), "<f8", None)
        name = f"s{i}_pre.nc" if pre else f"s{i}.nc"
        slabs.append(SourceSlab(name, i, {"time": t}, float(first), "u", float(first + n - 1), age))
    span = {s.location: (s.sort_value, s.sort_last) for s in slabs}
    refused: str | None = None
    try:
        got = order_sources(slabs, "time", prefer=parse_prefer(rules))
    except PlanError as e:
        refused = str(e)
    disjoint = all(a[1] < b[0] or b[1] < a[0] for a, b in itertools.combinations(span.values(), 2))
    if refused is not None:
        assert not disjoint and " and " in refused  # only a real conflict, naming two sources
        return
    placed = [s.location for s in got.sources]
    assert sorted(placed + [a.location for a in got.set_aside]) == sorted(span)  # nothing lost
    for a, b in itertools.pairwise(placed):
        assert span[a][1] < span[b][0]  # strictly ordered, disjoint
    for a in got.set_aside:
        assert a.kept in placed and span[a.location] == span[a.kept] and a.rule in rules


def test_prefer_rules_parse_or_are_refused(tmp_path: Path, series) -> None:
    from refstore.plan.series_order import PreferRule, parse_prefer

    assert parse_prefer(["newest", "!*_preliminary*", "*.nc"]) == (
        PreferRule(newest=True), PreferRule(pattern="*_preliminary*", negate=True), PreferRule(pattern="*.nc"),
    )  # fmt: skip
    assert parse_prefer(["none"]) == ()
    assert PreferRule(pattern="*/final/*.nc").keep([SourceSlab("/a/final/x.nc", 0, {}), SourceSlab("/a/x.nc", 1, {})]) \
        == [SourceSlab("/a/final/x.nc", 0, {})]  # fmt: skip
    files = series(1)
    col = str(tmp_path / "col")
    assert run("-C", col, "init").returncode == 0
    for bad in (["--prefer", "!"], ["--prefer", "none", "--prefer", "newest"]):
        r = run("-C", col, "scan", str(files[0].parent), "--concat-dim", "time", *bad)
        _one_line_exit_2(r, "--prefer")
    assert [e["operation"] for e in _log(col)] == ["init"]

"""``extend_plan`` (plan/append.py) on small hand-made series, for the mutation run (group
``plan-append``): where it answers, everything it answers equals ``make_plan``'s plan of the whole
series (the reference it replaces: the same arrays as objects, the new sources' placements,
views and keys with the same values and Python int types, its concat dimension, order and
``ordered_by``); where the module's rules say the whole series must be planned (no new source, a
source without a sort value or in other units, a hole at the start of an era-less array, a
source whose arrays disagree on its length), it answers None. Pure, in memory, milliseconds."""

from __future__ import annotations

from typing import Any

import pytest

from refstore.plan.append import SeriesEnd, extend_plan
from refstore.plan.concat import Plan, SourceSlab, make_plan
from refstore.scan._types import ArrayMeta


def _meta(name: str, dims: tuple[str, ...], shape: tuple[int, ...], chunks: tuple[int, ...], **kw: Any) -> ArrayMeta:
    m = ArrayMeta(name, dims, shape, chunks, "<i4", 0, **kw)
    return ArrayMeta.from_json(m.to_json())  # as the table records it


def _src(
    i: int, t0: int, n: int = 1, *, chunk: int = 1, order: int | None = None, v: bool = True,
    lat_first: bool = False, units: str | None = "days", sort: bool = True, v_len: int | None = None,
    v_dims: tuple[str, ...] = ("time", "x"), v_attrs: dict[str, Any] | None = None,
) -> SourceSlab:  # fmt: skip
    """Source ``i``: ``n`` steps from ``t0``: ``time``, ``v`` (time, x=3) chunked ``chunk`` along
    time (absent: ``v=False``; ``v_len`` steps instead of n), ``lat`` (x) taken once."""
    arrays: dict[str, ArrayMeta] = {}
    lat = _meta("lat", ("x",), (3,), (3,))
    if lat_first:
        arrays["lat"] = lat
    arrays["time"] = _meta("time", ("time",), (n,), (1,))
    if v:
        k = n if v_len is None else v_len
        shape, chunks = ((k, 3), (chunk, 3)) if v_dims[0] == "time" else ((3, k), (3, chunk))
        arrays["v"] = _meta("v", v_dims, shape, chunks, attrs=v_attrs or {})
    if not lat_first:
        arrays["lat"] = lat
    first, last = (float(t0), float(t0 + n - 1)) if sort else (None, None)
    return SourceSlab(f"s{i:03d}", i if order is None else order, arrays, first, units, last)


def _ext(slabs: list[SourceSlab], cut: int) -> Plan | None:
    """extend_plan of ``slabs[cut:]`` after make_plan's plan of ``slabs[:cut]`` (through JSON, as recorded)."""
    end = make_plan(slabs[:cut], "time")
    arrays = {a: ArrayMeta.from_json(m.to_json()) for a, m in end.arrays.items()}
    last = next(s for s in slabs if s.location == end.order[-1])
    return extend_plan(SeriesEnd(arrays, last), slabs[cut:], "time")


def _extend(slabs: list[SourceSlab], cut: int) -> tuple[Plan | None, Plan]:
    """``_ext`` and make_plan's plan of all the sources."""
    return _ext(slabs, cut), make_plan(slabs, "time")


def _ints(t: tuple[Any, ...]) -> bool:
    return all(type(x) is int for x in t)


def _assert_same(ext: Plan | None, full: Plan, new: list[SourceSlab]) -> None:
    assert ext is not None
    locs = {s.location for s in new}
    assert (ext.concat_dim, ext.ordered_by) == (full.concat_dim, full.ordered_by)
    assert ext.order == tuple(loc for loc in full.order if loc in locs)
    assert sorted(ext.arrays) == sorted(full.arrays)
    for name, g in full.arrays.items():
        assert ext.arrays[name] == g, name  # the objects, not only their JSON
        assert ext.arrays[name].to_json() == g.to_json(), name
    for what in ("placements", "view", "keys"):
        mine = {k: v for k, v in getattr(ext, what).items() if k[0] in locs}
        theirs = {k: v for k, v in getattr(full, what).items() if k[0] in locs}
        assert mine == theirs, what
    for k, dest in ext.placements.items():
        era, off = ext.view[k]
        kera, base = ext.keys[k]
        assert _ints(dest) and _ints(off) and _ints(base) and type(era) is int and type(kera) is int, k


def test_appended_on_the_grid_and_off_it() -> None:
    """Two steps a source, v chunked 2 (on the grid) and 3 (off it: rectilinear)."""
    for chunk in (2, 3):
        slabs = [_src(i, 2 * i, 2, chunk=chunk) for i in range(5)]
        ext, full = _extend(slabs, 3)
        _assert_same(ext, full, slabs[3:])


def test_new_sources_given_in_another_order_are_placed_by_coordinate() -> None:
    """The new sources' user order runs against their coordinate: placed by coordinate all the same."""
    slabs = [_src(i, i, order=10 - i) for i in range(6)]
    ext, full = _extend(slabs, 3)
    _assert_same(ext, full, slabs[3:])
    assert ext is not None and ext.order == ("s003", "s004", "s005")


def test_an_array_taken_once_listed_first() -> None:
    """``lat`` (not along time) before ``v`` in the new sources' arrays: v is placed all the same."""
    slabs = [_src(i, i, lat_first=i >= 2) for i in range(4)]
    ext, full = _extend(slabs, 2)
    _assert_same(ext, full, slabs[2:])


def test_a_hole_inside_an_era_less_array() -> None:
    """v absent from the second source (a hole [1, 2), chunk 1: no era): appending is planned."""
    slabs = [_src(i, i, v=i != 1) for i in range(5)]
    ext, full = _extend(slabs, 3)
    assert full.arrays["v"].holes == ((1, 2),) and not full.arrays["v"].eras
    _assert_same(ext, full, slabs[3:])


def test_a_hole_at_the_start_of_an_era_less_array_is_left_to_the_full_plan() -> None:
    """v absent from the first source, its grid starting at 0 all the same (no era): re-keying
    that start is the full path's (upsert._recorded_origins), so extend_plan answers None."""
    slabs = [_src(i, i, v=i != 0) for i in range(4)]
    ext, full = _extend(slabs, 2)
    assert full.arrays["v"].holes == ((0, 1),) and not full.arrays["v"].eras
    assert ext is None


def test_off_the_grid_of_an_era_starting_where_a_hole_ends() -> None:
    """v chunked 2 over [0, 2), absent over [2, 3), chunked 3 from 3 (a second era starting where
    the hole ends); a source appended at 5 is off that era's grid: its chunks before are whole (the
    hole is before the era), so extend_plan makes the era rectilinear as make_plan does."""
    slabs = [_src(0, 0, 2, chunk=2), _src(1, 2, 1, v=False), _src(2, 3, 2, chunk=3), _src(3, 5, 2, chunk=3)]
    ext, full = _extend(slabs, 3)
    assert full.arrays["v"].holes == ((2, 3),) and full.arrays["v"].eras[-1]["start"] == 3
    _assert_same(ext, full, slabs[3:])


@pytest.mark.parametrize(
    "bad",
    [
        {"sort": False},  # no sort value
        {"units": "hours"},  # other units
        {"v_len": 2},  # v and time disagree on the source's length
        {"v_dims": ("x", "time")},  # v's dimensions in another order
        {"v_attrs": {"crs": "EPSG:4326"}},  # v on another grid (make_plan refuses it)
    ],
)
def test_the_whole_series_is_planned(bad: dict[str, Any]) -> None:
    slabs = [_src(i, i) for i in range(3)] + [_src(3, 3, **bad), _src(4, 5)]
    assert _ext(slabs, 3) is None


def test_no_new_source() -> None:
    assert _ext([_src(i, i) for i in range(3)], 3) is None

"""The pure planning code against independent models: numpy indexing for selections, brute
force for coordinate ranges and coalescing bounds, cumulative extents for placements, Python's
own date arithmetic for CF dates, and a direct reading of the documented remap rule. Written
for the mutation run (``./dev mutate plan``): every case pins a boundary of the rule it tests.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refstore.errors import BadInputError, PlanError
from refstore.plan import SourceSlab, coalesce, make_plan, parse_window, select
from refstore.plan.eras import EraLayout
from refstore.plan.region import (
    affine_ranges,
    date_to_cf,
    interval_ranges,
    lon_ranges,
    parse_bbox,
    parse_time_range,
)
from refstore.plan.remap import RemapRule, canonical_prefix, remap_one, to_url
from refstore.scan import ArrayMeta


# --------------------------------------------------------------------------- coalesce
@pytest.mark.parametrize(("max_gap", "max_bytes"), [(-1, 10), (0, 0), (0, -5)])
def test_coalesce_refuses_negative_gap_and_empty_reads(max_gap: int, max_bytes: int) -> None:
    with pytest.raises(ValueError, match=r"^max_gap must be >= 0 and max_bytes > 0$"):
        coalesce(np.array([0]), np.array([1]), max_gap=max_gap, max_bytes=max_bytes)


def test_coalesce_bounds_are_inclusive() -> None:
    off, ln = np.array([0, 15]), np.array([10, 5])  # gap of 5 bytes, 20 bytes in all
    assert coalesce(off, ln, max_gap=5, max_bytes=20).start.tolist() == [0]
    assert coalesce(off, ln, max_gap=4, max_bytes=20).start.tolist() == [0, 15]
    assert coalesce(off, ln, max_gap=5, max_bytes=19).start.tolist() == [0, 15]
    empty = coalesce(np.array([], np.int64), np.array([], np.int64))
    assert empty.start.dtype == empty.end.dtype == empty.run.dtype == np.dtype(np.int64)
    assert len(empty.start) == len(empty.end) == len(empty.run) == 0
    one = coalesce(np.array([7]), np.array([3]), max_gap=0, max_bytes=1)  # longer than max_bytes: read alone
    assert (one.start.tolist(), one.end.tolist(), one.run.tolist()) == ([7], [10], [0])
    # far from byte 0 (the limit is on the merged read's own length, not its end)
    base = 3_000_000_000
    far = coalesce(np.array([base, base + 10]), np.array([10, 10]), max_gap=0, max_bytes=20)
    assert (far.start.tolist(), far.end.tolist(), far.run.tolist()) == ([base], [base + 20], [0, 0])
    far = coalesce(np.array([base + 10, base]), np.array([11, 11]), max_gap=0, max_bytes=20)  # overlap, 21 bytes
    assert (far.start.tolist(), far.end.tolist(), far.run.tolist()) == ([base, base + 10], [base + 11, base + 21],
                                                                         [1, 0])  # fmt: skip
    # 32-bit inputs past 2^32 bytes: the arithmetic is int64
    wide = coalesce(np.array([2**32 - 10], np.uint32), np.array([20], np.uint32))
    assert (wide.start.tolist(), wide.end.tolist()) == ([2**32 - 10], [2**32 + 10])


# --------------------------------------------------------------------------- select
def test_chunk_slices_are_int64_for_int32_keys() -> None:
    """The table's key columns are int32: the slices are element indices (int64), whatever
    the keys' type, and equal those of int64 keys."""
    from refstore.plan.select import chunk_slices

    sel = select((slice(3, 50, 4), slice(None)), (60, 7))
    k64 = np.array([[0, 0], [2, 1], [5, 0]], np.int64)
    want = chunk_slices(k64, (10, 4), (60, 7), sel)
    got = chunk_slices(k64.astype(np.int32), (10, 4), (60, 7), sel)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.dtype(np.int64) and g.tolist() == w.tolist()
    # chunk (2, 1): rows 20..29 hold selected 23, 27 (result rows 5, 6); columns 4..6 all
    assert [x[1].tolist() for x in want] == [[3, 0], [10, 3], [5, 4], [7, 7]]


keys = st.tuples(
    st.one_of(st.integers(-6, 5), st.slices(6)),
    st.one_of(st.integers(-4, 3), st.slices(4)),
    st.one_of(st.integers(-5, 4), st.slices(5)),
)


@settings(max_examples=300, deadline=None)
@given(keys, st.integers(0, 3))
def test_select_matches_numpy_indexing(key: tuple[object, ...], cut: int) -> None:
    shape = (6, 4, 5)
    full = np.arange(np.prod(shape)).reshape(shape)
    key = key[:cut] + ((...,) if cut < 3 and cut % 2 else ())
    if any(isinstance(k, slice) and k.step is not None and k.step < 0 for k in key):
        with pytest.raises(BadInputError, match="only positive steps"):
            select(key, shape)
        return
    expected = full[key]
    sel = select(key, shape)
    got = full[tuple(slice(a, b, s) for a, b, s in zip(sel.start, sel.stop, sel.step, strict=True))]
    got = got.reshape([n for i, n in enumerate(got.shape) if i not in sel.drop])
    assert sel.shape == expected.shape
    assert np.array_equal(got, expected)
    ranges = sel.chunk_ranges((4, 3, 2))
    if expected.size == 0:
        assert ranges is None
    else:
        assert ranges == [(a // c, (b - 1) // c) for a, b, c in zip(sel.start, sel.stop, (4, 3, 2), strict=True)]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ((6,), "index 6 is out of bounds for axis 0 with size 6"),
        ((-7,), "index -7 is out of bounds for axis 0 with size 6"),
        ((0, 0, 0, 0), "too many indices: 4 for an array of 3 dimensions"),
        ((..., 0, ...), "an index can only have a single ellipsis ('...')"),
        ((slice(0, 2, 0),), "axis 0: a slice step cannot be zero"),
        ((0, [1]), "axis 1: unsupported index [1] (use ints and slices)"),
    ],
)
def test_select_refusals_name_the_axis(key: tuple[object, ...], message: str) -> None:
    with pytest.raises(BadInputError, match="^" + re.escape(message) + "$"):
        select(key, (6, 4, 5))


def test_select_takes_numpy_integers_and_a_bare_index() -> None:
    sel = select(np.int64(-1), (6, 4))
    assert (sel.start, sel.stop, sel.step, sel.drop, sel.shape) == ((5, 0), (6, 4), (1, 1), (0,), (4,))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, ()),
        ("  ", ()),
        ("0:10, :, 5", (slice(0, 10), slice(None), 5)),
        ("...,1::2", (Ellipsis, slice(1, None, 2))),
        ("-3:", (slice(-3, None),)),
    ],
)
def test_parse_window(spec: str | None, expected: tuple[object, ...]) -> None:
    assert parse_window(spec) == expected


@pytest.mark.parametrize("spec", ["1:2:3:4", "a", "1.5", "0,,1"])
def test_parse_window_refuses(spec: str) -> None:
    with pytest.raises(BadInputError, match=r"--window .*cannot read"):
        parse_window(spec)


# --------------------------------------------------------------------------- concat
def _meta(n: int, *, chunk: int = 2, name: str = "x", codecs: tuple[dict[str, object], ...] = (),
          attrs: dict[str, dict[str, object]] | None = None, other: int = 3) -> ArrayMeta:  # fmt: skip
    return ArrayMeta(name, ("time", "y"), (n, other), (chunk, other), "<f4", None, codecs, attrs or {})


def _slab(i: int, arrays: dict[str, ArrayMeta], value: float | None = None, units: str | None = "u") -> SourceSlab:
    return SourceSlab(f"s{i}.nc", i, arrays, sort_value=float(i) if value is None else value, sort_units=units)


def test_plan_orders_by_coordinate_then_given_order_and_places_end_to_end() -> None:
    extents = [4, 2, 6, 2]
    values = [3.0, 1.0, 2.0, 0.0]  # distinct: two sources at one coordinate are refused (test_scan_rules)
    slabs = [_slab(i, {"x": _meta(n)}, v) for i, (n, v) in enumerate(zip(extents, values, strict=True))]
    plan = make_plan(list(reversed(slabs)), "time")
    order = sorted(range(4), key=lambda i: (values[i], i))
    assert plan.order == tuple(f"s{i}.nc" for i in order)
    starts = np.concatenate([[0], np.cumsum([extents[i] for i in order])[:-1]])
    for i, start in zip(order, starts.tolist(), strict=True):
        assert plan.placements[(f"s{i}.nc", "x")] == (start, 0)
        assert plan.view[(f"s{i}.nc", "x")] == (0, (start, 0))
    assert plan.arrays["x"].shape == (sum(extents), 3)
    assert plan.arrays["x"].eras == () and plan.arrays["x"].holes == ()


def test_plan_without_coordinates_keeps_the_given_order() -> None:
    slabs = [SourceSlab(f"s{i}.nc", 2 - i, {"x": _meta(2)}) for i in range(3)]
    assert make_plan(slabs, "time").order == ("s2.nc", "s1.nc", "s0.nc")
    assert make_plan(slabs[:1], None).order == ("s0.nc",)


def test_plan_refuses_mixed_coordinates_and_units() -> None:
    with pytest.raises(PlanError, match=r"s1\.nc: has no coordinate variable 'time' while other sources do"):
        make_plan([_slab(0, {"x": _meta(2)}), SourceSlab("s1.nc", 1, {"x": _meta(2)})], "time")
    with pytest.raises(PlanError, match=r"s1\.nc: coordinate 'time' has units 'v', but s0\.nc has 'u'"):
        make_plan([_slab(0, {"x": _meta(2)}), _slab(1, {"x": _meta(2)}, units="v")], "time")


def test_plan_refusals_name_the_array_and_both_sources() -> None:
    with pytest.raises(PlanError, match=r"dimension 'time' has size 2 in 'x' but 4 in 'z'"):
        make_plan([_slab(0, {"x": _meta(2), "z": _meta(4, name="z")})], "time")
    with pytest.raises(PlanError, match=r"array 'x' has shape \[2, 4\] in s1\.nc but \[2, 3\] in s0\.nc"):
        make_plan([_slab(0, {"x": _meta(2)}), _slab(1, {"x": _meta(2, other=4)})], "time")
    with pytest.raises(PlanError, match=r"array 'x' is in both s0\.nc and s1\.nc and refstore cannot compare"):
        make_plan([_slab(0, {"x": _meta(2)}), _slab(1, {"x": _meta(2)})], None)
    flat = lambda dt: ArrayMeta("c", ("y",), (3,), (3,), dt, None)
    with pytest.raises(PlanError, match=r"array 'c' is taken once .* differs between s0\.nc .* and s1\.nc"):
        make_plan([_slab(0, {"c": flat("<f4"), "x": _meta(2)}), _slab(1, {"c": flat("<f8"), "x": _meta(2)})], "time")
    other_dims = ArrayMeta("x", ("time", "z"), (2, 3), (2, 3), "<f4", None)
    with pytest.raises(PlanError, match=r"array 'x' has dimensions \['time', 'z'\] in s1\.nc"):
        make_plan([_slab(0, {"x": _meta(2)}), _slab(1, {"x": other_dims})], "time")
    moved = ArrayMeta("x", ("time", "y"), (2, 3), (2, 3), "<f4", None, (), {"crs": {"type": "str", "value": "B"}})
    with pytest.raises(PlanError, match=r"array 'x' is on a different grid in s1\.nc than in s0\.nc"):
        make_plan([_slab(0, {"x": _meta(2)}), _slab(1, {"x": moved})], "time")


def test_plan_takes_an_array_without_the_dim_once_from_its_first_source() -> None:
    flat = ArrayMeta("c", ("y",), (3,), (3,), "<f4", None)
    plan = make_plan([_slab(1, {"x": _meta(2), "c": flat}), _slab(0, {"x": _meta(2), "c": flat})], "time")
    assert plan.arrays["c"].shape == (3,)
    assert plan.placements == {("s0.nc", "x"): (0, 0), ("s1.nc", "x"): (2, 0), ("s0.nc", "c"): (0,)}
    assert plan.view[("s0.nc", "c")] == (0, (0,))


def test_plan_eras_and_holes_follow_the_holders() -> None:
    """An array absent from the first source and the third, whose codecs change at the fourth:
    eras start at their first holder (the first on its own grid from 0), holes where no holder is."""
    z = ({"id": "zlib", "level": 1},)
    t = lambda n: ArrayMeta("time", ("time",), (n,), (1,), "<f8", None)
    slabs = [
        _slab(0, {"time": t(2)}),
        _slab(1, {"time": t(2), "x": _meta(2)}),
        _slab(2, {"time": t(2)}),
        _slab(3, {"time": t(4), "x": _meta(4, codecs=z)}),
        _slab(4, {"time": t(2), "x": _meta(2, codecs=z)}),
    ]
    plan = make_plan(slabs, "time")
    x = plan.arrays["x"]
    assert x.shape == (12, 3)
    assert x.holes == ((0, 2), (4, 6)) and x.holes_axis == 0
    assert [(e["index"], e["start"], e["stop"], e["first_source"], e["last_source"]) for e in x.eras] == [
        (0, 0, 6, "s1.nc", "s1.nc"), (1, 6, 12, "s3.nc", "s4.nc")]  # fmt: skip
    assert [e["codecs"] for e in x.eras] == [[], list(z)]
    assert all(e["axis"] == 0 and e["chunks"] == [2, 3] and e["dtype"] == "<f4" for e in x.eras)
    assert plan.view[("s1.nc", "x")] == (0, (2, 0))
    assert plan.view[("s3.nc", "x")] == (1, (0, 0)) and plan.view[("s4.nc", "x")] == (1, (4, 0))
    assert ("s0.nc", "x") not in plan.placements and ("s2.nc", "x") not in plan.view
    layout = EraLayout.of(x)
    assert layout is not None
    assert (layout.axis, layout.extent, layout.bounds, layout.chunks, layout.holes) == (
        0, 12, ((0, 6), (6, 12)), ((2, 3), (2, 3)), ((0, 2), (4, 6)))  # fmt: skip


def test_plan_first_holder_off_its_grid_is_one_era_from_its_start() -> None:
    t = lambda n: ArrayMeta("time", ("time",), (n,), (1,), "<f8", None)
    plan = make_plan([_slab(0, {"time": t(3)}), _slab(1, {"time": t(4), "x": _meta(4)})], "time")
    x = plan.arrays["x"]
    assert [(e["start"], e["stop"]) for e in x.eras] == [(3, 7)] and x.holes == ((0, 3),)
    assert plan.placements[("s1.nc", "x")] == (3, 0) and plan.view[("s1.nc", "x")] == (0, (0, 0))
    layout = EraLayout.of(x)
    assert layout is not None and layout.bounds == ((3, 7),)
    # aligned: no era recorded, the holes alone
    plan = make_plan([_slab(0, {"time": t(2)}), _slab(1, {"time": t(4), "x": _meta(4)})], "time")
    assert plan.arrays["x"].eras == () and plan.arrays["x"].holes == ((0, 2),)
    assert plan.view[("s1.nc", "x")] == (0, (2, 0))
    layout = EraLayout.of(plan.arrays["x"])
    assert layout is not None and layout.bounds == ((0, 6),) and layout.chunks == ((2, 3),)


def test_plan_misaligned_middle_source_gets_a_rectilinear_grid() -> None:
    slabs = [_slab(0, {"x": _meta(2)}), _slab(1, {"x": _meta(3)}), _slab(2, {"x": _meta(2)})]
    plan = make_plan(slabs, "time")
    x = plan.arrays["x"]
    assert x.shape == (7, 3) and x.eras == () and x.edges == ((2, 2, 1, 2), None)
    assert plan.placements[("s2.nc", "x")] == (5, 0) and plan.view[("s2.nc", "x")] == (0, (5, 0))
    assert [plan.keys[(f"s{i}.nc", "x")] for i in range(3)] == [(0, (0, 0)), (0, (1, 0)), (0, (3, 0))]
    assert ArrayMeta.from_json(x.to_json()) == x


def test_era_layout_of_an_array_without_eras_or_holes_is_none() -> None:
    assert EraLayout.of(_meta(4)) is None


# --------------------------------------------------------------------------- region
coords = st.lists(st.floats(-400, 400, allow_nan=False), min_size=1, max_size=30)


@given(coords, st.floats(-500, 500), st.floats(-500, 500))
def test_interval_ranges_brute_force(values: list[float], a: float, b: float) -> None:
    v = np.sort(np.asarray(values))
    lo, hi = min(a, b), max(a, b)
    inside = [i for i, x in enumerate(v.tolist()) if lo <= x <= hi]
    expected = [(inside[0], inside[-1] + 1)] if inside else []
    assert interval_ranges(v, lo, hi) == expected
    assert interval_ranges(v[::-1], lo, hi) == ([(len(v) - inside[-1] - 1, len(v) - inside[0])] if inside else [])


def _runs(idx: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i in idx:
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([0.0, -180.0]), st.sampled_from([1.0, 2.5, 10.0]), st.floats(-540, 540), st.floats(0, 400))
def test_lon_ranges_brute_force(origin: float, step: float, west: float, width: float) -> None:
    lons = np.arange(origin, origin + 360.0, step)
    east = west + width

    def norm(x: float) -> float:
        return (x + 180.0) % 360.0 - 180.0

    if width >= 360.0:
        expected = [(0, len(lons))]
    else:
        w, e = norm(west), norm(east)
        inside = (lambda x: w <= x <= e) if w <= e else (lambda x: x >= w or x <= e)
        keep = [i for i, x in enumerate(lons.tolist()) if inside(norm(x))]
        expected = _runs(keep)
    assert lon_ranges(lons, west, east) == expected


@settings(max_examples=300, deadline=None)
@given(st.floats(-10, 10), st.floats(-10, 10), st.floats(0, 12), st.floats(0, 12), st.booleans())
def test_affine_ranges_brute_force(w: float, s: float, dw: float, dh: float, flip: bool) -> None:
    """Pixels of a 10x8 grid (0.5 units, origin -2, +3; north-up or south-up) whose span the
    box overlaps by more than an edge."""
    height, width = 8, 10
    dy = 0.5 if flip else -0.5
    transform = [-2.0, 0.5, 0.0, 3.0 if not flip else -1.0, 0.0, dy]
    e, n = w + dw, s + dh
    got = affine_ranges(transform, height, width, (w, s, e, n))

    def pixels(a: float, b: float, x0: float, d: float, count: int) -> list[int]:
        lo, hi = sorted(((a - x0) / d, (b - x0) / d))
        return [i for i in range(count) if i < np.ceil(hi) and i + 1 > np.floor(lo)]

    rows = pixels(n, s, transform[3], dy, height)
    cols = pixels(w, e, transform[0], 0.5, width)
    if not rows or not cols:
        assert got is None
    else:
        assert got == ((rows[0], rows[-1] + 1), [(cols[0], cols[-1] + 1)])


def test_affine_ranges_geographic_crossing_the_antimeridian() -> None:
    transform = [-180.0, 10.0, 0.0, 90.0, 0.0, -10.0]  # 36 x 18 one-degree-ish cells
    got = affine_ranges(transform, 18, 36, (170.0, -10.0, -170.0, 10.0), geographic=True)
    assert got == ((8, 10), [(0, 1), (35, 36)])
    east = [0.0, 10.0, 0.0, 90.0, 0.0, -10.0]  # 0..360
    assert affine_ranges(east, 18, 36, (-20.0, 0.0, -10.0, 10.0), geographic=True) == ((8, 9), [(34, 35)])
    with pytest.raises(BadInputError, match="rotated or sheared"):
        affine_ranges([0.0, 1.0, 0.1, 0.0, 0.0, -1.0], 4, 4, (0.0, 0.0, 1.0, 1.0))
    assert affine_ranges(transform, 18, 36, (170.0, 80.0, 175.0, 95.0)) == ((0, 1), [(35, 36)])


@pytest.mark.parametrize(
    ("calendar", "expected"),
    [
        ("standard", (date(2024, 3, 1) - date(1978, 1, 1)).days + 0.5),
        ("proleptic_gregorian", (date(2024, 3, 1) - date(1978, 1, 1)).days + 0.5),
        ("noleap", 46 * 365 + 31 + 28 + 0.5),
        ("360_day", 46 * 360 + 60 + 0.5),
        ("", (date(2024, 3, 1) - date(1978, 1, 1)).days + 0.5),
    ],
)
def test_date_to_cf_per_calendar(calendar: str, expected: float) -> None:
    assert date_to_cf(datetime(2024, 3, 1, 12), "days since 1978-01-01", calendar) == expected


def test_date_to_cf_refuses_a_date_the_calendar_lacks() -> None:
    with pytest.raises(BadInputError, match=r"cannot place 2024-02-29T00:00:00 on 'days since 1978-01-01' \(noleap\)"):
        date_to_cf(datetime(2024, 2, 29), "days since 1978-01-01", "noleap")


def test_parse_bbox_and_time_range() -> None:
    assert parse_bbox("140,-50,160,-40") == (140.0, -50.0, 160.0, -40.0)
    assert parse_bbox("1,2,3,2") == (1.0, 2.0, 3.0, 2.0)
    for bad, msg in [("1,2,3", "four numbers"), ("1,2,3,nan", "finite"), ("1,3,2,2", "south 3.0 is north")]:
        with pytest.raises(BadInputError, match=msg):
            parse_bbox(bad)
    a, b = parse_time_range("2024-01-01/2024-01-31")
    assert (a, b) == (datetime(2024, 1, 1), datetime(2024, 1, 31, 23, 59, 59, 999999))
    a, b = parse_time_range(" 2024-01-01T06:00+02:00 / 2024-01-01T12:00Z ")
    assert (a, b) == (datetime(2024, 1, 1, 4), datetime(2024, 1, 1, 12))
    assert parse_time_range("2024-01-01/2024-01-01") == (datetime(2024, 1, 1), datetime(2024, 1, 1, 23, 59, 59,
                                                                                          999999))  # fmt: skip
    for bad, msg in [("2024-01-01", "START/END"), ("a/b", "ISO dates"), ("2024-02-01/2024-01-01", "after END"),
                     ("2024-01-01/2024-01-01/2024-01-02", "START/END")]:  # fmt: skip
        with pytest.raises(BadInputError, match=msg):
            parse_time_range(bad)


# --------------------------------------------------------------------------- remap
def _model(location: str, rules: list[tuple[str, str]]) -> str:
    """The documented rule, read literally: the longest prefix matching at a path boundary is
    replaced; the rest is percent-encoded into http(s) URLs and decoded out of them."""
    from urllib.parse import quote, unquote

    def boundary(p: str) -> bool:
        return location == p or (location.startswith(p) and (p.endswith("/") or location[len(p)] == "/"))

    hits = [r for r in rules if boundary(r[0])]
    if not hits:
        return location
    prefix, repl = max(hits, key=lambda r: len(r[0]))
    rest = location[len(prefix) :]
    web = lambda s: s.lower().startswith(("http://", "https://"))
    if web(repl) and not web(location):
        rest = quote(rest, safe="/")
    elif web(location) and not web(repl):
        rest = unquote(rest)
    if repl.endswith("/") and rest.startswith("/"):
        rest = rest[1:]
    return repl + rest


@pytest.mark.parametrize(
    "location",
    ["/data/x.nc", "/database/x.nc", "/data", "/data/sub/a b#1.nc", "s3://b/a b.nc", "HTTPS://h/a%20b.nc",
     "/other/x.nc", "/data/sub"],
)  # fmt: skip
def test_remap_one_is_the_documented_rule(location: str) -> None:
    rules = [("/data", "https://example.org/d/"), ("/data/sub/", "s3://bucket/"), ("s3://b/", "/mnt/b"),
             ("HTTPS://h/", "/local/")]  # fmt: skip
    got = remap_one(location, [RemapRule(p, r) for p, r in rules])
    assert got == _model(location, rules)


def test_remap_rule_details() -> None:
    assert remap_one("/data/x.nc", [RemapRule("/data", "/mnt/d")]) == "/mnt/d/x.nc"
    assert remap_one("/data/x.nc", [RemapRule("/data/", "https://e.org/")]) == "https://e.org/x.nc"
    assert remap_one("/data/a b.nc", [RemapRule("/data", "http://e.org")]) == "http://e.org/a%20b.nc"
    assert remap_one("http://e.org/a%20b.nc", [RemapRule("http://e.org", "/d")]) == "/d/a b.nc"
    assert remap_one("/data/x.nc", []) == "/data/x.nc"
    with pytest.raises(BadInputError, match=r"give a URL .* or an absolute path"):
        remap_one("/data/x.nc", [RemapRule("/data", "relative/dir")])
    assert canonical_prefix("file:///data/") == "/data/" and canonical_prefix("//") == "/"
    assert canonical_prefix("/data/../x") == "/x" and canonical_prefix("s3://b/k") == "s3://b/k"
    with pytest.raises(BadInputError, match="must not be empty"):
        canonical_prefix("")
    with pytest.raises(BadInputError, match="no path"):
        canonical_prefix("file://")
    assert to_url("/a b.nc") == "file:///a b.nc" and to_url("s3://b/k") == "s3://b/k"


def test_time_range_details() -> None:
    """An END with a time (even an 11-character basic-format one) is taken as given; equal
    START and END are one instant, not refused."""
    assert parse_time_range("2024-01-01/20240101T12") == (datetime(2024, 1, 1), datetime(2024, 1, 1, 12))
    assert parse_time_range("2024-01-01T12:00/2024-01-01T12:00") == (datetime(2024, 1, 1, 12),) * 2


def test_time_range_offsets_are_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert parse_time_range("2024-01-01T06:00/2024-01-01T12:00+02:00") == (
            datetime(2024, 1, 1, 6), datetime(2024, 1, 1, 10))  # fmt: skip
    finally:
        monkeypatch.undo()
        time.tzset()


def test_date_to_cf_keeps_minutes_seconds_and_microseconds() -> None:
    when = datetime(2024, 3, 1, 12, 30, 15, 500000)
    expected = (when - datetime(1978, 1, 1)).total_seconds() / 86400
    assert date_to_cf(when, "days since 1978-01-01") == pytest.approx(expected, rel=0, abs=1e-10)
    assert date_to_cf(when, "seconds since 2024-03-01 12:00:00", "noleap") == pytest.approx(1815.5, rel=0, abs=1e-6)


def test_remap_messages_and_relative_prefixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.chdir(tmp_path)
    assert canonical_prefix("rel/dir/") == os.path.join(str(tmp_path), "rel", "dir") + "/"
    assert canonical_prefix("file://rel") == os.path.join(str(tmp_path), "rel")
    assert canonical_prefix("/a//b/") == "/a/b/"
    with pytest.raises(BadInputError, match=r"^remap prefix: must not be empty$"):
        canonical_prefix("")
    with pytest.raises(BadInputError, match=r"^remap replacement: must not be empty$"):
        remap_one("/d/x", [RemapRule("/d", "")])
    assert remap_one("/d/x", [RemapRule("/d", "file:///mnt")]) == "file:///mnt/x"
    with pytest.raises(BadInputError, match=r"^remap replacement 'file://rel': give a URL"):
        remap_one("/d/x", [RemapRule("/d", "file://rel")])
    assert RemapRule("/d", "s3://b/").to_json() == {"prefix": "/d", "replacement": "s3://b/"}


def test_float32_coordinates_are_compared_in_float64() -> None:
    """A float32 coordinate is compared with the bounds in float64 (as numpy widens it), never
    by rounding the bounds to float32: a value just below a bound stays out."""
    v = np.array([0.1, 10.3, 200.7], np.float32)
    wide = v.astype(np.float64)
    just_above = float(wide[0]) + 1e-10
    assert interval_ranges(v, just_above, 300.0) == [(1, 3)]
    assert interval_ranges(v, -1.0, float(wide[1]) - 1e-10) == [(0, 1)]
    assert lon_ranges(v, just_above, 100.0) == [(1, 2)]
    assert lon_ranges(v, -1.0, float(wide[1]) - 1e-10) == [(0, 1)]


def test_affine_ranges_projected_and_degenerate_grids() -> None:
    """A projected grid wider than 360 units is not shifted by 360 (geographic is opt-in); a
    transform with any rotation term or a zero pixel size is refused."""
    assert affine_ranges([0.0, 1.0, 0.0, 10.0, 0.0, -1.0], 10, 400, (10.0, 0.0, 20.0, 5.0)) == ((5, 10), [(10, 20)])
    for t in ([0.0, 0.0, 0.0, 0.0, 0.0, -1.0], [0.0, 1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.5, -1.0]):
        with pytest.raises(BadInputError, match=r"^--bbox on a rotated or sheared raster grid is not supported$"):
            affine_ranges(t, 4, 4, (0.0, -2.0, 1.0, 0.0))


def test_affine_ranges_across_the_antimeridian_and_the_zero_meridian() -> None:
    """One-unit columns: on a -180..180 grid, a W > E box takes both ends and a 0..360 box is
    shifted onto it; on a 0..360 grid a box across 0 takes both ends; W == E is one column."""
    west = [-180.0, 1.0, 0.0, 1.0, 0.0, -1.0]  # columns at -180..180, 2 rows
    assert affine_ranges(west, 2, 360, (170.0, -1.0, -170.0, 1.0), geographic=True) == ((0, 2), [(0, 10), (350, 360)])
    assert affine_ranges(west, 2, 360, (190.0, -1.0, 200.0, 1.0), geographic=True) == ((0, 2), [(10, 20)])
    assert affine_ranges(west, 2, 360, (15.5, -1.0, 15.5, 1.0), geographic=True) == ((0, 2), [(195, 196)])
    east = [0.0, 1.0, 0.0, 1.0, 0.0, -1.0]  # columns at 0..360
    assert affine_ranges(east, 2, 360, (350.0, -1.0, 10.0, 1.0), geographic=True) == ((0, 2), [(0, 10), (350, 360)])
    assert affine_ranges(east, 2, 360, (-20.0, -1.0, -10.0, 1.0), geographic=True) == ((0, 2), [(340, 350)])


def test_chunk_box_places_the_chunk_in_its_era() -> None:
    layout = EraLayout(axis=0, extent=25, bounds=((0, 10), (10, 25)), chunks=((4, 3), (6, 3)))
    assert layout.chunk_box(1, (2, 1), (25, 7)) == ([22, 3], [25, 6])
    assert layout.chunk_box(0, (2, 2), (25, 7)) == ([8, 6], [10, 7])
    assert layout.chunk_box(1, (0, 0), (25, 7)) == ([10, 0], [16, 3])


def test_canonical_location_and_apply_remap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa

    from refstore.plan.remap import apply_remap, canonical_location

    monkeypatch.chdir(tmp_path)
    assert canonical_location("file:///a/x.nc") == "/a/x.nc"
    assert canonical_location("file://rel/x.nc") == str(tmp_path / "rel" / "x.nc")
    assert canonical_location("rel/x.nc") == str(tmp_path / "rel" / "x.nc")
    assert canonical_location("/a/../x.nc") == "/a/../x.nc"  # absolute: verbatim
    assert canonical_location("s3://b/x.nc") == "s3://b/x.nc"
    rules = [("/d", "https://h/"), ("/e/", "s3://b/")]
    locs = ["/d/a b.nc", "/e/c.nc", "/d/a b.nc", "/f/x.nc"]
    for column in (pa.array(locs), pa.chunked_array([locs[:1], locs[1:]]), pa.array(locs).dictionary_encode()):
        out = apply_remap(column, [RemapRule(p, r) for p, r in rules])
        assert pa.types.is_dictionary(out.type) and len(out.dictionary) == 3
        assert out.to_pylist() == [_model(loc, rules) for loc in locs]
    clash = [RemapRule("/d", "/x"), RemapRule("/e", "file:///x")]
    with pytest.raises(BadInputError, match=r"^remap rules map both /d/a\.nc and /e/a\.nc to /x/a\.nc$"):
        apply_remap(pa.array(["/d/a.nc", "/e/a.nc"]), clash)


def test_remap_keeps_percent_signs_between_literal_locations() -> None:
    import pyarrow as pa

    from refstore.plan.remap import apply_remap

    assert remap_one("/data/a%20b.nc", [RemapRule("/data", "/mnt")]) == "/mnt/a%20b.nc"
    assert remap_one("/data/a%20b.nc", [RemapRule("/data", "s3://b")]) == "s3://b/a%20b.nc"
    empty = apply_remap(pa.array([], pa.string()), [RemapRule("/data", "/mnt")])
    assert len(empty) == 0 and empty.type == pa.dictionary(pa.int32(), pa.string())


def test_era_layout_details() -> None:
    """The axis of recorded eras (even without holes), a first era from index 1, and hole
    positions only where a selected index falls."""
    from refstore.plan.select import Selection

    meta = ArrayMeta("x", ("y", "time"), (3, 8), (3, 2), "<f4", None,
                     eras=({"axis": 1, "start": 0, "stop": 4, "chunks": [3, 2]},
                           {"axis": 1, "start": 4, "stop": 8, "chunks": [3, 4]}))  # fmt: skip
    layout = EraLayout.of(meta)
    assert layout is not None and layout.axis == 1 and layout.bounds == ((0, 4), (4, 8))
    late = EraLayout(axis=0, extent=5, bounds=((1, 5),), chunks=((2,),), holes=((3, 4),))
    parts = late.parts(Selection((0,), (5,), (1,), ()))
    assert [(p.era, p.out, p.local.start, p.local.stop) for p in parts] == [
        (None, slice(0, 1), (0,), (1,)), (0, slice(1, 5), (0,), (4,))]  # fmt: skip
    assert late.hole_positions(Selection((0,), (5,), (1,), ())) == (slice(0, 1), slice(3, 4))
    assert late.hole_positions(Selection((4,), (5,), (1,), ())) == ()
    assert late.hole_positions(Selection((1,), (5,), (2,), ())) == (slice(1, 2),)  # indices 1, 3: 3 is a hole
    from refstore.plan.select import needed_chunks

    assert [a.tolist() for a in needed_chunks(select((slice(0, 10, 4),), (10,)), (2,))] == [[0, 2, 4]]


def test_plan_edge_cases_of_the_placement_loop() -> None:
    t = lambda n: ArrayMeta("time", ("time",), (n,), (1,), "<f8", None)
    flat = ArrayMeta("c", ("y",), (3,), (3,), "<f4", None)
    # a source without the concat dim adds nothing; arrays after a taken-once one are placed
    plan = make_plan([_slab(0, {"c": flat, "x": _meta(2)}), _slab(1, {"c": flat})], "time")
    assert plan.arrays["x"].shape == (2, 3) and plan.arrays["c"].shape == (3,)
    # an array absent from the last source: a trailing hole
    plan = make_plan([_slab(0, {"time": t(2), "x": _meta(2)}), _slab(1, {"time": t(4)})], "time")
    assert plan.arrays["x"].holes == ((2, 6),) and plan.arrays["x"].shape == (6, 3)
    # an unsupported array is recorded as such, whatever the other sources hold; later arrays still checked
    bad = ArrayMeta("x", ("z",), (5,), (5,), "<f4", None, status="unsupported", reason="filter 32017")
    y = _meta(2, name="y")
    plan = make_plan([_slab(0, {"x": bad, "y": y}), _slab(1, {"x": _meta(2), "y": y})], "time")
    assert plan.arrays["x"] is bad and plan.arrays["y"].shape == (4, 3)
    other = ArrayMeta("y", ("time", "z"), (2, 3), (2, 3), "<f4", None)
    with pytest.raises(PlanError, match=r"^array 'y' has dimensions \['time', 'z'\] in s1\.nc but \['time', 'y'\]"):
        make_plan([_slab(0, {"x": _meta(2), "y": _meta(2, name="y")}), _slab(1, {"x": bad, "y": other})], "time")


def test_plan_messages_are_whole() -> None:
    with pytest.raises(PlanError, match=r"^s1\.nc: has no coordinate variable 'time' while other sources do; "
                                        r"cannot order it along the concat dimension \(--order name or --order "
                                        r"given place files by name or as given\)$"):  # fmt: skip
        make_plan([_slab(0, {"x": _meta(2)}), SourceSlab("s1.nc", 1, {"x": _meta(2)})], "time")
    with pytest.raises(PlanError, match=r"^array 'x' is in both s0\.nc and s1\.nc and refstore cannot compare "
                                        r"them \(recorded without a digest: rescan them\); scan with --concat-dim "
                                        r"DIM to place such sources along a dimension$"):  # fmt: skip
        make_plan([_slab(0, {"x": _meta(2)}), _slab(1, {"x": _meta(2)})], None)


def test_plan_three_eras_end_where_the_next_begins() -> None:
    z1, z2 = ({"id": "zlib", "level": 1},), ({"id": "zlib", "level": 2},)
    slabs = [_slab(0, {"x": _meta(2)}), _slab(1, {"x": _meta(4, codecs=z1)}), _slab(2, {"x": _meta(2, codecs=z2)})]
    x = make_plan(slabs, "time").arrays["x"]
    assert [(e["start"], e["stop"]) for e in x.eras] == [(0, 2), (2, 6), (6, 8)]

"""The series order (``plan/series_order.py``) and the concatenation plan's smaller rules
(``plan/concat.py``) against hand-written models of the documented rules: a brute-force model
of ordering, grouping of same-coordinate sources and the overlap refusal; Python's datetime for
the dates shown in refusals; the ``--prefer`` rules read from their docstring. Written for the
mutation run (``./dev mutate plan-core``); pure and fast.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refstore.errors import BadInputError, PlanError
from refstore.plan import SourceSlab
from refstore.plan.series_order import PreferRule, SetAside, order_sources, parse_prefer
from refstore.scan import ArrayMeta

UNIX = "seconds since 1970-01-01"


def _meta(n: int, name: str = "x") -> ArrayMeta:
    return ArrayMeta(name, ("time", "y"), (n, 3), (1, 3), "<f4", None)


def _src(loc: str, order: int, first: float | None, n: int = 1, *, last: float | None = None, units: str | None = "u",
         mtime: int = -1) -> SourceSlab:  # fmt: skip
    return SourceSlab(loc, order, {"x": _meta(n)}, sort_value=first, sort_units=units, sort_last=last, mtime_ns=mtime)


# --------------------------------------------------------------------------- --prefer rules
def test_parse_prefer_reads_each_rule_in_order() -> None:
    assert parse_prefer([]) == ()
    assert parse_prefer(["none"]) == ()
    assert parse_prefer(["newest", " !*_preliminary* ", "a/*.nc", "x"]) == (
        PreferRule(newest=True),
        PreferRule(pattern="*_preliminary*", negate=True),
        PreferRule(pattern="a/*.nc"),
        PreferRule(pattern="x"),
    )
    assert [str(r) for r in parse_prefer(["newest", "!*_p*", "*.nc"])] == ["newest", "!*_p*", "*.nc"]
    with pytest.raises(BadInputError) as e:
        parse_prefer(["newest", "none"])
    assert str(e.value) == "--prefer none clears the rules; give it alone"
    for bad in ("!", "", "  ", " ! "):
        with pytest.raises(BadInputError) as e:
            parse_prefer(["newest", bad])
        assert str(e.value) == f"--prefer {bad!r}: give 'newest' or a file-name glob such as '!*_preliminary*'"


def test_prefer_rules_keep_as_documented() -> None:
    a = _src("/d/a_final.nc", 0, 1.0, mtime=5)
    b = _src("/d/b_preliminary.nc", 1, 1.0, mtime=9)
    c = _src("/e/c_preliminary.nc/", 2, 1.0, mtime=9)  # a trailing slash: its name is the last component
    assert PreferRule(newest=True).keep([a, b, c]) == [b, c]  # ties kept: the next rule decides
    assert PreferRule(newest=True).keep([a, b]) == [b]
    assert PreferRule(newest=True).keep([a, _src("/d/u.nc", 3, 1.0)]) == [a, _src("/d/u.nc", 3, 1.0)]  # unknown time
    assert PreferRule(newest=True).keep([_src("/d/z.nc", 4, 1.0, mtime=0), a]) == [a]  # 0 is a known time
    assert PreferRule(newest=True).keep([_src("/d/z.nc", 4, 1.0, mtime=0)]) == [_src("/d/z.nc", 4, 1.0, mtime=0)]
    assert PreferRule(pattern="*_preliminary*").keep([a, b, c]) == [b, c]
    assert PreferRule(pattern="*_preliminary*", negate=True).keep([a, b, c]) == [a]
    assert PreferRule(pattern="c_*").keep([a, b, c]) == [c]
    assert PreferRule(pattern="*_PRELIMINARY*").keep([a, b, c]) == []  # case-sensitive
    # a pattern with '/' is matched against the whole location, else against the file name
    assert PreferRule(pattern="/d/*").keep([a, b, c]) == [a, b]
    assert PreferRule(pattern="d/*").keep([a, b, c]) == []
    assert PreferRule(pattern="a_final.nc").keep([a, b]) == [a]
    x = _src("/d/x_X", 6, 1.0)  # a name ending in the letter X: only '/' is stripped from the right
    assert PreferRule(pattern="*_X").keep([a, x]) == [x]
    ya = _src("x/ya_final.nc", 5, 1.0)
    assert PreferRule(pattern="*a_final.nc").keep([a, ya]) == [a, ya]


# --------------------------------------------------------------------------- the brute-force model
Model = tuple[list[str], list[tuple[str, str, str]]] | str
"""Placed locations and set-aside ``(location, kept, rule)``, or the refusal ``kind:a:b``."""


def _model(sources: list[SourceSlab], prefer: tuple[PreferRule, ...]) -> Model:
    """The documented rules, one at a time: sorted by (first value, given order); runs of
    sources with equal (first, last, extent) are one coordinate: a rule decides when it keeps
    some but not all candidates; then any two placed closed ranges meeting are refused."""

    def extent(s: SourceSlab) -> int:
        return s.arrays["x"].shape[0]

    def last(s: SourceSlab) -> float | None:
        return s.sort_last if s.sort_last is not None else (s.sort_value if extent(s) == 1 else None)

    ordered = sorted(sources, key=lambda s: (s.sort_value, s.order))
    placed: list[SourceSlab] = []
    aside: list[tuple[str, str, str]] = []
    for _, grp in itertools.groupby(ordered, key=lambda s: (s.sort_value, last(s), extent(s))):
        group = list(grp)
        cands, rule = group, ""
        for r in prefer:
            if len(cands) == 1:
                break
            kept = [s for s in cands if s in r.keep(cands)]
            if 0 < len(kept) < len(cands):
                cands, rule = kept, str(r)
        if len(cands) > 1:
            return f"same:{cands[0].location}:{cands[1].location}"
        placed.append(cands[0])
        aside += [(s.location, cands[0].location, rule) for s in group if s is not cands[0]]
    spans = []
    for s in placed:
        v = s.sort_value
        assert v is not None
        w = last(s)
        lo, hi = (v, v) if w is None else (min(v, w), max(v, w))
        spans.append((lo, hi))
    for j, (lo, _hi) in enumerate(spans):
        before = spans[:j]
        if before and lo <= max(h for _, h in before):
            top = max(h for _, h in before)
            reach = next(k for k, (_, h) in enumerate(before) if h == top)
            return f"overlap:{placed[reach].location}:{placed[j].location}"
    return [s.location for s in placed], aside


source_st = st.tuples(
    st.integers(0, 6),  # first value
    st.sampled_from([None, 0, 1, 3]),  # last - first (None: unknown)
    st.sampled_from([1, 2]),  # extent
    st.integers(-1, 3),  # mtime
    st.booleans(),  # a '_preliminary' name
)


@settings(max_examples=200, deadline=None)
@given(specs=st.lists(source_st, min_size=1, max_size=6), rules=st.lists(
    st.sampled_from(["newest", "!*_p.nc", "*_p.nc", "*.nc"]), max_size=2, unique=True),
    perm=st.randoms(use_true_random=False))  # fmt: skip
def test_order_sources_equals_the_model(specs: list[tuple[Any, ...]], rules: list[str], perm: Any) -> None:
    sources = [
        _src(f"s{i}{'_p' if p else ''}.nc", i, float(v), n, last=None if d is None else float(v + d), mtime=m)
        for i, (v, d, n, m, p) in enumerate(specs)
    ]
    given_order = list(sources)
    perm.shuffle(given_order)  # the list's order is not the given order: ``order`` is
    prefer = parse_prefer(rules)
    want = _model(sources, prefer)
    if isinstance(want, str):
        kind, a, b = want.split(":")
        with pytest.raises(PlanError) as e:
            order_sources(given_order, "time", prefer=prefer)
        msg = str(e.value)
        assert msg.startswith(f"{a} and {b} have the same 'time' coordinate" if kind == "same" else f"{a} (")
        if kind == "overlap":
            assert f") and {b} (" in msg and msg.endswith("overlap along 'time' without being the same; they cannot "
                                                          "be placed end to end (remove one of them)")  # fmt: skip
        return
    got = order_sources(given_order, "time", prefer=prefer)
    assert [s.location for s in got.sources] == want[0]
    assert [(x.location, x.kept, x.rule) for x in got.set_aside] == want[1]
    assert got.by == "coordinate"


def test_order_without_a_concat_dim_or_coordinates_is_the_given_one() -> None:
    srcs = [_src("b", 1, 2.0), _src("a", 0, 5.0), _src("c", 2, 1.0)]
    got = order_sources(srcs, None)
    assert [s.location for s in got.sources] == ["a", "b", "c"] and got.by is None and got.set_aside == ()
    bare = [_src("b", 1, None), _src("a", 0, None)]
    got = order_sources(bare, "time")
    assert [s.location for s in got.sources] == ["a", "b"] and got.by == "given" and got.set_aside == ()
    with pytest.raises(PlanError) as e:
        order_sources([_src("b", 1, 2.0), _src("a", 0, None), _src("c", 2, None)], "time")
    assert str(e.value) == ("a: has no coordinate variable 'time' while other sources do; "
                            "cannot order it along the concat dimension (--order name or --order given place "
                            "files by name or as given)")  # fmt: skip
    with pytest.raises(PlanError) as e:
        order_sources([_src("a", 0, 1.0, units="u"), _src("b", 1, 2.0, units="u"), _src("c", 2, 3.0, units="v"),
                       _src("d", 3, 4.0, units="w")], "time")  # fmt: skip
    assert str(e.value) == "c: coordinate 'time' has units 'v', but a has 'u'; they cannot be ordered together"
    with pytest.raises(PlanError, match=r"^b: coordinate 'time' has units None, but a has 'u'"):
        order_sources([_src("a", 0, 1.0), _src("b", 1, 2.0, units=None)], "time")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def test_refusals_show_unix_seconds_as_dates_and_other_units_as_numbers() -> None:
    day = 86400.0
    t0 = datetime(2024, 1, 2, tzinfo=UTC).timestamp()
    assert _iso(t0) == "2024-01-02T00:00:00Z"  # Python's own date arithmetic: the oracle
    same = [_src("a.nc", 0, t0, units=UNIX), _src("b.nc", 1, t0, units=UNIX)]
    with pytest.raises(PlanError) as e:
        order_sources(same, "time")
    assert str(e.value) == (
        "a.nc and b.nc have the same 'time' coordinate (2024-01-02T00:00:00Z) and nothing along 'time' tells "
        "them apart; if they are different steps, give their order with --order-by VAR (a variable along 'time'), "
        "--order name or --order given; if one replaces the other (same data), choose it with --prefer GLOB "
        "(e.g. --prefer '!*_preliminary*') or --prefer newest"
    )
    with pytest.raises(PlanError) as e:
        order_sources(same, "time", prefer=parse_prefer(["newest", "*.nc"]))
    assert str(e.value) == ("a.nc and b.nc have the same 'time' coordinate (2024-01-02T00:00:00Z) and --prefer newest "
                            "--prefer *.nc does not choose between them")  # fmt: skip
    with pytest.raises(PlanError) as e:
        order_sources([_src("a.nc", 0, 2.5, units="days since 2000-01-01"), _src("b.nc", 1, 2.5,
                       units="days since 2000-01-01")], "time")  # fmt: skip
    assert str(e.value).startswith("a.nc and b.nc have the same 'time' coordinate (2.5 days since 2000-01-01) and ")
    with pytest.raises(PlanError, match=r"^a\.nc and b\.nc have the same 'time' coordinate \(0\) and nothing"):
        order_sources([_src("a.nc", 0, 0.0, units=None), _src("b.nc", 1, 0.0, units=None)], "time")
    # a value no date holds: shown as a number with its units
    with pytest.raises(PlanError, match=r"coordinate \(1e\+300 seconds since 1970-01-01\) and nothing"):
        order_sources([_src("a.nc", 0, 1e300, units=UNIX), _src("b.nc", 1, 1e300, units=UNIX)], "time")
    # an overlap: both ranges shown
    lo = [_src("a.nc", 0, t0, 2, last=t0 + day, units=UNIX), _src("b.nc", 1, t0 + day, 1, units=UNIX)]
    with pytest.raises(PlanError) as e:
        order_sources(lo, "time")
    assert str(e.value) == (
        f"a.nc ({_iso(t0)} to {_iso(t0 + day)}) and b.nc ({_iso(t0 + day)} to {_iso(t0 + day)}) overlap along "
        "'time' without being the same; they cannot be placed end to end (remove one of them)"
    )


def test_same_coordinate_sources_are_set_aside_by_the_deciding_rule() -> None:
    a = _src("/d/x.nc", 0, 1.0, mtime=3)
    b = _src("/d/x_preliminary.nc", 1, 1.0, mtime=7)
    c = _src("/d/y.nc", 2, 2.0)
    got = order_sources([c, b, a], "time", prefer=parse_prefer(["*.nc", "!*_preliminary*", "newest"]))
    assert [s.location for s in got.sources] == ["/d/x.nc", "/d/y.nc"]
    assert got.set_aside == (SetAside("/d/x_preliminary.nc", "/d/x.nc", "!*_preliminary*"),)
    got = order_sources([a, b, c], "time", prefer=parse_prefer(["newest"]))
    assert got.set_aside == (SetAside("/d/x.nc", "/d/x_preliminary.nc", "newest"),)
    # three at one coordinate: the first rule narrows to two, the second decides; both set aside for it
    d = _src("/d/x_v2.nc", 3, 1.0, mtime=7)
    got = order_sources([a, b, d], "time", prefer=parse_prefer(["newest", "!*_preliminary*"]))
    assert [s.location for s in got.sources] == ["/d/x_v2.nc"]
    assert got.set_aside == (SetAside("/d/x.nc", "/d/x_v2.nc", "!*_preliminary*"),
                             SetAside("/d/x_preliminary.nc", "/d/x_v2.nc", "!*_preliminary*"))  # fmt: skip


def test_last_values_decide_sameness_and_overlap() -> None:
    """Equal first values with different last values or extents are not the same coordinate
    (refused as an overlap); a one-element source's last value is its first; a longer one with
    no last value recorded spans its first value alone (never refused on a guess)."""
    with pytest.raises(PlanError, match=r"^a \(0 u to 2 u\) and b \(0 u to 1 u\) overlap along 'time'"):
        order_sources([_src("a", 0, 0.0, 3, last=2.0), _src("b", 1, 0.0, 3, last=1.0)], "time")
    with pytest.raises(PlanError, match=r"^a \(0 u to 0 u\) and b \(0 u to 0 u\) overlap"):
        order_sources([_src("a", 0, 0.0, 2), _src("b", 1, 0.0, 3)], "time")  # unknown last, extents differ
    got = order_sources([_src("a", 0, 0.0, 4), _src("b", 1, 1.0, 2)], "time")  # a's end unknown: b after it
    assert [s.location for s in got.sources] == ["a", "b"]
    with pytest.raises(PlanError, match=r"^a \(0 u to 1 u\) and b \(1 u to 1 u\) overlap"):
        order_sources([_src("a", 0, 0.0, 1, last=1.0), _src("b", 1, 1.0)], "time")  # closed ranges meet
    # a descending coordinate: the range is (min, max); ordered by the first value, b comes first
    with pytest.raises(PlanError, match=r"^b \(-1 u to -1 u\) and a \(-3 u to 0 u\) overlap"):
        order_sources([_src("a", 0, 0.0, 4, last=-3.0), _src("b", 1, -1.0)], "time")
    # the furthest-reaching source is named, not the last one placed
    with pytest.raises(PlanError, match=r"^a \(0 u to 10 u\) and c \(5 u to 5 u\) overlap"):
        order_sources([_src("a", 0, 0.0, 5, last=10.0), _src("b", 1, 10.0 + 1, 1), _src("c", 2, 5.0)], "time")


# --------------------------------------------------------------------------- concat.py
def test_a_concat_dim_no_array_has_is_refused_naming_the_first_source() -> None:
    from refstore.plan import make_plan

    def flat(name: str, dims: tuple[str, ...]) -> ArrayMeta:
        return ArrayMeta(name, dims, (2,) * len(dims), (2,) * len(dims), "<f4", None)

    one = [SourceSlab("b.nc", 1, {"v": flat("v", ("y", "x"))})]
    with pytest.raises(PlanError) as e:
        make_plan(one, "time")
    assert str(e.value) == "--concat-dim time: no array in b.nc has a dimension 'time' (dimensions there: x, y)"
    three = [SourceSlab("c.nc", 2, {"w": flat("w", ("z",))}), *one, SourceSlab("a.nc", 0, {"s": flat("s", ())})]
    with pytest.raises(PlanError) as e:
        make_plan(three, "time")
    assert str(e.value) == ("--concat-dim time: no array in a.nc or the 2 other sources has a dimension 'time' "
                            "(dimensions there: x, y, z)")  # fmt: skip
    with pytest.raises(PlanError) as e:
        make_plan([SourceSlab("a.nc", 0, {"s": flat("s", ())}), SourceSlab("b.nc", 1, {})], "time")
    assert str(e.value) == ("--concat-dim time: no array in a.nc or the 1 other sources has a dimension 'time' "
                            "(dimensions there: none)")  # fmt: skip
    # one source holding the dim is enough, whichever it is
    ok = make_plan([*three, SourceSlab("d.nc", 3, {"t": flat("t", ("time",))})], "time")
    assert ok.arrays["t"].shape == (2,)
    empty = make_plan([], "time")
    assert empty.order == () and empty.arrays == {} and empty.ordered_by == "given"


def test_eras_record_each_eras_own_metadata() -> None:
    """Three holders: the second changes fill and attributes (a new era), the third its chunks.
    Every era's record, key by key, from the holder that starts it; the last source of each."""
    from refstore.plan import make_plan

    def m(n: int, chunk: int, fill: Any, attrs: dict[str, Any]) -> ArrayMeta:
        return ArrayMeta("x", ("time", "y"), (n, 3), (chunk, 3), "<i2", fill, ({"id": "zlib", "level": 1},), attrs)

    sf = {"scale_factor": {"type": "<f8", "value": 0.5}}
    slabs = [
        SourceSlab("a.nc", 0, {"x": m(4, 2, -1, {})}, sort_value=0.0, sort_units="u"),
        SourceSlab("b.nc", 1, {"x": m(2, 2, -9, sf)}, sort_value=4.0, sort_units="u"),
        SourceSlab("c.nc", 2, {"x": m(2, 2, -9, sf)}, sort_value=6.0, sort_units="u"),
        SourceSlab("d.nc", 3, {"x": m(3, 3, -9, sf)}, sort_value=8.0, sort_units="u"),
    ]
    x = make_plan(slabs, "time").arrays["x"]
    base = {"axis": 0, "dtype": "<i2", "codecs": [{"id": "zlib", "level": 1}]}
    assert list(x.eras) == [
        {"index": 0, "start": 0, "stop": 4, "first_source": "a.nc", "last_source": "a.nc", "chunks": [2, 3],
         "fill_value": -1, "attrs": {}, **base},
        {"index": 1, "start": 4, "stop": 8, "first_source": "b.nc", "last_source": "c.nc", "chunks": [2, 3],
         "fill_value": -9, "attrs": sf, **base},
        {"index": 2, "start": 8, "stop": 11, "first_source": "d.nc", "last_source": "d.nc", "chunks": [3, 3],
         "fill_value": -9, "attrs": sf, **base},
    ]  # fmt: skip
    assert x.shape == (11, 3) and x.holes == () and x.edges == ()


def test_a_rectilinear_era_records_its_edges_and_keys() -> None:
    """Era 0: sources of 3 and 2 steps (chunk 2): the second starts off the grid, so its chunks
    are 2, 1, 2 (the union of the slabs' chunk edges); era 1 (other codecs) starts at 5 on its
    own regular grid; keys count chunks."""
    from refstore.plan import make_plan

    def m(n: int, codecs: tuple[dict[str, Any], ...]) -> ArrayMeta:
        return ArrayMeta("x", ("time",), (n,), (2,), "<f4", None, codecs)

    z = ({"id": "zlib", "level": 1},)
    slabs = [SourceSlab(f"s{i}.nc", i, {"x": m(n, c)}, sort_value=float(i), sort_units="u")
             for i, (n, c) in enumerate([(3, ()), (2, ()), (4, z), (2, z)])]  # fmt: skip
    plan = make_plan(slabs, "time")
    x = plan.arrays["x"]
    assert [(e["start"], e["stop"], "edges" in e) for e in x.eras] == [(0, 5, True), (5, 11, False)]
    assert x.era_meta(x.eras[0]).edges == ((2, 1, 2),) and x.era_meta(x.eras[1]).edges == ()
    assert x.edges == ()  # several eras: the edges are the eras'
    assert [plan.keys[(f"s{i}.nc", "x")] for i in range(4)] == [(0, (0,)), (0, (2,)), (1, (0,)), (1, (2,))]
    assert all(type(b) is int for _, base in plan.keys.values() for b in base)  # chunk keys: ints, not floats
    assert [plan.view[(f"s{i}.nc", "x")] for i in range(4)] == [(0, (0,)), (0, (3,)), (1, (0,)), (1, (4,))]


# --------------------------------------------------------------------------- region.py
def test_dates_in_the_julian_gregorian_gap_per_calendar() -> None:
    """1582-10-10 lies in the days the mixed Julian/Gregorian ("standard", the default) calendar
    skips: refused there, naming the calendar; proleptic Gregorian (Python's own datetime: the
    oracle) and Julian count it 9 days after 1582-10-01."""
    from datetime import datetime as dt

    from refstore.plan.region import date_to_cf

    when = dt(1582, 10, 10)
    assert (when - dt(1582, 10, 1)).days == 9
    for cal in ("proleptic_gregorian", "julian"):
        assert date_to_cf(when, "days since 1582-10-01", cal) == 9.0
    with pytest.raises(
        BadInputError, match=r"^cannot place 1582-10-10T00:00:00 on 'days since 1582-10-01' \(standard\): "
    ):
        date_to_cf(when, "days since 1582-10-01")
    with pytest.raises(BadInputError, match=r"^cannot place 1582-10-10T00:00:00 on 'days since 1582-10-01' \(\): "):
        date_to_cf(when, "days since 1582-10-01", "")  # an empty calendar is the standard one


def test_time_range_reads_utc_designators() -> None:
    from datetime import datetime as dt

    from refstore.plan.region import parse_time_range

    assert parse_time_range("2024-01-01T00:00Z/2024-01-02T06:00+06:00") == (dt(2024, 1, 1), dt(2024, 1, 2))
    # a Z after a date alone (Python's fromisoformat refuses it there) is read as UTC midnight
    assert parse_time_range("2024-01-01Z/2024-01-02") == (dt(2024, 1, 1), dt(2024, 1, 2, 23, 59, 59, 999999))
    with pytest.raises(BadInputError, match=r"START and END must be ISO dates"):
        parse_time_range("2024-01-01T00:00z/2024-01-02")  # lower-case: not ISO 8601's designator


def test_remap_prefixes_are_normalised_like_posix_paths() -> None:
    import os

    from refstore.plan.remap import canonical_prefix

    for p in ("/data/./x/../y", "/a//b", "/a/b/.", "///a", "/a/b/../"):
        want = os.path.normpath(p)
        assert canonical_prefix(p) == (want + "/" if p.endswith("/") and not want.endswith("/") else want), p
    assert canonical_prefix("//") == "/" and canonical_prefix("/") == "/" and canonical_prefix("//a") == "//a"


@pytest.mark.parametrize(("step", "n"), [(0.1, 3600), (1 / 3, 1080), (0.7, 514)])
@pytest.mark.parametrize("origin", [0.0, -180.0])
def test_a_box_between_two_grid_longitudes_selects_them_and_those_between(step: float, n: int, origin: float) -> None:
    """Edges taken from the grid itself (as a user picks them): every window of nine longitudes,
    in either convention, and across 180 or 0 degrees; a box exactly 360 degrees wide is the
    whole circle."""
    import numpy as np

    from refstore.plan.region import lon_ranges

    v = origin + np.arange(n) * step
    got = [lon_ranges(v, float(v[i]), float(v[i + 8])) for i in range(n - 8)]
    assert got == [[(i, i + 9)] for i in range(n - 8)]
    for west in (-180.0, 0.0, 17.5):
        assert lon_ranges(v, west, west + 360.0) == [(0, n)]


def test_a_whole_circle_box_on_a_0_360_grid_is_one_column_range() -> None:
    """-180..180 on a 0..360 grid of 1-degree pixels: found as 0..180 (unshifted) and 180..360
    (shifted by 360), which meet: every column once, as one range."""
    from refstore.plan.region import affine_ranges

    t = [0.0, 1.0, 0.0, 90.0, 0.0, -1.0]
    assert affine_ranges(t, 180, 360, (-180.0, -10.0, 180.0, 10.0), geographic=True) == ((80, 100), [(0, 360)])
    assert affine_ranges(t, 180, 360, (-90.0, -10.0, 90.0, 10.0), geographic=True) == ((80, 100), [(0, 90), (270, 360)])


def test_make_plan_applies_prefer_and_records_what_it_set_aside() -> None:
    from refstore.plan import make_plan

    srcs = [_src("/d/x_p.nc", 0, 1.0, 2), _src("/d/x.nc", 1, 1.0, 2), _src("/d/y.nc", 2, 3.0, 2)]
    plan = make_plan(srcs, "time", prefer=parse_prefer(["!*_p.nc"]))
    assert plan.concat_dim == "time" and plan.ordered_by == "coordinate"
    assert plan.order == ("/d/x.nc", "/d/y.nc")
    assert plan.set_aside == (SetAside("/d/x_p.nc", "/d/x.nc", "!*_p.nc"),)
    assert plan.placements == {("/d/x.nc", "x"): (0, 0), ("/d/y.nc", "x"): (2, 0)}
    with pytest.raises(PlanError, match=r"^/d/x_p\.nc and /d/x\.nc have the same 'time' coordinate \(1 u\) and "):
        make_plan(srcs, "time")
    assert make_plan(srcs[2:], None).concat_dim is None


# --------------------------------------------------------------------------- eras.py
def test_parts_cut_a_stepped_selection_at_the_era_bounds() -> None:
    """Eras [2, 6) and [6, 10) (fill before 2); indices 0, 3, 6, 9 (step 3): index 0 before the
    first era, 3 in era 0 (local 1), 6 and 9 in era 1 (local 0 and 3). Each local box keeps the
    other axes and no dropped axis (the caller drops)."""
    from refstore.plan import Selection
    from refstore.plan.eras import EraLayout, Part

    lay = EraLayout(axis=0, extent=10, bounds=((2, 6), (6, 10)), chunks=((2, 4), (3, 4)))
    sel = Selection((0, 1), (10, 3), (3, 1), (1,))
    want = (
        Part(None, slice(0, 1), Selection((0, 1), (2, 3), (3, 1), ())),
        Part(0, slice(1, 2), Selection((1, 1), (4, 3), (3, 1), ())),
        Part(1, slice(2, 4), Selection((0, 1), (4, 3), (3, 1), ())),
    )
    got = lay.parts(sel)
    assert got == want
    assert [p.local.shape for p in got] == [(1, 2), (1, 2), (2, 2)]
    assert lay.hole_positions(sel) == (slice(0, 1),)
    flush = EraLayout(axis=0, extent=10, bounds=((0, 6), (6, 10)), chunks=((2, 4), (3, 4)), holes=((6, 7),))
    assert [p.era for p in flush.parts(sel)] == [0, 1] and flush.hole_positions(sel) == (slice(2, 3),)


def test_an_array_unsupported_in_a_later_source_is_recorded_as_such() -> None:
    """Supported in the first source, not in the second: the array is the unsupported record,
    placed nowhere; an array taken once sits at era 0, offset and key 0."""
    from refstore.plan import make_plan

    bad = ArrayMeta("x", ("time", "y"), (2, 3), (1, 3), "<f4", None, status="unsupported", reason="filter 32017")
    flat = ArrayMeta("c", ("y",), (3,), (3,), "<f4", None)
    srcs = [SourceSlab("a.nc", 0, {"x": _meta(2), "c": flat}, sort_value=0.0, sort_units="u"),
            SourceSlab("b.nc", 1, {"x": bad, "c": flat}, sort_value=2.0, sort_units="u")]  # fmt: skip
    plan = make_plan(srcs, "time")
    assert plan.arrays["x"] is bad
    assert not any(k[1] == "x" for k in (*plan.placements, *plan.view, *plan.keys))
    assert plan.arrays["c"] is flat
    assert plan.placements[("a.nc", "c")] == (0,) and plan.view[("a.nc", "c")] == (0, (0,))
    assert plan.keys == {("a.nc", "c"): (0, (0,))}


def test_a_first_holder_one_step_off_its_grid_is_an_era_from_1() -> None:
    """The first source (one step) lacks the array; the second holds it with chunk 2: the
    array's one era starts at 1 (recorded), the step before it is fill."""
    from refstore.plan import make_plan

    def t(n: int) -> ArrayMeta:
        return ArrayMeta("time", ("time",), (n,), (1,), "<f8", None)

    srcs = [SourceSlab("a.nc", 0, {"time": t(1)}, sort_value=0.0, sort_units="u"),
            SourceSlab("b.nc", 1, {"time": t(4), "x": ArrayMeta("x", ("time",), (4,), (2,), "<f4", None)},
                       sort_value=1.0, sort_units="u")]  # fmt: skip
    plan = make_plan(srcs, "time")
    x = plan.arrays["x"]
    assert [(e["start"], e["stop"], e["first_source"]) for e in x.eras] == [(1, 5, "b.nc")]
    assert x.shape == (5,) and x.holes == ((0, 1),) and plan.keys[("b.nc", "x")] == (0, (0,))

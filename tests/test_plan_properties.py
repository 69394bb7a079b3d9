"""Property tests for the pure planning code: coalescing, selections, placement."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refstore.plan import SourceSlab, chunk_slices, coalesce, make_plan, select
from refstore.plan.select import needed_chunks
from refstore.scan import ArrayMeta

ranges = st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 500)), min_size=0, max_size=60)


@settings(max_examples=300, deadline=None)
@given(ranges, st.integers(0, 2_000), st.integers(1, 5_000))
def test_coalesce_covers_each_range_once_within_limits(rs, max_gap, max_bytes) -> None:
    off = np.array([r[0] for r in rs], np.int64)
    ln = np.array([r[1] for r in rs], np.int64)
    runs = coalesce(off, ln, max_gap=max_gap, max_bytes=max_bytes)
    assert len(runs.run) == len(rs)
    for i in range(len(rs)):  # every requested byte lies inside the read holding it
        r = runs.run[i]
        assert runs.start[r] <= off[i] and off[i] + ln[i] <= runs.end[r]
    for r in range(len(runs.start)):  # a merged read never exceeds the cap unless it is one range
        members = np.flatnonzero(runs.run == r)
        assert len(members) >= 1
        if len(members) > 1:
            assert runs.end[r] - runs.start[r] <= max_bytes
        # no gap inside a read larger than allowed: the members' union leaves no hole > max_gap
        spans = sorted((int(off[m]), int(off[m] + ln[m])) for m in members)
        reach = spans[0][1]
        for a, b in spans[1:]:
            assert a - reach <= max_gap
            reach = max(reach, b)
        assert reach == runs.end[r] and spans[0][0] == runs.start[r]
    # with gap 0 nothing is fetched that was not asked for
    if max_gap == 0:
        asked = set()
        for o, n in zip(off.tolist(), ln.tolist(), strict=False):
            asked.update(range(o, o + n))
        fetched = set()
        for a, b in zip(runs.start.tolist(), runs.end.tolist(), strict=False):
            fetched.update(range(a, b))
        assert fetched == asked


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=3000), st.data())
def test_slices_of_merged_reads_equal_separate_reads(blob, data) -> None:
    n = data.draw(st.integers(1, 30))
    off = np.array([data.draw(st.integers(0, len(blob) - 1)) for _ in range(n)], np.int64)
    ln = np.array([data.draw(st.integers(1, len(blob) - int(o))) for o in off], np.int64)
    runs = coalesce(off, ln, max_gap=data.draw(st.integers(0, 100)), max_bytes=data.draw(st.integers(1, 4000)))
    reads = [blob[s:e] for s, e in zip(runs.start, runs.end, strict=False)]
    for i in range(n):
        r = runs.run[i]
        lo = off[i] - runs.start[r]
        assert reads[r][lo : lo + ln[i]] == blob[off[i] : off[i] + ln[i]]


def test_gap_zero_merges_only_adjacent() -> None:
    runs = coalesce(np.array([0, 10, 30]), np.array([10, 10, 10]), max_gap=0)
    assert runs.start.tolist() == [0, 30] and runs.end.tolist() == [20, 40]


shapes = st.lists(st.integers(1, 40), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(shapes, st.data())
def test_chunk_slices_place_every_selected_element_once(shape, data) -> None:
    chunks = [data.draw(st.integers(1, s + 3)) for s in shape]
    key = []
    for n in shape:
        a = data.draw(st.integers(0, n - 1))
        b = data.draw(st.integers(a + 1, n))
        key.append(slice(a, b, data.draw(st.integers(1, 4))))
    sel = select(tuple(key), tuple(shape))
    ranges = sel.chunk_ranges(tuple(chunks))
    assert ranges is not None
    grids = np.meshgrid(*[np.arange(lo, hi + 1) for lo, hi in ranges], indexing="ij")
    keys = np.stack([g.ravel() for g in grids], axis=1)
    need = needed_chunks(sel, tuple(chunks))
    keys = keys[np.all([np.isin(keys[:, i], need[i]) for i in range(len(shape))], axis=0)]
    s_lo, s_hi, d_lo, d_hi = chunk_slices(keys, tuple(chunks), tuple(shape), sel)
    full = np.arange(int(np.prod(shape))).reshape(shape)
    out = np.full(sel.shape, -1)
    count = np.zeros(sel.shape, int)
    for i, k in enumerate(keys):
        origin = np.asarray(k) * chunks
        chunk = full[tuple(slice(int(o), int(o + c)) for o, c in zip(origin, chunks, strict=False))]
        dst = tuple(slice(int(a), int(b)) for a, b in zip(d_lo[i], d_hi[i], strict=False))
        src = tuple(slice(int(a), int(b), s) for a, b, s in zip(s_lo[i], s_hi[i], sel.step, strict=False))
        out[dst] = chunk[src]
        count[dst] += 1
    assert (count == 1).all()  # every selected element comes from exactly one needed chunk
    assert np.array_equal(out, full[tuple(key)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.integers(1, 4))
def test_placement_formula_is_chunk_aligned(extents, chunk) -> None:
    extents = [e * chunk for e in extents[:-1]] + [extents[-1]]  # all but the last aligned
    slabs = []
    for i, n in enumerate(extents):
        m = ArrayMeta("x", ("time", "y"), (n, 3), (chunk, 3), "<f4", None)
        t = ArrayMeta("time", ("time",), (n,), (1,), "<f8", None)
        slabs.append(SourceSlab(f"s{i}", i, {"x": m, "time": t}, sort_value=float(i), sort_units="u"))
    plan = make_plan(slabs, "time")
    assert plan.arrays["x"].shape == (sum(extents), 3)
    start = 0
    for i, n in enumerate(extents):
        dest = plan.placements[(f"s{i}", "x")]
        assert dest == (start, 0) and dest[0] % chunk == 0
        start += n


def test_misaligned_extent_gives_a_rectilinear_grid_keyed_one_to_one() -> None:
    m = lambda n: ArrayMeta("x", ("time",), (n,), (2,), "<f4", None)
    slabs = [SourceSlab("a.nc", 0, {"x": m(3)}, 0.0, "u"), SourceSlab("b.nc", 1, {"x": m(2)}, 1.0, "u")]
    plan = make_plan(slabs, "time")
    assert plan.arrays["x"].edges == ((2, 1, 2),)
    assert plan.keys[("b.nc", "x")] == (0, (2,))


def test_select_handles_ints_negatives_steps_and_ellipsis() -> None:
    sel = select((-1, ..., slice(None, None, 2)), (4, 5, 6))
    assert sel.start == (3, 0, 0) and sel.stop == (4, 5, 6) and sel.step == (1, 1, 2) and sel.drop == (0,)
    assert sel.shape == (5, 3)


def test_zero_step_is_bad_input() -> None:
    from refstore.errors import BadInputError

    with pytest.raises(BadInputError, match="step cannot be zero"):
        select((slice(None, None, 0),), (5,))

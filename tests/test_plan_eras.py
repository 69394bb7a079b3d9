"""Era windows (``plan/eras.py``) against brute force: every selected index in exactly one part,
at its place in the result, in its era's own coordinates; holes exactly where no source is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from refstore.plan.eras import EraLayout
from refstore.plan.select import Selection


@st.composite
def layouts(draw: st.DrawFn) -> tuple[EraLayout, Selection]:
    extent = draw(st.integers(1, 40))
    cuts = sorted(set(draw(st.lists(st.integers(0, extent - 1), min_size=1, max_size=5))))
    bounds = tuple(zip(cuts, [*cuts[1:], extent], strict=True))
    holes = []
    for lo, hi in sorted({tuple(sorted(draw(st.tuples(st.integers(0, extent), st.integers(0, extent)))))
                          for _ in range(draw(st.integers(0, 3)))}):  # fmt: skip
        if lo < hi and (not holes or lo > holes[-1][1]):
            holes.append((lo, hi))
    chunks = tuple((draw(st.integers(1, 4)), 2) for _ in bounds)
    layout = EraLayout(axis=1, extent=extent, bounds=bounds, chunks=chunks, holes=tuple(holes))
    a = draw(st.integers(0, extent))
    b = draw(st.integers(a, extent))
    sel = Selection((0, a), (2, b), (1, draw(st.integers(1, 5))), ())
    return layout, sel


@given(layouts())
def test_parts_cover_each_selected_index_once(case: tuple[EraLayout, Selection]) -> None:
    layout, sel = case
    selected = list(range(sel.start[1], sel.stop[1], sel.step[1]))
    seen: list[tuple[int, int]] = []  # (result position, global index)
    for part in layout.parts(sel):
        origin = 0 if part.era is None else layout.bounds[part.era][0]
        local = range(part.local.start[1], part.local.stop[1], part.local.step[1])
        assert len(local) == part.out.stop - part.out.start > 0
        for j, i in zip(range(part.out.start, part.out.stop), local, strict=True):
            g = i + origin
            if part.era is None:
                assert g < layout.bounds[0][0]
            else:
                assert layout.bounds[part.era][0] <= g < layout.bounds[part.era][1]
            seen.append((j, g))
        assert part.local.start[0] == 0 and part.local.stop[0] == 2  # other axes untouched
    assert sorted(seen) == list(enumerate(selected))


@given(layouts())
def test_hole_positions_are_where_no_source_is(case: tuple[EraLayout, Selection]) -> None:
    layout, sel = case
    selected = list(range(sel.start[1], sel.stop[1], sel.step[1]))
    missing = [(0, layout.bounds[0][0]), *layout.holes]
    want = [j for j, i in enumerate(selected) if any(lo <= i < hi for lo, hi in missing)]
    got = sorted({j for s in layout.hole_positions(sel) for j in range(s.start, s.stop)})
    assert got == want


@given(layouts(), st.integers(0, 20))
def test_chunk_box_and_local_boxes_agree(case: tuple[EraLayout, Selection], k: int) -> None:
    layout, _ = case
    for era, (lo_e, hi_e) in enumerate(layout.bounds):
        c = layout.chunks[era][1]
        if lo_e + k * c >= hi_e:
            continue
        lo, hi = layout.chunk_box(era, (0, k), (2, layout.extent))
        assert lo_e <= lo[1] < hi[1] <= hi_e and hi[1] - lo[1] <= c
        ((e, l_lo, l_hi),) = layout.local_boxes(lo, hi)
        assert e == era and (l_lo[1], l_hi[1]) == (lo[1] - lo_e, hi[1] - lo_e)

"""``plan.region.affine_ranges`` (the pixels a --bbox touches on a north-up or south-up raster)
against a brute force over every pixel: box edges fall on pixel centres so "touches" has no
ties; geographic grids in -180..180 and 0..360, boxes across the antimeridian."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refstore.errors import BadInputError
from refstore.plan.region import affine_ranges


def _lon_in_box(lon: float, w: float, e: float) -> bool:
    lon = (lon + 180.0) % 360.0 - 180.0
    return w <= lon <= e if w <= e else lon >= w or lon <= e


def _touched_cols(x0: float, dx: float, width: int, w: float, e: float, geographic: bool) -> set[int]:
    """Columns whose span holds a point of the box: sampled finely (edges are pixel centres,
    so a touched pixel holds a box point at a quarter of its width from the edge)."""
    out = set()
    for c in range(width):
        for f in (0.01, 0.25, 0.5, 0.75, 0.99):
            x = x0 + (c + f) * dx
            inside = _lon_in_box(x, w, e) if geographic else min(w, e) <= x <= max(w, e)
            if inside:
                out.add(c)
    return out


def _touched_rows(y0: float, dy: float, height: int, s: float, n: float) -> set[int]:
    return {r for r in range(height) for f in (0.01, 0.25, 0.5, 0.75, 0.99) if s <= y0 + (r + f) * dy <= n}


@settings(max_examples=300, deadline=None)
@given(
    half_width=st.integers(2, 24),
    height=st.integers(1, 20),
    zero_to_360=st.booleans(),
    north_up=st.booleans(),
    geographic=st.booleans(),
    data=st.data(),
)
def test_affine_ranges_equal_brute_force(half_width, height, zero_to_360, north_up, geographic, data) -> None:
    width = 2 * half_width  # pixel centres never fall on +-180
    dx = 360.0 / width
    x0 = 0.0 if zero_to_360 else -180.0
    dy = (-1 if north_up else 1) * 180.0 / height
    y0 = 90.0 if north_up else -90.0
    centre_x = [x0 + (c + 0.5) * dx for c in range(width)]
    centre_y = [y0 + (r + 0.5) * dy for r in range(height)]
    if geographic:  # a user's box is in -180..180 whatever the grid's convention
        centre_x = [(x + 180.0) % 360.0 - 180.0 for x in centre_x]
    w, e = data.draw(st.sampled_from(centre_x)), data.draw(st.sampled_from(centre_x))
    if not geographic:
        w, e = min(w, e), max(w, e)
    s, n = sorted((data.draw(st.sampled_from(centre_y)), data.draw(st.sampled_from(centre_y))))
    got = affine_ranges([x0, dx, 0.0, y0, 0.0, dy], height, width, (w, s, e, n), geographic=geographic)
    rows = _touched_rows(y0, dy, height, s, n)
    cols = _touched_cols(x0, dx, width, w, e, geographic)
    if not rows or not cols:
        assert got is None
        return
    assert got is not None
    (r0, r1), col_ranges = got
    assert set(range(r0, r1)) == rows
    got_cols = [c for a, b in col_ranges for c in range(a, b)]
    assert sorted(got_cols) == sorted(cols), (w, e, col_ranges)  # each column once
    assert all(a < b for a, b in col_ranges) and col_ranges == sorted(col_ranges)


def test_affine_ranges_refuses_rotated_sheared_or_degenerate_grids() -> None:
    box = (-10.0, -10.0, 10.0, 10.0)
    for t in ([0, 1, 0.5, 0, 0, -1], [0, 1, 0, 0, 0.5, -1], [0, 0, 0, 0, 0, -1], [0, 1, 0, 0, 0, 0]):
        with pytest.raises(BadInputError, match="rotated or sheared"):
            affine_ranges([float(v) for v in t], 10, 10, box)
    assert affine_ranges([0.0, 1.0, 0.0, 0.0, 0.0, -1.0], 10, 10, (20.0, -5.0, 30.0, -1.0)) is None  # east of it


def test_antimeridian_box_on_a_0_to_360_grid() -> None:
    """A 4-column global grid in 0..360 (90 degrees a column); the box 45..180 + -180..-135
    touches columns 0 (0-90), 1 (90-180) and 2 (180-270), not 3 (270-360, i.e. -90..0)."""
    got = affine_ranges([0.0, 90.0, 0.0, 90.0, 0.0, -180.0], 1, 4, (45.0, -10.0, -135.0, 10.0), geographic=True)
    assert got == ((0, 1), [(0, 3)])

"""Properties of the Icechunk form's pure planning: blocks handed to ``set_virtual_refs_arr``
cover each reference exactly once, the diff turns the held state into the wanted one, container
prefixes cover every URL, checksums round mtimes up."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refstore.emit._icechunk_plan import (
    NATIVE,
    VIRTUAL,
    ChunkState,
    boxes,
    checksum_token,
    chunk_url,
    container_prefixes,
    diff_states,
    split_rows,
)
from refstore.errors import BadInputError


@st.composite
def grids_and_rows(draw: Any) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    grid = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
    n = math.prod(grid)
    flat = np.array(sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))), np.int64)
    coords = np.stack(np.unravel_index(flat, grid), axis=1).astype(np.int64) if len(flat) else np.zeros(
        (0, len(grid)), np.int64)  # fmt: skip
    pick = np.array(sorted(draw(st.sets(st.integers(0, max(len(flat) - 1, 0)), max_size=len(flat)))), np.int64)
    return grid, coords, pick[pick < len(flat)]


@settings(max_examples=300, deadline=None)
@given(grids_and_rows(), st.integers(1, 4), st.integers(0, 6))
def test_boxes_cover_each_row_once(case: Any, slack: int, floor: int) -> None:
    grid, coords, rows = case
    got = boxes(coords, rows, slack=slack, floor=floor)
    seen = np.concatenate([b.rows for b in got]) if got else np.zeros(0, np.int64)
    assert sorted(seen.tolist()) == sorted(rows.tolist())
    for b in got:
        assert len(b.origin) == len(b.shape) == len(grid)
        assert all(o >= 0 and o + s <= g for o, s, g in zip(b.origin, b.shape, grid, strict=True))
        assert len(set(b.cells.tolist())) == len(b.cells)
        rel = np.stack(np.unravel_index(b.cells, b.shape), axis=1) + np.array(b.origin)
        assert np.array_equal(rel, coords[b.rows])
        # work stays proportional to the rows: a box is dense enough, or a run with gaps <= floor
        assert math.prod(b.shape) <= max(slack * len(b.rows) + floor, (len(b.rows) - 1) * floor + 1)


def _state(rows: list[tuple[int, int, int, int, int, int]]) -> ChunkState:
    a = np.array(rows, np.int64).reshape(-1, 6)
    return ChunkState(a[:, 0], a[:, 1].astype(np.uint8), a[:, 2], a[:, 3].astype(np.uint64),
                      a[:, 4].astype(np.uint64), a[:, 5]).sorted()  # fmt: skip


ref = st.tuples(st.sampled_from([NATIVE, VIRTUAL]), st.integers(0, 2), st.integers(0, 3), st.integers(1, 2),
                st.integers(-1, 1))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(0, 30), ref), st.dictionaries(st.integers(0, 30), ref))
def test_diff_turns_held_into_wanted(want_d: dict[int, Any], have_d: dict[int, Any]) -> None:
    def rows(d: dict[int, Any]) -> list[tuple[int, ...]]:
        return [(f, k, (loc if k == VIRTUAL else -1), (o if k == VIRTUAL else 0), (n if k == VIRTUAL else 0),
                 (t if k == VIRTUAL else -1)) for f, (k, loc, o, n, t) in sorted(d.items())]  # fmt: skip

    want, have = _state(rows(want_d)), _state(rows(have_d))  # type: ignore[arg-type]
    d = diff_states(want, have)
    model = {int(f): r for f, *r in rows(have_d)}
    for f in d.delete.tolist():
        del model[f]
    for w in d.write.tolist():
        model[int(want.flat[w])] = [int(want.kind[w]), int(want.loc[w]), int(want.offset[w]), int(want.length[w]),
                                    int(want.token[w])]  # fmt: skip
    for w, h in d.compare_native.tolist():
        assert want.kind[w] == have.kind[h] == NATIVE and want.flat[w] == have.flat[h]
        model[int(want.flat[w])] = [NATIVE, -1, 0, 0, -1]
    assert {f: list(r) for f, r in model.items()} == {int(f): list(r) for f, *r in rows(want_d)}
    # nothing unchanged is rewritten
    unchanged = {f for f in want_d if f in have_d and rows({f: want_d[f]}) == rows({f: have_d[f]})}
    assert not unchanged & {int(want.flat[w]) for w in d.write.tolist()}


def test_container_prefixes() -> None:
    urls = ["file:///data/a/x.nc", "file:///data/b/y.nc", "s3://bkt/p/q/1.nc", "s3://bkt/p/2.nc",
            "https://host/d/1.nc", "s3://other/z.nc"]  # fmt: skip
    got = container_prefixes(urls)
    assert got == ["file:///data/", "https://host/d/", "s3://bkt/p/", "s3://other/"]
    assert all(any(u.startswith(p) for p in got) for u in urls)
    assert container_prefixes(["file:///data/c/z.nc", "file:///data/a/x.nc"], ["file:///data/a/"]) == [
        "file:///data/c/"]  # fmt: skip
    # Icechunk refuses a file:/// container: one per top-level folder
    assert container_prefixes(["file:///data/x.nc", "file:///tmp/y.nc"]) == ["file:///data/", "file:///tmp/"]
    with pytest.raises(BadInputError, match="directly under /"):
        container_prefixes(["file:///x.nc"])


def test_container_prefixes_stop_before_characters_that_need_escaping() -> None:
    """Icechunk matches a prefix against the chunk URL as given when writing and percent-decoded
    when reading: a prefix ends before the first folder whose name reads differently."""
    urls = [chunk_url(p) for p in ["/d/e#1/f.h5", "/d/e#1/g.h5"]]
    assert urls == ["file:///d/e%231/f.h5", "file:///d/e%231/g.h5"]
    assert container_prefixes(urls) == ["file:///d/"]
    assert container_prefixes([chunk_url("/d/ok/e 1/f.h5"), chunk_url("/d/ok/x.h5")]) == ["file:///d/ok/"]
    assert container_prefixes(["https://h/a%20b/c.nc", "https://h/a%20b/d.nc"]) == ["https://h/"]
    # an existing prefix that would never match on read covers nothing
    assert container_prefixes(["file:///d/e%231/f.h5"], ["file:///d/e%231/"]) == ["file:///d/"]
    assert container_prefixes(["file:///d/e%231/f.h5"], ["file:///d/"]) == []
    with pytest.raises(BadInputError, match="directly under /"):
        container_prefixes([chunk_url("/e#1/f.h5")])


def test_checksum_tokens_and_urls() -> None:
    assert checksum_token("/d/x.nc", "/d/x.nc", 1_700_000_000_100_000_000, None) == "mtime:1700000001"
    assert checksum_token("/d/x.nc", "/d/x.nc", 1_700_000_000_000_000_000, None) == "mtime:1700000000"
    assert checksum_token("s3://b/x.nc", "s3://b/x.nc", 5, '"abc"') == 'etag:"abc"'
    assert checksum_token("/d/x.nc", "/mirror/x.nc", 5, None) == ""
    assert chunk_url("/d/a#1?.nc") == chunk_url("file:///d/a#1?.nc") == "file:///d/a%231%3F.nc"
    assert chunk_url("/d/50%/é b+c@d=e.nc") == "file:///d/50%25/%C3%A9%20b+c@d=e.nc"
    assert chunk_url("https://h/a%20b?x=1") == "https://h/a%20b?x=1"  # URLs verbatim: never encoded twice
    with pytest.raises(BadInputError, match="control characters"):
        chunk_url("/d/a\tb.nc")
    assert split_rows((100, 100)) is None
    assert split_rows((2_000_000, 2)) == 500_000
    assert split_rows((10, 3_000_000)) == 1

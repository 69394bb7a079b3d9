"""Arrays of small chunks served through the zarr store on a coarser grid (``coarse_block``):
each zarr chunk a block of whole source chunks, decoded by the direct reader in one call.

Oracle: h5py's reads of the generated file (raw stored values, dtypes exact but for byte
order, which zarr never keeps). The block rule itself is checked by properties (Hypothesis).
Eras, held bytes, stale sources, rectilinear and gridless arrays through the coarse grid are
checked where their fixtures live (``test_zarr_store``, ``test_rectilinear``,
``test_mosaic_staggered``, ``test_series_holes``), each asserting its array is coarsened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refstore
from refstore.read.zarr_store import coarse_block

from ._oracle import assert_same, hdf5_read

if TYPE_CHECKING:
    from pathlib import Path


@settings(max_examples=300, deadline=None)
@given(
    shape=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 40)), min_size=1, max_size=4),
    itemsize=st.sampled_from([1, 2, 4, 8]),
    below=st.sampled_from([64, 1024, 16384]),
    min_chunks=st.integers(1, 300),
    min_bytes=st.integers(1, 1 << 20),
)
def test_coarse_block_rule(shape: list[tuple[int, int]], itemsize: int, below: int, min_chunks: int,
                           min_bytes: int) -> None:  # fmt: skip
    """Whole source chunks only, never more than the grid, grown along the last axes first, and
    no larger than needed to reach either target."""
    chunks = [c for c, _ in shape]
    grid = [g for _, g in shape]
    nbytes = int(np.prod(chunks)) * itemsize
    block = coarse_block(chunks, grid, itemsize, below=below, min_chunks=min_chunks, min_bytes=min_bytes)
    if nbytes >= below or int(np.prod(grid)) <= 1:
        assert block is None
        return
    if block is None:  # one source chunk already reaches a target
        assert min_chunks <= 1 or nbytes >= min_bytes
        return
    assert len(block) == len(grid) and all(1 <= b <= g for b, g in zip(block, grid, strict=True))
    f = min(d for d in range(len(block)) if block[d] > 1)  # the outermost axis merged
    assert all(block[d] == grid[d] for d in range(f + 1, len(block)))  # C order: inner axes whole
    have = int(np.prod(block))
    if have < min_chunks and have * nbytes < min_bytes:  # short of both targets: the whole grid
        assert list(block) == grid
    smaller = have // block[f] * (block[f] - 1)
    assert smaller < min_chunks and smaller * nbytes < min_bytes  # no larger than needed


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """``x`` (600, 16) float32 in (1, 16) chunks, rows 256-511 never written (no chunks);
    ``y`` (40, 30) big-endian int16 in (2, 5) chunks, shuffle+gzip; ``big`` (64, 64) in one
    16 KiB chunk (left on its grid)."""
    root = tmp_path_factory.mktemp("coarse")
    path = root / "small.h5"
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", shape=(600, 16), dtype="<f4", chunks=(1, 16), fillvalue=-7.5)
        x[0:256] = rng.normal(size=(256, 16)).astype("<f4")
        x[512:600] = rng.normal(size=(88, 16)).astype("<f4")
        f.create_dataset("y", data=rng.integers(-3000, 3000, (40, 30)).astype(">i2"), chunks=(2, 5),
                         compression="gzip", shuffle=True)  # fmt: skip
        f.create_dataset("big", data=rng.normal(size=(64, 64)).astype("<f4"), chunks=(64, 64))
    uri = str(root / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(path)])
    return uri, path


def test_small_chunks_served_in_blocks_equal_h5py(small: tuple[str, Path]) -> None:
    import zarr

    uri, path = small
    store = refstore.zarr_store(uri)
    assert store.blocks == {"x": (256, 1), "y": (20, 6)}  # 64 B: 256 chunks; 20 B chunks: 256 -> 6 x 43 -> 20 rows
    g = zarr.open_group(store, mode="r")
    assert g["x"].chunks == (256, 16) and g["y"].chunks == (40, 30) and g["big"].chunks == (64, 64)
    for name, windows in {
        "x": [(slice(1234 % 600, 600),), (slice(250, 520), slice(3, 9)), (slice(1, 599, 7), slice(None, None, 5))],
        "y": [(slice(3, 37), slice(4, 29)), (slice(None, None, 3),)],
        "big": [(slice(5, 60),)],
    }.items():
        want = hdf5_read(path, name)
        assert_same(g[name][...], want, name)
        for w in windows:
            assert_same(g[name][w], want[w], f"{name}{w}")
    src = zarr.open_group(refstore.zarr_store(uri, source_grid=True), mode="r")
    assert src["x"].chunks == (1, 16) and src["y"].chunks == (2, 5)
    assert_same(src["x"][250:520], hdf5_read(path, "x")[250:520], "x on the source grid")


def test_a_block_without_chunks_is_absent(small: tuple[str, Path]) -> None:
    """A zarr chunk whose source chunks were never written is no key: zarr reads the fill value
    there, as h5py does; listing names only blocks holding a chunk; sizes are decoded sizes."""
    import zarr
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import _collect_aiterator, sync

    uri, path = small
    store = refstore.zarr_store(uri)
    keys = sorted(sync(_collect_aiterator(store.list_prefix("x/c/"))))
    assert keys == ["x/c/0/0", "x/c/2/0"]
    assert sync(store.get("x/c/1/0", default_buffer_prototype())) is None
    assert not sync(store.exists("x/c/1/0"))
    assert sync(store.getsize("x/c/2/0")) == 256 * 16 * 4  # padded to the full block
    got = zarr.open_array(store, path="x", mode="r")[256:512]
    assert_same(got, hdf5_read(path, "x")[256:512], "unwritten rows")
    assert (got == np.float32(-7.5)).all()


def test_a_window_of_small_chunks_is_one_batch(small: tuple[str, Path]) -> None:
    """zarr's concurrent gets of one selection arrive as one batch; the blocks it holds are read
    by one call of the direct reader (one table lookup), each source's chunks coalesced."""
    import zarr

    uri, path = small
    store = refstore.zarr_store(uri)
    arr = zarr.open_array(store, path="x", mode="r")
    batches: list[list[str]] = []
    state = store.state
    real = state.read

    def counting(keys: Any) -> Any:
        batches.append(list(keys))
        return real(keys)

    state.read = counting  # type: ignore[method-assign]
    reads: list[int] = []
    real_get = state.fetcher.get_ranges

    def ranges(loc: str, starts: Any, ends: Any) -> Any:
        reads.append(len(starts))
        return real_get(loc, starts, ends)

    state.fetcher.get_ranges = ranges  # type: ignore[method-assign]
    assert_same(arr[100:600], hdf5_read(path, "x")[100:600], "x")
    assert len(batches) == 1 and sorted(batches[0]) == ["x/c/0/0", "x/c/1/0", "x/c/2/0"]
    rows = refstore.Collection.open(uri).snapshot().chunk_rows("x")
    off = np.sort(rows.column("offset").to_numpy())
    runs = 1 + int(np.count_nonzero(off[1:] != off[:-1] + 64))
    assert sum(reads) <= runs  # adjacent chunks of the blocks merged into one read per run

"""``refstore coverage``: the PNG of chunk states over an array's spatial dimensions.

Expected states come from h5py over the original files (which chunks each file wrote, from the
chunk index; a compact dataset's bytes are in its header: inline), with the held chunks worked
out from the hold's window and h5py's chunk shape; a series' cell is the mean over the files.
The pixel at every cell's centre (located by its coordinates from netCDF4-python and the plot
box the command reports) must have the documented colour of those shares.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

import refstore

from ._cli import run

pytest.importorskip("matplotlib")
from PIL import Image  # pillow: a matplotlib dependency

# the documented palette (README, design/publish.md): absent, referenced, inline, held
PALETTE = np.array([(217, 217, 217), (76, 114, 176), (221, 132, 82), (85, 168, 104)], np.float64)
HOLD_WINDOW = (0, slice(0, 20), slice(0, 40))  # time 0, lat rows 0:20, lon columns 0:40 (sst)


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Path]]:
    from refstore.fixtures.oisst import write_series
    from refstore.plan import parse_window
    from refstore.table import HoldSelection, hold

    root = tmp_path_factory.mktemp("coverage")
    files = write_series(root / "data", 2)
    uri = str(root / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in files], concat_dim="time", timeout=None)
    hold(refstore.Collection.open(uri), HoldSelection(arrays=("sst",), window=parse_window("0,:,0:20,0:40")))
    return uri, files


def expected_states(files: list[Path], name: str) -> np.ndarray[Any, Any]:
    """(files, cells_y, cells_x) state codes from h5py: 0 absent, 1 referenced, 2 inline, 3 held."""
    out = []
    for k, path in enumerate(files):
        with h5py.File(path, "r") as f:
            d = f[name]
            ny, nx = d.shape[-2:]
            if d.id.get_create_plist().get_layout() == h5py.h5d.COMPACT:
                out.append(np.full((1, 1), 2))
                continue
            cy, cx = d.chunks[-2:]
            states = np.zeros((-(-ny // cy), -(-nx // cx)), int)
            for i in range(d.id.get_num_chunks()):
                info = d.id.get_chunk_info(i)
                states[info.chunk_offset[-2] // cy, info.chunk_offset[-1] // cx] = 1
            if name == "sst" and k == HOLD_WINDOW[0]:
                rows = range(HOLD_WINDOW[1].start // cy, -(-HOLD_WINDOW[1].stop // cy))
                cols = range(HOLD_WINDOW[2].start // cx, -(-HOLD_WINDOW[2].stop // cx))
                for r in rows:
                    for c in cols:
                        if states[r, c] == 1:
                            states[r, c] = 3
            out.append(states)
    return np.stack(out)


def cell_centres(files: list[Path], name: str, n_cells: tuple[int, int]) -> tuple[list[float], list[float]]:
    """Centres of the cells in coordinate units (netCDF4-python's lat/lon; cell bounds half-way
    between coordinate values, half a step beyond the ends)."""
    import netCDF4

    with netCDF4.Dataset(files[0]) as ds:
        v = ds[name]
        dims = v.dimensions[-2:]
        chunking = v.chunking()
        chunks = [v.shape[-2], v.shape[-1]] if chunking == "contiguous" else chunking[-2:]
        centres = []
        for dim, c, n in zip(dims, chunks, n_cells, strict=True):
            coord = np.asarray(ds[dim][:], np.float64)
            b = np.concatenate([[coord[0] - (coord[1] - coord[0]) / 2], (coord[:-1] + coord[1:]) / 2,
                                [coord[-1] + (coord[-1] - coord[-2]) / 2]])  # fmt: skip
            edges = [min(i * c, coord.size) for i in range(n)] + [coord.size]
            centres.append([(b[edges[i]] + b[edges[i + 1]]) / 2 for i in range(n)])
    return centres[0], centres[1]


def _coverage(uri: str, out: Path, *args: str) -> tuple[dict[str, Any], np.ndarray[Any, Any]]:
    from refstore.cli import app as cli

    r = CliRunner().invoke(cli.app, ["-C", uri, "coverage", *args, "--out", str(out), "--json"],
                           catch_exceptions=False)  # fmt: skip
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    with Image.open(io.BytesIO(out.read_bytes())) as img:
        assert img.format == "PNG"
        return rep, np.asarray(img.convert("RGB")).astype(np.float64)


def _pixel(rep: dict[str, Any], x: float, y: float) -> tuple[int, int]:
    left, top, right, bottom = rep["picture"]["plot_box"]
    (x0, x1), (y0, y1) = rep["picture"]["xlim"], rep["picture"]["ylim"]
    return round(left + (x - x0) / (x1 - x0) * (right - left)), round(bottom - (y - y0) / (y1 - y0) * (bottom - top))


def _check_pixels(rep: dict[str, Any], img: np.ndarray[Any, Any], shares: np.ndarray[Any, Any],
                  centres: tuple[list[float], list[float]]) -> None:  # fmt: skip
    ys, xs = centres
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            col, row = _pixel(rep, x, y)
            want = shares[i, j] @ PALETTE
            got = img[row, col]
            assert np.abs(got - want).max() <= 2, f"cell ({i}, {j}) at pixel ({col}, {row}): {got} != {want}"


@pytest.mark.parametrize("name", ["sst", "ice"])
def test_series_picture_mixes_the_states_of_the_time_steps(series: tuple[str, list[Path]], tmp_path: Path,
                                                            name: str) -> None:  # fmt: skip
    uri, files = series
    states = expected_states(files, name)
    shares = np.stack([(states == s).mean(axis=0) for s in range(4)], axis=-1)  # (cy, cx, state)
    rep, img = _coverage(uri, tmp_path / "map.png", name, "--size", "900x560")
    assert img.shape == (560, 900, 3)
    assert rep["cells"] == list(states.shape[1:]) and rep["steps"] == len(files)
    assert rep["dims"] == ["lat", "lon"] and rep["array"] == name and rep["version"] == 3
    _check_pixels(rep, img, shares, cell_centres(files, name, states.shape[1:]))
    if name == "sst":  # three states: the absent polar band, referenced, held on one day of two
        assert {round(x, 3) for x in np.unique(shares[..., 3])} == {0.0, 0.5}
        assert shares[..., 0].max() == 1.0


def test_one_time_step(series: tuple[str, list[Path]], tmp_path: Path) -> None:
    uri, files = series
    states = expected_states(files, "sst")
    for day, k in (("2024-01-01", 0), ("2024-01-02", 1)):
        shares = np.stack([(states[k] == s).astype(float) for s in range(4)], axis=-1)
        rep, img = _coverage(uri, tmp_path / f"{day}.png", "sst", "--time", day)
        assert img.shape == (600, 960, 3) and rep["steps"] == 1 and rep["time"] == day
        _check_pixels(rep, img, shares, cell_centres(files, "sst", states.shape[1:]))


def test_refusals_are_one_line_and_write_nothing(series: tuple[str, list[Path]], tmp_path: Path) -> None:
    from refstore.table import create_tag

    uri, _ = series
    create_tag(refstore.Collection.open(uri), "cov-1", 1)  # version 1: before the scan
    r = run("-C", uri, "coverage", "sst", "--as-of", "cov-1", "--out", str(tmp_path / "x.png"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "sst" in r.stderr, r.stderr  # no such array yet
    assert not (tmp_path / "x.png").exists()
    r = run("-C", uri, "coverage", "time", "--out", str(tmp_path / "t.png"))  # 1-D: refused in one line
    assert r.returncode == 2 and "two or more dimensions" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = run("-C", uri, "coverage", "sst", "--out", str(tmp_path / "t.png"), "--time", "1999-01-01")
    assert r.returncode == 2 and "no time step" in r.stderr, r.stderr
    assert not (tmp_path / "t.png").exists()

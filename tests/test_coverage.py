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
from hypothesis import given, settings
from hypothesis import strategies as st
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


def _main(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """The command line's ``main`` in this process: (exit code, stderr)."""
    from refstore.cli import app as cli

    monkeypatch.setattr("sys.argv", ["refstore", *args])
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli.main()
    return int(e.value.code or 0), capsys.readouterr().err


def test_refusals_are_one_line_and_write_nothing(series: tuple[str, list[Path]], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from refstore.table import create_tag

    uri, _ = series
    create_tag(refstore.Collection.open(uri), "cov-1", 1)  # version 1: before the scan
    r = run("-C", uri, "coverage", "sst", "--as-of", "cov-1", "--out", str(tmp_path / "x.png"))  # the real CLI
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "sst" in r.stderr, r.stderr  # no such array yet
    assert not (tmp_path / "x.png").exists()
    code, err = _main(["-C", uri, "coverage", "time", "--out", str(tmp_path / "t.png")], capsys, monkeypatch)
    assert code == 2 and "two or more dimensions" in err and err.count("\n") == 1, err  # 1-D
    code, err = _main(["-C", uri, "coverage", "sst", "--out", str(tmp_path / "t.png"), "--time", "1999-01-01"],
                      capsys, monkeypatch)  # fmt: skip
    assert code == 2 and "no time step" in err and err.count("\n") == 1, err
    code, err = _main(["-C", uri, "coverage", "sst", "--out", str(tmp_path / "t.png"), "--size", "10x10"],
                      capsys, monkeypatch)  # fmt: skip
    assert code == 2 and "--size" in err and err.count("\n") == 1, err
    assert not (tmp_path / "t.png").exists()
    code, err = _main(["-C", uri, "coverage", "sst", "--out", str(tmp_path / "no" / "t.png")], capsys, monkeypatch)
    assert code == 2 and "no such folder" in err and err.count("\n") == 1, err
    code, err = _main(["-C", uri, "report", str(tmp_path)], capsys, monkeypatch)  # the report too: a folder
    assert code == 2 and "is a folder" in err and err.count("\n") == 1, err


# --------------------------------------------------------------------------- the pure part
@st.composite
def _grids(draw: st.DrawFn) -> dict[str, Any]:
    """An array of 2..4 dims, split along axis 0 into eras with their own chunk shapes, and a
    random subset of each era's chunks present with random states."""
    nd = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(nd))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, shape[0] - 1)), max_size=2)))) if shape[0] > 1 else []
    bounds = list(zip([0, *cuts], [*cuts, shape[0]], strict=True))
    eras = [(a, b, tuple(draw(st.integers(1, 4)) for _ in range(nd))) for a, b in bounds]
    boxes = []
    for a, b, chunks in eras:
        n = [-(-(b - a) // chunks[0]), *(-(-s // c) for s, c in zip(shape[1:], chunks[1:], strict=True))]
        for key in np.ndindex(*n):
            if draw(st.booleans()):
                lo = [k * c for k, c in zip(key, chunks, strict=True)]
                lo[0] += a
                limit = [b, *shape[1:]]
                boxes.append((lo, [min(x + c, m) for x, c, m in zip(lo, chunks, limit, strict=True)],
                              draw(st.integers(1, 3))))  # fmt: skip
    yx = tuple(draw(st.permutations(range(nd)))[:2])
    window = [(0, s) for s in shape]
    for i in range(nd):
        if i not in yx and shape[i] > 1 and draw(st.booleans()):
            lo = draw(st.integers(0, shape[i] - 1))
            window[i] = (lo, draw(st.integers(lo + 1, shape[i])))
    return {"shape": shape, "eras": eras, "boxes": boxes, "yx": yx, "window": window}


@given(_grids())
@settings(max_examples=150, deadline=None)
def test_shares_equal_painting_every_element(g: dict[str, Any]) -> None:
    """``states_over_cells`` equals painting each element with its chunk's state and counting,
    per spatial element, the share of the window's other elements in each state."""
    from refstore.report.coverage import states_over_cells

    shape, yx, window = g["shape"], g["yx"], g["window"]
    painted = np.zeros(shape, int)
    for lo, hi, s in g["boxes"]:
        painted[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))] = s
    sel = painted[tuple(slice(a, b) if i not in yx else slice(None) for i, (a, b) in enumerate(window))]
    others = tuple(i for i in range(len(shape)) if i not in yx)
    moved = np.moveaxis(sel, list(yx), [0, 1]).reshape(shape[yx[0]], shape[yx[1]], -1)
    per_element = np.stack([(moved == s).mean(axis=-1) for s in range(4)], axis=-1)
    def cuts(ax: int) -> list[int]:  # eras run along axis 0: each era's grid starts at the era
        spans = [range(a, b, c[0]) if ax == 0 else range(0, shape[ax], c[ax]) for a, b, c in g["eras"]]
        stops = [b for _, b, _ in g["eras"]] if ax == 0 else []
        return sorted({0, shape[ax], *stops, *(x for r in spans for x in r)})

    edges = [cuts(ax) for ax in yx]
    lo = np.array([b[0] for b in g["boxes"]], np.int64).reshape(-1, len(shape))
    hi = np.array([b[1] for b in g["boxes"]], np.int64).reshape(-1, len(shape))
    state = np.array([b[2] for b in g["boxes"]], np.int64)
    shares, steps = states_over_cells(lo, hi, state, shape, yx, np.array(edges[0]), np.array(edges[1]),
                                      tuple(window))  # fmt: skip
    assert steps == int(np.prod([window[i][1] - window[i][0] for i in others]))
    for i in range(len(edges[0]) - 1):
        for j in range(len(edges[1]) - 1):
            block = per_element[edges[0][i] : edges[0][i + 1], edges[1][j] : edges[1][j + 1]]
            # every element of a cell has the same shares (cells are cut at every chunk edge)
            assert np.allclose(block, block[0, 0]), (i, j)
            np.testing.assert_allclose(shares[i, j], block[0, 0], atol=1e-12, err_msg=f"cell {(i, j)}")


def test_eras_with_other_chunk_shapes(tmp_path: Path) -> None:
    """A series whose last file is chunked differently over (lat, lon): a new era, so the cells
    are cut at the chunk edges of both grids, and each cell's shares are painted per element
    from h5py's chunk index of each file."""
    import netCDF4

    files = []
    for day, chunks, skip in ((0, (1, 4, 6), None), (1, (1, 4, 6), (0, 0)), (2, (1, 3, 4), (1, 1))):
        p = tmp_path / f"d{day}.nc"
        with netCDF4.Dataset(p, "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("lat", 7)
            ds.createDimension("lon", 10)
            t = ds.createVariable("time", "f8", ("time",))
            t.units = "days since 2024-01-01"
            ds.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-30, 30, 7)
            ds.createVariable("lon", "f4", ("lon",))[:] = np.linspace(100, 145, 10)
            v = ds.createVariable("v", "i2", ("time", "lat", "lon"), chunksizes=chunks, zlib=True, fill_value=-1)
            t[0] = day
            for r in range(-(-7 // chunks[1])):  # chunk by chunk; ``skip`` is never written
                for c in range(-(-10 // chunks[2])):
                    if (r, c) != skip:
                        v[0, r * chunks[1] : (r + 1) * chunks[1], c * chunks[2] : (c + 1) * chunks[2]] = 5
        files.append(p)
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in files], concat_dim="time", timeout=None)
    # expected: paint each file's written chunks (h5py), then cut at every chunk edge of both grids
    painted = np.zeros((len(files), 7, 10), int)
    cuts_y, cuts_x = {0, 7}, {0, 10}
    for k, p in enumerate(files):
        with h5py.File(p, "r") as f:
            d = f["v"]
            cy, cx = d.chunks[1:]
            cuts_y.update(range(0, 7, cy))
            cuts_x.update(range(0, 10, cx))
            for i in range(d.id.get_num_chunks()):
                off = d.id.get_chunk_info(i).chunk_offset
                painted[k, off[1] : off[1] + cy, off[2] : off[2] + cx] = 1
    ey, ex = sorted(cuts_y), sorted(cuts_x)
    shares = np.array([[[(painted[:, ey[i], ex[j]] == s).mean() for s in range(4)] for j in range(len(ex) - 1)]
                       for i in range(len(ey) - 1)])  # fmt: skip
    assert {round(x, 3) for x in np.unique(shares[..., 0])} >= {0.0, 0.333}  # some cells miss one day
    rep, img = _coverage(uri, tmp_path / "eras.png", "v")
    assert rep["cells"] == [len(ey) - 1, len(ex) - 1]
    with netCDF4.Dataset(files[0]) as ds:
        lat, lon = np.asarray(ds["lat"][:], "f8"), np.asarray(ds["lon"][:], "f8")

    def centres(c: np.ndarray[Any, Any], e: list[int]) -> list[float]:
        b = np.concatenate([[c[0] - (c[1] - c[0]) / 2], (c[:-1] + c[1:]) / 2, [c[-1] + (c[-1] - c[-2]) / 2]])
        return [(b[e[i]] + b[e[i + 1]]) / 2 for i in range(len(e) - 1)]

    _check_pixels(rep, img, shares, (centres(lat, ey), centres(lon, ex)))


def test_a_geotiff_on_its_transform(tmp_path: Path) -> None:
    """GeoTIFF tiles on the raster's own coordinates (from the transform), one tile held: the
    tiles from tifffile (offsets and byte counts), positions from its GeoTIFF tags."""
    import tifffile

    from refstore.fixtures.tiff import geotags
    from refstore.plan import parse_window
    from refstore.table import HoldSelection, hold

    p = tmp_path / "t.tif"
    img = np.arange(256 * 384, dtype="u2").reshape(256, 384)
    with tifffile.TiffWriter(p) as w:
        w.write(img, extratags=geotags(x0=-30.0, y0=60.0), tile=(128, 128), compression="zlib", metadata=None)
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p)], timeout=None)
    hold(refstore.Collection.open(uri), HoldSelection(arrays=("image",), window=parse_window("0:128,128:256")))
    with tifffile.TiffFile(p) as tf:
        page = tf.pages[0]
        th, tw = page.tilelength, page.tilewidth
        ny, nx = -(-page.imagelength // th), -(-page.imagewidth // tw)
        states = (np.array(page.databytecounts).reshape(ny, nx) > 0).astype(int)
        sx, sy = page.tags["ModelPixelScaleTag"].value[:2]
        x0, y0 = page.tags["ModelTiepointTag"].value[3:5]
    states[0, 1] = 3  # rows 0:128, columns 128:256: tile (0, 1)
    shares = np.stack([(states == s).astype(float) for s in range(4)], axis=-1)
    ys = [y0 - (i * th + th / 2) * sy for i in range(ny)]
    xs = [x0 + (j * tw + tw / 2) * sx for j in range(nx)]
    rep, img_px = _coverage(uri, tmp_path / "tif.png", "image")
    assert rep["dims"] == ["y", "x"] and rep["cells"] == [ny, nx]
    _check_pixels(rep, img_px, shares, (ys, xs))


def test_time_on_a_coordinate_not_named_by_its_dimension(tmp_path: Path) -> None:
    """NOAA's sea-ice CDR spells time ``time(tdim)``: ``--time`` finds it by its dimension, and
    selects the steps netCDF4 + cftime place in that day (chunks: one step each; h5py says which
    are stored)."""
    import cftime
    import netCDF4

    f = tmp_path / "ice.nc"
    with netCDF4.Dataset(f, "w") as nc:
        nc.createDimension("tdim", 3)
        nc.createDimension("y", 4)
        nc.createDimension("x", 5)
        t = nc.createVariable("time", "f4", ("tdim",))
        t.units, t.calendar, t.standard_name = "days since 1601-01-01 00:00:00", "gregorian", "time"
        t[:] = [153764.0, 153765.0, 153766.0]
        v = nc.createVariable("conc", "u1", ("tdim", "y", "x"), chunksizes=(1, 4, 5))
        v[2] = np.ones((4, 5), np.uint8)
    with netCDF4.Dataset(f) as nc:  # the oracle: which steps fall on 2021-12-31
        days = cftime.num2date(nc["time"][:], nc["time"].units, nc["time"].calendar)
        steps = [i for i, d in enumerate(days) if (d.year, d.month, d.day) == (2021, 12, 31)]
    uri = str(tmp_path / "c")
    refstore.init(uri)
    refstore.scan(uri, [str(f)], workers=1)
    rep, _img = _coverage(uri, tmp_path / "one.png", "conc", "--time", "2021-12-31")
    assert steps == [2] and rep["steps"] == len(steps) and rep["time"] == "2021-12-31"
    with h5py.File(f, "r") as h:  # the steps whose chunk is stored
        stored = {h["conc"].id.get_chunk_info(i).chunk_offset[0] for i in range(h["conc"].id.get_num_chunks())}
    assert rep["shares"]["referenced"] == pytest.approx(float(all(s in stored for s in steps)))


def test_a_mosaic_of_tiles_off_the_block_grid(tmp_path: Path) -> None:
    """Tiles cut at column 100 (blocks of 64): the mosaic's grid is rectilinear. The shares are
    the tiles' footprints (tifffile's sizes at the offsets their tags give) painted on a canvas;
    the quarter no tile holds is absent."""
    import tifffile

    from refstore.fixtures.tiff import geotags

    boxes = {"a": (0, 0, 128, 100), "b": (0, 100, 128, 100), "c": (128, 0, 72, 100)}  # row, col, rows, cols
    for n, (r, c, h, w) in boxes.items():
        with tifffile.TiffWriter(tmp_path / f"{n}.tif") as tw:
            tw.write(np.full((h, w), 7, "u1"), extratags=geotags(x0=float(c), y0=-float(r), dx=1.0, dy=1.0),
                     tile=(64, 64), metadata=None)  # fmt: skip
    canvas = np.zeros((200, 200), bool)
    for n in boxes:
        with tifffile.TiffFile(tmp_path / f"{n}.tif") as tf:
            page = tf.pages[0]
            c, r = (int(v) for v in page.tags["ModelTiepointTag"].value[3:5])
            canvas[-r : -r + page.imagelength, c : c + page.imagewidth] = True
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(tmp_path / f"{n}.tif") for n in boxes], mosaic=True, timeout=None)
    rep, _img = _coverage(uri, tmp_path / "m.png", "image")
    assert rep["shares"]["referenced"] == pytest.approx(canvas.mean())
    assert rep["shares"]["absent"] == pytest.approx(1 - canvas.mean())


def test_a_string_array_is_refused_by_name(tmp_path: Path) -> None:
    """Station names (fixed-length strings over station x name length) are not a field over space:
    one line naming the array, exit 2, no picture."""
    import netCDF4

    src = tmp_path / "stations.nc"
    with netCDF4.Dataset(src, "w") as ds:
        ds.createDimension("station", 3)
        ds.createDimension("name_strlen", 8)
        v = ds.createVariable("station_name", "S1", ("station", "name_strlen"))
        v[:] = netCDF4.stringtochar(np.array([b"alpha", b"beta", b"gamma"], "S8"))
        ds.createVariable("temp", "f4", ("station",))[:] = [1.0, 2.0, 3.0]
    with netCDF4.Dataset(src) as ds:  # the oracle: netCDF4 sees a character array
        assert ds["station_name"].dtype == np.dtype("S1")
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(src)])
    out = tmp_path / "s.png"
    r = run("-C", uri, "coverage", "station_name", "--out", str(out))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "station_name" in r.stderr and "not a field over space" in r.stderr, r.stderr
    assert not out.exists()

"""``refstore report``: one self-contained HTML page, rendered by headless Chromium (skipped
where it is not installed; CI installs Debian's ``chromium``).

The page's text is read back from Chromium's DOM (``--dump-dom``) and checked against h5py over
the original files (shapes of the concatenated series, chunk shapes, filters), the sources, the
versions and tags of the log, and the diff between the last two tags; every coverage picture is
an inline ``data:`` PNG, and the screenshot shows the pictures' colours (the browser drew them).
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

import refstore

pytest.importorskip("matplotlib")
from PIL import Image  # pillow: a matplotlib dependency

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
H5_FILTERS = {1: "zlib", 2: "shuffle", 3: "fletcher32"}  # HDF5 filter ids (deflate, shuffle, fletcher32)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], dict[str, Any], str]:
    from datetime import date

    from refstore.cli import app as cli
    from refstore.fixtures.oisst import write_day
    from refstore.plan import parse_window
    from refstore.table import HoldSelection, create_tag, hold

    root = tmp_path_factory.mktemp("report")
    (root / "data").mkdir()
    files = [write_day(root / "data" / f"d{i}.nc", date(2024, 1, 1 + i)) for i in range(3)]
    uri = str(root / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in files[:2]], concat_dim="time", timeout=None)
    create_tag(refstore.Collection.open(uri), "first", None)
    refstore.scan(uri, [str(p) for p in files], concat_dim="time", timeout=None)
    hold(refstore.Collection.open(uri), HoldSelection(arrays=("sst",), window=parse_window("0,:,0:20,0:40")))
    create_tag(refstore.Collection.open(uri), "second", None)
    out = root / "report.html"
    shown = io.StringIO()  # stderr as a terminal: with --json, still no progress bar
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, "err", Console(file=shown, force_terminal=True, width=100))
        r = CliRunner().invoke(cli.app, ["-C", uri, "report", str(out), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert shown.getvalue() == ""
    return out, files, json.loads(r.stdout), uri


class Cells(HTMLParser):
    """Table rows (cell texts), headings, images and all text of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.images: list[dict[str, str | None]] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(dict(attrs))
        elif tag in ("link", "script", "iframe", "object", "embed"):
            self.text.append(f"<{tag}>")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _parse(html: str) -> Cells:
    p = Cells()
    p.feed(html)
    return p


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (CI installs Debian's chromium)")
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def dom(page: tuple[Path, list[Path], dict[str, Any], str]) -> Cells:
    r = _chromium("--dump-dom", page[0].as_uri())
    assert r.returncode == 0, r.stderr
    return _parse(r.stdout)


def test_the_page_is_self_contained(page: tuple[Path, list[Path], dict[str, Any], str]) -> None:
    html = page[0].read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", html)  # nothing fetched from elsewhere
    p = _parse(html)
    assert not [t for t in p.text if t in ("<link>", "<script>", "<iframe>", "<object>", "<embed>")]
    assert p.images and all(str(i["src"]).startswith("data:image/png;base64,") for i in p.images)


def test_arrays_sources_versions_and_the_last_diff(page: tuple[Path, list[Path], dict[str, Any], str],
                                                   dom: Cells) -> None:  # fmt: skip
    _, files, rep, uri = page
    rows: dict[str, list[str]] = {}
    for r in dom.rows:  # the first row of each name: the arrays table comes before the diff's
        if r:
            rows.setdefault(r[0], r)
    with h5py.File(files[0], "r") as f:
        for name in ("sst", "anom", "err", "mask", "meta/quality"):
            d = f[name]
            shape = list(d.shape)
            if "time" in [dim.label or (dim[0].name.rsplit("/", 1)[-1] if len(dim) else "") for dim in d.dims]:
                shape[0] *= len(files)
            row = rows[name]
            assert row[2] == " x ".join(map(str, shape)), (name, row)
            assert row[3] == " x ".join(map(str, d.chunks or d.shape)), (name, row)
            dcpl = d.id.get_create_plist()  # the filter pipeline in encode order
            filters = [H5_FILTERS[dcpl.get_filter(i)[0]] for i in range(dcpl.get_nfilters())]
            assert row[5] == (", ".join(filters) or "none"), (name, row)
    # sources: every file, its size on disk
    for p in files:
        assert rows[str(p)][2] == str(p.stat().st_size)
    text = " ".join(" ".join(dom.text).split())
    log = refstore.log_entries(refstore.Collection.open(uri))
    for e in log:
        assert f"version {e.version} {e.timestamp}" in text
    assert rep["versions"] == [e.version for e in log]
    # the last two tags and what changed between them: the third file and its chunks
    assert rep["diff"] == ["first", "second"]
    assert re.search(r"first \(version \d+\) → second \(version \d+\): differs", text), text
    assert f"source added: {files[2]}" in text
    with h5py.File(files[2], "r") as f:
        written = f["sst"].id.get_num_chunks()
    diff_rows = [r for r in dom.rows if r and r[0] == "sst" and len(r) == 5]
    assert diff_rows and diff_rows[0][1] == str(written), diff_rows


def test_coverage_pictures_inline_and_drawn(page: tuple[Path, list[Path], dict[str, Any], str], dom: Cells,
                                            tmp_path: Path) -> None:  # fmt: skip
    out, files, rep, _ = page
    alts = [str(i["alt"]) for i in dom.images]
    # every array of two or more dimensions (h5py), in name order
    with h5py.File(files[0], "r") as f:
        want: list[str] = []
        f.visititems(lambda n, o: want.append(n) if isinstance(o, h5py.Dataset) and o.ndim >= 2 else None)
    assert alts == [f"coverage of {n}" for n in sorted(want)]
    assert rep["pictures"] == len(want)
    for img in dom.images:
        with Image.open(io.BytesIO(base64.b64decode(str(img["src"]).split(",", 1)[1]))) as png:
            assert png.format == "PNG" and png.size == (int(str(img["width"])), int(str(img["height"])))
    shot = tmp_path / "page.png"
    r = _chromium(f"--screenshot={shot}", "--window-size=1400,4000", out.as_uri())
    assert r.returncode == 0, r.stderr
    with Image.open(shot) as im:
        assert im.size == (1400, 4000)
        pixels = np.asarray(im.convert("RGB")).reshape(-1, 3)
    # the browser drew the pictures: large areas of the referenced blue and the inline orange (ice)
    for colour in ((76, 114, 176), (221, 132, 82)):
        assert (np.abs(pixels.astype(int) - colour).max(axis=1) <= 2).sum() > 20_000, colour  # CSS uses far fewer


def test_as_of_a_tag_reports_that_version_and_what_came_before(
    page: tuple[Path, list[Path], dict[str, Any], str],
) -> None:
    from refstore.report.html import build_page

    _, files, _, uri = page
    col = refstore.Collection.open(uri)
    first = next(t["version"] for t in refstore.table.list_tags(col) if t["name"] == "first")
    calls: list[tuple[int, int]] = []
    html, rep = build_page(col, as_of="first", progress=lambda d, t: calls.append((d, t)))
    assert rep["version"] == first and rep["tag"] == "first"
    assert rep["versions"] == list(range(first, 0, -1))  # nothing after it
    assert rep["diff"] is None  # one tag up to there
    p = _parse(html)
    text = " ".join(" ".join(p.text).split())
    assert "Fewer than two tags" in text and "second" not in text
    sources = [r[0] for r in p.rows if r and r[0].endswith(".nc")]
    assert sources == [str(f) for f in files[:2]]  # the third file came later
    rows = {r[0]: r for r in p.rows if r}
    assert rows["sst"][2] == "2 x 1 x 45 x 90"
    assert calls[-1][0] == calls[-1][1] > 0 and [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_a_rectilinear_grid_is_shown_as_such(tmp_path: Path) -> None:
    """Tiles cut at column 100 (blocks of 64): the page's chunks column shows the rectilinear
    dimension (largest chunk, count) as ``info`` does, not the codec's regular 64 x 64; the
    chunk edges expected are the tiles' block edges (tifffile's sizes at their tag offsets)."""
    import tifffile

    from refstore.cli import app as cli
    from refstore.fixtures.tiff import geotags

    boxes = {"a": (0, 0, 128, 100), "b": (0, 100, 128, 100), "c": (128, 0, 72, 100)}  # row, col, rows, cols
    for n, (r, c, h, w) in boxes.items():
        with tifffile.TiffWriter(tmp_path / f"{n}.tif") as tw:
            tw.write(np.full((h, w), 7, "u1"), extratags=geotags(x0=float(c), y0=-float(r), dx=1.0, dy=1.0),
                     tile=(64, 64), metadata=None)  # fmt: skip
    cuts: tuple[set[int], set[int]] = ({0}, {0})
    for n in boxes:
        with tifffile.TiffFile(tmp_path / f"{n}.tif") as tf:
            p = tf.pages[0]
            c, r = (int(v) for v in p.tags["ModelTiepointTag"].value[3:5])
            for axis, start, size, block in ((0, -r, p.imagelength, p.tilelength), (1, c, p.imagewidth, p.tilewidth)):
                cuts[axis].update(range(start, start + size, block))
                cuts[axis].add(start + size)
    lengths = [np.diff(sorted(cs)) for cs in cuts]
    want = [str(int(ls[0])) if len(set(ls[:-1].tolist())) <= 1 and ls[-1] <= ls[0] else f"~{int(ls.max())}"
            for ls in lengths]  # fmt: skip
    assert want[1].startswith("~")  # the oracle says x is rectilinear (64, 36, 64, 36)
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(tmp_path / f"{n}.tif") for n in boxes], mosaic=True, timeout=None)
    r = CliRunner().invoke(cli.app, ["-C", uri, "report", str(tmp_path / "r.html")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    row = next(r for r in _parse((tmp_path / "r.html").read_text()).rows if r and r[0] == "image")
    assert row[3].split(" x ") == want, row

"""The built-in demo: a small OISST-like daily series, scanned, read, verified, tagged, held and
published in every form."""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["run_demo"]

_MARKER = ".refstore-demo"


def _hold_demo(coll: Path, data: Path, tell: Callable[[str], Any]) -> bool:
    """Hold a box of the series, move the sources away, and read the box from held bytes."""
    import h5py

    from . import open
    from .plan.region import parse_bbox
    from .table import HoldSelection, hold
    from .table.collection import Collection

    rep = hold(Collection.open(str(coll)), HoldSelection(arrays=("sst",), bbox=parse_bbox("100,-40,250,40")))
    ds = open(str(coll))
    lat, lon = ds["lat"][...], ds["lon"][...]
    ys, xs = np.flatnonzero((lat >= -40) & (lat <= 40)), np.flatnonzero((lon >= 100) & (lon <= 250))
    box = (slice(None), 0, slice(int(ys[0]), int(ys[-1]) + 1), slice(int(xs[0]), int(xs[-1]) + 1))
    files = sorted(data.glob("*.nc"))
    expected = np.concatenate([h5py.File(p, "r")["sst"][()] for p in files])[box]
    away = data.with_name("data-moved-away")
    data.rename(away)
    try:
        same = ds["sst"][box].tobytes() == expected.tobytes()
    finally:
        away.rename(data)
    tell(f"7. held {rep.chunks} sst chunks ({rep.bytes} bytes) in a box, moved the sources away, read the box "
         f"from held bytes: equal to h5py: {same}")  # fmt: skip
    return same


def _cog_series(root: Path, tell: Callable[[str], Any]) -> bool:
    """A small daily series of tiled GeoTIFFs with overviews, concatenated along a new time axis."""
    import tifffile

    from . import init, open, scan, verify
    from .fixtures.tiff import geotags

    folder = root / "cogs"
    folder.mkdir()
    rng = np.random.default_rng(5)
    images = []
    for day in (1, 2, 3):
        img = rng.normal(15, 4, (256, 384)).astype("f4")
        images.append(img)
        with tifffile.TiffWriter(folder / f"sst_D202401{day:02d}.tif") as w:
            opts: dict[str, Any] = {"tile": (128, 128), "compression": "zlib", "predictor": 3, "metadata": None}
            w.write(img, extratags=geotags(), **opts)
            w.write(img[::2, ::2], subfiletype=1, **opts)
    coll = root / "cog-collection"
    init(str(coll))
    rep = scan(str(coll), [str(folder)], concat_dim="time", time_from_name="D%Y%m%d")
    ds = open(str(coll))
    got = ds["image"][:, 50:200, 100:300]
    same = got.tobytes() == np.stack(images)[:, 50:200, 100:300].tobytes()
    v = verify(ds.snapshot)
    tell(
        f"8. a COG series: {rep.new} GeoTIFFs dated by name -> image{list(ds['image'].shape)}, "
        f"overview_1{list(ds['overview_1'].shape)}; window equal to tifffile: {same}; "
        f"verified {v.checked} tiles, {v.mismatched} mismatched"
    )
    return bool(same and v.mismatched == 0)


def run_demo(folder: str | Path, *, days: int = 5, say: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Build ``folder/data`` (daily files) and ``folder/collection``; return what happened.

    A folder left by an earlier demo (it holds a marker file) is replaced; any other non-empty
    folder is refused.
    """
    import h5py

    from . import init, log_entries, open, scan, verify
    from .errors import BadInputError
    from .fixtures.oisst import write_day, write_series
    from .table.collection import Collection

    def tell(msg: str) -> None:
        if say is not None:
            say(msg)

    root = Path(folder).absolute()
    if root.exists() and any(root.iterdir()):
        if not (root / _MARKER).exists():
            raise BadInputError(f"{root}: exists and is not a refstore demo folder; choose another --dir")
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / _MARKER).write_text("made by `refstore demo`; safe to delete\n")
    data, coll = root / "data", root / "collection"
    start = date(2024, 1, 1)

    files = write_series(data, days, start=start)
    tell(f"1. wrote {len(files)} OISST-like daily netCDF4 files to {data}")
    init(str(coll))
    rep = scan(str(coll), [str(data)], concat_dim="time")
    tell(f"2. scanned them into {coll}: version {rep.version}, {rep.inserted} chunk references")
    from .table import create_tag, diff

    create_tag(Collection.open(str(coll)), "first-release")
    tell(f"   tagged version {rep.version} as first-release")

    ds = open(str(coll))
    sst = ds["sst"]
    window = (slice(0, days), 0, slice(5, 40), slice(10, 70))
    got = sst[window]
    expected_parts = []
    for p in files:
        with h5py.File(p, "r") as f:
            expected_parts.append(f["sst"][:, 0, 5:40, 10:70])
    expected = np.concatenate(expected_parts, axis=0)
    read_ok = got.dtype == expected.dtype and np.array_equal(got, expected)
    tell(f"3. read sst{list(got.shape)} through the table: equal to h5py's reads: {read_ok}")

    v = verify(ds.snapshot)
    tell(f"4. verified {v.checked} chunks against h5py: {v.mismatched} mismatched")

    write_day(data / f"oisst-avhrr-v02r01.{start + timedelta(days=days):%Y%m%d}.nc", start + timedelta(days=days))
    rep2 = scan(str(coll), [str(data)])
    tell(
        f"5. next day arrived: rescan committed version {rep2.version} "
        f"({rep2.new} new, {rep2.unchanged} unchanged sources, +{rep2.inserted} refs)"
    )
    ds2 = open(str(coll))
    old_shape = list(open(str(coll), rep.version)["sst"].shape)
    tell(f"   sst is now {list(ds2['sst'].shape)}; version {rep.version} still reads {old_shape}")
    d = diff(Collection.open(str(coll)), "first-release")
    tell(
        f"   diff first-release -> latest: sources added {len(d.sources_added)}, "
        f"sst references added {d.arrays['sst']['added']}, removed {d.arrays['sst']['removed']}"
    )
    tagged = list(open(str(coll), "first-release")["sst"].shape)
    entries = log_entries(Collection.open(str(coll)))
    tell("6. log: " + "; ".join(f"v{e.version} {e.operation}" for e in entries))
    held_ok = _hold_demo(coll, data, tell)
    cog = _cog_series(root, tell)
    from ._demo_publish import publish_demo

    published = publish_demo(coll, root, tell)
    ok = (
        cog
        and published
        and held_ok
        and bool(
            read_ok
            and v.mismatched == 0
            and rep2.new == 1
            and rep2.unchanged == days
            and d.sources_added == [str(data / f"oisst-avhrr-v02r01.{start + timedelta(days=days):%Y%m%d}.nc")]
            and tagged[0] == days
        )
    )
    tell(f"demo {'succeeded' if ok else 'FAILED'}; try: refstore -C {coll} info")
    return {
        "ok": ok,
        "collection": str(coll),
        "data": str(data),
        "scan": rep.to_json(),
        "read_equal": read_ok,
        "verify": v.to_json(),
        "rescan": rep2.to_json(),
        "versions": [e.version for e in entries],
        "diff": d.to_json(),
        "cog_series_ok": cog,
        "hold_ok": held_ok,
        "published_ok": published,
    }

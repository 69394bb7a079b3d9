"""A published form reads what its version reads.

Hold, tag, reprocess the source with other values: ``refstore.open(as_of=tag)`` reads the held
(old) bytes, so every reference form of the tag carries them as bytes and, opened by its own
reader, equals h5py's read of the files *before* the rewrite (oracle arrays kept in the test).
The VRT cannot carry bytes: it refuses (or warns about) the changed source. A version whose
unheld source changed is refused at emit, naming the source, nothing written; ``on_stale``
``warn``/``ignore`` emit.
"""

from __future__ import annotations

import importlib
import re
import warnings
from datetime import date
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.errors import StaleSourceError, StaleSourceWarning, UnexpressibleError
from refstore.fixtures.oisst import write_day, write_series
from refstore.table import HoldSelection, create_tag, hold

from ._cli import invoke as run  # in this process: the commands are under test, not the process
from ._emit_cases import assert_same

REFERENCE_FORMS = ("kerchunk-json", "kerchunk-parquet", "icechunk", "parquet", "sqlite")
ALONG_TIME = ("time", "sst", "anom", "err", "ice")  # the rest (lat, lon, zlev, mask, meta/quality) come from day 1
DAY_2 = date(2024, 1, 2)


def _oracle(files: list[Path]) -> dict[str, np.ndarray[Any, Any]]:
    """h5py's raw values of every array over the files as they are now."""
    out: dict[str, np.ndarray[Any, Any]] = {}
    with h5py.File(files[0], "r") as first:
        names: list[str] = []
        first.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for name in names:
            if name in ALONG_TIME:
                parts = []
                for p in files:
                    with h5py.File(p, "r") as f:
                        parts.append(f[name][()])
                out[name] = np.concatenate(parts)
            else:
                out[name] = first[name][()]
    return out


@pytest.fixture
def reprocessed(tmp_path: Path) -> tuple[str, list[Path], dict[str, np.ndarray[Any, Any]]]:
    """A 2-day series scanned, every array held, tagged ``held``; then day 2 reprocessed with
    other values and rescanned. Returns the collection, the files and the oracle taken before."""
    files = write_series(tmp_path / "data", 2)
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in files], concat_dim="time")
    before = _oracle(files)
    c = refstore.Collection.open(col)
    hold(c, HoldSelection(arrays=tuple(refstore.open(col).arrays)))
    create_tag(c, "held")
    write_day(files[1], DAY_2, seed=9)
    after = _oracle(files)
    assert after["sst"].tobytes() != before["sst"].tobytes() and after["anom"].tobytes() != before["anom"].tobytes()
    refstore.scan(col, [str(p) for p in files])  # the collection moves on; the tag does not
    return col, files, before


def _reader(fmt: str) -> Any:
    return importlib.import_module(f"tests.readers.{fmt.replace('-', '_')}")


@pytest.mark.parametrize("fmt", REFERENCE_FORMS)
def test_form_of_a_held_tag_reads_the_held_bytes(reprocessed: Any, tmp_path: Path, fmt: str) -> None:
    col, _files, before = reprocessed
    ds = refstore.open(col, "held")
    assert_same(ds["sst"][...], before["sst"], "refstore as of the tag")
    out = str(tmp_path / f"out-{fmt}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleSourceWarning)
        rep = emit(refstore.Collection.open(col), fmt, out, as_of="held")  # no source is pointed at: no refusal
    assert not rep.skipped
    arrays = _reader(fmt).open_form(out, None)
    assert set(before) <= set(arrays)
    for name, want in before.items():
        assert_same(arrays[name][...], want, f"{fmt}:{name}")


def test_vrt_of_a_held_tag_refuses_the_changed_source(reprocessed: Any, tmp_path: Path) -> None:
    """GDAL reads the source files: held chunks cannot go into a VRT, so the changed source is
    refused by name (exit 2, nothing written); ``--on-stale warn`` writes it with a warning."""
    col, files, _before = reprocessed
    out = tmp_path / "out.vrt"
    r = run("-C", col, "emit", "vrt", str(out), "--as-of", "held")
    assert r.returncode == 2, r.stderr
    assert re.search(re.escape(str(files[1])) + r": changed since scan .*held chunks, which a VRT cannot carry",
                     r.stderr), r.stderr  # fmt: skip
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()
    r = run("-C", col, "emit", "vrt", str(out), "--as-of", "held", "--on-stale", "warn")
    assert r.returncode == 0 and out.exists(), r.stderr
    assert f"warning: {files[1]}: changed since scan" in r.stderr


@pytest.fixture
def changed(tmp_path: Path) -> tuple[str, list[Path]]:
    """A 2-day series tagged ``r1`` (nothing held), then day 2 reprocessed (not rescanned)."""
    files = write_series(tmp_path / "data", 2)
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in files], concat_dim="time")
    create_tag(refstore.Collection.open(col), "r1")
    write_day(files[1], DAY_2, seed=9)
    return col, files


@pytest.mark.parametrize("fmt", [*REFERENCE_FORMS, "vrt"])
def test_emit_refuses_a_changed_source(changed: Any, tmp_path: Path, fmt: str) -> None:
    col, files = changed
    c = refstore.Collection.open(col)
    out = tmp_path / f"out-{fmt}"
    with pytest.raises(StaleSourceError, match=re.escape(str(files[1])) + ": changed since scan"):
        emit(c, fmt, str(out), as_of="r1")
    assert not out.exists()
    with pytest.warns(StaleSourceWarning, match=re.escape(str(files[1]))):
        emit(c, fmt, str(tmp_path / f"warned-{fmt}"), as_of="r1", on_stale="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleSourceWarning)
        emit(c, fmt, str(out), as_of="r1", on_stale="ignore")
    assert out.exists()


def test_cli_emit_on_stale(changed: Any, tmp_path: Path) -> None:
    col, files = changed
    out = tmp_path / "out.json"
    r = run("-C", col, "emit", "kerchunk-json", str(out))
    assert r.returncode == 2 and not out.exists()
    assert r.stderr.startswith(f"refstore: error: {files[1]}: changed since scan") and "on_stale" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run("-C", col, "emit", "kerchunk-json", str(out), "--on-stale", "ignore")
    assert r.returncode == 0 and out.exists() and "warning" not in r.stderr, r.stderr
    r = run("-C", col, "emit", "kerchunk-json", str(out), "--on-stale", "sometimes")
    assert r.returncode == 2 and "on_stale must be one of error, warn, ignore" in r.stderr


def test_gone_source_refused_at_emit(changed: Any, tmp_path: Path) -> None:
    """A source that is gone is not the file the version recorded: refused, unless ignored."""
    col, files = changed
    files[0].unlink()
    c = refstore.Collection.open(col)
    with pytest.raises(StaleSourceError, match=re.escape(str(files[0])) + r": changed since scan \(source not found\)"):
        emit(c, "sqlite", str(tmp_path / "x.sqlite"), as_of="r1")
    emit(c, "sqlite", str(tmp_path / "x.sqlite"), as_of="r1", on_stale="ignore")


def test_partly_held_source_still_checked(tmp_path: Path) -> None:
    """Holding one array of a source does not excuse the references to its other arrays."""
    files = write_series(tmp_path / "data", 2)
    col = str(tmp_path / "col")
    refstore.init(col)
    refstore.scan(col, [str(p) for p in files], concat_dim="time")
    c = refstore.Collection.open(col)
    hold(c, HoldSelection(arrays=("sst",)))
    write_day(files[1], DAY_2, seed=9)
    with pytest.raises(StaleSourceError, match=re.escape(str(files[1]))):
        emit(c, "kerchunk-json", str(tmp_path / "x.json"))
    with pytest.raises(StaleSourceError, match=re.escape(str(files[1]))):
        emit(c, "kerchunk-json", str(tmp_path / "x.json"), skip_unexpressible=True)


def test_kerchunk_json_caps_held_bytes(reprocessed: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """Held chunks are inline base64 in kerchunk JSON, at most MAX_HELD_BYTES per array: beyond
    it the array is refused by name (``--skip-unexpressible`` leaves it out); kerchunk-parquet
    carries them."""
    from refstore.emit import kerchunk_json

    col, _files, before = reprocessed
    c = refstore.Collection.open(col)
    held = refstore.open(col, "held").snapshot.rows("chunk", ["array", "length"], "held_at >= 0").to_pylist()
    size: dict[str, int] = {}
    for r in held:
        size[r["array"]] = size.get(r["array"], 0) + r["length"]
    biggest = max(size, key=lambda n: size[n])
    monkeypatch.setattr(kerchunk_json, "MAX_HELD_BYTES", size[biggest] - 1)
    with pytest.raises(UnexpressibleError, match=f"array '{biggest}': its .* held chunks take .* kerchunk-parquet"):
        emit(c, "kerchunk-json", str(tmp_path / "x.json"), as_of="held")
    rep = emit(c, "kerchunk-json", str(tmp_path / "x.json"), as_of="held", skip_unexpressible=True)
    assert set(rep.skipped) == {biggest}
    out = str(tmp_path / "x.parq")
    emit(c, "kerchunk-parquet", out, as_of="held")
    assert_same(_reader("kerchunk-parquet").open_form(out, None)[biggest][...], before[biggest], biggest)


@pytest.mark.parametrize("fmt", ["kerchunk-json", "kerchunk-parquet", "parquet", "sqlite"])
def test_emit_of_held_tag_is_reproducible(reprocessed: Any, tmp_path: Path, fmt: str) -> None:
    """Held bytes are frozen by the version: the same tag gives byte-identical forms, whatever
    the sources do meanwhile."""
    from .test_emit_remap import _tree

    col, files, _before = reprocessed
    c = refstore.Collection.open(col)
    a, b = tmp_path / "a", tmp_path / "b"
    emit(c, fmt, str(a), as_of="held")
    write_day(files[0], date(2024, 1, 1), seed=5)  # the other day reprocessed too: nothing reaches the form
    emit(c, fmt, str(b), as_of="held")
    assert _tree(a) == _tree(b)

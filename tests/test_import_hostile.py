"""Hostile reference stores end in bounded time and memory with one line, exit 2 (issue 29, §3):
each runs the real command line in its own process, its peak memory measured."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ._cli import invoke
from ._faults import measured

ZARRAY = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|u1", "compressor": None, "fill_value": 0,
          "order": "C", "filters": None}  # fmt: skip


def _spec(refs: dict[str, object], **extra: object) -> dict[str, object]:
    base = {".zgroup": json.dumps({"zarr_format": 2}), "x/.zarray": json.dumps(ZARRAY),
            "x/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["x"]})}  # fmt: skip
    return {"version": 1, "refs": {**base, **refs}, **extra}


def _one_line(tmp_path: Path, text: str, *, named: str = "", max_chars: int = 4000, measure: bool = False) -> str:
    import refstore

    n = len(list(tmp_path.glob("store*.json")))
    store = tmp_path / f"store{n}.json"
    store.write_text(text)
    col = str(tmp_path / f"col{n}")
    refstore.init(col)
    args = ("-C", col, "import", "kerchunk", str(store))
    r, peak_mib, seconds = measured(*args) if measure else (invoke(*args), 0.0, 0.0)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.splitlines()) == 1 and len(r.stderr) < max_chars, r.stderr[:2000]
    assert named in r.stderr, r.stderr
    assert seconds < 60 and peak_mib < 1024, (seconds, peak_mib)
    return r.stderr


def test_a_gen_entry_of_a_billion_keys_is_refused_before_expanding(tmp_path: Path) -> None:
    gen = [{"key": "x/{{i}}", "url": "d.bin", "offset": "{{i}}", "length": "1",
            "dimensions": {"i": {"start": 0, "stop": 10**9}}}]  # fmt: skip
    _one_line(tmp_path, json.dumps(_spec({}, gen=gen)), named="1,000,000,000", measure=True)


def test_a_gen_range_in_a_template_over_100000_is_one_line(tmp_path: Path) -> None:
    gen = [{"key": "x/{{i}}", "url": "{{ range(1000000) | list | length }}.bin",
            "dimensions": {"i": [0]}}]  # fmt: skip
    _one_line(tmp_path, json.dumps(_spec({}, gen=gen)), named="gen")


@pytest.mark.parametrize("where", ["top", "zattrs"])
def test_json_nested_too_deeply_is_one_line(tmp_path: Path, where: str) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    if where == "top":
        _one_line(tmp_path, deep, named="nested too deeply")
    else:
        _one_line(tmp_path, json.dumps(_spec({"x/.zattrs": '{"a": ' + deep + "}"})), named="nested too deeply")


@pytest.mark.parametrize("url", ["d\x00.bin", "d\n.bin", "/etc/passwd\r\nX-Injected: 1"])
def test_a_url_with_control_characters_is_one_line(tmp_path: Path, url: str) -> None:
    _one_line(tmp_path, json.dumps(_spec({"x/0": [url, 0, 4]})), named="control characters")


def test_a_huge_template_gives_a_short_error(tmp_path: Path) -> None:
    templates = {"u": "a" * 100_000_000}
    _one_line(tmp_path, json.dumps(_spec({"x/0": ["{{u}}", 0, 4]}, templates=templates)), named="100,000,000",
              measure=True)
    gen = [{"key": "x/{{i}}", "url": "{{ 'b' * 100000000 }}", "dimensions": {"i": [0]}}]
    _one_line(tmp_path, json.dumps(_spec({}, gen=gen)), named="characters")


def _huge(tmp_path: Path, chunks: int, second: int) -> tuple[str, bytes]:
    """A collection importing a uint8 array of shape [2^40, 2^40] with ``chunks`` square chunks
    and two references: chunk (0, 0) and chunk (``second``, 7), the two halves of one file."""
    import refstore

    size = chunks * chunks
    data = bytes(np.random.default_rng(5).integers(0, 256, 2 * size, dtype=np.uint8))
    (tmp_path / "d.bin").write_bytes(data)
    zarray = {**ZARRAY, "shape": [2**40, 2**40], "chunks": [chunks, chunks]}
    refs = {"x/.zarray": json.dumps(zarray), "x/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["y", "x"]}),
            "x/0.0": ["d.bin", 0, size], f"x/{second}.7": ["d.bin", size, size]}  # fmt: skip
    (tmp_path / "big.json").write_text(json.dumps(_spec(refs)))
    col = str(tmp_path / "col")
    refstore.init(col)
    r = invoke("-C", col, "import", "kerchunk", str(tmp_path / "big.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return col, data


def test_an_array_whose_chunk_keys_pass_32_bits_is_unsupported_and_refused_in_one_line(tmp_path: Path) -> None:
    """Chunks of 1: 2^40 chunks along each axis, more than the collection's 32-bit keys hold."""
    import refstore

    col, _ = _huge(tmp_path, 1, 5)
    meta = refstore.Collection.open(col).snapshot().array("x")
    assert meta.status == "unsupported" and "2^31" in str(meta.reason)
    for args in (["hold", "--array", "x"], ["coverage", "x", "--out", str(tmp_path / "c.png")],
                 ["emit", "icechunk", str(tmp_path / "o.icechunk")]):  # fmt: skip
        r = invoke("-C", col, *args)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "2^31" in r.stderr, (args, r.stderr)


def test_a_sparse_array_of_2_40_squared_emits_holds_and_refuses_a_picture_in_bounds(tmp_path: Path) -> None:
    """Chunks of 1024: a grid of 2^30 x 2^30 with two references. Emit Icechunk (zarr-python
    reads the two chunks back as the file's bytes) and hold work; coverage refuses in one line;
    each in bounded time and memory."""
    pytest.importorskip("icechunk")
    import icechunk as ic
    import zarr

    col, data = _huge(tmp_path, 1024, 10**9)
    out = tmp_path / "o.icechunk"
    r, peak, seconds = measured("-C", col, "emit", "icechunk", str(out))
    assert r.returncode == 0 and seconds < 60 and peak < 1024, (r.stderr, seconds, peak)
    assert r.stderr == "", r.stderr  # no Icechunk WARN block, no deprecation (explicit local credentials)
    access = {f"file://{tmp_path}/": ic.credentials.LocalFileSystemAccess}
    repo = ic.Repository.open(ic.local_filesystem_storage(str(out)), authorize_virtual_chunk_access=access)
    x = zarr.open_group(repo.readonly_session("main").store, mode="r")["x"]
    assert x.shape == (2**40, 2**40) and x.dtype == np.uint8
    first = np.frombuffer(data[: 1024 * 1024], np.uint8).reshape(1024, 1024)
    second = np.frombuffer(data[1024 * 1024 :], np.uint8).reshape(1024, 1024)
    assert np.array_equal(x[0:1024, 0:1024], first)
    y0, x0 = 10**9 * 1024, 7 * 1024
    assert np.array_equal(x[y0 : y0 + 1024, x0 : x0 + 1024], second)
    assert x[1024, 1024] == 0  # absent: the fill value
    r, peak, seconds = measured("-C", col, "coverage", "x", "--out", str(tmp_path / "c.png"))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "more than a picture shows" in r.stderr
    assert seconds < 60 and peak < 1024, (seconds, peak)
    r = invoke("-C", col, "hold", "--array", "x", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["chunks"] == 2, r.stderr

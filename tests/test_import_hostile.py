"""Hostile reference stores end in bounded time and memory with one line, exit 2 (issue 29, §3):
each runs the real command line in its own process, its peak memory measured."""

from __future__ import annotations

import json
from pathlib import Path

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

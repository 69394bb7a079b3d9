"""The collection itself on S3 (``refstore -C s3://bucket/prefix ...``), sources on S3, against a
real S3 server on loopback; credentials never land in anything refstore writes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import h5py
import numpy as np

from ._cli import invoke as run  # in this process: the commands are under test, not the process
from ._oracle import assert_same
from ._s3 import S3


def _ok(*args: str) -> str:
    r = run(*args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def test_collection_on_s3_end_to_end(s3: S3, series, tmp_path: Path) -> None:
    files = series(3)
    s3.upload(files[0].parent, "data")
    col = s3.url("collections/oisst")
    outputs: list[str] = []

    outputs.append(_ok("-C", col, "init"))
    rep = json.loads(_ok("-C", col, "scan", s3.url("data/"), "--concat-dim", "time", "--json"))
    assert rep["sources"]["new"] == 3 and rep["committed"]
    assert any(k.startswith("collections/oisst/_versions/") for k in s3.keys("collections/oisst/"))

    info = json.loads(_ok("-C", col, "info", "--json"))
    assert info["sources"] == 3 and info["arrays"]["sst"]["shape"] == [3, 1, 45, 90]

    box = tmp_path / "box.npy"
    outputs.append(_ok("-C", col, "read", "sst", "--window", "0:3,0,5:40,10:80", "--out", str(box)))
    expected = []
    for p in files:
        with h5py.File(p) as f:
            expected.append(f["sst"][:, 0, 5:40, 10:80])  # an integer index drops its axis, as in numpy
    assert_same(np.load(box), np.concatenate(expected), "read --window --out")

    v = json.loads(_ok("-C", col, "verify", "--json"))
    assert v["checked"] > 20 and v["mismatched"] == 0

    outputs.append(_ok("-C", col, "tag", "first"))
    outputs.append(_ok("-C", col, "remap", "add", s3.url("data/"), "https://example.org/data/"))
    emitted = tmp_path / "oisst.json"
    outputs.append(_ok("-C", col, "emit", "kerchunk-json", str(emitted)))
    doc = json.loads(emitted.read_text())
    urls = sorted({v[0] for v in doc["refs"].values() if isinstance(v, list)})
    assert urls == [f"https://example.org/data/{p.name}" for p in files]
    assert "s3://" not in emitted.read_text()
    emitted_files = [emitted]
    if importlib.util.find_spec("refstore.emit.kerchunk_parquet") is not None:
        pq_out = tmp_path / "oisst.parq"
        outputs.append(_ok("-C", col, "emit", "kerchunk-parquet", str(pq_out)))
        emitted_files += [p for p in pq_out.rglob("*") if p.is_file()] if pq_out.is_dir() else [pq_out]

    # a fourth day lands: one new version; diff against the tag sees it
    more = series(4, folder="more")
    s3.put(f"data/{more[3].name}", more[3])
    rep = json.loads(_ok("-C", col, "scan", s3.url("data/"), "--json"))
    assert (rep["sources"]["new"], rep["sources"]["unchanged"]) == (1, 3)
    d = json.loads(_ok("-C", col, "diff", "first", "--json"))
    assert d["sources"]["added"] == [s3.url(f"data/{more[3].name}")] and d["differs"]
    outputs.append(_ok("-C", col, "log", "--json"))

    # overwrite one object with bytes of the same size: only the etag tells; reads refuse it
    raw = bytearray(files[1].read_bytes())
    with h5py.File(files[1]) as f:
        off = f["err"].id.get_offset()  # contiguous float32 data
    raw[off] ^= 0xFF
    s3.put(f"data/{files[1].name}", bytes(raw))
    r = run("-C", col, "read", "err", "--window", "1", "--out", str(tmp_path / "err.npy"))
    assert r.returncode == 2 and "changed since scan (etag" in r.stderr, r.stderr
    outputs.append(r.stderr)
    # and so does an emit of a version that points at it (nothing written)
    after = tmp_path / "after.json"
    r = run("-C", col, "emit", "kerchunk-json", str(after), "--as-of", "first")
    assert r.returncode == 2 and f"{s3.url('data/' + files[1].name)}: changed since scan (etag" in r.stderr, r.stderr
    assert not after.exists()
    outputs.append(r.stderr)

    # gc on S3: old versions and their files go (manifests first), the tagged one still reads
    before = len(s3.keys("collections/oisst/data/"))
    rep = json.loads(_ok("-C", col, "gc", "--grace", "0", "--json"))
    assert rep["versions_removed"] and rep["files_removed"] > 0
    assert len(s3.keys("collections/oisst/data/")) < before
    assert json.loads(_ok("-C", col, "info", "--as-of", "first", "--json"))["sources"] == 3

    # credentials are never written: not into the collection, the log, nor any emitted file
    secret = s3.secret.encode()
    keys = s3.keys("collections/")
    assert len(keys) > 5
    for k in keys:
        assert secret not in s3.get(k), k
    for p in emitted_files:
        assert secret not in p.read_bytes(), p
    for text in outputs:
        assert s3.secret not in text

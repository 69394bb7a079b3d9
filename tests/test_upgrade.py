"""A collection written by refstore in format 1 (``tests/format1/``, made by the refstore of
that format): read and verified as it is, upgraded to format 2 by the first write, in one
version, with its tag still readable and verified. Values against h5py over the same days
written again; digests against hashlib's SHA-256 and the blake3 package over the bytes Lance
returns for each held chunk."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import blake3
import lance
import numpy as np
import pytest

import refstore
from refstore import _held_digest
from refstore.fixtures.oisst import write_day
from refstore.table import HoldSelection, hold, log_entries

from ._cli import invoke as run
from ._oracle import assert_same, series_read

FORMAT1 = Path(__file__).parent / "format1" / "collection"
DAYS = (date(2024, 1, 1), date(2024, 1, 2))


@pytest.fixture
def col(tmp_path: Path) -> str:
    dst = tmp_path / "col"
    shutil.copytree(FORMAT1, dst)
    return str(dst)


def _days(folder: Path, days: tuple[date, ...] = DAYS) -> list[str]:
    folder.mkdir(exist_ok=True)
    return [str(write_day(folder / f"oisst-{d:%Y%m%d}.nc", d)) for d in days]


def _held(uri: str, version: int | str | None = None) -> dict[str, tuple[str, bytes]]:
    """Per held chunk row (array, key): its digest as stored and its bytes as Lance returns them."""
    ds = lance.dataset(uri)
    if version is not None:
        ds = ds.checkout_version(version)
    name = "held_sha256" if "held_sha256" in ds.schema.names else "held_digest"
    t = ds.to_table(columns=["array", "g0", "g2", "g3", name], filter="kind = 'chunk' AND held_at >= 0",
                    with_row_id=True)  # fmt: skip
    blobs = ds.read_blobs("held", ids=t.column("_rowid"), preserve_order=True)
    keys = zip(t.column("array").to_pylist(), t.column("g0").to_pylist(), t.column("g2").to_pylist(),
               t.column("g3").to_pylist(), strict=True)  # fmt: skip
    return {k: (d, raw) for k, d, (_a, raw) in zip(keys, t.column(name).to_pylist(), blobs, strict=True)}


def _verify(uri: str, *args: str) -> tuple[int, dict[str, Any]]:
    r = run("-C", uri, "verify", "--json", *args)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)


def test_a_format_1_collection_is_read_and_verified_as_it_is(col: str, tmp_path: Path) -> None:
    before = lance.dataset(col).version
    want = _days(tmp_path / "again")  # the same two days: the oracle's values
    for as_of in (None, "release-1"):
        ds = refstore.open(col, as_of)
        assert_same(ds["sst"][...], series_read(want, "sst", "time"), f"sst as of {as_of}")
        assert_same(ds["anom"][0:1], series_read(want[:1], "anom", "time"), f"anom as of {as_of}")
    held = _held(col)
    assert len(held) == 12 + 9  # sst: 6 written chunks a day; anom: 9 chunks of the first day
    assert all(d == hashlib.sha256(raw).hexdigest() for d, raw in held.values())
    for as_of, n in ((None, 21), ("release-1", 30)):
        code, rep = _verify(col, *(["--as-of", as_of] if as_of else []))
        assert code == 2  # the sources are gone: held chunks are checked from their bytes alone
        assert rep["held"] == {"checked": n, "checksum_only": n, "mismatched": 0, "mismatches": []}
    ds = lance.dataset(col)
    assert ds.version == before and ds.schema.metadata[b"refstore.format_version"] == b"1"  # reads write nothing


def test_the_first_write_upgrades_in_one_version_and_the_tag_stays_format_1(col: str, tmp_path: Path) -> None:
    old = _held(col)
    day3 = _days(tmp_path / "new", (date(2024, 1, 3),))
    r = run("-C", col, "scan", "--concat-dim", "time", day3[0])
    assert r.returncode == 0, r.stderr
    entries = log_entries(refstore.Collection.open(col))
    assert [e.operation for e in entries[:3]] == ["scan", "upgrade", "release"]
    assert entries[1].record == {"from_format": 1, "to_format": 2} and entries[1].version == 5
    ds = lance.dataset(col)
    assert ds.schema.metadata[b"refstore.format_version"] == b"2"
    assert "held_digest" in ds.schema.names and "held_sha256" not in ds.schema.names
    assert _held(col) == old  # the digests and bytes held in format 1, kept as they were

    rep = hold(refstore.Collection.open(col), HoldSelection(arrays=("sst",), window=(slice(2, 3), Ellipsis)))
    assert rep.chunks == 6
    now = _held(col)
    new = {k: v for k, v in now.items() if k not in old}
    assert len(new) == 6 and {k[1] for k in new} == {2}
    assert all(d == "blake3:" + blake3.blake3(raw).hexdigest() for d, raw in new.values())

    want = series_read([*_days(tmp_path / "again"), *day3], "sst", "time")
    Path(day3[0]).rename(tmp_path / "gone.nc")  # every sst chunk is held now: no source needed
    assert_same(refstore.open(col)["sst"][...], want, "sst after the upgrade")
    code, rep_now = _verify(col)
    assert code == 2  # unheld chunks of sources now gone
    assert rep_now["held"] == {"checked": 27, "checksum_only": 27, "mismatched": 0, "mismatches": []}
    code, rep_tag = _verify(col, "--as-of", "release-1")
    assert code == 2
    assert rep_tag["held"] == {"checked": 30, "checksum_only": 30, "mismatched": 0, "mismatches": []}
    assert lance.dataset(col).checkout_version("release-1").schema.metadata[b"refstore.format_version"] == b"1"


def test_held_bytes_of_format_1_that_no_longer_match_their_sha256_are_found(col: str, tmp_path: Path) -> None:
    """After the upgrade, one format-1 row's held bytes are replaced through Lance under its old
    bare SHA-256 digest: verify reports exactly that chunk."""
    from .test_verify import _rewrite_chunk_row

    r = run("-C", col, "release", "--array", "anom")  # a write: the upgrade
    assert r.returncode == 0, r.stderr
    (key, (digest, raw)), *_ = sorted(_held(col).items())
    assert len(digest) == 64 and key[0] == "sst"
    where = f"array = 'sst' AND g0 = {key[1]} AND g2 = {key[2]} AND g3 = {key[3]}"
    _rewrite_chunk_row(col, where, held=bytes(b ^ 1 for b in raw))
    code, rep = _verify(col)
    assert code == 1 and rep["held"]["mismatched"] == 1
    (m,) = rep["held"]["mismatches"]
    assert m["chunk"] == [key[1], 0, key[2], key[3]] and m["reason"] == "held bytes differ from their checksum"


def test_two_writers_upgrading_at_once_make_one_upgrade(col: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second writer's upgrade, computed on format 1, commits after the first one's: Lance
    refuses it, it looks again and finds the collection upgraded."""
    from refstore.table import _upgrade

    c = refstore.Collection.open(col)
    real = _upgrade._commit
    calls: list[int] = []

    def racing(col_: Any, txn: Any) -> int:
        calls.append(txn.read_version)
        if len(calls) == 1:  # the other writer gets in first, from the same version
            monkeypatch.setattr(_upgrade, "_commit", real)
            assert _upgrade.upgrade(refstore.Collection.open(col)) == 5
            monkeypatch.setattr(_upgrade, "_commit", racing)
        return real(col_, txn)

    monkeypatch.setattr(_upgrade, "_commit", racing)
    assert _upgrade.upgrade(c) is None
    assert calls == [4]
    assert [e.operation for e in log_entries(c)][:2] == ["upgrade", "release"]
    assert lance.dataset(col).version == 5


def test_held_digest_matches() -> None:
    raw = np.arange(1000, dtype="<i4").tobytes()
    bad = raw[:-1] + b"\x01"
    for digest in ("blake3:" + blake3.blake3(raw).hexdigest(), "sha256:" + hashlib.sha256(raw).hexdigest(),
                   hashlib.sha256(raw).hexdigest()):  # fmt: skip
        assert _held_digest.matches(digest, raw) and not _held_digest.matches(digest, bad)
    for digest in ("", "md5:" + hashlib.md5(raw).hexdigest(), blake3.blake3(raw).hexdigest()[:63]):
        assert not _held_digest.matches(digest, raw)


def test_a_format_1_collection_on_s3_is_upgraded_by_its_first_write(s3: Any) -> None:
    """The same collection in a bucket of a real S3 server on loopback: the upgrade commits
    through the object store as any write does; the tag keeps format 1 and verifies."""
    s3.upload(FORMAT1, "collections/format1")
    col = s3.url("collections/format1")
    r = run("-C", col, "remap", "add", "/tmp/refstore-format1-sources/", "https://example.org/oisst/", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"] == 6  # 5: the upgrade
    r = run("-C", col, "log", "--json")
    assert [e["operation"] for e in json.loads(r.stdout)[:2]] == ["remap add", "upgrade"]
    for as_of, n in ((None, 21), ("release-1", 30)):
        code, rep = _verify(col, *(["--as-of", as_of] if as_of else []))
        assert code == 2 and rep["held"] == {"checked": n, "checksum_only": n, "mismatched": 0, "mismatches": []}

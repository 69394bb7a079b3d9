"""References are untrusted input (issue 29, §2): an imported store may point only into its own
folder (or bucket) and the prefixes the user allows (``--allow``); ``..``, device and kernel
files never; ``scan`` of a folder follows a symbolic link out of it only with ``--follow-links``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import refstore
from refstore.imports import import_kerchunk

from ._cli import invoke


def _store(path: Path, location: str, length: int = 4) -> Path:
    """A kerchunk JSON store with one uint8 array ``x`` whose one chunk is ``location``'s first bytes."""
    zarray = {"zarr_format": 2, "shape": [length], "chunks": [length], "dtype": "|u1", "compressor": None,
              "fill_value": 0, "order": "C", "filters": None}  # fmt: skip
    refs = {".zgroup": json.dumps({"zarr_format": 2}), "x/.zarray": json.dumps(zarray),
            "x/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["x"]}), "x/0": [location, 0, length]}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "refs": refs}))
    return path


def _refused(col: str, store: Path, named: str, *extra: str) -> None:
    r = invoke("-C", col, "import", "kerchunk", str(store), *extra)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and named in r.stderr, r.stderr
    assert refstore.Collection.open(col).latest_version == 1  # nothing committed


@pytest.fixture
def private(tmp_path: Path) -> Path:
    p = tmp_path / "home" / "secret.txt"
    p.parent.mkdir()
    p.write_bytes(b"root:x:0:0 private")
    return p


@pytest.mark.parametrize("location", ["/etc/passwd", "file:///etc/passwd", "../../../../../../etc/passwd",
                                      "/dev/urandom", "/proc/self/environ", "/sys/kernel/uevent_seqnum",
                                      "SECRET", "file://SECRET"])  # fmt: skip
def test_a_store_cannot_reference_files_outside_its_folder(tmp_path, new_collection, private, location) -> None:
    location = location.replace("SECRET", str(private))
    store = _store(tmp_path / "downloads" / "evil.json", location)
    col = new_collection()
    _refused(col, store, location)
    if location.startswith(("/dev", "/proc", "/sys", "..")):  # never, whatever is allowed
        _refused(col, store, location, "--allow", "/")
    with pytest.raises(refstore.RefstoreError, match="references"):
        import_kerchunk(refstore.Collection.open(col), str(store), allow=[str(tmp_path / "downloads")])


def test_allowed_prefixes_and_the_stores_own_folder_are_read(tmp_path, new_collection, private) -> None:
    inside = tmp_path / "pub" / "data" / "d.bin"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(bytes(range(10, 20)))
    col = new_collection()
    r = invoke("-C", col, "import", "kerchunk", str(_store(tmp_path / "pub" / "refs.json", str(inside))))
    assert r.returncode == 0, r.stderr
    assert refstore.open(col)["x"][...].tolist() == list(inside.read_bytes()[:4])
    store = _store(tmp_path / "pub" / "other.json", str(private))
    _refused(new_collection("c2"), store, str(private))
    for allow in (str(private.parent), str(private.parent) + "/", "file://" + str(private.parent)):
        col = str(tmp_path / f"c-{len(allow)}")
        refstore.init(col)
        r = invoke("-C", col, "import", "kerchunk", str(store), "--allow", "/nowhere", "--allow", allow)
        assert r.returncode == 0, r.stderr
        got = refstore.open(col)["x"][...]
        assert got.dtype == np.uint8 and got.tobytes() == private.read_bytes()[:4]
    # a prefix is a folder, not a string prefix: /home-other is not under /home
    sibling = tmp_path / "home-other" / "f.bin"
    sibling.parent.mkdir()
    sibling.write_bytes(b"abcd")
    col = new_collection("c3")
    _refused(col, _store(tmp_path / "pub" / "sib.json", str(sibling)), str(sibling), "--allow", str(private.parent))


def test_a_symbolic_link_in_the_stores_folder_to_a_file_outside_is_refused(tmp_path, new_collection, private) -> None:
    link = tmp_path / "pub" / "link.bin"
    link.parent.mkdir()
    link.symlink_to(private)
    col = new_collection()
    _refused(col, _store(tmp_path / "pub" / "refs.json", str(link)), str(link))
    r = invoke("-C", col, "import", "kerchunk", str(tmp_path / "pub" / "refs.json"), "--allow", str(private.parent))
    assert r.returncode == 0, r.stderr


def test_a_device_file_in_the_stores_folder_is_refused(tmp_path, new_collection) -> None:
    fifo = tmp_path / "pub" / "pipe.bin"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    col = new_collection()
    _refused(col, _store(tmp_path / "pub" / "refs.json", str(fifo)), "not a regular file")


def test_icechunk_virtual_chunks_outside_the_repository_folder_need_allow(series, new_collection, tmp_path) -> None:
    pytest.importorskip("icechunk")
    import h5py

    files = series(2)
    col = new_collection()
    refstore.scan(col, [str(files[0].parent)], concat_dim="time")
    out = tmp_path / "pub" / "o.icechunk"
    out.parent.mkdir()
    assert invoke("-C", col, "emit", "icechunk", str(out)).returncode == 0
    target = new_collection("imported")
    r = invoke("-C", target, "import", "icechunk", str(out))
    assert r.returncode == 2 and str(files[0].parent) in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = invoke("-C", target, "import", "icechunk", str(out), "--allow", str(files[0].parent))
    assert r.returncode == 0, r.stderr
    expected = np.concatenate([h5py.File(p)["sst"][()] for p in files])
    got = refstore.open(target)["sst"][...]
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_scan_of_a_folder_does_not_follow_a_link_out_of_it_unless_asked(series, new_collection, tmp_path) -> None:
    import h5py

    files = series(2)
    folder = tmp_path / "scanned"
    folder.mkdir()
    os.link(files[0], folder / files[0].name)  # inside (a hard link: the folder's own file)
    (folder / files[1].name).symlink_to(files[1])  # out of the folder
    col = new_collection()
    r = invoke("-C", col, "scan", str(folder), "--concat-dim", "time", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["sources"]["new"] == 1
    failed = {f["source"]: f["reason"] for f in rep["failed"]}
    assert any(files[1].name in k and "--follow-links" in v for k, v in failed.items()), rep
    assert refstore.open(col)["sst"].shape[0] == 1
    r = invoke("-C", col, "scan", str(folder), "--concat-dim", "time", "--follow-links")
    assert r.returncode == 0, r.stderr
    expected = np.concatenate([h5py.File(p)["sst"][()] for p in files])
    got = refstore.open(col)["sst"][...]
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    col2 = new_collection("strict")
    r = invoke("-C", col2, "scan", str(folder), "--strict")
    assert r.returncode == 2 and files[1].name in r.stderr and len(r.stderr.strip().splitlines()) == 1

"""What an emit may replace at OUT (``emit/_common.py``): refused cases exit 2 with one line
naming OUT and leave OUT (and the folder around it) exactly as they were; a previous output of
the same form is replaced; OS errors are one line, not a traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import refstore
from refstore.emit import emit
from refstore.errors import BadInputError, StorageError
from refstore.fixtures.tiff import write_tiff

from ._cli import invoke as run  # in this process: the commands are under test, not the process


@pytest.fixture
def col(tmp_path: Path) -> tuple[str, Path]:
    """A one-TIFF collection and its source."""
    (tmp_path / "src").mkdir()
    src = write_tiff(tmp_path / "src" / "img.tif", np.arange(48 * 40, dtype="u2").reshape(48, 40), tile=(16, 16))
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(src)])
    return uri, src


def _state(folder: Path) -> dict[str, Any]:
    """Every entry under ``folder``: its kind and, for files, its bytes."""
    out: dict[str, Any] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root, name)
            mode = os.lstat(p).st_mode
            kind = stat.S_IFMT(mode)
            out[str(p.relative_to(folder))] = (kind, p.read_bytes() if stat.S_ISREG(mode) else None)
    return out


def _refused(uri: str, fmt: str, out: Path, match: str, *, cli: bool = False) -> None:
    """``emit FMT OUT`` is refused with one line naming OUT (exit 2 through the CLI) and
    changes nothing around OUT."""
    around = out.parent
    before = _state(around)
    if cli:
        r = run("-C", uri, "emit", fmt, str(out))
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        message = r.stderr.strip()
    else:
        with pytest.raises((BadInputError, StorageError)) as e:
            emit(refstore.Collection.open(uri), fmt, str(out))
        message = str(e.value)
    lines = message.splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and match in lines[0], message
    assert _state(around) == before


def test_a_folder_with_other_files_is_not_replaced(col: tuple[str, Path], tmp_path: Path) -> None:
    uri, _ = col
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (mine / "sub").mkdir()
    (mine / "sub" / "data.bin").write_bytes(b"\x00\x01")
    _refused(uri, "kerchunk-parquet", mine, "not a kerchunk-parquet output", cli=True)
    _refused(uri, "icechunk", mine, "not an Icechunk repository")
    _refused(uri, "kerchunk-json", mine, "is a folder", cli=True)  # a file form never replaces a folder
    _refused(uri, "vrt", mine / "sub", "is a folder")


def test_a_previous_output_of_the_same_form_is_replaced(col: tuple[str, Path], tmp_path: Path) -> None:
    uri, _ = col
    c = refstore.Collection.open(uri)
    out = tmp_path / "out.parq"
    emit(c, "kerchunk-parquet", str(out))
    first = _state(out)
    emit(c, "kerchunk-parquet", str(out))
    assert _state(out) == first  # replaced by the same bytes
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left
    # a previous output with a stranger's file in it is no longer refstore's to delete
    (out / "image" / "notes.txt").write_text("mine")
    _refused(uri, "kerchunk-parquet", out, "not a kerchunk-parquet output")
    # another folder form's output is not this form's
    ice = tmp_path / "repo"
    emit(c, "icechunk", str(ice))
    _refused(uri, "kerchunk-parquet", ice, "not a kerchunk-parquet output")
    empty = tmp_path / "empty"
    empty.mkdir()
    emit(c, "kerchunk-parquet", str(empty))
    assert (empty / ".zmetadata").is_file()


def test_file_and_folder_never_replace_each_other(col: tuple[str, Path], tmp_path: Path) -> None:
    uri, _ = col
    f = tmp_path / "precious.txt"
    f.write_text("precious")
    _refused(uri, "kerchunk-parquet", f, "is a file", cli=True)
    c = refstore.Collection.open(uri)
    with pytest.raises(BadInputError, match="is a file"):
        emit(c, "icechunk", str(f))
    empty = tmp_path / "empty"
    empty.mkdir()
    for fmt in ("kerchunk-json", "parquet", "sqlite", "vrt"):
        with pytest.raises(BadInputError, match="is a folder"):
            emit(c, fmt, str(empty))
    assert f.read_text() == "precious" and list(empty.iterdir()) == []


FILE_FORMS = ("kerchunk-json", "parquet", "sqlite", "vrt")


def test_a_file_refstore_did_not_write_is_never_overwritten(col: tuple[str, Path], tmp_path: Path) -> None:
    """Issue 13.4: `emit parquet notes.txt` and `emit vrt copy.nc` overwrote a user's file."""
    uri, src = col
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me")
    copy = tmp_path / "copy.tif"
    copy.write_bytes(src.read_bytes())
    other = tmp_path / "other.json"  # another tool's kerchunk JSON: not refstore's to replace
    other.write_text('{"version":1,"refs":{".zgroup":"{\\"zarr_format\\":2}"}}')
    for fmt in FILE_FORMS:
        _refused(uri, fmt, notes, "refstore did not write", cli=fmt in ("parquet", "vrt"))
        _refused(uri, fmt, copy, "refstore did not write")
    _refused(uri, "kerchunk-json", other, "refstore did not write", cli=True)
    c = refstore.Collection.open(uri)
    outs = {fmt: tmp_path / f"out-{fmt}" for fmt in FILE_FORMS}
    for fmt, out in outs.items():
        emit(c, fmt, str(out))
    for fmt, out in outs.items():
        first = out.read_bytes()
        r = run("-C", uri, "emit", fmt, str(out))  # a previous output of the same form is replaced
        assert r.returncode == 0, r.stderr
        assert out.read_bytes() == first
        for other_fmt in FILE_FORMS:  # ...but not by another form
            if other_fmt != fmt:
                _refused(uri, other_fmt, out, "refstore did not write")


def test_only_regular_files_are_replaced(col: tuple[str, Path], tmp_path: Path) -> None:
    uri, _ = col
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _refused(uri, "kerchunk-json", fifo, "not a regular file", cli=True)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    _refused(uri, "kerchunk-json", link, "symbolic link")
    c = refstore.Collection.open(uri)
    for fmt in ("kerchunk-parquet", "icechunk", "sqlite", "vrt"):
        with pytest.raises(BadInputError, match="not a regular file"):
            emit(c, fmt, str(fifo))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()


def test_out_is_never_the_collection_or_a_source(col: tuple[str, Path], tmp_path: Path) -> None:
    uri, src = col
    before = src.read_bytes()
    _refused(uri, "kerchunk-json", src, "is a source of version", cli=True)
    _refused(uri, "kerchunk-json", Path(uri) / "out.json", "inside the collection folder", cli=True)
    _refused(uri, "kerchunk-parquet", Path(uri), "inside the collection folder")
    c = refstore.Collection.open(uri)
    with pytest.raises(BadInputError, match="holds the collection"):
        emit(c, "icechunk", str(tmp_path))
    # the same source under another name (through a symlinked folder)
    (tmp_path / "alias").symlink_to(src.parent)
    with pytest.raises(BadInputError, match="is a source"):
        emit(c, "vrt", str(tmp_path / "alias" / src.name))
    assert src.read_bytes() == before


def test_os_errors_are_one_line(col: tuple[str, Path], tmp_path: Path) -> None:
    uri, _ = col
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    _refused(uri, "kerchunk-json", blocker / "out.json", "cannot create its folder", cli=True)
    _refused(uri, "vrt", tmp_path / ("n" * 300), "cannot inspect it")  # ENAMETOOLONG
    c = refstore.Collection.open(uri)
    long_ok = tmp_path / ("o" * 250)  # a legal name: the temporary beside it must be legal too
    emit(c, "vrt", str(long_ok))
    assert long_ok.is_file()
    if os.geteuid() != 0:  # root writes into read-only folders
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            with pytest.raises(StorageError, match="cannot write beside it"):
                emit(c, "kerchunk-json", str(ro / "out.json"))
        finally:
            ro.chmod(0o755)


def test_outputs_get_the_umask_permissions(col: tuple[str, Path], tmp_path: Path) -> None:
    uri, _ = col
    c = refstore.Collection.open(uri)
    old = os.umask(0o022)
    try:
        emit(c, "kerchunk-json", str(tmp_path / "a.json"))
        emit(c, "kerchunk-parquet", str(tmp_path / "a.parq"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a.json").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "a.parq").st_mode) == 0o755

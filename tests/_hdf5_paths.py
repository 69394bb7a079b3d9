"""The HDF5 scanner's two ways through a file, for tests that check both: ``bytes`` (the
object header bytes read directly, as for a local file) and ``hdf5`` (no header reader: every
answer from HDF5, as for a remote file)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from refstore.scan import hdf5

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from refstore.scan._types import ScanResult


@contextlib.contextmanager
def scan_path(kind: str) -> Iterator[None]:
    """``bytes``: the scan as for a local file; ``hdf5``: no header reader (as for a remote file)."""
    with pytest.MonkeyPatch.context() as mp:
        if kind == "hdf5":
            mp.setattr(hdf5, "_header_reader", lambda location, stack: None)
        yield


def scan(path: Path, kind: str) -> ScanResult:
    with scan_path(kind):
        return hdf5.HDF5Scanner()(str(path))

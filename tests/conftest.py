"""Shared test fixtures: real files from ../shared/data (skipped where absent) and generated series."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from ._s3 import s3, s3_server  # noqa: F401  (fixtures: a loopback S3 server, a bucket with the AWS env set)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# No per-example deadline: the properties are about values, and a deadline only measures the load
# of the machine the suite shares (examples of test_import's slab property failed at load ~10).
settings.register_profile("refstore", deadline=None)
settings.load_profile("refstore")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("REFSTORE_SHARED_DATA", REPO.parent / "shared" / "data"))


def shared_files() -> list[Path]:
    """The files of ../shared/data outside its zoo (``zoo/`` is the conformance matrix's corpus,
    ``./dev conform``, which classifies every array of every zoo file; CI runs it after the tests)."""
    if not SHARED_DATA.is_dir():
        return []
    zoo = SHARED_DATA / "zoo"
    return [p for p in sorted(SHARED_DATA.rglob("*")) if p.is_file() and not p.is_relative_to(zoo)]


def hdf5_files_in_shared() -> list[Path]:
    out = []
    for p in shared_files():
        if p.suffix.lower() in (".nc", ".h5", ".hdf5", ".he5", ".nc4", ".cdf"):
            with open(p, "rb") as fh:
                if fh.read(8) == b"\x89HDF\r\n\x1a\n":
                    out.append(p)
    return out


def netcdf3_files_in_shared() -> list[Path]:
    out = []
    for p in shared_files():
        with open(p, "rb") as fh:
            head = fh.read(4)
        if head[:3] == b"CDF" and head[3:4] in (b"\x01", b"\x02", b"\x05"):
            out.append(p)
    return out


@pytest.fixture(scope="session", autouse=True)
def _scans_in_this_process() -> Iterator[None]:
    """``refstore.scan`` called by a test without ``timeout`` scans in the test's own process
    (``timeout=None``), not in a worker process with a deadline: a worker's interpreter start
    costs ~0.8 s per scan, and most tests check what a scan records, not how it is supervised.
    The worker path stays covered where it matters: every ``refstore scan`` command (the CLI
    passes its ``--timeout``), ``test_hostile`` (hangs, crashes), ``test_series``'s parallel
    scan, and every test passing ``timeout`` itself (``timeout=DEFAULT_TIMEOUT``: the default)."""
    import functools

    import refstore

    real = refstore.scan

    @functools.wraps(real)
    def scan(*args: Any, **kw: Any) -> Any:
        kw.setdefault("timeout", None)
        return real(*args, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(refstore, "scan", scan)
        yield


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture
def new_collection(tmp_path: Path) -> Callable[[str], str]:
    import refstore

    def make(name: str = "col") -> str:
        path = str(tmp_path / name)
        refstore.init(path)
        return path

    return make


@pytest.fixture
def series(tmp_path: Path) -> Callable[..., list[Path]]:
    from refstore.fixtures.oisst import write_series

    def make(days: int = 4, folder: str = "data", **kw: object) -> list[Path]:
        return write_series(tmp_path / folder, days, **kw)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def emit_cases(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Every collection the emitted forms and the zarr/xarray readers are checked on (built once)."""
    from ._emit_cases import build_cases

    return build_cases(tmp_path_factory.mktemp("emit-cases"))


@pytest.fixture
def packing_era_series(tmp_path: Path) -> tuple[str, list[Path]]:
    """An OISST-like series of 3 days whose last day packs sst with another scale_factor (two
    eras), scanned along time: ``(collection uri, files)``."""
    import h5py
    import numpy as np

    import refstore
    from refstore.fixtures.oisst import write_series

    days = write_series(tmp_path / "data", 3)
    with h5py.File(days[2], "r+") as f:
        f["sst"].attrs["scale_factor"] = np.float32(0.02)
    uri = str(tmp_path / "col")
    refstore.init(uri)
    refstore.scan(uri, [str(p) for p in days], concat_dim="time")
    return uri, days

"""Finding sources and describing them (size, mtime, etag) before any scan."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import BadInputError, ScanError
from ._types import SourceInfo

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["HDF5_EXTENSIONS", "SOURCE_EXTENSIONS", "expand_sources", "local_source_info", "normalize_location"]

HDF5_EXTENSIONS = (".nc", ".nc4", ".h5", ".hdf5", ".he5", ".hdf", ".cdf", ".netcdf")
SOURCE_EXTENSIONS = (*HDF5_EXTENSIONS, ".nc3", ".tif", ".tiff", ".gtiff", ".cog")


def normalize_location(location: str) -> str:
    """Locations are kept as scanned; local paths are made absolute so reads work anywhere."""
    if "://" in location:
        if location.startswith("file://"):
            return os.path.abspath(location[len("file://") :])
        return location
    return os.path.abspath(location)


def local_source_info(location: str) -> SourceInfo:
    try:
        st = os.stat(location)
    except OSError as e:
        raise ScanError(location, f"cannot read: {e.strerror or e}") from None
    return SourceInfo(location=location, size=int(st.st_size), mtime_ns=int(st.st_mtime_ns), etag=None)


def expand_sources(inputs: Iterable[str], *, extensions: tuple[str, ...] = SOURCE_EXTENSIONS) -> list[str]:
    """Files as given, folders walked recursively (sorted) for files with a known extension."""
    out: list[str] = []
    seen: set[str] = set()
    for item in inputs:
        loc = normalize_location(item)
        if "://" in loc:
            raise BadInputError(f"{item}: object-store sources are not supported by this scanner yet")
        if os.path.isdir(loc):
            found = []
            for root, dirs, files in os.walk(loc):
                dirs.sort()
                for name in sorted(files):
                    if name.lower().endswith(extensions) and not name.startswith("."):
                        found.append(os.path.join(root, name))
            if not found:
                raise BadInputError(f"{item}: folder holds no files ending in {', '.join(extensions)}")
            candidates = found
        elif os.path.exists(loc):
            candidates = [loc]
        else:
            raise BadInputError(f"{item}: no such file or folder")
        for c in candidates:
            if any(ord(ch) < 32 or ord(ch) == 127 for ch in c):
                raise BadInputError(f"{c!r}: a path with control characters cannot be addressed for reading; rename it")
            if c not in seen:
                seen.add(c)
                out.append(c)
    return out

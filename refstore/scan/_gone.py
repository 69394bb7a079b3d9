"""Recorded sources that are no longer where they were scanned: what ``scan --prune`` removes.

Only sources under the paths being scanned count: under a folder given (local files that no
longer exist), under an object-store prefix given (objects its listing no longer holds), or a
recorded file or object named directly that no longer exists. A folder or prefix that is gone as a whole,
or holds no source files at all, is refused by the listing before this is asked (an unmounted
disk must never read as "every file was deleted").
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .. import _objstore
from ..errors import SourceReadError
from ._sources import SOURCE_EXTENSIONS, normalize_location

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

__all__ = ["gone_named", "gone_under"]


def _exists(location: str) -> bool:
    """Whether the source is still there (``os.path.lexists``, or one HEAD request: only "not
    found" counts as gone, any other failure as there)."""
    if not _objstore.is_remote(location):
        return os.path.lexists(location)
    try:
        _objstore.head(location)
    except SourceReadError as e:
        return not str(e).endswith(": source not found")
    return True


def gone_named(inputs: Iterable[str], known: Collection[str]) -> list[str]:
    """Files or objects named directly among ``inputs`` that are recorded (``known``) but no longer exist."""
    out: list[str] = []
    for item in inputs:
        loc = normalize_location(item)
        if loc in known and loc not in out and _prefix(item) is None and not _exists(loc):
            out.append(loc)
    return out


def _prefix(item: str) -> str | None:
    """The folder or prefix ``item`` names, with a trailing separator; None for a single file."""
    loc = normalize_location(item)
    if _objstore.is_remote(loc):
        name = loc.rstrip("/").rsplit("/", 1)[-1]
        one_file = not loc.endswith("/") and name.lower().endswith(SOURCE_EXTENSIONS)
        if one_file or loc.startswith(("http://", "https://")):
            return None
        return loc if loc.endswith("/") else loc + "/"
    return loc.rstrip(os.sep) + os.sep if os.path.isdir(loc) else None


def gone_under(inputs: Iterable[str], found: Collection[str], known: Iterable[str]) -> list[str]:
    """Recorded sources under the folders/prefixes among ``inputs`` that the listing (``found``)
    no longer holds and that no longer exist (sorted)."""
    prefixes = [p for p in (_prefix(x) for x in inputs) if p is not None]
    out = set()
    for loc in known:
        if loc in found or not any(loc.startswith(p) for p in prefixes):
            continue
        if _objstore.is_remote(loc) or not _exists(loc):
            out.add(loc)
    return sorted(out)

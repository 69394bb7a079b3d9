"""Which locations an imported store may reference: a reference store is untrusted input.

A kerchunk file or an Icechunk repository names the files its chunks are read from; imported as
they are, a store downloaded from anywhere could make ``read``, ``hold`` and ``emit`` read and
publish any file the user can read (``/etc/shadow``, ``~/.ssh``). As Icechunk's virtual chunk
containers must be authorized by the reader, an import accepts only locations under:

- the store's own place: the folder holding a local store (a JSON file, a Parquet folder, a
  repository folder), the bucket of an object-store URL, the folder of an HTTP(S) URL;
- the prefixes the user allows (``--allow PREFIX``, ``allow=``).

Always refused, whatever is allowed: a path with a ``..`` segment (it climbs out of what the
prefix names), device and kernel files (``/dev``, ``/proc``, ``/sys``), and a local location
whose real path (symbolic links resolved) leaves the allowed prefixes. The first offending
location (in the store's order) is named; nothing is read from it.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _objstore
from .._quote import quote
from ..errors import BadInputError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["Trusted", "check_locations", "store_place"]

_CONTROL = re.compile("[\x00-\x1f\x7f]")

_SYSTEM = ("/dev", "/proc", "/sys")
"""Local trees never read as sources: devices and the kernel's views (``/proc/self/environ``...)."""


def _local(location: str) -> str | None:
    if location.startswith("file://"):
        return location[len("file://") :]
    return None if _objstore.is_remote(location) else location


def _climbs(location: str) -> bool:
    path = location.split("://", 1)[-1].split("?", 1)[0]
    return ".." in path.replace("\\", "/").split("/")


def _under(path: str, prefix: str) -> bool:
    return path == prefix.rstrip("/") or path.startswith(prefix if prefix.endswith("/") else prefix + "/")


def store_place(store: str) -> str:
    """The store's own place: the folder holding a local store, an object store's bucket, an
    HTTP(S) URL's folder."""
    path = _local(store)
    if path is not None:
        return os.path.dirname(os.path.abspath(path).rstrip("/")) + "/"
    scheme, _, rest = store.partition("://")
    if scheme in ("http", "https"):
        return store.rsplit("/", 1)[0] + "/"
    return f"{scheme}://{rest.split('/', 1)[0]}/"


@dataclass(frozen=True, slots=True)
class Trusted:
    """Allowed prefixes: local ones absolute, each also as its real path (symbolic links resolved)."""

    local: tuple[str, ...]
    remote: tuple[str, ...]

    @classmethod
    def of(cls, store: str, allow: Sequence[str] = ()) -> Trusted:
        local: list[str] = []
        remote: list[str] = []
        for prefix in (store_place(store), *allow):
            if not prefix:
                raise BadInputError("--allow: give a folder or URL prefix, not an empty string")
            if _climbs(prefix) or _CONTROL.search(prefix):
                raise BadInputError(f"--allow {quote(prefix)}: a prefix with '..' segments or control characters "
                                  "is refused; name the folder itself")  # fmt: skip
            path = _local(prefix)
            if path is None:
                remote.append(prefix)
            else:
                absolute = os.path.abspath(path)
                local += [absolute, os.path.realpath(absolute)]
        return cls(tuple(local), tuple(remote))

    def refusal(self, location: str) -> str | None:
        """Why ``location`` may not be read (None: it may)."""
        if _CONTROL.search(location):
            return "a location with control characters (a NUL byte, a newline)"
        if _climbs(location):
            return "a path that climbs out with '..'"
        path = _local(location)
        if path is None:
            return None if any(_under(location, p) for p in self.remote) else "outside the allowed locations"
        absolute = os.path.abspath(path)
        real = os.path.realpath(absolute)
        if any(_under(p, s) for p in (absolute, real) for s in _SYSTEM):
            return "a device or kernel file"
        if not any(_under(absolute, p) for p in self.local):
            return "outside the allowed locations"
        if not any(_under(real, p) for p in self.local):
            return f"a symbolic link to {real}, outside the allowed locations"
        try:
            mode = os.stat(real).st_mode
        except OSError:
            return None  # missing: identifying the sources says so
        return None if stat.S_ISREG(mode) else "not a regular file"


def check_locations(store: str, locations: Iterable[str], allow: Sequence[str] = ()) -> None:
    """``BadInputError`` naming the first of ``locations`` the store may not reference."""
    trusted = Trusted.of(store, allow)
    for loc in locations:
        why = trusted.refusal(loc)
        if why is not None:
            raise BadInputError(
                f"{quote(store)}: references {quote(loc)}, {why}; only the store's own folder or bucket "
                f"({quote(store_place(store))}) and prefixes given with --allow are read"
            )

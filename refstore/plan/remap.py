"""Remap rules (pure): a source location as scanned -> the location a published form points at.

Rules are ``(prefix, replacement)`` pairs; the longest matching prefix wins and replaces exactly
that prefix. A prefix matches at a path boundary only: it equals the location, ends with ``/``,
or the location goes on with ``/`` there (``/data`` matches ``/data/x.nc``, never
``/database/x.nc``). A local path and its ``file://`` URL name the same location: prefixes and
locations are compared in one canonical form (local paths absolute, without ``file://``), so
either spelling of a prefix matches. Applied at emit only; the table keeps locations verbatim.

Locations follow fsspec's spelling: local paths, ``file://``, ``s3://``, ``gs://``, ``az://``...
name keys literally (``s3://b/a b#1.nc`` is the key ``a b#1.nc``), ``http(s)://`` locations are
URLs (percent-encoded). The part of a location after the prefix is converted between the two
(``urllib.parse.quote(rest, safe="/")`` / ``unquote``) when the replacement is of the other kind.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadInputError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "RemapRule",
    "apply_remap",
    "canonical_location",
    "canonical_prefix",
    "check_replacement",
    "remap_one",
    "to_url",
]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_ENCODED = ("http://", "https://")
"""Schemes whose locations are percent-encoded URLs; every other scheme names keys literally."""


@dataclass(frozen=True, slots=True)
class RemapRule:
    """``prefix`` in canonical form (see :func:`canonical_prefix`); ``replacement`` verbatim."""

    prefix: str
    replacement: str

    def to_json(self) -> dict[str, str]:
        return {"prefix": self.prefix, "replacement": self.replacement}


def _is_url(s: str) -> bool:
    return bool(_SCHEME.match(s)) and not s.startswith("file://")


def _encoded(s: str) -> bool:
    return s.lower().startswith(_ENCODED)


def canonical_location(location: str) -> str:
    """A location in the form the table stores: URLs verbatim; ``file://`` URLs and local paths
    as absolute paths."""
    if _is_url(location):
        return location
    path = location[len("file://") :] if location.startswith("file://") else location
    return os.path.abspath(path) if not path.startswith("/") else path


def canonical_prefix(prefix: str) -> str:
    """A rule prefix in canonical form; a trailing ``/`` is kept."""
    if not prefix:
        raise BadInputError("remap prefix: must not be empty")
    if _is_url(prefix):
        return prefix
    path = prefix[len("file://") :] if prefix.startswith("file://") else prefix
    if not path:
        raise BadInputError(f"remap prefix {prefix!r}: no path")
    trailing = path.endswith("/")
    out = os.path.abspath(path)  # normpath for an absolute path
    if out == "//":
        out = "/"
    return out + "/" if trailing and not out.endswith("/") else out


def check_replacement(replacement: str) -> str:
    """``replacement`` if it is a URL (``scheme://``) or an absolute local path (or a
    ``file://`` URL of one); else :class:`BadInputError` (a relative path would be resolved
    against whatever folder a reader happens to run in)."""
    if not replacement:
        raise BadInputError("remap replacement: must not be empty")
    if replacement.startswith("file://"):
        ok = replacement[len("file://") :].startswith("/")
    else:
        ok = _is_url(replacement) or replacement.startswith("/")
    if not ok:
        raise BadInputError(f"remap replacement {replacement!r}: give a URL (scheme://...) or an absolute path")
    return replacement


def _matches(location: str, prefix: str) -> bool:
    if not location.startswith(prefix):
        return False
    return len(location) == len(prefix) or prefix.endswith("/") or location[len(prefix)] == "/"


def remap_one(location: str, rules: Sequence[RemapRule]) -> str:
    """The published location of one source: longest matching prefix replaced, else verbatim."""
    best: RemapRule | None = None
    for r in rules:
        if _matches(location, r.prefix) and (best is None or len(r.prefix) > len(best.prefix)):
            best = r
    if best is None:
        return location
    repl = check_replacement(best.replacement)
    rest = location[len(best.prefix) :]
    if _encoded(repl) and not _encoded(location):
        rest = quote(rest, safe="/")
    elif _encoded(location) and not _encoded(repl):
        rest = unquote(rest)
    if repl.endswith("/") and rest.startswith("/"):
        rest = rest[1:]
    return repl + rest


def apply_remap(locations: pa.Array | pa.ChunkedArray, rules: Sequence[RemapRule]) -> pa.Array:
    """Remap a column of locations (work per distinct location, not per row). Returns a
    dictionary-encoded string array in the same order."""
    if isinstance(locations, pa.ChunkedArray):
        locations = locations.combine_chunks()
    if pa.types.is_dictionary(locations.type):
        dict_arr = locations
    else:
        dict_arr = pc.dictionary_encode(locations)
    uniq = dict_arr.dictionary.to_pylist()
    pubs = [remap_one(u, rules) for u in uniq]
    new = pa.array(pubs, pa.string())
    # identical published locations for distinct sources would merge them silently: refuse.
    # Compared canonically, so /a/x.nc and file:///a/x.nc are one location.
    seen: dict[str, str] = {}
    for old, pub in zip(uniq, pubs, strict=True):
        key = canonical_location(pub)
        if key in seen:
            raise BadInputError(f"remap rules map both {seen[key]} and {old} to {key}")
        seen[key] = old
    return pa.DictionaryArray.from_arrays(dict_arr.indices, new)


def to_url(location: str) -> str:
    """A URL for a published location: local paths become ``file://`` + the path as it is (not
    percent-encoded: fsspec and refstore read ``file://`` paths literally; the Icechunk form
    encodes what Icechunk parses as URL syntax)."""
    if _SCHEME.match(location):
        return location
    return "file://" + location

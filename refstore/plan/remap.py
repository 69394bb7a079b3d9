"""Remap rules (pure): a source location as scanned -> the location a published form points at.

Rules are ``(prefix, replacement)`` pairs; the longest matching prefix wins and replaces exactly
that prefix. A local path and its ``file://`` URL name the same location: prefixes and
locations are compared in one canonical form (local paths absolute, without ``file://``), so
either spelling of a prefix matches. Applied at emit only; the table keeps locations verbatim.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadInputError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["RemapRule", "apply_remap", "canonical_location", "canonical_prefix", "remap_one", "to_url"]


@dataclass(frozen=True, slots=True)
class RemapRule:
    """``prefix`` in canonical form (see :func:`canonical_prefix`); ``replacement`` verbatim."""

    prefix: str
    replacement: str

    def to_json(self) -> dict[str, str]:
        return {"prefix": self.prefix, "replacement": self.replacement}


def _is_url(s: str) -> bool:
    return "://" in s and not s.startswith("file://")


def canonical_location(location: str) -> str:
    """A location in the form the table stores: URLs verbatim; ``file://`` URLs and local paths
    as absolute paths."""
    if _is_url(location):
        return location
    path = location[len("file://") :] if location.startswith("file://") else location
    return os.path.abspath(path) if not path.startswith("/") else path


def canonical_prefix(prefix: str) -> str:
    """A rule prefix in canonical form; a trailing ``/`` is kept (``/data/`` does not match
    ``/database``)."""
    if not prefix:
        raise BadInputError("remap prefix: must not be empty")
    if _is_url(prefix):
        return prefix
    path = prefix[len("file://") :] if prefix.startswith("file://") else prefix
    if not path:
        raise BadInputError(f"remap prefix {prefix!r}: no path")
    trailing = path.endswith("/")
    out = os.path.abspath(path) if not path.startswith("/") else os.path.normpath(path)
    if out == "//":
        out = "/"
    return out + "/" if trailing and not out.endswith("/") else out


def remap_one(location: str, rules: Sequence[RemapRule]) -> str:
    """The published location of one source: longest matching prefix replaced, else verbatim."""
    best: RemapRule | None = None
    for r in rules:
        if location.startswith(r.prefix) and (best is None or len(r.prefix) > len(best.prefix)):
            best = r
    return location if best is None else best.replacement + location[len(best.prefix) :]


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
    new = pa.array([remap_one(u, rules) for u in uniq], pa.string())
    indices = dict_arr.indices
    # identical published names for distinct sources would merge them silently: refuse
    if len(set(new.to_pylist())) != len(uniq):
        seen: dict[str, str] = {}
        for old, pub in zip(uniq, new.to_pylist(), strict=True):
            if pub in seen:
                raise BadInputError(f"remap rules map both {seen[pub]} and {old} to {pub}")
            seen[pub] = old
    return pa.DictionaryArray.from_arrays(indices, new)


def to_url(location: str) -> str:
    """A URL for a published location: local paths become ``file://`` URLs."""
    if "://" in location:
        return location
    return "file://" + location

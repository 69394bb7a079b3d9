"""How a version is named: a version number, a tag name, or ``latest`` (the newest version)."""

from __future__ import annotations

__all__ = ["LATEST", "tag_name"]

LATEST = "latest"
"""The reference that names the newest version wherever a REF is taken (never a tag name)."""


def tag_name(ref: int | str | None) -> str | None:
    """``ref`` when it names a tag (not a version number, not ``latest``), else None.

    >>> tag_name("release-1"), tag_name("3"), tag_name("latest"), tag_name(None)
    ('release-1', None, None, None)
    """
    return ref if isinstance(ref, str) and not ref.isdigit() and ref != LATEST else None

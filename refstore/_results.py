"""Typed results of :class:`refstore.Collection` calls that the layers below return as plain
values (dicts, ints). Each is a frozen dataclass with ``to_json()``: the JSON the matching
command prints with ``--json`` (``cli-contract.md``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report.coverage import Coverage
    from .report.picture import Picture

__all__ = [
    "Commit",
    "CompactReport",
    "CoverageReport",
    "GcReport",
    "Info",
    "PageReport",
    "RepairReport",
    "Tag",
    "TagDeleted",
]


@dataclass(frozen=True, slots=True)
class Info:
    """One version described: its arrays (dims, shape, chunks, dtype, fill value, codecs,
    attributes, status) and counts. ``refs``: chunk rows (references and inline chunks);
    ``held_chunks`` / ``held_bytes``: chunks whose bytes the collection holds, and their bytes.

    >>> info = col.info()                        # doctest: +SKIP
    >>> info.arrays["sst"]["shape"], info.held_bytes  # doctest: +SKIP
    ([30, 1, 720, 1440], 0)
    """

    version: int
    sources: int
    refs: int
    held_chunks: int
    held_bytes: int
    concat_dim: str | None
    arrays: dict[str, dict[str, Any]]
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Info:
        """From ``_report.info_report``'s dict."""
        return cls(version=int(data["version"]), sources=int(data["sources"]), refs=int(data["refs"]),
                   held_chunks=int(data["held"]["chunks"]), held_bytes=int(data["held"]["bytes"]),
                   concat_dim=data.get("concat_dim"), arrays=data["arrays"], data=data)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return self.data


@dataclass(frozen=True, slots=True)
class Tag:
    """A tag: ``name`` names version ``version`` (immutable)."""

    name: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


@dataclass(frozen=True, slots=True)
class TagDeleted:
    """A deleted tag and the version it named (the version itself stays)."""

    name: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"deleted": self.name, "version": self.version}


@dataclass(frozen=True, slots=True)
class Commit:
    """The version a change made (``remap_add``, ``remap_remove``)."""

    version: int

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version}


@dataclass(frozen=True, slots=True)
class CompactReport:
    """``version`` after compaction, ``versions_added`` by it; fragments removed and added."""

    version: int
    versions_added: int
    fragments_removed: int
    fragments_added: int
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> CompactReport:
        """From ``table.compact``'s dict (kept whole for ``to_json``)."""
        return cls(version=int(data["version"]), versions_added=int(data["versions_added"]),
                   fragments_removed=int(data["fragments_removed"]), fragments_added=int(data["fragments_added"]),
                   data=data)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return self.data


@dataclass(frozen=True, slots=True)
class GcReport:
    """Versions removed and kept; files and bytes removed; ``grace_seconds`` the grace period;
    ``kept_by_grace``: untagged versions beyond ``keep_last`` kept only because they are younger
    than the grace period."""

    versions_removed: tuple[int, ...]
    versions_kept: tuple[int, ...]
    files_removed: int
    bytes_removed: int
    grace_seconds: float
    kept_by_grace: tuple[int, ...]
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, data: dict[str, Any], kept_by_grace: tuple[int, ...]) -> GcReport:
        """From ``table.gc``'s dict (kept whole for ``to_json``)."""
        return cls(versions_removed=tuple(data["versions_removed"]), versions_kept=tuple(data["versions_kept"]),
                   files_removed=int(data["files_removed"]), bytes_removed=int(data["bytes_removed"]),
                   grace_seconds=float(data["grace_seconds"]), kept_by_grace=kept_by_grace,
                   data={**data, "kept_by_grace": list(kept_by_grace)})  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return self.data


@dataclass(frozen=True, slots=True)
class RepairReport:
    """``version``: the latest version after the call; ``restored``: the version made latest
    again (None: the latest read, nothing done); ``unreadable``: the versions that miss files."""

    version: int
    restored: int | None
    unreadable: tuple[int, ...]
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> RepairReport:
        """From ``table.repair``'s dict (kept whole for ``to_json``)."""
        restored = data.get("restored")
        return cls(version=int(data["version"]), restored=None if restored is None else int(restored),
                   unreadable=tuple(int(v) for v in data.get("unreadable") or ()), data=data)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return self.data


@dataclass(frozen=True, slots=True)
class CoverageReport:
    """A coverage picture written to ``out``: the chunk states (``coverage``) and the picture's
    geometry (``picture``)."""

    out: str
    coverage: Coverage
    picture: Picture

    def to_json(self) -> dict[str, Any]:
        return {"out": self.out, **self.coverage.to_json(), "picture": self.picture.to_json()}


@dataclass(frozen=True, slots=True)
class PageReport:
    """An HTML report written to ``out``: ``version`` (and ``tag``) shown, its ``arrays`` and
    the number of coverage ``pictures`` on the page."""

    out: str
    version: int
    tag: str | None
    arrays: tuple[str, ...]
    pictures: int
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, data: dict[str, Any]) -> PageReport:
        """From ``report.html.write_report``'s summary (kept whole for ``to_json``)."""
        return cls(out=str(data["out"]), version=int(data["version"]), tag=data.get("tag"),
                   arrays=tuple(data["arrays"]), pictures=int(data["pictures"]), data=data)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return self.data

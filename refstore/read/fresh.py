"""The one freshness check: is a source still the file its version recorded?

Every path that fetches source bytes (the direct reader, the zarr store, the xarray backend
through the direct reader, ``hold``, ``verify``'s reads) or publishes references to them
(``emit``) asks a :class:`SourceCheck`; ``scan`` and ``verify`` sort sources with the same
comparison (``fetch.change_since_scan``). A source row records size, mtime (ns) and etag at
scan time; the check makes one metadata request (``os.stat`` locally, ``HEAD`` on object
stores) and compares with ``fetch.source_change`` (and the content digest when ``scan
--checksum`` recorded one). The policy is one of :data:`STALE_POLICIES`: ``error`` raises
``StaleSourceError`` naming the source, ``warn`` issues a ``StaleSourceWarning`` and goes on,
``ignore`` makes no request at all.

How long a result is trusted: the life of one ``SourceCheck``, which its owner keeps for one
operation only — one read (``Array.read``), one batch of the zarr store (a ``get_many``, or the
``get`` calls zarr makes in one event-loop turn), one ``hold``, one ``emit``. A store or dataset
kept open checks again on its next read, so a source rewritten meanwhile is refused, not read.
Cost: one ``stat``/``HEAD`` per source per operation.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Final

from ..errors import BadInputError, SourceMissingError, StaleSourceError, StaleSourceWarning
from .fetch import source_change

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .fetch import Fetcher

__all__ = ["STALE_POLICIES", "SourceCheck", "check_policy"]

STALE_POLICIES: Final = ("error", "warn", "ignore")

Recorded = tuple[int, int, str]
"""(size in bytes, mtime in ns or -1, etag or "") as the scan recorded it."""
Now = tuple[int, int | None, str | None]
"""(size in bytes, mtime in ns or None, etag or None) as a metadata request gives it."""

_ADVICE: Final = {
    "read": "rescan it, or read with on_stale='warn' or 'ignore'",
    "hold": "rescan it before holding (nothing was held)",
    "emit": "rescan it, or emit with on_stale='warn' or 'ignore' (nothing was written)",
}


def check_policy(on_stale: str) -> str:
    """``on_stale`` itself, or ``BadInputError`` naming the allowed values."""
    if on_stale not in STALE_POLICIES:
        raise BadInputError(f"on_stale must be one of {', '.join(STALE_POLICIES)}, not {on_stale!r}")
    return on_stale


class SourceCheck:
    """Sources checked against their scan under one policy, each at most once in this object's
    life (one operation; see the module doc).

    ``recorded``: location -> :data:`Recorded` of the version (``Snapshot.source_identity``);
    locations it does not know are not checked. ``fetcher``: its ``head`` is the metadata
    request; ``checksums``: content digests recorded by ``scan --checksum`` (``source_change``
    then also compares the file's digest). ``action``: ``read``, ``hold`` or ``emit``, for the
    advice that ends the message; for ``emit`` a source that is gone counts as changed (the form would point at
    nothing), elsewhere it raises ``SourceMissingError`` as the fetch would; other metadata
    errors (permissions, network) always raise. ``hold`` only takes
    ``error``: held bytes must be the bytes the version's references describe."""

    def __init__(
        self,
        recorded: Mapping[str, Recorded],
        fetcher: Fetcher,
        *,
        checksums: Mapping[str, str] | None = None,
        on_stale: str = "error",
        action: str = "read",
    ) -> None:
        self.on_stale = check_policy(on_stale)
        if action not in _ADVICE or (action == "hold" and on_stale != "error"):
            raise BadInputError(f"no stale-source check for {action!r} with on_stale={on_stale!r}")
        self._recorded = recorded
        self._fetcher = fetcher
        self._checksums = checksums or {}
        self._action = action
        self._done: set[str] = set()

    def __call__(self, location: str, *, note: str = "") -> None:
        """Check ``location`` (once per object): raise, warn or pass by the policy; ``note`` is
        said before the advice."""
        if self.on_stale == "ignore" or location in self._done:
            return
        known = self._recorded.get(location)
        if known is None:
            self._done.add(location)
            return
        try:
            why = source_change(self._fetcher, location, known, self._checksums.get(location))
        except SourceMissingError as e:
            if self._action != "emit":
                raise
            why = str(e).removeprefix(f"{location}: ")
        self._done.add(location)
        if why is None:
            return
        msg = f"{location}: changed since scan ({why}); {note + '; ' if note else ''}{_ADVICE[self._action]}"
        if self.on_stale == "error":
            raise StaleSourceError(msg)
        warnings.warn(msg, StaleSourceWarning, stacklevel=3)

    def all(self, locations: Iterable[str], *, note: str = "") -> None:
        """Check each of ``locations`` in order (the first stale one raises under ``error``)."""
        for loc in locations:
            self(loc, note=note)

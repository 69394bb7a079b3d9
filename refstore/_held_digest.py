"""Checksums of held bytes (the ``held_digest`` column): what ``hold`` records and ``verify``
checks, so that held bytes whose source is gone can still be told intact.

Written as ``blake3:<hex>`` (format 2). BLAKE3 is a cryptographic digest like SHA-256, at 0.26 s
of CPU per GiB of 64 KiB chunks here against SHA-256's 0.62 s (OpenSSL with SHA-NI); on 2 cores
that CPU is taken from Lance's writer, and a hold of 1 GiB took 0.71-0.80 s against 0.98-1.15 s
(``design/hold.md``). Format-1 rows, renamed from ``held_sha256`` by the upgrade, hold a bare
SHA-256 hex digest; both are checked.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import blake3
import pyarrow as pa

if TYPE_CHECKING:
    import numpy as np

__all__ = ["digests", "matches"]

_BARE_SHA256 = re.compile(r"[0-9a-f]{64}")


def digests(buf: memoryview, pos: np.ndarray[Any, Any]) -> pa.Array:
    """``blake3:<hex>`` of every value ``buf[pos[i]:pos[i+1]]`` (one thread: ``hold`` hashes
    whole batches in threads of their own; blake3 releases the GIL)."""
    bounds = pos.tolist()
    return pa.array(
        [f"blake3:{blake3.blake3(buf[bounds[i] : bounds[i + 1]]).hexdigest()}" for i in range(len(bounds) - 1)],
        pa.string(),
    )


def matches(digest: str, raw: bytes) -> bool:
    """Whether ``raw`` has the recorded ``digest``: ``blake3:<hex>``, ``sha256:<hex>``, or a bare
    SHA-256 hex digest (a format-1 row). An unknown form never matches."""
    algo, sep, want = digest.partition(":")
    if not sep:
        algo, want = ("sha256", digest) if _BARE_SHA256.fullmatch(digest) else ("", "")
    if algo == "blake3":
        return blake3.blake3(raw).hexdigest() == want
    if algo == "sha256":
        return hashlib.sha256(raw).hexdigest() == want
    return False

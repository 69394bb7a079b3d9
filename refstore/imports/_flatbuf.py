"""Just enough of the flatbuffers wire format to read Icechunk manifests (tables, vectors,
strings, inline structs), with the field numbers of Icechunk's published schema
(``icechunk-format/flatbuffers/manifest.fbs``). Icechunk's Python API has no call that returns
a virtual reference's location and byte range, so the manifest files are read directly.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["MANIFEST", "Table", "manifest_payload"]

_MAGIC = "ICE🧊CHUNK".encode()
_HEADER = 39
"""Icechunk file header: 12 magic bytes, 24 bytes of writer id, spec version, file type,
compression (``design-docs/004-binary-format.md``); the payload follows."""

MANIFEST = 2
"""The header's file type of a manifest."""


def manifest_payload(raw: bytes, *, what: str) -> bytes:
    """The flatbuffer of an Icechunk file: header checked, zstd payload decompressed.
    ``ValueError`` naming ``what`` when it is not an Icechunk manifest."""
    if len(raw) < _HEADER or not raw.startswith(_MAGIC):
        raise ValueError(f"{what}: not an Icechunk file")
    kind, compression = raw[37], raw[38]
    if kind != MANIFEST:
        raise ValueError(f"{what}: Icechunk file of type {kind}, not a manifest")
    body = raw[_HEADER:]
    if compression == 0:
        return body
    if compression != 1:
        raise ValueError(f"{what}: unknown compression {compression}")
    import imagecodecs

    try:
        return bytes(imagecodecs.zstd_decode(body))
    except Exception as e:  # imagecodecs.ZstdError: a damaged file
        raise ValueError(f"{what}: its zstd payload cannot be decompressed ({e})") from None


@dataclass(frozen=True, slots=True)
class Table:
    """A flatbuffers table at ``pos`` of ``buf``."""

    buf: bytes
    pos: int

    @classmethod
    def root(cls, buf: bytes) -> Table:
        return cls(buf, struct.unpack_from("<I", buf, 0)[0])

    def _field(self, i: int) -> int:
        """Position of field ``i``'s slot, 0 when absent."""
        vt = self.pos - struct.unpack_from("<i", self.buf, self.pos)[0]
        vt_size = struct.unpack_from("<H", self.buf, vt)[0]
        at = 4 + 2 * i
        if at >= vt_size:
            return 0
        off = struct.unpack_from("<H", self.buf, vt + at)[0]
        return self.pos + off if off else 0

    def has(self, i: int) -> bool:
        return self._field(i) != 0

    def scalar(self, i: int, fmt: str, default: int = 0) -> int:
        p = self._field(i)
        return int(struct.unpack_from("<" + fmt, self.buf, p)[0]) if p else default

    def inline_bytes(self, i: int, n: int) -> bytes | None:
        """A struct of ``n`` bytes stored in the table (ObjectId8/12)."""
        p = self._field(i)
        return self.buf[p : p + n] if p else None

    def _target(self, i: int) -> int:
        p = self._field(i)
        return p + struct.unpack_from("<I", self.buf, p)[0] if p else 0

    def table(self, i: int) -> Table | None:
        t = self._target(i)
        return Table(self.buf, t) if t else None

    def vector_len(self, i: int) -> int:
        t = self._target(i)
        return struct.unpack_from("<I", self.buf, t)[0] if t else 0

    def tables(self, i: int) -> list[Table]:
        t = self._target(i)
        if not t:
            return []
        n = struct.unpack_from("<I", self.buf, t)[0]
        return [Table(self.buf, t + 4 + 4 * j + struct.unpack_from("<I", self.buf, t + 4 + 4 * j)[0]) for j in range(n)]

    def bytes(self, i: int) -> bytes | None:
        t = self._target(i)
        if not t:
            return None
        n = struct.unpack_from("<I", self.buf, t)[0]
        return self.buf[t + 4 : t + 4 + n]

    def uints(self, i: int) -> tuple[int, ...]:
        t = self._target(i)
        if not t:
            return ()
        n = struct.unpack_from("<I", self.buf, t)[0]
        return struct.unpack_from(f"<{n}I", self.buf, t + 4)

    def string(self, i: int) -> str | None:
        b = self.bytes(i)
        return None if b is None else b.decode("utf-8")

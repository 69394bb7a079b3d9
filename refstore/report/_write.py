"""Write a picture or page whole: a temporary beside OUT, renamed over it (never half a file)."""

from __future__ import annotations

import os
import tempfile

from ..errors import StorageError

__all__ = ["replace_file"]


def replace_file(out: str, data: bytes, suffix: str) -> None:
    """Write ``data`` to ``out`` through a temporary beside it (the umask's permissions, not
    ``tempfile``'s 0600); ``StorageError`` naming ``out`` when that fails."""
    folder = os.path.dirname(os.path.abspath(out))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".refstore-", suffix=suffix, dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
            os.replace(tmp, out)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise StorageError(f"{out}: cannot write: {e.strerror or e}") from None

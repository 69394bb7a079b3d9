"""Write a picture, page or array whole: a temporary beside OUT, renamed over it (never half a
file), and only over what refstore wrote before (the emit rule: ``emit/_common.py``).

OUT may be a new name or a file of the same kind that refstore wrote (``own`` recognises it
by its first bytes: a coverage PNG's ``Software`` text, a report's generator tag, a ``.npy``
header). A symbolic link, a folder, a special file or any other file is refused, naming it:
writing through a link, or over a file the user keeps, is what a typo in ``--out`` must not do.
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import TYPE_CHECKING

from ..errors import BadInputError, StorageError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["NPY_OWN", "check_replaceable", "html_own", "npy_own", "png_own", "replace_file"]

PNG_SOFTWARE = "refstore"
"""The ``Software`` text of refstore's pictures (what ``png_own`` looks for)."""

NPY_OWN = "a .npy file"


def png_own(head: bytes) -> bool:
    return head.startswith(b"\x89PNG\r\n\x1a\n") and b"Software\x00" + PNG_SOFTWARE.encode() in head


def html_own(head: bytes) -> bool:
    return b"<meta name=generator content=refstore>" in head


def npy_own(head: bytes) -> bool:
    return head.startswith(b"\x93NUMPY")


def check_replaceable(out: str, own: Callable[[bytes], bool], what: str) -> None:
    """``BadInputError`` unless ``out`` is free or a regular file ``own`` recognises (``what``
    names the kind in the message)."""
    try:
        st = os.lstat(out)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as e:
        raise StorageError(f"{out}: cannot inspect it: {e.strerror or e}") from None
    if stat.S_ISLNK(st.st_mode):
        raise BadInputError(f"{out}: is a symbolic link; give the path it points to or a new name")
    if stat.S_ISDIR(st.st_mode):
        raise BadInputError(f"{out}: is a folder; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise BadInputError(f"{out}: is not a regular file (a FIFO, socket or device); give another name")
    try:
        with open(out, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise StorageError(f"{out}: cannot read it: {e.strerror or e}") from None
    if not own(head):
        raise BadInputError(f"{out}: is a file refstore did not write (not {what}); it is never overwritten: "
                            "give a new name, or remove it first")  # fmt: skip


def replace_file(out: str, data: bytes, suffix: str, own: Callable[[bytes], bool], what: str) -> None:
    """Write ``data`` to ``out`` through a temporary beside it (the umask's permissions, not
    ``tempfile``'s 0600), if ``check_replaceable`` allows; ``StorageError`` naming ``out`` when
    writing fails."""
    check_replaceable(out, own, what)
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

"""Helpers every form shares: atomic output, and the checks of zarr-shaped forms."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import TYPE_CHECKING

from ..errors import StorageError, UnexpressibleError
from ..zarr_meta import v2_filters, v3_codecs

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = ["atomic_output", "check_zarr"]


@contextlib.contextmanager
def atomic_output(out: str, *, directory: bool = False) -> Iterator[str]:
    """A temporary path beside ``out`` to write to; on success it replaces ``out`` (file or
    folder), on failure it is removed and ``out`` is left as it was."""
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise StorageError(f"{out}: cannot create its folder: {e.strerror or e}") from None
    base = os.path.basename(out)
    if directory:
        tmp = tempfile.mkdtemp(prefix=f".{base}.", suffix=".tmp", dir=parent)
    else:
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=parent)
        os.close(fd)
        os.unlink(tmp)
    try:
        yield tmp
        if directory:
            if os.path.isdir(out) and not os.path.islink(out):
                old = tmp + ".old"
                os.rename(out, old)
                os.rename(tmp, out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                if os.path.exists(out):
                    os.unlink(out)
                os.rename(tmp, out)
        else:
            if os.path.isdir(out):
                raise StorageError(f"{out}: is a folder; give a file name")
            os.replace(tmp, out)
    except BaseException:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_zarr(src: EmitSource, meta: ArrayMeta, *, zarr_format: int) -> None:
    """Refuse what a zarr array cannot express: unsupported arrays, eras, short last strips,
    codecs without a zarr form, and HDF5 chunks whose filter mask skipped a filter."""
    if zarr_format == 2:
        v2_filters(meta)
    else:
        v3_codecs(meta)
    n = src.masked_chunks(meta.name)
    if n:
        raise UnexpressibleError(
            f"array {meta.name!r}: {n} chunks skip a filter of the pipeline (HDF5 filter mask); "
            "a zarr array has one pipeline for every chunk"
        )

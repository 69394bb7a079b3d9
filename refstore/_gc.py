"""Bulk work without Python's full garbage collections.

A scan keeps every source's result (arrays, attributes: ~60 tracked objects a file) until its
one commit. Python runs a full collection whenever the objects promoted since the last one pass
a quarter of all objects, and each walks every object of the process (~85,000 once h5py,
Arrow and Lance are imported): 50-70 ms of CPU, once or twice per 1,000 small files, ~0.1 ms
a file, with nothing to free (the results are alive, and freed by reference counting after the
commit). ``young_only`` pauses the automatic collector for such a stretch and leaves the caller
a ``young()`` to call between units of work (a batch of sources): it collects the youngest
generation, so reference cycles a unit leaves behind (a TIFF parser's page <-> file links) are
freed as before; what survives waits in the middle generation, which is never walked during the
pause and is walked once, small again, after it. Not thread-local: other threads' allocations
are not collected automatically during the pause either (young() collects theirs too).
"""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["young_only"]


def _nothing() -> None:
    return None


def _young() -> None:
    gc.collect(0)


@contextlib.contextmanager
def young_only() -> Iterator[Callable[[], None]]:
    """Pause automatic collections (when they run: a caller that disabled them keeps that) and
    yield the function to call between units of work. Restored on exit, whatever happens."""
    if not gc.isenabled():
        yield _nothing
        return
    gc.disable()
    try:
        yield _young
    finally:
        gc.enable()

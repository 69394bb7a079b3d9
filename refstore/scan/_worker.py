"""A scan worker process (``python -m refstore.scan._worker``, started by ``_parallel``).

Reads a pickled scanner, then locations, from stdin; answers each with a pickled
``ScanResult`` or ``ScanError`` on stdout. ``None`` (or end of input) ends it. Anything a
format library prints goes to stderr, never into the answers; only the first ready message
and the answers are written to the real stdout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from multiprocessing.connection import Connection


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends us
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints of C libraries and Python code go to stderr
    sys.stdout = sys.stderr
    recv = Connection(os.dup(0), writable=False)
    send = Connection(out_fd, readable=False)
    import pyarrow as pa

    from . import _parallel
    from ._parallel import ALIVE, scan_one
    from .auto import AutoScanner  # noqa: F401  (imported while the parent is busy: see warm_up)

    with contextlib.suppress(ImportError):  # the format libraries too, before deadlines count
        import h5py  # noqa: F401
        import tifffile  # noqa: F401

    # one thread per worker: Arrow's own pool would make the workers compete for the same cores
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    try:
        scanner = recv.recv()
    except EOFError:
        return
    _parallel._beat = lambda: send.send(ALIVE)
    send.send(None)  # ready: deadlines count from here, not from the interpreter's start
    while True:
        try:
            loc = recv.recv()
        except EOFError:
            return
        if loc is None:
            return
        send.send(scan_one(scanner, loc))


if __name__ == "__main__":
    main()

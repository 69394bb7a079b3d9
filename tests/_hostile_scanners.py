"""A real scanner for the watchdog tests: scans like the one it wraps, except that the location
``SLEEP_FOREVER`` never answers (a format library stuck in C code) and ``crash:segv`` kills its
process with SIGSEGV (a format library crashing). Importable by scan worker processes."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from refstore.scan import Scanner, ScanResult
from refstore.scan._parallel import heartbeat

SLEEP_FOREVER = "sleep:forever"
SLOW_BUT_ALIVE = "slow:alive"
"""``slow:alive:<path>`` scans ``<path>`` in a thread and takes at least 3 s, saying it is alive
every 0.25 s throughout (like hashing a big file for ``--checksum``): a cold scan on a loaded
machine is then never mistaken for a hang, only a watchdog that ignores the word can fail it."""


@dataclass(frozen=True, slots=True)
class SleepyScanner:
    inner: Scanner

    def __call__(self, location: str) -> ScanResult:
        if location == SLEEP_FOREVER:
            while True:
                time.sleep(3600)
        if location == "crash:segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if location.startswith(SLOW_BUT_ALIVE + ":"):
            with ThreadPoolExecutor(1) as pool:
                scanned = pool.submit(self.inner, location[len(SLOW_BUT_ALIVE) + 1 :])
                beats = 0
                while beats < 12 or not scanned.done():
                    time.sleep(0.25)
                    heartbeat()  # from this thread only: one writer on the worker's pipe
                    beats += 1
                return scanned.result()
        return self.inner(location)

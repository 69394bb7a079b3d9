"""Scan many sources, each within a deadline, in worker processes.

A hostile file can hang a format library in C code (h5py reading a fuzzed attribute) or crash
it; neither can be interrupted inside the process. So sources are handed one at a time to
worker processes, and a worker that gives no answer within ``timeout`` seconds for one source
is killed and replaced: that source fails alone ("given up after 60 s"), as does a source whose
worker dies, and the others are scanned as usual.

Workers are fresh interpreters (``python -m refstore.scan._worker``), not ``multiprocessing``
children: Lance and HDF5 are not fork-safe, and ``spawn`` would re-import the caller's main
module (a script calling ``refstore.scan`` at top level would scan again in every worker).
Messages are pickles over the worker's stdin/stdout (``multiprocessing.connection`` framing).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING

from ..errors import ScanError
from ._check import check_results
from ._types import Scanner, ScanResult

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["DEFAULT_TIMEOUT", "ScanOutcome", "cool_down", "scan_batch", "scan_many", "scan_one", "warm_up"]

ScanOutcome = ScanResult | ScanError

DEFAULT_TIMEOUT = 60.0
"""seconds one source may take in a worker before it is given up as hung."""

_PREFETCH = 2
"""sources queued per worker, so a worker never waits for the parent between two files."""


_CHECK_SOURCES = 64
_CHECK_ROWS = 1 << 16
"""Scanned in this process, sources are checked (``check_results``) in batches of up to this many
sources or (once past it) chunk rows: Arrow's fixed cost per call is paid once per batch."""


_beat: Callable[[], None] | None = None
"""Set in a worker process: tells the parent the current source is progressing (not hung)."""

ALIVE = "alive"
"""A worker's message while a long, progressing step runs (hashing a big file)."""


def heartbeat() -> None:
    """Restart the current source's deadline: called by long steps that do progress (reading a
    whole file for ``--checksum``). Does nothing outside a worker process."""
    if _beat is not None:
        _beat()


def scan_one(scanner: Scanner, location: str) -> ScanOutcome:
    """Scan one source and check its references (``_check``); a source that fails is a
    ``ScanError`` returned in its place, never raised."""
    return _checked([_scan_only(scanner, location)])[0]


def scan_batch(scanner: Scanner, locations: Sequence[str]) -> list[ScanOutcome]:
    """``scan_one`` of each source, one after the other in this process (Dask tasks), their
    references checked together."""
    return _checked([_scan_only(scanner, loc) for loc in locations])


def _scan_only(scanner: Scanner, location: str) -> ScanOutcome:
    try:
        return scanner(location)
    except Exception as e:  # a damaged file must fail alone, never the whole scan
        return _failure(location, e)


def _failure(location: str, e: BaseException) -> ScanError:
    """What a source that raised ``e`` while being scanned or checked fails with."""
    if isinstance(e, ScanError):
        return e
    if isinstance(e, MemoryError):
        return ScanError(location, "damaged or hostile: describing it needs more memory than there is")
    if isinstance(e, RecursionError):
        return ScanError(location, "damaged: its structure nests without end")
    msg = str(e).splitlines()[0].strip() if str(e).strip() else ""
    detail = f" ({msg})" if msg else ""
    return ScanError(location, f"damaged: its structure is inconsistent{detail}")


def _checked(outcomes: list[ScanOutcome]) -> list[ScanOutcome]:
    """``outcomes`` with each result whose references fail ``check_result`` replaced by its
    error. Checked in one pass (``check_results``); should that pass itself fail (memory), each
    result is checked alone, so one source's problem stays its own."""
    results = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, ScanResult)]
    if not results:
        return outcomes
    try:
        problems = check_results([r for _, r in results])
    except Exception as e:
        if len(results) > 1:
            return [o for i in range(len(outcomes)) for o in _checked([outcomes[i]])]
        problems = [e]
    out = list(outcomes)
    for (i, r), p in zip(results, problems, strict=True):
        if p is not None:
            out[i] = _failure(r.source.location, p)
    return out


@dataclass
class _Worker:
    """One worker process and the sources it was given (the first is the one it is scanning
    since ``started``, monotonic seconds; deadlines count once the worker said it is ready)."""

    process: subprocess.Popen[bytes]
    send: Connection
    recv: Connection
    queue: deque[tuple[int, str]] = field(default_factory=deque)
    started: float = 0.0
    ready: bool = False


def _spawn() -> _Worker:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
    p = subprocess.Popen([sys.executable, "-m", "refstore.scan._worker"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env, close_fds=True)  # fmt: skip
    assert p.stdin is not None and p.stdout is not None
    send = Connection(os.dup(p.stdin.fileno()), readable=False)
    recv = Connection(os.dup(p.stdout.fileno()), writable=False)
    p.stdin.close()
    p.stdout.close()
    return _Worker(p, send, recv)


_warm: list[_Worker] = []
"""Workers started ahead (``warm_up``), not yet given a scanner."""


def warm_up(workers: int = 1) -> None:
    """Start worker processes now, so their interpreter start and imports overlap with the
    caller's own work (opening the collection, listing sources); ``scan_many`` takes them
    first. ``cool_down`` ends those it did not take."""
    while len(_warm) < workers:
        _warm.append(_spawn())


def cool_down() -> None:
    """End the workers ``warm_up`` started that no scan took."""
    while _warm:
        w = _warm.pop()
        w.process.kill()
        w.process.wait()
        w.send.close()
        w.recv.close()


class _Pool:
    def __init__(self, scanner: Scanner, workers: int) -> None:
        self.scanner = scanner
        self.workers = [self._start() for _ in range(workers)]

    def _start(self) -> _Worker:
        w = _warm.pop() if _warm else _spawn()
        w.send.send(self.scanner)
        return w

    def give(self, w: _Worker, item: tuple[int, str]) -> None:
        if not w.queue and w.ready:
            w.started = time.monotonic()
        w.queue.append(item)
        # a worker that died since its last answer (a crash on the source it is on) cannot take
        # it: the item stays queued, its EOF is seen next, and ``replace`` gives the queue on
        with contextlib.suppress(OSError):
            w.send.send(item[1])

    def replace(self, w: _Worker) -> list[tuple[int, str]]:
        """Kill ``w`` and start another in its place; returns the sources it had not begun."""
        w.process.kill()
        w.process.wait()
        w.send.close()
        w.recv.close()
        rest = list(w.queue)[1:]
        self.workers[self.workers.index(w)] = self._start()
        return rest

    def close(self) -> None:
        for w in self.workers:
            with contextlib.suppress(OSError):
                w.send.send(None)
            w.send.close()
        end = time.monotonic() + 5
        for w in self.workers:
            try:
                w.process.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.process.kill()
                w.process.wait()
            w.recv.close()


def scan_many(
    scanner: Scanner,
    locations: Sequence[str],
    *,
    workers: int = 1,
    timeout: float | None = DEFAULT_TIMEOUT,
    progress: Callable[[int], None] | None = None,
) -> Iterator[tuple[str, ScanOutcome]]:
    """Yield (location, result-or-error) for every location, in the order given.

    ``workers``: worker processes. ``timeout``: seconds one source may take before its worker
    is killed and the source fails alone; ``None`` (or 0): no deadline, and with one worker the
    sources are scanned in this process (a file that hangs the format library hangs the scan).
    ``progress`` is called with the number of sources just finished. Scanned in this
    process, sources are yielded once a batch of them is scanned and checked.
    """
    if not locations:
        return
    if not timeout and workers <= 1:
        batch: list[tuple[str, ScanOutcome]] = []
        rows = 0
        for loc in locations:
            res = _scan_only(scanner, loc)
            batch.append((loc, res))
            rows += 0 if isinstance(res, ScanError) else res.refs.num_rows
            if progress is not None:
                progress(1)
            if len(batch) >= _CHECK_SOURCES or rows >= _CHECK_ROWS:
                yield from zip([x for x, _ in batch], _checked([o for _, o in batch]), strict=True)
                batch, rows = [], 0
        yield from zip([x for x, _ in batch], _checked([o for _, o in batch]), strict=True)
        return
    yield from _supervised(scanner, list(locations), max(1, min(workers, len(locations))), timeout or None, progress)


def _supervised(
    scanner: Scanner, locations: list[str], workers: int, timeout: float | None,
    progress: Callable[[int], None] | None,
) -> Iterator[tuple[str, ScanOutcome]]:  # fmt: skip
    pending: deque[tuple[int, str]] = deque(enumerate(locations))
    done: dict[int, ScanOutcome] = {}
    emitted = 0
    pool = _Pool(scanner, workers)
    try:
        while emitted < len(locations):
            for w in pool.workers:
                while pending and len(w.queue) < _PREFETCH:
                    pool.give(w, pending.popleft())
            busy = [w for w in pool.workers if w.queue]
            now = time.monotonic()
            due = [w.started + timeout for w in busy if w.ready and timeout is not None]
            ready = wait([w.recv for w in busy], timeout=max(0.0, min(due) - now) if due else None)
            now = time.monotonic()
            for w in busy:
                if w.recv in ready:
                    try:
                        res: ScanOutcome | str | None = w.recv.recv()
                    except (EOFError, OSError):
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            w.process.wait(1)
                        code = w.process.returncode
                        how = f" (killed by signal {-code})" if code is not None and code < 0 else ""
                        idx, loc = w.queue[0]
                        done[idx] = ScanError(loc, f"damaged: it crashed the format library{how}")
                        pending.extendleft(reversed(pool.replace(w)))
                    else:
                        if res is None or isinstance(res, str):  # ready, or ALIVE: the deadline restarts
                            w.ready, w.started = True, now
                            continue
                        idx, _loc = w.queue.popleft()
                        done[idx] = res
                        w.started = now
                elif w.ready and timeout is not None and now >= w.started + timeout:
                    idx, loc = w.queue[0]
                    done[idx] = ScanError(loc, f"still not scanned after {timeout:g} s, given up (a file that hangs "
                                               "the format library, or slow storage: raise --timeout)")  # fmt: skip
                    pending.extendleft(reversed(pool.replace(w)))
                else:
                    continue
                if progress is not None:
                    progress(1)
            while emitted in done:
                res = done.pop(emitted)
                yield locations[emitted], res
                emitted += 1
    finally:
        pool.close()

"""Scan many sources, in worker processes when asked (spawn: Lance and HDF5 are not fork-safe)."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING

from ..errors import ScanError
from ._types import Scanner, ScanResult

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["ScanOutcome", "scan_batch", "scan_many"]

ScanOutcome = ScanResult | ScanError


def _init_worker() -> None:
    """One thread per worker process: Arrow's own thread pool would otherwise make the workers
    compete for the same cores (measured: 1.3x with two workers instead of 1.6x)."""
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def scan_batch(scanner: Scanner, locations: Sequence[str]) -> list[ScanOutcome]:
    """Scan sources one after the other; a source that fails is an error in its place."""
    out: list[ScanOutcome] = []
    for loc in locations:
        try:
            out.append(scanner(loc))
        except ScanError as e:
            out.append(e)
        except Exception as e:  # a damaged file must fail alone, never the whole scan
            msg = str(e).splitlines()[0] if str(e) else ""
            out.append(ScanError(loc, f"cannot be scanned ({type(e).__name__}{': ' + msg if msg else ''})"))
    return out


def scan_many(
    scanner: Scanner,
    locations: Sequence[str],
    *,
    workers: int = 1,
    batch: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[tuple[str, ScanOutcome]]:
    """Yield (location, result-or-error) for every location, in the order given.

    ``workers``: processes (1 = scan in this process). ``batch``: sources per task (default:
    about four tasks per worker, 16 to 256 sources each).
    ``progress`` is called with the number of sources just finished.
    """
    if batch is None:
        batch = max(16, min(256, len(locations) // (max(workers, 1) * 4)))
    if workers <= 1 or len(locations) <= batch:
        for loc in locations:
            res = scan_batch(scanner, [loc])[0]
            if progress is not None:
                progress(1)
            yield loc, res
        return
    groups = [list(locations[i : i + batch]) for i in range(0, len(locations), batch)]
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_init_worker) as pool:
        futures = [pool.submit(scan_batch, scanner, g) for g in groups]
        for g, fut in zip(groups, futures, strict=True):
            results = fut.result()
            if progress is not None:
                progress(len(g))
            yield from zip(g, results, strict=True)

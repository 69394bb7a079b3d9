"""Units run in worker processes (``ProcessPoolExecutor``s of one spawned process each, ``workers``
of them), each within ``timeout`` seconds: a unit past it, or whose worker dies, becomes one
``crash`` cell and its process is replaced; workers are reused from one unit to the next (an
interpreter with refstore, xarray and zarr imported costs seconds)."""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from .cells import Cell

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from .units import Unit

__all__ = ["run_all"]


def _quiet() -> None:
    """Worker start: native libraries' stderr (HDF5 traces, Rust logs) away from the report."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.environ.setdefault("RUST_LOG", "error")


def _failed(unit: Unit, why: str) -> dict[str, Any]:
    return {"unit": unit.id, "scan": Cell("crash", why).to_json(), "cells": {}, "na": {}, "notes": [],
            "timing": {}, "seconds": None}  # fmt: skip


def _pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet)


def _kill(pool: ProcessPoolExecutor) -> None:
    for p in list((pool._processes or {}).values()):  # no public way to stop a running task
        p.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def run_all(units: list[Unit], work: Callable[[Unit], dict[str, Any]], *, workers: int = 2,
            timeout: float = 300.0) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Each unit's result, in completion order. One single-process pool per slot: a unit past
    its time, or whose worker dies, costs only its own slot's process (replaced), never the
    unit running beside it."""
    todo = list(reversed(units))
    slots: list[ProcessPoolExecutor] = [_pool(1) for _ in range(workers)]
    running: dict[Future[dict[str, Any]], tuple[Unit, float, int]] = {}
    try:
        while todo or running:
            busy = {i for _, _, i in running.values()}
            for i in range(workers):
                if i not in busy and todo:
                    u = todo.pop()
                    running[slots[i].submit(work, u)] = (u, time.monotonic(), i)
            done, _ = wait(running, timeout=1, return_when=FIRST_COMPLETED)
            for fut in done:
                unit, _, i = running.pop(fut)
                try:
                    yield fut.result()
                except BrokenProcessPool:
                    yield _failed(unit, "worker process died")
                    slots[i] = _pool(1)
                except Exception as e:
                    yield _failed(unit, f"{type(e).__name__}: {e}")
            for fut, (unit, t, i) in list(running.items()):
                if time.monotonic() - t > timeout:
                    running.pop(fut)
                    _kill(slots[i])
                    slots[i] = _pool(1)
                    yield _failed(unit, f"timeout ({timeout:.0f} s)")
    finally:
        for p in slots:
            _kill(p)

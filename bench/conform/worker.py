"""One unit, start to end, in a worker process: its sources copied to a temporary folder (the
originals are never touched: ``hold`` moves the copies away), scanned into a temporary
collection, then every path of ``paths.PATHS`` compared with the oracle, computed once."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import warnings
from typing import TYPE_CHECKING, Any

from .cells import Cell, first_line
from .oracle import OracleUnavailable, oracle_for
from .paths import FORMS, Run, refused_or_crash

if TYPE_CHECKING:
    from .units import Unit

__all__ = ["run_unit"]


def _copy(unit: Unit, into: str) -> list[str]:
    out = []
    common = os.path.commonpath([os.path.dirname(os.path.abspath(s)) for s in unit.sources])
    for s in unit.sources:
        dst = os.path.join(into, os.path.relpath(os.path.abspath(s), common))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.isdir(s):
            shutil.copytree(s, dst)
        else:
            shutil.copy2(s, dst)
        out.append(dst)
    return out


def run_unit(unit: Unit) -> dict[str, Any]:
    """The unit's cells as JSON-able values: ``scan`` (a cell when the unit as a whole was
    refused or crashed), ``cells`` {path: {array: cell}}, ``na`` {path: why not applicable},
    ``notes``, ``seconds`` (wall), ``cpu`` (seconds of CPU), ``timing`` (CPU seconds per path)."""
    logging.getLogger("tifffile").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    t0, cpu = time.monotonic(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="conform-") as work:
        result = _run(unit, work)
    result["seconds"] = round(time.monotonic() - t0, 2)
    result["cpu"] = round(time.process_time() - cpu, 2)  # this process's threads: comparable under load
    return result


def _run(unit: Unit, work: str) -> dict[str, Any]:
    import refstore

    out: dict[str, Any] = {"unit": unit.id, "scan": None, "cells": {}, "na": {}, "notes": [], "timing": {}}
    src_dir = os.path.join(work, "src")
    sources = _copy(unit, src_dir)
    try:
        oracle = oracle_for(unit)
    except Exception as e:
        out["notes"].append(f"oracle: {first_line(e)}")
        oracle = None
    col = os.path.join(work, "col")
    refstore.init(col)
    try:
        rep = refstore.scan(col, sources, timeout=None, **unit.scan_kwargs())
    except Exception as e:
        out["scan"] = refused_or_crash(e).to_json()
        return out
    if rep.failed:
        out["scan"] = Cell("refused", "; ".join(why for _, why in rep.failed)).to_json()
        if len(rep.failed) == len(sources) or oracle is None:
            return out
    if oracle is None:
        out["scan"] = Cell("crash", out["notes"][-1]).to_json()
        return out
    out["notes"] += oracle.notes
    run = Run(col, oracle, work)
    steps: list[tuple[str, Any]] = [("open", run.open_), ("xarray", run.xarray), ("zarr", run.zarr)]
    steps += [(fmt, lambda fmt=fmt: run.form(fmt)) for fmt in FORMS]
    steps += [("verify", run.verify), ("hold", lambda: run.hold(src_dir))]
    for path, step in steps:
        t = time.process_time()
        try:
            cells = step()
        except OracleUnavailable as e:
            out["na"][path] = str(e)
            continue
        except Exception as e:
            cell = refused_or_crash(e)
            cells = dict.fromkeys(sorted(set(oracle.arrays) | set(run.metas)), cell)
        out["timing"][path] = round(time.process_time() - t, 2)
        out["cells"][path] = {n: c.to_json() for n, c in cells.items()}
    return out

"""``./dev conform [DIR...] [--json] [--full]``: the conformance matrix (``design/conformance.md``).

Every file under DIR (default: the zoo and ../shared/data, or ``$REFSTORE_SHARED_DATA``), and
the series and mosaics they form, scanned into a temporary collection and read through every
path against the file's own reader. Exit 1 on any wrong, missing or crashed cell or an
undocumented refusal; 2 when there is nothing to run over."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .pool import run_all
from .report import exit_status, print_json, print_matrix, summarize, summary_line
from .units import discover
from .worker import run_unit

REPO = Path(__file__).resolve().parents[2]


def shared_data() -> Path:
    """Where tests/conftest.py looks: ``$REFSTORE_SHARED_DATA``, else ../shared/data."""
    return Path(os.environ.get("REFSTORE_SHARED_DATA", REPO.parent / "shared" / "data"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="./dev conform", description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", help="folders to run over (default: the zoo and ../shared/data)")
    ap.add_argument("--json", action="store_true", help="the whole matrix as JSON on stdout")
    ap.add_argument("--full", action="store_true", help="one row per array (default: one per unit)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per unit (then: crash: timeout)")
    ap.add_argument("--only", default="", help="run the units whose id contains this text")
    args = ap.parse_args(argv)
    data = shared_data()
    dirs = args.dirs or [str(data / "zoo"), str(data)]
    dirs = [d for d in dirs if os.path.isdir(d)]
    if not dirs:
        print(f"conform: no folder to run over ({data} is not present)", file=sys.stderr)
        return 2
    logging.getLogger("tifffile").setLevel(logging.ERROR)
    units = [u for u in discover(dirs) if args.only in u.id]
    t0 = time.monotonic()
    results = []
    # the workers' temporary folders under one, removed at the end (a killed worker leaves its own)
    root = tempfile.mkdtemp(prefix="conform-run-")
    os.environ["TMPDIR"] = root
    try:
        for i, r in enumerate(run_all(units, run_unit, workers=args.workers, timeout=args.timeout), 1):
            results.append(r)
            if sys.stderr.isatty():
                print(f"\r{i}/{len(units)} {r['unit'][-100:]:100}", end="", file=sys.stderr, flush=True)
            elif i % 25 == 0 or i == len(units):
                print(f"conform: {i}/{len(units)} units ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if args.json:
        print_json(results, [u.to_json() for u in units])
    else:
        print_matrix(results, full=args.full)
        cpu = sum(r.get("cpu") or 0 for r in results)
        print(f"({len(units)} units in {time.monotonic() - t0:.0f} s with {args.workers} workers; "
              f"{cpu:.0f} s of CPU in the workers)")
    s = summarize(results)
    if args.json:
        print(summary_line(s), file=sys.stderr)
    return exit_status(s)


if __name__ == "__main__":
    sys.exit(main())

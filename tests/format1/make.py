"""Writes ``collection/``: a collection in refstore's format 1, as refstore of commit e737e41
(the last of format 1) wrote it, for the upgrade tests (``tests/test_upgrade.py``). Not run by
the tests and never by a newer refstore: run it with that refstore, e.g.

    git worktree add /tmp/refstore-f1 e737e41
    PYTHONPATH=/tmp/refstore-f1 .venv/bin/python tests/format1/make.py

Two days of the OISST-like fixture (``fixtures/oisst.write_day``, days 2024-01-01 and -02, seed 0)
scanned as a series along ``time`` from ``/tmp/refstore-format1-sources`` (removed afterwards:
the collection's sources are gone wherever it is copied to), every chunk of ``sst`` and ``anom``
held, the version tagged ``release-1``, then the ``anom`` chunks of the second day released.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import refstore
from fixtures.oisst import write_day
from refstore.schema import FORMAT_VERSION
from refstore.table import HoldSelection, create_tag, hold, release

SOURCES = Path("/tmp/refstore-format1-sources")
OUT = Path(__file__).parent / "collection"


def main() -> None:
    assert FORMAT_VERSION == 1, "run with refstore of format 1 (see the module doc)"
    shutil.rmtree(SOURCES, ignore_errors=True)
    shutil.rmtree(OUT, ignore_errors=True)
    SOURCES.mkdir(parents=True)
    days = [write_day(SOURCES / f"oisst-{d:%Y%m%d}.nc", d) for d in (date(2024, 1, 1), date(2024, 1, 2))]
    refstore.init(str(OUT))
    refstore.scan(str(OUT), [str(p) for p in days], concat_dim="time")
    hold(refstore.Collection.open(str(OUT)), HoldSelection(arrays=("sst", "anom")))
    create_tag(refstore.Collection.open(str(OUT)), "release-1")
    release(refstore.Collection.open(str(OUT)), HoldSelection(arrays=("anom",), window=(slice(1, 2), Ellipsis)))
    shutil.rmtree(SOURCES)


if __name__ == "__main__":
    main()

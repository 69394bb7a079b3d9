"""Golden outputs of the deterministic emits, checked by the tests and written ONLY by the
documented command (never by a test run, never by hand):

    ./dev golden            # = .venv/bin/python -m tests._golden

It rebuilds every golden file of ``tests/golden/`` from the generated fixtures; review the diff
before committing it. A test whose output differs, or whose golden file is missing, fails with
this command in its message.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

GOLDEN_DIR = Path(__file__).parent / "golden"
REGENERATE = "./dev golden"


def check(golden: Path, text: str) -> None:
    """``text`` must equal the golden file, which a test never writes."""
    import pytest

    if not golden.is_file():
        pytest.fail(f"{golden} is missing: generate it with `{REGENERATE}` and review it")
    assert text == golden.read_text(encoding="utf-8"), (
        f"{golden.name} differs from this emit; if the change is deliberate, regenerate with `{REGENERATE}` "
        "and review the diff (never edit it by hand)"
    )


def _builders() -> dict[Path, Callable[[Path], str]]:
    from . import test_emit_kerchunk, test_emit_sqlite, test_emit_vrt

    return {
        test_emit_kerchunk.GOLDEN: test_emit_kerchunk.golden_text,
        test_emit_sqlite.GOLDEN: test_emit_sqlite.golden_text,
        test_emit_vrt.GOLDEN: test_emit_vrt.golden_text,
    }


def main() -> None:
    for golden, build in _builders().items():
        with tempfile.TemporaryDirectory() as tmp:
            text = build(Path(tmp))
        golden.parent.mkdir(parents=True, exist_ok=True)
        old = golden.read_text(encoding="utf-8") if golden.is_file() else None
        golden.write_text(text, encoding="utf-8")
        print(f"{'unchanged' if old == text else 'wrote'} {golden}")


if __name__ == "__main__":
    main()

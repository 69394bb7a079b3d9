"""The manual's tutorials run as written: every ``sh`` and ``python`` block of each page under
docs/tutorials/ (and the quickstart), in order, in one fresh folder per page (python blocks share
one namespace; sh blocks run under ``bash -euo pipefail`` with this interpreter's ``refstore`` first
on PATH). The pages check their results against the files' own readers (h5py, xarray,
tifffile, eccodes) with asserts, so a page that stops matching the code fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = [DOCS / "quickstart.md", *sorted((DOCS / "tutorials").glob("*.md"))]
_FENCE = re.compile(r"^```(sh|python)\n(.*?)^```$", re.S | re.M)


def blocks(page: Path) -> list[tuple[str, str]]:
    """(language, code) of each runnable block, in page order."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(page.read_text())]


def _run_sh(code: str, cwd: Path, page: str) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("REFSTORE_COLLECTION", None)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, f"{page}: block failed (exit {r.returncode}):\n{code}\n--- stderr:\n{r.stderr}"


def test_every_page_has_runnable_blocks() -> None:
    assert len(PAGES) >= 5, PAGES
    for page in PAGES:
        langs = {lang for lang, _ in blocks(page)}
        assert langs, f"{page.name} has no sh or python block"


# a page is what a user runs: third-party warnings (kerchunk's HDF5 traversal, xarray's future
# defaults) are shown, not turned into failures; the page's asserts are the test
@pytest.mark.filterwarnings("default")
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_tutorial_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REFSTORE_COLLECTION", raising=False)
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    for i, (lang, code) in enumerate(blocks(page)):
        if lang == "sh":
            _run_sh(code, tmp_path, page.name)
        else:
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)

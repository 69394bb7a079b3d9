"""Pictures and pages of a collection: chunk-state coverage (``coverage``), its PNG
(``picture``, matplotlib: ``pip install 'refstore[report]'``) and the self-contained HTML
report (``html``). Reads one snapshot; never writes the collection."""

from __future__ import annotations

from .coverage import STATES, Coverage, coverage

__all__ = ["STATES", "Coverage", "coverage"]

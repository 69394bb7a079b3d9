"""Pictures and pages of a collection: chunk-state coverage (``coverage``), its PNG
(``picture``, matplotlib: ``pip install 'refstore[report]'``) and the self-contained HTML
report (``html``). Reads one snapshot; never writes the collection. Import the modules:
``from refstore.report.coverage import coverage``."""

from __future__ import annotations

__all__ = ["coverage", "html", "picture"]

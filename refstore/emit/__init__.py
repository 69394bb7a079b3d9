"""Published forms: each a projection of one collection version (see ``design/emit.md``).

``emit(collection, "kerchunk-json", "out.json", as_of="release-2026-10")``. Every form module
has the same surface: ``check(src, meta)`` raises ``UnexpressibleError`` for an array the form
cannot express, ``write(src, arrays, out, progress=)`` writes the form and returns a dict:
``"refs"`` (the number of references written) and any form-specific counts (they go to
``EmitReport.extra``). Modules are imported lazily, so a form's libraries load only when it is
emitted.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

from .._ref import tag_name
from ..errors import BadInputError, UnexpressibleError
from ._input import EmitReport, EmitSource

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..scan._types import ArrayMeta
    from ..table.collection import Collection

__all__ = ["FORMATS", "EmitReport", "EmitSource", "Form", "emit"]

FORMATS: dict[str, str] = {
    "kerchunk-json": ".kerchunk_json",
    "kerchunk-parquet": ".kerchunk_parquet",
    "icechunk": ".icechunk",
    "parquet": ".flat_parquet",
    "sqlite": ".sqlite",
    "vrt": ".vrt",
}
"""Format name -> module (relative to this package)."""


class Form(Protocol):
    """What every form module provides (module-level functions)."""

    def check(self, src: EmitSource, meta: ArrayMeta) -> None: ...

    def write(
        self, src: EmitSource, arrays: list[ArrayMeta], out: str, *, progress: Callable[[int, int], None] | None
    ) -> dict[str, Any]: ...


def _form(fmt: str) -> Form:
    if fmt not in FORMATS:
        raise BadInputError(f"unknown format {fmt!r} (one of: {', '.join(FORMATS)})")
    return importlib.import_module(FORMATS[fmt], __name__)


def emit(
    col: Collection,
    fmt: str,
    out: str,
    *,
    as_of: int | str | None = None,
    remap: bool = True,
    skip_unexpressible: bool = False,
    on_stale: str = "error",
    progress: Callable[[int, int], None] | None = None,
) -> EmitReport:
    """Write the form ``fmt`` of the collection at ``as_of`` (latest when None) to ``out``.

    ``remap``: apply the version's remap rules to source locations (the table keeps them as
    scanned). An array the form cannot express is refused (``UnexpressibleError`` naming it),
    or left out and listed in the report with ``skip_unexpressible``. The same version and
    options give byte-identical output.

    Held chunks are carried as bytes where the form can (``EmitSource.refs``); every source the
    form still points at is checked to be the file the version recorded (size, mtime or etag):
    ``on_stale="error"`` refuses with ``StaleSourceError`` naming it and nothing written,
    ``"warn"`` warns (``StaleSourceWarning``) and writes, ``"ignore"`` does not check.
    """
    form = _form(fmt)
    snap = col.snapshot(as_of)
    tag = tag_name(as_of)
    src = EmitSource(snap, tag=tag, remap=remap, on_stale=on_stale)
    from ._common import check_out

    check_out(src, fmt, out)  # before any work: what is at OUT may be replaced, and is no input
    arrays: list[ArrayMeta] = []
    skipped: dict[str, str] = {}
    for name, meta in src.arrays().items():
        try:
            form.check(src, meta)
        except UnexpressibleError as e:
            if not skip_unexpressible:
                raise UnexpressibleError(f"{fmt}: {e} (--skip-unexpressible leaves such arrays out)") from None
            skipped[name] = str(e)
            continue
        arrays.append(meta)
    if not arrays:
        raise BadInputError(f"{col.uri}: nothing to emit as {fmt} at version {snap.version}")
    info = form.write(src, arrays, out, progress=progress)
    refs = int(info.pop("refs"))
    return EmitReport(fmt, out, snap.version, tag, len(arrays), refs, skipped, info)

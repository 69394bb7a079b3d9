"""Existing reference stores as sources: kerchunk JSON/Parquet references and Icechunk
repositories of virtual chunks, each imported as one new version of a collection
(``design/import.md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._quote import quote
from ..errors import BadInputError
from ._commit import ImportReport, commit_import

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..table.collection import Collection

__all__ = ["STORE_FORMS", "ImportReport", "import_icechunk", "import_kerchunk", "import_zarr"]

STORE_FORMS = ("kerchunk-json", "kerchunk-parquet", "icechunk")
"""``format`` of a source row that is an imported store (the source of its inline chunks)."""


def import_kerchunk(
    collection: Collection,
    refs: str,
    *,
    allow: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Import kerchunk references (a JSON file, version 0 or 1 with ``templates``/``gen``, or a
    Parquet reference folder; a local path or an object-store URL) as one new version of
    ``collection``. The references may point only into the store's own folder (or bucket) and
    the ``allow`` prefixes (``BadInputError`` naming the first other location).
    ``progress(done, total)`` is called as referenced files are identified."""
    from .kerchunk import read_kerchunk

    try:
        return commit_import(collection, read_kerchunk(refs), allow=allow, progress=progress)
    except RecursionError:  # JSON (or attributes in it) nested deeper than Python recurses
        raise BadInputError(f"{quote(refs)}: not a kerchunk reference spec (nested too deeply)") from None


def import_icechunk(
    collection: Collection,
    repo: str,
    *,
    branch: str | None = None,
    tag: str | None = None,
    snapshot: str | None = None,
    allow: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Import one snapshot of an Icechunk repository (a local path or ``s3://bucket/prefix``;
    ``branch`` (default ``main``), ``tag`` or ``snapshot`` id) as one new version of
    ``collection``: virtual chunks become references, inline chunks inline rows; a repository
    holding native chunks is refused naming the array (``design/import.md``). Virtual chunks may
    point only into the repository's own folder (or bucket) and the ``allow`` prefixes, as a
    reader authorizes Icechunk's virtual chunk containers."""
    from .icechunk import read_icechunk

    try:
        parsed = read_icechunk(repo, branch=branch, tag=tag, snapshot=snapshot)
        return commit_import(collection, parsed, allow=allow, progress=progress)
    except RecursionError:  # metadata nested deeper than Python recurses
        raise BadInputError(f"{quote(repo)}: metadata nested too deeply") from None


def import_zarr(
    collection: Collection,
    store: str,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Import a Zarr v2 or v3 store (a local folder) as one new version of ``collection``: every
    chunk object is a source referenced whole (offset 0, its size), metadata as zarr-python
    reads it (``imports/zarr_store.py``). ``progress(done, total)`` as chunk objects are identified."""
    from .zarr_store import read_zarr_store

    return commit_import(collection, read_zarr_store(store), progress=progress)

"""One ``ArrayMeta`` instance per recorded content within a commit.

The sources of a series repeat the same few arrays: interned, the planner compares them by
identity (``meta is m0`` skips the era and grid comparisons, each a few ``json.dumps``) and each
distinct array's var-row JSON is built once. The content key is the pickle of the fields
(C-fast, ~3x cheaper than ``to_json``): equal bytes mean equal values of equal types in the same
order, hence the same ``to_json`` text (``1``, ``1.0``, ``True``, ``0.0`` and ``-0.0`` pickle
apart); unequal bytes for equal content (shared vs. equal objects) only cost the sharing.
Interned instances share their ``attrs`` and ``codecs`` between sources: nothing in refstore
mutates an ``ArrayMeta``'s containers after construction (``tests/test_meta_intern.py`` checks a
commit leaves them equal), as with the instances ``ArrayMeta.from_json`` already shares between
the var rows of a long series.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._types import ArrayMeta

__all__ = ["MetaTexts"]


class MetaTexts:
    """``to_json`` once per instance, and one canonical instance per content. Holds every
    instance it was given (so ``id`` stays unique while it lives): make one per commit."""

    __slots__ = ("_by_id", "_canon", "_seen")

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[ArrayMeta, str]] = {}
        self._canon: dict[bytes | str, ArrayMeta] = {}
        self._seen: dict[int, tuple[ArrayMeta, ArrayMeta]] = {}  # id -> (instance, its canonical one)

    def text(self, meta: ArrayMeta) -> str:
        """``meta.to_json()``, computed once per instance."""
        got = self._by_id.get(id(meta))
        if got is not None:
            return got[1]
        text = meta.to_json()
        self._by_id[id(meta)] = (meta, text)
        return text

    def canon(self, meta: ArrayMeta) -> ArrayMeta:
        """The first instance seen with ``meta``'s content (``meta`` itself if it is the first)."""
        seen = self._seen.get(id(meta))
        if seen is not None:  # the same instance again (``from_json`` shares them between var rows)
            return seen[1]
        m = meta
        try:
            key: bytes | str = pickle.dumps(
                (m.name, m.dims, m.shape, m.chunks, m.dtype, m.fill_value, m.codecs, m.attrs, m.status, m.reason,
                 m.eras, m.short_edge, m.holes, m.holes_axis, m.edges, m.gridless, m.cell), 5,
            )  # fmt: skip
        except (pickle.PicklingError, TypeError, AttributeError):
            key = self.text(meta)
        canonical = self._canon.setdefault(key, meta)
        self._seen[id(meta)] = (meta, canonical)  # keeps the instance (and so its id) alive
        return canonical

"""The Lance collection: create/open, resolve "as of" references, read one consistent snapshot."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._ref import LATEST
from ..errors import (
    BadInputError,
    CollectionNotFoundError,
    NotACollectionError,
    NotFoundError,
    StorageError,
)
from ..plan.slabs import SlabLayout
from ..scan._types import ArrayMeta
from ..schema import (
    CREATE_SCHEMA,
    DATA_STORAGE_VERSION,
    FORMAT_VERSION,
    GLOBAL_KEY_COLUMNS,
    NOT_PLACED,
    SOURCE_KEY_COLUMNS,
    Kind,
)
from ._index import INDEXED_COLUMNS, IndexCache
from ._rows import rows
from ._spans import SourceSpans

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["Collection", "Snapshot", "sql_str"]


_UNREADABLE = re.compile(r"not found|permission denied|os error|LanceError\(IO\)", re.IGNORECASE)


@contextlib.contextmanager
def storage_errors(uri: str, version: int) -> Iterator[None]:
    """Missing or unreadable collection files (deleted data, ``chmod 000 C/data``) as one
    ``StorageError`` line naming the collection and version, not Lance's traceback."""
    try:
        yield
    except (OSError, ValueError) as e:
        msg = str(e).strip()
        if not _UNREADABLE.search(msg):
            raise
        first = msg.splitlines()[0] if msg else type(e).__name__
        first = re.sub(r"^External error: |, /\S+\.rs:\d+:\d+$", "", first)
        raise StorageError(f"{uri}: files of version {version} cannot be read ({first})") from None


def sql_str(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _is_local(uri: str) -> bool:
    return "://" not in uri or uri.startswith("file://")


def _local_path(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


@dataclass(frozen=True, slots=True)
class Collection:
    """A collection: one Lance dataset at ``uri`` (local folder or object-store URL)."""

    uri: str
    storage_options: dict[str, str] | None = None

    # ----------------------------------------------------------------- lifecycle
    @classmethod
    def create(cls, uri: str, *, storage_options: dict[str, str] | None = None) -> Collection:
        """Create an empty collection; refuse a non-empty folder that is not one."""
        if _is_local(uri):
            path = os.path.abspath(_local_path(uri))
            if os.path.isdir(os.path.join(path, "_versions")):
                raise BadInputError(f"{path}: already a refstore collection")
            if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
                raise NotACollectionError(f"{path}: exists and is not empty; refusing to create a collection there")
            uri = path
        else:
            try:
                lance.dataset(uri, storage_options=storage_options)
            except (ValueError, OSError):
                pass
            else:
                raise BadInputError(f"{uri}: already holds a Lance dataset")
        head = rows(
            Kind.COLLECTION,
            1,
            meta=[json.dumps({"format_version": FORMAT_VERSION, "concat_dim": None, "head": uuid.uuid4().hex})],
        )
        try:
            lance.write_dataset(
                pa.Table.from_arrays(head.columns, schema=CREATE_SCHEMA),  # the held column's threshold
                uri,
                schema=CREATE_SCHEMA,
                mode="create",
                data_storage_version=DATA_STORAGE_VERSION,
                enable_stable_row_ids=True,
                storage_options=storage_options,
                transaction_properties={
                    "__lance_commit_message": "init",
                    "refstore.operation": "init",
                    "refstore.record": "{}",
                },
            )
        except (OSError, ValueError) as e:
            raise StorageError(f"{uri}: cannot create collection: {e}") from None
        return cls(uri, storage_options)

    @classmethod
    def open(cls, uri: str, *, storage_options: dict[str, str] | None = None) -> Collection:
        if _is_local(uri):
            uri = os.path.abspath(_local_path(uri))
            if not os.path.isdir(os.path.join(uri, "_versions")):
                if os.path.exists(uri):
                    raise NotACollectionError(f"{uri}: not a refstore collection (run 'refstore init')")
                raise CollectionNotFoundError(f"{uri}: no collection here (run 'refstore init')")
        col = cls(uri, storage_options)
        ds = col._dataset()
        meta = ds.schema.metadata or {}
        if b"refstore.format_version" not in meta:
            raise NotACollectionError(f"{uri}: a Lance dataset, but not a refstore collection")
        if int(meta[b"refstore.format_version"]) > FORMAT_VERSION:
            raise NotACollectionError(
                f"{uri}: written by a newer refstore (format {int(meta[b'refstore.format_version'])})"
            )
        return col

    def _dataset(self, version: int | str | None = None) -> lance.LanceDataset:
        try:
            return lance.dataset(self.uri, version=version, storage_options=self.storage_options)
        except ValueError as e:
            msg = str(e)
            if "not found" in msg.lower() or "does not exist" in msg.lower():
                raise NotFoundError(f"{self.uri}: version or tag {version!r} does not exist") from None
            raise StorageError(f"{self.uri}: {msg.splitlines()[0]}") from None
        except OSError as e:
            raise CollectionNotFoundError(f"{self.uri}: {str(e).splitlines()[0]}") from None

    # ----------------------------------------------------------------- versions
    def resolve(self, ref: int | str | None) -> int:
        """A version number for a tag name, a version number (int or digits), or None /
        ``"latest"`` (the newest version)."""
        ds = self._dataset()
        if ref is None or ref == LATEST:
            return int(ds.version)
        if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
            v = int(ref)
            if v < 1 or v > ds.latest_version or v not in {x["version"] for x in ds.versions()}:
                raise NotFoundError(f"{self.uri}: version {v} does not exist")
            return v
        try:
            return int(ds.tags.get_version(ref))
        except (ValueError, KeyError, OSError):
            raise NotFoundError(f"{self.uri}: no tag or version named {ref!r}") from None

    def snapshot(self, as_of: int | str | None = None) -> Snapshot:
        """Everything frozen by one Lance version (latest when ``as_of`` is None); an older
        version whose files are gone is refused (``StorageError``)."""
        version = self.resolve(as_of)
        latest = as_of is None or as_of == LATEST
        return Snapshot(self, self._dataset(version) if latest else self.readable(version), version)

    def readable(self, version: int) -> lance.LanceDataset:
        """Version ``version``, checked to have every file it needs unless it is the latest
        (which gc never touches): a gc interrupted by an older refstore deleted files first."""
        from ._files import missing_files

        ds = self._dataset(version)
        if version < int(ds.latest_version):
            gone = missing_files(ds)
            if gone:
                raise StorageError(f"{self.uri}: version {version} cannot be read: {len(gone)} of its files are "
                                   f"missing ({gone[0]}), left by an interrupted gc; gc removes it")  # fmt: skip
        return ds

    @property
    def latest_version(self) -> int:
        return int(self._dataset().version)


def _grid_cells(meta: ArrayMeta, era: int | None) -> int:
    """Cells of the chunk grid of ``meta`` (of one era: its own grid)."""
    from ..plan.grid import Grid

    grid = Grid.of_era(meta, era)
    return math.prod(grid.nchunks(d) for d in range(grid.ndim))


class Snapshot:
    """A read-only view of the collection at one version."""

    def __init__(self, collection: Collection, ds: lance.LanceDataset, version: int) -> None:
        self.collection = collection
        self.ds = ds
        self.version = version
        self._arrays: dict[str, ArrayMeta] | None = None
        self._config: dict[str, Any] | None = None
        self._identity: dict[str, tuple[int, int, str]] | None = None
        self._checksums: dict[str, str] | None = None
        self._slabs: dict[str, SlabLayout] = {}
        self._spans: dict[str, SourceSpans | None] = {}
        self._indices = IndexCache()

    def rows(self, kind: str, columns: Sequence[str], where: str | None = None) -> pa.Table:
        flt = f"kind = {sql_str(kind)}" + (f" AND ({where})" if where else "")
        with storage_errors(self.collection.uri, self.version):
            return self.ds.to_table(columns=list(columns), filter=flt)

    def rows_of_sources(self, kind: str, sources: Sequence[str], columns: Sequence[str], *,
                        with_row_id: bool = False) -> pa.Table:  # fmt: skip
        """Rows of ``kind`` belonging to ``sources``. Lance is asked for ``source IN (...)``
        alone and ``kind`` is tested here: the BITMAP(source) lookup takes milliseconds, but
        ANDed with ``kind = 'chunk'`` (a row set of nearly every row) the same query took ~20 s
        at 100M rows (measured on the bench collection, ``design/scale.md``)."""
        flt = "source IN (" + ", ".join(sql_str(x) for x in sources) + ")" if sources else "false"
        cols = [*columns, *(["kind"] if "kind" not in columns else [])]
        with storage_errors(self.collection.uri, self.version):
            t = self.ds.to_table(columns=cols, filter=flt, with_row_id=with_row_id)
        t = t.filter(pc.equal(t.column("kind"), kind))
        return t.select([*columns, *(["_rowid"] if with_row_id else [])])

    @property
    def digest_column(self) -> str:
        """The held bytes' digest column of this version: ``held_digest``, or ``held_sha256`` in
        a version written in format 1 (``schema.FORMAT_VERSION``)."""
        return "held_sha256" if "held_sha256" in self.ds.schema.names else "held_digest"

    def config(self) -> dict[str, Any]:
        if self._config is None:
            t = self.rows(Kind.COLLECTION, ["meta"])
            self._config = json.loads(t.column("meta")[0].as_py()) if t.num_rows else {}
        return self._config

    def head_address(self) -> int:
        """The row address of the collection row, looked up from the newest fragment back (every
        refstore commit writes it anew, so it sits in the last fragments; no full-table scan
        where the ``kind`` index is missing or stale)."""
        with storage_errors(self.collection.uri, self.version):
            for frag in reversed(self.ds.get_fragments()):
                t = self.ds.scanner(
                    columns=[], filter=f"kind = '{Kind.COLLECTION}'", fragments=[frag], with_row_address=True
                ).to_table()
                if t.num_rows:
                    return int(t.column("_rowaddr")[0].as_py())
        raise StorageError(f"{self.collection.uri}: version {self.version} has no collection row")

    @property
    def concat_dim(self) -> str | None:
        value = self.config().get("concat_dim")
        return str(value) if value is not None else None

    def arrays(self) -> dict[str, ArrayMeta]:
        if self._arrays is None:
            t = self.rows(Kind.ARRAY, ["array", "meta"])
            metas = [ArrayMeta.from_json(m) for m in t.column("meta").to_pylist()]
            self._arrays = {m.name: m for m in sorted(metas, key=lambda m: m.name)}
        return self._arrays

    def array(self, name: str) -> ArrayMeta:
        arrays = self.arrays()
        if name not in arrays:
            known = ", ".join(list(arrays)[:10]) or "none"
            raise NotFoundError(f"no array named {name!r} in {self.collection.uri} (arrays: {known})")
        return arrays[name]

    def sources(self) -> pa.Table:
        return self.rows(Kind.SOURCE, ["source", "size", "mtime_ns", "etag", "sort_value", "meta"])

    def group_attrs(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Group attributes (typed JSON, see ``_values``) by group path (``""`` = root), as found
        in the first source in order (``order``, then location), or as an imported store has them
        (``design/import.md``); sorted by path."""
        imported = self.config().get("groups") if self.config().get("imported") else None
        if imported is not None:
            return {k: imported[k] for k in sorted(imported)} or {"": {}}
        t = self.rows(Kind.SOURCE, ["source", "meta"])
        if t.num_rows == 0:
            return {"": {}}
        metas = [json.loads(m) for m in t.column("meta").to_pylist()]
        firsts = sorted(zip(metas, t.column("source").to_pylist(), strict=True),
                        key=lambda ms: (ms[0].get("order", 0), ms[1]))  # fmt: skip
        groups: dict[str, dict[str, dict[str, Any]]] = firsts[0][0].get("groups") or {"": {}}
        return {k: groups[k] for k in sorted(groups)}

    def source_identity(self) -> dict[str, tuple[int, int, str]]:
        """location -> (size, mtime_ns, etag) as recorded at scan time (cached per snapshot)."""
        if self._identity is None:
            t = self.rows(Kind.SOURCE, ["source", "size", "mtime_ns", "etag"])
            self._identity = {
                r["source"]: (int(r["size"]), int(r["mtime_ns"]), str(r["etag"] or "")) for r in t.to_pylist()
            }
        return self._identity

    def source_checksums(self) -> dict[str, str]:
        """location -> content digest recorded by ``scan --checksum`` (``sha256:<hex>``), for
        the sources that have one (cached per snapshot)."""
        if self._checksums is None:
            t = self.rows(Kind.SOURCE, ["source", "meta"])
            pairs = zip(t.column("source").to_pylist(), t.column("meta").to_pylist(), strict=True)
            found = {s: json.loads(m).get("checksum") if m else None for s, m in pairs}
            self._checksums = {s: c for s, c in found.items() if c}
        return self._checksums

    def vars(self, where: str | None = None) -> pa.Table:
        from ..schema import DEST_COLUMNS

        return self.rows(Kind.VAR, ["array", "source", "status", "meta", "era", *DEST_COLUMNS], where)

    def count(self, kind: str, where: str | None = None) -> int:
        flt = f"kind = {sql_str(kind)}" + (f" AND ({where})" if where else "")
        with storage_errors(self.collection.uri, self.version):
            return int(self.ds.count_rows(filter=flt))

    def view_filter(self, array: str, ranges: Sequence[tuple[int, int]] | None = None, era: int | None = None) -> str:
        """The pushdown filter for chunk rows of ``array`` in the view whose global key lies in
        the inclusive ``ranges`` (on the grid of ``era`` when the array has eras)."""
        ndim = len(self.array(array).shape)
        # In the view: g0 >= -1 (NOT_PLACED = -2 is outside; unused dimensions hold NO_DIM = -1).
        # Rows of other kinds always hold g0 = NO_DIM, so a range with lo >= 0 on g0 selects chunk
        # rows only and the (costly) string test on ``kind`` can be left out.
        parts = [f"array = {sql_str(array)}"]
        if era is not None:
            parts.append(f"era = {int(era)}")
        if ranges is not None and ndim:
            parts += [
                f"{GLOBAL_KEY_COLUMNS[i]} BETWEEN {max(int(lo), 0)} AND {int(hi)}" for i, (lo, hi) in enumerate(ranges)
            ]
        else:
            parts = ["kind = 'chunk'", *parts, "g0 >= -1"]
        return " AND ".join(parts)

    def chunk_rows(
        self,
        array: str,
        ranges: Sequence[tuple[int, int]] | None = None,
        columns: Sequence[str] = ("source", "offset", "length", "filter_mask", "inline", "held_at"),
        *,
        with_row_id: bool = False,
        era: int | None = None,
    ) -> pa.Table:
        """Chunk rows of ``array`` in the view (see ``view_filter``); the global key columns of
        the array come first (``g0..g{ndim-1}``). Rows of a gridless array (``plan/slabs.py``)
        also carry ``source`` and ``k0..k{ndim-1}``; its ``ranges`` are coarse keys."""
        meta = self.array(array)
        ndim = len(meta.shape)
        cols = [*GLOBAL_KEY_COLUMNS[:ndim], *columns]
        if meta.gridless:  # chunks are placed by their slab: the source and the key within it
            cols += [c for c in ("source", *SOURCE_KEY_COLUMNS[:ndim]) if c not in cols]
        elif set(columns) <= set(INDEXED_COLUMNS):
            index = self._indices.get(array, era, _grid_cells(meta, era), ndim, lambda: self._load_index(array, era))
            if index is not None:
                return index.rows(ranges, columns, with_row_id=with_row_id)
        if ranges is not None and ndim and not meta.gridless:
            spans = self._spans_of(array)
            sources = spans.sources(ranges, era) if spans is not None else None
            if spans is not None and sources is not None:
                return self._rows_by_sources(array, ranges, era, spans.axis, sources, cols, with_row_id)
        with storage_errors(self.collection.uri, self.version):
            return self.ds.to_table(
                columns=cols, filter=self.view_filter(array, ranges, era), with_row_id=with_row_id,
                late_materialization=True,
            )  # fmt: skip

    def _spans_of(self, array: str) -> SourceSpans | None:
        """Which source covers which chunk keys of ``array`` along the concat axis (cached)."""
        if array not in self._spans:
            from ..schema import DEST_COLUMNS

            meta = self.array(array)
            spans = None
            if self.concat_dim is not None and self.concat_dim in meta.dims:
                d = DEST_COLUMNS[meta.dims.index(self.concat_dim)]
                var = self.rows(Kind.VAR, ["source", "meta", "era", d], f"array = {sql_str(array)}")
                spans = SourceSpans.of(meta, self.concat_dim, var)
            self._spans[array] = spans
        return self._spans[array]

    def _rows_by_sources(self, array: str, ranges: Sequence[tuple[int, int]], era: int | None, axis: int,
                         sources: list[str], cols: list[str], with_row_id: bool) -> pa.Table:  # fmt: skip
        """The rows ``view_filter`` selects, asked of Lance by their ``sources`` (``_spans.py``):
        the other axes' ranges in the query, the concat axis's applied to its answer."""
        ndim = len(ranges)
        # Rows of arrays with fewer dimensions hold NO_DIM (-1) in g{ndim-1}, outside a range on it
        # (bounded below by 0): when every other array has fewer dimensions and that range is in
        # the query, the ``array`` term (BITMAP(array) over every row of the table) is left out.
        alone = axis != ndim - 1 and all(len(m.shape) < ndim for n, m in self.arrays().items() if n != array)
        if not sources:
            parts = ["false"]
        else:
            parts = ["source IN (" + ", ".join(sql_str(s) for s in sources) + ")"]
            if not alone:
                parts.append(f"array = {sql_str(array)}")
            if era is not None:
                parts.append(f"era = {int(era)}")
            parts += [f"{GLOBAL_KEY_COLUMNS[i]} BETWEEN {max(int(lo), 0)} AND {int(hi)}"
                      for i, (lo, hi) in enumerate(ranges) if i != axis]  # fmt: skip
        with storage_errors(self.collection.uri, self.version):
            t = self.ds.to_table(columns=cols, filter=" AND ".join(parts), with_row_id=with_row_id,
                                 late_materialization=True)  # fmt: skip
        lo, hi = ranges[axis]
        g = t.column(GLOBAL_KEY_COLUMNS[axis])
        return t.filter(pc.and_(pc.greater_equal(g, max(int(lo), 0)), pc.less_equal(g, int(hi))))

    def chunk_rows_at(
        self, array: str, positions: np.ndarray[Any, Any], columns: Sequence[str], *, era: int | None = None
    ) -> pa.Table:
        """The chunk rows of ``array`` at ``positions`` (sorted, distinct) of the view's scan
        order, with ``_rowid`` and the columns ``chunk_rows`` gives: row ids are streamed batch by
        batch (memory bounded by a batch, not by the array) and only the picked rows are read."""
        meta = self.array(array)
        ndim = len(meta.shape)
        cols = [*GLOBAL_KEY_COLUMNS[:ndim], *columns]
        if meta.gridless:
            cols += [c for c in ("source", *SOURCE_KEY_COLUMNS[:ndim]) if c not in cols]
        picked: list[pa.Array] = []
        seen, i = 0, 0
        with storage_errors(self.collection.uri, self.version):
            for batch in self.ds.to_batches(columns=[], with_row_id=True, filter=self.view_filter(array, None, era)):
                n = batch.num_rows
                j = int(np.searchsorted(positions, seen + n))
                if j > i:
                    picked.append(batch.column("_rowid").take(pa.array(positions[i:j] - seen)))
                i, seen = j, seen + n
                if i == len(positions):
                    break
            ids = pa.concat_arrays(picked) if picked else pa.array([], pa.uint64())
            return self.ds._take_rows(ids, columns=[*cols, "_rowid"])

    def slab_layout(self, array: str) -> SlabLayout:
        """The placed slabs of ``array`` (from its var rows; cached per snapshot): what places the
        chunks of a gridless array (``plan/slabs.py``)."""
        if array not in self._slabs:
            from ..schema import DEST_COLUMNS

            meta = self.array(array)
            t = self.rows(Kind.VAR, ["source", "meta", *DEST_COLUMNS[: meta.ndim]],
                          f"array = {sql_str(array)} AND d0 != {NOT_PLACED}")  # fmt: skip
            own = [ArrayMeta.from_json(m) for m in t.column("meta").to_pylist()]
            offsets = (
                zip(*(t.column(c).to_pylist() for c in DEST_COLUMNS[: meta.ndim]), strict=True)
                if meta.ndim
                else ((),) * t.num_rows
            )
            locs = t.column("source").to_pylist()
            slabs = list(zip(locs, offsets, [m.shape for m in own], strict=True))
            layouts = [(loc, m.chunks, m.codecs) for loc, m in zip(locs, own, strict=True)] if meta.cell else []
            self._slabs[array] = SlabLayout.of(meta.shape, meta.chunks, slabs, layouts=layouts, cell=meta.cell)
        return self._slabs[array]

    def _load_index(self, array: str, era: int | None) -> pa.Table:
        """Every chunk row of ``array`` (``era``) in the view, for its ``ChunkIndex``."""
        ndim = len(self.array(array).shape)
        with storage_errors(self.collection.uri, self.version):
            return self.ds.to_table(
                columns=[*GLOBAL_KEY_COLUMNS[:ndim], *INDEXED_COLUMNS], filter=self.view_filter(array, None, era),
                with_row_id=True,
            )  # fmt: skip

    def chunk_keys(self, array: str) -> np.ndarray[Any, Any]:
        t = self.chunk_rows(array, columns=())
        ndim = len(self.array(array).shape)
        if ndim == 0:
            return np.zeros((t.num_rows, 0), np.int64)
        return np.column_stack([pc.cast(t.column(c), pa.int64()).to_numpy() for c in GLOBAL_KEY_COLUMNS[:ndim]])

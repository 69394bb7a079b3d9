"""kerchunk JSON: the fsspec reference spec, version 1, with zarr v2 metadata.

``{"version": 1, "generator": "refstore", "refs": {".zgroup": ..., "sst/.zarray": ...,
"sst/0.0.0": [URL, offset, length], "lat/0": "base64:..."}}``. Every reference spells its
published URL in full: no ``templates`` (nor ``gen``), which GDAL's ``/vsikerchunk_json_ref/``
refuses (GDAL 3.12: "'templates' key found, but not supported"); ``version`` comes first, as GDAL
needs it to find ``refs``. Metadata values as JSON strings (plus ``.zmetadata``, zarr v2
consolidated metadata, so zarr and xarray open it without listing), inline chunks base64,
absent chunks absent (zarr reads the fill value). Each array's chunks come first, in C order,
then the metadata keys, sorted, so the file is byte-identical for one version and options.

Chunk entries are built column-wise with ``pyarrow.compute`` string kernels and written from the
Arrow buffer: no Python object per chunk (inline chunks, which are few, are base64-encoded one
by one). Held chunks are written inline too (``"base64:..."`` of the held bytes), so the form
reads what its version reads; at most :data:`MAX_HELD_BYTES` of them per array (the whole file
is loaded by its readers), beyond which the array is refused (``UnexpressibleError``: the
Parquet, Icechunk and SQLite forms carry any amount). Open with
``fsspec.filesystem("reference", fo=OUT, remote_protocol="file")`` + zarr (format 2), or xarray
``open_dataset("reference://", engine="zarr", storage_options={"fo": OUT, ...})``, or GDAL >= 3.11
``ZARR:"/vsikerchunk_json_ref/{OUT}":/name``. The URLs repeat per chunk; the file compresses well.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS
from .._values import decode_attr, decode_fill
from ..errors import UnexpressibleError
from ..plan.remap import to_url
from ..schema import Kind
from ..table.collection import sql_str
from ..zarr_meta import NCZARR_ATTR, attr_types, attr_value, attr_values, v2_array, v2_attrs
from ._common import JSON_MARK, atomic_output, check_zarr

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = [
    "MAX_FILL_BYTES",
    "MAX_HELD_BYTES",
    "FillPlan",
    "absent_chunks",
    "check",
    "check_v2",
    "consolidated",
    "encoded_fill_chunk",
    "fill_plan",
    "group_metadata",
    "string_dictionary",
    "v2_chunk_keys",
    "v2_metadata",
    "v2_zarray",
    "v2_zattrs",
    "write",
]


MAX_HELD_BYTES = 64 * 2**20
"""At most this many bytes of held chunks written inline (base64) per array in kerchunk JSON."""


def check_v2(src: EmitSource, meta: ArrayMeta) -> None:
    """What both kerchunk forms refuse: the zarr v2 model (``check_zarr``) and fill values
    (:func:`fill_plan`)."""
    check_zarr(src, meta, zarr_format=2)
    n_refs = src.snapshot.count(Kind.CHUNK, f"array = {sql_str(meta.name)}")
    fill_plan(meta, math.prod(src.grid(meta)), n_refs)


def check(src: EmitSource, meta: ArrayMeta) -> None:
    """:func:`check_v2`, and held chunks over :data:`MAX_HELD_BYTES` (inline in the JSON)."""
    check_v2(src, meta)
    chunks, size = src.held_counts().get(meta.name, (0, 0))
    if size > MAX_HELD_BYTES:
        raise UnexpressibleError(
            f"array {meta.name!r}: its {chunks} held chunks take {size} bytes, over the {MAX_HELD_BYTES} "
            "kerchunk JSON writes inline per array; kerchunk-parquet, icechunk, parquet and sqlite carry them "
            "(or release them)"
        )


_STR = pa.large_string()


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def group_metadata(src: EmitSource, arrays: list[ArrayMeta]) -> dict[str, dict[str, Any]]:
    """``.zgroup``/``.zattrs`` documents (as objects) for the root and every group holding an
    emitted array; group attributes from the collection's first source (length-1 arrays as
    scalars)."""
    groups = src.group_attrs()
    paths = {""}
    for m in arrays:
        parts = m.name.split("/")[:-1]
        paths.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    out: dict[str, dict[str, Any]] = {}
    for g in sorted(paths):
        prefix = f"{g}/" if g else ""
        out[f"{prefix}.zgroup"] = {"zarr_format": 2}
        attrs = attr_values(groups.get(g) or {})
        types = attr_types(groups.get(g) or {})
        out[f"{prefix}.zattrs"] = {**attrs, NCZARR_ATTR: types} if types else attrs
    return out


MAX_FILL_BYTES = 64 * 2**20
"""At most this many bytes of fill chunks written inline per array (see :func:`fill_plan`)."""


@dataclass(frozen=True, slots=True)
class FillPlan:
    """How an array's absent chunks read as the stored (HDF5) fill value while xarray masks
    exactly the CF ``_FillValue``: ``fill_value`` for ``.zarray`` (None: ``null``), ``attr``
    (keep ``_FillValue`` in ``.zattrs``), ``chunk`` (the encoded fill chunk written inline for
    every absent chunk, or None)."""

    fill_value: Any
    attr: bool
    chunk: bytes | None


def _bits(value: Any, dt: np.dtype[Any]) -> bytes:
    return np.asarray(value, dtype=dt).tobytes()


def encoded_fill_chunk(meta: ArrayMeta, value: Any) -> bytes:
    """One chunk of ``value`` encoded by the array's zarr v2 filters (in encode order), so a
    zarr reader decodes it back to the fill value."""
    import numcodecs
    from numcodecs.compat import ensure_bytes

    from ..zarr_meta import register_codecs, v2_filters

    register_codecs()
    data: Any = np.full(meta.chunks, value, dtype=np.dtype(meta.dtype))
    for cfg in v2_filters(meta):
        try:
            data = numcodecs.get_codec(dict(cfg)).encode(data)
        except Exception as e:  # a codec that only decodes (or rejects the chunk)
            raise UnexpressibleError(
                f"array {meta.name!r}: cannot encode a fill chunk with {cfg['id']} ({e}); its absent chunks "
                "need one in zarr v2"
            ) from None
    return bytes(ensure_bytes(data))


def fill_plan(meta: ArrayMeta, n_chunks: int, n_refs: int) -> FillPlan:
    """zarr v2 has one ``fill_value`` for two jobs: what absent chunks read as, and (for xarray,
    which masks it) the CF ``_FillValue``; ``null`` reads absent chunks as zero (zarr-python 3)
    and makes xarray mask the ``.zattrs`` ``_FillValue`` if any. So, with ``F`` the stored fill
    value and ``A`` the ``_FillValue`` attribute (compared bitwise):

    - no absent chunks, or ``F == A``: ``fill_value: A`` (``null`` without ``A``);
    - ``F`` zero: ``fill_value: null`` (and ``A`` kept in ``.zattrs``), except for a complex ``A``:
      xarray takes a ``.zattrs`` ``_FillValue`` as written (``[re, im]`` would be two fill values);
    - else every absent chunk is written inline as one encoded chunk of ``F``, with
      ``fill_value: A`` (``null`` without ``A``), up to :data:`MAX_FILL_BYTES`; beyond that the
      array is refused (``UnexpressibleError``).
    """
    dt = np.dtype(meta.dtype)
    stored = decode_fill(meta.fill_value, dt)
    cf = None
    if "_FillValue" in meta.attrs:
        cf = np.asarray(decode_attr(meta.attrs["_FillValue"])).astype(dt).ravel()[0]
    absent = n_chunks - n_refs
    if absent <= 0 or (cf is not None and _bits(cf, dt) == _bits(stored, dt)):
        return FillPlan(cf, False, None)
    if not any(_bits(stored, dt)) and not (cf is not None and dt.kind == "c"):
        return FillPlan(None, cf is not None, None)
    chunk = encoded_fill_chunk(meta, stored)
    if absent * len(chunk) > MAX_FILL_BYTES:
        raise UnexpressibleError(
            f"array {meta.name!r}: its {absent} absent chunks read as the stored fill value {stored!r}, which "
            f"zarr v2 cannot say apart from the _FillValue; inline fill chunks would take {absent * len(chunk)} "
            f"bytes (over {MAX_FILL_BYTES}); the icechunk, parquet and sqlite forms express it"
        )
    return FillPlan(cf, False, chunk)


def v2_zarray(src: EmitSource, meta: ArrayMeta, n_refs: int) -> dict[str, Any]:
    """``.zarray`` of an array with ``n_refs`` chunk references (inline ones included); fill
    value by :func:`fill_plan`."""
    return v2_array(meta, fill_value=fill_plan(meta, math.prod(src.grid(meta)), n_refs).fill_value)


def v2_zattrs(src: EmitSource, meta: ArrayMeta, n_refs: int) -> dict[str, Any]:
    """``.zattrs`` of an array: :func:`~refstore.zarr_meta.v2_attrs`, plus ``_FillValue`` when
    :func:`fill_plan` keeps it there, plus NCZarr's ``_nczarr_attr`` (:func:`~refstore.zarr_meta.attr_types`:
    the attributes' types and shapes, and the stored fill value when ``fill_value`` says another)."""
    attrs = v2_attrs(meta)
    plan = fill_plan(meta, math.prod(src.grid(meta)), n_refs)
    if plan.attr:
        attrs["_FillValue"] = attr_value(meta.attrs["_FillValue"])
    dt = np.dtype(meta.dtype)
    said = np.zeros((), dt)[()] if plan.fill_value is None else plan.fill_value  # zarr reads null as 0
    stored = decode_fill(meta.fill_value, dt)
    types = attr_types(meta.attrs, stored_fill=None if _bits(said, dt) == _bits(stored, dt) else meta.fill_value)
    if types:
        attrs[NCZARR_ATTR] = types
    return dict(sorted(attrs.items()))


def absent_chunks(src: EmitSource, meta: ArrayMeta, refs: pa.Table) -> np.ndarray[Any, Any]:
    """C-order flat indices of the chunks ``refs`` does not hold (int64, ascending)."""
    present = np.zeros(math.prod(src.grid(meta)), bool)
    present[src.flat_index(meta, refs)] = True
    out: np.ndarray[Any, Any] = np.flatnonzero(~present).astype(np.int64)
    return out


def v2_metadata(src: EmitSource, arrays: list[ArrayMeta], n_refs: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Every zarr v2 metadata document of the form (groups, ``.zarray``, ``.zattrs``) as
    objects, sorted by key; ``n_refs``: chunk references per array (see :func:`v2_zarray`)."""
    docs: dict[str, dict[str, Any]] = dict(group_metadata(src, arrays))
    for meta in arrays:
        docs[f"{meta.name}/.zarray"] = v2_zarray(src, meta, n_refs[meta.name])
        docs[f"{meta.name}/.zattrs"] = v2_zattrs(src, meta, n_refs[meta.name])
    return {k: docs[k] for k in sorted(docs)}


def consolidated(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """zarr v2 consolidated metadata (``.zmetadata``) of ``docs``."""
    return {"metadata": docs, "zarr_consolidated_format": 1}


def v2_chunk_keys(meta: ArrayMeta, refs: pa.Table) -> pa.Array:
    """zarr v2 chunk keys within the array (``i.j.k``; ``0`` for a scalar) of the rows of
    ``refs``, in row order (large_string)."""
    ndim = len(meta.shape)
    if ndim == 0:
        return pa.array(["0"] * refs.num_rows, _STR)
    cols = [pc.cast(refs.column(GLOBAL_KEY_COLUMNS[i]), _STR) for i in range(ndim)]
    if ndim == 1:
        return cols[0].combine_chunks()
    return pc.binary_join_element_wise(*cols, _s(".")).combine_chunks()


def _s(text: str) -> pa.Scalar:
    return pa.scalar(text, _STR)


def _entries(src: EmitSource, meta: ArrayMeta, refs: pa.Table) -> pa.Array:
    """``"name/i.j":["URL",offset,length],`` (or ``"name/i.j":"base64:...",`` for inline
    chunks) per row, built column-wise; the caller writes the value buffer as is."""
    prefix = json.dumps(meta.name)[:-1] + "/"
    keys = v2_chunk_keys(meta, refs)
    d = string_dictionary(refs.column("path"))
    names = pa.array([json.dumps(to_url(p)) for p in d.dictionary.to_pylist()], _STR)
    url = pc.take(names, d.indices)
    out = pc.binary_join_element_wise(
        _s(prefix), keys, _s('":['), url, _s(","), pc.cast(refs.column("offset"), _STR), _s(","),
        pc.cast(refs.column("length"), _STR), _s("],"), _s(""),
    )  # fmt: skip
    inline = pc.less(refs.column("offset"), 0).combine_chunks()
    if pc.any(inline).as_py():
        rows = np.flatnonzero(inline.to_numpy(zero_copy_only=False))
        blobs = refs.column("inline").take(pa.array(rows)).to_pylist()
        ikeys = keys.take(pa.array(rows)).to_pylist()
        b64 = [base64.b64encode(b or b"").decode("ascii") for b in blobs]
        texts = [f'{prefix}{k}":"base64:{v}",' for k, v in zip(ikeys, b64, strict=True)]
        idx = np.full(refs.num_rows, -1, np.int64)
        idx[rows] = np.arange(len(rows))
        full = pc.take(pa.array(texts, _STR), pa.array(idx, mask=idx < 0))
        out = pc.if_else(inline, full, out)
    out = out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out
    plan = fill_plan(meta, math.prod(src.grid(meta)), refs.num_rows)
    if plan.chunk is None:
        return out
    absent = absent_chunks(src, meta, refs)
    ndim = len(meta.shape)
    where = np.unravel_index(absent, src.grid(meta)) if ndim else ()
    akeys = v2_chunk_keys(meta, pa.table({GLOBAL_KEY_COLUMNS[i]: pa.array(where[i], pa.int64()) for i in range(ndim)})
                          if ndim else pa.table({"n": pa.nulls(len(absent))}))  # fmt: skip
    value = f'":"base64:{base64.b64encode(plan.chunk).decode("ascii")}",'
    fills = pc.binary_join_element_wise(_s(prefix), akeys, _s(value), _s(""))
    order = np.argsort(np.concatenate([src.flat_index(meta, refs), absent]), kind="stable")
    merged = pc.take(pa.concat_arrays([out, fills]), pa.array(order))
    return merged.combine_chunks() if isinstance(merged, pa.ChunkedArray) else merged


def string_dictionary(col: pa.ChunkedArray) -> pa.DictionaryArray:
    """One dictionary array for a (possibly chunked) string column."""
    if col.num_chunks == 1 and pa.types.is_dictionary(col.type):
        return col.chunk(0)
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, pa.string())
    return pc.dictionary_encode(col.combine_chunks())


def _value_bytes(arr: pa.Array) -> memoryview:
    """The concatenated values of a large_string array (no copy)."""
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    if data is None or len(arr) == 0:
        return memoryview(b"")
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]


def write(
    src: EmitSource, arrays: list[ArrayMeta], out: str, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    n_refs: dict[str, int] = {}
    with atomic_output(out) as tmp, open(tmp, "wb") as f:
        head = f'{JSON_MARK},"refs":{{'
        f.write(head.encode("ascii"))
        for i, meta in enumerate(arrays):  # chunk entries, each followed by a comma
            t = src.refs(meta.name)
            if math.prod(src.grid(meta)):
                f.write(_value_bytes(_entries(src, meta, t)))
            n_refs[meta.name] = t.num_rows
            if progress is not None:
                progress(i + 1, len(arrays))
        docs = v2_metadata(src, arrays, n_refs)  # metadata last: the fill values need the counts
        meta_refs = {k: _dumps(v) for k, v in docs.items()}
        meta_refs[".zmetadata"] = _dumps(consolidated(docs))
        f.write(",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(meta_refs.items())).encode("ascii"))
        f.write(b"}}")
    return {"refs": sum(n_refs.values())}

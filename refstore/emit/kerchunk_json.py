"""kerchunk JSON: the fsspec reference spec, version 1, with zarr v2 metadata.

``{"version": 1, "templates": {"u0": URL, ...}, "refs": {".zgroup": ..., "sst/.zarray": ...,
"sst/0.0.0": ["{{u0}}", offset, length], "lat/0": "base64:..."}}``. One template per distinct
published URL (in URL order), metadata values as JSON strings (plus ``.zmetadata``, zarr v2
consolidated metadata, so zarr and xarray open it without listing), inline chunks base64,
absent chunks absent (zarr reads the fill value). Each array's chunks come first, in C order,
then the metadata keys, sorted, so the file is byte-identical for one version and options.

Chunk entries are built column-wise with ``pyarrow.compute`` string kernels and written from the
Arrow buffer: no Python object per chunk (inline chunks, which are few, are base64-encoded one
by one). Held bytes are a cache: the references point at the (remapped) sources. Open with
``fsspec.filesystem("reference", fo=OUT, remote_protocol="file")`` + zarr (format 2), or xarray
``open_dataset("reference://", engine="zarr", storage_options={"fo": OUT, ...})``. fsspec imports
jinja2 whenever a file has templates.
"""

from __future__ import annotations

import base64
import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._keys import GLOBAL_KEY_COLUMNS
from .._values import decode_fill
from ..plan.remap import to_url
from ..zarr_meta import v2_array, v2_attrs
from ._common import atomic_output, check_zarr

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = [
    "check",
    "chunk_keys",
    "consolidated",
    "fill_chunk",
    "group_metadata",
    "string_dictionary",
    "v2_chunk_keys",
    "v2_metadata",
    "v2_zarray",
    "write",
]


def check(src: EmitSource, meta: ArrayMeta) -> None:
    check_zarr(src, meta, zarr_format=2)


_STR = pa.large_string()


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def group_metadata(src: EmitSource, arrays: list[ArrayMeta]) -> dict[str, dict[str, Any]]:
    """``.zgroup``/``.zattrs`` documents (as objects) for the root and every group holding an
    emitted array; group attributes from the collection's first source (length-1 arrays as
    scalars)."""
    from .._values import decode_attr
    from ..zarr_meta import scalar_value

    groups = src.group_attrs()
    paths = {""}
    for m in arrays:
        parts = m.name.split("/")[:-1]
        paths.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    out: dict[str, dict[str, Any]] = {}
    for g in sorted(paths):
        prefix = f"{g}/" if g else ""
        out[f"{prefix}.zgroup"] = {"zarr_format": 2}
        attrs = {k: scalar_value(decode_attr(v)) for k, v in sorted((groups.get(g) or {}).items())}
        out[f"{prefix}.zattrs"] = attrs
    return out


def fill_chunk(src: EmitSource, meta: ArrayMeta, n_refs: int) -> bytes | None:
    """The bytes of the one chunk of a never-written, uncompressed, single-chunk array without
    a ``_FillValue`` attribute (netCDF's attribute-only scalars such as ``grid_mapping``
    variables), written inline so its ``.zarray`` can say ``fill_value: null``; else None."""
    if n_refs or meta.codecs or "_FillValue" in meta.attrs or math.prod(src.grid(meta)) != 1:
        return None
    dt = np.dtype(meta.dtype)
    return np.full(meta.chunks, decode_fill(meta.fill_value, dt), dtype=dt).tobytes()


def v2_zarray(src: EmitSource, meta: ArrayMeta, n_refs: int) -> dict[str, Any]:
    """``.zarray`` of an array with ``n_refs`` chunk references (inline ones included).

    zarr v2 has one fill value for two jobs: what absent chunks read as, and (for xarray) the CF
    ``_FillValue`` to mask. With a ``_FillValue`` attribute both agree. Without one, an array
    whose chunks are all present (or whose one chunk is written inline, see
    :func:`fill_chunk`) gets ``fill_value: null``: xarray masks nothing, as on the source. Any
    other array with absent chunks keeps its stored fill value, so they read right (and xarray
    masks that value)."""
    if "_FillValue" not in meta.attrs and (
        n_refs >= math.prod(src.grid(meta)) or fill_chunk(src, meta, n_refs) is not None
    ):
        return v2_array(meta, fill_value=None)
    return v2_array(meta)


def v2_metadata(src: EmitSource, arrays: list[ArrayMeta], n_refs: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Every zarr v2 metadata document of the form (groups, ``.zarray``, ``.zattrs``) as
    objects, sorted by key; ``n_refs``: chunk references per array (see :func:`v2_zarray`)."""
    docs: dict[str, dict[str, Any]] = dict(group_metadata(src, arrays))
    for meta in arrays:
        docs[f"{meta.name}/.zarray"] = v2_zarray(src, meta, n_refs[meta.name])
        docs[f"{meta.name}/.zattrs"] = v2_attrs(meta)
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


def chunk_keys(meta: ArrayMeta, refs: pa.Table) -> list[str]:
    """Full zarr v2 chunk keys (``name/i.j.k``) of the rows of ``refs``, in row order."""
    return [f"{meta.name}/{k}" for k in v2_chunk_keys(meta, refs).to_pylist()]


def _s(text: str) -> pa.Scalar:
    return pa.scalar(text, _STR)


def _entries(src: EmitSource, meta: ArrayMeta, refs: pa.Table, templates: dict[str, str]) -> pa.Array:
    """``"name/i.j":["{{u3}}",offset,length],`` (or ``"name/i.j":"base64:...",`` for inline
    chunks) per row, built column-wise; the caller writes the value buffer as is."""
    prefix = json.dumps(meta.name)[:-1] + "/"
    keys = v2_chunk_keys(meta, refs)
    d = string_dictionary(refs.column("path"))
    names = pa.array([templates[to_url(p)] for p in d.dictionary.to_pylist()], _STR)
    tpl = pc.take(names, d.indices)
    out = pc.binary_join_element_wise(
        _s(prefix), keys, _s('":["{{'), tpl, _s('}}",'), pc.cast(refs.column("offset"), _STR), _s(","),
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
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


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
    urls: dict[str, str] = {}
    for p in src.sources().column("published").to_pylist():
        urls.setdefault(to_url(p), f"u{len(urls)}")
    templates = {v: k for k, v in urls.items()}
    n_refs: dict[str, int] = {}
    with atomic_output(out) as tmp, open(tmp, "wb") as f:
        head = f'{{"version":1,"templates":{_dumps(templates)},"refs":{{'
        f.write(head.encode("ascii"))
        for i, meta in enumerate(arrays):  # chunk entries, each followed by a comma
            t = src.refs(meta.name)
            if t.num_rows:
                f.write(_value_bytes(_entries(src, meta, t, urls)))
            fill = fill_chunk(src, meta, t.num_rows)
            if fill is not None:
                key = json.dumps(f"{meta.name}/{'.'.join(['0'] * len(meta.shape)) or '0'}")
                f.write(f'{key}:"base64:{base64.b64encode(fill).decode("ascii")}",'.encode("ascii"))
            n_refs[meta.name] = t.num_rows
            if progress is not None:
                progress(i + 1, len(arrays))
        docs = v2_metadata(src, arrays, n_refs)  # metadata last: the fill values need the counts
        meta_refs = {k: _dumps(v) for k, v in docs.items()}
        meta_refs[".zmetadata"] = _dumps(consolidated(docs))
        f.write(",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(meta_refs.items())).encode("ascii"))
        f.write(b"}}")
    return {"refs": sum(n_refs.values())}

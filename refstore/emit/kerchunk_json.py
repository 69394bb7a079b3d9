"""kerchunk JSON: the fsspec reference spec, version 1, with zarr v2 metadata.

``{"version": 1, "templates": {"u0": URL, ...}, "refs": {".zgroup": ..., "sst/.zarray": ...,
"sst/0.0.0": ["{{u0}}", offset, length], "lat/0": "base64:..."}}``. One template per distinct
published URL (sorted), metadata values as JSON strings, inline chunks base64, absent chunks
absent (zarr reads the fill value). Keys are written sorted, so the file is byte-identical for
one version and options. Held bytes are a cache: the references point at the (remapped)
sources. Open with ``fsspec.filesystem("reference", fo=OUT)`` + zarr (v2), or xarray's
``engine="kerchunk"``.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from .._keys import GLOBAL_KEY_COLUMNS
from ..plan.remap import to_url
from ..zarr_meta import v2_array, v2_attrs
from ._common import atomic_output, check_zarr

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..scan._types import ArrayMeta
    from ._input import EmitSource

__all__ = ["check", "group_metadata", "write"]


def check(src: EmitSource, meta: ArrayMeta) -> None:
    check_zarr(src, meta, zarr_format=2)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def group_metadata(src: EmitSource, arrays: list[ArrayMeta]) -> dict[str, dict[str, Any]]:
    """``.zgroup``/``.zattrs`` documents (as objects) for the root and every group holding an
    emitted array; group attributes from the collection's first source."""
    from .._values import decode_attr
    from ..zarr_meta import plain_value

    groups = src.group_attrs()
    paths = {""}
    for m in arrays:
        parts = m.name.split("/")[:-1]
        paths.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    out: dict[str, dict[str, Any]] = {}
    for g in sorted(paths):
        prefix = f"{g}/" if g else ""
        out[f"{prefix}.zgroup"] = {"zarr_format": 2}
        attrs = {k: plain_value(decode_attr(v)) for k, v in sorted((groups.get(g) or {}).items())}
        out[f"{prefix}.zattrs"] = attrs
    return out


def chunk_keys(meta: ArrayMeta, refs: Any) -> list[str]:
    """zarr v2 chunk keys (``.`` separator) of the rows of ``refs``, in row order."""
    ndim = len(meta.shape)
    if ndim == 0:
        return [f"{meta.name}/0"] * refs.num_rows
    cols = [refs.column(GLOBAL_KEY_COLUMNS[i]).to_numpy().astype(str) for i in range(ndim)]
    joined = cols[0]
    for c in cols[1:]:
        joined = np.char.add(np.char.add(joined, "."), c)
    return np.char.add(f"{meta.name}/", joined).tolist()  # type: ignore[no-any-return]


def write(
    src: EmitSource, arrays: list[ArrayMeta], out: str, *, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    refs_out: dict[str, Any] = {k: _dumps(v) for k, v in group_metadata(src, arrays).items()}
    urls: dict[str, str] = {}
    for p in src.sources().column("published").to_pylist():
        urls.setdefault(to_url(p), f"u{len(urls)}")
    n_refs = 0
    for i, meta in enumerate(arrays):
        refs_out[f"{meta.name}/.zarray"] = _dumps(v2_array(meta))
        refs_out[f"{meta.name}/.zattrs"] = _dumps(v2_attrs(meta))
        t = src.refs(meta.name)
        keys = chunk_keys(meta, t)
        paths = [to_url(p) for p in t.column("path").to_pylist()]
        offsets = t.column("offset").to_pylist()
        lengths = t.column("length").to_pylist()
        inline = t.column("inline")
        for j, key in enumerate(keys):
            if offsets[j] < 0:
                refs_out[key] = "base64:" + base64.b64encode(inline[j].as_py()).decode("ascii")
            else:
                refs_out[key] = ["{{" + urls[paths[j]] + "}}", offsets[j], lengths[j]]
        n_refs += t.num_rows
        if progress is not None:
            progress(i + 1, len(arrays))
    templates = {v: k for k, v in urls.items()}
    doc = {"version": 1, "templates": templates, "refs": refs_out}
    with atomic_output(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(_dumps(doc))
    return {"refs": n_refs}

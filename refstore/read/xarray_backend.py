"""xarray backend: ``xr.open_dataset(collection, engine="refstore", as_of="release-2026-10")``.

Variables are lazy (``LazilyIndexedArray`` over refstore's direct reader: one coalesced plan
per selection, held bytes first); CF decoding (mask, scale/offset, times) is xarray's own, on
attributes typed as netCDF4-python gives them (a float32 ``scale_factor`` stays float32, a
one-element attribute is a scalar, ``_FillValue`` has the variable's dtype), so values and
dtypes equal xarray over the original files. ``chunks=`` gives dask arrays on the stored chunk
grid (``preferred_chunks``). ``group="meta"`` opens a group; arrays recorded as unsupported
(no decoder) are left out. An array whose eras differ in what xarray decodes
(``refstore._cf``: ``scale_factor``, ``_Unsigned``, units...), or that some sources lack, is
decoded per era here, by xarray's coders, and presented decoded (its packing attributes in
``encoding``; where no source holds it, missing as ``xr.concat`` promotes: NaN, NaT), as
``xr.concat`` of the decoded files gives it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from xarray.backends.common import AbstractDataStore, BackendArray, BackendEntrypoint
from xarray.core import indexing
from xarray.core.utils import FrozenDict
from xarray.core.variable import Variable

from .._cf import DECODED_BY_XARRAY, encoding_attrs
from .._values import nc_attr
from ..errors import BadInputError
from ..plan.eras import EraLayout
from ..plan.select import Selection, select
from .array import Array, ReadOptions

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    import xarray as xr

    from .._api import Dataset as RefDataset
    from ..scan._types import ArrayMeta

__all__ = [
    "PACKING",
    "RefstoreBackendArray",
    "RefstoreBackendEntrypoint",
    "RefstoreDataStore",
    "chars_joined",
    "decode_eras",
    "decoded_attrs",
    "decoded_dtype",
    "decodes_here",
    "era_packing",
    "packing_differs",
    "stackable_dims",
]

PACKING = DECODED_BY_XARRAY
"""Attributes xarray's CF decoding consumes (``refstore._cf``, the one list)."""

OPEN_CACHE_SIZE = 8
"""Open collection versions kept per process (least recently used first out)."""

_OPEN: OrderedDict[tuple[str, int, str, tuple[tuple[str, str], ...]], RefDataset] = OrderedDict()
_OPEN_LOCK = threading.Lock()


def _dataset(uri: str, version: int, on_stale: str, storage_options: dict[str, str] | None) -> RefDataset:
    """An open collection version, shared by the arrays of a process (dask workers reopen it
    after unpickling); keyed by storage options too, at most ``OPEN_CACHE_SIZE`` kept."""
    import refstore

    key = (uri, version, on_stale, tuple(sorted((storage_options or {}).items())))
    with _OPEN_LOCK:
        ds = _OPEN.get(key)
        if ds is not None:
            _OPEN.move_to_end(key)
            return ds
    ds = refstore.open(uri, version, storage_options=storage_options, options=ReadOptions(on_stale=on_stale))
    with _OPEN_LOCK:
        ds = _OPEN.setdefault(key, ds)
        _OPEN.move_to_end(key)
        while len(_OPEN) > OPEN_CACHE_SIZE:
            _OPEN.popitem(last=False)
        return ds


def _attrs(attrs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {k: nc_attr(v) for k, v in attrs.items()}


def _packing(attrs: dict[str, Any]) -> dict[str, Any]:
    return encoding_attrs(attrs, PACKING)


def _native(dtype: np.dtype[Any]) -> np.dtype[Any]:
    if dtype.kind == "O":  # variable-length strings: xarray's vlen string dtype, as its netCDF4 backend gives
        return np.dtype("O", metadata={"element_type": str})
    return dtype.newbyteorder("=") if dtype.kind in "biufc" else dtype


class RefstoreBackendArray(BackendArray):
    """Lazy values of one array (raw stored values; or CF-decoded per era, see module doc)."""

    def __init__(self, uri: str, version: int, name: str, *, on_stale: str = "error",
                 storage_options: dict[str, str] | None = None,
                 decode: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.uri, self.version, self.name = uri, version, name
        self.on_stale, self.storage_options = on_stale, storage_options
        self.decode = decode  # decode_cf_variable options when eras are decoded here
        meta = self._ds().snapshot.array(name)
        self.chars = decode is not None and chars_joined(meta, decode)  # char dim joined by the decoding
        self.shape = tuple(int(s) for s in meta.shape)[: -1 if self.chars else None]
        raw = _native(Array(self._ds().snapshot, meta).dtype)
        self.dtype = decoded_dtype(meta, decode) if decode is not None else raw

    def _ds(self) -> RefDataset:
        return _dataset(self.uri, self.version, self.on_stale, self.storage_options)

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._getitem)

    def _getitem(self, key: tuple[Any, ...]) -> np.ndarray[Any, Any]:
        arr = self._ds()[self.name]  # a new Array per read: safe from dask threads
        if self.decode is None:
            out = arr[key]
            return np.asarray(out).astype(self.dtype, copy=False)
        if self.chars:
            sel = select(key, self.shape)
            sel = Selection((*sel.start, 0), (*sel.stop, arr.shape[-1]), (*sel.step, 1), sel.drop)
        else:
            sel = select(key, self.shape)
        return decode_eras(arr, sel, self.dtype, self.decode)


def chars_joined(meta: ArrayMeta, decode: dict[str, Any]) -> bool:
    """Whether xarray's decoding joins the last (character) dimension of ``meta`` (``decode``'s
    ``stack_char_dim``: whether that dimension is stackable in its group, see ``stackable_dims``)."""
    return (bool(decode.get("concat_characters", True)) and bool(decode.get("stack_char_dim", True))
            and np.dtype(meta.dtype) == np.dtype("S1") and meta.ndim > 0)  # fmt: skip


def stackable_dims(arrays: Mapping[str, ArrayMeta]) -> set[str]:
    """The dimensions xarray's ``decode_cf_variables`` joins characters along, in one group:
    no array is named after it, and every array using it is a byte string with it last."""
    used: dict[str, list[ArrayMeta]] = {}
    for m in arrays.values():
        for d in m.dims:
            used.setdefault(d, []).append(m)
    return {d for d, ms in used.items()
            if d not in arrays and all(np.dtype(m.dtype).kind == "S" and m.dims[-1] == d for m in ms)}  # fmt: skip


def decoded_attrs(meta: ArrayMeta, attrs: dict[str, Any], decode: dict[str, Any]) -> set[str]:
    """The attributes of ``attrs`` xarray's ``decode_cf_variable`` moves to ``encoding`` for
    ``meta`` (``units`` of a time, not of a temperature), decided by xarray's coders themselves."""
    empty = np.zeros((0,) * meta.ndim, dtype=np.dtype(meta.dtype))
    import xarray as xr

    var = xr.conventions.decode_cf_variable(meta.name, Variable(meta.dims, empty, dict(attrs)), **decode)
    return set(attrs) - set(var.attrs)


def decodes_here(meta: ArrayMeta) -> bool:
    """Whether the backend decodes ``meta`` itself, per era: its eras differ in CF encoding, or
    some of its sources lack it (those read as missing, as ``xr.concat`` of the files gives)."""
    layout = EraLayout.of(meta)
    return layout is not None and (packing_differs(meta) or bool(layout.hole_positions(_whole(meta))))


def _whole(meta: ArrayMeta) -> Selection:
    return Selection((0,) * meta.ndim, tuple(int(n) for n in meta.shape), (1,) * meta.ndim, ())


def era_packing(era: dict[str, Any]) -> dict[str, Any]:
    """The ``PACKING`` attributes of one era, typed as netCDF4-python gives them."""
    return _packing(_attrs(era["attrs"]))


def packing_differs(meta: ArrayMeta) -> bool:
    """Whether the eras of an array differ in CF packing (``PACKING`` attributes)."""
    return len({repr(sorted(era_packing(e).items())) for e in meta.eras}) > 1


def _eras(meta: ArrayMeta) -> list[dict[str, Any]]:
    """The eras to decode with: the recorded ones, or the array itself as one era."""
    return list(meta.eras) or [{"dtype": meta.dtype, "attrs": meta.attrs, "index": 0}]


def _era_variable(meta: ArrayMeta, era: dict[str, Any], raw: np.ndarray[Any, Any], decode: dict[str, Any]) -> Variable:
    import xarray as xr

    return xr.conventions.decode_cf_variable(meta.name, Variable(meta.dims, raw, _attrs(era["attrs"])), **decode)


def decoded_dtype(meta: ArrayMeta, decode: dict[str, Any]) -> np.dtype[Any]:
    """The dtype holding every era's values once decoded by xarray's coders (``decode``:
    ``decode_cf_variable`` options), promoted as ``xr.concat`` does when some sources lack the
    array (``maybe_promote``: NaN, NaT or an object array)."""
    from xarray.core.dtypes import maybe_promote

    dts = []
    for era in _eras(meta):
        empty = np.zeros((0,) * len(meta.shape), dtype=np.dtype(era["dtype"]))
        dts.append(_era_variable(meta, era, empty, decode).dtype)
    dtype = np.result_type(*dts) if all(d.kind != "O" for d in dts) else np.dtype(object)
    layout = EraLayout.of(meta)
    if layout is not None and layout.hole_positions(_whole(meta)):
        dtype = np.dtype(maybe_promote(dtype)[0])
    return dtype


def _blank_holes(raw: np.ndarray[Any, Any], out: slice, holes: tuple[slice, ...], axis: int) -> np.ndarray[Any, Any]:
    """``raw`` (the part of the result at ``out``) with zeros where no source holds a value: the
    stored fill there is not decoded (a time coder would overflow on it); those positions are
    set missing afterwards."""
    cuts = [(max(h.start, out.start) - out.start, min(h.stop, out.stop) - out.start) for h in holes]
    cuts = [(a, b) for a, b in cuts if b > a]
    if not cuts:
        return raw
    raw = np.array(raw)
    for a, b in cuts:
        idx: list[slice] = [slice(None)] * raw.ndim
        idx[axis] = slice(a, b)
        raw[tuple(idx)] = np.zeros((), raw.dtype)
    return raw


def decode_eras(arr: Array, sel: Selection, dtype: np.dtype[Any], decode: dict[str, Any]) -> np.ndarray[Any, Any]:
    """The values of ``sel``, each era's part read raw and decoded with its own attributes by
    xarray's coders (``decode``: ``decode_cf_variable`` options), as ``dtype``; positions no
    source holds are missing (``maybe_promote``'s fill: NaN, NaT). A character array whose
    last dimension the decoding joins gives one value per string."""
    from xarray.core.dtypes import maybe_promote

    meta = arr.meta
    layout = arr.layout
    assert layout is not None
    whole = Selection(sel.start, sel.stop, sel.step, ())
    joined = chars_joined(meta, decode)
    shape = whole.shape[:-1] if joined else whole.shape
    out = np.zeros(shape, dtype)  # every position is an era's or a hole (set below)
    eras = _eras(meta)
    for part in layout.parts(whole):
        if part.era is None:
            continue
        era = eras[part.era]
        # each era read in its own dtype (an era's _Unsigned applies to its own bits)
        raw = arr.era_array(part.era).read(part.local) if meta.eras else arr.read(part.local)
        raw = _blank_holes(raw, part.out, layout.hole_positions(whole), layout.axis)
        dst: list[slice] = [slice(None)] * len(shape)
        dst[layout.axis] = part.out
        out[tuple(dst)] = np.asarray(_era_variable(meta, era, raw, decode).values)
    for holes in layout.hole_positions(whole):
        dst = [slice(None)] * len(shape)
        dst[layout.axis] = holes
        out[tuple(dst)] = maybe_promote(dtype)[1]
    if sel.drop:
        drop = [i for i in sel.drop if i < len(shape)]
        out = out[tuple(0 if i in drop else slice(None) for i in range(out.ndim))]
    return out


class RefstoreDataStore(AbstractDataStore):
    """The arrays of one group of one collection version, as xarray variables."""

    def __init__(self, uri: str, as_of: int | str | None = None, *, group: str | None = None,
                 on_stale: str = "error", storage_options: dict[str, str] | None = None,
                 decode: dict[str, Any] | None = None) -> None:  # fmt: skip
        from ..table.collection import Collection

        col = Collection.open(uri, storage_options=storage_options)
        self.uri, self.version = col.uri, col.resolve(as_of)
        self.group = (group or "").strip("/")
        self.on_stale, self.storage_options, self.decode = on_stale, storage_options, decode or {}
        ds = _dataset(self.uri, self.version, on_stale, storage_options)
        self.snapshot = ds.snapshot
        prefix = f"{self.group}/" if self.group else ""
        self.arrays = {
            name[len(prefix) :]: meta for name, meta in self.snapshot.arrays().items()
            if name.startswith(prefix) and "/" not in name[len(prefix) :] and meta.status == "ok"
        }  # fmt: skip
        self.stackable = stackable_dims(self.arrays)
        groups = {g for g in self._group_attrs()} | {n.rsplit("/", 1)[0] for n in self.snapshot.arrays() if "/" in n}
        if self.group and self.group not in groups:
            raise BadInputError(f"{self.uri}: no group {self.group!r}")

    def _group_attrs(self) -> dict[str, dict[str, dict[str, Any]]]:
        return self.snapshot.group_attrs()

    def _variable(self, short: str, meta: ArrayMeta) -> Variable:
        name = f"{self.group}/{short}" if self.group else short
        attrs = _attrs(meta.attrs)
        decode = None
        encoding: dict[str, Any] = {}
        if decodes_here(meta):
            # eras differ in encoding, or sources lack it: decoded here, per era
            decode = {**self.decode, "stack_char_dim": bool(meta.dims) and meta.dims[-1] in self.stackable}
            moved = decoded_attrs(meta, attrs, decode)
            encoding.update({k: v for k, v in attrs.items() if k in moved})
            attrs = {k: v for k, v in attrs.items() if k not in moved}
            encoding["eras"] = [{"start": e["start"], "stop": e["stop"], **_packing(_attrs(e["attrs"]))}
                                for e in meta.eras]  # fmt: skip
        backend = RefstoreBackendArray(self.uri, self.version, name, on_stale=self.on_stale,
                                       storage_options=self.storage_options, decode=decode)  # fmt: skip
        chunks = tuple(int(c) for c in (meta.eras[0]["chunks"] if meta.eras else meta.chunks))
        dims = meta.dims
        if backend.chars:
            encoding["char_dim_name"] = dims[-1]
            dims, chunks = dims[:-1], chunks[:-1]
        encoding.update({
            # variable-length strings: ``str``, as xarray's netCDF4 backend says (its coders then give "<U")
            "dtype": str if np.dtype(meta.dtype).kind == "O" else backend.dtype if decode is not None
            else np.dtype(meta.dtype),
            "chunksizes": chunks,
            "preferred_chunks": dict(zip(dims, chunks, strict=True)),
            "source": self.uri,
            "original_shape": tuple(meta.shape),
        })  # fmt: skip
        return Variable(dims, indexing.LazilyIndexedArray(backend), attrs, encoding)

    def get_variables(self) -> Mapping[str, Variable]:
        return FrozenDict((k, self._variable(k, m)) for k, m in self.arrays.items())

    def get_attrs(self) -> Mapping[str, Any]:
        return FrozenDict(_attrs(self._group_attrs().get(self.group) or {}))

    def get_dimensions(self) -> Mapping[str, int]:
        dims: dict[str, int] = {}
        for m in self.arrays.values():
            dims.update(zip(m.dims, (int(s) for s in m.shape), strict=True))
        return FrozenDict(dims)

    def get_encoding(self) -> dict[str, Any]:
        return {"source": self.uri, "refstore_version": self.version}

    def close(self) -> None:
        pass


def _is_collection(path: Any) -> bool:
    if not isinstance(path, str | os.PathLike):
        return False
    p = os.fspath(path)
    return "://" not in p and os.path.isdir(os.path.join(p, "_versions")) and os.path.isdir(os.path.join(p, "data"))


class RefstoreBackendEntrypoint(BackendEntrypoint):
    """``engine="refstore"``: a refstore collection (folder or object-store URL) at one version."""

    description: ClassVar[str] = "Open a refstore collection (one version of its Lance table of byte references)"
    url: ClassVar[str] = "https://github.com/refstore/refstore"
    open_dataset_parameters: ClassVar[tuple[str, ...] | None] = (
        "filename_or_obj", "drop_variables", "as_of", "group", "mask_and_scale", "decode_times",
        "concat_characters", "decode_coords", "use_cftime", "decode_timedelta", "on_stale", "storage_options",
    )  # fmt: skip

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        as_of: int | str | None = None,
        group: str | None = None,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        on_stale: str = "error",
        storage_options: dict[str, str] | None = None,
    ) -> xr.Dataset:
        from xarray.backends.common import _normalize_path
        from xarray.backends.store import StoreBackendEntrypoint
        from xarray.core.utils import close_on_error

        from ..zarr_meta import register_codecs

        register_codecs()
        path = filename_or_obj if "://" in str(filename_or_obj) else _normalize_path(filename_or_obj)
        decode = {"mask_and_scale": mask_and_scale, "decode_times": decode_times,
                  "concat_characters": concat_characters, "use_cftime": use_cftime,
                  "decode_timedelta": decode_timedelta}  # fmt: skip
        store = RefstoreDataStore(str(path), as_of, group=group, on_stale=on_stale,
                                  storage_options=storage_options, decode=decode)  # fmt: skip
        with close_on_error(store):
            return StoreBackendEntrypoint().open_dataset(
                store, mask_and_scale=mask_and_scale, decode_times=decode_times,
                concat_characters=concat_characters, decode_coords=decode_coords,
                drop_variables=drop_variables, use_cftime=use_cftime, decode_timedelta=decode_timedelta,
            )  # fmt: skip

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        return _is_collection(filename_or_obj)

"""kerchunk references as a store to import: fsspec's reference spec in JSON (version 0: the bare
mapping; version 1: ``refs`` with ``templates`` and ``gen``) and the Parquet reference folder
(``LazyReferenceMapper``: ``.zmetadata`` + ``<array>/refs.<k>.parq``), local or on object storage.

Parsing only: nothing here opens the referenced files (``_commit`` identifies them).
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import math
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _objstore
from .._keys import GLOBAL_KEY_COLUMNS, NO_DIM
from .._quote import quote, quoted
from ..errors import BadInputError, SourceMissingError, SourceReadError
from ._model import REFS_SCHEMA, WHOLE_OBJECT, ParsedStore, check_grid
from ._zarr import group_attrs, v2_meta, v3_meta

__all__ = ["read_kerchunk"]

_META = (".zarray", ".zattrs", ".zgroup", ".zmetadata")


# --------------------------------------------------------------------------- bytes
def _local(location: str) -> str | None:
    if location.startswith("file://"):
        return location[len("file://") :]
    return None if _objstore.is_remote(location) else location


def _read(location: str) -> bytes:
    """The whole object; ``SourceMissingError`` when there is none."""
    path = _local(location)
    if path is not None:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise SourceMissingError(f"{location}: not found") from None
        except OSError as e:
            raise SourceReadError(f"{location}: cannot read: {e.strerror or e}") from None
    import obstore

    store, key = _objstore.store_for(location)
    try:
        return bytes(obstore.get(store, key).bytes())
    except Exception as e:
        if _objstore._not_found(e):
            raise SourceMissingError(f"{location}: not found") from None
        raise SourceReadError(f"{location}: cannot read: {_objstore._first_line(e)}") from None


def _child(location: str, name: str) -> str:
    return location.rstrip("/") + "/" + name


# --------------------------------------------------------------------------- entry point
def read_kerchunk(location: str) -> ParsedStore:
    """Read kerchunk references at ``location`` (a JSON file, or a Parquet reference folder):
    ``BadInputError`` naming it when it is neither, or not a reference spec."""
    path = _local(location)
    if path is not None and os.path.isdir(path):
        return _read_parquet(location)
    try:
        raw = _read(location)
    except SourceMissingError:
        if path is None:  # an object-store "folder": its .zmetadata
            return _read_parquet(location)
        raise BadInputError(f"{location}: no such file or folder") from None
    except SourceReadError as e:
        raise BadInputError(str(e)) from None
    try:
        spec = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise BadInputError(f"{location}: not a kerchunk reference spec (not JSON: {quote(e)})") from None
    except RecursionError:
        raise _not_spec(location, "JSON nested too deeply") from None
    return _read_json(location, spec)


def _not_spec(location: str, why: str) -> BadInputError:
    return BadInputError(f"{location}: not a kerchunk reference spec ({why})")


def _meta_value(location: str, key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(base64.b64decode(value[7:]) if value.startswith("base64:") else value)
        except ValueError as e:
            raise _not_spec(location, f"{quote(key)} is not JSON: {quote(e)}") from None
        except RecursionError:
            raise _not_spec(location, f"{quote(key)} is JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise _not_spec(location, f"{quote(key)} is not a JSON object")
    return value


# --------------------------------------------------------------------------- JSON
def _templates(location: str, spec: dict[str, Any]) -> dict[str, str]:
    t = spec.get("templates") or {}
    if not isinstance(t, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in t.items()):
        raise _not_spec(location, "templates is not a mapping of names to strings")
    big = next((k for k, v in t.items() if len(v) > MAX_RENDERED), None)
    if big is not None:
        raise _not_spec(location, f"template {quote(big)} has {len(t[big]):,} characters (at most {MAX_RENDERED:,})")
    return t


def _fill_templates(url: str, templates: dict[str, str]) -> str:
    if "{{" not in url:
        return url
    for k, v in templates.items():
        url = url.replace("{{" + k + "}}", v).replace("{{ " + k + " }}", v)
    return url


MAX_GEN_KEYS = 10_000_000
"""References all ``gen`` entries of a store may produce together (counted before expanding)."""

MAX_RENDERED = 65_536
"""Characters one rendered key, URL, offset or length may have."""


def _gen_ranges(location: str, g: Any) -> tuple[list[str], list[range | list[Any]]]:
    """One ``gen`` entry's dimension names and value ranges (``range`` objects: nothing expanded)."""
    if not isinstance(g, dict) or not isinstance(g.get("dimensions"), dict):
        raise _not_spec(location, "a gen entry has no 'dimensions' object")
    names = list(g["dimensions"])
    ranges: list[range | list[Any]] = []
    for name, d in g["dimensions"].items():
        if isinstance(d, dict):
            bounds = [d.get("start", 0), d.get("stop"), d.get("step", 1)]
            if not all(type(b) is int for b in bounds) or bounds[2] == 0:
                raise _not_spec(location, f"gen dimension {quote(name)} is not integers start, stop, step (step not 0)")
            ranges.append(range(*bounds))
        elif isinstance(d, list):
            ranges.append(d)
        else:
            raise _not_spec(location, f"gen dimension {quote(name)} is neither a range nor a list")
    return names, ranges


def _gen_count(location: str, gen: list[Any]) -> None:
    """Refuse ``gen`` entries that would produce more than ``MAX_GEN_KEYS`` references."""
    total = 0
    for g in gen:
        _, ranges = _gen_ranges(location, g)
        total += math.prod(len(r) for r in ranges)
        if total > MAX_GEN_KEYS:
            raise _not_spec(location, f"its gen entries expand to more than {MAX_GEN_KEYS:,} references "
                                      f"({total:,} or more)")  # fmt: skip


def _render(location: str, template: Any, ctx: dict[str, Any]) -> str:
    out = str(template.render(**ctx))
    if len(out) > MAX_RENDERED:
        raise _not_spec(location, f"a gen template renders {len(out):,} characters (at most {MAX_RENDERED:,}): "
                                  f"{quote(out)}")  # fmt: skip
    return out


def _expand_gen(location: str, gen: Any, templates: dict[str, str]) -> dict[str, Any]:
    """fsspec's ``gen`` entries (jinja2 templates over ``dimensions``) as plain references,
    counted before they are expanded (``MAX_GEN_KEYS``), each rendering bounded (``MAX_RENDERED``)."""
    if not gen:
        return {}
    if not isinstance(gen, list):
        raise _not_spec(location, "gen is not a list")
    _gen_count(location, gen)
    try:
        import jinja2
        from jinja2.sandbox import SandboxedEnvironment
    except ImportError:
        raise BadInputError(f"{location}: its 'gen' entries need jinja2 (pip install jinja2)") from None
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined)  # a reference file is data, never code
    out: dict[str, Any] = {}
    for g in gen:
        names, ranges = _gen_ranges(location, g)
        try:
            key_t = env.from_string(str(g["key"]))
            url_t = env.from_string(str(g["url"]))
            off_t = env.from_string(str(g["offset"])) if "offset" in g else None
            len_t = env.from_string(str(g["length"])) if "length" in g else None
            for values in itertools.product(*ranges):
                ctx = {**templates, **dict(zip(names, values, strict=True))}
                url = _render(location, url_t, ctx)
                key = _render(location, key_t, ctx)
                if off_t is not None and len_t is not None:
                    out[key] = [url, int(_render(location, off_t, ctx)), int(_render(location, len_t, ctx))]
                else:
                    out[key] = [url]
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, MemoryError, RecursionError,
                jinja2.TemplateError) as e:  # fmt: skip  # SecurityError too
            raise _not_spec(location, f"a gen entry cannot be expanded: {type(e).__name__}: {quote(e)}") from None
    return out


def _read_json(location: str, spec: Any) -> ParsedStore:
    if not isinstance(spec, dict):
        raise _not_spec(location, f"a JSON {type(spec).__name__}, not an object")
    version = spec.get("version")
    if version is not None and "refs" in spec:
        if version != 1:
            raise _not_spec(location, f"version {quoted(version)}; versions 0 and 1 are known")
        refs = spec["refs"]
        if not isinstance(refs, dict):
            raise _not_spec(location, "refs is not an object")
        templates = _templates(location, spec)
        refs = {**refs, **_expand_gen(location, spec.get("gen"), templates)}
    else:
        refs, templates = spec, {}
    if "zarr.json" in refs or any(k.endswith("/zarr.json") for k in refs):
        return _read_json_v3(location, refs, templates, version or 0)
    meta_keys = [k for k in refs if k.endswith(_META) and k.rsplit("/", 1)[-1] in _META]
    if not any(k.endswith((".zarray", ".zgroup")) for k in meta_keys) and ".zmetadata" not in refs:
        raise _not_spec(location, "no .zgroup or .zarray key")
    consolidated: dict[str, Any] = {}
    if ".zmetadata" in refs:
        consolidated = _meta_value(location, ".zmetadata", refs[".zmetadata"]).get("metadata") or {}
    metadata = {**consolidated, **{k: refs[k] for k in meta_keys if k != ".zmetadata"}}
    arrays, groups, seps = _structure(location, metadata)
    keys = [k for k in refs if not k.endswith(_META) and not k.rsplit("/", 1)[-1].startswith(".z")]
    refs_t = _json_refs(location, refs, keys, arrays, seps, templates)
    check_grid(location, refs_t, arrays, keys)
    return ParsedStore("kerchunk-json", location, arrays, groups, refs_t, {"version": version or 0})


def _json_refs(location: str, refs: dict[str, Any], keys: list[str], arrays: dict[str, Any], seps: dict[str, str],
               templates: dict[str, str]) -> pa.Table:  # fmt: skip
    """The chunk entries of a JSON spec as ``REFS_SCHEMA`` columns: one pass over the values
    sorts them into plain lists, keys and templates are handled column-wise (1M refs: a few s)."""
    n = len(keys)
    urls: list[str | None] = [None] * n
    offs = [-1] * n
    lens = [0] * n
    inline: list[bytes] = [b""] * n
    b64 = base64.b64decode
    for i, key in enumerate(keys):
        v = refs[key]
        if type(v) is str and v.startswith("base64:"):
            try:
                data = b64(v[7:], validate=True)
            except ValueError:
                raise _not_spec(location, f"reference {quoted(key)} is not valid base64") from None
            inline[i], lens[i] = data, len(data)
            continue
        if type(v) is list and v and v[0] is None:  # fsspec's `target` option, not in the file
            raise _not_spec(location, f"reference {quoted(key)} has no URL (null: the reader's 'target' option)")
        if type(v) is list and len(v) == 3:
            urls[i], offs[i], lens[i] = v[0], v[1], v[2]
        elif type(v) is str:
            data = b64(v[7:]) if v.startswith("base64:") else v.encode("utf-8")
            inline[i], lens[i] = data, len(data)
        elif type(v) is list and len(v) == 1:
            urls[i], offs[i], lens[i] = v[0], 0, WHOLE_OBJECT
        elif isinstance(v, (bytes, bytearray)):
            inline[i], lens[i] = bytes(v), len(v)
        else:
            raise _not_spec(location, f"reference {quoted(key)} is {json.dumps(v)[:80]}, not [url, offset, length]")
    try:
        url_col = pa.array(urls, pa.string())
        off_col = pa.array(offs, pa.int64())
        len_col = pa.array(lens, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        bad = next((k for k in keys if isinstance(refs[k], list) and not (isinstance(refs[k][0], str) and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**63 for x in refs[k][1:]))), keys[0])
        what = json.dumps(refs[bad])[:80]
        raise _not_spec(location, f"reference {quoted(bad)} is {what}, not [url, offset, length]") from None
    is_ref = pc.is_valid(url_col).to_numpy(zero_copy_only=False)
    neg = is_ref & ((off_col.to_numpy() < 0) | ((len_col.to_numpy() < 0) & (len_col.to_numpy() != WHOLE_OBJECT)))
    if neg.any():
        bad = keys[int(np.flatnonzero(neg)[0])]
        raise _not_spec(location, f"reference {quoted(bad)} has a negative offset or length")
    if templates and n:
        d = url_col.dictionary_encode()
        filled = pa.array([_fill_templates(u, templates) for u in d.dictionary.to_pylist()], pa.string())
        url_col = filled.take(d.indices)
    names, key_cols = _parse_keys(location, keys, arrays, seps)
    return pa.table({"array": names, **key_cols, "path": url_col, "offset": off_col, "length": len_col,
                     "inline": pa.array(inline, pa.large_binary())}, schema=REFS_SCHEMA)  # fmt: skip


def _parse_keys(location: str, keys: list[str], arrays: dict[str, Any],
                seps: dict[str, str]) -> tuple[pa.Array, dict[str, pa.Array]]:  # fmt: skip
    """Array names and chunk indices of chunk keys, column-wise (``name/i.j.k``; arrays with the
    ``/`` separator are split in Python). ``BadInputError`` naming the first bad key."""
    n = len(keys)
    col = pa.array(keys, pa.string())
    parts = pc.split_pattern(col, "/", max_splits=1, reverse=True)  # [name, rest]; [rest] at the root
    two = pc.equal(pc.list_value_length(parts), 2)
    names = pc.if_else(two, pc.list_element(parts, 0), pa.scalar("", pa.string()))
    rest = pc.if_else(two, pc.list_element(parts, 1), pc.list_element(parts, 0))
    slash = sorted((a for a, sp in seps.items() if sp == "/"), key=len, reverse=True)
    if slash:  # arrays whose keys are name/i/j/k: name and rest found by prefix
        nl, rl = names.to_pylist(), rest.to_pylist()
        for i, k in enumerate(keys):
            if seps.get(nl[i]) == ".":
                continue
            for a in slash:
                if k.startswith(a + "/"):
                    nl[i], rl[i] = a, k[len(a) + 1 :].replace("/", ".")
                    break
        names, rest = pa.array(nl, pa.string()), pa.array(rl, pa.string())
    known = pc.is_in(names, pa.array(sorted(arrays), pa.string())).to_numpy(zero_copy_only=False)
    if not known.all():
        bad = keys[int(np.flatnonzero(~known)[0])]
        raise BadInputError(f"{location}: reference {quoted(bad)} belongs to no array of the store")
    lists = pc.split_pattern(rest, ".")
    try:
        flat = pc.cast(pc.list_flatten(lists), pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        ok = pc.match_substring_regex(rest, r"^[0-9]+(\.[0-9]+)*$").to_numpy(zero_copy_only=False)
        bad = keys[int(np.flatnonzero(~ok)[0])] if not ok.all() else keys[0]
        raise BadInputError(f"{location}: chunk key {quoted(bad)} is not integers separated by its separator") from None
    starts = lists.offsets.to_numpy()[:-1].astype(np.int64) if n else np.zeros(0, np.int64)
    count = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    codes = names.dictionary_encode()
    ndim_of = np.array([arrays[a].ndim for a in codes.dictionary.to_pylist()], np.int64)
    ndim = ndim_of[codes.indices.to_numpy(zero_copy_only=False)] if n else np.zeros(0, np.int64)
    scalar = (ndim == 0) & (count == 1)
    if scalar.any() and (flat[starts[scalar]] != 0).any():
        bad = keys[int(np.flatnonzero(scalar)[np.flatnonzero(flat[starts[scalar]] != 0)[0]])]
        raise BadInputError(f"{location}: chunk key {quoted(bad)} of a 0-dimensional array is not 0")
    wrong = (count != ndim) & ~scalar
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise BadInputError(f"{location}: chunk key {quoted(keys[i])} has {int(count[i])} indices; its array has "
                            f"{int(ndim[i])} dimensions")  # fmt: skip
    out: dict[str, pa.Array] = {}
    for d, c in enumerate(GLOBAL_KEY_COLUMNS):
        has = ndim > d
        kd = np.full(n, NO_DIM, np.int64)
        kd[has] = flat[starts[has] + d]
        if (kd > np.iinfo(np.int32).max).any():
            i = int(np.flatnonzero(kd > np.iinfo(np.int32).max)[0])
            raise BadInputError(f"{location}: chunk key {quoted(keys[i])} is outside its chunk grid")
        out[c] = pa.array(kd.astype(np.int32), pa.int32())
    return names, out


def _read_json_v3(location: str, refs: dict[str, Any], templates: dict[str, str], version: int) -> ParsedStore:
    """References whose metadata is zarr v3 (``zarr.json`` per node, as VirtualiZarr's
    ``to_kerchunk(zarr_format=3)`` writes): chunk keys ``name/c/i/j`` (or ``c.i.j``, or v2-style)
    are rewritten ``name/i.j`` column-wise, then read as for v2."""
    arrays: dict[str, Any] = {}
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    encodings: dict[str, tuple[str, str]] = {}
    for key in sorted(k for k in refs if k == "zarr.json" or k.endswith("/zarr.json")):
        path = key.removesuffix("zarr.json").rstrip("/")
        meta = _meta_value(location, key, refs[key])
        if meta.get("node_type") == "group":
            groups[path] = group_attrs(dict(meta.get("attributes") or {}))
        elif meta.get("node_type") == "array":
            if not path:
                raise BadInputError(f"{location}: the root is an array; refstore needs named arrays in a group")
            try:
                arrays[path] = v3_meta(path, meta)
            except (ValueError, KeyError, TypeError) as e:
                raise _not_spec(location, f"{quote(key)}: {quote(e)}") from None
            enc = meta.get("chunk_key_encoding") or {}
            name = str(enc.get("name", "default"))
            default_sep = "/" if name == "default" else "."
            encodings[path] = (name, str((enc.get("configuration") or {}).get("separator", default_sep)))
        else:
            raise _not_spec(location, f"{quote(key)}: node_type {quoted(meta.get('node_type'))}")
    groups.setdefault("", {})
    keys = [k for k in refs if not k.endswith("zarr.json") and not k.rsplit("/", 1)[-1].startswith(".z")]
    col = pa.array(keys, pa.string())
    v2 = col
    for pattern in (r"^(?P<array>.*)/c(?P<rest>(?:/[0-9]+)*)$", r"^(?P<array>.*)/c(?P<rest>(?:\.[0-9]+)*)$"):
        if not len(keys):
            break
        found = pc.extract_regex(col, pattern)
        ok = pc.is_valid(found)
        rest = pc.replace_substring(pc.utf8_ltrim(found.field("rest"), "/."), "/", ".")
        rest = pc.if_else(pc.equal(rest, ""), pa.scalar("0", pa.string()), rest)  # a 0-d array's key: "c"
        joined = pc.binary_join_element_wise(found.field("array"), rest, "/")
        v2 = pc.if_else(pc.and_(ok, pc.is_in(found.field("array"), pa.array(sorted(arrays), pa.string()))), joined, v2)
    renamed = v2.to_pylist() if len(keys) else []
    by_new = dict(zip(renamed, keys, strict=True))
    if len(by_new) < len(renamed):  # two spellings of one chunk (c/0/0 and c.0.0, 0 and 00)
        first: dict[str, str] = {}
        for new, old_key in zip(renamed, keys, strict=True):
            if first.setdefault(new, old_key) != old_key:
                raise BadInputError(f"{location}: two references name chunk {quoted(new)} ({quoted(first[new])} and "
                                    f"{quoted(old_key)}); a chunk has one reference")  # fmt: skip
    seps = {a: "." for a in arrays}
    refs_t = _json_refs(location, {new: refs[old] for new, old in by_new.items()}, renamed, arrays, seps, templates)
    check_grid(location, refs_t, arrays, keys)
    return ParsedStore("kerchunk-json", location, arrays, dict(sorted(groups.items())), refs_t,
                       {"version": version, "zarr_format": 3})  # fmt: skip


def _structure(
    location: str, metadata: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, dict[str, dict[str, Any]]], dict[str, str]]:
    """Arrays (``ArrayMeta``), group attributes and each array's key separator, from the
    metadata keys."""
    arrays: dict[str, Any] = {}
    seps: dict[str, str] = {}
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for key in sorted(metadata):
        parent, _, leaf = key.rpartition("/")
        if leaf == ".zgroup":
            attrs = _meta_value(location, parent + "/.zattrs", metadata[parent + "/.zattrs"]) if (
                parent + "/.zattrs" in metadata) else (
                _meta_value(location, ".zattrs", metadata[".zattrs"]) if not parent and ".zattrs" in metadata else {})
            groups[parent] = group_attrs(attrs)
        elif leaf == ".zarray":
            if not parent:
                raise BadInputError(f"{location}: the root is an array; refstore needs named arrays in a group")
            zarray = _meta_value(location, key, metadata[key])
            zattrs = _meta_value(location, parent + "/.zattrs", metadata.get(parent + "/.zattrs", "{}"))
            try:
                arrays[parent] = v2_meta(parent, zarray, zattrs)
            except (ValueError, KeyError, TypeError) as e:
                raise _not_spec(location, f"{quote(key)}: {quote(e)}") from None
            seps[parent] = str(zarray.get("dimension_separator") or ".")
    if "" not in groups:
        groups[""] = group_attrs(_meta_value(location, ".zattrs", metadata[".zattrs"])) if ".zattrs" in metadata else {}
    return arrays, dict(sorted(groups.items())), seps


# --------------------------------------------------------------------------- Parquet
def _refs_files(location: str, name: str, count: int) -> list[int]:
    """The numbers ``k < count`` of the array's ``refs.<k>.parq`` files that exist (listed, so a
    huge sparse grid costs what its files cost, not what its chunk count would)."""
    folder = _child(location, name)
    path = _local(folder)
    try:
        if path is not None:
            names = os.listdir(path) if os.path.isdir(path) else []
        else:
            names = [u.rsplit("/", 1)[-1] for u, *_ in _objstore.list_objects(folder)]
    except (OSError, SourceReadError) as e:
        raise BadInputError(f"{folder}: cannot list ({quote(e)})") from None
    out = []
    for n in names:
        stem = n.removeprefix("refs.").removesuffix(".parq")
        if n.startswith("refs.") and n.endswith(".parq") and stem.isdigit() and int(stem) < count:
            out.append(int(stem))
    return sorted(out)


def _read_parquet(location: str) -> ParsedStore:
    import pyarrow.parquet as pq

    try:
        zmeta = json.loads(_read(_child(location, ".zmetadata")))
    except SourceMissingError:
        raise BadInputError(f"{location}: not a kerchunk reference spec (no such file, and no Parquet "
                            "reference folder: .zmetadata is missing)") from None  # fmt: skip
    except SourceReadError as e:
        raise BadInputError(str(e)) from None
    except (UnicodeDecodeError, ValueError) as e:
        raise _not_spec(_child(location, ".zmetadata"), f"not JSON: {quote(e)}") from None
    if not isinstance(zmeta, dict) or not isinstance(zmeta.get("metadata"), dict):
        raise _not_spec(_child(location, ".zmetadata"), "no 'metadata' object")
    record_size = zmeta.get("record_size")
    if not isinstance(record_size, int) or record_size <= 0:
        raise _not_spec(_child(location, ".zmetadata"), "no positive integer 'record_size'")
    metadata = zmeta["metadata"]
    arrays, groups, _seps = _structure(location, metadata)
    parts: list[pa.Table] = []
    for name, meta in arrays.items():
        grid = [-(-s // c) for s, c in zip(meta.shape, meta.chunks, strict=True)]
        total = math.prod(grid)
        for k in _refs_files(location, name, -(-total // record_size)):
            where = _child(_child(location, name), f"refs.{k}.parq")
            try:
                t = pq.read_table(io.BytesIO(_read(where)), columns=["path", "offset", "size", "raw"])
            except SourceMissingError:
                continue  # fsspec reads a missing file as absent chunks
            except SourceReadError as e:
                raise BadInputError(str(e)) from None
            except (pa.ArrowInvalid, KeyError, OSError) as e:
                raise BadInputError(f"{where}: not a kerchunk reference file ({str(e).splitlines()[0]})") from None
            flat = np.arange(t.num_rows, dtype=np.int64) + k * record_size
            inline = pc.is_valid(t.column("raw")).to_numpy(zero_copy_only=False)
            ref = pc.is_valid(t.column("path")).to_numpy(zero_copy_only=False) & ~inline
            keep = (inline | ref) & (flat < total)
            if not keep.any():
                continue
            t = t.filter(pa.array(keep))
            flat, inline = flat[keep], inline[keep]
            keys = np.unravel_index(flat, grid) if grid else ()
            size = pc.fill_null(t.column("size"), 0).to_numpy().astype(np.int64)
            off = pc.fill_null(t.column("offset"), 0).to_numpy().astype(np.int64)
            whole = (size == 0) & (off == 0) & ~inline
            raw = pc.fill_null(pc.cast(t.column("raw"), pa.large_binary()), b"")
            n = t.num_rows
            parts.append(pa.table({
                "array": pa.array([name] * n, pa.string()),
                **{c: pa.array(keys[d].astype(np.int32) if d < len(grid) else np.full(n, NO_DIM, np.int32))
                   for d, c in enumerate(GLOBAL_KEY_COLUMNS)},
                "path": pc.if_else(pa.array(inline), pa.scalar(None, pa.string()),
                                   pc.cast(t.column("path"), pa.string())),
                "offset": pa.array(np.where(inline, -1, off), pa.int64()),
                "length": pa.array(np.where(inline, pc.binary_length(raw).to_numpy(zero_copy_only=False),
                                            np.where(whole, WHOLE_OBJECT, size)), pa.int64()),
                "inline": raw,
            }, schema=REFS_SCHEMA))  # fmt: skip
    refs = pa.concat_tables(parts) if parts else REFS_SCHEMA.empty_table()
    check_grid(location, refs, arrays)
    return ParsedStore("kerchunk-parquet", location, arrays, groups, refs, {"record_size": record_size})

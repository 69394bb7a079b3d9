"""kerchunk JSON opened by fsspec's ReferenceFileSystem + zarr (format 2)."""

from __future__ import annotations

from typing import Any


def open_form(out: str, case: Any) -> dict[str, Any]:
    import fsspec
    import zarr

    from . import register_codecs

    register_codecs()
    fs = fsspec.filesystem("reference", fo=out, remote_protocol="file", asynchronous=True)
    group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True, path=""), mode="r", zarr_format=2)
    return {name: arr for name, arr in group.arrays()} | {
        f"{g}/{name}": arr for g, sub in group.groups() for name, arr in _walk(sub)
    }


def _walk(group: Any) -> list[tuple[str, Any]]:
    out = list(group.arrays())
    for g, sub in group.groups():
        out += [(f"{g}/{n}", a) for n, a in _walk(sub)]
    return out

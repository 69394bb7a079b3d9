"""Icechunk repository opened by icechunk itself (containers authorized at open, a read-only
session on ``main``) + zarr (format 3)."""

from __future__ import annotations

import warnings
from typing import Any


def authorize(prefixes: list[str]) -> dict[str, Any]:
    import icechunk as ic
    from icechunk.credentials import HttpAccess, LocalFileSystemAccess

    creds: dict[str, Any] = {}
    for p in prefixes:
        if p.startswith("file://"):
            creds[p] = LocalFileSystemAccess
        elif p.startswith(("http://", "https://")):
            creds[p] = HttpAccess
        elif p.startswith("s3://"):
            creds[p] = ic.s3_from_env_credentials()
    return ic.containers_credentials(creds)


def open_repo(out: str) -> Any:
    import icechunk as ic

    storage = ic.local_filesystem_storage(out)
    prefixes = sorted((ic.Repository.fetch_config(storage).virtual_chunk_containers or {}).keys())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ic.Repository.open(storage, authorize_virtual_chunk_access=authorize(prefixes))


def open_form(out: str, case: Any, *, tag: str | None = None) -> dict[str, Any]:
    import zarr

    from . import register_codecs

    register_codecs()
    repo = open_repo(out)
    session = repo.readonly_session(tag=tag) if tag else repo.readonly_session(branch="main")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs names are outside the zarr v3 spec
        group = zarr.open_group(session.store, mode="r", zarr_format=3)
        return {name: _Quiet(arr) for name, arr in _walk(group)}


class _Quiet:
    """A zarr array whose reads do not warn (numcodecs codec names outside the v3 spec)."""

    def __init__(self, arr: Any) -> None:
        self.arr = arr
        self.shape = arr.shape
        self.dtype = arr.dtype

    def __getitem__(self, sel: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.arr[sel]


def _walk(group: Any) -> list[tuple[str, Any]]:
    out = list(group.arrays())
    for g, sub in group.groups():
        out += [(f"{g}/{n}", a) for n, a in _walk(sub)]
    return out

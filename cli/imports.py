"""``refstore import kerchunk|icechunk``: an existing reference store as one new version
(registered on the main app)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from .app import JsonOpt, _dump, _open, _progress, app, err, out

if TYPE_CHECKING:
    from refstore.imports import ImportReport

__all__ = ["import_app"]

import_app = typer.Typer(
    help="Bring an existing reference store (kerchunk JSON/Parquet, an Icechunk repository) in as one new version.",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")


AllowOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        metavar="PREFIX",
        help="Also read referenced files under this folder or URL prefix (repeatable); by default only the "
        "store's own folder (or bucket) is trusted.",
    ),
]


def _report(rep: ImportReport, as_json: bool) -> None:
    if as_json:
        _dump(rep.to_json())
        return
    j = rep.to_json()
    c, r = j["chunks"], j["refs"]
    out.print(f"version {rep.version}: imported {rep.form} {escape(rep.store)}: {rep.arrays} arrays, {rep.sources} "
              f"sources, {c['referenced']} references, {c['inline']} inline chunks; refs +{r['inserted']} "
              f"~{r['updated']} -{r['deleted']}", soft_wrap=True)  # fmt: skip
    for u in j["unsupported"]:
        err.print(f"[yellow]unsupported[/yellow] {escape(u['array'])}: {escape(u['reason'])}", soft_wrap=True)


@import_app.command("kerchunk")
def kerchunk_cmd(
    refs: Annotated[
        str,
        typer.Argument(
            metavar="REFS",
            help="kerchunk references: a JSON file (spec version 0 or 1) or a Parquet reference folder; a path or an "
            "object-store URL.",
        ),
    ],
    allow: AllowOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import kerchunk references: arrays, references, inline chunks, codecs, fill values and attributes."""
    col = _open()
    with _progress(quiet=as_json) as p:
        task = p.add_task("identifying sources", total=None)
        rep = col.import_kerchunk(refs, allow=allow or (),
                                  progress=lambda done, total: p.update(task, completed=done, total=total))  # fmt: skip
    _report(rep, as_json)


@import_app.command("icechunk")
def icechunk_cmd(
    repo: Annotated[str, typer.Argument(metavar="REPO", help="An Icechunk repository: a folder or s3://bucket/prefix.")],
    branch: Annotated[str | None, typer.Option("--branch", help="Branch to import (default: main).")] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Tag to import.")] = None,
    snapshot: Annotated[str | None, typer.Option("--snapshot", help="Snapshot id to import.")] = None,
    allow: AllowOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import one snapshot of an Icechunk repository: virtual chunks as references, inline ones as inline rows."""
    col = _open()
    with _progress(quiet=as_json) as p:
        task = p.add_task("identifying sources", total=None)
        rep = col.import_icechunk(repo, branch=branch, tag=tag, snapshot=snapshot, allow=allow or (),
                                  progress=lambda done, total: p.update(task, completed=done, total=total))  # fmt: skip
    _report(rep, as_json)


@import_app.command("zarr")
def zarr_cmd(
    store: Annotated[str, typer.Argument(metavar="STORE", help="A Zarr v2 or v3 store: a local folder.")],
    as_json: JsonOpt = False,
) -> None:
    """Import a Zarr store: each chunk object referenced whole; codecs, fills and attributes as zarr-python reads."""
    col = _open()
    with _progress(quiet=as_json) as p:
        task = p.add_task("identifying chunk objects", total=None)
        rep = col.import_zarr(store, progress=lambda done, total: p.update(task, completed=done, total=total))
    _report(rep, as_json)

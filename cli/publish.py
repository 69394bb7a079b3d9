"""Publishing commands: ``emit``, ``catalog`` and ``remap add|list|remove`` (registered on the main app)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from .app import AsOfOpt, JsonOpt, OnStaleOpt, _dump, _open, _progress, app, out

__all__ = ["remap_app"]

remap_app = typer.Typer(
    help="Rules that turn a source location as scanned into the location published (longest prefix wins).",
    no_args_is_help=True,
)
app.add_typer(remap_app, name="remap")


@app.command()
def emit(
    fmt: Annotated[
        str,
        typer.Argument(metavar="FORMAT", help="kerchunk-json, kerchunk-parquet, icechunk, parquet, sqlite or vrt."),
    ],
    dest: Annotated[
        str,
        typer.Argument(
            metavar="OUT",
            help="File or folder to write (replaced atomically; an existing Icechunk repository gets a new commit).",
        ),
    ],
    as_of: AsOfOpt = None,
    no_remap: Annotated[bool, typer.Option("--no-remap", help="Keep source locations as scanned.")] = False,
    skip_unexpressible: Annotated[
        bool, typer.Option("--skip-unexpressible", help="Leave out arrays the form cannot express (listed).")
    ] = False,
    on_stale: OnStaleOpt = "error",
    as_json: JsonOpt = False,
) -> None:
    """Write a published form of one version; the same REF and options give byte-identical output.

    Held chunks go into the form as bytes (the VRT cannot carry them); every source the form
    points at must still be the file the version recorded, else the emit is refused (--on-stale)."""
    col = _open()
    with _progress(quiet=as_json) as p:
        task = p.add_task(f"emitting {fmt}", total=None)
        rep = col.emit(
            fmt, dest, as_of, remap=not no_remap, skip_unexpressible=skip_unexpressible, on_stale=on_stale,
            progress=lambda d, t: p.update(task, completed=d, total=t),
        )  # fmt: skip
    if as_json:
        _dump(rep.to_json())
        return
    for name, why in rep.skipped.items():
        out.print(f"[yellow]skipped[/yellow] {name}: {why}")
    out.print(f"wrote {rep.format} {rep.out}: {rep.arrays} arrays, {rep.refs} references (version {rep.version})")


@remap_app.command("add")
def remap_add(
    prefix: Annotated[str, typer.Argument(help="Location prefix as scanned (a path or its file:// URL, or a URL).")],
    replacement: Annotated[str, typer.Argument(help="What the prefix becomes in published forms.")],
    as_json: JsonOpt = False,
) -> None:
    """Add (or replace) a rule: one new version."""
    rep = _open().remap_add(prefix, replacement)
    if as_json:
        _dump(rep.to_json())
    else:
        out.print(f"remap rule set (version {rep.version})")


@remap_app.command("list")
def remap_list(as_of: AsOfOpt = None, as_json: JsonOpt = False) -> None:
    """The rules of a version (default latest)."""
    rules = _open().remap_list(as_of)
    if as_json:
        _dump([r.to_json() for r in rules])
        return
    t = Table("prefix", "replacement")
    for r in rules:
        t.add_row(r.prefix, r.replacement)
    out.print(t)


@remap_app.command("remove")
def remap_remove(
    prefix: Annotated[str, typer.Argument(help="The rule's prefix (either spelling of a local path).")],
    as_json: JsonOpt = False,
) -> None:
    """Remove a rule: one new version."""
    rep = _open().remap_remove(prefix)
    if as_json:
        _dump(rep.to_json())
    else:
        out.print(f"remap rule removed (version {rep.version})")


@app.command("catalog")
def catalog_cmd(
    dest: Annotated[
        str, typer.Argument(metavar="OUT", help="The STAC Collection JSON file to write (replaced atomically).")
    ],
    as_of: AsOfOpt = None,
    asset: Annotated[
        list[str] | None,
        typer.Option(
            "--asset",
            metavar="FORM=URL",
            help="Where a published form of this version is (repeatable), e.g. kerchunk-json=https://host/oisst.json.",
        ),
    ] = None,
    no_remap: Annotated[bool, typer.Option("--no-remap", help="Keep source locations as scanned.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a STAC Collection for one version: extents, datacube dimensions/variables, one asset per form."""
    from refstore.emit.stac import parse_assets

    assets = parse_assets(asset or [])
    col = _open()
    with _progress(quiet=as_json) as p:
        task = p.add_task("cataloguing", total=None)
        rep = col.catalog(dest, as_of, assets=assets, remap=not no_remap,
                          progress=lambda d, t: p.update(task, completed=d, total=t))  # fmt: skip
    if as_json:
        _dump(rep.to_json())
        return
    w, s, e, n = rep.bbox
    when = f"{rep.interval[0] or '..'}/{rep.interval[1] or '..'}"
    out.print(f"wrote STAC collection {rep.out} (version {rep.version}): bbox {w:g},{s:g},{e:g},{n:g}, "
              f"time {when}, assets {', '.join(rep.assets) or 'none'}")  # fmt: skip

"""Pictures and pages: ``coverage`` and ``report`` (registered on the main app)."""

from __future__ import annotations

from pathlib import Path  # noqa: TC003  (typer reads the annotations at run time)
from typing import Annotated

import typer

from .app import AsOfOpt, JsonOpt, _dump, _open, _progress, app, out

__all__: list[str] = []


@app.command("coverage")
def coverage_cmd(
    array: Annotated[str, typer.Argument(help="Array name, e.g. sst or grp/T.")],
    out_file: Annotated[Path, typer.Option("--out", help="The PNG file to write (replaced).")],
    as_of: AsOfOpt = None,
    when: Annotated[
        str | None,
        typer.Option("--time", help="Only these time steps: an ISO date (that day) or START/END."),
    ] = None,
    size: Annotated[str, typer.Option("--size", help="Picture size in pixels, WIDTHxHEIGHT.")] = "960x600",
    as_json: JsonOpt = False,
) -> None:
    """A picture of chunk states (absent / referenced / inline / held) over the array's two spatial
    dimensions; for a series, each cell mixes the colours by the share of time steps in each state."""
    rep = _open().coverage(array, out_file, as_of=as_of, time=when, size=size)
    cov = rep.coverage
    if as_json:
        _dump(rep.to_json())
        return
    shares = ", ".join(f"{k} {100 * v:.1f}%" for k, v in cov.totals().items())
    out.print(f"wrote {out_file}: {array} at version {cov.version}, {cov.shares.shape[0]} x {cov.shares.shape[1]} "
              f"cells over ({cov.y.dim}, {cov.x.dim}): {shares}", soft_wrap=True)  # fmt: skip


@app.command("report")
def report_cmd(
    dest: Annotated[Path, typer.Argument(metavar="OUT.html", help="The HTML page to write (replaced).")],
    as_of: AsOfOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One self-contained HTML page: arrays (shape, chunks, codecs, eras), sources, versions and tags,
    the diff between the last two tags, and coverage pictures inline."""
    col = _open()
    with _progress(quiet=as_json) as p:
        task = p.add_task("reporting", total=None)
        rep = col.report(str(dest), as_of, progress=lambda d, t: p.update(task, completed=d, total=t))
    if as_json:
        _dump(rep.to_json())
        return
    out.print(f"wrote {dest}: version {rep.version}, {len(rep.arrays)} arrays, "
              f"{rep.pictures} coverage pictures", soft_wrap=True)  # fmt: skip

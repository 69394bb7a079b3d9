"""The refstore command line: a thin typer layer over the library (see shared cli-contract)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import refstore
from refstore._ref import LATEST
from refstore.errors import BadInputError, RefstoreError

__all__ = ["app", "main"]

app = typer.Typer(
    name="refstore",
    help="Publish archival arrays (netCDF4/HDF5, netCDF3, GeoTIFF/COG) as virtual datasets from one versioned "
    "table of byte references.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

CollectionOpt = Annotated[
    str | None,
    typer.Option(
        "-C",
        "--collection",
        help="Collection path or URL (default: $REFSTORE_COLLECTION, else the current folder).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON report for scripts and CI.")]
AsOfOpt = Annotated[str | None, typer.Option("--as-of", help="Tag name or version number (default: latest).")]
OnStaleOpt = Annotated[
    str,
    typer.Option("--on-stale", help="A source changed since scan: error (exit 2), warn, or ignore."),
]


class _State:
    collection: str | None = None


_state = _State()


def _show_version(value: bool) -> None:
    if value:
        out.print(f"refstore {refstore.__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    collection: CollectionOpt = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the refstore version.")
    ] = False,
) -> None:
    _state.collection = collection


def _collection(required_existing: bool = True) -> str:
    if _state.collection:
        return _state.collection
    env = os.environ.get("REFSTORE_COLLECTION")
    if env:
        return env
    cwd = os.getcwd()
    if not required_existing or os.path.isdir(os.path.join(cwd, "_versions")):
        return cwd
    raise BadInputError(f"{cwd}: not a collection; give -C PATH or set $REFSTORE_COLLECTION")


def _open() -> refstore.Collection:
    """The collection the command acts on (``-C``, ``$REFSTORE_COLLECTION`` or the current folder)."""
    return refstore.Collection.open(_collection())


def _progress(*, quiet: bool = False) -> Progress:
    """A transient progress bar on stderr: shown only when stderr is a terminal, never with
    ``--json`` (``quiet``), so scripts and pipes get the report alone."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=quiet or not err.is_terminal,
    )


def _dump(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def _print_table(t: Table) -> None:
    """``t`` at its natural width when stdout is not a terminal (a pipe, a file): never cut to 80 columns."""
    if out.is_terminal:
        out.print(t)
    else:  # rich cuts cells to the console's width (80 columns, or $COLUMNS, off a terminal)
        Console(file=sys.stdout, width=1 << 20, no_color=True).print(t)


def _fill_text(fill: Any, dtype: str) -> str:
    """A fill value as a user reads it: bytes dtypes' fill (base64 in JSON) as a bytes literal."""
    import base64
    import binascii

    if isinstance(fill, str) and dtype[1:2] in ("S", "V"):
        try:
            return repr(base64.b64decode(fill, validate=True))
        except (binascii.Error, ValueError):
            return fill
    return str(fill)


_PY_STALE = re.compile(r"on_stale='(\w+)'(?: or '(\w+)')?")


def _cli_words(message: str) -> str:
    """A library message in the command line's words: ``on_stale='warn'`` is ``--on-stale warn``."""
    return _PY_STALE.sub(lambda m: f"--on-stale {m.group(1)}" + (f" or {m.group(2)}" if m.group(2) else ""), message)


# ------------------------------------------------------------------------ commands
@app.command()
def init() -> None:
    """Create an empty collection (refuses a non-empty folder that is not one)."""
    col = refstore.init(_collection(required_existing=False))
    out.print(f"created collection {col.uri} (version {col.latest_version})")


@app.command()
def scan(
    sources: Annotated[list[str], typer.Argument(help="Files or folders (searched recursively by extension).")],
    concat_dim: Annotated[
        str | None,
        typer.Option("--concat-dim", help="Concatenate sources along this dimension, ordered by its coordinate."),
    ] = None,
    time_from_name: Annotated[
        str | None,
        typer.Option("--time-from-name", help="Date TIFF sources by file name, e.g. 'D%Y%m%d' (with --concat-dim)."),
    ] = None,
    prefer: Annotated[
        list[str] | None,
        typer.Option(
            "--prefer",
            metavar="RULE",
            help="Which of several files with the same coordinate along --concat-dim (with --mosaic: of two "
            "overlapping tiles, one inside the other) is placed (the others are set aside): 'newest' (latest "
            "mtime), a file-name glob ('*_final.nc') or '!GLOB' for the files NOT matching "
            "it ('!*_preliminary*'); repeat to try rules in order; 'none' clears them. Recorded: rescans apply it "
            "again. Without a rule such files are refused.",
        ),
    ] = None,
    order_by: Annotated[
        str | None,
        typer.Option(
            "--order-by",
            metavar="VAR",
            help="Order the files by the values of VAR, a variable along --concat-dim (e.g. a CF time such as "
            "time_centered), instead of the dimension's own coordinate. Recorded: rescans apply it again.",
        ),
    ] = None,
    order: Annotated[
        str | None,
        typer.Option(
            "--order",
            metavar="HOW",
            help="'name': order the files by file name; 'given': as given (recorded files first); 'coordinate' "
            "(default): by the --concat-dim coordinate, or a CF time along it where that does not tell the files "
            "apart. Recorded: rescans apply it again.",
        ),
    ] = None,
    prune: Annotated[
        bool,
        typer.Option("--prune", help="Also remove recorded sources under the scanned paths that no longer exist."),
    ] = False,
    mosaic: Annotated[
        bool,
        typer.Option(
            "--mosaic",
            help="Place GeoTIFF tiles on their common pixel grid by their transforms: one 'image' (and 'overview_N', "
            "'mask' where every tile has them) over the whole grid, gaps read as nodata; with --concat-dim, a mosaic "
            "per date. Overlapping tiles are refused unless --prefer chooses and the other lies inside the chosen "
            "one. Recorded: rescans keep it.",
        ),
    ] = False,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Worker processes (default: one per core for 64+ files).")
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Commit nothing if any source fails.")] = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Seconds one file may take before it fails alone (0: no deadline)."),
    ] = 60.0,
    checksum: Annotated[
        bool | None,
        typer.Option("--checksum/--no-checksum", help="Record a SHA-256 of each file and use it to detect changes "
                     "at rescan and read (kept for later scans).", show_default=False),
    ] = None,
    follow_links: Annotated[
        bool,
        typer.Option("--follow-links", help="In a folder, also follow symbolic links that lead out of it "
                     "(and linked folders); without it they are reported as failed and not read."),
    ] = False,
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            metavar="ADDRESS",
            help="Scan on this Dask scheduler (e.g. tcp://host:8786): "
            "workers write the new rows, one commit publishes them.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Scan sources and record chunk references: one new version per call."""
    import contextlib

    uri = _collection()
    with contextlib.ExitStack() as stack, _progress(quiet=as_json) as p:
        client = None
        if dask is not None:
            try:
                from distributed import Client
            except ImportError:
                raise BadInputError("--dask needs dask.distributed: pip install 'refstore[dask]'") from None
            try:
                client = stack.enter_context(Client(dask, timeout=10))
            except OSError as e:
                raise BadInputError(f"--dask {dask}: cannot reach the scheduler ({e})") from None
        task = p.add_task("scanning", total=None)

        def tick(done: int, total: int) -> None:
            p.update(task, completed=done, total=total)

        report = refstore.Collection.open(uri).scan(
            sources, concat_dim=concat_dim, time_from_name=time_from_name, prefer=prefer, prune=prune,
            order=order, order_by=order_by,
            mosaic=mosaic, workers=workers, strict=strict, progress=tick, client=client, timeout=timeout or None,
            checksum=checksum, follow_links=follow_links,
        )  # fmt: skip
    if as_json:
        _dump(report.to_json())
    else:
        j = report.to_json()
        s, r = j["sources"], j["refs"]
        what = f"version {report.version}" if report.committed else f"no change (still version {report.version})"
        out.print(
            f"{what}: sources {s['new']} new, {s['changed']} changed, {s['unchanged']} unchanged, "
            f"{s['failed']} failed; refs +{r['inserted']} ~{r['updated']} -{r['deleted']}", soft_wrap=True
        )
        for f in j["failed"]:  # one line each, whatever the terminal's width
            err.print(f"[red]failed[/red] {escape(f['source'])}: {escape(f['reason'])}", soft_wrap=True)
        for u in j["unsupported"]:
            err.print(f"[yellow]unsupported[/yellow] {u['source']} {u['array']}: {u['reason']}", soft_wrap=True)
        for a in j["set_aside"]:
            out.print(f"set aside {a['source']} for {a['for']} (--prefer {a['rule']})", soft_wrap=True)
        for gone in j["removed"]:
            out.print(f"removed {gone} (no longer exists)", soft_wrap=True)
        if j["missing"]:
            n = len(j["missing"])
            err.print(f"[yellow]missing[/yellow] {n} recorded source{'s' * (n != 1)} under the scanned paths "
                      f"no longer exist{'s' * (n == 1)} (first: {j['missing'][0]}); scan with --prune to remove "
                      f"{'them' if n != 1 else 'it'}", soft_wrap=True)  # fmt: skip
        if j["mosaic"]:
            m = j["mosaic"]
            dates = f", {m['dates']} dates" if m["dates"] else ""
            out.print(f"mosaic of {m['tiles']} tiles{dates}: image {' x '.join(map(str, m['shape']))} pixels "
                      f"({m['crs'] or 'no CRS'}), {m['gap_pixels']} pixels in gaps", soft_wrap=True)  # fmt: skip
            for d in m["dropped"]:
                err.print(f"[yellow]note[/yellow] {d['array']} left out of the mosaic: {escape(d['reason'])}",
                          soft_wrap=True)  # fmt: skip
        if j["ordered_by"] not in (None, "coordinate", "given", "name", order_by):
            err.print(f"[yellow]note[/yellow] the '{j['concat_dim']}' coordinate does not tell the files apart: "
                      f"ordered by the CF time '{j['ordered_by']}' along it", soft_wrap=True)  # fmt: skip
        if j["ordered_by"] == "given" and order != "given":
            err.print(f"[yellow]note[/yellow] no source has a coordinate variable '{j['concat_dim']}': "
                      "sources are placed in the order given (files of a folder by name, new sources after "
                      "recorded ones)", soft_wrap=True)  # fmt: skip


@app.command()
def info(as_of: AsOfOpt = None, as_json: JsonOpt = False) -> None:
    """Arrays (dims, shape, chunks, dtype, fill, codecs, attributes) and counts."""
    rep = _open().info(as_of).to_json()
    if as_json:
        _dump(rep)
        return
    out.print(f"[bold]{_collection()}[/bold] version {rep['version']}: {rep['sources']} sources, "
              f"{rep['refs']} refs, held {rep['held']['chunks']} chunks / {rep['held']['bytes']} bytes",
              soft_wrap=True)  # fmt: skip
    if rep.get("concat_dim"):
        out.print(f"concatenated along [bold]{rep['concat_dim']}[/bold]")
    if rep.get("mosaic"):
        out.print("a mosaic of GeoTIFF tiles (scan --mosaic)")
    for a in rep["set_aside"]:
        out.print(f"set aside {a['source']} (for {a['for']})")
    t = Table("array", "dims", "shape", "chunks", "dtype", "fill", "codecs", "status")
    rect: list[str] = []
    for name, a in rep["arrays"].items():
        grid = a.get("chunk_grid") or [{"kind": "regular", "chunk": c} for c in a["chunks"]]
        chunks = "x".join(f"~{max(_lengths(g['chunks']))}" if g["kind"] == "rectilinear" else str(g["chunk"])
                          for g in grid)  # fmt: skip
        if grid and all(g["kind"] == "none" for g in grid) and grid[0].get("per_tile"):
            rect.append(f"{name}: no chunk grid (its tiles differ in chunk shape or codecs: each chunk placed "
                        "and decoded by its tile; chunks and codecs shown are the first tile's)")  # fmt: skip
        elif grid and all(g["kind"] == "none" for g in grid):
            rect.append(f"{name}: no chunk grid (tiles placed off each other's chunk edges: each chunk "
                        "placed by its tile)")  # fmt: skip
        for g in grid:
            if g["kind"] == "rectilinear":
                runs = ",".join(f"{r[0]}*{r[1]}" if isinstance(r, list) else str(r) for r in g["chunks"])
                rect.append(f"{name}: rectilinear along {g['dim']}, {g['count']} chunks: "
                            f"{runs if len(runs) <= 120 else runs[:117] + '...'}")  # fmt: skip
        t.add_row(
            name, ",".join(a["dims"]), "x".join(map(str, a["shape"])) or "()", chunks or "()",
            a["dtype"], _fill_text(a["fill_value"], a["dtype"]), ",".join(c["id"] for c in a["codecs"]) or "-",
            a["status"] if a["status"] == "ok" else f"{a['status']}: {a['reason']}",
        )  # fmt: skip
    _print_table(t)
    for line in rect:
        out.print(line, soft_wrap=True)


def _lengths(runs: list[Any]) -> list[int]:
    return [int(r[0]) if isinstance(r, list) else int(r) for r in runs]


@app.command()
def read(
    array: Annotated[str, typer.Argument(help="Array name, e.g. sst or grp/T.")],
    out_file: Annotated[Path, typer.Option("--out", help="The .npy file to write (this exact path).")],
    window: Annotated[str | None, typer.Option("--window", help="numpy-style window, e.g. 0:30,0,100:200.")] = None,
    as_of: AsOfOpt = None,
    max_gap: Annotated[int, typer.Option("--max-gap", min=0, help="Bytes allowed between merged ranges.")] = 0,
    max_bytes: Annotated[int, typer.Option("--max-bytes", min=1, help="Largest merged read, bytes.")] = 8 << 20,
    on_stale: OnStaleOpt = "error",
) -> None:
    """Read a window of a global array through the table into a .npy file (stored values)."""
    import io

    import numpy as np

    from refstore.report._write import NPY_OWN, check_replaceable, npy_own, replace_file

    check_replaceable(str(out_file), npy_own, NPY_OWN)  # before the read: only refstore's own .npy is replaced
    opts = refstore.ReadOptions(max_gap=max_gap, max_bytes=max_bytes, on_stale=on_stale)
    col = _open()
    version = col.resolve(as_of)
    data = col.read(array, window, as_of=version, options=opts)
    buf = io.BytesIO()
    np.save(buf, data, allow_pickle=False)
    replace_file(str(out_file), buf.getvalue(), ".npy", npy_own, NPY_OWN)
    out.print(f"wrote {out_file}: {array} {list(data.shape)} {data.dtype} (version {version})", soft_wrap=True)


@app.command()
def verify(
    as_of: AsOfOpt = None,
    array: Annotated[list[str] | None, typer.Option("--array", help="Only these arrays (repeatable).")] = None,
    sample: Annotated[
        int | None, typer.Option("--sample", min=1, help="Check this many chunks, chosen at random.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for --sample.")] = 0,
    on_stale: OnStaleOpt = "error",
    as_json: JsonOpt = False,
) -> None:
    """Compare chunks read through the table with the format's own reader, held chunks also with their checksum;
    exit 1 on a mismatch, 2 when a source is gone (its chunks not held)."""
    col = _open()
    version = col.resolve(as_of)
    with _progress(quiet=as_json) as p:
        task = p.add_task("verifying", total=None)
        rep = col.verify(version, array=array, sample=sample, seed=seed, on_stale=on_stale,
                         progress=lambda d, t: p.update(task, completed=d, total=t))  # fmt: skip
    if as_json:
        _dump(rep.to_json())
    else:
        for m, n in _per_source(rep.mismatches)[:20]:
            why = escape(_cli_words(str(m["reason"])))
            if n == 1:
                err.print(f"[red]mismatch[/red] {m['array']} chunk {m['chunk']} ({m['source']}): {why}")
            else:  # one line per source when its chunks fail for one reason (a source changed since scan)
                err.print(f"[red]mismatch[/red] {escape(str(m['source']))}: {n} chunks: {why}", soft_wrap=True)
        for m in rep.held_mismatches[:20]:
            err.print(f"[red]held mismatch[/red] {m['array']} chunk {m['chunk']} ({m['source']}): {m['reason']}")
        for src, n in sorted(rep.missing.items()):
            err.print(f"[yellow]missing source[/yellow] {escape(src)}: {n} chunks not verified (not held)",
                      soft_wrap=True)  # fmt: skip
        out.print(f"checked {rep.checked} chunks at version {version}: {rep.mismatched} mismatched")
        if rep.held_checked:
            only = f" ({rep.held_checksum_only} by checksum only)" if rep.held_checksum_only else ""
            out.print(f"held chunks: {rep.held_checked} checked{only}: {rep.held_mismatched} mismatched")
        if rep.missing:
            out.print(f"missing sources: {len(rep.missing)} ({sum(rep.missing.values())} chunks not verified)")
    if rep.exit_code:
        raise typer.Exit(rep.exit_code)


def _per_source(mismatches: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Mismatches with the same source and reason as one (the first) with their count, in order."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for m in mismatches:
        groups.setdefault((str(m["source"]), str(m["reason"])), []).append(m)
    return [(ms[0], len(ms)) for ms in groups.values()]


@app.command()
def log(as_json: JsonOpt = False) -> None:
    """Versions, newest first: number, time, what the operation did, tags."""
    entries = _open().log()
    if as_json:
        _dump([e.to_json() for e in entries])
        return
    t = Table("version", "timestamp", "operation", "what", "tags")
    for e in entries:
        t.add_row(str(e.version), e.timestamp, e.operation, e.message, ",".join(e.tags))
    _print_table(t)


@app.command()
def tag(
    name: Annotated[str | None, typer.Argument(help="Tag name, e.g. release-2026-10.")] = None,
    as_of: AsOfOpt = None,
    delete: Annotated[str | None, typer.Option("--delete", help="Delete this tag.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Name a version (default latest); tags are immutable snapshots. --delete NAME removes one."""
    col = _open()
    if delete is not None:
        if name is not None:
            raise BadInputError("give either NAME or --delete NAME, not both")
        gone = col.delete_tag(delete)
        _dump(gone.to_json()) if as_json else out.print(f"deleted tag {delete} (was version {gone.version})")
        return
    if name is None:
        raise BadInputError("give a tag NAME (or --delete NAME)")
    made = col.tag(name, as_of)
    _dump(made.to_json()) if as_json else out.print(f"tagged version {made.version} as {name}")


@app.command()
def tags(as_json: JsonOpt = False) -> None:
    """Tags and the versions they name."""
    found = _open().tags()
    if as_json:
        _dump([x.to_json() for x in found])
        return
    t = Table("tag", "version")
    for x in found:
        t.add_row(x.name, str(x.version))
    out.print(t)


@app.command()
def diff(
    a: Annotated[str, typer.Argument(help="From: tag or version.")],
    b: Annotated[str | None, typer.Argument(help="To: tag or version (default: latest).")] = None,
    exit_code: Annotated[bool, typer.Option("--exit-code", help="Exit 1 if anything differs, else 0.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """What changed from A to B: references per array, metadata, sources, remap rules."""
    rep = _open().diff(a, b if b is not None else LATEST)
    if as_json:
        _dump(rep.to_json())
    else:
        out.print(f"version {rep.a} -> {rep.b}: {'differs' if rep.differs else 'no difference'}")
        t = Table("array", "added", "removed", "changed", "metadata", "held")
        for name, d in rep.to_json()["arrays"].items():
            h = d["held"]
            if d["added"] or d["removed"] or d["changed"] or d["metadata_changed"] or h["added"] or h["removed"]:
                held = f"+{h['added']} -{h['removed']} ({h['bytes']} bytes)" if h["added"] or h["removed"] else ""
                t.add_row(name, str(d["added"]), str(d["removed"]), str(d["changed"]),
                          "changed" if d["metadata_changed"] else "", held)  # fmt: skip
        if t.row_count:
            _print_table(t)
        for label, items in (("added", rep.sources_added), ("removed", rep.sources_removed),
                             ("changed", rep.sources_changed)):  # fmt: skip
            for src in items:
                out.print(f"source {label}: {src}")
        if rep.remap_changed:
            out.print("remap rules changed")
    if exit_code and rep.differs:
        raise typer.Exit(1)


@app.command()
def compact(as_json: JsonOpt = False) -> None:
    """Merge small fragments and materialise deletions (keeps reads fast after many rescans)."""
    rep = _open().compact()
    if as_json:
        _dump(rep.to_json())
    else:
        out.print(f"compacted: version {rep.version}, fragments -{rep.fragments_removed} +{rep.fragments_added}")


@app.command()
def gc(
    keep_last: Annotated[int, typer.Option("--keep-last", min=1, help="Untagged versions to keep.")] = 1,
    grace: Annotated[
        str,
        typer.Option("--grace", help="Keep versions and unreferenced files younger than this (writers in flight "
                     "may need them); 0 only when nothing else writes the collection."),
    ] = "1h",
    as_json: JsonOpt = False,
) -> None:
    """Remove old untagged versions (tagged versions are always kept and stay readable)."""
    from refstore._duration import parse_duration

    rep = _open().gc(keep_last=keep_last, grace=parse_duration(grace, name="--grace"))
    if as_json:
        _dump(rep.to_json())
    else:
        young = (f" ({', '.join(map(str, rep.kept_by_grace))} younger than --grace {grace}: kept)"
                 if rep.kept_by_grace else "")  # fmt: skip
        out.print(f"removed versions {list(rep.versions_removed) or 'none'}; kept {list(rep.versions_kept)}{young}; "
                  f"{rep.files_removed} files, {rep.bytes_removed} bytes", soft_wrap=True)  # fmt: skip


@app.command()
def repair(as_json: JsonOpt = False) -> None:
    """Make the newest readable version latest again (one new version) when the latest misses files."""
    rep = _open().repair()
    if as_json:
        _dump(rep.to_json())
    elif rep.restored is None:
        out.print(f"version {rep.version} reads: nothing to repair")
    else:
        out.print(f"version {rep.version}: restored version {rep.restored} "
                  f"(versions {list(rep.unreadable)} cannot be read; gc removes them)")  # fmt: skip


def _check_selection(array: list[str] | None, bbox: str | None, when: str | None, window: str | None) -> None:
    if not (array or bbox or when or window):
        raise BadInputError("select chunks with --array, --bbox, --time and/or --window")


ArrayOpt = Annotated[
    list[str] | None, typer.Option("--array", help="Array name (repeatable; default: all that apply).")
]
BboxOpt = Annotated[str | None, typer.Option("--bbox", help="W,S,E,N in the array's own horizontal coordinates.")]
TimeOpt = Annotated[str | None, typer.Option("--time", help="START/END ISO dates against the time coordinate.")]
WindowOpt = Annotated[str | None, typer.Option("--window", help="numpy-style window, e.g. 0:10,:,5.")]


@app.command()
def hold(array: ArrayOpt = None, bbox: BboxOpt = None, when: TimeOpt = None, window: WindowOpt = None,
         as_json: JsonOpt = False) -> None:  # fmt: skip
    """Copy the bytes of the selected chunks into the collection (one new version)."""
    _check_selection(array, bbox, when, window)
    col = _open()
    with _progress(quiet=as_json) as p:
        task = p.add_task("holding", total=None)
        rep = col.hold(array=array, bbox=bbox or None, time=when or None, window=window or None,
                       progress=lambda d, t: p.update(task, completed=d, total=t))  # fmt: skip
    _dump(rep.to_json()) if as_json else out.print(
        f"held {rep.chunks} chunks, {rep.bytes} bytes (version {rep.version})"
    )


@app.command()
def release(array: ArrayOpt = None, bbox: BboxOpt = None, when: TimeOpt = None, window: WindowOpt = None,
            as_json: JsonOpt = False) -> None:  # fmt: skip
    """Drop held bytes of the selected chunks (one new version; older versions keep them)."""
    _check_selection(array, bbox, when, window)
    rep = _open().release(array=array, bbox=bbox or None, time=when or None, window=window or None)
    _dump(rep.to_json()) if as_json else out.print(
        f"released {rep.chunks} chunks, {rep.bytes} bytes (version {rep.version})"
    )


@app.command()
def demo(
    folder: Annotated[Path, typer.Option("--dir", help="Where to build the demo (default: ./demo-output).")] = Path(
        "demo-output"
    ),
    as_json: JsonOpt = False,
) -> None:
    """Build small OISST-like and COG series: scan, read, verify, tag, diff, hold, and say what happened."""
    from refstore.demo import run_demo

    result = run_demo(folder, say=None if as_json else out.print)
    if as_json:
        _dump(result)
    if not result["ok"]:
        raise typer.Exit(1)


from . import imports as _imports  # noqa: E402, F401  (registers import)
from . import publish as _publish  # noqa: E402, F401  (registers emit and remap)
from . import report as _report  # noqa: E402, F401  (registers coverage and report)


def main() -> None:
    import warnings

    from refstore._quote import one_line
    from refstore.errors import CatalogWarning, StaleSourceWarning

    def show(message: Any, category: Any, *_: Any, **__: Any) -> None:
        text = _cli_words(one_line(str(message)))
        err.print(f"refstore: warning: {text}", markup=False, highlight=False, soft_wrap=True)

    warnings.showwarning = show
    warnings.simplefilter("always", StaleSourceWarning)
    warnings.simplefilter("always", CatalogWarning)
    try:
        app()
    except RefstoreError as e:
        err.print(f"refstore: error: {_cli_words(one_line(str(e)))}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("refstore: interrupted (nothing was committed)", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    # run as ``python -m refstore.cli.app``: this module is ``__main__``, and ``publish`` registered
    # its commands on the imported ``refstore.cli.app``; run that one
    from refstore.cli.app import main as _main

    _main()

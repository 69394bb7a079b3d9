"""``refstore report``: one self-contained HTML page for a collection version.

Sections: arrays (dims, shape, chunks, dtype, codecs, eras, references, held), sources, the
versions up to the reported one as a timeline with their tags, the diff between the last two
tags of that timeline, and a coverage picture per array of two or more dimensions, inline as a
``data:image/png;base64`` URI. No script, no stylesheet or image from elsewhere: the file opens
offline and can be mailed or archived as it is. Nothing in it depends on the clock.
"""

from __future__ import annotations

import base64
import json
import os
from html import escape
from typing import TYPE_CHECKING, Any

from .._ref import tag_name
from ..errors import StorageError
from ._write import check_replaceable, html_own, replace_file

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..table.collection import Collection, Snapshot

__all__ = ["MAX_PICTURES", "MAX_SOURCES", "build_page", "write_report"]

MAX_PICTURES = 24
"""Coverage pictures per page at most (arrays in name order; the rest are listed)."""
MAX_SOURCES = 2000
"""Source rows per page at most (by location; the rest are counted)."""
PICTURE_SIZE = (600, 380)

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:90em;color:#222;
padding:0 1em}h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ccc;
padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}th,td{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font-size:12px}.muted{color:#777}.tag{display:inline-block;background:#55a868;color:#fff;border-radius:3px;
padding:0 6px;margin-right:4px;font-size:12px}.timeline{list-style:none;padding-left:1.2em;border-left:3px solid
#4c72b0}.timeline li{margin:.5em 0;position:relative}.timeline li::before{content:"";position:absolute;
left:-1.62em;top:.45em;width:.7em;height:.7em;border-radius:50%;background:#4c72b0}.timeline li.current::before
{background:#dd8452}figure{display:inline-block;margin:.6em 1em .6em 0}figcaption{font-size:12px;color:#555}
"""


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _codecs(codecs: Any) -> str:
    return ", ".join(str(c.get("id", "?")) for c in codecs) or "none"


def _chunks(a: dict[str, Any]) -> str:
    """The chunk shape as ``info`` shows it: a rectilinear dimension as ``~largest chunk``."""
    grid = a.get("chunk_grid") or [{"kind": "regular", "chunk": c} for c in a["chunks"]]
    out = []
    for g in grid:
        if g["kind"] != "rectilinear":  # regular, or none (gridless: the chunk shape of every tile)
            out.append(str(g["chunk"]))
        else:
            runs = [r if isinstance(r, list) else [r, 1] for r in g["chunks"]]
            out.append(f"~{max(int(r[0]) for r in runs)}")
    own = " (the first tile's: tiles differ in layout)" if any(g.get("per_tile") for g in grid) else ""
    return (" x ".join(out) or "()") + own


def _arrays_section(snap: Snapshot, info: dict[str, Any]) -> str:
    rows = []
    for name, a in info["arrays"].items():
        eras = a["eras"]
        era_txt = "one" if not eras else "<br>".join(
            f"{_e(e['index'])}: [{_e(e['start'])}, {_e(e['stop'])}) chunks {_e('x'.join(map(str, e['chunks'])))}, "
            f"{_e(e['dtype'])}, {_e(_codecs(e['codecs']))}" for e in eras
        )  # fmt: skip
        status = "ok" if a["status"] == "ok" else f"{a['status']}: {a['reason']}"
        rows.append(
            f"<tr><td><code>{_e(name)}</code></td><td>{_e(', '.join(a['dims']))}</td>"
            f"<td>{_e(' x '.join(map(str, a['shape'])) or '()')}</td>"
            f"<td>{_e(_chunks(a))}</td><td>{_e(a['dtype'])}</td>"
            f"<td>{_e(_codecs(a['codecs']))}</td><td>{era_txt}</td><td class=n>{a['refs']}</td>"
            f"<td class=n>{a['held']['chunks']}</td><td>{_e(status)}</td></tr>"
        )
    head = "<tr><th>array</th><th>dims</th><th>shape</th><th>chunks</th><th>dtype</th><th>codecs</th><th>eras</th>" \
           "<th>references</th><th>held</th><th>status</th></tr>"  # fmt: skip
    return f"<h2 id=arrays>Arrays</h2>\n<table>{head}\n{''.join(rows)}</table>"


def _sources_section(snap: Snapshot) -> str:
    t = snap.sources().select(["source", "size", "mtime_ns", "meta"]).sort_by("source")
    rows = []
    from datetime import UTC, datetime

    for r in t.slice(0, MAX_SOURCES).to_pylist():
        fmt = json.loads(r["meta"]).get("format", "")
        when = datetime.fromtimestamp(r["mtime_ns"] / 1e9, UTC).isoformat(timespec="seconds").replace("+00:00", "Z") \
            if r["mtime_ns"] > 0 else ""  # fmt: skip
        rows.append(f"<tr><td><code>{_e(r['source'])}</code></td><td>{_e(fmt)}</td><td class=n>{r['size']}</td>"
                    f"<td>{_e(when)}</td></tr>")  # fmt: skip
    head = "<tr><th>source</th><th>format</th><th>bytes</th><th>modified (UTC)</th></tr>"
    more = f"<p class=muted>and {t.num_rows - MAX_SOURCES} more</p>" if t.num_rows > MAX_SOURCES else ""
    return f"<h2 id=sources>Sources ({t.num_rows})</h2>\n<table>{head}\n{''.join(rows)}</table>{more}"


def _timeline_section(entries: list[Any], current: int) -> str:
    items = []
    for e in entries:
        tags = "".join(f"<span class=tag>{_e(t)}</span>" for t in e.tags)
        cls = " class=current" if e.version == current else ""
        what = e.message if e.message.startswith(f"{e.operation}:") else f"{e.operation}: {e.message}"
        items.append(f"<li{cls}><b>version {e.version}</b> <span class=muted>{_e(e.timestamp)}</span> {tags}<br>"
                     f"{_e(what)}</li>")  # fmt: skip
    return f"<h2 id=versions>Versions and tags</h2>\n<ol class=timeline>{''.join(items)}</ol>"


def _diff_section(col: Collection, tags: list[dict[str, Any]]) -> tuple[str, list[str] | None]:
    from ..table.versions import diff

    if len(tags) < 2:
        return ("<h2 id=diff>Diff between the last two tags</h2>\n<p class=muted>Fewer than two tags up to this "
                "version: nothing to compare.</p>", None)  # fmt: skip
    a, b = tags[-2], tags[-1]
    rep = diff(col, a["name"], b["name"])
    rows = [f"<tr><td><code>{_e(n)}</code></td><td class=n>{d['added']}</td><td class=n>{d['removed']}</td>"
            f"<td class=n>{d['changed']}</td><td>{'changed' if d['metadata_changed'] else ''}</td></tr>"
            for n, d in rep.arrays.items()
            if d["added"] or d["removed"] or d["changed"] or d["metadata_changed"]]  # fmt: skip
    parts = [f"<h2 id=diff>Diff between the last two tags</h2>\n<p><span class=tag>{_e(a['name'])}</span> "
             f"(version {rep.a}) → <span class=tag>{_e(b['name'])}</span> (version {rep.b}): "
             f"{'differs' if rep.differs else 'no difference'}</p>"]  # fmt: skip
    if rows:
        parts.append("<table><tr><th>array</th><th>added</th><th>removed</th><th>changed</th><th>metadata</th></tr>"
                     + "".join(rows) + "</table>")  # fmt: skip
    for label, items in (("added", rep.sources_added), ("removed", rep.sources_removed),
                         ("changed", rep.sources_changed)):  # fmt: skip
        for s in items:
            parts.append(f"<p>source {label}: <code>{_e(s)}</code></p>")
    if rep.remap_changed:
        parts.append("<p>remap rules changed</p>")
    return "\n".join(parts), [a["name"], b["name"]]


def _pictures_section(snap: Snapshot, names: list[str], tag: str | None,
                      tick: Callable[[], None]) -> tuple[str, int]:  # fmt: skip
    from .coverage import coverage
    from .picture import render_png

    figs = []
    for name in names[:MAX_PICTURES]:
        cov = coverage(snap, name, tag=tag)
        pic = render_png(cov, size=PICTURE_SIZE)
        data = base64.b64encode(pic.png).decode("ascii")
        shares = ", ".join(f"{k} {100 * v:.1f}%" for k, v in cov.totals().items())
        figs.append(f'<figure><img src="data:image/png;base64,{data}" width={pic.width} height={pic.height} '
                    f'alt="coverage of {_e(name)}"><figcaption><code>{_e(name)}</code>: {_e(shares)}</figcaption>'
                    "</figure>")  # fmt: skip
        tick()
    rest = names[MAX_PICTURES:]
    more = f"<p class=muted>Not pictured ({len(rest)}): {_e(', '.join(rest))}</p>" if rest else ""
    return f"<h2 id=coverage>Coverage</h2>\n{''.join(figs)}{more}", len(figs)


def build_page(col: Collection, *, as_of: int | str | None = None,
               progress: Callable[[int, int], None] | None = None) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """The page (HTML text) and a summary (``version``, ``tag``, ``arrays``, ``pictures``, ``diff``)."""
    from .._report import info_report
    from ..table.log import log_entries
    from ..table.versions import list_tags

    snap = col.snapshot(as_of)
    tag = tag_name(as_of)
    info = info_report(snap)
    pictured = [n for n, m in snap.arrays().items() if m.status == "ok" and len(m.shape) >= 2]
    total = 4 + min(len(pictured), MAX_PICTURES)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    entries = [e for e in log_entries(col) if e.version <= snap.version]
    tags = [t for t in list_tags(col) if t["version"] <= snap.version]
    name = os.path.basename(col.uri.rstrip("/")) or col.uri
    tag_note = f" ({_e(tag)})" if tag else ""
    head = (f"<h1>{_e(name)}</h1>\n<p><code>{_e(col.uri)}</code> at version {snap.version}{tag_note}: "
            f"{len(info['arrays'])} arrays, {info['sources']} sources, {info['refs']} references, held "
            f"{info['held']['chunks']} chunks ({info['held']['bytes']} bytes)"
            + (f"; concatenated along <code>{_e(info['concat_dim'])}</code>" if info.get("concat_dim") else "")
            + "</p>\n<p><a href=#arrays>arrays</a> · <a href=#sources>sources</a> · <a href=#versions>versions</a> · "
            "<a href=#diff>diff</a> · <a href=#coverage>coverage</a></p>")  # fmt: skip
    arrays = _arrays_section(snap, info)
    tick()
    sources = _sources_section(snap)
    tick()
    timeline = _timeline_section(entries, snap.version)
    diff_html, diffed = _diff_section(col, tags)
    tick()
    pictures, n_pics = _pictures_section(snap, pictured, tag, tick)
    page = (f"<!DOCTYPE html>\n<html lang=en>\n<head>\n<meta charset=utf-8>\n<title>{_e(name)} · version "
            f"{snap.version} · refstore report</title>\n<meta name=generator content=refstore>\n<style>{_CSS}</style>"
            f"\n</head>\n<body>\n{head}\n{arrays}\n{sources}\n{timeline}\n{diff_html}\n{pictures}\n"
            "</body>\n</html>\n")  # fmt: skip
    tick()
    summary = {"version": snap.version, "tag": tag, "arrays": list(info["arrays"]), "pictures": n_pics,
               "diff": diffed, "versions": [e.version for e in entries]}  # fmt: skip
    return page, summary


def write_report(col: Collection, out: str, *, as_of: int | str | None = None,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Write the page of ``col`` at ``as_of`` to ``out`` (a temporary beside it renamed over it);
    the summary of ``build_page`` with ``out``."""
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder) or os.path.isdir(out):  # before the work
        why = "is a folder" if os.path.isdir(out) else "its folder does not exist"
        raise StorageError(f"{out}: cannot write: {why}")
    check_replaceable(out, html_own, "a refstore report")  # before the work
    page, summary = build_page(col, as_of=as_of, progress=progress)
    replace_file(out, page.encode("utf-8"), ".html", html_own, "a refstore report")
    return {"out": out, **summary}

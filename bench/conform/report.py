"""The matrix printed (rich) or as JSON, its summary line, and the exit status."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from .cells import FAILING, Cell
from .paths import PATHS
from .reasons import classify

__all__ = ["exit_status", "print_json", "print_matrix", "summarize"]


def _cells(results: list[dict[str, Any]]) -> list[tuple[str, str, str, Cell]]:
    """(unit, array, path, cell) of every cell; a unit refused or crashed as a whole is one
    cell on the ``scan`` path with array ``*``."""
    out = []
    for r in results:
        if r["scan"] is not None:
            out.append((r["unit"], "*", "scan", Cell(**r["scan"])))
        for path, cells in r["cells"].items():
            out += [(r["unit"], name, path, Cell(**c)) for name, c in cells.items()]
    return out


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    cells = _cells(results)
    kinds = Counter(c.kind for *_, c in cells)
    reasons: Counter[str] = Counter()
    undocumented: Counter[str] = Counter()
    for *_, c in cells:
        if c.kind == "refused":
            key = classify(c.detail)
            reasons[key or "undocumented"] += 1
            if key is None:
                undocumented[c.detail] += 1
    failing = [{"unit": u, "array": a, "path": p, **c.to_json()} for u, a, p, c in cells if c.kind in FAILING]
    return {
        "units": len(results),
        "arrays": len({(u, a) for u, a, *_ in cells}),
        "cells": len(cells),
        "counts": {k: kinds.get(k, 0) for k in ("equal", "refused", "wrong", "missing", "crash")},
        "refusals": dict(reasons.most_common()),
        "undocumented": dict(undocumented.most_common()),
        "failing": failing,
        "not_applicable": dict(Counter(p for r in results for p in r["na"])),
    }


def summary_line(s: dict[str, Any]) -> str:
    c = s["counts"]
    return (f"conform: {s['units']} units, {s['arrays']} arrays, {s['cells']} cells: {c['equal']} equal, "
            f"{c['refused']} refused ({sum(s['undocumented'].values())} undocumented), {c['wrong']} wrong, "
            f"{c['missing']} missing, {c['crash']} crash")  # fmt: skip


def exit_status(s: dict[str, Any]) -> int:
    """1 on any wrong, missing or crash cell, or a refusal outside the documented list."""
    return 1 if s["failing"] or s["undocumented"] else 0


def _short(c: Cell) -> str:
    if c.kind == "refused":
        return f"refused: {classify(c.detail) or 'UNDOCUMENTED'}"
    return c.kind


_STYLE = {"equal": "green", "refused": "yellow", "wrong": "bold red", "missing": "bold magenta", "crash": "bold red"}


def print_matrix(results: list[dict[str, Any]], *, full: bool = False) -> None:
    """One row per unit (counts per path), or per array with ``full``; then every failing cell
    with its detail, the refusals by reason, and the summary line."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=240)
    paths = ["scan", *PATHS]
    table = Table(title="conformance matrix", show_lines=False)
    table.add_column("unit" + (" / array" if full else ""), overflow="fold", max_width=70)
    for p in paths:
        table.add_column(p, overflow="fold")
    for r in sorted(results, key=lambda r: r["unit"]):
        rows: dict[str, dict[str, list[Cell]]] = {}
        if r["scan"] is not None:
            rows.setdefault("*", {})["scan"] = [Cell(**r["scan"])]
        for path, cells in r["cells"].items():
            for name, c in cells.items():
                rows.setdefault(name if full else "", {}).setdefault(path, []).append(Cell(**c))
        for name, by_path in sorted(rows.items()):
            label = r["unit"] if not full or name in ("", "*") else f"{r['unit']} :: {name}"
            table.add_row(label, *[_render(by_path.get(p), r["na"].get(p)) for p in paths])
    console.print(table)
    s = summarize(results)
    if s["failing"]:
        console.print("[bold]wrong, missing and crashed cells[/bold]")
        for f in s["failing"]:
            console.print(f"  {f['kind']:7} {f['path']:16} {f['unit']} :: {f['array']}  {f.get('detail', '')}",
                          markup=False, highlight=False)
    console.print("[bold]refusals by reason[/bold] (design/conformance.md)")
    for key, n in s["refusals"].items():
        console.print(f"  {n:6}  {key}", markup=False, highlight=False)
    for detail, n in s["undocumented"].items():
        console.print(f"  UNDOCUMENTED x{n}: {detail}", markup=False, highlight=False)
    for path, n in s["not_applicable"].items():
        console.print(f"  not applicable: {path} on {n} units", markup=False, highlight=False)
    console.print(summary_line(s), markup=False, highlight=False)


def _render(cells: list[Cell] | None, na: str | None) -> str:
    if not cells:
        return "[dim]n/a[/dim]" if na else ""
    counts = Counter(_short(c) for c in cells)
    parts = []
    for key, n in sorted(counts.items()):
        kind = key.split(":")[0]
        text = key if len(cells) == 1 else f"{n} {key}"
        parts.append(f"[{_STYLE[kind]}]{text}[/{_STYLE[kind]}]")
    return "\n".join(parts)


def print_json(results: list[dict[str, Any]], units: list[dict[str, Any]]) -> None:
    by_id = {u["unit"]: u for u in units}
    doc = {"summary": summarize(results), "units": [{**by_id.get(r["unit"], {}), **r} for r in
                                                     sorted(results, key=lambda r: r["unit"])]}  # fmt: skip
    print(json.dumps(doc, indent=1, default=str))

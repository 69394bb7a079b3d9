"""The order of a series along its concat dimension, and which duplicate sources are set aside. Pure.

Sources are ordered by their coordinate along the concat dimension (or kept in the order given
when none has one). Two sources whose coordinates along that dimension are the same (same first
and last value, same extent: a ``_preliminary`` file and its final version) cannot both be
placed: without a rule the plan is refused naming both; ``--prefer`` rules (``PreferRule``)
choose the one placed, the other is set aside (recorded, not in the view). Sources whose ranges
overlap without being the same are always refused: no rule says which values win.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..errors import BadInputError, PlanError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .concat import SourceSlab

__all__ = ["Ordering", "PreferRule", "SetAside", "order_sources", "parse_prefer", "span"]

_UNIX_SECONDS = "seconds since 1970-01-01"


@dataclass(frozen=True, slots=True)
class PreferRule:
    """Which of several sources with the same coordinate is placed.

    ``newest``: the one with the latest modification time. Otherwise ``pattern`` is a glob
    (``fnmatch``, case-sensitive) matched against the file name (the last path component), or
    against the whole location when it contains ``/``; ``negate`` (spelled ``!GLOB``) prefers
    the sources whose name does NOT match. A rule that keeps none or all of the candidates
    does not decide; the next rule is tried."""

    newest: bool = False
    pattern: str = ""
    negate: bool = False

    def __str__(self) -> str:
        return "newest" if self.newest else ("!" if self.negate else "") + self.pattern

    def keep(self, candidates: Sequence[SourceSlab]) -> list[SourceSlab]:
        """The candidates this rule prefers (possibly all or none of them)."""
        if self.newest:
            known = [s for s in candidates if s.mtime_ns >= 0]
            if len(known) != len(candidates):
                return list(candidates)  # an unknown time cannot be compared
            latest = max(s.mtime_ns for s in known)
            return [s for s in known if s.mtime_ns == latest]
        return [s for s in candidates if self._matches(s.location) != self.negate]

    def _matches(self, location: str) -> bool:
        target = location if "/" in self.pattern else location.rstrip("/").rsplit("/", 1)[-1]
        return fnmatch.fnmatchcase(target, self.pattern)


def parse_prefer(texts: Sequence[str]) -> tuple[PreferRule, ...]:
    """``--prefer`` values as rules, in the order given; ``none`` alone clears them."""
    if list(texts) == ["none"]:
        return ()
    rules: list[PreferRule] = []
    for t in texts:
        text = t.strip()
        if text == "none":
            raise BadInputError("--prefer none clears the rules; give it alone")
        if text == "newest":
            rules.append(PreferRule(newest=True))
            continue
        negate = text.startswith("!")
        pattern = text[1:] if negate else text
        if not pattern:
            raise BadInputError(f"--prefer {t!r}: give 'newest' or a file-name glob such as '!*_preliminary*'")
        rules.append(PreferRule(pattern=pattern, negate=negate))
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class SetAside:
    """A source left out of the view because ``kept`` has the same coordinate and ``rule`` preferred it."""

    location: str
    kept: str
    rule: str


@dataclass(frozen=True, slots=True)
class Ordering:
    """``sources``: the sources placed, in placement order. ``by``: ``"coordinate"`` (ordered by
    their coordinate), ``"given"`` (no source has one: the order given) or None (no concat dim)."""

    sources: tuple[SourceSlab, ...]
    set_aside: tuple[SetAside, ...]
    by: str | None


def _extent(s: SourceSlab, dim: str) -> int | None:
    return next((m.shape[m.dims.index(dim)] for m in s.arrays.values() if dim in m.dims), None)


def _last(s: SourceSlab, dim: str) -> float | None:
    """The last coordinate value; for a source scanned before it was recorded, its first value
    when it has one element along ``dim``, else unknown."""
    if s.sort_last is not None:
        return s.sort_last
    return s.sort_value if _extent(s, dim) == 1 else None


def _span(s: SourceSlab, dim: str) -> tuple[float, float]:
    """The closed range of the source's coordinate values (its first value alone when the last
    is unknown: never refuse on a guess)."""
    assert s.sort_value is not None
    last = _last(s, dim)
    last = s.sort_value if last is None else last
    return min(s.sort_value, last), max(s.sort_value, last)


def span(s: SourceSlab, dim: str) -> tuple[float, float]:
    """The closed range of a source's coordinate values along ``dim`` as the series order compares
    them (``sort_value`` must be set)."""
    return _span(s, dim)


def _show(value: float, units: str | None) -> str:
    if units == _UNIX_SECONDS:
        try:
            return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")
        except (OverflowError, OSError, ValueError):
            pass
    return f"{value:g}" + (f" {units}" if units else "")


def _same(a: SourceSlab, b: SourceSlab, dim: str) -> bool:
    return (a.sort_value, _last(a, dim), _extent(a, dim)) == (b.sort_value, _last(b, dim), _extent(b, dim))


def _choose(group: list[SourceSlab], dim: str, prefer: Sequence[PreferRule]) -> tuple[SourceSlab, list[SetAside]]:
    cands = list(group)
    decided = ""
    for rule in prefer:
        kept = rule.keep(cands)
        if kept and len(kept) < len(cands):
            cands, decided = kept, str(rule)
        if len(cands) == 1:
            break
    if len(cands) != 1:
        a, b = cands[0], cands[1]
        when = _show(a.sort_value or 0.0, a.sort_units)
        if prefer:
            rules = " ".join(f"--prefer {r}" for r in prefer)
            raise PlanError(
                f"{a.location} and {b.location} have the same '{dim}' coordinate ({when}) and {rules} "
                "does not choose between them"
            )
        raise PlanError(
            f"{a.location} and {b.location} have the same '{dim}' coordinate ({when}); both cannot be placed: "
            "scan with --prefer newest or --prefer GLOB (e.g. --prefer '!*_preliminary*') to choose one"
        )
    winner = cands[0]
    return winner, [SetAside(s.location, winner.location, decided) for s in group if s is not winner]


def order_sources(
    sources: Sequence[SourceSlab], concat_dim: str | None, *, prefer: Sequence[PreferRule] = ()
) -> Ordering:
    """Order the sources along ``concat_dim``, setting aside duplicates by ``prefer``; raise
    PlanError naming the sources when they cannot be ordered (mixed coordinates, units,
    duplicates without a deciding rule, overlapping ranges)."""
    by_given = sorted(sources, key=lambda s: s.order)
    if concat_dim is None:
        return Ordering(tuple(by_given), (), None)
    with_coord = [s for s in by_given if s.sort_value is not None]
    if not with_coord:
        return Ordering(tuple(by_given), (), "given")
    if len(with_coord) != len(by_given):
        lacking = next(s for s in by_given if s.sort_value is None)
        raise PlanError(
            f"{lacking.location}: has no coordinate variable '{concat_dim}' while other sources do; "
            "cannot order it along the concat dimension"
        )
    units = {s.sort_units for s in with_coord}
    if len(units) > 1:
        a = with_coord[0]
        b = next(s for s in with_coord if s.sort_units != a.sort_units)
        raise PlanError(
            f"{b.location}: coordinate '{concat_dim}' has units {b.sort_units!r}, but {a.location} has "
            f"{a.sort_units!r}; they cannot be ordered together"
        )
    ordered = sorted(with_coord, key=lambda s: (s.sort_value, s.order))

    placed: list[SourceSlab] = []
    set_aside: list[SetAside] = []
    i = 0
    while i < len(ordered):
        group = [ordered[i]]
        while i + len(group) < len(ordered) and _same(ordered[i], ordered[i + len(group)], concat_dim):
            group.append(ordered[i + len(group)])
        i += len(group)
        if len(group) == 1:
            placed.append(group[0])
            continue
        winner, aside = _choose(group, concat_dim, prefer)
        placed.append(winner)
        set_aside.extend(aside)

    reach: SourceSlab | None = None  # the placed source reaching furthest so far
    for s in placed:
        lo, hi = _span(s, concat_dim)
        if reach is not None and lo <= _span(reach, concat_dim)[1]:
            r_lo, r_hi = _span(reach, concat_dim)
            u = s.sort_units
            raise PlanError(
                f"{reach.location} ({_show(r_lo, u)} to {_show(r_hi, u)}) and {s.location} ({_show(lo, u)} to "
                f"{_show(hi, u)}) overlap along '{concat_dim}' without being the same; they cannot be placed "
                "end to end (remove one of them)"
            )
        if reach is None or hi > _span(reach, concat_dim)[1]:
            reach = s
    return Ordering(tuple(placed), tuple(set_aside), "coordinate")

"""The order of a series along its concat dimension, and which duplicate sources are set aside. Pure.

Sources are ordered by their coordinate along the concat dimension; when that coordinate does
not tell them apart (a NEMO file's ``time_counter`` is 0 in every file, or no source has one),
by a CF time along the dimension that does (``time_centered(time_counter)``); else kept in the
order given when none has one. ``OrderRule`` names another order: ``--order-by VAR``,
``--order name``, ``--order given``. Two sources whose coordinates along that dimension are the same (same first
and last value, same extent: a ``_preliminary`` file and its final version) cannot both be
placed: without a rule the plan is refused naming both; ``--prefer`` rules (``PreferRule``)
choose the one placed, the other is set aside (recorded, not in the view). Sources whose ranges
overlap without being the same are always refused: no rule says which values win.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple

from ..errors import BadInputError, PlanError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .concat import SourceSlab

__all__ = [
    "BY_COORDINATE", "OrderKey", "OrderRule", "Ordering", "PreferRule", "SetAside", "order_sources",
    "parse_order", "parse_prefer", "span",
]  # fmt: skip

_UNIX_SECONDS = "seconds since 1970-01-01"


class OrderKey(NamedTuple):
    """First and last values of a 1-D array along the concat dimension (CF times as Unix
    seconds, ``units`` then ``seconds since 1970-01-01``), and whether it is a CF time."""

    first: float
    last: float
    units: str | None
    time: bool


@dataclass(frozen=True, slots=True)
class OrderRule:
    """How a series is ordered. ``coordinate`` (the default): by the concat dimension's own
    coordinate, or by a CF time along it where that coordinate does not tell sources apart;
    ``by``: by the values of ``var`` (``--order-by VAR``); ``name``: by file name; ``given``: as
    given (recorded sources first, in their recorded order)."""

    how: str = "coordinate"
    var: str = ""

    def __str__(self) -> str:
        return f"by:{self.var}" if self.how == "by" else self.how

    @staticmethod
    def parse(text: str | None) -> OrderRule:
        """The rule recorded as ``str(rule)`` (None: the default)."""
        if not text or text == "coordinate":
            return OrderRule()
        if text.startswith("by:"):
            return OrderRule("by", text[3:])
        return OrderRule(text)


BY_COORDINATE = OrderRule()
"""The default order."""


def parse_order(order: str | None, order_by: str | None) -> OrderRule | None:
    """``--order`` and ``--order-by`` as a rule (None: neither given, keep the recorded one)."""
    if order is not None and order_by is not None:
        raise BadInputError("give --order or --order-by, not both")
    if order_by is not None:
        if not order_by.strip():
            raise BadInputError("--order-by needs the name of a variable along the concat dimension")
        return OrderRule("by", order_by.strip())
    if order is None:
        return None
    if order not in ("name", "given", "coordinate"):
        raise BadInputError(f"--order {order!r}: give 'name', 'given' or 'coordinate'")
    return OrderRule(order)


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
    their coordinate), the name of the variable they were ordered by (``--order-by``, or the CF
    time used where the coordinate does not tell them apart), ``"name"``, ``"given"`` (asked
    for, or no source has a coordinate) or None (no concat dim)."""

    sources: tuple[SourceSlab, ...]
    set_aside: tuple[SetAside, ...]
    by: str | None
    partners: tuple[tuple[str, str], ...] = ()
    """``(source, leader)``: sources at the same place along the concat dimension as their
    leader (placed just before them in ``sources``), holding other variables (``_partners``)."""


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


def _choose(
    group: list[SourceSlab], dim: str, prefer: Sequence[PreferRule], what: str
) -> tuple[SourceSlab, list[SetAside]]:
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
                f"{a.location} and {b.location} have the same '{what}' coordinate ({when}) and {rules} "
                "does not choose between them"
            )
        raise PlanError(
            f"{a.location} and {b.location} have the same '{what}' coordinate ({when}) and nothing along '{dim}' "
            "tells them apart; if they are different steps, give their order with --order-by VAR (a variable "
            f"along '{dim}'), --order name or --order given; if one replaces the other (same data), choose it "
            "with --prefer GLOB (e.g. --prefer '!*_preliminary*') or --prefer newest"
        )
    winner = cands[0]
    return winner, [SetAside(s.location, winner.location, decided) for s in group if s is not winner]


def order_sources(
    sources: Sequence[SourceSlab], concat_dim: str | None, *, prefer: Sequence[PreferRule] = (),
    order: OrderRule | None = None,
) -> Ordering:
    """Order the sources along ``concat_dim`` by ``order``, setting aside duplicates by ``prefer``;
    raise PlanError naming the sources when they cannot be ordered (mixed coordinates, units,
    duplicates without a deciding rule, overlapping ranges)."""
    by_given = sorted(sources, key=lambda s: s.order)
    order = order or BY_COORDINATE
    if concat_dim is None:
        return Ordering(tuple(by_given), (), None)
    if order.how == "given":
        return Ordering(tuple(by_given), (), "given")
    if order.how == "name":
        named = sorted(by_given, key=lambda s: (s.location.rstrip("/").rsplit("/", 1)[-1], s.location))
        return Ordering(tuple(named), (), "name")
    if order.how == "by" and order.var != concat_dim:
        return _by_values(_keyed(by_given, concat_dim, order.var), concat_dim, prefer, order.var, by_given)
    if order.how == "coordinate":
        time = _time_key(by_given, concat_dim)
        if time is not None:
            return _by_values(_keyed(by_given, concat_dim, time), concat_dim, prefer, time, by_given)
    return _by_coordinate(by_given, concat_dim, prefer)


def _keyed(sources: Sequence[SourceSlab], dim: str, var: str) -> list[SourceSlab]:
    """The sources with the values of ``var`` as their coordinate; refused naming a source without it."""
    out: list[SourceSlab] = []
    for s in sources:
        k = s.order_keys.get(var)
        if k is None:
            raise PlanError(
                f"{s.location}: --order-by {var}: no numeric 1-D variable '{var}' along '{dim}' recorded for this "
                "file (one scanned before refstore recorded them is rescanned once its file changes)"
            )
        out.append(dataclasses.replace(s, sort_value=k.first, sort_last=k.last, sort_units=k.units))
    return out


def _by_values(
    keyed: list[SourceSlab], dim: str, prefer: Sequence[PreferRule], var: str, sources: Sequence[SourceSlab]
) -> Ordering:
    """``_by_coordinate`` over sources carrying ``var``'s values, mapped back to the sources."""
    ordering = _by_coordinate(keyed, dim, prefer, label=var)
    real = {s.location: s for s in sources}
    return Ordering(tuple(real[s.location] for s in ordering.sources), ordering.set_aside, var, ordering.partners)


def _distinct(sources: Sequence[SourceSlab], dim: str) -> bool:
    """Every source has a coordinate and no two are the same along ``dim``, except files of one
    step split by variable (``_partners``)."""
    if any(s.sort_value is None for s in sources):
        return False
    ordered = sorted(sources, key=lambda s: (s.sort_value, s.order))
    groups: list[list[SourceSlab]] = []
    for a, b in itertools.pairwise([None, *ordered]):
        if a is not None and b is not None and _same(a, b, dim):
            groups[-1].append(b)
        elif b is not None:
            groups.append([b])
    return all(len(g) == 1 or _partners(g, dim) for g in groups)


def _time_key(sources: Sequence[SourceSlab], dim: str) -> str | None:
    """The CF time along ``dim`` that orders ``sources`` where the dimension's own coordinate
    does not tell them apart (absent, or the same in two sources), else None: one every source
    has, in one units, whose values tell every source apart (the first such by name)."""
    if len(sources) < 2 or _distinct(sources, dim):
        return None
    names = set.intersection(*(set(n for n, k in s.order_keys.items() if k.time) for s in sources))
    for name in sorted(names):
        keyed = [dataclasses.replace(s, sort_value=s.order_keys[name].first, sort_last=s.order_keys[name].last,
                                     sort_units=s.order_keys[name].units) for s in sources]  # fmt: skip
        if len({s.sort_units for s in keyed}) == 1 and _distinct(keyed, dim):
            return name
    return None


def _by_coordinate(
    by_given: Sequence[SourceSlab], concat_dim: str, prefer: Sequence[PreferRule], label: str | None = None
) -> Ordering:
    """Sources ordered by ``sort_value`` (the coordinate along ``concat_dim``, or the values of
    ``label`` when given), duplicates set aside by ``prefer``, overlaps refused."""
    what = concat_dim if label is None else label
    with_coord = [s for s in by_given if s.sort_value is not None]
    if not with_coord:
        return Ordering(tuple(by_given), (), "given")
    if len(with_coord) != len(by_given):
        lacking = next(s for s in by_given if s.sort_value is None)
        raise PlanError(
            f"{lacking.location}: has no coordinate variable '{concat_dim}' while other sources do; "
            "cannot order it along the concat dimension (--order name or --order given place files by name "
            "or as given)"
        )
    units = {s.sort_units for s in with_coord}
    if len(units) > 1:
        a = with_coord[0]
        b = next(s for s in with_coord if s.sort_units != a.sort_units)
        raise PlanError(
            f"{b.location}: coordinate '{what}' has units {b.sort_units!r}, but {a.location} has "
            f"{a.sort_units!r}; they cannot be ordered together"
        )
    ordered = sorted(with_coord, key=lambda s: (s.sort_value, s.order))

    placed: list[SourceSlab] = []
    set_aside: list[SetAside] = []
    partners: dict[str, list[SourceSlab]] = {}
    i = 0
    while i < len(ordered):
        group = [ordered[i]]
        while i + len(group) < len(ordered) and _same(ordered[i], ordered[i + len(group)], concat_dim):
            group.append(ordered[i + len(group)])
        i += len(group)
        if len(group) == 1:
            placed.append(group[0])
            continue
        if _partners(group, concat_dim):
            placed.append(group[0])
            partners[group[0].location] = group[1:]
            continue
        winner, aside = _choose(group, concat_dim, prefer, what)
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
                f"{_show(hi, u)}) overlap along '{what}' without being the same; they cannot be placed "
                "end to end (remove one of them)"
            )
        if reach is None or hi > _span(reach, concat_dim)[1]:
            reach = s
    out = [x for s in placed for x in (s, *partners.get(s.location, ()))]
    pairs = tuple((p.location, lead) for lead, ps in partners.items() for p in ps)
    return Ordering(tuple(out), tuple(set_aside), "coordinate", pairs)


def _along(s: SourceSlab, dim: str) -> set[str]:
    return {n for n, m in s.arrays.items() if dim in m.dims and m.status == "ok"}


def _partners(group: Sequence[SourceSlab], dim: str) -> bool:
    """Whether sources with the same coordinate are one step split by variable (``tas.nc`` and
    ``pr.nc`` of one year): each holds an array along ``dim`` no other one holds, and every
    array along ``dim`` two of them share (the coordinate, its bounds) has equal, known
    digests. Then they are placed side by side, each array from the first that holds it."""
    along = [_along(s, dim) for s in group]
    for k, (s, mine) in enumerate(zip(group, along, strict=True)):
        others = set().union(*(a for j, a in enumerate(along) if j != k))
        if not mine - others:
            return False
        for t, theirs in zip(group[k + 1 :], along[k + 1 :], strict=True):
            for name in mine & theirs:
                d = s.digests.get(name)
                if d is None or d != t.digests.get(name):
                    return False
    return True

"""``scan/_intern.MetaTexts`` in memory (no collection, no Lance: milliseconds, for the mutation
run ``./dev mutate intern``; test_meta_intern checks the same through a commit).

Expected values: Python's own distinctions (``type``, ``math.copysign``), ``json.dumps`` of the
values given, and identity (``is``): interning keeps apart what ``==`` calls equal but the
recorded text does not (1 / 1.0 / True, 0.0 / -0.0), identical content shares one instance, and
an instance's text and canonical instance never change while the ``MetaTexts`` lives (ids are
not reused under it).
"""

from __future__ import annotations

import copy
import gc
import json
import math
import pickle
from typing import Any

import pytest

from refstore.scan._intern import MetaTexts
from refstore.scan._types import ArrayMeta


def _base() -> dict[str, Any]:
    return {
        "name": "v", "dims": ("time", "x"), "shape": (1, 4), "chunks": (1, 4), "dtype": "<f4", "fill_value": 0.0,
        "codecs": ({"id": "zlib", "level": 4},), "attrs": {"units": {"type": "str", "value": "K"}},
        "holes": ((0, 1),),  # (so that holes_axis is recorded)
    }  # fmt: skip


def _meta(**kw: Any) -> ArrayMeta:
    fields = _base()
    fields.update(kw)
    return ArrayMeta(**fields)


def _snapshot(m: ArrayMeta) -> tuple[Any, ...]:
    """Every field, with the type and sign of each number (what ``==`` would hide)."""

    def typed(x: Any) -> Any:
        if isinstance(x, dict):
            return ("dict", tuple((k, typed(v)) for k, v in x.items()))
        if isinstance(x, list | tuple):
            return (type(x).__name__, tuple(typed(v) for v in x))
        if isinstance(x, float):
            return ("float", repr(x), math.copysign(1.0, x))
        return (type(x).__name__, x)

    return tuple(typed(getattr(m, f)) for f in (
        "name", "dims", "shape", "chunks", "dtype", "fill_value", "codecs", "attrs", "status", "reason", "eras",
        "short_edge", "holes", "holes_axis", "edges", "gridless"))  # fmt: skip


# values ``==`` calls equal (or near) whose recorded JSON differs: never one instance
_APART: list[tuple[str, Any, Any]] = [
    ("fill_value", 1, 1.0),
    ("fill_value", 1, True),
    ("fill_value", 1.0, True),
    ("fill_value", 0.0, -0.0),
    ("fill_value", 0, False),
    ("attrs", {"n": {"type": "<i4", "value": [1]}}, {"n": {"type": "<i4", "value": [1.0]}}),
    ("attrs", {"n": {"type": "<f8", "value": [0.0]}}, {"n": {"type": "<f8", "value": [-0.0]}}),
    ("attrs", {"n": {"type": "<f8", "value": 1}}, {"n": {"type": "<f8", "value": True}}),
    ("codecs", ({"id": "zlib", "level": 4},), ({"id": "zlib", "level": 4.0},)),
    ("shape", (1, 4), (True, 4)),
]

# one field changed at a time (every field of the content)
_FIELDS: list[tuple[str, Any, Any]] = [
    ("name", "v", "w"),
    ("dims", ("time", "x"), ("time", "y")),
    ("shape", (1, 4), (2, 4)),
    ("chunks", (1, 4), (1, 2)),
    ("dtype", "<f4", "<f8"),
    ("fill_value", 0.0, None),
    ("codecs", ({"id": "zlib", "level": 4},), ({"id": "zlib", "level": 5},)),
    ("codecs", ({"id": "zlib", "level": 4},), ()),
    ("attrs", {"units": {"type": "str", "value": "K"}}, {"units": {"type": "str", "value": "C"}}),
    ("status", "ok", "unsupported"),
    ("reason", None, "why"),
    ("eras", (), ({"index": 0, "axis": 0, "start": 0, "stop": 1},)),
    ("short_edge", False, True),
    ("holes", (), ((1, 2),)),
    ("holes_axis", 0, 1),
    ("edges", (), (None, (3, 1))),
    ("gridless", False, True),
]


def _differ(one: Any, other: Any) -> bool:
    return json.dumps(one) != json.dumps(other) or type(one) is not type(other)


@pytest.mark.parametrize(("field", "one", "other"), _APART + _FIELDS)
def test_content_recorded_apart_is_never_one_instance(field: str, one: Any, other: Any) -> None:
    assert _differ(one, other)
    a, b = _meta(**{field: one}), _meta(**{field: other})
    before = (_snapshot(a), _snapshot(b))
    texts = MetaTexts()
    assert texts.canon(a) is a
    assert texts.canon(b) is b
    assert texts.canon(a) is a and texts.canon(b) is b  # asked again
    # a third, equal to each in turn, joins its own
    assert texts.canon(_meta(**{field: copy.deepcopy(one)})) is a
    assert texts.canon(_meta(**{field: copy.deepcopy(other)})) is b
    assert texts.text(a) != texts.text(b)
    assert (_snapshot(a), _snapshot(b)) == before  # nothing mutated


def test_identical_content_shares_the_first_instance() -> None:
    texts = MetaTexts()
    first = _meta()
    copies = [_meta() for _ in range(5)]  # equal, distinct objects (distinct containers)
    assert all(c is not first and c.attrs is not first.attrs for c in copies)
    before = [_snapshot(m) for m in (first, *copies)]
    assert texts.canon(first) is first
    for c in copies:
        assert texts.canon(c) is first
        assert texts.canon(c) is first  # the same non-canonical instance again: still the first
    assert texts.canon(first) is first
    assert [_snapshot(m) for m in (first, *copies)] == before
    assert texts.text(copies[2]) == texts.text(first)


def test_first_instance_wins_in_any_order() -> None:
    texts = MetaTexts()
    a, b, a2, b2 = _meta(fill_value=1), _meta(fill_value=1.0), _meta(fill_value=1), _meta(fill_value=1.0)
    assert texts.canon(b) is b
    assert texts.canon(a2) is a2
    assert texts.canon(a) is a2
    assert texts.canon(b2) is b


def test_text_is_the_instance_json_once() -> None:
    texts = MetaTexts()
    m = _meta(fill_value=-0.0, attrs={"n": {"type": "<i4", "value": [1, 2]}})
    got = texts.text(m)
    assert json.loads(got)["fill_value"] == 0.0 and math.copysign(1.0, json.loads(got)["fill_value"]) == -1.0
    assert json.loads(got)["attrs"] == {"n": {"type": "<i4", "value": [1, 2]}}
    assert got == m.to_json()
    calls = 0
    to_json = ArrayMeta.to_json

    def counting(self: ArrayMeta) -> str:
        nonlocal calls
        calls += 1
        return to_json(self)

    ArrayMeta.to_json = counting  # type: ignore[method-assign]
    try:
        assert texts.text(m) is got  # cached: no second to_json
        assert calls == 0
        other = _meta(fill_value=0.0)
        assert json.loads(texts.text(other))["fill_value"] == 0.0
        assert math.copysign(1.0, json.loads(texts.text(other))["fill_value"]) == 1.0
        assert calls == 1
    finally:
        ArrayMeta.to_json = to_json  # type: ignore[method-assign]


def test_ids_of_dropped_instances_never_mix_texts_or_instances() -> None:
    """The caller drops its instances (the scan results of a commit): ``MetaTexts`` keeps them,
    so a later object never gets an id it answered for (CPython reuses freed ids at once)."""
    texts = MetaTexts()
    for i in range(300):
        text = texts.text(_meta(fill_value=i))  # the instance is dropped right after
        assert json.loads(text)["fill_value"] == i, i
    canon = [texts.canon(_meta(fill_value=float(i))) for i in range(50)]
    for i in range(300):
        j = i % 50
        dup = _meta(fill_value=float(j))  # equal to canon[j], dropped after the call
        assert texts.canon(dup) is canon[j], i
        other = _meta(fill_value=j)  # an int: its own content, never canon[j]
        got = texts.canon(other)
        assert got.fill_value == j and type(got.fill_value) is int, i
        del dup, other, got
        gc.collect(0)


class _Unpicklable(dict[str, Any]):
    """An attribute mapping pickle refuses (a class not at module level: its lookup fails) but
    JSON writes like a dict: the key falls back to the recorded text."""

    __qualname__ = "_Unpicklable.nowhere"


def test_content_pickle_refuses_is_keyed_by_its_text() -> None:
    attrs = _Unpicklable(units={"type": "str", "value": "K"})
    with pytest.raises(pickle.PicklingError):
        pickle.dumps(attrs, 5)
    texts = MetaTexts()
    a = _meta(attrs=attrs)
    b = _meta(attrs=_Unpicklable(units={"type": "str", "value": "K"}))
    c = _meta(attrs=_Unpicklable(units={"type": "str", "value": "C"}))
    d = _meta(fill_value=1.0, attrs=_Unpicklable(units={"type": "str", "value": "K"}))
    e = _meta(fill_value=1, attrs=_Unpicklable(units={"type": "str", "value": "K"}))
    assert texts.canon(a) is a
    assert texts.canon(b) is a  # equal text: shared
    assert texts.canon(c) is c  # another text: apart
    assert texts.canon(d) is d
    assert texts.canon(e) is e  # 1 and 1.0 write apart in JSON too
    assert texts.text(b) == texts.text(a)


def test_each_instance_is_keyed_once_and_never_through_its_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """The content key is computed once per instance (the same instance again, as ``from_json``
    shares them between var rows, is a lookup) and from the fields, not ``to_json`` (the module
    doc: the pickle is ~3x cheaper)."""
    from types import SimpleNamespace

    from refstore.scan import _intern

    pickles: list[int] = []
    texts_made: list[int] = []

    def dumps(obj: Any, *args: Any) -> bytes:
        pickles.append(1)
        return pickle.dumps(obj, *args)

    to_json = ArrayMeta.to_json

    def counting(self: ArrayMeta) -> str:
        texts_made.append(1)
        return to_json(self)

    monkeypatch.setattr(_intern, "pickle", SimpleNamespace(dumps=dumps, PicklingError=pickle.PicklingError))
    monkeypatch.setattr(ArrayMeta, "to_json", counting)
    texts = MetaTexts()
    a, b = _meta(), _meta()
    assert texts.canon(a) is a and len(pickles) == 1
    assert texts.canon(a) is a and len(pickles) == 1
    assert texts.canon(b) is a and len(pickles) == 2
    for _ in range(3):
        assert texts.canon(b) is a and texts.canon(a) is a
    assert len(pickles) == 2 and texts_made == []

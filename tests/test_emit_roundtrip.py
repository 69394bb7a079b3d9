"""Every emitted form, reopened by its own reader, equals the oracle on every case it can express.

Parametrized over ``refstore.emit.FORMATS`` (those with a reader in ``tests/readers/``) and the
cases of ``tests/_emit_cases.py``: each file of ../shared/data on its own, generated cases and
series. Arrays a form cannot express must be refused with ``UnexpressibleError`` (checked by
emitting without ``skip_unexpressible``)."""

from __future__ import annotations

import contextlib
import importlib
from pathlib import Path
from typing import Any

import pytest

import refstore
from refstore.emit import FORMATS, emit
from refstore.errors import BadInputError, UnexpressibleError

from ._emit_cases import assert_same

READERS: dict[str, Any] = {}
for _fmt in FORMATS:
    with contextlib.suppress(ModuleNotFoundError):
        READERS[_fmt] = importlib.import_module(f"tests.readers.{_fmt.replace('-', '_')}")


def _expressible(fmt: str, case: Any, meta: Any) -> bool:
    from refstore.emit import EmitSource, _form

    try:
        _form(fmt).check(EmitSource(case.dataset().snapshot), meta)
    except UnexpressibleError:
        return False
    return True


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_roundtrip_every_case(fmt: str, emit_cases, tmp_path: Path) -> None:
    reader = READERS[fmt]
    checked = 0
    for i, case in enumerate(emit_cases):
        col = refstore.Collection.open(case.uri)
        out = str(tmp_path / f"out-{i}.{fmt}")
        expressible = [m for m in case.dataset().snapshot.arrays().values() if _expressible(fmt, case, m)]
        if not expressible:  # every array unexpressible: refused by name
            with pytest.raises(UnexpressibleError, match="array"):
                emit(col, fmt, out)
            with pytest.raises(BadInputError, match="nothing to emit"):
                emit(col, fmt, out, skip_unexpressible=True)
            continue
        rep = emit(col, fmt, out, skip_unexpressible=True)
        if rep.skipped:  # each skipped array is refused by name when not skipping
            with pytest.raises(UnexpressibleError, match="array"):
                emit(col, fmt, str(tmp_path / f"refused-{i}.{fmt}"))
        arrays = reader.open_form(out, case)
        ds = case.dataset()
        for name in ds.arrays:
            if name in rep.skipped:
                continue
            assert name in arrays, f"{case.id}: {name} missing from the {fmt} form"
            sel = case.window(name)
            got = arrays[name][sel] if sel else arrays[name][...]
            assert_same(got, case.expected(name, sel), f"{fmt} {case.id}:{name}")
            checked += 1
    assert checked > 0

"""Every emitted form, reopened by its own reader, equals the oracle on every case it can express,
and refuses exactly what its documented rules say.

Parametrized over ``refstore.emit.FORMATS`` (those with a reader in ``tests/readers/``) and the
cases of ``tests/_emit_cases.py``: each file of ../shared/data on its own, generated cases and
series. ``RULES`` spells, per form, what ``design/emit.md`` says the form refuses, from the
array's recorded facts (status, eras, short strips, filter masks, codecs, dtype, shape) and
never by calling the form's own ``check``: the arrays an emit leaves out (``skip_unexpressible``)
must be exactly those, so a form that refuses too much fails as surely as one that writes
what its reader gets wrong. Each refused array is also refused by name without
``skip_unexpressible``. Large arrays are compared on their first and on their last chunks."""

from __future__ import annotations

import contextlib
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import refstore
from refstore._cf import ENCODING_ATTRS
from refstore.emit import FORMATS, emit
from refstore.errors import BadInputError, UnexpressibleError

from ._emit_cases import assert_same

if TYPE_CHECKING:
    from collections.abc import Callable

READERS: dict[str, Any] = {}
for _fmt in FORMATS:
    with contextlib.suppress(ModuleNotFoundError):
        READERS[_fmt] = importlib.import_module(f"tests.readers.{_fmt.replace('-', '_')}")


@dataclass(frozen=True)
class Facts:
    """What the collection recorded of one array (nothing asked of a form)."""

    status: str
    reason: str
    eras: tuple[dict[str, Any], ...]
    short_edge: bool
    masked: int  # chunks whose HDF5 filter mask skips a filter
    codecs: frozenset[str]
    dtype: np.dtype[Any]
    shape: tuple[int, ...]


def _facts(snap: Any, meta: Any) -> Facts:
    quoted = meta.name.replace("'", "''")
    return Facts(
        status=meta.status,
        reason=meta.reason or "",
        eras=tuple(meta.eras),
        short_edge=bool(meta.short_edge),
        masked=snap.count("chunk", f"array = '{quoted}' AND filter_mask != 0"),
        codecs=frozenset(c["id"] for c in meta.codecs),
        dtype=np.dtype(meta.dtype),
        shape=tuple(meta.shape),
    )


# design/emit.md, "What a form refuses": zarr v2 carries numcodecs ids (and imagecodecs_* ones)
ZARR_V2_CODECS = frozenset({"zlib", "shuffle", "fletcher32", "zstd", "blosc", "lz4h5", "lzw", "packbits", "lerc",
                            "szip", "delta", "floatpred"})  # fmt: skip
ZARR_V3_DTYPES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8), "c": (8, 16)}
GDAL_DTYPES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (4, 8), "c": (8, 16)}  # no float16 in 3.6
PACKING = ENCODING_ATTRS  # design/formats.md "Eras": the one list of attributes that start an era
LIBHDF5_DECODES = re.compile(r"^HDF5 filter \S+ \(id \d+\) has no decoder")  # scaleoffset, nbit, bitshuffle


def _eras_differ_in_values(f: Facts) -> bool:
    """Eras whose dtype, fill value or encoding attributes differ (one VRT array has one)."""
    first = f.eras[0] if f.eras else None
    return any(
        e["dtype"] != first["dtype"] or e["fill_value"] != first["fill_value"]
        or {k: e["attrs"].get(k) for k in PACKING} != {k: first["attrs"].get(k) for k in PACKING}
        for e in f.eras[1:]
        if first is not None
    )  # fmt: skip


def _v3_sizes(f: Facts) -> tuple[int, ...]:
    return ZARR_V3_DTYPES.get(f.dtype.kind, ())


Rule = tuple[str, "Callable[[Facts], bool]"]

ZARR_COMMON: list[Rule] = [
    ("unsupported", lambda f: f.status != "ok"),
    ("eras", lambda f: bool(f.eras)),
    ("short last strip", lambda f: f.short_edge),
    ("HDF5 filter mask", lambda f: f.masked > 0),
]
ZARR_V2: list[Rule] = [
    *ZARR_COMMON,
    ("codec without a numcodecs id", lambda f: bool(f.codecs - ZARR_V2_CODECS)),  # jpeg, bitunpack
    ("dtype without a zarr form", lambda f: f.dtype.kind not in "biufcSV"),
]
ZARR_V3: list[Rule] = [
    *ZARR_COMMON,
    ("JPEG", lambda f: "jpeg" in f.codecs),
    ("codec without a zarr v3 form", lambda f: bool(f.codecs - ZARR_V2_CODECS - {"jpeg"})),
    ("dtype without a v3 form", lambda f: f.dtype.kind != "S" and f.dtype.itemsize not in _v3_sizes(f)),
]
RULES: dict[str, list[Rule]] = {
    "kerchunk-json": ZARR_V2,
    "kerchunk-parquet": ZARR_V2,
    "sqlite": ZARR_V2,
    "icechunk": ZARR_V3,
    "parquet": [("unsupported", lambda f: f.status != "ok")],
    "vrt": [
        ("unsupported, not by libhdf5", lambda f: f.status != "ok" and not LIBHDF5_DECODES.match(f.reason)),
        ("no GDAL type", lambda f: f.dtype.itemsize not in GDAL_DTYPES.get(f.dtype.kind, ())),
        ("zero-size dimension", lambda f: 0 in f.shape),
        ("eras differing in dtype, fill or packing", _eras_differ_in_values),
    ],
}
"""Per form: (rule, does it refuse these facts). Every rule must refuse something in the suite
except ``RARE`` ones (no case has such an array; kept so a new case is checked)."""
RARE = {"dtype without a zarr form", "dtype without a v3 form"}


def _refusals(fmt: str, f: Facts) -> list[str]:
    return [label for label, refuses in RULES[fmt] if refuses(f)]


def test_every_form_has_rules() -> None:
    assert set(READERS) <= set(RULES)


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_roundtrip_every_case(fmt: str, emit_cases, tmp_path: Path) -> None:
    reader = READERS[fmt]
    checked = 0
    fired: set[str] = set()
    for i, case in enumerate(emit_cases):
        col = refstore.Collection.open(case.uri)
        ds = case.dataset()
        metas = ds.snapshot.arrays()
        want = {name: why for name, m in metas.items() if (why := _refusals(fmt, _facts(ds.snapshot, m)))}
        fired.update(w for why in want.values() for w in why)
        out = str(tmp_path / f"out-{i}.{fmt}")
        rep: Any = None
        if len(want) < len(metas):
            try:
                rep = emit(col, fmt, out, skip_unexpressible=True)
            except BadInputError as e:
                pytest.fail(f"{fmt} {case.id}: every array refused ({e}); the rules refuse only {sorted(want)}")
            refused = set(rep.skipped)
        else:  # the rules refuse every array: so must the form
            with pytest.raises(BadInputError, match="nothing to emit"):
                emit(col, fmt, out, skip_unexpressible=True)
            refused = set(metas)
        over, under = sorted(refused - set(want)), sorted(set(want) - refused)
        assert not over and not under, (
            f"{fmt} {case.id}: refused but expressible by the documented rules: "
            f"{ {n: rep.skipped.get(n) if rep else 'all' for n in over} }; "
            f"expressed but the rules refuse: { {n: want[n] for n in under} }"
        )
        if refused:  # each refused array is refused by name when not skipping
            with pytest.raises(UnexpressibleError, match="array"):
                emit(col, fmt, str(tmp_path / f"refused-{i}.{fmt}"))
        if rep is None:
            continue
        arrays = reader.open_form(out, case)
        for name in ds.arrays:
            if name in refused:
                continue
            assert name in arrays, f"{case.id}: {name} missing from the {fmt} form"
            for sel in case.windows(name):
                got = arrays[name][sel] if sel else arrays[name][...]
                assert_same(got, case.expected(name, sel), f"{fmt} {case.id}:{name}{sel}")
            checked += 1
    assert checked > 0
    rules = {label for label, _ in RULES[fmt]}
    assert rules - RARE <= fired, f"{fmt}: no case exercises {sorted(rules - RARE - fired)}"

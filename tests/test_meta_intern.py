"""Interning equal ``ArrayMeta``s in a scan's commit: equal content shares one instance, content
whose JSON differs never does, and committing leaves every scanned meta as it was (interned
instances share their ``attrs`` dicts between sources, so nothing may mutate them)."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING

import h5py
import pytest

import refstore
from refstore.scan._intern import MetaTexts
from refstore.scan._types import ArrayMeta
from refstore.scan.auto import AutoScanner
from refstore.table.collection import Collection
from refstore.table.upsert import commit_scan

if TYPE_CHECKING:
    from pathlib import Path


def _meta(**kw: object) -> ArrayMeta:
    base: dict[str, object] = {
        "name": "v", "dims": ("time", "x"), "shape": (1, 4), "chunks": (1, 4), "dtype": "<f4",
        "fill_value": 0.0, "codecs": ({"id": "zlib", "level": 4},), "attrs": {"units": {"type": "str", "value": "K"}},
    }  # fmt: skip
    base.update(kw)
    return ArrayMeta(**base)  # type: ignore[arg-type]


def test_equal_content_is_one_instance_and_one_text() -> None:
    texts = MetaTexts()
    a, b = _meta(), _meta()  # equal, distinct objects (distinct attrs dicts)
    assert a is not b and a.attrs is not b.attrs
    assert texts.canon(a) is a
    assert texts.canon(b) is a
    assert texts.canon(a) is a  # the same instance again
    assert texts.text(a) == a.to_json() == b.to_json()


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"fill_value": 0.0}, {"fill_value": -0.0}),
        ({"fill_value": 1}, {"fill_value": 1.0}),
        ({"fill_value": 1}, {"fill_value": True}),
        ({"attrs": {"n": {"type": "<i4", "value": [1]}}}, {"attrs": {"n": {"type": "<i4", "value": [1.0]}}}),
        ({"attrs": {"n": {"type": "<f8", "value": [0.0]}}}, {"attrs": {"n": {"type": "<f8", "value": [-0.0]}}}),
        ({"codecs": ({"id": "zlib", "level": 4},)}, {"codecs": ({"id": "zlib", "level": 5},)}),
        ({"shape": (1, 4)}, {"shape": (2, 4)}),
    ],
)
def test_content_whose_json_differs_is_never_shared(one: dict[str, object], other: dict[str, object]) -> None:
    a, b = _meta(**one), _meta(**other)
    assert a.to_json() != b.to_json()  # the recorded texts differ ...
    texts = MetaTexts()
    assert texts.canon(a) is a
    assert texts.canon(b) is b  # ... so each keeps its own instance (Python's == calls some of these equal)
    assert texts.text(b) == b.to_json()


def _write(folder: Path, n: int) -> list[Path]:
    folder.mkdir()
    out = []
    for i in range(n):
        p = folder / f"d{i}.h5"
        with h5py.File(p, "w") as f:
            t = f.create_dataset("time", data=[float(i)], maxshape=(None,), chunks=(1,))
            t.attrs["units"] = "days since 2000-01-01"
            t.make_scale("time")
            v = f.create_dataset("v", data=[[i, i + 1, i + 2]], dtype="<f4", chunks=(1, 3), compression="gzip")
            v.attrs["units"] = "K"
            v.attrs["scale_factor"] = 0.5 if i < 2 else 0.25  # a packing change: a second era
            v.dims[0].attach_scale(t)
        out.append(p)
    return out


def test_commit_shares_instances_records_each_sources_own_meta_and_mutates_nothing(tmp_path: Path) -> None:
    files = _write(tmp_path / "data", 4)
    scanner = AutoScanner(concat_dim="time")
    results = [scanner(str(p)) for p in files]
    before = [copy.deepcopy(r.arrays) for r in results]
    uri = str(tmp_path / "col")
    refstore.init(uri)
    commit_scan(Collection.open(uri), results, concat_dim="time", unchanged=0, failed=[])
    assert [r.arrays for r in results] == before  # nothing mutated (shared attrs included)
    for r, old in zip(results, before, strict=True):
        assert [json.dumps(a.attrs, sort_keys=True) for a in r.arrays] == [
            json.dumps(a.attrs, sort_keys=True) for a in old
        ]
    snap = Collection.open(uri).snapshot()
    got = {(r["source"], r["array"]): json.loads(r["meta"]) for r in snap.vars().to_pylist()}
    for p, r in zip(files, results, strict=True):  # each var row holds its source's attributes, as h5py reads them
        with h5py.File(p, "r") as f:
            for name in ("time", "v"):
                recorded = got[(r.source.location, name)]["attrs"]
                for key in ("units", "scale_factor"):
                    if key not in f[name].attrs:
                        continue
                    value = f[name].attrs[key]
                    want = value.decode() if isinstance(value, bytes) else value
                    assert recorded[key]["value"] in (want, [want]), (p, name, key)
    v = snap.arrays()["v"]  # the packing change starts a second era at the third source
    assert [(e["start"], e["stop"]) for e in v.eras] == [(0, 2), (2, 4)]
    scales = [e["attrs"]["scale_factor"]["value"] for e in v.eras]
    with h5py.File(files[0], "r") as f0, h5py.File(files[2], "r") as f2:
        assert scales in (
            [f0["v"].attrs["scale_factor"], f2["v"].attrs["scale_factor"]],
            [[f0["v"].attrs["scale_factor"]], [f2["v"].attrs["scale_factor"]]],
        )

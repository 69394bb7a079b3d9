"""Mutation run (issue 12): mutmut 3 over the code that decides values, one group at a time.

    ./dev mutate [GROUP ...] [--max-children N] [--report] [--show-survivors]

GROUPS: plan (refstore/plan/), decode (read/decode.py), versions (table/versions.py), emit (the
codec and fill logic of the emitted forms: zarr_meta.py, _values.py), scan (refstore/scan/) and
scan-sample (its netCDF3 scanner and HDF5 filter table only: minutes, not hours). None given:
those but scan-sample, in that order (cheapest first); the per-module splits (plan-cs,
plan-new: grid, placement, mosaic and slabs; plan-core: concat, eras, region, remap and
series_order; netcdf3, hdf5, tiff, grib, scan-misc) run when named. Not part of CI.

Each group runs in its own folder, ``bench/out/mutate/GROUP/`` (kept between runs: mutmut
re-tests only mutants of functions whose source changed, so a second run is incremental), over
the fast test files listed for it in ``GROUPS`` (the whole suite per mutant would take days
here). mutmut records which of those tests call each mutated function and runs only them per
mutant, with a CPU-time limit. ``--report`` prints the table of a previous run without running;
``--retest-survivors`` runs only the mutants not killed last time (after adding tests: mutmut
keeps earlier verdicts otherwise). ``--pending`` runs those (but the ones explained as
equivalent) and every mutant without a verdict (never run, or its function changed): what is
left after new tests or a source change, where a plain run would re-run everything (mutmut
resets every verdict when the group's test list changes). Every decided verdict is also kept in
the group folder's ``verdicts.json`` with its function's source hash (``remember``), so the
table after an ``--only`` or ``--retest-survivors`` run (or after mutmut reset every verdict
because the group's test list changed) still counts the mutants decided before
(``merge_verdicts``).

The table counts per module: mutants, killed (a test failed), survived, timeout (CPU or wall
limit: counted as detected), no tests (no selected test calls the function: counted as
survived), and the score ``(killed + timeout) / mutants``. Explained survivors are listed in
design/mutation.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out" / "mutate"


@dataclass(frozen=True)
class Group:
    files: tuple[str, ...]
    """Globs (relative to the repository) of the modules mutated."""
    tests: tuple[str, ...]
    """The test files (or node ids) run against them: fast, and calling the code in-process."""
    extra: tuple[str, ...] = ()
    """Other files the tests import (e.g. ``bench/appendfuzz.py``), copied into the work folder."""
    timeout_constant: float = 5.0
    """Seconds added to the time mutmut expects a mutant's tests to take before its limits (4x
    that in wall time, 8x in CPU time). mutmut's expectation is the tests' own durations,
    without their fixtures' setup: where the fixtures write many files (``hdf5``), a mutant
    whose tests all pass can outlast the default and count as a "timeout" (detected)."""


GROUPS: dict[str, Group] = {
    "plan": Group(
        files=("refstore/plan/*.py",),
        tests=(
            "tests/test_plan_properties.py",
            "tests/test_plan_eras.py",
            "tests/test_plan_region.py",
            "tests/test_mutation_plan.py",
            "tests/test_encoding_eras.py",
        ),  # pure tests only: test_series_holes.py costs 10 s a mutant, test_emit_remap/test_hold 400 s
    ),
    "decode": Group(
        files=("refstore/read/decode.py",),
        tests=("tests/test_mutation_decode.py",),
        # not test_edge_cases / test_tiff::test_generated_cases: a Lance collection per test (~35 s a mutant)
    ),
    "versions": Group(
        files=("refstore/table/versions.py",),
        tests=(
            "tests/test_mutation_versions.py",
            "tests/test_versions.py::test_reprocessed_day",
            "tests/test_versions.py::test_a_touched_source_counts_every_reference_as_changed",
            "tests/test_versions.py::test_compact_and_gc_keep_tagged_versions",
        ),  # not the CLI-driven tag test (35 s) nor the state machine (minutes)
    ),
    "emit": Group(
        files=("refstore/zarr_meta.py", "refstore/_values.py"),
        tests=("tests/test_mutation_zarr_meta.py",),  # not test_edge_cases: a Lance collection per test
        # emit/_common.py: its codec check delegates to zarr_meta; the rest is OUT safety (design/mutation.md)
    ),
    "scan": Group(
        files=("refstore/scan/*.py",),
        tests=(
            "tests/test_mutation_scan.py",
            "tests/test_mutation_netcdf3.py",
            "tests/test_mutation_hdf5.py",
            "tests/test_hdf5_metadata.py",  # the header-bytes shortcuts (_hdf5_header) against h5py
            "tests/test_hdf5_layout.py",  # storage and chunk index from bytes (_hdf5_layout) against h5py
            "tests/test_mutation_tiff.py",
            "tests/test_mutation_grib.py",
            "tests/test_mutation_scan_misc.py",
        ),  # hours on one core: the per-module groups below split it
    ),
    # per-module splits of the groups above (cheaper to run and re-run one at a time)
    "plan-new": Group(
        files=(
            "refstore/plan/grid.py",
            "refstore/plan/placement.py",
            "refstore/plan/mosaic.py",
            "refstore/plan/slabs.py",
        ),
        tests=(
            "tests/test_mutation_plan_grid.py",
            "tests/test_plan_rectilinear.py",
            "tests/test_plan_mosaic.py",
            "tests/test_mutation_plan.py",
            "tests/test_mosaic.py::test_a_user_defined_crs_is_told_apart_by_its_geokeys",
            "tests/test_mosaic.py::test_pixel_is_point_tiles_join_pixel_is_area_ones_on_gdals_grid",
        ),  # in-process only: no Lance collection per test (nor test_mosaic's cut fixture: 6 s of gdal_translate)
    ),
    "plan-core": Group(
        files=(
            "refstore/plan/concat.py",
            "refstore/plan/eras.py",
            "refstore/plan/region.py",
            "refstore/plan/remap.py",
            "refstore/plan/series_order.py",
        ),
        tests=(
            "tests/test_mutation_plan_core.py",
            "tests/test_plan_properties.py",
            "tests/test_plan_eras.py",
            "tests/test_plan_region.py",
            "tests/test_mutation_plan.py",
            "tests/test_encoding_eras.py",
            "tests/test_plan_rectilinear.py",
            "tests/test_plan_mosaic.py",
        ),  # in-process only: test_scan_rules/test_series_holes build Lance collections (seconds a mutant)
    ),
    "plan-append": Group(
        files=("refstore/plan/append.py",),
        tests=("tests/test_append_fuzz.py::test_extend_plan_equals_make_plan", "tests/test_mutation_append.py"),
        extra=("bench/__init__.py", "bench/appendfuzz.py"),  # plan_campaign: extend_plan against make_plan
    ),  # not test_append_plan / the rest of test_append_fuzz: Lance collections (seconds to minutes a mutant)
    "hdf5-bytes": Group(
        files=("refstore/scan/_hdf5_layout.py", "refstore/scan/_hdf5_dense.py"),
        tests=("tests/test_hdf5_layout.py", "tests/test_hdf5_fuzz.py", "tests/test_hdf5_metadata.py",
               "tests/test_mutation_hdf5_dense.py", "tests/test_mutation_hdf5_layout.py"),
        extra=("bench/__init__.py", "bench/h5fuzz.py"),  # test_hdf5_fuzz: its file generator and h5py oracle
    ),
    "plan-cs": Group(
        files=("refstore/plan/coalesce.py", "refstore/plan/select.py"),
        tests=("tests/test_mutation_plan.py", "tests/test_plan_properties.py"),
    ),
    "netcdf3": Group(
        files=("refstore/scan/netcdf3.py",),
        tests=("tests/test_mutation_scan.py", "tests/test_mutation_netcdf3.py"),
    ),
    "hdf5": Group(
        # _hdf5_layout and _hdf5_dense are hdf5-bytes' (one group per module: a plain run here
        # would test them again against a weaker test list)
        files=("refstore/scan/hdf5.py", "refstore/scan/_hdf5_codecs.py", "refstore/scan/_hdf5_header.py"),
        tests=("tests/test_mutation_scan.py", "tests/test_mutation_hdf5.py", "tests/test_hdf5_metadata.py",
               "tests/test_hdf5_layout.py", "tests/test_mutation_hdf5_storage.py", "tests/test_mutation_hdf5_index.py",
               "tests/test_mutation_hdf5_header.py", "tests/test_mutation_hdf5_types.py",
               "tests/test_mutation_hdf5_walk.py"),
        # a survivor here runs ~100 tests whose module fixtures write HDF5 files: 30-40 s at load 2
        # against the default wall limit of (2.6 s of test calls + 5) x 4
        timeout_constant=30.0,
    ),
    # hdf5, intern: the commit's interning of ArrayMeta (in memory, no Lance)
    "intern": Group(
        files=("refstore/scan/_intern.py",),
        tests=("tests/test_mutation_intern.py",),
    ),
    "tiff": Group(
        files=("refstore/scan/tiff.py", "refstore/scan/_tiff_guard.py"),
        tests=("tests/test_mutation_tiff.py",),
    ),
    "grib": Group(
        files=("refstore/scan/grib.py",),
        tests=("tests/test_mutation_grib.py",),
    ),
    "scan-misc": Group(
        files=(
            "refstore/scan/auto.py",
            "refstore/scan/_check.py",
            "refstore/scan/_cftime.py",
            "refstore/scan/_types.py",
            "refstore/scan/_rangefile.py",
        ),
        tests=("tests/test_mutation_scan_misc.py",),
    ),
    "scan-sample": Group(
        files=("refstore/scan/netcdf3.py", "refstore/scan/_hdf5_codecs.py"),
        tests=(
            "tests/test_mutation_scan.py",
            "tests/test_mutation_decode.py",
            "tests/test_netcdf3.py::test_generated_formats",
        ),
    ),
}

_DEFAULT = ("plan", "decode", "versions", "emit", "scan")
"""The groups run when none is named: the per-module splits are subsets of these."""

EXPLAINED: dict[str, str] = tomllib.loads((REPO / "bench" / "mutation_equivalents.toml").read_text())
"""Surviving mutants explained as equivalent or unreachable (fnmatch patterns of mutant names -> why),
from ``bench/mutation_equivalents.toml``: counted in the ``equiv`` column with the equivalent
``zip(strict=)`` ones. design/mutation.md summarises them."""


def _explained(name: str) -> str | None:
    return next((why for pat, why in EXPLAINED.items() if fnmatch.fnmatchcase(name, pat)), None)


# mutmut's exit-code classes (mutmut.stats.status_by_exit_code, 3.8)
_DETECTED = {"killed", "timeout", "caught by type check", "segfault"}


def _sync_tree(src: Path, dst: Path) -> None:
    """Make ``dst`` a copy of ``src`` (Python and data files), touching only files whose bytes
    differ, so mutmut's mtime check regenerates mutants of changed modules only."""
    keep: set[Path] = set()
    for path in src.rglob("*"):
        if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
            continue
        rel = path.relative_to(src)
        keep.add(rel)
        target = dst / rel
        if target.is_file() and target.read_bytes() == path.read_bytes():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    if dst.is_dir():
        for path in sorted(dst.rglob("*"), reverse=True):
            if path.is_file() and "__pycache__" not in path.parts and path.relative_to(dst) not in keep:
                path.unlink()


def _toml_list(items: list[str]) -> str:
    return json.dumps(items)


def prepare(name: str, group: Group, *, source: bool = True) -> Path:
    """The group's work folder: a copy of ``refstore/`` (unless ``source`` is False: the last
    run's, so verdicts stay comparable) and ``tests/``, and a pyproject.toml with the group's
    ``[tool.mutmut]`` table."""
    work = OUT / name
    work.mkdir(parents=True, exist_ok=True)
    if source or not (work / "refstore").is_dir():
        _sync_tree(REPO / "refstore", work / "refstore")
    _sync_tree(REPO / "tests", work / "tests")
    for rel in group.extra:
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != (REPO / rel).read_bytes():
            shutil.copy2(REPO / rel, target)
    base = (REPO / "pyproject.toml").read_text()
    if "mutmut" in tomllib.loads(base).get("tool", {}):
        raise SystemExit("pyproject.toml has a [tool.mutmut] table; bench/mutate.py writes its own per group")
    tests = [t for t in group.tests if (REPO / t.split("::")[0]).exists()]
    cfg = "\n".join([
        "",
        "[tool.mutmut]",
        'source_paths = ["refstore"]',
        f"only_mutate = {_toml_list(list(group.files))}",
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}",
        f"also_copy = {_toml_list(sorted({e.split('/')[0] for e in group.extra}))}",  # folders: mutmut makes none
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly"]',
        "timeout_multiplier = 4.0",
        f"timeout_constant = {group.timeout_constant}",
        'process_isolation = "forkserver"',
        "mutate_only_covered_lines = false",
        "use_git_change_detection = false",
        "",
    ])  # fmt: skip
    text = base + cfg
    pp = work / "pyproject.toml"
    if not pp.exists() or pp.read_text() != text:
        pp.write_text(text)
    return work


def run(work: Path, max_children: int, mutants: list[str] | None = None, *, quiet: bool = False) -> int:
    # no ../shared/data: a mutant costs seconds, and the generated cases cover every codec and rule
    env = dict(os.environ, REFSTORE_SHARED_DATA="/nonexistent")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # the oracles' answers (gdalinfo, tifffile, cfgrib: tests/_oracle.cached), computed by the
    # first session of this run (mutmut's stats pass) and read by every mutant's; emptied here
    # so a changed test or fixture never reads an answer of an earlier run
    cache = work / "oracle-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env["REFSTORE_ORACLE_CACHE"] = str(cache)
    cmd = [sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.exit(cli())",
           "run", "--max-children", str(max_children), *(mutants or [])]  # fmt: skip
    out = subprocess.DEVNULL if quiet else None
    return subprocess.call(cmd, cwd=work, env=env, stdout=out, stderr=out)


VERDICTS = "verdicts.json"
"""Per group folder: every decided verdict so far, ``{mutant name: [status, function hash]}``."""

_UNDECIDED = {"not checked", "check was interrupted by user", "skipped"}


def _function_of(mutant: str) -> str:
    """The mangled function name mutmut hashes (``x__leaf_records``) of a mutant's name."""
    return mutant.rpartition(".")[2].rpartition("__mutmut_")[0]


def merge_verdicts(now: dict[str, str], hashes: dict[str, str], earlier: dict[str, tuple[str, str]]) -> dict[str, str]:
    """The statuses of ``now`` (the last run's, mutant -> status), where a mutant it left
    undecided (not run: ``--only``, ``--retest-survivors``, an interrupted run, or mutmut's
    reset of every verdict when the group's test list changes) takes its ``earlier`` verdict
    (mutant -> (status, hash of its function's source then)) if its function's source hash in
    ``hashes`` (mangled function name -> hash now) is unchanged. A verdict of the last run
    always wins; a changed or vanished function's earlier verdicts are dropped."""
    out = dict(now)
    for mutant, status in now.items():
        old = earlier.get(mutant)
        if status in _UNDECIDED and old and old[0] not in _UNDECIDED and hashes.get(_function_of(mutant)) == old[1]:
            out[mutant] = old[0]
    return out


def pending(
    statuses: dict[str, str],
    only: list[str] | None = None,
    *,
    timeouts: bool = False,
    undecided: bool = True,
    explained: Collection[str] = (),
) -> list[str]:
    """The mutants a ``--pending`` run tests: every one without a verdict (never run, or its
    function changed since; not with ``undecided`` False: ``--retest-survivors``) and every one
    not killed (survived, no tests) but those ``explained`` as equivalent (their function is
    unchanged, or they would be undecided: no test can kill them, and a survivor runs all its
    tests), with ``timeouts`` the timed-out ones too (mutmut also stops a mutant at a
    wall-clock limit: on a loaded machine a slow survivor times out), optionally only those
    matching ``only`` (fnmatch)."""
    again = {"survived", "no tests", *(("timeout",) if timeouts else ()), *(_UNDECIDED if undecided else ())}
    return [
        k
        for k, v in statuses.items()
        if v in again
        and not (v == "survived" and k in explained)
        and (not only or any(fnmatch.fnmatchcase(k, p) for p in only))
    ]


def _raw_results(name: str, group: Group) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """``{module path: ({mutant name: status}, {function: source hash})}`` as mutmut left them."""
    from mutmut.stats import status_by_exit_code

    work = OUT / name
    out: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        rel = str(meta.relative_to(work / "mutants"))[: -len(".meta")]
        if not any(fnmatch.fnmatch(rel, g) for g in group.files):
            continue
        data = json.loads(meta.read_text())
        statuses = {k: status_by_exit_code[v] for k, v in data["exit_code_by_key"].items()}
        out[rel] = (statuses, dict(data.get("hash_by_function_name", {})))
    return out


def _earlier(name: str) -> dict[str, tuple[str, str]]:
    path = OUT / name / VERDICTS
    if not path.is_file():
        return {}
    return {k: (v[0], v[1]) for k, v in json.loads(path.read_text()).items()}


def results(name: str, group: Group) -> dict[str, dict[str, str]]:
    """``{module path: {mutant name: status}}``: the group's last run, with the verdicts of
    earlier runs for the mutants it did not run (``merge_verdicts``)."""
    earlier = _earlier(name)
    return {rel: merge_verdicts(st, hashes, earlier) for rel, (st, hashes) in _raw_results(name, group).items()}


def remember(name: str, group: Group) -> None:
    """Keep every decided verdict (merged as ``results`` does) with its function's hash in
    the group folder's ``verdicts.json``, for the next run's table."""
    earlier = _earlier(name)
    keep = dict(earlier)
    for st, hashes in _raw_results(name, group).values():
        for mutant, status in merge_verdicts(st, hashes, earlier).items():
            h = hashes.get(_function_of(mutant))
            if status not in _UNDECIDED and h is not None:
                keep[mutant] = (status, h)
    (OUT / name / VERDICTS).write_text(json.dumps({k: list(v) for k, v in sorted(keep.items())}, indent=0))


_STRICT = re.compile(r",? *strict=(True|False|None)")


def diffs(name: str, group: Group) -> dict[str, str]:
    """The source diff of every mutant the last run did not detect (mutmut's own rendering)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    work = OUT / name
    here = os.getcwd()
    out: dict[str, str] = {}
    os.chdir(work)
    try:
        for mod, statuses in results(name, group).items():
            for k, v in statuses.items():
                if v not in _DETECTED and v != "not checked":
                    out[k] = get_diff_for_mutant(k, path=mod)
    finally:
        os.chdir(here)
    return out


def _bare(line: str) -> str:
    return _STRICT.sub("", line).replace(" ", "").replace(",)", ")")


def equivalent(diff: str) -> bool:
    """A mutant that only drops or weakens ``strict=True`` of a ``zip`` over sequences of equal
    length by construction (a guard, not behaviour): equivalent, counted apart."""
    minus = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return (
        bool(minus)
        and len(minus) == len(plus)
        and all("zip(" in a and _bare(a) == _bare(b) for a, b in zip(minus, plus, strict=True))
    )


def table(name: str, group: Group, *, show_survivors: bool) -> list[str]:
    rows = results(name, group)
    try:
        eq = {k for k, d in diffs(name, group).items() if equivalent(d) or _explained(k)}
    except Exception as e:  # the diff needs mutmut's files; the table does not
        print(f"[{name}]: cannot render diffs ({e}); equivalent mutants not counted apart")
        eq = set()
    lines = [f"{'module':<34} {'mutants':>7} {'killed':>6} {'survived':>8} {'timeout':>7} {'no tests':>8} "
             f"{'not run':>7} {'equiv':>5} {'score':>6} {'adj.':>6}"]  # fmt: skip
    total: dict[str, int] = {}
    survivors: list[str] = []
    for mod, statuses in rows.items():
        c = {
            "mutants": len(statuses),
            "killed": sum(s in ("killed", "caught by type check", "segfault") for s in statuses.values()),
            "survived": sum(s == "survived" and k not in eq for k, s in statuses.items()),
            "timeout": sum(s == "timeout" for s in statuses.values()),
            "no tests": sum(s == "no tests" for s in statuses.values()),
            "not run": sum(s not in _DETECTED | {"survived", "no tests"} for s in statuses.values()),
            "equiv": sum(k in eq for k in statuses),
        }
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
        lines.append(_row(mod, c))
        survivors += [f"  {s:<9} {k}" for k, s in statuses.items() if s in ("survived", "no tests") and k not in eq]
    if rows:
        lines.append(_row(f"[{name}]", total))
    else:
        lines.append(f"[{name}]: no results (not run yet)")
    if show_survivors and survivors:
        lines += ["  not killed (`cd bench/out/mutate/GROUP && mutmut show NAME` shows one):", *survivors]
        (OUT / name / "survivors.diff").write_text(
            "".join(f"## {k}\n{d}\n" for k, d in diffs(name, group).items() if k not in eq)
        )
    return lines


def _row(label: str, c: dict[str, int]) -> str:
    """score: detected / mutants run; adj.: the same without the equivalent ones."""
    n = c["mutants"] - c["not run"]
    det = c["killed"] + c["timeout"]
    score = f"{100.0 * det / n:5.1f}%" if n else "    -"
    adj = f"{100.0 * det / (n - c['equiv']):5.1f}%" if n - c["equiv"] else "    -"
    return (f"{label:<34} {c['mutants']:>7} {c['killed']:>6} {c['survived']:>8} {c['timeout']:>7} {c['no tests']:>8} "
            f"{c['not run']:>7} {c['equiv']:>5} {score:>6} {adj:>6}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="./dev mutate", description=__doc__.split("\n\n")[0])
    ap.add_argument("groups", nargs="*", metavar="GROUP", help=", ".join(GROUPS) + " (default: all)")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2, help="mutants tested at once")
    ap.add_argument("--report", action="store_true", help="print the last run's table; run nothing")
    ap.add_argument("--show-survivors", action="store_true", help="list every mutant not killed")
    ap.add_argument(
        "--keep-source",
        action="store_true",
        help="test the source copied by the last run (only the tests are refreshed)",
    )
    ap.add_argument(
        "--retest-survivors",
        action="store_true",
        help="run again only the mutants that survived (or had no test) last time, e.g. after new tests",
    )
    ap.add_argument(
        "--pending",
        action="store_true",
        help="run every mutant not killed yet: never run, of a function changed since, survived or with no "
        "tests (after new tests or a source change; a plain run re-runs everything once the test list changed)",
    )
    ap.add_argument(
        "--with-timeouts",
        action="store_true",
        help="with --pending: the timed-out mutants too (run them on a quiet machine: a wall-clock limit stops them)",
    )
    ap.add_argument(
        "--only",
        action="append",
        metavar="PATTERN",
        help="run only the mutants whose name matches (fnmatch, e.g. 'refstore.plan.mosaic.x_gaps__mutmut_*'; "
        "repeatable); the others keep their last verdict",
    )
    args = ap.parse_args(argv)
    names = args.groups or [g for g in GROUPS if g in _DEFAULT]
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        ap.error(f"unknown group {unknown[0]!r}; choose from {', '.join(GROUPS)}")
    failed = 0
    for name in names:
        if not args.report:
            again = None
            if args.retest_survivors:
                again = [
                    k for st in results(name, GROUPS[name]).values() for k in pending(st, args.only, undecided=False)
                ]
                if not again:
                    continue
            elif args.only and not args.pending:
                again = list(args.only)
            work = prepare(name, GROUPS[name], source=not args.keep_source)
            print(f"== {name}: mutmut in {work.relative_to(REPO)}", flush=True)
            remember(name, GROUPS[name])  # before mutmut may reset verdicts (a changed test list)
            if args.pending:
                # mutmut regenerates the mutants of changed sources (new function hashes) and
                # re-collects its stats, then refuses a filter that matches nothing: the table
                # after it tells the functions changed since (their verdicts dropped) from the rest
                run(work, args.max_children, ["refstore.__regenerate_only__"], quiet=True)
                eq = {k for k, d in diffs(name, GROUPS[name]).items() if equivalent(d) or _explained(k)}
                again = [
                    k
                    for st in results(name, GROUPS[name]).values()
                    for k in pending(st, args.only, timeouts=args.with_timeouts, explained=eq)
                ]
                print(f"== {name}: {len(again)} mutants pending", flush=True)
                if not again:
                    continue
            failed |= run(work, args.max_children, again) != 0
    print()
    for name in names:
        if (OUT / name / "mutants").is_dir():
            remember(name, GROUPS[name])
        print("\n".join(table(name, GROUPS[name], show_survivors=args.show_survivors)))
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())

"""Mutation run (issue 12): mutmut 3 over the code that decides values, one group at a time.

    ./dev mutate [GROUP ...] [--max-children N] [--report] [--show-survivors]

GROUPS: plan (refstore/plan/), decode (read/decode.py), versions (table/versions.py), emit (the
codec and fill logic of the emitted forms: zarr_meta.py, _values.py), scan (refstore/scan/) and
scan-sample (its netCDF3 scanner and HDF5 filter table only: minutes, not hours). None given:
all but scan-sample, in that order (cheapest first). Not part of CI.

Each group runs in its own folder, ``bench/out/mutate/GROUP/`` (kept between runs: mutmut
re-tests only mutants of functions whose source changed, so a second run is incremental), over
the fast test files listed for it in ``GROUPS`` (the whole suite per mutant would take days
here). mutmut records which of those tests call each mutated function and runs only them per
mutant, with a CPU-time limit. ``--report`` prints the table of a previous run without running;
``--retest-survivors`` runs only the mutants not killed last time (after adding tests: mutmut
keeps earlier verdicts otherwise).

The table counts per module: mutants, killed (a test failed), survived, timeout (CPU limit:
counted as detected), no tests (no selected test calls the function: counted as survived), and
the score ``(killed + timeout) / mutants``. Explained survivors are listed in design/mutation.md.
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

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out" / "mutate"


@dataclass(frozen=True)
class Group:
    files: tuple[str, ...]
    """Globs (relative to the repository) of the modules mutated."""
    tests: tuple[str, ...]
    """The test files (or node ids) run against them: fast, and calling the code in-process."""


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
            "tests/test_mutation_tiff.py",
            "tests/test_mutation_grib.py",
            "tests/test_mutation_scan_misc.py",
        ),  # hours on one core: the per-module groups below split it
    ),
    # per-module splits of the groups above (cheaper to run and re-run one at a time)
    "plan-cs": Group(
        files=("refstore/plan/coalesce.py", "refstore/plan/select.py"),
        tests=("tests/test_mutation_plan.py", "tests/test_plan_properties.py"),
    ),
    "netcdf3": Group(
        files=("refstore/scan/netcdf3.py",),
        tests=("tests/test_mutation_scan.py", "tests/test_mutation_netcdf3.py"),
    ),
    "hdf5": Group(
        files=("refstore/scan/hdf5.py", "refstore/scan/_hdf5_codecs.py"),
        tests=("tests/test_mutation_scan.py", "tests/test_mutation_hdf5.py"),
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
        files=("refstore/scan/auto.py", "refstore/scan/_check.py", "refstore/scan/_cftime.py",
               "refstore/scan/_types.py", "refstore/scan/_rangefile.py"),
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

_INT64_DEFAULT = "np.asarray/np.arange of Python ints (or int64 arrays) without dtype=int64: numpy's default here"
_ZEROS_FULL = "np.zeros/np.full without int64: exact floats cast into the int32/int64 columns, or int64 itself"
_SCHEMA_CAST = "a column's numpy/Arrow type left to the default: pa.table(..., schema=CHUNK_BATCH_SCHEMA) casts it"
EXPLAINED: dict[str, str] = {
    # plan/coalesce.py
    "refstore.plan.coalesce.x_coalesce__mutmut_3[57]": "offsets cast without int64: int64 lengths promote the sum",
    "refstore.plan.coalesce.x_coalesce__mutmut_4[13]": "lengths cast without int64: int64 offsets promote the sum",
    "refstore.plan.coalesce.x_coalesce__mutmut_4[68]": 'argsort kind "stable" -> default/None/"STABLE": ranges at one '
    "offset always merge (o <= cur_end), and numpy reads kind case-insensitively",
    "refstore.plan.coalesce.x_coalesce__mutmut_50": "argsort kind spelled STABLE: numpy reads it case-insensitively",
    "refstore.plan.coalesce.x_coalesce__mutmut_5[345]": "the cur_start/cur_end sentinel: never read before the first "
    "range sets it (r >= 0 is tested first)",
    "refstore.plan.coalesce.x_coalesce__mutmut_10[0246]": "the reads' start/end arrays: " + _INT64_DEFAULT,
    # plan/select.py
    "refstore.plan.select.x_chunk_slices__mutmut_[35]": _INT64_DEFAULT,
    "refstore.plan.select.x_chunk_slices__mutmut_1[035]": _INT64_DEFAULT,
    "refstore.plan.select.x_chunk_slices__mutmut_3[579]": _INT64_DEFAULT,
    "refstore.plan.select.x_chunk_slices__mutmut_41": _INT64_DEFAULT,
    "refstore.plan.select.x_chunk_slices__mutmut_8": _INT64_DEFAULT,
    "refstore.plan.select.x_needed_chunks__mutmut_1[8]": _INT64_DEFAULT,
    "refstore.plan.select.x_needed_chunks__mutmut_22": _INT64_DEFAULT,
    # scan/netcdf3.py
    "refstore.scan.netcdf3.xǁ_Readerǁoffset__mutmut_9": "offsets >Q for >q: equal below 2^63 (spec: non-negative)",
    "refstore.scan.netcdf3.xǁ_Readerǁoffset__mutmut_22": "offsets >i for >I: equal below 2^31 (spec: non-negative)",
    "refstore.scan.netcdf3.xǁ_Readerǁvalues__mutmut_27": 'codec name "UTF-8" for "utf-8" (case-insensitive)',
    "refstore.scan.netcdf3.xǁ_Readerǁname__mutmut_16": 'codec name "UTF-8" for "utf-8" (case-insensitive)',
    "refstore.scan.netcdf3.xǁ_Readerǁint32__mutmut_7": "tags and type codes >I for >i: small non-negative numbers",
    "refstore.scan.netcdf3.xǁ_Readerǁcount__mutmut_9": "CDF-5 counts >Q for >q: equal below 2^63 (spec: non-negative)",
    "refstore.scan.netcdf3.xǁ_Readerǁattr_list__mutmut_3": "`tag == 0 or n == 0`: an attribute tag with no entries "
    "is empty either way, and ABSENT with entries is refused by the tag test that follows",
    "refstore.scan.netcdf3.x_read_header__mutmut_9[68]": "np.prod without int64: a float of a small integer, "
    "made int() at once",
    "refstore.scan.netcdf3.x__fill_value__mutmut_5": "`size != 1 and ...`: a fill of several values fails the "
    "reshape to one value and falls back to the default anyway",
    "refstore.scan.netcdf3.x__fill_value__mutmut_9": '"XXOUXX" still holds the kinds O and U',
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_58": _ZEROS_FULL,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_60": _ZEROS_FULL,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_68": _ZEROS_FULL,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_70": _ZEROS_FULL,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_7[68]": _INT64_DEFAULT,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_8[25]": _INT64_DEFAULT,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_9[79]": "np.prod without int64: a float of a small "
    "integer, made int() at once",
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_109": _ZEROS_FULL,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_111": _ZEROS_FULL,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_115": _ZEROS_FULL,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_118": _ZEROS_FULL,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁscan_file__mutmut_12[25]": _INT64_DEFAULT,
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁ_coordinate_range__mutmut_4[79]": "calendar default None: the next line "
    "makes any non-text calendar 'standard'",
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁ_coordinate_range__mutmut_5[38]": "calendar 'STANDARD': cf_seconds "
    "lower-cases it",
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁ_coordinate_range__mutmut_65": "one bound decoded as standard time: "
    "both or neither decode (one units, one calendar), and a half-decoded pair falls back to raw values",
    "refstore.scan.netcdf3.xǁNetCDF3Scannerǁ_coordinate_range__mutmut_7[12]": "one bound decoded as standard time, "
    "or `or` for `and`: both bounds decode alike (one units, one calendar)",
    # scan/hdf5.py
    "refstore.scan.hdf5.x__split_along__mutmut_1": "`len(keys) != 1 and chunks != shape`: a whole array has one "
    "key and chunks equal to its shape, so both forms are false together",
    "refstore.scan.hdf5.x__split_along__mutmut_13": "`n < 1`: one step along the dimension split is that one slab, "
    "the same chunk, offset and length",
    "refstore.scan.hdf5.x__split_along__mutmut_1[79]": "np.prod without int64: a float of a small integer, int()",
    "refstore.scan.hdf5.x__split_along__mutmut_2[79]": "np.prod without int64: a float of a small integer, int()",
    "refstore.scan.hdf5.x__split_along__mutmut_3[24]": _ZEROS_FULL,
    "refstore.scan.hdf5.x__chunk_table__mutmut_4": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_6": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_11": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_13": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_27": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_30": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_33": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_35": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_38": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_40": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_43": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_45": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_105": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_108": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_115": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_118": _SCHEMA_CAST,
    "refstore.scan.hdf5.x__chunk_table__mutmut_5[34]": "any_inline None/True: an all-null inline column either way",
    "refstore.scan.hdf5.x__chunk_table__mutmut_83": "an assert (a guard) weakened: the invariant holds by construction",
    "refstore.scan.hdf5.x__supported_dtype__mutmut_13": '"XXbiufcSXX" still holds the kinds b, i, u, f, c, S',
    "refstore.scan.netcdf3.x__table__mutmut_4": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_6": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_12": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_15": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_28": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_30": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_44": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_46": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_52": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_54": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_61": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_63": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_68": _SCHEMA_CAST,
    "refstore.scan.netcdf3.x__table__mutmut_70": _SCHEMA_CAST,
    "refstore.plan.select.x_select__mutmut_68": "`s < 0` for `s <= 0`: slice.indices never gives a step of 0 (a zero "
    "step is refused just before)",
    "refstore.plan.select.x_parse_window__mutmut_22": "the inner ValueError's text: re-raised as BadInputError",
}
"""Surviving mutants explained as equivalent (fnmatch patterns of mutant names -> why): counted
in the ``equiv`` column with the equivalent ``zip(strict=)`` ones. design/mutation.md lists them."""


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
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly"]',
        "timeout_multiplier = 4.0",
        "timeout_constant = 5.0",
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


def run(work: Path, max_children: int, mutants: list[str] | None = None) -> int:
    # no ../shared/data: a mutant costs seconds, and the generated cases cover every codec and rule
    env = dict(os.environ, REFSTORE_SHARED_DATA="/nonexistent")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.exit(cli())",
           "run", "--max-children", str(max_children), *(mutants or [])]  # fmt: skip
    return subprocess.call(cmd, cwd=work, env=env)


def results(name: str, group: Group) -> dict[str, dict[str, str]]:
    """``{module path: {mutant name: status}}`` of the group's last run."""
    from mutmut.stats import status_by_exit_code

    work = OUT / name
    out: dict[str, dict[str, str]] = {}
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        rel = str(meta.relative_to(work / "mutants"))[: -len(".meta")]
        if not any(fnmatch.fnmatch(rel, g) for g in group.files):
            continue
        data = json.loads(meta.read_text())
        out[rel] = {k: status_by_exit_code[v] for k, v in data["exit_code_by_key"].items()}
    return out


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
    return bool(minus) and len(minus) == len(plus) and all(
        "zip(" in a and _bare(a) == _bare(b)
        for a, b in zip(minus, plus, strict=True)
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
            "".join(f"## {k}\n{d}\n" for k, d in diffs(name, group).items() if k not in eq))
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
    ap.add_argument("--keep-source", action="store_true",
                    help="test the source copied by the last run (only the tests are refreshed)")
    ap.add_argument("--retest-survivors", action="store_true",
                    help="run again only the mutants that survived (or had no test) last time, e.g. after new tests")
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
                again = [k for st in results(name, GROUPS[name]).values() for k, v in st.items()
                         if v in ("survived", "no tests")]
                if not again:
                    continue
            work = prepare(name, GROUPS[name], source=not args.keep_source)
            print(f"== {name}: mutmut in {work.relative_to(REPO)}", flush=True)
            failed |= run(work, args.max_children, again) != 0
    print()
    for name in names:
        print("\n".join(table(name, GROUPS[name], show_survivors=args.show_survivors)))
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())

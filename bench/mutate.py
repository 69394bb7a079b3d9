"""Mutation testing of the pure planning layer and the chunk decoder (``./dev mutate``; not CI).

Runs mutmut (``[tool.mutmut]`` in pyproject.toml: what is mutated, the test selection) and
prints, per module, the mutants killed out of those tried, then every survivor. The tests run
without ../shared/data (``REFSTORE_SHARED_DATA`` pointed nowhere) so a mutant costs seconds; the
generated cases cover every codec and rule. ``--max-children N`` (default 2) bounds the workers.

    ./dev mutate                  # run (resumes: mutmut keeps results under mutants/)
    ./dev mutate --report         # only print the report of the last run
    .venv/bin/mutmut show NAME    # the diff of one mutant
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KILLED = {"killed", "timeout", "segfault", "type check caught"}  # the tests noticed
NOT_RUN = {"not checked", "skipped"}


def _mutmut(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, REFSTORE_SHARED_DATA="/nonexistent")
    tool = Path(sys.executable).parent / "mutmut"
    return subprocess.run([str(tool), *args], cwd=REPO, env=env, text=True, capture_output=True, check=False)


def results() -> dict[str, str]:
    """mutant name -> status, from ``mutmut results --all true``."""
    out = _mutmut("results", "--all", "true").stdout
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\w.]+__mutmut_\d+): (.+)$", line)
        if m:
            got[m.group(1)] = m.group(2).strip()
    return got


def module_of(mutant: str) -> str:
    """``refstore.plan.coalesce.x_coalesce__mutmut_3`` -> ``refstore/plan/coalesce.py``."""
    dotted = mutant.split("__mutmut_")[0]
    parts = dotted.split(".")
    while parts:
        cand = REPO / ("/".join(parts) + ".py")
        if cand.is_file():
            return "/".join(parts) + ".py"
        parts.pop()
    return dotted


def report(status: dict[str, str]) -> int:
    by_module: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, st in sorted(status.items()):
        by_module[module_of(name)].append((name, st))
    survivors: list[str] = []
    print(f"{'module':<32} {'killed':>7} {'tried':>6} {'score':>6}  (no test reaches: not counted)")
    for module, items in sorted(by_module.items()):
        tried = [(n, s) for n, s in items if s not in NOT_RUN and s != "no tests"]
        killed = sum(1 for _, s in tried if s in KILLED)
        untested = sum(1 for _, s in items if s == "no tests")
        score = 100.0 * killed / len(tried) if tried else float("nan")
        print(f"{module:<32} {killed:>7} {len(tried):>6} {score:>5.1f}%  no tests: {untested}")
        survivors += [f"{n}: {s}" for n, s in items if s not in KILLED and s not in NOT_RUN]
    print(f"\n{len(survivors)} surviving or unreached mutants (`.venv/bin/mutmut show NAME` for the diff):")
    for s in survivors:
        print(" ", s)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", action="store_true", help="only print the report of the last run")
    ap.add_argument("--max-children", type=int, default=2)
    a = ap.parse_args()
    if not a.report:
        run = _mutmut("run", "--max-children", str(a.max_children))
        tail = (run.stdout + run.stderr).strip().splitlines()[-5:]
        print("\n".join(tail))
    return report(results())


if __name__ == "__main__":
    raise SystemExit(main())

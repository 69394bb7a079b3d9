"""Run a command and sample the resident memory of its whole process tree (the command and every
descendant: scan workers included) from /proc, every ``every`` seconds."""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MiB (0 once it is gone)."""
    kids = _children()
    todo, total = [pid], 0
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1])
        except OSError:
            pass
        todo.extend(kids.get(p, ()))
    return total * _PAGE / 2**20


def run_tree(cmd: list[str], *, every: float = 0.25, timeout: float | None = None,
             env: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Run ``cmd`` to its end (killed after ``timeout`` s): wall seconds, CPU seconds of the
    tree (user + system, every descendant waited for), exit code, stdout, stderr, the peak of the
    tree's RSS and a timeline of ~60 (seconds, MiB) samples. On a shared machine the CPU seconds
    say what the wall time would be on idle cores."""
    samples: list[tuple[float, float]] = []
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(every):
            samples.append((time.perf_counter() - t0, tree_rss_mb(proc.pid)))

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop.set()
    th.join()
    step = max(1, len(samples) // 60)
    return {
        "wall_s": wall, "cpu_s": ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime,
        "rc": proc.returncode, "timed_out": timed_out, "stdout": out, "stderr": err,
        "peak_tree_mb": max((m for _, m in samples), default=0.0),
        "rss_timeline": [(round(t, 1), round(m)) for t, m in samples[::step]],
    }  # fmt: skip

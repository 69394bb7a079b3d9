"""Fault injection at a chosen system call: a real refstore command run under strace, stopped
(SIGSTOP) or killed (SIGKILL) on entering its Nth call of a syscall. On local disk Lance commits
a version by ``linkat`` of its manifest (put-if-not-exists) and deletes files with ``unlink``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None, reason="strace is not installed (Debian: apt-get install strace)")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "refstore.cli.app", *args]


def _under_strace(
    syscall: str, action: str, when: int | str, args: tuple[str, ...], path: str | None = None, log: str = "/dev/null"
) -> list[str]:
    assert STRACE is not None
    only = ["-P", path] if path else []
    return [STRACE, "-f", "-qq", "-o", log, *only, "-e", f"trace={syscall}",
            "-e", f"inject={syscall}:signal={action}:when={when}", *_cli(*args)]  # fmt: skip


def killed_at(syscall: str, when: int | str, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``refstore ARGS`` and SIGKILL it on entering its ``when``-th ``syscall`` (``"1+"``
    with ``path``: the first on that path): that call never happens."""
    cmd = _under_strace(syscall, "KILL", when, args, path)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


class Paused:
    """``refstore ARGS`` stopped (SIGSTOP) after each of its ``syscall`` calls on ``path`` (the
    signal is delivered as the call returns): ``step()`` lets it run to the next, ``resume()`` to
    the end, ``kill()`` ends it there."""

    def __init__(self, syscall: str, path: str, *args: str) -> None:
        self.syscall = syscall
        fd, self.log = tempfile.mkstemp(prefix="strace-", suffix=".log")
        os.close(fd)
        self.proc = subprocess.Popen(_under_strace(syscall, "STOP", "1+", args, path, self.log),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        self.pid = self._tracee()
        self.calls = 0
        self.stopped = self._wait_stopped()

    def _tracee(self, timeout: float = 60) -> int:
        """strace's child running the command (strace forks short-lived probes first)."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                for pid in children.read_text().split():
                    if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == os.fsencode(sys.executable):
                        return int(pid)
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise AssertionError(f"no traced process ({self.proc.communicate()})")

    def _wait_stopped(self, timeout: float = 120) -> bool:
        """Wait for the next call to be logged and every thread to be stopped; False if the
        command finished instead."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            calls = Path(self.log).read_text(errors="replace").count(f"{self.syscall}(")
            try:
                states = {(t / "stat").read_text().rsplit(")", 1)[1].split()[0]
                          for t in Path(f"/proc/{self.pid}/task").iterdir()}  # fmt: skip
            except (OSError, IndexError):
                states = set()
            if calls > self.calls and states and states <= {"t", "T"}:
                self.calls = calls
                return True
            time.sleep(0.02)
        raise AssertionError(f"the command did not stop at its next {self.syscall}")

    def step(self) -> bool:
        """Continue to the next call (True) or to the end (False)."""
        os.kill(self.pid, signal.SIGCONT)
        self.stopped = self._wait_stopped()
        return self.stopped

    def resume(self) -> subprocess.CompletedProcess[str]:
        while self.stopped:
            self.step()
        return self._done()

    def kill(self) -> subprocess.CompletedProcess[str]:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        return self._done()

    def _done(self) -> subprocess.CompletedProcess[str]:
        out, err = self.proc.communicate(timeout=300)
        Path(self.log).unlink(missing_ok=True)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)


def manifest(col: str, version: int) -> str:
    """The path Lance (V2 manifest naming) writes version ``version``'s manifest to."""
    return f"{col}/_versions/{(1 << 64) - 1 - version:020d}.manifest"


def pause_before_linking(version: int, col: str, *args: str) -> Paused:
    """``refstore -C COL ARGS`` stopped when its manifest of ``version`` is written to a temporary
    file (``openat(O_EXCL)``), before Lance links it into place (``linkat``)."""
    paused = Paused("openat", manifest(col, version) + "#1", "-C", col, *args)
    assert paused.stopped, "finished without writing that version's manifest"
    return paused


_MEASURED = (
    "import resource, subprocess, sys, time; t = time.monotonic(); "
    "r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120); "
    "sys.stderr.write(r.stderr); sys.stdout.write(r.stdout); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.monotonic() - t, r.returncode, "
    "file=sys.stderr)"
)


def measured(*args: str, cwd: str | None = None) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """``refstore ARGS`` in its own process: (result, peak resident memory in MiB, seconds). A
    wrapper process runs it, so the peak is the command's alone (``RUSAGE_CHILDREN``)."""
    r = subprocess.run([sys.executable, "-c", _MEASURED, *_cli(*args)], capture_output=True, text=True,
                       timeout=300, cwd=cwd)  # fmt: skip
    lines = r.stderr.rstrip("\n").split("\n")
    peak_kib, seconds, code = lines[-1].split()
    err = "\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else "")
    return subprocess.CompletedProcess(r.args, int(code), r.stdout, err), int(peak_kib) / 1024, float(seconds)

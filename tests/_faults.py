"""Fault injection at a chosen system call: a real refstore command run under strace, stopped
(SIGSTOP) or killed (SIGKILL) on entering its Nth call of a syscall. On local disk Lance commits
a version by ``linkat`` of its manifest (put-if-not-exists) and deletes files with ``unlink``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None, reason="strace is not installed (Debian: apt-get install strace)")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "refstore.cli.app", *args]


def _under_strace(
    syscall: str, action: str, when: int | str, args: tuple[str, ...], path: str | None = None
) -> list[str]:
    assert STRACE is not None
    only = ["-P", path] if path else []
    return [STRACE, "-f", "-qq", "-o", "/dev/null", *only, "-e", f"trace={syscall}",
            "-e", f"inject={syscall}:signal={action}:when={when}", *_cli(*args)]  # fmt: skip


def killed_at(syscall: str, when: int | str, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``refstore ARGS`` and SIGKILL it on its ``when``-th ``syscall`` (on ``path`` if given;
    ``"1+"``: the first on that path). The signal is delivered as the call returns; a KILL
    injected into ``unlink`` stops the process before the file is gone (checked by the tests)."""
    cmd = _under_strace(syscall, "KILL", when, args, path)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


class Paused:
    """``refstore ARGS`` stopped after its ``when``-th ``syscall`` (on ``path`` if given) until
    ``resume()``. An injected signal is delivered when the call returns."""

    def __init__(self, syscall: str, *args: str, when: int | str = 1, path: str | None = None,
                 created: Path | None = None) -> None:  # fmt: skip
        self.proc = subprocess.Popen(_under_strace(syscall, "STOP", when, args, path), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)  # fmt: skip
        self.pid = self._tracee()
        self._wait_stopped(created)

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

    def _wait_stopped(self, created: Path | None, timeout: float = 120) -> None:
        """Every thread in a stop (``t``/``T``) for 0.3 s on end (strace stops each thread briefly
        at every system call), after ``created`` appeared, if given."""
        end = time.monotonic() + timeout
        since: float | None = None
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"finished before stopping: {self.proc.communicate()}")
            try:
                states = {(Path(t) / "stat").read_text().rsplit(")", 1)[1].split()[0]
                          for t in Path(f"/proc/{self.pid}/task").iterdir()}  # fmt: skip
            except (FileNotFoundError, IndexError, ProcessLookupError):
                states = set()
            if states and states <= {"t", "T"} and (created is None or created.exists()):
                since = since or time.monotonic()
                if time.monotonic() - since > 0.3:
                    return
            else:
                since = None
            time.sleep(0.02)
        raise AssertionError(f"the command did not stop at the chosen system call (threads: {states})")

    def resume(self) -> subprocess.CompletedProcess[str]:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
        out, err = self.proc.communicate(timeout=300)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)


def manifest(col: str, version: int) -> str:
    """The path Lance (V2 manifest naming) writes version ``version``'s manifest to."""
    return f"{col}/_versions/{(1 << 64) - 1 - version:020d}.manifest"


def pause_before_linking(version: int, col: str, *args: str) -> Paused:
    """``refstore -C COL ARGS`` stopped when its manifest of ``version`` is written to a temporary
    file (``openat(O_EXCL)``), before Lance links it into place (``linkat``)."""
    temp = manifest(col, version) + "#1"
    return Paused("openat", "-C", col, *args, when="1+", path=temp, created=Path(temp))

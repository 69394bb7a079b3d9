"""Run the command line: ``run`` in a real subprocess, ``invoke`` in this process.

``invoke`` goes through the same entry point (``refstore.cli.app.main``: the exit code of a
``RefstoreError``, its one line on stderr, warnings shown as the command shows them) without an
interpreter start (~1 s each), and returns the same ``CompletedProcess``. An exception that
escapes ``main`` becomes exit 1 with its traceback on stderr, as in a real process. Keep ``run``
where the process itself is under test: signals, strace, what the interpreter prints, imports
of a fresh interpreter, the environment a child inherits.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

__all__ = ["invoke", "run"]


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "refstore.cli.app", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def invoke(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    from typer.testing import CliRunner

    from refstore.cli.app import main

    argv, here = sys.argv, os.getcwd()
    code = 0
    with contextlib.ExitStack() as stack:
        # what native code (HDF5, Rust logs) and child processes write to the descriptors
        native = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(2)]
        out, err, _ = stack.enter_context(CliRunner().isolation(env=env))
        stack.enter_context(warnings.catch_warnings())
        saved = [os.dup(1), os.dup(2)]
        os.dup2(native[0].fileno(), 1)
        os.dup2(native[1].fileno(), 2)
        sys.argv = ["refstore", *args]
        try:
            if cwd is not None:
                os.chdir(cwd)
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except Exception:
            traceback.print_exc()
            code = 1
        finally:
            sys.argv = argv
            os.chdir(here)
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in zip((1, 2), saved, strict=True):
                os.dup2(old, fd)
                os.close(old)
        texts = []
        for captured, f in zip((out, err), native, strict=True):
            f.seek(0)
            texts.append(captured.getvalue().decode() + f.read().decode(errors="backslashreplace"))
    return subprocess.CompletedProcess(["refstore", *args], code, texts[0], texts[1])

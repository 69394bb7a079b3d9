"""A real S3-compatible server on loopback for the tests: moto's server mode (``moto_server``).

``s3_server`` (session) starts ``moto_server`` on a free port, waits until it answers, and
stops it at the end; tests that need it skip only when it cannot start. ``s3`` (function)
creates a fresh bucket and sets the standard AWS environment variables for the test, so
refstore, obstore and Lance all find the server the way users configure theirs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["S3", "S3Server", "s3", "s3_server"]

ACCESS_KEY = "refstore-test-access"
SECRET_KEY = "refstore-test-SECRET-d41d8cd98f00b204"  # grep target: must never appear in any output
REGION = "us-east-1"


@dataclass(frozen=True, slots=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ALLOW_HTTP": "true",
        }


@dataclass(frozen=True, slots=True)
class S3:
    """One bucket on the server, with the environment set for the current test."""

    server: S3Server
    bucket: str

    @property
    def secret(self) -> str:
        return SECRET_KEY

    def url(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}"

    def store(self) -> object:
        from obstore.store import S3Store

        return S3Store(self.bucket, config={**_lower(self.server.env()), "virtual_hosted_style_request": "false"})

    def put(self, key: str, data: bytes | Path) -> str:
        import obstore

        body = data.read_bytes() if isinstance(data, Path) else data
        obstore.put(self.store(), key, body)  # type: ignore[arg-type]
        return self.url(key)

    def put_public(self, key: str, data: Path) -> str:
        """An object anyone may read (public-read ACL, set with boto3, moto's own dependency):
        its plain HTTP URL, path-style."""
        import boto3

        env = self.server.env()
        client = boto3.client(
            "s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=REGION,
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
        )  # fmt: skip
        client.put_object(Bucket=self.bucket, Key=key, Body=data.read_bytes(), ACL="public-read")
        return f"{self.server.endpoint}/{self.bucket}/{key}"

    def upload(self, folder: Path, prefix: str) -> list[str]:
        """Every file under ``folder`` to ``prefix`` (same relative names); their URLs, sorted."""
        out = []
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                out.append(self.put(prefix.rstrip("/") + "/" + p.relative_to(folder).as_posix(), p))
        return out

    def keys(self, prefix: str = "") -> list[str]:
        import obstore

        found: list[str] = []
        for batch in obstore.list(self.store(), prefix=prefix or None):  # type: ignore[arg-type]
            found.extend(str(m["path"]) for m in batch)
        return sorted(found)

    def get(self, key: str) -> bytes:
        import obstore

        return bytes(obstore.get(self.store(), key).bytes())  # type: ignore[arg-type]


def _lower(env: dict[str, str]) -> dict[str, str]:
    return {
        "endpoint": env["AWS_ENDPOINT_URL"],
        "region": env["AWS_REGION"],
        "access_key_id": env["AWS_ACCESS_KEY_ID"],
        "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        "allow_http": env["AWS_ALLOW_HTTP"],
    }


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _moto_command() -> list[str] | None:
    exe = Path(sys.executable).with_name("moto_server")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("moto_server")
    return [found] if found else None


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    cmd = _moto_command()
    if cmd is None:
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [*cmd, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.skip(f"moto_server exited at start (code {proc.returncode})")
            try:
                with urllib.request.urlopen(endpoint + "/moto-api/", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.skip("moto_server did not answer within 30 s")
                time.sleep(0.1)
        yield S3Server(endpoint)
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3:
    """A fresh bucket, and the AWS environment pointing at the loopback server."""
    import obstore

    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(k, raising=False)
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    req = urllib.request.Request(f"{s3_server.endpoint}/{bucket}", method="PUT")
    with urllib.request.urlopen(req, timeout=10):
        pass
    s = S3(s3_server, bucket)
    obstore.put(s.store(), ".probe", b"")  # type: ignore[arg-type]
    obstore.delete(s.store(), ".probe")  # type: ignore[arg-type]
    return s

"""A real S3-compatible server on loopback for the tests: moto's server mode (``moto_server``).

``s3_server`` (session) starts ``moto_server`` on a free port, waits until it answers, and
stops it at the end; tests that need it skip only when it cannot start. ``s3`` (function)
creates a fresh bucket and sets the standard AWS environment variables for the test, so
refstore, obstore and Lance all find the server the way users configure theirs.
"""

from __future__ import annotations

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
        from refstore.fixtures.s3server import s3_env

        return s3_env(self.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION)


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


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    from refstore.fixtures.s3server import moto_s3

    with moto_s3() as endpoint:
        if endpoint is None:
            pytest.skip("moto_server is not installed or did not start (pip install 'moto[server]')")
        yield S3Server(endpoint)


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3:
    """A fresh bucket, and the AWS environment pointing at the loopback server."""
    import obstore

    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(k, raising=False)
    from refstore.fixtures.s3server import create_bucket

    bucket = f"t-{uuid.uuid4().hex[:12]}"
    create_bucket(s3_server.endpoint, bucket)
    s = S3(s3_server, bucket)
    obstore.put(s.store(), ".probe", b"")  # type: ignore[arg-type]
    obstore.delete(s.store(), ".probe")  # type: ignore[arg-type]
    return s

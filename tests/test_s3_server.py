"""The loopback S3 server the object-storage tests run against."""

from __future__ import annotations

import os

from ._s3 import S3


def test_server_takes_objects_and_sets_the_environment(s3: S3) -> None:
    url = s3.put("a/b.bin", b"0123456789")
    assert url == f"s3://{s3.bucket}/a/b.bin"
    assert s3.keys("a/") == ["a/b.bin"]
    assert s3.get("a/b.bin") == b"0123456789"
    assert os.environ["AWS_ENDPOINT_URL"] == s3.server.endpoint
    assert os.environ["AWS_ALLOW_HTTP"] == "true"
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == s3.secret


def test_each_test_gets_its_own_bucket(s3: S3) -> None:
    assert s3.keys() == []

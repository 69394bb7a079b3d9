"""Published forms where users read them: over HTTP (a loopback server with byte ranges) and S3
(the loopback moto server), opened with exactly the lines the README shows.

One collection of a 2-day OISST-like series is scanned from a folder that is deleted once the
forms are written: every chunk byte a reader gets must come over the network, from the copies of
the sources published beside the forms (remap rules: scanned folder -> public URL). The S3 forms
are written by the command line (`refstore emit`, whose stderr must be empty: no third-party log
lines), the HTTP ones by the library. Expected values: xarray (engine netcdf4) over the
original files; the VRT's translation is compared with them raw (no masking or scaling).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from ._cli import run
from ._http import RangeServer, range_server
from ._oracle import assert_same_dataset, xr_series
from .readers.gdal import mdim_tool

if TYPE_CHECKING:
    from collections.abc import Iterator

from ._s3 import S3Server

README = Path(__file__).resolve().parent.parent / "README.md"
TAG = "release-2026-10"  # the tag the README's Icechunk line opens
HTTP_HOST = "https://data.example.org/"  # the README's placeholders, swapped for the loopback servers
S3_BUCKET = "bucket"


def readme_blocks() -> dict[str, str]:
    """The fenced block after each ``<!-- reader: FORM -->`` marker of the README."""
    text = README.read_text()
    found = re.findall(r"<!-- reader: ([\w-]+) -->\n```\w*\n(.*?)```", text, flags=re.S)
    return dict(found)


@dataclass(frozen=True)
class Published:
    files: list[Path]  # the sources as published (byte-identical to the scanned ones, deleted since)
    http: RangeServer
    bucket: str
    env: dict[str, str]
    stderr: dict[str, str]  # form -> stderr of the `refstore emit` that wrote it


def localize(code: str, transport: str, pub: Published) -> str:
    """The README's lines with its placeholders pointing at the loopback servers (``http`` or
    ``s3``); a kerchunk block written for one transport is also run over the other."""
    if transport == "http":
        swaps = [(HTTP_HOST, pub.http.url), (f"s3://{S3_BUCKET}/", pub.http.url),
                 ('"remote_protocol": "https"', '"remote_protocol": "http"'),
                 ('"remote_protocol": "s3"', '"remote_protocol": "http"')]  # fmt: skip
    else:
        b = pub.bucket
        swaps = [(HTTP_HOST, f"s3://{b}/"), (f"s3://{S3_BUCKET}/", f"s3://{b}/"),
                 (f"/vsis3/{S3_BUCKET}/", f"/vsis3/{b}/"), (f'bucket="{S3_BUCKET}"', f'bucket="{b}"'),
                 ('"remote_protocol": "https"', '"remote_protocol": "s3"')]  # fmt: skip
    for a, b in swaps:
        code = code.replace(a, b)
    return code


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Iterator[Published]:
    import refstore
    from refstore.emit import emit
    from refstore.emit.stac import catalog
    from refstore.fixtures.oisst import write_series
    from refstore.fixtures.s3server import create_bucket
    from refstore.table import create_tag
    from refstore.table.remap import add_rule

    from ._s3 import S3

    root = tmp_path_factory.mktemp("published")
    scanned = write_series(root / "scanned", 2)
    www = root / "www"
    (www / "pub" / "data").mkdir(parents=True)
    files = [Path(shutil.copy2(p, www / "pub" / "data" / p.name)) for p in scanned]

    bucket = "pub-" + os.urandom(4).hex()
    env = {**s3_server.env(), "AWS_S3_ENDPOINT": s3_server.endpoint.split("//", 1)[1], "AWS_HTTPS": "NO",
           "AWS_VIRTUAL_HOSTING": "FALSE"}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT", "AWS_DEFAULT_REGION"):
            mp.delenv(k, raising=False)
        create_bucket(s3_server.endpoint, bucket)
        s3 = S3(s3_server, bucket)
        s3.upload(www / "pub" / "data", "pub/data")

        col = str(root / "col")
        refstore.init(col)
        refstore.scan(col, [str(p) for p in scanned], concat_dim="time", timeout=None)  # in this process
        prefix = str(root / "scanned") + "/"
        add_rule(refstore.Collection.open(col), prefix, f"s3://{bucket}/pub/data/")
        create_tag(refstore.Collection.open(col), TAG, None)
        # the S3 forms; the two whose libraries log (Icechunk, pandas/pyarrow) through the command
        # line users run: nothing on stderr when it succeeds
        s3_out = root / "s3-out"
        s3_out.mkdir()
        stderr = {}
        for fmt, name in (("icechunk", "oisst.icechunk"), ("kerchunk-parquet", "oisst.parq")):
            r = run("-C", col, "emit", fmt, str(s3_out / name), "--as-of", TAG)
            assert r.returncode == 0, r.stderr
            stderr[fmt] = r.stderr
        for fmt, name in (("kerchunk-json", "oisst.json"), ("vrt", "oisst.vrt")):
            emit(refstore.Collection.open(col), fmt, str(s3_out / name), as_of=TAG)
        s3.upload(s3_out, "pub")

        with range_server(www) as http:
            add_rule(refstore.Collection.open(col), prefix, http.url + "pub/data/")
            for fmt, name in (("kerchunk-json", "oisst.json"), ("kerchunk-parquet", "oisst.parq"),
                              ("vrt", "oisst.vrt")):  # fmt: skip
                emit(refstore.Collection.open(col), fmt, str(www / "pub" / name))
            # a STAC entry published beside them, its assets at their public URLs
            assets = {"kerchunk-json": http.url + "pub/oisst.json", "kerchunk-parquet": http.url + "pub/oisst.parq"}
            catalog(refstore.Collection.open(col), str(www / "pub" / "oisst.stac.json"), assets=assets)
            shutil.rmtree(root / "scanned")  # from here on, chunk bytes come over the network only
            yield Published(files, http, bucket, env, stderr)


@pytest.fixture(scope="module")
def oracle(published: Published) -> Any:
    return xr_series(published.files).load()


def _exec(code: str) -> Any:
    """Run a README block as a user would (its own namespace); its ``ds``, loaded."""
    ns: dict[str, Any] = {}
    with warnings.catch_warnings():
        # pandas 3 deprecates fastparquet, fsspec's default for the Parquet form (design/emit.md)
        warnings.filterwarnings("ignore", message=r"The 'fastparquet' engine is deprecated")
        exec(compile(code, "README.md", "exec"), ns)
        return ns["ds"].load()


def test_readme_has_the_lines_for_every_network_form() -> None:
    blocks = readme_blocks()
    assert set(blocks) == {"kerchunk-json", "kerchunk-parquet", "icechunk", "vrt"}
    for form, code in blocks.items():
        assert 2 <= len(code.strip().splitlines()) <= 3, form


@pytest.mark.parametrize("transport", ["http", "s3"])
@pytest.mark.parametrize("form", ["kerchunk-json", "kerchunk-parquet"])
def test_kerchunk_forms_over_the_network_equal_the_files(published: Published, oracle: Any, form: str,
                                                         transport: str) -> None:  # fmt: skip
    code = localize(readme_blocks()[form], transport, published)
    assert HTTP_HOST not in code and f"s3://{S3_BUCKET}/" not in code
    before = len(published.http.requests)
    ds = _exec(code)
    assert assert_same_dataset(ds, oracle, f"{form} over {transport}") == len(oracle.variables)
    fetched = published.http.requests[before:]
    data = [p for m, p, r in fetched if m == "GET" and r and p.startswith("/pub/data/")]
    if transport == "http":  # chunks were fetched by range from the published sources
        assert {p.rsplit("/", 1)[1] for p in data} == {f.name for f in published.files}
    else:  # nothing from the HTTP server: the references name the S3 copies
        assert fetched == []


def test_stac_assets_opened_as_their_keys_say_over_http(published: Published, oracle: Any) -> None:
    """The catalog entry fetched from the server, each kerchunk asset opened with its own
    ``xarray:open_kwargs`` and ``xarray:storage_options`` (xpystac's convention)."""
    import pystac
    import xarray as xr

    coll = pystac.Collection.from_file(published.http.url + "pub/oisst.stac.json")
    for form in ("kerchunk-json", "kerchunk-parquet"):
        a = coll.assets[form]
        before = len(published.http.requests)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"The 'fastparquet' engine is deprecated")
            so = {"fo": a.href, **a.extra_fields["xarray:storage_options"]}
            ds = xr.open_dataset("reference://", storage_options=so, **a.extra_fields["xarray:open_kwargs"]).load()
        assert assert_same_dataset(ds, oracle, f"STAC {form}") == len(oracle.variables)
        fetched = published.http.requests[before:]
        assert {p.rsplit("/", 1)[1] for m, p, r in fetched if r and p.startswith("/pub/data/")} == {
            f.name for f in published.files
        }


def test_icechunk_on_s3_equals_the_files(published: Published, oracle: Any) -> None:
    code = localize(readme_blocks()["icechunk"], "s3", published)
    from refstore.zarr_meta import register_codecs

    register_codecs()  # imagecodecs ids; the fixture's codecs are numcodecs' own: a no-op for it
    ds = _exec(code)
    assert assert_same_dataset(ds, oracle, "icechunk over s3") == len(oracle.variables)


def test_vrt_through_vsicurl_and_vsis3(published: Published, tmp_path: Path) -> None:
    lines = readme_blocks()["vrt"].strip().splitlines()
    raw = xr_series(published.files, mask_and_scale=False, decode_times=False).load()
    for line in lines:
        transport = "s3" if "/vsis3/" in line else "http"
        argv = shlex.split(localize(line, transport, published))
        before = len(published.http.requests)
        # GDAL 3.13 (gdal-wheel's MultiDimInfo/MultiDimTranslate, what the programs call): the VRT
        # declares the int8 mask Int8, which needs GDAL >= 3.7 (Debian's gdal-bin is 3.6)
        stdout = mdim_tool(argv, env={**os.environ, **published.env}, cwd=tmp_path)
        fetched = published.http.requests[before:]
        ranged = [p for m, p, rng in fetched if rng and p.startswith("/pub/data/")]
        if argv[0] == "gdalmdiminfo":  # metadata only: the VRT itself, no source read
            assert [p for m, p, _ in fetched if m == "GET"] == ["/pub/oisst.vrt"], line
            info = json.loads(stdout)
            assert set(info["arrays"]) >= {"sst", "anom", "err", "ice", "mask", "time", "lat", "lon", "zlev"}
            continue
        assert bool(ranged) == (transport == "http"), line  # /vsis3/: nothing from the HTTP server
        import xarray as xr

        got = xr.open_dataset(tmp_path / argv[-1], engine="netcdf4", mask_and_scale=False, decode_times=False)
        for name, var in raw.variables.items():
            g = got[name]
            assert g.dims == var.dims, name
            want_dtype = var.dtype.newbyteorder("=")  # int8 stays int8 (GDAL >= 3.7)
            assert g.dtype == want_dtype, f"{line}: {name} {g.dtype}"
            np.testing.assert_array_equal(g.values, var.values.astype(want_dtype), err_msg=f"{line}: {name}")
        got.close()


def test_emit_on_the_command_line_prints_nothing_on_stderr(published: Published) -> None:
    """Icechunk's "LocalFileSystem storage is not safe for concurrent commits" and other library
    log lines are kept off a successful command's stderr."""
    assert published.stderr == dict.fromkeys(published.stderr, "")

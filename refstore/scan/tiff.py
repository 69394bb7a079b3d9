"""GeoTIFF / COG scanner (tifffile parses the IFDs; no pixel is decoded while scanning).

Every IFD is an array, named (see ``ifd_names``):
``image`` (the full-resolution image; ``image_1``, ``image_2``... when a file holds several),
``overview_1``, ``overview_2``... (reduced-resolution IFDs in file order), ``mask`` and
``mask_overview_N`` (GDAL internal masks). Shapes are tifffile's: ``(y, x)``, ``(y, x, samples)``
for chunky pixels, ``(samples, y, x)`` for planar-separate ones. Tiles are chunks (edge tiles are
stored full size); strips are chunks of RowsPerStrip rows (the last one may be short). GDAL's COG
ghost leader/trailer bytes lie outside TileOffsets/TileByteCounts, so they are never in a chunk.
With a concat dimension every array gets a leading length-1 dimension of that name, and an
inline coordinate array of the same name (seconds since 1970-01-01) holds the source's date.
"""

from __future__ import annotations

import base64
import logging
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .._keys import MAX_DIMS
from .._values import encode_attr, encode_fill
from ..errors import BadInputError, ScanError
from ._sources import open_source
from ._tiff_guard import check_tiff_counts
from ._types import ArrayMeta, ScanResult, SourceInfo

__all__ = ["TiffScanner", "ifd_names", "time_from_name"]

_COMPRESSION = {1: None, 5: "lzw", 7: "jpeg", 8: "zlib", 32946: "zlib", 50000: "zstd", 32773: "packbits", 34887: "lerc"}
_TIME_CODES = {"%Y": r"\d{4}", "%m": r"\d{2}", "%d": r"\d{2}", "%H": r"\d{2}", "%M": r"\d{2}", "%S": r"\d{2}",
               "%j": r"\d{3}", "%y": r"\d{2}"}  # fmt: skip


def time_from_name(pattern: str, name: str) -> datetime | None:
    """The date a strptime-style ``pattern`` (e.g. ``D%Y%m%d``) finds in a file name (every
    match is tried, first to last). A pattern without a date code is refused."""
    if not any(code in pattern for code in ("%Y", "%y", "%j", "%m", "%d")):
        raise BadInputError(f"--time-from-name {pattern!r}: the pattern has no date code such as %Y, %m, %d")
    regex = ""
    i = 0
    while i < len(pattern):
        code = pattern[i : i + 2]
        if code in _TIME_CODES:
            regex += _TIME_CODES[code]
            i += 2
        else:
            regex += re.escape(pattern[i])
            i += 1
    for start in range(len(name)):
        m = re.compile(regex).match(name, start)
        if m is None:
            continue
        try:
            return datetime.strptime(m.group(0), pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def ifd_names(pages: list[Any]) -> list[str]:
    """Array names for a file's IFDs, in file order (see the module docstring)."""
    full = [p for p in pages if not (int(p.subfiletype) & 1) and not (int(p.subfiletype) & 4)]
    names: list[str] = []
    n_full = n_over = n_mask_over = n_mask = 0
    for p in pages:
        st = int(p.subfiletype)
        if st & 4:
            if st & 1:
                n_mask_over += 1
                names.append(f"mask_overview_{n_mask_over}")
            else:
                names.append("mask" if n_mask == 0 else f"mask_{n_mask}")
                n_mask += 1
        elif st & 1:
            n_over += 1
            names.append(f"overview_{n_over}")
        else:
            names.append("image" if len(full) == 1 else f"image_{n_full + 1}")
            n_full += 1
    return names


def _georef(page: Any, full_page: Any) -> dict[str, Any]:
    """Affine transform (GDAL order: x0, dx, rx, y0, ry, dy), CRS and nodata of a page."""
    out: dict[str, Any] = {}
    tags = (
        page.tags if page.tags.get("ModelPixelScaleTag") or page.tags.get("ModelTransformationTag") else full_page.tags
    )
    scale = tags.get("ModelPixelScaleTag")
    tie = tags.get("ModelTiepointTag")
    trans = tags.get("ModelTransformationTag")
    transform: list[float] | None = None
    if trans is not None and len(trans.value) >= 16:
        m = [float(v) for v in trans.value]
        transform = [m[3], m[0], m[1], m[7], m[4], m[5]]
    elif scale is not None and tie is not None and len(tie.value) >= 6:
        sx, sy = float(scale.value[0]), float(scale.value[1])
        i, j, x, y = (float(tie.value[k]) for k in (0, 1, 3, 4))
        transform = [x - i * sx, sx, 0.0, y + j * sy, 0.0, -sy]
    geokeys = full_page.geotiff_tags or {}
    if transform is not None:
        if int(geokeys.get("GTRasterTypeGeoKey", 1) or 1) == 2:  # PixelIsPoint: GDAL shifts half a pixel
            transform[0] -= 0.5 * transform[1] + 0.5 * transform[2]
            transform[3] -= 0.5 * transform[4] + 0.5 * transform[5]
        if page is not full_page:  # overviews: same extent, coarser pixels
            fy = full_page.imagelength / page.imagelength
            fx = full_page.imagewidth / page.imagewidth
            transform[1] *= fx
            transform[2] *= fy
            transform[4] *= fx
            transform[5] *= fy
        out["transform"] = np.array(transform, dtype="<f8")
    code = _epsg(geokeys)
    if code is not None:
        out["crs"] = f"EPSG:{code}"
    else:
        citation = geokeys.get("GTCitationGeoKey") or geokeys.get("GeogCitationGeoKey")
        if isinstance(citation, str) and citation:
            out["crs_citation"] = citation
        if any(k.endswith("GeoKey") for k in geokeys):
            out["crs_geokeys"] = _geokeys_text(geokeys)
    nodata = tags.get("GDAL_NODATA")
    if nodata is not None:
        out["nodata_text"] = str(nodata.value).strip().strip("\x00")
    return out


def _key_int(value: Any) -> int | None:
    value = int(value.value) if value is not None and hasattr(value, "value") else value
    return value if isinstance(value, int) else None


def _epsg(geokeys: dict[str, Any]) -> int | None:
    """The EPSG code of the CRS: ProjectedCSTypeGeoKey for a projected model (a user-defined one,
    32767, has none: its GeographicTypeGeoKey is only the base datum), else GeographicTypeGeoKey.
    Without GTModelTypeGeoKey, as GDAL (libgeotiff) reads it: projected when a
    ProjectedCSTypeGeoKey is there, else no CRS (a GeographicTypeGeoKey alone is not taken)."""
    model = _key_int(geokeys.get("GTModelTypeGeoKey"))
    if model is None:
        if "ProjectedCSTypeGeoKey" not in geokeys:
            return None
        model = 1
    code = _key_int(geokeys.get("ProjectedCSTypeGeoKey" if model == 1 else "GeographicTypeGeoKey"))
    return code if code is not None and 1024 <= code < 32767 else None


def _geokeys_text(geokeys: dict[str, Any]) -> str:
    """A CRS without an EPSG code, as its GeoKeys (names and values, sorted; raster type left out:
    it is in the transform): two files have the same such CRS when these texts are equal."""
    items = []
    for k in sorted(geokeys):
        if not k.endswith("GeoKey") or k == "GTRasterTypeGeoKey":
            continue
        v = geokeys[k]
        v = int(v.value) if hasattr(v, "value") else v
        items.append(f"{k}={v!r}")
    return ";".join(items)


def _nodata(text: str | None, dtype: np.dtype[Any]) -> Any:
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    if dtype.kind in "iu":
        if math.isnan(v) or v != int(v) or not np.iinfo(dtype).min <= v <= np.iinfo(dtype).max:
            return None
        return dtype.type(int(v))
    return np.asarray(v).astype(dtype)[()]  # float32 nodata like -3.4028230607370965e+38 rounds, as GDAL does


def _codecs(page: Any, chunk: tuple[int, ...]) -> tuple[tuple[dict[str, Any], ...], str | None]:
    comp = int(page.compression)
    if comp not in _COMPRESSION:
        return (), f"TIFF compression {page.compression.name} ({comp}) has no decoder here"
    codecs: list[dict[str, Any]] = []
    if page.bitspersample == 1:
        codecs.append({"id": "bitunpack"})
    elif page.bitspersample not in (8, 16, 32, 64):
        return (), f"{page.bitspersample}-bit samples are not supported"
    pred = int(page.predictor)
    axis = -2 if (len(chunk) == 3 and int(page.planarconfig) == 1) else -1  # x axis of the chunk
    if pred == 2:
        codecs.append({"id": "delta", "axis": axis})
    elif pred == 3:
        codecs.append({"id": "floatpred", "axis": axis})
    elif pred != 1:
        return (), f"TIFF predictor {pred} is not supported"
    name = _COMPRESSION[comp]
    if name == "jpeg":
        from tifffile.tifffile import jpeg_decode_colorspace

        cs, ocs = jpeg_decode_colorspace(page.photometric, page.planarconfig, page.extrasamples, page.is_jfif)
        cfg: dict[str, Any] = {"id": "jpeg", "colorspace": cs, "outcolorspace": ocs}
        if page.jpegtables:
            cfg["tables"] = base64.b64encode(bytes(page.jpegtables)).decode("ascii")
        codecs.append(cfg)
    elif name is not None:
        codecs.append({"id": name})
    return tuple(codecs), None


def _quiet_tifffile() -> None:
    """tifffile logs what it cannot parse (``<TiffTag.fromfile> raised ...``) on its own logger;
    the scan reports the file's problem itself, so none of it reaches stderr."""
    log = logging.getLogger("tifffile")
    log.setLevel(logging.CRITICAL + 1)
    log.propagate = False


@dataclass(frozen=True, slots=True)
class TiffScanner:
    """Scan one TIFF/GeoTIFF/COG.

    ``concat_dim``: give every array a leading dimension of that name (a series of single-date
    images). ``time_pattern``: strptime-style pattern that finds the date in the file name
    (e.g. ``D%Y%m%d``); without it the TIFF DateTime tag is used.
    """

    concat_dim: str | None = None
    time_pattern: str | None = None

    def __call__(self, location: str) -> ScanResult:
        with open_source(location) as (fh, info):
            return self.scan_file(fh, info)

    def scan_file(self, fh: Any, info: SourceInfo) -> ScanResult:
        """Scan an opened source (a local file or a ranged-read file over a URL)."""
        import tifffile

        location = info.location
        _quiet_tifffile()
        try:
            refused = check_tiff_counts(fh)
            if refused is not None:
                raise ScanError(location, refused)
            fh.seek(0)
            with tifffile.TiffFile(fh, name=location.rsplit("/", 1)[-1]) as tif:
                pages = list(tif.pages)
                if not pages:
                    raise ScanError(location, "TIFF holds no image")
                return self._scan(tif, pages, info)
        except ScanError:
            raise
        except (tifffile.TiffFileError, OSError, ValueError, KeyError, IndexError) as e:
            raise ScanError(location, f"not a readable TIFF: {str(e).splitlines()[0] if str(e) else e}") from None

    def _date(self, location: str, page: Any) -> datetime | None:
        if self.time_pattern:
            return time_from_name(self.time_pattern, Path(location).name)
        tag = page.tags.get("DateTime")
        if tag is None:
            return None
        try:
            return datetime.strptime(str(tag.value).strip(), "%Y:%m:%d %H:%M:%S").replace(tzinfo=UTC)
        except ValueError:
            return None

    def _scan(self, tif: Any, pages: list[Any], info: Any) -> ScanResult:
        from ..scan.hdf5 import _chunk_table, _Chunks

        byteorder = "<" if tif.byteorder == "<" else ">"
        names = ifd_names(pages)
        full_pages = [p for p in pages if not int(p.subfiletype) & 5]
        metas: list[ArrayMeta] = []
        parts: list[_Chunks] = []
        lead = self.concat_dim is not None
        for name, page in zip(names, pages, strict=True):
            full = full_pages[0] if full_pages else page
            dt = np.dtype(page.dtype)
            if dt.itemsize > 1:
                dt = dt.newbyteorder(byteorder)
            shape = tuple(int(s) for s in page.shape)
            spp = int(page.samplesperpixel)
            separate = int(page.planarconfig) == 2 and spp > 1
            rows = (
                int(page.tilelength)
                if page.is_tiled
                else int(min(page.rowsperstrip or page.imagelength, page.imagelength))
            )
            cols = int(page.tilewidth) if page.is_tiled else int(page.imagewidth)
            if separate:
                chunk: tuple[int, ...] = (1, rows, cols)
            elif len(shape) == 3:
                chunk = (rows, cols, spp)
            else:
                chunk = (rows, cols)
            if len(shape) != len(chunk):
                metas.append(
                    self._meta(name, shape, shape, dt, None, {}, reason=f"page shape {shape} is not supported")
                )
                continue
            geo = _georef(page, full)
            nodata_text = geo.pop("nodata_text", None)
            nodata = _nodata(nodata_text, dt)
            attrs = {k: enc for k, v in geo.items() if (enc := encode_attr(v)) is not None}
            if nodata is not None:
                attrs["nodata"] = encode_attr(np.asarray(nodata, dtype=dt.newbyteorder("=")))  # type: ignore[assignment]
                attrs["_FillValue"] = attrs["nodata"]
            codecs, reason = _codecs(page, chunk)
            if reason is None and int(page.sampleformat) == 5:  # tifffile widens these to complex floats
                reason = (f"complex integer samples (TIFF SampleFormat 5, {int(page.bitspersample) // 2}-bit parts) "
                          "have no numpy dtype")  # fmt: skip
            fill = nodata if nodata is not None else np.zeros((), dt)[()]
            if reason is not None:
                metas.append(self._meta(name, shape, chunk, dt, fill, attrs, reason=reason))
                continue
            grid = [math.ceil(s / c) for s, c in zip(shape, chunk, strict=True)]
            offsets = np.asarray(page.dataoffsets, np.int64)
            counts = np.asarray(page.databytecounts, np.int64)
            if len(offsets) != int(np.prod(grid)):
                metas.append(self._meta(name, shape, chunk, dt, fill, attrs,
                                        reason=f"{len(offsets)} segments for a grid of {grid}"))  # fmt: skip
                continue
            keys = np.stack(np.unravel_index(np.arange(len(offsets)), grid), axis=1).astype(np.int64)
            present = (counts > 0) & (offsets > 0)  # GDAL sparse tiles: offset 0, count 0 -> absent
            keys, offsets, counts = keys[present], offsets[present], counts[present]
            if offsets.size and int((offsets + counts).max()) > info.size:
                raise ScanError(info.location, f"IFD {name!r} points past the end of the file (truncated?)")
            # strips cut by the image's end are stored short: test the y axis, before any lead axis
            short = not page.is_tiled and shape[1 if separate else 0] % rows != 0
            sfx = "" if name in ("image", "mask") else "_" + name.removeprefix("mask_")  # sizes never clash
            y, x, b = f"y{sfx}", f"x{sfx}", "band"
            dims = (y, x) if len(shape) == 2 else ((b, y, x) if separate else (y, x, b))
            if lead:
                assert self.concat_dim is not None
                dims, shape, chunk = (self.concat_dim, *dims), (1, *shape), (1, *chunk)
                keys = np.concatenate([np.zeros((len(keys), 1), np.int64), keys], axis=1)
            metas.append(self._meta(name, shape, chunk, dt, fill, attrs, codecs=codecs, dims=dims, short_edge=short))
            parts.append(_Chunks(name, keys, offsets, counts))
        sort_value: float | None = None
        if lead:
            assert self.concat_dim is not None
            when = self._date(info.location, pages[0])
            if when is None:
                how = f"--time-from-name {self.time_pattern!r}" if self.time_pattern else "the TIFF DateTime tag"
                raise ScanError(info.location, f"no date found from {how}")
            sort_value = when.timestamp()
            value = np.array([round(sort_value)], dtype="<i8")
            t_attrs = {
                "units": {"type": "str", "value": "seconds since 1970-01-01 00:00:00"},
                "calendar": {"type": "str", "value": "proleptic_gregorian"},
                "standard_name": {"type": "str", "value": "time"},
            }
            metas.append(
                self._meta(self.concat_dim, (1,), (1,), np.dtype("<i8"), None, t_attrs, dims=(self.concat_dim,))
            )
            parts.append(_Chunks(self.concat_dim, np.zeros((1, 1), np.int64), inline=[value.tobytes()], whole=True))
        return ScanResult(
            source=info,
            arrays=tuple(metas),
            refs=_chunk_table(parts),
            sort_value=sort_value,
            sort_last=sort_value,
            sort_units="seconds since 1970-01-01" if lead else None,
            groups={"": {}},
            format="tiff",
            layout={"ifds": {name: i for i, name in enumerate(names)}},
        )

    @staticmethod
    def _meta(
        name: str,
        shape: tuple[int, ...],
        chunk: tuple[int, ...],
        dt: np.dtype[Any],
        fill: Any,
        attrs: dict[str, Any],
        *,
        codecs: tuple[dict[str, Any], ...] = (),
        dims: tuple[str, ...] | None = None,
        reason: str | None = None,
        short_edge: bool = False,
    ) -> ArrayMeta:
        if reason is None and len(shape) > MAX_DIMS:
            reason = f"{len(shape)} dimensions"
        return ArrayMeta(
            name=name,
            dims=dims or tuple(f"dim_{i}" for i in range(len(shape))),
            shape=shape,
            chunks=chunk,
            dtype=dt.str,
            fill_value=encode_fill(fill, dt) if fill is not None else None,
            codecs=codecs,
            attrs=attrs,
            status="ok" if reason is None else "unsupported",
            reason=reason,
            short_edge=short_edge,
        )

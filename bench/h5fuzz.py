"""Differential campaign: refstore's HDF5 scan (object headers and chunk B-trees read from the
file's bytes, ``scan/_hdf5_layout.py``) against h5py, on random HDF5 files.

``python -m bench.h5fuzz --n 500 --seed 1`` writes random files (h5py low-level calls, and some
netCDF4-python / h5netcdf files): one dataset or many, groups nested deep, libver earliest to
latest (data layout v4 indexes must fall back to HDF5), small B-tree K (multi-level chunk
B-trees), user blocks, ndim 0-5, tiny/edge/oversized chunks, sparse chunks, chunks written raw
with filter masks, every numeric dtype in both byte orders, integers with padding or offset
bits, half floats, bool/enum/compound/fixed/vlen strings/complex/long double, fill values
(none, NaN, +-inf, big-endian, fill time never, allocation early), filters in random order
with random parameters (deflate, shuffle, fletcher32, scaleoffset, nbit, lzf, szip, zstd,
blosc, lz4), resized datasets, datasets deleted and recreated, external storage, virtual
datasets, attribute counts across the dense threshold, creation order tracked, headers grown
with continuation blocks.

Each file is checked three ways (``check``):
1. the scan through the bytes path equals the scan with the header reader switched off (every
   dataset and attribute through HDF5 calls): arrays, groups, chunk table;
2. h5py is the oracle for every dataset: dtype (exact ``dtype.str``), shape, chunk shape, fill
   value bytes, filters (id and parameters), layout, every chunk's (offset in elements, byte
   offset, size, filter mask) from ``chunk_iter`` (and ``get_chunk_info``), the contiguous
   range (``get_offset``, ``get_storage_size``), compact bytes, attributes (names in h5py's
   order, values and dtypes);
3. every referenced chunk (up to ``--chunks`` per array) read with ``os.pread`` and decoded by
   refstore's codec pipeline equals h5py's read of that region, bit for bit; with ``--open``
   every ``K``-th file is also scanned into a collection and read whole through
   ``refstore.open`` against h5py's ``[...]`` (absent chunks: the fill value).

Every third file also gets a twin (``twin``: the same file with its numeric attributes and
values changed in place) checked right after it in the same process, so the scanner's caches
by header content meet files that share header bytes. Files are written and checked in two
spawned processes: a crash (HDF5 on an unusual file) is counted and the run goes on.

A failing file is kept under ``--keep`` (default ``/tmp/h5fuzz-fail``) with its problems; the
run ends with counts per feature and per problem kind. Not part of CI (``tests/test_hdf5_fuzz.py``
runs a fixed-seed subset). ``python -m bench.h5fuzz ../shared/data`` checks existing files the
same way instead.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["check", "generate", "main"]

NUMERIC = [f"{o}{k}{n}" for k in "iu" for n in (1, 2, 4, 8) for o in "<>"] + [
    f"{o}f{n}" for n in (2, 4, 8) for o in "<>"
]
HIDDEN = {
    "CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates",
    "_nc3_strict", "_NCProperties", "_SuperblockVersion", "_IsNetcdf4",
}  # fmt: skip
NC_DIM_ONLY = b"This is a netCDF dimension but not a netCDF variable"
INLINE_MAX = 1 << 20


# ---------------------------------------------------------------------------- generation
class _Gen:
    """One random file's writer; ``features`` collects what it holds (for the run's counts)."""

    def __init__(self, rng: np.random.Generator, path: Path) -> None:
        self.rng = rng
        self.path = path
        self.features: set[str] = set()
        self.libver_latest = False

    def p(self, x: float) -> bool:
        return bool(self.rng.random() < x)

    def choice(self, xs: list[Any]) -> Any:
        return xs[int(self.rng.integers(len(xs)))]

    # -- types
    def dtype_and_tid(self) -> tuple[np.dtype[Any], Any, str]:
        import h5py
        from h5py import h5t

        r = self.rng.random()
        if r < 0.72:
            s = self.choice(NUMERIC)
            return np.dtype(s), None, "numeric"
        kind = self.choice(["bool", "S", "Sspace", "vlen", "enum", "compound", "c8", "int_pad", "int_offset",
                            "f_odd", "longdouble", "int3", "bitfield"])  # fmt: skip
        self.features.add(f"dtype:{kind}")
        if kind == "bool":
            return np.dtype(bool), None, kind
        if kind == "S":
            return np.dtype(f"S{int(self.rng.integers(1, 12))}"), None, kind
        if kind == "Sspace":
            n = int(self.rng.integers(1, 12))
            tid = h5t.C_S1.copy()
            tid.set_size(n)
            tid.set_strpad(h5t.STR_SPACEPAD)
            return np.dtype(f"S{n}"), tid, kind
        if kind == "vlen":
            return h5py.string_dtype(), None, kind
        if kind == "enum":
            return h5py.enum_dtype({"a": 0, "b": 1, "c": 7}, basetype=self.choice(["i1", ">i2", "<u4"])), None, kind
        if kind == "compound":
            return np.dtype([("a", "<i4"), ("b", ">f8")]), None, kind
        if kind == "c8":
            return np.dtype(self.choice(["<c8", ">c16"])), None, kind
        if kind == "longdouble":
            return np.dtype(np.longdouble), None, kind
        if kind == "bitfield":
            tid = self.choice([h5t.STD_B8LE, h5t.STD_B16BE, h5t.STD_B32LE, h5t.STD_B64BE]).copy()
            if self.p(0.5):
                from refstore.fixtures.hdf5_headers import _hdf5_lib

                lib = _hdf5_lib()
                if lib is not None:
                    lib.H5Tset_precision(ctypes.c_int64(tid.id), ctypes.c_size_t(int(self.rng.integers(1, 8))))
            return np.dtype(f"u{tid.get_size()}"), tid, kind
        if kind in ("int_pad", "int_offset", "int3"):
            base = self.choice([h5t.STD_I16LE, h5t.STD_U32BE, h5t.STD_I64LE, h5t.STD_U16LE])
            tid = base.copy()
            size = tid.get_size()
            if kind == "int_pad":
                tid.set_precision(int(self.rng.integers(1, 8 * size)))
            elif kind == "int_offset":
                prec = int(self.rng.integers(1, 8 * size))
                tid.set_precision(prec)
                tid.set_offset(int(self.rng.integers(1, 8 * size - prec + 1)))
            else:
                tid.set_size(3)
                tid.set_precision(24)
            return tid.dtype, tid, kind
        # f_odd: an IEEE float with an unusual bias or layout (precision kept)
        tid = self.choice([h5t.IEEE_F32LE, h5t.IEEE_F64BE]).copy()
        if self.p(0.5):
            tid.set_ebias(tid.get_ebias() + 1)
        else:
            tid.set_norm(h5t.NORM_NONE)
        return tid.dtype, tid, kind

    def value(self, dt: np.dtype[Any]) -> Any:
        """One random value of dt."""
        if dt.kind == "f":
            r = self.rng.random()
            if r < 0.15:
                self.features.add("fill:nan")
                return dt.type(np.nan)
            if r < 0.25:
                return dt.type(self.choice([np.inf, -np.inf, -0.0]))
            return dt.type(self.rng.normal() * 100)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            return dt.type(int(self.rng.integers(max(info.min, -(2**62)), min(info.max, 2**62), endpoint=True)))
        if dt.kind == "b":
            return np.bool_(True)
        if dt.kind == "S":
            return np.array(b"zq", dt)[()]
        if dt.kind == "c":
            return dt.type(complex(1.5, -2))
        return None

    def data(self, dt: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
        n = math.prod(shape)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            lo, hi = (0, 255) if self.p(0.5) else (max(info.min, -(2**62)), min(info.max, 2**62))
            got = self.rng.integers(max(lo, info.min), min(hi, info.max), size=n, endpoint=True)
            return got.astype(dt).reshape(shape)
        if dt.kind == "f":
            a = (self.rng.normal(size=n) * 10).astype(dt)
            if n and self.p(0.2):
                a[self.rng.integers(0, n, size=max(1, n // 10))] = np.nan
            return a.reshape(shape)
        if dt.kind == "b":
            return (self.rng.random(n) < 0.5).reshape(shape)
        if dt.kind == "S":
            words = [b"", b"a", b"bc", b"hello", b"xyzzy-long-word"]
            return np.array([self.choice(words) for _ in range(n)], dtype=dt).reshape(shape)
        if dt.kind == "c":
            return (self.rng.normal(size=n) + 1j * self.rng.normal(size=n)).astype(dt).reshape(shape)
        if dt.names is not None:
            a = np.zeros(n, dt)
            a["a"] = self.rng.integers(-100, 100, n)
            a["b"] = self.rng.normal(size=n)
            return a.reshape(shape)
        if dt.kind == "O":
            return np.array([self.choice(["", "é", "abc", "long string " * 3]) for _ in range(n)],
                            dtype=object).reshape(shape)  # fmt: skip
        return self.rng.integers(0, 2, size=n).astype(dt).reshape(shape)

    def shape(self) -> tuple[int, ...]:
        ndim = self.choice([0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5]) if self.p(0.97) else self.choice([8, 9])
        self.features.add(f"ndim:{ndim}")
        cap = {0: 1, 1: 3000, 2: 60, 3: 16, 4: 8, 5: 6, 8: 2, 9: 2}[ndim]
        dims = []
        for _ in range(ndim):
            if self.p(0.05):
                dims.append(0)
            elif self.p(0.1):
                dims.append(1)
            else:
                dims.append(int(self.rng.integers(1, cap + 1)))
        return tuple(dims)

    # -- attributes
    def attr_value(self) -> Any:
        k = self.choice(["int", "float", "be", "str", "bytes", "strs", "arr", "bool", "empty_str", "big"])
        if k == "int":
            return np.int32(self.rng.integers(-1000, 1000))
        if k == "float":
            return self.choice([np.float64(self.rng.normal()), np.float32(np.nan), np.float64(-np.inf)])
        if k == "be":
            return np.arange(int(self.rng.integers(1, 6)), dtype=self.choice([">i4", ">f8", ">u2"]))
        if k == "str":
            return self.choice(["degrees_north", "é ü", "x" * 200])
        if k == "bytes":
            return np.bytes_(b"fixed text")
        if k == "strs":
            return ["a", "bc", "def"]
        if k == "arr":
            return self.rng.normal(size=int(self.rng.integers(1, 20))).astype(self.choice(["<f4", "<f8", "<i8", "u1"]))
        if k == "bool":
            return np.bool_(True)
        if k == "empty_str":
            return np.bytes_(b"")
        self.features.add("attr:big")
        return np.arange(int(self.rng.integers(500, 3000)), dtype="<f8")

    def attributes(self, obj: Any) -> None:
        r = self.rng.random()
        n = 0 if r < 0.3 else int(self.rng.integers(1, 5)) if r < 0.75 else int(self.rng.integers(6, 12)) \
            if r < 0.92 else int(self.rng.integers(20, 60))  # fmt: skip
        if n >= 8:
            self.features.add("attrs:many")
        for i in range(n):
            name = self.choice([f"a{i}", f"attr_{i:03d}", f"Z{i}", f"é{i}"])
            with contextlib.suppress(Exception):
                obj.attrs[name] = self.attr_value()

    # -- datasets
    def dataset(self, group: Any, name: str) -> None:
        import h5py
        from h5py import h5d, h5p, h5s, h5t, h5z

        rng = self.rng
        dt, tid, dkind = self.dtype_and_tid()
        shape = self.shape()
        null = self.p(0.02)
        maxshape = tuple(None if self.p(0.3) else s for s in shape)
        layout = self.choice(["chunked", "chunked", "chunked", "contiguous", "compact"])
        nbytes = math.prod(shape) * dt.itemsize
        if layout == "compact" and (nbytes > 30_000 or any(m is None for m in maxshape)):
            layout = "contiguous"
        if layout == "contiguous" and any(m is None for m in maxshape):
            layout = "chunked"
        if shape == () and layout == "chunked":
            layout = "contiguous"
        if self.p(0.05) and layout == "contiguous" and shape:
            layout = "external"
        if self.p(0.04) and shape and dt.kind in "iuf":
            layout = "virtual"
        self.features.add(f"layout:{layout}")
        dcpl = h5p.create(h5p.DATASET_CREATE)
        if self.p(0.3):
            flags = h5p.CRT_ORDER_TRACKED | (h5p.CRT_ORDER_INDEXED if self.p(0.5) else 0)
            dcpl.set_attr_creation_order(flags)
            self.features.add("track_order")
        if self.p(0.2):
            mc = int(rng.integers(0, 10))
            dcpl.set_attr_phase_change(mc, max(0, mc - int(rng.integers(0, 3))))
            self.features.add("attr_phase")
        if tid is None:
            tid = h5t.py_create(dt, logical=True)
        if self.p(0.6) and dt.kind in "iufbSc":
            fv = self.value(dt)
            if fv is not None:
                self.features.add("fill:set")
                with contextlib.suppress(Exception):
                    dcpl.set_fill_value(np.array([fv], dtype=dt))
        if self.p(0.1):
            dcpl.set_fill_time(self.choice([h5d.FILL_TIME_NEVER, h5d.FILL_TIME_ALLOC, h5d.FILL_TIME_IFSET]))
            self.features.add("fill_time")
        if self.p(0.1) and layout != "compact":
            dcpl.set_alloc_time(self.choice([h5d.ALLOC_TIME_EARLY, h5d.ALLOC_TIME_INCR, h5d.ALLOC_TIME_LATE]))
            self.features.add("alloc_time")
        if null:
            space = h5s.create(h5s.NULL)
            self.features.add("null_space")
        elif shape == ():
            space = h5s.create(h5s.SCALAR)
        else:
            space = h5s.create_simple(shape, tuple(h5s.UNLIMITED if m is None else m for m in maxshape))
        chunks: tuple[int, ...] | None = None
        filters: list[str] = []
        if layout == "compact":
            dcpl.set_layout(h5d.COMPACT)
        elif layout == "external":
            ext = self.path.with_suffix(f".{name}.raw")
            dcpl.set_external(ext.name, int(rng.integers(0, 64)), h5f_unlimited())
        elif layout == "chunked" and not null:
            chunks = tuple(self._chunk(s) for s in shape)
            dcpl.set_chunk(chunks)
            filters = self._filters(dcpl, dt, chunks)
        elif layout == "virtual":
            src = group.create_dataset(f"{name}_src", data=self.data(dt, shape))
            lay = h5py.VirtualLayout(shape=shape, dtype=dt)
            lay[...] = h5py.VirtualSource(src)
            group.create_virtual_dataset(name, lay, fillvalue=0)
            self.attributes(group[name])
            return
        try:
            dsid = h5d.create(group.id, name.encode(), tid, space, dcpl=dcpl)
        except Exception:
            self.features.add("create_failed")
            return
        ds = h5py.Dataset(dsid)
        del h5z
        if null or 0 in shape:
            self.attributes(ds)
            return
        # writes
        mode = self.choice(["full", "full", "none", "sparse", "direct"] if chunks else ["full", "full", "none"])
        if dkind in ("int_pad", "int_offset", "int3", "f_odd", "bitfield"):
            mode = "full" if mode == "direct" else mode
        self.features.add(f"write:{mode}")
        try:
            if mode == "full":
                ds[...] = self.data(dt, shape)
            elif mode == "sparse" and chunks:
                grid = [math.ceil(s / c) for s, c in zip(shape, chunks, strict=True)]
                total = math.prod(grid)
                for flat in rng.choice(total, size=min(total, int(rng.integers(1, 8))), replace=False):
                    idx = np.unravel_index(int(flat), grid)
                    sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape, strict=True))
                    ds[sl] = self.data(dt, tuple(x.stop - x.start for x in sl))
            elif mode == "direct" and chunks:
                self._direct(ds, dt, shape, chunks, filters)
        except Exception:
            self.features.add("write_failed")
        if chunks and any(m is None for m in maxshape) and self.p(0.4):
            new = tuple(int(rng.integers(max(1, s // 2), s * 2 + 2)) if m is None else s
                        for s, m in zip(shape, maxshape, strict=True))  # fmt: skip
            with contextlib.suppress(Exception):
                ds.resize(new)
                self.features.add("resized")
        self.attributes(ds)

    def _chunk(self, s: int) -> int:
        r = self.rng.random()
        if r < 0.15:
            return 1
        if r < 0.25:
            return max(1, s) + int(self.rng.integers(0, 5))  # oversized
        if r < 0.4:
            return max(1, s)
        return int(self.rng.integers(1, max(2, s) + 1))

    def _filters(self, dcpl: Any, dt: np.dtype[Any], chunks: tuple[int, ...]) -> list[str]:
        from h5py import h5z

        out: list[str] = []
        if not self.p(0.65):
            return out
        names = ["deflate", "shuffle", "fletcher32", "scaleoffset", "nbit", "lzf", "szip", "zstd", "blosc", "lz4"]
        picks = [n for n in names if self.p(0.25)]
        order = list(self.rng.permutation(len(picks)))
        for i in order:
            name = picks[i]
            try:
                if name == "deflate":
                    dcpl.set_deflate(int(self.rng.integers(0, 10)))
                elif name == "shuffle":
                    dcpl.set_shuffle()
                elif name == "fletcher32":
                    dcpl.set_fletcher32()
                elif name == "scaleoffset":
                    if dt.kind in "iu":
                        dcpl.set_scaleoffset(h5z.SO_INT, int(self.rng.integers(0, 4)))
                    elif dt.kind == "f":
                        dcpl.set_scaleoffset(h5z.SO_FLOAT_DSCALE, int(self.rng.integers(0, 4)))
                    else:
                        continue
                elif name == "nbit":
                    dcpl.set_nbit()
                elif name == "lzf":
                    dcpl.set_filter(32000, h5z.FLAG_OPTIONAL, ())
                elif name == "szip":
                    if dt.kind not in "iuf" or math.prod(chunks) < 32:
                        continue
                    dcpl.set_szip(self.choice([h5z.SZIP_NN_OPTION_MASK, h5z.SZIP_EC_OPTION_MASK]),
                                  self.choice([8, 16, 32]))  # fmt: skip
                elif name == "zstd":
                    dcpl.set_filter(32015, h5z.FLAG_OPTIONAL, (int(self.rng.integers(1, 10)),))
                elif name == "blosc":
                    dcpl.set_filter(32001, h5z.FLAG_OPTIONAL, (2, 2, dt.itemsize, 0, 5, 1, 1))
                elif name == "lz4":
                    dcpl.set_filter(32004, h5z.FLAG_OPTIONAL, ())
                out.append(name)
                self.features.add(f"filter:{name}")
            except Exception:
                continue
        return out

    def _direct(self, ds: Any, dt: np.dtype[Any], shape: tuple[int, ...], chunks: tuple[int, ...],
                filters: list[str]) -> None:  # fmt: skip
        """Chunks written raw: uncompressed bytes with every filter masked off (the mask HDF5
        reads them with), at a few chunk positions."""
        grid = [math.ceil(s / c) for s, c in zip(shape, chunks, strict=True)]
        total = math.prod(grid)
        nf = ds.id.get_create_plist().get_nfilters()
        for flat in self.rng.choice(total, size=min(total, int(self.rng.integers(1, 6))), replace=False):
            idx = np.unravel_index(int(flat), grid)
            off = tuple(int(i) * c for i, c in zip(idx, chunks, strict=True))
            block = self.data(dt, chunks)
            mask = (1 << nf) - 1 if nf else 0
            ds.id.write_direct_chunk(off, np.ascontiguousarray(block).tobytes(), filter_mask=mask)
            self.features.add("direct_mask" if mask else "direct")

    # -- files
    def h5py_file(self) -> None:
        import h5py
        from h5py import h5f, h5p

        fcpl = h5p.create(h5p.FILE_CREATE)
        fapl = h5p.create(h5p.FILE_ACCESS)
        if self.p(0.15):
            fcpl.set_userblock(self.choice([512, 1024, 4096]))
            self.features.add("userblock")
        if self.p(0.3):
            from refstore.fixtures.hdf5_headers import _hdf5_lib

            lib = _hdf5_lib()
            k = ctypes.c_uint(int(self.rng.integers(1, 5)))
            if lib is not None and lib.H5Pset_istore_k(ctypes.c_int64(fcpl.id), k) >= 0:
                self.features.add("small_k")
                lib.H5Pset_sym_k(ctypes.c_int64(fcpl.id), ctypes.c_uint(int(self.rng.integers(1, 4))),
                                 ctypes.c_uint(int(self.rng.integers(1, 4))))  # fmt: skip
        if self.p(0.08):
            from refstore.fixtures.hdf5_headers import _hdf5_lib

            lib = _hdf5_lib()
            if lib is not None:
                hid = ctypes.c_int64(fcpl.id)
                flags = int(self.rng.integers(1, 32))  # H5O_SHMESG_*: sdspace 1, dtype 2, fill 4, pline 8, attr 16
                if lib.H5Pset_shared_mesg_nindexes(hid, ctypes.c_uint(1)) >= 0 and lib.H5Pset_shared_mesg_index(
                        hid, ctypes.c_uint(0), ctypes.c_uint(flags), ctypes.c_uint(1)) >= 0:  # fmt: skip
                    self.features.add("shared_mesg")
        if self.p(0.15):
            fcpl.set_link_creation_order(h5p.CRT_ORDER_TRACKED | h5p.CRT_ORDER_INDEXED)
            fcpl.set_attr_creation_order(h5p.CRT_ORDER_TRACKED)
            self.features.add("root_track_order")
        if self.p(0.1):  # file addresses and lengths of 4 or 8 bytes (the header reader reads only 8;
            # 2-byte addresses can leave HDF5 looping forever as it closes the file)
            fcpl.set_sizes(self.choice([4, 8]), self.choice([4, 8]))
            self.features.add("sizes")
        if self.p(0.05) and "small_k" not in self.features:  # (with a small K, HDF5 2.0 loops on close)
            with contextlib.suppress(Exception):
                fcpl.set_file_space_strategy(h5f.FSPACE_STRATEGY_PAGE, True, 1)
                fcpl.set_file_space_page_size(4096)
                self.features.add("paged")
        if self.p(0.1):
            fcpl.set_obj_track_times(False)
            self.features.add("no_times")
        lv = self.choice(["earliest", "earliest", "earliest", "v108", "v110", "latest"])
        low = {"earliest": h5f.LIBVER_EARLIEST, "v108": h5f.LIBVER_V18, "v110": h5f.LIBVER_V110,
               "latest": h5f.LIBVER_LATEST}[lv]  # fmt: skip
        fapl.set_libver_bounds(low, h5f.LIBVER_LATEST)
        self.features.add(f"libver:{lv}")
        fid = h5f.create(str(self.path).encode(), h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)
        with h5py.File(fid) as f:
            self.attributes(f)
            n = int(self.rng.integers(1, 7))
            groups = [f]
            for i in range(n):
                g = self.choice(groups)
                if self.p(0.2):
                    depth = int(self.rng.integers(1, 8))
                    for d in range(depth):
                        name = f"g{i}_{d}"
                        g = g.require_group(name)
                        if self.p(0.3):
                            self.attributes(g)
                    groups.append(g)
                    self.features.add("deep" if depth > 3 else "group")
                self.dataset(g, f"d{i}")
            if self.p(0.1) and "d0" in f:
                del f["d0"]
                self.dataset(f, "d0")
                self.features.add("recreated")
            if self.p(0.1):  # grow headers after the data: continuation blocks
                for obj in [f[k] for k in f if isinstance(f[k], h5py.Dataset)][:2]:
                    for j in range(int(self.rng.integers(5, 40))):
                        with contextlib.suppress(Exception):
                            obj.attrs[f"late_{j}"] = np.arange(int(self.rng.integers(1, 400)), dtype="<f8")
                self.features.add("continuation")
            top = [f[k] for k in f if isinstance(f.get(k, getlink=True), h5py.HardLink)
                   and isinstance(f[k], h5py.Dataset)]  # fmt: skip
            if top and self.p(0.15):  # attributes deleted and others added: NULL messages, gaps
                for obj in top[:2]:
                    for k in list(obj.attrs)[:: int(self.rng.integers(1, 3))]:
                        del obj.attrs[k]
                    for j in range(int(self.rng.integers(0, 4))):
                        obj.attrs[f"again_{j}"] = self.attr_value()
                self.features.add("attrs_deleted")
            if top and self.p(0.08):  # a second hard link to a dataset (its header read twice)
                f["hard_link"] = top[0]
                self.features.add("hard_link")
            if self.p(0.06):  # a committed datatype (a shared datatype message)
                f["named_t"] = np.dtype(self.choice(NUMERIC))
                f.create_dataset("named", data=np.arange(20).astype(f["named_t"].dtype), dtype=f["named_t"],
                                 chunks=self.choice([None, (7,)]))  # fmt: skip
                self.features.add("committed_dtype")
            if top and self.p(0.1):  # dimension scales attached (DIMENSION_LIST, REFERENCE_LIST)
                d = top[0]
                for axis, size in enumerate(d.shape or ()):
                    if self.p(0.7):
                        sc = f.create_dataset(f"scale_{axis}", data=np.arange(size, dtype="<f8"))
                        sc.make_scale(f"axis{axis}")
                        d.dims[axis].attach_scale(sc)
                        if self.p(0.2):
                            sc2 = f.create_dataset(f"scale2_{axis}", data=np.arange(size, dtype="<i4"))
                            sc2.make_scale()
                            d.dims[axis].attach_scale(sc2)
                self.features.add("dim_scales")
            if self.p(0.05):
                f["soft"] = h5py.SoftLink("/d0")
                f["dangling"] = h5py.SoftLink("/nowhere")
                self.features.add("soft_links")

    def netcdf4_file(self) -> None:
        import netCDF4

        fmt = "NETCDF4"
        with netCDF4.Dataset(self.path, "w", format=fmt) as nc:
            nc.setncattr("title", "fuzz")
            for k in range(int(self.rng.integers(0, 12))):
                nc.setncattr(f"g{k}", self.choice([1, 2.5, "text", np.arange(3, dtype=">i2")]))
            nc.createDimension("time", None)
            nc.createDimension("y", int(self.rng.integers(1, 30)))
            nc.createDimension("x", int(self.rng.integers(1, 40)))
            nt = int(self.rng.integers(1, 6))
            t = nc.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            t[:] = np.arange(nt, dtype="f8")
            parent = nc.createGroup("sub") if self.p(0.3) else nc
            for i in range(int(self.rng.integers(1, 5))):
                dt = self.choice(["f4", "f8", "i2", "i4", "u1", "i8", "u2"])
                dims = self.choice([("time", "y", "x"), ("y", "x"), ("x",), ("time",), ("y", "time"),
                                    ("x", "y", "time")])  # fmt: skip
                kw: dict[str, Any] = {}
                if self.p(0.6):
                    kw["zlib"] = True
                    kw["complevel"] = int(self.rng.integers(1, 10))
                    kw["shuffle"] = self.p(0.5)
                if self.p(0.2):
                    kw["fletcher32"] = True
                if self.p(0.3):
                    kw["endian"] = "big"
                    self.features.add("nc:big")
                if self.p(0.4):
                    kw["fill_value"] = np.array(self.value(np.dtype(dt))).astype(dt)[()]
                elif self.p(0.1):
                    kw["fill_value"] = False
                if self.p(0.3):
                    kw["chunksizes"] = tuple(int(self.rng.integers(1, 6)) for _ in dims)
                elif self.p(0.3):
                    kw["contiguous"] = True
                    kw.pop("zlib", None)
                    kw.pop("shuffle", None)
                    kw.pop("fletcher32", None)
                    if "time" in dims:
                        continue
                v = parent.createVariable(f"v{i}", dt, dims, **kw)
                v.set_auto_maskandscale(False)
                shp = tuple(nt if d == "time" else len(nc.dimensions[d]) for d in dims)
                v.units = "K"
                if self.p(0.8):
                    v[...] = self.data(np.dtype(dt), shp)
            if self.p(0.3):  # strings: variable-length (unsupported) and char arrays (|S1)
                s = parent.createVariable("names", str, ("y",))
                s[0] = "abc"
                nc.createDimension("nchar", 4)
                c = parent.createVariable("chars", "S1", ("y", "nchar"))
                c[:] = np.full((len(nc.dimensions["y"]), 4), b"z", "S1")
                self.features.add("nc:strings")
        self.features.add("netcdf4")

    def h5netcdf_file(self) -> None:
        import h5netcdf

        with h5netcdf.File(self.path, "w") as f:
            f.dimensions = {"x": int(self.rng.integers(1, 50)), "y": int(self.rng.integers(1, 9))}
            for i in range(int(self.rng.integers(1, 4))):
                dt = self.choice(NUMERIC)
                kw: dict[str, Any] = {}
                if self.p(0.5):
                    kw["compression"] = "gzip"
                    kw["shuffle"] = self.p(0.5)
                if self.p(0.5):
                    kw["chunks"] = (int(self.rng.integers(1, 6)), int(self.rng.integers(1, 6)))
                v = f.create_variable(f"v{i}", ("x", "y"), dtype=np.dtype(dt), **kw)
                v[...] = self.data(np.dtype(dt), (f.dimensions["x"].size, f.dimensions["y"].size))
                v.attrs["long_name"] = "value"
        self.features.add("h5netcdf")


def h5f_unlimited() -> int:
    from h5py import h5f

    return int(h5f.UNLIMITED)


def twin(path: Path, out: Path) -> bool:
    """A copy of ``path`` whose numeric attribute values and dataset values are changed in
    place (same types, shapes and layout: the object headers mostly keep their bytes, dense
    attributes change in their heaps), to be checked after ``path`` in the same process: the
    scanner's caches by header content (``_hdf5_header``) must not hand ``path``'s answers to it.
    False when nothing was changed."""
    import h5py

    shutil.copy(path, out)
    changed = False
    with h5py.File(out, "r+") as f:
        objs: list[Any] = [f]
        f.visititems(lambda _n, o: objs.append(o))
        for o in objs:
            for k in list(o.attrs):
                if k in HIDDEN:
                    continue
                try:
                    v = np.asarray(o.attrs[k])
                    if v.dtype.kind in "iuf" and v.dtype.names is None:
                        o.attrs.modify(k, (v + 1).astype(v.dtype) if v.dtype.kind != "f" else v * 2 + 1)
                        changed = True
                except Exception:
                    continue
            if isinstance(o, h5py.Dataset) and o.dtype.kind in "iuf" and o.shape and o.size and \
                    o.dtype.names is None and o.id.get_create_plist().get_layout() != h5py.h5d.VIRTUAL:  # fmt: skip
                try:
                    v = o[...]
                    o[...] = (v + 1).astype(v.dtype) if v.dtype.kind != "f" else v * 2 + 1
                    changed = True
                except Exception:
                    continue
    return changed


def generate(path: Path, seed: int) -> set[str]:
    """Write one random file at ``path`` from ``seed``; the features it holds."""
    g = _Gen(np.random.default_rng(seed), path)
    r = g.rng.random()
    if r < 0.8:
        g.h5py_file()
    elif r < 0.92:
        g.netcdf4_file()
    else:
        g.h5netcdf_file()
    return g.features


# ---------------------------------------------------------------------------- checking
def _scan(path: Path, *, bytes_path: bool, concat_dim: str | None = None) -> Any:
    from refstore.scan import hdf5 as scanner

    if bytes_path:
        return scanner.HDF5Scanner(concat_dim=concat_dim)(str(path))
    saved = scanner._header_reader
    scanner._header_reader = lambda *a: None  # type: ignore[assignment]
    try:
        return scanner.HDF5Scanner(concat_dim=concat_dim)(str(path))
    finally:
        scanner._header_reader = saved  # type: ignore[assignment]


def _chunk_iter(h: Any) -> list[tuple[tuple[int, ...], int, int, int]]:
    """(chunk offset, byte offset, size, filter mask) of every chunk, from h5py's ``chunk_iter``."""
    out: list[tuple[tuple[int, ...], int, int, int]] = []
    if h.id.get_num_chunks():
        h.id.chunk_iter(lambda si: out.append((tuple(si.chunk_offset), si.byte_offset, si.size, si.filter_mask)))
    return out


def _same_but_padding(a: Any, b: Any) -> bool:
    """Chunk tables equal but for inline x86 long doubles (h5py's read leaves their 6 bytes of
    padding as they were in memory) whose values are equal."""
    ta, tb = a.chunks.to_pylist(), b.chunks.to_pylist()
    if len(ta) != len(tb):
        return False
    dtypes = {m.name: np.dtype(m.dtype) for m in a.arrays}
    for ra, rb in zip(ta, tb, strict=True):
        if ra == rb:
            continue
        dt = dtypes.get(ra["array"])
        same_ref = {k: v for k, v in ra.items() if k != "inline"} == {k: v for k, v in rb.items() if k != "inline"}
        if dt != np.longdouble or ra["inline"] is None or rb["inline"] is None or not same_ref:
            return False
        if not np.array_equal(np.frombuffer(ra["inline"], dt), np.frombuffer(rb["inline"], dt), equal_nan=True):
            return False
    return True


def _without(table: Any, names: set[str]) -> Any:
    import pyarrow.compute as pc

    return table.filter(pc.invert(pc.is_in(table["array"], value_set=__import__("pyarrow").array(sorted(names)))))


def _expected_codecs(dcpl: Any, dt: np.dtype[Any]) -> tuple[list[tuple[str, tuple[int, ...]]] | None, bool]:
    """(codec ids with the parameters HDF5 reports, in pipeline order) or None when some filter
    has no decoder (the array must be unsupported); and whether any filter is present."""
    ids = {1: "zlib", 2: "shuffle", 3: "fletcher32", 4: "szip", 32015: "zstd", 32001: "blosc", 32004: "lz4h5"}
    out: list[tuple[str, tuple[int, ...]]] = []
    n = dcpl.get_nfilters()
    for i in range(n):
        code, _flags, cd, _name = dcpl.get_filter(i)
        if code not in ids:
            return None, True
        out.append((ids[code], tuple(int(x) for x in cd)))
    return out, n > 0


def _codec_matches(codec: dict[str, Any], want: tuple[str, tuple[int, ...]], dt: np.dtype[Any]) -> bool:
    cid, cd = want
    if codec.get("id") != cid:
        return False
    if cid == "zlib":
        return bool(codec.get("level") == (cd[0] if cd else 6))
    if cid == "shuffle":
        return bool(codec.get("elementsize") == (cd[0] if cd else dt.itemsize))
    if cid == "szip":
        return [codec.get(k) for k in ("mask", "pixels_per_block", "bits_per_pixel", "pixels_per_scanline")] == \
            list(cd[:4])  # fmt: skip
    return True


def _standard_type(tid: Any) -> bool:
    """Whether an HDF5 datatype's bits are numpy's layout of the dtype h5py gives it (this
    campaign's own list: the standard integer and IEEE float types, x86 long double, strings,
    and enums/compounds/arrays built from them); h5py converts any other."""
    from h5py import h5t

    cls = tid.get_class()
    if cls == h5t.INTEGER:
        return any(tid == getattr(h5t, f"STD_{k}{n}{o}") for k in "IU" for n in (8, 16, 32, 64) for o in ("LE", "BE"))
    if cls == h5t.FLOAT:
        return any(tid == getattr(h5t, f"IEEE_F{n}{o}") for n in (16, 32, 64) for o in ("LE", "BE")) or \
            tid == h5t.NATIVE_LDOUBLE  # fmt: skip
    if cls == h5t.BITFIELD:
        return any(tid == getattr(h5t, f"STD_B{n}{o}") for n in (8, 16, 32, 64) for o in ("LE", "BE"))
    if cls == h5t.ENUM:
        return _standard_type(tid.get_super())
    if cls == h5t.COMPOUND:
        return all(_standard_type(tid.get_member_type(i)) for i in range(tid.get_nmembers()))
    return True


def _check_vlen_strings(name: str, h: Any, m: Any, inline: list[Any], problems: list[str]) -> None:
    """A variable-length string dataset: recorded ok as one inline ``vlen-utf8`` chunk holding
    h5py's values as text (``asstr``: UTF-8, a byte that is not UTF-8 replaced)."""
    from numcodecs import VLenUTF8

    if m.status != "ok":
        if "held inline up to" not in str(m.reason):
            problems.append(f"{name}: variable-length strings unsupported ({m.reason})")
        return
    if 0 in h.shape:
        if inline:
            problems.append(f"{name}: empty array with {len(inline)} rows")
        return
    if len(inline) != 1 or inline[0] is None:
        problems.append(f"{name}: expected one inline vlen-utf8 row, got {len(inline)}")
        return
    got = np.asarray(VLenUTF8().decode(inline[0]), dtype=object).reshape(h.shape)
    want = np.asarray(h.asstr(errors="replace")[()], dtype=object).reshape(h.shape)
    if not np.array_equal(got, want):
        problems.append(f"{name}: vlen strings differ from h5py's read")


def _same_bits(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    if a.dtype == b.dtype and a.dtype == np.longdouble and a.shape == b.shape:
        return bool(np.array_equal(a, b, equal_nan=True))  # x86 long double: 6 bytes of padding
    return a.dtype == b.dtype and a.shape == b.shape and np.ascontiguousarray(a).tobytes() == \
        np.ascontiguousarray(b).tobytes()  # fmt: skip


def _attr_problems(what: str, got: dict[str, dict[str, Any]], obj: Any) -> list[str]:
    """Attributes recorded vs h5py's ``attrs`` (names in h5py's order, values, dtypes)."""
    from refstore._values import decode_attr

    out: list[str] = []
    want: list[str] = []
    for k in obj.attrs:
        if k in HIDDEN:
            continue
        try:
            v = obj.attrs[k]
        except Exception:
            continue
        arr = np.asarray(v) if not isinstance(v, (str, bytes)) else None
        if v is None or (arr is not None and (arr.dtype.kind not in "biufcOSU" or arr.dtype.names)):
            continue
        if arr is not None and arr.dtype.kind == "O" and not all(isinstance(x, (str, bytes)) for x in arr.flat):
            continue
        want.append(k)
        if k not in got:
            out.append(f"{what}: attribute {k!r} missing")
            continue
        g = decode_attr(got[k])
        if isinstance(v, (str, bytes)) or (arr is not None and arr.dtype.kind in "OSU"):
            vals = [v] if isinstance(v, (str, bytes)) else list(np.asarray(v).flat)
            vals = [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in vals]
            gl = g if isinstance(g, list) else [g.decode("utf-8", "replace") if isinstance(g, bytes) else g]
            if gl != vals:
                out.append(f"{what}: attribute {k!r} = {g!r}, h5py {v!r}")
            continue
        assert arr is not None
        ga = np.asarray(g)
        if ga.dtype != arr.dtype.newbyteorder("=") or ga.shape != arr.shape or not np.array_equal(
                ga, arr, equal_nan=arr.dtype.kind in "fc"):  # fmt: skip
            out.append(f"{what}: attribute {k!r} = {ga!r} ({ga.dtype}), h5py {arr!r} ({arr.dtype})")
    if list(got) != want:
        out.append(f"{what}: attribute names {list(got)}, h5py {want}")
    return out


def check(path: Path, *, max_chunks: int = 64, via_open: Path | None = None) -> tuple[list[str], Counter[str]]:
    """Every difference between refstore's scan of ``path`` and h5py (module doc); and counts of
    what was compared."""
    import h5py

    from refstore._keys import MAX_DIMS, SOURCE_KEY_COLUMNS
    from refstore._values import decode_fill
    from refstore.read.decode import make_decoder
    from refstore.scan import _hdf5_header
    from refstore.scan import hdf5 as scanner
    from refstore.scan._hdf5_layout import decode_dataset

    problems: list[str] = []
    n: Counter[str] = Counter()
    try:
        fast = _scan(path, bytes_path=True)
    except Exception as e:
        try:
            _scan(path, bytes_path=False)
        except Exception as e2:
            n["refused_both"] += 1  # (HDF5 wrote a file it cannot read back: both paths refuse it)
            del e2
            return problems, n
        return [f"bytes path failed where HDF5 path did not: {type(e).__name__}: {e}"], n
    slow = _scan(path, bytes_path=False)
    # without the header bytes, an extensible array's index type is not known: refused whenever
    # it may be one (scan/hdf5.py, _unswizzled_index_reason); those arrays are compared apart
    ea = {m.name for m in slow.arrays if m.status != "ok" and "extensible array" in str(m.reason)}
    if ea:
        keep = [m for m in fast.arrays if m.name not in ea]
        fast_cmp = dataclasses.replace(fast, arrays=tuple(keep), refs=_without(fast.chunks, ea))
        slow_cmp = dataclasses.replace(slow, arrays=tuple(m for m in slow.arrays if m.name not in ea),
                                       refs=_without(slow.chunks, ea))  # fmt: skip
        n["ea_refused_without_header"] += len(ea)
    else:
        fast_cmp, slow_cmp = fast, slow
    fast, slow, full_fast = fast_cmp, slow_cmp, fast
    if fast.arrays != slow.arrays:
        for a, b in zip(fast.arrays, slow.arrays, strict=False):
            if a != b:
                problems.append(f"bytes vs hdf5 path: {a} != {b}")
        if len(fast.arrays) != len(slow.arrays):
            problems.append(f"bytes vs hdf5 path: {len(fast.arrays)} arrays vs {len(slow.arrays)}")
    if fast.groups != slow.groups:
        problems.append(f"bytes vs hdf5 path: groups {fast.groups} != {slow.groups}")
    if not fast.chunks.equals(slow.chunks) and not _same_but_padding(fast, slow):
        problems.append("bytes vs hdf5 path: chunk tables differ")
    fast = full_fast
    if "time" in {m.name for m in fast.arrays} and not ea:  # the concat-dim path: slabs, sort values
        ft = _scan(path, bytes_path=True, concat_dim="time")
        st = _scan(path, bytes_path=False, concat_dim="time")
        n["concat_dim_scans"] += 1
        sort_f, sort_s = (ft.sort_value, ft.sort_last, ft.sort_units), (st.sort_value, st.sort_last, st.sort_units)
        if ft.arrays != st.arrays or not ft.chunks.equals(st.chunks) or sort_f != sort_s:
            problems.append("bytes vs hdf5 path differ with concat_dim='time'")
    metas = {m.name: m for m in fast.arrays}
    tab = fast.chunks.to_pydict()
    rows: dict[str, list[int]] = {}
    for i, nm in enumerate(tab["array"]):
        rows.setdefault(nm, []).append(i)
    kcols = list(SOURCE_KEY_COLUMNS)
    ocol, lcol, mcol, icol = "offset", "length", "filter_mask", "inline"

    decoded_here = 0
    with h5py.File(path, "r") as f, open(path, "rb") as fh, _hdf5_header.HeaderReader(str(path)) as header:
        found: list[tuple[str, int]] = []
        h5py.h5o.visit(f.id, lambda nm, info: found.append((nm.decode("utf-8", "replace"), info.addr))
                       if info.type == h5py.h5o.TYPE_DATASET else None, info=True)  # fmt: skip
        groups_seen: list[tuple[str, Any]] = [("", f)]
        f.visititems(lambda nm, o: groups_seen.append((nm, o)) if isinstance(o, h5py.Group) else None)
        for gname, g in groups_seen:
            if gname in fast.groups:
                problems += _attr_problems(f"group {gname!r}", fast.groups[gname], g)
            else:
                problems.append(f"group {gname!r} not recorded")
        for name, addr in found:
            h = f[name]
            msgs = header.messages(addr)
            raw = decode_dataset(msgs) if msgs is not None else None
            n["datasets"] += 1
            n["bytes_path" if raw is not None else "declined"] += 1
            body = next((b for kind, _f, _r, b in msgs if kind == 0x08), None) if msgs else None
            if body is not None and len(body) > 5 and body[1] == 2:  # chunked: which index (coverage)
                kinds = {1: "single", 2: "implicit", 3: "fixed_array", 4: "extensible_array", 5: "btree2"}
                index = "btree1" if body[0] == 3 else kinds.get(body[min(len(body) - 1, 5 + body[3] * body[4])], "?")
                n[f"index:{index}{'' if raw is None else ':bytes'}"] += 1
            if raw is not None:
                decoded_here += 1
            cls = h.attrs.get("CLASS") if "CLASS" in h.attrs else None
            nm_attr = h.attrs.get("NAME") if "NAME" in h.attrs else None
            if cls == b"DIMENSION_SCALE" and isinstance(nm_attr, bytes) and nm_attr.startswith(NC_DIM_ONLY):
                if name in metas:
                    problems.append(f"{name}: a netCDF dimension recorded as an array")
                continue
            m = metas.get(name)
            if m is None:
                problems.append(f"{name}: not recorded")
                continue
            problems += _attr_problems(name, m.attrs, h)
            dcpl = h.id.get_create_plist()
            layout = dcpl.get_layout()
            shape = h.shape if h.shape is not None else ()
            if m.dtype != h.dtype.str:
                problems.append(f"{name}: dtype {m.dtype}, h5py {h.dtype.str}")
            if tuple(m.shape) != tuple(shape):
                problems.append(f"{name}: shape {m.shape}, h5py {shape}")
            dt = h.dtype
            if dt.kind in "biufcS" and dt.names is None and h.shape is not None and _standard_type(h.id.get_type()):
                want_fill = np.array([h.fillvalue], dt).tobytes()
                if m.fill_value is None:
                    problems.append(f"{name}: no fill value recorded")
                else:
                    got_fill = np.array([decode_fill(m.fill_value, dt)], dt).tobytes()
                    nan = dt.kind in "fc" and bool(np.isnan(np.array([h.fillvalue], dt)).any())
                    if dt == np.longdouble:
                        got_fill, want_fill = got_fill[:10], want_fill[:10]  # x86 long double padding
                    if got_fill != want_fill and not (nan and np.isnan(np.frombuffer(got_fill, dt)).any()):
                        problems.append(f"{name}: fill {got_fill!r}, h5py {want_fill!r}")
            r = rows.get(name, [])
            codecs, _any_filter = _expected_codecs(dcpl, dt) if layout == h5py.h5d.CHUNKED else ([], False)
            info = h5py.check_string_dtype(dt)
            if h.shape is not None and info is not None and info.length is None and len(shape) <= MAX_DIMS:
                n["vlen_strings"] += 1  # held inline: one vlen-utf8 chunk of h5py's text
                _check_vlen_strings(name, h, m, [tab[icol][i] for i in r], problems)
                continue
            unsupported = (
                h.shape is None or dt.names is not None or dt.kind not in "biufcS" or h5py.check_vlen_dtype(dt)
                or layout == h5py.h5d.VIRTUAL or (layout == h5py.h5d.CONTIGUOUS and dcpl.get_external_count() > 0)
                or codecs is None or len(shape) > MAX_DIMS
            )  # fmt: skip
            if not unsupported and not _standard_type(h.id.get_type()):
                unsupported = True  # bits not numpy's layout (padding, offset, odd sizes): h5py converts
            ea_bug = (m.status != "ok" and "extensible array" in str(m.reason) and h.maxshape is not None
                      and None in h.maxshape[1:])  # fmt: skip
            if ea_bug:
                n["unsupported_ea"] += 1
                continue
            if unsupported:
                n["unsupported"] += 1
                if m.status == "ok":
                    problems.append(f"{name}: recorded ok, expected unsupported (layout {layout})")
                if r:
                    problems.append(f"{name}: unsupported but {len(r)} chunk rows")
                continue
            if m.status != "ok":
                problems.append(f"{name}: unsupported ({m.reason}), expected ok")
                continue
            full = tuple(max(s, 1) for s in shape)
            spacepad = dt.kind == "S" and h.id.get_type().get_strpad() == h5py.h5t.STR_SPACEPAD
            inline_expected = layout == h5py.h5d.COMPACT or (
                layout == h5py.h5d.CHUNKED and any(c > s for c, s in zip(h.chunks, shape, strict=True))
                and math.prod(shape) * dt.itemsize <= INLINE_MAX)  # fmt: skip
            if layout == h5py.h5d.CHUNKED and not inline_expected:
                assert codecs is not None
                want_codecs = [c for c in m.codecs if c.get("id") != "spacepad"]
                if len(want_codecs) != len(codecs) or not all(
                        _codec_matches(c, w, dt) for c, w in zip(want_codecs, codecs, strict=True)):  # fmt: skip
                    problems.append(f"{name}: codecs {m.codecs}, HDF5 filters {codecs}")
            if spacepad != any(c.get("id") == "spacepad" for c in m.codecs) and layout != h5py.h5d.COMPACT:
                inline_all = bool(r) and all(tab[icol][i] is not None for i in r)
                if r and not inline_all:  # (no reference: nothing stored is read)
                    problems.append(f"{name}: spacepad step {'missing' if spacepad else 'wrong'}")
            if 0 in shape:
                if r:
                    problems.append(f"{name}: empty array with {len(r)} rows")
                continue
            if inline_expected:
                n["inline"] += 1
                if tuple(m.chunks) != full:
                    problems.append(f"{name}: chunks {m.chunks}, expected {full} (inline)")
                if len(r) != 1 or tab[icol][r[0]] is None:
                    problems.append(f"{name}: expected one inline row, got {len(r)}")
                    continue
                want_v = np.ascontiguousarray(h[...])
                if not _same_bits(np.frombuffer(tab[icol][r[0]], dt).reshape(want_v.shape), want_v):
                    problems.append(f"{name}: inline bytes differ from h5py's read")
                continue
            if layout == h5py.h5d.CONTIGUOUS:
                n["contiguous"] += 1
                off = h.id.get_offset()
                if tuple(m.chunks) != full:
                    problems.append(f"{name}: chunks {m.chunks}, expected {full}")
                if off is None or h.id.get_storage_size() == 0:  # (after a user block: UNDEF + base)
                    if r:
                        problems.append(f"{name}: unwritten contiguous with {len(r)} rows")
                    continue
                if len(r) != 1 or tab[ocol][r[0]] != off or tab[lcol][r[0]] != h.id.get_storage_size():
                    problems.append(f"{name}: contiguous rows {[(tab[ocol][i], tab[lcol][i]) for i in r]}, "
                                    f"h5py ({off}, {h.id.get_storage_size()})")  # fmt: skip
                    continue
                fh.seek(off)
                got = np.frombuffer(fh.read(math.prod(shape) * dt.itemsize), dt).reshape(shape)
                if spacepad:
                    got = make_decoder(m.codecs, m.dtype, tuple(shape))(got.tobytes())
                if not _same_bits(got, np.asarray(h[...])):
                    problems.append(f"{name}: contiguous bytes differ from h5py's read")
                continue
            # chunked
            n["chunked"] += 1
            if tuple(m.chunks) != tuple(h.chunks):
                problems.append(f"{name}: chunks {m.chunks}, h5py {h.chunks}")
                continue
            want_rows = _chunk_iter(h)
            got_rows = [(tuple(tab[kcols[d]][i] * h.chunks[d] for d in range(len(shape))), tab[ocol][i],
                         tab[lcol][i], tab[mcol][i]) for i in r]  # fmt: skip
            want_rows = [(o, b, s, int(np.int32(np.uint32(mk)))) for o, b, s, mk in want_rows]
            n["chunks"] += len(want_rows)
            if got_rows != want_rows:
                diff = [(a, b) for a, b in zip(got_rows, want_rows, strict=False) if a != b][:3]
                problems.append(f"{name}: chunk rows differ ({len(got_rows)} vs h5py {len(want_rows)}): {diff}")
                continue
            for k in sorted({0, *np.linspace(0, len(want_rows) - 1, min(4, len(want_rows))).astype(int).tolist()}) \
                    if want_rows else []:  # fmt: skip
                si = h.id.get_chunk_info(k)
                if (tuple(si.chunk_offset), si.byte_offset, si.size, int(np.int32(np.uint32(si.filter_mask)))) \
                        != want_rows[k]:  # fmt: skip
                    problems.append(f"{name}: get_chunk_info({k}) differs from chunk_iter")
            dec = make_decoder(m.codecs, m.dtype, tuple(m.chunks))
            pick = range(len(r)) if len(r) <= max_chunks else \
                sorted(set(np.linspace(0, len(r) - 1, max_chunks).astype(int).tolist()))  # fmt: skip
            for j in pick:
                o, b, s, mk = got_rows[j]
                sl = tuple(slice(a, min(a + c, e)) for a, c, e in zip(o, h.chunks, shape, strict=True))
                try:
                    want_region = np.asarray(h[sl])
                except Exception:  # HDF5 cannot read it either (a filter fails on its own chunk)
                    n["oracle_unreadable"] += 1
                    continue
                try:
                    out = dec(os.pread(fh.fileno(), s, b), mk)
                except Exception as e:
                    problems.append(f"{name}: chunk {o} does not decode: {type(e).__name__}: {e}")
                    break
                out = out[tuple(slice(0, x.stop - x.start) for x in sl)]
                n["chunks_decoded"] += 1
                if not _same_bits(np.ascontiguousarray(out), want_region):
                    problems.append(f"{name}: chunk {o} decodes to other values than h5py's read")
                    break
    n["bytes_path_files"] += decoded_here > 0
    if via_open is not None and not problems:
        problems += _check_open(path, via_open, n)
    del scanner
    return problems, n


def _check_open(path: Path, where: Path, n: Counter[str]) -> list[str]:
    """Scan ``path`` into a fresh collection and read every ok array whole through
    ``refstore.open`` against h5py's ``[...]``."""
    import h5py

    import refstore

    shutil.rmtree(where, ignore_errors=True)
    refstore.init(str(where))
    refstore.scan(str(where), [str(path)], workers=1, timeout=0)
    ds = refstore.open(str(where))
    out: list[str] = []
    with h5py.File(path, "r") as f:
        for name in ds.arrays:
            a = ds[name]
            if getattr(a, "status", "ok") != "ok":
                continue
            if f[name].id.get_create_plist().get_fill_time() == h5py.h5d.FILL_TIME_NEVER:
                # never written and never filled: HDF5 leaves the reader's buffer as it was (h5py:
                # zeros), refstore gives the fill value; values nobody wrote are not compared
                n["open_fill_never_skipped"] += 1
                continue
            try:
                want = np.asarray(f[name][...])
            except Exception:  # HDF5 cannot read it either
                n["oracle_unreadable"] += 1
                continue
            try:
                got = np.asarray(a[...])
            except Exception as e:
                if type(e).__name__ == "UnsupportedArrayError":  # recorded so, and checked so (check)
                    continue
                out.append(f"{name}: refstore.open read failed: {type(e).__name__}: {e}")
                continue
            n["open_reads"] += 1
            if not _same_bits(got.astype(want.dtype, copy=False) if got.dtype == want.dtype else got, want):
                out.append(f"{name}: refstore.open read {got.dtype}{got.shape} differs from h5py's "
                           f"{want.dtype}{want.shape}")  # fmt: skip
    shutil.rmtree(where, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------- driver
def _generate_quiet(path: Path, seed: int) -> set[str] | None:
    """``generate`` in a worker process (None when HDF5 refused the combination)."""
    import warnings

    warnings.simplefilter("ignore")
    try:
        return generate(path, seed)
    except Exception:
        return None


def _twin_quiet(path: Path, out: Path) -> bool:
    try:
        return twin(path, out)
    except Exception:
        return False


def _check_quiet(path: Path, max_chunks: int, via: Path | None,
                 twin_path: Path | None = None) -> tuple[list[str], Counter[str]]:  # fmt: skip
    """``check`` in a worker process; with ``twin_path``, the file's twin (``twin``) is checked
    right after it (warm caches)."""
    import warnings

    warnings.simplefilter("ignore")
    try:
        problems, n = check(path, max_chunks=max_chunks, via_open=via)
        if twin_path is not None and not problems and twin_path.exists():
            more, n2 = check(twin_path, max_chunks=max_chunks)
            problems += [f"twin: {p}" for p in more]
            n.update({f"twin_{k}": v for k, v in n2.items() if k in ("datasets", "chunks_decoded")})
            n["twins"] += 1
        return problems, n
    except Exception:
        return [f"checker crashed: {traceback.format_exc(limit=-3)}"], Counter()


class _Worker:
    """One spawned process (a crash of HDF5 in it, a heap corrupted by an unusual file, kills
    it alone: the run records the crash and starts another)."""

    timeout = 120.0  # seconds one call may take before its process is killed

    def __init__(self) -> None:
        self._pool: Any = None

    def call(self, fn: Any, *args: Any) -> tuple[bool, Any]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        try:
            return True, self._pool.submit(fn, *args).result(timeout=self.timeout)
        except (BrokenProcessPool, TimeoutError):
            for proc in list(getattr(self._pool, "_processes", {}).values()):
                proc.kill()  # (a hung HDF5 call: its process alone)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            return False, None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()


def run_one(seed: int, work: Path, *, max_chunks: int, open_every: int, index: int,
            gen: _Worker, chk: _Worker) -> tuple[list[str], Counter[str], set[str]]:  # fmt: skip
    """Write file ``seed`` in the generating process, check it in the checking process."""
    path = work / f"f{seed}.h5"
    for old in work.glob(f"f{seed}.*"):
        old.unlink()
    ok, feats = gen.call(_generate_quiet, path, seed)
    if not ok:
        return [], Counter({"generator_crashed": 1}), set()
    if feats is None:
        return [], Counter({"generator_failed": 1}), set()
    via = work / f"coll{seed}" if open_every and index % open_every == 0 else None
    twin_path = work / f"f{seed}.twin.h5" if index % 3 == 1 else None
    if twin_path is not None:  # written apart from the checks (HDF5 writing r+ may corrupt its heap)
        ok, made = gen.call(_twin_quiet, path, twin_path)
        if not ok or not made:
            twin_path.unlink(missing_ok=True)
            twin_path = None
    ok, got = chk.call(_check_quiet, path, max_chunks, via, twin_path)
    if not ok:
        return ["scan or check crashed its process (signal)"], Counter({"checker_crashed": 1}), feats
    problems, counts = got
    return problems, counts, feats


def _check_files(roots: list[Path], max_chunks: int, as_json: bool) -> int:
    """``check`` on existing files (real files never seen: ``../shared/data``)."""
    suffixes = {".nc", ".nc4", ".h5", ".hdf5", ".he5", ".hdf"}
    files = sorted({p for r in roots for p in ([r] if r.is_file() else r.rglob("*"))
                    if p.is_file() and p.suffix.lower() in suffixes})  # fmt: skip
    totals: Counter[str] = Counter()
    failing: dict[str, list[str]] = {}
    for p in files:
        with open(p, "rb") as fh:
            head = fh.read(8)
        if head != b"\x89HDF\r\n\x1a\n":
            continue  # (a user block: the signature further on is left out here)
        totals["files"] += 1
        try:
            problems, counts = check(p, max_chunks=max_chunks)
        except Exception:
            problems, counts = [f"checker crashed: {traceback.format_exc(limit=-3)}"], Counter()
        totals.update(counts)
        if problems:
            failing[str(p)] = problems
            print(f"{p}: {len(problems)} problem(s): {problems[0][:300]}", flush=True)
    summary = {"failing": len(failing), "counts": dict(sorted(totals.items()))}
    print(json.dumps(summary) if as_json else "\n".join(f"{k}: {v}" for k, v in summary.items()))
    return 1 if failing else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="files to generate")
    ap.add_argument("--seed", type=int, default=0, help="first seed (file i uses seed + i)")
    ap.add_argument("--chunks", type=int, default=64, help="chunks decoded per array at most")
    ap.add_argument("--open", type=int, default=10, dest="open_every",
                    help="every K-th file also read whole through refstore.open (0: never)")
    ap.add_argument("--keep", type=Path, default=Path("/tmp/h5fuzz-fail"), help="where failing files are kept")
    ap.add_argument("--json", action="store_true", help="one JSON summary line at the end")
    ap.add_argument("--trace", action="store_true", help="name each seed on stderr before its file is written")
    ap.add_argument("files", nargs="*", type=Path,
                    help="check these HDF5/netCDF-4 files (folders: searched) instead of random ones")
    args = ap.parse_args(argv)
    import warnings

    warnings.simplefilter("ignore")
    t0 = time.monotonic()
    if args.files:
        return _check_files(args.files, args.chunks, args.json)
    totals: Counter[str] = Counter()
    features: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    failed: list[int] = []
    gen, chk = _Worker(), _Worker()
    with tempfile.TemporaryDirectory(prefix="h5fuzz-") as tmp:
        work = Path(tmp)
        for i in range(args.n):
            seed = args.seed + i
            if args.trace:
                print(f"seed {seed}", file=sys.stderr, flush=True)
            problems, counts, feats = run_one(seed, work, max_chunks=args.chunks, open_every=args.open_every,
                                              index=i, gen=gen, chk=chk)  # fmt: skip
            totals.update(counts)
            features.update(feats)
            if problems:
                failed.append(seed)
                args.keep.mkdir(parents=True, exist_ok=True)
                for p in work.glob(f"f{seed}.*"):
                    shutil.copy(p, args.keep / p.name)
                (args.keep / f"f{seed}.txt").write_text("\n".join(problems) + "\n")
                for p in problems:
                    kinds[p.split(":", 1)[-1].split("(")[0].strip()[:60]] += 1
                print(f"seed {seed}: {len(problems)} problem(s): {problems[0][:300]}", flush=True)
            for p in work.glob(f"f{seed}.*"):
                p.unlink()
            if (i + 1) % 50 == 0:
                print(f"... {i + 1} files, {len(failed)} failing, {time.monotonic() - t0:.0f} s", file=sys.stderr,
                      flush=True)  # fmt: skip
    gen.close()
    chk.close()
    summary = {
        "files": args.n, "failing": len(failed), "failing_seeds": failed[:50],
        "seconds": round(time.monotonic() - t0, 1),
        "counts": dict(sorted(totals.items())), "problem_kinds": dict(kinds.most_common(20)),
        "features": dict(sorted(features.items())),
    }  # fmt: skip
    if args.json:
        print(json.dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k}: {v}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

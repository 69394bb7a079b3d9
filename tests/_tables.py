"""Small deterministic collections for the table forms' tests (parquet, sqlite)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["era_series", "many_chunks_file", "small_file"]


def small_file(path: Path) -> Path:
    """A netCDF4-like HDF5 file: a time coordinate, a 2-d zlib+shuffle array with a partial
    edge and an unwritten chunk, an array in a group, a compact (inline) array."""
    import h5py

    from refstore.fixtures.edge import _compact

    with h5py.File(path, "w") as f:
        t = f.create_dataset("time", data=np.arange(6, dtype="f8"), chunks=(6,))
        t.attrs["units"] = "days since 2000-01-01"
        t.make_scale("time")
        x = f.create_dataset("x", shape=(6, 10), chunks=(4, 4), dtype="<f4", fillvalue=np.float32("nan"),
                             compression="gzip", shuffle=True)  # fmt: skip
        x[0:4, :] = np.arange(40, dtype="<f4").reshape(4, 10)
        x[4:6, 0:4] = -np.arange(8, dtype="<f4").reshape(2, 4)
        x.attrs["scale_factor"] = np.float32(0.5)
        x.dims[0].attach_scale(t)
        g = f.create_group("grp")
        g.create_dataset("T", data=np.arange(5, dtype=">i2"))
        _compact(f, "inline", np.arange(6, dtype="<i2").reshape(2, 3))
    return path


def many_chunks_file(path: Path, rows: int = 200, cols: int = 200) -> Path:
    """One uint8 array of ``rows * cols`` one-element chunks."""
    import h5py

    with h5py.File(path, "w") as f:
        f.create_dataset("big", data=(np.arange(rows * cols) % 251).astype("u1").reshape(rows, cols), chunks=(1, 1))
    return path


def era_series(folder: Path) -> list[Path]:
    """Four files along time; codecs, chunks and dtype change after the second (two eras)."""
    import h5py

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, (comp, chunks, dtype) in enumerate([("gzip", (1, 12), "<i2")] * 2 + [(None, (2, 5), "<i4")] * 2):
        p = folder / f"f{i}.h5"
        with h5py.File(p, "w") as f:
            t = f.create_dataset("time", data=np.arange(2, dtype="f8") + 2 * i, maxshape=(None,), chunks=(2,))
            t.attrs["units"] = "days since 2000-01-01"
            t.make_scale("time")
            x = f.create_dataset("x", data=(np.arange(24).reshape(2, 12) + 100 * i).astype(dtype), chunks=chunks,
                                 compression=comp, shuffle=comp is not None)  # fmt: skip
            x.dims[0].attach_scale(t)
        out.append(p)
    return out

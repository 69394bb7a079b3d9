"""Variable and dimension names of an HDF5 file as netCDF-C gives them (pure: no HDF5 calls).

netCDF-C (``libhdf5/hdf5open.c``) reads a file in two passes, and xarray's ``engine="netcdf4"``
shows what it read:

1. Groups pre-order (a group's links, in creation order when the group tracks it, else by
   name; then its child groups in that order). Every dimension scale dataset defines a
   dimension of its group named after the dataset, numbered by its ``_Netcdf4Dimid``
   attribute or else the next free number. A scale whose ``NAME`` says it is a dimension only
   is no variable; any other dataset is one, named without the ``_nc4_non_coord_`` prefix
   netCDF-4 gives a variable named like a dimension it does not use.
2. Groups post-order (children first). A scale's own dimension is its first; a variable
   with scales on its first axis takes, per axis, the *last* scale attached
   (``H5DSiterate_scales`` visits them all and netCDF-C keeps the last), found among the
   dimensions of its group and its ancestors; a variable without a scale on its first axis
   gets a phony dimension per axis: the first dimension of its group of that length and
   unlimitedness not already used by an earlier axis, else a new ``phony_dim_<n>``, ``n``
   the file's next dimension number.

Files netCDF-C refuses to open get names by the same rules where they apply: a dimension
without a scale where the first has one gets a phony dimension, a scale attached from outside
the array's group and its ancestors names the dimension by its own name (as h5py does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NON_COORD", "NcDataset", "netcdf_names"]

NON_COORD = "_nc4_non_coord_"


@dataclass(frozen=True, slots=True)
class NcDataset:
    """What netCDF-C reads of one dataset, reached by the link ``path`` ("g/sub/x")."""

    path: str
    shape: tuple[int, ...]
    unlimited: tuple[bool, ...]
    addr: int  # the object's address (hard links to one object share it)
    scale: bool = False
    dim_only: bool = False  # a scale that is a netCDF dimension but not a variable
    dimid: int | None = None  # _Netcdf4Dimid
    coords: tuple[int, ...] | None = None  # _Netcdf4Coordinates (a multi-dimensional scale's dimension ids)
    scales: tuple[int | None, ...] | None = None  # last scale's address per axis; None: none on the first axis


@dataclass(slots=True)
class _Dim:
    name: str
    length: int
    unlimited: bool
    id: int
    addr: int | None = None


@dataclass(slots=True)
class _Group:
    path: str
    datasets: list[NcDataset] = field(default_factory=list)
    children: list[_Group] = field(default_factory=list)
    dims: list[_Dim] = field(default_factory=list)
    parent: _Group | None = None


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def var_name(path: str) -> str:
    """A dataset's variable path as netCDF-C names it (``_nc4_non_coord_`` dropped)."""
    head, _, base = path.rpartition("/")
    base = base.removeprefix(NON_COORD) if base.startswith(NON_COORD) and len(base) > len(NON_COORD) else base
    return f"{head}/{base}" if head else base


class _Namer:
    def __init__(self) -> None:
        self.next_id = 0
        self.anywhere: dict[int, _Dim] = {}  # scale address -> its dimension, in any group

    def read(self, g: _Group) -> None:
        """Pass 1 (pre-order): the dimensions the scales of ``g`` and its descendants define."""
        for ds in g.datasets:
            if not ds.scale:
                continue
            dimid = ds.dimid if ds.dimid is not None and ds.dimid >= 0 else self.next_id
            self.next_id = max(self.next_id, dimid + 1)
            length = ds.shape[0] if ds.shape else 0
            dim = _Dim(_base(ds.path), length, bool(ds.unlimited[:1] and ds.unlimited[0]), dimid, ds.addr)
            g.dims.append(dim)
            self.anywhere.setdefault(ds.addr, dim)
        for child in g.children:
            self.read(child)

    def match(self, g: _Group, out: dict[str, tuple[str, ...]]) -> None:
        """Pass 2 (post-order): every variable's dimensions."""
        for child in g.children:
            self.match(child, out)
        for ds in g.datasets:
            if not ds.dim_only:
                out[ds.path] = self._dims(g, ds)

    def _dims(self, g: _Group, ds: NcDataset) -> tuple[str, ...]:
        n = len(ds.shape)
        if ds.scale and n == 1:
            return (_base(ds.path),)
        found: list[_Dim | None] = [None] * n
        if ds.coords is not None and len(ds.coords) == n:
            found = [self._find(g, lambda d, i=i: d.id == ds.coords[i]) for i in range(n)]
        elif ds.scales is not None and not ds.scale:
            # a scale outside the group and its ancestors (netCDF-C cannot open such a file): its name
            found = [None if a is None else self._find(g, lambda d, a=a: d.addr == a) or self.anywhere.get(a)
                     for a in ds.scales]  # fmt: skip
        used: list[_Dim] = []
        for i in range(n):
            dim = found[i] or self._phony(g, ds.shape[i], ds.unlimited[i] if i < len(ds.unlimited) else False, used)
            used.append(dim)
        return tuple(d.name for d in used)

    @staticmethod
    def _find(g: _Group | None, test: object) -> _Dim | None:
        while g is not None:
            for d in g.dims:
                if test(d):  # type: ignore[operator]
                    return d
            g = g.parent
        return None

    def _phony(self, g: _Group, length: int, unlimited: bool, used: list[_Dim]) -> _Dim:
        for d in g.dims:
            if d.length == length and d.unlimited == unlimited and all(d is not u for u in used):
                return d
        dim = _Dim(f"phony_dim_{self.next_id}", length, unlimited, self.next_id)
        self.next_id += 1
        g.dims.append(dim)
        return dim


def netcdf_names(groups: list[tuple[str, list[NcDataset]]]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """For each dataset path that is a netCDF variable: (its variable path, its dimension
    names). ``groups``: every group path ("" the root) pre-order, each with its datasets in
    netCDF-C's link order (module doc); a group's children are taken in the order listed."""
    nodes: dict[str, _Group] = {}
    for path, datasets in groups:
        g = _Group(path, list(datasets))
        if path:
            parent = nodes.get(path.rpartition("/")[0])
            if parent is None:
                continue  # (a group whose parent is not listed is not reached by netCDF-C)
            g.parent = parent
            parent.children.append(g)
        nodes[path] = g
    root = nodes.get("")
    if root is None:
        return {}
    namer = _Namer()
    namer.read(root)
    dims: dict[str, tuple[str, ...]] = {}
    namer.match(root, dims)
    return {p: (var_name(p), d) for p, d in dims.items()}

"""Offline STAC validation: the STAC 1.1.0 core and extension JSON schemas vendored in
``tests/stac_schemas`` (see its README), resolved through a local ``referencing`` registry, so no
schema is fetched (these machines cannot reach schemas.stacspec.org)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "stac_schemas"
CORE = "https://schemas.stacspec.org/"
EXTENSIONS = "https://stac-extensions.github.io/"
PROJJSON = "https://proj.org/schemas/v0.4/projjson.schema.json"
COLLECTION = f"{CORE}v1.1.0/collection-spec/json-schema/collection.json"


@cache
def _registry() -> Any:
    from jsonschema_specifications import REGISTRY  # the draft-07 meta-schema the core refs
    from referencing import Resource
    from referencing.jsonschema import DRAFT7

    pairs = []
    for path in sorted(HERE.rglob("*.json")):
        rel = path.relative_to(HERE).as_posix()
        url = EXTENSIONS + rel.removeprefix("extensions/") if rel.startswith("extensions/") else CORE + rel
        pairs.append((url, Resource.from_contents(json.loads(path.read_text()), default_specification=DRAFT7)))
    # datacube's reference_system may be a PROJJSON object: its v0.4 schema URL is served by the
    # PROJJSON schema PROJ itself ships (pyproj's data directory; a later, compatible version)
    from pyproj.datadir import get_data_dir

    projjson = json.loads((Path(get_data_dir()) / "projjson.schema.json").read_text())
    pairs.append((PROJJSON, Resource.from_contents(projjson, default_specification=DRAFT7)))
    return REGISTRY.with_resources(pairs)


def validate(d: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``d`` is a valid STAC 1.1.0 Collection and
    valid under every extension schema it names (each must be vendored)."""
    import jsonschema

    reg = _registry()
    assert d.get("type") == "Collection" and d.get("stac_version") == "1.1.0", "not a STAC 1.1.0 Collection"
    for url in [COLLECTION, *d.get("stac_extensions", [])]:
        schema = reg.contents(url.rstrip("#"))
        jsonschema.Draft7Validator(schema, registry=reg).validate(d)

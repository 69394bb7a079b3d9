"""One module per emitted form: ``open_form(out, case) -> {array name: array-like}``, opened by
the form's own reader (fsspec + zarr, icechunk, GDAL, ...). ``tests/test_emit_roundtrip.py``
finds them by format name (``kerchunk-json`` -> ``kerchunk_json.py``)."""

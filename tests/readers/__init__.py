"""One module per emitted form: ``open_form(out, case) -> {array name: array-like}``, opened by
the form's own reader (fsspec + zarr, icechunk, GDAL, ...). ``tests/test_emit_roundtrip.py``
finds them by format name (``kerchunk-json`` -> ``kerchunk_json.py``)."""


def register_codecs() -> None:
    """imagecodecs' numcodecs (zarr v2) and zarr v3 codecs, registered as any reader without
    refstore registers them."""
    import imagecodecs.numcodecs

    imagecodecs.numcodecs.register_codecs(verbose=False)
    try:
        import imagecodecs.zarr

        imagecodecs.zarr.register_codecs(verbose=False)
    except ImportError:
        pass

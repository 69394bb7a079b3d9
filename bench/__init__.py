"""refstore benchmarks: run with ``./dev bench`` (or ``python -m bench``)."""

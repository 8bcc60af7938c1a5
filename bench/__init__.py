"""OLP's benchmarks: run them with ``./dev bench`` (see bench/README.md)."""

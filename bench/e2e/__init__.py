"""End to end on Redis, workers as processes: `python -m bench.e2e` (see __main__.py)."""

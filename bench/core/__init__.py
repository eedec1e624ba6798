"""The pure core on a generated workload, no Redis: `python -m bench.core` (see __main__.py)."""

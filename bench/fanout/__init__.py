"""SSE fan-out through the gateway: `python -m bench.fanout` (see __main__.py)."""

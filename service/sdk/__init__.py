"""The SDK that producers and frontends import: the producer, the subscriber, its live view
and sources, and the read views. It loads no worker code (tests/unit/test_layering.py)."""

"""The fault tests' machinery, one copy for tests/faults and the soak: the package
tests.support.faults (the worker harness, the recording producer, the in-process fold, the
blackhole proxy and the malformed entry kinds), imported by its absolute name."""

from __future__ import annotations

from tests.support.faults import expect, harness, load, malformed, proxy

__all__ = ["expect", "harness", "load", "malformed", "proxy"]

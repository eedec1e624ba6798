"""tests/support/backends.py under its old plain name `backends`, for the modules that still import
it so (pytest puts tests/ on the path); the fault machinery and the benchmarks import it as
tests.support.backends."""

from __future__ import annotations

from tests.support.backends import Target, as_user, at_port, mget_any

__all__ = ["Target", "as_user", "at_port", "mget_any"]

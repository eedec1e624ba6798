"""The event loop of the long-running processes (the worker and the gateway): uvloop's, in C, where
it exists (a dependency except on Windows), else asyncio's.

Why: both spend most of their CPU at the loads users run on trips through the event loop, not on
their own work. The gateway makes one socket send per subscriber per wake-up; a worker at light
load makes a few hundred rounds a second, each a timer, a write, a wake-up and a read. On uvloop a
worker's round costs less, and its timers keep closer to the linger (asyncio's round a wait up to
the next millisecond): at 1,000 events/s it made 10% more rounds for the same CPU, and added
0.5 ms less p99 (docs/performance.md, "A connection of its own, uvloop, and a leaner fold").
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, on uvloop's loop where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)

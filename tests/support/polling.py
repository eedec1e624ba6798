"""Waiting for a condition the way every test here does: poll it against a deadline, never sleep a
fixed time, and fail naming what never happened."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

DEADLINE_S: Final = 30.0
EVERY_S: Final = 0.02


async def until(
    check: Callable[[], Awaitable[bool]],
    what: str,
    timeout: float = DEADLINE_S,
    every: float = EVERY_S,
) -> None:
    """Poll `check` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(every)

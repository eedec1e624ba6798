"""The caught-up reads benchmark (bench/e2e/caught_up.py) times both ways of a caught-up read
against a real Redis and leaves none of its keys behind: a way whose replies were wrong would
fail here, not print a figure."""

from __future__ import annotations

import argparse

import pytest
from redis.asyncio import Redis

from bench.e2e.caught_up import WAYS, measure


async def test_every_way_gets_a_figure_and_the_keys_go(
    admin_redis: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    best = await measure(admin_redis, argparse.Namespace(owners=2, calls=3, runs=1), prefix)
    assert set(best) == set(WAYS)
    assert all(0 < us < float("inf") for us in best.values())
    printed = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[1].strip() for line in printed] == list(WAYS)
    assert await admin_redis.keys(f"{prefix}*") == []

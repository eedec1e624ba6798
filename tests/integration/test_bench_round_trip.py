"""The round-trip benchmark (bench/e2e/round_trip.py) runs each path it compares against a real
Redis and leaves none of its keys behind: a path that failed would print no figure at all."""

from __future__ import annotations

import argparse

import pytest
from redis.asyncio import Redis

from bench.e2e.round_trip import measure


async def test_every_path_gets_a_figure_and_the_keys_go(
    redis: Redis, admin_redis: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await measure(redis, argparse.Namespace(owners=2, rounds=3, every=0.1, runs=1), prefix)
    printed = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[1].strip() for line in printed] == [
        "timer alone",
        "redis-py Pipeline",
        "own connection (Line)",
    ]
    assert all(line.endswith("µs of CPU per round") for line in printed)
    assert await admin_redis.keys(f"{prefix}*") == []

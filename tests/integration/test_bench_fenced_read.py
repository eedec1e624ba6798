"""The fenced-read benchmark (bench/e2e/fenced_read.py) reads the whole log both ways against a
real Redis (a way that read less fails here) and leaves none of its keys behind."""

from __future__ import annotations

import argparse

import pytest
from redis.asyncio import Redis

from bench.e2e.fenced_read import WAYS, measure


async def test_both_ways_read_the_log_and_the_keys_go(
    admin_redis: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    best = await measure(admin_redis, argparse.Namespace(count=4, batches=3, runs=1), prefix)
    assert set(best) == set(WAYS)
    assert all(0 <= us < float("inf") for us in best.values())
    printed = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[1].strip() for line in printed] == list(WAYS)
    assert await admin_redis.keys(f"{prefix}*") == []

"""The light-load commit benchmark (bench/e2e/commit_cost.py) plays real rounds against a real
Redis: every commit must be applied and no idle owner read, or it fails here rather than print a
figure; and it leaves none of its keys behind."""

from __future__ import annotations

import argparse

import pytest
from redis.asyncio import Redis

from bench.e2e.commit_cost import measure


def small(**overrides: object) -> argparse.Namespace:
    values: dict[str, object] = {"owners": 4, "busy": 2, "entries": 3, "rounds": 5}
    return argparse.Namespace(**{**values, **overrides})


async def test_rounds_commit_and_their_figures_add_up(
    admin_redis: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = await measure(admin_redis, small(), prefix)
    assert figures["round_us"] > figures["commands_us"] > 0
    assert figures["script_own_us"] == pytest.approx(figures["round_us"] - figures["commands_us"])
    printed = capsys.readouterr().out
    assert "xack" in printed  # the commits ran and acked their entries
    assert "xadd" in printed
    assert await admin_redis.keys(f"{prefix}*") == []


async def test_a_workload_too_short_for_the_rounds_is_refused(
    admin_redis: Redis, prefix: str
) -> None:
    with pytest.raises(RuntimeError, match="ran out"):
        await measure(admin_redis, small(owners=1, busy=1, entries=400, rounds=100), prefix)
    assert await admin_redis.keys(f"{prefix}*") == []

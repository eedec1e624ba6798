"""`python -m bench.e2e --realistic` (bench/e2e/realistic.py) plays a small schedule straight to
the session streams and through one real worker: every delta becomes a frame the reader sees,
nothing is dead-lettered, and the report carries the keys later A/Bs compare. Timings are
reported, never asserted."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from bench.e2e.__main__ import main_async, parse
from bench.e2e.arrivals import Model
from bench.e2e.schedule import build

KEYS = {
    "realistic_concurrent_turns",
    "realistic_tokens",
    "realistic_tokens_per_s",
    "realistic_entries_per_token",
    "realistic_frames_per_token",
    "realistic_worker_cpu_us_per_token",
    "realistic_redis_cpu_us_per_token",
    "realistic_raw_redis_cpu_us_per_token",
    "realistic_net_cpu_us_per_token",
    "realistic_added_p50_ms",
    "realistic_added_p99_ms",
    "realistic_added_p999_ms",
}


@pytest.mark.skipif(
    os.environ.get("TERMINUS_TEST_REDIS_TLS") == "1", reason="the benchmark runs on plain TCP"
)
async def test_the_schedule_reaches_the_reader_through_a_worker_and_is_counted_per_token(
    redis_url: str, tmp_path: Path
) -> None:
    argv = ["--realistic", "--turns", "8", "--seconds", "3", "--partitions", "4", "--seed", "5"]
    report = await main_async(parse([*argv, "--redis-url", redis_url]), redis_url, tmp_path)

    schedule = build(Model(turns=8, seconds=3.0), 5)
    assert report.keys() >= KEYS
    assert report["realistic_tokens"] == schedule.tokens > 0
    assert report["realistic_entries"] == len(schedule.events)
    assert report["realistic_dead_letters"] == 0
    assert report["realistic_unseen"] == report["realistic_raw_unseen"] == 0
    assert report["realistic_samples"] > 0
    # A frame per delta, and the text-start and step frames besides.
    assert report["realistic_frames"] >= report["realistic_tokens"]
    assert report["realistic_entries_per_token"] > 1
    for key in KEYS - {"realistic_worker_cpu_us_per_token", "realistic_net_cpu_us_per_token"}:
        assert math.isfinite(report[key]), key

"""`python -m bench.e2e --traces` (bench/e2e/traced.py) drains the same workload with one real
worker, without and then with a real `terminus traces` follower beside it, and the follower's
spans reach the benchmark's receiver: a ratio with no export behind it would measure nothing.
Timings are reported, never asserted."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from bench.e2e.__main__ import main_async, parse
from bench.e2e.workload import sized


@pytest.mark.skipif(
    os.environ.get("TERMINUS_TEST_REDIS_TLS") == "1", reason="the benchmark runs on plain TCP"
)
async def test_both_drains_are_reported_with_their_ratio_and_the_spans_arrive(
    redis_url: str, tmp_path: Path
) -> None:
    argv = ["--traces", "--events", "600", "--deltas", "5", "--partitions", "4", "--repeat", "1"]
    report = await main_async(parse([*argv, "--redis-url", redis_url]), redis_url, tmp_path)

    plain, traced = report["e2e_events_per_s_1w"], report["e2e_events_per_s_traces"]
    ratio = report["traces_drain_ratio"]
    assert plain > 0
    assert traced > 0
    assert ratio == traced / plain
    assert math.isfinite(ratio)
    assert ratio > 0
    assert report["frames_traces"] == report["frames_1w"] == report["expected_frames"]
    turns = len({e.turn_id for e in sized(1, 600, 5)})
    assert report["traces_spans_received"] >= 2 * turns, "a turn's span and its attempts'"
    assert report["traces_export_requests"] >= 1
    assert report["traces_lag_s"] >= 0

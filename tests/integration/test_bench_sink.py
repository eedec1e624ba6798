"""The benchmark's sink phase (`python -m bench.e2e --sink`, bench/e2e/sinking.py): after a
1-worker drain, a real `terminus sink --once` writes the same log into SQLite, and the report
has the sink's rows, rows/s and its ratio to the drain. Timing is never asserted: only that the
phase measured what it names (every row of the workload written, none refused)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from redis.asyncio import Redis

from bench.e2e.__main__ import parse
from bench.e2e.phases import Run
from bench.e2e.sinking import sink_phase
from bench.e2e.workload import sized
from terminus.service.keys import DEFAULT_PREFIX

KEYS = (
    "sink_entries",
    "sink_rows",
    "sink_refused",
    "sink_s",
    "sink_rows_per_s",
    "sink_events_per_s",
    "sink_drain_s",
    "sink_drain_events_per_s",
    "sink_drain_rows_per_s",
    "sink_over_drain",
    "sink_over_drain_from_spawn",
)


@pytest.mark.skipif(
    os.environ.get("TERMINUS_TEST_REDIS_TLS") == "1", reason="the benchmark runs on plain TCP"
)
async def test_the_sink_phase_writes_the_drained_log_and_reports_its_rate(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    events = sized(7, 600, 5)
    args = parse(["--redis-url", redis_url, "--partitions", "4", "--batch-size", "64", "--sink"])
    run = Run(args, redis, redis_url, tmp_path)
    try:
        report = await sink_phase(run, events)
    finally:
        run.stop_all()
        await run.drop_keys()
    assert set(KEYS) <= set(report), sorted(report)
    turns = {(e.session_id, e.turn_id) for e in events}
    assert report["sink_entries"] == len(events)
    assert report["sink_rows"] > len(turns), "each turn's end, and its message at each step"
    assert report["sink_refused"] == 0
    assert all(report[k] > 0 for k in KEYS if k != "sink_refused")
    assert not list(tmp_path.glob("*.db")), "the database goes with the phase"
    assert not await redis.keys(f"{run.prefix}*"), f"{DEFAULT_PREFIX}: the phase's keys are deleted"

"""`python -m bench.fanout` on a small load: every subscriber is served and gets every frame of
its session once and in order, even with more subscribers to a session than one gateway token
may hold streams (TERMINUS_MAX_STREAMS_PER_TOKEN, 8): each subscriber has a token of its own, as
each frontend does. A run that measured fewer subscribers than it was asked to would fail here,
not give the capacity model (bench/capacity) a figure. Timings are reported, never asserted."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest

from terminus.service.settings import Settings

SUBSCRIBERS_PER_SESSION = Settings().max_streams_per_token + 2


@pytest.mark.skipif(
    os.environ.get("TERMINUS_TEST_REDIS_TLS") == "1", reason="the benchmark runs on plain TCP"
)
def test_more_subscribers_of_a_session_than_a_token_holds_are_all_served(
    single_redis_url: str,
) -> None:
    sessions = 2
    argv = ["--sessions", str(sessions), "--subscribers", str(sessions * SUBSCRIBERS_PER_SESSION)]
    argv += ["--rate", "200", "--seconds", "3", "--deltas", "20", "--settle", "10"]
    argv += ["--redis-url", single_redis_url, "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.fanout", *argv],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = msgspec.json.decode(done.stdout.strip().splitlines()[-1])
    assert report["subscriber_errors"] == 0, report["first_subscriber_error"]
    assert report["frames_lost"] == 0
    assert report["exactly_once_in_order"]
    assert report["frames_delivered"] > 0

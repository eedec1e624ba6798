"""`python -m bench.capacity --measure` (bench/capacity/measure.py) on a small load: a realistic
run at each load gives a cost point, the highest one's keys are weighed by kind, and the inputs
written are the ones the worked examples read back. Timings are reported, never asserted."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from bench.capacity.__main__ import load_inputs, main_async, parse
from bench.capacity.footprint import written
from bench.e2e.arrivals import Model
from bench.e2e.schedule import build


@pytest.mark.skipif(
    os.environ.get("TERMINUS_TEST_REDIS_TLS") == "1", reason="the benchmark runs on plain TCP"
)
@pytest.mark.parametrize("per_token", [False, True], ids=["default producer", "delta per token"])
async def test_measure_writes_costs_by_load_and_bytes_by_key_kind(
    redis_url: str, tmp_path: Path, per_token: bool
) -> None:
    path = tmp_path / "inputs.json"
    argv = ["--measure", "--loads", "4,8", "--seconds", "2", "--seed", "5", "--gateway-us", "40"]
    argv += ["--inputs", str(path), "--redis-url", redis_url, "--no-cluster"]
    argv += ["--one-delta-per-token"] if per_token else []
    out = await main_async(parse(argv), tmp_path)

    inputs = load_inputs(path)
    assert len(inputs.costs) == 2
    assert inputs.measured["loads_turns"] == [4, 8]
    for c in inputs.costs:
        assert c.tokens_per_s > 0
        assert 0 < c.worker_us_per_token < math.inf
        assert 0 < c.redis_us_per_token < math.inf
    # The log, the frames, the snapshots and the transitions all hold bytes for every token.
    assert {"in", "session", "turn", "transitions"} <= inputs.bytes_per_token.keys()
    assert all(b > 0 for b in inputs.bytes_per_token.values())
    tokens, turns = written(build(Model(turns=8, seconds=2.0), 5))
    assert inputs.measured["footprint_tokens"] == tokens
    assert inputs.tokens_per_turn == pytest.approx(tokens / turns)
    # A frame per delta: at least one per token when each token is a delta; fewer when a network
    # read's tokens are one delta, as the default producer publishes them.
    assert inputs.bytes_per_token["session"] > 0
    if per_token:
        assert inputs.frames_per_token >= 1
        assert "one text-delta per provider token" in str(inputs.measured["producer"])
    else:
        assert inputs.frames_per_token < 1
        assert "coalesce_reads" in str(inputs.measured["producer"])
    assert inputs.gateway_us_per_frame == 40
    assert [e["demand"]["concurrent_turns"] for e in out["examples"]] == [
        10_000,
        100_000,
        1_000_000,
    ]
    assert out["examples"][0]["plan"]["workers"] >= 1

"""The capacity model (bench/capacity/model.py): costs interpolated between measured loads and
held above them, and plans that never shrink as the load grows, and double with it above the
measured range."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.capacity.model import (
    CostPoint,
    Demand,
    Inputs,
    Limits,
    capacity,
    cost_at,
    curves,
    monotone,
    plan,
)

POINTS = [(1_000.0, 200.0), (3_000.0, 100.0), (6_000.0, 60.0)]
INPUTS = Inputs(
    costs=tuple(
        CostPoint(turns=load / 55, tokens_per_s=load, worker_us_per_token=c, redis_us_per_token=c)
        for load, c in POINTS
    ),
    bytes_per_token={"in": 200.0, "session": 220.0, "turn": 10.0},
    bytes_per_turn={"in": 40_000.0, "session": 44_000.0, "turn": 2_000.0},
    tokens_per_turn=200.0,
    frames_per_token=1.01,
    gateway_us_per_frame=40.0,
)
turns = st.floats(min_value=1, max_value=2e6, allow_nan=False)


def test_cost_is_the_measured_one_at_a_measured_load() -> None:
    for load, cost in POINTS:
        assert cost_at(POINTS, load) == pytest.approx(cost)


def test_cost_between_two_loads_lies_between_their_costs_on_log_axes() -> None:
    middle = math.sqrt(1_000 * 3_000)
    assert cost_at(POINTS, middle) == pytest.approx(math.sqrt(200 * 100))


def test_cost_holds_above_the_highest_load_and_rises_below_the_lowest() -> None:
    assert cost_at(POINTS, 60_000) == 60.0
    slope = math.log(100 / 200) / math.log(3_000 / 1_000)  # the first segment's
    assert cost_at(POINTS, 500) == pytest.approx(200 * 0.5**slope)
    assert cost_at(POINTS, 500) > 200


def test_monotone_moves_a_cost_that_rises_with_load_and_one_that_falls_too_fast() -> None:
    rising = monotone([(1_000, 100.0), (2_000, 150.0)])
    assert rising == [(1_000, 100.0), (2_000, 100.0)]
    # 1,000 tokens/s at 100 µs is 0.1 core: 4,000 tokens/s may not take less.
    too_fast = monotone([(1_000, 100.0), (4_000, 10.0)])
    assert too_fast == [(1_000, 100.0), (4_000, 25.0)]


def test_capacity_is_the_load_that_fills_the_budget() -> None:
    most = capacity(POINTS, 0.7e6)
    assert most * cost_at(POINTS, most) == pytest.approx(0.7e6)
    inside = capacity(POINTS, 0.2e6)  # within the measured range: bisected
    assert inside * cost_at(POINTS, inside) == pytest.approx(0.2e6, rel=1e-6)


@given(turns, turns)
def test_more_turns_never_need_less(a: float, b: float) -> None:
    low, high = sorted((a, b))
    small, large = (
        plan(Demand(concurrent_turns=low), INPUTS),
        plan(Demand(concurrent_turns=high), INPUTS),
    )
    for field in ("workers", "shards", "redis_gb", "gateway_processes", "cores", "redis_cores"):
        assert getattr(large, field) >= getattr(small, field) - 1e-9, field


@given(turns)
def test_no_process_or_shard_runs_above_its_share_of_a_core(n: float) -> None:
    p, limits = plan(Demand(concurrent_turns=n), INPUTS), Limits()
    assert p.worker_cores / p.workers <= limits.core_share + 1e-9
    assert p.redis_cores / p.shards <= limits.core_share + 1e-9
    assert p.gateway_cores / p.gateway_processes <= limits.core_share + 1e-9


@given(st.floats(min_value=10_000, max_value=1e6))
def test_doubling_the_load_above_the_measured_range_doubles_what_it_needs(n: float) -> None:
    one, two = (
        plan(Demand(concurrent_turns=n), INPUTS),
        plan(Demand(concurrent_turns=2 * n), INPUTS),
    )
    assert one.worker_load > POINTS[-1][0]  # each worker above the highest measured load
    for field in ("workers", "shards", "gateway_processes"):
        assert 2 * getattr(one, field) - 1 <= getattr(two, field) <= 2 * getattr(one, field)
    for field in ("worker_cores", "redis_cores", "redis_gb"):
        assert getattr(two, field) == pytest.approx(2 * getattr(one, field))


def test_memory_is_the_window_of_tokens_times_their_bytes_and_the_overhead() -> None:
    demand = Demand(concurrent_turns=10_000, tokens_per_s_per_turn=50, retain_s=600)
    p = plan(demand, INPUTS, Limits(memory_overhead=1.5))
    assert p.redis_gb == pytest.approx(500_000 * 430 * 600 * 1.5 / 1e9)
    assert p.shards_for_memory == math.ceil(p.redis_gb / Limits().shard_gb)
    assert p.redis_gb_per_hour_unretained == pytest.approx(500_000 * 430 * 3600 / 1e9)


def test_a_light_load_takes_one_of_each_at_the_light_loads_cost() -> None:
    p = plan(Demand(concurrent_turns=20, tokens_per_s_per_turn=50), INPUTS)
    assert (p.workers, p.shards, p.gateway_processes) == (1, 1, 1)
    assert p.worker_cores == pytest.approx(1_000 * 200 / 1e6)


def test_costs_are_priced_at_a_workers_load_not_the_platforms() -> None:
    """Two workers at 15,000 tokens/s each carry fewer entries a round than one at 30,000
    would: each token costs what the curve says at 15,000 (between 60 and 30 µs), not 30."""
    points = [*POINTS, (20_000.0, 30.0)]
    costs = tuple(
        CostPoint(turns=r / 55, tokens_per_s=r, worker_us_per_token=c, redis_us_per_token=c)
        for r, c in points
    )
    inputs = Inputs(**{**msgspec.structs.asdict(INPUTS), "costs": costs})
    p = plan(Demand(concurrent_turns=600, tokens_per_s_per_turn=50), inputs)
    assert (p.workers, p.worker_load) == (2, 15_000)
    assert p.redis_cores == pytest.approx(30_000 * cost_at(points, 15_000) / 1e6)
    assert p.redis_cores > 30_000 * 30 / 1e6


def test_a_plan_prices_tokens_at_the_clusters_costs_where_they_were_measured() -> None:
    dearer = tuple(
        msgspec.structs.replace(c, worker_us_per_token=2 * c.worker_us_per_token)
        for c in INPUTS.costs
    )
    on_cluster = msgspec.structs.replace(INPUTS, cluster_costs=dearer)
    demand = Demand(concurrent_turns=20, tokens_per_s_per_turn=50)
    assert curves(on_cluster, cluster=False) == curves(INPUTS)
    assert plan(demand, on_cluster).worker_cores == pytest.approx(
        2 * plan(demand, INPUTS).worker_cores
    )

"""The linger a pump keeps between rounds at light load (service/runtime/pump.py, `linger_s`):
a set `linger_ms` as it is, else what `latency_budget_ms` leaves, shrinking as rounds get slower.
The pump is made, never run: a Redis client connects only when used."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from terminus.service.runtime.pump import SLACK_S, Pump
from terminus.service.settings import Settings


def pump(**settings: int | None) -> Pump:
    return Pump(Redis(), Settings(**settings))  # type: ignore[arg-type]


def test_a_set_linger_is_kept_whatever_the_rounds_take() -> None:
    fixed = pump(linger_ms=3, latency_budget_ms=1000)
    fixed.round_s = 0.5
    assert fixed.linger_s() == 0.003


def test_the_default_budget_lingers_about_six_ms_between_quick_rounds() -> None:
    quick = pump()
    quick.round_s = 0.0005
    assert quick.linger_s() == pytest.approx((0.016 - SLACK_S - 0.0005) / 2)
    assert 0.005 < quick.linger_s() < 0.007


@given(
    budget_ms=st.integers(0, 10_000),
    faster=st.floats(0, 5, allow_nan=False),
    slower=st.floats(0, 5, allow_nan=False),
)
def test_slower_rounds_never_linger_longer_and_the_linger_fits_the_budget(
    budget_ms: int, faster: float, slower: float
) -> None:
    faster, slower = sorted((faster, slower))
    a, b = pump(latency_budget_ms=budget_ms), pump(latency_budget_ms=budget_ms)
    a.round_s, b.round_s = faster, slower
    assert 0 <= b.linger_s() <= a.linger_s()
    # Two lingers, a round and the slack: within the budget whenever any linger is left.
    if a.linger_s() > 0:
        assert 2 * a.linger_s() + a.round_s + SLACK_S == pytest.approx(budget_ms / 1000)

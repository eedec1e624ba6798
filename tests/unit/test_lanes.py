"""How a worker's lanes follow the load (service/runtime/lanes.py): one lane at light load, all of
them after full rounds in a row, back to one when the lanes' rounds carried, on average over the
window, under three quarters of a full round between them; owners handed over only by their own
lane, never while starting or stopping. Rounds are simulated: each tallies what a pump read and
calls `balance` as the pump does at the top of its next round, with the clock set by the test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from terminus.service.runtime import lanes as lanes_module
from terminus.service.runtime.lanes import FULL_ROUNDS, Lanes
from terminus.service.runtime.owner import PartitionOwner, Phase
from terminus.service.runtime.pump import Pump
from terminus.service.settings import Settings

SETTINGS = Settings(prefix="t-lanes", partitions=16, batch_size=512, lanes=4)
FULL = SETTINGS.batch_size // 4


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(lanes_module, "monotonic", clock)
    return clock


@pytest.fixture
async def lanes() -> AsyncIterator[Lanes]:
    redis = Redis()  # never connected: nothing here talks to Redis
    lanes = Lanes(redis, SETTINGS, settle_s=1.0)
    for partition in (3, 5, 8, 13, 14):
        owner = PartitionOwner(redis, SETTINGS, partition, "w", 1)
        owner.phase = Phase.WAIT
        lanes.add(owner)
    yield lanes
    await redis.aclose()


def round_of(lanes: Lanes, pump: Pump, read: int) -> None:
    pump.tally(read)
    lanes.balance(pump)


def spread(lanes: Lanes) -> None:
    for _ in range(FULL_ROUNDS):
        round_of(lanes, lanes.pumps[0], FULL)


def placement(lanes: Lanes) -> dict[int, int]:
    return {p: n for n, pump in enumerate(lanes.pumps) for p in pump.owners}


async def test_light_rounds_keep_every_owner_on_the_first_lane(lanes: Lanes, clock: Clock) -> None:
    for n in range(100):
        clock.now += 0.002
        round_of(lanes, lanes.pumps[0], FULL - 1 if n % 2 else 0)
    assert lanes.active == 1
    assert set(placement(lanes).values()) == {0}
    assert lanes.moves == 0


async def test_full_rounds_in_a_row_spread_the_owners_by_rank(lanes: Lanes, clock: Clock) -> None:
    first = lanes.pumps[0]
    for _ in range(5):  # full, then light: what one lane that keeps up does
        round_of(lanes, first, FULL)
        round_of(lanes, first, FULL // 2)
    for _ in range(FULL_ROUNDS - 1):
        round_of(lanes, first, FULL)
    assert lanes.active == 1
    round_of(lanes, first, FULL)
    assert lanes.active == 4
    assert placement(lanes) == {3: 0, 5: 1, 8: 2, 13: 3, 14: 0}
    assert lanes.moves == 3


async def test_the_lanes_gather_once_the_average_round_is_under_three_quarters_full(
    lanes: Lanes, clock: Clock
) -> None:
    spread(lanes)
    # A window (1 s) of 4 lanes whose rounds read, between them, 0.8 of a full round on
    # average: kept.
    for _ in range(50):
        for pump in lanes.pumps:
            clock.now += 0.005
            round_of(lanes, pump, FULL * 8 // 10 // 4)
    assert lanes.active == 4
    # Two windows of 0.6 on average, though every lane reads nearly a full round once in each:
    # single rounds vary by chance, and the average is what counts.
    for n in range(100):
        for pump in lanes.pumps:
            clock.now += 0.005
            round_of(lanes, pump, FULL - 1 if n % 50 == 25 else FULL * 6 // 10 // 4)
    assert lanes.active == 1
    # Each lane gives its owners back at the top of its own round.
    for pump in lanes.pumps:
        round_of(lanes, pump, 0)
    assert set(placement(lanes).values()) == {0}


async def test_the_window_is_settle_s_long(lanes: Lanes, clock: Clock) -> None:
    spread(lanes)
    for _ in range(10):
        clock.now += 0.09  # 0.9 s of idle rounds in all: not a whole window yet
        round_of(lanes, lanes.pumps[1], 0)
    assert lanes.active == 4
    clock.now += 0.2
    round_of(lanes, lanes.pumps[2], 0)
    assert lanes.active == 1


async def test_owners_starting_or_stopping_stay_on_their_lane(lanes: Lanes, clock: Clock) -> None:
    first = lanes.pumps[0]
    first.owners[5].phase = Phase.RESTART
    first.owners[8].stop()
    spread(lanes)
    assert placement(lanes) == {3: 0, 5: 0, 8: 0, 13: 3, 14: 0}

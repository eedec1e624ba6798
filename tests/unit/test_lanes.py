"""How a worker's lanes follow the load (service/runtime/lanes.py): one lane at light load, twice
as many after full rounds in a row, back to as many as before once the rate the worker reads at
falls under half of what it was then; owners handed over only by their own lane, never while
starting or stopping. Rounds are simulated: each tallies what a pump read and calls `balance` as
the pump does at the top of its next round, with the clock set by the test (in steps of 1/256 s,
which add up exactly)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

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
async def lanes(clock: Clock) -> AsyncIterator[Lanes]:
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


def full_rounds(lanes: Lanes, clock: Clock) -> None:
    """Full rounds in a row on the first lane, 1/256 s apart (32,768 entries/s): the lanes in use
    cannot keep up."""
    for _ in range(FULL_ROUNDS):
        clock.now += 1 / 256
        round_of(lanes, lanes.pumps[0], FULL)


def window(
    lanes: Lanes, clock: Clock, read: Callable[[int], int], seconds: float = 1.0, per_s: int = 256
) -> None:
    """`per_s` rounds a second (a power of two) for `seconds`, by the lanes in use in turn, the
    kth reading `read(k)`: a rate of `per_s` times the mean read."""
    for k in range(round(seconds * per_s)):
        clock.now += 1 / per_s
        round_of(lanes, lanes.pumps[k % lanes.active], read(k))


def placement(lanes: Lanes) -> dict[int, int]:
    return {p: n for n, pump in enumerate(lanes.pumps) for p in pump.owners}


async def test_light_rounds_keep_every_owner_on_the_first_lane(lanes: Lanes, clock: Clock) -> None:
    first = lanes.pumps[0]
    window(lanes, clock, lambda k: FULL - 1 if k % 2 else 0, seconds=3)
    for _ in range(5):  # full, then light: what a lane that keeps up does
        round_of(lanes, first, FULL)
        round_of(lanes, first, FULL // 2)
    assert lanes.active == 1
    assert set(placement(lanes).values()) == {0}
    assert lanes.moves == 0


async def test_full_rounds_in_a_row_double_the_lanes_and_spread_the_owners_by_rank(
    lanes: Lanes, clock: Clock
) -> None:
    first = lanes.pumps[0]
    for _ in range(FULL_ROUNDS - 1):
        round_of(lanes, first, FULL)
    assert lanes.active == 1
    round_of(lanes, first, FULL)
    assert (lanes.active, placement(lanes)) == (2, {3: 0, 5: 1, 8: 0, 13: 1, 14: 0})
    # Full rounds count again from the change: the ones before it do not double again.
    round_of(lanes, first, FULL)
    assert lanes.active == 2
    for _ in range(FULL_ROUNDS - 1):
        round_of(lanes, first, FULL)
    # A lane hands over only what it holds, at the top of its own round: 13 belongs on lane 3
    # now, and lane 1 gives it up when it rounds.
    assert (lanes.active, placement(lanes)) == (4, {3: 0, 5: 1, 8: 2, 13: 1, 14: 0})
    round_of(lanes, lanes.pumps[1], FULL // 2)
    assert placement(lanes) == {3: 0, 5: 1, 8: 2, 13: 3, 14: 0}
    assert lanes.moves == 4  # 5 and 13 to lane 1, then 8 to lane 2 and 13 to lane 3
    assert (lanes.metrics.lanes, lanes.metrics.lane_changes) == (4, {"grew": 2})


async def test_lanes_go_once_the_rate_falls_under_half_of_what_brought_them(
    lanes: Lanes, clock: Clock
) -> None:
    window(lanes, clock, lambda k: 60)  # 15,360 entries/s on one lane
    full_rounds(lanes, clock)  # two lanes, brought by 32,768 entries/s
    window(lanes, clock, lambda k: 64)  # 16,384: half of it, not under
    assert lanes.active == 2
    full_rounds(lanes, clock)  # four lanes, brought by 32,768 entries/s too
    # Each lane's rounds are much lighter than one lane's were; the rate is what counts.
    window(lanes, clock, lambda k: 63)  # 16,128: back to two
    assert lanes.active == 2
    window(lanes, clock, lambda k: 63)  # under half of what brought two: one
    assert lanes.active == 1
    assert lanes.metrics.lane_changes == {"grew": 2, "shrank": 2}
    # Each lane gives its owners back at the top of its own round.
    for pump in lanes.pumps:
        round_of(lanes, pump, 0)
    assert set(placement(lanes).values()) == {0}


async def test_a_load_at_the_edge_of_one_lane_keeps_two(lanes: Lanes, clock: Clock) -> None:
    """One lane reads 23,040 entries/s in rounds of 90 and falls behind; two carry the same rate
    in rounds of 22 or 23 (each lingers on its own: more rounds, and lighter). Rounds that light
    would pass for a load one lane carries; the rate says otherwise, and two lanes stay."""
    window(lanes, clock, lambda k: 90)
    full_rounds(lanes, clock)
    window(lanes, clock, lambda k: 22 + k % 2, seconds=10, per_s=1024)
    assert (lanes.active, lanes.metrics.lane_changes) == (2, {"grew": 1})


async def test_the_window_is_settle_s_long(lanes: Lanes, clock: Clock) -> None:
    window(lanes, clock, lambda k: 60)
    full_rounds(lanes, clock)
    window(lanes, clock, lambda k: 0, seconds=0.9)
    assert lanes.active == 2
    window(lanes, clock, lambda k: 0, seconds=0.2)
    assert lanes.active == 1


async def test_owners_starting_or_stopping_stay_on_their_lane(lanes: Lanes, clock: Clock) -> None:
    first = lanes.pumps[0]
    first.owners[5].phase = Phase.RESTART
    first.owners[8].stop()
    full_rounds(lanes, clock)
    full_rounds(lanes, clock)
    for pump in lanes.pumps:
        round_of(lanes, pump, 0)
    assert (lanes.active, placement(lanes)) == (4, {3: 0, 5: 0, 8: 0, 13: 3, 14: 0})

"""The stall timer: `attempt-stalled` for turns silent past their deadline (DESIGN section 5).

The owner of a partition scans the open-turns sorted set, scored by each turn's deadline on the
log's clock (entry ids), against the server's clock, and appends an `attempt-stalled` to the
inbound log through a lease-fenced script. A pump scans all its owners that are due at once
(`scan_all`): one TIME and one pipeline of their sets, where a scan of each on its own cost two
round trips per owner and second, a few per cent of a worker's CPU at light load.

The machine only ever sees a stall as an event, so a replay applies the same stall at the same
place. A producer that is merely slow and publishes the same seq later finds it taken: its event
is then a duplicate or superseded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final

from redis.asyncio import Redis

from terminus.events.codec import encode_event
from terminus.events.inbound import AttemptStalled
from terminus.service.fold.applier import PartitionFold, load_turns
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.connect import TRANSIENT, execute
from terminus.service.redis.scripts import script
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn

SCAN_LIMIT: Final = 100


class StallTimer:
    """Appends `attempt-stalled` for the due turns of one partition, at most once per position."""

    def __init__(
        self, redis: Redis, keys: Keys, lease: str, fold: PartitionFold, settings: Settings
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.lease = lease
        self.fold = fold
        self.interval = max(0.05, min(settings.stall_timeout_ms / 4000, 1.0))
        self._next_scan = 0.0
        self._sent: set[tuple[str, int, int, int]] = set()

    def committed(self) -> None:
        """A batch landed; positions it moved past can never be stalled again."""
        if len(self._sent) > 10_000:
            self._sent.clear()

    def due_in(self, now: float | None = None) -> float:
        """Seconds until the next scan is due (0 if it is), at `now` (monotonic) if given."""
        return max(0.0, self._next_scan - (time.monotonic() if now is None else now))

    def scanning(self) -> None:
        """A scan starts now: the next is due an interval later."""
        self._next_scan = time.monotonic() + self.interval

    async def scan(self) -> int:
        """Scan this timer alone, due or not; returns how many stalls were appended."""
        [outcome] = await scan_all(self.redis, [self])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def stall(self, now_ms: int, turn_ids: list[str]) -> int:
        """Append a stall for each of `turn_ids`, due at `now_ms`, that is still open."""
        await load_turns(self.redis, self.fold, turn_ids)
        appended = 0
        for turn_id in turn_ids:
            turn = self.fold.turns.get(turn_id)
            if turn is not None and turn.state not in FINAL_STATES:
                appended += await self._stall_turn(turn, now_ms)
        return appended

    async def _stall_turn(self, turn: Turn, now_ms: int) -> int:
        position = (turn.turn_id, turn.step, turn.attempt, turn.last_seq + 1)
        if position in self._sent:
            return 0
        event = AttemptStalled(
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            step=turn.step,
            attempt=turn.attempt,
            seq=turn.last_seq + 1,
            ts_ms=now_ms,
        )
        run = script(self.redis, "append_owned")
        keys = [self.keys.lease, self.keys.inbound]
        if await run(keys=keys, args=[self.lease, FIELD, encode_event(event)]) == 0:
            return 0  # the lease moved on; the new owner's timer decides
        self._sent.add(position)
        return 1


async def scan_all(redis: Redis, timers: Sequence[StallTimer]) -> list[int | Exception]:
    """Scan every timer in `timers` at the server's clock: one TIME, then the due turns of each
    in one pipeline (one per node on a cluster). For each timer in turn, how many stalls it
    appended, or the error that failed its scan alone (its set holds no sorted set, its append
    failed); a connection error is raised, as it fails them all."""
    if not timers:
        return []
    for timer in timers:
        timer.scanning()
    seconds, micros = await redis.time()
    now_ms = seconds * 1000 + micros // 1000
    pipe = redis.pipeline(transaction=False)
    for timer in timers:
        pipe.zrangebyscore(timer.keys.open_turns, "-inf", now_ms, 0, SCAN_LIMIT)
    found = await execute(pipe, raise_on_error=False)
    outcomes: list[int | Exception] = []
    for timer, due in zip(timers, found, strict=True):
        if isinstance(due, TRANSIENT):
            raise due
        if isinstance(due, Exception):
            outcomes.append(due)
            continue
        try:
            outcomes.append(await timer.stall(now_ms, [m.decode() for m in due]))
        except TRANSIENT:
            raise
        except Exception as exc:
            outcomes.append(exc)
    return outcomes

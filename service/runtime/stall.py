"""The stall timer: `attempt-stalled` for turns silent past their deadline (DESIGN section 5).

The owner of a partition scans the open-turns sorted set, scored by each turn's deadline on the
log's clock (entry ids), against the server's clock, and appends an `attempt-stalled` to the
inbound log through a lease-fenced script. The machine only ever sees it as an event, so a
replay applies the same stall at the same place. A producer that is merely slow and publishes
the same seq later finds it taken: its event is then a duplicate or superseded.
"""

from __future__ import annotations

import time
from typing import Final

from redis.asyncio import Redis

from terminus.events.codec import encode_event
from terminus.events.inbound import AttemptStalled
from terminus.service.fold.applier import PartitionFold, load_turns
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.replies import zrange_due
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

    def due_in(self) -> float:
        """Seconds until the next scan is due (0 if it is)."""
        return max(0.0, self._next_scan - time.monotonic())

    async def tick(self) -> int:
        """Scan if the interval has passed; returns how many stalls were appended."""
        if time.monotonic() < self._next_scan:
            return 0
        self._next_scan = time.monotonic() + self.interval
        return await self.scan()

    async def scan(self) -> int:
        seconds, micros = await self.redis.time()
        now_ms = seconds * 1000 + micros // 1000
        turn_ids = await zrange_due(self.redis, self.keys.open_turns, now_ms, SCAN_LIMIT)
        await load_turns(self.redis, self.fold, turn_ids)
        appended = 0
        for turn_id in turn_ids:
            turn = self.fold.turns.get(turn_id)
            if turn is not None and turn.state not in FINAL_STATES:
                appended += await self._stall(turn, now_ms)
        return appended

    async def _stall(self, turn: Turn, now_ms: int) -> int:
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

"""The floor consumer's loop (bench/floor/__init__.py says what it is and leaves out)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.events.codec import CodecError, decode_event
from terminus.service.keys import FIELD, GROUP, Keys, keys_for_session
from terminus.service.runtime.line import Command, Line
from terminus.service.runtime.pump import SLACK_S
from terminus.service.settings import Settings

CONSUMER: Final = "floor"
DEADLINE_S: Final = 5.0
BLOCK_MS: Final = 100  # the blocking read while nothing comes
ROUND_MS: Final = 1.0  # a pump's round at light load, its fold included (about)
# terminus's default linger at light load, as Pump.linger_s derives it from the default budget
DEFAULT_LINGER_MS: Final = (Settings().latency_budget_ms - SLACK_S * 1000 - ROUND_MS) / 2


class Floor:
    """One consumer of every partition's inbound log: `start` makes the groups, `loop` runs the
    rounds until `stopping`."""

    def __init__(self, redis: Redis, prefix: str, partitions: int, batch: int) -> None:
        self.redis = redis
        self.prefix = prefix
        self.partitions = partitions
        self.batch = batch
        self.streams = [Keys(p, prefix).inbound for p in range(partitions)]
        self.read_head = (b"XREADGROUP", b"GROUP", GROUP, CONSUMER, b"COUNT", batch)
        self.read_tail = (b"STREAMS", *self.streams, *(b">" for _ in self.streams))
        self.line = Line(redis, DEADLINE_S)  # the pump's own connection: no Pipeline's cost
        self.stopping = False

    async def start(self) -> None:
        for stream in self.streams:
            with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists already
                await self.redis.xgroup_create(stream, GROUP, "0", mkstream=True)

    async def loop(self, linger_s: float) -> None:
        read: list[tuple[bytes, list[Any]]] = []
        last = time.monotonic()
        while not self.stopping:
            count = sum(len(entries) for _, entries in read)
            if read and count < self.batch // 4:  # light load: gather for the rest of a linger
                await asyncio.sleep(max(0.0, last + linger_s - time.monotonic()))
            last = time.monotonic()
            commands: list[Command] = []
            for stream, entries in read:
                for _, fields in entries:
                    self._frame(commands, fields)
                commands.append((b"XACK", stream, GROUP, *(entry_id for entry_id, _ in entries)))
            block = () if read else (b"BLOCK", BLOCK_MS)
            commands.append((*self.read_head, *block, *self.read_tail))
            replies = await self.line.run(commands)
            reply = replies[-1] or []
            # A map on RESP3 (the worker's clients speak it), pairs on RESP2.
            pairs = reply.items() if isinstance(reply, dict) else reply
            read = [(stream, entries) for stream, entries in pairs if entries]

    def _frame(self, commands: list[Command], fields: list[bytes]) -> None:
        raw = fields[1] if len(fields) == 2 and fields[0] == FIELD else b""
        try:
            session = decode_event(raw).session_id
        except CodecError:
            return  # a floor: what terminus would dead-letter costs it nothing here
        stream = keys_for_session(session, self.partitions, self.prefix).session(session)
        commands.append((b"XADD", stream, b"*", FIELD, raw))

"""The soak's view of the inbound logs: every entry read back as it lands, so that each event the
producer had acknowledged is found in its partition's log, once (first copies: a publish retried
after a Redis restart may repeat a prefix) and in the order it was published. Read live, before
retention could trim it; the entries no decoder accepts (the injected junk) are skipped here and
checked as dead letters instead.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bench.soak.reads import read_streams
from terminus.events.codec import CodecError, decode_event, sniff_format
from terminus.service.keys import FIELD, Keys
from terminus.service.settings import Settings

Position = tuple[str, int, int, int]  # turn, step, attempt, seq: an event's identity
READ_COUNT: Final = 2000
BLOCK_MS: Final = 100


def stream_id(text: str) -> tuple[int, int]:
    """A stream entry id as a pair that compares as Redis orders ids."""
    ms, _, seq = text.partition("-")
    return int(ms), int(seq)


class LogReader:
    """Follows every partition's inbound log, keeping the positions of the sessions in play."""

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.streams = [Keys(p, settings.prefix).inbound for p in range(settings.partitions)]
        self.cursors = dict.fromkeys(self.streams, "0-0")
        self.logged: dict[str, list[Position]] = defaultdict(list)
        self.wanted: set[str] = set()
        self.read_errors = 0

    def follow(self, session_id: str) -> None:
        """Keep the positions of this session's events from now on."""
        self.wanted.add(session_id)

    def caught_up(self, stream: str, entry_id: str) -> bool:
        """Whether the log `stream` has been read up to `entry_id`."""
        return stream_id(self.cursors[stream]) >= stream_id(entry_id)

    def take(self, session_id: str) -> list[Position]:
        """The session's positions in log order, forgotten from now on."""
        self.wanted.discard(session_id)
        return self.logged.pop(session_id, [])

    async def run(self) -> None:
        """Read every log until cancelled; a failed read is retried from the same cursors."""
        while True:
            try:
                async with asyncio.timeout(BLOCK_MS / 1000 + 10):
                    reply = await read_streams(self.redis, self.cursors, READ_COUNT, BLOCK_MS)
            except (RedisError, OSError, TimeoutError):
                raise_if_cancelled()
                self.read_errors += 1
                await asyncio.sleep(0.1)
                continue
            for key, entries in reply:
                for _, fields in entries:
                    self._note(fields.get(FIELD, b""))
                self.cursors[key.decode()] = entries[-1][0].decode()

    def _note(self, raw: bytes) -> None:
        try:
            event = decode_event(raw, sniff_format(raw))
        except CodecError:
            return
        if event.session_id in self.wanted:
            position = (event.turn_id, event.step, event.attempt, event.seq)
            self.logged[event.session_id].append(position)


def raise_if_cancelled() -> None:
    """Re-raise a cancellation that a client library turned into a read error: a cancel that
    lands as a read times out can come back as a timeout, and a read loop that retries it would
    never end (the soak then waits forever for its background readers)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError

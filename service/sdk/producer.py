"""The producer SDK: route a turn's events to their partition and publish them in batches.

    producer = Producer(redis)          # the deployment's partitions, as the pool recorded them
    turn = producer.turn("session-1", "turn-1")
    await turn.start()
    await turn.start_attempt(provider="anthropic", model="claude-sonnet-4")
    await turn.feed_bytes(chunk)        # raw response bytes (or feed_sse(text)), via the adapter
    await turn.close_attempt()          # EOF, whole or cut: stream-closed (or the stream's error)

`TurnRunner` (service/sdk/runner.py) drives such a turn to its end: attempts, retries and the
workers' decisions. Each stream entry has one field, `e`, holding the encoded event.

The partition count is the deployment's (service/shape.py): read from Redis before the first
publish (`ready`), and recorded there if nothing is yet. A count passed here or in
`TERMINUS_PARTITIONS` must agree with the recorded one: otherwise the first publish raises
`ShapeMismatch`, naming what to set, instead of writing where no worker reads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any, Final, Self

from redis.asyncio import Redis

from terminus.events.adapters import UpstreamLimits
from terminus.events.codec import MAX_EVENT_BYTES, EventTooLarge, Format, encode_event
from terminus.events.inbound import InboundEvent, type_of
from terminus.service.keys import DEFAULT_PREFIX, FIELD, Keys, partition_of
from terminus.service.redis.connect import execute
from terminus.service.sdk.batches import coalesce
from terminus.service.sdk.publisher import TurnPublisher
from terminus.service.settings import Settings
from terminus.service.shape import DEFAULT_PARTITIONS, configured, partitions_of

__all__ = ["Producer", "TurnPublisher", "coalesce"]

DEFAULT_LIMITS: Final = UpstreamLimits()


class Producer:
    """Publishes events to the inbound log of their session's partition."""

    def __init__(
        self,
        redis: Redis,
        *,
        partitions: int | None = None,
        prefix: str = DEFAULT_PREFIX,
        fmt: Format = "json",
        coalesce_ms: int = 0,
        coalesce_reads: bool = True,
        max_event_bytes: int = MAX_EVENT_BYTES,
        limits: UpstreamLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = redis
        self.clock = clock  # stamps ts_ms: the workers take reset times against it
        # None: the deployment's recorded count (service/shape.py), known once `ready()` ran.
        self.configured = partitions
        self.fallback = DEFAULT_PARTITIONS  # recorded if nothing is, and no count was set
        self._partitions: int | None = None
        self._agreeing = asyncio.Lock()
        self.prefix = prefix
        self.fmt: Format = fmt
        self.coalesce_ms = coalesce_ms
        # Each call's deltas of one part (one network read of a provider's stream) as one event:
        # fewer entries and frames at no latency (service/sdk/publisher.py). On by default: a
        # provider token was an entry, a frame and a reader's wake-up of its own (issue 37).
        self.coalesce_reads = coalesce_reads
        self.max_event_bytes = max_event_bytes
        self.limits = limits  # what its turns read from a provider, at most (docs/producers.md)

    @classmethod
    def from_settings(cls, redis: Redis, settings: Settings, **options: Any) -> Self:
        """A producer with the deployment's partitions, prefix, event size and upstream limits;
        its partition count follows the recorded one unless `TERMINUS_PARTITIONS` was set."""
        producer = cls(
            redis,
            partitions=settings.partitions if settings.partitions_given else None,
            prefix=settings.prefix,
            max_event_bytes=settings.max_event_bytes,
            limits=settings.upstream_limits(),
            **options,
        )
        producer.fallback = settings.partitions
        return producer

    async def ready(self) -> Self:
        """Agree with the deployment's shape, once: its recorded partition count, recorded
        first if nothing is. Raises `ShapeMismatch` (a count set here or in
        `TERMINUS_PARTITIONS` disagrees) or `ContractAhead` (the workers read an older
        contract); `publish` calls it."""
        if self._partitions is not None:
            return self
        # One read for every caller: the first publishes of many turns start at once, and a
        # read each would open as many connections to the node that holds the record.
        async with self._agreeing:
            if self._partitions is None:
                given, source = configured(self.configured)
                self._partitions = await partitions_of(
                    self.redis,
                    self.prefix,
                    given,
                    source=source,
                    by="producer",
                    fallback=self.fallback,
                )
        return self

    @property
    def partitions(self) -> int:
        """The partition count sessions are routed by; the recorded one once `ready()` ran."""
        if self._partitions is not None:
            return self._partitions
        if self.configured is None:
            raise RuntimeError("await producer.ready() first: the partition count is read then")
        return self.configured

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def keys(self, session_id: str) -> Keys:
        return Keys(partition_of(session_id, self.partitions), self.prefix)

    def inbound_key(self, session_id: str) -> str:
        return self.keys(session_id).inbound

    async def publish(self, events: Iterable[InboundEvent]) -> list[bytes]:
        """XADD every event in one pipeline round trip; returns the entry ids in order. Raises
        `EventTooLarge`, publishing none of them, if one encodes to more than `max_event_bytes`
        (the workers would dead-letter it: deployments set the same `TERMINUS_MAX_EVENT_BYTES`)."""
        await self.ready()
        encoded = [(event, encode_event(event, self.fmt)) for event in events]
        for event, raw in encoded:
            if len(raw) > self.max_event_bytes:
                raise self.too_large(event, len(raw))
        async with self.redis.pipeline(transaction=False) as pipe:
            for event, raw in encoded:
                pipe.xadd(self.inbound_key(event.session_id), {FIELD: raw})
            ids: list[bytes] = await execute(pipe)
        return ids

    def encoded_size(self, event: InboundEvent) -> int:
        """The bytes `event` takes in an entry."""
        return len(encode_event(event, self.fmt))

    def too_large(self, event: InboundEvent, size: int) -> EventTooLarge:
        """The error for an event of `size` bytes, over `max_event_bytes`."""
        return EventTooLarge(
            f"{type_of(event)} of turn {event.turn_id!r} encodes to {size} bytes, "
            f"over the limit of {self.max_event_bytes}",
            "$",
        )

    def turn(self, session_id: str, turn_id: str) -> TurnPublisher:
        return TurnPublisher(self, session_id, turn_id)

"""The producer SDK: number a turn's events, route them to their partition and publish in batches.

    producer = Producer(redis, partitions=16)
    turn = producer.turn("session-1", "turn-1")
    await turn.start()
    await turn.start_attempt(provider="anthropic", model="claude-sonnet-4")
    await turn.feed_bytes(chunk)        # raw response bytes (or feed_sse(text)), via the adapter
    await turn.close_attempt()          # EOF, whole or cut: stream-closed (or the stream's error)

Each stream entry has one field, `e`, holding the encoded event. An attempt's events are numbered
once, as they are made: the SDK's own and the adapter's take their seqs from one counter (`Seqs`),
contiguous within each (step, attempt). Coalescing renumbers what it merged, so it never leaves
a gap.

Coalescing (`coalesce_ms` > 0) merges consecutive deltas of one part published within the window
into one event: fewer entries and frames, at the price of up to `coalesce_ms` of added latency.
The default, 0, publishes every call at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import msgspec
from redis.asyncio import Redis

from terminus.events.adapters import CONTRACTS, AttemptContext, ProviderAdapter, Seqs, make_adapter
from terminus.events.codec import MAX_EVENT_BYTES, EventTooLarge, Format, encode_event
from terminus.events.inbound import (
    AttemptStarted,
    Event,
    InboundEvent,
    ReasoningDelta,
    StreamClosed,
    TextDelta,
    TurnStarted,
    type_of,
)
from terminus.service.keys import DEFAULT_PREFIX, FIELD, Keys, partition_of
from terminus.service.redis.connect import execute


def coalesce(events: list[InboundEvent]) -> list[InboundEvent]:
    """Merge runs of deltas of the same kind and part into one delta each, then number the
    result from the first event's seq on, so the seqs stay contiguous."""
    merged: list[InboundEvent] = []
    for event in events:
        last = merged[-1] if merged else None
        if (
            isinstance(event, TextDelta | ReasoningDelta)
            and type(last) is type(event)
            and last.part_id == event.part_id
        ):
            merged[-1] = msgspec.structs.replace(last, delta=last.delta + event.delta)
        else:
            merged.append(event)
    first = events[0].seq if events else 0
    return [
        e if e.seq == first + n else msgspec.structs.replace(e, seq=first + n)
        for n, e in enumerate(merged)
    ]


class Producer:
    """Publishes events to the inbound log of their session's partition."""

    def __init__(
        self,
        redis: Redis,
        *,
        partitions: int = 16,
        prefix: str = DEFAULT_PREFIX,
        fmt: Format = "json",
        coalesce_ms: int = 0,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        self.redis = redis
        self.partitions = partitions
        self.prefix = prefix
        self.fmt: Format = fmt
        self.coalesce_ms = coalesce_ms
        self.max_event_bytes = max_event_bytes

    def inbound_key(self, session_id: str) -> str:
        return Keys(partition_of(session_id, self.partitions), self.prefix).inbound

    async def publish(self, events: Iterable[InboundEvent]) -> list[bytes]:
        """XADD every event in one pipeline round trip; returns the entry ids in order. Raises
        `EventTooLarge`, publishing none of them, if one encodes to more than `max_event_bytes`
        (the workers would dead-letter it: deployments set the same `TERMINUS_MAX_EVENT_BYTES`)."""
        encoded = [(event, encode_event(event, self.fmt)) for event in events]
        for event, raw in encoded:
            if len(raw) > self.max_event_bytes:
                raise EventTooLarge(
                    f"{type_of(event)} of turn {event.turn_id!r} encodes to {len(raw)} bytes, "
                    f"over the limit of {self.max_event_bytes}",
                    "$",
                )
        async with self.redis.pipeline(transaction=False) as pipe:
            for event, raw in encoded:
                pipe.xadd(self.inbound_key(event.session_id), {FIELD: raw})
            ids: list[bytes] = await execute(pipe)
        return ids

    def turn(self, session_id: str, turn_id: str) -> TurnPublisher:
        return TurnPublisher(self, session_id, turn_id)


class TurnPublisher:
    """Numbers one turn's events and publishes them, attempt by attempt."""

    def __init__(self, producer: Producer, session_id: str, turn_id: str) -> None:
        self.producer = producer
        self.session_id, self.turn_id = session_id, turn_id
        self.step, self.attempt = 1, 1
        self.seqs = Seqs()  # of the current attempt, shared with its adapter
        self.adapter: ProviderAdapter | None = None
        self._buffer: list[InboundEvent] = []
        self._flusher: asyncio.TimerHandle | None = None
        self._late_flushes: set[asyncio.Task[None]] = set()
        # Flushes run one at a time so entries reach Redis in seq order.
        self._lock = asyncio.Lock()

    async def start(self, max_attempts: int | None = None, ts_ms: int = 0) -> None:
        await self.emit(TurnStarted, max_attempts=max_attempts, ts_ms=ts_ms)

    async def start_attempt(
        self,
        *,
        step: int | None = None,
        attempt: int | None = None,
        provider: str = "",
        model: str = "",
        strict: bool = True,
        contract: str | None = None,
        ts_ms: int = 0,
    ) -> None:
        """Begin an attempt (the first, a retry, or the first of a new step); the terminal
        contract defaults to the provider's own."""
        await self.flush()
        after_start = self.seqs.next == 1 and (self.step, self.attempt) == (1, 1)
        self.step, self.attempt = step or self.step, attempt or self.attempt
        if not (after_start and (self.step, self.attempt) == (1, 1)):
            self.seqs = Seqs()  # attempt 1 of step 1 goes on after turn-started's seq
        ctx = AttemptContext(
            session_id=self.session_id,
            turn_id=self.turn_id,
            step=self.step,
            attempt=self.attempt,
            provider=provider,
            model=model,
            ts_ms=ts_ms,
        )
        self.adapter = make_adapter(provider, ctx, self.seqs) if provider in CONTRACTS else None
        contract = contract or CONTRACTS.get(provider, "ai-sdk")
        await self.emit(
            AttemptStarted,
            provider=provider,
            model=model,
            contract=contract,
            strict=strict,
            ts_ms=ts_ms,
        )

    async def feed_sse(self, text: str) -> None:
        """Raw provider SSE of the current attempt, through the provider's adapter."""
        await self._queue(self._adapter().feed_sse(text))

    async def feed_bytes(self, data: bytes) -> None:
        """Raw response bytes of the current attempt (SSE, a JSON array or event-stream frames,
        sniffed), through the provider's adapter; a multi-byte character may span two calls."""
        await self._queue(self._adapter().feed_bytes(data))

    async def feed_payload(self, payload: Any) -> None:
        await self._queue(self._adapter().feed_payload(payload))

    async def close_attempt(self) -> None:
        """The provider stream hit EOF, whole or cut anywhere (mid-line, mid-frame): adapters
        flush what they hold and end the attempt with `stream-closed` (or the error it carried),
        so a cut attempt is retried at once instead of waiting for the stall timer."""
        events = self.adapter.close() if self.adapter else [self._stamp(StreamClosed)]
        await self._queue(events)
        await self.flush()

    async def emit(self, cls: type[Event], **fields: Any) -> None:
        """Publish one event of the current attempt, made from its fields."""
        await self._queue([self._stamp(cls, **fields)])

    async def add(self, events: Iterable[InboundEvent]) -> None:
        """Publish events made elsewhere (a transcript, your own adapter) as the current
        attempt's next ones: their session, turn, step, attempt and seq are set here."""
        await self._queue([self._restamp(event) for event in events])

    async def _queue(self, events: Iterable[InboundEvent]) -> None:
        """Buffer events this attempt's counter numbered, then publish (now, or coalesced)."""
        self._buffer.extend(events)
        if self.producer.coalesce_ms <= 0:
            await self.flush()
        elif self._flusher is None:
            loop = asyncio.get_running_loop()
            self._flusher = loop.call_later(self.producer.coalesce_ms / 1000, self._flush_later)

    async def flush(self) -> None:
        """Publish what is buffered (coalesced first, if asked)."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        async with self._lock:
            pending, self._buffer = self._buffer, []
            if self.producer.coalesce_ms > 0 and pending:
                pending = coalesce(pending)
                self.seqs.next = pending[-1].seq + 1
            if pending:
                await self.producer.publish(pending)

    def _flush_later(self) -> None:
        self._flusher = None
        task = asyncio.ensure_future(self.flush())
        self._late_flushes.add(task)
        task.add_done_callback(self._late_flushes.discard)

    def _stamp(self, cls: type[Event], **fields: Any) -> Any:
        return cls(
            session_id=self.session_id,
            turn_id=self.turn_id,
            step=self.step,
            attempt=self.attempt,
            seq=self.seqs.take(),
            **fields,
        )

    def _restamp(self, event: InboundEvent) -> InboundEvent:
        return msgspec.structs.replace(
            event,
            session_id=self.session_id,
            turn_id=self.turn_id,
            step=self.step,
            attempt=self.attempt,
            seq=self.seqs.take(),
        )

    def _adapter(self) -> ProviderAdapter:
        if self.adapter is None:
            raise RuntimeError("start an attempt with a known provider before feeding SSE")
        return self.adapter

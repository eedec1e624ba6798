"""One turn's events, numbered once and published attempt by attempt (service/sdk/producer.py).

An attempt's events are numbered as they are made: the publisher's own and its adapter's take
their seqs from one counter (`Seqs`), contiguous within each (step, attempt), and `ts_ms` from
the producer's clock. Coalescing (`coalesce_ms` > 0) merges consecutive deltas of one part
published within the window into one event: fewer entries and frames, at the price of up to
`coalesce_ms` of added latency, and renumbers what it merged so no seq is skipped. The default,
0, publishes every call at once; with `coalesce_reads` (the default) each call's deltas of one
part (what one network read of the provider's stream carried) are merged the same way, at no
latency: the text is the same, its frames split it where the reads fell.

What the provider sent is bounded (`Producer.limits`): the adapter's wires end the attempt with
an in-band error past an SSE bound, and each batch is made to fit the log before it is published
(service/sdk/batches.py): a delta too large is split, an error body cut to an excerpt, any other
event too large refused by an error in its place. Events the caller makes (`emit`, `add`) are
checked as they are made instead: one too large raises `EventTooLarge` and takes no seq.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from terminus.events.adapters import (
    CONTRACTS,
    AttemptContext,
    ProviderAdapter,
    Seqs,
    http_error_event,
    make_adapter,
)
from terminus.events.inbound import (
    AttemptStarted,
    Event,
    InboundEvent,
    StreamClosed,
    StreamError,
    TurnStarted,
)
from terminus.service.sdk.attempts import AttemptOrder
from terminus.service.sdk.batches import coalesce, excerpt, fit

if TYPE_CHECKING:
    from terminus.service.sdk.producer import Producer


class TurnPublisher:
    """Numbers one turn's events and publishes them, attempt by attempt."""

    def __init__(self, producer: Producer, session_id: str, turn_id: str) -> None:
        self.producer = producer
        self.session_id, self.turn_id = session_id, turn_id
        self.order = AttemptOrder()
        self.seqs = Seqs()  # of the current attempt, shared with its adapter
        self.adapter: ProviderAdapter | None = None
        self.ended = False  # the current attempt has reported its end (an error or EOF)
        self._buffer: list[InboundEvent] = []
        self._flusher: asyncio.TimerHandle | None = None
        self._late_flushes: set[asyncio.Task[None]] = set()
        # Flushes run one at a time so entries reach Redis in seq order.
        self._lock = asyncio.Lock()

    @property
    def step(self) -> int:
        return self.order.step

    @property
    def attempt(self) -> int:
        return self.order.attempt

    def resume(self, step: int, attempt: int, next_seq: int) -> None:
        """Go on from attempt `attempt` of `step`, started elsewhere, whose next seq is
        `next_seq`: a producer whose earlier attempts another request published (the gateway's
        producer routes, service/gateway/producing.py)."""
        self.order.step, self.order.attempt, self.order.started = step, attempt, True
        self.seqs = Seqs(next_seq)
        self.ended = True  # that attempt's stream is not this publisher's to feed

    async def start(
        self,
        max_attempts: int | None = None,
        ts_ms: int | None = None,
        *,
        traceparent: str | None = None,
    ) -> None:
        """Open the turn (`turn-started`); `traceparent` (W3C) puts its spans in the caller's
        trace (docs/traces.md)."""
        await self.emit(
            TurnStarted,
            max_attempts=max_attempts,
            ts_ms=self._now(ts_ms),
            traceparent=traceparent,
        )

    async def start_attempt(
        self,
        *,
        step: int | None = None,
        attempt: int | None = None,
        provider: str = "",
        model: str = "",
        strict: bool = True,
        contract: str | None = None,
        ts_ms: int | None = None,
    ) -> None:
        """Begin an attempt: by default the next one of the current step (the first, then a
        retry); `step=n + 1` begins the next step. Raises `AttemptOrderError` for an attempt the
        workers would refuse. The terminal contract defaults to the provider's own."""
        await self.flush()
        after_start = not self.order.started and self.seqs.next == 1
        self.order.next(step, attempt)
        if not after_start:  # attempt 1 of step 1 goes on after turn-started's seq
            self.seqs = Seqs()
        self.ended = False
        ts_ms = self._now(ts_ms)
        ctx = AttemptContext(
            session_id=self.session_id,
            turn_id=self.turn_id,
            step=self.step,
            attempt=self.attempt,
            provider=provider,
            model=model,
            ts_ms=ts_ms,
            limits=self.producer.limits,
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
        """Raw provider SSE of the current attempt, through the provider's adapter; ignored once
        the attempt has ended (so is the rest of this group)."""
        if not self.ended:
            await self._upstream(self._adapter().feed_sse(text))

    async def feed_bytes(self, data: bytes) -> None:
        """Raw response bytes of the current attempt (SSE, a JSON array or event-stream frames,
        sniffed), through the provider's adapter; a multi-byte character may span two calls."""
        if not self.ended:
            await self._upstream(self._adapter().feed_bytes(data))

    async def feed_payload(self, payload: Any) -> None:
        if not self.ended:
            await self._upstream(self._adapter().feed_payload(payload))

    async def close_attempt(self) -> None:
        """The provider stream hit EOF, whole or cut anywhere (mid-line, mid-frame): adapters
        flush what they hold and end the attempt with `stream-closed` (or the error it carried),
        so a cut attempt is retried at once instead of waiting for the stall timer. A no-op once
        the attempt has reported its end."""
        if not self.ended:
            self.ended = True
            if self.adapter is not None:
                self.adapter.at(self._now(None))
                await self._queue(self.adapter.close())
            else:
                await self._queue([self._stamp(StreamClosed, ts_ms=self._now(None))])
        await self.flush()

    async def report_http_error(
        self, status: int | None, headers: Mapping[str, str] | None, body: Any
    ) -> None:
        """The provider answered the attempt's request with an error (a non-2xx status, its
        headers and body, as text, bytes or decoded JSON): the attempt ends with it, and the
        workers classify it (docs/producers.md lists the headers they read)."""
        ctx = AttemptContext(
            session_id=self.session_id,
            turn_id=self.turn_id,
            step=self.step,
            attempt=self.attempt,
            ts_ms=self._now(None),
        )
        # Cut before anything decodes it: a 300 MB body must not become a 300 MB string.
        body, note = excerpt(body, self.producer.limits.max_error_body_bytes)
        error = http_error_event(ctx, self.seqs.take(), status, headers, body)
        await self._end_with(msgspec.structs.replace(error, message=error.message + note))

    async def report_transport_error(self, error: BaseException | str) -> None:
        """The request never got a response (refused, reset, timed out before the status): the
        attempt ends as the provider being unavailable, which is retried. A stream cut after
        the response began is a `close_attempt()`, not this."""
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        event = self._stamp(StreamError, ts_ms=self._now(None), message=message or "no response")
        await self._end_with(event)

    async def report_body_error(self, error: BaseException | str) -> None:
        """The response began, but its body cannot be read on: past a bound of
        `Producer.limits`, or in an encoding that does not decode (service/sdk/bodies.py). The
        attempt ends with an in-band error, retried as the provider being unavailable."""
        message = str(error) or type(error).__name__
        event = self._stamp(StreamError, ts_ms=self._now(None), message=message)
        await self._end_with(event)

    async def _end_with(self, error: StreamError) -> None:
        if self.ended:
            raise RuntimeError(f"attempt {self.attempt} of turn {self.turn_id} already ended")
        self.ended = True
        await self._queue([error])
        await self.flush()

    async def emit(self, cls: type[Event], **fields: Any) -> None:
        """Publish one event of the current attempt, made from its fields; `EventTooLarge` if
        it would not fit the log (it takes no seq)."""
        fields.setdefault("ts_ms", self._now(None))
        await self._queue(self._checked([self._stamp(cls, **fields)]))

    async def add(self, events: Iterable[InboundEvent]) -> None:
        """Publish events made elsewhere (a transcript, your own adapter) as the current
        attempt's next ones: their session, turn, step, attempt and seq are set here. A
        `stream-closed` or `stream-error` among them ends the attempt. `EventTooLarge`, and
        none of them is published or numbered, if one would not fit the log."""
        restamped = self._checked([self._restamp(event) for event in events])
        if any(isinstance(event, StreamClosed | StreamError) for event in restamped):
            self.ended = True
        await self._queue(restamped)

    def _checked(self, events: list[InboundEvent]) -> list[InboundEvent]:
        """The caller's events, if each fits the log; else their seqs are given back."""
        for event in events:
            size = self.producer.encoded_size(event)
            if size > self.producer.max_event_bytes:
                self.seqs.next = events[0].seq
                raise self.producer.too_large(event, size)
        return events

    async def _upstream(self, events: list[InboundEvent]) -> None:
        """Queue what the provider's stream made; an error among it ends the attempt."""
        if any(isinstance(event, StreamError) for event in events):
            self.ended = True
        await self._queue(events)

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
            producer = self.producer
            if pending and (producer.coalesce_ms > 0 or producer.coalesce_reads):
                pending = coalesce(pending)
                self.seqs.next = pending[-1].seq + 1
            if pending:
                await self.producer.publish(self._fit(pending))

    def _fit(self, pending: list[InboundEvent]) -> list[InboundEvent]:
        """The batch as it can be published (service/sdk/batches.py), numbered on from it."""
        producer = self.producer
        max_body = producer.limits.max_error_body_bytes
        fitted = fit(pending, producer.encoded_size, producer.max_event_bytes, max_body)
        if fitted is not pending:
            self.seqs.next = fitted[-1].seq + 1
            if isinstance(fitted[-1], StreamError):
                self.ended = True
        return fitted

    def _flush_later(self) -> None:
        self._flusher = None
        task = asyncio.ensure_future(self.flush())
        self._late_flushes.add(task)
        task.add_done_callback(self._late_flushes.discard)

    def _now(self, ts_ms: int | None) -> int:
        return self.producer.now_ms() if ts_ms is None else ts_ms

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
        self.adapter.at(self._now(None))
        return self.adapter

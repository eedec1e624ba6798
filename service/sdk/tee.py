"""Keep your SDK: an httpx transport that tees each attempt's response into terminus as the app
reads it, so the official clients (`anthropic`, `openai`, `google-genai`, anything on httpx) run
unchanged.

    tee = TeeTransport(httpx2.AsyncHTTPTransport())        # wraps the SDK's own transport
    client = anthropic.AsyncAnthropic(http_client=httpx2.AsyncClient(transport=tee), max_retries=0)

    async def ask(attempt):                                # your own SDK code, unchanged
        async with client.messages.stream(model=..., max_tokens=..., messages=...) as stream:
            async for text in stream.text_stream:
                print(text, end="")

    message = await TurnRunner(producer).run_turn(session, turn, tee.call(ask, "anthropic"))

The official SDKs now run on `httpx2` (a renamed httpx; they refuse an `httpx` client), others on
`httpx`: the tee works with either, as the transport it wraps does. It builds its responses from
that transport's own classes, so the client gets the response type it expects. google-genai
takes the client in its options: `HttpOptions(httpx_async_client=...)` (docs/producers.md).

`tee.call(ask, provider)` is a provider call for `TurnRunner`: each time the runner makes an
attempt, it runs `ask(attempt)` with the attempt bound to the task, and the request `ask` makes
through the client is that attempt. The transport passes the request on and hands the SDK a
response whose bytes, as the SDK reads them, are also decoded within the producer's bounds
(service/sdk/bodies.py) and fed to the provider's adapter; the SDK parses its own copy, the
adapter its own, and nothing is read twice from the network or buffered for the app. What the
tee sees is reported as it happens:

- a 2xx body read to its end, or cut (the SDK's read fails, or the app stops reading): the
  attempt is closed, and the workers judge it by its terminal proof;
- a non-2xx answer: `report_http_error(status, headers, body)` once the SDK has read the body
  (it always does, to raise its `APIStatusError`), an excerpt kept within the error-body bound;
- no answer at all: `report_transport_error`, and the SDK raises its own connection error.

The SDK's exception ends `ask`, and the runner waits for the workers' decision: a retry calls
`ask` again after its delay, so the decision reaches the app as its function being called again,
and the end as what `run_turn` returns (the proven message) or raises (`TurnFailed` with the
typed error, `TurnCancelled`, `TurnRefused`). Give the SDK `max_retries=0` (google-genai: no
`retry_options`, without which it does not retry): terminus decides retries; a retry of the
SDK's own would be a second request in one attempt, which the tee passes on unrecorded. A
request made outside `tee.call` passes through untouched. The tee asks for the codings it
decodes (`accept-encoding: gzip, deflate`) on the requests it records.
Synchronous clients: service/sdk/tee_sync.py.
"""

from __future__ import annotations

import contextvars
import functools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from types import ModuleType, TracebackType
from typing import Any, Final, Self

import httpx

from terminus.events.adapters import UpstreamLimits
from terminus.service.sdk.bodies import ACCEPT_ENCODING, BodyError, Inflater
from terminus.service.sdk.steps import Attempt

_bound: Final[contextvars.ContextVar[Attempt | None]] = contextvars.ContextVar(
    "terminus_tee_attempt", default=None
)
Ask = Callable[[Attempt], Awaitable[object]]


class TeeCall:
    """A provider call for `TurnRunner` that runs the app's own SDK code, `ask(attempt)`, with
    the attempt bound to the task, so that the tee records its request."""

    def __init__(self, ask: Ask, provider: str, model: str = "") -> None:
        self.ask, self.provider, self.model = ask, provider, model

    async def __call__(self, attempt: Attempt) -> None:
        token = _bound.set(attempt)
        try:
            await self.ask(attempt)
        finally:
            _bound.reset(token)


class TeeTransport(httpx.AsyncBaseTransport):
    """Passes every request to `transport` (an `httpx` or `httpx2` async transport); one made
    inside a `TeeCall` is recorded as its attempt, byte for byte as the SDK reads the response.
    It is an `httpx` transport to type checkers; an `httpx2` client takes it as well (it checks
    no type at run time: `cast(httpx2.AsyncBaseTransport, tee)` for a type checker)."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        # httpx or httpx2: the package whose classes the wrapped transport speaks.
        self.http: ModuleType = sys.modules[type(transport).__module__.partition(".")[0]]

    def call(self, ask: Ask, provider: str, model: str = "") -> TeeCall:
        """The provider call that runs `ask` as each attempt of a turn (`TurnRunner.run_turn`)."""
        return TeeCall(ask, provider, model)

    async def handle_async_request(self, request: Any) -> Any:  # an httpx or httpx2 request
        attempt = _bound.get()
        if attempt is None or attempt.ended:
            return await self.transport.handle_async_request(request)
        request.headers["accept-encoding"] = ACCEPT_ENCODING
        try:
            response = await self.transport.handle_async_request(request)
        except self.http.TransportError as exc:
            await attempt.report_transport_error(exc)
            raise
        sink = sink_for(attempt, response.status_code, dict(response.headers))
        stream = _tee_class(self.http.AsyncByteStream)(response.stream, sink)
        return type(response)(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> Self:
        await self.transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.transport.__aexit__(exc_type, exc_value, traceback)


def sink_for(attempt: Attempt, status: int, headers: dict[str, str]) -> Sink:
    """Where the bytes of a response with `status` and `headers` go (the sync tee's too)."""
    coding = headers.get("content-encoding", "")
    if 200 <= status < 300:
        return _Stream(attempt, coding)
    return _Error(attempt, status, headers, coding)


class Sink:
    """Where the tee puts the bytes of one response, and what it does at their end."""

    def __init__(self, attempt: Attempt, coding: str) -> None:
        self.attempt = attempt
        limits: UpstreamLimits = attempt.limits
        self.inflater = Inflater(coding, limits.max_body_bytes, limits.max_body_ratio)
        self.done = False

    async def feed(self, chunk: bytes) -> None:
        raise NotImplementedError

    async def end(self) -> None:
        raise NotImplementedError


class _Stream(Sink):
    """A 2xx body: each decoded piece to the adapter; at its end, whole or cut, the attempt
    is closed."""

    async def feed(self, chunk: bytes) -> None:
        if self.attempt.ended:
            return
        try:
            for piece in self.inflater.feed(chunk):
                await self.attempt.feed_bytes(piece)
        except BodyError as exc:
            await self.attempt.report_body_error(exc)

    async def end(self) -> None:
        if self.done:
            return
        self.done = True
        if not self.attempt.ended:
            try:
                for piece in self.inflater.finish():
                    await self.attempt.feed_bytes(piece)
            except BodyError as exc:
                await self.attempt.report_body_error(exc)
        await self.attempt.publisher.close_attempt()


class _Error(Sink):
    """A non-2xx answer: its body's first bytes (to the error-body bound) kept, and reported
    with the status and headers once the SDK has read it."""

    def __init__(self, attempt: Attempt, status: int, headers: dict[str, str], coding: str) -> None:
        super().__init__(attempt, coding)
        self.status, self.headers = status, headers
        self.wanted = attempt.limits.max_error_body_bytes + 1
        self.kept = bytearray()

    async def feed(self, chunk: bytes) -> None:
        try:
            for piece in self.inflater.feed(chunk):
                self.kept += piece[: self.wanted - len(self.kept)]
                if len(self.kept) >= self.wanted:
                    return
        except BodyError:
            return  # what was kept is the evidence; the status and headers classify it

    async def end(self) -> None:
        if self.done:
            return
        self.done = True
        if not self.attempt.ended:
            await self.attempt.report_http_error(self.status, self.headers, bytes(self.kept))


@functools.cache
def _tee_class(base: type) -> type[_Tee]:
    """`_Tee` as a byte stream of the client's package (its responses check the type)."""
    return type("TeeStream", (_Tee, base), {})


class _Tee:
    """The response's bytes, unchanged, for the SDK; each also goes to the sink first."""

    def __init__(self, stream: Any, sink: Sink) -> None:
        self.stream, self.sink = stream, sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.stream:
                await self.sink.feed(chunk)
                yield chunk
        finally:
            await self.sink.end()  # the end, whole or cut (a read failed, the app left)

    async def aclose(self) -> None:
        try:
            await self.sink.end()
        finally:
            await self.stream.aclose()


__all__ = ["Sink", "TeeCall", "TeeTransport", "sink_for"]

"""The tee for synchronous clients (`anthropic.Anthropic`, `openai.OpenAI`): the same recording
as service/sdk/tee.py, for an app whose request code is not async.

    tee = SyncTeeTransport(httpx2.HTTPTransport())
    client = anthropic.Anthropic(http_client=httpx2.Client(transport=tee), max_retries=0)

    def ask(attempt):                                      # your synchronous SDK code
        with client.messages.stream(model=..., max_tokens=..., messages=...) as stream:
            for text in stream.text_stream:
                print(text, end="")

    message = await TurnRunner(producer).run_turn(session, turn, tee.call(ask, "anthropic"))

The runner is async: `tee.call` runs `ask` in a worker thread (`asyncio.to_thread`, which
carries the bound attempt along), and the transport hands each piece of the response to the
attempt on the runner's event loop, waiting for it to be published before the SDK reads on, so
the order is the stream's. A thread cannot be cancelled: when the workers decide while a request
still runs (a cancel, the stall timer's retry), the runner goes on without it, and what that
request reads afterwards is no longer published (the bound attempt is no longer the turn's
current one).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
from collections.abc import Callable, Coroutine, Iterator
from types import ModuleType
from typing import Any, Final

import httpx

from terminus.service.sdk.bodies import ACCEPT_ENCODING
from terminus.service.sdk.steps import Attempt
from terminus.service.sdk.tee import Sink, sink_for

SyncAsk = Callable[[Attempt], object]


class _Bound:
    """An attempt as a worker thread reaches it: through the loop that runs the turn."""

    def __init__(self, attempt: Attempt, loop: asyncio.AbstractEventLoop) -> None:
        self.attempt, self.loop = attempt, loop
        self.at = (attempt.step, attempt.number)

    @property
    def current(self) -> bool:
        """Still the turn's attempt being made, and not ended."""
        publisher = self.attempt.publisher
        return (publisher.step, publisher.attempt) == self.at and not publisher.ended

    def run(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` on the turn's loop and wait for it; dropped if the attempt is past."""
        if not self.current:
            work.close()
            return
        asyncio.run_coroutine_threadsafe(work, self.loop).result()


_bound: Final[contextvars.ContextVar[_Bound | None]] = contextvars.ContextVar(
    "terminus_sync_tee_attempt", default=None
)


class SyncTeeCall:
    """A provider call for `TurnRunner` that runs the app's synchronous `ask(attempt)` in a
    worker thread, with the attempt bound, so that the sync tee records its request."""

    def __init__(self, ask: SyncAsk, provider: str, model: str = "") -> None:
        self.ask, self.provider, self.model = ask, provider, model

    async def __call__(self, attempt: Attempt) -> None:
        token = _bound.set(_Bound(attempt, asyncio.get_running_loop()))
        try:
            await asyncio.to_thread(self.ask, attempt)
        finally:
            _bound.reset(token)


class SyncTeeTransport(httpx.BaseTransport):
    """Passes every request to `transport` (an `httpx` or `httpx2` sync transport); one made
    inside a `SyncTeeCall` is recorded as its attempt, as the SDK reads the response."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.http: ModuleType = sys.modules[type(transport).__module__.partition(".")[0]]

    def call(self, ask: SyncAsk, provider: str, model: str = "") -> SyncTeeCall:
        """The provider call that runs `ask` as each attempt of a turn (`TurnRunner.run_turn`)."""
        return SyncTeeCall(ask, provider, model)

    def handle_request(self, request: Any) -> Any:  # an httpx or httpx2 request
        bound = _bound.get()
        if bound is None or not bound.current:
            return self.transport.handle_request(request)
        request.headers["accept-encoding"] = ACCEPT_ENCODING
        try:
            response = self.transport.handle_request(request)
        except self.http.TransportError as exc:
            bound.run(bound.attempt.report_transport_error(exc))
            raise
        sink = sink_for(bound.attempt, response.status_code, dict(response.headers))
        stream = _sync_tee_class(self.http.SyncByteStream)(response.stream, sink, bound)
        return type(response)(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
        )

    def close(self) -> None:
        self.transport.close()


@functools.cache
def _sync_tee_class(base: type) -> type[_SyncTee]:
    """`_SyncTee` as a byte stream of the client's package (its responses check the type)."""
    return type("SyncTeeStream", (_SyncTee, base), {})


class _SyncTee:
    """The response's bytes, unchanged, for the SDK; each is published first, on the loop."""

    def __init__(self, stream: Any, sink: Sink, bound: _Bound) -> None:
        self.stream, self.sink, self.bound = stream, sink, bound
        self.ended = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self.stream:
                self.bound.run(self.sink.feed(chunk))
                yield chunk
        finally:
            self._end()  # the end, whole or cut (a read failed, the app left)

    def close(self) -> None:
        try:
            self._end()
        finally:
            self.stream.close()

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self.bound.run(self.sink.end())


__all__ = ["SyncTeeCall", "SyncTeeTransport"]

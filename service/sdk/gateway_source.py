"""The subscriber SDK's gateway source: the SSE endpoint `/v1/sessions/{id}/updates` over httpx.

SSE is parsed by `httpx-sse` (a small, typed, maintained parser of the WHATWG event-stream
format over httpx streams), not by hand: line endings (\\r, \\n, \\r\\n) split across chunks,
multi-line data and comments are its job. It does not reconnect, which is what we want: resuming
from the last cursor yielded, not from the last `id:` parsed, is what makes "no duplicate" hold.
"""

from __future__ import annotations

import contextlib
import email.utils
import time
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx
import msgspec
from httpx_sse import SSEError, aconnect_sse

from terminus.service.sdk.updates import (
    Interrupted,
    SubscriptionDenied,
    SubscriptionRefused,
    UnknownFrames,
    Update,
    decoded,
)

REASON_BYTES = 500


@dataclass(frozen=True)
class GatewaySource:
    """Reads a session's updates from a terminus gateway at `base_url` with a session `token`.

    Pass `client` to share connection pools, proxies or TLS settings (it is not closed here);
    otherwise each connection gets its own client, whose read timeout `read_timeout_s` (above
    the gateway's 15 s pings) detects a connection that went silent. Frames of a kind this SDK
    does not know are passed over and counted in `unknown_frames`.
    """

    base_url: str
    token: str
    client: httpx.AsyncClient | None = None
    read_timeout_s: float = 45.0
    unknown_frames: UnknownFrames = field(default_factory=UnknownFrames, compare=False)

    async def read(self, session_id: str, after: str | None) -> AsyncGenerator[Update, None]:
        url = f"{self.base_url.rstrip('/')}/v1/sessions/{quote(session_id, safe='')}/updates"
        headers = {"Authorization": f"Bearer {self.token}"}
        if after is not None:
            headers["Last-Event-ID"] = after
        try:
            async with (
                self._client() as client,
                aconnect_sse(client, "GET", url, headers=headers) as events,
            ):
                await _check(events.response)
                async for sse in events.aiter_sse():
                    # httpx-sse dispatches a blank line after a comment ping as an event with
                    # the last id and no data; the spec says to dispatch nothing.
                    update = decoded(sse.id, sse.data, self.unknown_frames) if sse.data else None
                    if update is not None:
                        yield update
        except (httpx.TransportError, SSEError) as exc:
            raise Interrupted(repr(exc)) from exc

    def _client(self) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        if self.client is not None:
            return contextlib.nullcontext(self.client)
        timeout = httpx.Timeout(10.0, read=self.read_timeout_s)
        return httpx.AsyncClient(timeout=timeout)


async def _check(response: httpx.Response) -> None:
    """Raise what a non-200 answer means: denied, refused, or worth retrying (and when)."""
    status = response.status_code
    if status == 200:
        return
    reason = await _reason(response)
    if status in (401, 403):
        raise SubscriptionDenied(status, reason)
    if status == 429:
        raise Interrupted(f"429: {reason}", retry_after(response.headers.get("retry-after")))
    if 300 <= status < 500:  # a redirect too: the base URL is wrong, retrying cannot help
        raise SubscriptionRefused(status, reason)
    raise Interrupted(f"{status}: {reason}")


async def _reason(response: httpx.Response) -> str:
    body = (await response.aread())[:REASON_BYTES]
    try:
        error = msgspec.json.decode(body)["error"]
    except (msgspec.DecodeError, KeyError, TypeError):
        return body.decode(errors="replace") or response.reason_phrase
    return str(error)


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: delay-seconds or an HTTP date."""
    if value is None:
        return None
    if value.strip().isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))

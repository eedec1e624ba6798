"""Provider calls for `TurnRunner`: one streaming HTTP request per attempt, on httpx.

    call = anthropic(api_key, "claude-sonnet-4-5", {"max_tokens": 1024, "messages": [...]})
    message = await TurnRunner(producer).run_turn("session-1", "turn-1", call)

A call POSTs its body and streams the response bytes into the attempt; the provider's adapter
reads them (service's events/adapters). A non-2xx answer is reported with its status, headers
and body, so the workers classify it (`retry-after`, `retry-after-ms`, the `x-llm-error-*`
headers of docs/producers.md, the provider's error object); a request that never got an answer
is a transport error, retried as the provider being unavailable; a body cut anywhere ends the
attempt as cut. Bodies are read within the producer's `UpstreamLimits` (service/sdk/bodies.py):
only an excerpt of an error body, and a streamed body decoded in bounded pieces, stopped (an
in-band error ends the attempt) past a bound; reading stops as soon as the attempt has ended.
The body may be a function of the attempt: a tool step's request carries the previous step's
tool outcomes (`attempt.tool_outcomes`), a compacted one a shorter context. A paused turn's next
request is the same body with the paused content added by the call itself (`attempt.continued`):
a body function leaves it out.

Every call takes `headers` and `params` (query parameters), merged over its own: a header you
pass replaces the call's header of the same name, compared without case, so an `anthropic-beta`,
a proxy's key or a gateway's routing header reaches the provider, and your `authorization` (or
`x-api-key`, `x-goog-api-key`) wins over the one made from `api_key`: the request carries one
value per name, yours. An empty `api_key` sends no key header at all, for a proxy that
authenticates otherwise. Only `accept-encoding` stays the call's own (the codings the bounded
reader decodes).

Bedrock's Converse API wants AWS SigV4 signatures: pass `sign`, which signs the request in place
(botocore's `SigV4Auth`, for instance), your headers and parameters included; terminus does not
hold AWS credentials itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from terminus.events.adapters.compat import DIALECTS, PREFIX
from terminus.service.sdk.bodies import ACCEPT_ENCODING, BodyError, decoded_body, error_body
from terminus.service.sdk.runner import Attempt

Body = Mapping[str, Any] | Callable[[Attempt], Mapping[str, Any]]
Sign = Callable[[httpx.Request], Awaitable[None] | None]
Headers = Mapping[str, str]
Params = Mapping[str, str]

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=10.0)


@dataclass
class HttpCall:
    """One provider's streaming request: where to send it, with what, read by which adapter."""

    provider: str  # the adapter's name: anthropic, openai-responses, openai-chat, gemini, ...
    model: str
    url: str
    body: Body
    headers: Headers = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)  # merged into every body
    client: httpx.AsyncClient | None = None
    sign: Sign | None = None
    timeout: httpx.Timeout = field(default_factory=lambda: DEFAULT_TIMEOUT)
    params: Params = field(default_factory=dict)  # merged into the URL's query

    async def __call__(self, attempt: Attempt) -> None:
        body = attempt.continued(self.body(attempt) if callable(self.body) else self.body)
        async with contextlib.AsyncExitStack() as stack:
            client = self.client
            if client is None:
                client = await stack.enter_async_context(httpx.AsyncClient(timeout=self.timeout))
            # Only codings the bounded reader decodes: httpx would offer br and zstd when installed.
            headers = merged(self.headers, {"accept-encoding": ACCEPT_ENCODING})
            request = client.build_request(
                "POST", self.url, json={**body, **self.extra}, headers=headers, params=self.params
            )
            if self.sign is not None:
                signed = self.sign(request)
                if signed is not None:
                    await signed
            await _stream(client, request, attempt)


async def _stream(client: httpx.AsyncClient, request: httpx.Request, attempt: Attempt) -> None:
    try:
        response = await client.send(request, stream=True)
    except httpx.TransportError as exc:
        await attempt.report_transport_error(exc)
        return
    try:
        if response.status_code >= 300:
            await _report_error(response, attempt)
        else:
            await _feed(response, attempt)
    except httpx.TransportError:
        return  # cut after the answer began: the runner closes the attempt, which reads as cut
    finally:
        await response.aclose()


async def _report_error(response: httpx.Response, attempt: Attempt) -> None:
    """The status, headers and as much of the body as arrives, to the bound (a cut error body
    is still evidence)."""
    coding = response.headers.get("content-encoding", "")
    raw = response.aiter_raw()
    body = await error_body(raw, coding, attempt.limits, cut_by=(httpx.TransportError,))
    await attempt.report_http_error(response.status_code, dict(response.headers), body)


async def _feed(response: httpx.Response, attempt: Attempt) -> None:
    coding = response.headers.get("content-encoding", "")
    try:
        async with contextlib.aclosing(
            decoded_body(response.aiter_raw(), coding, attempt.limits)
        ) as pieces:
            async for piece in pieces:
                await attempt.feed_bytes(piece)
                if attempt.ended:
                    return
    except BodyError as exc:
        await attempt.report_body_error(exc)


def anthropic(
    api_key: str,
    model: str,
    body: Body,
    *,
    base_url: str = "https://api.anthropic.com",
    version: str = "2023-06-01",
    headers: Headers | None = None,
    params: Params | None = None,
    **options: Any,
) -> HttpCall:
    """Anthropic Messages, streamed (`POST /v1/messages`)."""
    own = {**_key("x-api-key", api_key), "anthropic-version": version}
    extra = {"model": model, "stream": True}
    url = f"{base_url.rstrip('/')}/v1/messages"
    return HttpCall(
        "anthropic", model, url, body, merged(own, headers), extra, params=_query(params), **options
    )


def openai_responses(
    api_key: str,
    model: str,
    body: Body,
    *,
    base_url: str = "https://api.openai.com/v1",
    headers: Headers | None = None,
    params: Params | None = None,
    **options: Any,
) -> HttpCall:
    """OpenAI Responses, streamed (`POST /responses`)."""
    url = f"{base_url.rstrip('/')}/responses"
    extra = {"model": model, "stream": True}
    own = merged(_bearer(api_key), headers)
    return HttpCall(
        "openai-responses", model, url, body, own, extra, params=_query(params), **options
    )


def openai_chat(
    api_key: str,
    model: str,
    body: Body,
    *,
    base_url: str = "https://api.openai.com/v1",
    compat: str | None = None,
    headers: Headers | None = None,
    params: Params | None = None,
    **options: Any,
) -> HttpCall:
    """OpenAI Chat Completions and compatible servers, streamed, usage included; `compat` names
    the server (`mistral`, `deepseek`, ...: events/adapters/compat.py) so that its own finish
    reasons are read and its metrics carry its name."""
    if compat is not None and compat not in DIALECTS:
        raise ValueError(
            f"unknown compatible provider {compat!r}; expected one of {sorted(DIALECTS)}"
        )
    provider = "openai-chat" if compat is None else f"{PREFIX}{compat}"
    url = f"{base_url.rstrip('/')}/chat/completions"
    extra = {"model": model, "stream": True, "stream_options": {"include_usage": True}}
    own = merged(_bearer(api_key), headers)
    return HttpCall(provider, model, url, body, own, extra, params=_query(params), **options)


def gemini(
    api_key: str,
    model: str,
    body: Body,
    *,
    base_url: str = "https://generativelanguage.googleapis.com/v1beta",
    headers: Headers | None = None,
    params: Params | None = None,
    **options: Any,
) -> HttpCall:
    """Gemini `streamGenerateContent` as SSE."""
    url = f"{base_url.rstrip('/')}/models/{model}:streamGenerateContent"
    own = merged(_key("x-goog-api-key", api_key), headers)
    query = {"alt": "sse", **_query(params)}
    return HttpCall("gemini", model, url, body, own, params=query, **options)


def bedrock_converse(
    region: str,
    model: str,
    body: Body,
    *,
    sign: Sign,
    base_url: str | None = None,
    headers: Headers | None = None,
    params: Params | None = None,
    **options: Any,
) -> HttpCall:
    """Bedrock Converse, streamed (`POST /model/{id}/converse-stream`), signed by `sign`."""
    base = base_url or f"https://bedrock-runtime.{region}.amazonaws.com"
    url = f"{base.rstrip('/')}/model/{model}/converse-stream"
    own = merged({}, headers)
    return HttpCall(
        "bedrock-converse", model, url, body, own, sign=sign, params=_query(params), **options
    )


def merged(own: Headers, given: Headers | None) -> dict[str, str]:
    """`own` with `given` over it, one value per name whatever its case (names lowercased)."""
    headers = {name.lower(): value for name, value in own.items()}
    headers.update((name.lower(), value) for name, value in (given or {}).items())
    return headers


def _query(params: Params | None) -> dict[str, str]:
    return dict(params or {})


def _key(name: str, api_key: str) -> dict[str, str]:
    return {name: api_key} if api_key else {}


def _bearer(api_key: str) -> dict[str, str]:
    return _key("authorization", f"Bearer {api_key}" if api_key else "")

"""One attempt as a producer POSTs it: its form (headers) and its body, read into a publisher.

    x-terminus-provider: anthropic | openai-responses | openai-chat[:<compat>] | gemini | ...
    x-terminus-model: the model (optional, data only)
    x-terminus-step, x-terminus-attempt: which attempt this is (optional: the next one)
    x-terminus-max-attempts: the turn's cap, read with its first attempt (optional)
    Content-Encoding: the provider's own coding of the body (gzip, deflate, identity)

    body: the provider's response body, as it streams (a 2xx answer), or ...
    x-terminus-upstream-status: N              ... the error body of a non-2xx answer, N its
    x-terminus-upstream-header-<name>: value   status, and each provider header it had
    x-terminus-transport-error: message        ... nothing: the request got no answer at all

The body is read as it arrives, within the producer's `UpstreamLimits`, by the same reader the
Python callers use (service/sdk/bodies.py), and fed to the adapter through the same
`TurnPublisher`: numbering, splitting and refusals are the Python SDK's. A body that ends
because its producer went away (the request was cut) is a cut stream: the attempt is closed,
and the workers retry it.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Final

import msgspec

from terminus.events.adapters import CONTRACTS, UpstreamLimits
from terminus.service import TerminusError
from terminus.service.sdk.bodies import BodyError, decoded_body, error_body
from terminus.service.sdk.publisher import TurnPublisher

PROVIDER: Final = "x-terminus-provider"
MODEL: Final = "x-terminus-model"
STEP: Final = "x-terminus-step"
ATTEMPT: Final = "x-terminus-attempt"
MAX_ATTEMPTS: Final = "x-terminus-max-attempts"
UPSTREAM_STATUS: Final = "x-terminus-upstream-status"
UPSTREAM_HEADER: Final = "x-terminus-upstream-header-"
TRANSPORT_ERROR: Final = "x-terminus-transport-error"
MAX_TEXT: Final = 1_000  # characters of a model name or a transport error kept


class FormError(TerminusError, ValueError):
    """A header of the attempt's form that the gateway cannot act on; says which."""


class AttemptForm(msgspec.Struct, frozen=True, kw_only=True):
    """What the headers of an attempt's POST say."""

    provider: str
    model: str = ""
    step: int | None = None
    attempt: int | None = None
    max_attempts: int | None = None
    upstream_status: int | None = None
    upstream_headers: dict[str, str] = {}
    transport_error: str | None = None
    content_encoding: str = ""


def attempt_form(headers: Mapping[str, str]) -> AttemptForm:
    """The form of `headers` (lower-case names); `FormError` names the header at fault."""
    provider = headers.get(PROVIDER, "")
    if provider not in CONTRACTS:
        raise FormError(f"{PROVIDER} must be one of {sorted(CONTRACTS)}, not {provider[:80]!r}")
    upstream = {
        name.removeprefix(UPSTREAM_HEADER): value
        for name, value in headers.items()
        if name.startswith(UPSTREAM_HEADER)
    }
    return AttemptForm(
        provider=provider,
        model=headers.get(MODEL, "")[:MAX_TEXT],
        step=_number(headers, STEP),
        attempt=_number(headers, ATTEMPT),
        max_attempts=_number(headers, MAX_ATTEMPTS),
        upstream_status=_number(headers, UPSTREAM_STATUS, low=100, high=599),
        upstream_headers=upstream,
        transport_error=headers[TRANSPORT_ERROR][:MAX_TEXT] if TRANSPORT_ERROR in headers else None,
        content_encoding=headers.get("content-encoding", ""),
    )


def _number(headers: Mapping[str, str], name: str, low: int = 1, high: int = 10**6) -> int | None:
    text = headers.get(name)
    if text is None:
        return None
    if not text.strip().isdigit() or not low <= int(text) <= high:
        raise FormError(f"{name} must be a whole number from {low} to {high}")
    return int(text)


async def publish_body(
    publisher: TurnPublisher, form: AttemptForm, body: AsyncIterable[bytes], cut_by: type[Exception]
) -> None:
    """Read the attempt's body into `publisher` as it arrives and end the attempt: with the
    upstream's error or transport error, or at EOF (whole, or cut: `cut_by` raised)."""
    limits = publisher.producer.limits
    raw = _bounded(body, limits)
    if form.transport_error is not None:
        await publisher.report_transport_error(form.transport_error or "no response")
    elif form.upstream_status is not None:
        excerpt = await error_body(raw, form.content_encoding, limits, (cut_by, BodyError))
        await publisher.report_http_error(form.upstream_status, form.upstream_headers, excerpt)
    else:
        await _stream(publisher, raw, form.content_encoding, limits, cut_by)
    await publisher.close_attempt()


async def _stream(
    publisher: TurnPublisher,
    raw: AsyncIterable[bytes],
    coding: str,
    limits: UpstreamLimits,
    cut_by: type[Exception],
) -> None:
    try:
        async for piece in decoded_body(raw, coding, limits):
            await publisher.feed_bytes(piece)
            if publisher.ended:
                return
    except BodyError as exc:
        await publisher.report_body_error(exc)
    except cut_by:
        return  # the producer went away mid-body: a cut stream, closed by the caller


async def _bounded(body: AsyncIterable[bytes], limits: UpstreamLimits) -> AsyncIterator[bytes]:
    """The body's raw bytes, no more than a decoded body may hold (an identity body is its
    own decoding; a coded one that passes this would pass the ratio bound first)."""
    received = 0
    async for chunk in body:
        received += len(chunk)
        if received > limits.max_body_bytes:
            raise BodyError(
                f"the body is longer than {limits.max_body_bytes} bytes (TERMINUS_MAX_BODY_BYTES)"
            )
        yield chunk

"""Each provider call of the SDK (service/sdk/callers.py) sends its provider's streaming request
and reads the recorded answer of that provider to a persisted message, through real workers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.outbound import TextPart
from terminus.service.sdk import callers
from terminus.service.sdk.bodies import ACCEPT_ENCODING
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import TurnRunner
from terminus.service.settings import Settings
from tests.support.fake_provider import Reply, fake_provider

STREAMS = Path(__file__).parents[1] / "fixtures/provider-streams"
BODY = {"max_tokens": 64}
SSE = {"content-type": "text/event-stream"}


def sse(path: str) -> bytes:
    """A recorded SSE answer, ending with the blank line that ends its last event on the wire."""
    return (STREAMS / path).read_bytes().rstrip(b"\r\n") + b"\n\n"


def signed(request: httpx.Request) -> None:
    request.headers["authorization"] = "AWS4-HMAC-SHA256 Credential=test"


class Case(NamedTuple):
    make: Callable[..., callers.HttpCall]  # base URL and options (headers, params) -> the call
    answer: bytes
    content_type: str
    path: bytes  # what the request line asks for
    header: bytes  # a header line the request must carry


CASES = {
    "anthropic": Case(
        lambda url, **o: callers.anthropic("k-1", "claude-x", BODY, base_url=url, **o),
        sse("anthropic/text-recorded-fantasy.sse"),
        "text/event-stream",
        b"POST /v1/messages ",
        b"x-api-key: k-1",
    ),
    "openai-responses": Case(
        lambda url, **o: callers.openai_responses("k-2", "gpt-x", BODY, base_url=url + "/v1", **o),
        sse("openai-responses/text-completed-recorded-fantasy.sse"),
        "text/event-stream",
        b"POST /v1/responses ",
        b"authorization: Bearer k-2",
    ),
    "openai-chat": Case(
        lambda url, **o: callers.openai_chat("k-3", "gpt-x", BODY, base_url=url + "/v1", **o),
        sse("openai-chat/text-stop-usage-done-recorded-fantasy.sse"),
        "text/event-stream",
        b"POST /v1/chat/completions ",
        b"authorization: Bearer k-3",
    ),
    "gemini": Case(
        lambda url, **o: callers.gemini("k-4", "gemini-x", BODY, base_url=url + "/v1beta", **o),
        sse("gemini/multi-chunk-text-recorded-fantasy.sse"),
        "text/event-stream",
        b"POST /v1beta/models/gemini-x:streamGenerateContent?alt=sse ",
        b"x-goog-api-key: k-4",
    ),
    "bedrock-converse": Case(
        lambda url, **o: callers.bedrock_converse(
            "us-east-1", "nova-x", BODY, sign=signed, base_url=url, **o
        ),
        (STREAMS / "bedrock/converse-stream-text-nova-lite-rig.eventstream").read_bytes(),
        "application/vnd.amazon.eventstream",
        b"POST /model/nova-x/converse-stream ",
        b"authorization: AWS4-HMAC-SHA256 Credential=test",
    ),
}


@pytest.fixture
async def runner(redis: Redis, prefix: str) -> AsyncIterator[TurnRunner]:
    settings = Settings(prefix=prefix, partitions=4, block_ms=100)
    turn_runner = TurnRunner(Producer(redis, partitions=4, prefix=prefix), 30)
    async with running_worker(redis, settings):
        yield turn_runner
    await turn_runner.close()


@pytest.mark.parametrize("provider", list(CASES))
async def test_each_call_reads_its_providers_answer(runner: TurnRunner, provider: str) -> None:
    case = CASES[provider]
    reply = Reply(200, case.answer, {"content-type": case.content_type})
    async with fake_provider([reply]) as fake:
        call = case.make(fake.url)
        message = await runner.run_turn(f"s-{provider}", f"t-{provider}", call)
    assert call.provider == provider
    assert "".join(p.text for p in message.parts if isinstance(p, TextPart))
    assert message.finish_reason == "stop"
    head = fake.heads[0]
    assert head.startswith(case.path), head
    assert case.header in head.split(b"\r\n"), head
    sent: dict[str, Any] = httpx.Response(200, content=fake.requests[0]).json()
    assert sent["max_tokens"] == 64
    assert sent.get("stream", True) is True


@pytest.mark.parametrize("provider", list(CASES))
async def test_extra_headers_and_query_parameters_reach_the_provider(
    runner: TurnRunner, provider: str
) -> None:
    """A beta header and a proxy's key beside the call's own headers, a query parameter beside
    the call's own (Gemini's `alt=sse`), on every call."""
    case = CASES[provider]
    reply = Reply(200, case.answer, {"content-type": case.content_type})
    headers = {"Anthropic-Beta": "beta-1", "X-Proxy-Key": "pk-1"}
    async with fake_provider([reply]) as fake:
        call = case.make(fake.url, headers=headers, params={"api-version": "v 1"})
        message = await runner.run_turn(f"s-x-{provider}", f"t-x-{provider}", call)
    assert message.finish_reason == "stop"
    lines = fake.heads[0].split(b"\r\n")
    assert b"anthropic-beta: beta-1" in lines
    assert b"x-proxy-key: pk-1" in lines
    assert case.header in lines
    target = httpx.URL(lines[0].split(b" ")[1].decode())
    assert target.params.get("api-version") == "v 1"
    assert case.path.split(b" ")[1].decode().startswith(target.path)
    if provider == "gemini":
        assert target.params.get("alt") == "sse"


async def test_a_callers_header_replaces_the_calls_own_of_that_name(runner: TurnRunner) -> None:
    """A proxy's own key in `authorization` replaces the bearer made of the API key (one value,
    whatever the case); an empty API key sends no key header (an OAuth bearer instead); the
    codings the bounded reader decodes stay the call's."""
    answer = Reply(200, sse("anthropic/text-recorded-fantasy.sse"), SSE)
    chat = Reply(200, sse("openai-chat/text-stop-usage-done-recorded-fantasy.sse"), SSE)
    async with fake_provider([chat, answer]) as fake:
        proxied = callers.openai_chat(
            "k", "gpt-x", BODY, base_url=fake.url, headers={"Authorization": "Bearer proxy-1"}
        )
        await runner.run_turn("s-auth-1", "t-auth-1", proxied)
        oauth = {"authorization": "Bearer oauth-1", "Accept-Encoding": "br"}
        bare = callers.anthropic("", "claude-x", BODY, base_url=fake.url, headers=oauth)
        await runner.run_turn("s-auth-2", "t-auth-2", bare)
    first, second = (head.lower().split(b"\r\n") for head in fake.heads)
    assert [line for line in first if line.startswith(b"authorization:")] == [
        b"authorization: bearer proxy-1"
    ]
    assert b"authorization: bearer oauth-1" in second
    assert not [line for line in second if line.startswith(b"x-api-key:")]
    assert f"accept-encoding: {ACCEPT_ENCODING}".encode() in second


async def test_a_compatible_server_is_named_by_its_call(runner: TurnRunner) -> None:
    """`compat="deepseek"`: the attempt is DeepSeek's, read with DeepSeek's own table."""
    answer = sse("openai-compatible/deepseek-reasoning-content-recorded-pydantic-ai.sse")
    async with fake_provider([Reply(200, answer, {"content-type": "text/event-stream"})]) as fake:
        call = callers.openai_chat(
            "k", "deepseek-reasoner", BODY, base_url=fake.url, compat="deepseek"
        )
        message = await runner.run_turn("s-compat", "t-compat", call)
    assert call.provider == "openai-chat:deepseek"
    assert message.provider == "openai-chat:deepseek"
    assert "".join(p.text for p in message.parts if isinstance(p, TextPart)).startswith("Hello")


def test_an_unknown_compatible_server_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown compatible provider"):
        callers.openai_chat("k", "m", BODY, compat="nobody")

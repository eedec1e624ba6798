"""The real `anthropic`, `openai` and `google-genai` clients, async and sync, teed into terminus
(service/sdk/tee.py, tee_sync.py), against the fake provider with a real worker: the app iterates
its SDK's own stream, and the persisted message and the session's frames are what
`terminus simulate` gives on the same bytes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

import anthropic
import httpx
import httpx2
import msgspec
import openai
import pytest
from google import genai
from google.genai import types as genai_types
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.outbound import AgentError, Retrying, SessionUpdate
from terminus.service.cli.simulate import simulate
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import PersistedMessage, TurnFailed, TurnRunner
from terminus.service.sdk.steps import Attempt
from terminus.service.sdk.tee import TeeTransport
from terminus.service.sdk.tee_sync import SyncTeeTransport
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from tests.support.fake_provider import Reply, fake_provider

STREAMS = Path(__file__).parents[1] / "fixtures/provider-streams"
SSE = {"content-type": "text/event-stream"}
JSON = {"content-type": "application/json"}
PARTITIONS = 4


def sse(path: str) -> bytes:
    return (STREAMS / path).read_bytes().rstrip(b"\r\n") + b"\n\n"


class Failure(NamedTuple):
    """A provider's error answer: sent by the fake provider, recorded for simulate."""

    status: int
    headers: dict[str, str]
    body: bytes

    def reply(self) -> Reply:
        return Reply(self.status, self.body, self.headers)

    def recorded(self, path: Path) -> Path:
        body = json.loads(self.body)
        path.write_text(
            json.dumps({"status_code": self.status, "headers": self.headers, "body": body})
        )
        return path


ANTHROPIC_RATE = Failure(
    429,
    {**JSON, "retry-after": "0", "x-should-retry": "true"},
    b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
)
ANTHROPIC_OVERLOADED = Failure(
    529,
    {**JSON, "retry-after": "0"},
    b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
)
# OpenAI's error-codes guide: 429 "Rate limit reached for requests", 503 "The engine is currently
# overloaded, please try again later"; the body is its `{"error": {...}}` object.
OPENAI_RATE = Failure(
    429,
    {**JSON, "retry-after": "0"},
    b'{"error":{"message":"Rate limit reached for requests","type":"requests",'
    b'"param":null,"code":"rate_limit_exceeded"}}',
)
OPENAI_OVERLOADED = Failure(
    503,
    {**JSON, "retry-after": "0"},
    b'{"error":{"message":"The engine is currently overloaded, please try again later",'
    b'"type":"server_error","param":null,"code":null}}',
)
# Google's own bodies (google.rpc.Status in `error`), from the fixtures: a 429 RESOURCE_EXHAUSTED
# with no RetryInfo (the workers' backoff decides the wait) and a 503 UNAVAILABLE, byte for byte.
GEMINI_RATE = Failure(
    429,
    {"content-type": "application/json; charset=UTF-8"},
    (STREAMS / "gemini/quota-exceeded-429-vertex-firebase-testdata.json").read_bytes(),
)
GEMINI_UNAVAILABLE = Failure(
    503,
    {"content-type": "application/json; charset=UTF-8"},
    json.loads(
        (STREAMS / "gemini/unavailable-503-high-demand-continue-issue-10639.json").read_text()
    )["body"].encode(),
)

Seen = list[str]  # what the app read of its SDK's stream


class Sdk(NamedTuple):
    """One official client, its async and sync forms, and its provider's answers."""

    provider: str
    answer: bytes
    rate_limited: Failure
    overloaded: Failure
    make: Callable[[str, Any], Any]  # base URL, httpx2 client (async or sync) -> the SDK client
    ask: Callable[[Any, Seen], Any]  # the async SDK client, what the app saw -> one request
    make_sync: Callable[[str, Any], Any]
    ask_sync: Callable[[Any, Seen], None]


async def ask_anthropic(client: anthropic.AsyncAnthropic, seen: Seen) -> None:
    async with client.messages.stream(
        model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        async for text in stream.text_stream:
            seen.append(text)


def ask_anthropic_sync(client: anthropic.Anthropic, seen: Seen) -> None:
    with client.messages.stream(
        model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        for text in stream.text_stream:
            seen.append(text)


async def ask_openai(client: openai.AsyncOpenAI, seen: Seen) -> None:
    stream = await client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async for chunk in stream:
        for choice in chunk.choices:
            seen.append(choice.delta.content or "")


def ask_openai_sync(client: openai.OpenAI, seen: Seen) -> None:
    stream = client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    for chunk in stream:
        for choice in chunk.choices:
            seen.append(choice.delta.content or "")


def make_genai(url: str, http: httpx2.AsyncClient | httpx2.Client) -> genai.Client:
    """A google-genai client on `http`; it retries only when given `retry_options`."""
    if isinstance(http, httpx2.AsyncClient):
        options = genai_types.HttpOptions(base_url=url, httpx_async_client=http)
    else:
        options = genai_types.HttpOptions(base_url=url, httpx_client=http)
    return genai.Client(api_key="k", http_options=options)


async def ask_genai(client: genai.Client, seen: Seen) -> None:
    async for chunk in await client.aio.models.generate_content_stream(
        model="gemini-x", contents="hi"
    ):
        seen.append(chunk.text or "")


def ask_genai_sync(client: genai.Client, seen: Seen) -> None:
    for chunk in client.models.generate_content_stream(model="gemini-x", contents="hi"):
        seen.append(chunk.text or "")


SDKS = {
    "anthropic": Sdk(
        "anthropic",
        sse("anthropic/text-recorded-fantasy.sse"),
        ANTHROPIC_RATE,
        ANTHROPIC_OVERLOADED,
        lambda url, http: anthropic.AsyncAnthropic(
            api_key="k", base_url=url, http_client=http, max_retries=0
        ),
        ask_anthropic,
        lambda url, http: anthropic.Anthropic(
            api_key="k", base_url=url, http_client=http, max_retries=0
        ),
        ask_anthropic_sync,
    ),
    "openai": Sdk(
        "openai-chat",
        sse("openai-chat/text-stop-usage-done-recorded-fantasy.sse"),
        OPENAI_RATE,
        OPENAI_OVERLOADED,
        lambda url, http: openai.AsyncOpenAI(
            api_key="k", base_url=url + "/v1", http_client=http, max_retries=0
        ),
        ask_openai,
        lambda url, http: openai.OpenAI(
            api_key="k", base_url=url + "/v1", http_client=http, max_retries=0
        ),
        ask_openai_sync,
    ),
    "google-genai": Sdk(
        "gemini",
        sse("gemini/multi-chunk-text-recorded-fantasy.sse"),
        GEMINI_RATE,
        GEMINI_UNAVAILABLE,
        make_genai,
        ask_genai,
        make_genai,
        ask_genai_sync,
    ),
}
MODES = ["async", "sync"]


def comparable(frame: SessionUpdate) -> SessionUpdate:
    """The frame without its cursor, and an error's reset time (the producer's clock plus the
    delay, where simulate's clock is 0) without the clock."""
    frame = msgspec.structs.replace(frame, cursor=None)
    if isinstance(frame, Retrying | AgentError) and frame.error is not None:
        error = msgspec.structs.replace(frame.error, reset_at_epoch_ms=None)
        frame = msgspec.structs.replace(frame, error=error)
    return frame


@pytest.fixture
async def runner(redis: Redis, prefix: str) -> AsyncIterator[TurnRunner]:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    turn_runner = TurnRunner(Producer(redis, partitions=PARTITIONS, prefix=prefix), 30)
    async with running_worker(redis, settings):
        yield turn_runner
    await turn_runner.close()


class App(NamedTuple):
    """What the app's own function saw over a turn: each attempt's number, the text it read."""

    calls: list[int]
    seen: Seen


async def teed_turn(
    runner: TurnRunner, sdk: Sdk, mode: str, replies: list[Reply], ids: tuple[str, str], app: App
) -> PersistedMessage:
    """One turn of the SDK's client (async or sync) through its tee, against `replies`."""
    session, turn = ids
    async with fake_provider(replies) as fake:
        if mode == "sync":
            tee_sync = SyncTeeTransport(httpx2.HTTPTransport())
            sync_transport = cast("httpx2.BaseTransport", tee_sync)  # an httpx transport to mypy
            with httpx2.Client(transport=sync_transport) as sync_http:
                client = sdk.make_sync(fake.url, sync_http)

                def ask_sync(attempt: Attempt) -> None:
                    app.calls.append(attempt.number)
                    sdk.ask_sync(client, app.seen)

                return await runner.run_turn(session, turn, tee_sync.call(ask_sync, sdk.provider))
        tee = TeeTransport(httpx2.AsyncHTTPTransport())
        transport = cast("httpx2.AsyncBaseTransport", tee)  # an httpx transport to mypy
        async with httpx2.AsyncClient(transport=transport) as http:
            client = sdk.make(fake.url, http)

            async def ask(attempt: Attempt) -> None:
                app.calls.append(attempt.number)
                await sdk.ask(client, app.seen)

            return await runner.run_turn(session, turn, tee.call(ask, sdk.provider))


def scenario(scene: str, sdk: Sdk, tmp_path: Path) -> tuple[list[Reply], list[Path]]:
    """The fake provider's replies for a scenario, and the same bytes as simulate's files."""
    answer = sdk.answer
    whole = tmp_path / "whole.sse"
    whole.write_bytes(answer)
    if scene == "clean":
        return [Reply(200, answer, SSE)], [whole]
    if scene == "cut":
        cut = tmp_path / "cut.sse"
        cut.write_bytes(answer[: len(answer) // 2])
        return [Reply(200, answer, SSE, cut_at=len(answer) // 2), Reply(200, answer, SSE)], [
            cut,
            whole,
        ]
    error = sdk.rate_limited.recorded(tmp_path / "429.json")
    return [sdk.rate_limited.reply(), Reply(200, answer, SSE)], [error, whole]


@pytest.mark.parametrize("scene", ["clean", "cut", "429"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(SDKS))
async def test_a_teed_sdk_turn_is_what_simulate_gives(
    runner: TurnRunner,
    redis: Redis,
    prefix: str,
    tmp_path: Path,
    name: str,
    mode: str,
    scene: str,
) -> None:
    sdk = SDKS[name]
    replies, files = scenario(scene, sdk, tmp_path)
    session, turn = f"s-tee-{name}-{mode}-{scene}", f"t-tee-{name}-{mode}-{scene}"
    app = App([], [])
    message = await teed_turn(runner, sdk, mode, replies, (session, turn), app)
    assert app.calls == list(range(1, len(files) + 1))  # a retry calls the app's function again
    assert "".join(app.seen)  # the app read its own SDK's stream
    expected = simulate(files, provider=sdk.provider, session_id=session, turn_id=turn)
    assert expected.state == "finished"
    assert message == expected.message
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    assert [comparable(f) for f in frames] == [comparable(f) for f in expected.updates]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(SDKS))
async def test_a_provider_overloaded_until_the_cap_fails_the_turn_as_simulate_says(
    runner: TurnRunner, redis: Redis, prefix: str, tmp_path: Path, name: str, mode: str
) -> None:
    sdk = SDKS[name]
    session, turn = f"s-tee-{name}-{mode}-busy", f"t-tee-{name}-{mode}-busy"
    recorded = sdk.overloaded.recorded(tmp_path / "overloaded.json")
    app = App([], [])
    with pytest.raises(TurnFailed) as failed:
        await teed_turn(runner, sdk, mode, [sdk.overloaded.reply()] * 3, (session, turn), app)
    assert failed.value.error.type == "provider_unavailable"
    assert app.calls == [1, 2, 3]
    expected = simulate([recorded] * 3, provider=sdk.provider, session_id=session, turn_id=turn)
    assert expected.state == "failed"
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    assert [comparable(f) for f in frames] == [comparable(f) for f in expected.updates]


async def test_requests_outside_a_turn_pass_through(admin_redis: Redis, prefix: str) -> None:
    answer = SDKS["anthropic"].answer
    tee = TeeTransport(httpx.AsyncHTTPTransport())
    async with (
        fake_provider([Reply(200, answer, SSE)]) as fake,
        httpx.AsyncClient(transport=tee) as http,
    ):
        response = await http.post(fake.url + "/v1/messages", json={})
    assert response.content == answer
    assert await admin_redis.keys(f"{prefix}*") == []  # KEYS: the test's own admin may

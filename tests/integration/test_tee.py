"""The real `anthropic` and `openai` clients, teed into terminus (service/sdk/tee.py), against
the fake provider with a real worker: the app iterates its SDK's own stream, and the persisted
message and the session's frames are what `terminus simulate` gives on the same bytes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

import anthropic
import httpx
import httpx2
import openai
import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.service.cli.simulate import simulate
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import TurnFailed, TurnRunner
from terminus.service.sdk.steps import Attempt
from terminus.service.sdk.tee import TeeTransport
from terminus.service.sdk.tee_sync import SyncTeeTransport
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from tests.support.fake_provider import Reply, fake_provider
from tests.support.tee_scenes import (
    ANTHROPIC,
    OPENAI_CHAT,
    OVERLOADED,
    OVERLOADED_BODY,
    SSE,
    comparable,
    scenario,
)

PARTITIONS = 4


class Client(NamedTuple):
    provider: str
    answer: bytes
    make: Callable[[str, Any], Any]  # base URL, http client (async or not) -> the SDK client
    ask: Callable[[Any, list[str]], Any]  # the SDK client, what the app saw -> one request


async def ask_anthropic(client: anthropic.AsyncAnthropic, seen: list[str]) -> None:
    async with client.messages.stream(
        model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        async for text in stream.text_stream:
            seen.append(text)


async def ask_openai(client: openai.AsyncOpenAI, seen: list[str]) -> None:
    stream = await client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async for chunk in stream:
        for choice in chunk.choices:
            seen.append(choice.delta.content or "")


CLIENTS = {
    "anthropic": Client(
        "anthropic",
        ANTHROPIC,
        lambda url, http: anthropic.AsyncAnthropic(
            api_key="k", base_url=url, http_client=http, max_retries=0
        ),
        ask_anthropic,
    ),
    "openai": Client(
        "openai-chat",
        OPENAI_CHAT,
        lambda url, http: openai.AsyncOpenAI(
            api_key="k", base_url=url + "/v1", http_client=http, max_retries=0
        ),
        ask_openai,
    ),
}


@pytest.fixture
async def runner(redis: Redis, prefix: str) -> AsyncIterator[TurnRunner]:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    turn_runner = TurnRunner(Producer(redis, partitions=PARTITIONS, prefix=prefix), 30)
    async with running_worker(redis, settings):
        yield turn_runner
    await turn_runner.close()


@pytest.mark.parametrize("scene", ["clean", "cut", "429"])
@pytest.mark.parametrize("name", list(CLIENTS))
async def test_a_teed_sdk_turn_is_what_simulate_gives(
    runner: TurnRunner, redis: Redis, prefix: str, tmp_path: Path, name: str, scene: str
) -> None:
    case = CLIENTS[name]
    replies, files = scenario(scene, case.answer, tmp_path)
    session, turn = f"s-tee-{name}-{scene}", f"t-tee-{name}-{scene}"
    seen: list[str] = []
    calls: list[int] = []
    tee = TeeTransport(httpx2.AsyncHTTPTransport())
    transport = cast("httpx2.AsyncBaseTransport", tee)  # an httpx transport to mypy
    async with fake_provider(replies) as fake, httpx2.AsyncClient(transport=transport) as http:
        client = case.make(fake.url, http)

        async def ask(attempt: Attempt) -> None:
            calls.append(attempt.number)
            await case.ask(client, seen)

        message = await runner.run_turn(session, turn, tee.call(ask, case.provider))
    assert calls == list(range(1, len(files) + 1))  # a retry calls the app's function again
    assert "".join(seen)  # the app read its own SDK's stream
    expected = simulate(files, provider=case.provider, session_id=session, turn_id=turn)
    assert expected.state == "finished"
    assert message == expected.message
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    assert [comparable(f) for f in frames] == [comparable(f) for f in expected.updates]


@pytest.mark.parametrize("name", list(CLIENTS))
async def test_a_provider_overloaded_until_the_cap_fails_the_turn_as_simulate_says(
    runner: TurnRunner, redis: Redis, prefix: str, tmp_path: Path, name: str
) -> None:
    case = CLIENTS[name]
    session, turn = f"s-tee-{name}-529", f"t-tee-{name}-529"
    recorded = tmp_path / "529.json"
    body = json.loads(OVERLOADED_BODY)
    recorded.write_text(json.dumps({"status_code": 529, "headers": OVERLOADED, "body": body}))
    tee = TeeTransport(httpx2.AsyncHTTPTransport())
    transport = cast("httpx2.AsyncBaseTransport", tee)
    replies = [Reply(529, OVERLOADED_BODY, OVERLOADED)] * 3
    async with fake_provider(replies) as fake, httpx2.AsyncClient(transport=transport) as http:
        client = case.make(fake.url, http)

        async def ask(attempt: Attempt) -> None:
            await case.ask(client, [])

        with pytest.raises(TurnFailed) as failed:
            await runner.run_turn(session, turn, tee.call(ask, case.provider))
    assert failed.value.error.type == "provider_unavailable"
    expected = simulate([recorded] * 3, provider=case.provider, session_id=session, turn_id=turn)
    assert expected.state == "failed"
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    assert [comparable(f) for f in frames] == [comparable(f) for f in expected.updates]


async def test_requests_outside_a_turn_pass_through(admin_redis: Redis, prefix: str) -> None:
    tee = TeeTransport(httpx.AsyncHTTPTransport())
    async with (
        fake_provider([Reply(200, ANTHROPIC, SSE)]) as fake,
        httpx.AsyncClient(transport=tee) as http,
    ):
        response = await http.post(fake.url + "/v1/messages", json={})
    assert response.content == ANTHROPIC
    assert await admin_redis.keys(f"{prefix}*") == []  # KEYS: the test's own admin may


def ask_anthropic_sync(client: anthropic.Anthropic, seen: list[str]) -> None:
    with client.messages.stream(
        model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        for text in stream.text_stream:
            seen.append(text)


def ask_openai_sync(client: openai.OpenAI, seen: list[str]) -> None:
    stream = client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    for chunk in stream:
        for choice in chunk.choices:
            seen.append(choice.delta.content or "")


SYNC_CLIENTS = {
    "anthropic": Client(
        "anthropic",
        ANTHROPIC,
        lambda url, http: anthropic.Anthropic(
            api_key="k", base_url=url, http_client=http, max_retries=0
        ),
        ask_anthropic_sync,
    ),
    "openai": Client(
        "openai-chat",
        OPENAI_CHAT,
        lambda url, http: openai.OpenAI(
            api_key="k", base_url=url + "/v1", http_client=http, max_retries=0
        ),
        ask_openai_sync,
    ),
}


@pytest.mark.parametrize("scene", ["clean", "cut", "429"])
@pytest.mark.parametrize("name", list(SYNC_CLIENTS))
async def test_a_teed_sync_sdk_turn_is_what_simulate_gives(
    runner: TurnRunner, redis: Redis, prefix: str, tmp_path: Path, name: str, scene: str
) -> None:
    case = SYNC_CLIENTS[name]
    replies, files = scenario(scene, case.answer, tmp_path)
    session, turn = f"s-sync-{name}-{scene}", f"t-sync-{name}-{scene}"
    seen: list[str] = []
    tee = SyncTeeTransport(httpx2.HTTPTransport())
    transport = cast("httpx2.BaseTransport", tee)  # an httpx transport to mypy
    async with fake_provider(replies) as fake:
        with httpx2.Client(transport=transport) as http:
            client = case.make(fake.url, http)
            call = tee.call(lambda attempt: case.ask(client, seen), case.provider)
            message = await runner.run_turn(session, turn, call)
    assert "".join(seen)
    expected = simulate(files, provider=case.provider, session_id=session, turn_id=turn)
    assert message == expected.message
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    assert [comparable(f) for f in frames] == [comparable(f) for f in expected.updates]

"""The real `anthropic`, `openai` and `google-genai` clients, async and sync, teed into terminus
(service/sdk/tee.py, tee_sync.py), against the fake provider with a real worker: the app iterates
its SDK's own stream, and the persisted message and the session's frames are what
`terminus simulate` gives on the same bytes: the frames' text split where the network reads fell
(the producer coalesces each read's deltas of a part, by default), or exactly simulate's without
that."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NamedTuple, cast

import httpx
import httpx2
import pytest
from redis.asyncio import Redis
from serving import running_worker

from bench.tee import answers
from terminus.service.cli.simulate import simulate
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import PersistedMessage, TurnFailed, TurnRunner
from terminus.service.sdk.steps import Attempt
from terminus.service.sdk.tee import TeeTransport
from terminus.service.sdk.tee_sync import SyncTeeTransport
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from tests.support.fake_provider import Reply, fake_provider
from tests.support.sdk_clients import SDK_CLIENTS, SdkClient, Seen
from tests.support.tee_scenes import (
    PROVIDERS,
    SSE,
    Answers,
    comparable,
    comparable_frames,
    scenario,
)

PARTITIONS = 4


class Sdk(NamedTuple):
    """One official client and its provider's answers."""

    client: SdkClient
    answers: Answers


SDKS = {
    "anthropic": Sdk(SDK_CLIENTS["anthropic"], PROVIDERS["anthropic"]),
    "openai": Sdk(SDK_CLIENTS["openai"], PROVIDERS["openai-chat"]),
    "google-genai": Sdk(SDK_CLIENTS["google-genai"], PROVIDERS["gemini"]),
}
MODES = ["async", "sync"]


@pytest.fixture
async def runner(redis: Redis, prefix: str) -> AsyncIterator[TurnRunner]:
    async with running_runner(redis, prefix) as turn_runner:
        yield turn_runner


@contextlib.asynccontextmanager
async def running_runner(
    redis: Redis, prefix: str, coalesce_reads: bool = True
) -> AsyncIterator[TurnRunner]:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix, coalesce_reads=coalesce_reads)
    turn_runner = TurnRunner(producer, 30)
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
    sdk_client = sdk.client
    async with fake_provider(replies) as fake:
        if mode == "sync":
            tee_sync = SyncTeeTransport(httpx2.HTTPTransport())
            sync_transport = cast("httpx2.BaseTransport", tee_sync)  # an httpx transport to mypy
            with httpx2.Client(transport=sync_transport) as sync_http:
                client = sdk_client.make_sync(fake.url, sync_http)

                def ask_sync(attempt: Attempt) -> None:
                    app.calls.append(attempt.number)
                    sdk_client.ask_sync(client, app.seen)

                return await runner.run_turn(
                    session, turn, tee_sync.call(ask_sync, sdk_client.provider)
                )
        tee = TeeTransport(httpx2.AsyncHTTPTransport())
        transport = cast("httpx2.AsyncBaseTransport", tee)  # an httpx transport to mypy
        async with httpx2.AsyncClient(transport=transport) as http:
            client = sdk_client.make(fake.url, http)

            async def ask(attempt: Attempt) -> None:
                app.calls.append(attempt.number)
                await sdk_client.ask(client, app.seen)

            return await runner.run_turn(session, turn, tee.call(ask, sdk_client.provider))


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
    replies, files = scenario(scene, sdk.answers, tmp_path)
    session, turn = f"s-tee-{name}-{mode}-{scene}", f"t-tee-{name}-{mode}-{scene}"
    app = App([], [])
    message = await teed_turn(runner, sdk, mode, replies, (session, turn), app)
    assert app.calls == list(range(1, len(files) + 1))  # a retry calls the app's function again
    assert "".join(app.seen)  # the app read its own SDK's stream
    expected = simulate(files, provider=sdk.client.provider, session_id=session, turn_id=turn)
    assert expected.state == "finished"
    assert message == expected.message
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    assert comparable_frames(frames) == comparable_frames(expected.updates)


@pytest.mark.parametrize("name", list(SDKS))
async def test_without_coalescing_the_frames_are_simulate_s_own(
    redis: Redis, prefix: str, tmp_path: Path, name: str
) -> None:
    """`coalesce_reads=False`: one event per provider event, so the frames are simulate's, each
    delta as the provider sent it."""
    sdk = SDKS[name]
    replies, files = scenario("clean", sdk.answers, tmp_path)
    session, turn = f"s-tee-{name}-plain", f"t-tee-{name}-plain"
    async with running_runner(redis, prefix, coalesce_reads=False) as runner:
        message = await teed_turn(runner, sdk, "async", replies, (session, turn), App([], []))
    expected = simulate(files, provider=sdk.client.provider, session_id=session, turn_id=turn)
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
    replies, files = scenario("overloaded", sdk.answers, tmp_path)
    app = App([], [])
    with pytest.raises(TurnFailed) as failed:
        await teed_turn(runner, sdk, mode, replies, (session, turn), app)
    assert failed.value.error.type == "provider_unavailable"
    assert app.calls == [1, 2, 3]
    expected = simulate(files, provider=sdk.client.provider, session_id=session, turn_id=turn)
    assert expected.state == "failed"
    frames = await session_updates(redis, session, partitions=PARTITIONS, prefix=prefix)
    assert comparable_frames(frames) == comparable_frames(expected.updates)


async def test_requests_outside_a_turn_pass_through(admin_redis: Redis, prefix: str) -> None:
    answer = PROVIDERS["anthropic"].answer
    tee = TeeTransport(httpx.AsyncHTTPTransport())
    async with (
        fake_provider([Reply(200, answer, SSE)]) as fake,
        httpx.AsyncClient(transport=tee) as http,
    ):
        response = await http.post(fake.url + "/v1/messages", json={})
    assert response.content == answer
    assert await admin_redis.keys(f"{prefix}*") == []  # KEYS: the test's own admin may


async def test_an_app_slower_than_the_workers_reads_its_whole_stream(
    runner: TurnRunner, redis: Redis, prefix: str
) -> None:
    """The workers prove the turn as soon as the tee has published the provider's last event,
    while an app that awaits per delta (forwarding each to its UI) is still reading: the runner
    lets it read to the end (`settle_s`), where it once cancelled the request under it."""
    answer = answers.anthropic(3000)
    client = SDK_CLIENTS["anthropic"]
    seen: Seen = []
    tee = TeeTransport(httpx2.AsyncHTTPTransport())
    transport = cast("httpx2.AsyncBaseTransport", tee)
    replies = [Reply(200, answer.body, SSE, chunk=16384)]
    async with fake_provider(replies) as fake, httpx2.AsyncClient(transport=transport) as http:
        sdk = client.make(fake.url, http)

        async def ask(attempt: Attempt) -> None:
            async with sdk.messages.stream(
                model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                async for text in stream.text_stream:
                    seen.append(text)
                    await asyncio.sleep(0.001)  # the app's own work on each delta

        message = await runner.run_turn("s-tee-slow", "t-tee-slow", tee.call(ask, "anthropic"))
    assert message.text() == answer.text
    assert "".join(seen) == answer.text

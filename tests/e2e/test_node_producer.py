"""The TypeScript client's producer (clients/typescript/src/producer) with the real `ai` package
(7, tests/frontends) on @ai-sdk/anthropic and @ai-sdk/openai: the app's own `streamText`, whose
provider's fetch is `terminusFetch`, run by `runTurn` in Node against the fake provider, through a
real gateway and worker. In a clean answer, a cut then a retry, a 429 then a retry, and a provider
overloaded until the attempts run out, the persisted message and the session's frames are what
`terminus simulate` gives on the same bytes (as tests/integration/test_tee.py shows for Python)."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec
import pytest
from redis.asyncio import Redis
from serving import running_worker, serving

from terminus.events.outbound import AgentError, PersistedMessage, Retrying, SessionUpdate
from terminus.service.cli.simulate import simulate
from terminus.service.gateway.routes import create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from tests.support.fake_provider import fake_provider
from tests.support.tee_scenes import ANTHROPIC, OPENAI_CHAT, comparable, scenario

ROOT: Final = Path(__file__).resolve().parents[2]
FRONTENDS: Final = ROOT / "tests/frontends"
PRODUCER: Final = ROOT / "clients/typescript/build/src/producer/index.js"
NODE: Final = shutil.which("node")
SECRET: Final = b"node-producer-secret-0123456789a"
PARTITIONS: Final = 4
NODE_TIMEOUT_S: Final = 60.0
CLIENTS: Final = {
    "anthropic": ("anthropic", ANTHROPIC, "claude-x"),
    "openai": ("openai-chat", OPENAI_CHAT, "gpt-x"),
}

pytestmark = [
    pytest.mark.skipif(
        NODE is None or not (FRONTENDS / "node_modules").is_dir(),
        reason="needs node and tests/frontends' npm ci (.ci/setup)",
    ),
    pytest.mark.skipif(
        not PRODUCER.exists(),
        reason="needs the built TypeScript client (cd clients/typescript && npm ci && npm test)",
    ),
]


class Served(NamedTuple):
    base: str
    redis: Redis
    prefix: str


@pytest.fixture
async def gateway(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    app = create_gateway(redis, settings, SECRET)
    async with running_worker(redis, settings), serving(app) as base:
        yield Served(base, redis, prefix)


def expected_frames(updates: list[SessionUpdate], model: str) -> list[SessionUpdate]:
    """simulate's frames as a producer that names `model` publishes them (its errors name it)."""
    frames = []
    for frame in map(comparable, updates):
        if isinstance(frame, Retrying | AgentError) and frame.error is not None:
            error = msgspec.structs.replace(frame.error, model=model)
            frame = msgspec.structs.replace(frame, error=error)
        frames.append(frame)
    return frames


async def produce(client: str, provider_url: str, gw: Served, session: str, turn: str) -> Any:
    """What tests/frontends/produce-turn.mjs printed: the turn's message, or its rejection."""
    assert NODE is not None
    expires = int(time.time()) + 600
    producer, reader = mint(SECRET, session, expires, producer=True), mint(SECRET, session, expires)
    node = await asyncio.create_subprocess_exec(
        NODE,
        "produce-turn.mjs",
        client,
        provider_url,
        gw.base,
        producer,
        reader,
        session,
        turn,
        cwd=FRONTENDS,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(node.communicate(), NODE_TIMEOUT_S)
    assert node.returncode == 0, err.decode()
    return json.loads(out.splitlines()[-1])


@pytest.mark.parametrize("scene", ["clean", "cut", "429"])
@pytest.mark.parametrize("client", list(CLIENTS))
async def test_an_ai_sdk_turn_teed_from_node_is_what_simulate_gives(
    gateway: Served, tmp_path: Path, client: str, scene: str
) -> None:
    provider, answer, model = CLIENTS[client]
    replies, files = scenario(scene, answer, tmp_path)
    session, turn = f"s-node-{client}-{scene}", f"t-node-{client}-{scene}"
    async with fake_provider(replies) as fake:
        found = await produce(client, fake.url, gateway, session, turn)
    assert "rejected" not in found, found
    assert found["calls"] == [[1, n] for n in range(1, len(files) + 1)]  # a retry, called again
    assert "".join(found["seen"])  # streamText read its own copy of the stream
    expected = simulate(files, provider=provider, session_id=session, turn_id=turn)
    assert expected.state == "finished"
    assert expected.message is not None
    # The tee names the model the request asked for; simulate's files name none.
    message = msgspec.structs.replace(expected.message, model=model)
    assert msgspec.convert(found["message"], PersistedMessage) == message
    frames = await session_updates(
        gateway.redis, session, partitions=PARTITIONS, prefix=gateway.prefix
    )
    assert [comparable(f) for f in frames] == expected_frames(expected.updates, model)


@pytest.mark.parametrize("client", list(CLIENTS))
async def test_a_provider_overloaded_until_the_cap_rejects_with_the_typed_error(
    gateway: Served, tmp_path: Path, client: str
) -> None:
    provider, answer, model = CLIENTS[client]
    replies, files = scenario("529", answer, tmp_path)
    session, turn = f"s-node-{client}-529", f"t-node-{client}-529"
    async with fake_provider(replies) as fake:
        found = await produce(client, fake.url, gateway, session, turn)
    expected = simulate(files, provider=provider, session_id=session, turn_id=turn)
    assert expected.state == "failed"
    assert found["rejected"]["name"] == "TurnFailed"
    assert found["rejected"]["error"]["type"] == "provider_unavailable"
    assert found["rejected"]["error"]["model"] == model
    assert len(found["calls"]) == len(files)
    frames = await session_updates(
        gateway.redis, session, partitions=PARTITIONS, prefix=gateway.prefix
    )
    assert [comparable(f) for f in frames] == expected_frames(expected.updates, model)

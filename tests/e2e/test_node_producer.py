"""The TypeScript client's producer (clients/typescript/src/producer) with the real `ai` package
(7, tests/frontends) on @ai-sdk/anthropic and @ai-sdk/openai: the app's own `streamText`, whose
provider's fetch is `terminusFetch`, run by `runTurn` in Node against the fake provider, through a
real gateway and worker. In a clean answer, a cut then a retry, a 429 then a retry, and a provider
overloaded until the attempts run out, the persisted message and the session's frames are what
`terminus simulate` gives on the same bytes (as tests/integration/test_tee.py shows for Python)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
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
from terminus.service.sdk.views import session_messages, session_updates
from terminus.service.settings import Settings
from tests.support.fake_provider import fake_provider
from tests.support.tee_scenes import PROVIDERS, Answers, comparable_frames, scenario

ROOT: Final = Path(__file__).resolve().parents[2]
FRONTENDS: Final = ROOT / "tests/frontends"
PRODUCER: Final = ROOT / "clients/typescript/build/src/producer/index.js"
CLIENT_MODULES: Final = ROOT / "clients/typescript/node_modules"
NODE: Final = shutil.which("node")
SECRET: Final = b"node-producer-secret-0123456789a"
PARTITIONS: Final = 4
NODE_TIMEOUT_S: Final = 60.0
DOCS: Final = ROOT / "docs/producers.md"
SNIPPET: Final = re.compile(
    r"<!-- tested as written: tests/e2e/test_node_producer\.py \(producer\) -->\n```ts\n(.*?)```",
    re.DOTALL,
)
CLIENTS: Final[dict[str, tuple[Answers, str]]] = {  # the provider's answers, the model asked
    "anthropic": (PROVIDERS["anthropic"], "claude-x"),
    "openai": (PROVIDERS["openai-chat"], "gpt-x"),
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
    for frame in comparable_frames(updates):
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
    answers, model = CLIENTS[client]
    provider = answers.provider
    replies, files = scenario(scene, answers, tmp_path)
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
    assert comparable_frames(frames) == expected_frames(expected.updates, model)


@pytest.mark.parametrize("client", list(CLIENTS))
async def test_a_provider_overloaded_until_the_cap_rejects_with_the_typed_error(
    gateway: Served, tmp_path: Path, client: str
) -> None:
    answers, model = CLIENTS[client]
    provider = answers.provider
    replies, files = scenario("overloaded", answers, tmp_path)
    session, turn = f"s-node-{client}-busy", f"t-node-{client}-busy"
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
    assert comparable_frames(frames) == expected_frames(expected.updates, model)


def app_dir(tmp_path: Path) -> Path:
    """An app whose node_modules hold what the docs' example imports: the client (its folder,
    built), `ai` (7) and `@ai-sdk/anthropic` from tests/frontends."""
    modules = tmp_path / "app/node_modules"
    (modules / "@ai-sdk").mkdir(parents=True)
    (modules / "@terminus-llm").mkdir()
    (modules / "@terminus-llm/client").symlink_to(ROOT / "clients/typescript")
    (modules / "ai").symlink_to(FRONTENDS / "node_modules/ai7")
    (modules / "@ai-sdk/anthropic").symlink_to(FRONTENDS / "node_modules/@ai-sdk/anthropic")
    (modules / "@types").mkdir()
    (modules / "@types/node").symlink_to(CLIENT_MODULES / "@types/node")
    return modules.parent


def type_check(app: Path, source: str) -> None:
    """`source` type-checks as TypeScript against the installed declarations (strict)."""
    (app / "producer.mts").write_text(source, "utf-8")
    config = {
        "compilerOptions": {
            "target": "ES2022",
            "module": "NodeNext",
            "moduleResolution": "NodeNext",
            "strict": True,
            "noEmit": True,
            "skipLibCheck": True,
            "types": ["node"],
        },
        "files": ["producer.mts"],
    }
    (app / "tsconfig.json").write_text(json.dumps(config), "utf-8")
    tsc = CLIENT_MODULES / "typescript/bin/tsc"
    done = subprocess.run(
        [str(NODE), str(tsc), "-p", "tsconfig.json"], cwd=app, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


async def test_the_docs_node_example_runs_as_written(gateway: Served, tmp_path: Path) -> None:
    found = SNIPPET.search(DOCS.read_text("utf-8"))
    assert found is not None, "docs/producers.md has no tested Node example"
    app = app_dir(tmp_path)
    type_check(app, found.group(1))
    (app / "producer.mjs").write_text(found.group(1), "utf-8")  # TypeScript that is JavaScript
    replies, files = scenario("cut", PROVIDERS["anthropic"], tmp_path)
    expires = int(time.time()) + 600
    assert NODE is not None
    async with fake_provider(replies) as fake:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "ANTHROPIC_API_KEY": "k",
            "ANTHROPIC_BASE_URL": fake.url + "/v1",
            "TERMINUS_GATEWAY_URL": gateway.base,
            "TERMINUS_PRODUCER_TOKEN": mint(SECRET, "s1", expires, producer=True),
            "TERMINUS_SESSION_TOKEN": mint(SECRET, "s1", expires),
        }
        node = await asyncio.create_subprocess_exec(
            NODE, "producer.mjs", cwd=app, env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(node.communicate(), NODE_TIMEOUT_S)
    assert node.returncode == 0
    assert "\nfinished: stop " in out.decode()  # the proven message's finish_reason
    expected = simulate(files, provider="anthropic", session_id="s1", turn_id="t1")
    stored = await session_messages(
        gateway.redis, "s1", partitions=PARTITIONS, prefix=gateway.prefix
    )
    assert expected.message is not None
    model = msgspec.structs.replace(expected.message, model="claude-sonnet-4-5")
    assert msgspec.convert(stored, list[PersistedMessage]) == [model]

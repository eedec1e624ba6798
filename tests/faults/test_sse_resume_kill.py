"""SSE clients that leave at random points and resume, while worker processes are SIGKILLed
mid-turn: every client ends with exactly its session stream, in order, no frame twice or missing
(DESIGN sections 5 and 7; issue 4: resume with Last-Event-ID across a worker SIGKILL).

Clients per session: one through the subscriber SDK (`GatewaySource`), resuming from the last
cursor it yielded, and one raw httpx client with its own SSE parsing, resuming with
`Last-Event-ID`. The gateway is uvicorn in this process; the workers are OS processes.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Final

import httpx
import msgspec
import pytest
from redis.asyncio import Redis
from serving import serving

from terminus.events.codec import encode_json
from terminus.service.gateway.routes import Limits, create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.keys import FIELD
from terminus.service.redis.replies import xrange
from terminus.service.sdk.subscriber import GatewaySource, Update, subscribe
from terminus.service.settings import Settings
from tests.support.backends import Target
from tests.support.faults.expect import started_turns
from tests.support.faults.harness import (
    Workers,
    dead_letters,
    fault_settings,
    keys_of,
    kill_busy_and_replace,
    wait_owned,
    wait_quiet,
    wait_until,
)
from tests.support.faults.load import (
    RecordingProducer,
    TurnPlan,
    numbered_events,
    plan_sessions,
    planned_events,
)

SECRET: Final = b"sse-resume-kill-secret-0123456789"
PLANS = plan_sessions(sessions=4, turns=6, cut_every=4, tag="sse")  # a quarter cut, retried
KILL_AT: Final = (0.25, 0.55)  # fractions of the load published
PAUSE_S: Final = 0.03  # between chunks of a turn: the load lasts a few seconds
ENDINGS: Final = ("turn_finished", "agent_error")
Frame = tuple[str, str]  # cursor, the frame's JSON as stored


class Client:
    """What one client received, and how often it left and came back."""

    def __init__(self, session: str, last_turn: str, seed: int) -> None:
        self.session, self.last_turn = session, last_turn
        self.rng = random.Random(seed)
        self.frames: list[Frame] = []
        self.visits = 0

    @property
    def done(self) -> bool:
        return bool(self.frames) and _ends(self.frames[-1][1], self.last_turn)


async def sdk_client(base: str, client: Client) -> None:
    """Subscribes, takes 1 to 30 updates, leaves; again from its last cursor, until the end."""
    source = GatewaySource(base, _token(client.session))
    while not client.done:
        cursor = client.frames[-1][0] if client.frames else None
        want, got = client.rng.randint(1, 30), 0
        client.visits += 1
        async for update in subscribe(
            client.session, cursor, source=source, until_turn=client.last_turn
        ):
            client.frames.append((update.cursor, _stored_json(update)))
            got += 1
            if got >= want:
                break


async def raw_client(base: str, client: Client) -> None:
    """Reads the SSE stream by hand, leaves after 1 to 30 events, comes back with
    `Last-Event-ID`, until the end."""
    url = f"{base}/v1/sessions/{client.session}/updates"
    async with httpx.AsyncClient(timeout=30) as http:
        while not client.done:
            headers = {"Authorization": f"Bearer {_token(client.session)}"}
            if client.frames:
                headers["Last-Event-ID"] = client.frames[-1][0]
            client.visits += 1
            await _read_some(http, url, headers, client, client.rng.randint(1, 30))


async def _read_some(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], client: Client, want: int
) -> None:
    fields: dict[str, str] = {}
    async with http.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line == "" and "data" in fields:
                client.frames.append((fields["id"], fields["data"]))
                if (want := want - 1) == 0 or client.done:
                    return
                fields = {}
            elif line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")


async def publish_slowly(
    producer: RecordingProducer, plans: list[list[TurnPlan]], gate: asyncio.Event
) -> None:
    """Sessions concurrently, each turn's events in chunks with a pause between them, so the
    clients read live while the workers are killed; publishing waits while `gate` is closed."""

    async def session(turns: list[TurnPlan]) -> None:
        for plan in turns:
            events = await numbered_events(plan)
            for start in range(0, len(events), 6):
                await gate.wait()
                await producer.publish(events[start : start + 6])
                await asyncio.sleep(PAUSE_S)

    await asyncio.gather(*(session(turns) for turns in plans))


@pytest.mark.cluster  # the gateway's hub reads per slot on a cluster
async def test_sse_clients_resume_exactly_across_worker_sigkills(
    fault_target: Target, tmp_path: Path
) -> None:
    settings = fault_settings(fault_target.url, partitions=4, redis_cluster=fault_target.cluster)
    redis = fault_target.client()
    clients = [
        Client(turns[0].session_id, turns[-1].turn_id, seed) for seed, turns in enumerate(PLANS * 2)
    ]
    try:
        with Workers(settings, tmp_path) as workers:
            for _ in range(2):
                workers.start()
            await wait_owned(redis, settings, workers=2)
            producer = RecordingProducer(redis, settings)
            app = create_gateway(redis, settings, SECRET, Limits(stream_opens=10_000))
            async with serving(app) as base:
                readers = [sdk_client(base, c) for c in clients[: len(PLANS)]]
                readers += [raw_client(base, c) for c in clients[len(PLANS) :]]
                reading = asyncio.gather(*readers)
                gate = asyncio.Event()
                gate.set()
                load = asyncio.create_task(publish_slowly(producer, PLANS, gate))
                mid_stream = await kill_during(load, gate, producer, workers, settings, clients)
                await load
                async with asyncio.timeout(60):
                    await reading
            await wait_quiet(redis, settings, started_turns(producer.published))
            assert workers.crashed() == []
        assert producer.count == planned_events(PLANS)
        assert mid_stream == [True] * len(KILL_AT), "a worker was killed with no client mid-stream"
        for client in clients:
            assert client.frames == await session_stream(redis, settings, client.session)
            assert client.visits >= 5, "the client hardly ever left and resumed"
        assert await dead_letters(redis, settings) == {}
    finally:
        await redis.aclose()


async def kill_during(
    load: asyncio.Task[None],
    gate: asyncio.Event,
    producer: RecordingProducer,
    workers: Workers,
    settings: Settings,
    clients: list[Client],
) -> list[bool]:
    """SIGKILL a worker (and start another) as the load passes each mark; for each kill, whether
    some client was mid-stream then (had frames, but not its session's last one). The load is
    held during each kill, so a slow kill on a busy machine cannot let it run to its end first."""
    rng, total, mid_stream = random.Random(4), planned_events(PLANS), []
    for mark in KILL_AT:

        async def passed(mark: float = mark) -> bool:
            return load.done() or producer.count >= mark * total

        await wait_until(passed, f"{mark:.0%} of the load published", timeout=60)
        gate.clear()
        assert not load.done(), "the load ended before the kill"
        mid_stream.append(any(c.frames and not c.done for c in clients))
        started = time.monotonic()
        await kill_busy_and_replace(producer.redis, settings, workers, rng)
        gate.set()
        assert time.monotonic() - started < 10
    return mid_stream


async def session_stream(redis: Redis, settings: Settings, session: str) -> list[Frame]:
    """The session stream as XRANGE returns it: each entry's id and stored JSON."""
    entries = await xrange(redis, keys_of(settings, session).session(session))
    return [(entry_id.decode(), fields[FIELD].decode()) for entry_id, fields in entries]


def _stored_json(update: Update) -> str:
    # The worker stores frames without their cursor; the SDK's frame has it set.
    return encode_json(msgspec.structs.replace(update.frame, cursor=None)).decode()


def _ends(stored: str, last_turn: str) -> bool:
    frame = msgspec.json.decode(stored)
    return bool(frame["sessionUpdate"] in ENDINGS and frame["turn_id"] == last_turn)


def _token(session: str) -> str:
    return mint(SECRET, session, int(time.time()) + 600)

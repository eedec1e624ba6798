"""Recorded turns played through a real worker and gateway, for the UI message stream's tests.

A producer (`TurnRunner`, the SDK's own) answers each attempt with a recorded Anthropic stream;
`cut` is the recorded answer stopped after its first text deltas (no `message_stop`), so its
visible text is withdrawn when the workers retry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

import httpx
import msgspec
from redis.asyncio import Redis
from serving import running_worker, serving

from terminus.events.outbound import PersistedMessage, TextPart
from terminus.service.cli.feeding import TranscriptCall
from terminus.service.gateway.routes import Limits, create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import TurnFailed, TurnRunner
from terminus.service.sdk.steps import Attempt
from terminus.service.sdk.views import session_messages
from terminus.service.settings import Settings

ROOT: Final = Path(__file__).resolve().parents[1]
ANTHROPIC: Final = ROOT / "tests/fixtures/provider-streams/anthropic"
ANSWER: Final = ANTHROPIC / "text-recorded-fantasy.sse"
REFUSED: Final = ANTHROPIC / "http-400-invalid-request-recorded-sdk-python.json"
SECRET: Final = b"ui-stream-test-secret-0123456789"
PARTITIONS: Final = 4
CUT_AFTER_LINES: Final = 24  # message_start, the block's start and five text deltas


class Served(NamedTuple):
    base: str
    redis: Redis
    settings: Settings
    runner: TurnRunner


@contextlib.asynccontextmanager
async def ui_gateway(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    """A worker, the gateway on a loopback port, and a producer, on the test's prefix."""
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    app = create_gateway(redis, settings, SECRET, Limits(stream_opens=100, max_streams=16))
    runner = TurnRunner(Producer(redis, partitions=PARTITIONS, prefix=prefix))
    async with running_worker(redis, settings), serving(app) as base:
        try:
            yield Served(base, redis, settings, runner)
        finally:
            await runner.close()


def cut_answer(directory: Path) -> Path:
    """The recorded answer, cut after its first deltas: a stream with no terminal proof."""
    lines = ANSWER.read_text("utf-8").splitlines(keepends=True)
    path = directory / "cut.sse"
    path.write_text("".join(lines[:CUT_AFTER_LINES]), "utf-8")
    return path


@dataclass
class GatedCall:
    """A recorded call whose attempts after the first wait for `gate`: the turn stays open,
    its first attempt discarded, until the test lets it go on."""

    inner: TranscriptCall
    gate: asyncio.Event
    provider: str = "anthropic"

    async def __call__(self, attempt: Attempt) -> None:
        if attempt.number > 1:
            await self.gate.wait()
        await self.inner(attempt)


async def play(
    served: Served,
    session: str,
    turn: str,
    files: list[Path],
    pace_s: float = 0.02,
    gate: asyncio.Event | None = None,
) -> None:
    """Run the turn to its end, attempt n answered by `files[n-1]`, four events at a time."""
    call = TranscriptCall("anthropic", files, chunk=4, pace_s=pace_s)
    with contextlib.suppress(TurnFailed):
        await served.runner.run_turn(session, turn, call if gate is None else GatedCall(call, gate))


async def proven_text(served: Served, session: str) -> str:
    settings = served.settings
    found = await session_messages(
        served.redis, session, partitions=settings.partitions, prefix=settings.prefix
    )
    messages = msgspec.convert(found, list[PersistedMessage])
    return "".join(p.text for m in messages for p in m.parts if isinstance(p, TextPart))


def token(session: str) -> str:
    return mint(SECRET, session, int(time.time()) + 600)


def auth(session: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(session)}"}


class UiAnswer(NamedTuple):
    status: int
    headers: httpx.Headers
    chunks: list[dict[str, Any]]
    done: bool  # it ended with `data: [DONE]`


async def read_ui(
    client: httpx.AsyncClient, url: str, session: str, stop_after: int | None = None
) -> UiAnswer:
    """The chunks of one UI message stream, until `[DONE]` (or after `stop_after` chunks)."""
    chunks: list[dict[str, Any]] = []
    async with client.stream("GET", url, headers=auth(session)) as response:
        if response.status_code != 200:
            await response.aread()
            return UiAnswer(response.status_code, response.headers, [], False)
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                return UiAnswer(200, response.headers, chunks, True)
            chunks.append(msgspec.json.decode(line.removeprefix("data: ")))
            if stop_after is not None and len(chunks) >= stop_after:
                break
    return UiAnswer(200, response.headers, chunks, False)


async def wait_for_text(served: Served, session: str, deadline_s: float = 30.0) -> str:
    """The session's proven text, once a message holds some."""
    give_up = time.monotonic() + deadline_s
    while time.monotonic() < give_up:
        text = await proven_text(served, session)
        if text:
            return text
        await asyncio.sleep(0.05)
    raise AssertionError(f"no proven text in {session} after {deadline_s} s")


async def until_open(served: Served, session: str, deadline_s: float = 30.0) -> None:
    """Once the session has an open turn (its resume GET answers 200, not 204)."""
    url = f"{served.base}/v1/sessions/{session}/ui-message-stream"
    give_up = time.monotonic() + deadline_s
    async with httpx.AsyncClient(timeout=10.0) as client:
        while time.monotonic() < give_up:
            async with client.stream("GET", url, headers=auth(session)) as response:
                if response.status_code == 200:
                    return
                assert response.status_code == 204, response.status_code
            await asyncio.sleep(0.05)
    raise AssertionError(f"no turn opened in {session} after {deadline_s} s")

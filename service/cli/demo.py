"""The demo workload: recorded transcripts that walk a new user through every path of a turn.

Each scenario is the successive attempts of one turn. The demo is a real producer: the SDK's
`TurnRunner` plays the recorded files as a provider's answers, paced like a live stream, and
waits for the workers' decision after each, as it would with a real provider. A watcher tells
each turn's story as the workers commit it (`demo_story.py`): its state changes, the text it
streams, the text withdrawn from an attempt that had no proof and why, the retry, and then the
persisted message. The producer's own line about a retry waits until the watcher has told the
attempt that retry ends, so it is printed after that attempt, not before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from pathlib import Path
from typing import TextIO

import msgspec
from redis.asyncio import Redis

from terminus.events.codec import decode_frame, decode_message
from terminus.events.outbound import TextPart
from terminus.service.cli.demo_story import Entry, Story
from terminus.service.cli.feeding import TranscriptCall
from terminus.service.keys import FIELD, START, Keys, partition_of
from terminus.service.redis.replies import StreamReply, last_id, xread
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import TurnFailed, TurnRunner
from terminus.service.settings import Settings
from terminus.statemachines.outputs import Transition

DEMO_DIR = Path(__file__).parent / "demo_transcripts"
PACE_S = 0.03  # between chunks of a transcript, so frames visibly stream
MAX_WAIT_MS = 1500  # the demo producer shortens long retry-after waits to keep the demo brisk
TURN_TIMEOUT_S = 60.0
TOLD_TIMEOUT_S = 10.0  # how long the producer's retry line waits for the watcher to catch up


class Scenario(msgspec.Struct, frozen=True):
    title: str
    provider: str
    files: tuple[str, ...]


SCENARIOS = (
    Scenario("complete answer", "anthropic", ("text-recorded-fantasy.sse",)),
    Scenario(
        "cut mid-stream, then retried",
        "anthropic",
        ("text-cut-mid-sentence-recorded-fantasy.partial.sse", "text-recorded-fantasy.sse"),
    ),
    Scenario(
        "empty synthesized finish, then retried",
        "openai-chat",
        ("synthesized-empty-finish.jsonl", "text-stop-usage-done-recorded-fantasy.sse"),
    ),
    Scenario(
        "rate limited, then complete",
        "anthropic",
        (
            "http-429-rate-limit-error-recorded-sdk-python.json",
            "citations-delta-plaintext-document-rig.sse",
        ),
    ),
    Scenario(
        "overloaded until failure",
        "anthropic",
        ("http-529-overloaded-sdk-ts-issue616.json",) * 3,
    ),
)


class DemoTurn:
    """One scenario's turn: where its records live, and the story the watcher tells."""

    def __init__(self, settings: Settings, run_id: str, number: int, stream: TextIO) -> None:
        self.session_id = f"demo-{run_id}-{number}"
        self.turn_id = f"demo-{run_id}-turn-{number}"
        self.keys = Keys(partition_of(self.session_id, settings.partitions), settings.prefix)
        self.story = Story(stream)


class Narrator:
    """The demo producer's waits: each retry's line printed once the watcher has told the
    attempt it follows, then a wait shortened to keep the demo brisk."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.story: Story | None = None

    async def wait(self, seconds: float) -> None:
        wait_ms = min(round(seconds * 1000), MAX_WAIT_MS)
        if self.story is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.story.retry_shown.wait(), TOLD_TIMEOUT_S)
            self.story.retry_shown.clear()
            self.story.line(f"producer: retry_scheduled, waiting {wait_ms} ms")
        await asyncio.sleep(wait_ms / 1000)


async def run_demo(
    redis: Redis, settings: Settings, stream: TextIO = sys.stdout, directory: Path | None = None
) -> dict[str, str]:
    """Play every scenario against the running workers; returns each turn's final state."""
    run_id = uuid.uuid4().hex[:6]
    producer = Producer.from_settings(redis, settings)
    narrator = Narrator(stream)
    runner = TurnRunner(producer, sleep=narrator.wait)
    states: dict[str, str] = {}
    try:
        for number, scenario in enumerate(SCENARIOS, start=1):
            turn = DemoTurn(settings, run_id, number, stream)
            narrator.story = turn.story
            print(f"\n[{number}] {scenario.title} ({scenario.provider})", file=stream, flush=True)
            await _play(redis, runner, scenario, turn, directory or DEMO_DIR)
            await _print_message(redis, turn)
            states[scenario.title] = turn.story.final_state
    finally:
        await runner.close()
    return states


async def _play(
    redis: Redis, runner: TurnRunner, scenario: Scenario, turn: DemoTurn, directory: Path
) -> None:
    cursors = {
        turn.keys.transitions: await last_id(redis, turn.keys.transitions),
        turn.keys.session(turn.session_id): START,
    }
    watcher = asyncio.create_task(_watch(redis, turn, cursors))
    files = [directory / name for name in scenario.files]
    call = TranscriptCall(scenario.provider, files, chunk=4, pace_s=PACE_S)
    with contextlib.suppress(TurnFailed):  # the watcher shows its agent_error
        await runner.run_turn(turn.session_id, turn.turn_id, call)
    await asyncio.wait_for(watcher, TURN_TIMEOUT_S)


async def _watch(redis: Redis, turn: DemoTurn, cursors: dict[str, str]) -> None:
    """Tell the turn's story as it is committed, until it ends."""
    while not turn.story.done.is_set():
        # A blocked XREAD returns only the stream that woke it; it is a wake-up call here, and
        # the read after it takes everything committed so far from both streams: whole commits.
        if await xread(redis, cursors, count=1, block=200):
            reply = await xread(redis, cursors, count=1000)
            turn.story.tell(_entries(reply, turn, cursors))


def _entries(reply: StreamReply, turn: DemoTurn, cursors: dict[str, str]) -> list[Entry]:
    """The turn's transitions and frames in `reply`; moves `cursors` past them."""
    found: list[Entry] = []
    for key, entries in reply:
        name = key.decode()
        for entry_id, fields in entries:
            cursors[name] = entry_id.decode()
            if name == turn.keys.transitions:
                t = msgspec.json.decode(fields[FIELD], type=Transition)
                found.extend([t] if t.turn_id == turn.turn_id else [])
            else:
                found.append(decode_frame(fields[FIELD]))
    return found


async def _print_message(redis: Redis, turn: DemoTurn) -> None:
    story = turn.story
    raw = await redis.hget(turn.keys.messages(turn.session_id), f"msg-{turn.turn_id}")
    if raw:
        message = decode_message(raw)
        text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
        story.line(f"message: {_clip(text)!r}")
    story.line(f"final state: {story.final_state}")


def _clip(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"

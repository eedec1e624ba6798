"""Record the golden log of a contract version (tests/golden/README.md); never run by the tests.

    .venv/bin/python -m tests.golden.record v1 [--redis redis://127.0.0.1:6379]
    .venv/bin/python -m tests.golden.record v1 --reproject


Publishes a varied workload through the real producer SDK into a fresh prefix, runs a worker until
the pool is quiet and no stall is near, then writes the inbound log, the settings and the
canonical dump of the projections. Before writing, it replays the log twice into other prefixes
and refuses to write unless both replays dump exactly what the worker committed. A directory that
already exists is never written again.

`--reproject` is for a deliberate change of what the workers write (README.md, "Rules"): it
replays the directory's unchanged log twice, and rewrites `projections.json` alone, only if both
replays agree.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, NamedTuple, cast

import msgspec
from redis.asyncio import Redis

from terminus.events.codec import Format
from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolResult,
    TurnCancelled,
    TurnStarted,
)
from terminus.service.cli.demo import DEMO_DIR, SCENARIOS
from terminus.service.cli.feeding import (
    PreparedAttempt,
    prepare_attempt,
    publish_attempt,
    publish_prepared,
)
from terminus.service.cli.replay import clear_prefix
from terminus.service.keys import GROUP, Keys, keys_for_session
from terminus.service.redis.replies import last_id, text
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES, TurnState
from terminus.statemachines.turn import Turn

from .dump import canonical_dump, first_difference
from .inbound import HERE, PROJECTIONS, pretty, read_log, read_projections, replay_dir, write_dir

SETTINGS: Final = Settings(partitions=4, block_ms=100, lease_ttl_ms=1000, stall_timeout_ms=3000)
FIXTURES: Final = HERE.parent / "fixtures" / "provider-streams"
PROVIDER_OF_DIR: Final = {
    "anthropic": "anthropic",
    "gemini": "gemini",
    "openai-chat": "openai-chat",
    "openai-compatible": "openai-chat",
    "openai-responses": "openai-responses",
}
SNAPSHOT: Final = msgspec.msgpack.Decoder(Turn)
DECIDED: Final = frozenset((TurnState.RETRYING, TurnState.AWAITING_STEP, *FINAL_STATES))
NEAR_MS: Final = 10_000  # stop only when no stall is due this soon: it would land after the dump
TIMEOUT_S: Final = 180.0
# Entries no producer SDK writes: each must end as a dead letter with a clear reason.
JUNK: Final[tuple[dict[bytes, bytes], ...]] = (
    {b"e": b'{"type":"text-delta","session_id":"golden-junk"'},
    {b"e": b"\xc1\xc1\xc1"},
    {b"x": b"an entry without the field e"},
    {b"e": b'{"type":"text-shout","session_id":"s","turn_id":"t","seq":1}'},
    {b"e": b'{"type":"text-end","session_id":"s","turn_id":"t","seq":"one","part_id":"p"}'},
    {b"e": b'{"type":"text-end","v":0,"session_id":"s","turn_id":"t","seq":1,"part_id":"p"}'},
    # Future versions: 1000, which no contract will reach, so this log replays the same forever.
    {b"e": b'{"type":"image-delta","v":1000,"session_id":"s","turn_id":"t","seq":1,"data":"?"}'},
    {b"e": msgspec.msgpack.encode({"type": "text-end", "v": 1000, "session_id": "s", "seq": 1})},
)


class Spec(NamedTuple):
    """One turn of recorded transcripts: one file per attempt."""

    name: str
    provider: str
    files: tuple[Path, ...]


def provider_of(path: Path) -> str:
    directory = path.parent.name
    if directory == "bedrock":
        return "bedrock-converse" if "converse" in path.name else "bedrock"
    return PROVIDER_OF_DIR[directory]


def specs() -> list[Spec]:
    """Every recorded fixture as a one-attempt turn, then every demo scenario."""
    files = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix != ".md")
    fixtures = [Spec(str(p.relative_to(FIXTURES)), provider_of(p), (p,)) for p in files]
    demos = [Spec(s.title, s.provider, tuple(DEMO_DIR / f for f in s.files)) for s in SCENARIOS]
    return fixtures + demos


class Producers:
    """One producer per wire format (and one that coalesces deltas), made when first asked."""

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis, self.settings = redis, settings
        self.made: dict[tuple[Format, bool], Producer] = {}

    def get(self, fmt: Format, coalesce: bool = False) -> Producer:
        if (fmt, coalesce) not in self.made:
            self.made[fmt, coalesce] = Producer(
                self.redis,
                partitions=self.settings.partitions,
                prefix=self.settings.prefix,
                fmt=fmt,
                coalesce_ms=5 if coalesce else 0,
                coalesce_reads=False,  # the golden logs were recorded event for event
            )
        return self.made[fmt, coalesce]


class Recording:
    """A run of the workload under one prefix."""

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis, self.settings = redis, settings
        self.producers = Producers(redis, settings)

    async def snapshot(self, session_id: str, turn_id: str) -> Turn | None:
        keys = keys_for_session(session_id, self.settings.partitions, self.settings.prefix)
        raw = cast("bytes | None", await self.redis.get(keys.turn(turn_id)))
        return None if raw is None else SNAPSHOT.decode(raw)

    async def decided(self, session_id: str, turn_id: str, attempt: int) -> Turn:
        """The turn once `attempt` is settled (retrying, awaiting the next step, or final)."""

        async def done() -> bool:
            turn = await self.snapshot(session_id, turn_id)
            return turn is not None and turn.attempt >= attempt and turn.state in DECIDED

        await until(done, f"{turn_id} attempt {attempt}")
        found = await self.snapshot(session_id, turn_id)
        assert found is not None
        return found

    async def files(self, n: int, spec: Spec) -> None:
        """Each file as the next attempt, the next only once the turn is retrying."""
        fmt: Format = "msgpack" if n % 2 else "json"
        session_id, turn_id = f"golden-{n:02d}", f"golden-{n:02d}-turn"
        turn = self.producers.get(fmt, coalesce=n == 7).turn(session_id, turn_id)
        await turn.start()
        for attempt, path in enumerate(spec.files, start=1):
            if attempt > 1:
                state = (await self.decided(session_id, turn_id, attempt - 1)).state
                if state is not TurnState.RETRYING:
                    return
            await publish_attempt(turn, path, spec.provider, attempt=attempt)

    async def tool_then_answer(self) -> None:
        """Step 1 calls tools, the producer publishes their results, step 2 answers."""
        session_id, turn_id = "golden-tools", "golden-tools-turn"
        turn = self.producers.get("json").turn(session_id, turn_id)
        await turn.start(max_attempts=2)
        path = FIXTURES / "anthropic" / "tool-use-recorded-fantasy.sse"
        prepared = prepare_attempt(path, "anthropic", session_id, turn_id, attempt=1)
        await publish_prepared(turn, prepared, "anthropic", attempt=1)
        await self.decided(session_id, turn_id, 1)
        for call in (e for e in prepared.body if isinstance(e, ToolCall)):
            await turn.emit(ToolResult, tool_call_id=call.tool_call_id, output="sunny, 21 C")
        answer = FIXTURES / "anthropic" / "text-recorded-fantasy.sse"
        await publish_attempt(turn, answer, "anthropic", attempt=1, step=2)

    async def cancelled(self) -> None:
        """The user cancels mid-stream."""
        session_id, turn_id = "golden-cancel", "golden-cancel-turn"
        turn = self.producers.get("msgpack").turn(session_id, turn_id)
        await turn.start()
        path = DEMO_DIR / "text-recorded-fantasy.sse"
        head, body = prepare_attempt(path, "anthropic", session_id, turn_id, attempt=1)
        await publish_prepared(turn, PreparedAttempt(head, body[:6]), "anthropic", attempt=1)
        await turn.emit(TurnCancelled, reason="user")

    async def gaps_and_duplicates(self) -> None:
        """A producer with its own numbering: seq 5 and 6 after 2 (gaps, dead), then 3 (due,
        applied), then 7 and 8 twice (gaps after 3). Recorded when a gap still consumed its seq;
        tests/golden/README.md says what the log now folds to."""
        ids: dict[str, Any] = {"session_id": "golden-gaps", "turn_id": "golden-gaps-turn"}
        events: list[InboundEvent] = [
            TurnStarted(**ids, seq=0),
            AttemptStarted(**ids, seq=1, provider="openai", model="m"),
            TextStart(**ids, seq=2, part_id="p"),
            TextDelta(**ids, seq=5, part_id="p", delta="after a gap "),
            TextDelta(**ids, seq=6, part_id="p", delta="and on."),
            TextDelta(**ids, seq=3, part_id="p", delta="regression"),
            TextEnd(**ids, seq=7, part_id="p"),
            FinishStep(**ids, seq=8, finish_reason="stop", raw_finish_reason="stop"),
            FinishStep(**ids, seq=8, finish_reason="stop", raw_finish_reason="stop"),
        ]
        for event in events:  # one entry at a time: each is its own fact in the log
            await self.producers.get("json").publish([event])

    async def junk(self) -> None:
        for n, fields in enumerate(JUNK):
            key = Keys(n % self.settings.partitions, self.settings.prefix).inbound
            await self.redis.xadd(key, fields)  # type: ignore[arg-type]

    async def run(self) -> None:
        work = [self.files(n, spec) for n, spec in enumerate(specs())]
        work += [self.tool_then_answer(), self.cancelled(), self.gaps_and_duplicates()]
        await asyncio.gather(*work)
        await self.junk()


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def quiet(redis: Redis, settings: Settings) -> bool:
    """Every entry delivered and committed, and no stall due within NEAR_MS."""
    seconds, micros = await redis.time()
    soon = seconds * 1000 + micros // 1000 + NEAR_MS
    for partition in range(settings.partitions):
        keys = Keys(partition, settings.prefix)
        if await redis.zcount(keys.open_turns, "-inf", soon):
            return False
        last = await last_id(redis, keys.inbound)
        if last == "0-0":
            continue
        groups = cast("list[dict[str, object]]", await redis.xinfo_groups(keys.inbound))
        group = next((g for g in groups if text(g["name"]) == GROUP), None)
        if group is None or group["pending"] or text(group["last-delivered-id"]) != last:
            return False
    return True


async def record(redis: Redis, directory: Path) -> None:
    prefix = f"golden-{uuid.uuid4().hex[:8]}"
    settings = msgspec.structs.replace(SETTINGS, prefix=prefix)
    worker = Worker(redis, settings)
    working = asyncio.create_task(worker.run())
    try:
        await Recording(redis, settings).run()
        await until(lambda: quiet(redis, settings), "the pool to be quiet")
    finally:
        await worker.stop()
        await working
    try:
        await check_and_write(redis, settings, directory)
    finally:
        for done in (prefix, f"{prefix}-a", f"{prefix}-b", f"{prefix}-in-a", f"{prefix}-in-b"):
            await clear_prefix(redis, done)


async def check_and_write(redis: Redis, settings: Settings, directory: Path) -> None:
    """Write the golden directory once two replays of its files dump what the worker
    committed: a replay at another time, by another process, must not change a byte."""
    if not await quiet(redis, settings):
        raise RuntimeError("an entry arrived after the pool was quiet (a stall?): record again")
    prefix = settings.prefix
    live = await canonical_dump(redis, prefix)
    leak = msgspec.json.encode(live).find(prefix.encode())
    if leak >= 0:
        raise RuntimeError(f"the prefix leaks into a projection at byte {leak} of the dump")
    entries = await read_log(redis, prefix, settings.partitions)
    staging = directory.with_name(directory.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)  # left by a recording that failed its replays
    write_dir(staging, settings, entries, live)
    recorded = read_projections(staging)  # as the test reads it, not as it was in memory
    for run in ("a", "b"):
        replayed = await replay_dir(redis, staging, f"{prefix}-in-{run}", f"{prefix}-{run}")
        difference = first_difference(recorded, replayed)
        if difference is not None:
            raise RuntimeError(f"replay {run} differs from the worker: {difference}")
    staging.rename(directory)
    print(f"{directory}: {len(entries)} entries, {len(live)} projection keys")


async def reproject(redis: Redis, directory: Path) -> None:
    """Rewrite the directory's projections from its unchanged log, once two replays agree."""
    prefix = f"golden-{uuid.uuid4().hex[:8]}"
    dumps = []
    try:
        for run in ("a", "b"):
            dumps.append(
                await replay_dir(redis, directory, f"{prefix}-in-{run}", f"{prefix}-{run}")
            )
    finally:
        for run in ("a", "b"):
            await clear_prefix(redis, f"{prefix}-in-{run}")
            await clear_prefix(redis, f"{prefix}-{run}")
    difference = first_difference(dumps[0], dumps[1])
    if difference is not None:
        raise RuntimeError(f"two replays differ: {difference}")
    (directory / PROJECTIONS).write_bytes(pretty(dumps[0]))
    print(f"{directory / PROJECTIONS}: rewritten, {len(dumps[0])} projection keys")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="the contract version's directory name, e.g. v1")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    parser.add_argument(
        "--reproject", action="store_true", help="rewrite projections.json from the log"
    )
    args = parser.parse_args()
    directory = HERE / args.version
    if directory.exists() != args.reproject:
        sys.exit(
            f"{directory} exists: a golden log is never recorded again (README.md)"
            if directory.exists()
            else f"{directory} does not exist: nothing to reproject"
        )

    async def go() -> None:
        redis = Redis.from_url(args.redis)
        try:
            await (reproject(redis, directory) if args.reproject else record(redis, directory))
        finally:
            await redis.aclose()

    asyncio.run(go())


if __name__ == "__main__":
    main()

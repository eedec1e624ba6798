"""Every recorded transcript end to end: SDK -> inbound log -> worker -> projections == simulate.

Each fixture (and each demo scenario) is its own turn in its own session, published through the
producer SDK while an in-process worker owns every partition. Once the pool is quiet, the session
frames, the persisted message, the partial record and the snapshot's state and attempt history
must be exactly what `simulate` gives for the same files, session and turn: the live path and the
pure fold are one computation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any, Final, cast

import msgspec
import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.adapters.compat import DIALECTS
from terminus.events.codec import decode_message, decode_partial
from terminus.service.cli.demo import DEMO_DIR, SCENARIOS
from terminus.service.cli.feeding import publish_attempt
from terminus.service.cli.simulate import simulate
from terminus.service.keys import GROUP, Keys, keys_for_session
from terminus.service.redis.replies import last_id
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.states import FINAL_STATES, TurnState
from terminus.statemachines.turn import Turn
from tests.support.faults.load import CapturingProducer
from tests.support.polling import until
from tests.support.tee_scenes import comparable_frames

FIXTURES: Final = Path(__file__).parent.parent / "fixtures" / "provider-streams"
PARTITIONS: Final = 4
PUBLISHING: Final = 32
# The provider of each fixture directory, as tests/unit/simulated_fixtures.py reads them.
PROVIDER_OF_DIR: Final = {
    "anthropic": "anthropic",
    "gemini": "gemini",
    "openai-chat": "openai-chat",
    "openai-compatible": "openai-chat",
    "openai-responses": "openai-responses",
}
SNAPSHOT: Final = msgspec.msgpack.Decoder(Turn)
DECIDED: Final = frozenset((TurnState.RETRYING, *FINAL_STATES))
pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster


def provider_of(name: str) -> str:
    directory, file = name.split("/", 1)
    if directory == "bedrock":
        return "bedrock-converse" if "converse" in file else "bedrock"
    named = [n for n in DIALECTS if file.startswith(f"{n}-")]
    if directory == "openai-compatible" and named:
        return f"openai-chat:{max(named, key=len)}"  # read with that server's own table
    return PROVIDER_OF_DIR[directory]


def fixture_names() -> list[str]:
    return sorted(
        str(p.relative_to(FIXTURES))
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name != "SOURCES.md"
    )


@pytest.fixture
async def worker(redis: Redis, prefix: str) -> AsyncIterator[Worker]:
    """One in-process worker owning every partition, stopped after the test."""
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100, lease_ttl_ms=1000)
    async with running_worker(redis, settings) as running:
        yield running


class Case:
    """One turn to publish: its files (one attempt each), provider and where it is stored."""

    def __init__(self, name: str, files: list[Path], provider: str, prefix: str, n: int) -> None:
        self.name, self.files, self.provider = name, files, provider
        self.session_id, self.turn_id = f"session-{n}", f"turn-{n}"
        self.keys = keys_for_session(self.session_id, PARTITIONS, prefix)
        self.expected = simulate(
            files, provider=provider, session_id=self.session_id, turn_id=self.turn_id
        )

    async def snapshot(self, redis: Redis) -> Turn | None:
        raw = cast("bytes | None", await redis.get(self.keys.turn(self.turn_id)))
        return None if raw is None else SNAPSHOT.decode(raw)

    async def decided(self, redis: Redis, attempt: int) -> bool:
        """The turn has settled `attempt`: it is retrying or final."""
        turn = await self.snapshot(redis)
        return turn is not None and turn.attempt >= attempt and turn.state in DECIDED

    async def in_expected_state(self, redis: Redis) -> bool:
        turn = await self.snapshot(redis)
        return turn is not None and turn.state.value == self.expected.state

    async def publish(self, producer: Producer, redis: Redis) -> None:
        """Each file as the next attempt, the next only once the turn is `retrying`."""
        turn = producer.turn(self.session_id, self.turn_id)
        await turn.start()
        for attempt, path in enumerate(self.files, start=1):
            if attempt > 1:
                await until(partial(self.decided, redis, attempt - 1), f"{self.name} decided")
                current = await self.snapshot(redis)
                if current is None or current.state is not TurnState.RETRYING:
                    return  # the turn is over: a real producer has nothing more to send
            await publish_attempt(turn, path, self.provider, attempt=attempt)

    async def committed(self, redis: Redis, prefix: str) -> dict[str, Any]:
        """What the workers committed for this turn, in the shape of simulate's outcome."""
        turn = await self.snapshot(redis)
        message = await redis.hget(self.keys.messages(self.session_id), f"msg-{self.turn_id}")
        partial = await redis.hget(self.keys.partials(self.session_id), self.turn_id)
        frames = await session_updates(redis, self.session_id, partitions=PARTITIONS, prefix=prefix)
        return {
            "state": turn.state.value if turn else None,
            "attempts": turn.history if turn else None,
            "updates": [msgspec.structs.replace(f, cursor=None) for f in frames],
            "message": None if message is None else decode_message(message),
            "partial": None if partial is None else decode_partial(partial),
        }

    def simulated(self) -> dict[str, Any]:
        out = self.expected
        return {
            "state": out.state,
            "attempts": out.attempts,
            "updates": out.updates,
            "message": out.message,
            "partial": out.partial,
        }


async def quiet(redis: Redis, prefix: str) -> bool:
    """Every partition's group has delivered its last entry and has nothing pending."""
    for partition in range(PARTITIONS):
        keys = Keys(partition, prefix)
        last = await last_id(redis, keys.inbound)
        if last == "0-0":
            continue
        groups = await redis.xinfo_groups(keys.inbound)
        group = next((g for g in groups if _text(g["name"]) == GROUP), None)
        if group is None or group["pending"]:
            return False
        if _text(group["last-delivered-id"]) != last:
            return False
    return True


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def run_cases(redis: Redis, prefix: str, cases: list[Case]) -> dict[str, list[str]]:
    """Publish every case at once, wait for the pool, and list what differs from simulate."""
    # One event per provider event, as simulate makes them: the frames compare delta by delta.
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix, coalesce_reads=False)
    # Bounded, so the cases' pollers stay within the client's connection pool.
    slots = asyncio.Semaphore(PUBLISHING)

    async def publish(case: Case) -> None:
        async with slots:
            await case.publish(producer, redis)

    await asyncio.gather(*(publish(case) for case in cases))
    for case in cases:
        await until(partial(case.in_expected_state, redis), f"{case.name} in {case.expected.state}")
    await until(lambda: quiet(redis, prefix), "the pool to be quiet")
    problems: dict[str, list[str]] = {}
    for case in cases:
        got, want = await case.committed(redis, prefix), case.simulated()
        differing = [what for what in want if got[what] != want[what]]
        if differing:
            problems[case.name] = differing
    return problems


@pytest.mark.usefixtures("worker")
async def test_every_fixture_through_the_pool_matches_simulate(redis: Redis, prefix: str) -> None:
    names = fixture_names()
    assert len(names) == 179
    cases = [
        Case(name, [FIXTURES / name], provider_of(name), prefix, n) for n, name in enumerate(names)
    ]
    assert await run_cases(redis, prefix, cases) == {}
    assert sum(case.expected.message is not None for case in cases) > 20


@pytest.mark.usefixtures("worker")
async def test_demo_scenarios_through_the_pool_match_simulate(redis: Redis, prefix: str) -> None:
    cases = [
        Case(s.title, [DEMO_DIR / f for f in s.files], s.provider, prefix, n)
        for n, s in enumerate(SCENARIOS)
    ]
    assert await run_cases(redis, prefix, cases) == {}
    assert [case.expected.state for case in cases] == ["finished"] * 4 + ["failed"]
    assert [len(case.expected.attempts) for case in cases] == [1, 2, 2, 2, 3]


@pytest.mark.parametrize("name", fixture_names())
async def test_each_fixture_coalesced_as_one_read_folds_to_simulate_s_text(name: str) -> None:
    """The default producer (`coalesce_reads`) on each capture published in one call, as if it
    came in one network read, and folded: the message simulate gives, and its frames with each
    run of a part's deltas as one text."""
    producer = CapturingProducer(coalesce_reads=True)
    turn = producer.turn("s-1", "t-1")
    await turn.start()
    await publish_attempt(turn, FIXTURES / name, provider_of(name), attempt=1)
    folded: Turn | None = None
    out = Outputs()
    for event in producer.events:
        folded, _ = evolve(folded, event, out=out)
    expected = simulate(
        [FIXTURES / name], provider=provider_of(name), session_id="s-1", turn_id="t-1"
    )
    assert (out.messages[-1] if out.messages else None) == expected.message
    assert comparable_frames(out.frames) == comparable_frames(expected.updates)

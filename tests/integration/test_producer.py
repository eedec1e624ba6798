"""The producer SDK against a real Redis: routing, numbering, batching and coalescing."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from terminus.events.codec import EventTooLarge, decode_event
from terminus.events.inbound import InboundEvent, TextDelta
from terminus.events.outbound import AgentMessageChunk
from terminus.service.cli.simulate import simulate
from terminus.service.keys import FIELD, Keys, partition_of
from terminus.service.sdk.producer import Producer
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

FIXTURES = Path(__file__).parent.parent / "fixtures" / "provider-streams"


async def read_log(redis: Redis, key: str) -> list[InboundEvent]:
    entries = await redis.xrange(key) or []
    return [decode_event(fields[FIELD]) for _, fields in entries if fields]


async def publish_files(producer: Producer, session: str, files: list[Path], provider: str) -> None:
    turn = producer.turn(session, "turn-1")
    await turn.start()
    for number, path in enumerate(files, start=1):
        await turn.start_attempt(attempt=number, provider=provider)
        await turn.feed_sse(path.read_text())
        await turn.close_attempt()


def fold_all(events: list[InboundEvent]) -> tuple[Turn, Outputs]:
    turn: Turn | None = None
    out = Outputs()
    for event in events:
        turn, _ = evolve(turn, event, out=out)
    assert turn is not None
    return turn, out


async def roundtrip(
    redis: Redis,
    prefix: str,
    files: list[Path],
    provider: str,
    coalesce_ms: int,
    coalesce_reads: bool = False,
) -> tuple[Turn, Outputs]:
    """The files published (each in one call: one read), read back from the log and folded."""
    session = f"session-{coalesce_ms}" + ("-reads" if coalesce_reads else "")
    producer = Producer(
        redis, partitions=4, prefix=prefix, coalesce_ms=coalesce_ms, coalesce_reads=coalesce_reads
    )
    await publish_files(producer, session, files, provider)
    log = await read_log(redis, Keys(partition_of(session, 4), prefix).inbound)
    return fold_all([e for e in log if e.session_id == session])


async def test_published_attempts_fold_like_simulate(redis: Redis, prefix: str) -> None:
    files = [
        FIXTURES / "anthropic/truncated-mid-tool-input-tail-litellm-pr32159.partial.sse",
        FIXTURES / "anthropic/text-recorded-fantasy.sse",
    ]
    turn, out = await roundtrip(redis, prefix, files, "anthropic", coalesce_ms=0)
    expected = simulate(files, provider="anthropic", session_id="session-0", turn_id="turn-1")
    assert turn.state.value == expected.state == "finished"
    assert out.messages[-1] == expected.message
    assert out.frames == expected.updates
    assert turn.ignored == expected.ignored


async def test_coalescing_merges_deltas_without_seq_gaps(redis: Redis, prefix: str) -> None:
    files = [FIXTURES / "anthropic/text-recorded-fantasy.sse"]
    plain_turn, plain = await roundtrip(redis, prefix, files, "anthropic", coalesce_ms=0)
    merged_turn, merged = await roundtrip(redis, prefix, files, "anthropic", coalesce_ms=50)
    assert merged_turn.state.value == plain_turn.state.value == "finished"
    assert merged.messages[-1].parts == plain.messages[-1].parts
    chunks = [f for f in merged.frames if f.__struct_config__.tag == "agent_message_chunk"]
    assert (
        1
        <= len(chunks)
        < len([f for f in plain.frames if f.__struct_config__.tag == "agent_message_chunk"])
    )


async def test_by_default_a_read_s_deltas_of_a_part_are_one_event(
    redis: Redis, prefix: str
) -> None:
    """`coalesce_reads`, the default: each call (a network read) publishes one delta per part,
    and the turn folds to the same message."""
    files = [FIXTURES / "anthropic/text-recorded-fantasy.sse"]
    assert Producer(redis).coalesce_reads
    _, plain = await roundtrip(redis, prefix, files, "anthropic", coalesce_ms=0)
    _, merged = await roundtrip(redis, prefix, files, "anthropic", 0, coalesce_reads=True)
    assert merged.messages[-1].parts == plain.messages[-1].parts
    chunks = [f for f in merged.frames if isinstance(f, AgentMessageChunk)]
    assert len(chunks) == 1, "one read, one part: one delta"
    assert chunks[0].delta == "".join(
        f.delta for f in plain.frames if isinstance(f, AgentMessageChunk)
    )


async def test_sessions_route_to_their_partition(redis: Redis, prefix: str) -> None:
    producer = Producer(redis, partitions=4, prefix=prefix)
    for number in range(20):
        await producer.turn(f"s-{number}", f"turn-{number}").start()
    found = {p: await read_log(redis, Keys(p, prefix).inbound) for p in range(4)}
    for partition, events in found.items():
        assert all(partition_of(e.session_id, 4) == partition for e in events)
    assert sum(len(events) for events in found.values()) == 20


def test_text_delta_is_the_coalescing_unit() -> None:
    from terminus.service.sdk.producer import coalesce

    a = TextDelta(session_id="s", turn_id="t", seq=-1, part_id="p", delta="a")
    b = TextDelta(session_id="s", turn_id="t", seq=-1, part_id="p", delta="b")
    c = TextDelta(session_id="s", turn_id="t", seq=-1, part_id="q", delta="c")
    assert [e.delta for e in coalesce([a, b, c]) if isinstance(e, TextDelta)] == ["ab", "c"]


async def test_an_event_over_the_limit_is_refused_and_nothing_of_its_batch_published(
    redis: Redis, prefix: str
) -> None:
    producer = Producer(redis, partitions=4, prefix=prefix, max_event_bytes=2_000)
    small = TextDelta(session_id="big", turn_id="t", seq=3, part_id="p", delta="x")
    large = TextDelta(session_id="big", turn_id="t", seq=4, part_id="p", delta="x" * 3_000)
    with pytest.raises(EventTooLarge, match="over the limit of 2000"):
        await producer.publish([small, large])
    assert await redis.xlen(producer.inbound_key("big")) == 0

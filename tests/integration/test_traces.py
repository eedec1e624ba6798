"""`terminus traces --once` on real traffic (issue 36): a real worker commits the turns, the
command folds the inbound logs and exports each final turn's spans over OTLP/HTTP to a local
receiver, which decodes them with the official protobuf classes (`opentelemetry-proto`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Final

import pytest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from redis.asyncio import Redis
from serving import running_worker

from bench.common.otlp_receiver import Receiver, running_receiver
from terminus.events.codec import MAX_EVENT_BYTES
from terminus.service.cli.feeding import publish_attempt
from terminus.service.cli.main import main
from terminus.service.keys import FIELD, keys_for_session
from terminus.service.redis.replies import xrange
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from terminus.service.traces import marks
from terminus.service.traces.logs import PartitionTraces
from terminus.service.traces.spans import encode
from tests.support.polling import until

FIXTURES: Final = Path(__file__).parent.parent / "fixtures" / "provider-streams" / "anthropic"
PARTITIONS: Final = 4
CUT: Final = FIXTURES / "text-basic-ping-sdk-python.sse"
TEXT: Final = FIXTURES / "text-recorded-fantasy.sse"
NO_CREDIT: Final = FIXTURES / "http-400-credit-balance-too-low-claude-code-issue66314.json"
CALLER_TRACE: Final = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN: Final = "b7ad6b7169203331"
# session -> its attempts, and the traceparent of the app's request that started it
TURNS: Final = {
    "s-retried": ([CUT, TEXT], f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
    "s-failed": ([NO_CREDIT], None),
}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as server:
        yield server


def values(attributes: list[KeyValue]) -> dict[str, object]:
    """OTLP attributes as plain values (strings, ints, lists of strings)."""
    found: dict[str, object] = {}
    for kv in attributes:
        kind = kv.value.WhichOneof("value")
        if kind == "array_value":
            found[kv.key] = [v.string_value for v in kv.value.array_value.values]
        else:
            found[kv.key] = getattr(kv.value, str(kind))
    return found


async def _final(redis: Redis, prefix: str, session: str) -> bool:
    keys = keys_for_session(session, PARTITIONS, prefix)
    frames = await xrange(redis, keys.session(session))
    return any(b"turn_finished" in f[FIELD] or b"agent_error" in f[FIELD] for _, f in frames)


async def play(redis: Redis, producer: Producer, prefix: str, session: str) -> None:
    files, traceparent = TURNS[session]
    turn = producer.turn(session, session.replace("s-", "t-"))
    await turn.start(traceparent=traceparent)
    for attempt, path in enumerate(files, start=1):
        await publish_attempt(turn, path, "anthropic", attempt=attempt)
    await until(partial(_final, redis, prefix, session), f"{session} to end")


@pytest.fixture
async def traffic(
    redis: Redis, redis_env: None, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both turns committed by a real worker, which is stopped before the command runs."""
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100, lease_ttl_ms=1000)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running_worker(redis, settings):
        await asyncio.gather(*(play(redis, producer, prefix, s) for s in TURNS))
    monkeypatch.setenv("TERMINUS_PREFIX", prefix)
    monkeypatch.setenv("TERMINUS_PARTITIONS", str(PARTITIONS))


async def test_traces_once_exports_every_final_turn_over_otlp_http(
    traffic: None,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")

    assert await asyncio.to_thread(main, ["traces", "--once"]) == 0

    assert "exported 5 spans of 2 turns" in capsys.readouterr().err
    assert receiver.paths == ["/v1/traces"]
    (request,) = receiver.requests
    resource = values(list(request.resource_spans[0].resource.attributes))
    assert resource["service.name"] == "terminus"
    assert resource["deployment.environment"] == "test"
    by_turn = {values(list(s.attributes)).get("terminus.turn.id"): s for s in receiver.spans()}
    retried = by_turn["t-retried"]
    assert retried.parent_span_id.hex() == CALLER_SPAN
    assert retried.trace_id.hex() == CALLER_TRACE
    attempts = [s for s in receiver.spans() if s.parent_span_id == retried.span_id]
    outcomes = [values(list(s.attributes))["terminus.attempt.outcome"] for s in attempts]
    assert outcomes == ["discarded", "proven"]
    assert {s.trace_id.hex() for s in attempts} == {CALLER_TRACE}
    assert values(list(attempts[0].attributes))["terminus.attempt.reason"] == "missing_terminal"
    assert [e.name for e in attempts[0].events] == ["terminus.retry_scheduled"]
    assert attempts[0].kind == Span.SPAN_KIND_CLIENT
    failed = values(list(by_turn["t-failed"].attributes))
    assert failed["error.type"] == "budget"
    assert by_turn["t-failed"].status.code == Status.STATUS_CODE_ERROR


async def test_the_same_logs_give_the_same_trees(
    traffic: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await asyncio.to_thread(main, ["traces", "--once", "--json"]) == 0
    first = capsys.readouterr().out
    assert await asyncio.to_thread(main, ["traces", "--once", "--json"]) == 0
    assert capsys.readouterr().out == first
    assert len(first.splitlines()) == 2


async def test_archived_turns_are_read_from_the_archive_into_the_same_trees(
    traffic: None,
    redis: Redis,
    prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TERMINUS_ARCHIVE_DIR", str(tmp_path / "archive"))
    assert await asyncio.to_thread(main, ["traces", "--once", "--json"]) == 0
    before = capsys.readouterr().out
    assert await asyncio.to_thread(main, ["archive", "--once"]) == 0
    assert "(2 turns released)" in capsys.readouterr().out
    for session in TURNS:  # the turns' entries left the live logs
        inbound = keys_for_session(session, PARTITIONS, prefix).inbound
        logged = [f[FIELD] for _, f in await xrange(redis, inbound) if FIELD in f]
        assert not any(session.encode() in raw for raw in logged)

    assert await asyncio.to_thread(main, ["traces", "--once", "--json"]) == 0
    assert capsys.readouterr().out == before


async def test_a_follower_exports_a_turn_once_it_ends_and_only_then(
    redis: Redis, prefix: str
) -> None:
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    keys = keys_for_session("s-later", PARTITIONS, prefix)
    follower = PartitionTraces(redis, keys, Settings().core(), MAX_EVENT_BYTES)
    turn = producer.turn("s-later", "t-later")
    await turn.start()
    assert await follower.read(None) == []
    await publish_attempt(turn, CUT, "anthropic", attempt=1)
    assert await follower.read(None) == []  # cut, a retry awaited: not final
    await publish_attempt(turn, TEXT, "anthropic", attempt=2)
    (trace,) = await follower.read(None)
    assert [s.name for s in trace.spans] == ["invoke_agent", "chat", "chat"]  # no model named
    assert await follower.read(None) == []  # exported once


async def test_a_follower_started_again_goes_on_from_its_mark_and_exports_no_turn_twice(
    redis: Redis, prefix: str
) -> None:
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    keys = keys_for_session("s-marked", PARTITIONS, prefix)
    first = PartitionTraces(redis, keys, Settings().core(), MAX_EVENT_BYTES)
    done, open_turn = producer.turn("s-marked", "t-done"), producer.turn("s-marked", "t-open")
    await open_turn.start()
    await publish_attempt(open_turn, CUT, "anthropic", attempt=1)  # cut: waits for its retry
    await done.start()
    await publish_attempt(done, TEXT, "anthropic", attempt=1)
    assert [t.turn_id for t in await first.read(None)] == ["t-done"]
    mark = first.mark()
    assert mark is not None
    await marks.save(redis, keys, mark)

    await publish_attempt(open_turn, TEXT, "anthropic", attempt=2)
    later = producer.turn("s-marked", "t-later")
    await later.start()
    await publish_attempt(later, TEXT, "anthropic", attempt=1)
    again = PartitionTraces(redis, keys, Settings().core(), MAX_EVENT_BYTES)
    loaded = await marks.load(redis, keys)
    assert loaded == mark
    again.resume_from(loaded)
    resumed = await again.read(None)
    assert [t.turn_id for t in resumed] == ["t-open", "t-later"]
    assert [s.attributes["terminus.attempt.outcome"] for s in resumed[0].spans[1:]] == [
        "discarded",
        "proven",
    ]
    fresh = PartitionTraces(redis, keys, Settings().core(), MAX_EVENT_BYTES)
    everything = await fresh.read(None)
    assert [t.turn_id for t in everything] == ["t-done", "t-open", "t-later"]
    assert [encode(t) for t in everything[1:]] == [encode(t) for t in resumed]

"""One call per round (round.lua, bundled by `service.runtime.wire.bundle`): every owner's read or
commit-and-read in one script call answers exactly what the separate calls answer, and one
owner's failure answers an error in its place while the others' writes and reads stand."""

from __future__ import annotations

from typing import Any

from commit_support import FRAMES, MAXLEN, held_lease, pel, pending_entries
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.service.fold.commit import Batch, encode
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.scripts import script, source
from terminus.service.runtime.wire import Call, Wire, bundle, unbundle
from terminus.service.settings import Settings


async def owners(redis: Redis, prefix: str) -> list[Call]:
    """Three owners of three partitions: one with a batch to commit and entries to read next,
    one with entries to read, one whose lease went to another worker."""
    calls: list[Call] = []
    committing = Keys(1, prefix)
    acked = await pending_entries(redis, committing, 2)
    await redis.xadd(committing.inbound, {FIELD: b"next"})
    lease = await held_lease(redis, committing, "worker-a")
    batch = Batch()
    batch.add_frame(committing, FRAMES[0], MAXLEN)
    batch.ack(*(i.decode() for i in acked))
    calls.append(("commit", *encode(batch, committing, lease, "worker-a", 10)))
    reading = Keys(2, prefix)
    await redis.xgroup_create(reading.inbound, GROUP, id="0", mkstream=True)
    await redis.xadd(reading.inbound, {FIELD: b"first"})
    lease = await held_lease(redis, reading, "worker-a")
    calls.append(("read", [reading.lease, reading.inbound], [lease, GROUP, "worker-a", 10]))
    fenced = Keys(3, prefix)
    await redis.xgroup_create(fenced.inbound, GROUP, id="0", mkstream=True)
    await held_lease(redis, fenced, "worker-b")
    calls.append(("read", [fenced.lease, fenced.inbound], ["worker-a:1", GROUP, "worker-a", 10]))
    return calls


async def separately(redis: Redis, calls: list[Call]) -> list[Any]:
    return [await script(redis, name)(keys=keys, args=args) for name, keys, args in calls]


async def in_one_round(redis: Redis, calls: list[Call]) -> list[Any]:
    name, keys, args = bundle(calls)
    replies, read = unbundle([await script(redis, name)(keys=keys, args=args)], len(calls))
    assert read == {}, "no probes, no reads of them"
    return replies


def without_ids(reply: Any) -> Any:
    """A reply with its lists of stream ids (made by XADD, new each run) as their lengths."""
    if not isinstance(reply, list):
        return reply
    *ids, payloads, tail = reply
    return [*(len(i) for i in ids), payloads, tail]


async def test_a_round_answers_what_the_separate_calls_answer(redis: Redis, prefix: str) -> None:
    apart = await separately(redis, await owners(redis, f"{prefix}-apart"))
    together = await in_one_round(redis, await owners(redis, f"{prefix}-round"))
    assert [without_ids(r) for r in together] == [without_ids(r) for r in apart]
    frames_written, read_next, _, _ = together[0]
    assert len(frames_written) == 1
    assert len(read_next) == 1
    assert together[1][1] == [b"first"]
    assert together[2] == 0, "the fenced owner reads nothing"
    assert await pel(redis, Keys(1, f"{prefix}-round")) == read_next, "acked, next one read"


async def test_one_owners_failure_leaves_the_others_answers_standing(
    redis: Redis, prefix: str
) -> None:
    calls = await owners(redis, prefix)
    broken = Keys(4, prefix)
    await redis.set(broken.inbound, "not a stream")
    lease = await held_lease(redis, broken, "worker-a")
    calls.insert(1, ("read", [broken.lease, broken.inbound], [lease, GROUP, "worker-a", 10]))
    calls.append(("no such call", [], []))
    replies = await in_one_round(redis, calls)
    assert isinstance(replies[1], ResponseError)
    assert "WRONGTYPE" in str(replies[1])
    assert isinstance(replies[4], ResponseError)
    assert len(replies[0][0]) == 1
    assert replies[2][1] == [b"first"]
    assert replies[3] == 0
    assert await redis.xlen(Keys(1, prefix).session(FRAMES[0].session_id)) == 1


def test_a_round_that_failed_as_a_whole_fails_every_call() -> None:
    error = ResponseError("NOSCRIPT")
    assert unbundle([error], 3) == ([error] * 3, {})
    replies, read = unbundle([[[1, 2], []]], 3)
    assert all(isinstance(r, RuntimeError) for r in replies), "a short answer"
    assert read == {}


async def test_a_round_holding_a_commit_waits_for_replicas_and_a_round_of_reads_does_not(
    redis: Redis, prefix: str
) -> None:
    wire = Wire(redis, Settings(prefix=prefix, commit_wait_replicas=1, commit_wait_ms=20))
    try:
        await redis.script_load(source("round"))  # no NOSCRIPT redo, which would WAIT again
        first, second = Keys(0, prefix), Keys(1, prefix)
        fence = ["nobody:1", GROUP, "nobody"]
        reads: list[Call] = [
            ("read", [first.lease, first.inbound], [*fence, 10]),
            ("read", [second.lease, second.inbound], [*fence, 10]),
        ]
        assert (await wire.send(reads)).replies == [0, 0]
        assert wire.shortfalls == 0, "reads only: no WAIT"
        commit: Call = ("commit", [second.lease, second.inbound], [*fence, 0, ""])
        assert (await wire.send([reads[0], commit])).replies == [0, 0]
        assert wire.shortfalls == 1, "a commit in the round: one WAIT, which no replica answers"
    finally:
        await wire.close()

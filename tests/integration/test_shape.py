"""The deployment's shape (service/shape.py, issue 31): the first writer records the partition
count; a producer, a worker, the gateway or a command whose count disagrees is refused at start,
saying what to set; one that sets no count follows the recorded one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Final

import msgspec
import pytest
from redis.asyncio import Redis
from worker_support import answer, started_workers

from terminus.events.inbound import InboundEvent
from terminus.events.outbound import PersistedMessage
from terminus.events.versions import CURRENT
from terminus.service.cli.main import main
from terminus.service.gateway.serve import serve_gateway
from terminus.service.keys import Keys, partition_of, shape_key, workers_key
from terminus.service.redis.embedded import free_port
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.cancel import cancel_turn
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import dead_letters, session_messages
from terminus.service.settings import Settings, from_env
from terminus.service.shape import (
    ContractAhead,
    Shape,
    ShapeMismatch,
    partitions_of,
    record,
    recorded,
    settled,
)
from tests.support.polling import until

# Partition 13 of 16, 5 of 8, 1 of 4: a count that disagrees writes where no worker reads.
SESSION: Final = "s-shape-2"
REFUSED_BY_POOL: Final = "this deployment has 16 partitions (recorded by the pool at {key}), not 8"


@pytest.fixture(autouse=True)
def no_count_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TERMINUS_PARTITIONS", raising=False)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str, on_cluster: bool) -> None:
    """Commands run here reach the test's Redis and prefix, with no partition count set."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("TERMINUS_PREFIX", prefix)
    monkeypatch.setenv("TERMINUS_REDIS_CLUSTER", "1" if on_cluster else "0")


@pytest.fixture
async def pool_of_4(redis: Redis, prefix: str) -> AsyncIterator[None]:
    """A running pool of one in-process worker of 4 partitions, its shape recorded."""
    async with started_workers(redis, prefix) as start:
        await start(partitions=4)
        await until(lambda: _recorded(redis, prefix), "the pool's shape recorded")
        yield


async def _recorded(redis: Redis, prefix: str) -> bool:
    return await recorded(redis, prefix, fresh=True) is not None


async def pool_started(redis: Redis, prefix: str, partitions: int = 16) -> Shape:
    """What a worker process does as it starts (service/runtime/app.py)."""
    await settled(redis, Settings(prefix=prefix, partitions=partitions), by="pool")
    shape = await recorded(redis, prefix, fresh=True)
    assert shape is not None
    return shape


async def inbound_lengths(redis: Redis, prefix: str, partitions: int = 16) -> list[int]:
    return [await redis.xlen(Keys(p, prefix).inbound) for p in range(partitions)]


async def publish_answer(producer: Producer, turn: str = "t-1") -> None:
    events: list[InboundEvent] = [
        msgspec.structs.replace(e, session_id=SESSION) for e in answer(turn)
    ]
    await producer.publish(events)


async def answered(redis: Redis, prefix: str) -> list[PersistedMessage]:
    found: list[PersistedMessage] = []

    async def committed() -> bool:
        found[:] = await session_messages(redis, SESSION, partitions=4, prefix=prefix)
        return bool(found)

    await until(committed, "the answer committed", timeout=15)
    return found


@pytest.mark.cluster
async def test_a_producer_with_another_count_is_refused_and_writes_nothing(
    redis: Redis, prefix: str
) -> None:
    await pool_started(redis, prefix, 16)
    producer = Producer(redis, partitions=8, prefix=prefix)
    with pytest.raises(ShapeMismatch) as refused:
        await producer.turn(SESSION, "t-1").start()
    assert str(refused.value) == (
        REFUSED_BY_POOL.format(key=shape_key(prefix)) + ": pass partitions=16, or drop partitions=8"
    )
    assert await inbound_lengths(redis, prefix) == [0] * 16


async def test_a_producer_whose_environment_disagrees_is_told_to_set_the_variable(
    redis: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await pool_started(redis, prefix, 16)
    monkeypatch.setenv("TERMINUS_PARTITIONS", "8")
    with pytest.raises(ShapeMismatch, match=r"set TERMINUS_PARTITIONS=16, or leave it unset$"):
        await Producer(redis, prefix=prefix).turn(SESSION, "t-1").start()


@pytest.mark.usefixtures("pool_of_4")
async def test_a_producer_that_sets_no_count_follows_the_recorded_one(
    redis: Redis, prefix: str
) -> None:
    producer = Producer(redis, prefix=prefix)
    await publish_answer(producer)
    assert producer.partitions == 4
    [message] = await answered(redis, prefix)
    assert message.turn_id == "t-1"
    # The SDK's readers and its cancel follow it too.
    assert await session_messages(redis, SESSION, prefix=prefix) == [message]
    await cancel_turn(redis, SESSION, "t-2", prefix=prefix)
    assert await redis.xlen(Keys(partition_of(SESSION, 4), prefix).inbound) == len(answer("t")) + 1


async def test_a_worker_with_another_count_is_refused_before_it_takes_a_partition(
    redis: Redis, prefix: str
) -> None:
    producer = Producer(redis, partitions=4, prefix=prefix)  # a producer starts first
    await publish_answer(producer)
    worker = Worker(redis, Settings(prefix=prefix, partitions=16, lease_ttl_ms=1000))
    with pytest.raises(ShapeMismatch) as refused:
        await asyncio.wait_for(worker.run(), 10)
    assert str(refused.value) == (
        f"this deployment has 4 partitions (recorded by the producer at {shape_key(prefix)}), "
        "not 16: set TERMINUS_PARTITIONS=4, or leave it unset"
    )
    assert worker.partitions == set()
    assert await redis.get(Keys(0, prefix).lease) is None


@pytest.mark.usefixtures("env")
async def test_a_worker_process_with_another_count_exits_saying_what_to_set(
    redis: Redis, prefix: str
) -> None:
    await pool_started(redis, prefix, 16)
    environ = {**os.environ, "TERMINUS_PARTITIONS": "8"}
    argv = [sys.executable, "-m", "terminus", "worker"]
    done = await asyncio.to_thread(
        subprocess.run, argv, env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "terminus worker: "
        + REFUSED_BY_POOL.format(key=shape_key(prefix))
        + ": set TERMINUS_PARTITIONS=16, or leave it unset"
    )


@pytest.mark.usefixtures("env")
async def test_terminus_run_with_another_count_starts_no_process(redis: Redis, prefix: str) -> None:
    await pool_started(redis, prefix, 16)
    environ = {**os.environ, "TERMINUS_PARTITIONS": "8"}
    argv = [sys.executable, "-m", "terminus", "run", "--no-http"]
    done = await asyncio.to_thread(
        subprocess.run, argv, env=environ, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (
        1,
        "terminus run: "
        + REFUSED_BY_POOL.format(key=shape_key(prefix))
        + ": set TERMINUS_PARTITIONS=16, or leave it unset\n",
    )
    assert await redis.zrange(workers_key(prefix), 0, -1) == []


async def test_a_gateway_with_another_count_is_refused_before_it_serves(
    redis: Redis, prefix: str, redis_url: str
) -> None:
    await pool_started(redis, prefix, 16)
    variables = {"REDIS_URL": redis_url, "TERMINUS_PREFIX": prefix, "TERMINUS_PARTITIONS": "8"}
    serving = serve_gateway(from_env(variables), b"k" * 32, "127.0.0.1", free_port())
    with pytest.raises(ShapeMismatch, match=r"set TERMINUS_PARTITIONS=16, or leave it unset$"):
        await asyncio.wait_for(serving, 20)


@pytest.mark.usefixtures("env")
async def test_a_command_with_another_count_is_refused_saying_what_to_set(
    redis: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    await pool_started(redis, prefix, 16)
    monkeypatch.setenv("TERMINUS_PARTITIONS", "8")
    assert await asyncio.to_thread(main, ["messages", SESSION]) == 1
    assert capsys.readouterr().err == (
        "terminus messages: "
        + REFUSED_BY_POOL.format(key=shape_key(prefix))
        + ": set TERMINUS_PARTITIONS=16, or leave it unset\n"
    )
    transcript = "tests/fixtures/provider-streams/anthropic/text-basic-ping-sdk-python.sse"
    argv = ["publish", "--provider", "anthropic", "--session", SESSION, transcript]
    assert await asyncio.to_thread(main, argv) == 1
    assert "set TERMINUS_PARTITIONS=16" in capsys.readouterr().err
    assert await inbound_lengths(redis, prefix) == [0] * 16


@pytest.mark.usefixtures("env", "pool_of_4")
async def test_a_command_that_sets_no_count_follows_the_recorded_one(
    redis: Redis, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await publish_answer(Producer(redis, partitions=4, prefix=prefix))
    committed = await answered(redis, prefix)
    assert await asyncio.to_thread(main, ["messages", SESSION, "--json"]) == 0
    shown = msgspec.json.decode(capsys.readouterr().out, type=list[PersistedMessage])
    assert shown == committed


@pytest.mark.cluster
async def test_two_first_starts_of_different_counts_leave_one_record(
    redis: Redis, prefix: str
) -> None:
    pool, producer = await asyncio.gather(
        record(redis, prefix, 4, "pool"), record(redis, prefix, 8, "producer")
    )
    assert pool == producer
    assert pool.partitions in (4, 8)
    loser = 12 - pool.partitions
    with pytest.raises(ShapeMismatch):
        await partitions_of(redis, prefix, loser, source="env", by="pool")


async def test_a_pool_raises_the_contract_version_a_producer_ahead_of_it_is_refused(
    redis: Redis, prefix: str
) -> None:
    await redis.hset(  # recorded by workers of an older build
        shape_key(prefix), mapping={"partitions": 16, "prefix": prefix, "contract": CURRENT - 1}
    )
    producer = Producer(redis, prefix=prefix)
    with pytest.raises(ContractAhead, match=r"upgrade the workers before the producers$"):
        await producer.turn(SESSION, "t-1").start()
    assert (await pool_started(redis, prefix, 16)).contract == CURRENT
    await producer.turn(SESSION, "t-1").start()


async def test_a_pool_records_its_own_count_and_one_that_sets_none_follows_the_record(
    redis: Redis, prefix: str
) -> None:
    assert (await pool_started(redis, prefix, 4)).partitions == 4
    following = await settled(redis, from_env({"TERMINUS_PREFIX": prefix}), by="pool")
    assert following.partitions == 4


async def test_a_producer_made_from_settings_records_their_count(redis: Redis, prefix: str) -> None:
    producer = Producer.from_settings(redis, Settings(prefix=prefix, partitions=4))
    await producer.turn(SESSION, "t-1").start()
    assert await redis.xlen(Keys(partition_of(SESSION, 4), prefix).inbound) == 1
    assert (await pool_started(redis, prefix, 4)).by == "producer"


async def test_readers_never_record_and_use_the_default_until_a_writer_does(
    redis: Redis, prefix: str
) -> None:
    assert await session_messages(redis, SESSION, prefix=prefix) == []
    assert await dead_letters(redis, prefix=prefix) == []
    assert await redis.hgetall(shape_key(prefix)) == {}
    assert (await settled(redis, Settings(prefix=prefix))).partitions == 16
    assert await redis.hgetall(shape_key(prefix)) == {}
    await Producer(redis, prefix=prefix).turn(SESSION, "t-1").start()
    assert await recorded(redis, prefix, fresh=True) == Shape(
        partitions=16, prefix=prefix, contract=CURRENT, by="producer"
    )


@pytest.mark.cluster
async def test_first_publishes_at_once_read_the_record_once(
    redis: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many turns starting together agree with the shape through one read, not one each: on a
    cluster, 179 concurrent reads of the node holding the record broke its connections."""
    # Written as a pool of another process would: nothing of it is known to this one yet.
    fields = {"partitions": 4, "prefix": prefix, "contract": CURRENT, "by": "pool"}
    await redis.hset(shape_key(prefix), mapping=fields)  # type: ignore[arg-type]
    reads = 0
    hmget = redis.hmget

    async def counted(*args: object, **kwargs: object) -> object:
        nonlocal reads
        reads += 1
        return await hmget(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(redis, "hmget", counted)
    producer = Producer(redis, prefix=prefix)
    await asyncio.gather(*(producer.ready() for _ in range(50)))
    assert (reads, producer.partitions) == (1, 4)

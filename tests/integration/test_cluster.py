"""Redis Cluster specifics: the configuration picks the client and the broker, partitions spread
over every shard, and the commit durability setting sends a WAIT whose answer is checked."""

from __future__ import annotations

import msgspec
import pytest
from faststream.redis import RedisClusterBroker
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from serving import running_worker
from worker_support import PARTITIONS, answer, crash_reading, keys_of, settings_for, wait_state

from terminus.service.keys import GROUP, Keys
from terminus.service.redis.cluster import LocalCluster
from terminus.service.redis.connect import client, make_broker
from terminus.service.redis.scripts import source
from terminus.service.runtime.wire import Call, Wire
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings, from_env
from terminus.statemachines.states import TurnState


async def test_the_setting_picks_the_cluster_client_and_broker() -> None:
    env = {"REDIS_URL": "redis://127.0.0.1:7000", "TERMINUS_REDIS_CLUSTER": "1"}
    settings = from_env(env)
    assert settings.redis_cluster is True
    assert isinstance(client(settings), RedisCluster)
    assert isinstance(make_broker(settings), RedisClusterBroker)
    single = from_env({"REDIS_URL": "redis://127.0.0.1:7000"})
    assert isinstance(client(single), Redis)
    assert not isinstance(make_broker(single), RedisClusterBroker)


def test_partitions_spread_over_every_shard(local_cluster: LocalCluster) -> None:
    primaries = {local_cluster.primary_of(Keys(p, "t").root).port for p in range(16)}
    assert len(primaries) == 3


@pytest.mark.cluster
@pytest.mark.parametrize("replicas", [1, 2])
async def test_a_commit_waits_for_replicas_and_a_shortfall_is_counted(
    redis: Redis, prefix: str, on_cluster: bool, replicas: int
) -> None:
    keys = Keys(0, prefix)
    wire = Wire(redis, Settings(prefix=prefix, commit_wait_replicas=replicas, commit_wait_ms=50))
    # A commit on a lease nobody holds: refused (0), but the WAIT after it is sent all the same.
    fenced: Call = ("commit", [keys.lease, keys.inbound], ["nobody:1", GROUP, "nobody", 0, ""])
    await redis.script_load(source("commit"))  # no NOSCRIPT redo, which would WAIT again
    try:
        sent = await wire.send([fenced])
    finally:
        await wire.close()
    assert (sent.replies, sent.read, sent.woken) == ([0], {}, [])
    present = 1 if on_cluster else 0  # each cluster primary has one replica; the server none
    assert wire.shortfalls == (1 if replicas > present else 0)


@pytest.mark.cluster
async def test_a_takeover_s_drain_commits_wait_too(
    redis: Redis, prefix: str, on_cluster: bool, caplog: pytest.LogCaptureFixture
) -> None:
    keys = keys_of(prefix)
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(answer("t-1"))
    await crash_reading(redis, keys)  # every entry pending: only the drain commits them
    replicas = 2 if on_cluster else 1  # one more than each primary has
    settings = msgspec.structs.replace(settings_for(prefix), commit_wait_replicas=replicas)
    async with running_worker(redis, settings):
        await wait_state(redis, prefix, "t-1", TurnState.FINISHED)
    acked = 1 if on_cluster else 0
    assert f"commit reached {acked} of {replicas} replicas" in caplog.text
